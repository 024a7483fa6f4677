//! The pkarr relay's store: the newest signed packet of every key, durable in an embedded
//! database, served through an [`Overlay`] under each `--pkarr` origin, and expired by age.
//!
//! **Serving.** Each key's records are compiled alone when its packet arrives and put in the
//! overlay (see [`meshdns_zone::ZoneView`]); a publish costs the same with ten keys stored or
//! ten million, and queries read the overlay without waiting for the writer.
//!
//! **Storage.** `<data-dir>/pkarr.redb`, a [redb](https://docs.rs/redb) database (pure Rust,
//! copy-on-write B-trees, checksummed commits, one writer and lock-free readers; the store
//! iroh-dns-server uses too). The tables ([`tables`]): `packets_v2` (key → its change number
//! and relay payload, exactly as published) and the change log other replicas catch up from
//! (`log`, `meta`, `cursors`): a publish rewrites two rows at random places, not five.
//!
//! **One writer, group commit.** Publishes are verified by the caller (on the HTTP workers, in
//! parallel), then queued (bounded) to one writer thread. It takes everything queued, decides
//! each publish in order (stale, precondition failed, or stored), commits once (fsync), then
//! updates the overlay and answers every publish of the batch. A publish is acknowledged only
//! once its packet is durable: one that got its `204` survives `kill -9`.
//!
//! **Expiry** runs in the writer too, without an index (one would cost every publish two more
//! rows): every second it walks the next six-hundredth of the store in key order (at least
//! 1,000 packets), so a packet past its age goes within ten minutes, at a bounded cost per
//! commit.
//!
//! **Start-up** reads every stored packet once and compiles it; signatures are not verified
//! again. They were verified before the packet was stored, and redb's commits carry checksums
//! (a torn or corrupted commit is not used: the previous one is), so what is read is what was
//! verified. A stored packet that no longer parses is dropped with a warning.
//!
//! **Migration.** Packets kept in the earlier layout (one `<data-dir>/pkarr/<z32>.pkarr` file
//! per key) are verified, moved into the database on first start, and their files removed.
//!
//! Freshness follows the pkarr relay specification: a packet whose timestamp is older than the
//! stored one is refused ([`PutError::Stale`], HTTP 409); with `If-Match: <timestamp>` the
//! stored packet's timestamp must be that one ([`PutError::Changed`], HTTP 412). Two different
//! packets with the same timestamp are ordered by [`tie`], the same on every replica (so
//! replicas that got them in either order keep the same one); the loser is `Stale`, and the
//! stored packet sent again is [`PutError::Same`] (409 too).
//!
//! **Timestamps from the future.** A packet dated more than [`PkarrConfig::max_future`]
//! (`--pkarr-max-future`) ahead of this relay's clock is refused ([`PutError::Future`], HTTP
//! 400): accepted, it would win against every honest publish until that date and never expire
//! by age. One already stored (by a version without the bound, or before the clock stepped
//! back) pins nothing: from start-up it is not served but kept on disk (the clock may be what
//! is behind), and any valid publish replaces it.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{
    AtomicBool, AtomicU64,
    Ordering::{AcqRel, Acquire, Relaxed, Release},
};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use meshdns_iroh::pkarr::{PacketError, SignedPacket};
use meshdns_iroh::{endpoint_id_bytes, parse_endpoint_id};
use meshdns_zone::{Key, Name, Overlay, Published};
use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata};
use tracing::{error, info, warn};

pub mod dht;
mod journal;
mod tables;

pub use tables::{ChangePage, Epoch, Have, Origin, tie};
use tables::{PACKETS, Tables, payload_of};

/// The database file in the data directory.
pub const DB_FILE: &str = "pkarr.redb";
/// The directory of the earlier one-file-per-key layout, migrated on first start.
pub const LEGACY_DIR: &str = "pkarr";

/// Publishes waiting for the writer, at most; more get [`PutError::Busy`] (HTTP 503).
const QUEUE: usize = 16_384;
/// Publishes decided in one commit, at most: the whole queue. A commit writes each B-tree page
/// it changes once, so with a store much larger than a commit each packet costs about one page
/// written; larger commits share pages (a catch-up of 100,000 into a million: 16,384 per commit
/// took a quarter less of the writer's time than 4,096, measured). A commit that large takes
/// about half a second at a million stored: only a flood or a catch-up fills it.
const MAX_BATCH: usize = 16_384;
/// How often the writer walks a slice of the store for expired packets.
const EXPIRE_EVERY: Duration = Duration::from_secs(1);
/// Slices one walk of the store is cut into: a packet past its age (7 days by default) goes
/// within ten minutes. A sixtieth a second (within a minute) cost a replica 6% of its CPU at a
/// million stored and 1,000 publishes a second (measured).
const EXPIRE_SLICES: usize = 600;
/// Packets one slice walks at least.
const EXPIRE_ROWS: usize = 1_000;
/// Stale log rows gathered before a round removes them, at least; and the share of the store
/// gathered at most (an eighth: at a million stored, a round then removes about seven rows of
/// each page of the log, where removing each row with its publish wrote a page per publish).
const STALE_ROUND: usize = 4_096;
const STALE_SHARE: usize = 8;
/// Stale log rows one commit removes, at most, unless the last commit made more stale (a page
/// of a catch-up replaces up to thousands): removals keep pace with what goes stale. In number
/// order: neighbours share pages.
const STALE_PER_COMMIT: usize = 1_024;

/// Packets an authenticated peer pushed (no acknowledgement waiting on them), and clients'
/// publishes the journal holds, are answered once decided and served, and written by a later
/// commit. Each commit copies every B-tree page its packets touch, about one leaf per packet
/// whatever their number, and the branches above them once: at 1,000 publishes a second,
/// 100 ms (ten commits a second) cost restarted replicas 15–20% more CPU per packet than a
/// second (`docs/BENCHMARKS.md`, session 12; replicas just filled showed no difference beyond
/// the VM's noise). These commits are not synced ([`SYNC_EVERY`]): a crash
/// loses at most the last two seconds of pushed packets, which the next start reads back from
/// the peers; the journal keeps the publishes. They are written at most this much later, or
/// as soon as any commit runs (a cursor, a catch-up page, an expiry slice that removes
/// packets, a stop) ...
const LAZY_FLUSH: Duration = Duration::from_secs(1);
/// ... or once this many wait.
const LAZY_MAX: usize = 8_192;
/// Commits that only write what is durable elsewhere or may be lost (pushed packets, which the
/// peers send again; clients' publishes, which the journal holds) are not synced: at most this
/// long after the first of them, a synced commit makes them durable. Until it, the head (what
/// a push's answer and a peer's read count from) stays at the last synced commit: a crash
/// takes the database back to it, and the numbers above are given again.
const SYNC_EVERY: Duration = Duration::from_secs(1);
/// The steps a gathering of clients' publishes sleeps its window in: a step without a publish
/// ends it.
const QUARTERS: usize = 4;

/// Clients' publishes checked together at most, in [`Writer::check`]: different clients
/// share these batches, and one client's bad signature costs its batch a pass of single
/// checks, so at most 63 others. A replicated batch, one sender's, is
/// [`meshdns_iroh::pkarr::BATCH`] (256). A commit rarely gathers more clients' publishes.
const CLIENT_BATCH: usize = 64;

/// How the relay behaves.
#[derive(Debug, Clone)]
pub struct PkarrConfig {
    /// Origins published records are served under (`_iroh.<z32>.<origin>`).
    pub origins: Vec<Name>,
    /// The data directory (`pkarr.redb` there); `None` keeps packets in memory only.
    pub data_dir: Option<PathBuf>,
    /// Packets older than this (by their own timestamp) are dropped.
    pub max_age: Duration,
    /// Packets dated more than this ahead of the clock are refused, and dropped if stored.
    pub max_future: Duration,
    /// Publishes a minute allowed per client address; 0 means no limit.
    pub put_per_minute: u32,
    /// Publishes a client address may make at once before the rate applies (at least 1).
    pub put_burst: u32,
    /// redb's page cache, in bytes.
    pub cache_bytes: usize,
    /// How long the writer gathers publishes after the first before it commits: more per
    /// commit (less CPU and disk per publish) for at most that much more latency. Gathering
    /// ends early once a quarter of it passed without a publish. Zero commits what is queued
    /// at once.
    pub commit_window: Duration,
    /// Serve keys found elsewhere (the Mainline DHT) from the overlay's cache.
    pub lookups: bool,
}

impl PkarrConfig {
    /// A configuration with the defaults for everything but the origins and directory.
    pub fn new(origins: Vec<Name>, data_dir: Option<PathBuf>) -> PkarrConfig {
        PkarrConfig {
            origins,
            data_dir,
            max_age: Duration::from_secs(7 * 24 * 3600),
            max_future: Duration::from_secs(5 * 60),
            put_per_minute: 0,
            put_burst: 1,
            cache_bytes: 32 << 20,
            commit_window: Duration::ZERO,
            lookups: false,
        }
    }
}

/// Why a publish was refused; each maps to an HTTP status at the relay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PutError {
    /// The key in the path is not an endpoint id (400).
    #[error("invalid key: {0}")]
    Key(String),
    /// The body is not a valid signed packet for that key (400).
    #[error("invalid body payload: {0}")]
    Payload(PacketError),
    /// Dated further ahead of this relay's clock than the configured bound (400).
    #[error(
        "the packet's timestamp ({timestamp_us} µs since the Unix epoch) is more than {max_future:?} ahead of this relay's clock; the bound is --pkarr-max-future: sign the packet with the current time"
    )]
    Future {
        /// The packet's timestamp.
        timestamp_us: u64,
        /// The bound (`--pkarr-max-future`).
        max_future: Duration,
    },
    /// Older than the stored packet, or of the same timestamp and losing the tie rule
    /// ([`tie`]) to it (409).
    #[error(
        "a packet with a newer timestamp (or the same timestamp, winning the tie) is already stored"
    )]
    Stale,
    /// This very packet is already stored (409).
    #[error("this packet is already stored")]
    Same,
    /// `If-Match` named another timestamp than the stored packet's (412).
    #[error("the stored packet's timestamp is {}, not the one If-Match names", stored.map_or_else(|| "absent (nothing stored)".to_string(), |t| t.to_string()))]
    Changed {
        /// The stored packet's timestamp, if any.
        stored: Option<u64>,
    },
    /// The client is over its publish rate (429).
    #[error("too many publishes from this address; try again later")]
    RateLimited,
    /// The writer's queue is full (503).
    #[error("too many publishes waiting to be stored; try again shortly")]
    Busy,
    /// The packet could not be persisted (500).
    #[error("cannot store the packet: {0}")]
    Io(String),
}

impl PutError {
    /// A short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            PutError::Key(_) | PutError::Payload(PacketError::Key) => "key",
            PutError::Payload(PacketError::Signature) => "signature",
            PutError::Payload(PacketError::Outside(_)) => "outside_key",
            PutError::Payload(PacketError::TooLong(_) | PacketError::TooShort(_)) => "size",
            PutError::Payload(PacketError::Dns(_)) => "dns",
            PutError::Future { .. } => "future",
            PutError::Stale => "stale",
            PutError::Same => "same",
            PutError::Changed { .. } => "precondition",
            PutError::RateLimited => "rate_limited",
            PutError::Busy => "busy",
            PutError::Io(_) => "io",
        }
    }
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct PkarrCounters {
    /// Publishes stored.
    pub accepted: AtomicU64,
    /// Publishes refused, by reason label.
    pub rejected: Mutex<BTreeMap<&'static str, u64>>,
    /// Packets dropped for age.
    pub expired: AtomicU64,
    /// Commits made by the writer.
    pub commits: AtomicU64,
    /// Of those, the synced ones (the others are made durable by the next of these).
    pub synced_commits: AtomicU64,
    /// Whether a commit since the last synced one wrote packets above the head (they are not
    /// read by peers until a synced commit holds them: see [`SYNC_EVERY`]).
    pub unsynced: std::sync::atomic::AtomicBool,
    /// Time spent committing, in microseconds.
    pub commit_micros: AtomicU64,
    /// Writes (each synced) of clients' publishes to the journal.
    pub journal_syncs: AtomicU64,
    /// Time spent writing and syncing the journal, in microseconds.
    pub journal_micros: AtomicU64,
    /// Of the publishes stored, those another replica sent.
    pub replicated: AtomicU64,
    /// The highest change number committed (this replica's head).
    pub head: AtomicU64,
    /// Log rows of replaced packets not removed yet.
    pub stale_rows: AtomicU64,
}

impl PkarrCounters {
    fn reject(&self, e: &PutError) {
        let mut r = self.rejected.lock().unwrap_or_else(|e| e.into_inner());
        *r.entry(e.metric_label()).or_default() += 1;
    }
}

/// What the writer answers for a packet: the sequence number it was stored under, or why not.
type Stored = Result<u64, PutError>;

/// Where the writer's answer for a packet goes.
enum Reply {
    /// To the one waiting for this packet.
    One(tokio::sync::oneshot::Sender<Stored>),
    /// Into its place among a batch's answers, sent together once every one is in: one wake
    /// of the task waiting for the batch. (An answer each woke that task for each, and on a
    /// busy core each wake took the writer off it: a switch each way per packet.)
    Part(Arc<Mutex<Gather>>, usize),
}

impl Reply {
    fn send(self, stored: Stored) -> Result<(), Stored> {
        match self {
            Reply::One(tx) => tx.send(stored),
            Reply::Part(gather, i) => {
                let mut g = gather.lock().expect("gather");
                g.answers[i] = Some(stored);
                g.left -= 1;
                if g.left == 0
                    && let Some(to) = g.to.take()
                {
                    let _ = to.send(std::mem::take(&mut g.answers));
                }
                Ok(())
            }
        }
    }
}

/// A batch's answers, gathering. When every [`Reply::Part`] is dropped unanswered (the writer
/// stopped), so is `to`, and the receiver sees it closed.
struct Gather {
    /// Each in its place.
    answers: Vec<Option<Stored>>,
    /// How many are still to come.
    left: usize,
    /// Where they go once all came.
    to: Option<tokio::sync::oneshot::Sender<Vec<Option<Stored>>>>,
}

/// A batch's [`Gather`] for `n` answers, and where they all come once in.
fn gather(n: usize) -> (Arc<Mutex<Gather>>, GatherDone) {
    let (tx, done) = tokio::sync::oneshot::channel();
    let gather = Arc::new(Mutex::new(Gather {
        answers: vec![None; n],
        left: n,
        to: Some(tx),
    }));
    (gather, done)
}

/// Where a [`Gather`]'s answers come.
type GatherDone = tokio::sync::oneshot::Receiver<Vec<Option<Stored>>>;

/// The `n` answers of a batch, once every one is in (each an error if the writer stopped).
async fn answers(done: GatherDone, n: usize) -> Vec<Stored> {
    match done.await {
        Ok(all) => all.into_iter().map(|r| r.unwrap_or_else(stopped)).collect(),
        Err(_) => vec![stopped(); n],
    }
}

/// The answer to a caller whose job the writer will never take: it has stopped.
fn stopped<T>() -> Result<T, PutError> {
    Err(PutError::Io("the store's writer has stopped".into()))
}

/// A pushed packet as it came, for the writer to check ([`Job::Pushed`]).
struct Unverified {
    key: Key,
    payload: Vec<u8>,
    /// Where another replica that sent it first took it.
    origin: Option<Origin>,
    answer: Answer,
    reply: Reply,
}

/// A verified publish on its way to the writer.
struct Put {
    key: Key,
    payload: Vec<u8>,
    timestamp_us: u64,
    published: Published,
    if_match: Option<u64>,
    /// Where another replica that sent it first took it.
    origin: Option<Origin>,
    /// When it is answered.
    answer: Answer,
    reply: Reply,
}

/// When a put is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// Once decided and served, before it is durable: a push no one waits for
    /// ([`PkarrStore::put_pushed`]).
    Decided,
    /// Once durable: in the journal, or committed (a store in memory commits).
    Durable,
    /// Once committed into the database: a catch-up page, whose cursor a commit keeps after it.
    Committed,
}

impl Answer {
    /// How a replicated put is answered: with a cursor to keep after it, once committed.
    fn replicated(cursor: Option<&(Epoch, u64)>) -> Answer {
        match cursor {
            Some(_) => Answer::Committed,
            None => Answer::Durable,
        }
    }
}

