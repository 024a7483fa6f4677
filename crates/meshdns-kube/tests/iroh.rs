//! The iroh controller against the in-memory API server: claims, handover, releases, drift,
//! retries, races, and a steady state that costs no writes.

#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use meshdns_fakekube::FakeKube;
use meshdns_fakekube::rbac::{self, Policy};
use meshdns_iroh::connector::IrohSettings;
use meshdns_kube::controllers::iroh::{IrohOptions, SourceCluster, run};
use meshdns_kube::metrics::Metrics;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const HEX: &str = "f120d52e42bfcee750508baf28900acac85ad3f397ab4bb653b32be505c32d39";
const Z32: &str = "6ropkm1nz98qqwnotqz1tryk3mrfiw9u16iwzp1usci6kbqdfwho";
const DATUM: &str = "networking.datumapis.com/v1alpha1";
const DNS: &str = "dns.networking.miloapis.com/v1alpha1";
const WAIT: Duration = Duration::from_secs(10);

fn settings() -> IrohSettings {
    IrohSettings {
        zone_namespace: "dns".into(),
        zone_name: "connectors-zone".into(),
        record_prefix: "_iroh".into(),
        record_suffix: "connectors".into(),
        ttl: 5,
    }
}

fn class(name: &str, controller: &str) -> Value {
    json!({"apiVersion": DATUM, "kind": "ConnectorClass", "metadata": {"name": name},
           "spec": {"controllerName": controller}})
}

fn connector(name: &str, class: &str, id: Option<&str>) -> Value {
    let mut c = json!({"apiVersion": DATUM, "kind": "Connector",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"connectorClassName": class}});
    if let Some(id) = id {
        c["status"] = json!({"connectionDetails": {"type": "PublicKey", "publicKey": {
            "id": id, "homeRelay": "https://relay.example.com",
            "addresses": [{"address": "2001:db8::1", "port": 9090}, {"address": "192.0.2.1", "port": 8080}]}}});
    }
    c
}

/// The rules `deploy/` gives the controller in its own cluster (the DNSZone's namespace is
/// the install namespace there, as in the datum-connectors overlay).
fn home() -> Policy {
    Policy::load(
        &[
            "base/iroh-source-role/clusterrole.yaml",
            "base/iroh-records-role/clusterrole.yaml",
            "base/controller-iroh/rbac.yaml",
        ],
        "meshdns-controller-iroh",
        "dns",
    )
}

/// The rules a source cluster grants it (`deploy/remote/iroh-source`).
fn source() -> Policy {
    Policy::load(
        &[
            "base/iroh-source-role/clusterrole.yaml",
            "remote/iroh-source/rbac.yaml",
        ],
        "meshdns-iroh-source",
        "kube-system",
    )
}

/// The rules the DNSZone's cluster grants it (`deploy/remote/iroh-downstream`).
fn downstream() -> Policy {
    Policy::load(
        &[
            "base/iroh-records-role/clusterrole.yaml",
            "remote/iroh-downstream/rbac.yaml",
        ],
        "meshdns-iroh-downstream",
        "dns",
    )
}

