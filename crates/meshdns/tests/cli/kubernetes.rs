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
            "{name}: want {want:?}, have {got:?}; log:\n{}",
            m.log_text()
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

fn dns_status(fake: &FakeKube, kind: &str, name: &str) -> Option<serde_json::Value> {
    let o = fake.get(DNS, kind, Some("dns"), name)?;
    (!o["status"].is_null()).then(|| o["status"].clone())
}

fn programmed(status: &serde_json::Value) -> Option<String> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Programmed")
        .map(|c| {
            format!(
                "{}/{}",
                c["status"].as_str().unwrap(),
                c["reason"].as_str().unwrap()
            )
        })
}

/// `serve --kubernetes --write-status`, two replicas: the one holding the Lease writes the
/// status dns-operator would (owner Programmed, loser NotOwner, zone recordCount and
/// nameservers), nothing is written at steady state, and a change is written once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_write_dns_operators_status_once() {
    let fake = FakeKube::start().await;
    let policy = Policy::load(
        &[
            "components/kubernetes-source/rbac.yaml",
            "components/kubernetes-status/rbac.yaml",
        ],
        "meshdns-serve",
        "default",
    );
    fake.enforce(policy.clone());
    fake.insert(json!({"apiVersion": DNS, "kind": "DNSZone",
        "metadata": {"name": "z", "namespace": "dns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"domainName": "example.org", "dnsZoneClassName": "powerdns"}}));
    fake.insert(json!({"apiVersion": DNS, "kind": "DNSRecordSet",
        "metadata": {"name": "owner", "namespace": "dns", "creationTimestamp": "2026-01-02T00:00:00Z"},
        "spec": {"dnsZoneRef": {"name": "z"}, "recordType": "A",
                 "records": [{"name": "www", "a": {"content": "192.0.2.1"}}]}}));
    fake.insert(json!({"apiVersion": DNS, "kind": "DNSRecordSet",
        "metadata": {"name": "loser", "namespace": "dns", "creationTimestamp": "2026-01-03T00:00:00Z"},
        "spec": {"dnsZoneRef": {"name": "z"}, "recordType": "A",
                 "records": [{"name": "www", "a": {"content": "192.0.2.9"}}]}}));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write(dir.path(), "kubeconfig", &fake.kubeconfig("fake"));
    let replicas = tokio::task::spawn_blocking(move || {
        let args = [
            "--kubernetes",
            "--write-status",
            "--kubeconfig",
            &kubeconfig,
        ];
        (Meshdns::serve(&args), Meshdns::serve(&args))
    })
    .await
    .unwrap();
    let wait = Duration::from_secs(20);
    let written = fake
        .eventually(wait, |f| {
            let owner = dns_status(f, "DNSRecordSet", "owner")?;
            let loser = dns_status(f, "DNSRecordSet", "loser")?;
            let zone = dns_status(f, "DNSZone", "z")?;
            (zone["recordCount"] == 2).then_some((owner, loser, zone))
        })
        .await;
    let (owner, loser, zone) = written.expect("statuses written");
    assert_eq!(programmed(&owner).as_deref(), Some("True/Programmed"));
    assert_eq!(programmed(&loser).as_deref(), Some("False/Pending"));
    assert_eq!(
        loser["recordSets"][0]["conditions"][0]["reason"],
        "NotOwner"
    );
    assert_eq!(zone["nameservers"], json!(["ns.example.org."]));
    let lease = fake
        .get(
            "coordination.k8s.io/v1",
            "Lease",
            Some("default"),
            "meshdns-serve-status",
        )
        .expect("the writer's Lease");
    assert!(lease["spec"]["holderIdentity"].is_string());

    // Steady state: the statuses are written; nothing more is.
    tokio::time::sleep(Duration::from_secs(1)).await;
    fake.clear_requests();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status_writes = |f: &FakeKube| {
        f.writes()
            .into_iter()
            .filter(|r| r.path.ends_with("/status"))
            .count()
    };
    assert_eq!(status_writes(&fake), 0, "{:?}", fake.writes());

    // The owner goes: the loser now owns www, and its status says so, written once.
    fake.delete(DNS, "DNSRecordSet", Some("dns"), "owner");
    let now_owner = fake
        .eventually(wait, |f| {
            let s = dns_status(f, "DNSRecordSet", "loser")?;
            (programmed(&s).as_deref() == Some("True/Programmed")).then_some(s)
        })
        .await;
    assert!(now_owner.is_some(), "loser programmed after the owner left");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let to_loser = fake
        .writes()
        .into_iter()
        .filter(|r| r.path.ends_with("/dnsrecordsets/loser/status"))
        .count();
    assert_eq!(to_loser, 1, "one writer: {:?}", fake.writes());
    drop(replicas);
    assert_eq!(fake.denied(), Vec::<String>::new());
    rbac::assert_all_exercised(&policy, |role| role.ends_with("-election"));
}

/// Fails the lists and watches of `paths` (503s, a 2 s stall ending 504, 500s), then drops
/// every watch silently and expires it (410 Gone: list again) `rounds` times, while `name`
/// is asked over and over: every answer must be `want`, the last good one.
async fn through_api_faults(
    fake: &FakeKube,
    paths: &[&str],
    m: Meshdns,
    name: &'static str,
    want: &'static str,
    rounds: usize,
) -> Meshdns {
    for path in paths {
        fake.fail("GET", path, 503, 4);
        fake.stall("GET", path, Duration::from_secs(2), 1);
        fake.fail("GET", path, 500, 2);
    }
    let asking = tokio::task::spawn_blocking(move || {
        let mut asked = 0;
        let deadline = std::time::Instant::now() + Duration::from_millis(800 * rounds as u64 + 800);
        while std::time::Instant::now() < deadline {
            let got = dig(m.dns, &[name, "A", "+short"]);
            assert_eq!(got.trim(), want, "answer {asked} during the faults");
            asked += 1;
        }
        (m, asked)
    });
    for i in 0..rounds {
        fake.disconnect_watches();
        tokio::time::sleep(Duration::from_millis(400)).await;
        // History moves on (an unrelated object), then is compacted: watches must list again.
        fake.insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("noise-{i}"), "namespace": "default"}}));
        fake.expire_watches();
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let (m, asked) = asking.await.unwrap();
    assert!(asked > 10, "{asked}");
    m
}

