//! Watching the sources of records and publishing new snapshots.
//!
//! Each kind of input is its own type behind the [`source::Input`] trait: a file on disk
//! ([`file`]: records file, zone file), a manifests directory read file by file
//! ([`manifests`]), a ConfigMap key read through the API
//! ([`configmap`]), DNSZones and DNSRecordSets from a cluster ([`objects`]), a zone transferred
//! from a primary ([`secondary`]) and the pkarr store ([`pkarr`]). Each knows how to tell
//! whether it has a new version and how to read it. What they share lives in [`source`]: the
//! last good content each source keeps, its counters, and the steps several take alike. This
//! module is the loop around them: it checks every input, publishes a snapshot when any
//! changed, keeps readiness and counters ([`health`]), and runs the watcher thread.
//!
//! A file can change in many ways, and each must show up within a second:
//! - kubelet's atomic update of a mounted ConfigMap: a new `..<timestamp>` directory, then the
//!   `..data` symlink renamed over (the file itself is a symlink through `..data`);
//! - an editor's write to a temporary file renamed over the original;
//! - an in-place write; deletion and re-creation.
//!
//! So we watch each file's *directory* (inotify, non-recursive), not the file: every one of
//! those shows up there. Any event starts a short debounce (bursts of events become one reload),
//! then each file's identity (device, inode, size, mtime) is compared with the last one read,
//! and only files that changed are read, hashed and parsed. A poll at `poll_interval` repeats the
//! same check, for filesystems without inotify and for a watched directory that was replaced.
//!
//! Each source keeps its last good content: a file that cannot be used (missing, unreadable,
//! not JSON/YAML, wrong version, zone file syntax error) leaves its previous records serving.
//! The catalog is rebuilt aside on this thread and swapped in whole; queries never see half a
//! reload.

mod challenges;
mod configmap;
mod file;
mod health;
mod manifests;
mod objects;
mod pkarr;
mod secondary;
mod source;
mod update;

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use meshdns_xfr::Primary;
use meshdns_zone::{BuildDefaults, Catalog, Name};
use notify::Watcher as _;
use tracing::{debug, info, warn};

pub use self::health::{ObjectCounts, SourceCounters, SourceStatus};
use self::source::{Input, Kept, Loader, Rank, Reported, log_skipped, unix_now};
use crate::content::{FileKind, ParseSettings, Problem};
use crate::feed::BytesFeed;
use crate::manifests::ManifestFeed;
use crate::pkarr::PkarrStore;
use crate::secondary::SecondaryFeed;
use crate::snapshot::{CompiledSource, SourceInput, assemble};

/// One records file to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSource {
    /// Where it is; relative paths are relative to the working directory.
    pub path: PathBuf,
    /// How to read it.
    pub kind: FileKind,
}

/// Everything the file sources need to know.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// Files, in precedence order.
    pub files: Vec<FileSource>,
    /// Zones served even when no file gives them records (`--zone`).
    pub zones: Vec<Name>,
    /// The zones meshdns makes itself: reverse zones (`--reverse-zone`), the catalog zone
    /// (`--catalog-zone`).
    pub generated: crate::snapshot::Generated,
    /// Parsing settings (default TTL, Tailscale zones).
    pub settings: ParseSettings,
    /// How often files are checked without an inotify event.
    pub poll_interval: Duration,
    /// Quiet time that ends a burst of events.
    pub debounce: Duration,
}

/// Gives the zones of `view` that are `default`'s own (the same `Arc`) `default`'s serials;
/// returns the others, as a catalog (with their overlays) for the view's serial book. A zone
/// the view's book decides already (`held`) stays there even when it is shared again: its
/// serial must never go back to the shared one, which may be lower than what the view's
/// secondaries have.
fn shared_serials(view: &mut Catalog, default: &Catalog, held: &dyn Fn(&Name) -> bool) -> Catalog {
    let origins: Vec<Name> = view.zones().iter().map(|z| z.origin().clone()).collect();
    let mut own = Vec::new();
    for origin in &origins {
        let Some(zone) = view.zone(origin).cloned() else {
            continue;
        };
        match (default.zone(origin), default.get(origin)) {
            (Some(d), Some(found)) if Arc::ptr_eq(d, &zone) && !held(origin) => {
                view.set_serial(origin, found.serial)
            }
            _ => own.push(zone),
        }
    }
    let mut catalog = Catalog::from_zones(own);
    for origin in &origins {
        if let Some(overlay) = view.overlay(origin) {
            catalog.attach(origin, overlay.clone());
        }
    }
    catalog
}

/// Where one view's catalog is published (`--view`), and what decides its zones' serials.
pub struct ViewOut {
    /// The view's name.
    pub name: String,
    /// Its catalog, which the servers read for its clients.
    pub catalog: Arc<ArcSwap<Catalog>>,
    /// Serials of its zones, kept apart from the default catalog's (a zone a view changes
    /// gets serials of its own), in a serial book of its own.
    pub primary: Arc<Primary>,
}

