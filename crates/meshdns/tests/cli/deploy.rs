//! `deploy/` as a cluster would receive it: every base, overlay, component and remote install
//! rendered by `kubectl kustomize` (kubectl must be installed; a missing one fails these
//! tests), each object parsed into its typed Kubernetes struct and compared with what it was
//! (a misspelled or misplaced field does not survive), custom resources checked against the
//! schemas `meshdns crds` prints, config files read by `meshdns check --config-only`, and the
//! CRDs in `deploy/crds` compared with the binary's.

use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, PersistentVolumeClaim, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

use crate::*;

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// The options the guides describe as adding a component to an overlay (beyond monitoring,
/// which every overlay's comment offers): each is rendered and checked as an install.
const GUIDE_OPTIONS: &[(&str, &str)] = &[
    // docs/guide-datum-connectors.md, "Connectors in other clusters".
    ("datum-connectors", "iroh-source-clusters"),
    // docs/guide-iroh-relay.md, "Join the Mainline DHT".
    ("iroh-relay", "pkarr-dht"),
];

/// Every kustomization under deploy/ (bases, overlays, components' users, remote installs),
/// each overlay again with the monitoring component added, as its comment suggests, and each
/// overlay with the components the guides describe adding (`GUIDE_OPTIONS`).
fn renderings() -> Vec<(String, Vec<Value>)> {
    let mut dirs = Vec::new();
    for group in ["base", "overlays", "remote", "crds"] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(deploy().join(group))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("kustomization.yaml").exists())
            .collect();
        found.sort();
        dirs.extend(found);
    }
    dirs.push(deploy().join("crds"));
    let mut out: Vec<(String, Vec<Value>)> = dirs
        .iter()
        .map(|d| (d.display().to_string(), kustomize(d)))
        .collect();
    for overlay in dirs
        .iter()
        .filter(|d| d.starts_with(deploy().join("overlays")))
    {
        let name = overlay.file_name().unwrap().to_str().unwrap();
        let mut components = vec!["monitoring"];
        components.extend(
            GUIDE_OPTIONS
                .iter()
                .filter(|(o, _)| *o == name)
                .map(|(_, c)| *c),
        );
        for component in components {
            out.push((
                format!("{} + components/{component}", overlay.display()),
                with_component(overlay, component),
            ));
        }
    }
    out
}

/// `overlay` with `component` added, as a user adds it to the overlay's `components:`: the
/// component's objects take the overlay's namespace.
fn with_component(overlay: &Path, component: &str) -> Vec<Value> {
    let with = tempfile::tempdir().unwrap();
    // kustomize takes relative paths only.
    let here = with.path().canonicalize().unwrap();
    let up = "../".repeat(here.components().count() - 1);
    let relative = |p: &Path| {
        let p = p.canonicalize().unwrap();
        format!("{up}{}", p.strip_prefix("/").unwrap().display())
    };
    let namespace = kustomize(overlay)
        .iter()
        .find_map(|o| o["metadata"]["namespace"].as_str().map(str::to_string))
        .unwrap();
    let k = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {namespace}\nresources: [{}]\ncomponents: [{}]\n",
        relative(overlay),
        relative(&deploy().join("components").join(component)),
    );
    std::fs::write(with.path().join("kustomization.yaml"), k).unwrap();
    kustomize(with.path())
}

/// A component no kustomization uses and no guide option adds would never be rendered.
#[test]
fn every_component_is_rendered_in_some_install() {
    let mut unused = Vec::new();
    for entry in std::fs::read_dir(deploy().join("components")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let used = std::process::Command::new("grep")
            .args([
                "-rlq",
                "--include=kustomization.yaml",
                &format!("components/{name}"),
            ])
            .arg(deploy().join("overlays"))
            .arg(deploy().join("components"))
            .status()
            .unwrap()
            .success();
        if !used && !GUIDE_OPTIONS.iter().any(|(_, c)| *c == name) {
            unused.push(name);
        }
    }
    assert!(unused.is_empty(), "components never rendered: {unused:?}");
}

fn kustomize(dir: &Path) -> Vec<Value> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl (with kustomize) must be installed to test deploy/");
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_documents(&String::from_utf8(out.stdout).unwrap())
}

pub(crate) fn yaml_documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// Parses `object` as `T` and back: the two must be equal, or a field was dropped or changed.
fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(what: &str, object: &Value) {
    let typed: T = serde_json::from_value(object.clone())
        .unwrap_or_else(|e| panic!("{what}: not a valid object: {e}"));
    let back = numbers_as_floats(serde_json::to_value(&typed).unwrap());
    let object = &numbers_as_floats(object.clone());
    if &back != object {
        panic!(
            "{what}: fields lost or changed by the typed round trip:\n{}",
            diff(object, &back, "")
        );
    }
}

