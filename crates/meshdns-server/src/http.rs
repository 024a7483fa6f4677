//! The HTTP endpoint: `/metrics`, `/healthz`, `/readyz`, and DNS over HTTPS at `/dns-query`.
//!
//! The server knows nothing about where records come from; the caller hands in what to
//! append to `/metrics` and how to judge readiness.
//!
//! DoH (RFC 8484 §4.1): `GET /dns-query?dns=<base64url, no padding>` and `POST /dns-query`
//! with an `application/dns-message` body, answered by the same `answer()` as UDP and TCP (as
//! a stream transport, so nothing is truncated) with `Content-Type: application/dns-message`.
//! Per RFC 8484 §4.1 the ID should be 0 and it is echoed as sent. A packet `answer()` would
//! drop (no header, or a response) gets 400.
//!
//! The same router is served on plain HTTP ([`serve_http`]) and over TLS ([`serve_https`]),
//! HTTP/1.1 and HTTP/2 on both (HTTP/2 by ALPN `h2` or its preface).
//!
//! pkarr relay: see [`crate::relay`].

use std::net::SocketAddr;
use std::sync::Arc;

use std::collections::HashMap;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use meshdns_zone::{AnswerConfig, Transport, answer};

use crate::SharedCatalog;
use crate::metrics::{DnsMetrics, Proto};
use crate::tls::{ACME_TLS_ALPN, Certificates, Listener};
use axum::serve::ListenerExt as _;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

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
    /// DNS over HTTPS, when enabled.
    pub doh: Option<DohState>,
    /// The pkarr relay (`/pkarr/<key>`), when enabled.
    pub pkarr: Option<Arc<dyn crate::relay::PkarrRelay>>,
    /// Peers whose `Forwarded` / `X-Forwarded-For` name the client (reverse proxies).
    pub trusted_proxies: Arc<[crate::relay::Cidr]>,
    /// ACME HTTP-01 answers (`/.well-known/acme-challenge/<token>`), when ACME uses them.
    pub acme_http01: Option<Arc<crate::acme::Http01Tokens>>,
}

/// What `/dns-query` answers from.
#[derive(Clone)]
pub struct DohState {
    /// The served snapshot.
    pub catalog: SharedCatalog,
    /// Where DoH queries are counted (transport `doh`).
    pub metrics: Arc<DnsMetrics>,
    /// Answer settings.
    pub answer: AnswerConfig,
}

/// The media type of DNS messages over HTTP (RFC 8484 §6).
pub const DNS_MESSAGE: &str = "application/dns-message";

/// The router, for embedding or testing; `/metrics` only `with_metrics` (the HTTPS listener,
/// often public, leaves it to the plain one).
pub fn router(state: HttpState, with_metrics: bool) -> Router {
    let mut r = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz));
    if with_metrics {
        r = r.route("/metrics", get(metrics));
    }
    if state.acme_http01.is_some() {
        r = r.route("/.well-known/acme-challenge/{token}", get(acme_http01));
    }
    if state.doh.is_some() {
        r = r.route("/dns-query", get(doh_get).post(doh_post));
    }
    if state.pkarr.is_some() {
        r = r.route(
            "/pkarr/{key}",
            get(crate::relay::get)
                .put(crate::relay::put)
                .options(crate::relay::preflight),
        );
    }
    r.layer(DefaultBodyLimit::max(65_535)).with_state(state)
}

async fn doh_get(
    State(s): State<HttpState>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let Some(encoded) = params.get("dns") else {
        return (
            StatusCode::BAD_REQUEST,
            "missing ?dns= (a base64url DNS message, RFC 8484)\n",
        )
            .into_response();
    };
    match data_encoding::BASE64URL_NOPAD.decode(encoded.trim_end_matches('=').as_bytes()) {
        Ok(packet) => doh_answer(&s, &packet),
        Err(_) => (StatusCode::BAD_REQUEST, "?dns= is not base64url\n").into_response(),
    }
}

async fn doh_post(State(s): State<HttpState>, headers: HeaderMap, body: Bytes) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type.starts_with(DNS_MESSAGE) {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Type must be {DNS_MESSAGE}\n"),
        )
            .into_response();
    }
    doh_answer(&s, &body)
}

