//! `meshdns controller iroh|mesh`: clients, leader election, the metrics endpoint and
//! shutdown around the controllers of `meshdns-kube`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use axum::routing::get;
use k8s_openapi::api::core::v1::Secret;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use meshdns_kube::leader::{Election, lead};
use meshdns_kube::metrics::Metrics;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::cli::{IrohCmd, MeshCmd};
use crate::config::{ClusterRef, ControllerArgs};

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
            meshdns_kube::client_from_kubeconfig(&bytes.0)
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
    if args.leader_elect() {
        let ns = args.lease_namespace();
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
pub async fn run_iroh(cmd: &IrohCmd, shutdown: CancellationToken) -> Result<()> {
    use meshdns_kube::controllers::iroh::{IrohOptions, SourceCluster, run};
    let iroh = cmd.resolve()?;
    let at = crate::cli::iroh_origin(cmd.config.as_deref());
    let mut opts = IrohOptions::new(iroh.settings().with_context(|| at.clone())?);
    opts.enabled = iroh.dns_enabled.unwrap_or(true);
    opts.withdraw_expired_leases = iroh.withdraw_expired_leases.unwrap_or(false);
    if let Some(fm) = iroh.field_manager.clone().filter(|f| !f.is_empty()) {
        opts.field_manager = fm;
    }
    let args = &cmd.process;
    let local = client(args.kubeconfig.as_deref()).await?;
    let downstream = match iroh
        .downstream_kubeconfig_path
        .as_deref()
        .filter(|p| !p.as_os_str().is_empty())
    {
        Some(p) => client(Some(p)).await.context("downstreamKubeconfigPath")?,
        None => local.clone(),
    };
    let mut sources = Vec::new();
    if iroh.include_local.unwrap_or(true) {
        sources.push(SourceCluster {
            name: iroh.cluster_name().to_string(),
            client: local.clone(),
        });
    }
    for c in &iroh.source_clusters {
        sources.push(SourceCluster {
            name: c.name.clone(),
            client: cluster_client(&local, c).await?,
        });
    }
    if sources.is_empty() {
        bail!("{at}: no source cluster (includeLocal is false and sourceClusters is empty)");
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

/// `meshdns controller mesh`.
pub async fn run_mesh(cmd: &MeshCmd, shutdown: CancellationToken) -> Result<()> {
    use meshdns_kube::controllers::mesh::{MeshOptions, run};
    let mesh = cmd.resolve()?;
    let namespace = mesh.namespace();
    let mut opts = MeshOptions::new(&namespace);
    opts.resync = mesh.resync();
    let args = &cmd.process;
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
