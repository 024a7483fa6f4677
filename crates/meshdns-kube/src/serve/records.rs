//! `meshdns serve --kubernetes`: DNSZones and DNSRecordSets read from a cluster, with the kinds
//! `--kube-source` names (Services with the EndpointSlices of headless ones, Ingresses,
//! Gateways and their routes, DNSEndpoints), handed to the records watcher as a
//! [`ManifestFeed`] (the same reading as `serve --manifests`).
//!
//! A reflector per kind keeps the objects; after every one has listed once, and after every change
//! (coalesced over 50 ms), the whole set is handed over and the watcher is nudged, so a change
//! is served within a fraction of a second.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt as _, StreamExt};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Resource};
use meshdns_objects::core::{EndpointSlice, Ingress, Service};
use meshdns_objects::gateway::{
    DNSENDPOINT_API_VERSION, DNSEndpoint, GATEWAY_API_VERSION, GRPCRoute, Gateway, HTTPRoute,
    TLSRoute,
};
use meshdns_objects::{DNS_API_VERSION, DNSRecordSet, DNSZone};
use meshdns_sources::cluster::Kind;
use meshdns_sources::manifests::{Manifest, ManifestFeed};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

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
type Lister = Box<dyn FnMut(&mut Vec<Manifest>) + Send>;

/// One kind reflected: its name, its watch events, whether it has listed once, and its
/// objects as the reading takes them (with `apiVersion` and `kind`, which list items may
/// lack; without `managedFields`, which nothing reads).
struct Reflected {
    kind: &'static str,
    events: futures::stream::BoxStream<'static, Result<(), watcher::Error>>,
    listed: Box<dyn Fn() -> bool + Send>,
    objects: Lister,
}

fn reflected<K>(
    api: Api<K>,
    config: watcher::Config,
    api_version: &'static str,
    kind: &'static str,
) -> Reflected
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (store, writer) = reflector::store::<K>();
    let events = watcher(api, config)
        .default_backoff()
        .modify(|o| o.meta_mut().managed_fields = None)
        .reflect(writer)
        .map(|e| e.map(|_| ()))
        .boxed();
    let ready = store.clone();
    // Each object as last handed over, by uid, with its resourceVersion: an unchanged object is
    // handed over again as the same allocation, not serialized again (under churn a hand-over
    // of tens of thousands of objects carries a few new ones).
    let mut handed: HashMap<String, (String, Manifest)> = HashMap::new();
    Reflected {
        kind,
        events,
        listed: Box::new(move || ready.wait_until_ready().now_or_never().is_some()),
        objects: Box::new(move |out| {
            let state = store.state();
            let mut now = HashMap::with_capacity(state.len());
            for o in &state {
                let meta = o.meta();
                let key = meta.uid.clone().unwrap_or_else(|| {
                    format!(
                        "{}/{}",
                        meta.namespace.as_deref().unwrap_or(""),
                        meta.name.as_deref().unwrap_or("")
                    )
                });
                let version = meta.resource_version.clone().unwrap_or_default();
                let kept = handed
                    .remove(&key)
                    .filter(|(v, _)| !version.is_empty() && *v == version);
                let manifest = match kept {
                    Some((_, m)) => m,
                    None => {
                        let Ok(mut v) = serde_json::to_value(&**o) else {
                            continue;
                        };
                        v["apiVersion"] = api_version.into();
                        v["kind"] = kind.into();
                        Manifest::new(v)
                    }
                };
                out.push(manifest.clone());
                now.insert(key, (version, manifest));
            }
            handed = now;
        }),
    }
}

