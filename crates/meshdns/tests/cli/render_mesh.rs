//! `meshdns render mesh`: the mesh planner on a directory of manifests.

use std::path::Path;

use serde_yaml::Value;

use crate::*;

fn render(dir: &Path) -> (bool, String, String) {
    let out = bin()
        .args(["render", "mesh", "-f", dir.to_str().unwrap()])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn docs(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

fn endpoint(peer: &Value) -> String {
    let e = &peer["spec"]["endpoint"];
    format!(
        "{}:{}",
        e["dnsOrIP"]["ip"].as_str().unwrap(),
        e["port"].as_u64().unwrap()
    )
}

/// The shipped example: a public storage cluster and a NATed tenant.
#[test]
fn render_mesh_on_the_example() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/mesh");
    let (ok, text, err) = render(&dir);
    assert!(ok, "{err}");
    assert_eq!(render(&dir).1, text, "deterministic");
    let d = docs(&text);
    let kinds: Vec<&str> = d.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "List",
            "List",
            "DNSRecordSet",
            "DNSRecordSet",
            "ClusterMesh",
            "Event"
        ]
    );

    // Into ceph: tenant-a's one valid node, at the NAT egress ceph's Kilo observed, not at
    // its configured internal address.
    assert_eq!(
        d[0]["metadata"]["annotations"]["meshdns.io/target-cluster"],
        "ceph"
    );
    let into_ceph = d[0]["items"].as_sequence().unwrap();
    assert_eq!(into_ceph.len(), 1);
    assert_eq!(
        into_ceph[0]["metadata"]["name"],
        "storage--tenant-a--worker-1"
    );
    assert_eq!(
        into_ceph[0]["metadata"]["labels"]["kilo-clustermesh.io/source-cluster"],
        "tenant-a"
    );
    assert_eq!(endpoint(&into_ceph[0]), "198.51.100.7:31337");
    let ips: Vec<&str> = into_ceph[0]["spec"]["allowedIPs"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        ips,
        [
            "10.0.1.0/24",
            "10.4.0.1/32",
            "192.168.10.5/32",
            "10.96.0.0/16"
        ]
    );

    // Into tenant-a: both ceph nodes at their IPv4 ExternalIP, keepalive from the mesh floor.
    let into_tenant = d[1]["items"].as_sequence().unwrap();
    let got: Vec<(&str, String, u64)> = into_tenant
        .iter()
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap(),
                endpoint(p),
                p["spec"]["persistentKeepalive"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "storage--ceph--ceph-1",
                "203.0.113.11:51820".to_string(),
                25
            ),
            (
                "storage--ceph--ceph-2",
                "203.0.113.12:51820".to_string(),
                25
            )
        ]
    );

    // Node names in DNS.
    assert_eq!(d[3]["spec"]["records"][0]["name"], "worker-1.tenant-a");
    assert_eq!(d[3]["spec"]["records"][0]["a"]["content"], "10.4.0.1");

    // Status and the skip Event.
    let status = &d[4]["status"];
    assert_eq!(status["clusters"][1]["name"], "tenant-a");
    assert_eq!(status["clusters"][1]["registeredPeers"], 1);
    assert_eq!(status["clusters"][1]["skippedNodes"], 1);
    assert_eq!(status["conditions"][0]["reason"], "Reconciled");
    assert_eq!(d[5]["type"], "Warning");
    assert_eq!(d[5]["reason"], "NodeNoWireguardIP");
    assert_eq!(d[5]["involvedObject"]["name"], "storage");
    assert!(
        d[5]["message"]
            .as_str()
            .unwrap()
            .starts_with("tenant-a/worker-2: ")
    );
}

const NODE: &str = "apiVersion: v1
kind: Node
metadata:
  name: n1
  annotations:
    kilo.squat.ai/key: AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
    kilo.squat.ai/wireguard-ip: 10.4.0.1/16
spec: {podCIDRs: [10.0.1.0/24]}
";

