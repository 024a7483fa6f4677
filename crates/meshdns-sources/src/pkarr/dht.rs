//! The relay as a member of the pkarr network: keys nobody published here are looked up in the
//! Mainline DHT (BEP 44 mutable items, as pkarr clients put them), and every publish taken
//! here is put there.
//!
//! **Why the `mainline` crate.** It is the DHT implementation pkarr itself builds on (8.x):
//! BEP 44 get and put with the signature checked on receipt, a node bound where it is told
//! (loopback for tests), a per-request timeout, and a report of each query's outcome that
//! tells "nodes answered and had nothing" from "nobody answered". The `pkarr` crate's client
//! wraps the same node with its own packet type, cache and HTTP relays, none of which a relay
//! that already verifies and stores packets needs; `n0-mainline` (iroh-dns-server's) binds
//! every address and reports no outcome.
//!
//! **Lookups.** A query for a key under a pkarr origin that the store does not hold reaches
//! [`PkarrDht::lookup`] (through `meshdns_server::lookups`). Many queries for one key share
//! one lookup; at most [`DhtConfig::lookups`] run at once and each client address starts at
//! most [`DhtConfig::client_lookups`] a second (joining one in flight is free); over a bound
//! the query fails at once (SERVFAIL). A lookup answers with the first valid item and goes on
//! until its query ends, keeping the newest. What it found is verified like a publish and
//! cached in the overlay's cache, kept apart from the store ([`Overlay::with_cache`]): for the
//! smallest TTL of the packet, clamped to [[`MIN_TTL`], [`MAX_TTL`]]. Nodes that answered and
//! held nothing cache the key as absent for [`ABSENT_TTL`] (NXDOMAIN); a lookup that nobody
//! answered, or that did not end within [`DhtConfig::timeout`], fails (SERVFAIL; a resolver
//! retries) and caches nothing, unless its query ends later with an answer. A cached key used
//! in the last fifth of its life is looked up again in the background.
//!
//! **Puts.** [`PkarrDht::put`] queues a stored payload (bounded; a full queue drops it, as a
//! lost datagram) for a task that puts it as the item its key signed; a publish's `204` never
//! waits for it.

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_lite::StreamExt as _;
use mainline::async_dht::AsyncDht;
use mainline::errors::PutMutableError;
use mainline::{Dht, MutableItem};
use meshdns_iroh::pkarr::SignedPacket;
use meshdns_zone::{Key, Overlay, Published};
use tokio::sync::watch;
use tracing::{debug, info, warn};

/// The shortest a found packet is cached, whatever its TTLs.
pub const MIN_TTL: Duration = Duration::from_secs(30);
/// The longest a found packet is cached.
pub const MAX_TTL: Duration = Duration::from_secs(86_400);
/// How long a key that nodes answered for without a value is cached as absent.
pub const ABSENT_TTL: Duration = Duration::from_secs(60);
/// The longest a lookup's query runs (its waiters stop waiting at the timeout; what it finds
/// later is cached for their retries).
const QUERY_CAP: Duration = Duration::from_secs(10);
/// Payloads waiting to be put, at most.
const PUT_QUEUE: usize = 4_096;
/// Puts in flight at once (each a DHT query and the put: up to a few seconds on the public
/// DHT).
const PUTS_AT_ONCE: usize = 64;
/// Client networks whose lookup rate is tracked at once.
const MAX_CLIENTS: usize = 65_536;
/// Stored keys republished a second at most, whatever the interval.
pub const REPUBLISH_RATE: u32 = 1_000;

