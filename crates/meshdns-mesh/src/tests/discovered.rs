//! The mesh planner: discovered endpoints.

use crate::annotations::*;
use crate::plan::*;

use super::*;

fn observed(name: &str, json: &str) -> Node {
    node(name, &[], &[(DISCOVERED_ENDPOINTS, json)], &[])
}

#[test]
fn discovered_endpoint_parsing() {
    let one =
        |ip: &str, port: &str| format!(r#"{{"{KEY_A}":{{"IP":"{ip}","Port":{port},"Zone":""}}}}"#);
    for (what, nodes, want) in [
        (
            "a global IPv4",
            vec![observed("n1", &one("203.0.113.7", "51820"))],
            Some("203.0.113.7:51820"),
        ),
        (
            "a global IPv6",
            vec![observed("n1", &one("2001:db8::7", "51820"))],
            Some("[2001:db8::7]:51820"),
        ),
        (
            "private addresses are kept",
            vec![observed("n1", &one("10.1.2.3", "51820"))],
            Some("10.1.2.3:51820"),
        ),
        (
            "malformed JSON",
            vec![observed("n1", "{not valid json")],
            None,
        ),
        (
            "loopback",
            vec![observed("n1", &one("127.0.0.1", "51820"))],
            None,
        ),
        (
            "IPv6 loopback",
            vec![observed("n1", &one("::1", "51820"))],
            None,
        ),
        (
            "link-local",
            vec![observed("n1", &one("169.254.1.1", "51820"))],
            None,
        ),
        (
            "IPv6 link-local",
            vec![observed("n1", &one("fe80::1", "51820"))],
            None,
        ),
        (
            "unspecified",
            vec![observed("n1", &one("0.0.0.0", "51820"))],
            None,
        ),
        (
            "IPv6 unspecified",
            vec![observed("n1", &one("::", "51820"))],
            None,
        ),
        (
            "multicast",
            vec![observed("n1", &one("224.0.0.1", "51820"))],
            None,
        ),
        ("empty IP", vec![observed("n1", &one("", "51820"))], None),
        (
            "unparsable IP",
            vec![observed("n1", &one("somewhere", "51820"))],
            None,
        ),
        (
            "zero port",
            vec![observed("n1", &one("203.0.113.9", "0"))],
            None,
        ),
        (
            "port over 65535",
            vec![observed("n1", &one("203.0.113.9", "70000"))],
            None,
        ),
        ("no annotation", vec![node("n1", &[], &[], &[])], None),
        (
            "empty annotation (the agent writes \"\")",
            vec![observed("n1", "")],
            None,
        ),
        ("empty map", vec![observed("n1", "{}")], None),
        (
            "same key seen by two nodes: the first by name wins",
            vec![
                observed("n2", &one("198.51.100.2", "1")),
                observed("n1", &one("198.51.100.1", "1")),
            ],
            Some("198.51.100.1:1"),
        ),
        (
            "IPv4-mapped IPv6 is read as IPv4",
            vec![observed("n1", &one("::ffff:203.0.113.7", "5"))],
            Some("203.0.113.7:5"),
        ),
    ] {
        let d = discovered_endpoints(&nodes);
        assert_eq!(
            d.by_key.get(KEY_A).map(|a| a.to_string()).as_deref(),
            want,
            "{what}"
        );
        assert!(d.by_key.len() <= 1, "{what}");
        if want.is_none()
            && ![
                "no annotation",
                "empty annotation (the agent writes \"\")",
                "empty map",
            ]
            .contains(&what)
        {
            assert_eq!(
                d.problems.len(),
                1,
                "{what}: a rejected entry is reported: {:?}",
                d.problems
            );
        }
    }
}

#[test]
fn enrichment_replaces_configured_endpoints() {
    let seen = discovered_endpoints(&[observed(
        "t1",
        &format!(
            r#"{{"{KEY_A}":{{"IP":"198.51.100.42","Port":51820}},"{KEY_B}":{{"IP":"2001:db8::b","Port":51820}},"{KEY_C}":{{"IP":"203.0.113.9","Port":4000}}}}"#
        ),
    )]);
    let desired = vec![
        // Configured internal IP, observed NAT egress: replaced.
        peer_with_endpoint("a", KEY_A, Some("10.0.0.5"), None, 51820),
        // IPv6 equal to the observation, written differently: not a change.
        peer_with_endpoint("b", KEY_B, Some("2001:0db8:0:0::b"), None, 51820),
        // A DNS endpoint is replaced by the observed IP.
        peer_with_endpoint("c", KEY_C, None, Some("node.example.com"), 51820),
        // No observation for this key: unchanged.
        peer_with_endpoint(
            "d",
            "DDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDA=",
            Some("10.0.0.6"),
            None,
            51820,
        ),
    ];
    let got = enrich(desired.clone(), &seen);
    let ep = |p: &Peer| p.spec.endpoint.clone().unwrap();
    assert_eq!(
        (ep(&got[0]).dns_or_ip.ip.as_deref(), ep(&got[0]).port),
        (Some("198.51.100.42"), 51820)
    );
    assert_eq!(got[1], desired[1]);
    assert_eq!(
        (
            ep(&got[2]).dns_or_ip.ip.as_deref(),
            ep(&got[2]).dns_or_ip.dns.as_deref(),
            ep(&got[2]).port
        ),
        (Some("203.0.113.9"), None, 4000)
    );
    assert_eq!(got[3], desired[3]);
    // A roaming Peer gets the observed endpoint.
    let mut roaming = desired[0].clone();
    roaming.spec.endpoint = None;
    assert!(enrich(vec![roaming], &seen)[0].spec.endpoint.is_some());
    // Nothing observed: everything unchanged.
    assert_eq!(enrich(desired.clone(), &Discovered::default()), desired);
}
