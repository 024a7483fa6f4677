//! Opt-in: the iroh controller against a real cluster.
//!
//! ```sh
//! MESHDNS_E2E_KUBECONFIG=~/.kube/config cargo test -p meshdns-kube --test e2e -- --ignored
//! ```
//!
//! It installs the CRDs from `meshdns crds` (server-side apply), works in a fresh namespace,
//! and deletes it at the end. Without the variable the test fails rather than passing.

#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use meshdns_iroh::connector::IrohSettings;
use meshdns_kube::controllers::iroh::{IrohOptions, SourceCluster, run};
use meshdns_kube::metrics::Metrics;
use meshdns_objects::{Connector, ConnectorClass, DNSRecordSet};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const HEX: &str = "f120d52e42bfcee750508baf28900acac85ad3f397ab4bb653b32be505c32d39";
const Z32: &str = "6ropkm1nz98qqwnotqz1tryk3mrfiw9u16iwzp1usci6kbqdfwho";

async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    mut f: impl FnMut() -> F,
) -> Option<T> {
    for _ in 0..150 {
        if let Some(v) = f().await {
            return Some(v);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

#[tokio::test]
#[ignore = "needs a real cluster: set MESHDNS_E2E_KUBECONFIG and pass --ignored"]
async fn iroh_controller_on_a_real_cluster() {
    let path = std::env::var("MESHDNS_E2E_KUBECONFIG")
        .expect("MESHDNS_E2E_KUBECONFIG must name a kubeconfig");
    let kc = Kubeconfig::read_from(&path).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();

    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for doc in serde_yaml::Deserializer::from_str(meshdns_objects::crds()) {
        let crd: CustomResourceDefinition = serde::Deserialize::deserialize(doc).unwrap();
        let name = crd.metadata.name.clone().unwrap();
        crds.patch(
            &name,
            &PatchParams::apply("meshdns-e2e").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(3)).await; // CRDs become established

    let ns = format!("meshdns-e2e-{}", std::process::id());
    let namespaces = Api::<Namespace>::all(client.clone());
    namespaces
        .patch(
            &ns,
            &PatchParams::apply("meshdns-e2e"),
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            ),
        )
        .await
        .unwrap();
    let classes = Api::<ConnectorClass>::all(client.clone());
    classes
        .patch("meshdns-e2e", &PatchParams::apply("meshdns-e2e"), &Patch::Apply(json!({
            "apiVersion": "networking.datumapis.com/v1alpha1", "kind": "ConnectorClass",
            "metadata": {"name": "meshdns-e2e"}, "spec": {"controllerName": "networking.datumapis.com/datum-connect"}})))
        .await
        .unwrap();
    let connectors = Api::<Connector>::namespaced(client.clone(), &ns);
    connectors
        .patch(
            "laptop",
            &PatchParams::apply("meshdns-e2e"),
            &Patch::Apply(json!({
            "apiVersion": "networking.datumapis.com/v1alpha1", "kind": "Connector",
            "metadata": {"name": "laptop"}, "spec": {"connectorClassName": "meshdns-e2e"}})),
        )
        .await
        .unwrap();
    connectors
        .patch_status(
            "laptop",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"connectionDetails": {
            "type": "PublicKey", "publicKey": {"id": HEX, "homeRelay": "https://relay.example.com",
            "addresses": [{"address": "192.0.2.1", "port": 8080}]}}}})),
        )
        .await
        .unwrap();

    let settings = IrohSettings {
        zone_namespace: ns.clone(),
        zone_name: "zone".into(),
        record_prefix: "_iroh".into(),
        record_suffix: String::new(),
        ttl: 5,
    };
    let stop = CancellationToken::new();
    tokio::spawn(run(
        vec![SourceCluster {
            name: "e2e".into(),
            client: client.clone(),
        }],
        client.clone(),
        IrohOptions::new(settings),
        Arc::new(Metrics::new("iroh")),
        stop.clone(),
    ));
    let sets = Api::<DNSRecordSet>::namespaced(client.clone(), &ns);
    let name = format!("iroh-{Z32}");
    let rs = eventually(|| async { sets.get_opt(&name).await.ok().flatten() })
        .await
        .expect("record set published");
    assert_eq!(rs.spec.records.len(), 2);
    connectors
        .delete("laptop", &DeleteParams::default())
        .await
        .unwrap();
    let gone = eventually(|| async {
        (sets.get_opt(&name).await.ok()?.is_none()
            && connectors.get_opt("laptop").await.ok()?.is_none())
        .then_some(())
    })
    .await;
    stop.cancel();
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    let _ = classes
        .delete("meshdns-e2e", &DeleteParams::default())
        .await;
    assert!(gone.is_some(), "record released and Connector deleted");
}
