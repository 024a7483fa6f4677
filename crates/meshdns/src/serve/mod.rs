//! `meshdns serve` in two steps: [`plan::resolve`] decides everything from the configuration
//! (pure but for reading the key and certificate files), then [`run`] starts the subsystems the
//! plan names, one small function each, and stops them in order on a signal.

pub mod plan;
mod tls;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use arc_swap::ArcSwap;
use axum::http::HeaderValue;
use meshdns_server::http::{DohState, HttpState, serve_http, serve_https, service};
use meshdns_server::relay::PkarrRelay;
use meshdns_server::tls::Certificates;
use meshdns_server::xfr::Transfers;
use meshdns_server::{
    DnsMetrics, NotifyHandler, Server, ServerConfig, ServerHandle, SharedCatalog, UpdateHandler,
};
use meshdns_sources::manifests::ManifestFeed;
use meshdns_sources::secondary::{NotifyCounts, NotifyPolicy, SecondaryFeed, SecondarySpec};
use meshdns_sources::update::UpdateStore;
use meshdns_sources::{
    BytesFeed, FileKind, FileSources, PkarrDht, PkarrStore, Poker, SourceStatus, WatchHandle,
    spawn_watcher,
};
use meshdns_xfr::Primary;
use meshdns_xfr::update::UpdateCounts;
use meshdns_zone::{Catalog, Name};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::pkarr_http::{DhtLookups, PkarrHttp, PkarrPeers};
use crate::{controller_cmd, telemetry, wait_for_signal};
use meshdns_server::acme::{Challenge, Responders};
use meshdns_server::lookups::Lookups;
use meshdns_server::replicate::Replicator;
use meshdns_server::views::Views;
use meshdns_sources::challenges::Dns01Challenges;
pub use plan::{EXIT_REFUSED, Refused, ServePlan};
use plan::{HttpPlan, KubernetesPlan, TlsPlan};

/// What the sources fill and every listener reads.
struct Shared {
    catalog: SharedCatalog,
    status: Arc<SourceStatus>,
    primary: Arc<Primary>,
    pkarr: Option<Arc<PkarrStore>>,
    /// The zones written by dynamic UPDATE, with the watcher's poke once it runs.
    updates: Option<(Arc<UpdateStore>, Arc<OnceLock<Poker>>)>,
    /// UPDATEs answered, by rcode (reported with update zones).
    update_counts: Arc<UpdateCounts>,
    /// The ACME DNS-01 challenge records (`--acme-challenge dns-01`), with the watcher's poke.
    challenges: Option<(Arc<Dns01Challenges>, Arc<OnceLock<Poker>>)>,
    metrics: Arc<DnsMetrics>,
    /// Split horizon (`--view`): each view's catalog, and its query counts.
    views: Option<Arc<Views>>,
}

/// The inputs fed from outside the watcher thread.
struct Feeds {
    secondaries: Vec<(Arc<SecondaryFeed>, SecondarySpec)>,
    /// NOTIFY requests answered for the secondary zones, by outcome.
    notify: Arc<NotifyCounts>,
    configmaps: Vec<(meshdns_kube::serve::configmap::ConfigMapKey, Arc<BytesFeed>)>,
    /// The cluster's objects (`--kubernetes`), with what is signalled when they are served.
    kubernetes: Option<(Arc<ManifestFeed>, Arc<Notify>)>,
}

/// Where long-running tasks are spawned and stopped.
struct Tasks {
    shutdown: CancellationToken,
    tracker: TaskTracker,
}

