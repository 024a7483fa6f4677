//! What every input kind shares: the [`Input`] trait the loop drives, the state a source keeps
//! between loads ([`Kept`]: last good content, counters, reported problems), and the steps
//! several inputs take alike (loading bytes as a file, serving an absent file as empty,
//! recording success and failure).

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use meshdns_zone::{BuildDefaults, Catalog, Name};
use tracing::{debug, error, info, warn};

use super::Poker;
use super::health::SourceCounters;
use crate::content::{FileKind, ParseSettings, Parsed, Problem, ZoneContent};
use crate::records::parse;
use crate::snapshot::{CompiledSource, Loaded, load_parsed};

/// Where an input kind goes in precedence order (a (name, type) given twice is won by the
/// source listed first): ACME challenges (which give no zone, only names placed ahead of the
/// cluster's objects'), files, then ConfigMap keys, then secondary zones, then the live
/// manifest feeds, then the zones written by UPDATE, then the pkarr store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Rank {
    Challenge,
    File,
    Bytes,
    Secondary,
    Feed,
    Update,
    Pkarr,
}

/// One kind of input: it knows how to tell whether it has a new version, and how to read it
/// into its source's [`Kept`] state. The loop in [`super::FileSources`] drives every input the
/// same way and never asks which kind it is.
pub(super) trait Input: Send {
    /// Where this input goes in precedence order.
    fn rank(&self) -> Rank;

    /// Checks for a new version and loads it into `kept`; whether the content to serve changed.
    fn check(&mut self, kept: &mut Kept, loader: &mut Loader) -> bool;

    /// The directory whose change notifications concern this input, if it reads files.
    fn watch_dir(&self) -> Option<PathBuf> {
        None
    }

    /// Why this source holds readiness back as records not loaded yet (`None`: it does not).
    /// By default: nothing loaded yet, with the last error or the reader's.
    fn not_loaded(&self, kept: &Kept) -> Option<String> {
        kept.last_good.is_none().then(|| kept.unloaded_reason())
    }

    /// Why this source holds readiness back otherwise (a secondary zone not transferred yet,
    /// or expired).
    fn not_ready(&self) -> Option<String> {
        None
    }

    /// A snapshot holding what this input last loaded is live now; `refused` is what its
    /// assembly refused, of every source.
    fn published(&mut self, _kept: &mut Kept, _live: &Catalog, _refused: &[Problem]) {}
}

/// What a source keeps between loads.
pub(super) struct Kept {
    /// How logs, metrics and problems name it (a path, `kubernetes`, `pkarr`).
    pub label: String,
    /// The last content that loaded; kept while the input is unusable.
    pub last_good: Option<CompiledSource>,
    pub counters: SourceCounters,
    /// The problems its last load reported (a live feed's are logged when they appear).
    pub reported: Reported,
    /// Whether its current content is unusable (its last good content serving meanwhile).
    pub failing: bool,
}

impl Kept {
    pub fn new(label: String) -> Kept {
        Kept {
            label,
            last_good: None,
            counters: SourceCounters::default(),
            reported: Reported::default(),
            failing: false,
        }
    }

    /// Why nothing is loaded yet: the last error, else why the reader cannot read.
    pub fn unloaded_reason(&self) -> String {
        let c = &self.counters;
        c.last_error
            .clone()
            .unwrap_or_else(|| match &c.watch_error {
                Some(e) => format!("{}: not read yet: {e}", self.label),
                None => format!("{}: not loaded yet", self.label),
            })
    }

    /// Records a load: its content becomes the last good one, and it is counted.
    pub fn succeed(&mut self, loaded: Loaded) {
        let c = &mut self.counters;
        c.reloads_ok += 1;
        c.skipped_entries += loaded.problems.len() as u64;
        c.last_success_unix = Some(unix_now());
        c.last_error = None;
        self.failing = false;
        self.last_good = Some(loaded.compiled);
    }

    /// Records that the input cannot be used: its last good records keep serving. The same
    /// error again is counted and logged once.
    pub fn fail(&mut self, problem: Problem) {
        let text = problem.to_string();
        if self.failing && self.counters.last_error.as_deref() == Some(text.as_str()) {
            debug!(%problem, "records file still unusable");
            return;
        }
        self.failing = true;
        let keeping = if self.last_good.is_some() {
            "keeping the last good records"
        } else {
            "no records from it yet"
        };
        error!(file = %problem.file, entry = %problem.entry, reason = %problem.reason, "records file unusable; {keeping}");
        self.counters.reloads_error += 1;
        self.counters.last_error = Some(text);
    }

