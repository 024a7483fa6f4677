//! meshdns as a secondary: zones transferred from a primary (NSD, Knot, BIND, another
//! meshdns), kept in the data directory, refreshed on the SOA timers and on NOTIFY, served
//! like any other zone.
//!
//! One task per zone ([`run`]) asks the primary for its SOA, then for IXFR from the serial held
//! (AXFR when nothing is held, or when the differences do not apply), and hands the records to
//! the watcher through a [`SecondaryFeed`]. Past the SOA's expire time without a successful
//! refresh the zone stops being served (REFUSED, and `/readyz` says why) until the primary
//! answers again.
//!
//! The SOA query decides whether the zone is fresh, so only the real reply counts: it has a
//! random ID, is signed with the zone's key when there is one, and a reply must come from the
//! address asked, carry the ID and question, and verify (a forged one is ignored while the wait
//! goes on). A truncated reply is asked again over TCP.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use meshdns_xfr::content::Rr;
use meshdns_xfr::journal::Delta;
use meshdns_xfr::message::{self, CLASS_IN, MessageWriter};
use meshdns_xfr::secondary::{Received, ReplyReader, SoaReply, apply, check_soa_reply, soa_serial};
use meshdns_xfr::serial::serial_gt;
use meshdns_xfr::throttle::PEER_WARNINGS;
use meshdns_xfr::tsig::{self, Check, Key, ReplyVerifier, Signer};
use meshdns_zone::{Cidr, Name, RType};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// A zone to transfer: `ORIGIN=HOST:PORT`, optionally signed with a TSIG key.
#[derive(Debug, Clone)]
pub struct SecondarySpec {
    /// The zone.
    pub origin: Name,
    /// The primary, `HOST:PORT`.
    pub primary: String,
    /// The key to sign requests with.
    pub key: Option<Key>,
}

/// What the watcher serves for one secondary zone, and what its task last did.
#[derive(Debug, Default)]
struct FeedState {
    version: u64,
    /// The records (SOA first) while served; `None` before the first transfer and once expired.
    records: Option<Arc<Vec<Rr<'static>>>>,
    /// Why the zone is not served, for `/readyz`.
    not_ready: Option<String>,
    serial: Option<u32>,
    last_refresh: Option<u64>,
}

/// The zone's records as the secondary task last transferred them, for the watcher.
pub struct SecondaryFeed {
    origin: Name,
    state: Mutex<FeedState>,
    poke: OnceLock<Box<dyn Fn() + Send + Sync>>,
    notified: tokio::sync::Notify,
    primary_ips: Mutex<Vec<IpAddr>>,
}

