//! The configuration file and command-line flags of `meshdns serve`.
//!
//! The file is YAML with one `serve:` block (later issues add `iroh:` and `mesh:` beside it).
//! Every key has a flag of the same meaning; a flag given on the command line wins, and a list
//! given on the command line replaces the file's list. Relative paths in the file are relative
//! to the file's directory. Unknown keys are an error, so a typo never silently does nothing.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use meshdns_sources::{FileKind, FileSource};
use meshdns_zone::Name;
use meshdns_zone::text::parse_ttl;
use serde::Deserialize;

/// The whole configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfigFile {
    /// Settings of `meshdns serve`.
    #[serde(default)]
    pub serve: ServeFile,
    /// The iroh controller's block (datum's `connector.iroh` keys): accepted here so one file
    /// can configure everything; `meshdns render iroh` reads it (see `render::load_iroh_config`).
    #[serde(default, rename = "iroh")]
    pub _iroh: Option<serde::de::IgnoredAny>,
}

/// The `serve:` block. Every field is optional; see [`ServeArgs`] for meanings and defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServeFile {
    /// DNS listen addresses (UDP and TCP).
    pub listen: Option<Vec<SocketAddr>>,
    /// HTTP address for /metrics, /healthz, /readyz.
    pub http: Option<SocketAddr>,
    /// Records files (Tailscale records.json, meshdns YAML/JSON, or zone files by extension).
    pub records: Option<Vec<PathBuf>>,
    /// RFC 1035 zone files, as `path` or `origin=path`.
    pub zone_files: Option<Vec<String>>,
    /// Directories (or files) of Kubernetes manifests: their DNSZones and DNSRecordSets.
    pub manifests: Option<Vec<PathBuf>>,
    /// Serve the DNSZones and DNSRecordSets of a cluster.
    pub kubernetes: Option<bool>,
    /// Only this namespace's DNSZones and DNSRecordSets (default: all).
    pub kubernetes_namespace: Option<String>,
    /// kubeconfig for `kubernetes` (default: in-cluster, then `$KUBECONFIG`).
    pub kubeconfig: Option<PathBuf>,
    /// Zones to serve (and to place Tailscale names in).
    pub zones: Option<Vec<String>>,
    /// TTL for records without one, in seconds or with units (`5`, `1m`).
    pub default_ttl: Option<serde_yaml::Value>,
    /// UDP sockets per listen address.
    pub udp_sockets: Option<usize>,
    /// Worker threads.
    pub workers: Option<usize>,
    /// EDNS UDP payload size we advertise.
    pub edns_payload: Option<u16>,
    /// Idle TCP connections are closed after this long (`10s`).
    pub tcp_idle_timeout: Option<String>,
    /// Maximum concurrent TCP connections.
    pub tcp_max_connections: Option<usize>,
    /// How often files are checked without a change notification (`1s`).
    pub poll_interval: Option<String>,
    /// Log level or filter (`info`, `meshdns=debug`); `RUST_LOG` wins.
    pub log_level: Option<String>,
    /// `text` or `json`.
    pub log_format: Option<String>,
    /// Serve DNS over HTTPS at `/dns-query` on the HTTP listener (default true).
    pub doh: Option<bool>,
    /// Origins under which pkarr publishes are served; enables `/pkarr/<z32>`.
    pub pkarr: Option<Vec<String>>,
    /// Directory for what must survive a restart (pkarr packets).
    pub data_dir: Option<PathBuf>,
    /// Drop pkarr packets older than this (`7d`).
    pub pkarr_max_age: Option<String>,
    /// Publishes a minute allowed per client address; 0 (default) means no limit.
    pub pkarr_put_limit: Option<u32>,
}