    /// Serves an absent input as an empty one: its records go, its zones stay served (names in
    /// them get NXDOMAIN rather than REFUSED), and the source counts as loaded. `never_read` is
    /// what it gives when it was never read (the Tailscale zones, a zone file's origin).
    pub fn set_absent(&mut self, never_read: Vec<ZoneContent>, loader: &mut Loader) -> bool {
        let parsed = match &self.last_good {
            Some(previous) => empty_like(previous),
            None => Parsed {
                zones: never_read,
                ..Parsed::default()
            },
        };
        let loaded = load_parsed(&self.label, parsed, loader.defaults());
        warn!(file = %self.label, "records file absent; serving no records from it until it exists");
        self.succeed(loaded);
        self.counters.absent = true;
        true
    }

    /// Notes that an absent input exists again.
    pub fn set_present(&mut self) {
        if self.counters.absent {
            self.counters.absent = false;
            info!(file = %self.label, "records file present again");
        }
    }

    /// Parses and compiles a new version of a file's (or a ConfigMap key's) bytes here; an
    /// unusable one keeps the last good content serving.
    pub fn load_bytes(&mut self, kind: &FileKind, bytes: Vec<u8>, loader: &mut Loader) -> bool {
        let started = Instant::now();
        let compile = self.compile(kind, bytes, loader);
        self.finish(compile.run(), started)
    }

    /// The parse and compile of a new version of a file's bytes, to run here or on a thread of
    /// its own ([`Compile::run`]).
    pub fn compile(&self, kind: &FileKind, bytes: Vec<u8>, loader: &mut Loader) -> Compile {
        Compile {
            label: self.label.clone(),
            kind: kind.clone(),
            bytes,
            settings: loader.settings.clone(),
            defaults: loader.defaults(),
            emptied: self.last_good.as_ref().map(empty_like),
        }
    }

    /// Keeps what a [`Compile`] gave (started at `started`): its content becomes the last good
    /// one, or the input is unusable and the last good content keeps serving. Whether the
    /// content to serve changed.
    pub fn finish(&mut self, result: Result<Loaded, Problem>, started: Instant) -> bool {
        match result {
            Ok(loaded) => {
                self.took(loaded, started);
                true
            }
            Err(problem) => {
                self.fail(problem);
                false
            }
        }
    }

    /// Logs and keeps a loaded file's content.
    fn took(&mut self, loaded: Loaded, started: Instant) {
        loaded.problems.iter().for_each(log_skipped);
        info!(file = %self.label, records = loaded.records(), skipped = loaded.problems.len(),
            elapsed_ms = started.elapsed().as_millis() as u64, "records file loaded");
        self.succeed(loaded);
    }

    /// Compiles a file's parsed content and keeps it; every problem is logged (each load is a
    /// new version of the file).
    pub fn load_parsed_file(&mut self, mut parsed: Parsed, loader: &mut Loader, started: Instant) {
        if parsed.zones.is_empty()
            && parsed.tagged.is_empty()
            && let Some(previous) = &self.last_good
        {
            // An emptied file clears its records but keeps its zones served (each in the views
            // it was in), so names in them get NXDOMAIN rather than REFUSED (as Tailscale's
            // nameserver does).
            keep_zones(&mut parsed, empty_like(previous));
        }
        let loaded = load_parsed(&self.label, parsed, loader.defaults());
        self.took(loaded, started);
    }
}

/// The parse and compile of one version of a file's bytes: pure, owning all it needs, so that
/// it can run on a thread of its own while the loader checks the other sources.
pub(super) struct Compile {
    label: String,
    kind: FileKind,
    bytes: Vec<u8>,
    settings: ParseSettings,
    defaults: BuildDefaults,
    /// The zones last served, emptied: what an emptied file keeps serving.
    emptied: Option<Parsed>,
}

impl Compile {
    /// Parses and compiles; the problem when the bytes cannot be used.
    pub fn run(self) -> Result<Loaded, Problem> {
        #[cfg(test)]
        gate::pass(&self.label);
        let mut parsed = parse(&self.label, &self.kind, &self.bytes, &self.settings)?;
        drop(self.bytes);
        if parsed.zones.is_empty()
            && parsed.tagged.is_empty()
            && let Some(emptied) = self.emptied
        {
            // An emptied file clears its records but keeps its zones served (each in the views
            // it was in), so names in them get NXDOMAIN rather than REFUSED (as Tailscale's
            // nameserver does).
            keep_zones(&mut parsed, emptied);
        }
        Ok(load_parsed(&self.label, parsed, self.defaults))
    }
}

/// Tests hold a file's parse here to stand for a slow one.
#[cfg(test)]
pub(super) mod gate {
    use std::sync::{Condvar, Mutex};

    static HELD: Mutex<Vec<String>> = Mutex::new(Vec::new());
    static CHANGED: Condvar = Condvar::new();

    /// Parses of `label` wait until [`release`].
    pub fn hold(label: &str) {
        HELD.lock().unwrap().push(label.to_string());
    }

    pub fn release(label: &str) {
        HELD.lock().unwrap().retain(|l| l != label);
        CHANGED.notify_all();
    }

