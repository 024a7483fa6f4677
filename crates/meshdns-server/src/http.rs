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

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use meshdns_zone::{AnswerConfig, Transport, answer};

use crate::SharedCatalog;
use crate::metrics::{DnsMetrics, HttpClose, HttpListener, Proto};
use crate::tls::{ACME_TLS_ALPN, Certificates, Listener};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, error, warn};

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
    pub trusted_proxies: Arc<[meshdns_zone::Cidr]>,
    /// ACME HTTP-01 answers (`/.well-known/acme-challenge/<token>`), when ACME uses them.
    pub acme_http01: Option<Arc<crate::acme::Http01Tokens>>,
    /// pkarr replication with peers (`/pkarr-peer/v2/…`), when peers are configured.
    pub replication: Option<Arc<crate::replicate::Replicator>>,
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
    /// The [`crate::NSID_HEADER`] every response carries (the server's NSID), when it has one.
    pub nsid: Option<axum::http::HeaderValue>,
    /// Where keys a cache lacks are looked up before answering (`--pkarr-dht`).
    pub lookups: Option<Arc<dyn crate::lookups::Lookups>>,
    /// Split horizon (`--view`): the client (the forwarded address behind a trusted proxy)
    /// picks the catalog.
    pub views: Option<Arc<crate::views::Views>>,
}

/// The largest request body read (a DNS message or a pkarr payload is far smaller). A larger
/// declared `Content-Length` gets 413 before any of the body is read.
pub const MAX_BODY: usize = 65_535;

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
    if let Some(relay) = &state.pkarr {
        r = r.merge(crate::relay::routes(crate::relay::RelayState {
            relay: relay.clone(),
            trusted_proxies: state.trusted_proxies.clone(),
        }));
    }
    if let Some(replicator) = &state.replication {
        r = r.merge(crate::replicate::routes(crate::replicate::PeerRoutes {
            replicator: replicator.clone(),
            trusted_proxies: state.trusted_proxies.clone(),
        }));
    }
    r.layer(DefaultBodyLimit::max(MAX_BODY)).with_state(state)
}

/// What a listener serves: [`router`], and with the pkarr relay on, its publishes
/// (`PUT /pkarr/<key>`) answered ahead of it ([`crate::relay::FastPut`]).
#[derive(Clone)]
pub struct Service {
    router: Router,
    put: Option<Arc<crate::relay::FastPut>>,
}

impl From<Router> for Service {
    /// The router alone.
    fn from(router: Router) -> Service {
        Service { router, put: None }
    }
}

/// [`router`], with the relay's publishes answered ahead of it.
pub fn service(state: HttpState, with_metrics: bool) -> Service {
    let put = state.pkarr.as_ref().map(|relay| {
        Arc::new(crate::relay::FastPut::new(crate::relay::RelayState {
            relay: relay.clone(),
            trusted_proxies: state.trusted_proxies.clone(),
        }))
    });
    Service {
        router: router(state, with_metrics),
        put,
    }
}

async fn doh_get(
    State(s): State<HttpState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
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
        Ok(packet) => doh_answer(&s, &packet, client(&s, peer, &headers)).await,
        Err(_) => (StatusCode::BAD_REQUEST, "?dns= is not base64url\n").into_response(),
    }
}

async fn doh_post(
    State(s): State<HttpState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
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
    doh_answer(&s, &body, client(&s, peer, &headers)).await
}

/// The client a request is from: the connection's peer, or the address a trusted proxy
/// forwarded.
fn client(s: &HttpState, peer: SocketAddr, headers: &HeaderMap) -> IpAddr {
    crate::relay::client_address(peer.ip(), headers, &s.trusted_proxies)
}