/// The API server fails (503 on lists, 2 s stalls ending 504, watches dropped silently and
/// ended 410 Gone) while `serve --kubernetes` runs: the last good records are answered on
/// every query throughout, and a change made while the API misbehaved is served once it
/// recovers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_good_records_are_served_through_api_faults() {
    let fake = FakeKube::start().await;
    fake.insert(json!({"apiVersion": DNS, "kind": "DNSZone", "metadata": {"name": "mesh-zone", "namespace": "kilo"},
        "spec": {"domainName": "mesh.example.org", "dnsZoneClassName": "powerdns"}}));
    fake.insert(json!({"apiVersion": DNS, "kind": "DNSRecordSet", "metadata": {"name": "nodes", "namespace": "kilo"},
        "spec": {"dnsZoneRef": {"name": "mesh-zone"}, "recordType": "A",
                 "records": [{"name": "ceph-1", "ttl": 30, "a": {"content": "100.66.0.1"}}]}}));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write(dir.path(), "kubeconfig", &fake.kubeconfig("fake"));
    let m = Meshdns::serve(&["--kubernetes", "--kubeconfig", &kubeconfig]);
    let m = tokio::task::spawn_blocking(move || {
        wait_for(&m, "ceph-1.mesh.example.org", "100.66.0.1");
        m
    })
    .await
    .unwrap();

    let m = through_api_faults(
        &fake,
        &["/dnszones", "/dnsrecordsets"],
        m,
        "ceph-1.mesh.example.org",
        "100.66.0.1",
        4,
    )
    .await;
    // A change made after the faults is followed: the watches came back.
    let mut rs = fake
        .get(DNS, "DNSRecordSet", Some("kilo"), "nodes")
        .unwrap();
    rs["spec"]["records"][0]["a"]["content"] = json!("100.66.0.7");
    fake.replace(rs);
    tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let got = dig(m.dns, &["ceph-1.mesh.example.org", "A", "+short"]);
            if got.trim() == "100.66.0.7" {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "not followed after the faults: {got}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .await
    .unwrap();
    // The faults were met: watches failed, retried, and listed again after 410 Gone.
    let asked: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/dnsrecordsets"))
        .collect();
    let lists = asked
        .iter()
        .filter(|r| !r.query.contains("watch=true"))
        .count();
    assert!(
        asked.len() > 8 && lists >= 2,
        "{} requests, {lists} lists",
        asked.len()
    );
}

