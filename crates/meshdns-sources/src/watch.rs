//! Watching records files and publishing new snapshots.
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
//! Each file keeps its last good content: a file that cannot be used (missing, unreadable, not
//! JSON/YAML, wrong version, zone file syntax error) leaves its previous records serving. The
//! catalog is rebuilt aside on this thread and swapped in whole; queries never see half a reload.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use meshdns_zone::{BuildDefaults, Catalog, Name};
use notify::Watcher as _;
use tracing::{debug, error, info, warn};

use crate::manifests::ManifestFeed;
use crate::pkarr::PkarrStore;
use crate::records::{FileKind, ParseSettings, Problem, ZoneContent, parse};
use crate::snapshot::{CompiledSource, SourceInput, assemble, compile};

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
    /// Parsing settings (default TTL, Tailscale zones).
    pub settings: ParseSettings,
    /// How often files are checked without an inotify event.
    pub poll_interval: Duration,
    /// Quiet time that ends a burst of events.
    pub debounce: Duration,
}

/// How the pkarr relay's records are named in logs and metrics.
pub const PKARR_LABEL: &str = "pkarr";

/// Counters of one source, as `/metrics` shows them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourceCounters {
    /// Successful loads.
    pub reloads_ok: u64,
    /// Failed loads (file unusable).
    pub reloads_error: u64,
    /// Entries skipped, over all loads.
    pub skipped_entries: u64,
    /// Unix time of the last successful load.
    pub last_success_unix: Option<f64>,
    /// The last error, while the file is failing.
    pub last_error: Option<String>,
}

/// Health of the file sources, shared with the HTTP endpoint.
#[derive(Debug, Default)]
pub struct SourceStatus {
    inner: Mutex<StatusInner>,
}

#[derive(Debug, Default)]
struct StatusInner {
    sources: Vec<(String, SourceCounters)>,
    not_ready: Option<String>,
}

impl SourceStatus {
    /// `Ok` once every file has loaded at least once; otherwise why not.
    pub fn readiness(&self) -> Result<(), String> {
        match &self.lock().not_ready {
            None => Ok(()),
            Some(reason) => Err(reason.clone()),
        }
    }

    /// Per-source counters, labelled by path.
    pub fn counters(&self) -> Vec<(String, SourceCounters)> {
        self.lock().sources.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StatusInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fingerprint {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

fn fingerprint(path: &Path) -> Option<Fingerprint> {
    let m = std::fs::metadata(path).ok()?;
    Some(Fingerprint {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime: m.mtime(),
        mtime_nsec: m.mtime_nsec(),
    })
}

/// A directory's fingerprint: its own (entries added, removed, renamed) combined with its
/// manifest files' sizes and newest modification time.
fn fingerprint_dir(dir: &Path) -> Option<Fingerprint> {
    let mut fp = fingerprint(dir)?;
    for f in manifest_files(dir).ok()? {
        let m = fingerprint(&f)?;
        fp.size = fp.size.wrapping_add(m.size).wrapping_add(m.ino);
        if (m.mtime, m.mtime_nsec) > (fp.mtime, fp.mtime_nsec) {
            fp.mtime = m.mtime;
            fp.mtime_nsec = m.mtime_nsec;
        }
    }
    Some(fp)
}

/// The manifest files of a directory, in name order.
fn manifest_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        })
        .collect();
    files.sort();
    Ok(files)
}

/// A file's bytes; for a directory, its manifest files as one multi-document YAML text.
fn read_source(path: &Path) -> std::io::Result<Vec<u8>> {
    if !path.is_dir() {
        return std::fs::read(path);
    }
    let mut out = Vec::new();
    for f in manifest_files(path)? {
        out.extend_from_slice(b"\n---\n");
        out.extend_from_slice(&std::fs::read(&f)?);
        out.push(b'\n');
    }
    Ok(out)
}

#[derive(Debug, Default)]
struct FileState {
    seen: Option<Fingerprint>,
    content_hash: Option<u64>,
    last_good: Option<CompiledSource>,
    failing: bool,
}

