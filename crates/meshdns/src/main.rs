//! `meshdns`: discovery DNS for overlay networks on Kubernetes.
//!
//! This binary only wires things together: flags and config ([`config`]), the file sources
//! (`meshdns-sources`), the DNS server (`meshdns-server`) and the zone core (`meshdns-zone`).

mod config;
mod controller_cmd;
mod render;
mod render_mesh;
mod telemetry;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use arc_swap::ArcSwap;
use axum::http::StatusCode;
use clap::{Parser, Subcommand};
use meshdns_server::http::{DohState, HttpState, PkarrRelay, router, serve_http};
use meshdns_server::{DnsMetrics, Server, ServerConfig, SharedCatalog};
use meshdns_sources::{
    FileKind, FileSource, FileSources, ParseSettings, PkarrConfig, PkarrStore, Poker, PutError,
    SourceConfig, SourceInput, SourceStatus, assemble, compile, parse, spawn_watcher,
};
use meshdns_zone::{AnswerConfig, BuildDefaults, Catalog, Name};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{error, info, warn};
use tracing_subscriber::EnvFilter;

use crate::config::{ServeArgs, Settings};

/// Discovery DNS for overlay networks on Kubernetes.
#[derive(Debug, Parser)]
#[command(name = "meshdns", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once at start-up; boxing buys nothing
enum Command {
    /// Serve DNS authoritatively from records files, reloading them when they change.
    Serve(ServeArgs),
    /// Parse records and zone files as `serve` would and print every problem
    /// (`FILE: ENTRY: REASON`); exit 1 if a file cannot be used.
    Check(CheckArgs),
    /// Run a controller's planner on manifest files and print what it would converge to.
    #[command(subcommand)]
    Render(RenderTarget),
    /// Run a controller against Kubernetes clusters (with leader election).
    #[command(subcommand)]
    Controller(ControllerTarget),
    /// Print the CRDs meshdns owns (ClusterMesh) and compatible copies of those it consumes
    /// (Connector, ConnectorClass, DNSZone, DNSRecordSet, Peer).
    Crds,
}

#[derive(Debug, Subcommand)]
enum ControllerTarget {
    /// Publish each Connector's iroh endpoint as a DNSRecordSet of TXT records.
    Iroh(controller_cmd::ControllerArgs),
    /// Keep Kilo WireGuard Peers in every member cluster of each ClusterMesh.
    Mesh(controller_cmd::ControllerArgs),
}

#[derive(Debug, Subcommand)]
enum RenderTarget {
    /// The iroh controller: DNSRecordSets for Connectors, then each Connector's
    /// IrohDNSPublished condition.
    Iroh(RenderIrohArgs),
    /// The mesh controller: per target cluster the Peers it would keep, then each
    /// ClusterMesh's status and an Event per skipped node.
    Mesh(RenderMeshArgs),
    /// The zones DNSZones and DNSRecordSets make, as RFC 1035 zone-file text.
    Zone(RenderZoneArgs),
}

#[derive(Debug, clap::Args)]
struct RenderZoneArgs {
    /// Manifest files or directories (YAML, several documents, List kinds).
    #[arg(short = 'f', long = "filename", required = true)]
    files: Vec<PathBuf>,
    /// TTL of the synthesised SOA and NS, and the SOA minimum [default: 5].
    #[arg(long, default_value_t = 5)]
    default_ttl: u32,
}

#[derive(Debug, clap::Args)]
struct RenderMeshArgs {
    /// Directory with ClusterMesh manifests at the top and clusters/<name>/ Node lists.
    #[arg(short = 'f', long = "filename")]
    dir: PathBuf,
}