/// Runs `serve` from `plan` until SIGTERM or SIGINT.
pub async fn run(mut plan: ServePlan) -> Result<()> {
    for warning in &plan.warnings {
        warn!("{warning}");
    }
    let shared = open_stores(&plan)?;
    let feeds = feeds(&plan);
    let (mut sources, pkarr_poker) = sources(&plan, &shared, &feeds);
    // The first snapshot is in place before the first socket is bound.
    sources.refresh();
    if let Err(reason) = shared.status.readiness() {
        warn!(%reason, "starting without every records file; /readyz reports 503 until they load");
    }
    let http01 = Arc::new(meshdns_server::acme::Http01Tokens::default());
    // DNS-01 records are awaited here and on every secondary NOTIFYd, which the CA may ask.
    let secondaries = plan.transfers.as_ref().map_or_else(Vec::new, |t| {
        t.notify.iter().map(|n| n.address.clone()).collect()
    });
    let responders = Responders {
        http01: http01.clone(),
        dns01: shared
            .challenges
            .as_ref()
            .map(|(store, _)| tls::own_answers(store.clone(), shared.catalog.clone(), secondaries)),
    };
    let tls = tls::certificates(plan.tls.take(), responders)?;
    let certs = tls.as_ref().map(|t| t.certs.clone());
    let transfers = plan.transfers.as_ref().map(|t| {
        let transfers = Transfers::new(
            shared.primary.clone(),
            t.policy.clone(),
            t.allow.clone(),
            t.max_concurrent,
        );
        Arc::new(match &shared.views {
            Some(views) => transfers.with_views(views.clone(), t.view_keys.clone()),
            None => transfers,
        })
    });
    let tasks = Tasks {
        shutdown: CancellationToken::new(),
        tracker: TaskTracker::new(),
    };
    let dht = start_dht(&plan, &shared, &tasks)?;
    let server = bind_dns(
        &plan,
        &shared,
        &feeds,
        transfers.clone(),
        certs.clone(),
        dht.clone(),
    )
    .await?;
    let watcher = spawn_watcher(sources).context("cannot start the file watcher")?;
    if let Some(poker) = &pkarr_poker {
        let _ = poker.set(watcher.poker());
        // The store calls its hook once until the changes are taken: a publish between the
        // watcher's first check and now called it with no one to poke.
        watcher.poker().poke();
    }
    for poker in [
        &shared.updates.as_ref().map(|u| &u.1),
        &shared.challenges.as_ref().map(|c| &c.1),
    ]
    .into_iter()
    .flatten()
    {
        let _ = poker.set(watcher.poker());
    }
    let secondary_feeds: Vec<Arc<SecondaryFeed>> =
        feeds.secondaries.iter().map(|(f, _)| f.clone()).collect();
    let notify_counts = feeds.notify.clone();
    spawn_secondaries(feeds.secondaries, &plan, &watcher, &tasks);
    if let (Some(t), Some(transfers)) = (&plan.transfers, &transfers) {
        spawn_notify(&t.notify, transfers, &tasks);
    }
    spawn_configmaps(feeds.configmaps, &plan, &watcher, &tasks).await?;
    if let (Some(k), Some(feed)) = (&plan.kubernetes, feeds.kubernetes) {
        spawn_kubernetes(k, &plan, feed, &watcher, &tasks).await?;
    }
    let replicator = match (&plan.replication, &shared.pkarr) {
        (Some(config), Some(store)) => Some(
            Replicator::new(
                Arc::new(PkarrPeers {
                    store: store.clone(),
                }),
                config.clone(),
            )
            .context("cannot start pkarr replication")?,
        ),
        _ => None,
    };
    let state = http_state(
        &plan.http,
        &shared,
        transfers,
        (secondary_feeds, notify_counts),
        (&certs, &http01),
        (replicator.clone(), dht.clone()),
        &plan,
    );
    let (http_addr, https_addr) =
        serve_http_listeners(&plan.http, state, &certs, &shared, &tasks).await?;
    // Peers are pushed to and read from once this replica answers them too.
    if let Some(r) = &replicator {
        r.start(tasks.shutdown.clone());
    }
    spawn_republish(&plan, &shared, dht.as_ref(), replicator.as_ref(), &tasks);
    // Renewal starts once the listeners a CA validates through are up.
    if let Some(tls) = tls {
        tls.spawn_renewal(&tasks.tracker, &tasks.shutdown);
    }
    log_ready(&server, http_addr, https_addr);

    wait_for_signal().await;
    let grace = plan.shutdown_grace;
    info!(grace_ms = grace.as_millis() as u64, "shutting down");
    server.shutdown();
    tasks.shutdown.cancel();
    // Connections in progress and tasks get `grace` to finish; whatever is left (a client that
    // never reads its reply) is dropped with the process. The watcher stops on a bound of its
    // own, whatever the connections did: its last pass stamps the serials of publishes
    // already acknowledged.
    let stopped = tokio::time::timeout(grace, async move {
        server.join().await;
        tasks.tracker.close();
        tasks.tracker.wait().await;
    })
    .await;
    let watcher_stopped =
        tokio::time::timeout(grace, tokio::task::spawn_blocking(move || watcher.stop())).await;
    // The pkarr writer's last commit (what the next start needs) is waited for here: the
    // store's last holder may be a task the runtime drops after this returns.
    let pkarr_closed = match shared.pkarr.clone() {
        Some(store) => {
            tokio::time::timeout(grace, tokio::task::spawn_blocking(move || store.close()))
                .await
                .is_ok()
        }
        None => true,
    };
    match (stopped, watcher_stopped, pkarr_closed) {
        (Ok(()), Ok(_), true) => info!("stopped"),
        _ => warn!(
            grace_ms = grace.as_millis() as u64,
            "stopped with work still in progress after --shutdown-grace; it is dropped"
        ),
    }
    Ok(())
}

