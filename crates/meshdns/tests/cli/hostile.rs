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

/// Reads until the server closes the connection (EOF or reset), for at most `bound`; whether
/// it closed.
fn closed_by_server(mut stream: std::net::TcpStream, bound: Duration) -> bool {
    use std::io::Read;
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = std::time::Instant::now() + bound;
    let mut buf = vec![0u8; 1 << 16];
    while std::time::Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return true, // reset
        }
    }
    false
}

/// Clients that pipeline queries and never read, as many as the cap: a fresh TCP client is
/// still answered (the stalled ones are idle while their writes wait, so one is shed), and a
/// stalled one is closed once its write has waited the idle timeout. Before, a connection was
/// busy while writing and the write had no bound: the fresh client was never answered.
#[test]
fn clients_that_never_read_hold_neither_the_tcp_slots_nor_their_connection() {
    let dir = tempfile::tempdir().unwrap();
    let records = write(dir.path(), "r.yaml", TXT_ZONE);
    let m = Meshdns::serve(&[
        "--records",
        &records,
        "--tcp-max-connections",
        "8",
        "--tcp-idle-timeout",
        "1h",
        "--http",
        "127.0.0.1:0",
    ]);
    let stalled: Vec<_> = (0..8)
        .map(|_| stalled_reader(m.dns, "big.example.org."))
        .collect();
    let fresh = dig(m.dns, &["+tcp", "big.example.org", "TXT"]);
    assert!(fresh.contains("status: NOERROR"), "{fresh}");
    let (_, page) = m.get("/metrics");
    assert!(metric(&page, "meshdns_dns_tcp_connections_shed_total ") >= 1);
    drop(stalled);
    drop(m);

    let m = Meshdns::serve(&["--records", &records, "--tcp-idle-timeout", "1s"]);
    let stalled = stalled_reader(m.dns, "big.example.org.");
    assert!(
        closed_by_server(stalled, Duration::from_secs(30)),
        "a client that never reads is closed after the idle timeout"
    );
}

/// Sends an AXFR for `zone` over a new TCP connection and reads the first reply message:
/// (the connection, its rcode).
fn axfr_started(dns: std::net::SocketAddr, zone: &str) -> (std::net::TcpStream, u8) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(dns).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let q = meshdns_xfr::message::MessageWriter::new(
        9,
        0,
        Some((
            meshdns_zone::Name::parse(zone, None).unwrap().wire(),
            252,
            1,
        )),
    )
    .finish();
    stream.write_all(&(q.len() as u16).to_be_bytes()).unwrap();
    stream.write_all(&q).unwrap();
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).unwrap();
    let mut first = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut first).unwrap();
    let rcode = first[3] & 0xF;
    (stream, rcode)
}

/// At --xfr-max-concurrent transfers in progress (clients that stopped reading), another
/// transfer request is REFUSED and counted; once they go, transfers are served again. Before,
/// each stalled transfer held a blocking thread with no limit (520 clients: 519 threads).
#[test]
fn transfers_past_the_cap_are_refused_and_the_slots_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut zone = String::from(
        "$ORIGIN big.test.\n$TTL 300\n@ SOA ns hostmaster 1 3600 600 86400 60\n@ NS ns\nns A 192.0.2.1\n",
    );
    for i in 0..300_000u32 {
        let [_, a, b, c] = i.to_be_bytes();
        zone.push_str(&format!("h{i} A 10.{a}.{b}.{c}\n"));
    }
    let file = write(dir.path(), "big.test.zone", &zone);
    let m = Meshdns::serve(&[
        "--zone-file",
        &format!("big.test={file}"),
        "--allow-transfer",
        "127.0.0.0/8",
        "--xfr-max-concurrent",
        "2",
        "--tcp-idle-timeout",
        "1h",
        "--http",
        "127.0.0.1:0",
    ]);
    let stalled: Vec<_> = (0..2)
        .map(|_| {
            let (stream, rcode) = axfr_started(m.dns, "big.test.");
            assert_eq!(rcode, 0, "the transfer starts");
            stream
        })
        .collect();
    let (_, rcode) = axfr_started(m.dns, "big.test.");
    assert_eq!(rcode, 5, "REFUSED past --xfr-max-concurrent");
    let (_, page) = m.get("/metrics");
    assert_eq!(
        metric(&page, "meshdns_xfr_refused_total{reason=\"busy\"}"),
        1
    );
    drop(stalled);
    // The stalled clients are gone: their slots come back once their writers see it.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, rcode) = axfr_started(m.dns, "big.test.");
        if rcode == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the slots never came back"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `meshdns ARGS` and waits for it to exit (20 s at most): (exit code, stderr).
fn exit_of(args: &[&str]) -> (Option<i32>, String) {
    let mut child = bin()
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return (None, "still running after 20 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A named pipe where the TSIG key file or the certificate should be: refused at once, naming
/// the file, instead of blocking start-up (or the certificate reload) in `open` forever.
#[test]
fn a_fifo_as_the_key_file_or_the_certificate_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let fifo = fifo.to_str().unwrap();
    let (code, err) = exit_of(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--tsig-keys",
        fifo,
        "--allow-transfer-key",
        "k.",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("not a regular file") && err.contains(fifo),
        "{err}"
    );
    let (code, err) = exit_of(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--dot",
        "127.0.0.1:0",
        "--tls-cert",
        fifo,
        "--tls-key",
        fifo,
    ]);
    assert!(code.is_some_and(|c| c != 0), "{code:?} {err}");
    assert!(
        err.contains("not a regular file") && err.contains(fifo),
        "{err}"
    );
}
