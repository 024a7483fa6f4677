//! The mesh controller against three in-memory API servers (a public hub and two tenants):
//! Peers in every cluster, NAT-aware per target, re-planned on node changes, Secret rotation
//! without restart, finalizer cleanup, unreachable clusters left alone, and a steady state
//! that costs no writes.

#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use meshdns_fakekube::FakeKube;
use meshdns_fakekube::rbac::{self, Policy};
use meshdns_kube::controllers::mesh::{MeshOptions, run};
use meshdns_kube::metrics::Metrics;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const KILO: &str = "kilo.squat.ai/v1alpha1";
const K1: &str = "cGVlcmNlcGgxcGVlcmNlcGgxcGVlcmNlcGgxcGVlcmM=";
const K2: &str = "dGVuYW50YTF0ZW5hbnRhMXRlbmFudGExdGVuYW50YTE=";
const K3: &str = "dGVuYW50YjF0ZW5hbnRiMXRlbmFudGIxdGVuYW50YjE=";
const WAIT: Duration = Duration::from_secs(15);

fn node(name: &str, pod: &str, wg: &str, key: &str, annotations: Value, addresses: Value) -> Value {
    let mut ann = json!({"kilo.squat.ai/key": key, "kilo.squat.ai/wireguard-ip": wg});
    for (k, v) in annotations.as_object().unwrap() {
        ann[k] = v.clone();
    }
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": ann},
           "spec": {"podCIDRs": [pod]}, "status": {"addresses": addresses}})
}

fn secret(name: &str, kubeconfig: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "kilo"},
           "data": {"kubeconfig": data_encoding::BASE64.encode(kubeconfig.as_bytes())}})
}

fn mesh(name: &str, clusters: Value) -> Value {
    json!({"apiVersion": KILO, "kind": "ClusterMesh", "metadata": {"name": name, "namespace": "kilo"},
           "spec": {"clusters": clusters}})
}

fn storage_mesh() -> Value {
    mesh(
        "storage",
        json!([
            {"name": "ceph", "local": true, "allowedNetworks": ["10.247.0.0/16", "100.66.0.0/16"]},
            {"name": "tenant-a", "kubeconfigSecretRef": {"name": "tenant-a", "key": "kubeconfig"},
             "allowedNetworks": ["10.0.0.0/16", "10.4.0.0/24"], "persistentKeepalive": 25},
            {"name": "tenant-b", "kubeconfigSecretRef": {"name": "tenant-b", "key": "kubeconfig"},
             "allowedNetworks": ["10.1.0.0/16", "10.4.1.0/24"]}
        ]),
    )
}

fn tenant_b_node(fake: &FakeKube) {
    fake.insert(node(
        "worker-1",
        "10.1.1.0/24",
        "10.4.1.1/24",
        K3,
        json!({}),
        json!([{"type": "ExternalIP", "address": "203.0.113.30"}]),
    ));
}

/// The rules `deploy/` gives the controller in its own cluster (the mesh's namespace is the
/// install namespace, as in the kilo-mesh overlay).
fn home() -> Policy {
    Policy::load(
        &[
            "base/mesh-member-role/clusterrole.yaml",
            "base/controller-mesh/rbac.yaml",
        ],
        "meshdns-controller-mesh",
        "kilo",
    )
}

/// The rules a member cluster grants it (`deploy/remote/mesh-member`).
fn member() -> Policy {
    Policy::load(
        &[
            "base/mesh-member-role/clusterrole.yaml",
            "remote/mesh-member/rbac.yaml",
        ],
        "meshdns-mesh-member",
        "kube-system",
    )
}

struct Mesh {
    hub: FakeKube,
    a: FakeKube,
    b: FakeKube,
    stop: CancellationToken,
}

