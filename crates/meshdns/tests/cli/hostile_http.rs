//! Hostile clients of the HTTP and HTTPS listeners (issue 26): connections that never say a
//! word.

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use iroh_base::SecretKey;

use crate::*;

/// `curl -sk URL`, bounded at 20 s only so that a broken build fails instead of hanging:
/// (HTTP status, response headers, body).
fn curl(url: &str, extra: &[&str]) -> (u16, String, String) {
    let headers = tempfile::NamedTempFile::new().unwrap();
    let out = std::process::Command::new("curl")
        .args(["-sk", "--max-time", "20", "-w", "\n%{http_code}", "-D"])
        .arg(headers.path())
        .args(extra)
        .arg(url)
        .output()
        .expect("curl is installed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    let head = std::fs::read_to_string(headers.path()).unwrap_or_default();
    (code.trim().parse().unwrap_or(0), head, body.to_string())
}

/// 300 connections to each listener that send nothing, with an idle timeout of an hour: the
/// idle timeout cannot be what lets a fresh client in. Before, the 257th HTTPS connection
/// waited for one of 256 handshake slots, that is for a silent client's timeout (30 s by
/// default); now the oldest stalled handshake is shed, as on DoT.
#[test]
fn silent_connections_hold_up_neither_https_nor_http() {
    let dir = tempfile::tempdir().unwrap();
    let zone = write(dir.path(), "example.org.zone", SMALL_ZONE);
    let data = tempfile::tempdir().unwrap();
    let m = Meshdns::serve(&[
        "--zone-file",
        &zone,
        "--http",
        "127.0.0.1:0",
        "--https",
        "127.0.0.1:0",
        "--tls-self-signed",
        "--http-idle-timeout",
        "1h",
        "--pkarr",
        "dns.example.org",
        "--data-dir",
        data.path().to_str().unwrap(),
    ]);
    let (http, https) = (m.http.unwrap(), m.https.unwrap());
    let mut silent: Vec<TcpStream> = Vec::new();
    for _ in 0..300 {
        silent.push(TcpStream::connect(https).unwrap());
        silent.push(TcpStream::connect(http).unwrap());
    }
    let started = Instant::now();
    let (code, _, body) = curl(&format!("https://{https}/healthz"), &["--http1.1"]);
    let healthz = started.elapsed();
    assert_eq!((code, body.as_str()), (200, "ok\n"), "/healthz over HTTPS");
    let doh = "/dns-query?dns=q80BAAABAAAAAAAAA3d3dwdleGFtcGxlA29yZwAAAQAB";
    let (code, _, _) = curl(&format!("https://{https}{doh}"), &["--http2"]);
    assert_eq!(code, 200, "DoH over HTTPS/2");
    let key = SecretKey::generate().public().to_z32();
    let (code, _, _) = curl(&format!("https://{https}/pkarr/{key}"), &[]);
    assert_eq!(code, 404, "pkarr over HTTPS: an unknown key");
    assert_eq!(m.get("/healthz"), (200, "ok\n".to_string()), "plain HTTP");
    let (code, _, _) = curl(&format!("http://{http}{doh}"), &[]);
    assert_eq!(code, 200, "DoH over plain HTTP");
    eprintln!("/healthz over HTTPS behind 300 silent connections: {healthz:?}");

    // Every silent connection is still held by this client, and none could have timed out:
    // the oldest handshakes were shed to make room.
    assert_eq!(silent.len(), 600);
    let (_, metrics) = m.get("/metrics");
    let shed = "meshdns_http_connections_closed_total{listener=\"https\",reason=\"shed\"} ";
    assert!(metric(&metrics, shed) >= 300 - 256, "{metrics}");

    // A stalled handshake has a timeout of its own, far below the idle timeout: a new silent
    // connection is closed without a byte (the bound only keeps a broken build from hanging).
    let mut probe = TcpStream::connect(https).unwrap();
    probe
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    let read = probe.read_to_end(&mut got);
    assert!(
        read.is_ok() && got.is_empty(),
        "closed by the server: {read:?} {got:?}"
    );
    eprintln!(
        "a silent HTTPS connection closed after {:?}",
        started.elapsed()
    );
    drop(silent);
}
