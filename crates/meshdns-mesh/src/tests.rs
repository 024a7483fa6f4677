//! Table tests of the mesh planner: every case of kilo-clustermesh-operator's own tests
//! (peer building, residue networks, endpoint chain, discovered endpoints, keepalive, naming,
//! CIDR utilities, node validation, overlap), adapted to the flat `allowedNetworks` model, plus
//! one test per reference defect meshdns fixes.

use std::collections::BTreeMap;

use crate::annotations::*;
use crate::net::*;
use crate::plan::*;
use crate::types::*;
use crate::validate::*;
use crate::*;

const KEY_A: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
const KEY_B: &str = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA=";
const KEY_C: &str = "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCA=";

fn node(name: &str, pod: &[&str], annotations: &[(&str, &str)], addrs: &[(&str, &str)]) -> Node {
    Node {
        metadata: NodeMeta {
            name: name.into(),
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        },
        spec: NodeSpec {
            pod_cidrs: pod.iter().map(|s| s.to_string()).collect(),
            pod_cidr: None,
        },
        status: NodeStatus {
            addresses: addrs
                .iter()
                .map(|(t, a)| NodeAddress {
                    type_: t.to_string(),
                    address: a.to_string(),
                })
                .collect(),
        },
    }
}

/// A node that passes validation in [`entry`]: pod 10.244.<i>.0/24, WireGuard 10.4.0.<i>.
fn good(name: &str, i: u8, key: &str, extra: &[(&str, &str)]) -> Node {
    let pod = format!("10.244.{i}.0/24");
    let wg = format!("10.4.0.{i}/16");
    let mut ann = vec![(KEY, key), (WIREGUARD_IP, wg.as_str())];
    ann.extend_from_slice(extra);
    node(name, &[&pod], &ann, &[])
}

