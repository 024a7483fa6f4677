//! `meshdns controller iroh`: publishes each datum Connector's iroh endpoint as the TXT
//! records of an `iroh-<z32>` DNSRecordSet, claimed by the first Connector that creates it.
//!
//! The decisions are `meshdns_iroh::connector::{plan, claim}`, and the objects read and
//! written (and their conversions to and from the planner's data) `meshdns_objects`'s; this
//! module reads and writes.
//! Where datum's controller has known defects, this one differs:
//! - every record a Connector owns is found by its claim label, so the record of a previous
//!   endpoint id is released when the key changes;
//! - the finalizer is removed when the class stops routing to iroh and when publishing is
//!   disabled, so deleting a Connector never hangs;
//! - losing a create race or holding an invalid id sets the condition (`DeferredToOwner`,
//!   `Invalid`) instead of leaving the last one standing;
//! - a released record wakes the Connectors waiting for that key at once (not at their next
//!   Lease heartbeat);
//! - optionally, records are withdrawn while the Connector's Lease is expired.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use meshdns_iroh::connector::{
    CONDITION_TYPE, ClaimAction, ConditionPlan, Decision, FIELD_MANAGER, FINALIZER, IrohSettings,
    LABEL_CLAIMED_BY_UID, LABEL_MANAGED_BY, MANAGED_BY, RecordSetPlan, claim, plan,
};
use meshdns_objects::conditions::{condition, set_condition};
use meshdns_objects::core::Lease;
use meshdns_objects::dns::iroh_record_set;
use meshdns_objects::{Connector, ConnectorClass, DNSRecordSet, events};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::metrics::Metrics;
use crate::{Error, is_conflict, is_not_found, set_finalizer};

/// How the controller runs (datum's `connector.iroh` block plus meshdns's options).
#[derive(Debug, Clone)]
pub struct IrohOptions {
    /// Zone, prefix, suffix, TTL.
    pub settings: IrohSettings,
    /// Server-side apply field manager (datum's by default, so both can run side by side).
    pub field_manager: String,
    /// `dnsEnabled`. When false the controller only cleans up: it releases every record its
    /// Connectors own and removes their finalizers.
    pub enabled: bool,
    /// Withdraw a Connector's records while its Lease is expired (restored when it renews).
    pub withdraw_expired_leases: bool,
    /// How often a Connector that defers to another owner is looked at again, besides the
    /// events that wake it (its Lease, the record set being released).
    pub deferred_resync: Duration,
}

impl IrohOptions {
    /// Options with datum's defaults around these settings.
    pub fn new(settings: IrohSettings) -> IrohOptions {
        IrohOptions {
            settings,
            field_manager: FIELD_MANAGER.to_string(),
            enabled: true,
            withdraw_expired_leases: false,
            deferred_resync: Duration::from_secs(300),
        }
    }
}

/// A cluster whose Connectors are published.
#[derive(Clone)]
pub struct SourceCluster {
    /// Its name (recorded in the claim's cluster label).
    pub name: String,
    /// A client for it.
    pub client: Client,
}

/// What a Connector's last reconcile concluded, for the gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Owner,
    Deferred,
    Other,
}

/// Each Connector's last outcome, by (cluster, namespace, name).
type Outcomes = Arc<Mutex<BTreeMap<(String, String, String), Outcome>>>;

/// Shared by every reconcile of one source cluster.
pub struct Context {
    cluster: String,
    source: Client,
    downstream: Client,
    opts: Arc<IrohOptions>,
    metrics: Arc<Metrics>,
    recorder: Recorder,
    outcomes: Outcomes,
}

/// Runs one controller per source cluster until `shutdown` is cancelled.
pub async fn run(
    sources: Vec<SourceCluster>,
    downstream: Client,
    opts: IrohOptions,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    // Exported from the start, so dashboards show 0 rather than nothing before a Connector.
    metrics.set("iroh_records_owned", 0);
    metrics.set("iroh_connectors_deferred", 0);
    let opts = Arc::new(opts);
    let outcomes: Outcomes = Arc::default();
    let runs = sources.into_iter().map(|source| {
        let ctx = Arc::new(Context {
            cluster: source.name.clone(),
            recorder: Recorder::new(
                source.client.clone(),
                Reporter {
                    controller: "meshdns-iroh".into(),
                    instance: std::env::var("POD_NAME").ok(),
                },
            ),
            source: source.client,
            downstream: downstream.clone(),
            opts: opts.clone(),
            metrics: metrics.clone(),
            outcomes: outcomes.clone(),
        });
        controller(ctx, shutdown.clone())
    });
    futures::future::join_all(runs).await;
}

