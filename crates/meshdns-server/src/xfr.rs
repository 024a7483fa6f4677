//! Zone transfers out: AXFR/IXFR replies on the DNS listeners (access by address or TSIG key),
//! signed answers to signed SOA queries, and NOTIFY to the secondaries when a serial changes
//! ([`notify_loop`]: the sockets, one per address family; [`NotifyBook`]: its decisions).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use meshdns_xfr::throttle::PEER_WARNINGS;
use meshdns_xfr::tsig::Key;
use meshdns_xfr::{Kind, Outcome, Policy, Primaries, Primary, Reply};
use meshdns_zone::Name;
use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use meshdns_zone::Cidr;

use crate::views::Views;

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
    /// One permit per transfer out in progress (`--xfr-max-concurrent`).
    slots: Arc<tokio::sync::Semaphore>,
    /// The views (`--view`), and the view each key selects (`--view-key`).
    views: Option<(Arc<Views>, HashMap<Name, usize>)>,
}

const KINDS: [(Kind, &str); 4] = [
    (Kind::Axfr, "axfr"),
    (Kind::Ixfr, "ixfr"),
    (Kind::IxfrFull, "ixfr_full"),
    (Kind::UpToDate, "up_to_date"),
];
const REFUSALS: [&str; 5] = ["refused", "notauth", "tsig", "formerr", "busy"];

/// How long a transfer request waits for a slot at `--xfr-max-concurrent` before REFUSED.
pub const SLOT_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
/// The index in [`REFUSALS`] of a transfer refused at `--xfr-max-concurrent`.
const BUSY: usize = 4;