enum Job {
    /// Checked packets (a catch-up page, or a push from a sender without the token), decided
    /// in order.
    Puts(Vec<Put>),
    /// An authenticated peer's push, not checked yet: the writer checks its signatures as one
    /// batch, then decides those that pass in order.
    Pushed(Vec<Unverified>),
    /// A client's publish, not checked yet: the writer checks the signatures of every publish
    /// it gathered for one commit together (see [`SignedPacket::verify_relay_batch`]).
    Publish(Unchecked),
    /// Every packet of the peer with this epoch up to this sequence number is here once the
    /// puts queued before this job are decided: kept in their commit or a later one, answered
    /// once committed.
    Cursor(Epoch, u64, Reply),
    /// Expire now (tests), answering with how many went.
    Expire(std::sync::mpsc::Sender<usize>),
    /// Commit the pushed packets waiting to be written, answered with whether they are
    /// durable (and numbered) now: a catch-up read after it sees every packet served here
    /// before it.
    Flush(tokio::sync::oneshot::Sender<bool>),
    /// Commit what was gathered with it, keep what the next start needs, and stop (answered
    /// once that is durable); jobs queued after it are dropped with the queue.
    Stop(std::sync::mpsc::Sender<()>),
}

impl Job {
    /// How many packets it carries.
    fn items(&self) -> usize {
        match self {
            Job::Puts(p) => p.len(),
            Job::Pushed(p) => p.len(),
            _ => 1,
        }
    }
}

/// A client's publish as it came: its key, relay payload and `If-Match`.
struct Unchecked {
    key: Key,
    body: Vec<u8>,
    if_match: Option<u64>,
    reply: Reply,
}

/// A stored packet, as `GET /pkarr/<key>` serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPacket {
    /// The relay payload, exactly as published.
    pub payload: Vec<u8>,
    /// The smallest TTL of its records (`None` without records).
    pub min_ttl: Option<u32>,
}

/// The keys changed since they were last taken (only while tracked).
#[derive(Default)]
struct ChangeLog {
    pending: Mutex<Option<HashMap<Key, Option<Published>>>>,
    on_change: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
    /// The hook ran since the changes were last taken: the taker is coming for them, and
    /// calling it again for each batch only woke its thread (at 1,000 publishes a second, a
    /// hundred times a second, each wake a switch each way).
    signalled: AtomicBool,
}

impl ChangeLog {
    fn record(&self, key: Key, published: Option<&Published>) {
        if let Some(m) = self.pending.lock().expect("change log").as_mut() {
            m.insert(key, published.cloned());
        }
    }

    fn signal(&self) {
        let any = self
            .pending
            .lock()
            .expect("change log")
            .as_ref()
            .is_some_and(|m| !m.is_empty());
        if any
            && !self.signalled.swap(true, AcqRel)
            && let Some(f) = self.on_change.lock().expect("change log").as_ref()
        {
            f();
        }
    }

    /// The changes recorded so far; the next change calls the hook again.
    fn take(&self) -> Vec<(Key, Option<Published>)> {
        // Cleared before the drain: a change recorded after it calls the hook.
        self.signalled.store(false, Release);
        match self.pending.lock().expect("change log").as_mut() {
            Some(m) => m.drain().collect(),
            None => Vec::new(),
        }
    }
}

/// The relay's packets.
pub struct PkarrStore {
    config: PkarrConfig,
    overlay: Arc<Overlay>,
    changes: Arc<ChangeLog>,
    db: Arc<Database>,
    jobs: Option<SyncSender<Job>>,
    writer: Option<JoinHandle<()>>,
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
    epoch: Epoch,
    /// Pushed packets answered and served, not written yet.
    pending: Arc<Mutex<Pending>>,
    /// After a start that followed an unclean stop, the head held durably then.
    unclean_head: Option<u64>,
    /// Publish counters.
    pub counters: Arc<PkarrCounters>,
}

impl std::fmt::Debug for PkarrStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PkarrStore")
            .field("packets", &self.overlay.len())
            .finish_non_exhaustive()
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, micros)
}

/// `d` in microseconds, saturating (a duration of any size is a setting one may give).
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The latest timestamp accepted now: the clock plus `max_future`.
fn horizon(max_future: Duration) -> u64 {
    now_us().saturating_add(micros(max_future))
}

fn io(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl PkarrStore {
    /// Opens the store: the database in the data directory (created if missing, the earlier
    /// layout migrated into it), every stored packet loaded for serving, and the writer started.
    pub fn open(config: PkarrConfig) -> std::io::Result<PkarrStore> {
        let mut builder = Database::builder();
        builder.set_cache_size(config.cache_bytes);
        let db = match &config.data_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                let path = dir.join(DB_FILE);
                let named = |e: &dyn std::fmt::Display| io(format!("{}: {e}", path.display()));
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&path)
                    .map_err(|e| named(&e))?;
                advise_random(&file);
                // Before redb opens it: a repair after a crash walks every tree, from the
                // cache too.
                prefetch(&file);
                let backend = redb::backends::FileBackend::new(file).map_err(|e| named(&e))?;
                builder
                    .create_with_backend(backend)
                    .map_err(|e| named(&e))?
            }
            None => builder
                .create_with_backend(redb::backends::InMemoryBackend::new())
                .map_err(io)?,
        };
        let clean = tables::stopped_cleanly(&db).map_err(io)?;
        // The tables exist from the first start on, with this replica's epoch.
        let epoch = tables::prepare(&db).map_err(io)?;
        // The head the database held before the journal's records went in: pushes answered
        // without being written may be lost above it (see `unclean_head` below).
        let mut committed_head = 0;
        let mut replayed = 0;
        let journal = match &config.data_dir {
            Some(dir) => {
                migrate(&db, &dir.join(LEGACY_DIR))?;
                committed_head = tables::next_seq(&db).map_err(io)? - 1;
                let (journal, records) = journal::Journal::open(dir, &epoch)?;
                replayed = replay(&db, records, horizon(config.max_future)).map_err(|e| {
                    io(format!(
                        "{}: {e}",
                        dir.join(journal::JOURNAL_FILE).display()
                    ))
                })?;
                if replayed > 0 {
                    info!(
                        replayed,
                        "pkarr store: publishes acknowledged before the last stop and not committed were read back from the journal"
                    );
                }
                Some(std::cell::RefCell::new(journal))
            }
            None => None,
        };
        let next_seq = tables::next_seq(&db).map_err(io)?;
        let (overlay, beyond) = load(&db, horizon(config.max_future), config.lookups)?;
        let stale = tables::stale_rows(&db).map_err(io)?;
        let overlay = Arc::new(overlay);
        // Kept on disk, not served: if the clock is what is behind (no RTC, NTP not synced
        // yet), deleting them would lose every packet; a publish at today's time replaces one.
        let db = Arc::new(db);
        let counters = Arc::new(PkarrCounters::default());
        let head = tables::have(&db, epoch, u64::MAX)
            .map_err(io)?
            .get(&epoch)
            .copied()
            .unwrap_or(0);
        counters.head.store(head, Relaxed);
        counters.stale_rows.store(stale.len() as u64, Relaxed);
        // Records read back from the journal mean the last run did not commit what it answered
        // (or the database is an older copy): pushes it answered before writing them were
        // numbered above the head of then, and the journal's numbers may pass theirs. Peers are
        // read with that head, so they send back what was lost.
        let unclean_head = if replayed > 0 {
            Some(committed_head)
        } else {
            (!clean).then_some(head)
        };
        if unclean_head.is_some() {
            info!(
                head,
                "pkarr store: the last run did not stop cleanly; pushes it answered before writing them may be lost, and each peer is read as if this replica held only its head until it was read through once"
            );
        }
        let pending = Arc::new(Mutex::new(Pending::default()));
        if !beyond.is_empty() {
            warn!(
                not_served = beyond.len(),
                max_future_s = config.max_future.as_secs(),
                "pkarr packets dated beyond --pkarr-max-future are not served (stored by a relay without the bound, or this clock is behind); their keys may publish again"
            );
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let changes = Arc::new(ChangeLog::default());
        let writer = Writer {
            db: db.clone(),
            overlay: overlay.clone(),
            changes: changes.clone(),
            counters: counters.clone(),
            max_age: config.max_age,
            max_future: config.max_future,
            window: config.commit_window,
            expire_from: std::cell::Cell::new(None),
            stale: std::cell::RefCell::new(Stale::new(stale)),
            pending: pending.clone(),
            journal,
            next_seq: std::cell::Cell::new(next_seq),
            unsynced_since: std::cell::Cell::new(None),
        };
        let thread = std::thread::Builder::new()
            .name("meshdns-pkarr".into())
            .spawn(move || writer.run(rx))?;
        Ok(PkarrStore {
            config,
            overlay,
            changes,
            db,
            jobs: Some(tx),
            writer: Some(thread),
            buckets: Mutex::default(),
            epoch,
            counters,
            pending,
            unclean_head,
        })
    }

    /// After a start that followed an unclean stop (or a first start of a store kept by a
    /// build that did not mark clean stops), the head this replica held durably then: pushes
    /// it answered before writing them ([`PkarrStore::put_pushed`]) may be lost above it. Until
    /// a peer has been read through once, reads of it name this as the replica's own head, so
    /// that the peer sends back what it was told is held and was lost.
    pub fn durable_head(&self) -> Option<u64> {
        self.unclean_head
    }

    /// This replica's identity: random, made with its database.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// What changed here after sequence number `after`: one page of at most about `max_bytes`
    /// of packets, read in one snapshot (blocking: call it off the async workers), without
    /// those the reader holds by `have`, nor the changes `held` says it holds (acknowledged
    /// pushes; their numbers still move the page on).
    pub fn changes_after(
        &self,
        after: u64,
        max_bytes: usize,
        have: &Have,
        held: &dyn Fn(u64) -> bool,
    ) -> std::io::Result<ChangePage> {
        let durable = self.counters.head.load(Relaxed);
        let mut page = tables::changes_after(
            &self.db,
            self.epoch,
            (after, durable),
            max_bytes,
            have,
            held,
        )
        .map_err(io)?;
        // Packets dated beyond the bound are not served here, nor passed on.
        let latest = horizon(self.config.max_future);
        page.entries
            .retain(|(_, _, p, _)| stamp_of(p).is_none_or(|t| t <= latest));
        Ok(page)
    }

    /// How far this replica read each peer, and its own epoch: what its reads can leave out
    /// (blocking).
    pub fn have(&self) -> std::io::Result<Have> {
        tables::have(&self.db, self.epoch, self.counters.head.load(Relaxed)).map_err(io)
    }

    /// How far the peer with `epoch` has been read: every packet it held up to this sequence
    /// number is here (0: nothing read yet).
    pub fn cursor(&self, epoch: &Epoch) -> std::io::Result<u64> {
        tables::cursor(&self.db, epoch).map_err(io)
    }

    /// Stores packets another replica sent (pushed, or read while catching up): each verified
    /// as a publish is, decided as one (newest wins, then [`tie`]), and never rate limited
    /// unless `client` is given (a sender without the peers' token: each packet then counts
    /// as a publish of that address). Each item's origin (the replica that took it from its
    /// publisher, and its sequence number there) is kept with it, for [`Have`]. With `cursor`,
    /// the peer's cursor is kept once these are decided. One result per item, in order;
    /// `Err(Same)` and `Err(Stale)` mean this replica already holds that packet or one that
    /// wins over it.
    pub async fn put_replicated(
        &self,
        client: Option<IpAddr>,
        items: Vec<(Key, Vec<u8>, Option<Origin>)>,
        cursor: Option<(Epoch, u64)>,
    ) -> Vec<Result<(), PutError>> {
        let answer = Answer::replicated(cursor.as_ref());
        self.replicated(client, items, cursor, answer).await
    }

    /// [`PkarrStore::put_replicated`] for packets an authenticated peer pushed without waiting
    /// for acknowledgements: each is answered once decided and served, before it is durable;
    /// the writer writes them with its next commit, within [`LAZY_FLUSH`]. A crash loses
    /// those not written yet, and the next start reads them back from the peers
    /// ([`PkarrStore::durable_head`]). Pushes answered this way must not say this replica's
    /// head holds them: its head + 1 says so only after the next commit.
    pub async fn put_pushed(
        &self,
        items: Vec<(Key, Vec<u8>, Option<Origin>)>,
    ) -> Vec<Result<(), PutError>> {
        self.replicated(None, items, None, Answer::Decided).await
    }

    async fn replicated(
        &self,
        client: Option<IpAddr>,
        items: Vec<(Key, Vec<u8>, Option<Origin>)>,
        cursor: Option<(Epoch, u64)>,
        answer: Answer,
    ) -> Vec<Result<(), PutError>> {
        if client.is_some() {
            let checked = self.check_replicated(client, items).await;
            return self.submit_checked(checked, cursor, answer).await;
        }
        // An authenticated peer's push: its signatures are checked by the writer, as one batch
        // with the push's other packets, not on the blocking pool (a hop there and back was two
        // thread wakes per push, each a switch on a busy core).
        let Prechecked {
            mut results,
            mut origins,
            todo,
        } = self.precheck(None, items);
        if !todo.is_empty() {
            let (gather, done) = gather(todo.len());
            let at: Vec<usize> = todo.iter().map(|t| t.0).collect();
            let pushed = todo
                .into_iter()
                .enumerate()
                .map(|(n, (i, key, payload))| Unverified {
                    key,
                    payload,
                    origin: origins[i].take(),
                    answer,
                    reply: Reply::Part(gather.clone(), n),
                })
                .collect();
            drop(gather);
            let stored = match self.queue(Job::Pushed(pushed), true).await {
                Ok(()) => answers(done, at.len()).await,
                Err(e) => vec![Err(e); at.len()],
            };
            for (i, r) in at.into_iter().zip(stored) {
                results[i] = Some(r.map(|_seq| ()));
            }
        }
        self.decided(results, cursor).await
    }

    /// The first half of [`PkarrStore::put_replicated`], which needs nothing of the writer:
    /// each packet's signature checked, and those decided without one (over the sender's
    /// rate, older than what is stored, or the very packet stored) answered. Catch-up checks
    /// a page while the writer commits the one before ([`PkarrStore::store_checked`]); the
    /// writer decides again what it stores, so a packet stored meanwhile changes nothing.
    pub async fn check_replicated(
        &self,
        client: Option<IpAddr>,
        items: Vec<(Key, Vec<u8>, Option<Origin>)>,
    ) -> Checked {
        let Prechecked {
            results,
            origins,
            todo,
        } = self.precheck(client, items);
        // Signatures checked off the async workers, on every core.
        let verified = verify_all(todo, self.config.max_future).await;
        Checked {
            client,
            results,
            origins,
            verified,
        }
    }

    /// What [`PkarrStore::check_replicated`] decides without a signature check: over the
    /// sender's rate, older than what is stored, or the very packet stored (a catch-up over
    /// keys already here, or the same packet from a second peer, costs a lookup each).
    fn precheck(
        &self,
        client: Option<IpAddr>,
        items: Vec<(Key, Vec<u8>, Option<Origin>)>,
    ) -> Prechecked {
        let latest = horizon(self.config.max_future);
        let mut results: Vec<Option<Result<(), PutError>>> = vec![None; items.len()];
        let origins: Vec<Option<Origin>> = items.iter().map(|i| i.2).collect();
        let mut todo = Vec::with_capacity(items.len());
        let read = self.db.begin_read().ok();
        let packets = read.as_ref().and_then(|r| r.open_table(PACKETS).ok());
        for (i, (key, payload, _)) in items.into_iter().enumerate() {
            if let Some(ip) = client
                && !self.allow(ip, Instant::now())
            {
                results[i] = Some(Err(PutError::RateLimited));
                continue;
            }
            match (stamp_of(&payload), self.overlay.stamp(&key)) {
                (Some(new), Some(old)) if old > new && old <= latest => {
                    results[i] = Some(Err(PutError::Stale));
                }
                (Some(new), Some(old))
                    if old == new
                        && packets.as_ref().is_some_and(|t| {
                            t.get(&key)
                                .ok()
                                .flatten()
                                .is_some_and(|v| payload_of(v.value()) == payload.as_slice())
                        }) =>
                {
                    results[i] = Some(Err(PutError::Same));
                }
                _ => todo.push((i, key, payload)),
            }
        }
        drop(packets);
        drop(read);
        Prechecked {
            results,
            origins,
            todo,
        }
    }

    /// The second half of [`PkarrStore::put_replicated`]: the packets `checked` passed go to
    /// the writer, and the peer's `cursor` is kept once they are decided. One result per
    /// item checked, in order.
    pub async fn store_checked(
        &self,
        checked: Checked,
        cursor: Option<(Epoch, u64)>,
    ) -> Vec<Result<(), PutError>> {
        let answer = Answer::replicated(cursor.as_ref());
        self.submit_checked(checked, cursor, answer).await
    }

    async fn submit_checked(
        &self,
        checked: Checked,
        cursor: Option<(Epoch, u64)>,
        answer: Answer,
    ) -> Vec<Result<(), PutError>> {
        let Checked {
            client,
            mut results,
            mut origins,
            verified,
        } = checked;
        let mut passed = Vec::with_capacity(verified.len());
        let mut at = Vec::with_capacity(verified.len());
        for (i, v) in verified {
            match v {
                Ok(mut v) => {
                    v.origin = origins[i].take();
                    passed.push(v);
                    at.push(i);
                }
                Err(e) => results[i] = Some(Err(e)),
            }
        }
        // Only a sender with the token waits for room in the writer's queue (a peer sends a
        // bounded number of batches at a time); anyone else gets Busy, as a publish would.
        let stored = self.submit(passed, client.is_none(), answer).await;
        for (i, r) in at.into_iter().zip(stored) {
            results[i] = Some(r.map(|_seq| ()));
        }
        self.decided(results, cursor).await
    }

    /// A replicated batch's results, each counted; with `cursor`, the peer's cursor kept
    /// once every packet is here (or lost to a winner, or could never be stored).
    async fn decided(
        &self,
        results: Vec<Option<Result<(), PutError>>>,
        cursor: Option<(Epoch, u64)>,
    ) -> Vec<Result<(), PutError>> {
        let results: Vec<Result<(), PutError>> = results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(PutError::Io("not decided".into()))))
            .collect();
        for r in &results {
            match r {
                Ok(()) => {
                    self.counters.accepted.fetch_add(1, Relaxed);
                    self.counters.replicated.fetch_add(1, Relaxed);
                }
                Err(e) => self.counters.reject(e),
            }
        }
        // The cursor moves only past packets that are here (or lost to a winner, or could
        // never be stored): a failed write is read again next time.
        let failed = results
            .iter()
            .any(|r| matches!(r, Err(PutError::Io(_) | PutError::Busy)));
        if let Some((epoch, seq)) = cursor
            && !failed
            && let Some(jobs) = &self.jobs
        {
            let (reply, done) = tokio::sync::oneshot::channel();
            if self
                .send(jobs, Job::Cursor(epoch, seq, Reply::One(reply)))
                .await
                .is_ok()
            {
                let _ = done.await;
            }
        }
        results
    }

    /// What the store serves, for the catalog to attach under each origin.
    pub fn overlay(&self) -> &Arc<Overlay> {
        &self.overlay
    }

    /// Starts keeping the keys changed (published or expired) for [`PkarrStore::take_changes`],
    /// calling `on_change` after the first change since they were last taken: serials and
    /// zone transfers follow publishes. Changes made after this call are kept.
    pub fn track_changes(&self, on_change: impl Fn() + Send + Sync + 'static) {
        // The hook first: a change signalled in between would find none, and call none later.
        *self.changes.on_change.lock().expect("change log") = Some(Box::new(on_change));
        *self.changes.pending.lock().expect("change log") = Some(HashMap::new());
    }

    /// The keys changed since the last call (the newest records of each, `None` once expired),
    /// if changes are tracked.
    pub fn take_changes(&self) -> Vec<(Key, Option<Published>)> {
        self.changes.take()
    }

    /// The origins published records are served under.
    pub fn origins(&self) -> &[Name] {
        &self.config.origins
    }

    /// Stores a publish for the key in the URL path (`z32`, or 64 hex) from `client` (rate
    /// limited per address when configured). With `if_match`, the stored packet's timestamp
    /// must be that one. Returns once the packet is durable and served (with the sequence
    /// number it was stored under, which replication sends along), or refused.
    pub async fn put(
        &self,
        client: Option<IpAddr>,
        key: &str,
        body: &[u8],
        if_match: Option<u64>,
    ) -> Result<u64, PutError> {
        let result = match client {
            Some(ip) if !self.allow(ip, Instant::now()) => Err(PutError::RateLimited),
            _ => self.try_put(key, body, if_match).await,
        };
        match &result {
            Ok(_) => {
                self.counters.accepted.fetch_add(1, Relaxed);
            }
            Err(e) => self.counters.reject(e),
        }
        result
    }

    async fn try_put(
        &self,
        key: &str,
        body: &[u8],
        if_match: Option<u64>,
    ) -> Result<u64, PutError> {
        // The key's text is decoded here, its point once, by the writer's signature check.
        let key = endpoint_id_bytes(key).map_err(|e| PutError::Key(e.to_string()))?;
        let (reply, done) = tokio::sync::oneshot::channel();
        let job = Job::Publish(Unchecked {
            key,
            body: body.to_vec(),
            if_match,
            reply: Reply::One(reply),
        });
        self.queue(job, false).await?;
        done.await.unwrap_or_else(|_| stopped())
    }

    /// Stores verified packets: one result per packet, in order. An authenticated peer's
    /// (`wait`: it waits for room in the queue) go to the writer as one job, answered as one
    /// ([`Reply::Part`]): one wake of the writer, one decision pass, one signal to the serving
    /// side and one wake of this task for the lot. Anyone else's go a job each, as publishes,
    /// so that the queue's bound stays one of packets; when it is full they get
    /// [`PutError::Busy`].
    async fn submit(&self, verified: Vec<Verified>, wait: bool, answer: Answer) -> Vec<Stored> {
        let n = verified.len();
        if wait {
            if n == 0 {
                return Vec::new();
            }
            let (gather, done) = gather(n);
            let puts = verified
                .into_iter()
                .enumerate()
                .map(|(i, v)| {
                    let mut put = v.into_put(Reply::Part(gather.clone(), i));
                    put.answer = answer;
                    put
                })
                .collect();
            drop(gather);
            if let Err(e) = self.queue(Job::Puts(puts), true).await {
                return vec![Err(e); n];
            }
            return answers(done, n).await;
        }
        let mut queued = Vec::with_capacity(n);
        for v in verified {
            let (tx, done) = tokio::sync::oneshot::channel();
            let mut put = v.into_put(Reply::One(tx));
            put.answer = answer;
            queued.push(self.queue(Job::Puts(vec![put]), false).await.map(|()| done));
        }
        let mut stored = Vec::with_capacity(n);
        for q in queued {
            stored.push(match q {
                Ok(done) => done.await.unwrap_or_else(|_| stopped()),
                Err(e) => Err(e),
            });
        }
        stored
    }

    /// Queues `job` for the writer; when the queue is full, waits (`wait`) or answers
    /// [`PutError::Busy`].
    async fn queue(&self, job: Job, wait: bool) -> Result<(), PutError> {
        let jobs = self.jobs.as_ref().ok_or(PutError::Busy)?;
        match jobs.try_send(job) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(job)) if wait => self.send(jobs, job).await,
            Err(TrySendError::Full(_)) => Err(PutError::Busy),
            Err(TrySendError::Disconnected(_)) => stopped(),
        }
    }

    /// Queues `job`, waiting while the queue is full.
    async fn send(&self, jobs: &SyncSender<Job>, mut job: Job) -> Result<(), PutError> {
        loop {
            match jobs.try_send(job) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Full(j)) => {
                    job = j;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Err(TrySendError::Disconnected(_)) => return stopped(),
            }
        }
    }

    /// Token bucket per client address: `put_burst` tokens, refilled at `put_per_minute`.
    fn allow(&self, ip: IpAddr, now: Instant) -> bool {
        let rate = self.config.put_per_minute;
        if rate == 0 {
            return true;
        }
        let capacity = f64::from(self.config.put_burst.max(1));
        let per_second = f64::from(rate) / 60.0;
        let refill = |tokens: f64, at: Instant| {
            (tokens + now.duration_since(at).as_secs_f64() * per_second).min(capacity)
        };
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() > 100_000 {
            // Forget addresses whose bucket has refilled: they are back to the default anyway.
            buckets.retain(|_, (tokens, at)| refill(*tokens, *at) < capacity);
        }
        let (tokens, at) = buckets.entry(ip).or_insert((capacity, now));
        *tokens = refill(*tokens, *at);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// The stored payload of `key` as published, if any (served or not).
    pub fn payload(&self, key: &Key) -> Option<Vec<u8>> {
        if let Some((p, _)) = self.pending.lock().expect("pending").newest(key) {
            return Some(p.to_vec());
        }
        let txn = self.db.begin_read().ok()?;
        let table = txn.open_table(PACKETS).ok()?;
        table
            .get(key)
            .ok()
            .flatten()
            .map(|v| payload_of(v.value()).to_vec())
    }

    /// Every key served, with the timestamp of its packet.
    pub fn keys(&self) -> Vec<(Key, u64)> {
        self.overlay
            .entries()
            .into_iter()
            .map(|(k, p)| (k, p.stamp()))
            .collect()
    }

    /// The stored packet of a key, if any.
    pub fn get(&self, key: &str) -> Result<Option<StoredPacket>, PutError> {
        let id = parse_endpoint_id(key).map_err(|e| PutError::Key(e.to_string()))?;
        let read = || -> Result<Option<Vec<u8>>, redb::Error> {
            let txn = self.db.begin_read()?;
            let table = txn.open_table(PACKETS)?;
            Ok(table
                .get(id.as_bytes())?
                .map(|v| payload_of(v.value()).to_vec()))
        };
        let pending = self
            .pending
            .lock()
            .expect("pending")
            .newest(id.as_bytes())
            .map(|(p, _)| p.to_vec());
        let payload = match pending {
            Some(p) => Some(p),
            None => read().map_err(|e| PutError::Io(e.to_string()))?,
        };
        // A row dated beyond the bound (kept from before it, or this clock is behind) is not
        // served, here as in DNS.
        let latest = horizon(self.config.max_future);
        let payload = payload.filter(|p| stamp_of(p).is_none_or(|stamp| stamp <= latest));
        Ok(payload.map(|payload| {
            let min_ttl = SignedPacket::from_stored(&id, &payload)
                .ok()
                .and_then(|p| p.min_ttl());
            StoredPacket { payload, min_ttl }
        }))
    }

    /// Drops the packets older than the configured age now, walking every packet (the writer
    /// also walks a slice of the store every second, the whole of it in a minute); returns
    /// how many went.
    pub fn expire(&self) -> usize {
        let (tx, rx) = std::sync::mpsc::channel();
        if let Some(jobs) = &self.jobs
            && jobs.send(Job::Expire(tx)).is_ok()
        {
            return rx.recv().unwrap_or(0);
        }
        0
    }

    /// Whether packets answered wait to be read by peers: not written yet, or written by a
    /// commit not synced yet (they are read once a synced commit holds them).
    pub fn waiting(&self) -> bool {
        !self.pending.lock().expect("pending").puts.is_empty()
            // (Acquire: seen cleared, the head the synced commit moved is seen too.)
            || self.counters.unsynced.load(Acquire)
    }

    /// Writes the pushed packets answered but not written yet ([`PkarrStore::put_pushed`]),
    /// and syncs the commits not synced yet, returning once they are durable and numbered:
    /// `Ok(true)`, or `Ok(false)` at once when none waits ([`PkarrStore::waiting`]). A
    /// catch-up page read after it holds every packet this replica served before the call,
    /// so a reader is never ready with fewer than it was shown. An error
    /// when they could not be written (the commit failed, the writer stopped).
    pub async fn flush(&self) -> std::io::Result<bool> {
        if !self.waiting() {
            return Ok(false);
        }
        let (tx, done) = tokio::sync::oneshot::channel();
        let jobs = self
            .jobs
            .as_ref()
            .ok_or_else(|| io("the store is closed"))?;
        self.send(jobs, Job::Flush(tx))
            .await
            .map_err(|e| io(format!("{e:?}")))?;
        match done.await {
            Ok(true) => Ok(true),
            Ok(false) => Err(io("the pushes waiting could not be written (see the log)")),
            Err(_) => Err(io("the store's writer has stopped")),
        }
    }

    /// Stops the writer once what was queued before is committed, keeping the numbers of the
    /// stale log rows for the next start (which then need no walk of the log); publishes after
    /// this are refused. Dropping the store does the same, but a process that exits while the
    /// last holder of the store is still being dropped elsewhere would not wait for it: `serve`
    /// closes the store before it returns.
    pub fn close(&self) {
        let (tx, rx) = std::sync::mpsc::channel();
        if let Some(jobs) = &self.jobs
            && jobs.send(Job::Stop(tx)).is_ok()
        {
            let _ = rx.recv();
        }
    }

    /// Number of packets stored.
    pub fn len(&self) -> usize {
        self.overlay.len()
    }

    /// Whether no packet is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for PkarrStore {
    fn drop(&mut self) {
        // Closing the queue ends the writer once it has answered what was queued.
        self.jobs.take();
        if let Some(t) = self.writer.take() {
            let _ = t.join();
        }
    }
}