async fn controller(ctx: Arc<Context>, shutdown: CancellationToken) {
    let connectors = Api::<Connector>::all(ctx.source.clone());
    let controller = Controller::new(connectors, watcher::Config::default());
    let by_class = controller.store();
    let by_key = controller.store();
    let zone_ns = ctx.opts.settings.zone_namespace.clone();
    controller
        // A class change fans out to every Connector naming the class.
        .watches(
            Api::<ConnectorClass>::all(ctx.source.clone()),
            watcher::Config::default(),
            move |class| {
                let name = class.name_any();
                by_class
                    .state()
                    .into_iter()
                    .filter(|c| c.spec.connector_class_name == name)
                    .map(|c| ObjectRef::from_obj(&*c))
                    .collect::<Vec<_>>()
            },
        )
        // Every Lease heartbeat re-runs its Connector (the reference's handover path).
        .watches(
            Api::<Lease>::all(ctx.source.clone()),
            watcher::Config::default(),
            |lease| {
                let ns = lease.namespace().unwrap_or_default();
                lease
                    .owner_references()
                    .iter()
                    .filter(|o| o.kind == "Connector" && o.controller == Some(true))
                    .map(|o| ObjectRef::new(&o.name).within(&ns))
                    .collect::<Vec<_>>()
            },
        )
        // A record set that changes or goes wakes every Connector of that key in this
        // cluster: the owner repairs drift, the others take over a released claim at once.
        .watches(
            Api::<DNSRecordSet>::namespaced(ctx.downstream.clone(), &zone_ns),
            watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY}")),
            move |rs| {
                let name = rs.name_any();
                by_key
                    .state()
                    .into_iter()
                    .filter(|c| c.record_set_name().as_deref() == Some(name.as_str()))
                    .map(|c| ObjectRef::from_obj(&*c))
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|result| async move {
            if let Err(e) = result {
                warn!(error = %e, "iroh controller");
            }
        })
        .await;
}

/// Reconciles one Connector.
pub async fn reconcile(c: Arc<Connector>, ctx: Arc<Context>) -> Result<Action, Error> {
    let start = Instant::now();
    let result = reconcile_connector(&c, &ctx).await;
    ctx.metrics
        .reconciled(start.elapsed(), result.as_ref().err().map(Error::kind));
    let outcome = match &result {
        Ok((_, o)) => *o,
        Err(_) => Outcome::Other,
    };
    let key = (
        ctx.cluster.clone(),
        c.namespace().unwrap_or_default(),
        c.name_any(),
    );
    {
        let mut outcomes = ctx.outcomes.lock().unwrap_or_else(|e| e.into_inner());
        if c.metadata.deletion_timestamp.is_some() {
            outcomes.remove(&key);
        } else {
            outcomes.insert(key, outcome);
        }
        let count = |o| outcomes.values().filter(|v| **v == o).count() as i64;
        ctx.metrics.set("iroh_records_owned", count(Outcome::Owner));
        ctx.metrics
            .set("iroh_connectors_deferred", count(Outcome::Deferred));
    }
    result.map(|(action, _)| action)
}

/// Retries soon after a conflict (someone else wrote first), later after other errors.
pub fn error_policy(c: Arc<Connector>, error: &Error, _ctx: Arc<Context>) -> Action {
    warn!(connector = %c.name_any(), namespace = ?c.namespace(), error = %error, "reconcile failed");
    match error {
        Error::Kube(e) if is_conflict(e) => Action::requeue(Duration::from_millis(200)),
        _ => Action::requeue(Duration::from_secs(5)),
    }
}

/// Lets go of a Connector that publishes nothing any more (being deleted, publishing turned
/// off, or no longer routed to iroh): releases its records and removes its finalizer, and with
/// `clear` its condition. A Connector without the finalizer holds nothing to let go of.
async fn let_go(
    ctx: &Context,
    api: &Api<Connector>,
    c: &Connector,
    uid: &str,
    clear: bool,
) -> Result<(), Error> {
    if !c.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    release(ctx, c, uid, None).await?;
    let c = set_finalizer(api, c, FINALIZER, false).await?;
    if clear {
        clear_condition(api, &c).await?;
    }
    Ok(())
}

