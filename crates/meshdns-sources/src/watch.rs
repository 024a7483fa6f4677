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
use meshdns_xfr::Primary;
use meshdns_zone::{BuildDefaults, Catalog, Name};
use notify::Watcher as _;
use tracing::{debug, error, info, warn};

use crate::content::{FileKind, ParseSettings, Parsed, Problem, ZoneContent};
use crate::feed::BytesFeed;
use crate::manifests::{self, ManifestFeed, Served, Verdicts};
use crate::pkarr::PkarrStore;
use crate::read::{manifest_files, read_source};
use crate::records::parse;
use crate::secondary::SecondaryFeed;
use crate::snapshot::{CompiledSource, Loaded, SourceInput, assemble, load_parsed};
use crate::status;

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
/// Messages the watcher thread may have queued; more pokes are dropped (one pending check
/// already covers them).
const POKES: usize = 64;

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
    /// Whether the file is absent now (served as empty).
    pub absent: bool,
    /// Why a live reader (a ConfigMap watch) cannot read its source now, while it retries.
    pub watch_error: Option<String>,
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

/// One source of records: a file, a live feed or the pkarr store, with what it last loaded.
/// [`FileSources`] keeps them in one list, in precedence order.
struct Source {
    /// How logs, metrics and problems name it (a path, `kubernetes`, `pkarr`).
    label: String,
    input: Input,
    /// The last content that loaded; kept while the input is unusable.
    last_good: Option<CompiledSource>,
    counters: SourceCounters,
    /// The problems its last load reported (a live feed's are logged when they appear).
    reported: Reported,
    /// Whether its current content is unusable (its last good content serving meanwhile).
    failing: bool,
}

/// What a [`Source`] reads, and how far it has read it.
enum Input {
    File {
        file: FileSource,
        seen: Option<Fingerprint>,
        content_hash: Option<u64>,
    },
    /// Bytes handed over by a live reader (a ConfigMap key read through the API), read as a
    /// file of `kind` would be.
    Bytes {
        feed: Arc<BytesFeed>,
        kind: FileKind,
        version: u64,
    },
    Feed {
        feed: Arc<ManifestFeed>,
        version: u64,
        /// Loaded but not yet in a live snapshot: handed back after the next swap.
        pending: Option<(Vec<serde_json::Value>, Verdicts)>,
    },
    /// The pkarr store: its origins' zones (compiled once), with its overlay attached.
    Pkarr { store: Arc<PkarrStore> },
    /// A zone transferred from a primary.
    Secondary {
        feed: Arc<SecondaryFeed>,
        version: u64,
    },
}

impl Source {
    fn new(label: String, input: Input) -> Source {
        Source {
            label,
            input,
            last_good: None,
            counters: SourceCounters::default(),
            reported: Reported::default(),
            failing: false,
        }
    }
}

/// Problems reported while they last: each is logged (and counted) when it appears, and again
/// only if it comes back after it cleared.
#[derive(Debug, Default)]
struct Reported(HashSet<String>);

impl Reported {
    /// Makes `now` the current problems and returns those that were not current before.
    fn update<'p>(&mut self, now: impl IntoIterator<Item = &'p Problem>) -> Vec<&'p Problem> {
        let mut current = HashSet::new();
        let mut new = Vec::new();
        for p in now {
            let text = p.to_string();
            if !self.0.contains(&text) && !current.contains(&text) {
                new.push(p);
            }
            current.insert(text);
        }
        self.0 = current;
        new
    }
}

fn log_skipped(p: &Problem) {
    warn!(file = %p.file, entry = %p.entry, reason = %p.reason, "records entry skipped");
}

