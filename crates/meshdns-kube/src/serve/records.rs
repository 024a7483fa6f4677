//! `meshdns serve --kubernetes`: DNSZones and DNSRecordSets read from a cluster, with the
//! Services, EndpointSlices and Ingresses `--kube-source` names, handed to the records watcher
//! as a [`ManifestFeed`] (the same reading as `serve --manifests`).
//!
//! A reflector per kind keeps the objects; after every one has listed once, and after every change
//! (coalesced over 50 ms), the whole set is handed over and the watcher is nudged, so a change
//! is served within a fraction of a second.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt as _, StreamExt};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Resource};
use meshdns_objects::core::{EndpointSlice, Ingress, Service};
use meshdns_objects::{DNS_API_VERSION, DNSRecordSet, DNSZone};
use meshdns_sources::cluster::Kind;
use meshdns_sources::manifests::ManifestFeed;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Appends a reflected kind's objects to a list.
type Lister = Box<dyn Fn(&mut Vec<serde_json::Value>) + Send>;

/// One kind reflected: its watch events, whether it has listed once, and its objects as the
/// reading takes them (with `apiVersion` and `kind`, which list items may lack).
struct Reflected {
    events: futures::stream::BoxStream<'static, Result<(), watcher::Error>>,
    listed: Box<dyn Fn() -> bool + Send>,
    objects: Lister,
}

fn reflected<K>(api: Api<K>, api_version: &'static str, kind: &'static str) -> Reflected
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (store, writer) = reflector::store::<K>();
    let events = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .map(|e| e.map(|_| ()))
        .boxed();
    let ready = store.clone();
    Reflected {
        events,
        listed: Box::new(move || ready.wait_until_ready().now_or_never().is_some()),
        objects: Box::new(move |out| {
            out.extend(store.state().iter().filter_map(|o| {
                let mut v = serde_json::to_value(&**o).ok()?;
                v["apiVersion"] = api_version.into();
                v["kind"] = kind.into();
                Some(v)
            }))
        }),
    }
}

/// Reflects DNSZones and DNSRecordSets, and the cluster's objects of `kinds` (Services with
/// their EndpointSlices, Ingresses), of `namespace` or all, into `feed` until `shutdown`,
/// calling `nudge` after each hand-over.
pub async fn reflect(
    client: Client,
    namespace: Option<String>,
    kinds: BTreeSet<Kind>,
    feed: Arc<ManifestFeed>,
    nudge: impl Fn() + Send + Sync + 'static,
    shutdown: CancellationToken,
) {
    let ns = namespace.as_deref();
    let mut kinds_read = vec![
        reflected(api::<DNSZone>(&client, ns), DNS_API_VERSION, "DNSZone"),
        reflected(
            api::<DNSRecordSet>(&client, ns),
            DNS_API_VERSION,
            "DNSRecordSet",
        ),
    ];
    if kinds.contains(&Kind::Service) {
        kinds_read.push(reflected(api::<Service>(&client, ns), "v1", "Service"));
        kinds_read.push(reflected(
            api::<EndpointSlice>(&client, ns),
            "discovery.k8s.io/v1",
            "EndpointSlice",
        ));
    }
    if kinds.contains(&Kind::Ingress) {
        kinds_read.push(reflected(
            api::<Ingress>(&client, ns),
            "networking.k8s.io/v1",
            "Ingress",
        ));
    }
    let mut readers = Vec::with_capacity(kinds_read.len());
    let mut streams = Vec::with_capacity(kinds_read.len());
    for r in kinds_read {
        streams.push(r.events);
        readers.push((r.listed, r.objects));
    }
    let mut events = futures::stream::select_all(streams);
    let mut synced = false;
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => return,
            e = events.next() => e,
        };
        match next {
            None => return,
            Some(Err(e)) => {
                warn!(error = %e, "watching the objects served");
                continue;
            }
            Some(Ok(())) => {}
        }
        if !synced {
            if !readers.iter().all(|(listed, _)| listed()) {
                continue;
            }
            synced = true;
            info!(kinds = readers.len(), "objects served listed");
        }
        // Coalesce a burst of changes into one hand-over.
        let deadline = tokio::time::sleep(Duration::from_millis(50));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                e = events.next() => match e {
                    Some(Ok(())) => {}
                    Some(Err(e)) => warn!(error = %e, "watching the objects served"),
                    None => return,
                },
            }
        }
        let mut objects = Vec::new();
        for (_, list) in &readers {
            list(&mut objects);
        }
        feed.set(objects);
        nudge();
    }
}