fn doh_answer(s: &HttpState, packet: &[u8]) -> Response {
    let Some(doh) = &s.doh else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut out = Vec::with_capacity(512);
    let started = Instant::now();
    let outcome = answer(
        &doh.catalog.load(),
        packet,
        Transport::Stream,
        &doh.answer,
        &mut out,
    );
    doh.metrics.record(Proto::Doh, &outcome, started.elapsed());
    if !outcome.reply {
        return (StatusCode::BAD_REQUEST, "not a DNS query\n").into_response();
    }
    ([(header::CONTENT_TYPE, DNS_MESSAGE)], out).into_response()
}

async fn acme_http01(
    State(s): State<HttpState>,
    axum::extract::Path(token): axum::extract::Path<String>,
) -> Response {
    match s.acme_http01.as_ref().and_then(|t| t.get(&token)) {
        Some(key_authorization) => (
            [(header::CONTENT_TYPE, "application/octet-stream")],
            key_authorization,
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
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
        let service = router.into_make_service_with_connect_info::<SocketAddr>();
        let served = axum::serve(listener, service)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(e) = served {
            warn!(error = %e, "HTTP server ended");
        }
    });
    Ok(local)
}

/// Binds `addr` and serves `router` over TLS until `shutdown`; returns the bound address.
///
/// Handshakes run in their own tasks (bounded by `handshake_timeout` and by
/// [`MAX_HANDSHAKES`] at once), so a slow or silent client holds up nobody; completed
/// connections are handed to axum, which speaks HTTP/1.1 or HTTP/2 as ALPN chose. A handshake
/// that negotiated `acme-tls/1` is an ACME validation: it ends after the handshake.
pub async fn serve_https(
    addr: SocketAddr,
    router: Router,
    certs: Arc<Certificates>,
    handshake_timeout: Duration,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) -> std::io::Result<SocketAddr> {
    let config = certs.server_config(&[b"h2", b"http/1.1", ACME_TLS_ALPN])?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tracker.spawn(handshakes(
        listener,
        acceptor,
        certs,
        handshake_timeout,
        tx,
        shutdown.clone(),
    ));
    tracker.spawn(async move {
        let listener = TlsListener { rx, local }.tap_io(|_| {});
        let service = router.into_make_service_with_connect_info::<SocketAddr>();
        let served = axum::serve(listener, service)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(e) = served {
            warn!(error = %e, "HTTPS server ended");
        }
    });
    Ok(local)
}

/// At most this many TLS handshakes in progress on the HTTPS listener; more wait in the
/// kernel's accept queue.
pub const MAX_HANDSHAKES: usize = 256;

type TlsStream = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;

async fn handshakes(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    certs: Arc<Certificates>,
    timeout: Duration,
    ready: tokio::sync::mpsc::Sender<(TlsStream, SocketAddr)>,
    shutdown: CancellationToken,
) {
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_HANDSHAKES));
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            () = shutdown.cancelled() => return,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    warn!(error = %e, "HTTPS accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => return,
        };
        let _ = stream.set_nodelay(true);
        let (acceptor, certs, ready) = (acceptor.clone(), certs.clone(), ready.clone());
        tokio::spawn(async move {
            let done = tokio::time::timeout(timeout, acceptor.accept(stream)).await;
            drop(permit);
            match done {
                Ok(Ok(tls)) => {
                    certs.metrics.handshake(Listener::Https, true);
                    if tls.get_ref().1.alpn_protocol() == Some(ACME_TLS_ALPN) {
                        return; // a TLS-ALPN-01 validation: the handshake was the answer
                    }
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(e)) => {
                    certs.metrics.handshake(Listener::Https, false);
                    debug!(%peer, error = %e, "HTTPS handshake failed");
                }
                Err(_) => {
                    certs.metrics.handshake(Listener::Https, false);
                    debug!(%peer, "HTTPS handshake timed out");
                }
            }
        });
    }
}

/// Hands axum the connections whose handshake completed.
struct TlsListener {
    rx: tokio::sync::mpsc::Receiver<(TlsStream, SocketAddr)>,
    local: SocketAddr,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(conn) => conn,
            // The handshake task ended (shutdown): wait for axum's graceful shutdown.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
