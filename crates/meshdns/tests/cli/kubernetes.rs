//! `meshdns serve --kubernetes`: DNSZones and DNSRecordSets from a cluster (the in-memory API
//! server), served and followed live.

use std::time::Duration;

use meshdns_fakekube::FakeKube;
use meshdns_fakekube::rbac::{self, Policy};
use serde_json::json;

use crate::*;

const DNS: &str = "dns.networking.miloapis.com/v1alpha1";

fn wait_for(m: &Meshdns, name: &str, want: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = dig(m.dns, &[name, "A", "+short"]);
        if got.trim() == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name}: want {want:?}, have {got:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_record_sets_from_a_cluster_live() {
    let fake = FakeKube::start().await;
    // Held to the rules deploy/ gives `serve --kubernetes`, and every one of them is used.
    let policy = Policy::load(
        &["components/kubernetes-source/rbac.yaml"],
        "meshdns-serve",
        "kilo",
    );
    fake.enforce(policy.clone());
    fake.insert(json!({"apiVersion": DNS, "kind": "DNSZone", "metadata": {"name": "mesh-zone", "namespace": "kilo"},
        "spec": {"domainName": "mesh.example.org", "dnsZoneClassName": "powerdns"}}));
    fake.insert(json!({"apiVersion": DNS, "kind": "DNSRecordSet", "metadata": {"name": "storage--ceph--nodes-a", "namespace": "kilo"},
        "spec": {"dnsZoneRef": {"name": "mesh-zone"}, "recordType": "A",
                 "records": [{"name": "ceph-1.ceph", "ttl": 30, "a": {"content": "100.66.0.1"}}]}}));
    // Another namespace's objects are not served when a namespace is given.
    fake.insert(json!({"apiVersion": DNS, "kind": "DNSZone", "metadata": {"name": "z", "namespace": "other"},
        "spec": {"domainName": "other.example.org", "dnsZoneClassName": "powerdns"}}));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write(dir.path(), "kubeconfig", &fake.kubeconfig("fake"));
    let m = Meshdns::serve(&[
        "--kubernetes",
        "--kubernetes-namespace",
        "kilo",
        "--kubeconfig",
        &kubeconfig,
        "--http",
        "127.0.0.1:0",
    ]);
    let m = tokio::task::spawn_blocking(move || {
        wait_for(&m, "ceph-1.ceph.mesh.example.org", "100.66.0.1");
        assert!(dig(m.dns, &["x.other.example.org", "A"]).contains("status: REFUSED"));
        let (status, body) = m.get("/readyz");
        assert_eq!(status, 200, "{body}");
        m
    })
    .await
    .unwrap();

    // A controller moves the node: the new address is served within a second or so.
    let mut rs = fake
        .get(DNS, "DNSRecordSet", Some("kilo"), "storage--ceph--nodes-a")
        .unwrap();
    rs["spec"]["records"][0]["a"]["content"] = json!("100.66.0.9");
    fake.replace(rs);
    let m = tokio::task::spawn_blocking(move || {
        wait_for(&m, "ceph-1.ceph.mesh.example.org", "100.66.0.9");
        m
    })
    .await
    .unwrap();
    fake.delete(DNS, "DNSRecordSet", Some("kilo"), "storage--ceph--nodes-a");
    tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !dig(m.dns, &["ceph-1.ceph.mesh.example.org", "A"]).contains("status: NXDOMAIN") {
            assert!(
                std::time::Instant::now() < deadline,
                "deleted record still served"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let (_, metrics) = m.get("/metrics");
        assert!(metrics.contains("source=\"kubernetes\""), "{metrics}");
    })
    .await
    .unwrap();
    assert_eq!(fake.denied(), Vec::<String>::new());
    rbac::assert_all_exercised(&policy, |_| false);
}
