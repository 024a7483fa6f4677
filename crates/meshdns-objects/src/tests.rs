//! The types round-trip real objects without loss and name the same resources as the CRDs.

use kube_core::Resource;
use serde::Serialize;
use serde_json::{Value, json};

use super::*;

fn round_trip<T: serde::de::DeserializeOwned + Serialize>(object: Value) {
    let typed: T = serde_json::from_value(object.clone()).unwrap();
    assert_eq!(serde_json::to_value(&typed).unwrap(), object);
}

#[test]
fn objects_round_trip_without_loss() {
    round_trip::<Connector>(json!({
        "apiVersion": DATUM_API_VERSION, "kind": "Connector",
        "metadata": {"name": "laptop", "namespace": "default", "uid": "u1", "generation": 2},
        "spec": {"connectorClassName": "datum-connect", "capabilities": [{"type": "ConnectTCP", "connectTCP": {"disabled": false}}]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "ConnectorReady", "message": "ok",
                            "lastTransitionTime": "2026-11-22T10:00:00Z", "observedGeneration": 2}],
            "connectionDetails": {"type": "PublicKey", "publicKey": {
                "id": "f120d52e42bfcee750508baf28900acac85ad3f397ab4bb653b32be505c32d39",
                "discoveryMode": "DNS", "homeRelay": "https://relay.example.com",
                "addresses": [{"address": "192.0.2.1", "port": 8080}]}},
            "leaseRef": {"name": "laptop"},
            "capabilities": [{"type": "ConnectTCP", "conditions": []}]
        }
    }));
    round_trip::<DNSRecordSet>(json!({
        "apiVersion": DNS_API_VERSION, "kind": "DNSRecordSet",
        "metadata": {"name": "www", "namespace": "dns"},
        "spec": {"dnsZoneRef": {"name": "zone"}, "recordType": "MX",
                 "records": [{"name": "@", "ttl": 300, "mx": {"preference": 10, "exchange": "mx.example.com."}},
                             {"name": "_sip._udp", "srv": {"priority": 1, "weight": 2, "port": 5060, "target": "sip"}},
                             {"name": "c", "caa": {"flag": 0, "tag": "issue", "value": "ca.example"}},
                             {"name": "_443._tcp", "tlsa": {"usage": 3, "selector": 1, "matchingType": 1, "certData": "ab"}},
                             {"name": "h", "https": {"priority": 1, "target": ".", "params": {"alpn": "h2"}}},
                             {"name": "@", "soa": {"mname": "ns", "rname": "hostmaster", "serial": 7}},
                             {"name": "t", "txt": {"content": "x"}, "future": {"k": 1}}]},
        "status": {"conditions": [{"type": "Accepted"}]}
    }));
    round_trip::<ClusterMesh>(json!({
        "apiVersion": KILO_API_VERSION, "kind": "ClusterMesh",
        "metadata": {"name": "m", "namespace": "kilo"},
        "spec": {"clusters": [{"name": "a", "local": true, "allowedNetworks": ["10.0.0.0/16"]},
                              {"name": "b", "kubeconfigSecretRef": {"name": "s", "key": "k"}, "allowedNetworks": ["10.1.0.0/16"], "wireguardPort": 51820, "persistentKeepalive": 25}]},
        "status": {"clusters": [{"name": "a", "registeredPeers": 1, "skippedNodes": 0}],
                   "conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled", "message": "all clusters reconciled successfully", "lastTransitionTime": "2026-11-22T10:00:00Z"}]}
    }));
    round_trip::<Peer>(json!({
        "apiVersion": KILO_API_VERSION, "kind": "Peer",
        "metadata": {"name": "p", "labels": {"kilo-clustermesh.io/mesh": "m"}},
        "spec": {"allowedIPs": ["10.0.0.0/24"], "publicKey": "k", "presharedKey": "psk",
                 "endpoint": {"dnsOrIP": {"dns": "a.example"}, "port": 51820}}
    }));
    let class: ConnectorClass =
        serde_json::from_value(json!({"metadata": {"name": "c"}, "spec": {}})).unwrap();
    assert_eq!(
        class.controller_name(),
        "networking.datumapis.com/datum-connect"
    );
}

