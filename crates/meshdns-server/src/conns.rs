//! The open stream connections (TCP and DoT; HTTP and HTTPS each have their own), so that
//! when the cap is reached the one idle the longest is closed for a new one, as Knot does:
//! thousands of idle or trickling connections cannot keep a fresh client out for longer than
//! it takes to close one.
//!
//! Each connection publishes when it last finished a query (or `BUSY` while it is answering
//! one, a transfer included, so nothing is cut off mid-reply) and holds a token that asks it to
//! close. The registry is touched on accept and close only; queries do one relaxed store.
//!
//! A connection whose client had already sent its first message whole when it was accepted
//! (its query, a TLS ClientHello, a request's headers) is *arriving*: it is not shed for
//! [`GRACE`], while the server gets to it and its handshake finishes. Without this, a flood
//! of new connections made the accept loop shed the fresh ones it had not read yet, oldest
//! first, so a client that waited in the backlog behind the flood was closed before its query
//! was read. A client that connected and sent nothing, or only part of a message, is
//! sheddable at once, so idle, silent and trickling crowds still give way to new clients
//! without delay. When every connection is busy or arriving, new ones wait in the kernel's
//! backlog (first come, first served) until one closes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// "Answering a query now": never the one shed.
const BUSY: u64 = u64::MAX;

/// Set beside the opening stamp of a connection whose client sent its first message whole
/// (when accepted, or before its TLS handshake began) and that has not been busy since: not
/// shed within [`GRACE`] of its opening.
const ARRIVING: u64 = 1 << 62;

/// How long an arriving connection is kept from shedding: a round trip or two for a TLS
/// handshake and the query behind it. Past it, it is idle since it opened, like any other.
pub(crate) const GRACE: Duration = Duration::from_millis(500);

/// One connection's entry.
pub(crate) struct Conn {
    id: u64,
    last: Arc<AtomicU64>,
    /// Its opening stamp.
    opened: u64,
    /// Requests in progress (HTTP/2 has several at once): busy while any is.
    in_flight: AtomicUsize,
    /// Cancelled when the connection should close (shed, or shutting down).
    pub(crate) close: CancellationToken,
    registry: Arc<Registry>,
}

impl Conn {
    /// The connection is answering a query.
    pub(crate) fn busy(&self) {
        self.last.store(BUSY, Ordering::Relaxed);
    }

    /// Its client's first message came whole after it was accepted: arriving, from its
    /// opening (nothing changes once it was busy).
    pub(crate) fn arrive(&self) {
        let _ = self.last.compare_exchange(
            self.opened,
            self.opened | ARRIVING,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// The connection finished a query and waits for the next.
    pub(crate) fn idle(&self) {
        self.last.store(
            self.registry.started.elapsed().as_millis() as u64,
            Ordering::Relaxed,
        );
    }
}

impl Conn {
    /// A request starts: the connection is busy until every guard is dropped.
    pub(crate) fn request(self: &Arc<Self>) -> Busy {
        if self.in_flight.fetch_add(1, Ordering::Relaxed) == 0 {
            self.busy();
        }
        Busy(self.clone())
    }

    /// How long since the connection last finished a request (or opened); `None` while busy.
    pub(crate) fn idle_for(&self) -> Option<Duration> {
        match self.last.load(Ordering::Relaxed) {
            BUSY => None,
            at => Some(
                self.registry
                    .started
                    .elapsed()
                    .saturating_sub(Duration::from_millis(at & !ARRIVING)),
            ),
        }
    }
}

/// A request in progress on a [`Conn`].
pub(crate) struct Busy(Arc<Conn>);

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.0.idle();
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.registry
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        // One waiter: two woken together would both take the one place.
        self.registry.closed.notify_one();
    }
}

/// What a client's first message is, for telling whether it arrived whole with the
/// connection ([`arriving`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum First {
    /// A DNS query with its two-byte length (TCP, RFC 7766).
    Dns,
    /// A TLS record (the ClientHello of DoT and HTTPS).
    Tls,
    /// An HTTP/1.1 request's headers (ended by an empty line), or HTTP/2's preface.
    Http,
}

/// How much of a new connection [`arriving`] looks at: a ClientHello with post-quantum key
/// shares is under 2 KiB; a client that sent this much sent something whole.
const PEEK: usize = 4096;

