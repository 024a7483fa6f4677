//! The first half of `serve`: a [`ServeConfig`] resolved into a [`ServePlan`], every default
//! applied and every rule between settings checked, or refused with every problem at once.
//!
//! Nothing here binds, spawns or writes. The only reads are of the files whose contents decide
//! whether the configuration can start: the TSIG key file (its key names are referred to by
//! other settings) and the certificate files (`--tls-cert`/`--tls-key`, `--acme-ca`); and the
//! host name, the default `--nsid`. `serve` starts subsystems from the plan and nothing else;
//! `check` and `check --config-only` resolve the same plan, so a configuration `serve` refuses
//! at start is refused by `check` with the same message and the exit status [`EXIT_REFUSED`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use meshdns_kube::serve::configmap::ConfigMapKey;
use meshdns_server::acme::{AcmeConfig, Challenge};
use meshdns_server::http::HttpLimits;
use meshdns_server::rrl::RrlConfig;
use meshdns_server::tls::{CertFiles, PemPair};
use meshdns_server::xfr::NotifyTarget;
use meshdns_sources::secondary::SecondarySpec;
use meshdns_sources::{PkarrConfig, SourceConfig};
use meshdns_xfr::{Key, Policy};
use meshdns_zone::Cidr;
use meshdns_zone::{AnswerConfig, Name};
use rustls::sign::CertifiedKey;

use crate::config::serve::TlsSource;
use crate::config::values::AcmeChallenge;
use crate::config::{ServeConfig, defaults};

/// The exit status of `serve`, `check` and `check --config-only` when the configuration is
/// refused (as for a flag clap cannot parse). Other failures of `serve` exit with 1.
pub const EXIT_REFUSED: u8 = 2;

