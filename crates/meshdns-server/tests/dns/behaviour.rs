//! The normative DNS behaviours (DESIGN.md "DNS behaviour"), written once and run against the
//! same zone loaded from each records format.

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use meshdns_sources::FileKind;

use crate::support::*;

fn big_txt(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("big-{i:02}-{}", "x".repeat(52)))
        .collect()
}

/// The battery zone in meshdns YAML.
pub fn yaml_fixture() -> Setup {
    let big: Vec<String> = big_txt(30).iter().map(|s| format!("\"{s}\"")).collect();
    let medium: Vec<String> = big_txt(10).iter().map(|s| format!("\"{s}\"")).collect();
    let yaml = format!(
        r#"
zones:
  - origin: example.org.
    ttl: 300
    soa: {{ mname: ns1.example.org., rname: hostmaster.example.org., serial: 2024, refresh: 3600, retry: 600, expire: 86400, minimum: 60, ttl: 3600 }}
    ns: [ns1.example.org.]
    records:
      - {{ name: ns1, type: A, value: 192.0.2.53 }}
      - {{ name: www, type: A, values: [192.0.2.1, 192.0.2.2] }}
      - {{ name: www, type: AAAA, value: "2001:db8::1" }}
      - {{ name: alias, type: CNAME, value: www }}
      - {{ name: chain, type: CNAME, value: alias }}
      - {{ name: dangling, type: CNAME, value: missing }}
      - {{ name: outside, type: CNAME, value: www.example.com. }}
      - {{ name: _iroh.abc.nodes, type: TXT, value: "relay=https://relay.example./" }}
      - {{ name: big, type: TXT, values: [{big}] }}
      - {{ name: medium, type: TXT, values: [{medium}] }}
      - {{ name: "*.wild", type: A, value: 192.0.2.99 }}
      - {{ name: real.wild, type: TXT, value: "real" }}
      - {{ name: mx, type: MX, value: "10 mail.example.org." }}
      - {{ name: srv, type: SRV, value: "1 2 443 www.example.org." }}
      - {{ name: caa, type: CAA, value: '0 issue "ca.example"' }}
      - {{ name: ptr, type: PTR, value: www.example.org. }}
      - {{ name: child, type: NS, value: ns.child.example.org. }}
      - {{ name: ns.child, type: A, value: 192.0.2.77 }}
"#,
        big = big.join(", "),
        medium = medium.join(", ")
    );
    Setup::file("zone.yaml", &yaml)
}

/// The same zone as an RFC 1035 zone file.
pub fn zonefile_fixture() -> Setup {
    let big: Vec<String> = big_txt(30)
        .iter()
        .map(|s| format!("big TXT \"{s}\""))
        .collect();
    let medium: Vec<String> = big_txt(10)
        .iter()
        .map(|s| format!("medium TXT \"{s}\""))
        .collect();
    let text = format!(
        r#"$ORIGIN example.org.
$TTL 300
@ 3600 IN SOA ns1.example.org. hostmaster.example.org. ( 2024 3600 600 86400 60 )
@ NS ns1
ns1 A 192.0.2.53
www A 192.0.2.1
www A 192.0.2.2
www AAAA 2001:db8::1
alias CNAME www
chain CNAME alias
dangling CNAME missing
outside CNAME www.example.com.
_iroh.abc.nodes TXT "relay=https://relay.example./"
{big}
{medium}
*.wild A 192.0.2.99
real.wild TXT real
mx MX 10 mail.example.org.
srv SRV 1 2 443 www.example.org.
caa CAA 0 issue "ca.example"
ptr PTR www.example.org.
child NS ns.child.example.org.
ns.child A 192.0.2.77
"#,
        big = big.join("\n"),
        medium = medium.join("\n")
    );
    Setup::files(vec![(
        "example.org.zone".into(),
        text,
        FileKind::ZoneFile {
            origin: None,
            views: Vec::new(),
        },
    )])
}

const SOA: &str =
    "example.org. 60 SOA ns1.example.org. hostmaster.example.org. 2024 3600 600 86400 60";