/// Whether the client of a just-accepted `stream` has sent its first message whole already
/// (a query, a ClientHello, a request's headers): a peek that does not wait, so the answer is
/// what the kernel holds now. A byte or a part does not count: a client that trickles gets
/// no grace.
pub(crate) fn arriving(stream: &tokio::net::TcpStream, first: First) -> bool {
    let mut buf = [std::mem::MaybeUninit::new(0u8); PEEK];
    let Ok(n) = socket2::SockRef::from(stream).peek(&mut buf) else {
        return false;
    };
    // SAFETY: every byte of `buf` was initialised (to 0) above, and `peek` writes only
    // initialised bytes; `n` is at most `PEEK`.
    let got = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n.min(PEEK)) };
    whole(got, first)
}

/// Before a TLS handshake on a connection accepted before its client's first message came:
/// waits for it (at most [`GRACE`], or until `conn` is asked to close) and makes `conn`
/// arriving if it came whole. An idle listener accepts at once, ahead of the ClientHello; the
/// handshake's round trips are what the grace is for.
pub(crate) async fn first_message(stream: &tokio::net::TcpStream, conn: &Conn, first: First) {
    if conn.last.load(Ordering::Relaxed) != conn.opened {
        return; // arriving already
    }
    tokio::select! {
        r = tokio::time::timeout(GRACE, stream.readable()) => {
            if matches!(r, Ok(Ok(()))) && arriving(stream, first) {
                conn.arrive();
            }
        }
        () = conn.close.cancelled() => {}
    }
}

/// Whether `got`, the start of what a client sent, holds its first message whole (or fills
/// the peek: more than any first message needs).
fn whole(got: &[u8], first: First) -> bool {
    let framed = |head: usize, len_at: usize| {
        got.len() >= head
            && got.len() >= head + usize::from(u16::from_be_bytes([got[len_at], got[len_at + 1]]))
    };
    got.len() >= PEEK
        || match first {
            First::Dns => framed(2, 0),
            First::Tls => framed(5, 3),
            // HTTP/2's preface has its empty line too.
            First::Http => got.windows(4).any(|w| w == b"\r\n\r\n"),
        }
}

/// Every open connection.
pub(crate) struct Registry {
    started: Instant,
    next: AtomicU64,
    open: Mutex<HashMap<u64, (Arc<AtomicU64>, CancellationToken)>>,
    /// Woken when a connection closes, for [`Registry::admit`] waiting at the cap.
    closed: tokio::sync::Notify,
}