/// Packets a peer sent, checked and not stored yet ([`PkarrStore::check_replicated`]).
pub struct Checked {
    client: Option<IpAddr>,
    /// Those decided already, by index.
    results: Vec<Option<Result<(), PutError>>>,
    origins: Vec<Option<Origin>>,
    /// The others, by index, with their signature's verdict.
    verified: Vec<(usize, Result<Verified, PutError>)>,
}

/// What [`PkarrStore::precheck`] decided, and what is left for a signature check.
struct Prechecked {
    /// Those decided already, by index.
    results: Vec<Option<Result<(), PutError>>>,
    origins: Vec<Option<Origin>>,
    /// The others, by index.
    todo: Vec<(usize, Key, Vec<u8>)>,
}

/// A publish whose signature, records and date were checked.
struct Verified {
    key: Key,
    payload: Vec<u8>,
    timestamp_us: u64,
    published: Published,
    if_match: Option<u64>,
    origin: Option<Origin>,
}

impl Verified {
    /// The writer's job for it, answered on `reply`.
    fn into_put(self, reply: Reply) -> Put {
        Put {
            key: self.key,
            payload: self.payload,
            timestamp_us: self.timestamp_us,
            published: self.published,
            if_match: self.if_match,
            origin: self.origin,
            answer: Answer::Durable,
            reply,
        }
    }
}

/// What a publish's check decides once its signature and records were checked: the date
/// against `max_future`, the records compiled for serving.
fn checked(
    key: &Key,
    packet: Result<SignedPacket, PacketError>,
    max_future: Duration,
) -> Result<Verified, PutError> {
    let packet = packet.map_err(|e| match e {
        PacketError::Key => PutError::Key(format!("not an ed25519 public key: {e}")),
        e => PutError::Payload(e),
    })?;
    if packet.timestamp_us > horizon(max_future) {
        return Err(PutError::Future {
            timestamp_us: packet.timestamp_us,
            max_future,
        });
    }
    Ok(Verified {
        key: *key,
        published: packet.published(),
        timestamp_us: packet.timestamp_us,
        payload: packet.payload().to_vec(),
        if_match: None,
        origin: None,
    })
}