pub async fn positive_answer_is_authoritative(setup: Setup) {
    let s = TestServer::start(setup).await;
    let r = udp(s.udp, &query("www.example.org.", RecordType::A)).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(r.metadata.authoritative, "AA set");
    assert!(!r.metadata.recursion_available, "RA clear");
    assert!(!r.metadata.truncation);
    assert_eq!(
        answers(&r),
        [
            "www.example.org. 300 A 192.0.2.1",
            "www.example.org. 300 A 192.0.2.2"
        ]
    );
    assert!(r.authorities.is_empty());
    s.stop().await;
}

pub async fn question_case_is_echoed(setup: Setup) {
    let s = TestServer::start(setup).await;
    let r = udp(s.udp, &query("WwW.ExAmPlE.OrG.", RecordType::AAAA)).await;
    assert_eq!(r.queries[0].name().to_ascii(), "WwW.ExAmPlE.OrG.");
    assert_eq!(answers(&r), ["WwW.ExAmPlE.OrG. 300 AAAA 2001:db8::1"]);
    s.stop().await;
}

pub async fn nxdomain_has_the_zone_soa(setup: Setup) {
    let s = TestServer::start(setup).await;
    let r = udp(s.udp, &query("nope.example.org.", RecordType::A)).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    assert!(r.metadata.authoritative);
    assert!(r.answers.is_empty());
    assert_eq!(authority(&r), [SOA]);
    // Below an existing name that has nothing under it: still NXDOMAIN.
    let r = udp(s.udp, &query("deeper.www.example.org.", RecordType::A)).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    s.stop().await;
}

pub async fn nodata_for_a_missing_type(setup: Setup) {
    let s = TestServer::start(setup).await;
    for t in [
        RecordType::MX,
        RecordType::TXT,
        RecordType::SRV,
        RecordType::Unknown(999),
    ] {
        let r = udp(s.udp, &query("www.example.org.", t)).await;
        assert_eq!(r.metadata.response_code, ResponseCode::NoError, "{t}");
        assert!(r.metadata.authoritative);
        assert!(r.answers.is_empty(), "{t}");
        assert_eq!(authority(&r), [SOA], "{t}");
    }
    s.stop().await;
}

pub async fn empty_non_terminals_are_nodata(setup: Setup) {
    let s = TestServer::start(setup).await;
    for name in [
        "abc.nodes.example.org.",
        "nodes.example.org.",
        "wild.example.org.",
    ] {
        for t in [RecordType::A, RecordType::TXT] {
            let r = udp(s.udp, &query(name, t)).await;
            assert_eq!(
                r.metadata.response_code,
                ResponseCode::NoError,
                "{name} {t}"
            );
            assert!(r.answers.is_empty());
            assert_eq!(authority(&r), [SOA]);
        }
    }
    let r = udp(
        s.udp,
        &query("_iroh.abc.nodes.example.org.", RecordType::TXT),
    )
    .await;
    assert_eq!(
        answers(&r),
        ["_iroh.abc.nodes.example.org. 300 TXT relay=https://relay.example./"]
    );
    s.stop().await;
}

pub async fn out_of_zone_is_refused(setup: Setup) {
    let s = TestServer::start(setup).await;
    for name in ["example.com.", "org.", ".", "xexample.org."] {
        let r = udp(s.udp, &query(name, RecordType::A)).await;
        assert_eq!(r.metadata.response_code, ResponseCode::Refused, "{name}");
        assert!(!r.metadata.authoritative);
        assert!(r.answers.is_empty() && r.authorities.is_empty());
    }
    s.stop().await;
}

pub async fn cname_chains_are_followed_in_zone(setup: Setup) {
    let s = TestServer::start(setup).await;
    let r = udp(s.udp, &query("chain.example.org.", RecordType::A)).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert_eq!(
        answers(&r),
        [
            "chain.example.org. 300 CNAME alias.example.org.",
            "alias.example.org. 300 CNAME www.example.org.",
            "www.example.org. 300 A 192.0.2.1",
            "www.example.org. 300 A 192.0.2.2",
        ]
    );
    // The target does not exist: NXDOMAIN for the last name (RFC 6604), chain kept.
    let r = udp(s.udp, &query("dangling.example.org.", RecordType::A)).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(
        answers(&r),
        ["dangling.example.org. 300 CNAME missing.example.org."]
    );
    assert_eq!(authority(&r), [SOA]);
    // Out of zone target: the CNAME alone, for the resolver to chase.
    let r = udp(s.udp, &query("outside.example.org.", RecordType::A)).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert_eq!(
        answers(&r),
        ["outside.example.org. 300 CNAME www.example.com."]
    );
    // Asking for the CNAME itself does not chase.
    let r = udp(s.udp, &query("alias.example.org.", RecordType::CNAME)).await;
    assert_eq!(
        answers(&r),
        ["alias.example.org. 300 CNAME www.example.org."]
    );
    s.stop().await;
}