/// How the DHT node runs.
#[derive(Debug, Clone)]
pub struct DhtConfig {
    /// Nodes to join through (`host:port`); `None`: mainline's public bootstrap routers.
    pub bootstrap: Option<Vec<String>>,
    /// The node's UDP address (IPv4; port 0 picks one).
    pub bind: SocketAddrV4,
    /// How long a query waits for a lookup (each DHT request gets a third of it).
    pub timeout: Duration,
    /// Keys cached at most (found or absent).
    pub cache: usize,
    /// Lookups in flight at most.
    pub lookups: usize,
    /// Lookups one client network (IPv4 /24, IPv6 /56) may start per second.
    pub client_lookups: u32,
    /// Refused beyond this far ahead of the clock (as publishes are).
    pub max_future: Duration,
    /// Refused when older than this (as stored packets expire).
    pub max_age: Duration,
    /// Every stored packet is read and put again once per this interval (`None`: never).
    pub republish: Option<Duration>,
}

/// Why a lookup gave no answer (the query gets SERVFAIL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupError {
    /// Over `lookups` in flight, or over the client's rate.
    Refused,
    /// No node answered within the timeout (or none could be asked).
    Timeout,
    /// Nodes answered, but only with errors.
    Failed,
}

/// How a lookup ended, as waiting queries see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Found,
    Absent,
    Failed(LookupError),
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct DhtCounters {
    /// Lookups started (counted as they start; by how they ended below).
    pub started: AtomicU64,
    /// Lookups ended, by how: found (a valid item), not found, timeout, failed.
    pub found: AtomicU64,
    /// Lookups whose nodes answered without a value.
    pub not_found: AtomicU64,
    /// Lookups that no node answered in time.
    pub timeout: AtomicU64,
    /// Lookups answered only with errors.
    pub failed: AtomicU64,
    /// Lookups not started: over a bound.
    pub refused: AtomicU64,
    /// Queries answered from the cache, without a lookup.
    pub cache_answers: AtomicU64,
    /// Queries that joined a lookup in flight.
    pub joined: AtomicU64,
    /// Background refreshes started.
    pub refreshes: AtomicU64,
    /// Items found that failed verification (signature, size, records, date).
    pub invalid: AtomicU64,
    /// Puts that reached nodes, failed, or were dropped (queue full).
    pub puts_ok: AtomicU64,
    /// Puts that failed.
    pub puts_failed: AtomicU64,
    /// Stored keys republished (read, then put) in all rounds.
    pub republished: AtomicU64,
    /// Stored keys for which the DHT held a newer packet, which replaced the stored one.
    pub republish_newer: AtomicU64,
    /// Republish rounds completed.
    pub republish_rounds: AtomicU64,
    /// Keys of the current republish round, and how many of them are done.
    pub republish_round_keys: AtomicU64,
    /// Keys of the current round done.
    pub republish_round_done: AtomicU64,
    /// Puts dropped: the queue was full.
    pub puts_dropped: AtomicU64,
    /// Nodes in the routing table, as last read.
    pub routing_nodes: AtomicU64,
    /// Lookup latencies: counts per bucket of [`LATENCY_BUCKETS`] (the last: beyond them).
    latency: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    latency_sum_us: AtomicU64,
}

/// Upper bounds (seconds) of the lookup latency histogram.
pub const LATENCY_BUCKETS: [f64; 10] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];

impl DhtCounters {
    fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = LATENCY_BUCKETS
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.latency[i].fetch_add(1, Relaxed);
        self.latency_sum_us
            .fetch_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX), Relaxed);
    }

    /// The latency histogram: cumulative counts per bound of [`LATENCY_BUCKETS`], then the
    /// count of all (+Inf); and the sum in seconds.
    pub fn latency(&self) -> (Vec<u64>, f64) {
        let mut acc = 0;
        let counts = self
            .latency
            .iter()
            .map(|c| {
                acc += c.load(Relaxed);
                acc
            })
            .collect();
        (counts, self.latency_sum_us.load(Relaxed) as f64 / 1e6)
    }
}

/// A cached key.
struct Entry {
    /// The relay payload found; `None`: cached as absent.
    payload: Option<Arc<[u8]>>,
    cached: Instant,
    expires: Instant,
    refreshing: bool,
}

/// The cache's bookkeeping (the records themselves are in the overlay's cache).
#[derive(Default)]
struct Book {
    entries: HashMap<Key, Entry>,
    by_expiry: BTreeSet<(Instant, Key)>,
}