fn entry(name: &str, networks: &[&str]) -> ClusterEntry {
    ClusterEntry {
        name: name.into(),
        allowed_networks: networks.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn std_entry(name: &str) -> ClusterEntry {
    entry(name, &["10.244.0.0/16", "10.4.0.0/16"])
}

// ---------------------------------------------------------------- naming

#[test]
fn peer_names_follow_the_reference() {
    for (mesh, src, node, want) in [
        ("mesh1", "cluster-a", "node-1", "mesh1--cluster-a--node-1"),
        ("m", "c", "n", "m--c--n"),
        ("mesh0", "cluster0", "node0", "mesh0--cluster0--node0"),
        ("Mesh", "ClusterA", "NodeOne", "mesh--clustera--nodeone"),
        (
            "my_mesh",
            "my_cluster",
            "my_node",
            "my-mesh--my-cluster--my-node",
        ),
        // Runs of replaced characters are kept, not collapsed.
        ("mesh__name", "cluster", "node", "mesh--name--cluster--node"),
        ("", "cluster", "node", "cluster--node"),
        ("mesh", "cluster", "", "mesh--cluster"),
        ("", "", "", ""),
        ("mesh", "c", "node.example.com", "mesh--c--node.example.com"),
    ] {
        let got = peer_name(mesh, src, node);
        assert_eq!(got, want, "{mesh:?} {src:?} {node:?}");
        assert!(!got.starts_with(['-', '.']) && !got.ends_with(['-', '.']));
    }
    assert_ne!(
        peer_name("mesh", "clusterA", "node1"),
        peer_name("mesh", "clusterB", "node1")
    );
    assert_eq!(peer_name("a", "b", "c"), peer_name("a", "b", "c"));
}

#[test]
fn long_peer_names_are_hash_truncated() {
    let (m, c, n) = ("a".repeat(100), "B".repeat(100), "c".repeat(100));
    let got = peer_name(&m, &c, &n);
    assert_eq!(got.len(), 253);
    let (head, hash) = got.rsplit_once('-').unwrap();
    assert_eq!(hash.len(), 16);
    assert!(
        hash.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    // The head is the first 236 characters of the sanitised name.
    let sanitised = format!("{m}--{}--{n}", c.to_lowercase());
    assert_eq!(head, &sanitised[..236]);
    // The hash is over the unsanitised raw name: case changes the hash.
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{m}--{c}--{n}").as_bytes());
    assert_eq!(hash, data_encoding::HEXLOWER.encode(&digest[..8]));
    // A cut that lands on a dash is trimmed before the hash.
    let dashy = peer_name(&"x".repeat(235), "y", "z".repeat(40).as_str());
    assert!(dashy.len() <= 253 && !dashy.contains("--y") && !dashy[..235].ends_with('-'));
}

#[test]
fn labels_name_mesh_and_source() {
    let l = peer_labels("my-mesh", "my-cluster");
    assert_eq!(l.len(), 2);
    assert_eq!(l[LABEL_MESH], "my-mesh");
    assert_eq!(l[LABEL_SOURCE_CLUSTER], "my-cluster");
}

// ---------------------------------------------------------------- CIDR utilities

#[test]
fn cidr_parsing() {
    for (input, want) in [
        ("10.0.0.0/16", Some("10.0.0.0/16")),
        ("10.0.1.5/16", Some("10.0.0.0/16")),
        ("fd00::/64", Some("fd00::/64")),
        ("10.0.0.1/32", Some("10.0.0.1/32")),
        ("fd00::1/128", Some("fd00::1/128")),
        ("not-a-cidr", None),
        ("", None),
        ("10.0.0.1", None),
    ] {
        assert_eq!(
            parse_cidr(input).map(|n| n.to_string()).as_deref(),
            want,
            "{input}"
        );
    }
    for (input, host, net) in [
        ("10.4.0.1/32", "10.4.0.1", "10.4.0.1/32"),
        ("100.66.0.3/16", "100.66.0.3", "100.66.0.0/16"),
        ("10.4.0.1/24", "10.4.0.1", "10.4.0.0/24"),
        ("fd00::1/128", "fd00::1", "fd00::1/128"),
        ("fd00::1/64", "fd00::1", "fd00::/64"),
    ] {
        let (ip, n) = parse_host_in_cidr(input).unwrap();
        assert_eq!(
            (ip.to_string().as_str(), n.to_string().as_str()),
            (host, net)
        );
    }
    for bad in ["not-a-cidr", "", "10.0.0.1"] {
        assert!(parse_host_in_cidr(bad).is_none());
    }
}

#[test]
fn cidr_relations() {
    let p = |s: &str| parse_cidr(s).unwrap();
    for (outer, inner, want) in [
        ("10.0.0.0/8", "10.1.0.0/16", true),
        ("10.0.0.0/16", "10.0.0.0/16", true),
        ("10.0.0.0/16", "10.1.0.0/16", false),
        ("10.0.0.0/16", "10.0.128.0/15", false),
        ("10.0.0.0/24", "10.0.0.5/32", true),
        ("10.0.0.0/24", "10.0.1.5/32", false),
        ("fd00::/48", "fd00::/64", true),
        ("fd00::/64", "fd01::/64", false),
    ] {
        assert_eq!(
            cidr_contains(&p(outer), &p(inner)),
            want,
            "{outer} ⊇ {inner}"
        );
    }
    for (a, b, want) in [
        ("10.0.0.0/16", "10.0.0.0/16", true),
        ("10.0.0.0/8", "10.1.0.0/16", true),
        ("10.0.0.0/15", "10.1.0.0/16", true),
        ("10.0.0.0/16", "10.1.0.0/16", false),
        ("10.0.0.0/8", "192.168.0.0/16", false),
        ("fd00::/48", "fd00::/64", true),
        ("fd00::/48", "fd01::/48", false),
    ] {
        assert_eq!(cidr_overlaps(&p(a), &p(b)), want, "{a} ∩ {b}");
        assert_eq!(cidr_overlaps(&p(b), &p(a)), want, "{b} ∩ {a}");
    }
    for (c, want) in [
        ("10.0.0.1/32", true),
        ("10.0.0.0/24", false),
        ("0.0.0.0/0", false),
        ("fd00::1/128", true),
        ("fd00::/64", false),
    ] {
        assert_eq!(is_host_route(&p(c)), want, "{c}");
    }
    for (ip, want) in [
        ("100.66.0.3", "100.66.0.3/32"),
        ("10.0.0.0", "10.0.0.0/32"),
        ("fd00::1", "fd00::1/128"),
    ] {
        assert_eq!(host_route(ip.parse().unwrap()), want);
    }
}

#[test]
fn host_port_parsing() {
    for (input, want) in [
        ("203.0.113.7:51820", Some(("203.0.113.7", 51820))),
        ("[2001:db8::1]:51820", Some(("2001:db8::1", 51820))),
        ("node.example.com:1", Some(("node.example.com", 1))),
        ("203.0.113.7", None),
        ("203.0.113.7:abc", None),
        ("203.0.113.7:0", None),
        ("203.0.113.7:65536", None),
        ("203.0.113.7:+5", None),
        (":51820", None),
        ("2001:db8::1:51820", None),
        ("[2001:db8::1]", None),
        ("no-colon-at-all", None),
    ] {
        let got = HostPort::parse(input).ok();
        assert_eq!(
            got.as_ref().map(|h| (h.host.as_str(), h.port)),
            want,
            "{input}"
        );
        if let Some(h) = got {
            assert_eq!(h.to_string(), input);
        }
    }
}

// ---------------------------------------------------------------- endpoint chain

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

// ---------------------------------------------------------------- node validation

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

// ---------------------------------------------------------------- peer building

#[test]
fn peer_building() {
    let e = std_entry("cluster-a");
    let with_ep = good(
        "worker-1",
        1,
        KEY_A,
        &[(FORCE_ENDPOINT, "203.0.113.1:51820")],
    );
    let plan = plan_source("my-mesh", &e, &[with_ep], 0);
    assert!(plan.skipped.is_empty());
    let p = &plan.peers[0];
    assert_eq!(p.name, "my-mesh--cluster-a--worker-1");
    assert_eq!(p.labels, peer_labels("my-mesh", "cluster-a"));
    assert_eq!(p.spec.public_key, KEY_A);
    // The cozystack-style wireguard-ip "<ip>/16" becomes a /32 host route.
    assert_eq!(p.spec.allowed_ips, ["10.244.1.0/24", "10.4.0.1/32"]);
    let ep = p.spec.endpoint.as_ref().unwrap();
    assert_eq!(
        (
            ep.dns_or_ip.ip.as_deref(),
            ep.dns_or_ip.dns.as_deref(),
            ep.port
        ),
        (Some("203.0.113.1"), None, 51820)
    );
    assert_eq!(p.spec.persistent_keepalive, None);

    // DNS endpoint goes into dns; no endpoint gives a roaming Peer.
    let dns = good("w", 1, KEY_A, &[(FORCE_ENDPOINT, "node.example.com:51820")]);
    let ep = plan_source("m", &e, &[dns], 0).peers[0]
        .spec
        .endpoint
        .clone()
        .unwrap();
    assert_eq!(
        (ep.dns_or_ip.dns.as_deref(), ep.dns_or_ip.ip),
        (Some("node.example.com"), None)
    );
    assert_eq!(
        plan_source("m", &e, &[good("w", 1, KEY_A, &[])], 0).peers[0]
            .spec
            .endpoint,
        None
    );

    // IPv6 WireGuard address, InternalIPs (both families) as host routes, in order.
    let e6 = entry("c", &["10.244.0.0/16", "fd00:4::/64"]);
    let mut n = node(
        "w",
        &["10.244.3.0/24"],
        &[(KEY, KEY_A), (WIREGUARD_IP, "fd00:4::3/64")],
        &[
            ("InternalIP", "192.168.1.3"),
            ("InternalIP", "fd00:1::3"),
            ("ExternalIP", "203.0.113.3"),
        ],
    );
    let p = &plan_source("m", &e6, std::slice::from_ref(&n), 0).peers[0];
    assert_eq!(
        p.spec.allowed_ips,
        [
            "10.244.3.0/24",
            "fd00:4::3/128",
            "192.168.1.3/32",
            "fd00:1::3/128"
        ]
    );
    assert_eq!(
        p.spec.endpoint.as_ref().unwrap().dns_or_ip.ip.as_deref(),
        Some("203.0.113.3")
    );
    // Order-preserving de-duplication: an InternalIP equal to the WireGuard address.
    n.status.addresses = vec![NodeAddress {
        type_: "InternalIP".into(),
        address: "fd00:4::3".into(),
    }];
    let p = &plan_source("m", &e6, &[n], 0).peers[0];
    assert_eq!(p.spec.allowed_ips, ["10.244.3.0/24", "fd00:4::3/128"]);
}

#[test]
fn residue_networks_ride_on_the_first_valid_node() {
    // Pods and WireGuard ranges are covered by nodes; services, a host range holding the
    // nodes' InternalIPs, and an external subnet are not (the last two partly).
    let e = entry(
        "c",
        &[
            "10.244.0.0/16",
            "10.4.0.0/16",
            "10.96.0.0/12",
            "192.168.1.0/24",
            "172.16.0.0/16",
        ],
    );
    let internal = |n: Node, ip: &str| Node {
        status: NodeStatus {
            addresses: vec![NodeAddress {
                type_: "InternalIP".into(),
                address: ip.into(),
            }],
        },
        ..n
    };
    let nodes = [
        // "a-bad" sorts first but is skipped: the residue goes to the first *valid* node.
        node("a-bad", &[], &[], &[]),
        internal(good("b", 2, KEY_B, &[]), "192.168.1.2"),
        internal(good("c", 3, KEY_C, &[]), "192.168.1.3"),
    ];
    let plan = plan_source("m", &e, &nodes, 0);
    assert_eq!(plan.skipped.len(), 1);
    assert_eq!(
        plan.peers[0].spec.allowed_ips,
        [
            "10.244.2.0/24",
            "10.4.0.2/32",
            "192.168.1.2/32",
            "10.96.0.0/12",
            "172.16.0.0/16"
        ]
    );
    assert_eq!(
        plan.peers[1].spec.allowed_ips,
        ["10.244.3.0/24", "10.4.0.3/32", "192.168.1.3/32"]
    );
    // No valid node: no Peer to carry the residue.
    assert!(
        plan_source("m", &e, &[node("x", &[], &[], &[])], 0)
            .peers
            .is_empty()
    );
}

#[test]
fn keepalive_has_a_mesh_wide_floor() {
    let spec = |ks: &[Option<i64>]| ClusterMeshSpec {
        clusters: ks
            .iter()
            .enumerate()
            .map(|(i, k)| ClusterEntry {
                name: format!("c{i}"),
                persistent_keepalive: *k,
                ..Default::default()
            })
            .collect(),
        dns: None,
    };
    assert_eq!(mesh_keepalive(&spec(&[Some(0), Some(25)])), 25);
    assert_eq!(mesh_keepalive(&spec(&[Some(0), Some(0)])), 0);
    assert_eq!(mesh_keepalive(&spec(&[None, None])), 0);
    assert_eq!(mesh_keepalive(&spec(&[Some(70000), Some(-5)])), 65535);
    // The ceph side: Peers for the tenant's nodes built from an entry with keepalive 0 still
    // get the mesh-wide 25, so the public side refreshes the NAT mapping too.
    let s = spec(&[Some(0), Some(25)]);
    let ceph = plan_source(
        "m",
        &ClusterEntry {
            persistent_keepalive: Some(0),
            ..std_entry("ceph")
        },
        &[good("w", 1, KEY_A, &[])],
        mesh_keepalive(&s),
    );
    assert_eq!(ceph.peers[0].spec.persistent_keepalive, Some(25));
    let own = plan_source(
        "m",
        &ClusterEntry {
            persistent_keepalive: Some(40),
            ..std_entry("t")
        },
        &[good("w", 1, KEY_A, &[])],
        25,
    );
    assert_eq!(own.peers[0].spec.persistent_keepalive, Some(40));
}

#[test]
fn bootstrapping_clusters_are_looked_at_again_soon() {
    let e = std_entry("c");
    assert!(plan_source("m", &e, &[], 0).bootstrapping, "no nodes yet");
    let joining = node("n", &["10.244.1.0/24"], &[], &[]);
    assert!(
        plan_source("m", &e, &[joining], 0).bootstrapping,
        "no wireguard-ip yet"
    );
    let wrong = node("n", &["192.168.0.0/24"], &[], &[]);
    assert!(
        !plan_source("m", &e, &[wrong], 0).bootstrapping,
        "out of range is not transient"
    );
    assert!(!plan_source("m", &e, &[good("n", 1, KEY_A, &[])], 0).bootstrapping);
}

// ---------------------------------------------------------------- discovered endpoints

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

fn peer_with_endpoint(
    name: &str,
    key: &str,
    ip: Option<&str>,
    dns: Option<&str>,
    port: u32,
) -> Peer {
    Peer {
        name: name.into(),
        labels: peer_labels("m", "src"),
        spec: PeerSpec {
            allowed_ips: vec!["10.1.0.0/24".into()],
            endpoint: Some(PeerEndpoint {
                dns_or_ip: DnsOrIp {
                    ip: ip.map(Into::into),
                    dns: dns.map(Into::into),
                },
                port,
            }),
            persistent_keepalive: None,
            preshared_key: None,
            public_key: key.into(),
        },
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

// ---------------------------------------------------------------- overlap validation

fn cluster(name: &str, nets: &[&str]) -> ClusterEntry {
    entry(
        name,
        &nets
            .iter()
            .copied()
            .filter(|n| !n.is_empty())
            .collect::<Vec<_>>(),
    )
}

fn mesh_spec(clusters: Vec<ClusterEntry>) -> ClusterMeshSpec {
    ClusterMeshSpec {
        clusters,
        dns: None,
    }
}

#[test]
fn networks_inside_one_mesh() {
    type Case<'a> = (&'a str, Vec<ClusterEntry>, &'a [&'a str]);
    let cases: Vec<Case> = vec![
        (
            "single cluster",
            vec![cluster(
                "cluster-a",
                &["10.0.0.0/16", "10.4.0.0/24", "10.96.0.0/12"],
            )],
            &[],
        ),
        ("empty", vec![], &[]),
        (
            "two clusters disjoint",
            vec![
                cluster("cluster-a", &["10.0.0.0/16", "10.4.0.0/24", "10.96.0.0/12"]),
                cluster(
                    "cluster-b",
                    &["10.1.0.0/16", "10.4.1.0/24", "10.112.0.0/12"],
                ),
            ],
            &[],
        ),
        (
            "overlapping service CIDR",
            vec![
                cluster("cluster-a", &["10.0.0.0/16", "10.4.0.0/24", "10.96.0.0/12"]),
                cluster("cluster-b", &["10.1.0.0/16", "10.4.1.0/24", "10.96.0.0/12"]),
            ],
            &[
                "cluster-a",
                "cluster-b",
                "10.96.0.0/12",
                "CIDR overlap between cluster",
            ],
        ),
        (
            "overlap inside one cluster",
            vec![cluster(
                "cluster-a",
                &[
                    "10.0.0.0/16",
                    "10.4.0.0/24",
                    "10.96.0.0/12",
                    "10.96.128.0/17",
                ],
            )],
            &["cluster-a", "10.96.128.0/17"],
        ),
        (
            "invalid CIDR",
            vec![cluster("cluster-a", &["not-a-cidr", "10.4.0.0/24"])],
            &["cluster-a", "not-a-cidr"],
        ),
        (
            "overlapping pod CIDRs",
            vec![
                cluster("cluster-a", &["10.0.0.0/16", "10.4.0.0/24"]),
                cluster("cluster-b", &["10.0.128.0/17", "10.4.1.0/24"]),
            ],
            &["cluster-a", "cluster-b"],
        ),
        (
            "distinct CIDRs of one cluster",
            vec![cluster(
                "cluster-a",
                &[
                    "10.0.0.0/16",
                    "10.4.0.0/24",
                    "10.96.0.0/12",
                    "172.16.0.0/12",
                ],
            )],
            &[],
        ),
    ];
    for (what, clusters, fragments) in cases {
        let spec = mesh_spec(clusters);
        let problems = network_problems(&[("mesh-a", &spec)]);
        if fragments.is_empty() {
            assert!(problems.is_empty(), "{what}: {problems:?}");
        } else {
            let msg = &problems["mesh-a"];
            assert!(msg.starts_with("mesh \"mesh-a\": "), "{what}: {msg}");
            for f in fragments {
                assert!(msg.contains(f), "{what}: {msg} lacks {f}");
            }
        }
    }
}

#[test]
fn networks_across_meshes() {
    let tenant = |n: &str, pod: &str, wg: &str, svc: &str| cluster(n, &[pod, wg, svc]);
    type Case<'a> = (
        &'a str,
        Vec<(&'a str, Vec<ClusterEntry>)>,
        Vec<&'a str>,
        &'a [&'a str],
    );
    let cases: Vec<Case> = vec![
        ("none", vec![], vec![], &[]),
        (
            "single mesh",
            vec![(
                "mesh-a",
                vec![
                    tenant("cluster-a", "10.0.0.0/16", "10.4.0.0/24", "10.96.0.0/12"),
                    tenant("cluster-b", "10.1.0.0/16", "10.4.1.0/24", "10.112.0.0/12"),
                ],
            )],
            vec![],
            &[],
        ),
        (
            "two disjoint meshes",
            vec![
                (
                    "mesh-a",
                    vec![
                        tenant("cluster-a", "10.0.0.0/16", "10.4.0.0/24", "10.96.0.0/12"),
                        tenant("cluster-b", "10.1.0.0/16", "10.4.1.0/24", "10.112.0.0/12"),
                    ],
                ),
                (
                    "mesh-b",
                    vec![
                        tenant("cluster-c", "10.2.0.0/16", "10.4.2.0/24", "172.20.0.0/16"),
                        tenant("cluster-d", "10.3.0.0/16", "10.4.3.0/24", "172.21.0.0/16"),
                    ],
                ),
            ],
            vec![],
            &[],
        ),
        (
            "two meshes overlapping",
            vec![
                (
                    "mesh-a",
                    vec![
                        tenant("cluster-a", "10.0.0.0/16", "10.4.0.0/24", "10.96.0.0/12"),
                        tenant("cluster-b", "10.1.0.0/16", "10.4.1.0/24", ""),
                    ],
                ),
                (
                    "mesh-b",
                    vec![
                        tenant("cluster-c", "10.0.0.0/16", "10.4.2.0/24", ""),
                        tenant("cluster-d", "10.2.0.0/16", "10.4.3.0/24", ""),
                    ],
                ),
            ],
            vec!["mesh-a", "mesh-b"],
            &[
                "mesh \"mesh-a\" (cluster \"cluster-a\", 10.0.0.0/16) and mesh \"mesh-b\" (cluster \"cluster-c\", 10.0.0.0/16)",
            ],
        ),
        (
            "intra-mesh overlap",
            vec![(
                "mesh-a",
                vec![
                    tenant("cluster-a", "10.0.0.0/16", "10.4.0.0/24", "10.96.0.0/12"),
                    tenant("cluster-b", "10.0.0.0/16", "10.4.1.0/24", ""),
                ],
            )],
            vec!["mesh-a"],
            &["cluster-a", "cluster-b"],
        ),
        (
            "a hub cluster shared by two meshes is not an overlap",
            vec![
                (
                    "mesh-a-ceph",
                    vec![
                        tenant("tenant-a", "10.0.0.0/16", "10.4.0.0/24", "10.96.0.0/16"),
                        tenant("ceph", "10.247.0.0/16", "100.66.0.0/16", "10.99.0.0/16"),
                    ],
                ),
                (
                    "mesh-b-ceph",
                    vec![
                        tenant("tenant-b", "10.1.0.0/16", "10.4.1.0/24", "10.112.0.0/16"),
                        tenant("ceph", "10.247.0.0/16", "100.66.0.0/16", "10.99.0.0/16"),
                    ],
                ),
            ],
            vec![],
            &[],
        ),
        (
            "different clusters with the same pod CIDR across meshes",
            vec![
                (
                    "mesh-a",
                    vec![
                        tenant("tenant-a", "10.0.0.0/16", "10.4.0.0/24", "10.96.0.0/16"),
                        tenant("ceph", "10.247.0.0/16", "100.66.0.0/16", "10.99.0.0/16"),
                    ],
                ),
                (
                    "mesh-b",
                    vec![
                        tenant("tenant-b", "10.0.0.0/16", "10.4.1.0/24", "10.112.0.0/16"),
                        tenant("ceph", "10.247.0.0/16", "100.66.0.0/16", "10.99.0.0/16"),
                    ],
                ),
            ],
            vec!["mesh-a", "mesh-b"],
            &["tenant-a", "tenant-b"],
        ),
        (
            // The reference blocks every mesh of the namespace; meshdns only those involved.
            "an unrelated third mesh keeps working",
            vec![
                (
                    "mesh-a",
                    vec![tenant("cluster-a", "10.0.0.0/16", "10.4.0.0/24", "")],
                ),
                (
                    "mesh-b",
                    vec![tenant("cluster-b", "10.0.0.0/16", "10.4.1.0/24", "")],
                ),
                (
                    "mesh-c",
                    vec![tenant("cluster-c", "10.9.0.0/16", "10.4.9.0/24", "")],
                ),
            ],
            vec!["mesh-a", "mesh-b"],
            &[],
        ),
    ];
    for (what, meshes, blocked, fragments) in cases {
        let specs: Vec<(&str, ClusterMeshSpec)> =
            meshes.into_iter().map(|(n, c)| (n, mesh_spec(c))).collect();
        let refs: Vec<(&str, &ClusterMeshSpec)> = specs.iter().map(|(n, s)| (*n, s)).collect();
        let problems = network_problems(&refs);
        assert_eq!(
            problems.keys().map(String::as_str).collect::<Vec<_>>(),
            blocked,
            "{what}"
        );
        for msg in problems.values() {
            for f in fragments {
                assert!(msg.contains(f), "{what}: {msg} lacks {f}");
            }
        }
    }
}

// ---------------------------------------------------------------- planning whole meshes

/// The seed's NAT scenario: `public` has public endpoints; `nat-a` and `nat-b` sit behind NAT
/// and declare keepalive 25. Each target's Kilo observed the NAT egress of the NATed nodes it
/// handshook with; each target's Peers carry what *that target* saw.
#[test]
fn nat_scenario_enriches_per_target() {
    let spec = ClusterMeshSpec {
        clusters: vec![
            ClusterEntry {
                persistent_keepalive: Some(0),
                ..entry("public", &["10.10.0.0/16", "10.4.0.0/24"])
            },
            ClusterEntry {
                persistent_keepalive: Some(25),
                ..entry("nat-a", &["10.20.0.0/16", "10.4.1.0/24"])
            },
            ClusterEntry {
                persistent_keepalive: Some(25),
                ..entry("nat-b", &["10.30.0.0/16", "10.4.2.0/24"])
            },
        ],
        dns: None,
    };
    let mk = |name: &str,
              pod: &str,
              wg: &str,
              key: &str,
              ann: &[(&str, &str)],
              addrs: &[(&str, &str)]| {
        let mut a = vec![(KEY, key), (WIREGUARD_IP, wg)];
        a.extend_from_slice(ann);
        node(name, &[pod], &a, addrs)
    };
    let saw = |entries: &[(&str, &str)]| -> String {
        let body: Vec<String> = entries
            .iter()
            .map(|(k, a)| {
                let (ip, port) = a.rsplit_once(':').unwrap();
                format!(r#""{k}":{{"IP":"{ip}","Port":{port},"Zone":""}}"#)
            })
            .collect();
        format!("{{{}}}", body.join(","))
    };
    let public_seen = saw(&[
        (KEY_B, "198.51.100.20:51820"),
        (KEY_C, "198.51.100.30:51820"),
    ]);
    let nat_a_seen = saw(&[(KEY_C, "192.0.2.30:40000")]); // nat-a saw nat-b from elsewhere
    let cluster_nodes = |c: &str| -> Vec<Node> {
        match c {
            "public" => vec![mk(
                "pub-1",
                "10.10.1.0/24",
                "10.4.0.1/24",
                KEY_A,
                &[(DISCOVERED_ENDPOINTS, &public_seen)],
                &[("ExternalIP", "203.0.113.1")],
            )],
            "nat-a" => vec![mk(
                "a-1",
                "10.20.1.0/24",
                "10.4.1.1/24",
                KEY_B,
                &[(DISCOVERED_ENDPOINTS, &nat_a_seen)],
                &[("InternalIP", "172.16.0.20")],
            )],
            "nat-b" => vec![mk(
                "b-1",
                "10.30.1.0/24",
                "10.4.2.1/24",
                KEY_C,
                &[(FORCE_ENDPOINT, "172.16.0.30:51820")],
                &[],
            )],
            _ => unreachable!(),
        }
    };
    let plans = plan_meshes(&[("mesh", &spec)], &|_, c| {
        ClusterNodes::Listed(cluster_nodes(c))
    });
    let plan = &plans[0];
    assert_eq!(plan.blocked, None);
    let for_target = |t: &str| {
        enrich(
            merge_same_key(plan.peers_for(t)),
            &discovered_endpoints(&cluster_nodes(t)),
        )
    };
    let endpoint_of = |peers: &[Peer], key: &str| {
        let p = peers.iter().find(|p| p.spec.public_key == key).unwrap();
        p.spec.endpoint.as_ref().map(|e| {
            format!(
                "{}:{}",
                e.dns_or_ip.ip.clone().or(e.dns_or_ip.dns.clone()).unwrap(),
                e.port
            )
        })
    };

    let public = for_target("public");
    assert_eq!(public.len(), 2);
    assert_eq!(
        endpoint_of(&public, KEY_B).as_deref(),
        Some("198.51.100.20:51820"),
        "nat-a roams, public saw it"
    );
    assert_eq!(
        endpoint_of(&public, KEY_C).as_deref(),
        Some("198.51.100.30:51820"),
        "nat-b's configured internal endpoint replaced"
    );
    let nat_a = for_target("nat-a");
    assert_eq!(
        endpoint_of(&nat_a, KEY_A).as_deref(),
        Some("203.0.113.1:51820"),
        "public: configured ExternalIP"
    );
    assert_eq!(
        endpoint_of(&nat_a, KEY_C).as_deref(),
        Some("192.0.2.30:40000"),
        "nat-a's own observation, not public's"
    );
    let nat_b = for_target("nat-b");
    assert_eq!(
        endpoint_of(&nat_b, KEY_B),
        None,
        "nat-b saw nothing: nat-a stays roaming"
    );
    assert_eq!(
        endpoint_of(&nat_b, KEY_A).as_deref(),
        Some("203.0.113.1:51820")
    );
    // Every Peer carries the mesh-wide keepalive, including those of the public cluster.
    for p in public.iter().chain(&nat_a).chain(&nat_b) {
        assert_eq!(p.spec.persistent_keepalive, Some(25), "{}", p.name);
    }
    // Target order does not matter: computing in another order gives the same Peers.
    let reversed: Vec<Vec<Peer>> = ["nat-b", "nat-a", "public"]
        .iter()
        .map(|t| for_target(t))
        .collect();
    assert_eq!(reversed, vec![nat_b.clone(), nat_a.clone(), public.clone()]);
}

#[test]
fn status_and_unavailable_clusters() {
    let spec = mesh_spec(vec![
        std_entry("a"),
        entry("b", &["10.245.0.0/16", "10.5.0.0/16"]),
    ]);
    let plans = plan_meshes(&[("m", &spec)], &|_, c| match c {
        "a" => ClusterNodes::Listed(vec![good("n1", 1, KEY_A, &[]), node("n2", &[], &[], &[])]),
        _ => ClusterNodes::Unavailable("kubeconfig Secret \"b-kubeconfig\" not found".into()),
    });
    let plan = &plans[0];
    let status = plan.status(Some(3));
    assert_eq!(
        status.clusters,
        vec![
            ClusterStatus {
                name: "a".into(),
                registered_peers: 1,
                skipped_nodes: 1
            },
            ClusterStatus {
                name: "b".into(),
                registered_peers: 0,
                skipped_nodes: 0
            },
        ]
    );
    assert_eq!(
        (
            status.conditions[0].type_.as_str(),
            status.conditions[0].reason.as_str()
        ),
        ("Ready", "ClusterUnavailable")
    );
    assert!(status.conditions[0].message.contains("b-kubeconfig"));
    assert_eq!(status.conditions[1].reason, "NoOverlap");
    assert_eq!(status.conditions[1].message, "all CIDRs are disjoint");
    assert!(!plan.may_sweep("b") && plan.may_sweep("a") && plan.may_sweep("left-the-spec"));
    // b is unreachable, but a's Peers still go to b.
    assert_eq!(plan.peers_for("b").len(), 1);
    assert!(plan.peers_for("not-a-member").is_empty());

    let all_ok = plan_meshes(&[("m", &spec)], &|_, _| ClusterNodes::Listed(vec![]));
    let s = all_ok[0].status(None);
    assert_eq!(
        (
            s.conditions[0].status.as_str(),
            s.conditions[0].reason.as_str(),
            s.conditions[0].message.as_str()
        ),
        ("True", "Reconciled", "all clusters reconciled successfully")
    );

    let bad = mesh_spec(vec![std_entry("a"), std_entry("b")]);
    let blocked = &plan_meshes(&[("m", &bad)], &|_, _| ClusterNodes::Listed(vec![]))[0];
    assert!(
        blocked.blocked.is_some() && blocked.peers_for("a").is_empty() && !blocked.may_sweep("a")
    );
    let s = blocked.status(Some(1));
    assert_eq!(
        s.conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
            .collect::<Vec<_>>(),
        [
            ("Ready", "False", "NetworksOverlap"),
            ("NetworksOverlap", "True", "CIDROverlap")
        ]
    );
    assert_eq!(
        s.conditions[0].message,
        "CIDR overlap detected across meshes"
    );
}

// ---------------------------------------------------------------- merging and writes

#[test]
fn peers_sharing_a_key_merge_into_the_lowest_name() {
    let mut a = peer_with_endpoint("m2--hub--n1", KEY_A, Some("203.0.113.1"), None, 51820);
    a.spec.allowed_ips = vec!["10.2.0.0/24".into(), "10.4.0.1/32".into()];
    a.spec.persistent_keepalive = Some(10);
    let mut b = peer_with_endpoint("m1--hub--n1", KEY_A, Some("203.0.113.1"), None, 51820);
    b.spec.allowed_ips = vec!["10.4.0.1/32".into(), "10.1.0.0/24".into()];
    let c = peer_with_endpoint("m1--hub--n2", KEY_B, None, None, 1);
    let merged = merge_same_key(vec![a, c.clone(), b.clone()]);
    assert_eq!(merged.len(), 2);
    assert_eq!(merged[0].name, "m1--hub--n1");
    assert_eq!(merged[0].labels, b.labels);
    assert_eq!(
        merged[0].spec.allowed_ips,
        ["10.1.0.0/24", "10.2.0.0/24", "10.4.0.1/32"]
    );
    assert_eq!(merged[0].spec.persistent_keepalive, Some(10));
    // A Peer alone keeps its allowed-IP order.
    assert_eq!(merged[1], c);
}

fn labelled(name: &str, mesh: &str, source: &str, ips: &[&str], key: &str) -> Peer {
    Peer {
        name: name.into(),
        labels: peer_labels(mesh, source),
        spec: PeerSpec {
            allowed_ips: ips.iter().map(|s| s.to_string()).collect(),
            public_key: key.into(),
            ..Default::default()
        },
    }
}

#[test]
fn target_writes() {
    let ours = |p: &Peer| peer_owner(p).is_some_and(|(m, _)| m == "test-mesh");
    let none: Vec<Peer> = vec![];
    assert!(diff_target(&none, &none, &ours).is_empty());

    let one = labelled("peer-one", "test-mesh", "cluster-a", &["10.0.0.1/32"], "k1");
    let two = labelled("peer-two", "test-mesh", "cluster-a", &["10.0.0.2/32"], "k2");
    assert_eq!(
        diff_target(&[one.clone(), two.clone()], &none, &ours),
        [
            PeerAction::Apply(one.clone()),
            PeerAction::Apply(two.clone())
        ]
    );
    // Unchanged: no write; allowed IPs compared sorted; a preshared key someone set is kept.
    let mut reordered = labelled(
        "peer-one",
        "test-mesh",
        "cluster-a",
        &["10.0.0.3/32", "10.0.0.1/32"],
        "k1",
    );
    let want = labelled(
        "peer-one",
        "test-mesh",
        "cluster-a",
        &["10.0.0.1/32", "10.0.0.3/32"],
        "k1",
    );
    reordered.spec.preshared_key = Some("psk".into());
    assert!(diff_target(std::slice::from_ref(&want), &[reordered], &ours).is_empty());
    // Changed key or allowed IPs: updated.
    let old = labelled(
        "peer-one",
        "test-mesh",
        "cluster-a",
        &["10.0.0.1/32"],
        "old",
    );
    let new = labelled(
        "peer-one",
        "test-mesh",
        "cluster-a",
        &["10.0.0.1/32", "10.0.0.2/32"],
        "new",
    );
    assert_eq!(
        diff_target(std::slice::from_ref(&new), &[old], &ours),
        [PeerAction::Apply(new.clone())]
    );
    // Orphans deleted; create, update, delete together.
    let orphan = labelled(
        "peer-orphan",
        "test-mesh",
        "cluster-a",
        &["10.0.0.9/32"],
        "gone",
    );
    let stale_src = labelled(
        "stale",
        "test-mesh",
        "cluster-removed",
        &["10.0.0.8/32"],
        "s",
    );
    let other_mesh = labelled(
        "theirs",
        "mesh-two",
        "cluster-removed",
        &["10.0.0.7/32"],
        "t",
    );
    let foreign = Peer {
        labels: BTreeMap::new(),
        ..labelled("hand-made", "", "", &["10.9.0.0/24"], "f")
    };
    let existing = vec![
        labelled("peer-one", "test-mesh", "cluster-a", &["10.0.0.5/32"], "k1"),
        orphan,
        stale_src,
        other_mesh,
        foreign.clone(),
    ];
    assert_eq!(
        diff_target(&[new.clone(), two.clone()], &existing, &ours),
        [
            PeerAction::Apply(new.clone()),
            PeerAction::Apply(two.clone()),
            PeerAction::Delete("peer-orphan".into()),
            PeerAction::Delete("stale".into()),
        ],
        "other meshes' Peers and Peers without the mesh label are left alone"
    );
    // A Peer without our labels under a name we want: reported, never overwritten.
    let squatted = Peer {
        name: "peer-two".into(),
        ..foreign
    };
    assert_eq!(
        diff_target(std::slice::from_ref(&two), &[squatted], &ours),
        [PeerAction::Conflict("peer-two".into())]
    );
    // A source that could not be read keeps its Peers.
    let spec = mesh_spec(vec![
        std_entry("a"),
        entry("b", &["10.245.0.0/16", "10.5.0.0/16"]),
    ]);
    let plan = &plan_meshes(&[("test-mesh", &spec)], &|_, c| match c {
        "a" => ClusterNodes::Unavailable("timeout".into()),
        _ => ClusterNodes::Listed(vec![]),
    })[0];
    let a_peer = labelled(
        "test-mesh--a--n1",
        "test-mesh",
        "a",
        &["10.244.1.0/24"],
        KEY_A,
    );
    let sweep =
        |p: &Peer| peer_owner(p).is_some_and(|(m, s)| m == "test-mesh" && plan.may_sweep(s));
    assert!(diff_target(&plan.peers_for("b"), &[a_peer], &sweep).is_empty());
}

#[test]
fn objects_round_trip_through_yaml() {
    let yaml = r#"
clusters:
- name: ceph
  local: true
  allowedNetworks: [10.247.0.0/16, 100.66.0.0/16]
- name: tenant
  kubeconfigSecretRef: {name: tenant-kubeconfig, key: value}
  allowedNetworks: [10.0.0.0/16]
  wireguardPort: 51821
  persistentKeepalive: 25
dns:
  dnsZoneRef: {name: mesh-zone}
"#;
    let spec: ClusterMeshSpec = serde_yaml::from_str(yaml).unwrap();
    assert_eq!(spec.clusters[1].effective_wireguard_port(), 51821);
    let back: ClusterMeshSpec =
        serde_yaml::from_str(&serde_yaml::to_string(&spec).unwrap()).unwrap();
    assert_eq!(back, spec);
    let n: Node = serde_yaml::from_str(
        "apiVersion: v1\nkind: Node\nmetadata: {name: w1, labels: {a: b}, annotations: {kilo.squat.ai/key: k}}\nspec: {podCIDR: 10.244.1.0/24}\nstatus: {addresses: [{type: InternalIP, address: 10.0.0.1}], capacity: {cpu: '2'}}\n",
    )
    .unwrap();
    assert_eq!(
        (n.name(), n.annotation(KEY), n.first_pod_cidr()),
        ("w1", Some("k"), Some("10.244.1.0/24"))
    );
    let spec = PeerSpec {
        allowed_ips: vec!["10.0.0.0/24".into()],
        endpoint: Some(PeerEndpoint {
            dns_or_ip: DnsOrIp {
                ip: Some("203.0.113.1".into()),
                dns: None,
            },
            port: 51820,
        }),
        persistent_keepalive: Some(25),
        preshared_key: None,
        public_key: KEY_A.into(),
    };
    let json = serde_json::to_value(&spec).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"allowedIPs": ["10.0.0.0/24"], "endpoint": {"dnsOrIP": {"ip": "203.0.113.1"}, "port": 51820}, "persistentKeepalive": 25, "publicKey": KEY_A})
    );
}

