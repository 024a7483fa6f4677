//! The UDP query path: one OS thread per `SO_REUSEPORT` socket, batched system calls.
//!
//! Why not tokio here: an async `recv_from`/`send_to` costs an epoll round and a task wake-up
//! per datagram, which at 100k queries a second is most of the CPU. A thread that blocks in
//! `recvmmsg(2)` with `MSG_WAITFORONE` gets one datagram per call when traffic is light (no
//! added latency) and up to [`BATCH`] when it is heavy, then answers them all and sends the
//! replies with one `sendmmsg(2)`. std offers neither call, and quinn-udp's wrappers are shaped
//! for QUIC (GSO/GRO, ECN), so the few `libc` calls are written here.
//!
//! Shutdown: `ServerHandle::shutdown` shuts the socket down for reading, which wakes a
//! blocked receive on Linux; the receive timeout ([`POLL`]) covers other systems.

use std::io;
use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use meshdns_zone::{Transport, answer};
use tracing::debug;

use crate::Shared;
use crate::metrics::Proto;

/// Datagrams per system call at most (as quinn-udp uses).
pub(crate) const BATCH: usize = 32;
/// Largest query read; longer datagrams are dropped (queries are a few hundred bytes).
const RECV_BUF: usize = 4096;
/// UDP answers waiting for a lookup at most (each holds a task and its datagram).
const MAX_DEFERRED: usize = 4096;
/// How often an idle thread checks for shutdown.
pub(crate) const POLL: Duration = Duration::from_millis(200);

/// Serves `sock` until shutdown. The socket must be blocking with a read timeout.
pub(crate) fn serve(sock: Arc<UdpSocket>, shared: Arc<Shared>) {
    #[cfg(target_os = "linux")]
    batched::serve(sock, shared);
    #[cfg(not(target_os = "linux"))]
    simple::serve(sock, shared);
}

/// A datagram longer than the receive buffer (`head` is its start): FORMERR when the header is
/// a query's, counted like any answer.
fn oversized(shared: &Shared, head: &[u8], out: &mut Vec<u8>) -> bool {
    let outcome = meshdns_zone::answer_oversized(head, out);
    shared
        .metrics
        .record(Proto::Udp, &outcome, std::time::Duration::ZERO);
    outcome.reply
}

/// The signed answer to a signed SOA query (a secondary's check before each refresh), out of
/// line: rare, and kept out of [`handle`], which the receive loop inlines.
#[cold]
#[inline(never)]
fn signed_soa(
    shared: &Shared,
    packet: &[u8],
    out: &[u8],
    peer: Option<std::net::IpAddr>,
) -> Option<Vec<u8>> {
    shared
        .config
        .transfers
        .as_ref()?
        .signed_answer(packet, out, peer?, |catalog| {
            let mut again = Vec::new();
            answer(
                catalog,
                packet,
                Transport::Udp,
                &shared.config.answer,
                &mut again,
            );
            again
        })
}

/// Answers one datagram into `out`; returns whether to send it.
/// `rrl_ms` is the rate limiter's clock ([`crate::rrl::Rrl::now_ms`]), read once per batch
/// when it is on. An answer that waits for a lookup ([`crate::lookups`]) is not sent here:
/// `defer` is given the key, and a task answers later ([`deferred`]).
///
/// Inlined into the receive loops: a call per datagram here cost about 60 instructions per
/// query (`bench/instructions.sh`).
#[inline(always)]
fn handle(
    shared: &Shared,
    catalog: &meshdns_zone::Catalog,
    packet: &[u8],
    peer: impl Fn() -> Option<std::net::IpAddr>,
    out: &mut Vec<u8>,
    rrl_ms: u32,
    defer: impl FnOnce(meshdns_zone::Key),
) -> bool {
    let started = Instant::now();
    let outcome = answer(catalog, packet, Transport::Udp, &shared.config.answer, out);
    if let Some(key) = crate::lookups::needs_lookup(shared.config.lookups.as_ref(), &outcome) {
        defer(key);
        return false;
    }
    // NOTIFY and IXFR (which answer() declines) are answered here when configured.
    let special = if outcome.rcode == meshdns_zone::rcode::NOTIMP
        && let Some(h) = crate::opcode_handler(&shared.config, packet)
    {
        peer().and_then(|ip| (h.0)(packet, ip))
    } else if outcome.qtype == Some(meshdns_zone::RType::IXFR) {
        // IXFR over UDP (RFC 1995 §2): the current SOA, or the whole reply if it is one message.
        shared.config.transfers.as_ref().and_then(|t| {
            let mut first = None;
            t.respond(packet, peer()?, true, &mut |m| {
                first.get_or_insert(m);
            })?;
            first
        })
    } else if outcome.reply && outcome.qtype == Some(meshdns_zone::RType::SOA) {
        // A signed SOA query (a secondary with a key, before each refresh) gets a signed answer.
        signed_soa(shared, packet, out, peer())
    } else {
        None
    };
    let counted = match &special {
        Some(reply) => crate::replied(outcome, reply),
        None => outcome,
    };
    let done = Instant::now();
    shared.metrics.record(
        Proto::Udp,
        &counted,
        done.saturating_duration_since(started),
    );
    let reply = match special {
        Some(reply) => {
            *out = reply;
            true
        }
        None => outcome.reply,
    };
    match (&shared.config.rrl, reply) {
        (Some(rrl), true) => limit(shared, rrl, packet, peer, out, rrl_ms),
        _ => reply,
    }
}