/// The `mainline` node's thread waits up to 50 ms on its socket before it looks at the
/// requests queued for it, so an idle node takes that long to start a lookup or a put (55 ms
/// per lookup on loopback, where iroh-dns-server's node takes 1 ms). One datagram to the node's
/// own socket ends the wait (the node drops it as the malformed message it is). The crate
/// offers no other way in.
struct Waker {
    socket: Option<std::net::UdpSocket>,
    to: std::sync::OnceLock<std::net::SocketAddr>,
}

impl Waker {
    /// A socket on the node's own address (loopback when it binds every address).
    fn new(bind: SocketAddrV4) -> Waker {
        let ip = if bind.ip().is_unspecified() {
            std::net::Ipv4Addr::LOCALHOST
        } else {
            *bind.ip()
        };
        let socket = std::net::UdpSocket::bind((ip, 0))
            .and_then(|s| s.set_nonblocking(true).map(|()| s))
            .ok();
        Waker {
            socket,
            to: std::sync::OnceLock::new(),
        }
    }

    /// The node's port, once known (bound by the node's thread).
    fn aim(&self, node: SocketAddrV4) {
        if let Some(Ok(local)) = self.socket.as_ref().map(std::net::UdpSocket::local_addr) {
            let _ = self
                .to
                .set(std::net::SocketAddr::new(local.ip(), node.port()));
        }
    }

    fn wake(&self) {
        if let (Some(socket), Some(to)) = (&self.socket, self.to.get()) {
            let _ = socket.send_to(b"w", to);
        }
    }
}

impl Book {
    fn remove(&mut self, key: &Key) -> Option<Entry> {
        let e = self.entries.remove(key)?;
        self.by_expiry.remove(&(e.expires, *key));
        Some(e)
    }
}

/// The DHT node, its cache and its bounds.
pub struct PkarrDht {
    node: AsyncDht,
    overlay: Arc<Overlay>,
    config: DhtConfig,
    book: Mutex<Book>,
    flights: Mutex<HashMap<Key, watch::Receiver<Option<Ended>>>>,
    clients: Mutex<HashMap<IpAddr, (Instant, u32)>>,
    puts: tokio::sync::mpsc::Sender<(Key, Arc<[u8]>)>,
    /// Lookups are started from UDP threads too (refreshes), outside the runtime.
    runtime: tokio::runtime::Handle,
    /// Wakes the node's thread for a request just queued (see `wake`).
    waker: Waker,
    /// Counters for `/metrics`.
    pub counters: DhtCounters,
}

impl std::fmt::Debug for PkarrDht {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PkarrDht")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl PkarrDht {
    /// Starts a node at `config.bind`, joining through `config.bootstrap`, caching into
    /// `overlay` (which must have a cache). Must be called within a tokio runtime: the put
    /// queue, the cache's expiry and the routing table's gauge run as tasks, until `stop`.
    pub fn start(
        config: DhtConfig,
        overlay: Arc<Overlay>,
        stop: tokio_util::sync::CancellationToken,
    ) -> std::io::Result<Arc<PkarrDht>> {
        let mut builder = Dht::builder();
        builder
            .bind_address(*config.bind.ip())
            .port(config.bind.port())
            // A third of what a query waits: a silent node then delays the query's end
            // (which tells "absent") by less than the wait.
            .request_timeout((config.timeout / 3).max(Duration::from_millis(50)));
        if let Some(nodes) = &config.bootstrap {
            builder.bootstrap(nodes);
        }
        let node = builder.build()?.as_async();
        let config_bind = config.bind;
        let (puts, queue) = tokio::sync::mpsc::channel(PUT_QUEUE);
        let dht = Arc::new(PkarrDht {
            node,
            overlay,
            config,
            book: Mutex::new(Book::default()),
            flights: Mutex::new(HashMap::new()),
            clients: Mutex::new(HashMap::new()),
            puts,
            runtime: tokio::runtime::Handle::current(),
            waker: Waker::new(config_bind),
            counters: DhtCounters::default(),
        });
        let aimed = dht.clone();
        tokio::spawn(async move {
            let node = aimed.local_addr().await;
            aimed.waker.aim(node);
        });
        tokio::spawn(dht.clone().put_loop(queue, stop.clone()));
        tokio::spawn(dht.clone().upkeep(stop));
        Ok(dht)
    }