#[test]
fn node_names_in_dns() {
    let spec = mesh_spec(vec![
        std_entry("a"),
        entry("b", &["10.245.0.0/16", "fd00:5::/64"]),
    ]);
    let plans = plan_meshes(&[("m", &spec)], &|_, c| match c {
        "a" => ClusterNodes::Listed(vec![
            good("Node-2", 2, KEY_B, &[]),
            good("node-1", 1, KEY_A, &[]),
        ]),
        _ => ClusterNodes::Listed(vec![node(
            "w",
            &["10.245.1.0/24"],
            &[(KEY, KEY_C), (WIREGUARD_IP, "fd00:5::1/64")],
            &[],
        )]),
    });
    let dns = MeshDns {
        dns_zone_ref: NameRef {
            name: "mesh-zone".into(),
        },
        ttl_seconds: None,
    };
    let sets = crate::dns::node_record_sets(&plans[0], &dns);
    let got: Vec<String> = sets
        .iter()
        .map(|s| {
            let records: Vec<String> = s
                .records
                .iter()
                .map(|(n, ip)| format!("{n}={ip}"))
                .collect();
            format!("{} {} {}", s.name, s.record_type, records.join(","))
        })
        .collect();
    assert_eq!(
        got,
        [
            "m--a--nodes-a A node-2.a=10.4.0.2,node-1.a=10.4.0.1",
            "m--b--nodes-aaaa AAAA w.b=fd00:5::1",
        ]
    );
    assert_eq!(sets[0].ttl, crate::dns::DEFAULT_NODE_TTL);
    assert_eq!(sets[0].zone_name, "mesh-zone");
}