async fn reconcile_connector(c: &Connector, ctx: &Context) -> Result<(Action, Outcome), Error> {
    let ns = c.namespace().unwrap_or_default();
    let api = Api::<Connector>::namespaced(ctx.source.clone(), &ns);
    let uid = c.uid().unwrap_or_default();
    let done = Ok((Action::await_change(), Outcome::Other));

    if c.metadata.deletion_timestamp.is_some() {
        let_go(ctx, &api, c, &uid, false).await?;
        return done;
    }
    if !ctx.opts.enabled {
        let_go(ctx, &api, c, &uid, true).await?;
        return done;
    }
    let class = class_controller(ctx, &c.spec.connector_class_name).await?;
    let input = c.to_input(class, &ctx.cluster);
    let decision = plan(&input, &ctx.opts.settings);
    if decision == Decision::Ignore {
        let_go(ctx, &api, c, &uid, true).await?;
        return done;
    }
    let c = set_finalizer(&api, c, FINALIZER, true).await?;
    let (cond, outcome) = match decision {
        Decision::Ignore => unreachable!("handled above"),
        Decision::Pending => {
            release(ctx, &c, &uid, None).await?;
            (ConditionPlan::pending(), Outcome::Other)
        }
        Decision::Invalid(why) => {
            release(ctx, &c, &uid, None).await?;
            (ConditionPlan::invalid(&why), Outcome::Other)
        }
        Decision::Publish(p) => {
            if ctx.opts.withdraw_expired_leases && lease_expired(ctx, &c).await? {
                release(ctx, &c, &uid, None).await?;
                (
                    ConditionPlan {
                        status: "False",
                        reason: "LeaseExpired",
                        message: "Records withdrawn while the Connector's Lease is expired.".into(),
                    },
                    Outcome::Other,
                )
            } else {
                // A previous endpoint id's record goes when the key changes.
                release(ctx, &c, &uid, Some(&p.name)).await?;
                publish(ctx, &uid, &p).await?
            }
        }
    };
    let changed = set_status_condition(&api, &c, &cond).await?;
    if changed {
        announce(ctx, &c, &cond).await;
    }
    let action = match outcome {
        Outcome::Deferred => Action::requeue(ctx.opts.deferred_resync),
        _ => Action::await_change(),
    };
    Ok((action, outcome))
}

async fn class_controller(ctx: &Context, name: &str) -> Result<Option<String>, Error> {
    if name.is_empty() {
        return Ok(None);
    }
    let classes = Api::<ConnectorClass>::all(ctx.source.clone());
    Ok(classes
        .get_opt(name)
        .await?
        .map(|c| c.controller_name().to_string()))
}

async fn lease_expired(ctx: &Context, c: &Connector) -> Result<bool, Error> {
    let name = c
        .status
        .as_ref()
        .and_then(|s| s.lease_ref.as_ref())
        .map(|r| r.name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| c.name_any());
    let leases = Api::<Lease>::namespaced(ctx.source.clone(), &c.namespace().unwrap_or_default());
    let Some(lease) = leases.get_opt(&name).await? else {
        return Ok(false);
    };
    let spec = lease.spec.unwrap_or_default();
    let last = spec
        .renew_time
        .map(|t| t.0)
        .or(spec.acquire_time.map(|t| t.0));
    let (Some(last), Some(duration)) = (last, spec.lease_duration_seconds) else {
        return Ok(false);
    };
    let expires = last
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(i64::from(
            duration,
        )))
        .unwrap_or(last);
    Ok(expires < Timestamp::now())
}

/// Whether the existing record set already is what the plan wants (labels and annotations
/// included; extra ones others added are fine).
fn up_to_date(have: &DNSRecordSet, want: &serde_json::Value) -> Result<bool, Error> {
    let have_spec = serde_json::to_value(&have.spec)?;
    let contains = |have: &Option<BTreeMap<String, String>>, want: &serde_json::Value| {
        want.as_object().is_none_or(|w| {
            w.iter().all(|(k, v)| {
                have.as_ref().and_then(|h| h.get(k)).map(String::as_str) == v.as_str()
            })
        })
    };
    Ok(have_spec == want["spec"]
        && contains(&have.metadata.labels, &want["metadata"]["labels"])
        && contains(&have.metadata.annotations, &want["metadata"]["annotations"]))
}

