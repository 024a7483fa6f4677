//! The mesh planner: node validation.

use std::collections::BTreeMap;

use crate::annotations::*;
use crate::validate::*;

use super::*;

#[test]
fn node_validation_reasons() {
    let e = entry("test-cluster", &["10.0.0.0/16", "10.4.0.0/24"]);
    let k = "dGVzdGtleXRlc3RrZXl0ZXN0a2V5dGVzdGtleTEyMzQ="; // 32 bytes
    type Case<'a> = (
        &'a str,
        Vec<&'a str>,
        Vec<(&'a str, &'a str)>,
        Option<SkipReason>,
    );
    let cases: Vec<Case> = vec![
        (
            "valid node",
            vec!["10.0.1.0/24"],
            vec![(WIREGUARD_IP, "10.4.0.1/32"), (KEY, k)],
            None,
        ),
        (
            "no podCIDR",
            vec![],
            vec![(WIREGUARD_IP, "10.4.0.1/32"), (KEY, k)],
            Some(SkipReason::NodeNoPodCIDR),
        ),
        (
            "podCIDR unparseable",
            vec!["x"],
            vec![(WIREGUARD_IP, "10.4.0.1/32"), (KEY, k)],
            Some(SkipReason::NodeNoPodCIDR),
        ),
        (
            "podCIDR out of range",
            vec!["192.168.1.0/24"],
            vec![(WIREGUARD_IP, "10.4.0.1/32"), (KEY, k)],
            Some(SkipReason::NodePodCIDROutOfRange),
        ),
        (
            "no wireguard IP",
            vec!["10.0.1.0/24"],
            vec![(KEY, k)],
            Some(SkipReason::NodeNoWireguardIP),
        ),
        (
            "empty wireguard IP",
            vec!["10.0.1.0/24"],
            vec![(WIREGUARD_IP, ""), (KEY, k)],
            Some(SkipReason::NodeNoWireguardIP),
        ),
        (
            "wireguard IP unparseable",
            vec!["10.0.1.0/24"],
            vec![(WIREGUARD_IP, "not-a-cidr"), (KEY, k)],
            Some(SkipReason::WGIPInvalid),
        ),
        (
            "wireguard IP bare address",
            vec!["10.0.1.0/24"],
            vec![(WIREGUARD_IP, "10.4.0.1"), (KEY, k)],
            Some(SkipReason::WGIPInvalid),
        ),
        (
            "wireguard IP with the subnet mask (cozystack Kilo)",
            vec!["10.0.1.0/24"],
            vec![(WIREGUARD_IP, "10.4.0.1/24"), (KEY, k)],
            None,
        ),
        (
            "wireguard IP outside allowedNetworks",
            vec!["10.0.1.0/24"],
            vec![(WIREGUARD_IP, "10.5.0.1/32"), (KEY, k)],
            Some(SkipReason::WGIPOutOfRange),
        ),
        (
            "wireguard host outside though its network overlaps",
            vec!["10.0.1.0/24"],
            vec![(WIREGUARD_IP, "10.5.0.1/8"), (KEY, k)],
            Some(SkipReason::WGIPOutOfRange),
        ),
        (
            "no public key",
            vec!["10.0.1.0/24"],
            vec![(WIREGUARD_IP, "10.4.0.1/32")],
            Some(SkipReason::NodeNoPublicKey),
        ),
        (
            "empty public key",
            vec!["10.0.1.0/24"],
            vec![(WIREGUARD_IP, "10.4.0.1/32"), (KEY, "")],
            Some(SkipReason::NodeNoPublicKey),
        ),
        // The reference accepts any text as a key; Kilo then rejects the Peer.
        (
            "public key not 32 bytes",
            vec!["10.0.1.0/24"],
            vec![(WIREGUARD_IP, "10.4.0.1/32"), (KEY, "dGVzdGtleQo=")],
            Some(SkipReason::NodePublicKeyInvalid),
        ),
        (
            "public key not base64",
            vec!["10.0.1.0/24"],
            vec![(WIREGUARD_IP, "10.4.0.1/32"), (KEY, "not base64!")],
            Some(SkipReason::NodePublicKeyInvalid),
        ),
        (
            "endpoint invalid",
            vec!["10.0.1.0/24"],
            vec![
                (WIREGUARD_IP, "10.4.0.1/32"),
                (KEY, k),
                (FORCE_ENDPOINT, "nope"),
            ],
            Some(SkipReason::NodeEndpointInvalid),
        ),
        // First failure wins: pod CIDR is checked before the key.
        (
            "order: pod CIDR before key",
            vec![],
            vec![(WIREGUARD_IP, "10.4.0.1/32")],
            Some(SkipReason::NodeNoPodCIDR),
        ),
        (
            "order: wireguard before key",
            vec!["10.0.1.0/24"],
            vec![(WIREGUARD_IP, "x")],
            Some(SkipReason::WGIPInvalid),
        ),
    ];
    for (what, pod, ann, want) in cases {
        let (valid, skipped) = validate_nodes(&e, &[node("node-1", &pod, &ann, &[])]);
        match want {
            None => assert!(
                skipped.is_empty() && valid.len() == 1,
                "{what}: {skipped:?}"
            ),
            Some(reason) => {
                assert!(valid.is_empty(), "{what}");
                assert_eq!(skipped[0].reason, reason, "{what}: {}", skipped[0].message);
                assert!(!skipped[0].message.is_empty());
            }
        }
    }
}

#[test]
fn duplicate_wireguard_addresses() {
    let e = std_entry("c");
    let wg = |n: &str, ip: &str| node(n, &[], &[(WIREGUARD_IP, ip)], &[]);
    let dupes = |nodes: Vec<Node>| -> BTreeMap<String, SkipReason> {
        validate_nodes(&e, &nodes)
            .1
            .into_iter()
            .filter(|s| s.reason == SkipReason::WGIPDuplicate)
            .map(|s| (s.node, s.reason))
            .collect()
    };
    assert!(
        dupes(vec![
            wg("node-1", "10.4.0.1/32"),
            wg("node-2", "10.4.0.2/32"),
            wg("node-3", "10.4.0.3/32")
        ])
        .is_empty()
    );
    assert_eq!(
        dupes(vec![
            wg("node-3", "10.4.0.3/32"),
            wg("node-2", "10.4.0.1/32"),
            wg("node-1", "10.4.0.1/32")
        ]),
        BTreeMap::from([("node-2".to_string(), SkipReason::WGIPDuplicate)]),
        "the first node by name keeps the address"
    );
    assert!(
        dupes(vec![
            wg("node-1", "10.4.0.1/32"),
            node("node-2", &[], &[], &[]),
            wg("node-3", "10.4.0.3/32")
        ])
        .is_empty()
    );
    // Host addresses are compared with the prefix ignored; unparseable values as text.
    assert_eq!(
        dupes(vec![wg("a", "10.4.0.1/32"), wg("b", "10.4.0.1/16")]).len(),
        1
    );
    assert_eq!(dupes(vec![wg("a", "junk"), wg("b", "junk")]).len(), 1);
    // Duplicate detection comes before every other check.
    let (_, skipped) = validate_nodes(&e, &[good("a", 1, KEY_A, &[]), wg("b", "10.4.0.1/32")]);
    assert_eq!(skipped[0].reason, SkipReason::WGIPDuplicate);
}
