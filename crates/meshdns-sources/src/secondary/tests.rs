//! The SOA query against a scripted primary on loopback: only the reply counts.

use std::net::SocketAddr;
use std::time::Duration;

use meshdns_xfr::message::{MessageWriter, parse};
use meshdns_xfr::tsig::{self, Algorithm, Check, Key, Signer, Verified};
use meshdns_zone::RType;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

use super::{SecondarySpec, soa_query_with, unix_now};

/// Long enough never to be reached when a valid reply comes.
const PATIENT: Duration = Duration::from_secs(10);

const ZONE: &[u8] = b"\x07example\x03org\x00";

fn spec(primary: SocketAddr, key: Option<Key>) -> SecondarySpec {
    SecondarySpec {
        origin: "example.org.".parse().unwrap(),
        primary: primary.to_string(),
        key,
    }
}

fn key(secret: &[u8]) -> Key {
    Key::new("xfr.".parse().unwrap(), Algorithm::HmacSha256, secret)
}

/// A reply to `query` (its ID and question unless changed by `edit`) with the SOA at `serial`.
fn reply(query: &[u8], serial: u32, edit: impl FnOnce(&mut Header)) -> Vec<u8> {
    let q = parse(query).unwrap();
    let mut h = Header {
        id: q.id,
        flags: 0x8400,
        qname: q.qname.clone(),
        qtype: q.qtype,
        qclass: q.qclass,
    };
    edit(&mut h);
    let mut w = MessageWriter::new(h.id, h.flags, Some((&h.qname[..], h.qtype, h.qclass)));
    let mut rd = b"\x02ns\x07example\x03org\x00\x0ahostmaster\x07example\x03org\x00".to_vec();
    for n in [serial, 60, 60, 600, 60] {
        rd.extend_from_slice(&n.to_be_bytes());
    }
    w.put_record(0, ZONE, RType::SOA, 1, 60, &rd);
    w.finish()
}

struct Header {
    id: u16,
    flags: u16,
    qname: Vec<u8>,
    qtype: u16,
    qclass: u16,
}

/// `reply` signed with `signing` over `query`'s MAC, as a primary holding `signing` signs it.
fn signed(query: &[u8], mut reply: Vec<u8>, signing: &Key) -> Vec<u8> {
    let Check::Signed(v) = tsig::check(&parse(query).unwrap(), &[key(b"secret")], unix_now())
    else {
        panic!("the SOA query is signed with the zone's key")
    };
    let v = Verified {
        key: signing.clone(),
        request_mac: v.request_mac,
    };
    Signer::reply(&v, unix_now()).sign(&mut reply, 0, &[]);
    reply
}

/// Where a scripted reply comes from.
enum From {
    /// The primary's socket (the address asked).
    Primary,
    /// Another port on the same address.
    OtherPort,
    /// Another address (127.0.0.2).
    OtherAddress,
}

/// A primary on 127.0.0.1 (UDP, and TCP on the same port) that answers the first SOA query
/// with what `script` returns for it, in order.
struct Scripted {
    udp: UdpSocket,
    tcp: TcpListener,
}

impl Scripted {
    async fn bind() -> Scripted {
        loop {
            let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            if let Ok(tcp) = TcpListener::bind(udp.local_addr().unwrap()).await {
                return Scripted { udp, tcp };
            }
        }
    }

    fn addr(&self) -> SocketAddr {
        self.udp.local_addr().unwrap()
    }

    /// Answers one query over UDP with `script`'s replies; returns the query.
    async fn answer_udp(&self, script: impl FnOnce(&[u8]) -> Vec<(From, Vec<u8>)>) -> Vec<u8> {
        let mut buf = [0u8; 1024];
        let (n, client) = self.udp.recv_from(&mut buf).await.unwrap();
        let query = buf[..n].to_vec();
        let other_port = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let other_address = UdpSocket::bind("127.0.0.2:0").await.unwrap();
        for (from, bytes) in script(&query) {
            let sock = match from {
                From::Primary => &self.udp,
                From::OtherPort => &other_port,
                From::OtherAddress => &other_address,
            };
            sock.send_to(&bytes, client).await.unwrap();
        }
        query
    }