/// [`verify`] for many (signatures checked in batches: see
/// [`SignedPacket::verify_relay_batch`]), on the blocking pool, one chunk per core; results
/// with their index.
async fn verify_all(
    items: Vec<(usize, Key, Vec<u8>)>,
    max_future: Duration,
) -> Vec<(usize, Result<Verified, PutError>)> {
    // Asked once: the standard library reads the cgroup's CPU quota files on every call.
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let per = items.len().div_ceil(cores).max(64);
    let mut items = items;
    let mut tasks = Vec::new();
    while !items.is_empty() {
        let rest = items.split_off(items.len().min(per));
        let chunk = std::mem::replace(&mut items, rest);
        tasks.push(tokio::task::spawn_blocking(move || {
            let refs: Vec<([u8; 32], &[u8])> = chunk
                .iter()
                .map(|(_, key, body)| (*key, body.as_slice()))
                .collect();
            let packets = SignedPacket::verify_relay_batch(&refs);
            chunk
                .iter()
                .zip(packets)
                .map(|((i, key, _), packet)| (*i, checked(key, packet, max_future)))
                .collect::<Vec<_>>()
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        match t.await {
            Ok(v) => out.extend(v),
            Err(e) => error!(error = %e, "pkarr verification task failed"),
        }
    }
    out
}

/// The timestamp in a relay payload (after the 64-byte signature).
pub(super) fn stamp_of(payload: &[u8]) -> Option<u64> {
    payload
        .get(64..72)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
}

/// Whether a publish at `new` loses to the packet stored at `stored`: it is not newer, and the
/// stored one is not itself beyond `latest` (the clock plus `--pkarr-max-future`; such a
/// packet, stored before the clock stepped back, is replaced by any valid publish).
fn stale(stored: u64, new: u64, latest: u64) -> bool {
    stored >= new && stored <= latest
}

/// The one thread that changes the store.
struct Writer {
    db: Arc<Database>,
    overlay: Arc<Overlay>,
    changes: Arc<ChangeLog>,
    counters: Arc<PkarrCounters>,
    max_age: Duration,
    max_future: Duration,
    window: Duration,
    /// Where the next expiry walk starts (key order; `None`: the first key).
    expire_from: std::cell::Cell<Option<Key>>,
    /// The log rows of replaced packets, to remove.
    stale: std::cell::RefCell<Stale>,
    /// Packets answered and served, written by the next commit.
    pending: Arc<Mutex<Pending>>,
    /// Where clients' publishes are made durable between commits (`None`: a store in memory,
    /// whose publishes are committed).
    journal: Option<std::cell::RefCell<journal::Journal>>,
    /// The next sequence number to give: the database's, or above it while publishes the
    /// journal holds wait for their commit.
    next_seq: std::cell::Cell<u64>,
    /// When the first commit since the last synced one was made (`None`: every commit is
    /// synced): see [`SYNC_EVERY`].
    unsynced_since: std::cell::Cell<Option<Instant>>,
}

/// Packets that were decided, served and answered, and are not written into the database yet:
/// those peers pushed, and clients' publishes the journal holds. The next commit writes them
/// first (every commit does), at most [`LAZY_FLUSH`] after the first.
#[derive(Default)]
struct Pending {
    /// The newest of each key (a newer one takes its place). Later decisions and `GET` look
    /// here before the database.
    puts: Vec<Waiting>,
    /// Where each key is in `puts`.
    index: HashMap<Key, usize>,
    /// When the first was answered.
    since: Option<Instant>,
}

impl Pending {
    /// The payload waiting for `key`, and its date.
    fn newest(&self, key: &Key) -> Option<(&[u8], u64)> {
        self.index
            .get(key)
            .map(|&i| (self.puts[i].payload.as_slice(), self.puts[i].stamp))
    }

    /// Keeps a decided packet, in place of the one waiting for its key.
    fn keep(&mut self, entry: Waiting) {
        let key = entry.key;
        match self.index.get(&key) {
            Some(&i) => self.puts[i] = entry,
            None => {
                self.index.insert(key, self.puts.len());
                self.puts.push(entry);
            }
        }
        self.since.get_or_insert_with(Instant::now);
    }
}

/// A packet waiting in [`Pending`].
#[derive(Clone)]
struct Waiting {
    key: Key,
    payload: Vec<u8>,
    origin: Option<Origin>,
    /// Its date.
    stamp: u64,
    /// The number it was answered with (a client's publish, in the journal); a pushed packet
    /// is numbered by the commit that writes it.
    seq: Option<u64>,
}

/// What the writer decides for a packet dated `timestamp_us` (with `If-Match` `if_match`)
/// over the one stored dated `stored`: the newest wins; equal dates go by [`tie`] against the
/// stored payload (`stored_payload`, asked for only then).
fn decide<E>(
    if_match: Option<u64>,
    stored: Option<u64>,
    timestamp_us: u64,
    latest: u64,
    payload: &[u8],
    stored_payload: impl FnOnce() -> Result<Option<Vec<u8>>, E>,
) -> Result<Result<(), PutError>, E> {
    Ok(match (if_match, stored) {
        (Some(m), s) if s != Some(m) => Err(PutError::Changed { stored: s }),
        // The same timestamp: the same packet, or the tie rule decides.
        (_, Some(s)) if s == timestamp_us && s <= latest => {
            let order = stored_payload()?.map_or(std::cmp::Ordering::Greater, |p| tie(payload, &p));
            match order {
                std::cmp::Ordering::Equal => Err(PutError::Same),
                std::cmp::Ordering::Less => Err(PutError::Stale),
                std::cmp::Ordering::Greater => Ok(()),
            }
        }
        (_, Some(s)) if stale(s, timestamp_us, latest) => Err(PutError::Stale),
        _ => Ok(()),
    })
}

/// The numbers of stale log rows (their packets replaced) not removed yet: gathered, then
/// removed in rounds, a bounded chunk per commit in number order, so that the removals of one
/// round share the log's pages.
#[derive(Debug, Default)]
struct Stale {
    gathering: Vec<u64>,
    /// This round's, in descending order: the chunk to remove next is at the end.
    removing: Vec<u64>,
    /// How many rows the last commit made stale: a chunk removes at least as many.
    pace: usize,
}

impl Stale {
    fn new(gathering: Vec<u64>) -> Stale {
        Stale {
            gathering,
            removing: Vec::new(),
            pace: 0,
        }
    }

    fn len(&self) -> usize {
        self.gathering.len() + self.removing.len()
    }

    /// The rows to remove in the next commit: none until `round` have gathered, then the
    /// lowest `STALE_PER_COMMIT` of the round each commit (or as many as the last commit made
    /// stale, if more), until it is through.
    fn chunk(&mut self, round: usize) -> &[u64] {
        if self.removing.is_empty() && self.gathering.len() >= round {
            std::mem::swap(&mut self.removing, &mut self.gathering);
            self.removing.sort_unstable_by(|a, b| b.cmp(a));
        }
        let n = self.removing.len().min(STALE_PER_COMMIT.max(self.pace));
        &self.removing[self.removing.len() - n..]
    }

    /// The last chunk was removed (committed), and the commit made `made` rows stale.
    fn committed(&mut self, n: usize, made: &mut Vec<u64>) {
        self.removing
            .truncate(self.removing.len().saturating_sub(n));
        self.pace = made.len();
        self.gathering.append(made);
    }

    /// Every number not removed yet.
    fn all(&self) -> Vec<u64> {
        self.gathering
            .iter()
            .chain(&self.removing)
            .copied()
            .collect()
    }
}

/// How much of the store one expiry pass walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// The next slice (a whole walk every [`EXPIRE_SLICES`] passes).
    Slice,
    /// Every packet (asked for by [`PkarrStore::expire`]).
    Whole,
}

/// What one commit decided for a publish.
struct Decided {
    key: Key,
    published: Published,
    reply: Reply,
    result: Result<u64, PutError>,
}

impl Writer {
    fn run(self, rx: Receiver<Job>) {
        let mut next_expiry = Instant::now();
        // The last gathering lasted the whole window, with at least QUARTERS publishes.
        let mut busy = false;
        loop {
            let due = self.pending_due();
            let sync_due = self.unsynced_since.get().map(|t| t + SYNC_EVERY);
            let until = [due, sync_due]
                .into_iter()
                .flatten()
                .fold(next_expiry, Instant::min);
            let wait = until.saturating_duration_since(Instant::now());
            let mut batch = Vec::new();
            // Packets gathered, counted against MAX_BATCH (a job may carry many).
            let mut items = 0;
            match rx.recv_timeout(wait) {
                Ok(job) => {
                    items += job.items();
                    batch.push(job);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.commit(Vec::new(), Vec::new(), None, true);
                    return self.keep_stale();
                }
            }
            // Gathers for up to the window, but only while publishes keep coming: a quarter of
            // it without one ends the gathering (a lone publish waits that long, not the whole
            // window). The writer sleeps a quarter at a time and then takes what came: woken by
            // each publish instead, it took the core from the worker answering the next one, a
            // switch each way per publish. After a gathering that lasted the whole window
            // (publishes kept coming), the next sleeps the window through in one go: a sleep
            // costs a switch each way, which on a VM is about what a publish's signature costs.
            // Only clients' publishes are gathered (their signatures checked together, one
            // journal sync): a peer's push comes whole, its signatures checked as one batch
            // (one that waits for an acknowledgement gets a journal sync of its own, with
            // whatever else is queued).
            // The next gathering sleeps whole only after one of at least QUARTERS publishes,
            // the rate a gathering in quarters needs to last the window.
            let gather_until = Instant::now() + self.window;
            let step = if busy {
                self.window
            } else {
                self.window / QUARTERS as u32
            };
            busy = false;
            let take = |batch: &mut Vec<Job>, items: &mut usize| {
                let mut took = false;
                while *items < MAX_BATCH {
                    let Ok(job) = rx.try_recv() else { break };
                    *items += job.items();
                    batch.push(job);
                    took = true;
                }
                took
            };
            take(&mut batch, &mut items);
            let publishes = |batch: &[Job]| {
                batch
                    .iter()
                    .filter(|job| matches!(job, Job::Publish(_)))
                    .count()
            };
            while publishes(&batch) > 0 {
                let left = gather_until.saturating_duration_since(Instant::now());
                if left.is_zero() || items >= MAX_BATCH {
                    busy = items >= MAX_BATCH || publishes(&batch) >= QUARTERS;
                    break;
                }
                std::thread::sleep(left.min(step));
                if !take(&mut batch, &mut items) {
                    break;
                }
            }
            let mut expire_now = (Instant::now() >= next_expiry).then_some(Walk::Slice);
            let mut waiting = Vec::new();
            let mut stop = None;
            let mut flushed = Vec::new();
            let mut puts = Vec::with_capacity(batch.len());
            let mut cursors = Vec::new();
            let mut checks = self.check(&batch).into_iter();
            let latest = horizon(self.max_future);
            for job in batch {
                match job {
                    Job::Puts(p) => puts.extend(p),
                    Job::Pushed(p) => puts.extend(self.check_pushed(p)),
                    Job::Publish(p) => match checks.next() {
                        // Refused before the commit when it cannot win: a batch of such
                        // publishes (a client sending an old packet again) commits nothing.
                        // (The same timestamp goes on: the commit compares the packets.)
                        Some(Ok(v))
                            if p.if_match.is_none()
                                && self.overlay.stamp(&v.key).is_some_and(|t| {
                                    t != v.timestamp_us && stale(t, v.timestamp_us, latest)
                                }) =>
                        {
                            let _ = p.reply.send(Err(PutError::Stale));
                        }
                        Some(Ok(mut v)) => {
                            v.if_match = p.if_match;
                            puts.push(v.into_put(p.reply));
                        }
                        Some(Err(e)) => {
                            let _ = p.reply.send(Err(e));
                        }
                        None => {
                            let _ = p.reply.send(Err(PutError::Io("not checked".into())));
                        }
                    },
                    Job::Cursor(epoch, seq, reply) => cursors.push((epoch, seq, reply)),
                    Job::Expire(tx) => {
                        expire_now = Some(Walk::Whole);
                        waiting.push(tx);
                    }
                    Job::Stop(tx) => stop = Some(tx),
                    Job::Flush(tx) => flushed.push(tx),
                }
            }
            // Pushes, and publishes the journal can hold, are decided and answered without a
            // commit (the publishes once the journal holds them); a commit writes them later
            // ([`Pending`]). Catch-up pages, and publishes to a store in memory, are committed.
            let lazy = !puts.is_empty()
                && puts.iter().all(|p| match p.answer {
                    Answer::Decided => true,
                    Answer::Durable => self.journal.is_some(),
                    Answer::Committed => false,
                });
            if lazy {
                self.apply(std::mem::take(&mut puts));
            }
            // A caller waits on the database: every commit before is made durable.
            let sync = !waiting.is_empty() || !flushed.is_empty() || stop.is_some();
            let now = Instant::now();
            let owed = !puts.is_empty()
                || !cursors.is_empty()
                || sync
                || self.pending_due().is_some_and(|d| now >= d)
                || sync_due.is_some_and(|d| now >= d);
            // An expiry slice alone is walked in a read transaction first, and commits only
            // when it found something to remove: an idle store writes nothing, and a busy one
            // writes its pending packets when they are due, not at each slice.
            if expire_now == Some(Walk::Slice) && !owed && self.quiet_slice() {
                expire_now = None;
                next_expiry = Instant::now() + EXPIRE_EVERY;
            }
            let expired = if owed || expire_now.is_some() {
                self.commit(puts, cursors, expire_now, sync)
            } else {
                0
            };
            if expire_now.is_some() {
                next_expiry = Instant::now() + EXPIRE_EVERY;
            }
            for tx in waiting {
                let _ = tx.send(expired);
            }
            if !flushed.is_empty() {
                // Only this thread adds to them: empty now means written (a failed commit
                // keeps them), and synced (the flush made the commit a synced one).
                let written = self.pending.lock().expect("pending").puts.is_empty()
                    && self.unsynced_since.get().is_none();
                for tx in flushed {
                    let _ = tx.send(written);
                }
            }
            if let Some(tx) = stop {
                // Jobs queued behind the stop are dropped with the queue: their senders see
                // it closed.
                self.keep_stale();
                let _ = tx.send(());
                return;
            }
        }
    }

    /// Keeps the numbers of the stale log rows for the next start (the writer's last commit).
    fn keep_stale(&self) {
        let all = self.stale.borrow().all();
        let kept = (|| -> Result<(), redb::Error> {
            let txn = self.db.begin_write()?;
            {
                let mut t = Tables::open(&txn)?;
                t.keep_stale(&all)?;
                t.finish()?;
            }
            txn.commit()?;
            Ok(())
        })();
        if let Err(e) = &kept {
            // The next start finds them by walking the log.
            warn!(error = %e, stale = all.len(), "cannot keep the stale pkarr log rows' numbers");
        }
        // Every publish it held is committed, and durably (this synced commit made the
        // unsynced ones before it durable): the next start reads nothing from it. After a
        // failed commit it stays, and the next start reads back what the database lacks.
        if let Some(journal) = &self.journal
            && kept.is_ok()
            && self.pending.lock().expect("pending").puts.is_empty()
            && let Err(e) = journal.borrow_mut().clear()
        {
            warn!(error = %e, "cannot empty the pkarr publish journal; the next start reads it again");
        }
    }

    /// Checks the clients' publishes among `batch`, their signatures together: in a commit of
    /// five publishes that is about half the work of checking each alone, and it adds nothing
    /// to a publish's wait (the commit gathered them anyway). The checks are on this one
    /// thread, not spread over the async workers: at about 30 µs a signature in batches that
    /// bounds a replica near 30,000 publishes a second whatever its cores, far above what one
    /// writer commits; a flood of bad signatures meets the per-address rate and the queue's
    /// bound first.
    fn check(&self, batch: &[Job]) -> Vec<Result<Verified, PutError>> {
        let items: Vec<([u8; 32], &[u8])> = batch
            .iter()
            .filter_map(|job| match job {
                Job::Publish(p) => Some((p.key, p.body.as_slice())),
                _ => None,
            })
            .collect();
        if items.is_empty() {
            return Vec::new();
        }
        items
            .chunks(CLIENT_BATCH)
            .flat_map(SignedPacket::verify_relay_batch)
            .zip(&items)
            .map(|(packet, (key, _))| checked(key, packet, self.max_future))
            .collect()
    }

    /// Checks a push's signatures (one batch, [`SignedPacket::verify_relay_batch`]): those that
    /// pass go on as puts, in order; the others are answered with why not.
    fn check_pushed(&self, pushed: Vec<Unverified>) -> Vec<Put> {
        let packets = {
            let items: Vec<([u8; 32], &[u8])> = pushed
                .iter()
                .map(|u| (u.key, u.payload.as_slice()))
                .collect();
            SignedPacket::verify_relay_batch(&items)
        };
        pushed
            .into_iter()
            .zip(packets)
            .filter_map(
                |(u, packet)| match checked(&u.key, packet, self.max_future) {
                    Ok(mut v) => {
                        v.origin = u.origin;
                        let mut put = v.into_put(u.reply);
                        put.answer = u.answer;
                        Some(put)
                    }
                    Err(e) => {
                        let _ = u.reply.send(Err(e));
                        None
                    }
                },
            )
            .collect()
    }

    /// Decides packets without a commit, and keeps the winners for the next one ([`Pending`]):
    /// those peers pushed are served and answered at once; clients' publishes (and pushes that
    /// wait for an acknowledgement) once the journal holds them, with the number each is
    /// written under.
    fn apply(&self, puts: Vec<Put>) {
        let latest = horizon(self.max_future);
        // Decided against what waits or is stored, and against the winners before them here
        // (a key may publish twice in one batch).
        let mut won: Vec<(Put, Option<u64>)> = Vec::with_capacity(puts.len());
        let mut lost = Vec::new();
        let mut staged: HashMap<Key, usize> = HashMap::new();
        {
            let pending = self.pending.lock().expect("pending");
            for put in puts {
                let newest = match staged.get(&put.key) {
                    Some(&i) => Some((won[i].0.payload.as_slice(), won[i].0.timestamp_us)),
                    None => pending.newest(&put.key),
                };
                let stored = newest.map(|n| n.1).or_else(|| self.overlay.stamp(&put.key));
                let decision = decide(
                    put.if_match,
                    stored,
                    put.timestamp_us,
                    latest,
                    &put.payload,
                    || match newest {
                        Some((p, _)) => Ok(Some(p.to_vec())),
                        None => self.stored_payload(&put.key),
                    },
                )
                .unwrap_or_else(|e| Err(PutError::Io(e.to_string())));
                match decision {
                    Ok(()) => {
                        let seq = (put.answer != Answer::Decided).then(|| {
                            let seq = self.next_seq.get();
                            self.next_seq.set(seq + 1);
                            seq
                        });
                        staged.insert(put.key, won.len());
                        won.push((put, seq));
                    }
                    Err(e) => {
                        // Lost to a winner of this batch that the journal must take.
                        let to_journaled =
                            staged.get(&put.key).is_some_and(|&i| won[i].1.is_some());
                        lost.push((put.reply, e, to_journaled));
                    }
                }
            }
        }
        // One write and one sync for the batch's publishes, outside the lock (`GET` reads the
        // packets waiting meanwhile; only this thread changes them).
        let numbered = won.iter().filter_map(|(p, seq)| {
            seq.map(|seq| (seq, &p.key, p.origin.as_ref(), p.payload.as_slice()))
        });
        let journaled = match &self.journal {
            Some(j) if won.iter().any(|w| w.1.is_some()) => {
                let started = Instant::now();
                let written = j.borrow_mut().append(numbered);
                self.counters.journal_syncs.fetch_add(1, Relaxed);
                self.counters
                    .journal_micros
                    .fetch_add(started.elapsed().as_micros() as u64, Relaxed);
                written.map_err(|e| {
                    error!(error = %e, "cannot write pkarr publishes to the journal; refusing them");
                    PutError::Io(format!("the publish journal: {e}"))
                })
            }
            _ => Ok(()),
        };
        // Those that lost to a winner of this batch the journal then refused are refused with
        // it: what beat them is not stored.
        for (reply, e, to_batch) in lost {
            let e = match &journaled {
                Err(io) if to_batch => io.clone(),
                _ => e,
            };
            let _ = reply.send(Err(e));
        }
        let mut pending = self.pending.lock().expect("pending");
        let mut changed = false;
        for (put, seq) in won {
            if let (Some(_), Err(e)) = (seq, &journaled) {
                let _ = put.reply.send(Err(e.clone()));
                continue;
            }
            pending.keep(Waiting {
                key: put.key,
                payload: put.payload,
                origin: put.origin,
                stamp: put.timestamp_us,
                seq,
            });
            self.changes.record(put.key, Some(&put.published));
            self.overlay.insert(put.key, put.published);
            changed = true;
            let _ = put.reply.send(Ok(seq.unwrap_or(0)));
        }
        drop(pending);
        if changed {
            self.changes.signal();
        }
    }

    /// The payload stored for `key`, read in its own transaction.
    fn stored_payload(&self, key: &Key) -> Result<Option<Vec<u8>>, redb::Error> {
        let txn = self.db.begin_read()?;
        let packets = txn.open_table(PACKETS)?;
        Ok(packets.get(key)?.map(|v| payload_of(v.value()).to_vec()))
    }

    /// The packets one expiry slice walks.
    fn slice_rows(&self) -> usize {
        (self.overlay.len() / EXPIRE_SLICES).max(EXPIRE_ROWS)
    }

    /// Walks the next expiry slice in a read transaction: true (and the walk moved on) when
    /// it found nothing expired, so that no commit is needed for it.
    fn quiet_slice(&self) -> bool {
        let walked = (|| -> Result<_, redb::Error> {
            let txn = self.db.begin_read()?;
            let packets = txn.open_table(PACKETS)?;
            let limit = now_us().saturating_sub(micros(self.max_age));
            tables::expired_from(&packets, self.expire_from.get(), self.slice_rows(), limit)
        })();
        match walked {
            Ok((found, next)) if found.is_empty() => {
                self.expire_from.set(next);
                true
            }
            _ => false,
        }
    }

    /// When the pushed packets waiting to be written are due (`None`: none waits).
    fn pending_due(&self) -> Option<Instant> {
        let pending = self.pending.lock().expect("pending");
        pending.since.map(|t| {
            if pending.puts.len() >= LAZY_MAX {
                t
            } else {
                t + LAZY_FLUSH
            }
        })
    }

    /// Decides and commits one batch, after the packets waiting (every commit writes them:
    /// pushes answered, and publishes the journal holds); returns how many packets expired.
    /// The commit is synced when `sync` asks, when it answers puts or keeps cursors (they are
    /// answered as committed), when the store is in memory, and [`SYNC_EVERY`] after the
    /// first commit that was not; only a synced commit moves the head, and lets the journal
    /// go.
    fn commit(
        &self,
        puts: Vec<Put>,
        cursors: Vec<(Epoch, u64, Reply)>,
        expire: Option<Walk>,
        sync: bool,
    ) -> usize {
        let held = self.pending.lock().expect("pending").puts.clone();
        let owed = self.unsynced_since.get();
        let durable = sync
            || !puts.is_empty()
            || !cursors.is_empty()
            || self.journal.is_none()
            || owed.is_some_and(|t| t.elapsed() >= SYNC_EVERY);
        if puts.is_empty()
            && cursors.is_empty()
            && expire.is_none()
            && held.is_empty()
            && !(durable && owed.is_some())
        {
            return 0;
        }
        let mut held_top = 0;
        let started = Instant::now();
        let mut decided = Vec::with_capacity(puts.len());
        let mut expired = Vec::new();
        let mut made_stale = Vec::new();
        let round = (self.overlay.len() / STALE_SHARE).max(STALE_ROUND);
        let mut rows = self.stale.borrow_mut();
        let removing = rows.chunk(round).len();
        let mut next_seq = 0;
        let outcome = (|| -> Result<(), redb::Error> {
            let mut txn = self.db.begin_write()?;
            if !durable {
                txn.set_durability(redb::Durability::None)?;
            }
            {
                let mut t = Tables::open(&txn)?;
                // Above the numbers given to the publishes the journal holds.
                t.next_seq = t.next_seq.max(self.next_seq.get());
                // Decided and answered already, in their order: under the number each was
                // answered with, or the next.
                for w in &held {
                    let (seq, replaced) = match w.seq {
                        Some(seq) => (seq, t.write_at(&w.key, seq, &w.payload, w.origin.as_ref())?),
                        None => t.write(&w.key, &w.payload, w.origin.as_ref())?,
                    };
                    made_stale.extend(replaced);
                    held_top = held_top.max(seq);
                }
                // What this batch decided for a key (a key may publish twice in one).
                let mut staged: HashMap<Key, (u64, Vec<u8>)> = HashMap::new();
                let latest = horizon(self.max_future);
                for Put {
                    key,
                    payload,
                    timestamp_us,
                    published,
                    if_match,
                    origin,
                    reply,
                    answer: _,
                } in puts
                {
                    let stored = staged
                        .get(&key)
                        .map(|s| s.0)
                        .or_else(|| self.overlay.stamp(&key));
                    let decision = decide(
                        if_match,
                        stored,
                        timestamp_us,
                        latest,
                        &payload,
                        || match staged.get(&key) {
                            Some((_, p)) => Ok(Some(p.clone())),
                            None => t.payload(&key),
                        },
                    )?;
                    let result = match decision {
                        Ok(()) => {
                            let (seq, replaced) = t.write(&key, &payload, origin.as_ref())?;
                            made_stale.extend(replaced);
                            staged.insert(key, (timestamp_us, payload));
                            Ok(seq)
                        }
                        Err(e) => Err(e),
                    };
                    decided.push(Decided {
                        key,
                        published,
                        reply,
                        result,
                    });
                }
                if let Some(walk) = expire {
                    let limit = now_us().saturating_sub(micros(self.max_age));
                    let (rows, from) = match walk {
                        Walk::Whole => (usize::MAX, None),
                        Walk::Slice => (self.slice_rows(), self.expire_from.get()),
                    };
                    let (found, next) = t.expired_from(from, rows, limit)?;
                    for (_, key) in &found {
                        t.remove(key)?;
                    }
                    expired = found;
                    self.expire_from.set(next);
                }
                for (epoch, seq, _) in &cursors {
                    t.set_cursor(epoch, *seq)?;
                }
                t.remove_stale(rows.chunk(round))?;
                t.finish()?;
                next_seq = t.next_seq;
            }
            txn.commit()?;
            Ok(())
        })();
        self.counters.commits.fetch_add(1, Relaxed);
        self.counters
            .commit_micros
            .fetch_add(started.elapsed().as_micros() as u64, Relaxed);
        match outcome {
            Ok(()) => {
                self.next_seq.set(next_seq);
                // Before the packets leave `pending` (until then they wait to be read): the
                // head moves past them, or they are marked as written but not synced.
                if durable {
                    // Every number below it is written or was never held (a publish the
                    // journal refused): the head, which a push's answer and a peer's read
                    // count from, is past them.
                    self.counters.head.fetch_max(next_seq - 1, Relaxed);
                    self.counters.head.fetch_max(held_top, Relaxed);
                } else if next_seq - 1 > self.counters.head.load(Relaxed) {
                    // Packets written above the head (an expiry slice alone writes none).
                    self.counters.unsynced.store(true, Relaxed);
                }
                if !held.is_empty() {
                    // Nothing else adds to them: this thread is the only one that does.
                    *self.pending.lock().expect("pending") = Pending::default();
                }
                if durable {
                    // What the journal held is in the database now, durably.
                    if let Some(journal) = &self.journal {
                        journal.borrow_mut().rewind();
                    }
                    self.unsynced_since.set(None);
                    self.counters.unsynced.store(false, Release);
                    self.counters.synced_commits.fetch_add(1, Relaxed);
                } else if owed.is_none() {
                    self.unsynced_since.set(Some(Instant::now()));
                }
                rows.committed(removing, &mut made_stale);
                self.counters.stale_rows.store(rows.len() as u64, Relaxed);
                drop(rows);
                // Published first, expired after: a packet published already past its age
                // went in and out of the database in this one commit.
                let mut replies = Vec::with_capacity(decided.len());
                // (A commit that answers puts is a synced one: the head may pass them.)
                if let Some(top) = decided.iter().filter_map(|d| d.result.as_ref().ok()).max() {
                    self.counters.head.fetch_max(*top, Relaxed);
                }
                for d in decided {
                    if d.result.is_ok() {
                        self.changes.record(d.key, Some(&d.published));
                        self.overlay.insert(d.key, d.published);
                    }
                    replies.push((d.reply, d.result));
                }
                for (_, key) in &expired {
                    self.changes.record(*key, None);
                    self.overlay.remove(key);
                }
                self.changes.signal();
                if !expired.is_empty() {
                    self.counters
                        .expired
                        .fetch_add(expired.len() as u64, Relaxed);
                    info!(expired = expired.len(), "pkarr packets expired");
                }
                for (reply, result) in replies {
                    let _ = reply.send(result);
                }
                for (_, _, reply) in cursors {
                    let _ = reply.send(Ok(0));
                }
                expired.len()
            }
            Err(e) => {
                error!(error = %e, "cannot commit pkarr publishes; refusing them");
                for d in decided {
                    let result = d.result.and(Err(PutError::Io(e.to_string())));
                    let _ = d.reply.send(result);
                }
                for (_, _, reply) in cursors {
                    let _ = reply.send(Err(PutError::Io(e.to_string())));
                }
                0
            }
        }
    }
}

/// Reads the whole database file once, each part front to back, unless it is in the page
/// cache already: loading walks the B-tree, whose pages lie all over the file, and on a cold
/// cache those random reads (not the parsing) would take most of the start-up. One pass is
/// several times faster (a million endpoints: 11 s → 3 s cold, measured; asking the kernel to
/// read ahead instead, `posix_fadvise(WILLNEED)`, took 4.2 s: the walk's random reads then
/// compete with the read-ahead). On a warm cache the pass would be a 0.5 s copy a million
/// endpoints, so the cache is asked first.
///
/// The file comes with random-access advice ([`advise_random`]): a sequential read fills the
/// cache with large folios (ext4 from Linux 6.16 on), and every later 4 KiB page the writer
/// writes into one then costs the kernel work for the whole folio. Measured on this project's
/// VM (Linux 6.18, ext4), a replica catching up 100,000 publishes over a million stored after
/// a cold start: the catch-up took 14.6 s after a sequential pass (15.8 s of CPU from the
/// start), and 7.1 s (7.7 s) with the same pages cached a page per folio. The advised pass is
/// also faster (a 941 MB store read in 0.8 s, against 1.5 s).
///
/// `file` is the one redb is given; the pass reads at given offsets, as redb does. It reads
/// the file's [`PREFETCH_READERS`] parts at once: one reader at a time left the disk idle
/// between its requests (a 941 MB store, measured: 0.75–0.87 s with one reader, 0.54–0.57 s
/// with two to eight, for the same 0.45 s of CPU).
fn prefetch(file: &std::fs::File) {
    use std::os::unix::fs::FileExt;
    if cached(file) {
        return;
    }
    let Ok(len) = file.metadata().map(|m| m.len()) else {
        return;
    };
    let part = len.div_ceil(PREFETCH_READERS).next_multiple_of(4 << 20);
    std::thread::scope(|s| {
        for i in 0..PREFETCH_READERS {
            s.spawn(move || {
                let mut buf = vec![0u8; 4 << 20];
                let (mut at, end) = (i * part, len.min((i + 1) * part));
                while at < end {
                    let want = buf.len().min((end - at) as usize);
                    match file.read_at(&mut buf[..want], at) {
                        Ok(n) if n > 0 => at += n as u64,
                        _ => break,
                    }
                }
            });
        }
    });
}

/// How many parts of the store [`prefetch`] reads at once.
const PREFETCH_READERS: u64 = 4;

/// Advises the kernel that `file` is read at random (`posix_fadvise(RANDOM)`): no read-ahead,
/// and what is read is cached a page per folio. redb reads and writes whole pages at places
/// the B-tree picks; read-ahead would only cache the neighbours, in large folios that make
/// each later page write cost the kernel the folio's size ([`prefetch`]). Advice only: a
/// kernel that ignores it serves the same bytes.
fn advise_random(file: &std::fs::File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: advice on a file descriptor this function's caller holds open; no memory
        // is passed.
        unsafe {
            libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

/// Whether nine tenths of `file`'s allocated pages are in the page cache (`mincore` over a
/// read-only mapping of it; `false` when that cannot be told). Written by hand: no crate the
/// project uses asks the page cache.
fn cached(file: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = file.metadata() else {
        return false;
    };
    let (len, allocated) = (meta.len() as usize, meta.blocks() * 512);
    if len == 0 {
        return true;
    }
    // SAFETY: a shared read-only mapping of a file this function holds open, never read
    // through (only `mincore` looks at it), and unmapped before returning.
    unsafe {
        let page = libc::sysconf(libc::_SC_PAGESIZE).max(4096) as usize;
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        if addr == libc::MAP_FAILED {
            return false;
        }
        let mut pages = vec![0u8; len.div_ceil(page)];
        let ok = libc::mincore(addr, len, pages.as_mut_ptr()) == 0;
        libc::munmap(addr, len);
        let resident = pages.iter().filter(|p| *p & 1 == 1).count() as u64 * page as u64;
        ok && resident * 10 >= allocated * 9
    }
}

/// Writes the journal's `records` the database does not hold (numbered at or above its next
/// number: those answered after its last commit) in one durable commit, each as the newest of
/// its key unless what is stored wins over it; returns how many were written. Done again after
/// a crash in it: the journal is emptied only by the next run's commits.
fn replay(db: &Database, records: Vec<journal::Record>, latest: u64) -> Result<usize, redb::Error> {
    let txn = db.begin_write()?;
    let (mut written, mut beyond) = (0, false);
    {
        let mut t = Tables::open(&txn)?;
        let from = t.next_seq;
        for r in records.into_iter().filter(|r| r.seq >= from) {
            // Each number was answered with: none is given again.
            t.next_seq = t.next_seq.max(r.seq + 1);
            beyond = true;
            let Some(stamp) = stamp_of(&r.payload) else {
                continue;
            };
            let stored = t.payload(&r.key)?;
            let decision = decide(
                None,
                stored.as_deref().and_then(stamp_of),
                stamp,
                latest,
                &r.payload,
                || Ok::<_, redb::Error>(stored.clone()),
            )?;
            if decision.is_ok() {
                t.write_at_now(&r.key, r.seq, &r.payload, r.origin.as_ref())?;
                written += 1;
            }
        }
        t.finish()?;
    }
    if beyond {
        txn.commit()?;
    } else {
        txn.abort()?;
    }
    Ok(written)
}

/// Every stored packet dated no later than `latest`, compiled for serving; and the rows of
/// those dated later (kept, not served).
fn load(db: &Database, latest: u64, lookups: bool) -> std::io::Result<(Overlay, Vec<(u64, Key)>)> {
    let started = Instant::now();
    let overlay = if lookups {
        Overlay::with_cache()
    } else {
        Overlay::new()
    };
    let txn = db.begin_read().map_err(io)?;
    let table = txn.open_table(PACKETS).map_err(io)?;
    overlay.reserve(table.len().map_err(io)? as usize);
    let mut dropped = 0usize;
    let mut beyond = Vec::new();
    for entry in table.iter().map_err(io)? {
        let (k, v) = entry.map_err(io)?;
        let key = *k.value();
        let payload = payload_of(v.value());
        if let Some(stamp) = stamp_of(payload)
            && stamp > latest
        {
            beyond.push((stamp, key));
            continue;
        }
        match SignedPacket::published_from_stored(&key, payload) {
            Ok(p) => overlay.insert(key, p),
            Err(e) => {
                dropped += 1;
                let label = meshdns_zone::label_of_key(&key);
                warn!(key = %String::from_utf8_lossy(&label), error = %e, "stored pkarr packet does not parse; not served");
            }
        }
    }
    info!(
        packets = overlay.len(),
        dropped,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "pkarr store loaded"
    );
    Ok((overlay, beyond))
}

/// Moves packets of the earlier layout (`<dir>/<z32>.pkarr`) into the database, verifying each,
/// then removes their files (and the directory, once empty).
fn migrate(db: &Database, dir: &Path) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) == Some("pkarr") {
            files.push(path);
        }
    }
    let (mut moved, mut skipped) = (0usize, 0usize);
    for chunk in files.chunks(10_000) {
        let txn = db.begin_write().map_err(io)?;
        {
            let mut t = Tables::open(&txn).map_err(io)?;
            for path in chunk {
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
                let loaded = parse_endpoint_id(stem)
                    .map_err(|e| e.to_string())
                    .and_then(|id| {
                        let body = std::fs::read(path).map_err(|e| e.to_string())?;
                        SignedPacket::from_relay_payload(&id, &body).map_err(|e| e.to_string())
                    });
                let p = match loaded {
                    Ok(p) => p,
                    Err(e) => {
                        skipped += 1;
                        warn!(file = %path.display(), error = %e, "pkarr packet of the earlier layout not migrated");
                        continue;
                    }
                };
                let key = *p.key.as_bytes();
                let old = t.payload(&key).map_err(io)?.and_then(|v| stamp_of(&v));
                if old.is_some_and(|old| old >= p.timestamp_us) {
                    continue;
                }
                t.write_now(&key, p.payload(), None).map_err(io)?;
                moved += 1;
            }
            t.finish().map_err(io)?;
        }
        txn.commit().map_err(io)?;
    }
    for path in &files {
        std::fs::remove_file(path)?;
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) == Some("tmp") {
            std::fs::remove_file(path)?;
        }
    }
    let _ = std::fs::remove_dir(dir);
    info!(dir = %dir.display(), moved, skipped, "pkarr packets of the earlier layout migrated into the database");
    Ok(())
}

