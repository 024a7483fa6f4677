//! `meshdns controller mesh`: keeps Kilo Peers in every member cluster of the ClusterMeshes of
//! one namespace, NAT-aware, plus the meshes' node names as DNSRecordSets.
//!
//! The decisions are `meshdns_mesh`'s, and the objects (and their conversions to and from
//! the planner's data) `meshdns_objects`'s. A reconcile covers the whole namespace, because
//! overlap checks and same-key merging span all its meshes:
//! 1. list the meshes and each member cluster's Nodes (clusters through kubeconfig Secrets in
//!    the namespace, one client per (mesh, cluster), rebuilt when its Secret changes);
//! 2. plan;
//! 3. per target cluster, merge, enrich with the target's discovered endpoints, and write only
//!    the difference from its Peers (server-side apply, field manager `meshdns-mesh`);
//! 4. sweep Peers of clusters that left a spec, of meshes being deleted (then drop their
//!    finalizer), and of meshes that exist in no namespace; never a Peer without the mesh
//!    label, never those of a cluster that could not be read;
//! 5. write statuses that changed and an Event per newly skipped node.
//!
//! Any ClusterMesh or Secret change, and any Node change in any member cluster (a watcher per
//! cluster client), triggers it; it also runs every `resync` (30 s while a cluster is still
//! bootstrapping).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use meshdns_mesh::dns::node_record_sets;
use meshdns_mesh::plan::peer_owner;
use meshdns_mesh::{
    ClusterNodes, FINALIZER, LABEL_MESH, MeshPlan, MeshSpec, Node, PeerAction, diff_target,
    discovered_endpoints, enrich, merge_same_key, plan_meshes,
};
use meshdns_objects::core::{KubeNode, Secret};
use meshdns_objects::dns::node_record_set;
use meshdns_objects::{ClusterMesh, ClusterMeshStatus, DNSRecordSet, Peer, events};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::metrics::Metrics;
use crate::{Error, is_not_found, set_finalizer};

/// Field manager of every Peer, DNSRecordSet and status meshdns writes here.
pub const FIELD_MANAGER: &str = "meshdns-mesh";

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct MeshOptions {
    /// The namespace of the ClusterMeshes and their kubeconfig Secrets.
    pub namespace: String,
    /// Periodic re-plan when nothing triggers one.
    pub resync: Duration,
    /// Re-plan while a cluster is still bootstrapping (nodes not annotated yet).
    pub bootstrap_resync: Duration,
}

impl MeshOptions {
    /// The reference operator's timings (5 min, 30 s while bootstrapping).
    pub fn new(namespace: &str) -> MeshOptions {
        MeshOptions {
            namespace: namespace.to_string(),
            resync: Duration::from_secs(300),
            bootstrap_resync: Duration::from_secs(30),
        }
    }
}

/// Where a member cluster is reached: the local cluster, or a Secret's kubeconfig.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Reach {
    Local,
    Secret { name: String, key: String },
}

fn reach(entry: &meshdns_objects::ClusterEntry) -> Reach {
    match &entry.kubeconfig_secret_ref {
        Some(r) if !entry.local => Reach::Secret {
            name: r.name.clone(),
            key: r.key.clone(),
        },
        _ => Reach::Local,
    }
}

/// A client for a member cluster and the watcher that re-plans on its Node changes.
struct Member {
    client: Client,
    /// The Secret's resourceVersion the client was built from.
    version: String,
    watch: tokio::task::JoinHandle<()>,
}