/// The Mainline DHT node, when `--pkarr-dht` is on: keys the store lacks are looked up there.
fn start_dht(plan: &ServePlan, shared: &Shared, tasks: &Tasks) -> Result<Option<Arc<PkarrDht>>> {
    let (Some(config), Some(store)) = (&plan.dht, &shared.pkarr) else {
        return Ok(None);
    };
    let dht = PkarrDht::start(
        config.clone(),
        store.overlay().clone(),
        tasks.shutdown.clone(),
    )
    .with_context(|| format!("cannot bind the DHT node to {}", config.bind))?;
    // The address it bound (its port, when the crate or the kernel chose it).
    let bootstrap = config.bootstrap.clone().unwrap_or_default();
    let bound = dht.clone();
    tokio::spawn(async move {
        let addr = bound.local_addr().await;
        info!(%addr, ?bootstrap, "Mainline DHT node started");
    });
    Ok(Some(dht))
}

/// `--pkarr-dht-republish`: every stored packet read and put again once per interval; a newer
/// one found in the DHT is stored and pushed to the peers as a publish taken here would be.
fn spawn_republish(
    plan: &ServePlan,
    shared: &Shared,
    dht: Option<&Arc<PkarrDht>>,
    replicator: Option<&Arc<Replicator>>,
    tasks: &Tasks,
) {
    let (Some(dht), Some(store), Some(every)) = (
        dht,
        &shared.pkarr,
        plan.dht.as_ref().and_then(|d| d.republish),
    ) else {
        return;
    };
    let replicator = replicator.cloned();
    let on_stored = Arc::new(move |key: [u8; 32], seq: u64, payload: Vec<u8>| {
        if let Some(r) = replicator.clone() {
            tokio::spawn(async move {
                let _ = r.publish(key, seq, &payload).await;
            });
        }
    });
    info!(
        every_s = every.as_secs(),
        "republishing stored pkarr packets to the DHT"
    );
    tasks.tracker.spawn(dht.clone().republish(
        store.clone(),
        every,
        on_stored,
        tasks.shutdown.clone(),
    ));
}

/// The catalog, the zone-transfer primary (serials kept in the data directory), the pkarr
/// store and the DNS counters.
fn open_stores(plan: &ServePlan) -> Result<Shared> {
    if let Some(dir) = &plan.data_dir {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the data directory {}", dir.display()))?;
    }
    let primary = Arc::new(Primary::new(
        plan.data_dir.as_deref(),
        plan.journal_records,
        plan.transfers.is_some(),
    ));
    let pkarr = match &plan.pkarr {
        None => None,
        Some(config) => {
            let dir = config.data_dir.clone().unwrap_or_default();
            let store = PkarrStore::open(config.clone())
                .with_context(|| format!("cannot open the pkarr store in {}", dir.display()))?;
            Some(Arc::new(store))
        }
    };
    let updates = match &plan.updates {
        None => None,
        Some(u) => {
            let dir = plan.data_dir.clone().unwrap_or_default();
            let store = UpdateStore::open(&dir, &u.zones, u.max_records)
                .map_err(|e| anyhow::anyhow!("cannot open the update zones' journals: {e}"))?;
            // An UPDATE comes whole, and its reply waits for the snapshot: no debounce.
            let (poker, poke) = poke_now_hook();
            store.on_change(poke);
            info!(zones = u.zones.len(), "dynamic UPDATE on");
            Some((store, poker))
        }
    };
    let challenges = plan.tls.as_ref().and_then(|t| match t {
        TlsPlan::Acme(config, _) if config.challenge == Challenge::Dns01 => {
            let store = Arc::new(Dns01Challenges::default());
            // The ACME client waits for the record to be served: no debounce.
            let (poker, poke) = poke_now_hook();
            store.on_change(poke);
            Some((store, poker))
        }
        _ => None,
    });
    Ok(Shared {
        update_counts: Arc::default(),
        catalog: Arc::new(ArcSwap::from_pointee(Catalog::empty())),
        status: Arc::new(SourceStatus::default()),
        primary,
        pkarr,
        updates,
        challenges,
        metrics: Arc::new(DnsMetrics::default()),
        views: (!plan.server.views.is_empty()).then(|| {
            Arc::new(Views::new(plan.server.views.clone(), |name| {
                // Each view's serial book (and, with transfers, its journals) beside the
                // default's, in the data directory.
                let dir = plan.data_dir.as_ref().map(|d| d.join("views").join(name));
                if let Some(dir) = &dir
                    && let Err(e) = std::fs::create_dir_all(dir)
                {
                    warn!(dir = %dir.display(), error = %e, "cannot create a view's directory; its serials are not kept");
                }
                Primary::new(
                    dir.as_deref(),
                    plan.journal_records,
                    plan.transfers.is_some(),
                )
            }))
        }),
    })
}