#[cfg(test)]
mod tests {
    use iroh_base::SecretKey;

    use super::*;

    fn payload_at(secret: &SecretKey, text: &str, timestamp_us: u64) -> Vec<u8> {
        let dns = iroh_dns::pkarr::SignedPacket::from_txt_strings(secret, "_iroh", [text], 30)
            .unwrap()
            .to_relay_payload();
        // Re-sign the same DNS message at the given timestamp.
        let message = &dns[72..];
        let mut signable = format!("3:seqi{timestamp_us}e1:v{}:", message.len()).into_bytes();
        signable.extend_from_slice(message);
        let mut out = secret.sign(&signable).to_bytes().to_vec();
        out.extend_from_slice(&timestamp_us.to_be_bytes());
        out.extend_from_slice(message);
        out
    }

    fn payload(secret: &SecretKey, text: &str) -> Vec<u8> {
        payload_at(secret, text, now_us())
    }

    fn config(dir: Option<PathBuf>, max_age: Duration) -> PkarrConfig {
        let mut c = PkarrConfig::new(vec!["dns.example.org.".parse().unwrap()], dir);
        c.max_age = max_age;
        c
    }

    fn served(store: &PkarrStore, secret: &SecretKey) -> Option<u64> {
        store.overlay().stamp(secret.public().as_bytes())
    }