/// Why a configuration cannot start: every problem found, each naming its flag (and key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub Vec<String>);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.as_slice() {
            [one] => f.write_str(one),
            all => {
                write!(f, "{} problems in the configuration:", all.len())?;
                for p in all {
                    write!(f, "\n  {p}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Refused {}

impl Refused {
    /// A refusal of one problem (a config file that cannot be read, say).
    pub fn one(error: &anyhow::Error) -> Refused {
        Refused(vec![format!("{error:#}")])
    }
}

/// Everything `serve` starts, decided.
pub struct ServePlan {
    /// Records files, zone files, manifest directories, declared zones, parsing.
    pub sources: SourceConfig,
    /// ConfigMap keys read through the API.
    pub configmaps: Vec<ConfigMapKey>,
    /// A cluster's DNSZones and DNSRecordSets, served live.
    pub kubernetes: Option<KubernetesPlan>,
    /// The kubeconfig for `configmaps` and `kubernetes` (`None`: in-cluster, then the usual).
    pub kubeconfig: Option<PathBuf>,
    /// Zones served as a secondary.
    pub secondaries: Vec<SecondarySpec>,
    /// Prefixes whose unsigned NOTIFY starts a refresh of every secondary zone.
    pub allow_notify: Vec<Cidr>,
    /// Where serials, journals, transferred zones and ACME state are kept, when any is.
    pub data_dir: Option<PathBuf>,
    /// Records of differences kept per zone for IXFR.
    pub journal_records: usize,
    /// Zone transfers out and NOTIFY, when on.
    pub transfers: Option<TransfersPlan>,
    /// Dynamic UPDATE: the update zones and who may write them, when any is named.
    pub updates: Option<UpdatePlan>,
    /// The pkarr relay's store, when a pkarr origin is set.
    pub pkarr: Option<PkarrConfig>,
    /// Replication with the relay's other replicas, when peers are named.
    pub replication: Option<meshdns_server::replicate::ReplicationConfig>,
    /// The Mainline DHT node, when `--pkarr-dht` is on.
    pub dht: Option<meshdns_sources::DhtConfig>,
    /// The DNS listeners.
    pub server: ServerPlan,
    /// The certificate of `--https` and `--dot`, when either is on.
    pub tls: Option<TlsPlan>,
    /// The HTTP and HTTPS listeners.
    pub http: HttpPlan,
    /// Worker threads of the async runtime.
    pub workers: usize,
    /// How long shutdown waits for connections in progress before closing them.
    pub shutdown_grace: Duration,
    /// Settings that start but deserve a word in the log.
    pub warnings: Vec<String>,
}

/// Dynamic UPDATE (`--update-zone`, `--allow-update`).
pub struct UpdatePlan {
    /// The zones written by UPDATE.
    pub zones: Vec<Name>,
    /// UPDATEs accepted per second from one key (after a burst of twice as many).
    pub rate: u32,
    /// The most records an update zone holds.
    pub max_records: usize,
    /// The keys, and which each may update.
    pub policy: meshdns_xfr::update::UpdatePolicy,
}

/// `--kubernetes`.
pub struct KubernetesPlan {
    /// Only this namespace (`None`: all).
    pub namespace: Option<String>,
    /// Write the objects' status, from the holder of this Lease (namespace, name).
    pub status_lease: Option<(String, String)>,
    /// The cluster's own objects read besides DNSZones and DNSRecordSets (`--kube-source`).
    pub kinds: std::collections::BTreeSet<meshdns_sources::cluster::Kind>,
}

/// Zone transfers out.
pub struct TransfersPlan {
    /// Keys known and allowed.
    pub policy: Policy,
    /// Addresses allowed without a key.
    pub allow: Vec<Cidr>,
    /// Secondaries notified of every serial change.
    pub notify: Vec<NotifyTarget>,
    /// Transfers out served at once.
    pub max_concurrent: usize,
    /// The keys that select a view (`--view-key`): key name and the view's place in
    /// `--view`'s order.
    pub view_keys: Vec<(Name, usize)>,
}

/// The DNS listeners.
pub struct ServerPlan {
    /// Addresses, UDP and TCP.
    pub listen: Vec<SocketAddr>,
    /// With the default addresses: the IPv4 one alone, tried when IPv6 cannot be bound.
    pub ipv4_fallback: Option<SocketAddr>,
    /// UDP sockets per address.
    pub udp_sockets: usize,
    /// Idle TCP connections are closed after this long.
    pub tcp_idle_timeout: Duration,
    /// TCP and DoT connections at once.
    pub tcp_max_connections: usize,
    /// Answer settings.
    pub answer: AnswerConfig,
    /// DoT addresses.
    pub dot: Vec<SocketAddr>,
    /// Response rate limiting (`None`: off).
    pub rrl: Option<RrlConfig>,
    /// Views (split horizon), in order: name and client ranges (`--view`).
    pub views: Vec<(String, Vec<Cidr>)>,
}

/// Where the TLS listeners' certificate comes from, with what is already loaded.
pub enum TlsPlan {
    /// PEM files, followed; the certificate they hold now, and their bytes.
    Files(CertFiles, Box<CertifiedKey>, PemPair),
    /// Made at start-up for the loopback names.
    SelfSigned,
    /// An ACME client's settings; serve a self-signed certificate until the first is issued.
    Acme(Box<AcmeConfig>, bool),
}

/// The HTTP listeners and what they serve.
pub struct HttpPlan {
    /// `--http`.
    pub http: Option<SocketAddr>,
    /// `--https`.
    pub https: Option<SocketAddr>,
    /// Connection limits of each.
    pub limits: HttpLimits,
    /// DNS over HTTPS at `/dns-query`.
    pub doh: bool,
    /// Proxies whose forwarding headers name the client.
    pub trusted_proxies: Vec<Cidr>,
    /// ACME HTTP-01 answers on `--http`.
    pub acme_http01: bool,
}

/// Problems found so far.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    /// `Some(value)`, or the problem noted and `None`.
    fn take<T>(&mut self, result: Result<T, String>) -> Option<T> {
        result.map_err(|p| self.0.push(p)).ok()
    }
}

/// Resolves `settings` into a plan, or every reason it cannot start.
pub fn resolve(settings: &ServeConfig) -> Result<ServePlan, Refused> {
    let mut problems = Problems::default();
    let tls_source = problems.take(settings.tls());
    // Without a key file that reads, names of keys are not looked up (its problem is enough).
    let keys = problems.take(tsig_keys(settings));
    let transfers = transfers(settings, keys.as_deref(), &mut problems);
    let secondaries = secondaries(settings, keys.as_deref(), &mut problems);
    let updates = updates(settings, keys.as_deref(), &mut problems);
    if !settings.allow_notify.is_empty() && settings.secondaries.is_empty() {
        problems.0.push(
            "--allow-notify (allowNotify) says who may NOTIFY a secondary zone: it needs \
             --secondary (secondaries)"
                .into(),
        );
    }
    let kubernetes = problems.take(kubernetes(settings)).flatten();
    problems.0.extend(cluster_objects(settings));
    let replication = problems.take(replication(settings)).flatten();
    let dht = problems.take(dht(settings)).flatten();
    let data_dir = data_dir(settings);
    let tls = match tls_source.flatten() {
        Some(source) => problems.take(tls(settings, source, data_dir.as_deref())),
        None => None,
    };
    let mut warnings = Vec::new();
    let nsid = problems.take(nsid(settings, &mut warnings)).flatten();
    for (i, view) in settings.views.iter().enumerate() {
        if settings.views[..i].iter().any(|v| v.name == view.name) {
            problems.0.push(format!(
                "--view {}: a view of that name is given already; each view once, with all its ranges (NAME=CIDR,CIDR)",
                view.name
            ));
        }
    }
    if !problems.0.is_empty() {
        return Err(Refused(problems.0));
    }
    if !settings.pkarr.is_empty() && settings.http.is_none() && settings.https.is_none() {
        warnings.push(
            "--pkarr without --http or --https: stored packets are served, but no new ones can \
             be published"
                .to_string(),
        );
    }
    Ok(ServePlan {
        sources: sources(settings),
        configmaps: configmaps(settings),
        kubernetes,
        kubeconfig: settings.kubeconfig.clone(),
        secondaries,
        allow_notify: settings.allow_notify.clone(),
        data_dir,
        journal_records: settings
            .ixfr_journal_records
            .unwrap_or(defaults::IXFR_JOURNAL_RECORDS),
        transfers,
        updates,
        pkarr: pkarr(settings).map(|mut p| {
            p.lookups = dht.is_some();
            p
        }),
        replication,
        dht,
        server: server(settings, nsid),
        tls,
        http: http(settings),
        workers: settings.workers.unwrap_or_else(defaults::cores),
        shutdown_grace: settings.shutdown_grace.unwrap_or(defaults::SHUTDOWN_GRACE),
        warnings,
    })
}

/// The longest NSID taken. RFC 5001 bounds it only by the OPT's size; 255 bytes names any
/// replica and keeps a reply cut to its question (with TC) within 512 bytes for all but the
/// longest names.
const MAX_NSID: usize = 255;

/// `--nsid`, or the host name without it: `None` when off (`""`, or a host name that cannot be
/// one, with a warning). The text is leaked, once, so that `AnswerConfig` stays `Copy`.
fn nsid(
    settings: &ServeConfig,
    warnings: &mut Vec<String>,
) -> Result<Option<&'static [u8]>, String> {
    let text = match &settings.nsid {
        Some(text) if text.is_empty() => return Ok(None),
        Some(text) => match nsid_problem(text) {
            None => text.clone(),
            Some(p) => return Err(format!("--nsid (nsid) {p}")),
        },
        None => match defaults::nsid() {
            None => return Ok(None),
            Some(host) => match nsid_problem(&host) {
                None => host,
                Some(p) => {
                    warnings.push(format!(
                        "no NSID: the host name {p}; set --nsid (nsid) to name this replica"
                    ));
                    return Ok(None);
                }
            },
        },
    };
    Ok(Some(Box::leak(text.into_bytes().into_boxed_slice())))
}

/// Why `text` cannot be an NSID: it goes into DNS replies and into an HTTP header, so it is
/// visible ASCII (0x21-0x7E: no spaces, no control bytes), at most [`MAX_NSID`] bytes.
fn nsid_problem(text: &str) -> Option<String> {
    if text.len() > MAX_NSID {
        return Some(format!(
            "is {} bytes; an NSID is at most {MAX_NSID}",
            text.len()
        ));
    }
    let (at, byte) = text
        .bytes()
        .enumerate()
        .find(|(_, b)| !(0x21..=0x7E).contains(b))?;
    Some(format!(
        "{text:?} has byte 0x{byte:02X} at {at}: an NSID is visible ASCII (0x21-0x7E, no \
         spaces), as it is also an HTTP header value"
    ))
}

fn key_names(keys: &[Key]) -> String {
    if keys.is_empty() {
        return "none".into();
    }
    let names: Vec<String> = keys.iter().map(|k| k.name.to_string()).collect();
    names.join(", ")
}

/// The bytes of the file at `path` that `flag` names. Regular files only: a FIFO in its
/// place would block start-up forever.
fn read_regular(path: &std::path::Path, flag: &str, what: &str) -> Result<Vec<u8>, String> {
    let cannot = |e: &dyn std::fmt::Display| format!("{flag}: cannot read {}: {e}", path.display());
    if !std::fs::metadata(path).map_err(|e| cannot(&e))?.is_file() {
        return Err(cannot(&format!(
            "not a regular file; the {what} must be a regular file or a symlink to one"
        )));
    }
    std::fs::read(path).map_err(|e| cannot(&e))
}

/// The keys of `--tsig-keys`, read and parsed.
fn tsig_keys(settings: &ServeConfig) -> Result<Vec<Key>, String> {
    let Some(path) = &settings.tsig_keys else {
        return Ok(Vec::new());
    };
    let bytes = read_regular(path, "--tsig-keys (tsigKeys)", "key file")?;
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "--tsig-keys (tsigKeys): cannot read {}: {e}",
            path.display()
        )
    })?;
    meshdns_xfr::parse_key_file(&path.display().to_string(), &text)
        .map_err(|e| format!("--tsig-keys (tsigKeys): {e}"))
}