/// The index in [`REFUSALS`] of a request not served.
fn refusal(outcome: Outcome) -> usize {
    match outcome {
        Outcome::Refused => 0,
        Outcome::NotAuth => 1,
        Outcome::Tsig(_) => 2,
        _ => 3,
    }
}

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
    /// Transfers out of `primary`'s zones to the keys of `policy` and the addresses of `allow`,
    /// at most `max_concurrent` at once.
    pub fn new(
        primary: Arc<Primary>,
        policy: Policy,
        allow: Vec<Cidr>,
        max_concurrent: usize,
    ) -> Transfers {
        Transfers {
            primary,
            policy,
            allow,
            metrics: XfrMetrics::default(),
            slots: Arc::new(tokio::sync::Semaphore::new(max_concurrent)),
            views: None,
        }
    }

    /// Transfers, signed SOA answers and NOTIFY by view: a request signed with a key of
    /// `keys` (key name, view's place in `views`) is served the zones of that view; any other,
    /// the zones of the view its address is in ([`Views::index`]); a client in no view, the
    /// zones every client shares.
    pub fn with_views(mut self, views: Arc<Views>, keys: Vec<(Name, usize)>) -> Transfers {
        self.views = Some((views, keys.into_iter().collect()));
        self
    }

    /// The view a request signed with `key` (`None`: unsigned) from `addr` is served from.
    pub fn view_of(&self, key: Option<&Name>, addr: Option<IpAddr>) -> Option<usize> {
        let (views, keys) = self.views.as_ref()?;
        key.and_then(|k| keys.get(k).copied())
            .or_else(|| views.index(addr?))
    }

    /// The primaries of the zones view `view` sees (`None`: those every client shares).
    pub fn primaries(&self, view: Option<usize>) -> Primaries<'_> {
        let own = self
            .views
            .as_ref()
            .zip(view)
            .map(|((views, _), i)| &**views.at(i).2);
        Primaries {
            own,
            shared: &self.primary,
        }
    }

    /// A slot for one more transfer out, or `None` at `--xfr-max-concurrent` for [`SLOT_WAIT`]:
    /// a transfer whose client was shed or stopped reading gives its slot back a moment after
    /// its connection goes, and the request that shed it should not be refused for that.
    pub async fn slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let slots = self.slots.clone();
        tokio::time::timeout(SLOT_WAIT, slots.acquire_owned())
            .await
            .ok()?
            .ok()
    }

    /// REFUSED for a transfer request that found no slot (counted; logged, throttled).
    pub fn refuse_busy(&self, packet: &[u8], peer: IpAddr) -> Option<Vec<u8>> {
        let msg = meshdns_xfr::message::parse(packet).ok()?;
        self.metrics.refused[BUSY].fetch_add(1, Relaxed);
        if let Some(suppressed) = PEER_WARNINGS.admit("transfer busy", "") {
            info!(%peer, suppressed, "zone transfer refused: --xfr-max-concurrent transfers in progress");
        }
        let flags = 0x8000 | (msg.flags & 0x7900) | meshdns_zone::rcode::REFUSED;
        Some(
            meshdns_xfr::message::MessageWriter::new(
                msg.id,
                flags,
                Some((&msg.qname[..], msg.qtype, msg.qclass)),
            )
            .finish(),
        )
    }

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
        let select = |key: Option<&Name>| self.primaries(self.view_of(key, Some(peer)));
        let reply = meshdns_xfr::respond_from(
            &select,
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
                m.refused[refusal(other)].fetch_add(1, Relaxed);
                if let Some(suppressed) =
                    PEER_WARNINGS.admit("transfer refused", &format!("{other:?}"))
                {
                    info!(%peer, outcome = ?other, suppressed, "zone transfer refused");
                }
            }
        }
        Some(reply)
    }

    /// The answer to send instead of `answer` when `query` is signed (the SOA query of a
    /// secondary with a key): `answer` signed, or NOTAUTH with the TSIG error when the query's
    /// signature fails (counted as a `tsig` refusal). `None` for an unsigned query. A key that
    /// selects a view (`--view-key`) is answered from that view's catalog by `answer_from`, so
    /// the serial it sees is the one its transfers carry.
    pub fn signed_answer(
        &self,
        query: &[u8],
        answer: &[u8],
        peer: IpAddr,
        answer_from: impl FnOnce(&meshdns_zone::Catalog) -> Vec<u8>,
    ) -> Option<Vec<u8>> {
        if query.get(10..12).is_none_or(|ar| ar == [0, 0]) {
            return None; // no additional records, so no TSIG
        }
        let mut out = answer.to_vec();
        // Only a key granted transfers reads its view's SOA this way (the address's view
        // answered otherwise): a view key does not grant.
        let view_answer = |key: &Name| {
            if !self.policy.allowed_keys.contains(key) {
                return None;
            }
            let (views, keys) = self.views.as_ref()?;
            let (_, catalog, _) = views.at(*keys.get(key)?);
            Some(answer_from(&catalog.load()))
        };
        match meshdns_xfr::sign_answer(
            &self.policy,
            query,
            &mut out,
            Self::unix_now(),
            view_answer,
        )? {
            Ok(()) => {}
            Err(outcome) => {
                self.metrics.refused[refusal(outcome)].fetch_add(1, Relaxed);
                if let Some(suppressed) =
                    PEER_WARNINGS.admit("signed query refused", &format!("{outcome:?}"))
                {
                    info!(%peer, ?outcome, suppressed, "signed query refused");
                }
            }
        }
        Some(out)
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
        // The shared journals, then each view's own (labelled with the view).
        let mut sizes = vec![(String::new(), self.primary.journal_sizes())];
        if let Some((views, _)) = &self.views {
            for (name, _, primary) in views.outs() {
                let view = format!(",view=\"{}\"", crate::metrics::label_value(&name));
                sizes.push((view, primary.journal_sizes()));
            }
        }
        // Each size is (zone, serial, differences, records), as `Primary::journal_sizes` gives.
        let gauges = [
            ("meshdns_journal_records", "Records held", true),
            (
                "meshdns_journal_differences",
                "Differences (serial steps) held",
                false,
            ),
        ];
        for (metric, what, records) in gauges {
            let _ = writeln!(
                out,
                "# HELP {metric} {what} in the IXFR journal per zone (and view).\n# TYPE {metric} gauge"
            );
            for (view, zones) in &sizes {
                for z in zones {
                    let value = if records { z.3 } else { z.2 };
                    let _ = writeln!(out, "{metric}{{zone=\"{}\"{view}}} {value}", z.0);
                }
            }
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
/// The longest the sender sleeps, and how often a target's name is looked up again.
const RECHECK: Duration = Duration::from_secs(30);

/// One (zone, address) the target has not acknowledged the current serial of.
#[derive(Debug)]
struct Pending {
    serial: u32,
    /// Attempts made.
    attempts: usize,
    /// When to send next (`None`: sent, waiting for the acknowledgement until `deadline`).
    next: Option<Instant>,
    deadline: Instant,
    id: u16,
}

/// A zone at one address of a NOTIFY target.
pub type NotifyKey = (Name, SocketAddr);

/// What one NOTIFY target has been told, per zone and address: the serial it acknowledged (or
/// that was given up on), and the NOTIFY outstanding. The decisions of [`notify_loop`] without
/// its sockets: the clock is an argument, and the caller sends and receives.
///
/// It holds only current pairs: [`NotifyBook::track`] drops every entry whose zone is no longer
/// served or whose address the target's name no longer resolves to, so a secondary pod's old
/// address is forgotten at the next lookup after a rollout.
#[derive(Debug, Default)]
pub struct NotifyBook {
    acked: HashMap<NotifyKey, u32>,
    pending: BTreeMap<NotifyKey, Pending>,
}

/// What became of a NOTIFY that was not acknowledged in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unacknowledged {
    /// The zone and address.
    pub key: NotifyKey,
    /// The serial notified.
    pub serial: u32,
    /// `None`: given up on until the next serial; otherwise sent again after this wait.
    pub retry_in: Option<Duration>,
}

impl NotifyBook {
    /// Brings the book to `serials` (every zone's current serial) and `addrs` (the target's
    /// addresses now): a NOTIFY is due at `now` for each pair whose serial is neither
    /// acknowledged nor already outstanding, and every entry of a zone or address not among
    /// them is dropped.
    pub fn track(&mut self, serials: &BTreeMap<Name, u32>, addrs: &[SocketAddr], now: Instant) {
        for (zone, serial) in serials {
            for addr in addrs {
                let k = (zone.clone(), *addr);
                if self.acked.get(&k) == Some(serial) {
                    continue;
                }
                if self.pending.get(&k).is_none_or(|p| p.serial != *serial) {
                    let p = Pending {
                        serial: *serial,
                        attempts: 0,
                        next: Some(now),
                        deadline: now,
                        id: 0,
                    };
                    self.pending.insert(k, p);
                }
            }
        }
        let current = |(z, a): &NotifyKey| serials.contains_key(z) && addrs.contains(a);
        self.pending.retain(|k, _| current(k));
        self.acked.retain(|k, _| current(k));
    }

    /// The pairs due a NOTIFY at `now`, with the serial to announce.
    pub fn due(&self, now: Instant) -> Vec<(NotifyKey, u32)> {
        self.pending
            .iter()
            .filter(|(_, p)| p.next.is_some_and(|at| at <= now))
            .map(|(k, p)| (k.clone(), p.serial))
            .collect()
    }

    /// Records that the NOTIFY with `id` went to `key` at `now`: it waits for its
    /// acknowledgement for two seconds from `now`.
    pub fn sent(&mut self, key: &NotifyKey, id: u16, now: Instant) {
        if let Some(p) = self.pending.get_mut(key) {
            p.id = id;
            p.attempts += 1;
            p.next = None;
            p.deadline = now + NOTIFY_TIMEOUT;
        }
    }

    /// Every NOTIFY whose acknowledgement is overdue at `now`: sent again after the next wait of
    /// the backoff (1, 2, 4, 8, 16, 32 s), or, after the last, given up on (settled like an
    /// acknowledgement, so only the next serial is sent).
    pub fn expire(&mut self, now: Instant) -> Vec<Unacknowledged> {
        let mut out = Vec::new();
        for (key, p) in &mut self.pending {
            if p.next.is_some() || p.deadline > now {
                continue;
            }
            let retry_in = BACKOFF
                .get(p.attempts.saturating_sub(1))
                .map(|s| Duration::from_secs(*s));
            if let Some(wait) = retry_in {
                p.next = Some(now + wait);
            }
            out.push(Unacknowledged {
                key: key.clone(),
                serial: p.serial,
                retry_in,
            });
        }
        for u in out.iter().filter(|u| u.retry_in.is_none()) {
            self.pending.remove(&u.key);
            self.acked.insert(u.key.clone(), u.serial);
        }
        out
    }

    /// Settles the NOTIFY that `reply`, received from `from`, acknowledges (same ID and zone,
    /// from the address it went to). Returns it with its serial.
    pub fn acknowledge(&mut self, reply: &[u8], from: SocketAddr) -> Option<(NotifyKey, u32)> {
        let k = self
            .pending
            .iter()
            .find(|((zone, addr), p)| {
                p.next.is_none()
                    && addr.ip() == from.ip()
                    && meshdns_xfr::notify::is_ack(reply, p.id, zone).is_ok()
            })
            .map(|(k, _)| k.clone())?;
        let p = self.pending.remove(&k)?;
        self.acked.insert(k.clone(), p.serial);
        Some((k, p.serial))
    }

    /// How long from `now` until something is due (at most 30 s).
    pub fn wake(&self, now: Instant) -> Duration {
        self.pending
            .values()
            .map(|p| p.next.unwrap_or(p.deadline))
            .min()
            .map_or(RECHECK, |at| at.saturating_duration_since(now).min(RECHECK))
    }

    /// The pairs settled (acknowledged or given up on), with their serials.
    pub fn settled(&self) -> impl Iterator<Item = (&NotifyKey, u32)> {
        self.acked.iter().map(|(k, s)| (k, *s))
    }

    /// The pairs with a NOTIFY outstanding or due.
    pub fn outstanding(&self) -> impl Iterator<Item = &NotifyKey> {
        self.pending.keys()
    }
}

/// The NOTIFY sockets of one target, one per address family. A family whose socket could not
/// be opened (IPv6 on a kernel booted with `ipv6.disable=1`) has none: its addresses are
/// skipped, and the other family works alone.
struct NotifySockets {
    v4: Option<UdpSocket>,
    v6: Option<UdpSocket>,
}

impl NotifySockets {
    /// Opens both families with `open`, logging each failure once (with the target).
    fn open(
        target: &str,
        open: &(dyn Fn(SocketAddr) -> std::io::Result<std::net::UdpSocket> + Sync),
    ) -> NotifySockets {
        let one = |bind: SocketAddr, family: &str| {
            let sock = open(bind).and_then(|s| {
                s.set_nonblocking(true)?;
                UdpSocket::from_std(s)
            });
            match sock {
                Ok(s) => Some(s),
                Err(e) => {
                    warn!(%target, family, error = %e, "cannot open a socket for NOTIFY; addresses of this family are skipped");
                    None
                }
            }
        };
        NotifySockets {
            v4: one(SocketAddr::from(([0, 0, 0, 0], 0)), "IPv4"),
            v6: one(SocketAddr::from(([0u16; 8], 0)), "IPv6"),
        }
    }

    fn for_addr(&self, addr: &SocketAddr) -> Option<&UdpSocket> {
        if addr.is_ipv4() {
            self.v4.as_ref()
        } else {
            self.v6.as_ref()
        }
    }
}

/// Waits for `rx` to change, or forever when there is none.
async fn changed<T>(
    rx: Option<&mut tokio::sync::watch::Receiver<T>>,
) -> Result<(), tokio::sync::watch::error::RecvError> {
    match rx {
        Some(rx) => rx.changed().await,
        None => std::future::pending().await,
    }
}

/// Receives on `sock`, or waits forever when there is none.
async fn recv(sock: Option<&UdpSocket>, buf: &mut [u8]) -> std::io::Result<(usize, SocketAddr)> {
    match sock {
        Some(s) => s.recv_from(buf).await,
        None => std::future::pending().await,
    }
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
    notify_loop_with(transfers, target, shutdown, &|bind| {
        std::net::UdpSocket::bind(bind)
    })
    .await;
}

/// [`notify_loop`] with the sockets opened by `open` (given the address to bind, `0.0.0.0:0`
/// or `[::]:0`), so that a test can make one family fail as a kernel without IPv6 does. Each
/// family is opened once; one that fails is logged and its addresses skipped. With neither,
/// nothing can be sent, and the loop ends at once.
pub async fn notify_loop_with(
    transfers: Arc<Transfers>,
    target: NotifyTarget,
    shutdown: CancellationToken,
    open: &(dyn Fn(SocketAddr) -> std::io::Result<std::net::UdpSocket> + Sync),
) {
    let mut serials = transfers.primary.subscribe();
    // A target in a view (by its key, else by its first address) is told the serials of the
    // view's own zones over the shared ones.
    let mut view: Option<usize> = None;
    let mut own: Option<tokio::sync::watch::Receiver<Arc<BTreeMap<Name, u32>>>> = None;
    let key_name = target.key.as_ref().map(|k| &k.name);
    let mut book = NotifyBook::default();
    let sockets = NotifySockets::open(&target.address, open);
    if sockets.v4.is_none() && sockets.v6.is_none() {
        warn!(target = %target.address, "no socket for NOTIFY: this target is not notified");
        return;
    }
    let mut addrs: Vec<SocketAddr> = Vec::new();
    let mut resolved_at: Option<Instant> = None;
    let (mut buf4, mut buf6) = (vec![0u8; 4096], vec![0u8; 4096]);
    let m = &transfers.metrics;
    loop {
        // Addresses are looked up again every 30 s (secondary pods come and go).
        if resolved_at.is_none_or(|t| t.elapsed() > RECHECK) || addrs.is_empty() {
            match tokio::net::lookup_host(&target.address).await {
                Ok(a) => addrs = a.filter(|a| sockets.for_addr(a).is_some()).collect(),
                Err(e) => {
                    debug!(target = %target.address, error = %e, "cannot resolve the NOTIFY target")
                }
            }
            resolved_at = Some(Instant::now());
            let now_in = transfers.view_of(key_name, addrs.first().map(SocketAddr::ip));
            if now_in != view {
                view = now_in;
                own = transfers.primaries(view).own.map(Primary::subscribe);
            }
        }
        match own.as_mut() {
            None => book.track(&serials.borrow_and_update(), &addrs, Instant::now()),
            Some(own) => {
                let mut merged = BTreeMap::clone(&serials.borrow_and_update());
                merged.extend(own.borrow_and_update().iter().map(|(z, s)| (z.clone(), *s)));
                book.track(&merged, &addrs, Instant::now());
            }
        }
        let primaries = transfers.primaries(view);
        for ((zone, addr), _) in book.due(Instant::now()) {
            let Some(version) = primaries.version(&zone) else {
                continue;
            };
            let Some(sock) = sockets.for_addr(&addr) else {
                continue;
            };
            let id = meshdns_xfr::message::random_id();
            let msg = meshdns_xfr::notify::request(
                id,
                &zone,
                &version.soa_rdata(),
                version.soa_ttl(),
                target.key.as_ref(),
                Transfers::unix_now(),
            );
            if let Err(e) = sock.send_to(&msg, addr).await {
                debug!(%addr, %zone, error = %e, "NOTIFY not sent");
            }
            m.notify_sent.fetch_add(1, Relaxed);
            book.sent(&(zone, addr), id, Instant::now());
        }
        for u in book.expire(Instant::now()) {
            m.notify_failed.fetch_add(1, Relaxed);
            let ((zone, addr), serial) = (&u.key, u.serial);
            match u.retry_in {
                Some(_) => debug!(%addr, %zone, serial, "NOTIFY not acknowledged; will retry"),
                None => {
                    warn!(%addr, %zone, serial, "NOTIFY not acknowledged; giving up until the next change")
                }
            }
        }
        let wake = book.wake(Instant::now());
        let reply = tokio::select! {
            () = shutdown.cancelled() => return,
            r = serials.changed() => if r.is_err() { return } else { None },
            r = changed(own.as_mut()) => if r.is_err() { return } else { None },
            () = tokio::time::sleep(wake) => None,
            r = recv(sockets.v4.as_ref(), &mut buf4) => r.ok().map(|(n, from)| (&buf4[..n], from)),
            r = recv(sockets.v6.as_ref(), &mut buf6) => r.ok().map(|(n, from)| (&buf6[..n], from)),
        };
        if let Some((bytes, from)) = reply
            && let Some(((zone, addr), serial)) = book.acknowledge(bytes, from)
        {
            m.notify_acked.fetch_add(1, Relaxed);
            debug!(%addr, %zone, serial, "NOTIFY acknowledged");
        }
    }
}

#[cfg(test)]
mod tests {
    use meshdns_xfr::message::{MessageWriter, OPCODE_NOTIFY, parse};

    use super::*;

    fn zone(name: &str) -> Name {
        name.parse().unwrap()
    }

    fn addr(last: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, last], 53))
    }

    fn serials(zones: &[(&str, u32)]) -> BTreeMap<Name, u32> {
        zones.iter().map(|(z, s)| (zone(z), *s)).collect()
    }

    /// A secondary's acknowledgement of NOTIFY `id` for `origin`.
    fn ack(id: u16, origin: &Name) -> Vec<u8> {
        let flags = 0x8000 | u16::from(OPCODE_NOTIFY) << 11 | 0x0400;
        MessageWriter::new(id, flags, Some((origin.wire(), 6, 1))).finish()
    }

    /// Sends every NOTIFY due and has each address acknowledge it.
    fn send_and_ack(book: &mut NotifyBook, now: Instant) {
        for (i, (key, _)) in book.due(now).into_iter().enumerate() {
            let id = 100 + i as u16;
            book.sent(&key, id, now);
            assert!(book.acknowledge(&ack(id, &key.0), key.1).is_some());
        }
    }

    fn settled(book: &NotifyBook) -> Vec<(String, SocketAddr, u32)> {
        let mut v: Vec<_> = book
            .settled()
            .map(|((z, a), s)| (z.to_string(), *a, s))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn acknowledged_pairs_are_forgotten_when_the_address_or_zone_goes() {
        let now = Instant::now();
        let mut book = NotifyBook::default();
        let zones = serials(&[("a.example.", 1), ("b.example.", 7)]);
        // A rollout: every pod address is new, several times over.
        for round in 0..5u8 {
            let addrs = [addr(2 * round), addr(2 * round + 1)];
            book.track(&zones, &addrs, now);
            send_and_ack(&mut book, now);
            let held = settled(&book);
            assert_eq!(
                held.len(),
                4,
                "two zones at two current addresses: {held:?}"
            );
            assert!(held.iter().all(|(_, a, _)| addrs.contains(a)), "{held:?}");
        }
        // A zone no longer served.
        let addrs = [addr(8), addr(9)];
        book.track(&serials(&[("b.example.", 7)]), &addrs, now);
        assert_eq!(
            settled(&book),
            [
                ("b.example.".to_string(), addr(8), 7),
                ("b.example.".to_string(), addr(9), 7)
            ]
        );
        assert!(
            book.due(now).is_empty(),
            "acknowledged serials are not sent again"
        );
        // Outstanding NOTIFYs are pruned the same way.
        book.track(&serials(&[("b.example.", 8)]), &addrs, now);
        assert_eq!(book.outstanding().count(), 2);
        book.track(&serials(&[("b.example.", 8)]), &[addr(9)], now);
        assert_eq!(
            book.outstanding().collect::<Vec<_>>(),
            [&(zone("b.example."), addr(9))]
        );
        assert!(settled(&book).iter().all(|(_, a, _)| *a == addr(9)));
    }

    #[test]
    fn unacknowledged_notifies_back_off_then_settle_until_the_next_serial() {
        let mut now = Instant::now();
        let mut book = NotifyBook::default();
        let zones = serials(&[("a.example.", 1)]);
        book.track(&zones, &[addr(1)], now);
        let mut waits = Vec::new();
        loop {
            let due = book.due(now);
            assert_eq!(due.len(), 1);
            book.sent(&due[0].0, 1, now);
            assert_eq!(book.wake(now), NOTIFY_TIMEOUT);
            now += NOTIFY_TIMEOUT;
            let expired = book.expire(now);
            assert_eq!(expired.len(), 1);
            match expired[0].retry_in {
                Some(wait) => {
                    waits.push(wait.as_secs());
                    now += wait;
                }
                None => break,
            }
        }
        assert_eq!(waits, BACKOFF);
        assert_eq!(settled(&book), [("a.example.".to_string(), addr(1), 1)]);
        book.track(&zones, &[addr(1)], now);
        assert!(book.due(now).is_empty(), "given up until the next change");
        book.track(&serials(&[("a.example.", 2)]), &[addr(1)], now);
        assert_eq!(book.due(now).len(), 1);
    }

    #[test]
    fn only_a_matching_reply_from_the_address_notified_acknowledges() {
        let now = Instant::now();
        let mut book = NotifyBook::default();
        let a = zone("a.example.");
        book.track(&serials(&[("a.example.", 3)]), &[addr(1)], now);
        book.sent(&(a.clone(), addr(1)), 42, now);
        assert!(
            book.acknowledge(&ack(41, &a), addr(1)).is_none(),
            "another ID"
        );
        assert!(
            book.acknowledge(&ack(42, &zone("b.example.")), addr(1))
                .is_none()
        );
        assert!(
            book.acknowledge(&ack(42, &a), addr(2)).is_none(),
            "another address"
        );
        assert!(parse(&ack(42, &a)).unwrap().is_response());
        assert_eq!(
            book.acknowledge(&ack(42, &a), addr(1)),
            Some(((a, addr(1)), 3))
        );
        assert_eq!(book.outstanding().count(), 0);
    }
}
