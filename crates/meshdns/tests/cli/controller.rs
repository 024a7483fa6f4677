//! `meshdns controller iroh` as a process against the in-memory API server: it elects
//! itself, publishes, serves metrics, and stops on SIGTERM.

use std::process::Stdio;
use std::time::Duration;

use meshdns_fakekube::FakeKube;
use meshdns_fakekube::rbac::{self, Policy};
use serde_json::json;

use crate::*;

const HEX: &str = "f120d52e42bfcee750508baf28900acac85ad3f397ab4bb653b32be505c32d39";
const Z32: &str = "6ropkm1nz98qqwnotqz1tryk3mrfiw9u16iwzp1usci6kbqdfwho";

/// The rules deploy/ gives `controller iroh` in its own cluster, installed in meshdns-system
/// (the DNSZone's namespace too).
fn iroh_policy() -> Policy {
    Policy::load(
        &[
            "base/iroh-source-role/clusterrole.yaml",
            "base/iroh-records-role/clusterrole.yaml",
            "base/controller-iroh/rbac.yaml",
        ],
        "meshdns-controller-iroh",
        "meshdns-system",
    )
}

/// [`iroh_policy`] with `components/iroh-source-clusters`: the kubeconfig Secrets of the
/// source clusters (`project-a`, as the component ships).
fn iroh_policy_with_source_clusters() -> Policy {
    Policy::load(
        &[
            "base/iroh-source-role/clusterrole.yaml",
            "base/iroh-records-role/clusterrole.yaml",
            "base/controller-iroh/rbac.yaml",
            "components/iroh-source-clusters/rbac.yaml",
        ],
        "meshdns-controller-iroh",
        "meshdns-system",
    )
}

/// The rules deploy/ gives `controller mesh` in its own cluster, installed in the mesh's
/// namespace.
fn mesh_policy() -> Policy {
    Policy::load(
        &[
            "base/mesh-member-role/clusterrole.yaml",
            "base/controller-mesh/rbac.yaml",
        ],
        "meshdns-controller-mesh",
        "kilo",
    )
}

/// The election rules, which only these process tests exercise (the controllers' own tests
/// cover the rest): each scenario fails on a request the rules refuse, and this fails on an
/// election rule neither uses.
#[test]
fn rbac_election_rules_are_exercised() {
    controller_iroh_publishes_and_stops_cleanly();
    controller_mesh_writes_peers_into_both_clusters();
    for policy in [iroh_policy(), mesh_policy()] {
        rbac::assert_all_exercised(&policy, |role| !role.ends_with("-election"));
    }
}

/// Waits for the leader to renew its Lease (every 5 s): the first renewal after it is seen.
async fn renewed(fake: &FakeKube, namespace: &str, name: &str) {
    let get = |f: &FakeKube| f.get("coordination.k8s.io/v1", "Lease", Some(namespace), name);
    let wait = Duration::from_secs(15);
    let first = fake.eventually(wait, get).await.expect("leader lease");
    let later = fake
        .eventually(wait, |f| {
            get(f).filter(|l| l["spec"]["renewTime"] != first["spec"]["renewTime"])
        })
        .await;
    assert!(later.is_some(), "{namespace}/{name}: never renewed");
}