impl Drop for Member {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

/// A skipped node as reported: (cluster, node, reason).
type SkipKey = (String, String, String);

/// Shared by every reconcile.
pub struct Context {
    local: Client,
    opts: MeshOptions,
    metrics: Arc<Metrics>,
    recorder: Recorder,
    members: tokio::sync::Mutex<BTreeMap<Reach, Member>>,
    trigger: mpsc::Sender<()>,
    /// Skips already reported, per mesh, so each gets one Event.
    reported: Mutex<BTreeMap<String, BTreeSet<SkipKey>>>,
    /// Targets of the last reconcile still worth reaching (in a spec, or not yet swept), so
    /// one that leaves a spec is still swept.
    known: Mutex<BTreeSet<Reach>>,
    serial: tokio::sync::Mutex<()>,
}

/// Runs the controller until `shutdown` is cancelled.
pub async fn run(
    local: Client,
    opts: MeshOptions,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    // Exported from the start, so dashboards show 0 rather than nothing before a mesh.
    metrics.set("mesh_peers_planned", 0);
    metrics.set("mesh_peer_writes", 0);
    // One pending trigger is enough: a burst of Node events is one re-plan.
    let (tx, rx) = mpsc::channel::<()>(1);
    let ns = opts.namespace.clone();
    let ctx = Arc::new(Context {
        recorder: Recorder::new(
            local.clone(),
            Reporter {
                controller: "meshdns-mesh".into(),
                instance: std::env::var("POD_NAME").ok(),
            },
        ),
        local: local.clone(),
        opts,
        metrics,
        members: tokio::sync::Mutex::new(BTreeMap::new()),
        trigger: tx,
        reported: Mutex::new(BTreeMap::new()),
        known: Mutex::new(BTreeSet::new()),
        serial: tokio::sync::Mutex::new(()),
    });
    let node_changes = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await?;
        // Coalesce a burst of node events into one re-plan.
        tokio::time::sleep(Duration::from_millis(100)).await;
        while rx.try_recv().is_ok() {}
        Some(((), rx))
    });
    let meshes = Api::<ClusterMesh>::namespaced(local.clone(), &ns);
    let controller = Controller::new(meshes, watcher::Config::default());
    let store = controller.store();
    controller
        .watches(
            Api::<Secret>::namespaced(local.clone(), &ns),
            watcher::Config::default(),
            move |secret| {
                let name = secret.name_any();
                store
                    .state()
                    .into_iter()
                    .filter(|m| {
                        m.spec.clusters.iter().any(|c| {
                            c.kubeconfig_secret_ref
                                .as_ref()
                                .is_some_and(|r| r.name == name)
                        })
                    })
                    .map(|m| ObjectRef::from_obj(&*m))
                    .collect::<Vec<_>>()
            },
        )
        .reconcile_all_on(node_changes)
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                warn!(error = %e, "mesh controller");
            }
        })
        .await;
}

/// Retries a failed reconcile after 5 s.
pub fn error_policy(mesh: Arc<ClusterMesh>, error: &Error, _ctx: Arc<Context>) -> Action {
    warn!(mesh = %mesh.name_any(), error = %error, "reconcile failed");
    Action::requeue(Duration::from_secs(5))
}

/// Reconciles the namespace of `mesh` (every mesh in it: overlap checks and merges span them).
pub async fn reconcile(_mesh: Arc<ClusterMesh>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _serial = ctx.serial.lock().await;
    let start = Instant::now();
    let result = reconcile_namespace(&ctx).await;
    ctx.metrics
        .reconciled(start.elapsed(), result.as_ref().err().map(Error::kind));
    let bootstrapping = result?;
    Ok(Action::requeue(if bootstrapping {
        ctx.opts.bootstrap_resync
    } else {
        ctx.opts.resync
    }))
}

/// Why a member cluster could not be reached.
#[derive(Debug, Clone)]
enum Unreachable {
    /// Its kubeconfig Secret does not exist: there is no way to reach it any more.
    Gone(String),
    /// Anything else (API error, bad kubeconfig): worth trying again.
    Failed(String),
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreachable::Gone(why) | Unreachable::Failed(why) => f.write_str(why),
        }
    }
}

/// A client for a member cluster, built (or rebuilt, when its Secret changed) on demand.
async fn member(ctx: &Context, how: &Reach) -> Result<Client, Unreachable> {
    let (client, version) = match how {
        Reach::Local => {
            let mut members = ctx.members.lock().await;
            if let Some(m) = members.get(how) {
                return Ok(m.client.clone());
            }
            let client = ctx.local.clone();
            members.insert(
                how.clone(),
                watch_member(ctx, client.clone(), String::new()),
            );
            return Ok(client);
        }
        Reach::Secret { name, key } => {
            let secrets = Api::<Secret>::namespaced(ctx.local.clone(), &ctx.opts.namespace);
            let secret = secrets
                .get_opt(name)
                .await
                .map_err(|e| Unreachable::Failed(format!("Secret {name}: {e}")))?
                .ok_or_else(|| {
                    Unreachable::Gone(format!(
                        "kubeconfig Secret {}/{name} not found",
                        ctx.opts.namespace
                    ))
                })?;
            let version = secret.resource_version().unwrap_or_default();
            if let Some(m) = ctx.members.lock().await.get(how)
                && m.version == version
            {
                return Ok(m.client.clone());
            }
            let bytes = secret
                .data
                .as_ref()
                .and_then(|d| d.get(key))
                .ok_or_else(|| Unreachable::Failed(format!("Secret {name} has no key {key:?}")))?;
            let client = crate::client_from_kubeconfig(&bytes.0)
                .await
                .map_err(|e| Unreachable::Failed(format!("Secret {name} key {key:?}: {e}")))?;
            (client, version)
        }
    };
    info!(?how, "cluster client (re)built");
    let mut members = ctx.members.lock().await;
    members.insert(how.clone(), watch_member(ctx, client.clone(), version));
    Ok(client)
}