/// How the pkarr relay's records are named in logs and metrics.
pub const PKARR_LABEL: &str = "pkarr";
/// Messages the watcher thread may have queued; more pokes are dropped (one pending check
/// already covers them).
const POKES: usize = 64;

/// One source of records: what it reads, and what it keeps from the last load.
/// [`FileSources`] keeps them in one list, in precedence order.
struct Source {
    kept: Kept,
    input: Box<dyn Input>,
}

impl Source {
    fn new(label: String, input: impl Input + 'static) -> Source {
        Source {
            kept: Kept::new(label),
            input: Box::new(input),
        }
    }
}

/// The file sources: their last good contents and the snapshot they publish.
pub struct FileSources {
    config: SourceConfig,
    /// Files, then ConfigMap keys, secondary zones, live feeds, and the pkarr store: the order
    /// in which a (name, type) given twice is won.
    sources: Vec<Source>,
    /// What every load needs (settings, the build serial).
    loader: Loader,
    /// Records refused by precedence at the last publish.
    refused: Reported,
    published: Arc<ArcSwap<Catalog>>,
    /// Each view's catalog (split horizon), in the order configured: the data every view
    /// sees and that view's own; with the serials of its zones.
    views: Vec<ViewOut>,
    status: Arc<SourceStatus>,
    /// Decides the serials served and keeps what zone transfers send.
    primary: Option<Arc<Primary>>,
    /// The pkarr store, whose publishes get serials in batches.
    pkarr: Option<Arc<PkarrStore>>,
    /// When publishes were last stamped, and whether some wait for the next stamp.
    stamped: Option<Instant>,
    stamp_due: bool,
}

/// Stamps of pkarr publishes (a serial, the serial book rewritten, a journal entry, NOTIFY)
/// come at most this often; answers do not wait for them, only the SOA serial and transfers.
/// A replica receiving pushes stamped once per push (about 50 a second), and rewriting the
/// serial book each time was 4% of its CPU.
const STAMP_EVERY: Duration = Duration::from_millis(100);

impl FileSources {
    /// Sets up the sources; nothing is read until [`FileSources::refresh`].
    pub fn new(
        config: SourceConfig,
        published: Arc<ArcSwap<Catalog>>,
        status: Arc<SourceStatus>,
    ) -> FileSources {
        let sources = config
            .files
            .iter()
            .map(|f| {
                let label = f.path.display().to_string();
                // A directory is read file by file, whatever kind it was given as.
                if f.kind == FileKind::Manifests || f.path.is_dir() {
                    Source::new(label, manifests::ManifestDir::new(f.path.clone()))
                } else {
                    Source::new(label, file::RecordsFile::new(f.clone()))
                }
            })
            .collect();
        let loader = Loader::new(config.settings.clone(), config.debounce);
        let this = FileSources {
            config,
            sources,
            loader,
            refused: Reported::default(),
            published,
            views: Vec::new(),
            status,
            primary: None,
            pkarr: None,
            stamped: None,
            stamp_due: false,
        };
        this.share_status();
        this
    }

    /// Publishes a catalog for each view too, into its own place (`--view`).
    pub fn with_views(mut self, views: Vec<ViewOut>) -> FileSources {
        self.views = views;
        self
    }