impl Drop for Mesh {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn start() -> Mesh {
    let hub = FakeKube::start().await;
    let a = FakeKube::start().await;
    let b = FakeKube::start().await;
    hub.enforce(home());
    a.enforce(member());
    b.enforce(member());
    // ceph saw tenant-a's node behind its NAT.
    let seen = format!(r#"{{"{K2}":{{"IP":"198.51.100.7","Port":31337,"Zone":""}}}}"#);
    hub.insert(node(
        "ceph-1",
        "10.247.1.0/24",
        "100.66.0.1/16",
        K1,
        json!({"kilo.squat.ai/discovered-endpoints": seen}),
        json!([{"type": "ExternalIP", "address": "203.0.113.11"}]),
    ));
    a.insert(node(
        "worker-1",
        "10.0.1.0/24",
        "10.4.0.1/24",
        K2,
        json!({"kilo.squat.ai/force-endpoint": "192.168.10.5:51820"}),
        json!([]),
    ));
    tenant_b_node(&b);
    hub.insert(secret("tenant-a", &a.kubeconfig("a")));
    hub.insert(secret("tenant-b", &b.kubeconfig("b")));
    hub.insert(storage_mesh());
    let stop = CancellationToken::new();
    tokio::spawn(run(
        hub.client(),
        MeshOptions::new("kilo"),
        Arc::new(Metrics::new("mesh")),
        stop.clone(),
    ));
    Mesh { hub, a, b, stop }
}

fn peer(fake: &FakeKube, name: &str) -> Option<Value> {
    fake.get(KILO, "Peer", None, name)
}

fn endpoint(p: &Value) -> String {
    let e = &p["spec"]["endpoint"];
    format!(
        "{}:{}",
        e["dnsOrIP"]["ip"]
            .as_str()
            .or(e["dnsOrIP"]["dns"].as_str())
            .unwrap_or("-"),
        e["port"]
    )
}

async fn wait_endpoint(fake: &FakeKube, name: &str, want: &str) {
    let got = fake
        .eventually(WAIT, |f| peer(f, name).filter(|p| endpoint(p) == want))
        .await;
    assert!(
        got.is_some(),
        "{name}: want endpoint {want}, have {:?}",
        peer(fake, name).map(|p| endpoint(&p))
    );
}

#[tokio::test]
async fn peers_converge_per_target_and_rest() {
    let m = start().await;
    // Into the hub: tenant-a at the NAT egress the hub observed, tenant-b at its ExternalIP.
    wait_endpoint(&m.hub, "storage--tenant-a--worker-1", "198.51.100.7:31337").await;
    wait_endpoint(&m.hub, "storage--tenant-b--worker-1", "203.0.113.30:51820").await;
    // Into tenant-b, which observed nothing: tenant-a's configured endpoint.
    wait_endpoint(&m.b, "storage--tenant-a--worker-1", "192.168.10.5:51820").await;
    wait_endpoint(&m.b, "storage--ceph--ceph-1", "203.0.113.11:51820").await;
    wait_endpoint(&m.a, "storage--ceph--ceph-1", "203.0.113.11:51820").await;
    wait_endpoint(&m.a, "storage--tenant-b--worker-1", "203.0.113.30:51820").await;
    let p = peer(&m.a, "storage--ceph--ceph-1").unwrap();
    assert_eq!(
        p["spec"]["persistentKeepalive"], 25,
        "mesh-wide keepalive floor"
    );
    assert_eq!(
        p["spec"]["allowedIPs"],
        json!(["10.247.1.0/24", "100.66.0.1/32"])
    );
    assert_eq!(
        p["metadata"]["labels"]["kilo-clustermesh.io/source-cluster"],
        "ceph"
    );
    assert!(
        peer(&m.a, "storage--tenant-a--worker-1").is_none(),
        "no Peer for a cluster's own nodes"
    );

    let status = m
        .hub
        .eventually(WAIT, |f| {
            let s = f.get(KILO, "ClusterMesh", Some("kilo"), "storage")?["status"].clone();
            (s["conditions"][0]["reason"] == "Reconciled").then_some(s)
        })
        .await
        .expect("status");
    assert_eq!(status["clusters"].as_array().unwrap().len(), 3);
    let mesh = m
        .hub
        .get(KILO, "ClusterMesh", Some("kilo"), "storage")
        .unwrap();
    assert_eq!(
        mesh["metadata"]["finalizers"],
        json!(["kilo-clustermesh.io/cleanup"])
    );

    // Steady state: nothing written anywhere, even when a reconcile runs.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for f in [&m.hub, &m.a, &m.b] {
        f.clear_requests();
    }
    let mut mesh = m
        .hub
        .get(KILO, "ClusterMesh", Some("kilo"), "storage")
        .unwrap();
    mesh["metadata"]["labels"] = json!({"poke": "1"});
    m.hub.replace(mesh);
    tokio::time::sleep(Duration::from_millis(800)).await;
    for f in [&m.hub, &m.a, &m.b] {
        let writes: Vec<_> = f
            .writes()
            .into_iter()
            .filter(|w| !w.path.contains("/events"))
            .collect();
        assert!(writes.is_empty(), "steady state wrote {writes:?}");
    }