/// A cell for the watcher's poker (set once it runs), and a hook that pokes it at once: for
/// inputs that come whole and whose callers wait until they are served.
fn poke_now_hook() -> (Arc<OnceLock<Poker>>, impl Fn() + Send + Sync + 'static) {
    let poker = Arc::new(OnceLock::<Poker>::new());
    let p = poker.clone();
    (poker, move || {
        if let Some(p) = p.get() {
            p.poke_now();
        }
    })
}

fn feeds(plan: &ServePlan) -> Feeds {
    let secondaries = plan
        .secondaries
        .iter()
        .map(|spec| (SecondaryFeed::new(&spec.origin), spec.clone()))
        .collect();
    let configmaps = plan
        .configmaps
        .iter()
        .map(|key| (key.clone(), BytesFeed::new(&key.to_string())))
        .collect();
    let kubernetes = plan.kubernetes.as_ref().map(|k| {
        let feed = ManifestFeed::new("kubernetes");
        // Signalled from the watcher thread when a snapshot serving new objects is live.
        let notify = Arc::new(Notify::new());
        if k.status_lease.is_some() {
            let n = notify.clone();
            feed.on_served(move || n.notify_one());
        }
        (feed, notify)
    });
    Feeds {
        secondaries,
        notify: Arc::default(),
        configmaps,
        kubernetes,
    }
}

/// The watcher's inputs in precedence order: files, ConfigMap keys, the cluster's objects,
/// secondary zones, pkarr. Also the cell the pkarr store pokes the watcher through, once it
/// runs: a burst of publishes becomes one new serial of the origins.
fn sources(
    plan: &ServePlan,
    shared: &Shared,
    feeds: &Feeds,
) -> (FileSources, Option<Arc<OnceLock<Poker>>>) {
    let mut sources = FileSources::new(
        plan.sources.clone(),
        shared.catalog.clone(),
        shared.status.clone(),
    )
    .with_primary(shared.primary.clone());
    if let Some(views) = &shared.views {
        let outs = views
            .outs()
            .into_iter()
            .map(|(name, catalog, primary)| meshdns_sources::watch::ViewOut {
                primary,
                name,
                catalog,
            })
            .collect();
        sources = sources.with_views(outs);
    }
    if let Some((feed, _)) = &feeds.kubernetes {
        sources = sources.with_feed(feed.clone());
    }
    for (_, feed) in &feeds.configmaps {
        sources = sources.with_bytes(feed.clone(), FileKind::Auto);
    }
    for (feed, _) in &feeds.secondaries {
        feed.load_kept(plan.data_dir.as_deref());
        sources = sources.with_secondary(feed.clone());
    }
    if let Some((store, _)) = &shared.updates {
        sources = sources.with_updates(store.clone());
    }
    if let Some((store, _)) = &shared.challenges {
        sources = sources.with_challenges(store.clone());
    }
    let Some(store) = &shared.pkarr else {
        return (sources, None);
    };
    let poker = Arc::new(OnceLock::<Poker>::new());
    let p = poker.clone();
    store.track_changes(move || {
        if let Some(p) = p.get() {
            p.poke();
        }
    });
    // Only transfers keep a second index of the keys: without them, no copy at start-up. The
    // keys stored are known before the first snapshot, so a restart keeps the serial.
    if plan.transfers.is_some() {
        let set: meshdns_xfr::content::PublishedSet =
            store.overlay().entries().into_iter().collect();
        // Each view's primary keeps the keys too: a pkarr origin a view changes is
        // transferred from it (a copy per view).
        for (_, _, primary) in shared.views.iter().flat_map(|v| v.outs()) {
            primary.load_published(set.clone());
        }
        shared.primary.load_published(set);
    }
    (sources.with_pkarr(store.clone()), Some(poker))
}