impl Registry {
    pub(crate) fn new() -> Arc<Registry> {
        Arc::new(Registry {
            started: Instant::now(),
            next: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
            closed: tokio::sync::Notify::new(),
        })
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Registers a new connection, idle since now (kept from shedding for [`GRACE`] if
    /// `arriving`: its client has sent its first message whole), closing with `shutdown`.
    pub(crate) fn open(self: &Arc<Self>, shutdown: &CancellationToken, arriving: bool) -> Conn {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let opened = self.now();
        let last = Arc::new(AtomicU64::new(opened | if arriving { ARRIVING } else { 0 }));
        let close = shutdown.child_token();
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, (last.clone(), close.clone()));
        Conn {
            id,
            last,
            opened,
            in_flight: AtomicUsize::new(0),
            close,
            registry: self.clone(),
        }
    }

    /// Connections open (those asked to close included, until they have).
    pub(crate) fn len(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Waits until a new connection may be served under `cap`. At the cap the connection idle
    /// the longest is asked to close (`on_shed` counts it) and the new one is served at once:
    /// the count goes past the cap only by connections already closing. When every connection
    /// is busy, arriving (within its [`GRACE`]) or closing, it waits until one closes or may be
    /// shed, and later ones wait in the kernel's backlog. False on shutdown.
    pub(crate) async fn admit(
        &self,
        cap: usize,
        shutdown: &CancellationToken,
        on_shed: impl Fn(),
    ) -> bool {
        loop {
            let closed = self.closed.notified();
            tokio::pin!(closed);
            // Registered before looking, so a close between the look and the wait wakes it.
            closed.as_mut().enable();
            if self.len() < cap.max(1) {
                return true;
            }
            if self.shed_oldest() {
                on_shed();
                return true;
            }
            tokio::select! {
                () = closed => {}
                // Busy ones finishing and arriving ones' grace ending are not signalled.
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
                () = shutdown.cancelled() => return false,
            }
        }
    }

    /// Asks the connection idle the longest to close; `false` when every one is busy or
    /// arriving.
    pub(crate) fn shed_oldest(&self) -> bool {
        let now = self.now();
        let grace = GRACE.as_millis() as u64;
        let sheddable = |last: u64| {
            last != BUSY && (last & ARRIVING == 0 || now.saturating_sub(last & !ARRIVING) >= grace)
        };
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let oldest = open
            .values()
            .filter(|(last, close)| {
                sheddable(last.load(Ordering::Relaxed)) && !close.is_cancelled()
            })
            .min_by_key(|(last, _)| last.load(Ordering::Relaxed) & !ARRIVING);
        match oldest {
            Some((_, close)) => {
                close.cancel();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_idle_connection_is_shed_and_busy_ones_never() {
        let shutdown = CancellationToken::new();
        let r = Registry::new();
        let a = r.open(&shutdown, false);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let b = r.open(&shutdown, false);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let c = r.open(&shutdown, false);
        std::thread::sleep(std::time::Duration::from_millis(5));
        b.idle();
        a.busy();
        // a is busy; b finished a query after c opened, so c is idle the longest.
        assert!(r.shed_oldest());
        assert!(c.close.is_cancelled() && !a.close.is_cancelled() && !b.close.is_cancelled());
        assert!(r.shed_oldest());
        assert!(b.close.is_cancelled());
        assert!(!r.shed_oldest(), "only a busy one left");
        drop((b, c));
        assert_eq!(r.open.lock().unwrap().len(), 1);
        shutdown.cancel();
        assert!(a.close.is_cancelled(), "shutdown closes all");
    }

    #[test]
    fn an_arriving_connection_is_kept_for_its_grace_then_is_idle_since_it_opened() {
        let shutdown = CancellationToken::new();
        let r = Registry::new();
        let arriving = r.open(&shutdown, true);
        std::thread::sleep(Duration::from_millis(5));
        let silent = r.open(&shutdown, false);
        assert!(r.shed_oldest());
        assert!(
            silent.close.is_cancelled(),
            "the newer silent one goes first"
        );
        assert!(!arriving.close.is_cancelled());
        assert!(!r.shed_oldest(), "within its grace, the arriving one stays");
        let idle = arriving.idle_for().unwrap();
        assert!(idle >= Duration::from_millis(5) && idle < GRACE, "{idle:?}");

        // One whose first message came after it was accepted: arriving from its opening.
        let late = r.open(&shutdown, false);
        late.arrive();
        assert!(!r.shed_oldest(), "{:?}", late.idle_for());
        let busy = r.open(&shutdown, false);
        busy.busy();
        busy.arrive();
        assert!(busy.idle_for().is_none(), "busy stays busy");
        drop((late, busy));

        // A query finished: an ordinary idle connection from then on.
        let served = r.open(&shutdown, true);
        served.idle();
        assert!(r.shed_oldest());
        assert!(served.close.is_cancelled() && !arriving.close.is_cancelled());

        // Past its grace it is idle since it opened: before a newer silent one.
        std::thread::sleep(GRACE);
        let newer = r.open(&shutdown, false);
        assert!(r.shed_oldest());
        assert!(arriving.close.is_cancelled() && !newer.close.is_cancelled());
    }

    #[test]
    fn only_a_whole_first_message_makes_a_connection_arriving() {
        use First::*;
        for (got, first, expected) in [
            (&b""[..], Dns, false),
            (b"\x00", Dns, false),
            (b"\x00\x03ab", Dns, false),
            (b"\x00\x03abc", Dns, true),
            (b"\x16\x03\x01\x00", Tls, false),
            (b"\x16\x03\x01\x00\x02a", Tls, false),
            (b"\x16\x03\x01\x00\x02ab", Tls, true),
            (b"GET / HTTP/1.1\r\nHost: m\r\n", Http, false),
            (b"GET / HTTP/1.1\r\nHost: m\r\n\r\n", Http, true),
            (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", Http, true),
        ] {
            assert_eq!(whole(got, first), expected, "{first:?} {got:?}");
        }
        // A client that sent more than the peek holds sent something whole.
        assert!(whole(&[0xff; PEEK], Dns));
    }

    #[tokio::test]
    async fn a_close_wakes_admission_waiting_at_the_cap() {
        let shutdown = CancellationToken::new();
        let r = Registry::new();
        let busy = r.open(&shutdown, false);
        busy.busy();
        let closed = r.closed.notified();
        drop(busy);
        tokio::time::timeout(Duration::from_secs(10), closed)
            .await
            .expect("the close woke the waiter");

        let busy = r.open(&shutdown, false);
        busy.busy();
        let waiting = {
            let (r, shutdown) = (r.clone(), shutdown.clone());
            tokio::spawn(async move { r.admit(1, &shutdown, || panic!("nothing to shed")).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "the only connection is busy");
        drop(busy);
        assert!(waiting.await.unwrap(), "admitted once it closed");
    }
}