#[derive(Debug, clap::Args)]
struct RenderIrohArgs {
    /// Config file with an `iroh:` block, or datum's NetworkServicesOperator config.
    #[arg(long, short = 'c')]
    config: PathBuf,
    /// The cluster the Connectors live in (recorded in the cluster label).
    #[arg(long, default_value = "local")]
    cluster: String,
    /// Manifest files or directories (YAML, several documents, List kinds).
    #[arg(short = 'f', long = "filename", required = true)]
    files: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// Records files (Tailscale records.json, meshdns YAML/JSON, or zone files by extension).
    files: Vec<std::path::PathBuf>,
    /// RFC 1035 zone file, as FILE or ORIGIN=FILE (repeatable).
    #[arg(long = "zone-file")]
    zone_files: Vec<String>,
    /// Zones Tailscale names belong to [default: ts.net.].
    #[arg(long = "zone")]
    zones: Vec<String>,
    /// TTL for records that do not give one [default: 5].
    #[arg(long, default_value_t = 5)]
    default_ttl: u32,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => match serve(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("meshdns serve: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Render(RenderTarget::Iroh(args)) => match render_iroh(&args) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("meshdns render iroh: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Render(RenderTarget::Zone(args)) => match render::load_manifests(&args.files)
            .and_then(|objects| render::render_zone(&objects, args.default_ttl))
        {
            Ok((text, problems)) => {
                for p in problems {
                    eprintln!("{p}");
                }
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("meshdns render zone: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Render(RenderTarget::Mesh(args)) => match render_mesh::render_mesh(&args.dir) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("meshdns render mesh: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Controller(target) => match run_controller(target) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("meshdns controller: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Crds => {
            print!("{}", meshdns_api::crds());
            ExitCode::SUCCESS
        }
        Command::Check(args) => match check(&args) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("meshdns check: {e:#}");
                ExitCode::from(2)
            }
        },
    }
}

fn init_logging(settings: &Settings) {
    init_logging_with(&settings.log_level, settings.log_json);
}

fn init_logging_with(level: &str, json: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.with_ansi(std::io::stderr().is_terminal()).init();
    }
}

fn serve(args: &ServeArgs) -> Result<()> {
    let settings = config::settings(args)?;
    init_logging(&settings);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(settings.workers)
        .thread_name("meshdns-worker")
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(run(settings))
}

async fn run(settings: Settings) -> Result<()> {
    let catalog: SharedCatalog = Arc::new(ArcSwap::from_pointee(Catalog::empty()));
    let status = Arc::new(SourceStatus::default());
    let pkarr = if settings.pkarr_origins.is_empty() {
        None
    } else {
        let dir = settings.data_dir.join("pkarr");
        let store = PkarrStore::open(PkarrConfig {
            origins: settings.pkarr_origins.clone(),
            data_dir: Some(dir.clone()),
            max_age: settings.pkarr_max_age,
            put_per_minute: settings.pkarr_put_limit,
        })
        .with_context(|| format!("cannot open the pkarr store in {}", dir.display()))?;
        if settings.http.is_none() {
            warn!(
                "--pkarr without --http: stored packets are served, but no new ones can be published"
            );
        }
        Some(Arc::new(store))
    };
    let mut declared = settings.zones.clone();
    declared.extend(settings.pkarr_origins.iter().cloned());
    let mut sources = FileSources::new(
        SourceConfig {
            files: settings.files.clone(),
            zones: declared,
            settings: ParseSettings {
                default_ttl: settings.default_ttl,
                tailscale_zones: settings.tailscale_zones.clone(),
            },
            poll_interval: settings.poll_interval,
            debounce: std::time::Duration::from_millis(20),
        },
        catalog.clone(),
        status.clone(),
    );
    let feed = settings
        .kubernetes
        .as_ref()
        .map(|_| meshdns_sources::manifests::ManifestFeed::new("kubernetes"));
    if let Some(feed) = &feed {
        sources = sources.with_feed(feed.clone());
    }
    if let Some(store) = &pkarr {
        sources = sources.with_pkarr(store.clone());
    }
    // The first snapshot is in place before the first socket is bound.
    sources.refresh();
    if let Err(reason) = status.readiness() {
        warn!(%reason, "starting without every records file; /readyz reports 503 until they load");
    }

    let metrics = Arc::new(DnsMetrics::default());
    let mut server_config = ServerConfig {
        listen: Vec::new(),
        udp_sockets: settings.udp_sockets,
        tcp_idle_timeout: settings.tcp_idle_timeout,
        tcp_max_connections: settings.tcp_max_connections,
        answer: AnswerConfig {
            edns_payload: settings.edns_payload,
        },
        ..ServerConfig::default()
    };
    let server = match &settings.listen {
        Some(listen) => {
            server_config.listen = listen.clone();
            Server::bind(server_config, catalog.clone(), metrics.clone()).await?
        }
        None => {
            let v4: SocketAddr = ([0, 0, 0, 0], 1053).into();
            let v6: SocketAddr = (std::net::Ipv6Addr::UNSPECIFIED, 1053).into();
            server_config.listen = vec![v4, v6];
            match Server::bind(server_config.clone(), catalog.clone(), metrics.clone()).await {
                Ok(s) => s,
                Err(e) => {
                    warn!(error = %e, "cannot listen on [::]:1053; serving IPv4 only");
                    server_config.listen = vec![v4];
                    Server::bind(server_config, catalog.clone(), metrics.clone()).await?
                }
            }
        }
    };

    let watcher = spawn_watcher(sources).context("cannot start the file watcher")?;
    let shutdown = CancellationToken::new();
    let tasks = TaskTracker::new();
    if let (Some(feed), Some(namespace)) = (feed, settings.kubernetes.clone()) {
        let client = controller_cmd::client(settings.kubeconfig.as_deref())
            .await
            .context("--kubernetes")?;
        let poker = watcher.poker();
        info!(
            namespace = namespace.as_deref().unwrap_or("(all)"),
            "watching DNSZones and DNSRecordSets"
        );
        tasks.spawn(meshdns_controller::dns_source::reflect(
            client,
            namespace,
            feed,
            move || poker.poke(),
            shutdown.clone(),
        ));
    }
    let http_addr = match settings.http {
        Some(addr) => {
            let state = HttpState {
                metrics: {
                    let (metrics, catalog, status, pkarr) = (
                        metrics.clone(),
                        catalog.clone(),
                        status.clone(),
                        pkarr.clone(),
                    );
                    Arc::new(move || {
                        telemetry::render(&metrics, &catalog.load(), &status, pkarr.as_deref())
                    })
                },
                readiness: {
                    let status = status.clone();
                    Arc::new(move || status.readiness())
                },
                pkarr: pkarr.clone().map(|store| {
                    Arc::new(PkarrHttp {
                        store,
                        poker: watcher.poker(),
                    }) as Arc<dyn PkarrRelay>
                }),
                doh: settings.doh.then(|| DohState {
                    catalog: catalog.clone(),
                    metrics: metrics.clone(),
                    answer: AnswerConfig {
                        edns_payload: settings.edns_payload,
                    },
                }),
            };
            Some(
                serve_http(addr, router(state), shutdown.clone(), &tasks)
                    .await
                    .with_context(|| format!("cannot serve HTTP on {addr}"))?,
            )
        }
        None => None,
    };
    let dns: Vec<String> = server.udp_addrs().iter().map(ToString::to_string).collect();
    info!(dns = %dns.join(","), http = %http_addr.map_or("off".to_string(), |a| a.to_string()), "meshdns ready");

    wait_for_signal().await;
    info!("shutting down");
    server.shutdown();
    shutdown.cancel();
    server.join().await;
    tasks.close();
    tasks.wait().await;
    tokio::task::spawn_blocking(move || watcher.stop())
        .await
        .ok();
    info!("stopped");
    Ok(())
}

/// The pkarr relay as the HTTP endpoint sees it: the store, plus a nudge to the watcher so a
/// publish is served at once.
struct PkarrHttp {
    store: Arc<PkarrStore>,
    poker: Poker,
}

impl PkarrRelay for PkarrHttp {
    fn put(
        &self,
        client: std::net::IpAddr,
        key: &str,
        body: &[u8],
    ) -> Result<(), (StatusCode, String)> {
        match self.store.put(Some(client), key, body) {
            Ok(()) => {
                self.poker.poke();
                Ok(())
            }
            Err(e) => {
                let status = match e {
                    PutError::Key(_) | PutError::Payload(_) => StatusCode::BAD_REQUEST,
                    PutError::Stale => StatusCode::CONFLICT,
                    PutError::RateLimited => StatusCode::TOO_MANY_REQUESTS,
                    PutError::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
                };
                Err((status, e.to_string()))
            }
        }
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, (StatusCode, String)> {
        self.store
            .get(key)
            .map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => {
            error!("cannot install signal handlers; stop with SIGKILL");
            std::future::pending::<()>().await;
            unreachable!()
        }
    };
    tokio::select! {
        _ = term.recv() => info!(signal = "SIGTERM", "signal received"),
        _ = int.recv() => info!(signal = "SIGINT", "signal received"),
    }
}

fn run_controller(target: ControllerTarget) -> Result<()> {
    init_logging_with(
        "info",
        std::env::var("MESHDNS_LOG_JSON").is_ok_and(|v| v == "1"),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        let signal = shutdown.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            signal.cancel();
        });
        match &target {
            ControllerTarget::Iroh(args) => controller_cmd::run_iroh(args, shutdown).await,
            ControllerTarget::Mesh(args) => controller_cmd::run_mesh(args, shutdown).await,
        }
    })?;
    info!("stopped");
    Ok(())
}

