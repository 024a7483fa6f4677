//! `meshdns serve --kubernetes --write-status`: the `status` dns-operator writes on DNSZones and
//! DNSRecordSets, written by the replica holding a Lease, after the snapshot serving the objects
//! is live (`Programmed=True` means "this replica answers it"); with `--kube-source`, the
//! `status.observedGeneration` external-dns writes on DNSEndpoints, and an Event on each of the
//! cluster's objects for each thing at fault in it, once.
//!
//! The statuses come from the pure planner ([`meshdns_sources::status::plan`]) on what the
//! watcher thread hands back ([`ManifestFeed::served`]); only a status that differs from the one
//! the object carries is written (a merge patch of `/status`), so a steady state writes nothing.
//! Writing a status changes the object, which the reflector hands over again; the next plan then
//! finds it already written.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use meshdns_objects::gateway::DNSEndpoint;
use meshdns_objects::{DNSRecordSet, DNSZone};
use meshdns_sources::cluster::ObjectVerdict;
use meshdns_sources::manifests::{ManifestFeed, Served};
use meshdns_sources::status::{
    Recorded, StatusPlan, endpoint_plans, forget_resolved, plan, unrecorded,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::leader::{Election, lead};

/// The field manager of status writes.
pub const FIELD_MANAGER: &str = "meshdns-serve";

/// How often the leader re-plans even without a new snapshot (a write that failed is retried).
const RESYNC: Duration = Duration::from_secs(30);

/// Events recorded at most, in a burst, and then per second: a cluster of thousands of
/// objects at fault gets its Events over minutes, not in one flood to the API server.
const EVENT_BURST: f64 = 100.0;
const EVENTS_PER_SECOND: f64 = 10.0;
/// How soon a pass that left Events for want of budget runs again.
const EVENT_WAIT: Duration = Duration::from_secs(1);

/// What the writer keeps between passes: the Events recorded (each problem of each object
/// once, while this replica leads), and the budget for more.
struct Writer {
    recorded: Recorded,
    tokens: f64,
    refilled: Instant,
}

impl Writer {
    fn new() -> Writer {
        Writer {
            recorded: Recorded::default(),
            tokens: EVENT_BURST,
            refilled: Instant::now(),
        }
    }

    /// Takes one Event from the budget, if any is left.
    fn take(&mut self) -> bool {
        let now = Instant::now();
        let earned = now.duration_since(self.refilled).as_secs_f64() * EVENTS_PER_SECOND;
        self.tokens = (self.tokens + earned).min(EVENT_BURST);
        self.refilled = now;
        (self.tokens >= 1.0).then(|| self.tokens -= 1.0).is_some()
    }
}

/// Writes statuses while this replica holds `election`'s Lease, until `shutdown`. `notify` is
/// signalled by the feed's served hook.
pub async fn write_statuses(
    client: Client,
    feed: Arc<ManifestFeed>,
    notify: Arc<Notify>,
    election: Election,
    shutdown: CancellationToken,
) {
    // What was recorded stays known across terms: a Lease lost and won back records nothing
    // twice. (A replica that newly leads records what is at fault now once.)
    let mut writer = Writer::new();
    loop {
        let Some(lost) = lead(client.clone(), election.clone(), shutdown.clone()).await else {
            return;
        };
        info!(lease = %election.name, "writing DNSZone and DNSRecordSet status");
        loop {
            let mut more = false;
            if let Some(served) = feed.served() {
                write_once(&client, &served).await;
                more = record_events(&client, &served, &election.identity, &mut writer).await;
            }
            // Events left for want of budget go as it refills, not at the next resync.
            let wait = if more { EVENT_WAIT } else { RESYNC };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = lost.cancelled() => break,
                _ = notify.notified() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
        warn!(lease = %election.name, "no longer the status writer; waiting for the Lease");
    }
}

/// Plans every status and writes those that changed. Returns how many were written.
pub async fn write_once(client: &Client, served: &Served) -> usize {
    let now = meshdns_objects::conditions::now();
    let mut written = 0;
    let mut plans = plan(
        &served.verdicts,
        &served.objects,
        |origin| served.nameservers.get(origin).cloned().unwrap_or_default(),
        &now,
    );
    plans.extend(endpoint_plans(&served.verdicts.objects, &served.objects));
    for p in plans {
        if !p.changed {
            continue;
        }
        let result = match p.kind {
            "DNSZone" => patch::<DNSZone>(client, &p).await,
            "DNSEndpoint" => patch::<DNSEndpoint>(client, &p).await,
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

/// Records an Event for each problem of the cluster's objects not recorded yet, within the
/// budget; forgets what is resolved. Whether some are left for the next pass (the budget
/// spent, or the API refused one: the rest are not tried in this pass).
async fn record_events(
    client: &Client,
    served: &Served,
    instance: &str,
    writer: &mut Writer,
) -> bool {
    let objects = &served.verdicts.objects;
    forget_resolved(objects, &mut writer.recorded);
    for (object, problem) in unrecorded(objects, &writer.recorded) {
        if !writer.take() {
            debug!("event budget spent; the rest as it refills");
            return true;
        }
        let event = meshdns_objects::events::object_problem(
            problem.reason.as_str(),
            &problem.field,
            &problem.why,
        );
        match create_event(client, object, &event, instance).await {
            Ok(()) => {
                writer
                    .recorded
                    .entry((object.label(), object.uid.clone()))
                    .or_default()
                    .insert(problem.clone());
            }
            // Advice, never a failure: retried on the next pass (RBAC missing would refuse
            // every one: one warning a pass, not one per problem).
            Err(e) => {
                warn!(object = %object.label(), error = %e, "event not recorded; retried on the next pass");
                return false;
            }
        }
    }
    false
}

/// Creates an `events.k8s.io/v1` Event about `object`. Written here rather than through
/// kube-runtime's `Recorder`, which folds every Event of one reason about one object into a
/// series keeping the first note: each problem here has its own note.
async fn create_event(
    client: &Client,
    object: &ObjectVerdict,
    event: &meshdns_objects::events::Event,
    instance: &str,
) -> Result<(), kube::Error> {
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::api::events::v1::Event;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    let now = k8s_openapi::jiff::Timestamp::now();
    // A name the API takes whatever the object's length (routes' may be 253 characters).
    let name =
        meshdns_mesh::naming::object_name(&format!("{}.{:x}", object.name, now.as_nanosecond()));
    let body = Event {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(object.namespace.clone()),
            ..ObjectMeta::default()
        },
        action: Some(event.action.clone()),
        reason: Some(event.reason.clone()),
        note: event.note.clone(),
        type_: Some(event.type_.as_str().to_string()),
        event_time: Some(MicroTime(now)),
        regarding: Some(ObjectReference {
            api_version: Some(object.api_version.clone()),
            kind: Some(object.kind.to_string()),
            namespace: Some(object.namespace.clone()),
            name: Some(object.name.clone()),
            uid: object.uid.clone(),
            ..ObjectReference::default()
        }),
        reporting_controller: Some(REPORTING_CONTROLLER.to_string()),
        // At most 128 characters (the API's limit).
        reporting_instance: Some(instance.chars().take(128).collect()),
        ..Event::default()
    };
    Api::<Event>::namespaced(client.clone(), &object.namespace)
        .create(&PostParams::default(), &body)
        .await
        .map(|_| ())
}

/// The `reportingController` of the Events `serve` records.
const REPORTING_CONTROLLER: &str = "meshdns.io/serve";
