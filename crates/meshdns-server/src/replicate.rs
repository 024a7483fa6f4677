//! pkarr replication between relay replicas: every replica takes publishes, sends each to
//! every peer, and catches up from them; none is the single writer.
//!
//! pkarr packets certify themselves (signed by the key they describe, ordered by their own
//! timestamp), so replicas exchange them without trusting each other's content: a replicated
//! packet is verified like a publish, and the newest wins everywhere (equal timestamps: the
//! store's tie rule, the same on every replica). The peers' shared token only exempts their
//! traffic from the publish rate limit and opens the catch-up reads.
//!
//! - **Push.** A publish acknowledged here (durable) is queued for every peer (a bounded
//!   queue each, never blocking the publisher) and sent in batches of up to [`PUSH_BYTES`]
//!   over one persistent HTTP/2 connection per peer: `POST /pkarr-peer/v2/push`, frames of
//!   `key(32) ‖ sequence(u64) ‖ length(u16) ‖ relay payload` (the sequence number the sender
//!   stored it under), answered with one result byte per frame after the receiver's commit. A
//!   received packet is never pushed on (only client publishes are). Publishes gather for up
//!   to [`ReplicationConfig::push_window`] (one request and one commit on the peer per window
//!   in a steady stream); one waiting for acknowledgements goes at once.
//! - **Catch-up.** Each replica numbers its changes (the store's change log); a peer reads
//!   `GET /pkarr-peer/v2/changes?after=S` page by page and keeps, with the packets, how far it
//!   read (its cursor for that replica's epoch). A replica that was down or partitioned reads
//!   what it missed; one that lost its disk (a new epoch) is read from the start; one whose
//!   peer's disk went back (the cursor beyond the peer's head) reads that peer again from the
//!   start. This runs at start and every [`ReplicationConfig::catchup_interval`], which bounds
//!   how long a lost push leaves replicas apart.
//! - **Origins.** Every entry of a log carries where the packet was first taken (that
//!   replica's epoch and sequence number there; a packet a replica took itself is its own
//!   origin). A reader sends how far it read each replica (`&have=epoch:seq,…`, its cursors,
//!   and its own epoch as read to its head), and the page leaves out what it holds by those: a
//!   replica reading its second peer after its first does not fetch the first's packets
//!   again, and never fetches back its own. At start, peers are read one after the other.
//! - **Readiness.** Until a catch-up reached the head of at least one peer, and every other
//!   peer either did too or could not be reached, `/readyz` says not ready (at most
//!   [`ReplicationConfig::catchup_wait`]): a replica that is new or lost its disk does not
//!   serve with fewer packets than a reachable peer had.
//! - **Acknowledged by peers.** With `ack_replicas` N, a publish's `204` waits until N peers
//!   answered that they hold it durably (or a newer packet of its key), else 503 after
//!   `ack_timeout` (the packet stays stored here and keeps replicating).
//!
//! Why a change log and not a digest exchange: a replica that missed 100,000 of a million
//! keys reads 100,000 entries, where comparing digests of buckets would touch most buckets
//! (and their keys) for that many scattered changes. The log costs a sequence row per key.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::metrics::{header as metric_header, label_value};

/// A replica's identity (random, made with its database).
pub type Epoch = [u8; 16];

/// The largest push request body (the HTTP listeners read at most [`crate::http::MAX_BODY`]).
pub const PUSH_BYTES: usize = 60 * 1024;
/// How long a push waits after the first publish queued, for more to send with it.
/// A catch-up page, at most about this many bytes of packets.
pub const PAGE_BYTES: usize = 4 << 20;
/// Header naming the replica that answered (hex of its epoch).
pub const EPOCH_HEADER: &str = "meshdns-pkarr-epoch";
/// Header of a push saying one of its publishes waits for acknowledgements (`1`): taken even
/// by a replica still catching up.
pub const ACK_HEADER: &str = "meshdns-pkarr-ack";
/// Header with the highest change number of the replica when a page was read.
pub const HEAD_HEADER: &str = "meshdns-pkarr-head";
/// Header with the number the next page starts after.
pub const NEXT_HEADER: &str = "meshdns-pkarr-next";
const FRAME_TYPE: &str = "application/x-meshdns-pkarr-frames";

/// What happened to one replicated packet, as the receiver answers it (one byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Applied {
    /// Stored (durable).
    Stored = 0,
    /// This packet, or one that wins over it, is already stored.
    Have = 1,
    /// Not a valid signed packet for its key.
    Invalid = 2,
    /// Dated beyond the receiver's `--pkarr-max-future`.
    Future = 3,
    /// Counted as a publish of the sender (no token) and over its rate.
    RateLimited = 4,
    /// Not stored: the receiver's store failed or stopped.
    Failed = 5,
}

impl Applied {
    fn from_byte(b: u8) -> Applied {
        match b {
            0 => Applied::Stored,
            1 => Applied::Have,
            2 => Applied::Invalid,
            3 => Applied::Future,
            4 => Applied::RateLimited,
            _ => Applied::Failed,
        }
    }

    /// Whether the receiver holds the packet (or a winner over it) durably.
    pub fn held(self) -> bool {
        matches!(self, Applied::Stored | Applied::Have)
    }

    fn label(self) -> &'static str {
        match self {
            Applied::Stored => "stored",
            Applied::Have => "have",
            Applied::Invalid => "invalid",
            Applied::Future => "future",
            Applied::RateLimited => "rate_limited",
            Applied::Failed => "failed",
        }
    }
}

/// One change of a replica's log: its number, the key and the relay payload.
/// Where a packet was first taken: that replica's epoch and its sequence number there.
pub type Origin = (Epoch, u64);

/// How far a reader read each replica (its own epoch: its head).
pub type Have = HashMap<Epoch, u64>;

/// A log entry: sequence number here, key, relay payload, origin.
pub type Change = (u64, [u8; 32], Vec<u8>, Origin);

/// One page of a replica's change log.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// The replica's epoch.
    pub epoch: Epoch,
    /// Its highest change number when the page was read.
    pub head: u64,
    /// The changes, in order.
    pub entries: Vec<Change>,
    /// Where the next page starts (the last number read, entries left out included).
    pub next: u64,
}

/// Packets checked by [`PeerStore::check_page`], to be stored: one result per item.
pub type Storing<'a> = Pin<Box<dyn Future<Output = Vec<Applied>> + Send + 'a>>;

/// A page of a peer's log, checked and not stored yet.
struct CheckedPage<'a> {
    epoch: Epoch,
    next: u64,
    /// Its packets.
    n: u64,
    storing: Storing<'a>,
}

/// The store replication reads and writes.
pub trait PeerStore: Send + Sync + 'static {
    /// This replica's epoch.
    fn epoch(&self) -> Epoch;
    /// Stores packets a peer sent, each verified as a publish; rate limited as publishes of
    /// `client` when given (a sender without the token). One result per item.
    fn put_replicated(
        &self,
        client: Option<IpAddr>,
        items: Vec<([u8; 32], Vec<u8>, Option<Origin>)>,
    ) -> Pin<Box<dyn Future<Output = Vec<Applied>> + Send + '_>>;
    /// Checks a page of a peer's log as [`PeerStore::put_replicated`] would (signatures, and
    /// which packets a winner is held for already) without the store's writer, and gives what
    /// then stores the packets that passed and keeps `cursor` once they are decided.
    /// Catch-up checks a page while the writer commits the one before.
    fn check_page(
        &self,
        items: Vec<([u8; 32], Vec<u8>, Option<Origin>)>,
        cursor: (Epoch, u64),
    ) -> Pin<Box<dyn Future<Output = Storing<'_>> + Send + '_>>;
    /// Stores packets a peer with the token pushed without waiting for acknowledgements: each
    /// may be answered once decided and served, before it is durable (written within a
    /// moment, by the store's next commit). The push's answer then names the head + 1, so the
    /// sender counts them held only once a later commit made them durable.
    fn put_pushed(
        &self,
        items: Vec<([u8; 32], Vec<u8>, Option<Origin>)>,
    ) -> Pin<Box<dyn Future<Output = Vec<Applied>> + Send + '_>>;
    /// After a start that followed an unclean stop, the head held durably then: pushes
    /// answered above it may be lost. Until a peer was read through once, reads of it name
    /// this as this replica's own head, so the peer sends back what it was told is held.
    fn durable_head(&self) -> Option<u64>;
    /// Writes the pushes answered but not written yet, returning once they are durable and
    /// numbered (`Ok(true)`; `Ok(false)` when none waited): a page read after it holds every
    /// packet this replica served before. An error when they could not be written.
    fn flush(&self) -> Pin<Box<dyn Future<Output = Result<bool, String>> + Send + '_>>;
    /// Whether pushes answered but not written yet wait.
    fn waiting(&self) -> bool;
    /// The changes after `after` the reader does not hold by `have` nor by `held`, one page
    /// (blocking).
    fn changes_after(
        &self,
        after: u64,
        max_bytes: usize,
        have: &Have,
        held: &dyn Fn(u64) -> bool,
    ) -> std::io::Result<Page>;
    /// The highest change number committed here.
    fn head(&self) -> u64;
    /// How far this replica read each peer, and its own epoch (blocking).
    fn have(&self) -> std::io::Result<Have>;
    /// How far the peer with `epoch` has been read (blocking).
    fn cursor(&self, epoch: &Epoch) -> std::io::Result<u64>;
}