    // A node annotation change in a target re-plans within seconds: tenant-b now observed
    // tenant-a's egress.
    let mut n = m.b.get("v1", "Node", None, "worker-1").unwrap();
    n["metadata"]["annotations"]["kilo.squat.ai/discovered-endpoints"] = json!(format!(
        r#"{{"{K2}":{{"IP":"198.51.100.8","Port":4000,"Zone":""}}}}"#
    ));
    m.b.replace(n);
    wait_endpoint(&m.b, "storage--tenant-a--worker-1", "198.51.100.8:4000").await;
    // ... and only there.
    assert_eq!(
        endpoint(&peer(&m.hub, "storage--tenant-a--worker-1").unwrap()),
        "198.51.100.7:31337"
    );
}

#[tokio::test]
async fn secret_rotation_unreachable_clusters_and_cleanup() {
    let m = start().await;
    wait_endpoint(&m.hub, "storage--tenant-b--worker-1", "203.0.113.30:51820").await;
    // A Peer someone made by hand, in tenant-a: never touched.
    m.a.insert(
        json!({"apiVersion": KILO, "kind": "Peer", "metadata": {"name": "laptop"},
        "spec": {"allowedIPs": ["10.99.0.1/32"], "publicKey": K1}}),
    );

    // tenant-b's Secret now points at another cluster: the client is rebuilt in place.
    let c = FakeKube::start().await;
    c.enforce(member());
    tenant_b_node(&c);
    let mut s = m.hub.get("v1", "Secret", Some("kilo"), "tenant-b").unwrap();
    s["data"]["kubeconfig"] = json!(data_encoding::BASE64.encode(c.kubeconfig("c").as_bytes()));
    m.hub.replace(s);
    wait_endpoint(&c, "storage--ceph--ceph-1", "203.0.113.11:51820").await;

    // tenant-b becomes unreachable (its Secret loses the key): its Peers elsewhere stay.
    let mut s = m.hub.get("v1", "Secret", Some("kilo"), "tenant-b").unwrap();
    s["data"] = json!({"other": "eA=="});
    m.hub.replace(s);
    let status = m
        .hub
        .eventually(WAIT, |f| {
            let s = f.get(KILO, "ClusterMesh", Some("kilo"), "storage")?["status"].clone();
            (s["conditions"][0]["reason"] == "ClusterUnavailable").then_some(s)
        })
        .await
        .expect("unavailable reported");
    assert!(
        status["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .contains("tenant-b")
    );
    assert!(
        peer(&m.hub, "storage--tenant-b--worker-1").is_some(),
        "kept while unreachable"
    );

    // Deleting the mesh removes its Peers wherever it can reach, then the mesh itself once
    // everything is clean; tenant-b is restored so the cleanup can finish.
    let mut s = m.hub.get("v1", "Secret", Some("kilo"), "tenant-b").unwrap();
    s["data"] = json!({"kubeconfig": data_encoding::BASE64.encode(m.b.kubeconfig("b").as_bytes())});
    m.hub.replace(s);
    m.hub.delete(KILO, "ClusterMesh", Some("kilo"), "storage");
    let gone = m
        .hub
        .eventually(WAIT, |f| {
            f.get(KILO, "ClusterMesh", Some("kilo"), "storage")
                .is_none()
                .then_some(())
        })
        .await;
    assert!(gone.is_some(), "finalizer never removed");
    for f in [&m.hub, &m.a, &m.b] {
        let left: Vec<String> = f
            .list(KILO, "Peer")
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        assert!(left.iter().all(|n| n == "laptop"), "left behind: {left:?}");
    }
    assert!(
        peer(&m.a, "laptop").is_some(),
        "a Peer meshdns did not write is never deleted"
    );
}

#[tokio::test]
async fn overlapping_meshes_are_blocked_alone() {
    let m = start().await;
    wait_endpoint(&m.a, "storage--ceph--ceph-1", "203.0.113.11:51820").await;
    for (name, net) in [("bad-1", "172.16.0.0/16"), ("bad-2", "172.16.1.0/24")] {
        m.hub.insert(mesh(name, json!([
            {"name": format!("{name}-x"), "local": true, "allowedNetworks": [net]},
            {"name": format!("{name}-y"), "local": true, "allowedNetworks": [format!("192.168.{}.0/24", name.len() + if name == "bad-1" { 0 } else { 1 })]}
        ])));
    }
    for name in ["bad-1", "bad-2"] {
        let s = m
            .hub
            .eventually(WAIT, |f| {
                let s = f.get(KILO, "ClusterMesh", Some("kilo"), name)?["status"].clone();
                (s["conditions"][1]["reason"] == "CIDROverlap").then_some(s)
            })
            .await
            .unwrap_or_else(|| panic!("{name} not blocked"));
        assert_eq!(s["conditions"][0]["reason"], "NetworksOverlap");
    }
    let storage = m
        .hub
        .get(KILO, "ClusterMesh", Some("kilo"), "storage")
        .unwrap();
    assert_eq!(
        storage["status"]["conditions"][0]["reason"], "Reconciled",
        "an unrelated mesh keeps working"
    );
}

#[tokio::test]
async fn spec_changes_sweep_publish_names_and_report_skips() {
    let m = start().await;
    wait_endpoint(&m.b, "storage--ceph--ceph-1", "203.0.113.11:51820").await;
    // A node Kilo has not annotated yet: skipped, with one Warning Event on the mesh.
    m.a.insert(node(
        "worker-2",
        "10.0.2.0/24",
        "",
        K3,
        json!({}),
        json!([]),
    ));
    let event = m
        .hub
        .eventually(WAIT, |f| {
            f.list("events.k8s.io/v1", "Event")
                .into_iter()
                .find(|e| e["reason"] == "NodeNoWireguardIP")
        })
        .await
        .expect("skip event");
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["action"], "SkipNodePeering");
    assert_eq!(event["regarding"]["name"], "storage");
    assert!(
        event["note"]
            .as_str()
            .unwrap()
            .starts_with("tenant-a/worker-2: ")
    );

    // Kilo annotates the node, then the annotation goes again: the same skip, reported again,
    // updates the same Event's series instead of adding one.
    let skipped = |f: &FakeKube| {
        f.get(KILO, "ClusterMesh", Some("kilo"), "storage")
            .and_then(|m| {
                m["status"]["clusters"]
                    .as_array()
                    .map(|c| c.iter().filter_map(|x| x["skippedNodes"].as_u64()).sum())
            })
            .unwrap_or(0u64)
    };
    let before = m
        .hub
        .eventually(WAIT, |f| Some(skipped(f)).filter(|n| *n > 0))
        .await
        .expect("worker-2 counted as skipped");
    let mut n = m.a.get("v1", "Node", None, "worker-2").unwrap();
    n["metadata"]["annotations"]["kilo.squat.ai/wireguard-ip"] = json!("10.4.0.2/24");
    m.a.replace(n.clone());
    m.hub
        .eventually(WAIT, |f| (skipped(f) < before).then_some(()))
        .await
        .expect("worker-2 peered once annotated");
    n["metadata"]["annotations"]["kilo.squat.ai/wireguard-ip"] = json!("");
    m.a.replace(n);
    let again = m
        .hub
        .eventually(WAIT, |f| {
            let events: Vec<Value> = f
                .list("events.k8s.io/v1", "Event")
                .into_iter()
                .filter(|e| e["reason"] == "NodeNoWireguardIP")
                .collect();
            (events.len() == 1 && events[0]["series"]["count"].as_u64() >= Some(2))
                .then(|| events[0].clone())
        })
        .await;
    assert!(
        again.is_some(),
        "one Event, counted twice: {:?}",
        m.hub.list("events.k8s.io/v1", "Event")
    );

    // A Peer of a mesh that exists in no namespace is an orphan: swept.
    m.a.insert(json!({"apiVersion": KILO, "kind": "Peer",
        "metadata": {"name": "ghost--x--n1", "labels": {"kilo-clustermesh.io/mesh": "ghost", "kilo-clustermesh.io/source-cluster": "x"}},
        "spec": {"allowedIPs": ["10.98.0.0/24"], "publicKey": K3}}));
    let mut poke = m
        .hub
        .get(KILO, "ClusterMesh", Some("kilo"), "storage")
        .unwrap();
    poke["metadata"]["labels"] = json!({"poke": "orphans"});
    m.hub.replace(poke);
    let orphan_gone =
        m.a.eventually(WAIT, |f| peer(f, "ghost--x--n1").is_none().then_some(()))
            .await;
    assert!(orphan_gone.is_some(), "orphan Peer swept");

    // tenant-b leaves the mesh and the mesh publishes node names.
    let mut mesh = m
        .hub
        .get(KILO, "ClusterMesh", Some("kilo"), "storage")
        .unwrap();
    mesh["spec"]["clusters"].as_array_mut().unwrap().pop();
    mesh["spec"]["dns"] = json!({"dnsZoneRef": {"name": "mesh-zone"}});
    m.hub.replace(mesh);
    let swept = m
        .hub
        .eventually(WAIT, |_| {
            (peer(&m.hub, "storage--tenant-b--worker-1").is_none()
                && peer(&m.a, "storage--tenant-b--worker-1").is_none()
                && m.b.list(KILO, "Peer").is_empty())
            .then_some(())
        })
        .await;
    assert!(
        swept.is_some(),
        "tenant-b's Peers, and the Peers in tenant-b, are swept"
    );
    assert!(
        peer(&m.a, "storage--ceph--ceph-1").is_some(),
        "the rest stays"
    );
    let names = m
        .hub
        .eventually(WAIT, |f| {
            f.get(
                "dns.networking.miloapis.com/v1alpha1",
                "DNSRecordSet",
                Some("kilo"),
                "storage--tenant-a--nodes-a",
            )
        })
        .await
        .expect("node names published");
    assert_eq!(
        names["spec"]["records"],
        json!([{"name": "worker-1.tenant-a", "ttl": 30, "a": {"content": "10.4.0.1"}}])
    );
    assert_eq!(names["spec"]["dnsZoneRef"]["name"], "mesh-zone");

    // The mesh stops publishing names: its record sets go.
    let mut mesh = m
        .hub
        .get(KILO, "ClusterMesh", Some("kilo"), "storage")
        .unwrap();
    mesh["spec"].as_object_mut().unwrap().remove("dns");
    m.hub.replace(mesh);
    let withdrawn = m
        .hub
        .eventually(WAIT, |f| {
            f.list("dns.networking.miloapis.com/v1alpha1", "DNSRecordSet")
                .is_empty()
                .then_some(())
        })
        .await;
    assert!(withdrawn.is_some(), "node names withdrawn");
}

/// Deleting a namespace takes the kubeconfig Secrets with it: a mesh whose member can no
/// longer be reached at all is still cleaned where it can be, and its deletion completes.
#[tokio::test]
async fn deletion_does_not_hang_when_a_secret_is_gone() {
    let m = start().await;
    wait_endpoint(&m.a, "storage--tenant-b--worker-1", "203.0.113.30:51820").await;
    m.hub.delete("v1", "Secret", Some("kilo"), "tenant-b");
    m.hub.delete(KILO, "ClusterMesh", Some("kilo"), "storage");
    let gone = m
        .hub
        .eventually(WAIT, |f| {
            f.get(KILO, "ClusterMesh", Some("kilo"), "storage")
                .is_none()
                .then_some(())
        })
        .await;
    assert!(gone.is_some(), "deletion hangs");
    assert!(m.a.list(KILO, "Peer").is_empty() && m.hub.list(KILO, "Peer").is_empty());
}

/// Least privilege, the other way round: every rule `deploy/` grants the controller is used by
/// one of the scenarios above (each of which also fails on a request the rules refuse). The
/// election Lease rules are exercised by the process tests (`crates/meshdns/tests/cli`).
#[test]
fn rbac_every_rule_is_exercised() {
    peers_converge_per_target_and_rest();
    secret_rotation_unreachable_clusters_and_cleanup();
    overlapping_meshes_are_blocked_alone();
    spec_changes_sweep_publish_names_and_report_skips();
    deletion_does_not_hang_when_a_secret_is_gone();
    for policy in [home(), member()] {
        rbac::assert_all_exercised(&policy, |role| role.ends_with("-election"));
    }
}

/// The API fails in every way on all three clusters (500s and 409s on writes, 503s and 2 s
/// stalls ending in 504 on reads, watches dropped silently and ended 410 Gone) while the mesh
/// converges and is then deleted. Peers converge once the faults pass, the deletion completes
/// (no stranded finalizer, every Peer of the mesh removed), and a Peer the controller does not
/// own is never written.
#[tokio::test]
async fn converges_and_deletes_through_api_faults() {
    let m = start().await;
    m.a.insert(
        json!({"apiVersion": KILO, "kind": "Peer", "metadata": {"name": "hand-made"},
        "spec": {"allowedIPs": ["10.9.0.0/24"], "publicKey": K1}}),
    );
    for fake in [&m.hub, &m.a, &m.b] {
        fake.fail("POST", "/peers", 500, 2);
        fake.fail("PATCH", "/peers", 409, 2);
        fake.fail("PATCH", "/peers", 500, 1);
        fake.fail("GET", "/peers", 503, 2);
        fake.stall("GET", "/nodes", Duration::from_secs(2), 1);
    }
    m.hub.fail("PATCH", "/clustermeshes", 500, 2);
    m.hub.fail("PATCH", "/clustermeshes", 409, 2);
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        for fake in [&m.hub, &m.a, &m.b] {
            fake.disconnect_watches();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        for fake in [&m.hub, &m.a, &m.b] {
            fake.expire_watches();
        }
    }
    let converged = m
        .hub
        .eventually(Duration::from_secs(60), |hub| {
            let into_hub = peer(hub, "storage--tenant-a--worker-1")?;
            let into_a = peer(&m.a, "storage--tenant-b--worker-1")?;
            (endpoint(&into_hub) == "198.51.100.7:31337"
                && endpoint(&into_a) == "203.0.113.30:51820")
                .then_some(())
        })
        .await;
    assert!(
        converged.is_some(),
        "Peers did not converge after the faults"
    );

    for fake in [&m.a, &m.b] {
        fake.fail("DELETE", "/peers", 500, 2);
        fake.fail("GET", "/peers", 503, 1);
    }
    m.hub.fail("PATCH", "/clustermeshes", 409, 1);
    m.hub.delete(KILO, "ClusterMesh", Some("kilo"), "storage");
    m.a.disconnect_watches();
    m.hub.expire_watches();
    let gone = m
        .hub
        .eventually(Duration::from_secs(60), |hub| {
            let mesh_gone = hub
                .get(KILO, "ClusterMesh", Some("kilo"), "storage")
                .is_none();
            let ours = |f: &FakeKube| {
                f.list(KILO, "Peer")
                    .iter()
                    .any(|p| p["metadata"]["name"] != "hand-made")
            };
            (mesh_gone && !ours(hub) && !ours(&m.a) && !ours(&m.b)).then_some(())
        })
        .await;
    assert!(
        gone.is_some(),
        "deletion did not complete: mesh {:?}, Peers in a {:?}",
        m.hub.get(KILO, "ClusterMesh", Some("kilo"), "storage"),
        m.a.list(KILO, "Peer")
    );
    assert!(peer(&m.a, "hand-made").is_some(), "a Peer it does not own");
    let touched: Vec<_> =
        m.a.writes()
            .into_iter()
            .filter(|w| w.path.ends_with("/hand-made"))
            .collect();
    assert!(
        touched.is_empty(),
        "wrote to a Peer it does not own: {touched:?}"
    );
}