    /// The node's UDP address.
    pub async fn local_addr(&self) -> SocketAddrV4 {
        self.node.info().await.local_addr()
    }

    /// `item` put to the DHT, the node woken once the request is queued (the first poll
    /// queues it).
    async fn put_woken(&self, item: MutableItem) -> Result<(), PutMutableError> {
        let mut put = std::pin::pin!(self.node.put_mutable(item, None));
        if let Some(done) = futures_lite::future::poll_once(&mut put).await {
            return done.map(drop);
        }
        self.waker.wake();
        put.await.map(drop)
    }

    /// Keys cached (found or absent).
    pub fn cached(&self) -> usize {
        self.book.lock().expect("book").entries.len()
    }

    /// Lookups in flight.
    pub fn in_flight(&self) -> usize {
        self.flights.lock().expect("flights").len()
    }

    /// Looks `key` up for a query from `client` (`None`: not counted against any client),
    /// or joins the lookup in flight. `Ok` once the overlay's cache decides the answer.
    pub async fn lookup(
        self: &Arc<Self>,
        key: Key,
        client: Option<IpAddr>,
    ) -> Result<(), LookupError> {
        if self.book.lock().expect("book").entries.contains_key(&key) {
            self.counters.cache_answers.fetch_add(1, Relaxed);
            return Ok(());
        }
        let mut rx = self.flight(key, client)?;
        let ended = tokio::time::timeout(self.config.timeout, rx.wait_for(Option::is_some)).await;
        match ended {
            Ok(Ok(v)) => match (*v).expect("waited for") {
                Ended::Found | Ended::Absent => Ok(()),
                Ended::Failed(e) => Err(e),
            },
            _ => Err(LookupError::Timeout),
        }
    }

    /// The packet of `key` found in the DHT (the cache, or a lookup), for `GET /pkarr`.
    pub async fn packet(
        self: &Arc<Self>,
        key: Key,
        client: Option<IpAddr>,
    ) -> Result<Option<Arc<[u8]>>, LookupError> {
        self.lookup(key, client).await?;
        Ok(self
            .book
            .lock()
            .expect("book")
            .entries
            .get(&key)
            .and_then(|e| e.payload.clone()))
    }

    /// An answer used `key` from the cache: in the last fifth of its life, it is looked up
    /// again in the background (not counted against any client).
    pub fn hit(self: &Arc<Self>, key: &Key) {
        self.counters.cache_answers.fetch_add(1, Relaxed);
        let now = Instant::now();
        {
            let mut book = self.book.lock().expect("book");
            let Some(e) = book.entries.get_mut(key) else {
                return;
            };
            let life = e.expires.saturating_duration_since(e.cached);
            if e.refreshing || now < e.expires.checked_sub(life / 5).unwrap_or(e.expires) {
                return;
            }
            e.refreshing = true;
        }
        match self.begin(*key) {
            Some((_, true)) => {
                self.counters.refreshes.fetch_add(1, Relaxed);
            }
            // A lookup of it in flight already refreshes it.
            Some((_, false)) => {}
            None => {
                // Refused (lookups at their bound): a later answer tries again.
                if let Some(e) = self.book.lock().expect("book").entries.get_mut(key) {
                    e.refreshing = false;
                }
            }
        }
    }

    /// Queues `payload` (verified, stored) to be put as `key`'s item; never waits.
    pub fn put(&self, key: Key, payload: &[u8]) {
        if self.puts.try_send((key, payload.into())).is_err() {
            self.counters.puts_dropped.fetch_add(1, Relaxed);
        }
    }