/// The settings (`--pkarr-peer`, `--pkarr-peers-dns`, `--pkarr-peer-token-file`,
/// `--pkarr-ack-replicas`, ...).
#[derive(Debug, Clone)]
pub struct ReplicationConfig {
    /// Base URLs of the other replicas (`http://host:port`, `https://…`).
    pub peers: Vec<String>,
    /// Names resolved every [`ReplicationConfig::resolve_every`], each address a peer at port.
    pub peers_dns: Vec<(String, u16)>,
    /// The token every replica shares.
    pub token: Vec<u8>,
    /// Peers that must hold a publish before its `204`.
    pub ack_replicas: usize,
    /// How long a publish waits for them.
    pub ack_timeout: Duration,
    /// How long start-up waits for a catch-up before it is ready anyway.
    pub catchup_wait: Duration,
    /// How often each peer is read for what pushes missed.
    pub catchup_interval: Duration,
    /// How often `peers_dns` is resolved again.
    pub resolve_every: Duration,
    /// Packets queued per peer, at most; more are dropped (and caught up later).
    pub queue: usize,
    /// How long a publish may wait for others to go with it to a peer (`--pkarr-push-window`).
    pub push_window: Duration,
    /// The largest catch-up page served, in bytes of packets (`--pkarr-page-bytes`, at most
    /// [`PAGE_BYTES`]: what a reader accepts).
    pub page_bytes: usize,
}

impl ReplicationConfig {
    /// The defaults, with no peers.
    pub fn new(token: Vec<u8>) -> ReplicationConfig {
        ReplicationConfig {
            peers: Vec::new(),
            peers_dns: Vec::new(),
            token,
            ack_replicas: 0,
            ack_timeout: Duration::from_secs(5),
            catchup_wait: Duration::from_secs(30),
            catchup_interval: Duration::from_secs(30),
            resolve_every: Duration::from_secs(5),
            queue: 65_536,
            push_window: Duration::from_millis(40),
            page_bytes: PAGE_BYTES,
        }
    }
}

/// Publishes waiting for peers' acknowledgements.
struct Ack {
    /// The replicas (by epoch) that hold it: one replica reached at two addresses (A and
    /// AAAA records, a URL and a name) counts once.
    got: Mutex<std::collections::HashSet<Epoch>>,
    done: Notify,
}

impl Ack {
    fn count(&self) -> usize {
        self.got.lock().expect("ack").len()
    }
}

struct Entry {
    key: [u8; 32],
    /// The sequence number it was stored under here.
    seq: u64,
    payload: Bytes,
    queued: Instant,
    ack: Option<Arc<Ack>>,
}

/// What the push loop does next with a peer's queue.
enum Next {
    /// Send these now.
    Send(Vec<Entry>),
    /// Nothing is due before this instant.
    At(Instant),
    /// The queue is empty.
    Idle,
}

/// A peer's push task is woken when its queue reaches a multiple of this many (a request holds
/// at least 53 frames of the largest packets, [`PUSH_BYTES`]).
const WAKE_EVERY: usize = 32;

/// Takes the next batch off `q` if one is due: a full request's worth ([`PUSH_BYTES`]), a
/// publish that waits for acknowledgements, or an oldest entry queued `window` ago. Until
/// then publishes gather, so a steady stream goes in requests of `window` worth of publishes
/// (one commit each on the peer) instead of one request per round trip.
fn take_batch(q: &mut VecDeque<Entry>, now: Instant, window: Duration) -> Next {
    let Some(front) = q.front() else {
        return Next::Idle;
    };
    let due = front.queued + window;
    let (mut size, mut n, mut full, mut urgent) = (0, 0, false, false);
    for e in q.iter() {
        let frame = 42 + e.payload.len();
        if n > 0 && size + frame > PUSH_BYTES {
            full = true;
            break;
        }
        size += frame;
        n += 1;
        urgent |= e.ack.is_some();
    }
    if full || urgent || now >= due {
        Next::Send(q.drain(..n).collect())
    } else {
        Next::At(due)
    }
}

/// Replication latency buckets (seconds): from the local commit to the peer's answer (finer
/// below 100 ms, the bound a steady stream is held to).
const LAG_BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.035, 0.05, 0.065, 0.08, 0.1, 0.25, 1.0, 10.0,
];

#[derive(Default)]
struct PeerCounters {
    pushed: Mutex<HashMap<&'static str, u64>>,
    dropped: AtomicU64,
    push_errors: AtomicU64,
    catchup_runs: AtomicU64,
    catchup_failures: AtomicU64,
    fetched: AtomicU64,
    lag_buckets: [AtomicU64; LAG_BUCKETS.len()],
    lag_count: AtomicU64,
    lag_micros: AtomicU64,
}

impl PeerCounters {
    fn lag(&self, d: Duration) {
        let s = d.as_secs_f64();
        for (i, b) in LAG_BUCKETS.iter().enumerate() {
            if s <= *b {
                self.lag_buckets[i].fetch_add(1, Relaxed);
            }
        }
        self.lag_count.fetch_add(1, Relaxed);
        self.lag_micros.fetch_add(d.as_micros() as u64, Relaxed);
    }
}

/// Another replica.
struct Peer {
    url: String,
    queue: Mutex<VecDeque<Entry>>,
    wake: Notify,
    stop: CancellationToken,
    /// This replica itself (found by its epoch): nothing is sent to it.
    is_self: AtomicBool,
    /// A catch-up from it reached its head at least once.
    caught_up: AtomicBool,
    /// Its last catch-up attempt could not reach it.
    unreachable: AtomicBool,
    /// When a DNS resolution last named it (static peers: never forgotten).
    seen: Mutex<Option<Instant>>,
    /// Its epoch, once a catch-up read it.
    epoch: Mutex<Option<Epoch>>,
    /// Packets it pushed here since its log was last read periodically: the peer that pushed
    /// most is read first in each round.
    pushed_in: AtomicU64,
    counters: PeerCounters,
}

type HttpClient = Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