pub async fn every_served_type_is_answered(setup: Setup) {
    let s = TestServer::start(setup).await;
    let cases = [
        (
            "mx.example.org.",
            RecordType::MX,
            "mx.example.org. 300 MX 10 mail.example.org.",
        ),
        (
            "srv.example.org.",
            RecordType::SRV,
            "srv.example.org. 300 SRV 1 2 443 www.example.org.",
        ),
        (
            "caa.example.org.",
            RecordType::CAA,
            "caa.example.org. 300 CAA 0 issue \"ca.example\"",
        ),
        (
            "ptr.example.org.",
            RecordType::PTR,
            "ptr.example.org. 300 PTR www.example.org.",
        ),
        (
            "example.org.",
            RecordType::NS,
            "example.org. 300 NS ns1.example.org.",
        ),
        (
            "example.org.",
            RecordType::SOA,
            "example.org. 3600 SOA ns1.example.org. hostmaster.example.org. 2024 3600 600 86400 60",
        ),
    ];
    for (name, t, want) in cases {
        let r = udp(s.udp, &query(name, t)).await;
        assert_eq!(answers(&r), [want], "{name} {t}");
        assert!(r.metadata.authoritative);
    }
    s.stop().await;
}

pub async fn wildcards_synthesise_only_missing_names(setup: Setup) {
    let s = TestServer::start(setup).await;
    let r = udp(s.udp, &query("Anything.wild.example.org.", RecordType::A)).await;
    assert_eq!(answers(&r), ["Anything.wild.example.org. 300 A 192.0.2.99"]);
    let r = udp(
        s.udp,
        &query("anything.wild.example.org.", RecordType::AAAA),
    )
    .await;
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(r.answers.is_empty());
    // An existing name is not covered by the wildcard.
    let r = udp(s.udp, &query("real.wild.example.org.", RecordType::A)).await;
    assert!(r.answers.is_empty());
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    s.stop().await;
}

pub async fn delegations_refer_with_glue(setup: Setup) {
    let s = TestServer::start(setup).await;
    let r = udp(s.udp, &query("host.child.example.org.", RecordType::A)).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(!r.metadata.authoritative, "a referral is not authoritative");
    assert!(r.answers.is_empty());
    assert_eq!(
        authority(&r),
        ["child.example.org. 300 NS ns.child.example.org."]
    );
    assert_eq!(additional(&r), ["ns.child.example.org. 300 A 192.0.2.77"]);
    s.stop().await;
}

pub async fn additional_section_carries_in_zone_target_addresses(setup: Setup) {
    let s = TestServer::start(setup).await;
    let r = udp(s.udp, &query("example.org.", RecordType::NS)).await;
    assert_eq!(answers(&r), ["example.org. 300 NS ns1.example.org."]);
    assert_eq!(additional(&r), ["ns1.example.org. 300 A 192.0.2.53"]);
    let r = udp(s.udp, &query("srv.example.org.", RecordType::SRV)).await;
    assert_eq!(
        additional(&r),
        [
            "www.example.org. 300 A 192.0.2.1",
            "www.example.org. 300 A 192.0.2.2",
            "www.example.org. 300 AAAA 2001:db8::1"
        ]
    );
    // An out-of-zone MX target gets nothing.
    let r = udp(s.udp, &query("mx.example.org.", RecordType::MX)).await;
    assert!(r.additionals.is_empty());
    // DS at a cut is the parent's to answer: NODATA, authoritative (RFC 4035 §3.1.4.1).
    let r = udp(s.udp, &query("child.example.org.", RecordType::DS)).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(r.metadata.authoritative && r.answers.is_empty());
    assert_eq!(authority(&r), [SOA]);
    s.stop().await;
}

