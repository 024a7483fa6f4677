//! Zone transfers out: AXFR/IXFR replies on the DNS listeners (access by address or TSIG key),
//! and NOTIFY to the secondaries when a serial changes.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use meshdns_xfr::tsig::Key;
use meshdns_xfr::{Kind, Outcome, Policy, Primary, Reply};
use meshdns_zone::Name;
use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::relay::Cidr;

/// Who may transfer, and what to count.
#[derive(Debug)]
pub struct Transfers {
    /// Serials, versions and journals.
    pub primary: Arc<Primary>,
    /// Keys known, and those allowed.
    pub policy: Policy,
    /// Addresses allowed without a key.
    pub allow: Vec<Cidr>,
    /// Counters.
    pub metrics: XfrMetrics,
}

const KINDS: [(Kind, &str); 4] = [
    (Kind::Axfr, "axfr"),
    (Kind::Ixfr, "ixfr"),
    (Kind::IxfrFull, "ixfr_full"),
    (Kind::UpToDate, "up_to_date"),
];
const REFUSALS: [&str; 4] = ["refused", "notauth", "tsig", "formerr"];

/// Transfer and NOTIFY counters.
#[derive(Debug, Default)]
pub struct XfrMetrics {
    sent: [AtomicU64; KINDS.len()],
    records: AtomicU64,
    refused: [AtomicU64; REFUSALS.len()],
    notify_sent: AtomicU64,
    notify_acked: AtomicU64,
    notify_failed: AtomicU64,
}

impl Transfers {
    fn unix_now() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    /// Replies to `packet` if it is an AXFR or IXFR (`None`: an ordinary query), handing each
    /// message to `sink` as it is complete.
    pub fn respond(
        &self,
        packet: &[u8],
        peer: IpAddr,
        udp: bool,
        sink: &mut dyn FnMut(Vec<u8>),
    ) -> Option<Reply> {
        let allowed = self.allow.iter().any(|c| c.contains(peer));
        let started = Instant::now();
        let reply = meshdns_xfr::respond(
            &self.primary,
            &self.policy,
            packet,
            allowed,
            udp,
            Self::unix_now(),
            sink,
        )?;
        let m = &self.metrics;
        match reply.outcome {
            Outcome::Sent(kind) => {
                let i = KINDS.iter().position(|(k, _)| *k == kind).unwrap_or(0);
                m.sent[i].fetch_add(1, Relaxed);
                m.records.fetch_add(reply.records as u64, Relaxed);
                if kind != Kind::UpToDate {
                    info!(%peer, zone = %reply.zone.as_ref().map(ToString::to_string).unwrap_or_default(),
                        kind = KINDS[i].1, records = reply.records, messages = reply.messages,
                        elapsed_ms = started.elapsed().as_millis() as u64, "zone transfer out");
                }
            }
            other => {
                let i = match other {
                    Outcome::Refused => 0,
                    Outcome::NotAuth => 1,
                    Outcome::Tsig(_) => 2,
                    _ => 3,
                };
                m.refused[i].fetch_add(1, Relaxed);
                info!(%peer, outcome = ?other, "zone transfer refused");
            }
        }
        Some(reply)
    }

    /// Prometheus text for transfers, notifies and journals.
    pub fn render(&self, out: &mut String) {
        let m = &self.metrics;
        out.push_str("# HELP meshdns_xfr_out_total Zone transfers sent, by kind.\n# TYPE meshdns_xfr_out_total counter\n");
        for (i, (_, name)) in KINDS.iter().enumerate() {
            let _ = writeln!(
                out,
                "meshdns_xfr_out_total{{kind=\"{name}\"}} {}",
                m.sent[i].load(Relaxed)
            );
        }
        out.push_str("# HELP meshdns_xfr_out_records_total Records sent in zone transfers.\n# TYPE meshdns_xfr_out_records_total counter\n");
        let _ = writeln!(
            out,
            "meshdns_xfr_out_records_total {}",
            m.records.load(Relaxed)
        );
        out.push_str("# HELP meshdns_xfr_refused_total Transfer requests not served, by reason.\n# TYPE meshdns_xfr_refused_total counter\n");
        for (i, name) in REFUSALS.iter().enumerate() {
            let _ = writeln!(
                out,
                "meshdns_xfr_refused_total{{reason=\"{name}\"}} {}",
                m.refused[i].load(Relaxed)
            );
        }
        out.push_str("# HELP meshdns_notify_total NOTIFY messages to secondaries, by result.\n# TYPE meshdns_notify_total counter\n");
        for (name, v) in [
            ("sent", &m.notify_sent),
            ("acknowledged", &m.notify_acked),
            ("failed", &m.notify_failed),
        ] {
            let _ = writeln!(
                out,
                "meshdns_notify_total{{result=\"{name}\"}} {}",
                v.load(Relaxed)
            );
        }
        let sizes = self.primary.journal_sizes();
        out.push_str("# HELP meshdns_journal_records Records held in the IXFR journal per zone.\n# TYPE meshdns_journal_records gauge\n");
        for (zone, _, _, records) in &sizes {
            let _ = writeln!(out, "meshdns_journal_records{{zone=\"{zone}\"}} {records}");
        }
        out.push_str("# HELP meshdns_journal_differences Differences (serial steps) held in the IXFR journal per zone.\n# TYPE meshdns_journal_differences gauge\n");
        for (zone, _, deltas, _) in &sizes {
            let _ = writeln!(
                out,
                "meshdns_journal_differences{{zone=\"{zone}\"}} {deltas}"
            );
        }
    }
}

/// A secondary to notify: `HOST:PORT`, with the key to sign with, if any.
#[derive(Debug, Clone)]
pub struct NotifyTarget {
    /// Host (name or address) and port.
    pub address: String,
    /// Signing key.
    pub key: Option<Key>,
}