/// Answers `packet` from `peer` once `key`'s lookup ended, on the runtime, and sends the reply
/// from `sock` without blocking (a full send buffer drops it, as it would any datagram). RRL
/// applies as to any answer.
fn deferred(
    shared: &Arc<Shared>,
    sock: &Arc<UdpSocket>,
    packet: &[u8],
    peer: std::net::SocketAddr,
    key: meshdns_zone::Key,
) {
    let (Some(lookups), Some(runtime)) = (&shared.config.lookups, &shared.runtime) else {
        return;
    };
    // A flood of queries joining lookups in flight would hold a task and a copy of each
    // datagram for up to the lookup's timeout: beyond the bound, SERVFAIL at once.
    if shared.deferred.fetch_add(1, Relaxed) >= MAX_DEFERRED {
        shared.deferred.fetch_sub(1, Relaxed);
        let mut out = Vec::with_capacity(512);
        let outcome =
            meshdns_zone::answer_servfail(packet, Transport::Udp, &shared.config.answer, &mut out);
        shared
            .metrics
            .record(Proto::Udp, &outcome, std::time::Duration::ZERO);
        send_later(shared, sock, packet, peer, outcome.reply, &mut out);
        return;
    }
    let (lookups, shared, sock, packet) = (
        lookups.clone(),
        shared.clone(),
        sock.clone(),
        packet.to_vec(),
    );
    let started = Instant::now();
    runtime.spawn(async move {
        // The place is given back however the task ends (a panic included).
        let _place = Place(&shared.deferred);
        let mut out = Vec::with_capacity(512);
        let outcome = crate::lookups::answer_after(
            &lookups,
            key,
            Some(peer.ip()),
            crate::lookups::Asked {
                catalog: shared.catalog_for(peer.ip(), false),
                packet: &packet,
                transport: Transport::Udp,
                config: &shared.config.answer,
            },
            &mut out,
        )
        .await;
        shared
            .metrics
            .record(Proto::Udp, &outcome, started.elapsed());
        send_later(&shared, &sock, &packet, peer, outcome.reply, &mut out);
    });
}