    /// Answers one query over TCP with `script`'s reply; returns the query (empty when none
    /// came within [`PATIENT`]).
    async fn answer_tcp(&self, script: impl FnOnce(&[u8]) -> Vec<u8>) -> Vec<u8> {
        let Ok(accepted) = tokio::time::timeout(PATIENT, self.tcp.accept()).await else {
            return Vec::new();
        };
        let (mut stream, _) = accepted.unwrap();
        let len = stream.read_u16().await.unwrap();
        let mut query = vec![0u8; usize::from(len)];
        stream.read_exact(&mut query).await.unwrap();
        let reply = script(&query);
        stream.write_u16(reply.len() as u16).await.unwrap();
        stream.write_all(&reply).await.unwrap();
        query
    }
}

/// Forged replies (another ID, another question, not a response, another source) come first,
/// each saying serial 99; the primary's reply says 5. Only 5 counts: before, the first
/// datagram with the ID was taken, and the ID (time ^ pid) could be guessed.
#[tokio::test]
async fn forged_soa_replies_are_ignored_and_the_real_one_counts() {
    let primary = Scripted::bind().await;
    let spec = spec(primary.addr(), None);
    let forged = |q: &[u8]| {
        vec![
            (From::Primary, reply(q, 99, |h| h.id ^= 0x5555)),
            (
                From::Primary,
                reply(q, 99, |h| h.qname = b"\x05other\x00".to_vec()),
            ),
            (From::Primary, reply(q, 99, |h| h.qtype = RType::A.0)),
            (From::Primary, reply(q, 99, |h| h.qclass = 3)),
            (From::Primary, reply(q, 99, |h| h.flags = 0x0400)),
            (From::OtherPort, reply(q, 99, |_| {})),
            (From::OtherAddress, reply(q, 99, |_| {})),
            (From::Primary, reply(q, 5, |_| {})),
        ]
    };
    let (serial, _) = tokio::join!(
        soa_query_with(primary.addr(), &spec, PATIENT, 1),
        primary.answer_udp(forged),
    );
    assert_eq!(serial, Ok(5));
}

/// Only forged replies: the query fails when its time is up, so the zone is not refreshed (and
/// expires on time). Before, a forged "serial 5" reset the refresh timer.
#[tokio::test]
async fn only_forged_replies_fail_the_soa_query() {
    let primary = Scripted::bind().await;
    let spec = spec(primary.addr(), None);
    let forged = |q: &[u8]| {
        vec![
            (From::Primary, reply(q, 5, |h| h.qtype = RType::A.0)),
            (From::Primary, reply(q, 5, |h| h.id ^= 1)),
            (From::OtherPort, reply(q, 5, |_| {})),
        ]
    };
    let (serial, _) = tokio::join!(
        soa_query_with(primary.addr(), &spec, Duration::from_millis(300), 1),
        primary.answer_udp(forged),
    );
    let e = serial.unwrap_err();
    assert!(e.contains("no answer from"), "{e}");
}

/// TC=1: the query goes again over TCP, and the TCP reply is checked the same way.
#[tokio::test]
async fn a_truncated_reply_is_asked_again_over_tcp() {
    let primary = Scripted::bind().await;
    let spec = spec(primary.addr(), None);
    let truncated = |q: &[u8]| vec![(From::Primary, reply(q, 99, |h| h.flags |= 0x0200))];
    let (serial, udp_query, tcp_query) = tokio::join!(
        soa_query_with(primary.addr(), &spec, PATIENT, 1),
        primary.answer_udp(truncated),
        primary.answer_tcp(|q| reply(q, 5, |_| {})),
    );
    assert_eq!(serial, Ok(5));
    assert_eq!(udp_query, tcp_query, "the same query over TCP");

    // A TCP reply that is not the reply fails the query.
    let (serial, _, _) = tokio::join!(
        soa_query_with(primary.addr(), &spec, PATIENT, 1),
        primary.answer_udp(truncated),
        primary.answer_tcp(|q| reply(q, 5, |h| h.id ^= 1)),
    );
    assert!(serial.is_err(), "{serial:?}");
}

/// With the zone's key the query is signed, and only a reply signed with the key over the
/// query counts: unsigned and wrongly signed replies (serial 99) are ignored.
#[tokio::test]
async fn with_a_key_only_a_reply_signed_with_it_counts() {
    let primary = Scripted::bind().await;
    let spec = spec(primary.addr(), Some(key(b"secret")));
    let script = |q: &[u8]| {
        vec![
            (From::Primary, reply(q, 99, |_| {})),
            (
                From::Primary,
                signed(q, reply(q, 99, |_| {}), &key(b"guess")),
            ),
            (
                From::Primary,
                signed(q, reply(q, 5, |_| {}), &key(b"secret")),
            ),
        ]
    };
    let (serial, query) = tokio::join!(
        soa_query_with(primary.addr(), &spec, PATIENT, 1),
        primary.answer_udp(script),
    );
    assert_eq!(serial, Ok(5));
    assert!(
        parse(&query).unwrap().tsig().is_some(),
        "the query is signed"
    );

    // Unsigned replies only: no refresh.
    let (serial, _) = tokio::join!(
        soa_query_with(primary.addr(), &spec, Duration::from_millis(300), 1),
        primary.answer_udp(|q| vec![(From::Primary, reply(q, 5, |_| {}))]),
    );
    assert!(serial.is_err(), "{serial:?}");
}

