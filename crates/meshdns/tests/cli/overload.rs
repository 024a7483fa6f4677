//! Connection floods against the real server: hundreds of idle, silent-TLS and trickling
//! connections, eight times the cap, while fresh TCP queries and UDP are still answered. At
//! the cap the connection idle the longest is closed for the new one.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::*;

#[test]
fn idle_and_trickling_connections_cannot_keep_fresh_queries_out() {
    let dir = tempfile::tempdir().unwrap();
    let zone = write(dir.path(), "example.org.zone", SMALL_ZONE);
    let m = Meshdns::serve(&[
        "--zone-file",
        &zone,
        "--http",
        "127.0.0.1:0",
        "--dot",
        "127.0.0.1:0",
        "--tls-self-signed",
        "--tcp-max-connections",
        "50",
        "--tcp-idle-timeout",
        "60s",
    ]);
    let dot = m.dot.unwrap();
    let mut held = Vec::new();
    // 250 idle TCP connections, 100 that never start their TLS handshake, and 50 that send a
    // length and then one byte of the query at a time, slower than anyone would.
    for _ in 0..250 {
        held.push(TcpStream::connect(m.dns).unwrap());
    }
    for _ in 0..100 {
        held.push(TcpStream::connect(dot).unwrap());
    }
    for _ in 0..50 {
        let mut s = TcpStream::connect(m.dns).unwrap();
        s.write_all(&[0, 33, 0x12]).unwrap();
        held.push(s);
    }
    // Fresh TCP queries are answered (dig's own 2 s timeout, one try), and UDP too.
    for _ in 0..5 {
        let out = dig(m.dns, &["www.example.org", "A", "+tcp"]);
        assert!(out.contains("192.0.2.1"), "TCP: {out}");
    }
    let out = dig(m.dns, &["www.example.org", "A"]);
    assert!(out.contains("192.0.2.1"), "UDP: {out}");

    // The oldest were closed to make room: reading one shows the close at once.
    let mut first = held.remove(0);
    first
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 1];
    assert_eq!(first.read(&mut buf).unwrap_or(0), 0, "closed by the server");
    assert!(started.elapsed() < Duration::from_secs(5));

    let (_, metrics) = m.get("/metrics");
    let value = |name: &str| metric(&metrics, name);
    assert!(
        value("meshdns_dns_tcp_connections_open ") <= 51,
        "{metrics}"
    );
    assert!(
        value("meshdns_dns_tcp_connections_shed_total ") >= 350,
        "{metrics}"
    );
}

/// Reads what the server sends until it closes (or 8 s pass): the status line's code, if any.
fn status_before_close(s: &mut TcpStream) -> Option<u16> {
    s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    text.split_whitespace().nth(1).and_then(|c| c.parse().ok())
}

/// `curl -sk URL` with a 5 s limit: (HTTP status, body).
fn curl_k(url: &str, extra: &[&str]) -> (u16, String) {
    let out = std::process::Command::new("curl")
        .args(["-sk", "--max-time", "5", "-w", "\n%{http_code}"])
        .args(extra)
        .arg(url)
        .output()
        .expect("curl is installed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

#[test]
fn http_and_https_shed_idle_connections_time_out_tricklers_and_refuse_big_bodies_early() {
    let dir = tempfile::tempdir().unwrap();
    let zone = write(dir.path(), "example.org.zone", SMALL_ZONE);
    let m = Meshdns::serve(&[
        "--zone-file",
        &zone,
        "--http",
        "127.0.0.1:0",
        "--https",
        "127.0.0.1:0",
        "--tls-self-signed",
        "--http-max-connections",
        "20",
        "--http-idle-timeout",
        "2s",
    ]);
    let (http, https) = (m.http.unwrap(), m.https.unwrap());
    let doh = "/dns-query?dns=q80BAAABAAAAAAAAA3d3dwdleGFtcGxlA29yZwAAAQAB";

    // 100 idle connections on each listener (those on HTTPS never start their handshake), and
    // 20 on HTTP that send a request's headers one byte at a time.
    let mut held = Vec::new();
    for _ in 0..100 {
        held.push(TcpStream::connect(http).unwrap());
        held.push(TcpStream::connect(https).unwrap());
    }
    let mut tricklers: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = TcpStream::connect(http).unwrap();
            s.write_all(b"GET /healthz HTTP/1.1\r\nHo").unwrap();
            s
        })
        .collect();
    // Fresh clients are served on both, over HTTP/1.1 and HTTP/2.
    for _ in 0..5 {
        assert_eq!(m.get("/healthz"), (200, "ok\n".to_string()));
        let (code, _) = curl_k(&format!("https://{https}{doh}"), &["--http2"]);
        assert_eq!(code, 200, "DoH over HTTPS");
        let (code, _) = curl_k(&format!("https://{https}/healthz"), &["--http1.1"]);
        assert_eq!(code, 200, "HTTPS/1.1");
    }
    // A trickler gets no further than the idle timeout: closed (hyper may say 408 first).
    let started = Instant::now();
    let status = status_before_close(&mut tricklers[19]);
    assert!(matches!(status, None | Some(408)), "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(8));

    // A body declared larger than the limit is refused before it is sent.
    for (path, method) in [("/dns-query", "POST"), ("/pkarr/x", "PUT")] {
        let mut s = TcpStream::connect(http).unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: meshdns\r\nContent-Type: application/dns-message\r\nContent-Length: 10000000\r\n\r\n"
        );
        s.write_all(head.as_bytes()).unwrap();
        assert_eq!(status_before_close(&mut s), Some(413), "{method} {path}");
    }
    // A body that trickles in gets 408 at the idle timeout.
    let mut s = TcpStream::connect(http).unwrap();
    s.write_all(b"POST /dns-query HTTP/1.1\r\nHost: m\r\nContent-Type: application/dns-message\r\nContent-Length: 33\r\n\r\n\x12")
        .unwrap();
    assert_eq!(status_before_close(&mut s), Some(408));

    let (_, metrics) = m.get("/metrics");
    let value = |name: &str| metric(&metrics, name);
    let shed = "meshdns_http_connections_closed_total{listener=\"http\",reason=\"shed\"} ";
    let idle = "meshdns_http_connections_closed_total{listener=\"http\",reason=\"idle\"} ";
    assert!(value(shed) >= 100, "{metrics}");
    assert!(value(idle) >= 1, "{metrics}");
    assert!(
        value("meshdns_http_connections_open{listener=\"http\"} ") <= 21,
        "{metrics}"
    );
    drop(held);
}