/// Answers an UPDATE (RFC 2136) on the runtime's blocking pool, not on the receiving thread:
/// an accepted update is synced to disk and its reply waits until it is served, which must
/// not hold the queries behind it. Whether `packet` was taken (an UPDATE, with a handler).
/// Bounded as the lookups are: beyond [`MAX_DEFERRED`] in flight, it is dropped (the client
/// retries).
#[inline(always)]
fn update_later(
    shared: &Arc<Shared>,
    sock: &Arc<UdpSocket>,
    packet: &[u8],
    peer: std::net::SocketAddr,
) -> bool {
    let (Some(handler), Some(runtime)) = (&shared.config.update, &shared.runtime) else {
        return false;
    };
    if !crate::is_update(packet) {
        return false;
    }
    if (handler.drops)(packet) {
        // Past what its key may have checked: not worth a place in the queue.
        shared.metrics.dropped(Proto::Udp);
        return true;
    }
    if shared.deferred.fetch_add(1, Relaxed) >= MAX_DEFERRED {
        shared.deferred.fetch_sub(1, Relaxed);
        shared.metrics.dropped(Proto::Udp);
        return true;
    }
    let (handler, shared, sock, packet) = (
        handler.answer.clone(),
        shared.clone(),
        sock.clone(),
        packet.to_vec(),
    );
    let started = Instant::now();
    runtime.spawn_blocking(move || {
        let _place = Place(&shared.deferred);
        let Some(mut reply) = (handler.0)(&packet, peer.ip()) else {
            return;
        };
        let outcome = meshdns_zone::Outcome {
            reply: true,
            rcode: u16::from(reply.get(3).map_or(0, |b| b & 0x0F)),
            qtype: Some(meshdns_zone::RType::SOA),
            truncated: false,
            padding: false,
            touched: None,
        };
        shared
            .metrics
            .record(Proto::Udp, &outcome, started.elapsed());
        send_later(&shared, &sock, &packet, peer, true, &mut reply);
    });
    true
}

/// Sends `out`, the reply to `packet` decided away from the receiving thread, through RRL as
/// any answer, without blocking (a full send buffer drops it, as it would any datagram).
fn send_later(
    shared: &Shared,
    sock: &UdpSocket,
    packet: &[u8],
    peer: std::net::SocketAddr,
    reply: bool,
    out: &mut Vec<u8>,
) {
    let send = match (&shared.config.rrl, reply) {
        (Some(rrl), true) => limit(shared, rrl, packet, || Some(peer.ip()), out, rrl.now_ms()),
        (_, reply) => reply,
    };
    if send {
        let _ =
            socket2::SockRef::from(sock).send_to_with_flags(out, &peer.into(), libc::MSG_DONTWAIT);
    }
}

/// One of the [`MAX_DEFERRED`] places, given back on drop.
struct Place<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