async fn doh_answer(s: &HttpState, packet: &[u8], client: IpAddr) -> Response {
    let Some(doh) = &s.doh else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut out = Vec::with_capacity(512);
    let started = Instant::now();
    let catalog = crate::views::Views::pick_in(doh.views.as_deref(), client, &doh.catalog, true);
    let outcome = answer(
        &catalog.load(),
        packet,
        Transport::Stream,
        &doh.answer,
        &mut out,
    );
    let outcome = match crate::lookups::needs_lookup(doh.lookups.as_ref(), &outcome) {
        Some(key) => {
            let lookups = doh.lookups.as_ref().expect("asked of it");
            crate::lookups::answer_after(
                lookups,
                key,
                Some(client),
                crate::lookups::Asked {
                    catalog,
                    packet,
                    transport: Transport::Stream,
                    config: &doh.answer,
                },
                &mut out,
            )
            .await
        }
        None => outcome,
    };
    doh.metrics.record(Proto::Doh, &outcome, started.elapsed());
    let mut response = if outcome.reply {
        ([(header::CONTENT_TYPE, DNS_MESSAGE)], out).into_response()
    } else {
        (StatusCode::BAD_REQUEST, "not a DNS query\n").into_response()
    };
    if let Some(nsid) = &doh.nsid {
        response
            .headers_mut()
            .insert(crate::NSID_HEADER, nsid.clone());
    }
    response
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

/// Limits on each HTTP and HTTPS listener's connections.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Connections served at once; at the cap the one idle the longest is closed for a new one.
    pub max_connections: usize,
    /// A connection with no request in progress for this long is closed, and a request must
    /// arrive whole and be answered within it (408 otherwise): a trickling client holds a
    /// connection no longer than this.
    pub idle_timeout: Duration,
}

/// Binds `addr` and serves `service` (a [`Router`], or a [`Service`]) until `shutdown`;
/// returns the bound address.
pub async fn serve_http(
    addr: SocketAddr,
    service: impl Into<Service>,
    limits: HttpLimits,
    metrics: Arc<DnsMetrics>,
    shutdown: CancellationToken,
    tracker: &TaskTracker,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tracker.spawn(accept_plain(listener, tx, shutdown.clone()));
    tracker.spawn(serve_connections(
        rx,
        service.into(),
        limits,
        (HttpListener::Http, metrics),
        shutdown,
    ));
    Ok(local)
}

/// Binds `addr` and serves `service` over TLS until `shutdown`; returns the bound address.
///
/// Handshakes run in their own tasks (each bounded by [`crate::tls::HANDSHAKE_TIMEOUT`], at
/// most [`MAX_HANDSHAKES`] at once, the oldest shed for a new one), so a slow or silent client
/// holds up nobody; completed connections are served as
/// on plain HTTP, HTTP/1.1 or HTTP/2 as ALPN chose. A handshake that negotiated `acme-tls/1`
/// is an ACME validation: it ends after the handshake.
pub async fn serve_https(
    addr: SocketAddr,
    service: impl Into<Service>,
    certs: Arc<Certificates>,
    limits: HttpLimits,
    metrics: Arc<DnsMetrics>,
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
        (limits.idle_timeout, metrics.clone()),
        tx,
        shutdown.clone(),
    ));
    tracker.spawn(serve_connections(
        rx,
        service.into(),
        limits,
        (HttpListener::Https, metrics),
        shutdown,
    ));
    Ok(local)
}

/// A connection handed to [`serve_connections`]: its stream, its client, and whether that
/// client had sent its first message whole when it was accepted ([`crate::conns::arriving`]).
type Accepted<Io> = (Io, SocketAddr, bool);