impl std::fmt::Debug for SecondaryFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecondaryFeed")
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl SecondaryFeed {
    /// A feed for `origin`, serving nothing yet.
    pub fn new(origin: &Name) -> Arc<SecondaryFeed> {
        Arc::new(SecondaryFeed {
            origin: origin.clone(),
            state: Mutex::new(FeedState {
                not_ready: Some(format!("secondary zone {origin}: not transferred yet")),
                ..FeedState::default()
            }),
            poke: OnceLock::new(),
            notified: tokio::sync::Notify::new(),
            primary_ips: Mutex::new(Vec::new()),
        })
    }

    /// Serves the copy kept in `data_dir` by an earlier run, unless it has expired (call before
    /// the first snapshot, so it is served from the start).
    pub fn load_kept(&self, data_dir: Option<&Path>) {
        let origin = &self.origin;
        let Some((records, kept)) = data_dir.and_then(|d| load(d, origin)) else {
            return;
        };
        let (_, _, expire) = timers(Some(&records));
        if unix_now() < kept.last_refresh + expire {
            info!(zone = %origin, serial = kept.serial, records = records.len(), "serving the kept copy of the secondary zone");
            serve(self, &records, kept.serial, kept.last_refresh);
        } else {
            warn!(zone = %origin, "the kept copy of the secondary zone has expired; not serving it until the primary answers");
            self.note(|s| s.last_refresh = Some(kept.last_refresh));
        }
    }

    /// The zone.
    pub fn origin(&self) -> &Name {
        &self.origin
    }

    /// Calls `f` after each change (the watcher's poke).
    pub fn on_change(&self, f: impl Fn() + Send + Sync + 'static) {
        let _ = self.poke.set(Box::new(f));
    }

    /// Updates what the task reports without changing what is served (the watcher reads it at
    /// its next check).
    fn note(&self, f: impl FnOnce(&mut FeedState)) {
        f(&mut self.state.lock().expect("feed state"));
    }

    /// Changes what is served, and has the watcher load it now.
    fn changed(&self, f: impl FnOnce(&mut FeedState)) {
        {
            let mut s = self.state.lock().expect("feed state");
            f(&mut s);
            s.version += 1;
        }
        if let Some(p) = self.poke.get() {
            p();
        }
    }

    /// The records to serve if they changed since `version` (`None` inside: serve nothing).
    pub fn take_if_newer(&self, version: u64) -> Option<(u64, Option<Arc<Vec<Rr<'static>>>>)> {
        let s = self.state.lock().expect("feed state");
        (s.version != version).then(|| (s.version, s.records.clone()))
    }

    /// Why the zone is not served, if it is not.
    pub fn not_ready(&self) -> Option<String> {
        self.state.lock().expect("feed state").not_ready.clone()
    }

    /// The serial held and the unix time of the last successful refresh.
    pub fn status(&self) -> (Option<u32>, Option<u64>) {
        let s = self.state.lock().expect("feed state");
        (s.serial, s.last_refresh)
    }

    /// Starts a refresh at once (a NOTIFY accepted by its signature or an allowed prefix).
    pub fn wake(&self) {
        self.notified.notify_one();
    }

    /// Whether `peer` is one of the primary's addresses; if so, starts a refresh at once.
    pub fn notify(&self, peer: IpAddr) -> bool {
        let from_primary = self
            .primary_ips
            .lock()
            .expect("primary addresses")
            .iter()
            .any(|ip| canonical(*ip) == canonical(peer));
        if from_primary {
            self.notified.notify_one();
        }
        from_primary
    }
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Who may send a NOTIFY that starts a refresh of a secondary zone: the zone's primary (by the
/// addresses its name resolves to), anyone signing it with the zone's TSIG key (a primary whose
/// NOTIFY leaves from a pod address its Service name does not resolve to), and the prefixes of
/// `--allow-notify`, as NSD's and Knot's `allow-notify` do.
#[derive(Debug, Default)]
pub struct NotifyPolicy {
    /// Each secondary zone, with the key its transfers are signed with.
    pub zones: Vec<(Arc<SecondaryFeed>, Option<Key>)>,
    /// Prefixes whose unsigned NOTIFY is accepted for every secondary zone.
    pub allow: Vec<Cidr>,
    /// Every NOTIFY answered, by outcome (exact; the log lines about them are throttled).
    pub counts: Arc<NotifyCounts>,
}

/// NOTIFY requests answered, by outcome: the `meshdns_notify_received_total` counter.
#[derive(Debug, Default)]
pub struct NotifyCounts {
    counts: [AtomicU64; NOTIFY_OUTCOMES.len()],
}

/// The outcomes of a NOTIFY, as the counter's `outcome` label.
pub const NOTIFY_OUTCOMES: [&str; 4] = ["accepted", "unknown_zone", "not_allowed", "bad_tsig"];

impl NotifyCounts {
    fn add(&self, outcome: &'static str) {
        if let Some(i) = NOTIFY_OUTCOMES.iter().position(|o| *o == outcome) {
            self.counts[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Each outcome with its count.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        NOTIFY_OUTCOMES
            .iter()
            .zip(&self.counts)
            .map(|(o, c)| (*o, c.load(Ordering::Relaxed)))
    }
}

/// Replies to a NOTIFY (RFC 1996 §4.7) for one of `policy`'s zones: NOERROR when the sender
/// may notify it (which starts a refresh; signed with the zone's key when the NOTIFY was),
/// REFUSED from anyone else or for another zone, NOTAUTH with the TSIG error when a signature
/// does not verify with the zone's key. `None` when `packet` is not a NOTIFY request.
pub fn answer_notify(policy: &NotifyPolicy, packet: &[u8], peer: IpAddr) -> Option<Vec<u8>> {
    let msg = message::parse(packet).ok()?;
    if msg.is_response() || msg.opcode() != message::OPCODE_NOTIFY {
        return None;
    }
    let zone = policy
        .zones
        .iter()
        .find(|(f, _)| f.origin.wire() == msg.qname_lower.as_slice());
    let now = unix_now();
    let keys: &[Key] = zone
        .and_then(|(_, k)| k.as_ref())
        .map_or(&[], std::slice::from_ref);
    let check = zone.map(|_| tsig::check(&msg, keys, now));
    // A peer can send these at will: every one is counted, the log lines are throttled.
    let log = |cause: &'static str, zone: &SecondaryFeed| {
        PEER_WARNINGS.admit(cause, &zone.origin.to_string())
    };
    let outcome = match (zone, &check) {
        (None, _) => {
            if let Some(suppressed) = PEER_WARNINGS.admit("notify unknown zone", "") {
                warn!(%peer, suppressed, "NOTIFY for a zone that is not a secondary here: ignored");
            }
            "unknown_zone"
        }
        (Some((f, _)), Some(Check::Signed(_))) => {
            if let Some(suppressed) = log("notify signed", f) {
                info!(zone = %f.origin, %peer, suppressed, "NOTIFY signed with the zone's key: refreshing");
            }
            f.wake();
            "accepted"
        }
        (Some((f, _)), Some(Check::Unsigned)) if f.notify(peer) => {
            if let Some(suppressed) = log("notify from primary", f) {
                info!(zone = %f.origin, %peer, suppressed, "NOTIFY from the primary: refreshing");
            }
            "accepted"
        }
        (Some((f, _)), Some(Check::Unsigned)) if policy.allow.iter().any(|c| c.contains(peer)) => {
            if let Some(suppressed) = log("notify from allowed prefix", f) {
                info!(zone = %f.origin, %peer, suppressed, "NOTIFY from an --allow-notify prefix: refreshing");
            }
            f.wake();
            "accepted"
        }
        (Some((f, _)), Some(Check::Unsigned)) => {
            if let Some(suppressed) = log("notify not allowed", f) {
                warn!(zone = %f.origin, %peer, suppressed, why = "unsigned, and not from an --allow-notify prefix", "NOTIFY from an address that is not the zone's primary: ignored");
            }
            "not_allowed"
        }
        (Some((f, _)), _) => {
            if let Some(suppressed) = log("notify bad tsig", f) {
                warn!(zone = %f.origin, %peer, suppressed, "NOTIFY whose TSIG does not verify with the zone's key: ignored");
            }
            "bad_tsig"
        }
    };
    policy.counts.add(outcome);
    let accepted = outcome == "accepted";
    let rcode = if accepted { 0 } else { 5 };
    let flags = 0x8000 | 0x0400 | (msg.flags & 0x7800) | rcode;
    let mut reply =
        MessageWriter::new(msg.id, flags, Some((&msg.qname[..], msg.qtype, msg.qclass))).finish();
    // A signed NOTIFY gets a reply signed with what its check verified; a signature that
    // fails, NOTAUTH and its TSIG error (built by the transfers' rule).
    match check {
        Some(Check::Signed(v)) => Signer::reply(&v, now).sign(&mut reply, 0, &[]),
        Some(Check::Unsigned) | None => {}
        Some(_) => {
            let _ = meshdns_xfr::sign_answer_with(keys, packet, &mut reply, now, |_| None);
        }
    }
    Some(reply)
}

/// What is kept in the data directory besides the records.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kept {
    serial: u32,
    last_refresh: u64,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn paths(dir: &Path, origin: &Name) -> (PathBuf, PathBuf) {
    let base = dir.join("secondary");
    let name = origin.to_string();
    (
        base.join(format!("{name}records")),
        base.join(format!("{name}state.json")),
    )
}

fn save(dir: &Path, origin: &Name, records: &[Rr<'static>], kept: &Kept) -> std::io::Result<()> {
    let (rpath, _) = paths(dir, origin);
    std::fs::create_dir_all(rpath.parent().expect("a parent"))?;
    let mut bytes = Vec::new();
    Delta {
        from: kept.serial,
        to: kept.serial,
        removed: Vec::new(),
        added: records.to_vec(),
    }
    .encode(&mut bytes);
    let tmp = rpath.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, &rpath)?;
    save_state(dir, origin, kept)
}

fn save_state(dir: &Path, origin: &Name, kept: &Kept) -> std::io::Result<()> {
    let (_, spath) = paths(dir, origin);
    std::fs::create_dir_all(spath.parent().expect("a parent"))?;
    let tmp = spath.with_extension("tmp");
    std::fs::write(
        &tmp,
        serde_json::to_vec(kept).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(&tmp, &spath)
}

fn load(dir: &Path, origin: &Name) -> Option<(Vec<Rr<'static>>, Kept)> {
    let (rpath, spath) = paths(dir, origin);
    let kept: Kept = serde_json::from_slice(&std::fs::read(spath).ok()?).ok()?;
    let bytes = std::fs::read(rpath).ok()?;
    let (delta, _) = Delta::decode(&bytes)?;
    let soa = delta.added.first().filter(|r| r.rtype == RType::SOA)?;
    (soa_serial(&soa.rdata) == Some(kept.serial)).then_some((delta.added, kept))
}

/// The SOA timers of the records held (refresh, retry, expire), or defaults before any.
fn timers(records: Option<&[Rr<'static>]>) -> (u64, u64, u64) {
    let soa = records.and_then(|r| r.first()).map(|r| &r.rdata[..]);
    match soa {
        Some(rd) if rd.len() >= 20 => {
            let at = rd.len() - 16;
            let n = |i: usize| {
                u64::from(u32::from_be_bytes(
                    rd[at + 4 * i..at + 4 * i + 4].try_into().expect("4 bytes"),
                ))
            };
            (n(0).max(1), n(1).max(1), n(2).max(1))
        }
        _ => (3600, 60, 604_800),
    }
}

/// Keeps the zone of `spec` transferred from its primary until `shutdown`: the kept copy is
/// served at once (unless it expired), then refreshed.
pub async fn run(
    feed: Arc<SecondaryFeed>,
    spec: SecondarySpec,
    data_dir: Option<PathBuf>,
    shutdown: CancellationToken,
) {
    let origin = spec.origin.clone();
    let (mut held, mut last_refresh) = {
        let s = feed.state.lock().expect("feed state");
        let held = s
            .records
            .as_ref()
            .map(|r| (r.iter().cloned().collect::<BTreeSet<_>>(), r.to_vec()));
        (held, s.last_refresh.unwrap_or(0))
    };
    let mut failures = 0u32;
    loop {
        let kept_serial = held
            .as_ref()
            .and_then(|(_, r)| r.first())
            .and_then(|soa| soa_serial(&soa.rdata));
        let outcome = refresh(&feed, &spec, held.as_ref().map(|(set, _)| set), kept_serial).await;
        let now = unix_now();
        let records_now = held.as_ref().map(|(_, r)| &r[..]);
        let (refresh_s, retry_s, expire_s) = timers(records_now);
        let wait = match outcome {
            Ok(Some((set, records))) => {
                let serial = records
                    .first()
                    .and_then(|s| soa_serial(&s.rdata))
                    .unwrap_or(0);
                last_refresh = now;
                if let Some(dir) = &data_dir
                    && let Err(e) = save(
                        dir,
                        &origin,
                        &records,
                        &Kept {
                            serial,
                            last_refresh,
                        },
                    )
                {
                    warn!(zone = %origin, error = %e, "cannot keep the transferred zone in the data directory");
                }
                serve(&feed, &records, serial, last_refresh);
                let (refresh_s, _, _) = timers(Some(&records));
                held = Some((set, records));
                failures = 0;
                refresh_s
            }
            Ok(None) => {
                last_refresh = now;
                if let (Some(dir), Some(serial)) = (&data_dir, kept_serial) {
                    let _ = save_state(
                        dir,
                        &origin,
                        &Kept {
                            serial,
                            last_refresh,
                        },
                    );
                }
                feed.note(|s| s.last_refresh = Some(now));
                failures = 0;
                refresh_s
            }
            Err(e) => {
                failures += 1;
                warn!(zone = %origin, primary = %spec.primary, error = %e, "secondary refresh failed; retrying");
                if held.is_some() && now >= last_refresh + expire_s {
                    warn!(zone = %origin, "secondary zone expired: no refresh for the SOA expire time; no longer served");
                    held = None;
                    feed.changed(|s| {
                        s.records = None;
                        s.not_ready = Some(format!(
                            "secondary zone {origin}: expired (no refresh from {} since {})",
                            spec.primary, last_refresh
                        ));
                    });
                } else if held.is_none() {
                    feed.note(|s| {
                        s.not_ready =
                            Some(format!("secondary zone {origin}: not transferred yet: {e}"))
                    });
                }
                retry_s.min(1 << failures.min(10))
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = feed.notified.notified() => {}
            () = tokio::time::sleep(Duration::from_secs(wait)) => {}
        }
    }
}

fn serve(feed: &SecondaryFeed, records: &[Rr<'static>], serial: u32, last_refresh: u64) {
    let records = Arc::new(records.to_vec());
    feed.changed(|s| {
        s.records = Some(records);
        s.not_ready = None;
        s.serial = Some(serial);
        s.last_refresh = Some(last_refresh);
    });
}

const TIMEOUT: Duration = Duration::from_secs(10);

/// One refresh: `Ok(None)` when the primary has nothing newer, `Ok(Some)` with the new
/// records (SOA first) otherwise.
async fn refresh(
    feed: &SecondaryFeed,
    spec: &SecondarySpec,
    held: Option<&BTreeSet<Rr<'static>>>,
    kept_serial: Option<u32>,
) -> Result<Option<(BTreeSet<Rr<'static>>, Vec<Rr<'static>>)>, String> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(&spec.primary)
        .await
        .map_err(|e| format!("cannot resolve {}: {e}", spec.primary))?
        .collect();
    let addr = *addrs.first().ok_or("the primary has no address")?;
    *feed.primary_ips.lock().expect("primary addresses") = addrs.iter().map(|a| a.ip()).collect();
    let primary_serial = soa_query(addr, spec).await?;
    if let Some(kept) = kept_serial
        && !serial_gt(primary_serial, kept)
    {
        return Ok(None);
    }
    if let (Some(held), Some(kept)) = (held, kept_serial) {
        match transfer(addr, spec, Some(kept)).await? {
            Received::UpToDate(_) => return Ok(None),
            Received::Full(rrs) => return Ok(Some(full(spec, rrs, "IXFR (whole zone)"))),
            Received::Incremental(deltas, _) => match apply(held, &deltas) {
                Ok(set) => {
                    let records = ordered(&set);
                    info!(zone = %spec.origin, from = kept, to = records.first().and_then(|s| soa_serial(&s.rdata)), differences = deltas.len(), "secondary zone updated by IXFR");
                    return Ok(Some((set, records)));
                }
                Err(e) => {
                    warn!(zone = %spec.origin, error = %e, "IXFR does not apply; asking for AXFR")
                }
            },
        }
    }
    match transfer(addr, spec, None).await? {
        Received::Full(rrs) => Ok(Some(full(spec, rrs, "AXFR"))),
        other => Err(format!("AXFR answered with {other:?}")),
    }
}

fn full(
    spec: &SecondarySpec,
    rrs: Vec<Rr<'static>>,
    how: &str,
) -> (BTreeSet<Rr<'static>>, Vec<Rr<'static>>) {
    let set: BTreeSet<Rr<'static>> = rrs.into_iter().collect();
    let records = ordered(&set);
    info!(zone = %spec.origin, serial = records.first().and_then(|s| soa_serial(&s.rdata)), records = records.len(), "secondary zone transferred by {how}");
    (set, records)
}

/// The records with the SOA first.
fn ordered(set: &BTreeSet<Rr<'static>>) -> Vec<Rr<'static>> {
    let mut v: Vec<Rr<'static>> = Vec::with_capacity(set.len());
    v.extend(
        set.iter()
            .filter(|r| r.rtype == RType::SOA)
            .take(1)
            .cloned(),
    );
    v.extend(set.iter().filter(|r| r.rtype != RType::SOA).cloned());
    v
}

fn request(
    spec: &SecondarySpec,
    qtype: RType,
    serial: Option<u32>,
) -> (Vec<u8>, Option<ReplyVerifier>) {
    let id = message::random_id();
    let mut w = MessageWriter::new(id, 0, Some((spec.origin.wire(), qtype.0, CLASS_IN)));
    if let Some(serial) = serial {
        // IXFR: the serial held, in an SOA in the authority section (RFC 1995 §3).
        let mut rd = vec![0, 0];
        for n in [serial, 0, 0, 0, 0] {
            rd.extend_from_slice(&n.to_be_bytes());
        }
        w.put_record(1, spec.origin.wire(), RType::SOA, CLASS_IN, 0, &rd);
    }
    let mut msg = w.finish();
    let verifier = spec.key.as_ref().map(|key| {
        let mut signer = Signer::request(key, unix_now());
        signer.sign(&mut msg, 0, &[]);
        ReplyVerifier::new(key, signer.last_mac().expect("signed").to_vec())
    });
    (msg, verifier)
}

/// How long each UDP attempt of the SOA query waits for a valid reply, and how many are made.
const SOA_WAIT: Duration = Duration::from_secs(2);
const SOA_ATTEMPTS: usize = 3;

/// The primary's SOA serial: the query that starts each refresh, whose "nothing newer" resets
/// the refresh timer (and so the expire timer). Only a reply that is the reply counts
/// ([`check_soa_reply`]): from the address asked, with the query's random ID and question, and
/// with a key, signed over the query (RFC 8945 §5.3). Anything else is logged at debug and
/// ignored while the wait goes on, so a forged datagram can neither end the wait nor refresh
/// the zone. A truncated reply is asked again over TCP.
async fn soa_query(addr: SocketAddr, spec: &SecondarySpec) -> Result<u32, String> {
    soa_query_with(addr, spec, SOA_WAIT, SOA_ATTEMPTS).await
}

async fn soa_query_with(
    addr: SocketAddr,
    spec: &SecondarySpec,
    wait: Duration,
    attempts: usize,
) -> Result<u32, String> {
    let (msg, verifier) = request(spec, RType::SOA, None);
    let sock = UdpSocket::bind(if addr.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    })
    .await
    .map_err(|e| e.to_string())?;
    // Connected: the kernel delivers only datagrams from `addr` (checked again below).
    sock.connect(addr).await.map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 4096];
    for _ in 0..attempts {
        sock.send(&msg)
            .await
            .map_err(|e| format!("SOA query: {e}"))?;
        let deadline = tokio::time::Instant::now() + wait;
        while let Ok(r) = tokio::time::timeout_at(deadline, sock.recv_from(&mut buf)).await {
            let (n, from) = r.map_err(|e| format!("SOA query: {e}"))?;
            let checked =
                if canonical(from.ip()) != canonical(addr.ip()) || from.port() != addr.port() {
                    Err(format!("from {from}, not the primary"))
                } else {
                    check_soa_reply(&msg, &buf[..n], &spec.origin, verifier.as_ref())
                };
            match checked {
                Ok(SoaReply::Serial(serial)) => return Ok(serial),
                Ok(SoaReply::Failed(e)) => return Err(e),
                Ok(SoaReply::Truncated) => {
                    debug!(zone = %spec.origin, primary = %addr, "SOA reply truncated; asking over TCP");
                    return soa_query_tcp(addr, spec, &msg, verifier.as_ref()).await;
                }
                Err(why) => {
                    debug!(zone = %spec.origin, primary = %addr, reason = %why, "a datagram that is not the reply to the SOA query: ignored")
                }
            }
        }
    }
    Err(format!("no answer from {addr}"))
}

/// The SOA query `msg` again over TCP (after a truncated UDP reply), its reply checked as over
/// UDP.
async fn soa_query_tcp(
    addr: SocketAddr,
    spec: &SecondarySpec,
    msg: &[u8],
    verifier: Option<&ReplyVerifier>,
) -> Result<u32, String> {
    let mut stream = connect_and_send(addr, msg).await?;
    let mut buf = Vec::new();
    read_message(&mut stream, &mut buf, "the SOA query over TCP").await?;
    match check_soa_reply(msg, &buf, &spec.origin, verifier)
        .map_err(|e| format!("the SOA reply over TCP: {e}"))?
    {
        SoaReply::Serial(serial) => Ok(serial),
        SoaReply::Failed(e) => Err(e),
        SoaReply::Truncated => Err("the SOA reply over TCP is truncated".into()),
    }
}

/// Connects to `addr` and sends `msg` framed (RFC 1035 §4.2.2).
async fn connect_and_send(addr: SocketAddr, msg: &[u8]) -> Result<TcpStream, String> {
    let mut stream = tokio::time::timeout(TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| format!("connecting to {addr} timed out"))?
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(msg);
    stream.write_all(&framed).await.map_err(|e| e.to_string())?;
    Ok(stream)
}

/// Reads one framed message into `buf`; `what` names the exchange in errors.
async fn read_message(stream: &mut TcpStream, buf: &mut Vec<u8>, what: &str) -> Result<(), String> {
    let len = tokio::time::timeout(TIMEOUT, stream.read_u16())
        .await
        .map_err(|_| format!("{what} stalled"))?
        .map_err(|e| format!("{what} ended early: {e}"))?;
    buf.resize(usize::from(len), 0);
    tokio::time::timeout(TIMEOUT, stream.read_exact(buf))
        .await
        .map_err(|_| format!("{what} stalled"))?
        .map_err(|e| format!("{what} ended early: {e}"))?;
    Ok(())
}

/// One AXFR (`serial` `None`) or IXFR over TCP.
async fn transfer(
    addr: SocketAddr,
    spec: &SecondarySpec,
    serial: Option<u32>,
) -> Result<Received, String> {
    let qtype = if serial.is_some() {
        RType::IXFR
    } else {
        RType::AXFR
    };
    let (msg, mut verifier) = request(spec, qtype, serial);
    let mut stream = connect_and_send(addr, &msg).await?;
    let mut reader = ReplyReader::new();
    let mut buf = Vec::new();
    loop {
        read_message(&mut stream, &mut buf, "the transfer").await?;
        let m = message::parse(&buf).map_err(|e| e.to_string())?;
        if let Some(v) = verifier.as_mut() {
            v.check(&m)?;
        }
        if reader.feed(&m, serial)? {
            break;
        }
    }
    reader.finish()
}

#[cfg(test)]
mod tests;
