//! `meshdns render iroh`: the planner on manifest files, as the controller would converge.

use crate::*;

/// datum's PR test vector.
const HEX: &str = "f120d52e42bfcee750508baf28900acac85ad3f397ab4bb653b32be505c32d39";
const Z32: &str = "6ropkm1nz98qqwnotqz1tryk3mrfiw9u16iwzp1usci6kbqdfwho";

const CONFIG: &str = "apiVersion: apiserver.config.datumapis.com/v1alpha1
kind: NetworkServicesOperator
connector:
  leaseDurationSeconds: 30
  iroh:
    dnsEnabled: true
    dnsZoneRef: {namespace: dns, name: connectors-zone}
    recordSuffix: connectors
    ttlSeconds: 5
";

const CLASSES: &str = "apiVersion: v1
kind: List
items:
- apiVersion: networking.datumapis.com/v1alpha1
  kind: ConnectorClass
  metadata: {name: datum-connect}
  spec: {controllerName: networking.datumapis.com/datum-connect}
- apiVersion: networking.datumapis.com/v1alpha1
  kind: ConnectorClass
  metadata: {name: other}
  spec: {controllerName: example.com/other}
";

fn connector(name: &str, uid: &str, class: &str, status: &str) -> String {
    // u2 is the oldest: it owns a key it shares, whatever the names and UIDs say.
    let created = if uid == "u2" {
        "2026-01-01T00:00:00Z"
    } else {
        "2026-02-01T00:00:00Z"
    };
    format!(
        "---\napiVersion: networking.datumapis.com/v1alpha1\nkind: Connector\nmetadata: {{name: {name}, namespace: default, uid: {uid}, generation: 2, creationTimestamp: '{created}'}}\nspec: {{connectorClassName: {class}}}\n{status}"
    )
}

fn details(id: &str) -> String {
    format!(
        "status:\n  connectionDetails:\n    type: PublicKey\n    publicKey:\n      id: {id}\n      homeRelay: https://relay.example.com\n      addresses:\n      - {{address: 2001:db8::1, port: 9090}}\n      - {{address: 192.0.2.1, port: 8080}}\n"
    )
}

#[test]
fn render_iroh_prints_record_sets_and_conditions() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "nso.yaml", CONFIG);
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    write(&manifests, "classes.yaml", CLASSES);
    let connectors = [
        connector("laptop", "u1", "datum-connect", &details(HEX)),
        connector(
            "desktop",
            "u2",
            "datum-connect",
            &details(&HEX.to_uppercase()),
        ),
        connector("pending", "u3", "datum-connect", ""),
        connector("bad", "u4", "datum-connect", &details("abc")),
        connector("foreign", "u5", "other", &details(HEX)),
    ]
    .concat();
    write(&manifests, "connectors.yaml", &connectors);
    let run = || {
        bin()
            .args([
                "render",
                "iroh",
                "--config",
                &config,
                "--cluster",
                "proj",
                "-f",
                manifests.to_str().unwrap(),
            ])
            .output()
            .unwrap()
    };
    let out = run();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text,
        String::from_utf8(run().stdout).unwrap(),
        "deterministic"
    );

    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    assert_eq!(docs.len(), 5, "{text}");
    let rs = &docs[0];
    assert_eq!(rs["kind"], "DNSRecordSet");
    assert_eq!(rs["metadata"]["name"], format!("iroh-{Z32}").as_str());
    assert_eq!(rs["metadata"]["namespace"], "dns");
    let labels = &rs["metadata"]["labels"];
    assert_eq!(
        labels["networking.datumapis.com/iroh-dns-claimed-by-uid"], "u2",
        "desktop is the oldest and owns the shared key"
    );
    assert_eq!(
        labels["networking.datumapis.com/iroh-dns-connector-cluster"],
        "cluster-proj"
    );
    assert_eq!(
        labels["app.kubernetes.io/managed-by"],
        "networking.datumapis.com"
    );
    assert_eq!(rs["spec"]["dnsZoneRef"]["name"], "connectors-zone");
    assert_eq!(rs["spec"]["recordType"], "TXT");
    let contents: Vec<&str> = rs["spec"]["records"]
        .as_sequence()
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

    let conditions: Vec<(String, String, String)> = docs[1..]
        .iter()
        .map(|d| {
            let c = &d["status"]["conditions"][0];
            assert_eq!(c["type"], "IrohDNSPublished");
            assert_eq!(c["observedGeneration"], 2);
            (
                d["metadata"]["name"].as_str().unwrap().to_string(),
                c["reason"].as_str().unwrap().to_string(),
                c["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(conditions[0].0, "bad");
    assert_eq!(conditions[0].1, "Invalid");
    assert!(
        conditions[0]
            .2
            .contains("status.connectionDetails.publicKey.id"),
        "{}",
        conditions[0].2
    );
    assert_eq!(
        conditions[1],
        (
            "desktop".into(),
            "Owner".into(),
            "Owns iroh DNS record.".into()
        )
    );
    assert_eq!(
        conditions[2],
        (
            "laptop".into(),
            "DeferredToOwner".into(),
            "iroh DNS record is owned by Connector proj/default/desktop (uid u2).".into()
        )
    );
    assert_eq!(
        conditions[3],
        (
            "pending".into(),
            "Pending".into(),
            "Connector status does not yet carry connection details.".into()
        )
    );
}

#[test]
fn render_iroh_refuses_a_prefix_iroh_never_queries() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "c.yaml",
        "iroh:\n  dnsZoneRef: {namespace: dns, name: z}\n  recordPrefix: _other\n",
    );
    let m = write(dir.path(), "m.yaml", CLASSES);
    let out = bin()
        .args(["render", "iroh", "--config", &config, "-f", &m])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("iroh.recordPrefix: \"_other\" would never be found"),
        "{err}"
    );
}

/// `docs/configuration.md`'s "see the answers without a cluster": the datum-connectors
/// overlay's config and DNSZone, the example Connector, rendered and served from files.
#[test]
fn the_documented_render_then_serve_flow_answers_the_example_connector() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let overlay = root.join("deploy/overlays/datum-connectors");
    let dir = tempfile::tempdir().unwrap();
    let served = dir.path().join("served");
    std::fs::create_dir(&served).unwrap();
    let config = overlay.join("config.yaml");
    let examples = root.join("examples/connectors");
    let rendered = stdout_of(&[
        "render",
        "iroh",
        "-c",
        config.to_str().unwrap(),
        "-f",
        examples.to_str().unwrap(),
    ]);
    write(&served, "records.yaml", &rendered);
    std::fs::copy(overlay.join("dnszone.yaml"), served.join("dnszone.yaml")).unwrap();
    let m = Meshdns::serve(&["--manifests", served.to_str().unwrap()]);
    let name = format!("_iroh.{Z32}.connectors.example.org");
    let out = dig(m.dns, &[&name, "TXT"]);
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(out.contains("\"relay=https://relay.example.com"), "{out}");
    assert!(out.contains("\"addr=192.0.2.1:8080\""), "{out}");
}