/// Flags of `meshdns serve`.
#[derive(Debug, Default, Args)]
pub struct ServeArgs {
    /// Configuration file (YAML, a `serve:` block); flags override it.
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,
    /// DNS address to listen on, UDP and TCP (repeatable) [default: 0.0.0.0:1053 and [::]:1053].
    #[arg(long)]
    pub listen: Vec<SocketAddr>,
    /// HTTP address for /metrics, /healthz and /readyz (off unless given).
    #[arg(long)]
    pub http: Option<SocketAddr>,
    /// Records file to serve and watch (repeatable; the first to give a name and type wins).
    #[arg(long)]
    pub records: Vec<PathBuf>,
    /// RFC 1035 zone file, as FILE or ORIGIN=FILE (repeatable).
    #[arg(long = "zone-file")]
    pub zone_files: Vec<String>,
    /// Directory (or file) of Kubernetes manifests whose DNSZones and DNSRecordSets are
    /// served, as `meshdns render` reads them; watched like records files (repeatable).
    #[arg(long)]
    pub manifests: Vec<PathBuf>,
    /// Serve the DNSZones and DNSRecordSets of a Kubernetes cluster, watched live.
    #[arg(long)]
    pub kubernetes: bool,
    /// With --kubernetes: only this namespace [default: all namespaces].
    #[arg(long)]
    pub kubernetes_namespace: Option<String>,
    /// With --kubernetes: kubeconfig [default: in-cluster, then $KUBECONFIG, ~/.kube/config].
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Zone to serve; Tailscale records.json names are placed in these [default: ts.net.].
    #[arg(long = "zone")]
    pub zones: Vec<String>,
    /// TTL in seconds for records that do not give one [default: 5].
    #[arg(long)]
    pub default_ttl: Option<String>,
    /// UDP sockets per listen address, sharing the port (SO_REUSEPORT) [default: one per core].
    #[arg(long)]
    pub udp_sockets: Option<usize>,
    /// Worker threads answering queries [default: one per core].
    #[arg(long)]
    pub workers: Option<usize>,
    /// EDNS UDP payload size to advertise and accept [default: 1232].
    #[arg(long)]
    pub edns_payload: Option<u16>,
    /// Close TCP connections idle this long [default: 10s].
    #[arg(long)]
    pub tcp_idle_timeout: Option<String>,
    /// Maximum concurrent TCP connections [default: 1024].
    #[arg(long)]
    pub tcp_max_connections: Option<usize>,
    /// Check files this often even without a change notification [default: 1s].
    #[arg(long)]
    pub poll_interval: Option<String>,
    /// Log level or filter, e.g. info or meshdns=debug (RUST_LOG wins) [default: info].
    #[arg(long)]
    pub log_level: Option<String>,
    /// Log format: text or json [default: text].
    #[arg(long)]
    pub log_format: Option<String>,
    /// Do not serve DNS over HTTPS (/dns-query) on the HTTP listener.
    #[arg(long)]
    pub no_doh: bool,
    /// Accept pkarr publishes on the HTTP listener (PUT /pkarr/<z32>) and serve them under
    /// ORIGIN as _iroh.<z32>.ORIGIN (repeatable).
    #[arg(long = "pkarr", value_name = "ORIGIN")]
    pub pkarr: Vec<String>,
    /// Where pkarr packets are kept across restarts [default: $XDG_DATA_HOME/meshdns, else ~/.local/share/meshdns].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Drop pkarr packets older than this [default: 7d].
    #[arg(long)]
    pub pkarr_max_age: Option<String>,
    /// At most N pkarr publishes a minute per client IP address, in bursts of N; 0 = no limit
    /// [default: 0, for cluster-internal use].
    #[arg(long, value_name = "N")]
    pub pkarr_put_limit: Option<u32>,
}

/// The settings `serve` runs with, after merging file and flags.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Listen addresses; `None` means the defaults (IPv6 skipped if unavailable).
    pub listen: Option<Vec<SocketAddr>>,
    /// HTTP address.
    pub http: Option<SocketAddr>,
    /// Files in precedence order: `records` first, then `zone_files`, then `manifests`.
    pub files: Vec<FileSource>,
    /// Zones declared explicitly.
    pub zones: Vec<Name>,
    /// Zones Tailscale names go into.
    pub tailscale_zones: Vec<Name>,
    /// Default TTL.
    pub default_ttl: u32,
    /// UDP sockets per address.
    pub udp_sockets: usize,
    /// Worker threads.
    pub workers: usize,
    /// EDNS payload.
    pub edns_payload: u16,
    /// TCP idle timeout.
    pub tcp_idle_timeout: Duration,
    /// TCP connection cap.
    pub tcp_max_connections: usize,
    /// File poll interval.
    pub poll_interval: Duration,
    /// Log filter.
    pub log_level: String,
    /// Log as JSON.
    pub log_json: bool,
    /// Serve `/dns-query`.
    pub doh: bool,
    /// pkarr origins (empty: relay off).
    pub pkarr_origins: Vec<Name>,
    /// Data directory.
    pub data_dir: PathBuf,
    /// pkarr packet lifetime.
    pub pkarr_max_age: Duration,
    /// pkarr publishes a minute per client address (0 = no limit).
    pub pkarr_put_limit: u32,
    /// Serve a cluster's DNSZones and DNSRecordSets: `Some(namespace or all)`.
    pub kubernetes: Option<Option<String>>,
    /// kubeconfig for the cluster.
    pub kubeconfig: Option<PathBuf>,
}