    /// The lookup of `key` in flight, joined or started within the bounds.
    fn flight(
        self: &Arc<Self>,
        key: Key,
        client: Option<IpAddr>,
    ) -> Result<watch::Receiver<Option<Ended>>, LookupError> {
        if let Some(rx) = self.flights.lock().expect("flights").get(&key) {
            self.counters.joined.fetch_add(1, Relaxed);
            return Ok(rx.clone());
        }
        if self.flights.lock().expect("flights").len() >= self.config.lookups
            || client.is_some_and(|ip| !self.allow(ip, Instant::now()))
        {
            self.counters.refused.fetch_add(1, Relaxed);
            return Err(LookupError::Refused);
        }
        // Another query may have started it since the look above: then this one joins it.
        let (rx, started) = self.begin(key).ok_or_else(|| {
            self.counters.refused.fetch_add(1, Relaxed);
            LookupError::Refused
        })?;
        if !started {
            self.counters.joined.fetch_add(1, Relaxed);
        }
        Ok(rx)
    }

    /// Starts a lookup of `key` unless one is in flight (joined: `false` with its receiver)
    /// or `lookups` are (`None`).
    fn begin(self: &Arc<Self>, key: Key) -> Option<(watch::Receiver<Option<Ended>>, bool)> {
        let mut flights = self.flights.lock().expect("flights");
        if let Some(rx) = flights.get(&key) {
            return Some((rx.clone(), false));
        }
        if flights.len() >= self.config.lookups {
            return None;
        }
        let (tx, rx) = watch::channel(None);
        flights.insert(key, rx.clone());
        drop(flights);
        self.counters.started.fetch_add(1, Relaxed);
        let dht = self.clone();
        self.runtime.spawn(async move {
            let started = Instant::now();
            // Whatever happens to this task (a panic included), the flight ends and its
            // waiters are answered.
            let guard = FlightGuard {
                dht: &dht,
                key,
                tx: &tx,
            };
            // Bounded whatever the crate does: a query ends once its requests time out.
            let cap = (dht.config.timeout * 4).max(QUERY_CAP);
            let ended = match tokio::time::timeout(cap, dht.run(key, &tx)).await {
                Ok(e) => e,
                // What was found already stands.
                Err(_) if *tx.borrow() == Some(Ended::Found) => Ended::Found,
                Err(_) => Ended::Failed(LookupError::Timeout),
            };
            dht.counters.observe(started.elapsed());
            let counter = match ended {
                Ended::Found => &dht.counters.found,
                Ended::Absent => &dht.counters.not_found,
                Ended::Failed(LookupError::Timeout) => &dht.counters.timeout,
                Ended::Failed(_) => &dht.counters.failed,
            };
            counter.fetch_add(1, Relaxed);
            debug!(key = %String::from_utf8_lossy(&meshdns_zone::label_of_key(&key)), ?ended, elapsed = ?started.elapsed(), "DHT lookup ended");
            let _ = tx.send(Some(ended));
            drop(guard);
        });
        Some((rx, true))
    }

    /// One lookup: the first valid item answers the waiting queries; the query goes on to
    /// its end, keeping the newest item.
    async fn run(&self, key: Key, tx: &watch::Sender<Option<Ended>>) -> Ended {
        // A refresh keeps what is cached unless it finds newer.
        let cached = self
            .book
            .lock()
            .expect("book")
            .entries
            .get(&key)
            .and_then(|e| e.payload.as_deref().and_then(super::stamp_of));
        let query = self.node.get_mutable_detailed(&key, None, None);
        self.waker.wake();
        let mut items = query.items;
        let mut best: Option<u64> = cached;
        while let Some(item) = items.next().await {
            // Most nodes answer with the item already found: not verified again (each
            // verification is a signature check, the bulk of a lookup's CPU).
            let seq = u64::try_from(item.seq()).unwrap_or(0);
            if best.is_some_and(|t| t >= seq) {
                continue;
            }
            let Some(found) = self.verify(&key, &item) else {
                self.counters.invalid.fetch_add(1, Relaxed);
                continue;
            };
            best = Some(found.timestamp_us);
            self.cache(key, Some(found));
            tx.send_if_modified(|v| {
                let first = v.is_none();
                if first {
                    *v = Some(Ended::Found);
                }
                first
            });
        }
        if best.is_some() {
            return Ended::Found;
        }
        let outcome = query.outcome.recv().await;
        if outcome.queried == 0 || outcome.responded() == 0 {
            Ended::Failed(LookupError::Timeout)
        } else if outcome.valid_responses() == 0 {
            Ended::Failed(LookupError::Failed)
        } else {
            self.cache(key, None);
            Ended::Absent
        }
    }