/// How long to wait for an acknowledgement before sending again.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(2);
/// Waits between attempts for one serial (RFC 1996 §3.6 leaves the schedule open); after the
/// last, the serial is given up on until the next change.
const BACKOFF: [u64; 6] = [1, 2, 4, 8, 16, 32];

/// Sends NOTIFY to `target` for every zone whose serial it has not acknowledged, until
/// `shutdown`: one outstanding serial per zone (a burst of changes is one NOTIFY for the
/// newest), retried with backoff. A name that resolves to several addresses (a headless
/// Service: every secondary pod) is notified at each.
pub async fn notify_loop(
    transfers: Arc<Transfers>,
    target: NotifyTarget,
    shutdown: CancellationToken,
) {
    let mut serials = transfers.primary.subscribe();
    let mut acked: HashMap<(Name, SocketAddr), u32> = HashMap::new();
    // (zone, address) → (serial, attempts made, next attempt)
    let mut pending: BTreeMap<(Name, SocketAddr), (u32, usize, Instant)> = BTreeMap::new();
    let mut id: u16 = rand_id();
    let mut socks: HashMap<bool, UdpSocket> = HashMap::new();
    loop {
        let addrs: Vec<SocketAddr> = match tokio::net::lookup_host(&target.address).await {
            Ok(a) => a.collect(),
            Err(e) => {
                debug!(target = %target.address, error = %e, "cannot resolve the NOTIFY target");
                Vec::new()
            }
        };
        {
            let current = serials.borrow_and_update().clone();
            for (zone, serial) in current.iter() {
                for addr in &addrs {
                    let k = (zone.clone(), *addr);
                    if acked.get(&k) == Some(serial) {
                        continue;
                    }
                    if pending.get(&k).is_none_or(|(s, _, _)| s != serial) {
                        pending.insert(k, (*serial, 0, Instant::now()));
                    }
                }
            }
            pending.retain(|(z, a), _| current.contains_key(z) && addrs.contains(a));
        }
        let now = Instant::now();
        let due: Vec<((Name, SocketAddr), u32, usize)> = pending
            .iter()
            .filter(|(_, (_, _, at))| *at <= now)
            .map(|(k, (s, n, _))| (k.clone(), *s, *n))
            .collect();
        for ((zone, addr), serial, attempts) in due {
            id = id.wrapping_add(1);
            let sock = match socks.entry(addr.is_ipv4()) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    let bind = if addr.is_ipv4() {
                        "0.0.0.0:0"
                    } else {
                        "[::]:0"
                    };
                    match UdpSocket::bind(bind).await {
                        Ok(s) => v.insert(s),
                        Err(e) => {
                            warn!(error = %e, "cannot open a socket for NOTIFY");
                            continue;
                        }
                    }
                }
            };
            let ok = send_one(&transfers, sock, &target, addr, &zone, id).await;
            let m = &transfers.metrics;
            m.notify_sent.fetch_add(1, Relaxed);
            let k = (zone.clone(), addr);
            match ok {
                Ok(()) => {
                    m.notify_acked.fetch_add(1, Relaxed);
                    debug!(%addr, %zone, serial, "NOTIFY acknowledged");
                    acked.insert(k.clone(), serial);
                    pending.remove(&k);
                }
                Err(e) if attempts + 1 >= BACKOFF.len() => {
                    m.notify_failed.fetch_add(1, Relaxed);
                    warn!(%addr, %zone, serial, error = %e, "NOTIFY not acknowledged; giving up until the next change");
                    acked.insert(k.clone(), serial);
                    pending.remove(&k);
                }
                Err(e) => {
                    m.notify_failed.fetch_add(1, Relaxed);
                    debug!(%addr, %zone, serial, error = %e, "NOTIFY not acknowledged; will retry");
                    let wait = Duration::from_secs(BACKOFF[attempts]);
                    pending.insert(k, (serial, attempts + 1, Instant::now() + wait));
                }
            }
        }
        let next = pending.values().map(|(_, _, at)| *at).min();
        // Addresses are looked up again at least every 30 s (secondary pods come and go).
        let sleep = next.map_or(Duration::from_secs(30), |at| {
            at.saturating_duration_since(Instant::now())
                .min(Duration::from_secs(30))
        });
        tokio::select! {
            () = shutdown.cancelled() => return,
            r = serials.changed() => if r.is_err() { return },
            () = tokio::time::sleep(sleep) => {}
        }
    }
}

fn rand_id() -> u16 {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (t ^ (t >> 16)) as u16
}

async fn send_one(
    transfers: &Transfers,
    sock: &UdpSocket,
    target: &NotifyTarget,
    addr: SocketAddr,
    zone: &Name,
    id: u16,
) -> Result<(), String> {
    let version = transfers.primary.version(zone).ok_or("the zone is gone")?;
    let msg = meshdns_xfr::notify::request(
        id,
        zone,
        &version.soa_rdata(),
        version.soa_ttl(),
        target.key.as_ref(),
        Transfers::unix_now(),
    );
    sock.send_to(&msg, addr)
        .await
        .map_err(|e| format!("send: {e}"))?;
    let mut buf = vec![0u8; 4096];
    let deadline = Instant::now() + NOTIFY_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let (n, from) = tokio::time::timeout(left, sock.recv_from(&mut buf))
            .await
            .map_err(|_| "no reply".to_string())?
            .map_err(|e| format!("receive: {e}"))?;
        if from.ip() != addr.ip() {
            continue;
        }
        match meshdns_xfr::notify::is_ack(&buf[..n], id, zone) {
            Ok(()) => return Ok(()),
            Err(e) if e.starts_with("not a reply") => continue,
            Err(e) => return Err(e),
        }
    }
}
