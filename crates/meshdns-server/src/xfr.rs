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

use meshdns_zone::Cidr;

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

/// One (zone, address) the target has not acknowledged the current serial of.
struct Pending {
    serial: u32,
    /// Attempts made.
    attempts: usize,
    /// When to send next (`None`: sent, waiting for the acknowledgement until `deadline`).
    next: Option<Instant>,
    deadline: Instant,
    id: u16,
}

/// Sends NOTIFY to `target` for every zone whose serial it has not acknowledged, until
/// `shutdown`: one outstanding serial per zone (a burst of changes is one NOTIFY for the
/// newest), retried with backoff. Sending never waits for an acknowledgement: every zone due
/// goes at once, and replies are matched by ID as they come. A name that resolves to several
/// addresses (a headless Service: every secondary pod) is notified at each.
pub async fn notify_loop(
    transfers: Arc<Transfers>,
    target: NotifyTarget,
    shutdown: CancellationToken,
) {
    let mut serials = transfers.primary.subscribe();
    let mut acked: HashMap<(Name, SocketAddr), u32> = HashMap::new();
    let mut pending: BTreeMap<(Name, SocketAddr), Pending> = BTreeMap::new();
    let mut id: u16 = rand_id();
    let v4 = UdpSocket::bind("0.0.0.0:0").await;
    let v6 = UdpSocket::bind("[::]:0").await;
    let (v4, v6) = match (v4, v6) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            warn!(target = %target.address, error = %e, "cannot open a socket for NOTIFY");
            return;
        }
    };
    let mut addrs: Vec<SocketAddr> = Vec::new();
    let mut resolved_at: Option<Instant> = None;
    let (mut buf4, mut buf6) = (vec![0u8; 4096], vec![0u8; 4096]);
    loop {
        // Addresses are looked up again every 30 s (secondary pods come and go).
        if resolved_at.is_none_or(|t| t.elapsed() > Duration::from_secs(30)) || addrs.is_empty() {
            match tokio::net::lookup_host(&target.address).await {
                Ok(a) => addrs = a.collect(),
                Err(e) => {
                    debug!(target = %target.address, error = %e, "cannot resolve the NOTIFY target")
                }
            }
            resolved_at = Some(Instant::now());
        }
        {
            let current = serials.borrow_and_update().clone();
            for (zone, serial) in current.iter() {
                for addr in &addrs {
                    let k = (zone.clone(), *addr);
                    if acked.get(&k) == Some(serial) {
                        continue;
                    }
                    if pending.get(&k).is_none_or(|p| p.serial != *serial) {
                        let now = Instant::now();
                        let p = Pending {
                            serial: *serial,
                            attempts: 0,
                            next: Some(now),
                            deadline: now,
                            id: 0,
                        };
                        pending.insert(k, p);
                    }
                }
            }
            pending.retain(|(z, a), _| current.contains_key(z) && addrs.contains(a));
        }
        let now = Instant::now();
        let m = &transfers.metrics;
        let mut gave_up = Vec::new();
        for ((zone, addr), p) in pending.iter_mut() {
            match p.next {
                Some(at) if at <= now => {
                    let Some(version) = transfers.primary.version(zone) else {
                        continue;
                    };
                    id = id.wrapping_add(1);
                    let msg = meshdns_xfr::notify::request(
                        id,
                        zone,
                        &version.soa_rdata(),
                        version.soa_ttl(),
                        target.key.as_ref(),
                        Transfers::unix_now(),
                    );
                    let sock = if addr.is_ipv4() { &v4 } else { &v6 };
                    if let Err(e) = sock.send_to(&msg, addr).await {
                        debug!(%addr, %zone, error = %e, "NOTIFY not sent");
                    }
                    m.notify_sent.fetch_add(1, Relaxed);
                    p.id = id;
                    p.attempts += 1;
                    p.next = None;
                    p.deadline = Instant::now() + NOTIFY_TIMEOUT;
                }
                None if p.deadline <= now => {
                    m.notify_failed.fetch_add(1, Relaxed);
                    match BACKOFF.get(p.attempts - 1) {
                        Some(wait) => {
                            debug!(%addr, %zone, serial = p.serial, "NOTIFY not acknowledged; will retry");
                            p.next = Some(now + Duration::from_secs(*wait));
                        }
                        None => {
                            warn!(%addr, %zone, serial = p.serial, "NOTIFY not acknowledged; giving up until the next change");
                            gave_up.push((zone.clone(), *addr));
                        }
                    }
                }
                _ => {}
            }
        }
        // Given up: settled, so only the next serial is sent.
        for k in gave_up {
            if let Some(p) = pending.remove(&k) {
                acked.insert(k, p.serial);
            }
        }
        let wake = pending
            .values()
            .map(|p| p.next.unwrap_or(p.deadline))
            .min()
            .map_or(Duration::from_secs(30), |at| {
                at.saturating_duration_since(Instant::now())
                    .min(Duration::from_secs(30))
            });
        tokio::select! {
            () = shutdown.cancelled() => return,
            r = serials.changed() => if r.is_err() { return },
            () = tokio::time::sleep(wake) => {}
            r = v4.recv_from(&mut buf4) => if let Ok((n, from)) = r {
                acknowledge(&buf4[..n], from, &mut pending, &mut acked, m);
            },
            r = v6.recv_from(&mut buf6) => if let Ok((n, from)) = r {
                acknowledge(&buf6[..n], from, &mut pending, &mut acked, m);
            },
        }
    }
}

/// Settles the NOTIFY a reply from `from` acknowledges, if any.
fn acknowledge(
    reply: &[u8],
    from: SocketAddr,
    pending: &mut BTreeMap<(Name, SocketAddr), Pending>,
    acked: &mut HashMap<(Name, SocketAddr), u32>,
    m: &XfrMetrics,
) {
    let found = pending
        .iter()
        .find(|((zone, addr), p)| {
            p.next.is_none()
                && addr.ip() == from.ip()
                && meshdns_xfr::notify::is_ack(reply, p.id, zone).is_ok()
        })
        .map(|(k, _)| k.clone());
    if let Some(k) = found
        && let Some(p) = pending.remove(&k)
    {
        m.notify_acked.fetch_add(1, Relaxed);
        debug!(addr = %k.1, zone = %k.0, serial = p.serial, "NOTIFY acknowledged");
        acked.insert(k, p.serial);
    }
}

fn rand_id() -> u16 {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (t ^ (t >> 16)) as u16
}