    /// An item found for `key`, checked as a publish is (mainline checked the signature over
    /// the item; this checks the packet: its size, records and date).
    fn verify(&self, key: &Key, item: &MutableItem) -> Option<Found> {
        let seq = u64::try_from(item.seq()).ok()?;
        if item.key() != key || item.salt().is_some() {
            return None;
        }
        let mut payload = Vec::with_capacity(72 + item.value().len());
        payload.extend_from_slice(item.signature());
        payload.extend_from_slice(&seq.to_be_bytes());
        payload.extend_from_slice(item.value());
        let packet = SignedPacket::verify_relay(key, &payload).ok()?;
        let oldest = super::now_us().saturating_sub(super::micros(self.config.max_age));
        if packet.timestamp_us > super::horizon(self.config.max_future)
            || packet.timestamp_us < oldest
        {
            return None;
        }
        let ttl = packet
            .min_ttl()
            .map_or(MIN_TTL, |t| Duration::from_secs(u64::from(t)))
            .clamp(MIN_TTL, MAX_TTL);
        Some(Found {
            published: packet.published(),
            timestamp_us: packet.timestamp_us,
            payload: payload.into(),
            ttl,
        })
    }

    /// Caches `found` for `key` (`None`: absent), evicting the entry that expires first when
    /// full.
    fn cache(&self, key: Key, found: Option<Found>) {
        let now = Instant::now();
        let (published, payload, ttl) = match found {
            Some(f) => (f.published, Some(f.payload), f.ttl),
            None => (Published::build(0, std::iter::empty()), None, ABSENT_TTL),
        };
        let mut book = self.book.lock().expect("book");
        let refreshing = book.remove(&key).is_some_and(|e| e.refreshing);
        while book.entries.len() >= self.config.cache.max(1) {
            let Some((_, first)) = book.by_expiry.pop_first() else {
                break;
            };
            book.entries.remove(&first);
            self.overlay.cache_remove(&first);
        }
        let expires = now + ttl;
        book.by_expiry.insert((expires, key));
        book.entries.insert(
            key,
            Entry {
                payload,
                cached: now,
                expires,
                refreshing,
            },
        );
        self.overlay.cache_insert(key, published);
    }

