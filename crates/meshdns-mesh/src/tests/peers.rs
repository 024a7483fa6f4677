//! The mesh planner: peer building.

use crate::annotations::*;
use crate::plan::*;

use super::*;

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
    n.addresses = vec![("InternalIP".into(), "fd00:4::3".into())];
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
        addresses: vec![("InternalIP".into(), ip.into())],
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
    let spec = |ks: &[Option<i64>]| MeshSpec {
        clusters: ks
            .iter()
            .enumerate()
            .map(|(i, k)| ClusterEntry {
                name: format!("c{i}"),
                persistent_keepalive: *k,
                ..Default::default()
            })
            .collect(),
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
