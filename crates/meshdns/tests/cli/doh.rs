//! DNS over HTTPS (RFC 8484) on the HTTP listener: GET and POST answered by the same
//! `answer()` as UDP and TCP.

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};

use crate::*;

const ZONE: &str = "$ORIGIN example.org.\n$TTL 60\n@ SOA ns1 hostmaster 1 3600 600 86400 30\n@ NS ns1\nwww A 192.0.2.1\nwww AAAA 2001:db8::1\n";

fn query(name: &str, t: RecordType) -> Vec<u8> {
    let mut m = Message::new(0, MessageType::Query, OpCode::Query);
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), t));
    m.to_vec().unwrap()
}

#[test]
fn doh_answers_get_and_post() {
    let dir = tempfile::tempdir().unwrap();
    let zone = write(dir.path(), "example.org.zone", ZONE);
    let m = Meshdns::serve(&["--zone-file", &zone, "--http", "127.0.0.1:0"]);
    let http_addr = m.http.unwrap();

    let q = data_encoding::BASE64URL_NOPAD.encode(&query("www.example.org.", RecordType::A));
    let (status, head, body) = http(http_addr, "GET", &format!("/dns-query?dns={q}"), None, &[]);
    assert_eq!(status, 200);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/dns-message"),
        "{head}"
    );
    let r = Message::from_vec(&body).unwrap();
    assert_eq!(r.metadata.id, 0);
    assert!(r.metadata.authoritative);
    assert_eq!(r.answers.len(), 1);
    assert_eq!(r.answers[0].data.to_string(), "192.0.2.1");

    let (status, _, body) = http(
        http_addr,
        "POST",
        "/dns-query",
        Some("application/dns-message"),
        &query("nope.example.org.", RecordType::A),
    );
    assert_eq!(status, 200);
    let r = Message::from_vec(&body).unwrap();
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(r.authorities.len(), 1, "SOA in the negative answer");

    assert_eq!(
        http(http_addr, "GET", "/dns-query", None, &[]).0,
        400,
        "no ?dns="
    );
    assert_eq!(
        http(http_addr, "GET", "/dns-query?dns=%%%", None, &[]).0,
        400,
        "not base64url"
    );
    assert_eq!(
        http(http_addr, "POST", "/dns-query", Some("text/plain"), b"x").0,
        415
    );
    let mut response = query("www.example.org.", RecordType::A);
    response[2] |= 0x80;
    assert_eq!(
        http(
            http_addr,
            "POST",
            "/dns-query",
            Some("application/dns-message"),
            &response
        )
        .0,
        400,
        "QR=1"
    );

    let (_, metrics) = m.get("/metrics");
    assert!(
        metrics
            .contains(r#"meshdns_dns_queries_total{transport="doh",qtype="A",rcode="NOERROR"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics
            .contains(r#"meshdns_dns_queries_total{transport="doh",qtype="A",rcode="NXDOMAIN"} 1"#),
        "{metrics}"
    );
}

#[test]
fn no_doh_turns_the_endpoint_off() {
    let dir = tempfile::tempdir().unwrap();
    let zone = write(dir.path(), "example.org.zone", ZONE);
    let m = Meshdns::serve(&["--zone-file", &zone, "--http", "127.0.0.1:0", "--no-doh"]);
    let q = data_encoding::BASE64URL_NOPAD.encode(&query("www.example.org.", RecordType::A));
    assert_eq!(
        http(
            m.http.unwrap(),
            "GET",
            &format!("/dns-query?dns={q}"),
            None,
            &[]
        )
        .0,
        404
    );
}