fn duration(what: &str, text: &str) -> Result<Duration> {
    if let Some(ms) = text.strip_suffix("ms") {
        return Ok(Duration::from_millis(
            ms.parse()
                .with_context(|| format!("{what}: {text:?} is not a duration"))?,
        ));
    }
    let secs = parse_ttl(text).map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
    Ok(Duration::from_secs(u64::from(secs)))
}

/// Parses `FILE` or `ORIGIN=FILE`; relative paths are resolved against `base`.
pub fn zone_file_source(spec: &str, base: &Path) -> Result<FileSource> {
    let (origin, path) = match spec.split_once('=') {
        Some((origin, path)) => {
            let origin: Name = origin
                .parse()
                .map_err(|e| anyhow::anyhow!("zone file {spec:?}: origin {origin:?}: {e}"))?;
            (Some(origin), path)
        }
        None => (None, spec),
    };
    Ok(FileSource {
        path: base.join(path),
        kind: FileKind::ZoneFile { origin },
    })
}

/// `$XDG_DATA_HOME/meshdns`, else `~/.local/share/meshdns`, else `./meshdns-data`.
fn default_data_dir() -> PathBuf {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("meshdns");
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => PathBuf::from(home).join(".local/share/meshdns"),
        None => PathBuf::from("meshdns-data"),
    }
}

fn origins(list: &[String]) -> Result<Vec<Name>> {
    list.iter()
        .map(|z| {
            z.parse::<Name>().map_err(|e| {
                anyhow::anyhow!("zone {z:?}: {e} (expected a domain name such as ts.net.)")
            })
        })
        .collect()
}