    /// Publishes each view's catalog: assembled from what the view sees (the default's zones,
    /// shared, when no source names views), its serials decided by the view's own `primary`
    /// (a zone shared with the default, or unchanged, costs a pointer compare). Returns the
    /// problems of the views' assembly (records a view refuses, its ALIASes' reports).
    fn publish_views(
        &self,
        inputs: &[SourceInput<'_>],
        generated: &crate::snapshot::Generated,
        defaults: BuildDefaults,
        default: &Arc<Catalog>,
    ) -> Vec<Problem> {
        let tagged = crate::snapshot::has_tagged(inputs);
        let mut problems = Vec::new();
        for view in &self.views {
            let mut catalog = if tagged {
                let (catalog, refused) = crate::snapshot::assemble_view(
                    inputs,
                    &view.name,
                    &self.config.zones,
                    generated,
                    defaults,
                );
                problems.extend(refused);
                catalog
            } else {
                Catalog::clone(default)
            };
            // Zones the view shares with every client's catalog carry that catalog's serials;
            // the view's own book decides only the zones the view changes (no digest of a
            // shared zone per view, which at start was a whole walk of each zone per view).
            let held = |o: &Name| view.primary.version(o).is_some();
            let mut own = shared_serials(&mut catalog, default, &held);
            // A zone the view starts to change goes on from the serial it had when shared.
            let floor = |o: &Name| default.get(o).map(|f| f.serial);
            for (zone, serial) in view
                .primary
                .update_above(&mut own, unix_now() as u32, &floor)
            {
                debug!(view = %view.name, %zone, serial, "zone serial");
            }
            for (origin, serial) in own.serials() {
                catalog.set_serial(origin, serial);
            }
            view.catalog.store(Arc::new(catalog));
            view.primary.record_differences();
            view.primary.announce();
        }
        problems
    }

    /// Decides zone serials with `primary` (content-based, kept across restarts) and keeps
    /// what zone transfers send there.
    pub fn with_primary(mut self, primary: Arc<Primary>) -> FileSources {
        self.primary = Some(primary);
        self
    }

    /// Serves the records of a pkarr relay's store too, after every file's (files win a
    /// (name, type) both give). Publishes are served as the store takes them, without a new
    /// snapshot: the store's overlay is attached under each origin.
    pub fn with_pkarr(mut self, store: Arc<PkarrStore>) -> FileSources {
        self.pkarr = Some(store.clone());
        let source = Source::new(PKARR_LABEL.to_string(), pkarr::PkarrOrigins::new(store));
        self.insert(source)
    }

    /// Serves a zone transferred from a primary (after the files, before the live feeds): its
    /// records as the transfer gave them, nothing once it expired.
    pub fn with_secondary(mut self, feed: Arc<SecondaryFeed>) -> FileSources {
        let label = format!("secondary {}", feed.origin());
        let source = Source::new(label, secondary::SecondaryZone::new(feed));
        // Each secondary zone goes ahead of those added before it (as it always has).
        let at = self.first_at_or_after(Rank::Secondary);
        self.sources.insert(at, source);
        self.share_status();
        self
    }

    /// Adds a ConfigMap key read through the API, after the files (and before the live
    /// manifest feeds and pkarr): read as a file of `kind`. Not ready until its first read.
    pub fn with_bytes(self, feed: Arc<BytesFeed>, kind: FileKind) -> FileSources {
        let label = feed.label().to_string();
        self.insert(Source::new(label, configmap::ConfigMapKey::new(feed, kind)))
    }

    /// Serves the DNSZones and DNSRecordSets a live reader hands over, after the files (a
    /// file's (name, type) wins) and before pkarr publishes. Not ready until the feed's first
    /// set.
    pub fn with_feed(self, feed: Arc<ManifestFeed>) -> FileSources {
        let label = feed.label().to_string();
        self.insert(Source::new(label, objects::ObjectFeed::new(feed)))
    }

    /// Serves the zones written by dynamic UPDATE, after the files and the live feeds (their
    /// (name, type) win) and before pkarr publishes.
    pub fn with_updates(self, store: Arc<crate::update::UpdateStore>) -> FileSources {
        self.insert(Source::new(
            "update".to_string(),
            update::UpdateZones::new(store),
        ))
    }

    /// Serves the ACME DNS-01 challenge records of `store` (`--acme-challenge dns-01`).
    pub fn with_challenges(self, store: Arc<crate::challenges::Dns01Challenges>) -> FileSources {
        self.insert(Source::new(
            "acme".to_string(),
            challenges::Challenges::new(store),
        ))
    }

    /// Places a source after every source of its rank or a lower one.
    fn insert(mut self, source: Source) -> FileSources {
        let rank = source.input.rank();
        let at = self
            .sources
            .iter()
            .position(|s| s.input.rank() > rank)
            .unwrap_or(self.sources.len());
        self.sources.insert(at, source);
        self.share_status();
        self
    }

    /// The position of the first source of `rank` or a later one.
    fn first_at_or_after(&self, rank: Rank) -> usize {
        self.sources
            .iter()
            .position(|s| s.input.rank() >= rank)
            .unwrap_or(self.sources.len())
    }

    /// Checks every file (and the feeds and the pkarr store), loads what changed, and
    /// publishes a new snapshot when anything did (always on the first call). Returns whether
    /// a snapshot was published.
    pub fn refresh(&mut self) -> bool {
        let first = self.loader.first();
        // The first snapshot holds every source; later, a slow parse goes on alone.
        self.loader.wait_all = first;
        let mut changed = false;
        for Source { kept, input } in &mut self.sources {
            changed |= input.check(kept, &mut self.loader);
        }
        if changed || first {
            self.publish();
        }
        self.stamp_published();
        self.update_readiness();
        self.share_status();
        changed || first
    }

    /// Gives pkarr origins a new serial for the keys published (or expired) since the last
    /// stamp: one serial, one journal entry and one NOTIFY for many publishes. Within
    /// [`STAMP_EVERY`] of the last stamp it waits ([`FileSources::wait`] says until when).
    fn stamp_published(&mut self) {
        if let Some(at) = self.stamped
            && at.elapsed() < STAMP_EVERY
        {
            self.stamp_due = true;
            return;
        }
        self.stamp_now();
    }

    /// [`FileSources::stamp_published`] without the wait.
    fn stamp_now(&mut self) {
        self.stamp_due = false;
        let (Some(primary), Some(store)) = (&self.primary, &self.pkarr) else {
            return;
        };
        let changes = store.take_changes();
        if changes.is_empty() {
            return;
        }
        self.stamped = Some(Instant::now());
        let keys = changes.len();
        let mut catalog = Catalog::clone(&self.published.load());
        let stamped = primary.stamp_published(&mut catalog, changes.clone(), unix_now() as u32);
        let catalog = Arc::new(catalog);
        self.published.store(catalog.clone());
        // Each view: the serials of the origins it shares, and its own origins' next ones.
        for view in &self.views {
            let mut own = Catalog::clone(&view.catalog.load());
            shared_serials(&mut own, &catalog, &|o| view.primary.version(o).is_some());
            view.primary
                .stamp_published(&mut own, changes.clone(), unix_now() as u32);
            view.catalog.store(Arc::new(own));
            view.primary.announce();
        }
        primary.announce();
        for (zone, serial) in stamped {
            debug!(%zone, serial, keys, "published keys stamped");
        }
    }

    /// Writes every primary's serial book exactly (a clean stop: no stamp follows).
    fn settle(&self) {
        if let Some(primary) = &self.primary {
            primary.settle();
        }
        for view in &self.views {
            view.primary.settle();
        }
    }

    /// How long the watcher may sleep, at most `poll`: less while publishes wait for a stamp.
    fn wait(&self, poll: Duration) -> Duration {
        match (self.stamp_due, self.stamped) {
            (true, Some(at)) => STAMP_EVERY
                .saturating_sub(at.elapsed())
                .clamp(Duration::from_millis(1), poll.max(Duration::from_millis(1))),
            _ => poll,
        }
    }

    /// Copies the sources' counters to the status the HTTP endpoint reads.
    fn share_status(&self) {
        self.status.lock().sources = self
            .sources
            .iter()
            .map(|s| (s.kept.label.clone(), s.kept.counters.clone()))
            .collect();
    }

    fn publish(&mut self) {
        let started = Instant::now();
        let defaults = self.loader.defaults();
        let empty = CompiledSource::default();
        let inputs: Vec<SourceInput<'_>> = self
            .sources
            .iter()
            .map(|s| SourceInput {
                label: &s.kept.label,
                compiled: s.kept.last_good.as_ref().unwrap_or(&empty),
            })
            .collect();
        // The catalog zone lists the zones served: until every source has loaded, it would
        // list too few, and a consumer removes a zone its catalog drops (RFC 9432). Withheld
        // until then (consumers keep the last one they have).
        let withheld;
        let generated = if self.config.generated.catalog.is_some() && !self.all_loaded() {
            withheld = crate::snapshot::Generated {
                reverse: self.config.generated.reverse.clone(),
                catalog: None,
            };
            &withheld
        } else {
            &self.config.generated
        };
        let (mut catalog, mut refused) = assemble(&inputs, &self.config.zones, generated, defaults);
        let view_names: Vec<String> = self.views.iter().map(|v| v.name.clone()).collect();
        refused.extend(crate::snapshot::unconfigured_views(&inputs, &view_names));
        if let Some(primary) = &self.primary {
            for (zone, serial) in primary.update(&mut catalog, unix_now() as u32) {
                info!(%zone, serial, "zone serial");
            }
        }
        let records = catalog.record_count();
        let zones = catalog.zones().len();
        let live = Arc::new(catalog);
        let old = self.published.swap(live.clone());
        if !self.views.is_empty() {
            for p in self.publish_views(&inputs, generated, defaults, &live) {
                if !refused.contains(&p) {
                    refused.push(p);
                }
            }
        }
        if let Some(primary) = &self.primary {
            primary.record_differences();
            primary.announce();
        }
        // Inputs whose new content this snapshot serves learn so now, that it is live.
        for s in &mut self.sources {
            s.input.published(&mut s.kept, &live, &refused);
        }
        drop(live);
        for p in self.refused.update(&refused) {
            log_skipped(p);
            if let Some(s) = self.sources.iter_mut().find(|s| s.kept.label == p.file) {
                s.kept.counters.skipped_entries += 1;
            }
        }
        info!(
            zones,
            records,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "snapshot published"
        );
        // Free the previous snapshot here, off the query path: wait (briefly) for queries that
        // still read it, so the last reference, and the freeing of a large zone, is ours.
        let deadline = Instant::now() + Duration::from_secs(1);
        while Arc::strong_count(&old) > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(old);
        release_free_memory();
    }

    /// Whether every source has loaded and none holds readiness back.
    fn all_loaded(&self) -> bool {
        self.sources
            .iter()
            .all(|s| s.input.not_loaded(&s.kept).is_none() && s.input.not_ready().is_none())
    }

    fn update_readiness(&self) {
        let detail: Vec<String> = self
            .sources
            .iter()
            .filter_map(|s| s.input.not_loaded(&s.kept))
            .collect();
        let mut reasons = Vec::new();
        if !detail.is_empty() {
            reasons.push(format!("records not loaded: {}", detail.join("; ")));
        }
        reasons.extend(self.sources.iter().filter_map(|s| s.input.not_ready()));
        self.status.lock().not_ready = (!reasons.is_empty()).then(|| reasons.join("; "));
    }

    fn watch_dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self
            .sources
            .iter()
            .filter_map(|s| s.input.watch_dir())
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs
    }
}

