//! The open stream connections (TCP and DoT; HTTP and HTTPS each have their own), so that
//! when the cap is reached the one idle the longest is closed for a new one, as Knot does:
//! thousands of idle or trickling connections cannot keep a fresh client out for longer than
//! it takes to close one.
//!
//! Each connection publishes when it last finished a query (or `BUSY` while it is answering
//! one, a transfer included, so nothing is cut off mid-reply) and holds a token that asks it to
//! close. The registry is touched on accept and close only; queries do one relaxed store.
//!
//! A connection whose client had already sent something when it was accepted (its query, a
//! TLS ClientHello) is *arriving*: it is not shed for [`GRACE`], while the server gets to it
//! and its handshake finishes. Without this, a flood of new connections made the accept loop
//! shed the fresh ones it had not read yet, oldest first, so a client that waited in the
//! backlog behind the flood was closed before its query was read. A client that connected and
//! sent nothing is sheddable at once, so idle and silent crowds still give way to new clients
//! without delay. When every connection is busy or arriving, new ones wait in the kernel's
//! backlog (first come, first served) until one closes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// "Answering a query now": never the one shed.
const BUSY: u64 = u64::MAX;

/// Set beside the stamp of a connection that had bytes waiting when it was accepted and has
/// not finished a query since: not shed within [`GRACE`] of its opening.
const ARRIVING: u64 = 1 << 62;

/// How long an arriving connection is kept from shedding: a round trip or two for a TLS
/// handshake and the query behind it. Past it, it is idle since it opened, like any other.
pub(crate) const GRACE: Duration = Duration::from_millis(500);

/// One connection's entry.
pub(crate) struct Conn {
    id: u64,
    last: Arc<AtomicU64>,
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
        self.registry.closed.notify_waiters();
    }
}

/// Whether the client of a just-accepted `stream` has sent something already (a query, a
/// ClientHello): a peek that does not wait, so the answer is what the kernel holds now.
pub(crate) fn arriving(stream: &tokio::net::TcpStream) -> bool {
    let mut byte = [std::mem::MaybeUninit::<u8>::uninit()];
    matches!(socket2::SockRef::from(stream).peek(&mut byte), Ok(n) if n > 0)
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
    /// `arriving`: its client has sent something), closing with `shutdown`.
    pub(crate) fn open(self: &Arc<Self>, shutdown: &CancellationToken, arriving: bool) -> Conn {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let stamp = self.now() | if arriving { ARRIVING } else { 0 };
        let last = Arc::new(AtomicU64::new(stamp));
        let close = shutdown.child_token();
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, (last.clone(), close.clone()));
        Conn {
            id,
            last,
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
        assert_eq!(arriving.idle_for().map(|d| d < GRACE), Some(true));

        // A query finished: an ordinary idle connection from then on.
        let served = r.open(&shutdown, true);
        served.idle();
        assert!(r.shed_oldest());
        assert!(served.close.is_cancelled() && !arriving.close.is_cancelled());

        std::thread::sleep(GRACE);
        assert!(r.shed_oldest(), "past its grace");
        assert!(arriving.close.is_cancelled());
    }

    #[tokio::test]
    async fn admission_at_the_cap_waits_for_a_close() {
        let shutdown = CancellationToken::new();
        let r = Registry::new();
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
