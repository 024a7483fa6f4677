//! The operations endpoint: `/metrics`, `/healthz`, `/readyz`.
//!
//! The server knows nothing about where records come from; the caller hands in what to
//! append to `/metrics` and how to judge readiness.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::warn;

/// Produces the Prometheus text for `/metrics`.
pub type MetricsFn = Arc<dyn Fn() -> String + Send + Sync>;
/// `Ok` when ready to serve, otherwise why not.
pub type ReadinessFn = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// What the HTTP endpoint reports.
#[derive(Clone)]
pub struct HttpState {
    /// `/metrics` body.
    pub metrics: MetricsFn,
    /// `/readyz` verdict.
    pub readiness: ReadinessFn,
}

/// The router, for embedding or testing.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn metrics(State(s): State<HttpState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        (s.metrics)(),
    )
}

async fn readyz(State(s): State<HttpState>) -> impl IntoResponse {
    match (s.readiness)() {
        Ok(()) => (StatusCode::OK, "ready\n".to_string()),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}\n"),
        ),
    }
}

/// Binds `addr` and serves `router` until `shutdown`; returns the bound address.
pub async fn serve_http(
    addr: SocketAddr,
    router: Router,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    tracker.spawn(async move {
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(e) = served {
            warn!(error = %e, "HTTP server ended");
        }
    });
    Ok(local)
}