/// Loading a large file must not take CPU from answering queries (a pinned one-core server
/// would otherwise stall for the length of the parse): this thread runs at nice 10.
fn lower_own_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority with who = 0 changes only the calling thread on Linux.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 10);
    }
}

/// Gives memory freed after a load back to the operating system. glibc keeps freed heap
/// pages for reuse, so the parse-and-build peak of a large file would otherwise stay in RSS.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free pages of the allocator's own heap.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[derive(Debug)]
enum Msg {
    Changed,
    /// A change that needs no debounce (a whole zone handed over at once).
    Now,
    Stop,
}

/// Asks the watcher thread to check its sources now.
#[derive(Debug, Clone)]
pub struct Poker(mpsc::SyncSender<Msg>);

impl Poker {
    /// Requests a check (coalesced with others that arrive within the debounce).
    pub fn poke(&self) {
        // Full: a check is already pending, which sees this change too.
        let _ = self.0.try_send(Msg::Changed);
    }

    /// Requests a check at once, without waiting out the debounce: for changes that come whole
    /// (a secondary zone's transfer), where waiting only adds latency.
    pub fn poke_now(&self) {
        let _ = self.0.try_send(Msg::Now);
    }
}

/// A running watcher thread; [`WatchHandle::stop`] ends it.
pub struct WatchHandle {
    tx: mpsc::SyncSender<Msg>,
    thread: Option<JoinHandle<()>>,
}