    #[test]
    fn stale_rows_are_removed_in_rounds_lowest_first_a_chunk_a_commit() {
        let mut stale = Stale::new(vec![9, 3]);
        assert!(stale.chunk(4).is_empty(), "not a round's worth yet");
        let gathered: Vec<u64> = (1..=STALE_PER_COMMIT as u64)
            .rev()
            .map(|n| n * 10)
            .collect();
        stale.gathering.extend(&gathered);
        let first = stale.chunk(4).to_vec();
        assert_eq!(first.len(), STALE_PER_COMMIT);
        let mut sorted = first.clone();
        sorted.sort_unstable();
        assert_eq!(sorted[..3], [3, 9, 10], "the lowest numbers first");
        // Rows made stale during a round wait for the next one.
        stale.gathering.push(1);
        assert_eq!(
            stale.chunk(4),
            first.as_slice(),
            "not removed yet: the same chunk"
        );
        stale.committed(first.len(), &mut Vec::new());
        let second = stale.chunk(4).to_vec();
        assert_eq!(second.len(), 2, "the round's rest");
        assert!(second.iter().all(|n| *n > *sorted.last().unwrap()));
        stale.committed(2, &mut Vec::new());
        assert!(stale.chunk(4).is_empty(), "one row gathered: below a round");
        assert_eq!(stale.all(), [1]);
        assert_eq!(stale.len(), 1);
    }

    #[test]
    fn stale_rows_are_removed_as_fast_as_commits_make_them() {
        let round = 3 * STALE_PER_COMMIT;
        let mut stale = Stale::new((1..=4 * round as u64).collect());
        assert_eq!(stale.chunk(round).len(), STALE_PER_COMMIT);
        // A commit of a large catch-up page makes more stale than a chunk removes ...
        let mut made: Vec<u64> = (0..2 * STALE_PER_COMMIT as u64)
            .map(|n| n + 1_000_000)
            .collect();
        stale.committed(STALE_PER_COMMIT, &mut made);
        assert!(made.is_empty(), "gathered for the next round");
        // ... so the next chunk removes as many.
        assert_eq!(stale.chunk(round).len(), 2 * STALE_PER_COMMIT);
        stale.committed(2 * STALE_PER_COMMIT, &mut Vec::new());
        assert_eq!(
            stale.chunk(round).len(),
            STALE_PER_COMMIT,
            "back to the usual chunk"
        );
        assert_eq!(
            stale.len(),
            4 * round + 2 * STALE_PER_COMMIT - 3 * STALE_PER_COMMIT
        );
    }