/// The key named `name` by `flag`, or the problem noted (`keys` is `None` when the key file
/// could not be read).
fn key(keys: Option<&[Key]>, name: &Name, flag: &str, problems: &mut Problems) -> Option<Key> {
    let keys = keys?;
    let found = keys.iter().find(|k| &k.name == name).cloned();
    if found.is_none() {
        problems.0.push(format!(
            "{flag} {name}: no such key in --tsig-keys (keys: {})",
            key_names(keys)
        ));
    }
    found
}

fn transfers(
    settings: &ServeConfig,
    keys: Option<&[Key]>,
    problems: &mut Problems,
) -> Option<TransfersPlan> {
    for name in &settings.allow_transfer_keys {
        key(
            keys,
            name,
            "--allow-transfer-key (allowTransferKeys)",
            problems,
        );
    }
    let notify = settings
        .notify
        .iter()
        .map(|n| NotifyTarget {
            address: n.address.clone(),
            key: n
                .key
                .as_ref()
                .and_then(|k| key(keys, k, "--notify (notify)", problems)),
        })
        .collect();
    let mut view_keys = Vec::new();
    if !settings.view_keys.is_empty() && !settings.transfers() {
        problems.0.push(
            "--view-key (viewKeys) selects a view for zone transfers and NOTIFY: it needs \
             --allow-transfer-key (allowTransferKeys) or --allow-transfer (allowTransfer)"
                .into(),
        );
    }
    for vk in &settings.view_keys {
        let flag = "--view-key (viewKeys)";
        key(keys, &vk.key, flag, problems);
        match settings.views.iter().position(|v| v.name == vk.view) {
            None => problems.0.push(format!(
                "{flag} {}={}: no view {:?} is given by --view (views: {})",
                vk.view,
                vk.key,
                vk.view,
                if settings.views.is_empty() {
                    "none".to_string()
                } else {
                    settings
                        .views
                        .iter()
                        .map(|v| v.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )),
            Some(_) if view_keys.iter().any(|(k, _)| k == &vk.key) => problems.0.push(format!(
                "{flag} {}: the key selects a view already; one view per key",
                vk.key
            )),
            Some(i) => view_keys.push((vk.key.clone(), i)),
        }
    }
    settings.transfers().then(|| TransfersPlan {
        view_keys,
        policy: Policy {
            keys: keys.unwrap_or_default().to_vec(),
            allowed_keys: settings.allow_transfer_keys.clone(),
        },
        allow: settings.allow_transfer.clone(),
        notify,
        max_concurrent: settings
            .xfr_max_concurrent
            .unwrap_or(defaults::XFR_MAX_CONCURRENT),
    })
}

fn updates(
    settings: &ServeConfig,
    keys: Option<&[Key]>,
    problems: &mut Problems,
) -> Option<UpdatePlan> {
    let flag = "--allow-update (allowUpdate)";
    if settings.update_zones.is_empty() {
        if !settings.allow_update.is_empty() {
            problems.0.push(format!(
                "{flag} grants UPDATE of update zones: it needs --update-zone (updateZones)"
            ));
        }
        return None;
    }
    if settings.allow_update.is_empty() {
        problems.0.push(
            "--update-zone (updateZones) is written only by UPDATEs signed with a granted key: \
             it needs --allow-update KEY[=ORIGIN] (allowUpdate) and --tsig-keys (tsigKeys)"
                .into(),
        );
    }
    for g in &settings.allow_update {
        key(keys, &g.key, flag, problems);
        if let Some(zone) = &g.zone
            && !settings.update_zones.contains(zone)
        {
            problems.0.push(format!(
                "{flag} {}={zone}: {zone} is not an update zone (--update-zone: {})",
                g.key,
                settings
                    .update_zones
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    if settings.update_rate == Some(0) {
        problems
            .0
            .push("--update-rate (updateRate) 0 would refuse every UPDATE: at least 1".into());
    }
    if settings.update_max_records == Some(0) {
        problems.0.push(
            "--update-max-records (updateMaxRecords) 0 would refuse every record: at least 1"
                .into(),
        );
    }
    Some(UpdatePlan {
        zones: settings.update_zones.clone(),
        rate: settings.update_rate.unwrap_or(defaults::UPDATE_RATE),
        max_records: settings
            .update_max_records
            .unwrap_or(meshdns_sources::update::MAX_RECORDS),
        policy: meshdns_xfr::update::UpdatePolicy {
            keys: keys.unwrap_or_default().to_vec(),
            grants: settings
                .allow_update
                .iter()
                .map(|g| (g.key.clone(), g.zone.clone()))
                .collect(),
        },
    })
}

fn secondaries(
    settings: &ServeConfig,
    keys: Option<&[Key]>,
    problems: &mut Problems,
) -> Vec<SecondarySpec> {
    settings
        .secondaries
        .iter()
        .map(|s| SecondarySpec {
            origin: s.origin.clone(),
            primary: s.primary.clone(),
            key: s
                .key
                .as_ref()
                .and_then(|k| key(keys, k, "--secondary (secondaries)", problems)),
        })
        .collect()
}

/// The rules between the cluster-object settings: they read the objects of --manifests or
/// --kubernetes, and the narrower ones need kinds to narrow.
fn cluster_objects(settings: &ServeConfig) -> Vec<String> {
    let cluster = settings.cluster_settings();
    let mut out = Vec::new();
    if cluster.enabled() && settings.manifests.is_empty() && settings.kubernetes().is_none() {
        out.push(
            "--kube-source (kubeSources) reads the objects of --manifests or --kubernetes: give \
             one of them"
                .into(),
        );
    }
    let narrowing = [
        (
            "--kube-source-default-names (kubeSourceDefaultNames)",
            cluster.default_names.is_some(),
        ),
        (
            "--kube-source-internal (kubeSourceInternal)",
            cluster.internal,
        ),
        (
            "--kube-source-namespace (kubeSourceNamespaces)",
            !cluster.namespaces.is_empty(),
        ),
        (
            "--kube-source-selector (kubeSourceSelector)",
            cluster.selector != Default::default(),
        ),
        (
            "--kube-source-ingress-class (kubeSourceIngressClasses)",
            !cluster.ingress_classes.is_empty(),
        ),
        (
            "--kube-source-gateway-class (kubeSourceGatewayClasses)",
            !cluster.gateway_classes.is_empty(),
        ),
    ];
    for (flag, set) in narrowing {
        if set && !cluster.enabled() {
            out.push(format!(
                "{flag} narrows what --kube-source (kubeSources) reads: name the kinds to read"
            ));
        }
    }
    out
}

fn kubernetes(settings: &ServeConfig) -> Result<Option<KubernetesPlan>, String> {
    let write_status = settings.write_status.unwrap_or(false);
    match settings.kubernetes() {
        None if write_status => Err("--write-status (writeStatus) writes the status of a \
             cluster's objects: it needs --kubernetes (kubernetes: true)"
            .into()),
        None => Ok(None),
        Some(namespace) => Ok(Some(KubernetesPlan {
            namespace: namespace.map(str::to_string),
            status_lease: write_status
                .then(|| (defaults::namespace(), "meshdns-serve-status".to_string())),
            kinds: settings.cluster_settings().kinds,
        })),
    }
}

/// Serials, journals and transferred zones are kept in the data directory when there is
/// something to keep.
fn data_dir(settings: &ServeConfig) -> Option<PathBuf> {
    let keeps = settings.transfers()
        || !settings.pkarr.is_empty()
        || !settings.secondaries.is_empty()
        || !settings.acme_domains.is_empty()
        || !settings.update_zones.is_empty();
    settings
        .data_dir
        .clone()
        .or_else(|| keeps.then(defaults::data_dir))
}

fn tls(
    settings: &ServeConfig,
    source: TlsSource,
    data_dir: Option<&Path>,
) -> Result<TlsPlan, String> {
    Ok(match source {
        TlsSource::Files(files) => {
            let (key, seen) = meshdns_server::tls::load_files(&files)
                .map_err(|e| format!("--tls-cert/--tls-key: no certificate to serve: {e}"))?;
            TlsPlan::Files(files, Box::new(key), seen)
        }
        TlsSource::SelfSigned => TlsPlan::SelfSigned,
        TlsSource::Acme {
            challenge,
            self_signed_first,
        } => {
            if let Some(path) = &settings.acme_ca {
                meshdns_server::acme::read_ca_roots(path).map_err(|e| e.to_string())?;
            }
            let data_dir = data_dir.expect("ACME keeps a data directory");
            TlsPlan::Acme(
                Box::new(acme(settings, challenge, data_dir)),
                self_signed_first,
            )
        }
    })
}

fn acme(settings: &ServeConfig, challenge: AcmeChallenge, data_dir: &Path) -> AcmeConfig {
    AcmeConfig {
        domains: settings
            .acme_domains
            .iter()
            .map(|d| d.to_string().trim_end_matches('.').to_string())
            .collect(),
        contact: settings
            .acme_contacts
            .iter()
            .map(|c| {
                if c.contains(':') {
                    c.clone()
                } else {
                    format!("mailto:{c}")
                }
            })
            .collect(),
        directory: settings
            .acme_directory
            .clone()
            .unwrap_or_else(|| defaults::ACME_DIRECTORY.into()),
        challenge: match challenge {
            AcmeChallenge::TlsAlpn01 => Challenge::TlsAlpn01,
            AcmeChallenge::Http01 => Challenge::Http01,
            AcmeChallenge::Dns01 => Challenge::Dns01,
        },
        cache: data_dir.join("acme"),
        ca_roots: settings.acme_ca.clone(),
    }
}

fn sources(settings: &ServeConfig) -> SourceConfig {
    SourceConfig {
        files: settings.files(),
        zones: settings.declared_zones(),
        generated: settings.generated(),
        settings: settings.parse_settings(),
        poll_interval: settings.poll_interval.unwrap_or(defaults::POLL_INTERVAL),
        debounce: defaults::DEBOUNCE,
    }
}

fn configmaps(settings: &ServeConfig) -> Vec<ConfigMapKey> {
    settings
        .configmaps
        .iter()
        .map(|c| ConfigMapKey {
            namespace: c.namespace.clone(),
            name: c.name.clone(),
            key: c.key.clone(),
        })
        .collect()
}

/// Replication with peers, or why not: it needs the relay, a listener the peers reach, and
/// the token; acknowledgements need peers.
fn replication(
    settings: &ServeConfig,
) -> Result<Option<meshdns_server::replicate::ReplicationConfig>, String> {
    let has_peers = !settings.pkarr_peers.is_empty() || !settings.pkarr_peers_dns.is_empty();
    let acks = settings.pkarr_ack_replicas.unwrap_or(0);
    if !has_peers {
        if acks > 0 {
            return Err(
                "--pkarr-ack-replicas (pkarrAckReplicas) waits for peers: name them with \
                 --pkarr-peer (pkarrPeers) or --pkarr-peers-dns (pkarrPeersDns)"
                    .into(),
            );
        }
        if settings.pkarr_peer_token_file.is_some() {
            return Err(
                "--pkarr-peer-token-file (pkarrPeerTokenFile) is the peers' token: name the \
                 peers with --pkarr-peer (pkarrPeers) or --pkarr-peers-dns (pkarrPeersDns)"
                    .into(),
            );
        }
        return Ok(None);
    }
    if settings.pkarr.is_empty() {
        return Err(
            "--pkarr-peer / --pkarr-peers-dns (pkarrPeers, pkarrPeersDns) replicate the pkarr \
             relay: it needs --pkarr (pkarr)"
                .into(),
        );
    }
    if settings.http.is_none() && settings.https.is_none() {
        return Err(
            "--pkarr-peer / --pkarr-peers-dns (pkarrPeers, pkarrPeersDns): peers push to and \
             read from this replica's --http or --https listener; set one"
                .into(),
        );
    }
    if !settings.pkarr_peers_dns.is_empty() && settings.http.is_none() {
        return Err(
            "--pkarr-peers-dns (pkarrPeersDns) reaches the resolved replicas over plain HTTP: \
             it needs --http (http) on each"
                .into(),
        );
    }
    let Some(path) = &settings.pkarr_peer_token_file else {
        return Err(
            "--pkarr-peer / --pkarr-peers-dns (pkarrPeers, pkarrPeersDns) need the token every \
             replica shares: --pkarr-peer-token-file (pkarrPeerTokenFile), a file of at least \
             16 bytes (from a Secret)"
                .into(),
        );
    };
    let bytes = read_regular(
        path,
        "--pkarr-peer-token-file (pkarrPeerTokenFile)",
        "token file",
    )?;
    let token = String::from_utf8_lossy(&bytes).trim().to_string();
    if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "--pkarr-peer-token-file (pkarrPeerTokenFile): {}: the token must be at least 16 visible ASCII characters (openssl rand -hex 32)",
            path.display()
        ));
    }
    let mut config = meshdns_server::replicate::ReplicationConfig::new(token.into_bytes());
    config.peers = settings.pkarr_peers.iter().map(|p| p.0.clone()).collect();
    config.peers_dns = settings
        .pkarr_peers_dns
        .iter()
        .map(|h| (h.host.clone(), h.port))
        .collect();
    config.ack_replicas = acks as usize;
    config.ack_timeout = settings
        .pkarr_ack_timeout
        .unwrap_or(defaults::PKARR_ACK_TIMEOUT);
    config.catchup_wait = settings
        .pkarr_catchup_wait
        .unwrap_or(defaults::PKARR_CATCHUP_WAIT);
    config.catchup_interval = settings
        .pkarr_catchup_interval
        .unwrap_or(defaults::PKARR_CATCHUP_INTERVAL)
        .max(std::time::Duration::from_millis(100));
    config.queue = settings
        .pkarr_peer_queue
        .map_or(defaults::PKARR_PEER_QUEUE, |n| n as usize);
    config.push_window = settings
        .pkarr_push_window
        .unwrap_or(defaults::PKARR_PUSH_WINDOW);
    config.page_bytes = settings
        .pkarr_page_bytes
        .map_or(meshdns_server::replicate::PAGE_BYTES, |n| n as usize);
    Ok(Some(config))
}

/// The DHT node, or why not: it serves the relay's origins.
fn dht(settings: &ServeConfig) -> Result<Option<meshdns_sources::DhtConfig>, String> {
    if settings.pkarr_dht != Some(true) {
        if settings.pkarr_dht_republish.is_some() {
            return Err(
                "--pkarr-dht-republish (pkarrDhtRepublish) puts packets to the Mainline DHT: \
                 it needs --pkarr-dht (pkarrDht)"
                    .into(),
            );
        }
        return Ok(None);
    }
    if let Some(t) = settings.pkarr_dht_timeout
        && !(Duration::from_millis(100)..=Duration::from_secs(30)).contains(&t)
    {
        return Err(format!(
            "--pkarr-dht-timeout (pkarrDhtTimeout): {t:?}; give 100ms to 30s (a resolver gives up after a few seconds)"
        ));
    }
    if let Some(every) = settings.pkarr_dht_republish
        && every < Duration::from_secs(10)
    {
        return Err(format!(
            "--pkarr-dht-republish (pkarrDhtRepublish): {every:?} is too often; give 10s or more (1h republishes well before DHT nodes forget an item)"
        ));
    }
    if settings.pkarr.is_empty() {
        return Err(
            "--pkarr-dht (pkarrDht) looks keys up for the pkarr relay's origins: it needs \
             --pkarr (pkarr)"
                .into(),
        );
    }
    Ok(Some(meshdns_sources::DhtConfig {
        bootstrap: (!settings.pkarr_dht_bootstrap.is_empty()).then(|| {
            settings
                .pkarr_dht_bootstrap
                .iter()
                .map(|h| format!("{}:{}", h.host, h.port))
                .collect()
        }),
        bind: settings
            .pkarr_dht_bind
            .unwrap_or(std::net::SocketAddrV4::new(
                std::net::Ipv4Addr::UNSPECIFIED,
                0,
            )),
        timeout: settings
            .pkarr_dht_timeout
            .unwrap_or(defaults::PKARR_DHT_TIMEOUT),
        cache: settings
            .pkarr_dht_cache
            .map_or(defaults::PKARR_DHT_CACHE, |n| n as usize),
        lookups: settings
            .pkarr_dht_lookups
            .map_or(defaults::PKARR_DHT_LOOKUPS, |n| n as usize),
        client_lookups: settings
            .pkarr_dht_client_lookups
            .unwrap_or(defaults::PKARR_DHT_CLIENT_LOOKUPS),
        max_future: settings
            .pkarr_max_future
            .unwrap_or(defaults::PKARR_MAX_FUTURE),
        max_age: settings.pkarr_max_age.unwrap_or(defaults::PKARR_MAX_AGE),
        republish: settings.pkarr_dht_republish,
    }))
}

fn pkarr(settings: &ServeConfig) -> Option<PkarrConfig> {
    if settings.pkarr.is_empty() {
        return None;
    }
    let data_dir = settings.data_dir.clone().unwrap_or_else(defaults::data_dir);
    let mut config = PkarrConfig::new(settings.pkarr.clone(), Some(data_dir));
    config.max_age = settings.pkarr_max_age.unwrap_or(defaults::PKARR_MAX_AGE);
    config.max_future = settings
        .pkarr_max_future
        .unwrap_or(defaults::PKARR_MAX_FUTURE);
    config.put_per_minute = settings
        .pkarr_put_limit
        .unwrap_or(defaults::PKARR_PUT_LIMIT);
    config.put_burst = settings
        .pkarr_put_burst
        .unwrap_or(defaults::PKARR_PUT_BURST);
    config.commit_window = settings
        .pkarr_commit_window
        .unwrap_or(defaults::PKARR_COMMIT_WINDOW);
    Some(config)
}

fn server(settings: &ServeConfig, nsid: Option<&'static [u8]>) -> ServerPlan {
    // The default listens on IPv6 too where the host has it.
    let (listen, ipv4_fallback) = if settings.listen.is_empty() {
        let [v4, v6] = defaults::listen();
        (vec![v4, v6], Some(v4))
    } else {
        (settings.listen.clone(), None)
    };
    ServerPlan {
        listen,
        ipv4_fallback,
        udp_sockets: settings.udp_sockets.unwrap_or_else(defaults::cores),
        tcp_idle_timeout: settings
            .tcp_idle_timeout
            .unwrap_or(defaults::TCP_IDLE_TIMEOUT),
        tcp_max_connections: settings
            .tcp_max_connections
            .unwrap_or(defaults::TCP_MAX_CONNECTIONS),
        answer: AnswerConfig {
            edns_payload: settings.edns_payload.unwrap_or(defaults::EDNS_PAYLOAD),
            nsid,
        },
        dot: settings.dot.clone(),
        rrl: Some(settings.rrl_rate.unwrap_or(defaults::RRL_RATE))
            .filter(|&rate| rate > 0)
            .map(|rate| RrlConfig {
                rate,
                slip: settings.rrl_slip.unwrap_or(defaults::RRL_SLIP),
                ipv4_prefix: settings
                    .rrl_ipv4_prefix
                    .unwrap_or(defaults::RRL_IPV4_PREFIX),
                ipv6_prefix: settings
                    .rrl_ipv6_prefix
                    .unwrap_or(defaults::RRL_IPV6_PREFIX),
                exempt: settings.rrl_exempt.clone(),
            }),
        views: settings
            .views
            .iter()
            .map(|v| (v.name.clone(), v.ranges.clone()))
            .collect(),
    }
}

fn http(settings: &ServeConfig) -> HttpPlan {
    HttpPlan {
        http: settings.http,
        https: settings.https,
        limits: HttpLimits {
            max_connections: settings
                .http_max_connections
                .unwrap_or(defaults::HTTP_MAX_CONNECTIONS),
            idle_timeout: settings
                .http_idle_timeout
                .unwrap_or(defaults::HTTP_IDLE_TIMEOUT),
        },
        doh: settings.doh.unwrap_or(defaults::DOH),
        trusted_proxies: settings.trusted_proxies.clone(),
        acme_http01: settings.acme_challenge == Some(AcmeChallenge::Http01),
    }
}