/// Accepts plain HTTP connections for [`serve_connections`].
async fn accept_plain(
    listener: tokio::net::TcpListener,
    ready: tokio::sync::mpsc::Sender<Accepted<tokio::net::TcpStream>>,
    shutdown: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = shutdown.cancelled() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                // Looked at now, before it waits for a place: what it sent by then.
                let arriving = crate::conns::arriving(&stream, crate::conns::First::Http);
                if ready.send((stream, peer, arriving)).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                // Usually out of file descriptors: back off instead of spinning.
                if let Some(suppressed) =
                    meshdns_xfr::throttle::PEER_WARNINGS.admit("accept", "http")
                {
                    warn!(error = %e, suppressed, "HTTP accept failed");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Serves each connection `incoming` hands over, at most `limits.max_connections` at once
/// (shedding the one idle the longest), until `shutdown`; then closes them gracefully.
async fn serve_connections<Io>(
    mut incoming: tokio::sync::mpsc::Receiver<Accepted<Io>>,
    service: Service,
    limits: HttpLimits,
    (listener, metrics): (HttpListener, Arc<DnsMetrics>),
    shutdown: CancellationToken,
) where
    Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let registry = crate::conns::Registry::new();
    let tasks = TaskTracker::new();
    loop {
        let (io, peer, arriving) = tokio::select! {
            c = incoming.recv() => match c { Some(c) => c, None => break },
            () = shutdown.cancelled() => break,
        };
        let shed = || metrics.http_closed(listener, HttpClose::Shed);
        if !registry
            .admit(limits.max_connections, &shutdown, shed)
            .await
        {
            break;
        }
        let conn = Arc::new(registry.open(&shutdown, arriving));
        let (service, metrics) = (service.clone(), metrics.clone());
        tasks.spawn(async move {
            metrics.http_opened(listener);
            let idle = serve_connection(
                io,
                peer,
                service,
                &conn,
                limits.idle_timeout,
                metrics.clone(),
            )
            .await;
            if idle {
                metrics.http_closed(listener, HttpClose::Idle);
            }
            metrics.http_ended(listener);
        });
    }
    tasks.close();
    tasks.wait().await;
}

/// One HTTP/1.1 or HTTP/2 connection, until it ends, is asked to close (shed or shutdown), or
/// has had no request in progress for `idle`; returns whether it was closed for being idle.
/// Memory per connection is bounded: HTTP/1.1 buffers at most 64 KiB, HTTP/2 takes at most 64
/// streams at once with 16 KiB of headers each, and bodies are limited by the router.
///
/// A handler that panics (a bug) is answered 500, logged and counted in `metrics`
/// (`meshdns_http_panics_total`): no request ever ends in a connection closed without a word.
async fn serve_connection<Io>(
    io: Io,
    peer: SocketAddr,
    service: Service,
    conn: &Arc<crate::conns::Conn>,
    idle: Duration,
    metrics: Arc<DnsMetrics>,
) -> bool
where
    Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use tower::ServiceExt as _;
    let service = {
        let conn = conn.clone();
        hyper::service::service_fn(move |req: axum::http::Request<hyper::body::Incoming>| {
            let (service, busy) = (service.clone(), conn.request());
            let metrics = metrics.clone();
            async move {
                if declared_length(req.headers()).is_some_and(|n| n > MAX_BODY as u64) {
                    let refused = (
                        StatusCode::PAYLOAD_TOO_LARGE,
                        [(header::CONNECTION, "close")],
                        format!("the body is larger than {MAX_BODY} bytes\n"),
                    );
                    return Ok(refused.into_response());
                }
                // For a panic's log line (a clone of the URI shares its bytes).
                let (method, uri) = (req.method().clone(), req.uri().clone());
                let handled: Pin<Box<dyn Future<Output = Response> + Send>> = match service.put {
                    Some(put) if crate::relay::FastPut::key(&req).is_some() => {
                        Box::pin(async move { put.serve(peer, req).await })
                    }
                    _ => {
                        let mut req = req.map(axum::body::Body::new);
                        req.extensions_mut()
                            .insert(axum::extract::ConnectInfo(peer));
                        Box::pin(async move {
                            match service.router.oneshot(req).await {
                                Ok(response) => response,
                                Err(never) => match never {},
                            }
                        })
                    }
                };
                let response = match tokio::time::timeout(idle, CatchPanic(handled)).await {
                    Ok(Ok(response)) => response,
                    Ok(Err(panic)) => {
                        metrics.http_panic();
                        error!(%peer, %method, path = %uri.path().escape_debug(), panic = %panic, "HTTP handler panicked; answered 500");
                        (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            [(header::CONNECTION, "close")],
                            "internal error: the request could not be answered (logged)\n",
                        )
                            .into_response()
                    }
                    Err(_) => (
                        StatusCode::REQUEST_TIMEOUT,
                        "the request was not received and answered in time\n",
                    )
                        .into_response(),
                };
                drop(busy);
                Ok::<_, std::convert::Infallible>(response)
            }
        })
    };
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(idle)
        .max_buf_size(64 * 1024);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(64)
        .max_header_list_size(16 * 1024);
    let served = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(served);
    let idle_closed = loop {
        let left = conn.idle_for().map_or(idle, |d| idle.saturating_sub(d));
        tokio::select! {
            r = served.as_mut() => {
                if let Err(e) = r {
                    debug!(%peer, error = %e, "HTTP connection ended with an error");
                }
                return false;
            }
            () = conn.close.cancelled() => break false,
            () = tokio::time::sleep(left.max(Duration::from_millis(10))) => {
                if conn.idle_for().is_some_and(|d| d >= idle) {
                    break true;
                }
            }
        }
    };
    // Finish what is in progress (a request being answered), then close; a peer that does
    // not read is not waited for long.
    served.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(Duration::from_secs(1), served).await;
    idle_closed
}

