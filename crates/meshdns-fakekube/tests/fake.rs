//! The fake API server behaves as kube-rs expects of a real one.

#![allow(missing_docs)]

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use meshdns_fakekube::FakeKube;
use serde_json::json;

fn cm(name: &str, labels: serde_json::Value, data: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "ns", "labels": labels}, "data": data})
}

#[tokio::test]
async fn crud_selectors_apply_and_finalizers() {
    let fake = FakeKube::start().await;
    let api: Api<ConfigMap> = Api::namespaced(fake.client(), "ns");
    let a: ConfigMap =
        serde_json::from_value(cm("a", json!({"team": "x"}), json!({"k": "1"}))).unwrap();
    let created = api.create(&PostParams::default(), &a).await.unwrap();
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    assert!(
        api.create(&PostParams::default(), &a).await.is_err(),
        "AlreadyExists"
    );
    fake.insert(cm("b", json!({"team": "y"}), json!({})));
    let listed = api
        .list(&ListParams::default().labels("team=x"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(
        api.list(&ListParams::default().labels("team"))
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    assert_eq!(
        api.list(&ListParams::default().labels("team!=x"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    assert!(api.get("nope").await.is_err());

    // Server-side apply: a manager's dropped label goes, another manager's stays.
    let pp = PatchParams::apply("me").force();
    let body = cm("a", json!({"mine": "1", "gone": "soon"}), json!({"k": "2"}));
    api.patch("a", &pp, &Patch::Apply(&body)).await.unwrap();
    let body = cm("a", json!({"mine": "1"}), json!({"k": "2"}));
    let rv_before = {
        let got = api.patch("a", &pp, &Patch::Apply(&body)).await.unwrap();
        got.metadata.resource_version.unwrap()
    };
    let got = api.get("a").await.unwrap();
    let labels = got.metadata.labels.unwrap();
    assert_eq!(labels.get("team").map(String::as_str), Some("x"));
    assert_eq!(labels.get("mine").map(String::as_str), Some("1"));
    assert!(!labels.contains_key("gone"));
    // Applying the same thing again changes nothing: no new resourceVersion.
    let again = api.patch("a", &pp, &Patch::Apply(&body)).await.unwrap();
    assert_eq!(again.metadata.resource_version.unwrap(), rv_before);

    // Finalizers hold a deleted object until they are removed.
    let fin = json!({"metadata": {"finalizers": ["x/y"]}});
    api.patch("a", &PatchParams::default(), &Patch::Merge(&fin))
        .await
        .unwrap();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let held = api.get("a").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    let clear = json!({"metadata": {"finalizers": null}});
    api.patch("a", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    assert!(
        api.get("a").await.is_err(),
        "gone once the last finalizer is removed"
    );

    // Injected faults, then recovery.
    fake.fail("GET", "/configmaps/b", 500, 1);
    assert!(api.get("b").await.is_err());
    assert!(api.get("b").await.is_ok());
    assert!(
        fake.writes()
            .iter()
            .any(|r| r.method == "PATCH" && r.content_type.starts_with("application/apply-patch"))
    );
}

#[tokio::test]
async fn watchers_see_changes() {
    let fake = FakeKube::start().await;
    fake.insert(cm("first", json!({}), json!({})));
    let api: Api<ConfigMap> = Api::namespaced(fake.client(), "ns");
    let mut stream = watcher(api, watcher::Config::default())
        .applied_objects()
        .boxed();
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("first"));
    fake.insert(cm("second", json!({}), json!({})));
    let second = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(second.metadata.name.as_deref(), Some("second"));
}