/// The cluster's objects through a hostile API and hostile objects: lists failing (503, 500),
/// stalling, watches dropped silently and expired; a flood of 300 changes to one Service in a
/// burst; an Ingress carrying a 1 MiB annotation. The last good names are answered on every
/// query throughout, the flood ends at its last address, the oversized value is reported in a
/// bounded line (the object's other names served), and nothing logged is longer than 8 KiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_objects_ride_out_api_faults_floods_and_oversized_objects() {
    let fake = FakeKube::start().await;
    let service = |ip: &str| {
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop",
                "annotations": {"external-dns.kubernetes.io/hostname": "web.example.org"}},
            "spec": {"type": "LoadBalancer"},
            "status": {"loadBalancer": {"ingress": [{"ip": ip}]}}})
    };
    fake.insert(service("192.0.2.10"));
    let huge = "x!".repeat(512 * 1024);
    fake.insert(
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "huge", "namespace": "shop",
            "annotations": {"external-dns.kubernetes.io/hostname": huge}},
        "spec": {"rules": [{"host": "huge.example.org"}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.50"}]}}}),
    );
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write(dir.path(), "kubeconfig", &fake.kubeconfig("fake"));
    let m = Meshdns::serve(&[
        "--kubernetes",
        "--kubeconfig",
        &kubeconfig,
        "--kube-source",
        "service,ingress",
        "--zone",
        "example.org",
    ]);
    let m = tokio::task::spawn_blocking(move || {
        wait_for(&m, "web.example.org", "192.0.2.10");
        wait_for(&m, "huge.example.org", "192.0.2.50");
        m
    })
    .await
    .unwrap();

    let paths = ["/services", "/ingresses", "/endpointslices"];
    let m = through_api_faults(&fake, &paths, m, "huge.example.org", "192.0.2.50", 3).await;

    // A flood of changes to one Service: every answer meanwhile is one of its addresses, and
    // the last one is served.
    let watching = tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let got = dig(m.dns, &["web.example.org", "A", "+short"]);
            let ip: std::net::Ipv4Addr = got.trim().parse().unwrap_or_else(|_| panic!("{got:?}"));
            assert_eq!(ip.octets()[..3], [192, 0, 2], "{got}");
            if got.trim() == "192.0.2.99" {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "flood not followed: {got}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        m
    });
    for i in 0..300u32 {
        fake.replace(service(&format!("192.0.2.{}", 100 + i % 100)));
        if i % 50 == 0 {
            tokio::task::yield_now().await;
        }
    }
    fake.replace(service("192.0.2.99"));
    let m = watching.await.unwrap();

    let log = m.log_text();
    let reported = log
        .lines()
        .find(|l| l.contains("Ingress shop/huge metadata.annotations"))
        .unwrap_or_else(|| {
            panic!(
                "the oversized annotation reported:\n{}",
                &log[..log.len().min(4000)]
            )
        });
    assert!(
        reported.contains("... (1048") && reported.len() < 2048,
        "{}",
        &reported[..reported.len().min(2000)]
    );
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 8192, "a log line of {longest} bytes");
}