    pub fn pass(label: &str) {
        let mut held = HELD.lock().unwrap();
        while held.iter().any(|l| l == label) {
            held = CHANGED.wait(held).unwrap();
        }
    }
}

/// The zones of `previous`, each with no records.
fn empty_like(previous: &CompiledSource) -> Parsed {
    let empty = |zones: &[Arc<meshdns_zone::Zone>]| -> Vec<ZoneContent> {
        zones
            .iter()
            .map(|z| ZoneContent::empty(z.origin()))
            .collect()
    };
    Parsed {
        zones: empty(&previous.zones),
        tagged: previous
            .tagged
            .iter()
            .flat_map(|(views, part)| {
                empty(&part.zones)
                    .into_iter()
                    .map(move |z| (views.clone(), z))
            })
            .collect(),
        ..Parsed::default()
    }
}

/// Puts the zones of `kept` (an emptied file's, from [`empty_like`]) into `parsed`.
fn keep_zones(parsed: &mut Parsed, kept: Parsed) {
    parsed.zones = kept.zones;
    parsed.tagged = kept.tagged;
}

/// What loading needs besides the input: the parse settings, the debounce, and the serial that
/// every build takes a new one of.
pub(super) struct Loader {
    pub settings: ParseSettings,
    /// Quiet time that ends a burst of events (and that an absence must outlast).
    pub debounce: Duration,
    /// Asks the watcher thread for a check: a parse that outlasted its budget calls it when
    /// it ends, so its result is served at once.
    pub waker: Option<Poker>,
    /// Whether a check waits for every parse it starts to end (the first check, so that the
    /// first snapshot holds every source), rather than at most [`PARSE_BUDGET`].
    pub wait_all: bool,
    serial: u32,
}

/// How long a check waits for a file's parse before it goes on to the other sources. A parse
/// that takes longer goes on on its own thread, and the check after it ends serves it.
pub(super) const PARSE_BUDGET: Duration = Duration::from_millis(250);

impl Loader {
    pub fn new(settings: ParseSettings, debounce: Duration) -> Loader {
        Loader {
            settings,
            debounce,
            waker: None,
            wait_all: true,
            serial: 0,
        }
    }

    /// Whether nothing was built yet.
    pub fn first(&self) -> bool {
        self.serial == 0
    }

    /// Defaults for a build, with a serial that grows with every build (unix time, or one more
    /// than the last when builds come faster than once a second).
    pub fn defaults(&mut self) -> BuildDefaults {
        self.serial = self.serial.saturating_add(1).max(unix_now() as u32);
        BuildDefaults {
            default_ttl: self.settings.default_ttl,
            serial: self.serial,
        }
    }
}

/// Problems reported while they last: each is logged (and counted) when it appears, and again
/// only if it comes back after it cleared.
#[derive(Debug, Default)]
pub(super) struct Reported(HashSet<String>);

impl Reported {
    /// Makes `now` the current problems and returns those that were not current before.
    pub fn update<'p>(&mut self, now: impl IntoIterator<Item = &'p Problem>) -> Vec<&'p Problem> {
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

pub(super) fn log_skipped(p: &Problem) {
    warn!(file = %p.file, entry = %p.entry, reason = %p.reason, "records entry skipped");
}

/// A file's identity: a file whose identity did not change is not read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fingerprint {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

pub(super) fn fingerprint(path: &Path) -> Option<Fingerprint> {
    let m = std::fs::metadata(path).ok()?;
    Some(Fingerprint {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime: m.mtime(),
        mtime_nsec: m.mtime_nsec(),
    })
}

/// A hash of a file's bytes: a file rewritten with the same bytes is not parsed again.
pub(super) fn content_hash(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// Whether `path` does not exist (an unreadable one exists).
pub(super) fn missing(path: &Path) -> bool {
    std::fs::metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}

/// Whether a missing file is to be served as absent now: at once when nothing was served from
/// it yet; otherwise only when it stays missing through the debounce, so an editor's
/// delete-and-recreate (or a swap) never blinks.
pub(super) fn stays_missing(path: &Path, served: bool, debounce: Duration) -> bool {
    !served
        || (0..5).all(|_| {
            std::thread::sleep(debounce / 5);
            missing(path)
        })
}

/// The directory to watch for a file: its parent (the working directory for a bare name).
pub(super) fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The zones a source of `kind` serves when empty and never read: a records file may be
/// Tailscale's, whose zones are always served; a zone file names its origin.
pub(super) fn empty_zones(kind: &FileKind, tailscale_zones: &[Name]) -> Vec<ZoneContent> {
    match kind {
        FileKind::Auto => tailscale_zones.iter().map(ZoneContent::empty).collect(),
        // A zone of some views only is not served to every client, even empty.
        FileKind::ZoneFile {
            origin: Some(o),
            views,
        } if views.is_empty() => vec![ZoneContent::empty(o)],
        _ => Vec::new(),
    }
}

pub(super) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

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
