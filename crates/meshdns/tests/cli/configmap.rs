//! `meshdns serve --configmap NAMESPACE/NAME[:KEY]`: Tailscale's records ConfigMap read through
//! the API (the in-memory API server), held to deploy/'s RBAC: absent at start, added, changed,
//! broken, deleted, its watch expired (410 Gone), and the API failing for a while.

use std::time::{Duration, Instant};

use meshdns_fakekube::FakeKube;
use meshdns_fakekube::rbac::{self, Policy};
use serde_json::json;

use crate::*;

const SOURCE: &str = "configmap tailscale/dnsrecords:records.json";

fn configmap(records: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "dnsrecords", "namespace": "tailscale"},
        "data": {"records.json": records}})
}

fn records(ip: &str) -> String {
    format!(r#"{{"version":"v1alpha1","ip4":{{"web.ts.net":["{ip}"]}}}}"#)
}

/// Waits until `dig web.ts.net A` shows `want`; returns how long that took.
fn served(m: &Meshdns, want: &str) -> Duration {
    let started = Instant::now();
    loop {
        let out = dig(m.dns, &["web.ts.net", "A"]);
        if out.contains(want) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "never {want}:\n{out}\nlog:\n{}",
            m.log_text()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn up(m: &Meshdns) -> Option<String> {
    let (_, metrics) = m.get("/metrics");
    metrics
        .lines()
        .find(|l| l.starts_with(&format!("meshdns_source_up{{source=\"{SOURCE}\"}}")))
        .map(|l| l.rsplit(' ').next().unwrap().to_string())
}

fn wait_up(m: &Meshdns, want: &str) {
    let started = Instant::now();
    while up(m).as_deref() != Some(want) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "up never {want}: {:?}",
            up(m)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_records_configmap_is_followed_through_the_api() {
    let fake = FakeKube::start().await;
    let policy = Policy::load(
        &["components/configmap-source/rbac.yaml"],
        "meshdns-serve",
        "tailscale",
    );
    fake.enforce(policy.clone());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write(dir.path(), "kubeconfig", &fake.kubeconfig("fake"));
    let m = tokio::task::spawn_blocking(move || {
        let m = Meshdns::serve(&[
            "--configmap",
            "tailscale/dnsrecords",
            "--kubeconfig",
            &kubeconfig,
            "--http",
            "127.0.0.1:0",
        ]);
        // No ConfigMap yet: ready once listed, ts.net served empty.
        let started = Instant::now();
        while m.get("/readyz").0 != 200 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{}",
                m.get("/readyz").1
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        served(&m, "status: NXDOMAIN");
        m
    })
    .await
    .unwrap();

    // The operator writes it, then changes it: each change served in a fraction of a second.
    let mut latencies = Vec::new();
    fake.insert(configmap(&records("100.64.0.1")));
    let (m, took) = tokio::task::spawn_blocking(move || {
        let t = served(&m, "100.64.0.1");
        (m, t)
    })
    .await
    .unwrap();
    latencies.push(took);
    let mut m = m;
    for i in 2..12 {
        fake.replace(configmap(&records(&format!("100.64.0.{i}"))));
        let want = format!("100.64.0.{i}");
        let (back, took) = tokio::task::spawn_blocking(move || {
            let t = served(&m, &want);
            (m, t)
        })
        .await
        .unwrap();
        m = back;
        latencies.push(took);
    }
    latencies.sort();
    eprintln!(
        "configmap change -> answer over {} changes: median {:?}, max {:?}",
        latencies.len(),
        latencies[latencies.len() / 2],
        latencies[latencies.len() - 1]
    );

    // A broken version keeps the last good records, and says so.
    fake.replace(configmap("{ not json"));
    let m = tokio::task::spawn_blocking(move || {
        wait_up(&m, "0");
        served(&m, "100.64.0.11");
        m
    })
    .await
    .unwrap();
    fake.replace(configmap(&records("100.64.0.20")));
    let m = tokio::task::spawn_blocking(move || {
        served(&m, "100.64.0.20");
        wait_up(&m, "1");
        m
    })
    .await
    .unwrap();

    // The watch history is compacted (410 Gone): listed again, changes still followed.
    fake.expire_watches();
    fake.replace(configmap(&records("100.64.0.21")));
    let m = tokio::task::spawn_blocking(move || {
        served(&m, "100.64.0.21");
        m
    })
    .await
    .unwrap();

    // The API fails for a while: the last good records serve, the source is down, then the
    // watch recovers and follows changes again.
    fake.fail("GET", "/configmaps", 503, 4);
    fake.expire_watches();
    let m = tokio::task::spawn_blocking(move || {
        wait_up(&m, "0");
        served(&m, "100.64.0.21");
        assert_eq!(m.get("/readyz").0, 200);
        m
    })
    .await
    .unwrap();
    fake.replace(configmap(&records("100.64.0.22")));
    let m = tokio::task::spawn_blocking(move || {
        served(&m, "100.64.0.22");
        wait_up(&m, "1");
        m
    })
    .await
    .unwrap();

    // Deleted: its records go (an absent records.json), the zone stays.
    fake.delete("v1", "ConfigMap", Some("tailscale"), "dnsrecords");
    tokio::task::spawn_blocking(move || {
        served(&m, "status: NXDOMAIN");
        m.wait_log("records file absent");
    })
    .await
    .unwrap();
    assert_eq!(fake.denied(), Vec::<String>::new());
    rbac::assert_all_exercised(&policy, |_| false);
}