    /// `client_lookups` a second per client network (an IPv4 /24, an IPv6 /56: one host
    /// holds many addresses of its prefix). The table is bounded: full, it starts again
    /// empty (a flood from that many networks is held by the bound on lookups in flight).
    fn allow(&self, ip: IpAddr, now: Instant) -> bool {
        let rate = self.config.client_lookups;
        if rate == 0 {
            return false;
        }
        let net = match ip {
            IpAddr::V4(v4) => IpAddr::V4((u32::from(v4) & 0xFFFF_FF00).into()),
            IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !((1u128 << 72) - 1)).into()),
        };
        let mut clients = self.clients.lock().expect("clients");
        if clients.len() >= MAX_CLIENTS && !clients.contains_key(&net) {
            clients.clear();
        }
        let (at, n) = clients.entry(net).or_insert((now, 0));
        if now.duration_since(*at) >= Duration::from_secs(1) {
            *at = now;
            *n = 0;
        }
        if *n >= rate {
            return false;
        }
        *n += 1;
        true
    }

    /// Puts queued payloads, a few at a time.
    async fn put_loop(
        self: Arc<Self>,
        mut queue: tokio::sync::mpsc::Receiver<(Key, Arc<[u8]>)>,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let slots = Arc::new(tokio::sync::Semaphore::new(PUTS_AT_ONCE));
        loop {
            let next = tokio::select! {
                () = stop.cancelled() => return,
                n = queue.recv() => n,
            };
            let Some((key, payload)) = next else { return };
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let dht = self.clone();
            tokio::spawn(async move {
                let _slot = slot;
                let ok = match item_of(&key, &payload) {
                    Some(item) => match dht.put_woken(item).await {
                        Ok(_) => true,
                        Err(e) => {
                            debug!(error = %e, "DHT put failed");
                            false
                        }
                    },
                    None => false,
                };
                let c = if ok {
                    &dht.counters.puts_ok
                } else {
                    &dht.counters.puts_failed
                };
                c.fetch_add(1, Relaxed);
            });
        }
    }

    /// Republishes every key of `store` once per `interval`, spread evenly over it (at most
    /// [`REPUBLISH_RATE`] a second, [`PUTS_AT_ONCE`] at a time): each key is read first, and
    /// a newer packet the DHT holds (the endpoint published elsewhere) replaces the stored
    /// one and is handed to `on_stored` (with its sequence number, for the peers); else the
    /// stored packet is put again, so DHT nodes, which forget items after a few hours, keep
    /// it. Runs until `stop`.
    pub async fn republish(
        self: Arc<Self>,
        store: Arc<super::PkarrStore>,
        interval: Duration,
        on_stored: Arc<dyn Fn(Key, u64, Vec<u8>) + Send + Sync>,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let slots = Arc::new(tokio::sync::Semaphore::new(PUTS_AT_ONCE));
        loop {
            let round = Instant::now();
            let keys = store.keys();
            self.counters
                .republish_round_keys
                .store(keys.len() as u64, Relaxed);
            self.counters.republish_round_done.store(0, Relaxed);
            let every = (interval / keys.len().max(1) as u32)
                .max(Duration::from_secs_f64(1.0 / f64::from(REPUBLISH_RATE)));
            let mut next = tokio::time::Instant::now();
            for (key, _) in keys {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep_until(next) => {}
                }
                next += every;
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    return;
                };
                let (dht, store, on_stored) = (self.clone(), store.clone(), on_stored.clone());
                tokio::spawn(async move {
                    let _slot = slot;
                    dht.republish_one(&store, key, &*on_stored).await;
                    dht.counters.republish_round_done.fetch_add(1, Relaxed);
                });
            }
            self.counters.republish_rounds.fetch_add(1, Relaxed);
            debug!(elapsed = ?round.elapsed(), "DHT republish round done");
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep_until((round + interval).into()) => {}
            }
        }
    }

    /// Reads `key` from the DHT for anything newer than the stored packet, then stores that or
    /// puts the stored one.
    async fn republish_one(
        &self,
        store: &super::PkarrStore,
        key: Key,
        on_stored: &(dyn Fn(Key, u64, Vec<u8>) + Send + Sync),
    ) {
        let Some(payload) = store.payload(&key) else {
            return;
        };
        let Some(stamp) = super::stamp_of(&payload) else {
            return;
        };
        let mut items =
            self.node
                .get_mutable(&key, None, Some(i64::try_from(stamp).unwrap_or(i64::MAX)));
        self.waker.wake();
        let newer = tokio::time::timeout(self.config.timeout * 4, async {
            while let Some(item) = items.next().await {
                match self.verify(&key, &item) {
                    Some(found) if found.timestamp_us > stamp => return Some(found),
                    Some(_) => {}
                    None => {
                        self.counters.invalid.fetch_add(1, Relaxed);
                    }
                }
            }
            None
        })
        .await
        .ok()
        .flatten();
        self.counters.republished.fetch_add(1, Relaxed);
        if let Some(found) = newer {
            let z32 = String::from_utf8_lossy(&meshdns_zone::label_of_key(&key)).into_owned();
            match store.put(None, &z32, &found.payload, None).await {
                Ok(seq) => {
                    self.counters.republish_newer.fetch_add(1, Relaxed);
                    on_stored(key, seq, found.payload.to_vec());
                }
                Err(e) => {
                    debug!(key = %z32, error = %e, "a newer packet from the DHT was not stored")
                }
            }
            return;
        }
        let ok = match item_of(&key, &payload) {
            Some(item) => self.put_woken(item).await.is_ok(),
            None => false,
        };
        let c = if ok {
            &self.counters.puts_ok
        } else {
            &self.counters.puts_failed
        };
        c.fetch_add(1, Relaxed);
    }

    /// Every second: drops expired cache entries; every ten, reads the routing table's size.
    async fn upkeep(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let mut n = 0u64;
        let mut joined = false;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let now = Instant::now();
            {
                let mut book = self.book.lock().expect("book");
                while let Some(&(at, key)) = book.by_expiry.first() {
                    if at > now {
                        break;
                    }
                    book.by_expiry.pop_first();
                    book.entries.remove(&key);
                    self.overlay.cache_remove(&key);
                }
            }
            if n.is_multiple_of(10) {
                let nodes = self.node.to_bootstrap().await.len();
                self.counters.routing_nodes.store(nodes as u64, Relaxed);
                if nodes > 0 && !joined {
                    joined = true;
                    info!(nodes, "joined the Mainline DHT");
                } else if nodes == 0 && n >= 60 && n.is_multiple_of(300) {
                    warn!(
                        "no Mainline DHT node known: lookups fail (check --pkarr-dht-bootstrap and that UDP reaches it)"
                    );
                }
            }
            n += 1;
        }
    }
}