fn mesh(name: &str, clusters: &[(&str, &str)]) -> String {
    let entries: String = clusters
        .iter()
        .map(|(c, nets)| format!("  - name: {c}\n    allowedNetworks: [{nets}]\n"))
        .collect();
    format!(
        "---\napiVersion: kilo.squat.ai/v1alpha1\nkind: ClusterMesh\nmetadata: {{name: {name}, namespace: mesh}}\nspec:\n  clusters:\n{entries}"
    )
}

/// Overlapping networks block the meshes involved: no Peers, the NetworksOverlap condition.
/// A mesh that overlaps nobody is still planned, and a cluster without a directory is
/// reported as unavailable.
#[test]
fn render_mesh_blocks_overlapping_meshes_only() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = [
        mesh(
            "a",
            &[("x", "10.0.0.0/16, 10.4.0.0/16"), ("y", "10.1.0.0/16")],
        ),
        mesh("b", &[("z", "10.0.0.0/16"), ("w", "10.2.0.0/16")]),
        mesh(
            "c",
            &[("x2", "10.8.0.0/16, 10.9.0.0/16"), ("gone", "10.3.0.0/16")],
        ),
    ]
    .concat();
    write(dir.path(), "meshes.yaml", &manifests);
    let x2 = dir.path().join("clusters/x2");
    std::fs::create_dir_all(&x2).unwrap();
    write(
        &x2,
        "nodes.yaml",
        &NODE
            .replace("10.0.1.0/24", "10.8.1.0/24")
            .replace("10.4.0.1/16", "10.9.0.1/16"),
    );
    let (ok, text, err) = render(dir.path());
    assert!(ok, "{err}");
    let d = docs(&text);
    let lists: Vec<&str> = d
        .iter()
        .filter(|d| d["kind"] == "List")
        .map(|d| {
            d["metadata"]["annotations"]["meshdns.io/target-cluster"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(lists, ["gone", "x2"], "only mesh c is planned");
    let status = |name: &str| {
        d.iter()
            .find(|d| d["kind"] == "ClusterMesh" && d["metadata"]["name"] == name)
            .unwrap()["status"]
            .clone()
    };
    for blocked in ["a", "b"] {
        let s = status(blocked);
        assert_eq!(s["conditions"][0]["reason"], "NetworksOverlap");
        assert_eq!(s["conditions"][1]["type"], "NetworksOverlap");
        assert_eq!(s["conditions"][1]["status"], "True");
        let msg = s["conditions"][1]["message"].as_str().unwrap();
        assert!(
            msg.contains("mesh \"a\" (cluster \"x\", 10.0.0.0/16) and mesh \"b\" (cluster \"z\", 10.0.0.0/16)"),
            "{msg}"
        );
    }
    let c = status("c");
    assert_eq!(c["conditions"][0]["reason"], "ClusterUnavailable");
    assert!(
        c["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .contains("clusters/gone")
    );
    assert_eq!(c["clusters"][0]["registeredPeers"], 1);
}

#[test]
fn render_mesh_names_the_field_at_fault() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "m.yaml",
        &mesh("a", &[("Bad_Name", "10.0.0.0/16"), ("y", "10.1.0.0/16")]),
    );
    let (ok, _, err) = render(dir.path());
    assert!(!ok);
    assert!(
        err.contains("ClusterMesh mesh/a: spec.clusters[0].name: \"Bad_Name\""),
        "{err}"
    );
    let empty = tempfile::tempdir().unwrap();
    let (ok, _, err) = render(empty.path());
    assert!(!ok && err.contains("no ClusterMesh manifest"), "{err}");
}

#[test]
fn crds_prints_every_crd() {
    let out = bin().arg("crds").output().unwrap();
    assert!(out.status.success());
    let d = docs(&String::from_utf8(out.stdout).unwrap());
    let names: Vec<&str> = d
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "clustermeshes.kilo.squat.ai",
            "peers.kilo.squat.ai",
            "connectors.networking.datumapis.com",
            "connectorclasses.networking.datumapis.com",
            "dnszones.dns.networking.miloapis.com",
            "dnsrecordsets.dns.networking.miloapis.com"
        ]
    );
}