impl WatchHandle {
    /// A handle that asks for a check now (after a pkarr publish, say) rather than at the
    /// next poll.
    pub fn poker(&self) -> Poker {
        Poker(self.tx.clone())
    }

    /// Stops watching and waits for the thread to end.
    pub fn stop(mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
    }
}

/// Starts the watcher thread. Change notifications are set up before this returns, and the
/// files are checked once more after that, so no change made after `spawn_watcher` returns can
/// be missed. Call [`FileSources::refresh`] first if the first snapshot must be in place earlier.
pub fn spawn_watcher(mut sources: FileSources) -> std::io::Result<WatchHandle> {
    // Bounded: notifications and pokes only ask for a check, and a full queue already holds
    // one, so a flood of them (a publish storm, a churning directory) costs no memory.
    let (tx, rx) = mpsc::sync_channel(POKES);
    let events = tx.clone();
    sources.loader.waker = Some(Poker(tx.clone()));
    let mut watcher =
        match notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if res.is_ok() {
                let _ = events.try_send(Msg::Changed);
            }
        }) {
            Ok(w) => Some(w),
            Err(e) => {
                warn!(error = %e, "file notifications unavailable; polling only");
                None
            }
        };
    let mut watched: HashMap<PathBuf, Option<u64>> = HashMap::new();
    if let Some(w) = watcher.as_mut() {
        ensure_watches(w, &sources.watch_dirs(), &mut watched);
    }
    sources.refresh();
    let thread = std::thread::Builder::new()
        .name("meshdns-files".into())
        .spawn(move || {
            lower_own_priority();
            let poll = sources.config.poll_interval;
            let debounce = sources.config.debounce;
            'watch: loop {
                match rx.recv_timeout(sources.wait(poll)) {
                    Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                    Ok(Msg::Now) => {
                        sources.refresh();
                    }
                    Ok(Msg::Changed) => {
                        let burst_end = Instant::now() + debounce * 10;
                        loop {
                            match rx.recv_timeout(debounce) {
                                Ok(Msg::Changed | Msg::Now) if Instant::now() < burst_end => {
                                    continue;
                                }
                                Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => {
                                    break 'watch;
                                }
                                _ => break,
                            }
                        }
                        sources.refresh();
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        if let Some(w) = watcher.as_mut() {
                            ensure_watches(w, &sources.watch_dirs(), &mut watched);
                        }
                        sources.refresh();
                    }
                }
            }
            // Publishes acknowledged since the last stamp get their serial (and journal entry)
            // now, and the serial book is written exactly, so the next start finds it in step
            // with the store.
            sources.stamp_now();
            sources.settle();
        })?;
    Ok(WatchHandle {
        tx,
        thread: Some(thread),
    })
}

