//! The mesh planner: endpoint chain.

use crate::annotations::*;
use crate::validate::*;

use super::*;

#[test]
fn endpoint_chain() {
    fn ext(a: &str) -> (&str, &str) {
        ("ExternalIP", a)
    }
    type Case<'a> = (
        &'a str,
        Vec<(&'a str, &'a str)>,
        Vec<(&'a str, &'a str)>,
        u16,
        Result<Option<&'a str>, &'a str>,
    );
    let cases: Vec<Case> = vec![
        (
            "clustermesh-endpoint wins over force-endpoint",
            vec![
                (CLUSTERMESH_ENDPOINT, "203.0.113.1:51820"),
                (FORCE_ENDPOINT, "198.51.100.1:51820"),
            ],
            vec![],
            51820,
            Ok(Some("203.0.113.1:51820")),
        ),
        (
            "force-endpoint when clustermesh-endpoint is absent",
            vec![(FORCE_ENDPOINT, "198.51.100.1:51820")],
            vec![],
            51820,
            Ok(Some("198.51.100.1:51820")),
        ),
        (
            "empty clustermesh-endpoint falls through",
            vec![
                (CLUSTERMESH_ENDPOINT, ""),
                (FORCE_ENDPOINT, "198.51.100.1:51820"),
            ],
            vec![],
            51820,
            Ok(Some("198.51.100.1:51820")),
        ),
        (
            "ExternalIP IPv4",
            vec![],
            vec![ext("203.0.113.5")],
            51820,
            Ok(Some("203.0.113.5:51820")),
        ),
        (
            "ExternalIP prefers IPv4",
            vec![],
            vec![ext("2001:db8::1"), ext("203.0.113.5")],
            51820,
            Ok(Some("203.0.113.5:51820")),
        ),
        (
            "ExternalIP IPv6 only",
            vec![],
            vec![ext("2001:db8::1")],
            51820,
            Ok(Some("[2001:db8::1]:51820")),
        ),
        (
            "ExternalIP custom port",
            vec![],
            vec![ext("203.0.113.5")],
            12345,
            Ok(Some("203.0.113.5:12345")),
        ),
        ("no source: roaming", vec![], vec![], 51820, Ok(None)),
        (
            "InternalIP is not an endpoint",
            vec![],
            vec![("InternalIP", "10.0.0.1")],
            51820,
            Ok(None),
        ),
        (
            "Hostname is not an endpoint",
            vec![],
            vec![("Hostname", "worker-1")],
            51820,
            Ok(None),
        ),
        (
            "malformed clustermesh-endpoint is a hard error",
            vec![
                (CLUSTERMESH_ENDPOINT, "not-a-valid-endpoint"),
                (FORCE_ENDPOINT, "198.51.100.1:51820"),
            ],
            vec![],
            51820,
            Err(CLUSTERMESH_ENDPOINT),
        ),
        (
            "malformed force-endpoint is a hard error",
            vec![(FORCE_ENDPOINT, "no-port-here")],
            vec![ext("203.0.113.5")],
            51820,
            Err(FORCE_ENDPOINT),
        ),
        (
            "DNS endpoint",
            vec![(FORCE_ENDPOINT, "node.example.com:51820")],
            vec![],
            51820,
            Ok(Some("node.example.com:51820")),
        ),
        (
            "a host Kilo would reject as a DNS name is an error",
            vec![(FORCE_ENDPOINT, "Node_1.example.com:51820")],
            vec![],
            51820,
            Err(FORCE_ENDPOINT),
        ),
    ];
    for (what, ann, addrs, port, want) in cases {
        let n = node("test-node", &[], &ann, &addrs);
        let got = resolve_endpoint(&n, port);
        match (got, want) {
            (Ok(got), Ok(want)) => {
                assert_eq!(got.map(|h| h.to_string()).as_deref(), want, "{what}")
            }
            (Err(msg), Err(names)) => assert!(msg.contains(names), "{what}: {msg}"),
            (got, want) => panic!("{what}: got {got:?}, want {want:?}"),
        }
    }
    // wireguardPort 0 or absent falls back to 51820.
    for p in [None, Some(0), Some(70000)] {
        let e = ClusterEntry {
            wireguard_port: p,
            ..Default::default()
        };
        assert_eq!(e.effective_wireguard_port(), 51820);
    }
}