pub async fn edns_is_echoed_and_badvers_refused(setup: Setup) {
    let s = TestServer::start(setup).await;
    let r = udp(s.udp, &query_edns("www.example.org.", RecordType::A, 4096)).await;
    let edns = r.edns.as_ref().expect("OPT echoed");
    assert_eq!(edns.max_payload(), 1232);
    assert_eq!(edns.version(), 0);
    let r = udp(s.udp, &query("www.example.org.", RecordType::A)).await;
    assert!(r.edns.is_none(), "no OPT without one in the query");
    let mut q = query_edns("www.example.org.", RecordType::A, 1232);
    q.edns.as_mut().unwrap().set_version(1);
    let r = udp(s.udp, &q).await;
    assert_eq!(
        u16::from(r.metadata.response_code),
        16,
        "BADVERS (hickory names code 16 BADSIG)"
    );
    assert!(r.answers.is_empty());
    assert_eq!(r.edns.as_ref().unwrap().version(), 0);
    s.stop().await;
}

pub async fn large_answers_truncate_over_udp_and_fit_over_tcp(setup: Setup) {
    let s = TestServer::start(setup).await;
    // 10 strings of 60 bytes: over 512, under 1232.
    let r = udp(s.udp, &query("medium.example.org.", RecordType::TXT)).await;
    assert!(r.metadata.truncation, "TC without EDNS");
    assert!(r.answers.is_empty());
    assert_eq!(r.queries.len(), 1);
    let r = udp(
        s.udp,
        &query_edns("medium.example.org.", RecordType::TXT, 1232),
    )
    .await;
    assert!(!r.metadata.truncation);
    assert_eq!(r.answers.len(), 10);
    // 30 strings: over 1232 even with EDNS, and over the client's 4096 only on our side.
    let r = udp(
        s.udp,
        &query_edns("big.example.org.", RecordType::TXT, 4096),
    )
    .await;
    assert!(r.metadata.truncation, "our payload limit of 1232 applies");
    assert!(r.edns.is_some(), "OPT kept in a truncated answer");
    let r = tcp(s.tcp, &query("big.example.org.", RecordType::TXT)).await;
    assert!(!r.metadata.truncation);
    assert_eq!(r.answers.len(), 30);
    let truncated = s.metrics.render_string();
    assert!(
        truncated.contains("meshdns_dns_truncated_total 2"),
        "{truncated}"
    );
    s.stop().await;
}

pub async fn any_gets_one_rrset(setup: Setup) {
    let s = TestServer::start(setup).await;
    let r = udp(s.udp, &query("www.example.org.", RecordType::ANY)).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NoError);
    assert!(r.metadata.authoritative);
    assert_eq!(
        answers(&r),
        [
            "www.example.org. 300 A 192.0.2.1",
            "www.example.org. 300 A 192.0.2.2"
        ]
    );
    let r = udp(s.udp, &query("nodes.example.org.", RecordType::ANY)).await;
    assert!(r.answers.is_empty());
    assert_eq!(authority(&r), [SOA]);
    let r = udp(s.udp, &query("nope.example.org.", RecordType::ANY)).await;
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    s.stop().await;
}

pub async fn zone_transfers_are_refused(setup: Setup) {
    let s = TestServer::start(setup).await;
    for t in [RecordType::AXFR, RecordType::IXFR] {
        let r = tcp(s.tcp, &query("example.org.", t)).await;
        assert_eq!(r.metadata.response_code, ResponseCode::Refused, "{t}");
    }
    s.stop().await;
}

macro_rules! battery {
    ($module:ident, $fixture:path) => {
        mod $module {
            use super::*;
            battery!(@tests $fixture;
                positive_answer_is_authoritative, question_case_is_echoed, nxdomain_has_the_zone_soa,
                nodata_for_a_missing_type, empty_non_terminals_are_nodata, out_of_zone_is_refused,
                cname_chains_are_followed_in_zone, every_served_type_is_answered,
                wildcards_synthesise_only_missing_names, delegations_refer_with_glue,
                additional_section_carries_in_zone_target_addresses,
                edns_is_echoed_and_badvers_refused, large_answers_truncate_over_udp_and_fit_over_tcp,
                any_gets_one_rrset, zone_transfers_are_refused);
        }
    };
    (@tests $fixture:path; $($name:ident),*) => {
        $(
            #[tokio::test]
            async fn $name() {
                super::$name($fixture()).await;
            }
        )*
    };
}

battery!(meshdns_yaml, yaml_fixture);
battery!(zone_file, zonefile_fixture);
