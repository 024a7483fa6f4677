//! `meshdns serve --kubernetes`: DNSZones and DNSRecordSets read from a cluster, handed to the
//! records watcher as a [`ManifestFeed`] (the same reading as `serve --manifests`).
//!
//! Two reflectors keep the objects; after both have listed once, and after every change
//! (coalesced over 50 ms), the whole set is handed over and the watcher is nudged, so a change
//! is served within a fraction of a second.

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt as _, StreamExt};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Resource};
use meshdns_objects::{DNS_API_VERSION, DNSRecordSet, DNSZone};
use meshdns_sources::manifests::ManifestFeed;
use serde::Serialize;
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

fn as_object<K: Serialize>(o: &K, kind: &str) -> Option<serde_json::Value> {
    let mut v = serde_json::to_value(o).ok()?;
    // List items may lack their type fields; the reading needs them.
    v["apiVersion"] = DNS_API_VERSION.into();
    v["kind"] = kind.into();
    Some(v)
}

/// Reflects DNSZones and DNSRecordSets (of `namespace`, or all) into `feed` until `shutdown`,
/// calling `nudge` after each hand-over.
pub async fn reflect(
    client: Client,
    namespace: Option<String>,
    feed: Arc<ManifestFeed>,
    nudge: impl Fn() + Send + Sync + 'static,
    shutdown: CancellationToken,
) {
    let ns = namespace.as_deref();
    let (zones, zones_writer) = reflector::store::<DNSZone>();
    let (sets, sets_writer) = reflector::store::<DNSRecordSet>();
    let zone_events = watcher(api::<DNSZone>(&client, ns), watcher::Config::default())
        .default_backoff()
        .reflect(zones_writer)
        .map(|e| e.map(|_| ()));
    let set_events = watcher(api::<DNSRecordSet>(&client, ns), watcher::Config::default())
        .default_backoff()
        .reflect(sets_writer)
        .map(|e| e.map(|_| ()));
    let mut events = futures::stream::select(zone_events, set_events).boxed();
    let mut synced = false;
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => return,
            e = events.next() => e,
        };
        match next {
            None => return,
            Some(Err(e)) => {
                warn!(error = %e, "watching DNSZones/DNSRecordSets");
                continue;
            }
            Some(Ok(())) => {}
        }
        if !synced {
            if zones.wait_until_ready().now_or_never().is_none()
                || sets.wait_until_ready().now_or_never().is_none()
            {
                continue;
            }
            synced = true;
            info!("DNSZones and DNSRecordSets listed");
        }
        // Coalesce a burst of changes into one hand-over.
        let deadline = tokio::time::sleep(Duration::from_millis(50));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                e = events.next() => match e {
                    Some(Ok(())) => {}
                    Some(Err(e)) => warn!(error = %e, "watching DNSZones/DNSRecordSets"),
                    None => return,
                },
            }
        }
        let mut objects: Vec<serde_json::Value> = zones
            .state()
            .iter()
            .filter_map(|z| as_object(&**z, "DNSZone"))
            .collect();
        objects.extend(
            sets.state()
                .iter()
                .filter_map(|s| as_object(&**s, "DNSRecordSet")),
        );
        feed.set(objects);
        nudge();
    }
}
