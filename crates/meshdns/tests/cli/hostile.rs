//! Hostile clients against the real binary: what they may spend (log lines, connections,
//! threads) is bounded, and the counters stay exact.

use std::net::UdpSocket;
use std::time::Duration;

use crate::*;

/// 5,000 NOTIFYs from an address that may not notify: each is answered REFUSED and counted,
/// and the log gets one line for the cause (then one per 10 s with the number left out), not
/// 5,000.
#[test]
fn a_notify_flood_is_counted_exactly_and_logged_once_per_interval() {
    let dir = tempfile::tempdir().unwrap();
    let m = Meshdns::serve(&[
        "--secondary",
        "example.org=127.0.0.2:9",
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--http",
        "127.0.0.1:0",
    ]);
    let zone: meshdns_zone::Name = "example.org.".parse().unwrap();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    const FLOOD: u64 = 5000;
    let mut buf = [0u8; 512];
    let started = std::time::Instant::now();
    for id in 0..FLOOD {
        let q = meshdns_xfr::notify::request(id as u16, &zone, &[0; 22], 60, None, 0);
        socket.send_to(&q, m.dns).unwrap();
        let (n, _) = socket.recv_from(&mut buf).expect("every NOTIFY is answered");
        let reply = meshdns_xfr::message::parse(&buf[..n]).unwrap();
        assert_eq!(reply.rcode(), 5, "REFUSED: 127.0.0.1 is not the primary");
    }
    let (_, page) = m.get("/metrics");
    assert_eq!(
        metric(&page, "meshdns_notify_received_total{outcome=\"not_allowed\"}"),
        FLOOD
    );
    let lines = m
        .log_text()
        .lines()
        .filter(|l| l.contains("NOTIFY from an address that is not the zone's primary"))
        .count();
    // One line per 10 s interval the flood spans (it takes a second or two).
    let intervals = 1 + started.elapsed().as_secs() as usize / 10;
    assert!(
        (1..=intervals + 1).contains(&lines),
        "{lines} lines for {FLOOD} NOTIFYs:\n{}",
        m.log_text()
    );
}