/// `serve --kubernetes --kube-source …`: Services (LoadBalancer, headless with EndpointSlices,
/// ClusterIP by internal-hostname), Ingresses and Gateway API routes answered in a served zone,
/// each change (a new address, an endpoint going unready, a new host, a deletion) followed
/// live, with the RBAC deploy/ gives the cluster-objects component, every rule of it used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_services_and_ingresses_from_a_cluster_live() {
    let fake = FakeKube::start().await;
    let policy = Policy::load(
        &[
            "components/kubernetes-source/rbac.yaml",
            "components/cluster-objects/rbac.yaml",
        ],
        "meshdns-serve",
        "default",
    );
    fake.enforce(policy.clone());
    let hostname = "external-dns.kubernetes.io/hostname";
    fake.insert(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "shop", "annotations": {
            hostname: "web.example.org",
            "external-dns.alpha.kubernetes.io/internal-hostname": "web.internal.example.org"}},
        "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10", "ports": [{"port": 443}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}}));
    fake.insert(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "cache", "namespace": "shop", "annotations": {hostname: "cache.example.org"}},
        "spec": {"clusterIP": "None"}}));
    fake.insert(json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "cache-1", "namespace": "shop",
            "labels": {"kubernetes.io/service-name": "cache", "service.kubernetes.io/headless": ""}},
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["10.244.0.1"], "hostname": "cache-0", "conditions": {"ready": true}},
            {"addresses": ["10.244.0.2"], "hostname": "cache-1", "conditions": {"ready": true}}]}));
    fake.insert(
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "shop", "namespace": "shop"},
        "spec": {"rules": [{"host": "shop.example.org"}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.20"}]}}}),
    );
    let gw = "gateway.networking.k8s.io/v1";
    fake.insert(json!({"apiVersion": gw, "kind": "Gateway", "metadata": {"name": "edge", "namespace": "infra"},
        "spec": {"gatewayClassName": "envoy", "listeners": [{"name": "https", "hostname": "*.example.org",
            "port": 443, "protocol": "HTTPS", "allowedRoutes": {"namespaces": {"from": "All"}}},
            {"name": "tls", "port": 8443, "protocol": "TLS", "allowedRoutes": {"namespaces": {"from": "All"}}}]},
        "status": {"addresses": [{"type": "IPAddress", "value": "192.0.2.30"}]}}));
    let accepted = json!({"parents": [{"parentRef": {"name": "edge", "namespace": "infra"},
        "conditions": [{"type": "Accepted", "status": "True"}]}]});
    let parent = json!([{"name": "edge", "namespace": "infra"}]);
    fake.insert(json!({"apiVersion": "externaldns.k8s.io/v1alpha1", "kind": "DNSEndpoint",
        "metadata": {"name": "extra", "namespace": "dns"},
        "spec": {"endpoints": [
            {"dnsName": "txt.example.org", "recordType": "TXT", "targets": ["hello"]},
            {"dnsName": "ep.example.org", "recordType": "A", "targets": ["192.0.2.40"], "recordTTL": 30}]}}));
    for (kind, name) in [
        ("HTTPRoute", "app"),
        ("GRPCRoute", "rpc"),
        ("TLSRoute", "tls"),
    ] {
        fake.insert(
            json!({"apiVersion": gw, "kind": kind, "metadata": {"name": name, "namespace": "shop"},
            "spec": {"parentRefs": parent, "hostnames": [format!("{name}.example.org")]},
            "status": accepted}),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write(dir.path(), "kubeconfig", &fake.kubeconfig("fake"));
    let m = Meshdns::serve(&[
        "--kubernetes",
        "--kubeconfig",
        &kubeconfig,
        "--kube-source",
        "service,ingress,httproute,grpcroute,tlsroute,dnsendpoint",
        "--zone",
        "example.org",
        "--kube-source-default-names",
        "cluster.example.org",
        "--http",
        "127.0.0.1:0",
    ]);
    let m = tokio::task::spawn_blocking(move || {
        wait_for(&m, "web.example.org", "192.0.2.10");
        wait_for(&m, "web.internal.example.org", "10.96.0.10");
        wait_for(&m, "web.shop.cluster.example.org", "192.0.2.10");
        wait_for(&m, "cache-1.cache.example.org", "10.244.0.2");
        wait_for(&m, "shop.example.org", "192.0.2.20");
        for route in ["app", "rpc", "tls"] {
            wait_for(&m, &format!("{route}.example.org"), "192.0.2.30");
        }
        wait_for(&m, "ep.example.org", "192.0.2.40");
        assert_eq!(
            dig(m.dns, &["txt.example.org", "TXT", "+short"]).trim(),
            "\"hello\""
        );
        let mut both = dig(m.dns, &["cache.example.org", "A", "+short"])
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>();
        both.sort();
        assert_eq!(both, ["10.244.0.1", "10.244.0.2"]);
        m
    })
    .await
    .unwrap();

    // The load balancer moves; an endpoint goes unready; the Ingress gains a host.
    let mut svc = fake.get("v1", "Service", Some("shop"), "web").unwrap();
    svc["status"]["loadBalancer"]["ingress"][0]["ip"] = json!("192.0.2.11");
    fake.replace(svc);
    let mut slice = fake
        .get(
            "discovery.k8s.io/v1",
            "EndpointSlice",
            Some("shop"),
            "cache-1",
        )
        .unwrap();
    slice["endpoints"][1]["conditions"]["ready"] = json!(false);
    fake.replace(slice);
    // The Gateway gets a new address; its routes follow.
    let mut edge = fake.get(gw, "Gateway", Some("infra"), "edge").unwrap();
    edge["status"]["addresses"][0]["value"] = json!("192.0.2.31");
    fake.replace(edge);
    let mut ing = fake
        .get("networking.k8s.io/v1", "Ingress", Some("shop"), "shop")
        .unwrap();
    ing["spec"]["rules"]
        .as_array_mut()
        .unwrap()
        .push(json!({"host": "store.example.org"}));
    fake.replace(ing);
    let m = tokio::task::spawn_blocking(move || {
        wait_for(&m, "web.example.org", "192.0.2.11");
        wait_for(&m, "cache.example.org", "10.244.0.1");
        wait_for(&m, "store.example.org", "192.0.2.20");
        wait_for(&m, "app.example.org", "192.0.2.31");
        assert!(dig(m.dns, &["cache-1.cache.example.org", "A"]).contains("status: NXDOMAIN"));
        m
    })
    .await
    .unwrap();

    fake.delete("v1", "Service", Some("shop"), "web");
    tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !dig(m.dns, &["web.example.org", "A"]).contains("status: NXDOMAIN") {
            assert!(
                std::time::Instant::now() < deadline,
                "deleted Service still served"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // The zone itself stays, with its SOA.
        assert!(dig(m.dns, &["example.org", "SOA"]).contains("status: NOERROR"));
    })
    .await
    .unwrap();
    assert_eq!(fake.denied(), Vec::<String>::new());
    rbac::assert_all_exercised(&policy, |_| false);
}

/// `--kube-source` with `--write-status`: a DNSEndpoint's `status.observedGeneration` is
/// written once per generation; each thing at fault in an object (an address that does not
/// parse, a conflict with an older object, a name in no zone served) gets one Warning Event on
/// it, naming the field, and none again at steady state; a problem that is fixed and comes back
/// gets a new one. The metrics count them by kind and reason. Held to deploy/'s rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_objects_get_their_status_and_events_once() {
    let fake = FakeKube::start().await;
    let policy = Policy::load(
        &[
            "components/kubernetes-source/rbac.yaml",
            "components/cluster-objects/rbac.yaml",
            "components/kubernetes-status/rbac.yaml",
            "components/cluster-objects-status/rbac.yaml",
        ],
        "meshdns-serve",
        "default",
    );
    fake.enforce(policy.clone());
    let ep = "externaldns.k8s.io/v1alpha1";
    let ing = "networking.k8s.io/v1";
    fake.insert(json!({"apiVersion": ep, "kind": "DNSEndpoint",
        "metadata": {"name": "extra", "namespace": "dns"},
        "spec": {"endpoints": [{"dnsName": "ep.example.org", "recordType": "A", "targets": ["192.0.2.40"]}]}}));
    // Older: keeps shop.example.org.
    fake.insert(json!({"apiVersion": ing, "kind": "Ingress",
        "metadata": {"name": "shop", "namespace": "shop", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"rules": [{"host": "shop.example.org"}]},
        "status": {"loadBalancer": {"ingress": [{"hostname": "lb-1.example.net"}]}}}));
    // A second CNAME for shop.example.org (Conflict), a bad status address (InvalidField), a
    // name in no zone served (NotServed).
    fake.insert(json!({"apiVersion": ing, "kind": "Ingress",
        "metadata": {"name": "late", "namespace": "shop", "creationTimestamp": "2026-02-01T00:00:00Z"},
        "spec": {"rules": [{"host": "shop.example.org"}, {"host": "late.example.com"}]},
        "status": {"loadBalancer": {"ingress": [{"hostname": "lb-2.example.net"}, {"ip": "192.0.2.300"}]}}}));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write(dir.path(), "kubeconfig", &fake.kubeconfig("fake"));
    let m = Meshdns::serve(&[
        "--kubernetes",
        "--write-status",
        "--kubeconfig",
        &kubeconfig,
        "--kube-source",
        "ingress,dnsendpoint",
        "--zone",
        "example.org",
        "--http",
        "127.0.0.1:0",
    ]);
    let wait = Duration::from_secs(20);
    let generation = |f: &FakeKube| {
        f.get(ep, "DNSEndpoint", Some("dns"), "extra")
            .and_then(|o| o["status"]["observedGeneration"].as_i64())
    };
    let events = |f: &FakeKube| {
        let mut out: Vec<String> = f
            .list("events.k8s.io/v1", "Event")
            .iter()
            .map(|e| {
                format!(
                    "{} {} {}/{} {}: {}",
                    e["type"].as_str().unwrap_or(""),
                    e["regarding"]["kind"].as_str().unwrap_or(""),
                    e["regarding"]["namespace"].as_str().unwrap_or(""),
                    e["regarding"]["name"].as_str().unwrap_or(""),
                    e["reason"].as_str().unwrap_or(""),
                    e["note"].as_str().unwrap_or("")
                )
            })
            .collect();
        out.sort();
        out
    };
    let observed = fake
        .eventually(wait, |f| generation(f).filter(|g| *g == 1))
        .await;
    assert_eq!(observed, Some(1), "{:?}", fake.writes());
    let recorded = fake
        .eventually(wait, |f| Some(events(f)).filter(|e| e.len() >= 3))
        .await
        .expect("events recorded");
    assert_eq!(recorded.len(), 3, "{recorded:#?}");
    assert!(
        recorded[0].starts_with("Warning Ingress shop/late Conflict: shop.example.org.: ")
            && recorded[0].contains("Ingress shop/shop, which is older"),
        "{recorded:#?}"
    );
    assert!(
        recorded[1].starts_with(
            "Warning Ingress shop/late InvalidField: status.loadBalancer.ingress[1].ip: \"192.0.2.300\""
        ),
        "{recorded:#?}"
    );
    assert!(
        recorded[2].starts_with("Warning Ingress shop/late NotServed: late.example.com.: ")
            && recorded[2].contains("not inside a zone served here"),
        "{recorded:#?}"
    );
    let regarding = fake.list("events.k8s.io/v1", "Event")[0]["regarding"].clone();
    let late = fake.get(ing, "Ingress", Some("shop"), "late").unwrap();
    assert_eq!(regarding["uid"], late["metadata"]["uid"]);
    assert_eq!(regarding["apiVersion"], ing);
    let m = tokio::task::spawn_blocking(move || {
        // What is served is unaffected: the older Ingress's CNAME, the DNSEndpoint's address.
        assert_eq!(
            dig(m.dns, &["shop.example.org", "CNAME", "+short"]).trim(),
            "lb-1.example.net."
        );
        wait_for(&m, "ep.example.org", "192.0.2.40");
        let (_, metrics) = m.get("/metrics");
        for line in [
            "meshdns_source_objects{source=\"kubernetes\",kind=\"Ingress\"} 2",
            "meshdns_source_objects{source=\"kubernetes\",kind=\"DNSEndpoint\"} 1",
            "meshdns_source_object_problems{source=\"kubernetes\",kind=\"Ingress\",reason=\"Conflict\"} 1",
            "meshdns_source_object_problems{source=\"kubernetes\",kind=\"Ingress\",reason=\"NotServed\"} 1",
            "meshdns_source_object_problems{source=\"kubernetes\",kind=\"DNSEndpoint\",reason=\"InvalidField\"} 0",
        ] {
            assert!(metrics.contains(line), "{line} not in:\n{metrics}");
        }
        m
    })
    .await
    .unwrap();

    // Steady state: nothing is written again.
    tokio::time::sleep(Duration::from_secs(1)).await;
    fake.clear_requests();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(fake.writes().len(), 0, "{:?}", fake.writes());

    // A new generation is observed, once.
    let mut extra = fake.get(ep, "DNSEndpoint", Some("dns"), "extra").unwrap();
    extra["spec"]["endpoints"][0]["targets"] = json!(["192.0.2.41"]);
    fake.replace(extra);
    let observed = fake
        .eventually(wait, |f| generation(f).filter(|g| *g == 2))
        .await;
    assert_eq!(observed, Some(2));
    // The bad address is fixed: no Event; it comes back: a new one.
    let mut late = fake.get(ing, "Ingress", Some("shop"), "late").unwrap();
    let bad = late["status"]["loadBalancer"]["ingress"]
        .as_array_mut()
        .unwrap()
        .pop()
        .unwrap();
    fake.replace(late.clone());
    let m = tokio::task::spawn_blocking(move || {
        wait_for(&m, "ep.example.org", "192.0.2.41");
        m
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(events(&fake).len(), 3, "{:#?}", events(&fake));
    late["status"]["loadBalancer"]["ingress"]
        .as_array_mut()
        .unwrap()
        .push(bad);
    fake.replace(late);
    let again = fake
        .eventually(wait, |f| Some(events(f)).filter(|e| e.len() >= 4))
        .await
        .expect("the problem recorded again");
    assert_eq!(
        again.iter().filter(|e| e.contains("InvalidField")).count(),
        2,
        "{again:#?}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let to_endpoint = fake
        .writes()
        .into_iter()
        .filter(|r| r.path.ends_with("/dnsendpoints/extra/status"))
        .count();
    assert_eq!(to_endpoint, 1, "{:?}", fake.writes());
    drop(m);
    assert_eq!(fake.denied(), Vec::<String>::new());
    // The status role and the reading of the other kinds are exercised by the tests above.
    rbac::assert_all_exercised(&policy, |role| {
        role.contains("meshdns-serve-status") || role.ends_with("meshdns-serve-cluster-objects")
    });
}

/// The same objects read live from a cluster and from a manifests directory (as `kubectl get
/// -o yaml` prints them) are answered the same: every kind, every type asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_and_a_manifests_directory_of_the_same_objects_answer_the_same() {
    let gw = "gateway.networking.k8s.io/v1";
    let objects = [
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop", "creationTimestamp": "2026-01-01T00:00:00Z",
                "annotations": {"external-dns.kubernetes.io/hostname": "web.example.org,both.example.org",
                    "external-dns.kubernetes.io/ttl": "1m"}},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10"},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}, {"ip": "2001:db8::10"}]}}}),
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "cache", "namespace": "shop", "creationTimestamp": "2026-01-02T00:00:00Z"},
            "spec": {"clusterIP": "None"}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "cache-1", "namespace": "shop",
                "labels": {"kubernetes.io/service-name": "cache", "service.kubernetes.io/headless": ""}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.244.0.1"], "hostname": "cache-0"},
                {"addresses": ["10.244.0.2"], "conditions": {"ready": false}}]}),
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "shop", "namespace": "shop", "creationTimestamp": "2026-01-03T00:00:00Z"},
            "spec": {"rules": [{"host": "shop.example.org"}, {"host": "both.example.org"}]},
            "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.net"}]}}}),
        json!({"apiVersion": gw, "kind": "Gateway", "metadata": {"name": "edge", "namespace": "infra"},
            "spec": {"gatewayClassName": "envoy", "listeners": [{"name": "https", "hostname": "*.example.org",
                "port": 443, "protocol": "HTTPS", "allowedRoutes": {"namespaces": {"from": "All"}}}]},
            "status": {"addresses": [{"type": "IPAddress", "value": "192.0.2.30"}]}}),
        json!({"apiVersion": gw, "kind": "HTTPRoute", "metadata": {"name": "app", "namespace": "shop"},
            "spec": {"parentRefs": [{"name": "edge", "namespace": "infra"}], "hostnames": ["app.example.org"]},
            "status": {"parents": [{"parentRef": {"name": "edge", "namespace": "infra"},
                "conditions": [{"type": "Accepted", "status": "True"}]}]}}),
        json!({"apiVersion": "externaldns.k8s.io/v1alpha1", "kind": "DNSEndpoint",
            "metadata": {"name": "extra", "namespace": "dns"},
            "spec": {"endpoints": [
                {"dnsName": "txt.example.org", "recordType": "TXT", "targets": ["hello"]},
                {"dnsName": "example.org", "recordType": "MX", "targets": ["10 mail.example.org"]}]}}),
    ];
    let fake = FakeKube::start().await;
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    let mut yaml = String::new();
    for o in &objects {
        let stored = fake.insert(o.clone());
        yaml.push_str("---\n");
        yaml.push_str(&serde_yaml::to_string(&stored).unwrap());
    }
    write(&manifests, "objects.yaml", &yaml);
    let kubeconfig = write(dir.path(), "kubeconfig", &fake.kubeconfig("fake"));
    let common = [
        "--kube-source",
        "service,ingress,httproute,dnsendpoint",
        "--zone",
        "example.org",
        "--kube-source-default-names",
        "cluster.example.org",
        "--reverse-zone",
        "192.0.2.0/24",
    ];
    let m = manifests.to_str().unwrap().to_string();
    tokio::task::spawn_blocking(move || {
        let mut live_args = vec!["--kubernetes", "--kubeconfig", kubeconfig.as_str()];
        live_args.extend(common);
        let live = Meshdns::serve(&live_args);
        let mut file_args = vec!["--manifests", m.as_str()];
        file_args.extend(common);
        let files = Meshdns::serve(&file_args);
        wait_for(&live, "app.example.org", "192.0.2.30");
        let asked = [
            ("web.example.org", "A"),
            ("web.example.org", "AAAA"),
            ("both.example.org", "A"),
            ("web.shop.cluster.example.org", "A"),
            ("cache.shop.cluster.example.org", "A"),
            ("cache-0.cache.shop.cluster.example.org", "A"),
            ("shop.example.org", "CNAME"),
            ("app.example.org", "A"),
            ("txt.example.org", "TXT"),
            ("example.org", "MX"),
            ("10.2.0.192.in-addr.arpa", "PTR"),
            ("nothing.example.org", "A"),
        ];
        let answer = |m: &Meshdns, name: &str, t: &str| {
            let out = dig(m.dns, &[name, t, "+noall", "+answer", "+comments"]);
            let status = out
                .lines()
                .find_map(|l| l.split("status: ").nth(1))
                .map(|s| s.split(',').next().unwrap_or("").to_string())
                .unwrap_or_default();
            let mut lines: Vec<String> = out
                .lines()
                .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect();
            lines.sort();
            (status, lines)
        };
        for (name, t) in asked {
            let (a, b) = (answer(&live, name, t), answer(&files, name, t));
            assert_eq!(a, b, "{name} {t}: live vs files");
            if name != "nothing.example.org" {
                assert!(!a.1.is_empty(), "{name} {t} answered: {a:?}");
            }
        }
    })
    .await
    .unwrap();
}