/// Ends a flight: its key may be looked up again, and its waiters get at least a failure.
struct FlightGuard<'a> {
    dht: &'a PkarrDht,
    key: Key,
    tx: &'a watch::Sender<Option<Ended>>,
}

impl Drop for FlightGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut book) = self.dht.book.lock()
            && let Some(e) = book.entries.get_mut(&self.key)
        {
            e.refreshing = false;
        }
        if let Ok(mut flights) = self.dht.flights.lock() {
            flights.remove(&self.key);
        }
        self.tx.send_if_modified(|v| {
            let unset = v.is_none();
            if unset {
                *v = Some(Ended::Failed(LookupError::Failed));
            }
            unset
        });
    }
}

/// What a lookup found, verified.
struct Found {
    published: Published,
    timestamp_us: u64,
    payload: Arc<[u8]>,
    ttl: Duration,
}

/// The BEP 44 item of a relay payload (`signature ‖ timestamp ‖ DNS message`) for `key`: the
/// signature is the one the key made over the same bytes (pkarr signs BEP 44's encoding).
fn item_of(key: &Key, payload: &[u8]) -> Option<MutableItem> {
    let signature: [u8; 64] = payload.get(..64)?.try_into().ok()?;
    let seq = i64::try_from(super::stamp_of(payload)?).ok()?;
    Some(MutableItem::new_signed_unchecked(
        *key,
        signature,
        payload.get(72..)?,
        seq,
        None,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_is_the_payload_it_came_from() {
        let key = [7u8; 32];
        let mut payload = vec![1u8; 64];
        payload.extend_from_slice(&123_456u64.to_be_bytes());
        payload.extend_from_slice(b"dns message");
        let item = item_of(&key, &payload).expect("item");
        assert_eq!(item.seq(), 123_456);
        assert_eq!(item.value(), b"dns message");
        assert_eq!(item.signature(), &[1u8; 64]);
        assert_eq!(item.key(), &key);
        assert!(item_of(&key, &payload[..70]).is_none());
    }
}