async fn publish(
    ctx: &Context,
    uid: &str,
    p: &RecordSetPlan,
) -> Result<(ConditionPlan, Outcome), Error> {
    let api = Api::<DNSRecordSet>::namespaced(ctx.downstream.clone(), &p.namespace);
    let want = serde_json::to_value(iroh_record_set(p))?;
    // Two tries: a lost create race is followed by a second look at the winner.
    for _ in 0..2 {
        let existing = api.get_opt(&p.name).await?;
        let meta = existing.as_ref().map(|rs| {
            (
                rs.metadata.labels.clone().unwrap_or_default(),
                rs.metadata.annotations.clone().unwrap_or_default(),
            )
        });
        match claim(uid, meta.as_ref().map(|(l, a)| (l, a))) {
            ClaimAction::Create => {
                let object: DNSRecordSet = serde_json::from_value(want.clone())?;
                let pp = PostParams {
                    field_manager: Some(ctx.opts.field_manager.clone()),
                    ..Default::default()
                };
                match api.create(&pp, &object).await {
                    Ok(_) => {
                        info!(record_set = %p.name, uid, "claimed");
                        return Ok((ConditionPlan::owner(), Outcome::Owner));
                    }
                    Err(e) if is_conflict(&e) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            ClaimAction::Apply => {
                if !up_to_date(existing.as_ref().expect("exists"), &want)? {
                    let pp = PatchParams::apply(&ctx.opts.field_manager).force();
                    api.patch(&p.name, &pp, &Patch::Apply(&want)).await?;
                }
                return Ok((ConditionPlan::owner(), Outcome::Owner));
            }
            ClaimAction::Defer { owner, uid } => {
                return Ok((ConditionPlan::deferred(&owner, &uid), Outcome::Deferred));
            }
        }
    }
    Err(Error::Kube(kube::Error::Api(
        kube::core::Status::failure(
            &format!(
                "record set {} was created and deleted while claiming it",
                p.name
            ),
            "Conflict",
        )
        .with_code(409)
        .boxed(),
    )))
}

/// Deletes every record set this Connector claims (all of them, or all but `keep`).
async fn release(ctx: &Context, c: &Connector, uid: &str, keep: Option<&str>) -> Result<(), Error> {
    if uid.is_empty() {
        return Ok(());
    }
    let api =
        Api::<DNSRecordSet>::namespaced(ctx.downstream.clone(), &ctx.opts.settings.zone_namespace);
    let lp = ListParams::default().labels(&format!(
        "{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_CLAIMED_BY_UID}={uid}"
    ));
    for rs in api.list(&lp).await? {
        let name = rs.name_any();
        if Some(name.as_str()) == keep {
            continue;
        }
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                info!(record_set = %name, uid, "released");
                let ev = events::record_released(&name);
                crate::publish_event(&ctx.recorder, &ev, &c.object_ref(&())).await;
            }
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Sets `IrohDNSPublished`; returns whether anything changed.
async fn set_status_condition(
    api: &Api<Connector>,
    c: &Connector,
    cond: &ConditionPlan,
) -> Result<bool, Error> {
    let want = condition(
        CONDITION_TYPE,
        cond.status,
        cond.reason,
        &cond.message,
        c.metadata.generation,
        Timestamp::now(),
    );
    let Some(conditions) = set_condition(c.conditions(), want) else {
        return Ok(false);
    };
    let patch = json!({"metadata": {"resourceVersion": c.resource_version()}, "status": {"conditions": conditions}});
    api.patch_status(
        &c.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(true)
}

/// Removes `IrohDNSPublished` (the Connector is no longer published by this controller).
async fn clear_condition(api: &Api<Connector>, c: &Connector) -> Result<(), Error> {
    let current = c.conditions();
    if !current.iter().any(|x| x.type_ == CONDITION_TYPE) {
        return Ok(());
    }
    let kept: Vec<_> = current
        .iter()
        .filter(|x| x.type_ != CONDITION_TYPE)
        .collect();
    let patch = json!({"metadata": {"resourceVersion": c.resource_version()}, "status": {"conditions": kept}});
    api.patch_status(
        &c.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

async fn announce(ctx: &Context, c: &Connector, cond: &ConditionPlan) {
    let ev = events::publish_condition(cond);
    crate::publish_event(&ctx.recorder, &ev, &c.object_ref(&())).await;
}