/// Watches each directory, re-adding the watch when the directory was replaced (new inode).
fn ensure_watches(
    w: &mut notify::RecommendedWatcher,
    dirs: &[PathBuf],
    watched: &mut HashMap<PathBuf, Option<u64>>,
) {
    for dir in dirs {
        let ino = std::fs::metadata(dir).ok().map(|m| m.ino());
        match watched.get(dir) {
            Some(seen) if *seen == ino && ino.is_some() => continue,
            Some(_) => {
                let _ = w.unwatch(dir);
            }
            None => {}
        }
        match w.watch(dir, notify::RecursiveMode::NonRecursive) {
            Ok(()) => {
                debug!(dir = %dir.display(), "watching");
                watched.insert(dir.clone(), ino);
            }
            Err(e) => {
                if watched.insert(dir.clone(), None).is_none() {
                    warn!(dir = %dir.display(), error = %e, "cannot watch directory; will poll and retry");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn sources(files: &[&Path]) -> (FileSources, Arc<SourceStatus>) {
        let files = files.iter().map(|p| FileSource {
            path: p.to_path_buf(),
            kind: FileKind::Auto,
        });
        with_files(files.collect())
    }

    /// A watcher over `files` (never polled: tests call `refresh`), and its status.
    pub(super) fn with_files(files: Vec<FileSource>) -> (FileSources, Arc<SourceStatus>) {
        let status = Arc::new(SourceStatus::default());
        let config = SourceConfig {
            files,
            zones: Vec::new(),
            generated: Default::default(),
            settings: ParseSettings::default(),
            poll_interval: Duration::from_secs(3600),
            debounce: Duration::from_millis(20),
        };
        let published = Arc::new(ArcSwap::from_pointee(Catalog::empty()));
        (FileSources::new(config, published, status.clone()), status)
    }

    fn zone(records: &str) -> String {
        format!("zones: [{{origin: example.org, records: [{records}]}}]\n")
    }

    /// A record lost to a file listed earlier is counted when the conflict appears; once it
    /// clears and comes back, it is counted again.
    /// Whether the published snapshot holds more than a zone's SOA and NS (the A record).
    fn serves_a(s: &FileSources) -> bool {
        s.published
            .load()
            .zones()
            .iter()
            .any(|z| z.record_count() > 2)
    }

    #[test]
    fn an_absent_file_is_empty_at_once_at_start_and_after_the_debounce_later() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zones.yaml");
        let (mut s, status) = sources(&[&path]);
        s.loader.debounce = Duration::from_millis(200);
        assert!(s.refresh());
        assert_eq!(status.readiness(), Ok(()), "absent at start: ready, empty");
        assert!(s.sources[0].kept.counters.absent);
        std::fs::write(&path, zone("{name: www, type: A, value: 192.0.2.1}")).unwrap();
        assert!(s.refresh());
        assert!(serves_a(&s) && !s.sources[0].kept.counters.absent);

        // Deleted and recreated within the debounce: never unset.
        std::fs::remove_file(&path).unwrap();
        let again = path.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            std::fs::write(&again, zone("{name: www, type: A, value: 192.0.2.1}")).unwrap();
        });
        s.refresh();
        writer.join().unwrap();
        assert!(
            serves_a(&s) && !s.sources[0].kept.counters.absent,
            "blinked"
        );

        // Deleted for good: unset, still ready.
        std::fs::remove_file(&path).unwrap();
        assert!(s.refresh());
        assert!(!serves_a(&s) && s.sources[0].kept.counters.absent);
        assert_eq!(status.readiness(), Ok(()));
        assert_eq!(s.sources[0].kept.counters.last_error, None);
    }

    /// The A record served at www.`origin`, if any.
    fn www(s: &FileSources, origin: &str) -> Option<String> {
        let zone_name: Name = format!("{origin}.").parse().unwrap();
        let owner: Name = format!("www.{origin}.").parse().unwrap();
        let catalog = s.published.load();
        let zone = catalog.zone(&zone_name)?;
        let set = zone.node(owner.wire())?.get(meshdns_zone::RType::A)?;
        Some(set.decoded()[0].to_string())
    }

    fn zone_of(origin: &str, ip: &str) -> String {
        format!("zones: [{{origin: {origin}, records: [{{name: www, type: A, value: {ip}}}]}}]\n")
    }

    pub(super) fn mkfifo(path: &Path) {
        let _ = std::fs::remove_file(path);
        let c = std::ffi::CString::new(path.display().to_string()).unwrap();
        // SAFETY: mkfifo(3) with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    #[test]
    fn a_fifo_in_a_records_files_place_is_unusable_and_the_other_files_keep_reloading() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
        std::fs::write(&a, zone_of("a.test", "192.0.2.1")).unwrap();
        std::fs::write(&b, zone_of("b.test", "192.0.2.2")).unwrap();
        let (mut s, status) = sources(&[&a, &b]);
        assert!(s.refresh());

        mkfifo(&a);
        std::fs::write(&b, zone_of("b.test", "192.0.2.22")).unwrap();
        assert!(s.refresh(), "b's change is served");
        assert_eq!(www(&s, "b.test").as_deref(), Some("192.0.2.22"));
        assert_eq!(
            www(&s, "a.test").as_deref(),
            Some("192.0.2.1"),
            "a's last good"
        );
        let error = status.counters()[0].1.last_error.clone().unwrap();
        assert_eq!(
            error,
            format!(
                "{}: file: not a regular file (a FIFO (named pipe)); a records, zone or \
                 manifests file must be a regular file or a symlink to one",
                a.display()
            )
        );
        assert_eq!(status.counters()[0].1.reloads_error, 1);
        s.refresh();
        assert_eq!(status.counters()[0].1.reloads_error, 1, "counted once");

        std::fs::remove_file(&a).unwrap();
        std::fs::write(&a, zone_of("a.test", "192.0.2.11")).unwrap();
        assert!(s.refresh());
        assert_eq!(www(&s, "a.test").as_deref(), Some("192.0.2.11"));
        assert_eq!(status.counters()[0].1.last_error, None);
    }

    #[test]
    fn a_slow_parse_holds_up_neither_the_other_files_nor_the_check() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
        std::fs::write(&a, zone_of("a.test", "192.0.2.1")).unwrap();
        std::fs::write(&b, zone_of("b.test", "192.0.2.2")).unwrap();
        let (mut s, _status) = sources(&[&a, &b]);
        assert!(s.refresh());

        // a.yaml's next parse does not end until released.
        let label = a.display().to_string();
        source::gate::hold(&label);
        std::fs::write(&a, zone_of("a.test", "192.0.2.11")).unwrap();
        std::fs::write(&b, zone_of("b.test", "192.0.2.22")).unwrap();
        assert!(s.refresh(), "b's change is served while a's parse runs");
        assert_eq!(www(&s, "b.test").as_deref(), Some("192.0.2.22"));
        assert_eq!(www(&s, "a.test").as_deref(), Some("192.0.2.1"));
        // Still running: later checks go on too.
        std::fs::write(&b, zone_of("b.test", "192.0.2.23")).unwrap();
        assert!(s.refresh());
        assert_eq!(www(&s, "b.test").as_deref(), Some("192.0.2.23"));

        source::gate::release(&label);
        for _ in 0..500 {
            if www(&s, "a.test").as_deref() == Some("192.0.2.11") {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
            s.refresh();
        }
        panic!("a's parse was never served");
    }

    #[test]
    fn a_precedence_problem_that_clears_and_returns_is_counted_again() {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
        std::fs::write(&first, zone("{name: www, type: A, value: 192.0.2.1}")).unwrap();
        let conflicting = zone("{name: www, type: A, value: 192.0.2.2}");
        let clear = zone("{name: www, type: AAAA, value: '2001:db8::2'}");
        std::fs::write(&second, &conflicting).unwrap();
        let (mut s, status) = sources(&[&first, &second]);
        let skipped = |status: &SourceStatus| status.counters()[1].1.skipped_entries;

        assert!(s.refresh());
        assert_eq!(skipped(&status), 1);
        // Nothing changed: the same conflict is not counted twice.
        s.refresh();
        assert_eq!(skipped(&status), 1);

        std::fs::write(&second, &clear).unwrap();
        assert!(s.refresh());
        assert_eq!(skipped(&status), 1);

        std::fs::write(&second, &conflicting).unwrap();
        assert!(s.refresh());
        assert_eq!(skipped(&status), 2, "the returning conflict is counted");
    }
}

/// A manifest directory is read file by file: a broken file is named, keeps its own last good
/// objects, and holds readiness back only while it never gave any.
#[cfg(test)]
mod manifest_dir_tests {
    use super::*;
    use meshdns_zone::RType;
    use std::path::Path;

    const ZONE: &str = "apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSZone
metadata: {name: z, namespace: dns}
spec: {domainName: example.org}
";

    fn set(name: &str, ip: &str) -> String {
        format!(
            "apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {{name: {name}, namespace: dns}}
spec:
  dnsZoneRef: {{name: z}}
  recordType: A
  records:
  - {{name: {name}, a: {{content: {ip}}}}}
"
        )
    }

    /// Broken on its third line, inside its second document. (Rewrites in these tests change
    /// a file's size, so a change within one timestamp tick is still seen.)
    const BROKEN: &str = "kind: Note\n---\nkind: [unclosed\n";

    fn sources(dir: &Path) -> (FileSources, Arc<SourceStatus>) {
        super::tests::with_files(vec![FileSource {
            path: dir.to_path_buf(),
            kind: FileKind::Manifests,
        }])
    }

    /// The A record served at `name`.example.org, if any.
    fn served(s: &FileSources, name: &str) -> Option<String> {
        let origin: Name = "example.org.".parse().unwrap();
        let owner: Name = format!("{name}.example.org.").parse().unwrap();
        let catalog = s.published.load();
        let zone = catalog.zone(&origin)?;
        let set = zone.node(owner.wire())?.get(RType::A)?;
        Some(set.decoded()[0].to_string())
    }

    #[test]
    fn a_broken_file_keeps_its_last_good_objects_while_the_other_files_update() {
        let dir = tempfile::tempdir().unwrap();
        let at = |f: &str| dir.path().join(f);
        std::fs::write(at("zone.yaml"), ZONE).unwrap();
        std::fs::write(at("a.yaml"), set("www", "192.0.2.1")).unwrap();
        std::fs::write(at("b.yaml"), set("api", "192.0.2.2")).unwrap();
        let (mut s, status) = sources(dir.path());
        assert!(s.refresh());
        assert_eq!(served(&s, "api").as_deref(), Some("192.0.2.2"));

        std::fs::write(at("b.yaml"), BROKEN).unwrap();
        std::fs::write(at("a.yaml"), set("www", "192.0.2.19")).unwrap();
        assert!(s.refresh());
        assert_eq!(
            served(&s, "www").as_deref(),
            Some("192.0.2.19"),
            "the rest updates"
        );
        assert_eq!(
            served(&s, "api").as_deref(),
            Some("192.0.2.2"),
            "last good kept"
        );
        let c = &status.counters()[0].1;
        assert_eq!(c.reloads_error, 1);
        let error = c.last_error.clone().unwrap();
        let b = at("b.yaml").display().to_string();
        assert!(
            error.starts_with(&format!("{b}: document 2: not YAML or JSON: ")),
            "{error}"
        );
        assert!(error.contains("line 3"), "the file's own line: {error}");
        assert_eq!(status.readiness(), Ok(()), "it was good once");

        // Still broken, nothing else changed: counted once.
        s.refresh();
        assert_eq!(status.counters()[0].1.reloads_error, 1);

        std::fs::write(at("b.yaml"), set("api", "192.0.2.3")).unwrap();
        assert!(s.refresh());
        assert_eq!(served(&s, "api").as_deref(), Some("192.0.2.3"));
        assert_eq!(status.counters()[0].1.last_error, None);
    }

    #[test]
    fn a_fifo_in_a_manifests_directory_or_as_the_manifests_file_is_named_and_refused() {
        let dir = tempfile::tempdir().unwrap();
        let at = |f: &str| dir.path().join(f);
        std::fs::write(at("zone.yaml"), ZONE).unwrap();
        std::fs::write(at("a.yaml"), set("www", "192.0.2.1")).unwrap();
        super::tests::mkfifo(&at("pipe.yaml"));
        let (mut s, status) = sources(dir.path());
        assert!(s.refresh());
        assert_eq!(served(&s, "www").as_deref(), Some("192.0.2.1"));
        let error = status.counters()[0].1.last_error.clone().unwrap();
        let pipe = at("pipe.yaml").display().to_string();
        assert!(
            error.starts_with(&format!("{pipe}: file: not a regular file (a FIFO")),
            "{error}"
        );
        std::fs::write(at("a.yaml"), set("www", "192.0.2.19")).unwrap();
        assert!(s.refresh());
        assert_eq!(served(&s, "www").as_deref(), Some("192.0.2.19"));

        // A manifests path that is itself a pipe.
        let (mut s, status) = super::tests::with_files(vec![FileSource {
            path: at("pipe.yaml"),
            kind: FileKind::Manifests,
        }]);
        s.refresh();
        let reason = status.readiness().unwrap_err();
        assert!(reason.contains("not a regular file (a FIFO"), "{reason}");
    }

    #[test]
    fn a_file_broken_from_the_start_is_reported_and_holds_readiness_alone() {
        let dir = tempfile::tempdir().unwrap();
        let at = |f: &str| dir.path().join(f);
        std::fs::write(at("zone.yaml"), ZONE).unwrap();
        std::fs::write(at("a.yaml"), set("www", "192.0.2.1")).unwrap();
        std::fs::write(at("bad.yaml"), BROKEN).unwrap();
        let (mut s, status) = sources(dir.path());
        assert!(s.refresh());
        assert_eq!(
            served(&s, "www").as_deref(),
            Some("192.0.2.1"),
            "the rest serves"
        );
        let bad = at("bad.yaml").display().to_string();
        let reason = status.readiness().unwrap_err();
        assert!(
            reason.starts_with(&format!("records not loaded: {bad}: document 2: ")),
            "{reason}"
        );
        assert_eq!(status.counters()[0].1.reloads_error, 1);

        // The rest still updates.
        std::fs::write(at("a.yaml"), set("www", "192.0.2.55")).unwrap();
        assert!(s.refresh());
        assert_eq!(served(&s, "www").as_deref(), Some("192.0.2.55"));
        assert!(status.readiness().is_err());

        // Fixed: ready, and its objects served.
        std::fs::write(at("bad.yaml"), set("api", "192.0.2.2")).unwrap();
        assert!(s.refresh());
        assert_eq!(served(&s, "api").as_deref(), Some("192.0.2.2"));
        assert_eq!(status.readiness(), Ok(()));

        // Broken from the start, then removed: ready.
        std::fs::write(at("new.yaml"), BROKEN).unwrap();
        s.refresh();
        assert!(status.readiness().is_err());
        std::fs::remove_file(at("new.yaml")).unwrap();
        s.refresh();
        assert_eq!(status.readiness(), Ok(()));
    }
}