fn render_iroh(args: &RenderIrohArgs) -> Result<String> {
    let settings = render::load_iroh_config(&args.config)?
        .settings()
        .with_context(|| format!("{}", args.config.display()))?;
    let objects = render::load_manifests(&args.files)?;
    render::render_iroh(&objects, &settings, &args.cluster)
}

/// `meshdns check`: the same parse and assembly as `serve`, printed instead of served.
fn check(args: &CheckArgs) -> Result<bool> {
    let zones: Vec<Name> = args
        .zones
        .iter()
        .map(|z| {
            z.parse::<Name>()
                .map_err(|e| anyhow::anyhow!("zone {z:?}: {e}"))
        })
        .collect::<Result<_>>()?;
    let settings = ParseSettings {
        default_ttl: args.default_ttl,
        tailscale_zones: if zones.is_empty() {
            ParseSettings::default().tailscale_zones
        } else {
            zones.clone()
        },
    };
    let mut sources: Vec<FileSource> = args
        .files
        .iter()
        .map(|p| FileSource {
            path: p.clone(),
            kind: FileKind::Auto,
        })
        .collect();
    for spec in &args.zone_files {
        sources.push(config::zone_file_source(spec, std::path::Path::new(""))?);
    }
    if sources.is_empty() {
        anyhow::bail!("no files given");
    }
    let defaults = BuildDefaults {
        default_ttl: args.default_ttl,
        serial: 1,
    };
    let mut usable = true;
    let mut loaded = Vec::new();
    for source in &sources {
        let label = source.path.display().to_string();
        let parsed = std::fs::read(&source.path)
            .map_err(|e| meshdns_sources::Problem::new(&label, "file", format!("cannot read: {e}")))
            .and_then(|bytes| parse(&label, &source.kind, &bytes, &settings));
        match parsed {
            Ok(p) => {
                let (compiled, refused) = compile(&label, p.zones, defaults);
                for problem in p.problems.iter().chain(&refused) {
                    println!("{problem}");
                }
                let skipped = p.problems.len() + refused.len();
                loaded.push((label, compiled, skipped));
            }
            Err(problem) => {
                println!("{problem}");
                eprintln!("{label}: unusable");
                usable = false;
            }
        }
    }
    let inputs: Vec<SourceInput<'_>> = loaded
        .iter()
        .map(|(label, compiled, _)| SourceInput { label, compiled })
        .collect();
    let (catalog, refused) = assemble(&inputs, &zones, defaults);
    for problem in &refused {
        println!("{problem}");
    }
    for (label, compiled, skipped) in &loaded {
        let records: usize = compiled.zones.iter().map(|z| z.record_count()).sum();
        let skipped = skipped + refused.iter().filter(|p| &p.file == label).count();
        eprintln!(
            "{label}: ok: {records} records served (SOA and NS included) in {} zone(s), {skipped} skipped",
            compiled.zones.len()
        );
    }
    eprintln!(
        "{} zone(s), {} records served in all",
        catalog.zones().len(),
        catalog.record_count()
    );
    Ok(usable)
}