    #[tokio::test]
    async fn publishes_checked_together_each_get_their_own_verdict() {
        // A long window gathers every publish below into one commit, so their signatures
        // are checked in one batch; the spoiled ones fail that batch and are refused alone.
        let mut c = config(None, Duration::from_secs(3600));
        c.commit_window = Duration::from_millis(400);
        let store = Arc::new(PkarrStore::open(c).unwrap());
        let secrets: Vec<SecretKey> = (0..24).map(|_| SecretKey::generate()).collect();
        let mut tasks = Vec::new();
        for (i, secret) in secrets.iter().enumerate() {
            let mut body = payload(secret, &format!("addr=192.0.2.{i}:1"));
            match i % 8 {
                3 => body[10] ^= 1,  // signature spoiled
                5 => body[100] ^= 1, // message spoiled after signing
                _ => {}
            }
            let (store, key) = (store.clone(), secret.public().to_z32());
            tasks.push(tokio::spawn(async move {
                store.put(None, &key, &body, None).await
            }));
        }
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.unwrap());
        }
        for (i, (result, secret)) in results.iter().zip(&secrets).enumerate() {
            if i % 8 == 3 || i % 8 == 5 {
                assert!(
                    matches!(result, Err(PutError::Payload(_))),
                    "publish {i}: {result:?}"
                );
                assert_eq!(served(&store, secret), None, "publish {i} is not served");
            } else {
                assert!(result.is_ok(), "publish {i}: {result:?}");
                assert!(served(&store, secret).is_some(), "publish {i} is served");
            }
        }
        assert!(
            store.counters.commits.load(Relaxed) < 24,
            "publishes shared commits (so their checks shared batches)"
        );
    }

    #[tokio::test]
    async fn stores_the_newest_packet_durably_and_serves_it() {
        let dir = tempfile::tempdir().unwrap();
        let secret = SecretKey::generate();
        let key = secret.public().to_z32();
        let store =
            PkarrStore::open(config(Some(dir.path().into()), Duration::from_secs(3600))).unwrap();
        let first = payload_at(&secret, "addr=192.0.2.1:1", now_us() - 10);
        store.put(None, &key, &first, None).await.unwrap();
        assert_eq!(
            store.put(None, &key, &first, None).await,
            Err(PutError::Same),
            "the same packet again is not newer"
        );
        let second = payload(&secret, "addr=192.0.2.2:2");
        store.put(None, &key, &second, None).await.unwrap();
        assert_eq!(
            store.put(None, &key, &first, None).await,
            Err(PutError::Stale),
            "an older packet changes nothing"
        );
        let stored = store.get(&key).unwrap().unwrap();
        assert_eq!((stored.payload, stored.min_ttl), (second.clone(), Some(30)));
        assert!(matches!(
            store.put(None, "nope", &second, None).await,
            Err(PutError::Key(_))
        ));
        let other = SecretKey::generate().public().to_z32();
        assert!(matches!(
            store.put(None, &other, &second, None).await,
            Err(PutError::Payload(PacketError::Signature))
        ));
        assert_eq!(store.counters.accepted.load(Relaxed), 2);
        let stamp = u64::from_be_bytes(second[64..72].try_into().unwrap());
        assert_eq!(served(&store, &secret), Some(stamp));
        drop(store);

        // A new store over the same directory has the packet back, served.
        let reopened =
            PkarrStore::open(config(Some(dir.path().into()), Duration::from_secs(3600))).unwrap();
        assert_eq!(
            reopened.get(&key).unwrap().map(|p| p.payload).as_deref(),
            Some(second.as_slice())
        );
        assert_eq!(served(&reopened, &secret), Some(stamp));
        // Closed: what was committed stays, and publishes after it are refused, not lost
        // waiting.
        reopened.close();
        let third = payload(&secret, "addr=192.0.2.3:3");
        assert!(matches!(
            reopened.put(None, &key, &third, None).await,
            Err(PutError::Busy | PutError::Io(_))
        ));
        drop(reopened);

        // Expired by age: dropped from the overlay and the database.
        let expiring = PkarrStore::open(config(Some(dir.path().into()), Duration::ZERO)).unwrap();
        expiring.expire();
        assert!(expiring.is_empty());
        assert_eq!(expiring.get(&key).unwrap(), None);
    }

    /// The state a crash leaves: publishes answered from the journal, not committed. The
    /// start writes those the database does not hold (numbered at or above its next number)
    /// and skips the rest: records of an earlier round, and a record cut short.
    #[tokio::test]
    async fn publishes_the_journal_holds_are_read_back_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            PkarrStore::open(config(Some(dir.path().into()), Duration::from_secs(3600))).unwrap()
        };
        let [a, b, c, d] = std::array::from_fn(|_| SecretKey::generate());
        let t = now_us() - 1000;
        let store = open();
        let a1 = payload_at(&a, "addr=192.0.2.1:1", t);
        store
            .put(None, &a.public().to_z32(), &a1, None)
            .await
            .unwrap();
        let epoch = store.epoch();
        drop(store);
        let next =
            tables::next_seq(&redb::Database::open(dir.path().join(DB_FILE)).unwrap()).unwrap();
        let a2 = payload_at(&a, "addr=192.0.2.1:2", t + 1);
        let a0 = payload_at(&a, "addr=192.0.2.1:0", t - 1);
        let b1 = payload_at(&b, "addr=192.0.2.2:1", t);
        let c1 = payload_at(&c, "addr=192.0.2.3:1", t);
        let d1 = payload_at(&d, "addr=192.0.2.4:1", t);
        let key = |s: &SecretKey| *s.public().as_bytes();
        let peer: Origin = ([5; 16], 77);
        {
            let (mut j, found) = journal::Journal::open(dir.path(), &epoch).unwrap();
            assert!(found.is_empty(), "a clean stop empties it");
            let records = [
                // An earlier round's, committed then.
                (next - 1, key(&c), None, c1.as_slice()),
                (next, key(&a), None, a2.as_slice()),
                (next + 1, key(&b), Some(&peer), b1.as_slice()),
                // Older than what the journal holds for its key before it.
                (next + 2, key(&a), None, a0.as_slice()),
            ];
            j.append(records.iter().map(|(s, k, o, p)| (*s, k, *o, *p)))
                .unwrap();
            j.append([(next + 3, &key(&d), None, d1.as_slice())])
                .unwrap();
        }
        // The last record cut short by the crash.
        let path = dir.path().join(journal::JOURNAL_FILE);
        let len = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 3)
            .unwrap();

        let got = |store: &PkarrStore, s: &SecretKey| {
            store.get(&s.public().to_z32()).unwrap().map(|p| p.payload)
        };
        let store = open();
        assert_eq!(
            got(&store, &a),
            Some(a2.clone()),
            "the newest of the journal's"
        );
        assert_eq!(got(&store, &b), Some(b1.clone()));
        assert_eq!(
            got(&store, &c),
            None,
            "an earlier round's record is skipped"
        );
        assert_eq!(
            got(&store, &d),
            None,
            "a record cut short was never answered"
        );
        assert_eq!(served(&store, &b), Some(t));
        // Under the numbers they were answered with, the origin kept; the head is above them.
        let rows = store
            .changes_after(next - 1, usize::MAX, &Have::new(), &|_| false)
            .unwrap()
            .entries;
        let numbered: Vec<(u64, Key)> = rows.iter().map(|r| (r.0, r.1)).collect();
        assert_eq!(numbered, vec![(next, key(&a)), (next + 1, key(&b))]);
        assert_eq!(rows[1].3, peer);
        assert_eq!(store.counters.head.load(Relaxed), next + 2);
        // Pushes answered and not written may have been lost under the journal's numbers:
        // peers are read with the head committed before them.
        assert_eq!(store.durable_head(), Some(next - 1));
        // A publish after it is numbered above every record read back.
        let d2 = payload_at(&d, "addr=192.0.2.4:2", t);
        let seq = store
            .put(None, &d.public().to_z32(), &d2, None)
            .await
            .unwrap();
        assert!(seq > next + 2, "{seq}");
        drop(store);
        // Read back once: the clean stop emptied the journal, and the packets stay.
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 32);
        let store = open();
        assert_eq!(got(&store, &a), Some(a2));
        assert_eq!(got(&store, &d), Some(d2));
    }

    /// The key and payloads of one secret's packets in the order they were given.
    fn items(secret: &SecretKey, payloads: &[&Vec<u8>]) -> Vec<(Key, Vec<u8>, Option<Origin>)> {
        payloads
            .iter()
            .map(|p| (*secret.public().as_bytes(), (*p).clone(), None))
            .collect()
    }

    #[test]
    fn the_start_up_read_caches_every_part_of_the_store() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        // Parts of 8 MiB (a quarter, rounded up to the read size): the third is short, the
        // fourth empty.
        let mut file = std::fs::File::create(&path).unwrap();
        let block: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
        for _ in 0..21 {
            file.write_all(&block).unwrap();
        }
        file.write_all(&block[..4097]).unwrap();
        file.sync_all().unwrap();
        drop(file);
        let file = std::fs::File::open(&path).unwrap();
        // SAFETY: advice on a descriptor held open here; no memory is passed.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert!(
            !cached(&file),
            "written back and dropped from the page cache"
        );
        prefetch(&file);
        assert!(cached(&file), "every part read");
    }

    #[tokio::test]
    async fn packets_checked_before_an_earlier_page_is_stored_are_decided_when_stored() {
        // Catch-up checks the next page while the writer stores this one: what the check saw
        // stored is out of date by the time its page is stored, and the writer decides again.
        let t = now_us() - 1000;
        let (k, l) = (SecretKey::generate(), SecretKey::generate());
        let older = payload_at(&k, "addr=192.0.2.1:1", t);
        let newer = payload_at(&k, "addr=192.0.2.2:2", t + 1);
        let other = payload_at(&l, "addr=192.0.2.3:3", t);
        let store = PkarrStore::open(config(None, Duration::from_secs(3600))).unwrap();
        // Checked while nothing of k is stored: both pass their checks.
        let mut second = items(&k, &[&older]);
        second.extend(items(&l, &[&other]));
        let checked_older = store.check_replicated(None, second).await;
        let checked_newer = store.check_replicated(None, items(&k, &[&newer])).await;
        // The newer is stored first; the older, checked before it was, loses when stored.
        assert_eq!(store.store_checked(checked_newer, None).await, vec![Ok(())]);
        assert_eq!(
            store.store_checked(checked_older, None).await,
            vec![Err(PutError::Stale), Ok(())]
        );
        assert_eq!(served(&store, &k), Some(t + 1));
        assert_eq!(
            store.get(&k.public().to_z32()).unwrap().unwrap().payload,
            newer
        );
        assert_eq!(served(&store, &l), Some(t));
        // Checked as stale (the newer is stored): refused without reaching the writer.
        let checked = store.check_replicated(None, items(&k, &[&older])).await;
        assert_eq!(
            store.store_checked(checked, None).await,
            vec![Err(PutError::Stale)]
        );
        // A forged packet (of the stored timestamp: unchecked, the tie rule could let it win)
        // fails its check, whenever it is stored.
        let mut forged = other.clone();
        forged[80] ^= 1;
        let checked = store.check_replicated(None, items(&l, &[&forged])).await;
        let results = store.store_checked(checked, None).await;
        assert!(
            matches!(results[..], [Err(PutError::Payload(_) | PutError::Key(_))]),
            "{results:?}"
        );
        assert_eq!(served(&store, &l), Some(t));
    }

    #[tokio::test]
    async fn the_change_hook_runs_once_until_the_changes_are_taken() {
        let store = PkarrStore::open(config(None, Duration::from_secs(3600))).unwrap();
        let calls = Arc::new(AtomicU64::new(0));
        let c = calls.clone();
        store.track_changes(move || {
            c.fetch_add(1, Relaxed);
        });
        let t = now_us() - 1000;
        let keys: Vec<SecretKey> = (0..3).map(|_| SecretKey::generate()).collect();
        let publish = |i: usize, at: u64| {
            let payload = payload_at(&keys[i], "addr=192.0.2.1:1", at);
            let z32 = keys[i].public().to_z32();
            let store = &store;
            async move { store.put(None, &z32, &payload, None).await.unwrap() }
        };
        publish(0, t).await;
        publish(1, t).await;
        // Two changes, one call: the taker is on its way.
        assert_eq!(calls.load(Relaxed), 1);
        let taken: Vec<Key> = store.take_changes().into_iter().map(|(k, _)| k).collect();
        assert_eq!(taken.len(), 2);
        // Taken: the next change calls again, and is taken next time.
        publish(2, t).await;
        assert_eq!(calls.load(Relaxed), 2);
        publish(0, t + 1).await;
        assert_eq!(calls.load(Relaxed), 2);
        let mut taken: Vec<Key> = store.take_changes().into_iter().map(|(k, _)| k).collect();
        taken.sort();
        let mut want = vec![*keys[2].public().as_bytes(), *keys[0].public().as_bytes()];
        want.sort();
        assert_eq!(taken, want);
        assert!(store.take_changes().is_empty());
    }

    #[tokio::test]
    async fn equal_timestamps_converge_whatever_the_order() {
        let secret = SecretKey::generate();
        let key = secret.public().to_z32();
        let t = now_us() - 1000;
        let x = payload_at(&secret, "addr=192.0.2.1:1", t);
        let y = payload_at(&secret, "addr=192.0.2.2:2", t);
        let (winner, loser) = match tie(&x, &y) {
            std::cmp::Ordering::Greater => (&x, &y),
            _ => (&y, &x),
        };
        // One store gets the winner first, one the loser first, one both in one batch.
        let a = PkarrStore::open(config(None, Duration::from_secs(3600))).unwrap();
        a.put(None, &key, winner, None).await.unwrap();
        assert_eq!(a.put(None, &key, loser, None).await, Err(PutError::Stale));
        assert_eq!(a.put(None, &key, winner, None).await, Err(PutError::Same));
        let b = PkarrStore::open(config(None, Duration::from_secs(3600))).unwrap();
        b.put(None, &key, loser, None).await.unwrap();
        b.put(None, &key, winner, None).await.unwrap();
        let c = PkarrStore::open(config(None, Duration::from_secs(3600))).unwrap();
        let results = c
            .put_replicated(None, items(&secret, &[loser, winner, loser]), None)
            .await;
        assert_eq!(results, vec![Ok(()), Ok(()), Err(PutError::Stale)]);
        for store in [&a, &b, &c] {
            assert_eq!(store.get(&key).unwrap().unwrap().payload, *winner);
        }
        assert_eq!(tie(&x, &x), std::cmp::Ordering::Equal);
        // The same order as iroh's (and pkarr's) own `more_recent_than`.
        let parse = |p: &Vec<u8>| {
            iroh_dns::pkarr::SignedPacket::from_relay_payload(&secret.public(), p).unwrap()
        };
        assert!(parse(winner).more_recent_than(&parse(loser)));
        assert!(!parse(loser).more_recent_than(&parse(winner)));
    }

    #[tokio::test]
    async fn peers_read_pushed_packets_once_a_synced_commit_holds_them() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            PkarrStore::open(config(Some(dir.path().into()), Duration::from_secs(3600))).unwrap();
        let epoch = store.epoch();
        let log = || {
            store
                .changes_after(0, usize::MAX, &Have::new(), &|_| false)
                .unwrap()
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        // Seen between the commit that writes a push (within LAZY_FLUSH) and the synced one
        // (SYNC_EVERY later); tried again if a synced commit came in between.
        let mut seen = false;
        for _ in 0..5 {
            let secret = SecretKey::generate();
            let commits = store.counters.commits.load(Relaxed);
            let head = store.counters.head.load(Relaxed);
            let synced = store.counters.synced_commits.load(Relaxed);
            assert_eq!(
                store
                    .put_pushed(items(&secret, &[&payload(&secret, "addr=192.0.2.1:1")]))
                    .await,
                vec![Ok(())]
            );
            while store.counters.commits.load(Relaxed) == commits {
                assert!(Instant::now() < deadline, "never written");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let (waiting, page, have) = (store.waiting(), log(), store.have().unwrap());
            if store.counters.synced_commits.load(Relaxed) != synced {
                continue;
            }
            assert!(waiting, "written, not synced: it still waits");
            assert_eq!(page.head, head, "the head is the synced commit's");
            assert!(
                page.entries
                    .iter()
                    .all(|e| e.0 <= head && e.1 != *secret.public().as_bytes()),
                "not read yet"
            );
            assert_eq!(have.get(&epoch), Some(&head));
            assert!(served(&store, &secret).is_some(), "served meanwhile");
            seen = true;
            break;
        }
        assert!(seen, "a synced commit came each time before the check");
        // With nothing more to write, the synced commit still comes.
        while store.waiting() {
            assert!(Instant::now() < deadline, "never synced");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let page = log();
        assert_eq!(page.head, store.counters.head.load(Relaxed));
        assert!(!page.entries.is_empty(), "read once synced");
        assert!(store.counters.synced_commits.load(Relaxed) > 0);
    }

    #[tokio::test]
    async fn pushed_packets_are_served_at_once_and_written_by_the_next_commit() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            PkarrStore::open(config(Some(dir.path().into()), Duration::from_secs(3600))).unwrap()
        };
        let store = open();
        assert_eq!(store.durable_head(), None, "a new store");
        let secret = SecretKey::generate();
        let key = secret.public().to_z32();
        let t = now_us() - 1000;
        let x = payload_at(&secret, "addr=192.0.2.1:1", t);
        let y = payload_at(&secret, "addr=192.0.2.2:2", t);
        let (winner, loser) = match tie(&x, &y) {
            std::cmp::Ordering::Greater => (&x, &y),
            _ => (&y, &x),
        };
        let head = store.counters.head.load(Relaxed);
        // Answered, served and found by GET before the commit that writes it ...
        assert_eq!(
            store.put_pushed(items(&secret, &[loser])).await,
            vec![Ok(())]
        );
        assert_eq!(store.get(&key).unwrap().unwrap().payload, *loser);
        assert_eq!(served(&store, &secret), Some(t));
        // ... and decided against, as if stored: the same again, then the tie's winner.
        assert_eq!(
            store.put_pushed(items(&secret, &[loser])).await,
            vec![Err(PutError::Same)]
        );
        assert_eq!(
            store.put_pushed(items(&secret, &[winner])).await,
            vec![Ok(())]
        );
        assert_eq!(
            store.put_pushed(items(&secret, &[loser])).await,
            vec![Err(PutError::Stale)]
        );
        assert_eq!(store.get(&key).unwrap().unwrap().payload, *winner);
        // Written within LAZY_FLUSH: the log has the packet (the winner, once).
        let written = || {
            store
                .changes_after(0, usize::MAX, &Have::new(), &|_| false)
                .unwrap()
                .entries
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while written().first().is_none_or(|e| e.2 != *winner) {
            assert!(Instant::now() < deadline, "never written");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(written().len(), 1);
        assert!(store.counters.head.load(Relaxed) > head);
        // A client's publish is answered once the journal holds it, with the number the
        // commit writes it under; the push waiting goes into the same commit.
        let other = SecretKey::generate();
        assert_eq!(
            store
                .put_pushed(items(&other, &[&payload(&other, "addr=192.0.2.3:3")]))
                .await,
            vec![Ok(())]
        );
        let third = SecretKey::generate();
        let seq = store
            .put(
                None,
                &third.public().to_z32(),
                &payload(&third, "addr=192.0.2.4:4"),
                None,
            )
            .await
            .unwrap();
        while written().len() < 3 {
            assert!(Instant::now() < deadline, "never written");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let rows = written();
        assert_eq!(rows.len(), 3, "the push written with the publish");
        assert!(
            rows.iter()
                .any(|r| r.0 == seq && r.1 == *third.public().as_bytes()),
            "the publish under the number it was answered with: {seq}"
        );
        // A flush (what a catch-up read does first) returns once the push waiting is written.
        let fourth = SecretKey::generate();
        assert_eq!(
            store
                .put_pushed(items(&fourth, &[&payload(&fourth, "addr=192.0.2.5:5")]))
                .await,
            vec![Ok(())]
        );
        assert!(store.flush().await.unwrap(), "written");
        assert_eq!(written().len(), 4, "the push written by the flush");
        assert!(!store.flush().await.unwrap(), "nothing waits");
        assert_eq!(
            written().len(),
            4,
            "a flush with nothing waiting commits nothing"
        );
        // A clean stop: no durable head to read peers with at the next start.
        let last = store.counters.head.load(Relaxed);
        drop(store);
        assert_eq!(open().durable_head(), None);
        // Without the mark a clean stop leaves (as after a crash): the head held durably.
        {
            let db = redb::Database::open(dir.path().join(DB_FILE)).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(redb::TableDefinition::<&str, &[u8]>::new("meta"))
                .unwrap()
                .remove("stale")
                .unwrap();
            txn.commit().unwrap();
        }
        assert_eq!(open().durable_head(), Some(last), "the head at the stop");
    }

    #[tokio::test]
    async fn the_change_log_gives_what_changed_after_a_sequence_number() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            PkarrStore::open(config(Some(dir.path().into()), Duration::from_secs(3600))).unwrap()
        };
        let store = open();
        let epoch = store.epoch();
        let secrets: Vec<SecretKey> = (0..5).map(|_| SecretKey::generate()).collect();
        let t = now_us() - 1_000_000;
        for (i, s) in secrets.iter().enumerate() {
            let p = payload_at(s, "addr=192.0.2.1:1", t + i as u64);
            store
                .put(None, &s.public().to_z32(), &p, None)
                .await
                .unwrap();
        }
        // Answered from the journal: written by the next commit, which this makes now.
        store.flush().await.unwrap();
        let all = store
            .changes_after(0, usize::MAX, &Have::new(), &|_| false)
            .unwrap();
        assert_eq!((all.epoch, all.head, all.entries.len()), (epoch, 5, 5));
        assert!(all.complete());
        let seqs: Vec<u64> = all.entries.iter().map(|e| e.0).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5]);
        // Pages: at least one entry each, resumed from the last one's number.
        let page = store.changes_after(0, 1, &Have::new(), &|_| false).unwrap();
        assert_eq!(page.entries.len(), 1);
        assert!(!page.complete());
        assert_eq!(page.next, 1);
        // A key published again moves to the end of the log; nothing else is repeated.
        let again = payload_at(&secrets[1], "addr=192.0.2.9:9", t + 100);
        store
            .put(None, &secrets[1].public().to_z32(), &again, None)
            .await
            .unwrap();
        store.flush().await.unwrap();
        let after = store
            .changes_after(5, usize::MAX, &Have::new(), &|_| false)
            .unwrap();
        assert_eq!(after.head, 6);
        assert_eq!(after.entries.len(), 1);
        assert_eq!((after.entries[0].0, &after.entries[0].2), (6, &again));
        assert_eq!(
            store
                .changes_after(0, usize::MAX, &Have::new(), &|_| false)
                .unwrap()
                .entries
                .len(),
            5
        );
        // Cursors are kept with the packets they follow.
        let peer = [7u8; 16];
        assert_eq!(store.cursor(&peer).unwrap(), 0);
        let newer = payload_at(&secrets[2], "addr=192.0.2.7:7", t + 200);
        let r = store
            .put_replicated(None, items(&secrets[2], &[&newer]), Some((peer, 42)))
            .await;
        assert_eq!(r, vec![Ok(())]);
        assert_eq!(store.cursor(&peer).unwrap(), 42);
        // Origins: a publish taken here is its own; a replicated one keeps the replica that
        // took it. A reader's `have` leaves out what it holds by them.
        let moved = payload_at(&secrets[4], "addr=192.0.2.4:4", t + 250);
        let from = ([9u8; 16], 30);
        let mut it = items(&secrets[4], &[&moved]);
        it[0].2 = Some(from);
        assert_eq!(store.put_replicated(None, it, None).await, vec![Ok(())]);
        store.flush().await.unwrap();
        let all = store
            .changes_after(0, usize::MAX, &Have::new(), &|_| false)
            .unwrap();
        let origins: Vec<Origin> = all.entries.iter().map(|e| e.3).collect();
        assert_eq!(
            origins,
            [(epoch, 1), (epoch, 4), (epoch, 6), (epoch, 7), from],
            "keys 0, 3, 1 (again), 2 (replicated without an origin), 4"
        );
        let have = |pairs: &[(Epoch, u64)]| pairs.iter().copied().collect::<Have>();
        let left = |h: &Have| -> Vec<u64> {
            store
                .changes_after(0, usize::MAX, h, &|_| false)
                .unwrap()
                .entries
                .iter()
                .map(|e| e.0)
                .collect()
        };
        assert_eq!(left(&have(&[([9; 16], 30)])), [1, 4, 6, 7]);
        assert_eq!(left(&have(&[([9; 16], 29)])), [1, 4, 6, 7, 8]);
        assert_eq!(
            left(&have(&[(epoch, 4)])),
            [6, 7, 8],
            "the reader read us to 4"
        );
        assert_eq!(
            left(&have(&[(epoch, u64::MAX), ([9; 16], 99)])),
            Vec::<u64>::new()
        );
        // A page that leaves everything out still moves the reader on.
        let none = store
            .changes_after(
                0,
                usize::MAX,
                &have(&[(epoch, u64::MAX), ([9; 16], 99)]),
                &|_| false,
            )
            .unwrap();
        assert_eq!((none.next, none.head), (8, 8));
        // What this replica holds by its cursors, and itself.
        assert_eq!(store.have().unwrap(), have(&[(epoch, 8), (peer, 42)]));
        // The rows of the three replaced packets (2, 3, 5) wait to be removed in a round.
        assert_eq!(store.counters.stale_rows.load(Relaxed), 3);
        drop(store);
        // The epoch, numbers and cursors survive a restart; numbers are never given twice.
        // The stale rows' numbers were kept at the stop: nothing to find by walking the log.
        let store = open();
        assert_eq!(store.epoch(), epoch);
        assert_eq!(store.cursor(&peer).unwrap(), 42);
        assert_eq!(store.counters.stale_rows.load(Relaxed), 3);
        let again = store
            .changes_after(0, usize::MAX, &Have::new(), &|_| false)
            .unwrap();
        assert_eq!(again.entries.len(), 5, "stale rows are not read");
        let p = payload_at(&secrets[3], "addr=192.0.2.3:3", t + 300);
        store
            .put(None, &secrets[3].public().to_z32(), &p, None)
            .await
            .unwrap();
        store.flush().await.unwrap();
        assert_eq!(
            store
                .changes_after(8, usize::MAX, &Have::new(), &|_| false)
                .unwrap()
                .entries[0]
                .0,
            9
        );
        drop(store);
        // A new disk is a new replica.
        let other = tempfile::tempdir().unwrap();
        let fresh =
            PkarrStore::open(config(Some(other.path().into()), Duration::from_secs(3600))).unwrap();
        assert_ne!(fresh.epoch(), epoch);
        assert_eq!(
            fresh
                .changes_after(0, usize::MAX, &Have::new(), &|_| false)
                .unwrap()
                .head,
            0
        );
    }

    #[tokio::test]
    async fn the_writer_removes_stale_log_rows_in_rounds() {
        let store = PkarrStore::open(config(None, Duration::from_secs(3600))).unwrap();
        let secret = SecretKey::generate();
        let z32 = secret.public().to_z32();
        let t = now_us() - 10_000_000;
        let publishes = STALE_ROUND as u64 + STALE_PER_COMMIT as u64;
        for i in 0..publishes {
            let p = payload_at(&secret, "addr=192.0.2.1:1", t + i);
            store.put(None, &z32, &p, None).await.unwrap();
        }
        // A round began once 4,096 were stale, and went on a chunk a commit (each publish
        // here is a commit of its own): what is left is what went stale since.
        let left = store.counters.stale_rows.load(Relaxed);
        assert!(left < STALE_PER_COMMIT as u64 * 2, "{left} stale rows left");
        let all = store
            .changes_after(0, usize::MAX, &Have::new(), &|_| false)
            .unwrap();
        assert_eq!((all.head, all.entries.len()), (publishes, 1));
        let rows = {
            use redb::{ReadableDatabase, ReadableTableMetadata};
            let txn = store.db.begin_read().unwrap();
            txn.open_table(tables::LOG).unwrap().len().unwrap()
        };
        assert_eq!(
            rows,
            1 + left,
            "one live row and the stale ones not removed yet"
        );
    }

    #[tokio::test]
    async fn packets_stored_without_a_change_log_get_one_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let secret = SecretKey::generate();
        let p = payload_at(&secret, "addr=192.0.2.1:1", now_us() - 1000);
        {
            // The two tables of a store written before the change log.
            const OLD_PACKETS: redb::TableDefinition<&[u8; 32], &[u8]> =
                redb::TableDefinition::new("packets");
            let db = Database::create(dir.path().join(DB_FILE)).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(OLD_PACKETS)
                .unwrap()
                .insert(secret.public().as_bytes(), p.as_slice())
                .unwrap();
            txn.commit().unwrap();
        }
        let store =
            PkarrStore::open(config(Some(dir.path().into()), Duration::from_secs(3600))).unwrap();
        let page = store
            .changes_after(0, usize::MAX, &Have::new(), &|_| false)
            .unwrap();
        assert_eq!(page.entries.len(), 1);
        assert_eq!((page.head, &page.entries[0].2), (1, &p));
    }

    #[tokio::test]
    async fn a_store_of_the_first_layout_keeps_its_numbers_and_origins_in_the_second() {
        use redb::{ReadableDatabase, TableDefinition};
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (SecretKey::generate(), SecretKey::generate());
        let (pa, pb) = (
            payload_at(&a, "addr=192.0.2.1:1", now_us() - 1000),
            payload_at(&b, "addr=192.0.2.2:1", now_us() - 2000),
        );
        let (ka, kb) = (*a.public().as_bytes(), *b.public().as_bytes());
        let peer: Epoch = [7; 16];
        {
            // The first layout's five tables, as that version wrote them.
            let db = Database::create(dir.path().join(DB_FILE)).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let t = |name| TableDefinition::<&[u8; 32], &[u8]>::new(name);
                let mut packets = txn.open_table(t("packets")).unwrap();
                packets.insert(&ka, pa.as_slice()).unwrap();
                packets.insert(&kb, pb.as_slice()).unwrap();
                let mut seq_of = txn
                    .open_table(TableDefinition::<&[u8; 32], u64>::new("seq_of"))
                    .unwrap();
                seq_of.insert(&ka, 5).unwrap();
                seq_of.insert(&kb, 7).unwrap();
                let mut changes = txn
                    .open_table(TableDefinition::<u64, &[u8; 32]>::new("changes"))
                    .unwrap();
                changes.insert(5, &ka).unwrap();
                changes.insert(7, &kb).unwrap();
                let mut origin = [0u8; 24];
                origin[..16].copy_from_slice(&peer);
                origin[16..].copy_from_slice(&42u64.to_be_bytes());
                txn.open_table(TableDefinition::<u64, &[u8; 24]>::new("origins"))
                    .unwrap()
                    .insert(7, &origin)
                    .unwrap();
                txn.open_table(TableDefinition::<(u64, &[u8; 32]), ()>::new("by_timestamp"))
                    .unwrap()
                    .insert((1, &ka), ())
                    .unwrap();
                txn.open_table(TableDefinition::<&str, &[u8]>::new("meta"))
                    .unwrap()
                    .insert("next_seq", 8u64.to_be_bytes().as_slice())
                    .unwrap();
            }
            txn.commit().unwrap();
        }
        let store =
            PkarrStore::open(config(Some(dir.path().into()), Duration::from_secs(3600))).unwrap();
        let own = store.epoch();
        let page = store
            .changes_after(0, usize::MAX, &Have::new(), &|_| false)
            .unwrap();
        assert_eq!(page.head, 7);
        assert_eq!(
            page.entries,
            vec![
                (5, ka, pa.clone(), (own, 5)),
                (7, kb, pb.clone(), (peer, 42))
            ]
        );
        assert_eq!(store.payload(&kb), Some(pb));
        assert!(served(&store, &a).is_some() && served(&store, &b).is_some());
        let names: Vec<String> = store
            .db
            .begin_read()
            .unwrap()
            .list_tables()
            .unwrap()
            .map(|t| redb::TableHandle::name(&t).to_string())
            .collect();
        for old in ["packets", "seq_of", "changes", "origins", "by_timestamp"] {
            assert!(
                !names.contains(&old.to_string()),
                "{old} dropped: {names:?}"
            );
        }
        // The next number follows the ones kept; the replaced packet's row goes.
        let newer = payload(&a, "addr=192.0.2.1:2");
        let seq = store
            .put(None, &a.public().to_z32(), &newer, None)
            .await
            .unwrap();
        assert_eq!(seq, 8);
        store.flush().await.unwrap();
        let page = store
            .changes_after(0, usize::MAX, &Have::new(), &|_| false)
            .unwrap();
        assert_eq!(
            page.entries.iter().map(|e| (e.0, e.1)).collect::<Vec<_>>(),
            [(7, kb), (8, ka)]
        );
    }

    #[tokio::test]
    async fn a_push_mixing_held_stale_forged_and_new_packets_gets_each_its_own_answer() {
        let store = PkarrStore::open(config(None, Duration::from_secs(3600))).unwrap();
        let (held, forged_key, fresh) = (
            SecretKey::generate(),
            SecretKey::generate(),
            SecretKey::generate(),
        );
        let t = now_us() - 10_000;
        let newest = payload_at(&held, "addr=192.0.2.1:1", t);
        let older = payload_at(&held, "addr=192.0.2.2:2", t - 1_000);
        assert_eq!(
            store.put_pushed(items(&held, &[&newest])).await,
            vec![Ok(())]
        );
        // Signed by another key than the one it is pushed for.
        let forged = payload(&SecretKey::generate(), "addr=192.0.2.66:1");
        let new = payload(&fresh, "addr=192.0.2.3:3");
        let mut push = items(&held, &[&newest, &older]);
        push.extend(items(&forged_key, &[&forged]));
        push.extend(items(&fresh, &[&new]));
        push.extend(items(&forged_key, &[&forged]));
        let results = store.put_pushed(push).await;
        assert!(
            matches!(
                results[..],
                [
                    Err(PutError::Same),
                    Err(PutError::Stale),
                    Err(PutError::Payload(PacketError::Signature)),
                    Ok(()),
                    Err(PutError::Payload(PacketError::Signature)),
                ]
            ),
            "{results:?}"
        );
        assert_eq!(served(&store, &forged_key), None);
        assert!(served(&store, &fresh).is_some());
        assert_eq!(
            store.get(&held.public().to_z32()).unwrap().unwrap().payload,
            newest
        );
        assert_eq!(
            store.counters.replicated.load(Relaxed),
            2,
            "the first push and the new one"
        );
    }

    #[tokio::test]
    async fn replicated_packets_are_verified_and_limited_without_the_token() {
        let mut c = config(None, Duration::from_secs(3600));
        c.put_per_minute = 1;
        c.put_burst = 1;
        let store = PkarrStore::open(c).unwrap();
        let secret = SecretKey::generate();
        let good = payload(&secret, "addr=192.0.2.1:1");
        // Signed by another key: refused, whoever sends it.
        let forged = (
            *secret.public().as_bytes(),
            payload(&SecretKey::generate(), "addr=192.0.2.66:1"),
            None,
        );
        let r = store.put_replicated(None, vec![forged], None).await;
        assert!(matches!(
            r[..],
            [Err(PutError::Payload(PacketError::Signature))]
        ));
        // Without the token (a client address given): one publish of the burst, then limited.
        let other = SecretKey::generate();
        let mut batch = items(&secret, &[&good]);
        batch.extend(items(&other, &[&payload(&other, "addr=192.0.2.2:2")]));
        let r = store
            .put_replicated(Some("192.0.2.50".parse().unwrap()), batch, None)
            .await;
        assert_eq!(r, vec![Ok(()), Err(PutError::RateLimited)]);
        assert_eq!(store.counters.replicated.load(Relaxed), 1);
    }

    #[tokio::test]
    async fn if_match_publishes_only_over_the_named_timestamp() {
        let store = PkarrStore::open(config(None, Duration::from_secs(3600))).unwrap();
        let secret = SecretKey::generate();
        let key = secret.public().to_z32();
        let t0 = now_us() - 1000;
        let first = payload_at(&secret, "addr=192.0.2.1:1", t0);
        assert_eq!(
            store.put(None, &key, &first, Some(5)).await,
            Err(PutError::Changed { stored: None }),
            "nothing stored: no timestamp matches"
        );
        store.put(None, &key, &first, None).await.unwrap();
        let second = payload_at(&secret, "addr=192.0.2.2:2", t0 + 1);
        assert_eq!(
            store.put(None, &key, &second, Some(t0 - 1)).await,
            Err(PutError::Changed { stored: Some(t0) })
        );
        store.put(None, &key, &second, Some(t0)).await.unwrap();
        assert_eq!(served(&store, &secret), Some(t0 + 1));
        assert_eq!(
            store.counters.rejected.lock().unwrap().get("precondition"),
            Some(&2)
        );
    }

    #[tokio::test]
    async fn far_future_packets_are_refused_and_stored_ones_pin_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (pinned, kept) = (SecretKey::generate(), SecretKey::generate());
        let (pinned_key, kept_key) = (pinned.public().to_z32(), kept.public().to_z32());
        let far = payload_at(&pinned, "addr=192.0.2.1:1", 1 << 63);
        let store =
            PkarrStore::open(config(Some(dir.path().into()), Duration::from_secs(3600))).unwrap();
        for stamp in [1 << 63, u64::MAX, now_us() + 3_600_000_000] {
            let refused = store
                .put(None, &pinned_key, &payload_at(&pinned, "a=1", stamp), None)
                .await;
            assert!(
                matches!(refused, Err(PutError::Future { timestamp_us, .. }) if timestamp_us == stamp),
                "{refused:?}"
            );
            let said = refused.unwrap_err().to_string();
            assert!(said.contains("--pkarr-max-future"), "{said}");
        }
        assert_eq!(
            store.counters.rejected.lock().unwrap().get("future"),
            Some(&3)
        );
        // A publisher's clock a minute ahead is within the bound.
        let skewed = payload_at(&kept, "a=2", now_us() + 60_000_000);
        store.put(None, &kept_key, &skewed, None).await.unwrap();
        drop(store);

        // A relay without the bound (an older version) stored one at 2^63 µs...
        let mut unbounded = config(Some(dir.path().into()), Duration::from_secs(3600));
        unbounded.max_future = Duration::MAX;
        let store = PkarrStore::open(unbounded).unwrap();
        store.put(None, &pinned_key, &far, None).await.unwrap();
        let today = payload_at(&pinned, "addr=192.0.2.2:2", now_us());
        assert_eq!(
            store.put(None, &pinned_key, &today, None).await,
            Err(PutError::Stale),
            "without the bound it pins the key"
        );
        drop(store);

        // ...which a relay with the bound keeps but does not serve (the clock may be what is
        // behind): the key may publish again.
        let store =
            PkarrStore::open(config(Some(dir.path().into()), Duration::from_secs(3600))).unwrap();
        assert_eq!(store.get(&pinned_key).unwrap(), None);
        assert_eq!(served(&store, &pinned), None);
        assert!(served(&store, &kept).is_some(), "the others are kept");
        store.put(None, &pinned_key, &today, None).await.unwrap();
        drop(store);
        let store =
            PkarrStore::open(config(Some(dir.path().into()), Duration::from_secs(3600))).unwrap();
        assert_eq!(
            store.get(&pinned_key).unwrap().map(|p| p.payload),
            Some(today),
            "replaced in both tables: nothing left of it"
        );
    }

    #[test]
    fn a_stored_packet_beyond_the_bound_never_makes_a_publish_stale() {
        let latest = 1_000;
        assert!(stale(500, 400, latest), "older than what is stored");
        assert!(stale(500, 500, latest), "the same");
        assert!(!stale(500, 600, latest), "newer");
        assert!(!stale(2_000, 600, latest), "stored beyond the bound");
        assert!(!stale(u64::MAX, 0, latest));
    }

    #[tokio::test]
    async fn expiry_takes_old_packets_only() {
        let store = PkarrStore::open(config(None, Duration::from_secs(60))).unwrap();
        let (old, fresh) = (SecretKey::generate(), SecretKey::generate());
        let ten_minutes_ago = now_us() - 600_000_000;
        store
            .put(
                None,
                &old.public().to_z32(),
                &payload_at(&old, "a=1", ten_minutes_ago),
                None,
            )
            .await
            .unwrap();
        store
            .put(
                None,
                &fresh.public().to_z32(),
                &payload(&fresh, "a=2"),
                None,
            )
            .await
            .unwrap();
        // The writer expires every second on its own too: whichever ran, the old one is gone.
        store.expire();
        assert_eq!(served(&store, &old), None);
        assert!(served(&store, &fresh).is_some());
        assert_eq!(store.counters.expired.load(Relaxed), 1);
    }

    #[tokio::test]
    async fn expiry_slices_commit_only_when_they_remove_packets() {
        let store = PkarrStore::open(config(None, Duration::from_secs(60))).unwrap();
        let fresh = SecretKey::generate();
        store
            .put(
                None,
                &fresh.public().to_z32(),
                &payload(&fresh, "a=1"),
                None,
            )
            .await
            .unwrap();
        // Two slices a second apart, each walking every packet of this small store, find
        // nothing to remove: no commit.
        let commits = store.counters.commits.load(Relaxed);
        tokio::time::sleep(EXPIRE_EVERY * 5 / 2).await;
        assert_eq!(
            store.counters.commits.load(Relaxed),
            commits,
            "an idle store writes nothing"
        );
        // A packet already past its age is removed by the next slice, with a commit.
        let old = SecretKey::generate();
        let ten_minutes_ago = now_us() - 600_000_000;
        store
            .put(
                None,
                &old.public().to_z32(),
                &payload_at(&old, "a=2", ten_minutes_ago),
                None,
            )
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.counters.expired.load(Relaxed) == 0 {
            assert!(Instant::now() < deadline, "never expired");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(served(&store, &old), None);
        assert!(served(&store, &fresh).is_some());
        assert!(
            store.counters.commits.load(Relaxed) >= commits + 2,
            "the publish and the slice"
        );
    }

    #[test]
    fn the_earlier_layout_is_migrated_on_first_start() {
        let dir = tempfile::tempdir().unwrap();
        let legacy = dir.path().join(LEGACY_DIR);
        std::fs::create_dir(&legacy).unwrap();
        let secrets: Vec<SecretKey> = (0..3).map(|_| SecretKey::generate()).collect();
        for s in &secrets {
            std::fs::write(
                legacy.join(format!("{}.pkarr", s.public().to_z32())),
                payload(s, "addr=192.0.2.9:9"),
            )
            .unwrap();
        }
        std::fs::write(legacy.join("garbage.pkarr"), b"not a packet").unwrap();
        let store =
            PkarrStore::open(config(Some(dir.path().into()), Duration::from_secs(3600))).unwrap();
        assert_eq!(store.len(), 3);
        for s in &secrets {
            assert!(served(&store, s).is_some());
        }
        assert!(!legacy.exists(), "the old files are gone once moved");
        drop(store);
        let again =
            PkarrStore::open(config(Some(dir.path().into()), Duration::from_secs(3600))).unwrap();
        assert_eq!(again.len(), 3, "kept in the database");
    }

    #[tokio::test]
    async fn publishes_are_rate_limited_per_address_with_a_burst() {
        let mut c = config(None, Duration::from_secs(3600));
        c.put_per_minute = 2;
        c.put_burst = 3;
        let store = PkarrStore::open(c).unwrap();
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let t0 = Instant::now();
        assert!((0..3).all(|_| store.allow(a, t0)), "a burst of three");
        assert!(!store.allow(a, t0), "the fourth waits");
        assert!(store.allow(b, t0), "other addresses are not affected");
        assert!(
            !store.allow(a, t0 + Duration::from_secs(10)),
            "one token takes 30 s to come back"
        );
        assert!(store.allow(a, t0 + Duration::from_secs(41)));
        let secret = SecretKey::generate();
        let key = secret.public().to_z32();
        let blocked = store
            .put(Some(a), &key, &payload(&secret, "addr=192.0.2.1:1"), None)
            .await;
        assert_eq!(blocked, Err(PutError::RateLimited));
        assert_eq!(
            store.counters.rejected.lock().unwrap().get("rate_limited"),
            Some(&1)
        );
    }
}
