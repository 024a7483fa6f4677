//! The open stream connections (TCP and DoT; HTTP and HTTPS each have their own), so that
//! when the cap is reached the one idle the longest is closed for a new one, as Knot does:
//! thousands of idle or trickling connections cannot keep a fresh client out for longer than
//! it takes to close one.
//!
//! Each connection publishes when it last finished a query (or `BUSY` while it is answering
//! one, a transfer included, so nothing is cut off mid-reply) and holds a token that asks it to
//! close. The registry is touched on accept and close only; queries do one relaxed store.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// "Answering a query now": never the one shed.
const BUSY: u64 = u64::MAX;

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
                    .saturating_sub(Duration::from_millis(at)),
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
    }
}

/// Every open connection.
pub(crate) struct Registry {
    started: Instant,
    next: AtomicU64,
    open: Mutex<HashMap<u64, (Arc<AtomicU64>, CancellationToken)>>,
}

impl Registry {
    pub(crate) fn new() -> Arc<Registry> {
        Arc::new(Registry {
            started: Instant::now(),
            next: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// Registers a new connection, idle since now, closing with `shutdown`.
    pub(crate) fn open(self: &Arc<Self>, shutdown: &CancellationToken) -> Conn {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let last = Arc::new(AtomicU64::new(self.started.elapsed().as_millis() as u64));
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
    /// is busy (or closing) it waits, and later ones wait in the kernel's backlog. False on
    /// shutdown.
    pub(crate) async fn admit(
        &self,
        cap: usize,
        shutdown: &CancellationToken,
        on_shed: impl Fn(),
    ) -> bool {
        while self.len() >= cap.max(1) {
            if self.shed_oldest() {
                on_shed();
                break;
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
                () = shutdown.cancelled() => return false,
            }
        }
        true
    }

    /// Asks the connection idle the longest to close; `false` when every one is busy.
    pub(crate) fn shed_oldest(&self) -> bool {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let oldest = open
            .values()
            .filter(|(last, close)| last.load(Ordering::Relaxed) != BUSY && !close.is_cancelled())
            .min_by_key(|(last, _)| last.load(Ordering::Relaxed));
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
        let a = r.open(&shutdown);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let b = r.open(&shutdown);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let c = r.open(&shutdown);
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
}