pub(crate) use crate::secondaries::free_port;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_iroh_publishes_and_stops_cleanly() {
    let fake = FakeKube::start().await;
    fake.enforce(iroh_policy());
    fake.insert(json!({"apiVersion": "networking.datumapis.com/v1alpha1", "kind": "ConnectorClass",
        "metadata": {"name": "datum-connect"}, "spec": {"controllerName": "networking.datumapis.com/datum-connect"}}));
    fake.insert(json!({"apiVersion": "networking.datumapis.com/v1alpha1", "kind": "Connector",
        "metadata": {"name": "laptop", "namespace": "default"}, "spec": {"connectorClassName": "datum-connect"},
        "status": {"connectionDetails": {"type": "PublicKey", "publicKey": {"id": HEX, "homeRelay": "https://relay.example.com"}}}}));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write(dir.path(), "kubeconfig", &fake.kubeconfig("fake"));
    // datum's own config file, as it is.
    let config = write(
        dir.path(),
        "nso.yaml",
        "apiVersion: apiserver.config.datumapis.com/v1alpha1\nkind: NetworkServicesOperator\nconnector:\n  iroh:\n    dnsEnabled: true\n    dnsZoneRef: {namespace: meshdns-system, name: connectors-zone}\n    recordSuffix: connectors\n",
    );
    let http = format!("127.0.0.1:{}", free_port());
    let mut child = spawn(&[
        "iroh",
        "--config",
        &config,
        "--kubeconfig",
        &kubeconfig,
        "--http",
        &http,
    ]);
    let name = format!("iroh-{Z32}");
    let rs = fake
        .eventually(Duration::from_secs(20), |f| {
            f.get(
                "dns.networking.miloapis.com/v1alpha1",
                "DNSRecordSet",
                Some("meshdns-system"),
                &name,
            )
        })
        .await;
    if rs.is_none() {
        let _ = child.kill();
        let mut err = String::new();
        use std::io::Read;
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        panic!("no record set; log:\n{err}");
    }
    let rs = rs.unwrap();
    assert_eq!(
        rs["spec"]["records"][0]["txt"]["content"],
        "relay=https://relay.example.com"
    );
    // render prints the same document for the same objects (as the API server now holds them,
    // UID included) and the same config file.
    let objects: Vec<serde_json::Value> = [
        ("ConnectorClass", None, "datum-connect"),
        ("Connector", Some("default"), "laptop"),
    ]
    .into_iter()
    .map(|(kind, ns, name)| {
        fake.get("networking.datumapis.com/v1alpha1", kind, ns, name)
            .unwrap()
    })
    .collect();
    let manifests = write(
        dir.path(),
        "objects.json",
        &serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": objects}))
            .unwrap(),
    );
    let text = stdout_of(&["render", "iroh", "--config", &config, "-f", &manifests]);
    let rendered: serde_json::Value = serde_yaml::from_str(
        text.split("---\n")
            .find(|d| d.contains("kind: DNSRecordSet"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(as_written(&rendered), as_written(&rs), "{text}");
    let lease = fake
        .get(
            "coordination.k8s.io/v1",
            "Lease",
            Some("meshdns-system"),
            "meshdns-iroh",
        )
        .expect("leader lease");
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|h| !h.is_empty())
    );
    renewed(&fake, "meshdns-system", "meshdns-iroh").await;
    let (status, body) = http_get(http.parse().unwrap(), "/metrics");
    assert_eq!(status, 200);
    assert!(
        body.contains("meshdns_controller_reconciles_total{controller=\"iroh\",result=\"ok\"}"),
        "{body}"
    );
    assert!(
        body.contains("meshdns_controller_leader{controller=\"iroh\"} 1"),
        "{body}"
    );
    stop(child).await;
}

/// An object without what the API server adds (UID, resource version, timestamps, managed
/// fields, status): what a client wrote.
fn as_written(o: &serde_json::Value) -> serde_json::Value {
    let m = &o["metadata"];
    let mut metadata = json!({"name": m["name"], "labels": m["labels"]});
    if let Some(ns) = m.get("namespace") {
        metadata["namespace"] = ns.clone();
    }
    if let Some(a) = m.get("annotations") {
        metadata["annotations"] = a.clone();
    }
    json!({"apiVersion": o["apiVersion"], "kind": o["kind"], "metadata": metadata, "spec": o["spec"]})
}

pub(crate) fn spawn(args: &[&str]) -> std::process::Child {
    bin()
        .arg("controller")
        .args(args)
        .env("POD_NAMESPACE", "meshdns-system")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// SIGTERM, then a clean exit within 10 s.
pub(crate) async fn stop(mut child: std::process::Child) {
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "did not stop on SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_mesh_writes_peers_into_both_clusters() {
    const KILO: &str = "kilo.squat.ai/v1alpha1";
    let hub = FakeKube::start().await;
    let tenant = FakeKube::start().await;
    hub.enforce(mesh_policy());
    tenant.enforce(Policy::load(
        &[
            "base/mesh-member-role/clusterrole.yaml",
            "remote/mesh-member/rbac.yaml",
        ],
        "meshdns-mesh-member",
        "kube-system",
    ));
    let node = |name: &str, pod: &str, wg: &str, key: &str, ext: &str| {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
            "annotations": {"kilo.squat.ai/key": key, "kilo.squat.ai/wireguard-ip": wg}},
            "spec": {"podCIDRs": [pod]}, "status": {"addresses": [{"type": "ExternalIP", "address": ext}]}})
    };
    hub.insert(node(
        "hub-1",
        "10.247.1.0/24",
        "100.66.0.1/16",
        "cGVlcmNlcGgxcGVlcmNlcGgxcGVlcmNlcGgxcGVlcmM=",
        "203.0.113.11",
    ));
    tenant.insert(node(
        "w-1",
        "10.0.1.0/24",
        "10.4.0.1/24",
        "dGVuYW50YTF0ZW5hbnRhMXRlbmFudGExdGVuYW50YTE=",
        "203.0.113.20",
    ));
    hub.insert(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tenant", "namespace": "kilo"},
        "data": {"kubeconfig": data_encoding::BASE64.encode(tenant.kubeconfig("tenant").as_bytes())}}));
    hub.insert(json!({"apiVersion": KILO, "kind": "ClusterMesh", "metadata": {"name": "m", "namespace": "kilo"},
        "spec": {"clusters": [
            {"name": "hub", "local": true, "allowedNetworks": ["10.247.0.0/16", "100.66.0.0/16"]},
            {"name": "tenant", "kubeconfigSecretRef": {"name": "tenant", "key": "kubeconfig"}, "allowedNetworks": ["10.0.0.0/16", "10.4.0.0/24"]}]}}));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write(dir.path(), "kubeconfig", &hub.kubeconfig("hub"));
    let config = write(dir.path(), "c.yaml", "mesh:\n  namespace: kilo\n");
    let http = format!("127.0.0.1:{}", free_port());
    let child = spawn(&[
        "mesh",
        "--leader-election-namespace",
        "kilo",
        "--config",
        &config,
        "--kubeconfig",
        &kubeconfig,
        "--http",
        &http,
    ]);
    let wait = Duration::from_secs(20);
    assert!(
        hub.eventually(wait, |f| f.get(KILO, "Peer", None, "m--tenant--w-1"))
            .await
            .is_some()
    );
    assert!(
        tenant
            .eventually(wait, |f| f.get(KILO, "Peer", None, "m--hub--hub-1"))
            .await
            .is_some()
    );
    let (status, body) = http_get(http.parse().unwrap(), "/metrics");
    assert_eq!(status, 200);
    assert!(
        body.contains("meshdns_controller_reconciles_total{controller=\"mesh\",result=\"ok\"}"),
        "{body}"
    );
    renewed(&hub, "kilo", "meshdns-mesh").await;
    stop(child).await;

    // render mesh, given the same ClusterMesh and Nodes as files, prints the Peers the
    // controller applied in each cluster.
    let files = tempfile::tempdir().unwrap();
    let mesh = hub.get(KILO, "ClusterMesh", Some("kilo"), "m").unwrap();
    write(files.path(), "mesh.json", &mesh.to_string());
    for (name, fake) in [("hub", &hub), ("tenant", &tenant)] {
        let dir = files.path().join("clusters").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let nodes = json!({"apiVersion": "v1", "kind": "List", "items": fake.list("v1", "Node")});
        write(&dir, "nodes.json", &nodes.to_string());
    }
    let text = stdout_of(&["render", "mesh", "-f", &files.path().display().to_string()]);
    let lists: Vec<serde_json::Value> = text
        .split("---\n")
        .filter(|d| d.contains("meshdns.io/target-cluster"))
        .map(|d| serde_yaml::from_str(d).unwrap())
        .collect();
    assert_eq!(lists.len(), 2, "{text}");
    for list in lists {
        let target = list["metadata"]["annotations"]["meshdns.io/target-cluster"]
            .as_str()
            .unwrap();
        let fake = if target == "hub" { &hub } else { &tenant };
        let mut applied: Vec<serde_json::Value> =
            fake.list(KILO, "Peer").iter().map(as_written).collect();
        applied.sort_by_key(|p| p["metadata"]["name"].as_str().unwrap().to_string());
        let rendered: Vec<serde_json::Value> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(as_written)
            .collect();
        assert_eq!(rendered, applied, "target {target}: {text}");
    }
}

