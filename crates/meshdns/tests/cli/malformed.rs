//! Malformed packets against the real server, over UDP and TCP: each case once answered wrongly
//! (NOERROR, no reply, REFUSED) and now gets FORMERR, and the server answers the next query.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use crate::*;

/// A query for www.example.org A with ID 0x4d44 and `tail` appended (no records counted).
fn query_then(tail: &[u8], arcount: u8) -> Vec<u8> {
    let mut q = vec![0x4d, 0x44, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, arcount];
    q.extend_from_slice(b"\x03www\x07example\x03org\x00\x00\x01\x00\x01");
    q.extend_from_slice(tail);
    q
}

/// An OPT record whose RDATA holds `options`.
fn opt(options: &[u8]) -> Vec<u8> {
    let mut r = vec![0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0];
    r.extend_from_slice(&(options.len() as u16).to_be_bytes());
    r.extend_from_slice(options);
    r
}

fn udp(server: SocketAddr, packet: &[u8]) -> Option<Vec<u8>> {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    sock.send_to(packet, server).unwrap();
    let mut buf = [0u8; 65_535];
    sock.recv(&mut buf).ok().map(|n| buf[..n].to_vec())
}

/// Sends one frame over a new TCP connection: `Some(reply)`, or `None` when the server closed
/// the connection without one.
fn tcp(server: SocketAddr, packet: &[u8]) -> Option<Vec<u8>> {
    let mut s = TcpStream::connect(server).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut frame = (packet.len() as u16).to_be_bytes().to_vec();
    frame.extend_from_slice(packet);
    s.write_all(&frame).unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).ok()?;
    let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut reply).ok()?;
    Some(reply)
}

fn rcode(reply: &[u8]) -> u8 {
    reply[3] & 0xF
}

/// A reply to query ID 0x4d44: a response with that ID and `rc`.
fn assert_reply(reply: Option<Vec<u8>>, rc: u8, what: &str) {
    let reply = reply.unwrap_or_else(|| panic!("{what}: no reply"));
    assert_eq!(&reply[..2], &[0x4d, 0x44], "{what}: ID echoed");
    assert!(reply[2] & 0x80 != 0, "{what}: QR set");
    assert_eq!(rcode(&reply), rc, "{what}: rcode");
}

/// A small deterministic generator (xorshift64*), so a failure replays.
struct Rng(u64);
impl Rng {
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| {
                self.0 ^= self.0 >> 12;
                self.0 ^= self.0 << 25;
                self.0 ^= self.0 >> 27;
                (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
            })
            .collect()
    }
}

#[test]
fn malformed_queries_get_formerr_over_udp_and_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let zone = write(dir.path(), "example.org.zone", SMALL_ZONE);
    let m = Meshdns::serve(&["--zone-file", &zone]);
    let good = query_then(&[], 0);
    assert_reply(udp(m.dns, &good), 0, "a good query");

    // An EDNS option whose length runs past the end of OPT's RDATA (was NOERROR).
    let overrun = query_then(&opt(&[0, 10, 0, 200, 1, 2, 3, 4]), 1);
    assert_reply(udp(m.dns, &overrun), 1, "option overrun, UDP");
    assert_reply(tcp(m.dns, &overrun), 1, "option overrun, TCP");
    // A truncated option header, and well-formed options, for contrast.
    assert_reply(
        udp(m.dns, &query_then(&opt(&[0, 10, 0]), 1)),
        1,
        "half an option",
    );
    assert_reply(
        udp(
            m.dns,
            &query_then(&opt(&[0, 10, 0, 2, 1, 2, 0, 12, 0, 0]), 1),
        ),
        0,
        "a cookie and padding",
    );

    // A valid header and question followed by 4 KiB of garbage (was no reply: the datagram is
    // longer than the receive buffer), and by 1 KiB (was NOERROR: trailing bytes ignored).
    let mut rng = Rng(0x5eed);
    let big = query_then(&rng.bytes(4096), 0);
    assert_reply(
        udp(m.dns, &big),
        1,
        "4 KiB of garbage after the question, UDP",
    );
    assert_reply(
        tcp(m.dns, &big),
        1,
        "4 KiB of garbage after the question, TCP",
    );
    let trailing = query_then(&rng.bytes(1024), 0);
    assert_reply(udp(m.dns, &trailing), 1, "1 KiB of trailing garbage, UDP");

    // A 64 KiB TCP frame: a question then garbage (was an answer), and pure garbage (was
    // REFUSED when it happened to parse): FORMERR, NOTIMP for a garbage opcode, or a close;
    // never an answer.
    let mut frame = query_then(&[], 0);
    frame.extend(rng.bytes(65_535 - frame.len()));
    assert_reply(tcp(m.dns, &frame), 1, "a 64 KiB frame after the question");
    for i in 0..64 {
        let mut junk = rng.bytes(65_535);
        junk[2] &= 0x7f; // a query, so it is not silently dropped as a response
        if i % 2 == 0 {
            junk[2] &= 0x87; // opcode QUERY
        }
        if let Some(reply) = tcp(m.dns, &junk) {
            assert!(
                matches!(rcode(&reply), 1 | 4),
                "64 KiB of garbage #{i}: rcode {}",
                rcode(&reply)
            );
        }
    }

    // Still serving.
    assert_reply(udp(m.dns, &good), 0, "a good query after all that");
    assert_reply(tcp(m.dns, &good), 0, "a good TCP query after all that");
}