/// The file sources: their last good contents and the snapshot they publish.
pub struct FileSources {
    config: SourceConfig,
    /// Files, then live feeds, then the pkarr store: the order in which a (name, type) given
    /// twice is won.
    sources: Vec<Source>,
    /// Records refused by precedence at the last publish.
    refused: Reported,
    serial: u32,
    published: Arc<ArcSwap<Catalog>>,
    status: Arc<SourceStatus>,
    /// Decides the serials served and keeps what zone transfers send.
    primary: Option<Arc<Primary>>,
}

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
                let input = Input::File {
                    file: f.clone(),
                    seen: None,
                    content_hash: None,
                };
                Source::new(f.path.display().to_string(), input)
            })
            .collect();
        let this = FileSources {
            config,
            sources,
            refused: Reported::default(),
            serial: 0,
            published,
            status,
            primary: None,
        };
        this.share_status();
        this
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
        let input = Input::Pkarr { store };
        let source = Source::new(PKARR_LABEL.to_string(), input);
        self.sources.push(source);
        self.share_status();
        self
    }

    /// Serves a zone transferred from a primary (after the files, before the live feeds): its
    /// records as the transfer gave them, nothing once it expired.
    pub fn with_secondary(mut self, feed: Arc<SecondaryFeed>) -> FileSources {
        let at = self
            .sources
            .iter()
            .position(|s| !matches!(s.input, Input::File { .. } | Input::Bytes { .. }))
            .unwrap_or(self.sources.len());
        let label = format!("secondary {}", feed.origin());
        let input = Input::Secondary { feed, version: 0 };
        self.sources.insert(at, Source::new(label, input));
        self.share_status();
        self
    }

    /// Adds a ConfigMap key read through the API, after the files (and before the live
    /// manifest feeds and pkarr): read as a file of `kind`. Not ready until its first read.
    pub fn with_bytes(mut self, feed: Arc<BytesFeed>, kind: FileKind) -> FileSources {
        let at = self
            .sources
            .iter()
            .position(|s| !matches!(s.input, Input::File { .. } | Input::Bytes { .. }))
            .unwrap_or(self.sources.len());
        let label = feed.label().to_string();
        let input = Input::Bytes {
            feed,
            kind,
            version: 0,
        };
        self.sources.insert(at, Source::new(label, input));
        self
    }

    /// Serves the DNSZones and DNSRecordSets a live reader hands over, after the files (a
    /// file's (name, type) wins) and before pkarr publishes. Not ready until the feed's first
    /// set.
    pub fn with_feed(mut self, feed: Arc<ManifestFeed>) -> FileSources {
        let at = self
            .sources
            .iter()
            .position(|s| matches!(s.input, Input::Pkarr { .. }))
            .unwrap_or(self.sources.len());
        let label = feed.label().to_string();
        let input = Input::Feed {
            feed,
            version: 0,
            pending: None,
        };
        let source = Source::new(label, input);
        self.sources.insert(at, source);
        self.share_status();
        self
    }

    /// Checks every file (and the feeds and the pkarr store), loads what changed, and
    /// publishes a new snapshot when anything did (always on the first call). Returns whether
    /// a snapshot was published.
    pub fn refresh(&mut self) -> bool {
        let first = self.serial == 0;
        let mut changed = false;
        for i in 0..self.sources.len() {
            changed |= match self.sources[i].input {
                Input::File { .. } => self.check_file(i),
                Input::Bytes { .. } => self.check_bytes(i),
                Input::Feed { .. } => self.check_feed(i),
                Input::Pkarr { .. } => self.check_pkarr(i),
                Input::Secondary { .. } => self.check_secondary(i),
            };
        }
        if changed || first {
            self.publish();
        }
        self.stamp_published();
        self.update_readiness();
        self.share_status();
        changed || first
    }

    fn check_file(&mut self, i: usize) -> bool {
        let debounce = self.config.debounce;
        let source = &mut self.sources[i];
        let Input::File { file, .. } = &source.input else {
            unreachable!("check_file is called on files")
        };
        let missing = |path: &Path| {
            std::fs::metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        };
        if missing(&file.path) {
            if source.counters.absent {
                return false;
            }
            // Absent is empty (as Tailscale's nameserver reads a missing records.json): at once
            // when nothing was served from it yet; otherwise only when it stays missing through
            // the debounce, so an editor's delete-and-recreate (or a swap) never blinks.
            let path = file.path.clone();
            let stays_missing = source.last_good.is_none()
                || (0..5).all(|_| {
                    std::thread::sleep(debounce / 5);
                    missing(&path)
                });
            if stays_missing {
                return self.unset_absent(i);
            }
        }
        if source.counters.absent {
            source.counters.absent = false;
            info!(file = %source.label, "records file present again");
        }
        self.read_file(i)
    }

    /// Serves an absent file as an empty one: its records go, its zones stay served (names in
    /// them get NXDOMAIN rather than REFUSED; for a file never read, the Tailscale zones or a
    /// zone file's origin), and the source counts as loaded.
    fn unset_absent(&mut self, i: usize) -> bool {
        let defaults = self.build_defaults();
        let tailscale_zones = &self.config.settings.tailscale_zones;
        let source = &mut self.sources[i];
        let zones = match (&source.last_good, &source.input) {
            (Some(previous), _) => previous
                .zones
                .iter()
                .map(|z| ZoneContent::empty(z.origin()))
                .collect(),
            // Never read: the zones it would give if empty.
            (None, Input::File { file, .. }) => empty_zones(&file.kind, tailscale_zones),
            (None, Input::Bytes { kind, .. }) => empty_zones(kind, tailscale_zones),
            (None, _) => Vec::new(),
        };
        let parsed = Parsed {
            zones,
            problems: Vec::new(),
        };
        let loaded = load_parsed(&source.label, parsed, defaults);
        warn!(file = %source.label, "records file absent; serving no records from it until it exists");
        if let Input::File {
            seen, content_hash, ..
        } = &mut source.input
        {
            *seen = None;
            *content_hash = None;
        }
        source.failing = false;
        succeed(source, loaded);
        source.counters.absent = true;
        true
    }

    fn read_file(&mut self, i: usize) -> bool {
        let source = &mut self.sources[i];
        let failing = source.failing;
        let has_content = source.last_good.is_some();
        let Input::File {
            file,
            seen,
            content_hash,
        } = &mut source.input
        else {
            unreachable!("read_file is called on files")
        };
        let fp = if file.path.is_dir() {
            fingerprint_dir(&file.path)
        } else {
            fingerprint(&file.path)
        };
        if fp.is_some() && fp == *seen && !failing {
            return false;
        }
        let bytes = match read_source(&file.path) {
            Ok(b) => b,
            Err(e) => {
                *seen = None;
                let problem = Problem::new(&source.label, "file", format!("cannot read: {e}"));
                fail(source, problem);
                return false;
            }
        };
        let hash = {
            let mut h = DefaultHasher::new();
            bytes.hash(&mut h);
            h.finish()
        };
        *seen = fp;
        if *content_hash == Some(hash) && has_content && !failing {
            return false;
        }
        *content_hash = Some(hash);
        let kind = file.kind.clone();
        self.load_bytes(i, &kind, bytes)
    }

    /// Parses and compiles a new version of a file's (or a ConfigMap key's) bytes; an unusable
    /// one keeps the last good content serving.
    fn load_bytes(&mut self, i: usize, kind: &FileKind, bytes: Vec<u8>) -> bool {
        let settings = &self.config.settings;
        let source = &mut self.sources[i];
        let started = Instant::now();
        let mut parsed = match parse(&source.label, kind, &bytes, settings) {
            Ok(parsed) => parsed,
            Err(problem) => {
                fail(source, problem);
                return false;
            }
        };
        drop(bytes);
        if parsed.zones.is_empty()
            && let Some(previous) = &source.last_good
        {
            // An emptied file clears its records but keeps its zones served, so names in them
            // get NXDOMAIN rather than REFUSED (as Tailscale's nameserver does).
            parsed.zones = previous
                .zones
                .iter()
                .map(|z| ZoneContent::empty(z.origin()))
                .collect();
        }
        let defaults = self.build_defaults();
        let source = &mut self.sources[i];
        let loaded = load_parsed(&source.label, parsed, defaults);
        // A file's problems are logged at every load: each load is a new version of the file.
        loaded.problems.iter().for_each(log_skipped);
        info!(file = %source.label, records = loaded.records(), skipped = loaded.problems.len(),
            elapsed_ms = started.elapsed().as_millis() as u64, "records file loaded");
        source.failing = false;
        succeed(source, loaded);
        true
    }

    /// A ConfigMap key read through the API: a new version is loaded as a file's would be; a
    /// missing ConfigMap or key is an absent file (the API says so at once: no debounce).
    fn check_bytes(&mut self, i: usize) -> bool {
        let Input::Bytes {
            feed,
            kind,
            version,
        } = &self.sources[i].input
        else {
            unreachable!("check_bytes is called on byte feeds")
        };
        let (feed, kind, seen) = (feed.clone(), kind.clone(), *version);
        let watch_error = feed.error();
        let source = &mut self.sources[i];
        if watch_error != source.counters.watch_error {
            match &watch_error {
                Some(e) => {
                    warn!(source = %source.label, error = %e, "cannot watch; serving the last good records")
                }
                None => info!(source = %source.label, "watching again"),
            }
            source.counters.watch_error = watch_error;
        }
        let Some((now, content)) = feed.take_if_newer(seen) else {
            return false;
        };
        if let Input::Bytes { version, .. } = &mut source.input {
            *version = now;
        }
        match content {
            None if source.counters.absent => false,
            None => self.unset_absent(i),
            Some(bytes) => {
                if source.counters.absent {
                    source.counters.absent = false;
                    info!(file = %source.label, "records present again");
                }
                self.load_bytes(i, &kind, bytes)
            }
        }
    }

    fn check_feed(&mut self, i: usize) -> bool {
        let Input::Feed { feed, version, .. } = &self.sources[i].input else {
            unreachable!("check_feed is called on feeds")
        };
        let Some((now, objects)) = feed.take_if_newer(*version) else {
            return false;
        };
        let defaults = self.build_defaults();
        let source = &mut self.sources[i];
        let (parsed, verdicts) = manifests::read(&source.label, &objects);
        let loaded = load_parsed(&source.label, parsed, defaults);
        // A feed reloads on every object change: only problems that are new are logged.
        source
            .reported
            .update(&loaded.problems)
            .into_iter()
            .for_each(log_skipped);
        info!(source = %source.label, records = loaded.records(), skipped = loaded.problems.len(), "objects loaded");
        if let Input::Feed {
            version, pending, ..
        } = &mut source.input
        {
            *version = now;
            *pending = Some((objects, verdicts));
        }
        succeed(source, loaded);
        true
    }

    fn check_secondary(&mut self, i: usize) -> bool {
        let Input::Secondary { feed, version } = &self.sources[i].input else {
            unreachable!("check_secondary is called on secondary zones")
        };
        let Some((now, records)) = feed.take_if_newer(*version) else {
            return false;
        };
        let origin = feed.origin().clone();
        let defaults = self.build_defaults();
        let source = &mut self.sources[i];
        if let Input::Secondary { version, .. } = &mut source.input {
            *version = now;
        }
        let zones = match records {
            Some(rrs) => {
                let mut records = meshdns_zone::Records::with_capacity(
                    rrs.len(),
                    rrs.iter().map(|r| r.rdata.len()).sum(),
                );
                for r in rrs.iter() {
                    let _ = records.push_with(&r.owner, r.rtype, r.ttl, |buf| {
                        buf.extend_from_slice(&r.rdata);
                        Ok::<(), ()>(())
                    });
                }
                vec![ZoneContent {
                    origin,
                    soa: None,
                    records,
                }]
            }
            // Not transferred yet, or expired: the zone is not served.
            None => Vec::new(),
        };
        let loaded = load_parsed(
            &source.label,
            Parsed {
                zones,
                problems: Vec::new(),
            },
            defaults,
        );
        loaded.problems.iter().for_each(log_skipped);
        succeed(source, loaded);
        true
    }

    fn check_pkarr(&mut self, i: usize) -> bool {
        if self.sources[i].last_good.is_some() {
            return false;
        }
        let Input::Pkarr { store } = &self.sources[i].input else {
            unreachable!("check_pkarr is called on the pkarr store")
        };
        let store = store.clone();
        let defaults = self.build_defaults();
        let zones = store.origins().iter().map(ZoneContent::empty).collect();
        let mut loaded = load_parsed(
            PKARR_LABEL,
            Parsed {
                zones,
                problems: Vec::new(),
            },
            defaults,
        );
        loaded.compiled.overlay = Some(store.overlay().clone());
        succeed(&mut self.sources[i], loaded);
        true
    }

    /// Gives pkarr origins a new serial for the keys published (or expired) since the last
    /// stamp: one serial, one journal entry and one NOTIFY for many publishes.
    fn stamp_published(&mut self) {
        let Some(primary) = &self.primary else { return };
        let Some(store) = self.sources.iter().find_map(|s| match &s.input {
            Input::Pkarr { store } => Some(store.clone()),
            _ => None,
        }) else {
            return;
        };
        let changes = store.take_changes();
        if changes.is_empty() {
            return;
        }
        let keys = changes.len();
        let mut catalog = Catalog::clone(&self.published.load());
        let stamped = primary.stamp_published(&mut catalog, changes, unix_now() as u32);
        self.published.store(Arc::new(catalog));
        primary.announce();
        for (zone, serial) in stamped {
            debug!(%zone, serial, keys, "published keys stamped");
        }
    }

    /// Copies the sources' counters to the status the HTTP endpoint reads.
    fn share_status(&self) {
        self.status.lock().sources = self
            .sources
            .iter()
            .map(|s| (s.label.clone(), s.counters.clone()))
            .collect();
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
        let inputs: Vec<SourceInput<'_>> = self
            .sources
            .iter()
            .map(|s| SourceInput {
                label: &s.label,
                compiled: s.last_good.as_ref().unwrap_or(&empty),
            })
            .collect();
        let (mut catalog, refused) = assemble(&inputs, &self.config.zones, defaults);
        if let Some(primary) = &self.primary {
            for (zone, serial) in primary.update(&mut catalog, unix_now() as u32) {
                info!(%zone, serial, "zone serial");
            }
        }
        let records = catalog.record_count();
        let zones = catalog.zones().len();
        let live = Arc::new(catalog);
        let old = self.published.swap(live.clone());
        if let Some(primary) = &self.primary {
            primary.record_differences();
            primary.announce();
        }
        // Feeds whose new objects this snapshot serves learn so now, that it is live.
        for s in &mut self.sources {
            if let Input::Feed { feed, pending, .. } = &mut s.input
                && let Some((objects, verdicts)) = pending.take()
            {
                let nameservers = verdicts
                    .zones
                    .iter()
                    .filter_map(|z| z.origin.as_ref())
                    .map(|o| {
                        let ns = live.zone(o).map(|z| status::nameservers(z));
                        (o.clone(), ns.unwrap_or_default())
                    })
                    .collect();
                feed.mark_served(Served {
                    objects,
                    verdicts,
                    nameservers,
                });
            }
        }
        drop(live);
        for p in self.refused.update(&refused) {
            log_skipped(p);
            if let Some(s) = self.sources.iter_mut().find(|s| s.label == p.file) {
                s.counters.skipped_entries += 1;
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

    fn update_readiness(&self) {
        let secondaries = self.sources.iter().filter_map(|s| match &s.input {
            Input::Secondary { feed, .. } => feed.not_ready(),
            _ => None,
        });
        let detail: Vec<String> = self
            .sources
            .iter()
            .filter(|s| s.last_good.is_none() && !matches!(s.input, Input::Secondary { .. }))
            .map(|s| {
                s.counters
                    .last_error
                    .clone()
                    .unwrap_or_else(|| match &s.counters.watch_error {
                        Some(e) => format!("{}: not read yet: {e}", s.label),
                        None => format!("{}: not loaded yet", s.label),
                    })
            })
            .collect();
        let mut reasons = Vec::new();
        if !detail.is_empty() {
            reasons.push(format!("records not loaded: {}", detail.join("; ")));
        }
        reasons.extend(secondaries);
        self.status.lock().not_ready = (!reasons.is_empty()).then(|| reasons.join("; "));
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

/// The zones a source of `kind` serves when empty and never read: a records file may be
/// Tailscale's, whose zones are always served; a zone file names its origin.
fn empty_zones(kind: &FileKind, tailscale_zones: &[Name]) -> Vec<ZoneContent> {
    match kind {
        FileKind::Auto => tailscale_zones.iter().map(ZoneContent::empty).collect(),
        FileKind::ZoneFile { origin: Some(o) } => vec![ZoneContent::empty(o)],
        _ => Vec::new(),
    }
}

/// Records a load: its content becomes the last good one, and it is counted.
fn succeed(source: &mut Source, loaded: Loaded) {
    let c = &mut source.counters;
    c.reloads_ok += 1;
    c.skipped_entries += loaded.problems.len() as u64;
    c.last_success_unix = Some(unix_now());
    c.last_error = None;
    source.last_good = Some(loaded.compiled);
}

/// Records that a file cannot be used: its last good records keep serving. The same error
/// again is counted and logged once.
fn fail(source: &mut Source, problem: Problem) {
    let text = problem.to_string();
    if source.failing && source.counters.last_error.as_deref() == Some(text.as_str()) {
        debug!(%problem, "records file still unusable");
        return;
    }
    source.failing = true;
    let keeping = if source.last_good.is_some() {
        "keeping the last good records"
    } else {
        "no records from it yet"
    };
    error!(file = %problem.file, entry = %problem.entry, reason = %problem.reason, "records file unusable; {keeping}");
    source.counters.reloads_error += 1;
    source.counters.last_error = Some(text);
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
                match rx.recv_timeout(poll) {
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
            // now, so the next start finds the serial book in step with the store.
            sources.stamp_published();
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

    fn sources(files: &[&Path]) -> (FileSources, Arc<SourceStatus>) {
        let status = Arc::new(SourceStatus::default());
        let config = SourceConfig {
            files: files
                .iter()
                .map(|p| FileSource {
                    path: p.to_path_buf(),
                    kind: FileKind::Auto,
                })
                .collect(),
            zones: Vec::new(),
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
        s.config.debounce = Duration::from_millis(200);
        assert!(s.refresh());
        assert_eq!(status.readiness(), Ok(()), "absent at start: ready, empty");
        assert!(s.sources[0].counters.absent);
        std::fs::write(&path, zone("{name: www, type: A, value: 192.0.2.1}")).unwrap();
        assert!(s.refresh());
        assert!(serves_a(&s) && !s.sources[0].counters.absent);

        // Deleted and recreated within the debounce: never unset.
        std::fs::remove_file(&path).unwrap();
        let again = path.clone();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            std::fs::write(&again, zone("{name: www, type: A, value: 192.0.2.1}")).unwrap();
        });
        s.refresh();
        writer.join().unwrap();
        assert!(serves_a(&s) && !s.sources[0].counters.absent, "blinked");

        // Deleted for good: unset, still ready.
        std::fs::remove_file(&path).unwrap();
        assert!(s.refresh());
        assert!(!serves_a(&s) && s.sources[0].counters.absent);
        assert_eq!(status.readiness(), Ok(()));
        assert_eq!(s.sources[0].counters.last_error, None);
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

    #[test]
    fn reported_problems_are_new_only_once_while_they_last() {
        let a = Problem::new("f", "x", "bad");
        let b = Problem::new("f", "y", "bad");
        let mut r = Reported::default();
        assert_eq!(r.update([&a, &b, &a]), vec![&a, &b]);
        assert!(r.update([&a, &b]).is_empty());
        assert!(r.update([&b]).is_empty());
        assert_eq!(r.update([&a, &b]), vec![&a]);
    }
}