/// UPDATEs applied or waiting to be served at once (each on a blocking thread).
const UPDATES_IN_FLIGHT: usize = 32;

/// Gives back one place of an in-flight count when dropped.
struct Release<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Each key's UPDATE budgets. Accepted UPDATEs: a burst of twice the rate, then the rate (one
/// key cannot hold the writer: each accepted UPDATE is synced to disk before its reply). And
/// the UPDATEs naming the key let through to be checked: twice as many (so as many again are
/// answered REFUSED), taken before the signature is checked, so a flood of one key's UPDATEs
/// queues no more than that whatever the queue's delay. Past it a datagram is dropped at the
/// cost of a parse (over TCP, its connection closed). The name is not verified by then: forged datagrams naming
/// a key take its places too (its client then sees timeouts rather than REFUSED once over its
/// rate); names never verified have no budget and are all checked, as before.
struct KeyRates {
    rate: f64,
    burst: f64,
    keys: std::sync::Mutex<std::collections::HashMap<Name, Budget>>,
}

/// One key's tokens: to accept, to let a datagram through, and when they were last refilled.
#[derive(Clone, Copy)]
struct Budget {
    accept: f64,
    checks: f64,
    at: Instant,
}

impl KeyRates {
    fn new(rate: u32) -> KeyRates {
        let rate = f64::from(rate);
        KeyRates {
            rate,
            burst: 2.0 * rate,
            keys: std::sync::Mutex::default(),
        }
    }

    /// Refills `b` to now.
    fn refill(&self, b: &mut Budget) {
        let now = Instant::now();
        let gained = now.saturating_duration_since(b.at).as_secs_f64() * self.rate;
        b.accept = (b.accept + gained).min(self.burst);
        b.checks = (b.checks + 2.0 * gained).min(2.0 * self.burst);
        b.at = now;
    }

    /// Takes one of `key`'s tokens to accept a verified UPDATE; `false`: none left (REFUSED).
    fn accept(&self, key: &Name) -> bool {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let b = keys.entry(key.clone()).or_insert(Budget {
            accept: self.burst,
            checks: 2.0 * self.burst,
            at: Instant::now(),
        });
        self.refill(b);
        let taken = b.accept >= 1.0;
        if taken {
            b.accept -= 1.0;
        }
        taken
    }

    /// Whether a datagram naming `key` (not verified yet) is dropped: the key has had its
    /// checks for now (one is taken if not). A key never verified has no entry, and none is
    /// made for it.
    fn drops(&self, key: &Name) -> bool {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let Some(b) = keys.get_mut(key) else {
            return false;
        };
        self.refill(b);
        if b.checks >= 1.0 {
            b.checks -= 1.0;
            return false;
        }
        true
    }
}

/// Answers dynamic UPDATE (RFC 2136) for the update zones: each request checked by
/// `meshdns_xfr::update::respond` (TSIG, grant, rate, prerequisites), applied durably, and
/// answered once a snapshot holding it is live (at most 2 s later), so a query after the reply
/// sees it. A datagram naming a key past twice its rate is dropped before it is queued
/// ([`KeyRates`]).
fn update_handler(
    plan: &crate::serve::plan::UpdatePlan,
    store: Arc<UpdateStore>,
    catalog: SharedCatalog,
    counts: Arc<UpdateCounts>,
) -> UpdateHandler {
    use meshdns_xfr::update::ZoneIs;
    let policy = plan.policy.clone();
    let rates = Arc::new(KeyRates::new(plan.rate));
    let drops = {
        let (rates, counts) = (rates.clone(), counts.clone());
        Arc::new(move |packet: &[u8]| {
            let drops = meshdns_xfr::update::signer(packet).is_some_and(|key| rates.drops(&key));
            if drops {
                counts.drop_one();
            }
            drops
        })
    };
    // UPDATEs being applied or waiting to be served at once, over UDP and TCP: beyond, REFUSED
    // (each holds a blocking thread for up to the wait).
    let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let answer = NotifyHandler(Arc::new(move |packet, peer| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let zone_is = |zone: &[u8]| {
            if store.has(zone) {
                return ZoneIs::Updatable;
            }
            let served = Name::from_wire(zone).is_some_and(|n| catalog.load().zone(&n).is_some());
            if served {
                ZoneIs::ServedOtherwise
            } else {
                ZoneIs::NotServed
            }
        };
        // Held from admission to the reply: only UPDATEs within their key's rate count, so a
        // flood refused by its rate never takes the places of other keys' UPDATEs.
        let mut place = None;
        let admit = |key: &Name| {
            if !rates.accept(key) {
                return false;
            }
            let taken = in_flight.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            place = Some(Release(&in_flight));
            taken < UPDATES_IN_FLIGHT
        };
        let apply = |req: &meshdns_xfr::update::Request| match store.update(req) {
            Ok(Some(version)) => {
                store.wait_served(version, Duration::from_secs(2));
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(rc) => Err(rc),
        };
        let (reply, rcode) =
            meshdns_xfr::update::respond(&policy, packet, now, zone_is, admit, apply)?;
        counts.add(rcode);
        info!(%peer, rcode, "UPDATE answered");
        Some(reply)
    }));
    UpdateHandler { answer, drops }
}

