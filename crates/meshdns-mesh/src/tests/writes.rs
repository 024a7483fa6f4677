//! The mesh planner: merging and writes.

use std::collections::BTreeMap;

use crate::annotations::*;
use crate::plan::*;

use super::*;

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
    let dns = NodeNames {
        zone_name: "mesh-zone".into(),
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