/// Loads the config file (if any) and merges the flags over it.
pub fn settings(args: &ServeArgs) -> Result<Settings> {
    let (file, base) = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read config file {}", path.display()))?;
            let file: ConfigFile = serde_yaml::from_str(&text)
                .with_context(|| format!("config file {}", path.display()))?;
            let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
            (file.serve, base)
        }
        None => (ServeFile::default(), PathBuf::new()),
    };
    let here = PathBuf::new();
    let mut files = Vec::new();
    if !args.records.is_empty() {
        files.extend(args.records.iter().map(|p| FileSource {
            path: p.clone(),
            kind: FileKind::Auto,
        }));
    } else {
        files.extend(file.records.iter().flatten().map(|p| FileSource {
            path: base.join(p),
            kind: FileKind::Auto,
        }));
    }
    if !args.zone_files.is_empty() {
        for spec in &args.zone_files {
            files.push(zone_file_source(spec, &here)?);
        }
    } else {
        for spec in file.zone_files.iter().flatten() {
            files.push(zone_file_source(spec, &base)?);
        }
    }
    if !args.manifests.is_empty() {
        files.extend(args.manifests.iter().map(|p| FileSource {
            path: p.clone(),
            kind: FileKind::Manifests,
        }));
    } else {
        files.extend(file.manifests.iter().flatten().map(|p| FileSource {
            path: base.join(p),
            kind: FileKind::Manifests,
        }));
    }
    let zone_list = if args.zones.is_empty() {
        file.zones.clone().unwrap_or_default()
    } else {
        args.zones.clone()
    };
    let zones = origins(&zone_list)?;
    let tailscale_zones = if zones.is_empty() {
        vec!["ts.net.".parse().expect("valid")]
    } else {
        zones.clone()
    };
    let default_ttl = match (&args.default_ttl, &file.default_ttl) {
        (Some(t), _) => parse_ttl(t).map_err(|e| anyhow::anyhow!("--default-ttl: {e}"))?,
        (None, Some(serde_yaml::Value::Number(n))) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .context("defaultTtl: expected seconds 0-4294967295")?,
        (None, Some(serde_yaml::Value::String(s))) => {
            parse_ttl(s).map_err(|e| anyhow::anyhow!("defaultTtl: {e}"))?
        }
        (None, Some(other)) => bail!("defaultTtl: {other:?} is not a TTL"),
        (None, None) => 5,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let log_format = args
        .log_format
        .clone()
        .or(file.log_format)
        .unwrap_or_else(|| "text".into());
    if log_format != "text" && log_format != "json" {
        bail!("log format {log_format:?}: expected text or json");
    }
    let edns_payload = args.edns_payload.or(file.edns_payload).unwrap_or(1232);
    if edns_payload < 512 {
        bail!("EDNS payload {edns_payload} is below the minimum of 512");
    }
    Ok(Settings {
        listen: if args.listen.is_empty() {
            file.listen
        } else {
            Some(args.listen.clone())
        },
        http: args.http.or(file.http),
        files,
        zones,
        tailscale_zones,
        default_ttl,
        udp_sockets: args
            .udp_sockets
            .or(file.udp_sockets)
            .unwrap_or(cores)
            .max(1),
        workers: args.workers.or(file.workers).unwrap_or(cores).max(1),
        edns_payload,
        tcp_idle_timeout: duration(
            "tcp idle timeout",
            args.tcp_idle_timeout
                .as_deref()
                .or(file.tcp_idle_timeout.as_deref())
                .unwrap_or("10s"),
        )?,
        tcp_max_connections: args
            .tcp_max_connections
            .or(file.tcp_max_connections)
            .unwrap_or(1024)
            .max(1),
        poll_interval: duration(
            "poll interval",
            args.poll_interval
                .as_deref()
                .or(file.poll_interval.as_deref())
                .unwrap_or("1s"),
        )?,
        log_level: args
            .log_level
            .clone()
            .or(file.log_level)
            .unwrap_or_else(|| "info".into()),
        log_json: log_format == "json",
        doh: !args.no_doh && file.doh.unwrap_or(true),
        pkarr_origins: origins(if args.pkarr.is_empty() {
            file.pkarr.as_deref().unwrap_or_default()
        } else {
            &args.pkarr
        })?,
        data_dir: args
            .data_dir
            .clone()
            .or(file.data_dir.map(|d| base.join(d)))
            .unwrap_or_else(default_data_dir),
        pkarr_max_age: duration(
            "pkarr max age",
            args.pkarr_max_age
                .as_deref()
                .or(file.pkarr_max_age.as_deref())
                .unwrap_or("7d"),
        )?,
        pkarr_put_limit: args.pkarr_put_limit.or(file.pkarr_put_limit).unwrap_or(0),
        kubernetes: (args.kubernetes || file.kubernetes.unwrap_or(false)).then(|| {
            args.kubernetes_namespace
                .clone()
                .or(file.kubernetes_namespace.clone())
        }),
        kubeconfig: args
            .kubeconfig
            .clone()
            .or(file.kubeconfig.map(|k| base.join(k))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file_and_paths_are_relative_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("meshdns.yaml");
        std::fs::write(
            &cfg,
            "serve:\n  listen: ['127.0.0.1:5353']\n  records: [a.json]\n  zoneFiles: ['example.org=ex.zone']\n  defaultTtl: 1m\n  workers: 3\n",
        )
        .unwrap();
        let args = ServeArgs {
            config: Some(cfg),
            workers: Some(1),
            ..Default::default()
        };
        let s = settings(&args).unwrap();
        assert_eq!(s.listen, Some(vec!["127.0.0.1:5353".parse().unwrap()]));
        assert_eq!(s.files[0].path, dir.path().join("a.json"));
        assert_eq!(s.files[1].path, dir.path().join("ex.zone"));
        assert_eq!(
            s.files[1].kind,
            FileKind::ZoneFile {
                origin: Some("example.org.".parse().unwrap())
            }
        );
        assert_eq!(s.default_ttl, 60);
        assert_eq!(s.workers, 1);
        assert_eq!(s.tailscale_zones[0].to_string(), "ts.net.");
    }

    #[test]
    fn one_file_can_carry_the_iroh_block_too() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("meshdns.yaml");
        std::fs::write(&cfg, "serve:\n  listen: ['127.0.0.1:5353']\niroh:\n  dnsZoneRef: {namespace: dns, name: z}\n").unwrap();
        assert!(
            settings(&ServeArgs {
                config: Some(cfg),
                ..Default::default()
            })
            .is_ok()
        );
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("c.yaml");
        std::fs::write(&cfg, "serve:\n  listn: ['127.0.0.1:5353']\n").unwrap();
        let err = settings(&ServeArgs {
            config: Some(cfg),
            ..Default::default()
        })
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("unknown field `listn`"),
            "{err:#}"
        );
    }
}