/// Binds the DNS listeners (UDP, TCP, DoT). With the default addresses, IPv6 is optional.
async fn bind_dns(
    plan: &ServePlan,
    shared: &Shared,
    feeds: &Feeds,
    transfers: Option<Arc<Transfers>>,
    certs: Option<Arc<Certificates>>,
    dht: Option<Arc<PkarrDht>>,
) -> Result<ServerHandle> {
    let p = &plan.server;
    let notify = (!feeds.secondaries.is_empty()).then(|| {
        let policy = NotifyPolicy {
            zones: feeds
                .secondaries
                .iter()
                .map(|(f, spec)| (f.clone(), spec.key.clone()))
                .collect(),
            allow: plan.allow_notify.clone(),
            counts: feeds.notify.clone(),
        };
        NotifyHandler(Arc::new(move |packet, peer| {
            meshdns_sources::secondary::answer_notify(&policy, packet, peer)
        }))
    });
    let update = match (&plan.updates, &shared.updates) {
        (Some(u), Some((store, _))) => Some(update_handler(
            u,
            store.clone(),
            shared.catalog.clone(),
            shared.update_counts.clone(),
        )),
        _ => None,
    };
    let rrl = p.rrl.clone().map(|config| {
        info!(rate = config.rate, "response rate limiting on (UDP)");
        Arc::new(meshdns_server::rrl::Rrl::new(config))
    });
    if let Some(nsid) = p.answer.nsid {
        let nsid = String::from_utf8_lossy(nsid);
        info!(%nsid, "NSID (RFC 5001) to queries that ask, and Meshdns-Nsid over HTTP");
    }
    let mut config = ServerConfig {
        listen: p.listen.clone(),
        udp_sockets: p.udp_sockets,
        tcp_idle_timeout: p.tcp_idle_timeout,
        tcp_max_connections: p.tcp_max_connections,
        answer: p.answer,
        transfers,
        notify,
        update,
        dot: p.dot.clone(),
        tls: certs,
        rrl,
        lookups: dht.map(|d| Arc::new(DhtLookups(d)) as Arc<dyn Lookups>),
        views: shared.views.clone(),
        ..ServerConfig::default()
    };
    let (catalog, metrics) = (shared.catalog.clone(), shared.metrics.clone());
    let first = Server::bind(config.clone(), catalog.clone(), metrics.clone()).await;
    match (first, p.ipv4_fallback) {
        (Ok(server), _) => Ok(server),
        // Any other bind error (a DoT port in use) fails the retry too.
        (Err(e), Some(v4)) => {
            let all = p.listen.iter().map(ToString::to_string).collect::<Vec<_>>();
            warn!(error = %e, "cannot listen with {}; trying IPv4 only", all.join(","));
            config.listen = vec![v4];
            Ok(Server::bind(config, catalog, metrics).await?)
        }
        (Err(e), None) => Err(e.into()),
    }
}

fn spawn_secondaries(
    secondaries: Vec<(Arc<SecondaryFeed>, SecondarySpec)>,
    plan: &ServePlan,
    watcher: &WatchHandle,
    tasks: &Tasks,
) {
    for (feed, spec) in secondaries {
        let poker = watcher.poker();
        feed.on_change(move || poker.poke_now());
        info!(zone = %spec.origin, primary = %spec.primary, "secondary zone");
        tasks.tracker.spawn(meshdns_sources::secondary::run(
            feed,
            spec,
            plan.data_dir.clone(),
            tasks.shutdown.clone(),
        ));
    }
}

