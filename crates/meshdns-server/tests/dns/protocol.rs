//! Wire-level behaviours: malformed packets, opcodes, compression, TCP, IPv6, and hickory's
//! real resolver.

use std::time::Duration;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use hickory_resolver::Resolver;
use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use meshdns_server::ServerConfig;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::behaviour::yaml_fixture;
use crate::support::*;

fn raw_query(flags: u16, qdcount: u16, question: &[u8], arcount: u16, extra: &[u8]) -> Vec<u8> {
    let mut p = vec![0xAB, 0xCD];
    p.extend_from_slice(&flags.to_be_bytes());
    p.extend_from_slice(&qdcount.to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 0]);
    p.extend_from_slice(&arcount.to_be_bytes());
    p.extend_from_slice(question);
    p.extend_from_slice(extra);
    p
}

const WWW_A: &[u8] = b"\x03www\x07example\x03org\x00\x00\x01\x00\x01";

#[tokio::test]
async fn malformed_queries_get_formerr_and_responses_are_dropped() {
    let s = TestServer::start(yaml_fixture()).await;
    let short = Duration::from_millis(300);
    // Too short for a header: dropped.
    assert_eq!(udp_raw_wait(s.udp, &[1, 2, 3], short).await, None);
    // A response (QR=1) sent to us: dropped, never reflected.
    assert_eq!(
        udp_raw_wait(s.udp, &raw_query(0x8000, 1, WWW_A, 0, &[]), short).await,
        None
    );
    // Two questions: FORMERR, no question echoed.
    let r = udp_raw_wait(
        s.udp,
        &raw_query(0, 2, &[WWW_A, WWW_A].concat(), 0, &[]),
        WAIT,
    )
    .await
    .unwrap();
    let m = Message::from_vec(&r).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::FormErr);
    assert_eq!(m.metadata.id, 0xABCD);
    // A question cut short: FORMERR.
    let r = udp_raw_wait(s.udp, &raw_query(0, 1, &WWW_A[..10], 0, &[]), WAIT)
        .await
        .unwrap();
    assert_eq!(
        Message::from_vec(&r).unwrap().metadata.response_code,
        ResponseCode::FormErr
    );
    // A label longer than 63 (reserved label type): FORMERR.
    let r = udp_raw_wait(
        s.udp,
        &raw_query(0, 1, b"\x50abc\x00\x00\x01\x00\x01", 0, &[]),
        WAIT,
    )
    .await
    .unwrap();
    assert_eq!(r[3] & 0x0F, 1);
    // An OPT record whose length runs past the end: FORMERR with the question echoed.
    let r = udp_raw_wait(
        s.udp,
        &raw_query(0, 1, WWW_A, 1, &[0, 0, 41, 4, 0, 0, 0, 0, 0, 0, 9]),
        WAIT,
    )
    .await
    .unwrap();
    let m = Message::from_vec(&r).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::FormErr);
    assert_eq!(m.queries.len(), 1);
    // Two OPT records: FORMERR (RFC 6891 §6.1.1).
    let opt = [0u8, 0, 41, 4, 0, 0, 0, 0, 0, 0, 0];
    let r = udp_raw_wait(
        s.udp,
        &raw_query(0, 1, WWW_A, 2, &[opt, opt].concat()),
        WAIT,
    )
    .await
    .unwrap();
    assert_eq!(
        Message::from_vec(&r).unwrap().metadata.response_code,
        ResponseCode::FormErr
    );
    // QTYPE OPT: FORMERR.
    let r = udp_raw_wait(
        s.udp,
        &raw_query(
            0,
            1,
            b"\x03www\x07example\x03org\x00\x00\x29\x00\x01",
            0,
            &[],
        ),
        WAIT,
    )
    .await
    .unwrap();
    assert_eq!(
        Message::from_vec(&r).unwrap().metadata.response_code,
        ResponseCode::FormErr
    );
    // Still serving afterwards.
    let r = udp(s.udp, &query("www.example.org.", RecordType::A)).await;
    assert_eq!(r.answers.len(), 2);
    assert!(
        s.metrics
            .render_string()
            .contains("meshdns_dns_dropped_total{transport=\"udp\"} 2")
    );
    s.stop().await;
}

