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
        let (n, _) = socket
            .recv_from(&mut buf)
            .expect("every NOTIFY is answered");
        let reply = meshdns_xfr::message::parse(&buf[..n]).unwrap();
        assert_eq!(reply.rcode(), 5, "REFUSED: 127.0.0.1 is not the primary");
    }
    let (_, page) = m.get("/metrics");
    assert_eq!(
        metric(
            &page,
            "meshdns_notify_received_total{outcome=\"not_allowed\"}"
        ),
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

/// Connects over TCP and sends queries without ever reading the replies, until the kernel's
/// buffers on both sides are full and the server's write of a reply blocks.
pub fn stalled_reader(dns: std::net::SocketAddr, qname: &str) -> std::net::TcpStream {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(dns).unwrap();
    let mut q = meshdns_xfr::message::MessageWriter::new(
        7,
        0x0100,
        Some((
            meshdns_zone::Name::parse(qname, None).unwrap().wire(),
            16,
            1,
        )),
    )
    .finish();
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.append(&mut q);
    let batch: Vec<u8> = framed.repeat(256);
    stream.set_nonblocking(true).unwrap();
    let mut stuck_since: Option<std::time::Instant> = None;
    let mut sent = 0usize;
    // Until writes have been refused for half a second straight: both buffers are full.
    while stuck_since.is_none_or(|t| t.elapsed() < Duration::from_millis(500)) {
        match stream.write(&batch[sent % batch.len()..]) {
            Ok(n) => {
                sent += n;
                stuck_since = None;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                stuck_since.get_or_insert_with(std::time::Instant::now);
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(sent > 100_000, "only {sent} bytes went out");
    stream
}

/// SIGTERM with a client that never reads its replies connected: the server exits 0 once
/// --shutdown-grace has passed (before, it waited for as long as the client stayed).
#[test]
fn sigterm_with_a_client_that_never_reads_exits_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let records = write(dir.path(), "r.yaml", TXT_ZONE);
    let m = Meshdns::serve(&[
        "--records",
        &records,
        "--tcp-idle-timeout",
        "1h",
        "--shutdown-grace",
        "1s",
    ]);
    let _client = stalled_reader(m.dns, "big.example.org.");
    let status = m.terminate();
    assert!(status.success(), "{status}");
}

/// A zone whose `big` name has a large TXT answer (about 1 KB), so that replies fill buffers
/// fast.
pub const TXT_ZONE: &str = "zones:\n  - origin: example.org\n    records:\n      - {name: big, type: TXT, values: [\"a-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890\", \"b-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890-1234567890\"]}\n";
