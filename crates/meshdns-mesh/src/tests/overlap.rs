//! The mesh planner: overlap validation.

use crate::validate::*;

use super::*;

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
        let specs: Vec<(&str, MeshSpec)> =
            meshes.into_iter().map(|(n, c)| (n, mesh_spec(c))).collect();
        let refs: Vec<(&str, &MeshSpec)> = specs.iter().map(|(n, s)| (*n, s)).collect();
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