#[tokio::test]
async fn other_opcodes_get_notimp_and_other_classes_refused() {
    let s = TestServer::start(yaml_fixture()).await;
    for opcode in [1u16, 2, 4, 5] {
        let r = udp_raw_wait(s.udp, &raw_query(opcode << 11, 1, WWW_A, 0, &[]), WAIT)
            .await
            .unwrap();
        let m = Message::from_vec(&r).unwrap();
        assert_eq!(
            m.metadata.response_code,
            ResponseCode::NotImp,
            "opcode {opcode}"
        );
        assert_eq!(u8::from(m.metadata.op_code), opcode as u8, "opcode echoed");
    }
    let chaos = b"\x07version\x04bind\x00\x00\x10\x00\x03";
    let r = udp_raw_wait(s.udp, &raw_query(0, 1, chaos, 0, &[]), WAIT)
        .await
        .unwrap();
    assert_eq!(
        Message::from_vec(&r).unwrap().metadata.response_code,
        ResponseCode::Refused
    );
    s.stop().await;
}

#[tokio::test]
async fn answers_echo_id_flags_and_compress_owner_names() {
    let s = TestServer::start(yaml_fixture()).await;
    // RD and CD set by the client are echoed; RA and AD stay clear.
    let r = udp_raw_wait(s.udp, &raw_query(0x0110, 1, WWW_A, 0, &[]), WAIT)
        .await
        .unwrap();
    assert_eq!(&r[0..2], &[0xAB, 0xCD]);
    assert_eq!(r[2], 0x85, "QR, AA, RD");
    assert_eq!(r[3], 0x10, "CD echoed, RA/AD clear, NOERROR");
    // Question at 12..33; each answer owner is a 2-byte pointer to offset 12.
    let q_end = 12 + WWW_A.len();
    assert_eq!(&r[12..q_end], WWW_A);
    assert_eq!(&r[q_end..q_end + 2], &[0xC0, 0x0C]);
    let second = q_end + 2 + 10 + 4;
    assert_eq!(&r[second..second + 2], &[0xC0, 0x0C]);
    assert_eq!(r.len(), q_end + 2 * (2 + 10 + 4), "no byte wasted");
    s.stop().await;
}

#[tokio::test]
async fn tcp_serves_several_queries_per_connection_in_order() {
    let s = TestServer::start(yaml_fixture()).await;
    let mut conn = TcpStream::connect(s.tcp).await.unwrap();
    // Pipeline three queries in one write, then read three answers in order.
    let names = ["www.example.org.", "nope.example.org.", "mx.example.org."];
    let mut wire = Vec::new();
    let mut ids = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let q = query(
            n,
            if i == 2 {
                RecordType::MX
            } else {
                RecordType::A
            },
        );
        ids.push(q.metadata.id);
        let b = q.to_vec().unwrap();
        wire.extend_from_slice(&(b.len() as u16).to_be_bytes());
        wire.extend_from_slice(&b);
    }
    conn.write_all(&wire).await.unwrap();
    let mut codes = Vec::new();
    for id in ids {
        let m = Message::from_vec(&read_frame(&mut conn).await.unwrap()).unwrap();
        assert_eq!(m.metadata.id, id);
        codes.push(m.metadata.response_code);
    }
    assert_eq!(
        codes,
        [
            ResponseCode::NoError,
            ResponseCode::NXDomain,
            ResponseCode::NoError
        ]
    );
    // And the connection is still usable.
    let r = tcp_on(&mut conn, &query("www.example.org.", RecordType::AAAA)).await;
    assert_eq!(r.answers.len(), 1);
    s.stop().await;
}

#[tokio::test]
async fn idle_tcp_connections_are_closed() {
    let mut setup = yaml_fixture();
    setup.config = ServerConfig {
        tcp_idle_timeout: Duration::from_millis(200),
        ..setup.config
    };
    let s = TestServer::start(setup).await;
    let mut conn = TcpStream::connect(s.tcp).await.unwrap();
    let _ = tcp_on(&mut conn, &query("www.example.org.", RecordType::A)).await;
    // Nothing more is sent: the server closes the connection (EOF), within the test's bound.
    let eof = tokio::time::timeout(WAIT, read_frame(&mut conn))
        .await
        .expect("closed before the bound");
    assert!(eof.is_none());
    s.stop().await;
}