fn spawn_notify(
    targets: &[meshdns_server::xfr::NotifyTarget],
    transfers: &Arc<Transfers>,
    tasks: &Tasks,
) {
    for target in targets {
        info!(target = %target.address, "sending NOTIFY on every serial change");
        tasks.tracker.spawn(meshdns_server::xfr::notify_loop(
            transfers.clone(),
            target.clone(),
            tasks.shutdown.clone(),
        ));
    }
}

/// ConfigMap keys read through the API: after the files, before the cluster's objects.
async fn spawn_configmaps(
    configmaps: Vec<(meshdns_kube::serve::configmap::ConfigMapKey, Arc<BytesFeed>)>,
    plan: &ServePlan,
    watcher: &WatchHandle,
    tasks: &Tasks,
) -> Result<()> {
    if configmaps.is_empty() {
        return Ok(());
    }
    let client = controller_cmd::client(plan.kubeconfig.as_deref())
        .await
        .context("--configmap")?;
    for (key, feed) in configmaps {
        let poker = watcher.poker();
        info!(source = %key, "watching");
        tasks.tracker.spawn(meshdns_kube::serve::configmap::watch(
            client.clone(),
            key,
            feed,
            move || poker.poke(),
            tasks.shutdown.clone(),
        ));
    }
    Ok(())
}

/// The cluster's DNSZones and DNSRecordSets, reflected into the watcher; their status written
/// by the Lease's holder when asked.
async fn spawn_kubernetes(
    k: &KubernetesPlan,
    plan: &ServePlan,
    (feed, served): (Arc<ManifestFeed>, Arc<Notify>),
    watcher: &WatchHandle,
    tasks: &Tasks,
) -> Result<()> {
    let client = controller_cmd::client(plan.kubeconfig.as_deref())
        .await
        .context("--kubernetes")?;
    info!(
        namespace = k.namespace.as_deref().unwrap_or("(all)"),
        "watching DNSZones and DNSRecordSets"
    );
    if let Some((namespace, name)) = &k.status_lease {
        let election = meshdns_kube::leader::Election::new(namespace, name);
        info!(lease = %election.name, namespace = %election.namespace, "status writing on");
        tasks
            .tracker
            .spawn(meshdns_kube::serve::status::write_statuses(
                client.clone(),
                feed.clone(),
                served,
                election,
                tasks.shutdown.clone(),
            ));
    }
    let poker = watcher.poker();
    tasks.tracker.spawn(meshdns_kube::serve::records::reflect(
        client,
        k.namespace.clone(),
        k.kinds.clone(),
        feed,
        move || poker.poke(),
        tasks.shutdown.clone(),
    ));
    Ok(())
}

/// What the HTTP and HTTPS routers serve.
fn http_state(
    http: &HttpPlan,
    shared: &Shared,
    transfers: Option<Arc<Transfers>>,
    (secondaries, notify): (Vec<Arc<SecondaryFeed>>, Arc<NotifyCounts>),
    (certs, http01): (
        &Option<Arc<Certificates>>,
        &Arc<meshdns_server::acme::Http01Tokens>,
    ),
    (replicator, dht): (Option<Arc<Replicator>>, Option<Arc<PkarrDht>>),
    plan: &ServePlan,
) -> HttpState {
    let metrics = {
        let updates = plan.updates.is_some().then(|| shared.update_counts.clone());
        let views = shared.views.clone();
        let (metrics, catalog, status, pkarr, certs, replication, dht) = (
            shared.metrics.clone(),
            shared.catalog.clone(),
            shared.status.clone(),
            shared.pkarr.clone(),
            certs.clone(),
            replicator.clone(),
            dht.clone(),
        );
        Arc::new(move || {
            telemetry::render(&telemetry::Sources {
                dns: &metrics,
                catalog: &catalog.load(),
                status: &status,
                pkarr: pkarr.as_deref(),
                transfers: transfers.as_deref(),
                secondaries: &secondaries,
                notify: &notify,
                updates: updates.as_deref(),
                tls: certs.as_deref(),
                replication: replication.as_deref(),
                dht: dht.as_deref(),
                views: views.as_deref(),
            })
        }) as meshdns_server::http::MetricsFn
    };
    let status = shared.status.clone();
    let caught_up = replicator.clone();
    // Which replica answered, on /dns-query and /pkarr: the NSID DNS replies carry when asked.
    let nsid = plan
        .server
        .answer
        .nsid
        .and_then(|text| HeaderValue::from_bytes(text).ok());
    HttpState {
        metrics,
        // Every records file loaded, and the pkarr catch-up from the peers done.
        readiness: Arc::new(move || {
            status
                .readiness()
                .and_then(|()| caught_up.as_ref().map_or(Ok(()), |r| r.readiness()))
        }),
        pkarr: shared.pkarr.clone().map(|store| {
            Arc::new(PkarrHttp {
                store,
                replicator: replicator.clone(),
                dht: dht.clone(),
                nsid: nsid.clone(),
            }) as Arc<dyn PkarrRelay>
        }),
        replication: replicator,
        trusted_proxies: http.trusted_proxies.clone().into(),
        acme_http01: http.acme_http01.then(|| http01.clone()),
        doh: http.doh.then(|| DohState {
            catalog: shared.catalog.clone(),
            metrics: shared.metrics.clone(),
            answer: plan.server.answer,
            nsid,
            lookups: dht
                .clone()
                .map(|d| Arc::new(DhtLookups(d)) as Arc<dyn Lookups>),
            views: shared.views.clone(),
        }),
    }
}