/// The same value with every number as a float: a schema's `maximum: 65535` comes back from
/// its typed field as `65535.0`, which is the same bound.
fn numbers_as_floats(v: Value) -> Value {
    match v {
        Value::Number(n) => serde_json::json!(n.as_f64().unwrap()),
        Value::Array(a) => Value::Array(a.into_iter().map(numbers_as_floats).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, v)| (k, numbers_as_floats(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Where two JSON values differ, one line per path.
fn diff(a: &Value, b: &Value, path: &str) -> String {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter()
                .map(|k| {
                    let absent = Value::String("<absent>".into());
                    diff(
                        x.get(k).unwrap_or(&absent),
                        y.get(k).unwrap_or(&absent),
                        &format!("{path}.{k}"),
                    )
                })
                .collect()
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .map(|(i, (p, q))| diff(p, q, &format!("{path}[{i}]")))
            .collect(),
        _ if a == b => String::new(),
        _ => format!("  {path}: {a} -> {b}\n"),
    }
}

/// The CRDs the binary prints, by `group/Kind`.
pub(crate) fn crd_schemas() -> Vec<(String, Value)> {
    yaml_documents(&stdout_of(&["crds"]))
        .into_iter()
        .map(|crd| {
            let key = format!(
                "{}/{}",
                crd["spec"]["group"].as_str().unwrap(),
                crd["spec"]["names"]["kind"].as_str().unwrap()
            );
            let schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
            (key, schema)
        })
        .collect()
}

/// Checks `v` against a structural OpenAPI v3 schema as the API server prunes and validates:
/// types, required fields, unknown fields (an error, where the server would drop them),
/// enums, numeric bounds, lengths and list items. Returns what is wrong, one per line.
pub(crate) fn schema_errors(v: &Value, s: &Value, path: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let kind_ok = match s["type"].as_str() {
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
        Some("string") => v.is_string(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("number") => v.is_number(),
        Some("boolean") => v.is_boolean(),
        _ => true,
    };
    if !kind_ok && s["x-kubernetes-int-or-string"] != true {
        return vec![format!("{path}: {v} is not of type {}", s["type"])];
    }
    if let Some(allowed) = s["enum"].as_array()
        && !allowed.contains(v)
    {
        errors.push(format!("{path}: {v} is not one of {allowed:?}"));
    }
    if let Some(n) = v.as_f64() {
        if s["minimum"].as_f64().is_some_and(|m| n < m) {
            errors.push(format!("{path}: {n} < minimum {}", s["minimum"]));
        }
        if s["maximum"].as_f64().is_some_and(|m| n > m) {
            errors.push(format!("{path}: {n} > maximum {}", s["maximum"]));
        }
    }
    if let Some(text) = v.as_str() {
        let len = text.chars().count() as u64;
        if s["minLength"].as_u64().is_some_and(|m| len < m)
            || s["maxLength"].as_u64().is_some_and(|m| len > m)
        {
            errors.push(format!("{path}: length {len} out of bounds"));
        }
    }
    if let (Some(items), Some(list)) = (s.get("items"), v.as_array()) {
        for (i, item) in list.iter().enumerate() {
            errors.extend(schema_errors(item, items, &format!("{path}[{i}]")));
        }
    }
    if let Some(object) = v.as_object() {
        for field in s["required"].as_array().into_iter().flatten() {
            let field = field.as_str().unwrap();
            if !object.contains_key(field) {
                errors.push(format!("{path}.{field}: required"));
            }
        }
        let open = s["x-kubernetes-preserve-unknown-fields"] == true;
        for (k, x) in object {
            if path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            match (s["properties"].get(k), s.get("additionalProperties")) {
                (Some(sub), _) => errors.extend(schema_errors(x, sub, &format!("{path}.{k}"))),
                (None, Some(sub)) if sub.is_object() => {
                    errors.extend(schema_errors(x, sub, &format!("{path}.{k}")))
                }
                _ if open => {}
                _ => errors.push(format!("{path}.{k}: unknown field")),
            }
        }
    }
    errors
}

/// Checks the Prometheus Operator's objects by hand: no schema for them is on this machine.
fn monitoring(what: &str, o: &Value, objects: &[Value]) {
    match o["kind"].as_str().unwrap() {
        "ServiceMonitor" => {
            let selector = o["spec"]["selector"]["matchLabels"].as_object().unwrap();
            let port = o["spec"]["endpoints"][0]["port"].as_str().unwrap();
            let services: Vec<&Value> = objects
                .iter()
                .filter(|s| s["kind"] == "Service")
                .filter(|s| {
                    selector
                        .iter()
                        .all(|(k, v)| &s["metadata"]["labels"][k] == v)
                })
                .collect();
            assert!(!services.is_empty(), "{what}: selects no Service");
            for s in services {
                assert!(
                    s["spec"]["ports"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|p| p["name"] == port),
                    "{what}: Service {} has no port {port}",
                    s["metadata"]["name"]
                );
            }
        }
        "PrometheusRule" => {
            for group in o["spec"]["groups"].as_array().unwrap() {
                for rule in group["rules"].as_array().unwrap() {
                    assert!(
                        rule["alert"].is_string() && rule["expr"].is_string(),
                        "{what}: {rule}"
                    );
                    let known = ["alert", "expr", "for", "labels", "annotations"];
                    for k in rule.as_object().unwrap().keys() {
                        assert!(
                            known.contains(&k.as_str()),
                            "{what}: unknown rule field {k}"
                        );
                    }
                }
            }
        }
        other => panic!("{what}: no check for {other}"),
    }
}

#[test]
fn every_rendered_object_survives_its_typed_round_trip_and_schema() {
    let schemas = crd_schemas();
    let mut checked = 0;
    for (dir, objects) in renderings() {
        assert!(!objects.is_empty(), "{dir}: renders nothing");
        for o in &objects {
            let kind = o["kind"].as_str().unwrap_or_default();
            let what = format!("{dir}: {kind} {}", o["metadata"]["name"]);
            let group = o["apiVersion"]
                .as_str()
                .unwrap()
                .rsplit_once('/')
                .map_or("", |(g, _)| g);
            match kind {
                "Deployment" => round_trip::<Deployment>(&what, o),
                "StatefulSet" => round_trip::<StatefulSet>(&what, o),
                "Service" => round_trip::<Service>(&what, o),
                "ServiceAccount" => round_trip::<ServiceAccount>(&what, o),
                "ConfigMap" => round_trip::<ConfigMap>(&what, o),
                "Secret" => round_trip::<Secret>(&what, o),
                "Namespace" => round_trip::<Namespace>(&what, o),
                "PersistentVolumeClaim" => round_trip::<PersistentVolumeClaim>(&what, o),
                "PodDisruptionBudget" => round_trip::<PodDisruptionBudget>(&what, o),
                "NetworkPolicy" => round_trip::<NetworkPolicy>(&what, o),
                "Role" => round_trip::<Role>(&what, o),
                "ClusterRole" => round_trip::<ClusterRole>(&what, o),
                "RoleBinding" => round_trip::<RoleBinding>(&what, o),
                "ClusterRoleBinding" => round_trip::<ClusterRoleBinding>(&what, o),
                "CustomResourceDefinition" => round_trip::<CustomResourceDefinition>(&what, o),
                "ServiceMonitor" | "PrometheusRule" => monitoring(&what, o, &objects),
                _ => {
                    let key = format!("{group}/{kind}");
                    let schema = schemas
                        .iter()
                        .find(|(k, _)| *k == key)
                        .unwrap_or_else(|| panic!("{what}: no typed check and no CRD for {key}"));
                    let errors = schema_errors(o, &schema.1, "");
                    assert!(errors.is_empty(), "{what}:\n{}", errors.join("\n"));
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} objects rendered");
}

#[test]
fn the_crd_schema_check_catches_what_the_api_server_refuses() {
    let schemas = crd_schemas();
    let mesh = &schemas
        .iter()
        .find(|(k, _)| k == "kilo.squat.ai/ClusterMesh")
        .unwrap()
        .1;
    let object = |cluster: Value| {
        serde_json::json!({"apiVersion": "kilo.squat.ai/v1alpha1", "kind": "ClusterMesh",
            "metadata": {"name": "m"}, "spec": {"clusters": [cluster]}})
    };
    let good = object(
        serde_json::json!({"name": "a", "local": true, "allowedNetworks": ["10.0.0.0/16"],
        "wireguardPort": 51820, "persistentKeepalive": 25}),
    );
    assert_eq!(schema_errors(&good, mesh, ""), Vec::<String>::new());
    for (bad, want) in [
        (
            serde_json::json!({"name": "a", "local": true, "allowedNetworks": [], "persistentKeepalive": 70000}),
            "maximum",
        ),
        (
            serde_json::json!({"name": "a", "local": true, "allowedNetworks": [], "wireguardPort": 0}),
            "minimum",
        ),
        (
            serde_json::json!({"name": "a", "local": true, "allowedNetwork": []}),
            "unknown field",
        ),
    ] {
        let errors = schema_errors(&object(bad.clone()), mesh, "");
        assert!(errors.iter().any(|e| e.contains(want)), "{bad}: {errors:?}");
    }
}

/// A binding to a ServiceAccount that is not where the install puts it grants nothing: every
/// ServiceAccount subject names one of the rendering (a missing namespace is `default`, where
/// `kubectl apply` puts it), except in the remote installs, which bind their own.
#[test]
fn every_binding_names_a_service_account_of_the_install() {
    for (dir, objects) in renderings() {
        let accounts: Vec<(String, String)> = objects
            .iter()
            .filter(|o| o["kind"] == "ServiceAccount")
            .map(|o| {
                (
                    o["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or("default")
                        .to_string(),
                    o["metadata"]["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        for b in objects
            .iter()
            .filter(|o| o["kind"] == "RoleBinding" || o["kind"] == "ClusterRoleBinding")
        {
            for s in b["subjects"].as_array().unwrap() {
                if s["kind"] != "ServiceAccount" {
                    continue;
                }
                let key = (
                    s["namespace"].as_str().unwrap_or("").to_string(),
                    s["name"].as_str().unwrap().to_string(),
                );
                assert!(
                    accounts.contains(&key),
                    "{dir}: {} {} binds {key:?}, which the install does not create (it has {accounts:?})",
                    b["kind"],
                    b["metadata"]["name"]
                );
            }
        }
    }
}

/// The workloads of a rendering: Deployments and StatefulSets.
fn is_workload(o: &&Value) -> bool {
    o["kind"] == "Deployment" || o["kind"] == "StatefulSet"
}

#[test]
fn every_container_runs_locked_down_with_probes() {
    let mut stateful = 0;
    for (dir, objects) in renderings() {
        for d in objects.iter().filter(is_workload) {
            let what = format!(
                "{dir}: {} {}",
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"]
            );
            let pod = &d["spec"]["template"]["spec"];
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{what}");
            assert_eq!(
                pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
                "{what}"
            );
            for c in pod["containers"].as_array().unwrap() {
                let sc = &c["securityContext"];
                assert_eq!(sc["allowPrivilegeEscalation"], false, "{what}");
                assert_eq!(sc["readOnlyRootFilesystem"], true, "{what}");
                assert_eq!(
                    sc["capabilities"]["drop"],
                    serde_json::json!(["ALL"]),
                    "{what}"
                );
                assert!(
                    c["resources"]["requests"].is_object(),
                    "{what}: no requests"
                );
                assert!(
                    c["resources"]["limits"]["memory"].is_string(),
                    "{what}: no memory limit"
                );
                for probe in ["readinessProbe", "livenessProbe"] {
                    let path = c[probe]["httpGet"]["path"].as_str().unwrap_or_default();
                    assert!(
                        path == "/healthz" || path == "/readyz",
                        "{what}: {probe} {path:?}"
                    );
                }
            }
            // Every mounted ConfigMap or claim is part of the install (or optional).
            for v in pod["volumes"].as_array().unwrap() {
                if let Some(name) = v["configMap"]["name"].as_str() {
                    let ours = objects
                        .iter()
                        .any(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == name);
                    assert!(
                        ours || v["configMap"]["optional"] == true,
                        "{what}: ConfigMap {name}"
                    );
                }
                if let Some(name) = v["persistentVolumeClaim"]["claimName"].as_str() {
                    assert!(
                        objects.iter().any(|o| o["kind"] == "PersistentVolumeClaim"
                            && o["metadata"]["name"] == name),
                        "{what}: claim {name}"
                    );
                }
            }
            // Every mount is a volume of the pod or a claim of the StatefulSet's templates.
            let claims = d["spec"]["volumeClaimTemplates"].as_array();
            for c in pod["containers"].as_array().unwrap() {
                for m in c["volumeMounts"].as_array().into_iter().flatten() {
                    let name = &m["name"];
                    let volume = pod["volumes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|v| &v["name"] == name);
                    let claim = claims
                        .into_iter()
                        .flatten()
                        .any(|t| &t["metadata"]["name"] == name);
                    assert!(
                        volume ^ claim,
                        "{what}: mount {name}: volume {volume}, claim {claim}"
                    );
                }
            }
            if d["kind"] == "StatefulSet" {
                stateful += 1;
                // Its governing Service is headless and part of the install.
                let service = d["spec"]["serviceName"].as_str().unwrap();
                assert!(
                    objects.iter().any(|o| o["kind"] == "Service"
                        && o["metadata"]["name"] == service
                        && o["spec"]["clusterIP"] == "None"),
                    "{what}: serviceName {service} is no headless Service of the install"
                );
                assert_eq!(
                    d["spec"]["updateStrategy"]["type"], "RollingUpdate",
                    "{what}"
                );
            }
        }
    }
    assert!(stateful > 0, "no StatefulSet rendered");
}

/// Each workload's serve config (the `serve:` block of the config file in the ConfigMap it
/// mounts), with the workload and its rendering's name.
fn serve_configs(dir: &str, objects: &[Value]) -> Vec<(String, Value, Value)> {
    let mut out = Vec::new();
    for w in objects.iter().filter(is_workload) {
        let pod = &w["spec"]["template"]["spec"];
        for v in pod["volumes"].as_array().unwrap() {
            let Some(name) = v["configMap"]["name"].as_str() else {
                continue;
            };
            let Some(text) = objects
                .iter()
                .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == name)
                .and_then(|cm| cm["data"]["config.yaml"].as_str())
            else {
                continue;
            };
            let config: Value = serde_yaml::from_str(text).unwrap();
            if config["serve"].is_object() {
                let what = format!(
                    "{dir}: {} {}",
                    w["kind"].as_str().unwrap(),
                    w["metadata"]["name"]
                );
                out.push((what, config["serve"].clone(), w.clone()));
            }
        }
    }
    out
}

/// The port of a listener address (`0.0.0.0:8080`, `[::]:8080`).
fn port_of(addr: &str) -> u16 {
    addr.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// Every config that finds its pkarr peers by DNS (`pkarrPeersDns`) names a headless Service
/// of its own install and namespace that selects its pods and publishes their addresses before
/// they are ready (a replica catches up from the others before it is ready), at the port the
/// container's `--http` listens on (a headless name resolves to the pods' own addresses); its
/// token file is key `token` of the mounted Secret `meshdns-pkarr-peer`. The iroh-relay
/// overlay is such a fleet: a StatefulSet of 3 started together, each replica with its own
/// claim for the data directory, ready on `/readyz`, drained one at a time.
#[test]
fn the_iroh_relay_overlay_is_a_fleet_that_finds_its_peers() {
    let relay = deploy().join("overlays/iroh-relay").display().to_string();
    let mut relay_checked = false;
    for (dir, objects) in renderings() {
        for (what, serve, w) in serve_configs(&dir, &objects) {
            let Some(names) = serve["pkarrPeersDns"].as_array() else {
                continue;
            };
            assert!(!names.is_empty(), "{what}");
            let namespace = w["metadata"]["namespace"].as_str().unwrap();
            let pod = &w["spec"]["template"];
            let container = &pod["spec"]["containers"][0];
            let http = port_of(serve["http"].as_str().expect("pkarrPeersDns needs http"));
            let http_port = container["ports"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["containerPort"] == http && p["protocol"] == "TCP")
                .unwrap_or_else(|| panic!("{what}: no container port {http} for --http"));
            for name in names {
                let name = name.as_str().unwrap();
                let (host, port) = name.rsplit_once(':').unwrap();
                assert_eq!(
                    port.parse::<u16>().unwrap(),
                    http,
                    "{what}: {name}: the peers listen on --http's port"
                );
                let (service, domain) = host.split_once('.').unwrap();
                assert_eq!(
                    domain,
                    format!("{namespace}.svc.cluster.local"),
                    "{what}: {name}: not a Service of the install's namespace"
                );
                let svc = objects
                    .iter()
                    .find(|o| {
                        o["kind"] == "Service"
                            && o["metadata"]["name"] == service
                            && o["metadata"]["namespace"] == namespace
                    })
                    .unwrap_or_else(|| panic!("{what}: {name}: no Service {service}"));
                assert_eq!(svc["spec"]["clusterIP"], "None", "{what}: {service}");
                assert_eq!(
                    svc["spec"]["publishNotReadyAddresses"], true,
                    "{what}: {service}: replicas find each other before they are ready"
                );
                for (k, v) in svc["spec"]["selector"].as_object().unwrap() {
                    assert_eq!(
                        &pod["metadata"]["labels"][k], v,
                        "{what}: {service} does not select the pods"
                    );
                }
                assert!(
                    svc["spec"]["ports"].as_array().unwrap().iter().any(|p| {
                        p["targetPort"] == http_port["name"] || p["targetPort"] == http
                    }),
                    "{what}: {service} has no port to --http"
                );
            }
            let token = serve["pkarrPeerTokenFile"]
                .as_str()
                .unwrap_or_else(|| panic!("{what}: peers without pkarrPeerTokenFile"));
            let (at, key) = token.rsplit_once('/').unwrap();
            assert_eq!(key, "token", "{what}");
            let mount = container["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["mountPath"] == at)
                .unwrap_or_else(|| panic!("{what}: nothing mounted at {at}"));
            let volume = pod["spec"]["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == mount["name"])
                .unwrap();
            assert_eq!(
                volume["secret"]["secretName"], "meshdns-pkarr-peer",
                "{what}: the token"
            );
            if dir != relay {
                continue;
            }
            relay_checked = true;
            assert_eq!(w["kind"], "StatefulSet", "{what}");
            assert_eq!(w["spec"]["replicas"], 3, "{what}");
            assert_eq!(w["spec"]["podManagementPolicy"], "Parallel", "{what}");
            assert_eq!(
                container["readinessProbe"]["httpGet"]["path"], "/readyz",
                "{what}: ready once caught up"
            );
            // The data directory is each replica's own claim.
            let data = serve["dataDir"].as_str().unwrap();
            let mount = container["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["mountPath"] == data)
                .unwrap_or_else(|| panic!("{what}: nothing mounted at {data}"));
            let claim = w["spec"]["volumeClaimTemplates"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["metadata"]["name"] == mount["name"])
                .unwrap_or_else(|| panic!("{what}: {data} is not a claim of each replica"));
            assert_eq!(
                claim["spec"]["accessModes"],
                serde_json::json!(["ReadWriteOnce"])
            );
            assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "1Gi");
            let pdb = objects
                .iter()
                .find(|o| o["kind"] == "PodDisruptionBudget")
                .unwrap();
            assert_eq!(pdb["spec"]["maxUnavailable"], 1, "{what}");
            for (k, v) in pdb["spec"]["selector"]["matchLabels"].as_object().unwrap() {
                assert_eq!(&pod["metadata"]["labels"][k], v, "{what}: the budget");
            }
        }
    }
    assert!(relay_checked, "{relay}: no config with pkarrPeersDns");
}

/// A workload serving pkarr publishes from more than one replica replicates them (or each
/// replica would answer with only the publishes it took), and one with ACME runs alone (each
/// replica would order its own certificate, and the CA's validation reach any of them).
#[test]
fn several_pkarr_replicas_replicate_and_acme_runs_alone() {
    for (dir, objects) in renderings() {
        for (what, serve, w) in serve_configs(&dir, &objects) {
            let replicas = w["spec"]["replicas"].as_u64().unwrap_or(1);
            if serve["acmeDomains"].is_array() {
                assert_eq!(replicas, 1, "{what}: ACME on {replicas} replicas");
            }
            if serve["pkarr"].is_array() && replicas > 1 {
                assert!(
                    serve["pkarrPeersDns"].is_array() || serve["pkarrPeers"].is_array(),
                    "{what}: {replicas} pkarr relays that do not replicate"
                );
            }
        }
    }
}

/// A `serve` container in the DHT (`--pkarr-dht`, the pkarr-dht component) binds a fixed UDP
/// port that it declares, and an egress policy that selects its pods lets it reach DHT nodes
/// (UDP to any address and port), DNS at any address (the cluster's resolver is a pod) over
/// UDP and TCP, and its peers' HTTP port.
#[test]
fn a_relay_in_the_dht_declares_its_port_and_may_reach_the_dht() {
    let mut checked = 0;
    for (dir, objects) in renderings() {
        for w in objects.iter().filter(is_workload) {
            let pod = &w["spec"]["template"];
            let container = &pod["spec"]["containers"][0];
            let args: Vec<&str> = container["args"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if !args.contains(&"--pkarr-dht") {
                continue;
            }
            let what = format!("{dir}: {}", w["metadata"]["name"]);
            let bind = args
                .iter()
                .find_map(|a| a.strip_prefix("--pkarr-dht-bind="))
                .unwrap_or_else(|| panic!("{what}: the DHT on a port of the crate's choosing"));
            let port = port_of(bind);
            assert!(
                container["ports"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| { p["containerPort"] == port && p["protocol"] == "UDP" }),
                "{what}: UDP {port} not declared"
            );
            let labels = &pod["metadata"]["labels"];
            let selects = |np: &&Value| {
                np["kind"] == "NetworkPolicy"
                    && np["spec"]["policyTypes"]
                        .as_array()
                        .is_some_and(|t| t.iter().any(|t| t == "Egress"))
                    && np["spec"]["podSelector"]["matchLabels"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .all(|(k, v)| &labels[k] == v)
            };
            for np in objects.iter().filter(selects) {
                let rules = np["spec"]["egress"].as_array().unwrap();
                let allows = |protocol: &str, port: Option<u16>, to: &dyn Fn(&Value) -> bool| {
                    rules.iter().any(|r| {
                        r["ports"].as_array().unwrap().iter().any(|p| {
                            p["protocol"] == protocol
                                && (p["port"].is_null() || port.is_some_and(|n| p["port"] == n))
                        }) && (r["to"].is_null() || r["to"].as_array().unwrap().iter().any(to))
                    })
                };
                let v4 = |t: &Value| t["ipBlock"]["cidr"] == "0.0.0.0/0";
                let v6 = |t: &Value| t["ipBlock"]["cidr"] == "::/0";
                assert!(allows("UDP", None, &v4), "{what}: UDP out");
                assert!(allows("UDP", None, &v6), "{what}: UDP out over IPv6");
                for protocol in ["UDP", "TCP"] {
                    assert!(
                        allows(protocol, Some(53), &|_| false),
                        "{what}: DNS over {protocol} to any address, the cluster's resolver too"
                    );
                }
                let peers = |t: &Value| {
                    t["podSelector"]["matchLabels"]
                        .as_object()
                        .is_some_and(|m| m.iter().all(|(k, v)| &labels[k] == v))
                };
                for (_, serve, sw) in serve_configs(&dir, &objects) {
                    if sw["metadata"]["name"] == w["metadata"]["name"]
                        && serve["pkarrPeersDns"].is_array()
                    {
                        let http = port_of(serve["http"].as_str().unwrap());
                        assert!(allows("TCP", Some(http), &peers), "{what}: the peers");
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(
        checked > 0,
        "no rendering with the DHT and its egress policy"
    );
}

/// The files a workload mounts from Secrets, written under `root` at their mount paths: a
/// Secret in the rendering with its own data, the pkarr peers' token Secret the user makes
/// (`meshdns-pkarr-peer`) with a token, a TLS Secret made elsewhere (cert-manager's) with a
/// self-signed pair. Returns the mount paths, to find in a config file.
fn mounted_secrets(objects: &[Value], config_map: &str, root: &Path) -> Vec<String> {
    let mut mounts = Vec::new();
    let uses_config = |w: &&Value| {
        w["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .is_some_and(|v| v.iter().any(|v| v["configMap"]["name"] == config_map))
    };
    for workload in objects.iter().filter(uses_config) {
        let pod = &workload["spec"]["template"]["spec"];
        let volumes = pod["volumes"].as_array().unwrap();
        for container in pod["containers"].as_array().unwrap() {
            for mount in container["volumeMounts"].as_array().into_iter().flatten() {
                // A mount of no volume is a StatefulSet's claim.
                let Some(volume) = volumes.iter().find(|v| v["name"] == mount["name"]) else {
                    continue;
                };
                let Some(secret) = volume["secret"]["secretName"].as_str() else {
                    continue;
                };
                let path = mount["mountPath"].as_str().unwrap().to_string();
                let dir = root.join(path.trim_start_matches('/'));
                std::fs::create_dir_all(&dir).unwrap();
                let shipped = objects
                    .iter()
                    .find(|o| o["kind"] == "Secret" && o["metadata"]["name"] == secret);
                match shipped {
                    Some(s) => {
                        for (key, value) in s["stringData"].as_object().into_iter().flatten() {
                            std::fs::write(dir.join(key), value.as_str().unwrap()).unwrap();
                        }
                        for (key, value) in s["data"].as_object().into_iter().flatten() {
                            let bytes = data_encoding::BASE64
                                .decode(value.as_str().unwrap().as_bytes())
                                .unwrap();
                            std::fs::write(dir.join(key), bytes).unwrap();
                        }
                    }
                    // The peers' token, which the iroh relay guide has you make.
                    None if secret == "meshdns-pkarr-peer" => {
                        std::fs::write(dir.join("token"), "0123456789abcdef".repeat(4)).unwrap();
                    }
                    None => {
                        let cert =
                            rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
                        std::fs::write(dir.join("tls.crt"), cert.cert.pem()).unwrap();
                        std::fs::write(dir.join("tls.key"), cert.signing_key.serialize_pem())
                            .unwrap();
                    }
                }
                mounts.push(path);
            }
        }
    }
    mounts
}

/// The flags a `serve` container that mounts ConfigMap `config_map` passes beside its config
/// file (a component adds some), to check with it.
fn serve_flags(objects: &[Value], config_map: &str) -> Vec<String> {
    let mut flags = Vec::new();
    for w in objects.iter().filter(is_workload) {
        let pod = &w["spec"]["template"]["spec"];
        let mounts = pod["volumes"]
            .as_array()
            .is_some_and(|v| v.iter().any(|v| v["configMap"]["name"] == config_map));
        let args: Vec<&str> = pod["containers"][0]["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if !mounts || args.first() != Some(&"serve") {
            continue;
        }
        let mut rest = args[1..].iter();
        while let Some(a) = rest.next() {
            match *a {
                "--config" | "-c" => {
                    rest.next();
                }
                a => flags.push(a.to_string()),
            }
        }
    }
    flags
}

/// Each config file, checked as `serve` would start with it (with the flags its `serve`
/// container adds): the TSIG key and certificate
/// files it names are read, from the Secrets its workload mounts (at a temporary root).
#[test]
fn every_shipped_config_file_is_one_meshdns_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for (source, objects) in renderings() {
        for cm in objects.iter().filter(|o| o["kind"] == "ConfigMap") {
            let Some(text) = cm["data"]["config.yaml"].as_str() else {
                continue;
            };
            let name = cm["metadata"]["name"].as_str().unwrap();
            let root = dir.path().join(format!("root-{checked}"));
            let mut text = text.to_string();
            for mount in mounted_secrets(&objects, name, &root) {
                let moved = format!("{}{mount}/", root.display());
                text = text.replace(&format!("{mount}/"), &moved);
            }
            let file = write(dir.path(), "config.yaml", &text);
            let out = bin()
                .args(["check", "--config-only", "-c", &file])
                .args(serve_flags(&objects, name))
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{source}: ConfigMap {}: {}",
                cm["metadata"]["name"],
                String::from_utf8_lossy(&out.stderr)
            );
            checked += 1;
        }
    }
    assert!(checked >= 6, "{checked}");
}

#[test]
fn the_crds_in_deploy_are_what_meshdns_crds_prints() {
    let printed = stdout_of(&["crds"]);
    let shipped = std::fs::read_to_string(deploy().join("crds/crds.yaml")).unwrap();
    assert!(
        printed == shipped,
        "deploy/crds/crds.yaml differs from `meshdns crds`: run `meshdns crds > deploy/crds/crds.yaml`"
    );
    let clustermesh = yaml_documents(
        &std::fs::read_to_string(deploy().join("crds/clustermesh/clustermesh.yaml")).unwrap(),
    );
    let printed_mesh: Vec<Value> = yaml_documents(&printed)
        .into_iter()
        .filter(|c| c["spec"]["names"]["kind"] == "ClusterMesh")
        .collect();
    assert_eq!(
        clustermesh, printed_mesh,
        "deploy/crds/clustermesh/clustermesh.yaml"
    );
}

/// The metric names a text names (PromQL expressions, a dashboard).
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("meshdns_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

/// The series names a `/metrics` page exports (histograms with their suffixes).
fn exported(page: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    for line in page.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            let (name, kind) = (parts.next().unwrap(), parts.next().unwrap_or(""));
            names.insert(name.to_string());
            if kind == "histogram" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
        }
    }
    names
}

/// Starts the real server (with the pkarr relay) and both controllers, scrapes each one's
/// /metrics, and fails on any metric the dashboard or the alerts name that none exports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_and_alerts_name_is_exported() {
    let monitoring = deploy().join("components/monitoring");
    // The dashboard is JSON Grafana can import: panels, each with queries.
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(monitoring.join("dashboard.json")).unwrap())
            .expect("dashboard.json is JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(!panels.is_empty());
    for p in panels {
        let targets = p["targets"].as_array().expect("targets");
        assert!(
            !targets.is_empty() && targets.iter().all(|t| t["expr"].is_string()),
            "panel {}",
            p["title"]
        );
    }
    let mut wanted =
        metric_names(&std::fs::read_to_string(monitoring.join("dashboard.json")).unwrap());
    wanted.extend(metric_names(
        &std::fs::read_to_string(monitoring.join("prometheusrule.yaml")).unwrap(),
    ));
    assert!(wanted.len() > 20, "{wanted:?}");

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let records = write(
        dir.path(),
        "records.json",
        r#"{"version":"v1alpha1","ip4":{"a.ts.net":["100.64.0.1"]}}"#,
    );
    let data_arg = data.display().to_string();
    let server = tokio::task::spawn_blocking(move || {
        let m = Meshdns::serve(&[
            "--records",
            &records,
            "--pkarr",
            "irohdns.example.org",
            "--data-dir",
            &data_arg,
            "--http",
            "127.0.0.1:0",
            // Transfers and a secondary zone (whose primary never answers), for their series.
            "--allow-transfer",
            "127.0.0.1",
            "--secondary",
            "secondary.example=127.0.0.1:9",
            // DoT with a certificate, for the TLS series.
            "--dot",
            "127.0.0.1:0",
            "--tls-self-signed",
        ]);
        dig(m.dns, &["a.ts.net", "A"]);
        m.get("/metrics").1
    })
    .await
    .unwrap();
    let mut have = exported(&server);

    let fake = meshdns_fakekube::FakeKube::start().await;
    let kubeconfig = write(dir.path(), "kubeconfig", &fake.kubeconfig("fake"));
    let config = write(
        dir.path(),
        "config.yaml",
        "iroh:\n  dnsZoneRef: {namespace: meshdns-system, name: connectors}\nmesh:\n  namespace: meshdns-system\n",
    );
    for controller in ["iroh", "mesh"] {
        let http = format!("127.0.0.1:{}", crate::controller::free_port());
        let child = crate::controller::spawn(&[
            controller,
            "--config",
            &config,
            "--kubeconfig",
            &kubeconfig,
            "--http",
            &http,
        ]);
        // Wait for the page to carry the controller's own gauges.
        let addr = http.parse().unwrap();
        let mut page = String::new();
        for _ in 0..200 {
            if let Ok(p) = std::panic::catch_unwind(|| http_get(addr, "/metrics").1) {
                page = p;
                if page.contains(&format!("meshdns_controller_{controller}_")) {
                    break;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        have.extend(exported(&page));
        crate::controller::stop(child).await;
    }
    let missing: Vec<&String> = wanted.iter().filter(|n| !have.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "named in deploy/components/monitoring but exported by nothing: {missing:?}\nexported: {have:?}"
    );
}

/// What the chart and kustomize legitimately differ in: Helm's own labels, the hash suffix of
/// generated ConfigMap names (each tool hashes the content its own way), and the order of
/// volumes and mounts.
fn normalized(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::String(s) => {
                for prefix in [
                    "meshdns-serve-config",
                    "meshdns-iroh-config",
                    "meshdns-mesh-config",
                ] {
                    if s.starts_with(&format!("{prefix}-")) {
                        *s = prefix.to_string();
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            Value::Object(o) => {
                // Lists keyed by name are sets to the API server; the tools order them apart.
                for key in ["volumes", "volumeMounts"] {
                    if let Some(list) = o.get_mut(key).and_then(Value::as_array_mut) {
                        list.sort_by(|a, b| a["name"].to_string().cmp(&b["name"].to_string()));
                    }
                }
                o.values_mut().for_each(walk)
            }
            _ => {}
        }
    }
    if let Some(labels) = v["metadata"]["labels"].as_object_mut() {
        labels.remove("app.kubernetes.io/managed-by");
        labels.remove("helm.sh/chart");
    }
    // No labels, an empty map and kustomize's `labels: null` are the same.
    if v["metadata"]["labels"]
        .as_object()
        .is_none_or(|l| l.is_empty())
    {
        v["metadata"].as_object_mut().unwrap().remove("labels");
    }
    walk(&mut v);
    numbers_as_floats(v)
}

fn keyed(objects: Vec<Value>) -> std::collections::BTreeMap<String, Value> {
    objects
        .into_iter()
        .map(normalized)
        .map(|o| {
            let key = format!(
                "{} {}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["namespace"].as_str().unwrap_or(""),
                o["metadata"]["name"].as_str().unwrap()
            );
            (key, o)
        })
        .collect()
}

fn helm(args: &[&str]) -> String {
    let out = Command::new("helm")
        .args(args)
        .output()
        .expect("helm must be installed to test deploy/helm (.ci/run installs it)");
    assert!(
        out.status.success(),
        "helm {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The chart renders, for each overlay's values (`ci/<overlay>.yaml` and the overlay's own
/// config file), exactly the objects `kubectl kustomize` renders for the overlay, with and
/// without monitoring; and `helm lint` passes.
#[test]
fn the_helm_chart_renders_what_each_overlay_renders() {
    let chart = deploy().join("helm/meshdns");
    let chart = chart.to_str().unwrap();
    helm(&["lint", "--strict", chart]);
    // Every overlay: a new one without chart values fails here.
    let mut overlays: Vec<String> = std::fs::read_dir(deploy().join("overlays"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    overlays.sort();
    assert!(overlays.len() >= 5, "{overlays:?}");
    for overlay in overlays.iter().map(String::as_str) {
        let dir = deploy().join("overlays").join(overlay);
        let objects = kustomize(&dir);
        let namespace = objects
            .iter()
            .find_map(|o| o["metadata"]["namespace"].as_str())
            .unwrap()
            .to_string();
        let config = dir.join("config.yaml").display().to_string();
        let values = format!("{chart}/ci/{overlay}.yaml");
        let mut args = vec![
            "template",
            "meshdns",
            chart,
            "--namespace",
            &namespace,
            "-f",
            &values,
        ];
        let files = [
            format!("serve.config={config}"),
            format!("controllerIroh.config={config}"),
            format!("controllerMesh.config={config}"),
        ];
        for f in &files {
            args.extend(["--set-file", f.as_str()]);
        }
        for monitoring in [false, true] {
            let mut args = args.clone();
            let (want, label) = if monitoring {
                args.extend(["--set", "monitoring.enabled=true"]);
                let with = renderings()
                    .into_iter()
                    .find(|(d, _)| d.ends_with(&format!("{overlay} + components/monitoring")))
                    .unwrap()
                    .1;
                (with, format!("{overlay} + monitoring"))
            } else {
                (objects.clone(), overlay.to_string())
            };
            let got = keyed(yaml_documents(&helm(&args)));
            let want = keyed(want);
            let only = |a: &std::collections::BTreeMap<String, Value>,
                        b: &std::collections::BTreeMap<String, Value>| {
                a.keys()
                    .filter(|k| !b.contains_key(*k))
                    .cloned()
                    .collect::<Vec<_>>()
            };
            assert!(
                got.len() == want.len() && only(&got, &want).is_empty(),
                "{label}: only in the chart: {:?}; only in kustomize: {:?}",
                only(&got, &want),
                only(&want, &got)
            );
            for (key, w) in &want {
                let g = &got[key];
                assert!(
                    g == w,
                    "{label}: {key} differs (kustomize -> helm):\n{}",
                    diff(w, g, "")
                );
            }
        }
    }
}

/// The chart README's `helm install … --create-namespace` command, rendered with the same
/// flags: no Namespace object, since Helm makes the namespace and refuses to adopt one the
/// chart renders.
#[test]
fn the_documented_helm_install_leaves_the_namespace_to_helm() {
    let readme = std::fs::read_to_string(deploy().join("helm/meshdns/README.md")).unwrap();
    let command: String = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.trim_end_matches('\\').trim())
        .collect::<Vec<_>>()
        .join(" ");
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(words[..2], ["helm", "install"], "{command}");
    assert!(words.contains(&"--create-namespace"), "{command}");
    // `helm template` takes install's flags but --create-namespace; paths are the repository's.
    let root = deploy().join("..");
    let args: Vec<String> = std::iter::once("template".to_string())
        .chain(
            words[2..]
                .iter()
                .filter(|w| **w != "--create-namespace")
                .map(|w| match w.split_once("deploy/") {
                    Some((before, after)) => {
                        format!("{before}{}/deploy/{after}", root.display())
                    }
                    None => w.to_string(),
                }),
        )
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let rendered = yaml_documents(&helm(&args));
    assert!(!rendered.is_empty());
    let kinds: Vec<&str> = rendered.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert!(!kinds.contains(&"Namespace"), "{kinds:?}");
}

/// Every alert the monitoring component ships has its row in `docs/operating.md`.
#[test]
fn every_shipped_alert_is_explained_in_operating_md() {
    let rules = std::fs::read_to_string(deploy().join("components/monitoring/prometheusrule.yaml"))
        .unwrap();
    let guide = std::fs::read_to_string(deploy().join("../docs/operating.md")).unwrap();
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(alerts.len() >= 10, "{alerts:?}");
    for alert in alerts {
        assert!(
            guide.contains(&format!("| `{alert}` |")),
            "docs/operating.md has no row for {alert}"
        );
    }
}

/// `docs/transfers.md`'s hidden-primary steps finish: every zone the secondaries overlay
/// asks for is a DNSZone or an update zone the hidden-primary overlay ships (a secondary is
/// ready only once each of its zones is transferred).
#[test]
fn the_secondaries_ask_only_for_zones_the_hidden_primary_serves() {
    let primary = kustomize(&deploy().join("overlays/hidden-primary"));
    let mut served: Vec<String> = primary
        .iter()
        .filter(|o| o["kind"] == "DNSZone")
        .map(|o| format!("{}.", o["spec"]["domainName"].as_str().unwrap()))
        .collect();
    let primary_config: Value = serde_yaml::from_str(
        primary
            .iter()
            .find_map(|o| o["data"]["config.yaml"].as_str())
            .unwrap(),
    )
    .unwrap();
    served.extend(
        primary_config["serve"]["updateZones"]
            .as_array()
            .unwrap()
            .iter()
            .map(|z| z.as_str().unwrap().to_string()),
    );
    let secondaries = kustomize(&deploy().join("overlays/secondaries"));
    let config = secondaries
        .iter()
        .find_map(|o| o["data"]["config.yaml"].as_str())
        .unwrap();
    let config: Value = serde_yaml::from_str(config).unwrap();
    let asked: Vec<&str> = config["serve"]["secondaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().split('=').next().unwrap())
        .collect();
    assert!(!asked.is_empty());
    for zone in asked {
        let zone = format!("{}.", zone.trim_end_matches('.'));
        assert!(served.contains(&zone), "{zone} is not served: {served:?}");
    }
}

/// The alerts fire when they should and not otherwise: `promtool test rules` (Debian's
/// `prometheus`) on `components/monitoring/alerts-test.yaml`, against the PrometheusRule's
/// groups written out as a rules file.
#[test]
fn the_alerts_pass_their_promtool_tests() {
    let monitoring = deploy().join("components/monitoring");
    let rule: Value = serde_yaml::from_str(
        &std::fs::read_to_string(monitoring.join("prometheusrule.yaml")).unwrap(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rules.yaml"),
        serde_yaml::to_string(&rule["spec"]).unwrap(),
    )
    .unwrap();
    std::fs::copy(
        monitoring.join("alerts-test.yaml"),
        dir.path().join("alerts-test.yaml"),
    )
    .unwrap();
    let out = Command::new("promtool")
        .args(["test", "rules", "alerts-test.yaml"])
        .current_dir(dir.path())
        .output()
        .expect("promtool must be installed (Debian's prometheus; scripts/test installs it)");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