/// The file sources: their last good contents and the snapshot they publish.
pub struct FileSources {
    config: SourceConfig,
    pkarr: Option<(Arc<PkarrStore>, u64, CompiledSource)>,
    /// Live feeds (Kubernetes): feed, version compiled, result, index among the labels.
    feeds: Vec<(Arc<ManifestFeed>, u64, Option<CompiledSource>, usize)>,
    labels: Vec<String>,
    states: Vec<FileState>,
    serial: u32,
    published: Arc<ArcSwap<Catalog>>,
    status: Arc<SourceStatus>,
    reported: HashSet<String>,
}

impl FileSources {
    /// Sets up the sources; nothing is read until [`FileSources::refresh`].
    pub fn new(
        config: SourceConfig,
        published: Arc<ArcSwap<Catalog>>,
        status: Arc<SourceStatus>,
    ) -> FileSources {
        let labels: Vec<String> = config
            .files
            .iter()
            .map(|f| f.path.display().to_string())
            .collect();
        let states = config.files.iter().map(|_| FileState::default()).collect();
        {
            let mut inner = status.lock();
            inner.sources = labels
                .iter()
                .map(|l| (l.clone(), SourceCounters::default()))
                .collect();
        }
        FileSources {
            config,
            pkarr: None,
            feeds: Vec::new(),
            labels,
            states,
            serial: 0,
            published,
            status,
            reported: HashSet::new(),
        }
    }

    /// Serves the records of a pkarr relay's store too, after every file's (files win a
    /// (name, type) both give).
    pub fn with_pkarr(mut self, store: Arc<PkarrStore>) -> FileSources {
        self.pkarr = Some((store, 0, CompiledSource::default()));
        // Counted like a file (its records refused by precedence, its rebuilds), after them.
        self.labels.push(PKARR_LABEL.to_string());
        self.status
            .lock()
            .sources
            .push((PKARR_LABEL.to_string(), SourceCounters::default()));
        self
    }

    /// Serves the DNSZones and DNSRecordSets a live reader hands over, after the files (a
    /// file's (name, type) wins) and before pkarr publishes. Not ready until the feed's first
    /// set.
    pub fn with_feed(mut self, feed: Arc<ManifestFeed>) -> FileSources {
        let label = feed.label().to_string();
        // Feeds go before pkarr in the labels, keeping pkarr last.
        let at = self.labels.len() - usize::from(self.pkarr.is_some());
        self.labels.insert(at, label.clone());
        self.status
            .lock()
            .sources
            .insert(at, (label, SourceCounters::default()));
        self.feeds.push((feed, 0, None, at));
        self
    }

    fn check_feeds(&mut self) -> bool {
        let mut changed = false;
        for f in 0..self.feeds.len() {
            let (feed, seen, _, at) = &self.feeds[f];
            let at = *at;
            let Some((version, objects)) = feed.take_if_newer(*seen) else {
                continue;
            };
            let label = feed.label().to_string();
            let parsed = crate::manifests::zones(&label, &objects);
            let (compiled, refused) = compile(&label, parsed.zones, self.build_defaults());
            let skipped = (parsed.problems.len() + refused.len()) as u64;
            for p in parsed.problems.iter().chain(&refused) {
                if self.reported.insert(p.to_string()) {
                    warn!(file = %p.file, entry = %p.entry, reason = %p.reason, "records entry skipped");
                }
            }
            let records: usize = compiled.zones.iter().map(|z| z.record_count()).sum();
            info!(source = %label, records, skipped, "objects loaded");
            let slot = &mut self.feeds[f];
            slot.1 = version;
            slot.2 = Some(compiled);
            self.with_counters(at, |c| {
                c.reloads_ok += 1;
                c.skipped_entries += skipped;
                c.last_success_unix = Some(unix_now());
                c.last_error = None;
            });
            changed = true;
        }
        changed
    }

