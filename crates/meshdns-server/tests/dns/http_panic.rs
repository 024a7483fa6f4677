//! A panic in an HTTP handler (a bug: none is known) never closes a connection without a
//! response: it is answered 500, logged and counted, and the server goes on serving. Before,
//! the connection's task died with it and the client saw the connection close.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use meshdns_server::DnsMetrics;
use meshdns_server::http::{HttpLimits, HttpState, router, serve_http};
use meshdns_server::relay::{PkarrRelay, Refusal, Stored};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::support::WAIT;

/// A relay with a bug: every request panics.
struct Panicking;

impl PkarrRelay for Panicking {
    fn put<'a>(
        &'a self,
        _: IpAddr,
        _: &'a str,
        _: &'a [u8],
        _: Option<u64>,
    ) -> Pin<Box<dyn Future<Output = Result<(), Refusal>> + Send + 'a>> {
        Box::pin(async { panic!("a bug in the relay's put") })
    }

    fn get<'a>(
        &'a self,
        _: IpAddr,
        _: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<Option<Stored>, Refusal>> + Send + 'a>> {
        Box::pin(async { panic!("a bug in the relay's get") })
    }
}

/// One HTTP/1.1 request on `stream`, then what came back until the server closed or `WAIT`
/// passed: the status (`None`: closed without a response).
async fn request(addr: SocketAddr, method: &str, path: &str) -> Option<u16> {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: m\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(WAIT, s.read_to_end(&mut raw)).await;
    let text = String::from_utf8_lossy(&raw);
    text.split_whitespace().nth(1).and_then(|c| c.parse().ok())
}

#[tokio::test]
async fn a_panicking_handler_is_answered_500_and_counted() {
    let metrics = Arc::new(DnsMetrics::default());
    let state = HttpState {
        metrics: Arc::new(|| panic!("a bug in /metrics")),
        readiness: Arc::new(|| panic!("a bug in /readyz")),
        doh: None,
        pkarr: Some(Arc::new(Panicking)),
        trusted_proxies: Arc::from(Vec::new()),
        acme_http01: None,
        replication: None,
    };
    let shutdown = CancellationToken::new();
    let tracker = TaskTracker::new();
    let limits = HttpLimits {
        max_connections: 16,
        idle_timeout: Duration::from_secs(30),
    };
    let addr = serve_http(
        "127.0.0.1:0".parse().unwrap(),
        router(state, true),
        limits,
        metrics.clone(),
        shutdown.clone(),
        &tracker,
    )
    .await
    .unwrap();
    let key = "/pkarr/yryyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy";
    for (method, path) in [
        ("GET", key),
        ("PUT", key),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
    ] {
        assert_eq!(
            request(addr, method, path).await,
            Some(500),
            "{method} {path}"
        );
    }
    assert_eq!(request(addr, "GET", "/healthz").await, Some(200));
    let page = metrics.render_string();
    assert!(page.contains("meshdns_http_panics_total 4"), "{page}");
    // Every connection ends and is counted (its task may finish just after the client saw
    // the close: the bound only keeps a broken build from hanging).
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let page = metrics.render_string();
        if page.contains("meshdns_http_connections_open{listener=\"http\"} 0") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{page}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    shutdown.cancel();
    tracker.close();
    tracker.wait().await;
}
