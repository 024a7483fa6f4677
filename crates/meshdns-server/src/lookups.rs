//! Answers that wait for a lookup elsewhere.
//!
//! A pkarr origin whose overlay has a cache (`--pkarr-dht`) answers for keys nobody published
//! here from what the Mainline DHT holds. [`meshdns_zone::answer`] stays pure: it answers from
//! what is cached and reports, in [`Outcome::touched`], the key it lacked or used. Here the
//! server acts on that: a lacked key ([`Touch::Miss`]) is looked up (or the lookup in flight
//! joined), then the query is answered again from the catalog, which now holds the key's
//! records or its absence; a lookup that fails answers SERVFAIL. A used key ([`Touch::Hit`])
//! is reported so the cache can refresh it in the background.
//!
//! UDP threads never wait: a datagram whose answer needs a lookup is handed to a task on the
//! runtime, which sends the reply from the same socket when it is decided. The stream
//! transports (TCP, DoT, DoH) await it in their own task.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use meshdns_zone::{AnswerConfig, Catalog, Key, Outcome, Touch, Transport, answer};

/// Where keys missing from a cache are looked up.
pub trait Lookups: Send + Sync {
    /// An answer used `key` from the cache (it may be refreshed in the background).
    fn hit(&self, key: &Key);

    /// Looks `key` up for a query from `client`, or joins the lookup in flight. Resolves to
    /// `true` when the catalog now decides the answer (the key's records, or its absence,
    /// cached), `false` when the lookup failed or was refused by a bound (SERVFAIL).
    fn lookup(
        &self,
        key: Key,
        client: Option<IpAddr>,
    ) -> Pin<Box<dyn Future<Output = bool> + Send>>;
}

impl std::fmt::Debug for dyn Lookups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lookups")
    }
}

/// What a first answer asks of the lookups: nothing, or to wait for `key`.
pub(crate) fn needs_lookup(lookups: Option<&Arc<dyn Lookups>>, outcome: &Outcome) -> Option<Key> {
    let lookups = lookups?;
    match outcome.touched? {
        Touch::Miss(key) => Some(key),
        Touch::Hit(key) => {
            lookups.hit(&key);
            None
        }
    }
}

/// A query as answered: from which catalog, with which settings.
pub(crate) struct Asked<'a> {
    pub(crate) catalog: &'a arc_swap::ArcSwap<Catalog>,
    pub(crate) packet: &'a [u8],
    pub(crate) transport: Transport,
    pub(crate) config: &'a AnswerConfig,
}

/// The second answer, once `key`'s lookup ended: from the catalog (as it is now) when the
/// lookup decided it, SERVFAIL otherwise. One lookup per query: a further miss (a CNAME into
/// another key, or the key evicted meanwhile) is SERVFAIL too, never an NXDOMAIN for a name
/// that may exist (the resolver's retry finds the first key cached).
pub(crate) async fn answer_after(
    lookups: &Arc<dyn Lookups>,
    key: Key,
    client: Option<IpAddr>,
    asked: Asked<'_>,
    out: &mut Vec<u8>,
) -> Outcome {
    if lookups.lookup(key, client).await {
        let outcome = answer(
            &asked.catalog.load(),
            asked.packet,
            asked.transport,
            asked.config,
            out,
        );
        if !matches!(outcome.touched, Some(Touch::Miss(_))) {
            return outcome;
        }
    }
    meshdns_zone::answer_servfail(asked.packet, asked.transport, asked.config, out)
}