/// A future whose panic is caught and returned as its message: a handler's bug answers its
/// own request with 500 instead of taking the connection's task (and every request on it)
/// down. The future is never polled again after a panic.
struct CatchPanic<F>(F);

impl<F: Future + Unpin> Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.0;
        match std::panic::catch_unwind(AssertUnwindSafe(|| Pin::new(&mut *inner).poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

/// What a panic said, when it said it as text.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

/// The request's `Content-Length`, when it gives one.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// At most this many TLS handshakes in progress on the HTTPS listener. At the cap the oldest
/// is abandoned for the new one (as DoT sheds its longest idle connection, through the same
/// [`crate::conns::Registry`]): handshakes are never busy, so a new connection always gets in,
/// and silent clients cannot keep a fresh one out.
pub const MAX_HANDSHAKES: usize = 256;

type TlsStream = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;

/// Accepts HTTPS connections and runs their handshakes ([`crate::tls::handshake`]) in tasks of
/// their own, each bounded by the handshake timeout and shed at [`MAX_HANDSHAKES`]; completed
/// ones go to [`serve_connections`].
async fn handshakes(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    certs: Arc<Certificates>,
    (idle, metrics): (Duration, Arc<DnsMetrics>),
    ready: tokio::sync::mpsc::Sender<Accepted<TlsStream>>,
    shutdown: CancellationToken,
) {
    let pending = crate::conns::Registry::new();
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Usually out of file descriptors: back off instead of spinning.
                    if let Some(suppressed) =
                        meshdns_xfr::throttle::PEER_WARNINGS.admit("accept", "https")
                    {
                        warn!(error = %e, suppressed, "HTTPS accept failed");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => return,
        };
        let shed = || metrics.http_closed(HttpListener::Https, HttpClose::Shed);
        if !pending.admit(MAX_HANDSHAKES, &shutdown, shed).await {
            return;
        }
        let arriving = crate::conns::arriving(&stream, crate::conns::First::Tls);
        let handshake = pending.open(&shutdown, arriving);
        let _ = stream.set_nodelay(true);
        let (acceptor, certs, ready) = (acceptor.clone(), certs.clone(), ready.clone());
        tokio::spawn(async move {
            let first = crate::conns::First::Tls;
            crate::conns::first_message(&stream, &handshake, first).await;
            let done = crate::tls::handshake(
                &acceptor,
                stream,
                idle,
                &handshake.close,
                Listener::Https,
                &certs.metrics,
            )
            .await;
            drop(handshake);
            match done {
                Ok(Some(tls)) => {
                    if tls.get_ref().1.alpn_protocol() == Some(ACME_TLS_ALPN) {
                        return; // a TLS-ALPN-01 validation: the handshake was the answer
                    }
                    // What it sent after the handshake is in rustls's hands or on its way:
                    // an ordinary new connection (its handshake had its grace).
                    let _ = ready.send((tls, peer, false)).await;
                }
                Ok(None) => debug!(%peer, "HTTPS handshake abandoned (shed or shutting down)"),
                Err(e) => debug!(%peer, error = %e, "HTTPS handshake failed"),
            }
        });
    }
}