    /// Checks every file (and the feeds and the pkarr store), loads what changed, and
    /// publishes a new snapshot when anything did (always on the first call). Returns whether
    /// a snapshot was published.
    pub fn refresh(&mut self) -> bool {
        let first = self.serial == 0;
        let mut changed = false;
        for i in 0..self.config.files.len() {
            changed |= self.check_file(i);
        }
        changed |= self.check_feeds();
        if let Some((store, _, _)) = &self.pkarr {
            store.expire();
        }
        let pkarr_version = self
            .pkarr
            .as_ref()
            .map(|(store, seen, _)| (store.version(), *seen));
        if let Some((now, seen)) = pkarr_version
            && now != seen
        {
            let defaults = self.build_defaults();
            let (store, seen, compiled) = self.pkarr.as_mut().expect("checked above");
            *compiled = store.compile(defaults);
            *seen = now;
            changed = true;
            let i = self.labels.len() - 1; // pkarr stays last
            self.with_counters(i, |c| {
                c.reloads_ok += 1;
                c.last_success_unix = Some(unix_now());
            });
        }
        if changed || first {
            self.publish();
        }
        self.update_readiness();
        changed || first
    }

    fn check_file(&mut self, i: usize) -> bool {
        let source = &self.config.files[i];
        let label = self.labels[i].clone();
        let fp = if source.path.is_dir() {
            fingerprint_dir(&source.path)
        } else {
            fingerprint(&source.path)
        };
        let state = &mut self.states[i];
        if fp.is_some() && fp == state.seen && !state.failing {
            return false;
        }
        let bytes = match read_source(&source.path) {
            Ok(b) => b,
            Err(e) => {
                state.seen = None;
                let problem = Problem::new(&label, "file", format!("cannot read: {e}"));
                self.fail(i, problem);
                return false;
            }
        };
        let hash = {
            let mut h = DefaultHasher::new();
            bytes.hash(&mut h);
            h.finish()
        };
        state.seen = fp;
        if state.content_hash == Some(hash) && state.last_good.is_some() && !state.failing {
            return false;
        }
        let started = Instant::now();
        match parse(&label, &source.kind, &bytes, &self.config.settings) {
            Ok(mut parsed) => {
                if parsed.zones.is_empty()
                    && let Some(previous) = &state.last_good
                {
                    // An emptied file clears its records but keeps its zones served, so names
                    // in them get NXDOMAIN rather than REFUSED (as Tailscale's nameserver does).
                    parsed.zones = previous
                        .zones
                        .iter()
                        .map(|z| ZoneContent::empty(z.origin()))
                        .collect();
                }
                drop(bytes);
                let (compiled, refused) = compile(&label, parsed.zones, self.build_defaults());
                let records: usize = compiled.zones.iter().map(|z| z.record_count()).sum();
                let skipped = (parsed.problems.len() + refused.len()) as u64;
                for p in parsed.problems.iter().chain(&refused) {
                    warn!(file = %p.file, entry = %p.entry, reason = %p.reason, "records entry skipped");
                }
                info!(file = %label, records, skipped, elapsed_ms = started.elapsed().as_millis() as u64, "records file loaded");
                let state = &mut self.states[i];
                state.content_hash = Some(hash);
                state.last_good = Some(compiled);
                state.failing = false;
                self.with_counters(i, |c| {
                    c.reloads_ok += 1;
                    c.skipped_entries += skipped;
                    c.last_success_unix = Some(unix_now());
                    c.last_error = None;
                });
                true
            }
            Err(problem) => {
                self.states[i].content_hash = Some(hash);
                self.fail(i, problem);
                false
            }
        }
    }

    fn fail(&mut self, i: usize, problem: Problem) {
        let state = &mut self.states[i];
        let keeping = if state.last_good.is_some() {
            "keeping the last good records"
        } else {
            "no records from it yet"
        };
        if state.failing
            && self.status.lock().sources[i].1.last_error.as_deref() == Some(&problem.to_string())
        {
            debug!(%problem, "records file still unusable");
            return;
        }
        state.failing = true;
        error!(file = %problem.file, entry = %problem.entry, reason = %problem.reason, "records file unusable; {keeping}");
        let text = problem.to_string();
        self.with_counters(i, |c| {
            c.reloads_error += 1;
            c.last_error = Some(text);
        });
    }