/// A kind the API server will not list (here: no RBAC for Services) is reported and the
/// others are served: the DNSZones' records answer, and the pod becomes ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_it_may_not_list_does_not_hold_the_others_back() {
    let fake = FakeKube::start().await;
    let policy = Policy::load(
        &["components/kubernetes-source/rbac.yaml"],
        "meshdns-serve",
        "default",
    );
    fake.enforce(policy);
    fake.insert(
        json!({"apiVersion": DNS, "kind": "DNSZone", "metadata": {"name": "z", "namespace": "dns"},
        "spec": {"domainName": "example.org", "dnsZoneClassName": "powerdns"}}),
    );
    fake.insert(json!({"apiVersion": DNS, "kind": "DNSRecordSet", "metadata": {"name": "www", "namespace": "dns"},
        "spec": {"dnsZoneRef": {"name": "z"}, "recordType": "A",
                 "records": [{"name": "www", "a": {"content": "192.0.2.1"}}]}}));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write(dir.path(), "kubeconfig", &fake.kubeconfig("fake"));
    let m = Meshdns::serve(&[
        "--kubernetes",
        "--kubeconfig",
        &kubeconfig,
        "--kube-source",
        "service",
        "--http",
        "127.0.0.1:0",
    ]);
    tokio::task::spawn_blocking(move || {
        wait_for(&m, "www.example.org", "192.0.2.1");
        let (status, body) = m.get("/readyz");
        assert_eq!(status, 200, "{body}");
    })
    .await
    .unwrap();
    let denied = fake.take_denied();
    assert!(
        denied
            .iter()
            .all(|d| d.contains("services") || d.contains("endpointslices")),
        "{denied:?}"
    );
    assert!(
        denied.iter().any(|d| d.contains("list core services")),
        "{denied:?}"
    );
}