thread_local! {
    /// Limited responses seen by this UDP thread, for RRL's slip ratio.
    static SLIPS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Response rate limiting of the reply in `out`: `true` to send it (maybe truncated).
fn limit(
    shared: &Shared,
    rrl: &crate::rrl::Rrl,
    packet: &[u8],
    peer: impl Fn() -> Option<std::net::IpAddr>,
    out: &mut Vec<u8>,
    now_ms: u32,
) -> bool {
    let Some(client) = peer() else {
        return true;
    };
    let qname = question_name(packet);
    let action = SLIPS.with(|slips| {
        let mut n = slips.get();
        let a = rrl.decide(client, qname, out, now_ms, &mut n);
        slips.set(n);
        a
    });
    match action {
        crate::rrl::Action::Send => true,
        crate::rrl::Action::Slip => {
            crate::rrl::slip(out);
            shared.metrics.rrl(true);
            true
        }
        crate::rrl::Action::Drop => {
            shared.metrics.rrl(false);
            false
        }
    }
}

/// The question name of a query as sent (empty when there is none to read).
fn question_name(packet: &[u8]) -> &[u8] {
    meshdns_zone::wire::question_end(packet).map_or(&[], |end| &packet[12..end - 4])
}

/// The rate limiter's clock, 0 when it is off.
fn rrl_ms(shared: &Shared) -> u32 {
    shared.config.rrl.as_ref().map_or(0, |r| r.now_ms())
}

fn transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

#[cfg(not(target_os = "linux"))]
mod simple {
    use super::*;

    pub(super) fn serve(sock: Arc<UdpSocket>, shared: Arc<Shared>) {
        // One byte more than a query may have, to tell a longer datagram (truncated to fit).
        let mut buf = vec![0u8; RECV_BUF + 1];
        let mut out = Vec::with_capacity(1232);
        while !shared.shutdown.is_cancelled() {
            let (len, peer) = match sock.recv_from(&mut buf) {
                Ok(x) => x,
                Err(e) if transient(&e) => continue,
                Err(e) => {
                    debug!(error = %e, "UDP receive error");
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
            };
            if peer.port() == 0 {
                continue;
            }
            let catalog = shared.catalog_for(peer.ip(), true).load();
            let replied = if len > RECV_BUF {
                oversized(&shared, &buf[..RECV_BUF], &mut out)
            } else if update_later(&shared, &sock, &buf[..len], peer) {
                false
            } else {
                handle(
                    &shared,
                    &catalog,
                    &buf[..len],
                    || Some(peer.ip()),
                    &mut out,
                    rrl_ms(&shared),
                    |key| deferred(&shared, &sock, &buf[..len], peer, key),
                )
            };
            if replied {
                let _ = sock.send_to(&out, peer);
            }
        }
    }
}

#[cfg(target_os = "linux")]
mod batched {
    use std::mem::{size_of, zeroed};
    use std::os::fd::AsRawFd;
    use std::ptr::null_mut;

    use super::*;

    /// The buffers of one batch. The receive headers point into them once, from
    /// [`Buffers::new`]: the vectors are never resized, so their heap storage (what the kernel
    /// is given) never moves, and only what the kernel writes back is reset after a batch.
    struct Buffers {
        data: Vec<[u8; RECV_BUF]>,
        addrs: Vec<libc::sockaddr_storage>,
        iov: Vec<libc::iovec>,
        hdrs: Vec<libc::mmsghdr>,
        replies: Vec<Vec<u8>>,
        reply_iov: Vec<libc::iovec>,
        reply_hdrs: Vec<libc::mmsghdr>,
    }

    impl Buffers {
        fn new() -> Buffers {
            // SAFETY: these are plain C structs for which all-zero bytes are a valid value.
            let zero_addr: libc::sockaddr_storage = unsafe { zeroed() };
            let zero_iov = libc::iovec {
                iov_base: null_mut(),
                iov_len: 0,
            };
            // SAFETY: as above.
            let zero_hdr: libc::mmsghdr = unsafe { zeroed() };
            let mut b = Buffers {
                data: vec![[0; RECV_BUF]; BATCH],
                addrs: vec![zero_addr; BATCH],
                iov: vec![zero_iov; BATCH],
                hdrs: vec![zero_hdr; BATCH],
                replies: (0..BATCH).map(|_| Vec::with_capacity(1232)).collect(),
                reply_iov: vec![zero_iov; BATCH],
                reply_hdrs: vec![zero_hdr; BATCH],
            };
            for i in 0..BATCH {
                b.iov[i] = libc::iovec {
                    iov_base: b.data[i].as_mut_ptr().cast(),
                    iov_len: RECV_BUF,
                };
                let h = &mut b.hdrs[i];
                h.msg_len = 0;
                h.msg_hdr.msg_name = (&mut b.addrs[i] as *mut libc::sockaddr_storage).cast();
                h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
                h.msg_hdr.msg_iov = &mut b.iov[i];
                h.msg_hdr.msg_iovlen = 1;
                h.msg_hdr.msg_control = null_mut();
                h.msg_hdr.msg_controllen = 0;
                h.msg_hdr.msg_flags = 0;
            }
            b
        }

        /// Makes the first `n` receive headers ready again: the kernel wrote each one's
        /// address length, flags and datagram length. (Rebuilding all BATCH headers before
        /// every call, as before, cost about 300 instructions per call, which a light load
        /// pays per query.)
        fn reset(&mut self, n: usize) {
            for h in &mut self.hdrs[..n] {
                h.msg_len = 0;
                h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
                h.msg_hdr.msg_controllen = 0;
                h.msg_hdr.msg_flags = 0;
            }
        }
    }

    /// The source port of a received datagram (0 for an unknown family).
    fn source_ip(addr: &libc::sockaddr_storage) -> Option<std::net::IpAddr> {
        match i32::from(addr.ss_family) {
            libc::AF_INET => {
                // SAFETY: as in `source_port`.
                let sin = unsafe {
                    &*(addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>()
                };
                Some(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).into())
            }
            libc::AF_INET6 => {
                // SAFETY: as in `source_port`.
                let sin6 = unsafe {
                    &*(addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
                };
                Some(std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr).into())
            }
            _ => None,
        }
    }

    fn source_port(addr: &libc::sockaddr_storage) -> u16 {
        match i32::from(addr.ss_family) {
            libc::AF_INET => {
                // SAFETY: the kernel wrote a sockaddr_in for AF_INET, and sockaddr_storage is
                // large and aligned enough for it.
                let sin = unsafe {
                    &*(addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>()
                };
                u16::from_be(sin.sin_port)
            }
            libc::AF_INET6 => {
                // SAFETY: as above, for sockaddr_in6.
                let sin6 = unsafe {
                    &*(addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
                };
                u16::from_be(sin6.sin6_port)
            }
            _ => 0,
        }
    }

    pub(super) fn serve(sock: Arc<UdpSocket>, shared: Arc<Shared>) {
        let fd = sock.as_raw_fd();
        let mut b = Buffers::new();
        while !shared.shutdown.is_cancelled() {
            // SAFETY: `hdrs` holds BATCH entries, each pointing at a live iovec, buffer and
            // address slot of `b`, none of which move during the call.
            let n = unsafe {
                libc::recvmmsg(
                    fd,
                    b.hdrs.as_mut_ptr(),
                    BATCH as u32,
                    libc::MSG_WAITFORONE,
                    null_mut(),
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if !transient(&e) {
                    // Retrying at once could spin on a persistent error; pause briefly.
                    debug!(error = %e, "UDP receive error");
                    std::thread::sleep(Duration::from_millis(1));
                }
                continue;
            }
            let catalog = shared.catalog.load();
            let rrl_ms = rrl_ms(&shared);
            let mut replies = 0;
            for i in 0..n as usize {
                let h = &b.hdrs[i];
                let len = h.msg_len as usize;
                if source_port(&b.addrs[i]) == 0 {
                    // From port 0: no reply can reach it; answering would only reflect
                    // spoofed traffic.
                    shared.metrics.dropped(Proto::Udp);
                    continue;
                }
                let addr = &b.addrs[i];
                let replied = if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                    // Longer than any query we answer: FORMERR, a bare header.
                    oversized(&shared, &b.data[i], &mut b.replies[i])
                } else if let Some(ip) = source_ip(addr)
                    && update_later(
                        &shared,
                        &sock,
                        &b.data[i][..len],
                        std::net::SocketAddr::new(ip, source_port(addr)),
                    )
                {
                    false
                } else {
                    let packet = &b.data[i][..len];
                    // With views, each datagram is answered from its client's catalog.
                    let view_catalog;
                    let catalog = if shared.config.views.is_some()
                        && let Some(ip) = source_ip(addr)
                    {
                        view_catalog = shared.catalog_for(ip, true).load();
                        &view_catalog
                    } else {
                        &catalog
                    };
                    handle(
                        &shared,
                        catalog,
                        packet,
                        || source_ip(addr),
                        &mut b.replies[i],
                        rrl_ms,
                        |key| {
                            if let Some(ip) = source_ip(addr) {
                                let peer = std::net::SocketAddr::new(ip, source_port(addr));
                                deferred(&shared, &sock, packet, peer, key);
                            }
                        },
                    )
                };
                if !replied {
                    continue;
                }
                b.reply_iov[replies] = libc::iovec {
                    iov_base: b.replies[i].as_mut_ptr().cast(),
                    iov_len: b.replies[i].len(),
                };
                let r = &mut b.reply_hdrs[replies];
                r.msg_len = 0;
                r.msg_hdr.msg_name = (&mut b.addrs[i] as *mut libc::sockaddr_storage).cast();
                r.msg_hdr.msg_namelen = b.hdrs[i].msg_hdr.msg_namelen;
                r.msg_hdr.msg_iov = &mut b.reply_iov[replies];
                r.msg_hdr.msg_iovlen = 1;
                r.msg_hdr.msg_control = null_mut();
                r.msg_hdr.msg_controllen = 0;
                r.msg_hdr.msg_flags = 0;
                replies += 1;
            }
            drop(catalog);
            let mut sent = 0;
            while sent < replies {
                // SAFETY: entries sent..replies point at live reply buffers, iovecs and
                // addresses of `b`, which do not move during the call.
                let r = unsafe {
                    libc::sendmmsg(
                        fd,
                        b.reply_hdrs[sent..].as_mut_ptr(),
                        (replies - sent) as u32,
                        0,
                    )
                };
                if r < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        // This reply cannot be sent (e.g. unreachable peer); skip it only.
                        debug!(error = %e, "UDP send failed");
                        sent += 1;
                    }
                    continue;
                }
                sent += r as usize;
            }
            b.reset(n as usize);
        }
    }
}