fn watch_member(ctx: &Context, client: Client, version: String) -> Member {
    let trigger = ctx.trigger.clone();
    let nodes = Api::<KubeNode>::all(client.clone());
    let watch = tokio::spawn(async move {
        let mut events = watcher(nodes, watcher::Config::default())
            .default_backoff()
            .touched_objects()
            .boxed();
        while let Some(e) = events.next().await {
            if e.is_ok()
                && let Err(mpsc::error::TrySendError::Closed(_)) = trigger.try_send(())
            {
                return;
            }
        }
    });
    Member {
        client,
        version,
        watch,
    }
}

async fn list_nodes(client: &Client) -> Result<Vec<Node>, String> {
    let nodes = Api::<KubeNode>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing nodes: {e}"))?;
    nodes
        .items
        .into_iter()
        .map(|n| meshdns_objects::core::Node::from_kube(&n).map(|n| n.to_plan()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("reading nodes: {e}"))
}

/// One pass over the namespace: plan every mesh, bring every target cluster's Peers to the
/// plan, then record sets, statuses and Events; finalizers of deleted meshes go once every
/// target is clean. Returns whether any cluster is still bootstrapping.
async fn reconcile_namespace(ctx: &Context) -> Result<bool, Error> {
    let api = Api::<ClusterMesh>::namespaced(ctx.local.clone(), &ctx.opts.namespace);
    let (live, deleting) = meshes(&api).await?;
    let mut members = Members::reach(ctx, live.iter().chain(&deleting)).await;
    let plans = plan(&live, &members.nodes);
    let targets = targets(ctx, &live, &deleting, &mut members).await;
    let namespace = Namespace {
        live: &live,
        plans: &plans,
        deleting: deleting.iter().map(|m| m.name_any()).collect(),
        existing: existing_meshes(ctx).await?,
    };

    let mut cleaned_all = true;
    let mut peers_written = 0i64;
    for (how, entries) in &targets {
        match sync_target(&namespace, &members, how, entries).await? {
            Synced::Written(n) => peers_written += n,
            Synced::Gone => {}
            Synced::NotReached => cleaned_all = false,
        }
    }
    ctx.metrics.set("mesh_peer_writes", peers_written);
    remember_targets(ctx, &live, &targets, &members.clients);

    reconcile_record_sets(ctx, &live, &plans).await?;
    for (m, plan) in live.iter().zip(&plans) {
        write_status(&api, m, plan).await?;
        report_skips(ctx, m, plan).await;
    }
    if cleaned_all {
        for m in deleting
            .iter()
            .filter(|m| m.finalizers().iter().any(|f| f == FINALIZER))
        {
            set_finalizer(&api, m, FINALIZER, false).await?;
            info!(mesh = %m.name_any(), "cleaned up");
        }
    }
    let peers: i64 = plans
        .iter()
        .flat_map(|p| &p.sources)
        .map(|s| s.peers.len() as i64)
        .sum();
    ctx.metrics.set("mesh_peers_planned", peers);
    Ok(plans.iter().any(MeshPlan::bootstrapping))
}

/// The namespace's meshes, live ones (sorted by name, each holding the finalizer) apart from
/// those being deleted.
async fn meshes(api: &Api<ClusterMesh>) -> Result<(Vec<ClusterMesh>, Vec<ClusterMesh>), Error> {
    let all = api.list(&ListParams::default()).await?.items;
    let (deleting, listed): (Vec<ClusterMesh>, Vec<ClusterMesh>) = all
        .into_iter()
        .partition(|m| m.metadata.deletion_timestamp.is_some());
    let mut live = Vec::with_capacity(listed.len());
    for m in listed {
        live.push(set_finalizer(api, &m, FINALIZER, true).await?);
    }
    live.sort_by_key(|m| m.name_any());
    Ok((live, deleting))
}

/// Every member cluster's client and Nodes, by how it is reached.
struct Members {
    clients: BTreeMap<Reach, Result<Client, Unreachable>>,
    nodes: BTreeMap<Reach, Result<Vec<Node>, String>>,
}

impl Members {
    /// Reaches every cluster of `meshes` once and lists its Nodes.
    async fn reach(ctx: &Context, meshes: impl Iterator<Item = &ClusterMesh>) -> Members {
        let mut members = Members {
            clients: BTreeMap::new(),
            nodes: BTreeMap::new(),
        };
        for e in meshes.flat_map(|m| &m.spec.clusters) {
            members.client(ctx, reach(e)).await;
        }
        for (how, c) in &members.clients {
            let listed = match c {
                Ok(client) => list_nodes(client).await,
                Err(e) => Err(e.to_string()),
            };
            members.nodes.insert(how.clone(), listed);
        }
        members
    }

    /// Makes sure a client for `how` was tried.
    async fn client(&mut self, ctx: &Context, how: Reach) {
        if let std::collections::btree_map::Entry::Vacant(slot) = self.clients.entry(how) {
            let c = member(ctx, slot.key()).await;
            slot.insert(c);
        }
    }
}

/// The plan of every live mesh, from the Nodes of its clusters.
fn plan(live: &[ClusterMesh], nodes: &BTreeMap<Reach, Result<Vec<Node>, String>>) -> Vec<MeshPlan> {
    let entry_of = |mesh: &str, cluster: &str| -> Option<Reach> {
        live.iter()
            .find(|m| m.name_any() == mesh)?
            .spec
            .clusters
            .iter()
            .find(|c| c.name == cluster)
            .map(reach)
    };
    let names: Vec<String> = live.iter().map(|m| m.name_any()).collect();
    let planned: Vec<MeshSpec> = live.iter().map(|m| m.spec.to_plan()).collect();
    let specs: Vec<(&str, &MeshSpec)> = names
        .iter()
        .zip(&planned)
        .map(|(n, s)| (n.as_str(), s))
        .collect();
    plan_meshes(
        &specs,
        &|mesh, cluster| match entry_of(mesh, cluster).and_then(|h| nodes.get(&h)) {
            Some(Ok(list)) => ClusterNodes::Listed(list.clone()),
            Some(Err(e)) => ClusterNodes::Unavailable(e.clone()),
            None => ClusterNodes::Unavailable("not reached".into()),
        },
    )
}

/// The (live mesh index, cluster name) entries behind one target.
type TargetEntries = Vec<(usize, String)>;

/// Every target: each way a cluster is reached, with the entries of live meshes behind it;
/// clusters of meshes being deleted, and clusters that left a spec (still reachable while
/// their Secret exists), with none, so they are swept.
async fn targets(
    ctx: &Context,
    live: &[ClusterMesh],
    deleting: &[ClusterMesh],
    members: &mut Members,
) -> BTreeMap<Reach, TargetEntries> {
    let mut targets: BTreeMap<Reach, TargetEntries> = BTreeMap::new();
    for (i, m) in live.iter().enumerate() {
        for e in &m.spec.clusters {
            targets
                .entry(reach(e))
                .or_default()
                .push((i, e.name.clone()));
        }
    }
    for e in deleting.iter().flat_map(|m| &m.spec.clusters) {
        targets.entry(reach(e)).or_default();
    }
    let left: Vec<Reach> = {
        let known = ctx.known.lock().unwrap_or_else(|e| e.into_inner());
        known
            .iter()
            .filter(|r| !targets.contains_key(*r))
            .cloned()
            .collect()
    };
    for how in left {
        members.client(ctx, how.clone()).await;
        targets.entry(how).or_default();
    }
    targets
}

/// Meshes that exist in any namespace (a Peer naming none of them is an orphan).
async fn existing_meshes(ctx: &Context) -> Result<BTreeSet<String>, Error> {
    Ok(Api::<ClusterMesh>::all(ctx.local.clone())
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .map(|m| m.name_any())
        .collect())
}

/// What one pass knows about the namespace's meshes, to judge which Peers may go.
struct Namespace<'a> {
    live: &'a [ClusterMesh],
    plans: &'a [MeshPlan],
    /// Names of this namespace's meshes being deleted.
    deleting: BTreeSet<String>,
    /// Names of meshes that exist anywhere.
    existing: BTreeSet<String>,
}