    fn with_counters(&self, i: usize, f: impl FnOnce(&mut SourceCounters)) {
        f(&mut self.status.lock().sources[i].1);
    }

    /// Defaults for a build, with a serial that grows with every build (unix time, or one more
    /// than the last when builds come faster than once a second).
    fn build_defaults(&mut self) -> BuildDefaults {
        self.serial = self.serial.saturating_add(1).max(unix_now() as u32);
        BuildDefaults {
            default_ttl: self.config.settings.default_ttl,
            serial: self.serial,
        }
    }

    fn publish(&mut self) {
        let started = Instant::now();
        let defaults = self.build_defaults();
        let empty = CompiledSource::default();
        let mut inputs: Vec<SourceInput<'_>> = self
            .labels
            .iter()
            .zip(&self.states)
            .map(|(label, s)| SourceInput {
                label,
                compiled: s.last_good.as_ref().unwrap_or(&empty),
            })
            .collect();
        for (feed, _, compiled, _) in &self.feeds {
            inputs.push(SourceInput {
                label: feed.label(),
                compiled: compiled.as_ref().unwrap_or(&empty),
            });
        }
        // pkarr publishes come after every file: a file's (name, type) wins.
        if let Some((_, _, compiled)) = &self.pkarr {
            inputs.push(SourceInput {
                label: PKARR_LABEL,
                compiled,
            });
        }
        let (catalog, refused) = assemble(&inputs, &self.config.zones, defaults);
        let records = catalog.record_count();
        let zones = catalog.zones().len();
        let old = self.published.swap(Arc::new(catalog));
        for p in refused {
            if self.reported.insert(p.to_string()) {
                warn!(file = %p.file, entry = %p.entry, reason = %p.reason, "records entry skipped");
                if let Some(i) = self.labels.iter().position(|l| *l == p.file) {
                    self.with_counters(i, |c| c.skipped_entries += 1);
                }
            }
        }
        info!(
            zones,
            records,
            serial = self.serial,
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

    fn update_readiness(&self) {
        let mut missing: Vec<String> = self
            .labels
            .iter()
            .zip(&self.states)
            .filter(|(_, s)| s.last_good.is_none())
            .map(|(l, _)| l.clone())
            .collect();
        missing.extend(
            self.feeds
                .iter()
                .filter(|f| f.2.is_none())
                .map(|f| f.0.label().to_string()),
        );
        let reason = (!missing.is_empty()).then(|| {
            let detail: Vec<String> = self
                .status
                .lock()
                .sources
                .iter()
                .filter(|(l, _)| missing.contains(l))
                .map(|(l, c)| {
                    c.last_error
                        .clone()
                        .unwrap_or_else(|| format!("{l}: not loaded yet"))
                })
                .collect();
            format!("records not loaded: {}", detail.join("; "))
        });
        self.status.lock().not_ready = reason;
    }

    fn watch_dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self
            .config
            .files
            .iter()
            .map(|f| match f.path.parent() {
                _ if f.kind == FileKind::Manifests && f.path.is_dir() => f.path.clone(),
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            })
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

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[derive(Debug)]
enum Msg {
    Changed,
    Stop,
}

/// Asks the watcher thread to check its sources now.
#[derive(Debug, Clone)]
pub struct Poker(mpsc::Sender<Msg>);

impl Poker {
    /// Requests a check (coalesced with others that arrive within the debounce).
    pub fn poke(&self) {
        let _ = self.0.send(Msg::Changed);
    }
}

/// A running watcher thread; [`WatchHandle::stop`] ends it.
pub struct WatchHandle {
    tx: mpsc::Sender<Msg>,
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
    let (tx, rx) = mpsc::channel();
    let events = tx.clone();
    let mut watcher =
        match notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if res.is_ok() {
                let _ = events.send(Msg::Changed);
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
            loop {
                match rx.recv_timeout(poll) {
                    Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                    Ok(Msg::Changed) => {
                        let burst_end = Instant::now() + debounce * 10;
                        loop {
                            match rx.recv_timeout(debounce) {
                                Ok(Msg::Changed) if Instant::now() < burst_end => continue,
                                Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
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