/// Replication of one relay with its peers.
pub struct Replicator {
    store: Arc<dyn PeerStore>,
    config: ReplicationConfig,
    epoch: Epoch,
    peers: Mutex<Vec<Arc<Peer>>>,
    http: HttpClient,
    started: Instant,
    ready: AtomicBool,
    received: Mutex<HashMap<(&'static str, &'static str), u64>>,
    refused: Mutex<HashMap<&'static str, u64>>,
    stop: CancellationToken,
    /// One catch-up page applied at a time: peers mostly hold the same packets, and what one
    /// page stored, the next peer's pages find stored (a lookup each, no signature check).
    catching_up: tokio::sync::Mutex<()>,
    /// Peers waiting for their turn to be read at start, with the share of their first page
    /// they took themselves; a change wakes the waiters.
    start_order: Mutex<Vec<(usize, f64)>>,
    start_change: Notify,
    /// Whole reads done at start.
    start_reads: AtomicU64,
    /// What each peer (by epoch) acknowledged holding of this replica's pushes: its catch-up
    /// reads leave those changes out (a steady stream is pushed, and the periodic read then
    /// moves numbers, not packets).
    held: Mutex<HashMap<Epoch, Held>>,
    /// Periodic reads go one peer at a time: the cursor the first one moves leaves that
    /// peer's publishes out of the next one's pages (the other replicas hold copies of them).
    periodic: tokio::sync::Mutex<()>,
    /// Peers (by epoch) read through since start: after an unclean stop, reads of the others
    /// name the durable head ([`PeerStore::durable_head`]).
    read_through: Mutex<std::collections::HashSet<Epoch>>,
}

/// The changes of this replica's log that one peer acknowledged holding, each with the head
/// of the peer's own log once it held it (the push's answer), and the head it last read
/// with. A page leaves out only changes acknowledged at or below the head the reader reads
/// with: what it acknowledged since (pushes answered while its read was on the way) is sent
/// again, and a reader whose head went back (its disk restored to an older copy) gets back
/// everything it acknowledged after that copy. A head lower than its last read's forgets all.
#[derive(Default)]
struct Held {
    seqs: std::collections::BTreeMap<u64, u64>,
    read_head: u64,
}

/// Changes remembered as held, per peer, at most: beyond, the oldest are forgotten (and read
/// again), never more memory.
const MAX_HELD: usize = 1 << 20;

impl std::fmt::Debug for Replicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replicator")
            .field("peers", &self.config.peers)
            .finish_non_exhaustive()
    }
}

