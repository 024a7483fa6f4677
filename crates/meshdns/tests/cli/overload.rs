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
