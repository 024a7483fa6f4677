//! Every behaviour of Tailscale's k8s-nameserver, and each of its defects fixed.

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

use crate::support::*;

const RECORDS: &str = r#"{
  "version": "v1alpha1",
  "ip4": {
    "web.tailnet-1.ts.net": ["100.64.0.1", "100.64.0.2"],
    "MixedCase.tailnet-1.ts.net.": ["100.64.0.3"],
    "bad..ts.net": ["100.64.0.4"],
    "badip.tailnet-1.ts.net": ["999.1.1.1", "100.64.0.5"]
  },
  "ip6": {
    "web.tailnet-1.ts.net": ["fd7a:115c:a1e0::1"],
    "v6only.tailnet-1.ts.net": ["fd7a:115c:a1e0::2"],
    "wrongfamily.tailnet-1.ts.net": ["100.64.0.9"]
  }
}"#;

#[tokio::test]
async fn records_json_answers_a_and_aaaa_with_the_default_ttl() {
    let s = TestServer::start(Setup::file("records.json", RECORDS)).await;
    let r = udp(s.udp, &query("web.tailnet-1.ts.net.", RecordType::A)).await;
    assert_eq!(
        answers(&r),
        [
            "web.tailnet-1.ts.net. 5 A 100.64.0.1",
            "web.tailnet-1.ts.net. 5 A 100.64.0.2"
        ]
    );
    assert!(r.metadata.authoritative);
    let r = udp(s.udp, &query("web.tailnet-1.ts.net.", RecordType::AAAA)).await;
    assert_eq!(
        answers(&r),
        ["web.tailnet-1.ts.net. 5 AAAA fd7a:115c:a1e0::1"]
    );
    s.stop().await;
}

#[tokio::test]
async fn names_match_case_insensitively() {
    let s = TestServer::start(Setup::file("records.json", RECORDS)).await;
    for name in [
        "mixedcase.tailnet-1.ts.net.",
        "MIXEDCASE.TAILNET-1.TS.NET.",
        "MixedCase.tailnet-1.ts.net.",
    ] {
        let r = udp(s.udp, &query(name, RecordType::A)).await;
        assert_eq!(answers(&r), [format!("{name} 5 A 100.64.0.3")]);
    }
    s.stop().await;
}

#[tokio::test]
async fn a_for_an_ipv6_only_name_is_nodata_with_soa() {
    let s = TestServer::start(Setup::file("records.json", RECORDS)).await;
    let r = udp(s.udp, &query("v6only.tailnet-1.ts.net.", RecordType::A)).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(r.answers.is_empty());
    assert_eq!(
        authority(&r),
        ["ts.net. 5 SOA ns.ts.net. hostmaster.ts.net. ".to_string()
            + &soa_serial(&r)
            + " 3600 600 604800 5"]
    );
    let r = udp(s.udp, &query("missing.tailnet-1.ts.net.", RecordType::A)).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(r.authorities.len(), 1, "SOA in the negative answer");
    // The tailnet itself is an empty non-terminal: NODATA, not NXDOMAIN.
    let r = udp(s.udp, &query("tailnet-1.ts.net.", RecordType::A)).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    s.stop().await;
}

fn soa_serial(r: &hickory_proto::op::Message) -> String {
    r.authorities[0]
        .data
        .to_string()
        .split(' ')
        .nth(2)
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn other_types_are_answered_not_notimp() {
    let s = TestServer::start(Setup::file("records.json", RECORDS)).await;
    for t in [
        RecordType::TXT,
        RecordType::MX,
        RecordType::SRV,
        RecordType::CNAME,
        RecordType::PTR,
    ] {
        let r = udp(s.udp, &query("web.tailnet-1.ts.net.", t)).await;
        assert_eq!(r.metadata.response_code, ResponseCode::NoError, "{t}");
    }
    let r = udp(s.udp, &query("ts.net.", RecordType::SOA)).await;
    assert_eq!(r.answers.len(), 1);
    let r = udp(s.udp, &query("ts.net.", RecordType::NS)).await;
    assert_eq!(answers(&r), ["ts.net. 5 NS ns.ts.net."]);
    s.stop().await;
}

#[tokio::test]
async fn invalid_entries_are_skipped_and_the_rest_served() {
    let s = TestServer::start(Setup::file("records.json", RECORDS)).await;
    let r = udp(s.udp, &query("badip.tailnet-1.ts.net.", RecordType::A)).await;
    assert_eq!(answers(&r), ["badip.tailnet-1.ts.net. 5 A 100.64.0.5"]);
    let r = udp(
        s.udp,
        &query("wrongfamily.tailnet-1.ts.net.", RecordType::AAAA),
    )
    .await;
    assert_eq!(
        r.metadata.response_code,
        ResponseCode::NXDomain,
        "an IPv4 address in ip6 is not served"
    );
    let counters = s.status.counters();
    assert_eq!(
        counters[0].1.skipped_entries, 3,
        "bad name, bad IPv4, IPv4 in ip6"
    );
    assert_eq!(counters[0].1.reloads_ok, 1);
    s.stop().await;
}

#[tokio::test]
async fn names_outside_the_served_zones_are_skipped() {
    let mut setup = Setup::file(
        "records.json",
        r#"{"version":"v1alpha1","ip4":{"a.mesh.internal":["10.0.0.1"],"b.ts.net":["10.0.0.2"]}}"#,
    );
    setup.zones = vec!["mesh.internal.".into()];
    let s = TestServer::start(setup).await;
    let r = udp(s.udp, &query("a.mesh.internal.", RecordType::A)).await;
    assert_eq!(answers(&r), ["a.mesh.internal. 5 A 10.0.0.1"]);
    let r = udp(s.udp, &query("b.ts.net.", RecordType::A)).await;
    assert_eq!(
        r.metadata.response_code,
        ResponseCode::Refused,
        "ts.net. is not served when --zone says otherwise"
    );
    assert_eq!(s.status.counters()[0].1.skipped_entries, 1);
    s.stop().await;
}

#[tokio::test]
async fn many_addresses_use_edns_and_truncate_without_it() {
    let ips: Vec<String> = (0..60).map(|i| format!("\"100.64.1.{i}\"")).collect();
    let json = format!(
        r#"{{"version":"v1alpha1","ip4":{{"many.ts.net":[{}]}}}}"#,
        ips.join(",")
    );
    let s = TestServer::start(Setup::file("records.json", &json)).await;
    let r = udp(s.udp, &query("many.ts.net.", RecordType::A)).await;
    assert!(r.metadata.truncation, "60 A records exceed 512 bytes");
    let r = udp(s.udp, &query_edns("many.ts.net.", RecordType::A, 1232)).await;
    assert!(!r.metadata.truncation);
    assert_eq!(r.answers.len(), 60);
    assert!(r.edns.is_some());
    s.stop().await;
}