/// A valid reply with an error rcode fails the refresh at once, as before.
#[tokio::test]
async fn a_valid_error_reply_fails_the_query() {
    let primary = Scripted::bind().await;
    let spec = spec(primary.addr(), None);
    let (serial, _) = tokio::join!(
        soa_query_with(primary.addr(), &spec, PATIENT, 1),
        primary.answer_udp(|q| vec![(From::Primary, reply(q, 5, |h| h.flags |= 5))]),
    );
    assert!(serial.unwrap_err().contains("rcode 5"));
}

/// A NOTIFY for the zone is accepted unsigned from the primary's address or an `--allow-notify`
/// prefix, and signed with the zone's key from anywhere (a primary pod whose address the
/// primary's Service name does not resolve to); its reply is signed in turn. Anything else is
/// REFUSED, and a signature that does not verify NOTAUTH.
#[tokio::test]
async fn notify_is_accepted_from_the_primary_an_allowed_prefix_or_signed_with_the_zone_key() {
    use super::{NotifyPolicy, SecondaryFeed, answer_notify};
    use meshdns_xfr::notify;
    use meshdns_xfr::tsig::ReplyVerifier;
    use std::net::IpAddr;

    let zone: meshdns_zone::Name = "example.org.".parse().unwrap();
    let k = key(b"secret");
    let feed = SecondaryFeed::new(&zone);
    *feed.primary_ips.lock().unwrap() = vec!["192.0.2.53".parse().unwrap()];
    let policy = NotifyPolicy {
        zones: vec![(feed.clone(), Some(k.clone()))],
        allow: vec!["10.1.0.0/16".parse().unwrap()],
        counts: Default::default(),
    };
    // An SOA's RDATA: two root names and five numbers.
    let soa = [0u8; 22];
    let now = unix_now();
    let rcode = |reply: Option<Vec<u8>>| parse(&reply.unwrap()).unwrap().rcode();
    let pod: IpAddr = "10.9.8.7".parse().unwrap();
    let woken = || async {
        tokio::time::timeout(PATIENT, feed.notified.notified())
            .await
            .is_ok()
    };

    let unsigned = notify::request(1, &zone, &soa, 60, None, now);
    assert_eq!(
        rcode(answer_notify(&policy, &unsigned, pod)),
        5,
        "unsigned, a stranger"
    );

    let signed = notify::request(2, &zone, &soa, 60, Some(&k), now);
    let reply = answer_notify(&policy, &signed, pod).unwrap();
    assert_eq!(
        parse(&reply).unwrap().rcode(),
        0,
        "signed with the zone's key"
    );
    assert!(woken().await, "a refresh starts");
    let Check::Signed(v) = tsig::check(&parse(&signed).unwrap(), std::slice::from_ref(&k), now)
    else {
        panic!("the NOTIFY is signed")
    };
    ReplyVerifier::new(&k, v.request_mac)
        .check(&parse(&reply).unwrap())
        .expect("the reply is signed with the zone's key");

    let forged = notify::request(3, &zone, &soa, 60, Some(&key(b"guess")), now);
    assert_eq!(
        rcode(answer_notify(&policy, &forged, pod)),
        9,
        "a bad signature: NOTAUTH"
    );

    let primary: IpAddr = "192.0.2.53".parse().unwrap();
    assert_eq!(
        rcode(answer_notify(&policy, &unsigned, primary)),
        0,
        "the primary"
    );
    assert!(woken().await);
    let allowed: IpAddr = "10.1.2.3".parse().unwrap();
    assert_eq!(
        rcode(answer_notify(&policy, &unsigned, allowed)),
        0,
        "--allow-notify"
    );
    assert!(woken().await);

    let other: meshdns_zone::Name = "example.net.".parse().unwrap();
    let elsewhere = notify::request(4, &other, &soa, 60, Some(&k), now);
    assert_eq!(
        rcode(answer_notify(&policy, &elsewhere, pod)),
        5,
        "not a zone here"
    );
}