fn hex(epoch: &Epoch) -> String {
    epoch.iter().fold(String::with_capacity(32), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn parse_hex(text: &str) -> Option<Epoch> {
    let bytes = data_encoding::HEXLOWER_PERMISSIVE
        .decode(text.as_bytes())
        .ok()?;
    bytes.try_into().ok()
}

/// Constant-time comparison of a presented token with ours (their SHA-256 digests, so the
/// time depends on neither's content nor length).
fn token_matches(presented: &[u8], ours: &[u8]) -> bool {
    use ring::digest::{SHA256, digest};
    let (a, b) = (digest(&SHA256, presented), digest(&SHA256, ours));
    a.as_ref()
        .iter()
        .zip(b.as_ref())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

/// A pushed frame: key, the sender's change number, relay payload.
pub type Pushed = ([u8; 32], u64, Vec<u8>);

/// Frames of a push body: `key(32) ‖ sequence(u64) ‖ length(u16) ‖ payload`, or `None` when
/// malformed.
pub fn decode_push(mut body: &[u8]) -> Option<Vec<Pushed>> {
    let mut out = Vec::new();
    while !body.is_empty() {
        let key: [u8; 32] = body.get(..32)?.try_into().ok()?;
        let seq = u64::from_be_bytes(body.get(32..40)?.try_into().ok()?);
        let len = usize::from(u16::from_be_bytes(body.get(40..42)?.try_into().ok()?));
        out.push((key, seq, body.get(42..42 + len)?.to_vec()));
        body = &body[42 + len..];
    }
    Some(out)
}

fn encode_push(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.iter().map(|e| 42 + e.payload.len()).sum());
    for e in entries {
        out.extend_from_slice(&e.key);
        out.extend_from_slice(&e.seq.to_be_bytes());
        out.extend_from_slice(&(e.payload.len() as u16).to_be_bytes());
        out.extend_from_slice(&e.payload);
    }
    out
}

/// A page's body: `change(u64) ‖ key(32) ‖ origin epoch(16) ‖ origin sequence(u64) ‖
/// length(u16) ‖ payload` per entry.
pub fn encode_page(page: &Page) -> Vec<u8> {
    let mut out = Vec::new();
    for (seq, key, payload, (epoch, origin_seq)) in &page.entries {
        out.extend_from_slice(&seq.to_be_bytes());
        out.extend_from_slice(key);
        out.extend_from_slice(epoch);
        out.extend_from_slice(&origin_seq.to_be_bytes());
        out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        out.extend_from_slice(payload);
    }
    out
}

/// The entries of a page's body, or `None` when malformed.
pub fn decode_page(mut body: &[u8]) -> Option<Vec<Change>> {
    let mut out = Vec::new();
    while !body.is_empty() {
        let seq = u64::from_be_bytes(body.get(..8)?.try_into().ok()?);
        let key: [u8; 32] = body.get(8..40)?.try_into().ok()?;
        let epoch: Epoch = body.get(40..56)?.try_into().ok()?;
        let origin_seq = u64::from_be_bytes(body.get(56..64)?.try_into().ok()?);
        let len = usize::from(u16::from_be_bytes(body.get(64..66)?.try_into().ok()?));
        out.push((
            seq,
            key,
            body.get(66..66 + len)?.to_vec(),
            (epoch, origin_seq),
        ));
        body = &body[66 + len..];
    }
    Some(out)
}

/// The share of a page's entries its replica took from their publishers itself.
fn own_share(page: &Page) -> f64 {
    if page.entries.is_empty() {
        return 0.0;
    }
    let own = page.entries.iter().filter(|e| e.3.0 == page.epoch).count();
    own as f64 / page.entries.len() as f64
}

/// `have` as the query parameter: `epoch:seq` pairs, the epoch in hex, comma-separated.
fn have_param(have: &Have) -> String {
    let mut out = String::new();
    for (epoch, seq) in have {
        if !out.is_empty() {
            out.push(',');
        }
        let _ = write!(out, "{}:{seq}", hex(epoch));
    }
    out
}

/// The `have` query parameter, or `None` when malformed (at most 1,024 replicas).
pub fn parse_have(text: &str) -> Option<Have> {
    let mut have = Have::new();
    for pair in text.split(',').filter(|p| !p.is_empty()) {
        let (epoch, seq) = pair.split_once(':')?;
        have.insert(parse_hex(epoch)?, seq.parse().ok()?);
        if have.len() > 1024 {
            return None;
        }
    }
    Some(have)
}

impl Replicator {
    /// Replication for `store` with `config`'s peers; [`Replicator::start`] runs it.
    pub fn new(
        store: Arc<dyn PeerStore>,
        config: ReplicationConfig,
    ) -> std::io::Result<Arc<Replicator>> {
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(c);
        }
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(std::io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
        // Small requests and their answers must not wait for Nagle's algorithm (40 ms against
        // the peer's delayed acknowledgements).
        let mut tcp = hyper_util::client::legacy::connect::HttpConnector::new();
        tcp.set_nodelay(true);
        tcp.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http2()
            .wrap_connector(tcp);
        // HTTP/2 only: one connection per peer carries every push and page (prior knowledge
        // over plain HTTP, ALPN over TLS); idle ones close before the peers' idle timeout.
        let http = Client::builder(TokioExecutor::new())
            .http2_only(true)
            .pool_idle_timeout(Duration::from_secs(20))
            .build(connector);
        let epoch = store.epoch();
        Ok(Arc::new(Replicator {
            store,
            epoch,
            peers: Mutex::new(Vec::new()),
            http,
            started: Instant::now(),
            ready: AtomicBool::new(false),
            received: Mutex::default(),
            refused: Mutex::default(),
            stop: CancellationToken::new(),
            catching_up: tokio::sync::Mutex::new(()),
            start_order: Mutex::default(),
            start_change: Notify::new(),
            start_reads: AtomicU64::new(0),
            held: Mutex::default(),
            periodic: tokio::sync::Mutex::new(()),
            read_through: Mutex::default(),
            config,
        }))
    }

    /// Starts the peers' tasks and the DNS discovery; they stop with `stop`.
    pub fn start(self: &Arc<Self>, stop: CancellationToken) {
        let this = self.clone();
        tokio::spawn(async move {
            stop.cancelled().await;
            this.stop.cancel();
        });
        for url in self.config.peers.clone() {
            self.add_peer(url, None);
        }
        if !self.config.peers_dns.is_empty() {
            let this = self.clone();
            tokio::spawn(async move { this.discover().await });
        }
    }

    fn add_peer(self: &Arc<Self>, url: String, seen: Option<Instant>) {
        let url = url.trim_end_matches('/').to_string();
        let mut peers = self.peers.lock().expect("peers");
        if let Some(p) = peers.iter().find(|p| p.url == url) {
            if let Some(at) = seen {
                *p.seen.lock().expect("peer") = Some(at);
            }
            return;
        }
        let peer = Arc::new(Peer {
            url,
            queue: Mutex::new(VecDeque::new()),
            wake: Notify::new(),
            stop: self.stop.child_token(),
            is_self: AtomicBool::new(false),
            caught_up: AtomicBool::new(false),
            unreachable: AtomicBool::new(false),
            seen: Mutex::new(seen),
            epoch: Mutex::new(None),
            pushed_in: AtomicU64::new(0),
            counters: PeerCounters::default(),
        });
        peers.push(peer.clone());
        let this = self.clone();
        let p = peer.clone();
        tokio::spawn(async move { this.push_loop(p).await });
        let this = self.clone();
        tokio::spawn(async move { this.catchup_loop(peer).await });
    }

    /// Resolves `--pkarr-peers-dns` names again and again; a peer no name gave for a minute
    /// is forgotten with its queue.
    async fn discover(self: Arc<Self>) {
        loop {
            for (name, port) in &self.config.peers_dns {
                match tokio::net::lookup_host((name.as_str(), *port)).await {
                    Ok(addrs) => {
                        for a in addrs {
                            let url = match a.ip() {
                                IpAddr::V4(ip) => format!("http://{ip}:{port}"),
                                IpAddr::V6(ip) => format!("http://[{ip}]:{port}"),
                            };
                            self.add_peer(url, Some(Instant::now()));
                        }
                    }
                    Err(e) => debug!(name, error = %e, "pkarr peers: name not resolved"),
                }
            }
            let forget = Duration::from_secs(60).max(self.config.resolve_every * 3);
            self.peers.lock().expect("peers").retain(|p| {
                let gone = p
                    .seen
                    .lock()
                    .expect("peer")
                    .is_some_and(|at| at.elapsed() > forget);
                if gone {
                    info!(peer = %p.url, "pkarr peer no longer named; forgotten");
                    p.stop.cancel();
                }
                !gone
            });
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep(self.config.resolve_every) => {}
            }
        }
    }

    fn peers(&self) -> Vec<Arc<Peer>> {
        self.peers
            .lock()
            .expect("peers")
            .iter()
            .filter(|p| !p.is_self.load(Relaxed))
            .cloned()
            .collect()
    }

    /// Sends a publish this replica acknowledged to every peer; with `--pkarr-ack-replicas`,
    /// resolves once that many hold it, or with the refusal to answer after the timeout.
    pub async fn publish(
        &self,
        key: [u8; 32],
        seq: u64,
        payload: &[u8],
    ) -> Result<(), (StatusCode, String)> {
        let need = self.config.ack_replicas;
        let ack = (need > 0).then(|| {
            Arc::new(Ack {
                got: Mutex::default(),
                done: Notify::new(),
            })
        });
        let payload = Bytes::copy_from_slice(payload);
        for p in self.peers() {
            let mut q = p.queue.lock().expect("queue");
            if q.len() >= self.config.queue {
                p.counters.dropped.fetch_add(1, Relaxed);
                continue;
            }
            q.push_back(Entry {
                key,
                seq,
                payload: payload.clone(),
                queued: Instant::now(),
                ack: ack.clone(),
            });
            // The push task sleeps until its first entry is due; only a first entry (it may be
            // idle), one waiting for acknowledgements, or every WAKE_EVERY-th (a request's
            // worth may have gathered) changes that. Waking it for each publish cost two task
            // wakes a publish at 1,000 a second, for nothing.
            let wake = q.len() == 1 || ack.is_some() || q.len() % WAKE_EVERY == 0;
            drop(q);
            if wake {
                p.wake.notify_one();
            }
        }
        let Some(ack) = ack else { return Ok(()) };
        let wait = async {
            loop {
                // Registered before the count is read, so an answer in between wakes it.
                let notified = ack.done.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if ack.count() >= need {
                    return;
                }
                notified.await;
            }
        };
        match tokio::time::timeout(self.config.ack_timeout, wait).await {
            Ok(()) => Ok(()),
            Err(_) => Err((
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "stored on this replica, but {} of the {need} peers --pkarr-ack-replicas asks for confirmed it within --pkarr-ack-timeout ({:?}); it keeps replicating",
                    ack.count(),
                    self.config.ack_timeout
                ),
            )),
        }
    }

    async fn push_loop(self: Arc<Self>, peer: Arc<Peer>) {
        let mut backoff = Duration::from_millis(100);
        loop {
            let next = take_batch(
                &mut peer.queue.lock().expect("queue"),
                Instant::now(),
                self.config.push_window,
            );
            let batch = match next {
                Next::Send(batch) => batch,
                Next::Idle => {
                    tokio::select! {
                        () = peer.stop.cancelled() => return,
                        () = peer.wake.notified() => continue,
                    }
                }
                // A publish waiting for acknowledgements, or enough for a full request,
                // wakes it early.
                Next::At(due) => {
                    tokio::select! {
                        () = peer.stop.cancelled() => return,
                        () = peer.wake.notified() => continue,
                        () = tokio::time::sleep_until(due.into()) => continue,
                    }
                }
            };
            if peer.is_self.load(Relaxed) {
                peer.queue.lock().expect("queue").clear();
                continue;
            }
            match self.push(&peer, &batch).await {
                Ok((epoch, head, results)) => {
                    backoff = Duration::from_millis(100);
                    self.note_held(epoch, head, batch.iter().zip(&results));
                    let mut pushed = peer.counters.pushed.lock().expect("counters");
                    for (e, r) in batch.iter().zip(results) {
                        *pushed.entry(r.label()).or_default() += 1;
                        if r.held() {
                            peer.counters.lag(e.queued.elapsed());
                            if let Some(ack) = &e.ack {
                                ack.got.lock().expect("ack").insert(epoch);
                                ack.done.notify_waiters();
                            }
                        }
                    }
                }
                Err(e) => {
                    peer.counters.push_errors.fetch_add(1, Relaxed);
                    debug!(peer = %peer.url, error = %e, "pkarr push failed; retrying");
                    {
                        // Back to the front, in order; what no longer fits is dropped (the
                        // peer's catch-up reads it).
                        let mut q = peer.queue.lock().expect("queue");
                        for e in batch.into_iter().rev() {
                            if q.len() >= self.config.queue {
                                peer.counters.dropped.fetch_add(1, Relaxed);
                                continue;
                            }
                            q.push_front(e);
                        }
                    }
                    tokio::select! {
                        () = peer.stop.cancelled() => return,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    /// Counts `n` packets the peer `epoch` pushed here.
    fn note_pushed_in(&self, epoch: &Epoch, n: u64) {
        if let Some(p) = self
            .peers()
            .iter()
            .find(|p| p.epoch.lock().expect("epoch").as_ref() == Some(epoch))
        {
            p.pushed_in.fetch_add(n, Relaxed);
        }
    }

    /// Where `peer` goes in this round of periodic reads: 0 for the peer that pushed the most
    /// here since its last read (its log holds the publishes the other logs have copies of;
    /// read first, its cursor then leaves those copies out of the other pages), then 1, ….
    fn periodic_rank(&self, peer: &Peer) -> u32 {
        let mine = peer.pushed_in.load(Relaxed);
        let me = std::ptr::from_ref(peer) as usize;
        self.peers()
            .iter()
            .filter(|p| {
                let theirs = p.pushed_in.load(Relaxed);
                let them = Arc::as_ptr(p) as usize;
                theirs > mine || (theirs == mine && them < me)
            })
            .count() as u32
    }

    /// Remembers which of the pushed changes the peer `epoch` (at `head`, when it said)
    /// holds.
    fn note_held<'e>(
        &self,
        epoch: Epoch,
        head: Option<u64>,
        results: impl Iterator<Item = (&'e Entry, &'e Applied)>,
    ) {
        // A peer that did not say its head: nothing it holds is known for sure.
        let Some(head) = head else { return };
        let mut held = self.held.lock().expect("held");
        let h = held.entry(epoch).or_default();
        h.seqs.extend(
            results
                .filter(|(_, r)| r.held())
                .map(|(e, _)| (e.seq, head)),
        );
        while h.seqs.len() > MAX_HELD {
            h.seqs.pop_first();
        }
    }

    /// The changes after `after` the reading peer `reader` is known to hold at the head it
    /// reads with (`have`'s entry for itself), forgetting those it read past.
    fn held_by(&self, reader: Epoch, after: u64, have: &Have) -> std::collections::BTreeSet<u64> {
        let mut held = self.held.lock().expect("held");
        let (Some(h), Some(&at)) = (held.get_mut(&reader), have.get(&reader)) else {
            return std::collections::BTreeSet::new();
        };
        if at < h.read_head {
            *h = Held::default();
            h.read_head = at;
            return std::collections::BTreeSet::new();
        }
        h.read_head = at;
        h.seqs = h.seqs.split_off(&(after + 1));
        h.seqs
            .iter()
            .filter(|(_, acked_at)| **acked_at <= at)
            .map(|(seq, _)| *seq)
            .collect()
    }

    /// Sends `batch`; returns the answering replica's epoch, its head when it said, and a
    /// result per packet.
    async fn push(
        &self,
        peer: &Peer,
        batch: &[Entry],
    ) -> Result<(Epoch, Option<u64>, Vec<Applied>), String> {
        let req = hyper::Request::post(format!("{}/pkarr-peer/v2/push", peer.url))
            .header(header::CONTENT_TYPE, FRAME_TYPE)
            .header(header::AUTHORIZATION, self.bearer())
            .header(EPOCH_HEADER, hex(&self.epoch))
            .header(
                ACK_HEADER,
                if batch.iter().any(|e| e.ack.is_some()) {
                    "1"
                } else {
                    "0"
                },
            )
            .body(Full::new(Bytes::from(encode_push(batch))))
            .map_err(|e| e.to_string())?;
        let (status, headers, body) = self.request(req, Duration::from_secs(10)).await?;
        if status != StatusCode::OK {
            return Err(format!("{status}: {}", String::from_utf8_lossy(&body)));
        }
        if self.is_us(&headers) {
            // Not a peer: its answers are no acknowledgement.
            self.found_self(peer);
            return Err("this replica itself".into());
        }
        if body.len() != batch.len() {
            return Err(format!(
                "{} results for {} packets",
                body.len(),
                batch.len()
            ));
        }
        let epoch = headers
            .get(EPOCH_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_hex)
            .ok_or("no epoch header")?;
        let head = headers
            .get(HEAD_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        Ok((
            epoch,
            head,
            body.iter().map(|b| Applied::from_byte(*b)).collect(),
        ))
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", String::from_utf8_lossy(&self.config.token))
    }

    fn is_us(&self, headers: &HeaderMap) -> bool {
        headers
            .get(EPOCH_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_hex)
            == Some(self.epoch)
    }

    fn found_self(&self, peer: &Peer) {
        if !peer.is_self.swap(true, Relaxed) {
            info!(peer = %peer.url, "this pkarr peer is this replica; not sending to it");
        }
    }

    async fn request(
        &self,
        req: hyper::Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<(StatusCode, HeaderMap, Bytes), String> {
        let exchange = async {
            let resp = self.http.request(req).await.map_err(|e| {
                let mut msg = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    let _ = write!(msg, ": {s}");
                    source = s.source();
                }
                msg
            })?;
            let (parts, body) = resp.into_parts();
            // A page is at most PAGE_BYTES of packets plus a frame and a packet more; a peer
            // (or whatever answers at its address) sending more is cut off, not buffered.
            let body = http_body_util::Limited::new(body, PAGE_BYTES + 64 * 1024)
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            Ok((parts.status, parts.headers, body))
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| format!("no answer within {timeout:?}"))?
    }

    async fn catchup_loop(self: Arc<Self>, peer: Arc<Peer>) {
        loop {
            let periodic = self.ready.load(Relaxed);
            let one_at_a_time = if periodic {
                // Every peer's turn comes at the same tick; the one ranked first takes the
                // lock first, the others a few milliseconds after, in order.
                let rank = self.periodic_rank(&peer);
                tokio::time::sleep(Duration::from_millis(20) * rank).await;
                Some(self.periodic.lock().await)
            } else {
                None
            };
            let started = Instant::now();
            if periodic {
                peer.pushed_in.store(0, Relaxed);
            }
            let outcome = self.catch_up(&peer).await;
            drop(one_at_a_time);
            match outcome {
                Ok(fetched) => {
                    peer.unreachable.store(false, Relaxed);
                    peer.counters.catchup_runs.fetch_add(1, Relaxed);
                    if !peer.caught_up.swap(true, Relaxed) || fetched > 0 {
                        info!(peer = %peer.url, packets = fetched, elapsed_ms = started.elapsed().as_millis() as u64, "pkarr caught up with peer");
                    }
                }
                Err((reached, e)) => {
                    // Only a peer that did not answer at all is unreachable (start-up stops
                    // waiting for it); one that failed midway is still to be read.
                    peer.unreachable.store(!reached, Relaxed);
                    peer.counters.catchup_failures.fetch_add(1, Relaxed);
                    debug!(peer = %peer.url, error = %e, "pkarr catch-up failed");
                }
            }
            if peer.is_self.load(Relaxed) {
                return;
            }
            // Until ready, try often: start-up waits on it. Then at the ticks of the interval
            // counted from start, the same for every peer (a round reads them all in turn).
            let wait = if self.ready.load(Relaxed) {
                let every = self.config.catchup_interval.max(Duration::from_millis(1));
                let since = self.started.elapsed();
                let ticks = since.as_nanos() / every.as_nanos() + 1;
                every * u32::try_from(ticks).unwrap_or(u32::MAX) - since
            } else {
                Duration::from_millis(500).min(self.config.catchup_interval)
            };
            tokio::select! {
                () = peer.stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Reads the peer's change log from our cursor for it to its head; returns how many
    /// packets it stored here, or the error and whether the peer answered at all.
    async fn catch_up(&self, peer: &Peer) -> Result<u64, (bool, String)> {
        // Its epoch and head first (an empty page), then our cursor for that epoch.
        let first = self
            .page(peer, u64::MAX, &Have::new())
            .await
            .map_err(|e| (false, e))?;
        self.read_log(peer, first).await.map_err(|e| (true, e))
    }

    async fn read_log(&self, peer: &Peer, first: Page) -> Result<u64, String> {
        if first.epoch == self.epoch {
            self.found_self(peer);
            return Ok(0);
        }
        let store = self.store.clone();
        let epoch = first.epoch;
        let mut after = tokio::task::spawn_blocking(move || store.cursor(&epoch))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        if after > first.head {
            // The peer's log went back (its disk restored): read it all again.
            after = 0;
        }
        let target = first.head;
        let mut stored = 0u64;
        // At start, one peer after the other, the one whose log holds most publishes it took
        // itself first: the others' copies of those are then left out of their pages
        // (`have`). Later, pages are applied one at a time, from every peer in turn (a slow
        // peer's network does not hold the others).
        *peer.epoch.lock().expect("epoch") = Some(epoch);
        let mut sample = None;
        let mut whole = if self.ready.load(Relaxed) || after >= target {
            None
        } else {
            let page = self
                .page(peer, after, &self.have(epoch, after).await?)
                .await?;
            let reads = self.start_reads.load(Relaxed);
            let Some(guard) = self.start_turn(peer, own_share(&page)).await else {
                return Err("stopped".into());
            };
            // Still what it would read now, unless another peer was read meanwhile.
            if self.start_reads.load(Relaxed) == reads {
                sample = Some(page);
            }
            Some(guard)
        };
        // The next page is read and checked while this one is stored: the peer's reading,
        // this replica's signature checks and its writer's commits overlap (a page is up to
        // 4 MiB; two are held). The writer decides again what it stores, so a page checked
        // before the one ahead of it is committed is stored as if checked after.
        let mut ahead = match sample.take() {
            Some(page) => Some(self.checked(page).await),
            None => None,
        };
        while after < target {
            // Ready meanwhile (the wait ran out): the other peers' reads go on page by page.
            if whole.is_some() && self.ready.load(Relaxed) {
                whole = None;
            }
            let page = match ahead.take() {
                Some(page) => page,
                None => {
                    let page = self
                        .page(peer, after, &self.have(epoch, after).await?)
                        .await?;
                    self.checked(page).await
                }
            };
            if page.epoch != epoch {
                return Err("the peer's epoch changed while reading it".into());
            }
            let next = page.next;
            let n = page.n;
            let store = async {
                let _one_at_a_time = match whole {
                    None => Some(self.catching_up.lock().await),
                    Some(_) => None,
                };
                page.storing.await
            };
            // What it leaves out counts this page as read (`have` may say less than is
            // here, never more).
            let read_ahead = async {
                if next > after && next < target {
                    let have = self.have(epoch, next).await?;
                    let page = self.page(peer, next, &have).await?;
                    Ok::<_, String>(Some(self.checked(page).await))
                } else {
                    Ok(None)
                }
            };
            let (results, read) = tokio::join!(store, read_ahead);
            stored += results.iter().filter(|r| **r == Applied::Stored).count() as u64;
            peer.counters.fetched.fetch_add(n, Relaxed);
            if results.contains(&Applied::Failed) {
                // The cursor did not move: read again next time.
                return Err("this replica could not store some of the page".into());
            }
            ahead = read?;
            if next <= after {
                break;
            }
            after = next;
        }
        if whole.is_some() {
            self.start_reads.fetch_add(1, Relaxed);
        }
        self.read_through
            .lock()
            .expect("read through")
            .insert(epoch);
        Ok(stored)
    }

    /// A page read from a peer, its packets checked ([`PeerStore::check_page`]), to be
    /// stored with the peer's cursor at its end.
    async fn checked(&self, page: Page) -> CheckedPage<'_> {
        let n = page.entries.len() as u64;
        let items = page
            .entries
            .into_iter()
            .map(|(_, k, p, origin)| (k, p, Some(origin)))
            .collect();
        CheckedPage {
            epoch: page.epoch,
            next: page.next,
            n,
            storing: self.store.check_page(items, (page.epoch, page.next)).await,
        }
    }

    /// What a page read from the peer with `epoch`, from `after` on, can leave out
    /// (`have=`): how far this replica read the peers it knows now, and itself. Any subset is
    /// safe; cursors of replicas no longer named (lost disks, old epochs) are not sent, so
    /// the list stays as short as the fleet. The peer being read counts as read to `after`,
    /// not to its kept cursor: a peer whose log went back is read again from the start.
    async fn have(&self, epoch: Epoch, after: u64) -> Result<Have, String> {
        let store = self.store.clone();
        let mut have = tokio::task::spawn_blocking(move || store.have())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        let known: Vec<Epoch> = self
            .peers()
            .iter()
            .filter_map(|p| *p.epoch.lock().expect("epoch"))
            .collect();
        have.retain(|e, _| *e == self.epoch || known.contains(e));
        if let Some(durable) = self.store.durable_head()
            && !self
                .read_through
                .lock()
                .expect("read through")
                .contains(&epoch)
            && let Some(own) = have.get_mut(&self.epoch)
        {
            *own = (*own).min(durable);
        }
        have.insert(epoch, after);
        Ok(have)
    }

    /// Waits for this peer's turn to be read whole at start: the waiting peer whose first page
    /// holds the largest share of its own publishes goes first, once every peer known has
    /// sampled its log or a second has passed since start; then for the lock.
    /// `None` once the peer is forgotten.
    async fn start_turn(&self, peer: &Peer, own: f64) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        let me = std::ptr::from_ref(peer) as usize;
        let leave = || {
            self.start_order
                .lock()
                .expect("start order")
                .retain(|(p, _)| *p != me);
            self.start_change.notify_waiters();
        };
        self.start_order
            .lock()
            .expect("start order")
            .push((me, own));
        self.start_change.notify_waiters();
        loop {
            let changed = self.start_change.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if peer.stop.is_cancelled() {
                leave();
                return None;
            }
            let mine = {
                let waiting = self.start_order.lock().expect("start order");
                let reachable = self
                    .peers()
                    .iter()
                    .filter(|p| !p.unreachable.load(Relaxed))
                    .count();
                // Every reachable peer sampled: waiting, or read already.
                let everyone = waiting.len() + self.start_reads.load(Relaxed) as usize >= reachable
                    || self.started.elapsed() >= Duration::from_secs(5);
                let first = waiting
                    .iter()
                    .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.cmp(&a.0)));
                everyone && first.is_some_and(|(p, _)| *p == me)
            };
            if mine {
                let guard = self.catching_up.lock().await;
                leave();
                return Some(guard);
            }
            let _ = tokio::time::timeout(Duration::from_millis(100), changed).await;
        }
    }

    async fn page(&self, peer: &Peer, after: u64, have: &Have) -> Result<Page, String> {
        let req = hyper::Request::get(format!(
            "{}/pkarr-peer/v2/changes?after={after}&have={}",
            peer.url,
            have_param(have)
        ))
        .header(header::AUTHORIZATION, self.bearer())
        .header(EPOCH_HEADER, hex(&self.epoch))
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
        let (status, headers, body) = self.request(req, Duration::from_secs(60)).await?;
        if status != StatusCode::OK {
            return Err(format!("{status}: {}", String::from_utf8_lossy(&body)));
        }
        let epoch = headers
            .get(EPOCH_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_hex)
            .ok_or("no epoch header")?;
        let number = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or(format!("no {name} header"))
        };
        let (head, next) = (number(HEAD_HEADER)?, number(NEXT_HEADER)?);
        let entries = decode_page(&body).ok_or("a malformed page")?;
        Ok(Page {
            epoch,
            head,
            entries,
            next,
        })
    }

    /// `/readyz`'s part: ready once a catch-up reached the head of a peer and every other
    /// peer did too or could not be reached, or once the wait is over. Never unready again.
    pub fn readiness(&self) -> Result<(), String> {
        if self.ready.load(Relaxed) {
            return Ok(());
        }
        let known = self.peers.lock().expect("peers").len();
        let peers = self.peers();
        let done = peers.iter().filter(|p| p.caught_up.load(Relaxed)).count();
        let settled = peers
            .iter()
            .all(|p| p.caught_up.load(Relaxed) || p.unreachable.load(Relaxed));
        let waited = self.started.elapsed() >= self.config.catchup_wait;
        // Every name resolved to this replica alone (a fleet of one): nothing to wait for.
        let alone = known > 0 && peers.is_empty();
        // With no peer named at all yet, only the wait ends it.
        if (done > 0 && settled) || alone || waited {
            if !alone && (done == 0 || !settled) {
                warn!(
                    wait_s = self.config.catchup_wait.as_secs(),
                    caught_up = done,
                    peers = peers.len(),
                    "pkarr catch-up did not finish within --pkarr-catchup-wait; ready with what is here"
                );
            }
            self.ready.store(true, Relaxed);
            return Ok(());
        }
        Err(format!(
            "pkarr catch-up: {done} of {} peers read to their head (at most --pkarr-catchup-wait, {:?})",
            peers.len(),
            self.config.catchup_wait
        ))
    }

    /// Appends the replication metrics.
    pub fn render(&self, out: &mut String) {
        let peers = self.peers();
        metric_header(
            out,
            "meshdns_pkarr_peer_queue_depth",
            "Publishes waiting to be pushed to each pkarr peer.",
            "gauge",
        );
        for p in &peers {
            let _ = writeln!(
                out,
                "meshdns_pkarr_peer_queue_depth{{peer=\"{}\"}} {}",
                label_value(&p.url),
                p.queue.lock().expect("queue").len()
            );
        }
        metric_header(
            out,
            "meshdns_pkarr_peer_pushed_total",
            "Publishes pushed to each pkarr peer, by what the peer answered (dropped: the queue was full; error: requests that failed, retried).",
            "counter",
        );
        for p in &peers {
            let url = label_value(&p.url);
            let pushed = p.counters.pushed.lock().expect("counters").clone();
            let mut labels: Vec<_> = pushed.into_iter().collect();
            labels.sort();
            for (result, n) in labels {
                let _ = writeln!(
                    out,
                    "meshdns_pkarr_peer_pushed_total{{peer=\"{url}\",result=\"{result}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "meshdns_pkarr_peer_pushed_total{{peer=\"{url}\",result=\"dropped\"}} {}",
                p.counters.dropped.load(Relaxed)
            );
            let _ = writeln!(
                out,
                "meshdns_pkarr_peer_pushed_total{{peer=\"{url}\",result=\"error\"}} {}",
                p.counters.push_errors.load(Relaxed)
            );
        }
        metric_header(
            out,
            "meshdns_pkarr_peer_received_total",
            "Packets other replicas pushed here, by result and whether the sender had the peers' token.",
            "counter",
        );
        let mut received: Vec<_> = self
            .received
            .lock()
            .expect("counters")
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect();
        received.sort();
        for ((auth, result), n) in received {
            let _ = writeln!(
                out,
                "meshdns_pkarr_peer_received_total{{auth=\"{auth}\",result=\"{result}\"}} {n}"
            );
        }
        metric_header(
            out,
            "meshdns_pkarr_peer_refused_total",
            "Peer requests refused, by reason.",
            "counter",
        );
        let mut refused: Vec<_> = self
            .refused
            .lock()
            .expect("counters")
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect();
        refused.sort();
        for (reason, n) in refused {
            let _ = writeln!(
                out,
                "meshdns_pkarr_peer_refused_total{{reason=\"{reason}\"}} {n}"
            );
        }
        metric_header(
            out,
            "meshdns_pkarr_catchup_runs_total",
            "Catch-up runs from each pkarr peer, by result.",
            "counter",
        );
        for p in &peers {
            let url = label_value(&p.url);
            let c = &p.counters;
            let _ = writeln!(
                out,
                "meshdns_pkarr_catchup_runs_total{{peer=\"{url}\",result=\"ok\"}} {}\nmeshdns_pkarr_catchup_runs_total{{peer=\"{url}\",result=\"error\"}} {}",
                c.catchup_runs.load(Relaxed),
                c.catchup_failures.load(Relaxed),
            );
        }
        metric_header(
            out,
            "meshdns_pkarr_catchup_packets_total",
            "Packets read from each pkarr peer's change log while catching up.",
            "counter",
        );
        for p in &peers {
            let _ = writeln!(
                out,
                "meshdns_pkarr_catchup_packets_total{{peer=\"{}\"}} {}",
                label_value(&p.url),
                p.counters.fetched.load(Relaxed)
            );
        }
        metric_header(
            out,
            "meshdns_pkarr_replication_seconds",
            "Time from a publish's local commit to each peer's acknowledgement.",
            "histogram",
        );
        for p in &peers {
            let url = label_value(&p.url);
            let c = &p.counters;
            for (i, b) in LAG_BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "meshdns_pkarr_replication_seconds_bucket{{peer=\"{url}\",le=\"{b}\"}} {}",
                    c.lag_buckets[i].load(Relaxed)
                );
            }
            let count = c.lag_count.load(Relaxed);
            let _ = writeln!(
                out,
                "meshdns_pkarr_replication_seconds_bucket{{peer=\"{url}\",le=\"+Inf\"}} {count}\nmeshdns_pkarr_replication_seconds_sum{{peer=\"{url}\"}} {}\nmeshdns_pkarr_replication_seconds_count{{peer=\"{url}\"}} {count}",
                c.lag_micros.load(Relaxed) as f64 / 1e6
            );
        }
        metric_header(
            out,
            "meshdns_pkarr_catchup_ready",
            "1 once start-up's catch-up from the peers finished (or its wait ran out).",
            "gauge",
        );
        let _ = writeln!(
            out,
            "meshdns_pkarr_catchup_ready {}",
            u8::from(self.ready.load(Relaxed))
        );
    }

    fn count_received(&self, auth: &'static str, results: &[Applied]) {
        let mut r = self.received.lock().expect("counters");
        for a in results {
            *r.entry((auth, a.label())).or_default() += 1;
        }
    }

    fn refuse(&self, reason: &'static str, status: StatusCode, text: &str) -> Response {
        *self
            .refused
            .lock()
            .expect("counters")
            .entry(reason)
            .or_default() += 1;
        let mut resp = (status, format!("{text}\n")).into_response();
        self.stamp(&mut resp);
        resp
    }

    fn stamp(&self, resp: &mut Response) {
        if let Ok(v) = HeaderValue::from_str(&hex(&self.epoch)) {
            resp.headers_mut().insert(EPOCH_HEADER, v);
        }
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
            .is_some_and(|t| token_matches(t, &self.config.token))
    }
}

/// What the peer routes need.
#[derive(Clone)]
pub struct PeerRoutes {
    /// The replication.
    pub replicator: Arc<Replicator>,
    /// Peers whose forwarding headers name the client (for a sender without the token).
    pub trusted_proxies: Arc<[meshdns_zone::Cidr]>,
}

/// `/pkarr-peer/v2/push` and `/pkarr-peer/v2/changes`.
pub fn routes<S>(state: PeerRoutes) -> axum::Router<S> {
    axum::Router::new()
        .route("/pkarr-peer/v2/push", axum::routing::post(push))
        .route("/pkarr-peer/v2/changes", axum::routing::get(changes))
        .with_state(state)
}

async fn push(
    State(s): State<PeerRoutes>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let r = &s.replicator;
    let Some(items) = decode_push(&body) else {
        return r.refuse(
            "malformed",
            StatusCode::BAD_REQUEST,
            "a push body is frames of key (32 bytes), sequence number (u64), length (u16) and relay payload",
        );
    };
    // Without the token, each packet is a publish of the sender, rate limited as any, and
    // taken here first (a sender without the token cannot name where it came from).
    let sender = headers
        .get(EPOCH_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_hex);
    let (auth, client) = if r.authorized(&headers) {
        ("token", None)
    } else {
        (
            "none",
            Some(crate::relay::client_address(
                peer.ip(),
                &headers,
                &s.trusted_proxies,
            )),
        )
    };
    // A replica catching up at start reads the bulk from the logs, a page and a commit per
    // 4 MiB; the peers keep their pushes queued until it is ready (then all but the newest
    // are recognised as held without a signature check).
    let waited_for = headers.get(ACK_HEADER).is_some_and(|v| v == "1");
    if client.is_none() && !waited_for && r.readiness().is_err() {
        return r.refuse(
            "catching_up",
            StatusCode::SERVICE_UNAVAILABLE,
            "this replica is catching up from its peers' logs; push again once it is ready",
        );
    }
    let origin = |seq| match (client, sender) {
        (None, Some(epoch)) => Some((epoch, seq)),
        _ => None,
    };
    let items = items
        .into_iter()
        .map(|(key, seq, payload)| (key, payload, origin(seq)))
        .collect();
    // A push from a peer with the token that waits for no acknowledgement is answered before
    // its packets are durable; its answer's head is one past this replica's, which the
    // sender takes as "held" only once a later commit reached it.
    let lazy = client.is_none() && !waited_for;
    let results = if lazy {
        r.store.put_pushed(items).await
    } else {
        r.store.put_replicated(client, items).await
    };
    r.count_received(auth, &results);
    if client.is_none()
        && let Some(epoch) = sender
    {
        r.note_pushed_in(&epoch, results.len() as u64);
    }
    let mut resp = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, FRAME_TYPE)],
        results.iter().map(|a| *a as u8).collect::<Vec<u8>>(),
    )
        .into_response();
    r.stamp(&mut resp);
    // The head after this push's commit: the sender forgets what it knew this replica held
    // if a later read shows a lower one (a disk gone back to an older copy). One past it while
    // anything answered here is not durable yet (this push's packets, or a copy an earlier
    // push left unsynced that this one's "already held" matched): the sender counts them held
    // only once a later synced commit took the head there.
    let ahead = lazy || r.store.waiting();
    if let Ok(v) = HeaderValue::from_str(&(r.store.head() + u64::from(ahead)).to_string()) {
        resp.headers_mut().insert(HEAD_HEADER, v);
    }
    resp
}

async fn changes(
    State(s): State<PeerRoutes>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let r = &s.replicator;
    if !r.authorized(&headers) {
        return r.refuse(
            "token",
            StatusCode::UNAUTHORIZED,
            "catch-up reads need the peers' token (Authorization: Bearer, --pkarr-peer-token-file)",
        );
    }
    let Some(after) = query.get("after").and_then(|a| a.parse::<u64>().ok()) else {
        return r.refuse(
            "malformed",
            StatusCode::BAD_REQUEST,
            "?after=<change number> is required",
        );
    };
    let Some(have) = parse_have(query.get("have").map_or("", String::as_str)) else {
        return r.refuse(
            "malformed",
            StatusCode::BAD_REQUEST,
            "&have= is a comma-separated list of <epoch in hex>:<change number>",
        );
    };
    // A peer that says who it is gets a page without what it acknowledged holding.
    let held = headers
        .get(EPOCH_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_hex)
        .map(|reader| r.held_by(reader, after, &have))
        .unwrap_or_default();
    let max = r.config.page_bytes.min(PAGE_BYTES);
    let read = |have: Have, held: std::collections::BTreeSet<u64>| {
        let store = r.store.clone();
        tokio::task::spawn_blocking(move || {
            store.changes_after(after, max, &have, &|seq| held.contains(&seq))
        })
    };
    // Looked at before the read: pushes leave the list only once their commit can be read,
    // so with none waiting now the page holds every packet served before this request.
    let waiting = r.store.waiting();
    let mut page = read(have.clone(), held.clone()).await;
    // The page that reaches the head: pushes answered here before they were written get their
    // numbers first and it is read again, so the reader is shown every packet served here
    // when it asked (what readiness after a catch-up promises). Read again even when the
    // flush found none left: the writer's own timer may have written them after the read
    // (a replica restarted from an older copy was ready without them, 1 full run in 5).
    // Pages before it need not: the reader reads on.
    if waiting
        && let Ok(Ok(p)) = &page
        && p.next >= p.head
    {
        match r.store.flush().await {
            Ok(_) => page = read(have, held).await,
            Err(e) => return r.refuse("io", StatusCode::SERVICE_UNAVAILABLE, &e),
        }
    }
    match page {
        Ok(Ok(page)) => {
            let mut resp = (
                StatusCode::OK,
                [(header::CONTENT_TYPE, FRAME_TYPE)],
                encode_page(&page),
            )
                .into_response();
            r.stamp(&mut resp);
            for (name, value) in [(HEAD_HEADER, page.head), (NEXT_HEADER, page.next)] {
                if let Ok(v) = HeaderValue::from_str(&value.to_string()) {
                    resp.headers_mut().insert(name, v);
                }
            }
            resp
        }
        Ok(Err(e)) => r.refuse("io", StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(e) => r.refuse("io", StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_malformed_bodies_are_refused() {
        let page = Page {
            epoch: [1; 16],
            head: 9,
            entries: vec![
                (3, [7; 32], vec![1, 2, 3], ([1; 16], 3)),
                (9, [8; 32], Vec::new(), ([2; 16], 77)),
            ],
            next: 9,
        };
        assert_eq!(decode_page(&encode_page(&page)), Some(page.entries.clone()));
        let entries: Vec<Entry> = page
            .entries
            .iter()
            .map(|(seq, k, p, _)| Entry {
                key: *k,
                seq: *seq,
                payload: Bytes::from(p.clone()),
                queued: Instant::now(),
                ack: None,
            })
            .collect();
        let body = encode_push(&entries);
        assert_eq!(
            decode_push(&body),
            Some(vec![([7; 32], 3, vec![1, 2, 3]), ([8; 32], 9, Vec::new())])
        );
        assert_eq!(decode_push(&body[..body.len() - 1]), None, "truncated");
        assert_eq!(decode_push(&body[..20]), None, "a key cut short");
        assert_eq!(decode_push(&[]), Some(Vec::new()));
        assert_eq!(decode_page(&[0; 65]), None);
    }

    #[test]
    fn have_round_trips_and_bad_lists_are_refused() {
        let have: Have = [([1; 16], 5), ([0xfe; 16], u64::MAX)].into_iter().collect();
        assert_eq!(parse_have(&have_param(&have)), Some(have));
        assert_eq!(parse_have(""), Some(Have::new()));
        assert_eq!(parse_have("zz:1"), None);
        assert_eq!(parse_have(&format!("{}:x", hex(&[1; 16]))), None);
        assert_eq!(parse_have(&hex(&[1; 16])), None, "no sequence number");
    }

    fn entry(n: u8, bytes: usize, ack: bool, queued: Instant) -> Entry {
        Entry {
            key: [n; 32],
            seq: u64::from(n),
            payload: Bytes::from(vec![n; bytes]),
            queued,
            ack: ack.then(|| {
                Arc::new(Ack {
                    got: Mutex::default(),
                    done: Notify::new(),
                })
            }),
        }
    }

    #[test]
    fn batches_gather_for_the_window_unless_full_or_acknowledged() {
        let window = Duration::from_millis(20);
        let t0 = Instant::now();
        let mut q = VecDeque::new();
        assert!(matches!(take_batch(&mut q, t0, window), Next::Idle));
        q.push_back(entry(1, 100, false, t0));
        q.push_back(entry(2, 100, false, t0 + Duration::from_millis(5)));
        // Before the oldest is a window old: wait until then.
        match take_batch(&mut q, t0 + Duration::from_millis(10), window) {
            Next::At(due) => assert_eq!(due, t0 + window),
            _ => panic!("sent before the window"),
        }
        // Then everything queued goes in one request.
        match take_batch(&mut q, t0 + window, window) {
            Next::Send(batch) => {
                assert_eq!(batch.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2])
            }
            _ => panic!("not sent when due"),
        }
        // A publish waiting for acknowledgements goes at once, with what is queued before it.
        q.push_back(entry(3, 100, false, t0 + window));
        q.push_back(entry(4, 100, true, t0 + window));
        match take_batch(&mut q, t0 + window, window) {
            Next::Send(batch) => assert_eq!(batch.len(), 2),
            _ => panic!("an acknowledged publish waited"),
        }
        // A full request's worth goes at once; the rest waits for its own window.
        for n in 0..40 {
            q.push_back(entry(n, 2000, false, t0 + window));
        }
        match take_batch(&mut q, t0 + window, window) {
            Next::Send(batch) => {
                assert_eq!(batch.len(), PUSH_BYTES / 2042);
                assert!(batch.iter().map(|e| 42 + e.payload.len()).sum::<usize>() <= PUSH_BYTES);
            }
            _ => panic!("a full batch waited"),
        }
        assert!(matches!(
            take_batch(&mut q, t0 + window, window),
            Next::At(_)
        ));
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(token_matches(b"s3cret-token-1234", b"s3cret-token-1234"));
        assert!(!token_matches(b"s3cret-token-123", b"s3cret-token-1234"));
        assert!(!token_matches(b"", b"s3cret-token-1234"));
        assert!(!token_matches(b"s3cret-token-1235", b"s3cret-token-1234"));
        assert_eq!(parse_hex(&hex(&[0xab; 16])), Some([0xab; 16]));
    }
}