#[tokio::test]
async fn at_the_connection_cap_the_longest_idle_connection_makes_room() {
    let mut setup = yaml_fixture();
    setup.config = ServerConfig {
        tcp_max_connections: 1,
        ..setup.config
    };
    let s = TestServer::start(setup).await;
    let mut first = TcpStream::connect(s.tcp).await.unwrap();
    let _ = tcp_on(&mut first, &query("www.example.org.", RecordType::A)).await;
    // The cap is one and the first connection idles: the second is served, the first closed.
    let mut second = TcpStream::connect(s.tcp).await.unwrap();
    let answered = tokio::time::timeout(
        WAIT,
        tcp_on(&mut second, &query("www.example.org.", RecordType::A)),
    )
    .await
    .expect("served at once");
    assert_eq!(answered.answers.len(), 2);
    let closed = tokio::time::timeout(WAIT, read_frame(&mut first))
        .await
        .expect("the idle connection is closed, not left hanging");
    assert!(closed.is_none(), "closed without a reply");
    s.stop().await;
}

#[tokio::test]
async fn serves_ipv6_and_ipv4_on_the_same_port_number() {
    let mut setup = yaml_fixture();
    setup.config.listen = vec!["127.0.0.1:0".parse().unwrap(), "[::1]:0".parse().unwrap()];
    setup.config.udp_sockets = 3;
    let s = TestServer::start(setup).await;
    let addrs = s.handle.udp_addrs().to_vec();
    assert_eq!(addrs.len(), 2);
    assert!(addrs[1].is_ipv6());
    for addr in &addrs {
        let r = udp(*addr, &query("www.example.org.", RecordType::AAAA)).await;
        assert_eq!(answers(&r), ["www.example.org. 300 AAAA 2001:db8::1"]);
        let r = tcp(*addr, &query("www.example.org.", RecordType::A)).await;
        assert_eq!(r.answers.len(), 2);
    }
    // Many queries spread over the SO_REUSEPORT sockets all get answers.
    for i in 0..30 {
        let r = udp(addrs[i % 2], &query("www.example.org.", RecordType::A)).await;
        assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    }
    s.stop().await;
}

/// A resolver using UDP with TCP fallback (as stub resolvers do), or TCP only.
fn resolver_for(addr: std::net::SocketAddr, tcp_only: bool) -> Resolver<TokioRuntimeProvider> {
    let mut conns = if tcp_only {
        vec![ConnectionConfig::tcp()]
    } else {
        vec![ConnectionConfig::udp(), ConnectionConfig::tcp()]
    };
    for c in &mut conns {
        c.port = addr.port();
    }
    let ns = NameServerConfig::new(addr.ip(), true, conns);
    let mut builder = Resolver::builder_with_config(
        ResolverConfig::from_name_servers(vec![ns]),
        TokioRuntimeProvider::default(),
    );
    builder.options_mut().cache_size = 0;
    builder.build().unwrap()
}

#[tokio::test]
async fn hickory_resolver_resolves_addresses_text_and_negatives() {
    let s = TestServer::start(yaml_fixture()).await;
    for tcp_only in [false, true] {
        let resolver = resolver_for(s.udp, tcp_only);
        let ips = resolver.lookup_ip("chain.example.org.").await.unwrap();
        let mut got: Vec<String> = ips.iter().map(|ip| ip.to_string()).collect();
        got.sort();
        assert_eq!(got, ["192.0.2.1", "192.0.2.2", "2001:db8::1"]);
        let txt = resolver
            .lookup("_iroh.abc.nodes.example.org.", RecordType::TXT)
            .await
            .unwrap();
        let texts: Vec<String> = txt.answers().iter().map(|r| r.data.to_string()).collect();
        assert_eq!(texts, ["relay=https://relay.example./"]);
        let err = resolver
            .lookup("nope.example.org.", RecordType::A)
            .await
            .unwrap_err();
        assert!(err.is_nx_domain(), "{err}");
        let err = resolver
            .lookup("www.example.org.", RecordType::MX)
            .await
            .unwrap_err();
        assert!(
            err.is_no_records_found() && !err.is_nx_domain(),
            "NODATA is not NXDOMAIN: {err}"
        );
        // The resolver retries a truncated UDP answer over TCP and gets all 30 strings.
        let big = resolver
            .lookup("big.example.org.", RecordType::TXT)
            .await
            .unwrap();
        assert_eq!(big.answers().len(), 30);
    }
    s.stop().await;
}