/// Binds `--http` and `--https`; returns their addresses.
async fn serve_http_listeners(
    http: &HttpPlan,
    state: HttpState,
    certs: &Option<Arc<Certificates>>,
    shared: &Shared,
    tasks: &Tasks,
) -> Result<(Option<std::net::SocketAddr>, Option<std::net::SocketAddr>)> {
    let (metrics, shutdown, tracker) = (&shared.metrics, &tasks.shutdown, &tasks.tracker);
    let http_addr = match http.http {
        Some(addr) => Some(
            serve_http(
                addr,
                service(state.clone(), true),
                http.limits,
                metrics.clone(),
                shutdown.clone(),
                tracker,
            )
            .await
            .with_context(|| format!("cannot serve HTTP on {addr}"))?,
        ),
        None => None,
    };
    let https_addr = match (http.https, certs) {
        (Some(addr), Some(certs)) => Some(
            serve_https(
                addr,
                service(state, false),
                certs.clone(),
                http.limits,
                metrics.clone(),
                shutdown.clone(),
                tracker,
            )
            .await
            .with_context(|| format!("cannot serve HTTPS on {addr}"))?,
        ),
        _ => None,
    };
    Ok((http_addr, https_addr))
}

fn log_ready(
    server: &ServerHandle,
    http: Option<std::net::SocketAddr>,
    https: Option<std::net::SocketAddr>,
) {
    let dns: Vec<String> = server.udp_addrs().iter().map(ToString::to_string).collect();
    let dot: Vec<String> = server.dot_addrs().iter().map(ToString::to_string).collect();
    let shown = |a: Option<std::net::SocketAddr>| a.map_or("off".to_string(), |a| a.to_string());
    info!(
        dns = %dns.join(","),
        http = %shown(http),
        https = %shown(https),
        dot = %if dot.is_empty() { "off".to_string() } else { dot.join(",") },
        "meshdns ready"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_gets_twice_its_rate_checked_and_an_unknown_one_all() {
        let rates = KeyRates::new(1);
        let name = |s: &str| Name::parse(s, None).unwrap();
        let (key, stranger) = (name("upd."), name("x."));
        assert!(!rates.drops(&key), "never verified: no budget, checked");
        assert!(
            rates.accept(&key) && rates.accept(&key),
            "the burst: twice the rate"
        );
        assert!(!rates.accept(&key), "then refused");
        // Four datagrams (twice the burst) are let through to be checked, however many are
        // accepted meanwhile; the rest are dropped.
        let through = (0..20).filter(|_| !rates.drops(&key)).count();
        assert_eq!(through, 4);
        // Unknown names are never dropped, and get no entry.
        assert!((0..20).all(|_| !rates.drops(&stranger)));
        assert!(!rates.keys.lock().unwrap().contains_key(&stranger));
        // Half a second later, a check is back (checks come at twice the rate).
        std::thread::sleep(Duration::from_millis(500));
        assert!(!rates.drops(&key), "a check is back");
    }
}
