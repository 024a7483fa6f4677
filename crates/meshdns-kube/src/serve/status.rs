//! `meshdns serve --kubernetes --write-status`: the `status` dns-operator writes on DNSZones and
//! DNSRecordSets, written by the replica holding a Lease, after the snapshot serving the objects
//! is live (`Programmed=True` means "this replica answers it").
//!
//! The statuses come from the pure planner ([`meshdns_sources::status::plan`]) on what the
//! watcher thread hands back ([`ManifestFeed::served`]); only a status that differs from the one
//! the object carries is written (a merge patch of `/status`), so a steady state writes nothing.
//! Writing a status changes the object, which the reflector hands over again; the next plan then
//! finds it already written.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource};
use meshdns_objects::{DNSRecordSet, DNSZone};
use meshdns_sources::manifests::{ManifestFeed, Served};
use meshdns_sources::status::{StatusPlan, plan};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::leader::{Election, lead};

/// The field manager of status writes.
pub const FIELD_MANAGER: &str = "meshdns-serve";

/// How often the leader re-plans even without a new snapshot (a write that failed is retried).
const RESYNC: Duration = Duration::from_secs(30);

/// Writes statuses while this replica holds `election`'s Lease, until `shutdown`. `notify` is
/// signalled by the feed's served hook.
pub async fn write_statuses(
    client: Client,
    feed: Arc<ManifestFeed>,
    notify: Arc<Notify>,
    election: Election,
    shutdown: CancellationToken,
) {
    loop {
        let Some(lost) = lead(client.clone(), election.clone(), shutdown.clone()).await else {
            return;
        };
        info!(lease = %election.name, "writing DNSZone and DNSRecordSet status");
        loop {
            if let Some(served) = feed.served() {
                write_once(&client, &served).await;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = lost.cancelled() => break,
                _ = notify.notified() => {}
                _ = tokio::time::sleep(RESYNC) => {}
            }
        }
        warn!(lease = %election.name, "no longer the status writer; waiting for the Lease");
    }
}

/// Plans every status and writes those that changed. Returns how many were written.
pub async fn write_once(client: &Client, served: &Served) -> usize {
    let now = meshdns_objects::conditions::now();
    let mut written = 0;
    let plans = plan(
        &served.verdicts,
        &served.objects,
        |origin| served.nameservers.get(origin).cloned().unwrap_or_default(),
        &now,
    );
    for p in plans {
        if !p.changed {
            continue;
        }
        let result = match p.kind {
            "DNSZone" => patch::<DNSZone>(client, &p).await,
            _ => patch::<DNSRecordSet>(client, &p).await,
        };
        match result {
            Ok(()) => {
                debug!(kind = p.kind, namespace = %p.namespace, name = %p.name, "status written");
                written += 1;
            }
            // Gone meanwhile, or the API is failing: the next plan retries.
            Err(e) => {
                warn!(kind = p.kind, namespace = %p.namespace, name = %p.name, error = %e, "status not written")
            }
        }
    }
    written
}

async fn patch<K>(client: &Client, p: &StatusPlan) -> Result<(), kube::Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api = Api::<K>::namespaced(client.clone(), &p.namespace);
    let body = serde_json::json!({ "status": p.status });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    api.patch_status(&p.name, &params, &Patch::Merge(&body))
        .await
        .map(|_| ())
}