struct Running {
    fake: FakeKube,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn start(opts: IrohOptions) -> Running {
    let fake = FakeKube::start().await;
    fake.enforce(home());
    fake.insert(class(
        "datum-connect",
        "networking.datumapis.com/datum-connect",
    ));
    fake.insert(class("other", "example.com/other"));
    let metrics = Arc::new(Metrics::new("iroh"));
    let stop = CancellationToken::new();
    let sources = vec![SourceCluster {
        name: "proj".into(),
        client: fake.client(),
    }];
    tokio::spawn(run(
        sources,
        fake.client(),
        opts,
        metrics.clone(),
        stop.clone(),
    ));
    Running {
        fake,
        metrics,
        stop,
    }
}

fn record_set(fake: &FakeKube, name: &str) -> Option<Value> {
    fake.get(DNS, "DNSRecordSet", Some("dns"), name)
}

fn condition(fake: &FakeKube, name: &str) -> Option<(String, String)> {
    let c = fake.get(DATUM, "Connector", Some("default"), name)?;
    let cond = c["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|x| x["type"] == "IrohDNSPublished")?
        .clone();
    Some((
        cond["reason"].as_str()?.to_string(),
        cond["message"].as_str()?.to_string(),
    ))
}

async fn wait_reason(fake: &FakeKube, name: &str, reason: &str) -> String {
    fake.eventually(WAIT, |f| {
        condition(f, name)
            .filter(|(r, _)| r == reason)
            .map(|(_, m)| m)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "{name}: no {reason} condition; have {:?}",
            condition(fake, name)
        )
    })
}

fn claimed_by(rs: &Value) -> String {
    rs["metadata"]["labels"]["networking.datumapis.com/iroh-dns-claimed-by-uid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn uid(fake: &FakeKube, name: &str) -> String {
    fake.get(DATUM, "Connector", Some("default"), name).unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn publishes_then_converges_without_writes() {
    let r = start(IrohOptions::new(settings())).await;
    r.fake
        .insert(connector("laptop", "datum-connect", Some(HEX)));
    let name = format!("iroh-{Z32}");
    let rs = r
        .fake
        .eventually(WAIT, |f| record_set(f, &name))
        .await
        .expect("record set");
    assert_eq!(claimed_by(&rs), uid(&r.fake, "laptop"));
    let labels = &rs["metadata"]["labels"];
    assert_eq!(
        labels["networking.datumapis.com/iroh-dns-connector-cluster"],
        "cluster-proj"
    );
    assert_eq!(
        labels["networking.datumapis.com/iroh-dns-connector-namespace"],
        "default"
    );
    assert_eq!(
        labels["networking.datumapis.com/iroh-dns-connector-name"],
        "laptop"
    );
    assert_eq!(
        labels["app.kubernetes.io/managed-by"],
        "networking.datumapis.com"
    );
    let contents: Vec<&str> = rs["spec"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["txt"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        [
            "relay=https://relay.example.com",
            "addr=192.0.2.1:8080",
            "addr=[2001:db8::1]:9090"
        ]
    );
    assert_eq!(
        rs["spec"]["records"][0]["name"],
        format!("_iroh.{Z32}.connectors").as_str()
    );
    assert_eq!(rs["spec"]["records"][0]["ttl"], 5);
    assert_eq!(
        wait_reason(&r.fake, "laptop", "Owner").await,
        "Owns iroh DNS record."
    );
    let c = r
        .fake
        .get(DATUM, "Connector", Some("default"), "laptop")
        .unwrap();
    assert_eq!(
        c["metadata"]["finalizers"],
        json!(["networking.datumapis.com/iroh-dns-cleanup"])
    );

    // Steady state: nothing more is written, even as resyncs and heartbeats come.
    tokio::time::sleep(Duration::from_millis(500)).await;
    r.fake.clear_requests();
    let mut c = r
        .fake
        .get(DATUM, "Connector", Some("default"), "laptop")
        .unwrap();
    c["metadata"]["labels"] = json!({"touched": "yes"}); // an unrelated change re-runs the reconcile
    r.fake.replace(c);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let writes: Vec<_> = r
        .fake
        .writes()
        .into_iter()
        .filter(|w| !w.path.contains("/events"))
        .collect();
    assert!(writes.is_empty(), "steady state wrote: {writes:?}");
    assert!(r.metrics.reconciles("ok") >= 2);

    // A changed address is applied (server-side apply, our field manager).
    let mut c = r
        .fake
        .get(DATUM, "Connector", Some("default"), "laptop")
        .unwrap();
    c["status"]["connectionDetails"]["publicKey"]["addresses"] =
        json!([{"address": "192.0.2.9", "port": 1}]);
    r.fake.replace(c);
    r.fake
        .eventually(WAIT, |f| {
            record_set(f, &name)
                .filter(|rs| rs["spec"]["records"][1]["txt"]["content"] == "addr=192.0.2.9:1")
        })
        .await
        .expect("address applied");
    assert!(
        r.fake
            .writes()
            .iter()
            .any(|w| w.content_type.starts_with("application/apply-patch")
                && w.query.contains("fieldManager=network-services-operator"))
    );

    // Drift: someone deletes the record set; the owner puts it back.
    r.fake.delete(DNS, "DNSRecordSet", Some("dns"), &name);
    r.fake
        .eventually(WAIT, |f| record_set(f, &name))
        .await
        .expect("drift repaired");
}

#[tokio::test]
async fn a_shared_key_defers_then_hands_over() {
    let r = start(IrohOptions::new(settings())).await;
    r.fake
        .insert(connector("laptop", "datum-connect", Some(HEX)));
    wait_reason(&r.fake, "laptop", "Owner").await;
    r.fake.insert(connector(
        "desktop",
        "datum-connect",
        Some(&HEX.to_uppercase()),
    ));
    let msg = wait_reason(&r.fake, "desktop", "DeferredToOwner").await;
    assert_eq!(
        msg,
        format!(
            "iroh DNS record is owned by Connector proj/default/laptop (uid {}).",
            uid(&r.fake, "laptop")
        )
    );

    // The owner goes: its finalizer releases the record, and the sibling takes over at once.
    let desktop = uid(&r.fake, "desktop");
    r.fake.delete(DATUM, "Connector", Some("default"), "laptop");
    r.fake
        .eventually(WAIT, |f| {
            f.get(DATUM, "Connector", Some("default"), "laptop")
                .is_none()
                .then_some(())
        })
        .await
        .expect("deletion does not hang");
    let name = format!("iroh-{Z32}");
    r.fake
        .eventually(WAIT, |f| {
            record_set(f, &name).filter(|rs| claimed_by(rs) == desktop)
        })
        .await
        .expect("handover");
    wait_reason(&r.fake, "desktop", "Owner").await;
}

#[tokio::test]
async fn key_change_class_change_invalid_and_pending() {
    let r = start(IrohOptions::new(settings())).await;
    r.fake
        .insert(connector("laptop", "datum-connect", Some(HEX)));
    let old = format!("iroh-{Z32}");
    r.fake
        .eventually(WAIT, |f| record_set(f, &old))
        .await
        .expect("first key published");

    // Key rotation: the new id's record appears and the old one is released.
    let new_id = "0000000000000000000000000000000000000000000000000000000000000000";
    let new_name = meshdns_iroh::connector::record_set_name(new_id).unwrap();
    let mut c = r
        .fake
        .get(DATUM, "Connector", Some("default"), "laptop")
        .unwrap();
    c["status"]["connectionDetails"]["publicKey"]["id"] = json!(new_id);
    r.fake.replace(c);
    r.fake
        .eventually(WAIT, |f| {
            (record_set(f, &new_name).is_some() && record_set(f, &old).is_none()).then_some(())
        })
        .await
        .expect("old record released, new one published");

    // An id that is not a key: nothing published, the condition says why.
    let mut c = r
        .fake
        .get(DATUM, "Connector", Some("default"), "laptop")
        .unwrap();
    c["status"]["connectionDetails"]["publicKey"]["id"] = json!("abc");
    r.fake.replace(c);
    let msg = wait_reason(&r.fake, "laptop", "Invalid").await;
    assert!(
        msg.contains("status.connectionDetails.publicKey.id"),
        "{msg}"
    );
    assert!(record_set(&r.fake, &new_name).is_none());

    // No details yet: Pending.
    r.fake.insert(connector("fresh", "datum-connect", None));
    wait_reason(&r.fake, "fresh", "Pending").await;

    // The class stops routing to iroh: condition and finalizer go, so deletion never hangs.
    let mut c = r
        .fake
        .get(DATUM, "Connector", Some("default"), "fresh")
        .unwrap();
    c["spec"]["connectorClassName"] = json!("other");
    r.fake.replace(c);
    r.fake
        .eventually(WAIT, |f| {
            let c = f.get(DATUM, "Connector", Some("default"), "fresh")?;
            (c["metadata"].get("finalizers").is_none() && condition(f, "fresh").is_none())
                .then_some(())
        })
        .await
        .expect("finalizer and condition removed");
    r.fake.delete(DATUM, "Connector", Some("default"), "fresh");
    assert!(
        r.fake
            .get(DATUM, "Connector", Some("default"), "fresh")
            .is_none()
    );
}

#[tokio::test]
async fn disabled_publishing_cleans_up() {
    // A first run publishes; a second, disabled, releases everything and the finalizers.
    let r = start(IrohOptions::new(settings())).await;
    r.fake
        .insert(connector("laptop", "datum-connect", Some(HEX)));
    let name = format!("iroh-{Z32}");
    r.fake
        .eventually(WAIT, |f| record_set(f, &name))
        .await
        .expect("published");
    wait_reason(&r.fake, "laptop", "Owner").await;
    r.stop.cancel();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stop = CancellationToken::new();
    let mut opts = IrohOptions::new(settings());
    opts.enabled = false;
    let sources = vec![SourceCluster {
        name: "proj".into(),
        client: r.fake.client(),
    }];
    tokio::spawn(run(
        sources,
        r.fake.client(),
        opts,
        Arc::new(Metrics::new("iroh")),
        stop.clone(),
    ));
    r.fake
        .eventually(WAIT, |f| {
            let c = f.get(DATUM, "Connector", Some("default"), "laptop")?;
            (record_set(f, &name).is_none() && c["metadata"].get("finalizers").is_none())
                .then_some(())
        })
        .await
        .expect("released and unfinalized");
    stop.cancel();
}

#[tokio::test]
async fn api_errors_are_retried() {
    let fake_first = FakeKube::start().await;
    fake_first.enforce(home());
    fake_first.fail("POST", "/dnsrecordsets", 500, 2);
    fake_first.insert(class(
        "datum-connect",
        "networking.datumapis.com/datum-connect",
    ));
    fake_first.insert(connector("laptop", "datum-connect", Some(HEX)));
    let metrics = Arc::new(Metrics::new("iroh"));
    let stop = CancellationToken::new();
    let sources = vec![SourceCluster {
        name: "proj".into(),
        client: fake_first.client(),
    }];
    tokio::spawn(run(
        sources,
        fake_first.client(),
        IrohOptions::new(settings()),
        metrics.clone(),
        stop.clone(),
    ));
    let name = format!("iroh-{Z32}");
    fake_first
        .eventually(Duration::from_secs(20), |f| record_set(f, &name))
        .await
        .expect("created after the failures");
    assert!(metrics.reconciles("error") >= 1);
    assert!(
        metrics
            .render()
            .contains("meshdns_controller_errors_total{controller=\"iroh\",kind=\"api\"}")
    );
    stop.cancel();
}

/// Two clusters, one Connector each, the same key, one downstream: reconciled concurrently,
/// exactly one ends as owner, the other defers to it, and nothing flaps afterwards.
#[tokio::test]
async fn concurrent_claims_end_with_one_owner() {
    let downstream_cluster = FakeKube::start().await;
    downstream_cluster.enforce(downstream());
    let downstream = downstream_cluster;
    let a = FakeKube::start().await;
    let b = FakeKube::start().await;
    a.enforce(source());
    b.enforce(source());
    for f in [&a, &b] {
        f.insert(class(
            "datum-connect",
            "networking.datumapis.com/datum-connect",
        ));
        f.insert(connector("laptop", "datum-connect", Some(HEX)));
    }
    let stop = CancellationToken::new();
    let sources = vec![
        SourceCluster {
            name: "a".into(),
            client: a.client(),
        },
        SourceCluster {
            name: "b".into(),
            client: b.client(),
        },
    ];
    tokio::spawn(run(
        sources,
        downstream.client(),
        IrohOptions::new(settings()),
        Arc::new(Metrics::new("iroh")),
        stop.clone(),
    ));
    let reasons = |f: &FakeKube| condition(f, "laptop").map(|(r, _)| r);
    let settled = async {
        loop {
            if let (Some(x), Some(y)) = (reasons(&a), reasons(&b)) {
                return (x, y);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (x, y) = tokio::time::timeout(WAIT, settled)
        .await
        .expect("both decided");
    let mut got = [x, y];
    got.sort();
    assert_eq!(got, ["DeferredToOwner".to_string(), "Owner".to_string()]);
    let name = format!("iroh-{Z32}");
    let owner = claimed_by(&record_set(&downstream, &name).unwrap());
    downstream.clear_requests();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        claimed_by(&record_set(&downstream, &name).unwrap()),
        owner,
        "no flapping"
    );
    assert!(downstream.writes().is_empty(), "{:?}", downstream.writes());
    stop.cancel();
}

#[tokio::test]
async fn expired_leases_withdraw_records_when_asked() {
    let mut opts = IrohOptions::new(settings());
    opts.withdraw_expired_leases = true;
    let r = start(opts).await;
    let c = r
        .fake
        .insert(connector("laptop", "datum-connect", Some(HEX)));
    let owner_ref = json!([{"apiVersion": DATUM, "kind": "Connector", "name": "laptop", "uid": c["metadata"]["uid"], "controller": true}]);
    let lease = |renew: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "laptop", "namespace": "default", "ownerReferences": owner_ref},
        "spec": {"leaseDurationSeconds": 30, "renewTime": renew}})
    };
    r.fake.insert(lease("2020-01-01T00:00:00.000000Z"));
    let name = format!("iroh-{Z32}");
    wait_reason(&r.fake, "laptop", "LeaseExpired").await;
    assert!(record_set(&r.fake, &name).is_none());
    // The agent renews: the Lease event re-runs the Connector and the record comes back.
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let mut l = r
        .fake
        .get("coordination.k8s.io/v1", "Lease", Some("default"), "laptop")
        .unwrap();
    l["spec"]["renewTime"] = json!(now);
    r.fake.replace(l);
    r.fake
        .eventually(WAIT, |f| record_set(f, &name))
        .await
        .expect("restored");
    wait_reason(&r.fake, "laptop", "Owner").await;
}

/// Least privilege, the other way round: every rule `deploy/` grants the controller is used by
/// one of the scenarios above (each of which also fails on a request the rules refuse). The
/// election Lease rules are exercised by the process tests (`crates/meshdns/tests/cli`).
#[test]
fn rbac_every_rule_is_exercised() {
    publishes_then_converges_without_writes();
    a_shared_key_defers_then_hands_over();
    key_change_class_change_invalid_and_pending();
    disabled_publishing_cleans_up();
    api_errors_are_retried();
    concurrent_claims_end_with_one_owner();
    expired_leases_withdraw_records_when_asked();
    for policy in [home(), source(), downstream()] {
        rbac::assert_all_exercised(&policy, |role| role.ends_with("-election"));
    }
}

const HEX2: &str = "fd1724385aa0c75b64fb78cd602fa1d991fdebf76b13c58ed702eac835e9f618";
const Z32_2: &str = "9wm1eqn4wddis385xdgsym7b5ge9549zpcjhmdszymicopxj6acy";

/// Every kind of API failure, while Connectors come and one goes: 500s, 409 conflicts, 503s
/// on reads, requests that hang 2 s and time out (504), watches that drop without a word and
/// watches that end 410 Gone. The controller retries with backoff and converges once the API
/// behaves: the live Connector owns its record, the deleted one's record is released and its
/// finalizer removed (the object is gone), and a record set it does not own is never touched.
#[tokio::test]
async fn converges_through_api_faults_and_never_strands_a_finalizer() {
    let r = start(IrohOptions::new(settings())).await;
    r.fake
        .insert(json!({"apiVersion": DNS, "kind": "DNSRecordSet",
        "metadata": {"name": "foreign", "namespace": "dns"},
        "spec": {"dnsZoneRef": {"name": "connectors-zone"}, "recordType": "TXT",
                 "records": [{"name": "x", "txt": {"content": "keep"}}]}}));
    for path in ["/dnsrecordsets", "/connectors"] {
        r.fake.fail("PATCH", path, 500, 3);
        r.fake.fail("PATCH", path, 409, 3);
        r.fake.fail("POST", path, 500, 2);
        r.fake.fail("DELETE", path, 500, 2);
        r.fake.stall("PATCH", path, Duration::from_secs(2), 1);
        r.fake.stall("GET", path, Duration::from_secs(2), 1);
    }
    r.fake.fail("GET", "/connectors", 503, 3);
    r.fake.insert(connector("a", "datum-connect", Some(HEX)));
    r.fake.insert(connector("b", "datum-connect", Some(HEX2)));
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        r.fake.disconnect_watches();
        tokio::time::sleep(Duration::from_millis(300)).await;
        r.fake.expire_watches();
    }
    // b goes while the API still fails its cleanup now and then.
    r.fake.fail("DELETE", "/dnsrecordsets", 500, 1);
    r.fake.fail("PATCH", "/connectors", 409, 2);
    let b_rs = format!("iroh-{Z32_2}");
    r.fake
        .eventually(Duration::from_secs(30), |f| record_set(f, &b_rs))
        .await
        .expect("b published through the faults");
    r.fake.delete(DATUM, "Connector", Some("default"), "b");
    r.fake.disconnect_watches();
    r.fake.expire_watches();

    let a_rs = format!("iroh-{Z32}");
    let a_uid = uid(&r.fake, "a");
    // Failed reconciles are retried 5 s later (0.2 s after a conflict).
    r.fake
        .eventually(Duration::from_secs(60), |f| {
            let a = record_set(f, &a_rs)?;
            let b_gone = f.get(DATUM, "Connector", Some("default"), "b").is_none();
            (claimed_by(&a) == a_uid && b_gone && record_set(f, &b_rs).is_none()).then_some(())
        })
        .await
        .unwrap_or_else(|| {
            panic!(
                "not converged: a {:?}, b {:?}, b's record {:?}",
                record_set(&r.fake, &a_rs).map(|rs| claimed_by(&rs)),
                r.fake.get(DATUM, "Connector", Some("default"), "b"),
                record_set(&r.fake, &b_rs).is_some()
            )
        });
    wait_reason(&r.fake, "a", "Owner").await;
    let foreign = record_set(&r.fake, "foreign").expect("never deleted");
    assert_eq!(foreign["spec"]["records"][0]["txt"]["content"], "keep");
    let touched: Vec<_> = r
        .fake
        .writes()
        .into_iter()
        .filter(|w| w.path.ends_with("/foreign"))
        .collect();
    assert!(
        touched.is_empty(),
        "wrote to a record set it does not own: {touched:?}"
    );
    assert!(r.metrics.reconciles("error") >= 1);
}