/// The kinds read: DNSZones and DNSRecordSets always, and those `kinds` names (Services with
/// the EndpointSlices of headless Services, Ingresses, Gateways with the routes named).
fn kinds_read(client: &Client, ns: Option<&str>, kinds: &BTreeSet<Kind>) -> Vec<Reflected> {
    let all = watcher::Config::default;
    let mut out = vec![
        reflected(
            api::<DNSZone>(client, ns),
            all(),
            DNS_API_VERSION,
            "DNSZone",
        ),
        reflected(
            api::<DNSRecordSet>(client, ns),
            all(),
            DNS_API_VERSION,
            "DNSRecordSet",
        ),
    ];
    if kinds.contains(&Kind::Service) {
        out.push(reflected(
            api::<Service>(client, ns),
            all(),
            "v1",
            "Service",
        ));
        // Only headless Services' endpoints are read: the EndpointSlice controller labels
        // their slices, and every other slice's churn (each Pod's readiness) is not watched.
        let headless = all().labels("service.kubernetes.io/headless");
        let slices = api::<EndpointSlice>(client, ns);
        out.push(reflected(
            slices,
            headless,
            "discovery.k8s.io/v1",
            "EndpointSlice",
        ));
    }
    if kinds.contains(&Kind::Ingress) {
        let ingresses = api::<Ingress>(client, ns);
        out.push(reflected(
            ingresses,
            all(),
            "networking.k8s.io/v1",
            "Ingress",
        ));
    }
    let routes = [Kind::HttpRoute, Kind::GrpcRoute, Kind::TlsRoute];
    if routes.iter().any(|k| kinds.contains(k)) {
        let gateways = api::<Gateway>(client, ns);
        out.push(reflected(gateways, all(), GATEWAY_API_VERSION, "Gateway"));
    }
    if kinds.contains(&Kind::HttpRoute) {
        let api = api::<HTTPRoute>(client, ns);
        out.push(reflected(api, all(), GATEWAY_API_VERSION, "HTTPRoute"));
    }
    if kinds.contains(&Kind::GrpcRoute) {
        let api = api::<GRPCRoute>(client, ns);
        out.push(reflected(api, all(), GATEWAY_API_VERSION, "GRPCRoute"));
    }
    if kinds.contains(&Kind::TlsRoute) {
        let api = api::<TLSRoute>(client, ns);
        out.push(reflected(api, all(), GATEWAY_API_VERSION, "TLSRoute"));
    }
    if kinds.contains(&Kind::DnsEndpoint) {
        let api = api::<DNSEndpoint>(client, ns);
        out.push(reflected(
            api,
            all(),
            DNSENDPOINT_API_VERSION,
            "DNSEndpoint",
        ));
    }
    out
}

/// Whether a watch error says the kind cannot be listed at all (not allowed: 403; not served,
/// its CRD missing: 404), rather than a passing fault the watcher retries.
fn cannot_list(e: &watcher::Error) -> Option<u16> {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
            if status.code == 403 || status.code == 404 =>
        {
            Some(status.code)
        }
        _ => None,
    }
}

/// Reflects DNSZones and DNSRecordSets, and the cluster's objects of `kinds`, of `namespace`
/// or all, into `feed` until `shutdown`, calling `nudge` after each hand-over. A kind the API
/// server will not list (403, or 404: its CRD is not installed) is logged as an error naming
/// it and counts as listed with no objects, so the others are served; its watch keeps
/// retrying, and its objects are served once it lists.
pub async fn reflect(
    client: Client,
    namespace: Option<String>,
    kinds: BTreeSet<Kind>,
    feed: Arc<ManifestFeed>,
    nudge: impl Fn() + Send + Sync + 'static,
    shutdown: CancellationToken,
) {
    let read = kinds_read(&client, namespace.as_deref(), &kinds);
    let mut readers = Vec::with_capacity(read.len());
    let mut streams = Vec::with_capacity(read.len());
    for (i, r) in read.into_iter().enumerate() {
        streams.push(r.events.map(move |e| (i, e)).boxed());
        readers.push((r.kind, r.listed, r.objects));
    }
    let mut unlistable = vec![false; readers.len()];
    let mut events = futures::stream::select_all(streams);
    let mut synced = false;
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => return,
            e = events.next() => e,
        };
        let Some((i, event)) = next else { return };
        match event {
            Err(e) => {
                match cannot_list(&e) {
                    Some(code) if !unlistable[i] => {
                        unlistable[i] = true;
                        error!(kind = readers[i].0, code, error = %e,
                            "cannot list this kind (RBAC, or its CRD not installed): serving the others");
                    }
                    Some(_) => {}
                    None => warn!(kind = readers[i].0, error = %e, "watching the objects served"),
                }
                if synced || !unlistable[i] {
                    continue;
                }
            }
            Ok(()) => unlistable[i] = false,
        }
        if !synced {
            let all_listed = readers
                .iter()
                .zip(&unlistable)
                .all(|((_, listed, _), gave_up)| *gave_up || listed());
            if !all_listed {
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
                    Some((_, Ok(()))) => {}
                    Some((j, Err(e))) => warn!(kind = readers[j].0, error = %e, "watching the objects served"),
                    None => return,
                },
            }
        }
        let mut objects = Vec::new();
        for (_, _, list) in &mut readers {
            list(&mut objects);
        }
        feed.set(objects);
        nudge();
    }
}