#[test]
fn crds_describe_the_same_resources() {
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(crds())
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let names: Vec<(String, String, String)> = docs
        .iter()
        .map(|d| {
            (
                d["spec"]["group"].as_str().unwrap().to_string(),
                d["spec"]["names"]["plural"].as_str().unwrap().to_string(),
                d["spec"]["scope"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    fn of<K: Resource<DynamicType = ()>>(scope: &str) -> (String, String, String) {
        (
            K::group(&()).into_owned(),
            K::plural(&()).into_owned(),
            scope.to_string(),
        )
    }
    assert_eq!(
        names,
        vec![
            of::<ClusterMesh>("Namespaced"),
            of::<Peer>("Cluster"),
            of::<Connector>("Namespaced"),
            of::<ConnectorClass>("Cluster"),
            of::<DNSZone>("Namespaced"),
            of::<DNSRecordSet>("Namespaced"),
        ]
    );
    for d in &docs {
        assert_eq!(d["apiVersion"], "apiextensions.k8s.io/v1");
        let name = d["metadata"]["name"].as_str().unwrap();
        let want = format!(
            "{}.{}",
            d["spec"]["names"]["plural"].as_str().unwrap(),
            d["spec"]["group"].as_str().unwrap()
        );
        assert_eq!(name, want);
        // Every CRD parses as the apiextensions type a cluster would accept.
        let json = serde_json::to_value(d).unwrap();
        let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
            serde_json::from_value(json).unwrap();
        assert_eq!(crd.spec.versions[0].name, "v1alpha1");
    }
}

// ------------------------------------------------------------------ ClusterMesh and Peer
// (moved from the mesh planner's tests with the serde shapes)

const KEY: &str = meshdns_mesh::annotations::KEY;
const KEY_A: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

fn entry(name: &str, networks: &[&str]) -> ClusterEntry {
    ClusterEntry {
        name: name.into(),
        allowed_networks: networks.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn std_entry(name: &str) -> ClusterEntry {
    entry(name, &["10.244.0.0/16", "10.4.0.0/16"])
}

fn mesh_spec(clusters: Vec<ClusterEntry>) -> ClusterMeshSpec {
    ClusterMeshSpec {
        clusters,
        dns: None,
    }
}

#[test]
fn objects_round_trip_through_yaml() {
    let yaml = r#"
clusters:
- name: ceph
  local: true
  allowedNetworks: [10.247.0.0/16, 100.66.0.0/16]
- name: tenant
  kubeconfigSecretRef: {name: tenant-kubeconfig, key: value}
  allowedNetworks: [10.0.0.0/16]
  wireguardPort: 51821
  persistentKeepalive: 25
dns:
  dnsZoneRef: {name: mesh-zone}
"#;
    let spec: ClusterMeshSpec = serde_yaml::from_str(yaml).unwrap();
    assert_eq!(spec.clusters[1].to_plan().effective_wireguard_port(), 51821);
    let back: ClusterMeshSpec =
        serde_yaml::from_str(&serde_yaml::to_string(&spec).unwrap()).unwrap();
    assert_eq!(back, spec);
    let n: crate::core::Node = serde_yaml::from_str(
        "apiVersion: v1\nkind: Node\nmetadata: {name: w1, labels: {a: b}, annotations: {kilo.squat.ai/key: k}}\nspec: {podCIDR: 10.244.1.0/24}\nstatus: {addresses: [{type: InternalIP, address: 10.0.0.1}], capacity: {cpu: '2'}}\n",
    )
    .unwrap();
    let n = n.to_plan();
    assert_eq!(
        (n.name(), n.annotation(KEY), n.first_pod_cidr()),
        ("w1", Some("k"), Some("10.244.1.0/24"))
    );
    let spec = PeerSpec {
        allowed_ips: vec!["10.0.0.0/24".into()],
        endpoint: Some(PeerEndpoint {
            dns_or_ip: DnsOrIp {
                ip: Some("203.0.113.1".into()),
                dns: None,
            },
            port: 51820,
        }),
        persistent_keepalive: Some(25),
        preshared_key: None,
        public_key: KEY_A.into(),
    };
    let json = serde_json::to_value(&spec).unwrap();
    // The planner's PeerSpec writes as the same object.
    let planned = meshdns_mesh::PeerSpec::from(&spec);
    assert_eq!(
        serde_json::to_value(PeerSpec::from(&planned)).unwrap(),
        json
    );
    assert_eq!(
        json,
        serde_json::json!({"allowedIPs": ["10.0.0.0/24"], "endpoint": {"dnsOrIP": {"ip": "203.0.113.1"}, "port": 51820}, "persistentKeepalive": 25, "publicKey": KEY_A})
    );
}

#[test]
fn schema_checks_name_the_field() {
    let ok = mesh_spec(vec![std_entry("a"), entry("b", &["10.245.0.0/16"])]);
    assert!(ok.problems().is_empty());
    let bad = ClusterMeshSpec {
        clusters: vec![
            ClusterEntry {
                wireguard_port: Some(0),
                persistent_keepalive: Some(-1),
                ..entry("Bad_Name", &[])
            },
            ClusterEntry {
                kubeconfig_secret_ref: Some(SecretKeyRef {
                    name: "s".into(),
                    key: String::new(),
                }),
                ..entry("Bad_Name", &["10.0.0.0/8"])
            },
        ],
        dns: Some(MeshDns::default()),
    };
    let got = bad.problems();
    for want in [
        "spec.clusters[0].name",
        "spec.clusters[0].allowedNetworks",
        "spec.clusters[0].wireguardPort",
        "spec.clusters[0].persistentKeepalive",
        "spec.clusters[1].name: \"Bad_Name\" appears twice",
        "spec.clusters[1].kubeconfigSecretRef",
        "spec.dns.dnsZoneRef.name",
    ] {
        assert!(
            got.iter().any(|p| p.contains(want)),
            "{want} missing from {got:#?}"
        );
    }
    assert!(mesh_spec(vec![std_entry("a")]).problems()[0].contains("at least 2"));
}

#[test]
fn an_object_problem_is_a_warning_whose_note_fits_an_event() {
    let e = crate::events::object_problem("InvalidField", "spec.rules[0].host", "bad");
    assert_eq!(e.type_, crate::events::EventType::Warning);
    assert_eq!(e.reason, "InvalidField");
    assert_eq!(e.note.as_deref(), Some("spec.rules[0].host: bad"));
    let long = "é".repeat(800);
    let e = crate::events::object_problem("Conflict", "x", &long);
    let note = e.note.unwrap();
    assert!(
        note.len() <= 1024 && note.ends_with("..."),
        "{}",
        note.len()
    );
}