impl Namespace<'_> {
    /// Whether a Peer found on a target whose memberships are `member_of` (mesh → cluster
    /// name) may be deleted when the plan does not want it.
    fn may_delete(&self, member_of: &BTreeMap<String, &str>, p: &meshdns_mesh::Peer) -> bool {
        let Some((mesh, source)) = peer_owner(p) else {
            return false;
        };
        if self.deleting.contains(mesh) || !self.existing.contains(mesh) {
            return true;
        }
        match self.live.iter().position(|m| m.name_any() == mesh) {
            // A mesh of this namespace: its Peers here go when the target left it, or when
            // their source left it or was read and no longer yields them.
            Some(i) => !member_of.contains_key(mesh) || self.plans[i].may_sweep(source),
            // A mesh of another namespace: not ours to judge.
            None => false,
        }
    }
}

/// How a target fared.
enum Synced {
    /// Its Peers match the plan; this many were written.
    Written(i64),
    /// Its kubeconfig Secret is gone: there is no way to reach it any more, so it cannot hold
    /// up a deletion (a deleted namespace takes the Secret with it).
    Gone,
    /// It could not be reached or read: it may still hold Peers of deleted meshes.
    NotReached,
}

/// Brings one target cluster's Peers to the plan: wanted Peers (merged by key, enriched with
/// the endpoints the target saw) are applied, Peers the namespace owns and no longer wants
/// are deleted, and a Peer of the same name the mesh does not own is left alone.
async fn sync_target(
    namespace: &Namespace<'_>,
    members: &Members,
    how: &Reach,
    entries: &TargetEntries,
) -> Result<Synced, Error> {
    let client = match members.clients.get(how) {
        Some(Ok(client)) => client,
        Some(Err(Unreachable::Gone(_))) => return Ok(Synced::Gone),
        _ => return Ok(Synced::NotReached),
    };
    let wanted = merge_same_key(
        entries
            .iter()
            .flat_map(|(i, cluster)| namespace.plans[*i].peers_for(cluster))
            .collect(),
    );
    let target_nodes = match members.nodes.get(how) {
        Some(Ok(list)) => list.as_slice(),
        _ => &[],
    };
    let seen = discovered_endpoints(target_nodes);
    for p in &seen.problems {
        warn!(target = ?how, problem = %p, "discovered endpoint rejected");
    }
    let desired = enrich(wanted, &seen);
    let peers_api = Api::<Peer>::all(client.clone());
    let existing: Vec<meshdns_mesh::Peer> = match peers_api.list(&ListParams::default()).await {
        Ok(list) => list.items.iter().map(Peer::to_plan).collect(),
        Err(e) => {
            warn!(target = ?how, error = %e, "listing Peers");
            return Ok(Synced::NotReached);
        }
    };
    let member_of: BTreeMap<String, &str> = entries
        .iter()
        .map(|(i, c)| (namespace.live[*i].name_any(), c.as_str()))
        .collect();
    let may_delete = |p: &meshdns_mesh::Peer| namespace.may_delete(&member_of, p);
    let mut written = 0;
    for action in diff_target(&desired, &existing, &may_delete) {
        match action {
            PeerAction::Apply(p) => {
                let pp = PatchParams::apply(FIELD_MANAGER).force();
                peers_api
                    .patch(
                        &p.name,
                        &pp,
                        &Patch::Apply(&serde_json::to_value(Peer::from_plan(&p))?),
                    )
                    .await?;
                written += 1;
            }
            PeerAction::Delete(name) => {
                match peers_api.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            PeerAction::Conflict(name) => {
                warn!(target = ?how, peer = %name, "a Peer without the mesh label has this name; left alone");
            }
        }
    }
    Ok(Synced::Written(written))
}

/// Remembers the targets worth reaching next time: every cluster of a live mesh, and any
/// target that could not be swept (tried again).
fn remember_targets(
    ctx: &Context,
    live: &[ClusterMesh],
    targets: &BTreeMap<Reach, TargetEntries>,
    clients: &BTreeMap<Reach, Result<Client, Unreachable>>,
) {
    let mut known = ctx.known.lock().unwrap_or_else(|e| e.into_inner());
    *known = live
        .iter()
        .flat_map(|m| m.spec.clusters.iter().map(reach))
        .collect();
    known.extend(
        targets
            .keys()
            .filter(|how| matches!(clients.get(*how), Some(Err(Unreachable::Failed(_)))))
            .cloned(),
    );
}

async fn reconcile_record_sets(
    ctx: &Context,
    live: &[ClusterMesh],
    plans: &[MeshPlan],
) -> Result<(), Error> {
    let api = Api::<DNSRecordSet>::namespaced(ctx.local.clone(), &ctx.opts.namespace);
    let existing = api
        .list(&ListParams::default().labels(LABEL_MESH))
        .await?
        .items;
    let mut wanted: BTreeSet<String> = BTreeSet::new();
    for (m, plan) in live.iter().zip(plans) {
        let Some(dns) = &m.spec.dns else { continue };
        for set in node_record_sets(plan, &dns.to_plan()) {
            wanted.insert(set.name.clone());
            let body = serde_json::to_value(node_record_set(&set, &ctx.opts.namespace))?;
            let spec = &body["spec"];
            let current = existing.iter().find(|r| r.name_any() == set.name);
            let same = current.is_some_and(|r| {
                serde_json::to_value(&r.spec).ok().as_ref() == Some(spec)
                    && set.labels.iter().all(|(k, v)| r.labels().get(k) == Some(v))
            });
            if !same {
                api.patch(
                    &set.name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&body),
                )
                .await?;
            }
        }
    }
    // Record sets of meshes (in this namespace) that no longer want them, unless their source
    // cluster could not be read this time.
    for r in &existing {
        let name = r.name_any();
        if wanted.contains(&name) {
            continue;
        }
        let mesh = r.labels().get(LABEL_MESH).cloned().unwrap_or_default();
        let source = r
            .labels()
            .get(meshdns_mesh::LABEL_SOURCE_CLUSTER)
            .cloned()
            .unwrap_or_default();
        let keep = live
            .iter()
            .zip(plans)
            .find(|(m, _)| m.name_any() == mesh)
            .is_some_and(|(m, p)| m.spec.dns.is_some() && !p.may_sweep(&source));
        if !keep {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

async fn write_status(
    api: &Api<ClusterMesh>,
    m: &ClusterMesh,
    plan: &MeshPlan,
) -> Result<(), Error> {
    let current = m.status.clone().unwrap_or_default();
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let status = ClusterMeshStatus::stamped(&plan.status(m.metadata.generation), &current, &now);
    if status == current {
        return Ok(());
    }
    let patch = json!({"metadata": {"resourceVersion": m.resource_version()}, "status": status});
    api.patch_status(
        &m.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

async fn report_skips(ctx: &Context, m: &ClusterMesh, plan: &MeshPlan) {
    let now: BTreeSet<(String, String, String)> = plan
        .sources
        .iter()
        .flat_map(|s| {
            s.skipped.iter().map(|k| {
                (
                    s.cluster.clone(),
                    k.node.clone(),
                    k.reason.as_str().to_string(),
                )
            })
        })
        .collect();
    let fresh: Vec<(String, String, String)> = {
        let mut reported = ctx.reported.lock().unwrap_or_else(|e| e.into_inner());
        let before = reported.entry(m.name_any()).or_default();
        let fresh = now.difference(before).cloned().collect();
        *before = now;
        fresh
    };
    for (cluster, node, reason) in fresh {
        let Some(skip) = plan
            .sources
            .iter()
            .find(|s| s.cluster == cluster)
            .and_then(|s| {
                s.skipped
                    .iter()
                    .find(|k| k.node == node && k.reason.as_str() == reason)
            })
        else {
            continue;
        };
        let ev = events::node_skipped(&cluster, skip);
        crate::publish_event(&ctx.recorder, &ev, &m.object_ref(&())).await;
    }
}
