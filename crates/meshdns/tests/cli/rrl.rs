//! Response rate limiting against the real server: a flood from one /24 on loopback gets about
//! the configured rate of answers plus every second limited one truncated, while another /24
//! and an exempt prefix are answered in full, and dig in the flooded prefix still gets its
//! answer (over TCP, after a truncated reply).

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use crate::*;

fn query(id: u16) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    q.extend_from_slice(b"\x03www\x07example\x03org\x00\x00\x01\x00\x01");
    q
}

/// Sends `n` queries from `from` in bursts of 25 (so a busy test machine does not overflow the
/// server's socket buffer, which would lose queries before any rate limit) while a second
/// thread reads the replies (so ours does not overflow either) until none comes for 2 s:
/// (full answers, truncated replies).
fn flood(from: &str, server: SocketAddr, n: u16) -> (usize, usize) {
    let sock = UdpSocket::bind((from, 0)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let reader = sock.try_clone().unwrap();
    let replies = std::thread::spawn(move || {
        let (mut full, mut truncated) = (0, 0);
        let mut buf = [0u8; 1500];
        while let Ok(len) = reader.recv(&mut buf) {
            assert!(len >= 12);
            if buf[2] & 0x02 != 0 {
                assert_eq!(
                    u16::from_be_bytes([buf[6], buf[7]]),
                    0,
                    "a slip carries no answer"
                );
                truncated += 1;
            } else {
                assert_eq!(u16::from_be_bytes([buf[6], buf[7]]), 1);
                full += 1;
            }
        }
        (full, truncated)
    });
    for id in 0..n {
        sock.send_to(&query(id), server).unwrap();
        if id % 25 == 24 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    replies.join().unwrap()
}

#[test]
fn a_flooding_prefix_is_limited_while_others_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    let zone = write(dir.path(), "example.org.zone", SMALL_ZONE);
    let m = Meshdns::serve(&[
        "--zone-file",
        &zone,
        "--http",
        "127.0.0.1:0",
        "--rrl-rate",
        "20",
        "--rrl-exempt",
        "127.0.2.0/24",
    ]);
    let started = Instant::now();
    let (full, truncated) = flood("127.0.0.1", m.dns, 400);
    let seconds = started.elapsed().as_secs_f64();
    // The bucket holds 20 and refills 20 a second; the rest are limited, every second one
    // slipped (the default --rrl-slip 2).
    let allowed = 20.0 + 20.0 * seconds;
    assert!(
        (full as f64) <= allowed + 1.0 && full >= 20,
        "{full} full answers in {seconds:.2} s"
    );
    let limited = 400 - full;
    assert!(
        truncated.abs_diff(limited / 2) <= 1,
        "{truncated} truncated of {limited} limited"
    );

    // Another /24, and an exempt one, flooding just as hard: every query answered in full.
    assert_eq!(flood("127.0.1.1", m.dns, 20), (20, 0), "another /24");
    assert_eq!(flood("127.0.2.9", m.dns, 400), (400, 0), "an exempt prefix");

    // A real client in the flooded prefix gets its answer: over UDP when the bucket has
    // refilled, or over TCP after a truncated reply (dig retries by itself).
    let out = dig(m.dns, &["www.example.org", "A"]);
    assert!(out.contains("192.0.2.1"), "{out}");

    let (_, metrics) = m.get("/metrics");
    let value = |name: &str| metric(&metrics, name);
    let dropped = value(r#"meshdns_rrl_responses_total{action="dropped"}"#);
    let slipped = value(r#"meshdns_rrl_responses_total{action="slipped"}"#);
    assert!(
        slipped >= truncated as u64,
        "{slipped} slipped, {truncated} seen"
    );
    assert!(
        dropped + slipped >= limited as u64,
        "{dropped} + {slipped} of {limited}"
    );
}

#[test]
fn rate_limiting_is_off_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let zone = write(dir.path(), "example.org.zone", SMALL_ZONE);
    let m = Meshdns::serve(&["--zone-file", &zone]);
    assert_eq!(flood("127.0.0.1", m.dns, 300), (300, 0));
}
