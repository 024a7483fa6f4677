//! `meshdns controller iroh|mesh`: clients, leader election, the metrics endpoint and
//! shutdown around the controllers of `meshdns-controller`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use axum::routing::get;
use k8s_openapi::api::core::v1::Secret;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use meshdns_controller::leader::{Election, lead};
use meshdns_controller::metrics::Metrics;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

/// Flags shared by both controllers.
#[derive(Debug, clap::Args)]
pub struct ControllerArgs {
    /// Config file: an `iroh:` / `mesh:` block, or datum's NetworkServicesOperator config.
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,
    /// kubeconfig of the cluster the controller runs against [default: in-cluster, then
    /// $KUBECONFIG / ~/.kube/config].
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Metrics and health (`/metrics`, `/healthz`) on this address.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub http: SocketAddr,
    /// Elect one active replica through a Lease.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Namespace of the leader-election Lease [default: $POD_NAMESPACE, else `default`].
    #[arg(long)]
    pub leader_election_namespace: Option<String>,
}

/// A cluster reached through a kubeconfig file or Secret.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterRef {
    /// The cluster's name (in labels, logs and conditions).
    pub name: String,
    /// A kubeconfig file.
    #[serde(default)]
    pub kubeconfig_path: Option<PathBuf>,
    /// A kubeconfig in a Secret of the local cluster.
    #[serde(default)]
    pub kubeconfig_secret_ref: Option<SecretRef>,
}

/// `{namespace, name, key}` of a Secret holding a kubeconfig.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Key in `data` [default: `kubeconfig`].
    #[serde(default = "default_secret_key")]
    pub key: String,
}

fn default_secret_key() -> String {
    "kubeconfig".into()
}

/// A client from a kubeconfig file, or inferred (in-cluster, then `$KUBECONFIG`).
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer().await.context(
            "no kubeconfig given and none found (in-cluster, $KUBECONFIG, ~/.kube/config)",
        )?,
    };
    Client::try_from(config).context("kubernetes client")
}

/// A client for a listed cluster.
pub async fn cluster_client(local: &Client, c: &ClusterRef) -> Result<Client> {
    match (&c.kubeconfig_path, &c.kubeconfig_secret_ref) {
        (Some(path), None) => client(Some(path))
            .await
            .with_context(|| format!("cluster {:?}", c.name)),
        (None, Some(r)) => {
            let secret = Api::<Secret>::namespaced(local.clone(), &r.namespace)
                .get(&r.name)
                .await
                .with_context(|| {
                    format!("cluster {:?}: Secret {}/{}", c.name, r.namespace, r.name)
                })?;
            let bytes = secret
                .data
                .as_ref()
                .and_then(|d| d.get(&r.key))
                .with_context(|| {
                    format!(
                        "cluster {:?}: Secret {}/{} has no key {:?}",
                        c.name, r.namespace, r.name, r.key
                    )
                })?;
            meshdns_controller::client_from_kubeconfig(&bytes.0)
                .await
                .map_err(anyhow::Error::msg)
                .with_context(|| {
                    format!(
                        "cluster {:?}: Secret {}/{} key {:?}",
                        c.name, r.namespace, r.name, r.key
                    )
                })
        }
        _ => bail!(
            "cluster {:?}: give exactly one of kubeconfigPath and kubeconfigSecretRef",
            c.name
        ),
    }
}

/// Serves `/metrics` and `/healthz` until `shutdown`.
pub async fn serve_metrics(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> Result<()> {
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let m = metrics.clone();
                async move { m.render() }
            }),
        )
        .route("/healthz", get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("--http {addr}"))?;
    info!(addr = %listener.local_addr()?, "metrics listening");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
    });
    Ok(())
}

/// Runs `work` while this replica leads (or always, without leader election); returns an
/// error when leadership is lost, so the process exits and its pod restarts clean.
pub async fn run_led<F, Fut>(
    args: &ControllerArgs,
    local: Client,
    lease_name: &str,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
    work: F,
) -> Result<()>
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let stop = shutdown.child_token();
    let mut lost = None;
    if args.leader_elect {
        let ns = args
            .leader_election_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .unwrap_or_else(|| "default".into());
        info!(lease = lease_name, namespace = %ns, "waiting for leadership");
        match lead(local, Election::new(&ns, lease_name), shutdown.clone()).await {
            Some(token) => {
                metrics.set_leader(true);
                let stop = stop.clone();
                let watch = token.clone();
                tokio::spawn(async move {
                    watch.cancelled().await;
                    stop.cancel();
                });
                lost = Some(token);
            }
            None => return Ok(()),
        }
    } else {
        metrics.set_leader(true);
    }
    work(stop).await;
    metrics.set_leader(false);
    if lost.is_some_and(|t| t.is_cancelled()) && !shutdown.is_cancelled() {
        error!("leadership lost");
        bail!("leadership lost");
    }
    Ok(())
}