#[test]
fn controller_iroh_refuses_a_bad_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "c.yaml", "iroh:\n  dnsZoneRef: {name: z}\n");
    let out = bin()
        .args([
            "controller",
            "iroh",
            "--config",
            &config,
            "--kubeconfig",
            "/nonexistent",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("iroh.dnsZoneRef.namespace: required"), "{err}");
}

/// Connectors in another cluster, whose kubeconfig is a Secret of the controller's own
/// (`sourceClusters[].kubeconfigSecretRef`, as `docs/guide-datum-connectors.md` describes):
/// with `components/iroh-source-clusters` the controller may read that Secret, and publishes
/// the remote Connector's records. Each API server enforces the rules deploy/ gives it (the
/// source cluster: `remote/iroh-source`), and the component's rule is exercised.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_iroh_reads_a_source_cluster_from_its_kubeconfig_secret() {
    let local = FakeKube::start().await;
    local.enforce(iroh_policy_with_source_clusters());
    let source = FakeKube::start().await;
    source.enforce(Policy::load(
        &[
            "base/iroh-source-role/clusterrole.yaml",
            "remote/iroh-source/rbac.yaml",
        ],
        "meshdns-iroh-source",
        "kube-system",
    ));
    for fake in [&local, &source] {
        fake.insert(json!({"apiVersion": "networking.datumapis.com/v1alpha1", "kind": "ConnectorClass",
            "metadata": {"name": "datum-connect"}, "spec": {"controllerName": "networking.datumapis.com/datum-connect"}}));
    }
    source.insert(json!({"apiVersion": "networking.datumapis.com/v1alpha1", "kind": "Connector",
        "metadata": {"name": "laptop", "namespace": "default"}, "spec": {"connectorClassName": "datum-connect"},
        "status": {"connectionDetails": {"type": "PublicKey", "publicKey": {"id": HEX, "homeRelay": "https://relay.example.com"}}}}));
    let encoded = data_encoding::BASE64.encode(source.kubeconfig("project-a").as_bytes());
    local.insert(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "project-a", "namespace": "meshdns-system"},
        "data": {"kubeconfig": encoded}}));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write(dir.path(), "kubeconfig", &local.kubeconfig("local"));
    let config = write(
        dir.path(),
        "config.yaml",
        "iroh:\n  dnsZoneRef: {namespace: meshdns-system, name: connectors}\n  includeLocal: false\n  sourceClusters:\n    - {name: project-a, kubeconfigSecretRef: {namespace: meshdns-system, name: project-a, key: kubeconfig}}\n",
    );
    let http = format!("127.0.0.1:{}", free_port());
    let child = spawn(&[
        "iroh",
        "--config",
        &config,
        "--kubeconfig",
        &kubeconfig,
        "--http",
        &http,
    ]);
    let name = format!("iroh-{Z32}");
    let rs = local
        .eventually(Duration::from_secs(20), |f| {
            f.get(
                "dns.networking.miloapis.com/v1alpha1",
                "DNSRecordSet",
                Some("meshdns-system"),
                &name,
            )
        })
        .await;
    stop(child).await;
    let rs = rs.expect("the remote Connector's record set");
    assert_eq!(
        rs["spec"]["records"][0]["txt"]["content"],
        "relay=https://relay.example.com"
    );
    rbac::assert_all_exercised(&iroh_policy_with_source_clusters(), |role| {
        !role.ends_with("-kubeconfigs")
    });
}