#[test]
fn schema_checks_name_the_field() {
    let ok = mesh_spec(vec![std_entry("a"), entry("b", &["10.245.0.0/16"])]);
    assert!(spec_problems(&ok).is_empty());
    let bad = ClusterMeshSpec {
        clusters: vec![
            ClusterEntry {
                wireguard_port: Some(0),
                persistent_keepalive: Some(-1),
                ..entry("Bad_Name", &[])
            },
            ClusterEntry {
                kubeconfig_secret_ref: Some(SecretKeyRef {
                    name: "s".into(),
                    key: String::new(),
                }),
                ..entry("Bad_Name", &["10.0.0.0/8"])
            },
        ],
        dns: Some(MeshDns::default()),
    };
    let got = spec_problems(&bad);
    for want in [
        "spec.clusters[0].name",
        "spec.clusters[0].allowedNetworks",
        "spec.clusters[0].wireguardPort",
        "spec.clusters[0].persistentKeepalive",
        "spec.clusters[1].name: \"Bad_Name\" appears twice",
        "spec.clusters[1].kubeconfigSecretRef",
        "spec.dns.dnsZoneRef.name",
    ] {
        assert!(
            got.iter().any(|p| p.contains(want)),
            "{want} missing from {got:#?}"
        );
    }
    assert!(spec_problems(&mesh_spec(vec![std_entry("a")]))[0].contains("at least 2"));
}