/// `meshdns controller iroh`.
pub async fn run_iroh(args: &ControllerArgs, shutdown: CancellationToken) -> Result<()> {
    use meshdns_controller::iroh::{IrohOptions, SourceCluster, run};
    let path = args
        .config
        .as_deref()
        .context("--config is required: a file with an `iroh:` block or datum's NetworkServicesOperator config")?;
    let file = crate::render::load_iroh_config(path)?;
    let settings = file
        .settings()
        .with_context(|| format!("{}", path.display()))?;
    let mut opts = IrohOptions::new(settings);
    opts.enabled = file.dns_enabled.unwrap_or(true);
    opts.withdraw_expired_leases = file.withdraw_expired_leases;
    if let Some(fm) = file.field_manager.clone().filter(|f| !f.is_empty()) {
        opts.field_manager = fm;
    }
    let local = client(args.kubeconfig.as_deref()).await?;
    let downstream = match file
        .downstream_kubeconfig_path
        .as_deref()
        .filter(|p| !p.as_os_str().is_empty())
    {
        Some(p) => client(Some(p)).await.context("downstreamKubeconfigPath")?,
        None => local.clone(),
    };
    let mut sources = Vec::new();
    if file.include_local.unwrap_or(true) {
        sources.push(SourceCluster {
            name: file.cluster_name.clone().unwrap_or_else(|| "local".into()),
            client: local.clone(),
        });
    }
    for c in &file.source_clusters {
        sources.push(SourceCluster {
            name: c.name.clone(),
            client: cluster_client(&local, c).await?,
        });
    }
    if sources.is_empty() {
        bail!(
            "{}: no source cluster (includeLocal is false and sourceClusters is empty)",
            path.display()
        );
    }
    let metrics = Arc::new(Metrics::new("iroh"));
    serve_metrics(args.http, metrics.clone(), shutdown.clone()).await?;
    info!(
        clusters = sources.len(),
        zone = %opts.settings.zone_name,
        namespace = %opts.settings.zone_namespace,
        enabled = opts.enabled,
        "iroh controller starting"
    );
    run_led(
        args,
        local,
        "meshdns-iroh",
        metrics.clone(),
        shutdown,
        |stop| run(sources, downstream, opts, metrics, stop),
    )
    .await
}

/// The controller config's `mesh:` block.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshFile {
    /// Namespace of the ClusterMeshes and their kubeconfig Secrets [default: $POD_NAMESPACE,
    /// else `default`].
    #[serde(default)]
    pub namespace: Option<String>,
    /// Periodic re-plan, seconds [default: 300].
    #[serde(default)]
    pub resync_seconds: Option<u64>,
}

fn load_mesh_config(path: &Path) -> Result<MeshFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let doc: serde_yaml::Value =
        serde_yaml::from_str(&text).with_context(|| format!("{}: not YAML", path.display()))?;
    match doc.get("mesh") {
        Some(block) => serde_yaml::from_value(block.clone())
            .with_context(|| format!("{}: mesh block", path.display())),
        None => bail!("{}: no `mesh:` block", path.display()),
    }
}

/// `meshdns controller mesh`.
pub async fn run_mesh(args: &ControllerArgs, shutdown: CancellationToken) -> Result<()> {
    use meshdns_controller::mesh::{MeshOptions, run};
    let file = match &args.config {
        Some(path) => load_mesh_config(path)?,
        None => MeshFile::default(),
    };
    let namespace = file
        .namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .unwrap_or_else(|| "default".into());
    let mut opts = MeshOptions::new(&namespace);
    if let Some(s) = file.resync_seconds {
        opts.resync = std::time::Duration::from_secs(s.max(1));
    }
    let local = client(args.kubeconfig.as_deref()).await?;
    let metrics = Arc::new(Metrics::new("mesh"));
    serve_metrics(args.http, metrics.clone(), shutdown.clone()).await?;
    info!(namespace = %namespace, "mesh controller starting");
    run_led(
        args,
        local.clone(),
        "meshdns-mesh",
        metrics.clone(),
        shutdown,
        |stop| run(local, opts, metrics, stop),
    )
    .await
}
