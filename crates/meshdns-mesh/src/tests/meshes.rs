//! The mesh planner: planning whole meshes.

use crate::annotations::*;
use crate::plan::*;

use super::*;

/// The seed's NAT scenario: `public` has public endpoints; `nat-a` and `nat-b` sit behind NAT
/// and declare keepalive 25. Each target's Kilo observed the NAT egress of the NATed nodes it
/// handshook with; each target's Peers carry what *that target* saw.
#[test]
fn nat_scenario_enriches_per_target() {
    let spec = MeshSpec {
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
