//! Records published per key (pkarr), changed one key at a time while queries read them.
//!
//! A pkarr origin serves, under `<z32>.<origin>`, what the holder of key `<z32>` last
//! published. Compiling those into the origin's [`Zone`] would make every publish rebuild every
//! key's records; instead each key's records are compiled alone into a [`Published`] and kept in
//! an [`Overlay`], a concurrent hash map (papaya: lock-free, readers never wait for writers and
//! never allocate) from the 32-byte key to its records. A publish replaces one entry: O(1) in
//! the number of keys.
//!
//! A [`ZoneView`] answers for a zone and its overlay together, with the rules one merged zone
//! would have: the zone's own data wins a (name, type) both give, and a CNAME in the zone hides
//! published data at its name; a zone cut above a name refers; published names and the empty
//! non-terminals above them exist (so their siblings are NXDOMAIN and a wildcard's closest
//! encloser is found through them). Each answer reads the catalog once and every entry it touches
//! under one guard: it sees one version of each key, never half of a publish.
//!
//! A [`Published`] is one allocation: `stamp u64 | count u32 |` then per node
//! `prefix_len u8 | prefix | data_len u16 | data`, where `prefix` is the node's labels above the
//! key label (wire format without the root; empty for the key's own name) and `data` is the
//! node's RRsets in the layout [`Zone`] uses.

use hashbrown::DefaultHashBuilder;
use papaya::LocalGuard;

use crate::name::label_offsets;
use crate::rdata::RType;

use super::compact::Zone;
use super::view::{Lookup, Node, RRset};

/// The key of a published zone: an ed25519 public key.
pub type Key = [u8; 32];

/// One key's published records, compiled.
#[derive(Clone, PartialEq, Eq)]
pub struct Published {
    /// Shared: a transfer keeps the version it sends while newer publishes replace it.
    blob: std::sync::Arc<[u8]>,
}

impl std::fmt::Debug for Published {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Published")
            .field("stamp", &self.stamp())
            .field("records", &self.record_count())
            .finish()
    }
}

const HEAD: usize = 12;

impl Published {
    /// Compiles one key's records: `(prefix, type, ttl, rdata)` with `prefix` the owner's labels
    /// above the key label, lower-cased wire format without the root. Each RRset gets the lowest
    /// TTL given (RFC 2181 §5.2) and each RDATA once; names between an owner and the key get
    /// empty nodes. `stamp` is kept beside them (the packet's timestamp, for the publisher).
    pub fn build<'r>(
        stamp: u64,
        records: impl IntoIterator<Item = (&'r [u8], RType, u32, &'r [u8])>,
    ) -> Published {
        let mut records: Vec<_> = records.into_iter().collect();
        records.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        // Every node's RRsets one after another in `data`, each node (prefix, where its data
        // starts): a handful of allocations per key, not a few per RRset (loading a million
        // stored packets at start spent a third of its time allocating).
        let mut data: Vec<u8> = Vec::with_capacity(records.iter().map(|r| 10 + r.3.len()).sum());
        let mut nodes: Vec<(&[u8], usize)> = Vec::with_capacity(4);
        let mut count = 0u32;
        let mut i = 0;
        while i < records.len() {
            let (prefix, rtype) = (records[i].0, records[i].1);
            let end = i + records[i..]
                .iter()
                .take_while(|r| r.0 == prefix && r.1 == rtype)
                .count();
            let set = &records[i..end];
            i = end;
            let ttl = set.iter().map(|r| r.2).min().unwrap_or(0);
            if nodes.last().is_none_or(|n| n.0 != prefix) {
                nodes.push((prefix, data.len()));
            }
            data.extend_from_slice(&rtype.0.to_be_bytes());
            data.extend_from_slice(&ttl.to_be_bytes());
            // The set's size goes here once its records are written.
            let at = data.len();
            data.extend_from_slice(&[0, 0]);
            let mut n = 0usize;
            // Each RDATA once (its first), none longer than its length field holds.
            for (j, r) in set.iter().enumerate() {
                if r.3.len() <= usize::from(u16::MAX) && !set[..j].iter().any(|e| e.3 == r.3) {
                    data.extend_from_slice(&(r.3.len() as u16).to_be_bytes());
                    data.extend_from_slice(r.3);
                    n += 1;
                }
            }
            data[at..at + 2].copy_from_slice(&(n as u16).to_be_bytes());
            count += n as u32;
        }
        let node_data = |k: usize| {
            let end = nodes.get(k + 1).map_or(data.len(), |n| n.1);
            &data[nodes[k].1..end]
        };
        // Empty non-terminals: every name from an owner up to the key's own name.
        let mut ents: Vec<&[u8]> = Vec::with_capacity(nodes.len() + 1);
        for (prefix, _) in &nodes {
            for o in label_offsets_rel(prefix).skip(1) {
                ents.push(&prefix[o..]);
            }
            ents.push(&[]);
        }
        ents.sort_unstable();
        ents.dedup();
        ents.retain(|p| !nodes.iter().any(|n| n.0 == *p));
        // At most this much (less only when a name or its data is too long to keep).
        let most = HEAD
            + data.len()
            + nodes.iter().map(|n| 3 + n.0.len()).sum::<usize>()
            + ents.iter().map(|p| 3 + p.len()).sum::<usize>();
        let mut blob = Vec::with_capacity(most);
        blob.extend_from_slice(&stamp.to_be_bytes());
        blob.extend_from_slice(&count.to_be_bytes());
        let mut put = |prefix: &[u8], data: &[u8]| {
            if prefix.len() <= 255 && data.len() <= usize::from(u16::MAX) {
                blob.push(prefix.len() as u8);
                blob.extend_from_slice(prefix);
                blob.extend_from_slice(&(data.len() as u16).to_be_bytes());
                blob.extend_from_slice(data);
            }
        };
        for (k, (prefix, _)) in nodes.iter().enumerate() {
            put(prefix, node_data(k));
        }
        for prefix in ents {
            put(prefix, &[]);
        }
        Published { blob: blob.into() }
    }

    /// The stamp given at build (the packet's timestamp).
    pub fn stamp(&self) -> u64 {
        u64::from_be_bytes(self.blob[..8].try_into().expect("header"))
    }

    /// Number of records.
    pub fn record_count(&self) -> usize {
        u32::from_be_bytes(self.blob[8..12].try_into().expect("header")) as usize
    }

    /// Bytes held.
    pub fn data_bytes(&self) -> usize {
        self.blob.len()
    }

    /// Each name with records: its prefix (the labels above the key label, wire format without
    /// the root) and its RRsets.
    pub fn rrsets(&self) -> impl Iterator<Item = (&[u8], impl Iterator<Item = RRset<'_>>)> {
        self.nodes()
            .filter(|(_, data)| !data.is_empty())
            .map(|(prefix, data)| (prefix, Node::published(prefix, data).rrsets()))
    }

    /// Each node: its prefix and RRset data.
    fn nodes(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut rest = &self.blob[HEAD..];
        std::iter::from_fn(move || {
            let plen = usize::from(*rest.first()?);
            let prefix = &rest[1..1 + plen];
            let dlen = usize::from(u16::from_be_bytes([rest[1 + plen], rest[2 + plen]]));
            let data = &rest[3 + plen..3 + plen + dlen];
            rest = &rest[3 + plen + dlen..];
            Some((prefix, data))
        })
    }

    /// The data of the node at `prefix` (empty for an empty non-terminal), if it exists.
    fn node(&self, prefix: &[u8]) -> Option<&[u8]> {
        if self.record_count() == 0 {
            return None;
        }
        self.nodes().find(|(p, _)| *p == prefix).map(|(_, d)| d)
    }
}

/// Offsets of the label starts in a relative wire name (no root byte).
fn label_offsets_rel(prefix: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        let here = pos;
        let len = usize::from(*prefix.get(here)?);
        pos = here + 1 + len;
        Some(here)
    })
}

/// Every key's published records, shared by the snapshots that serve them.
///
/// With a cache ([`Overlay::with_cache`]), keys found elsewhere (the Mainline DHT) are kept
/// apart from the published ones: served only where no key published here, never counted in
/// [`Overlay::len`] nor listed by [`Overlay::entries`] (so never transferred), and a reader
/// notes the cached key an answer used or lacked ([`OverlayReader::touched`]), so the server
/// can look it up before answering.
pub struct Overlay {
    map: papaya::HashMap<Key, Published, DefaultHashBuilder>,
    cache: Option<papaya::HashMap<Key, Published, DefaultHashBuilder>>,
}

/// What an answer read of the cache, when the overlay has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touch {
    /// The key was in the cache (found, or cached as absent).
    Hit(Key),
    /// The key was neither published here nor cached: its lookup would decide the answer.
    Miss(Key),
}

impl std::fmt::Debug for Overlay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Overlay")
            .field("keys", &self.len())
            .finish()
    }
}

impl Default for Overlay {
    fn default() -> Self {
        Overlay::new()
    }
}

impl Overlay {
    /// An empty overlay.
    pub fn new() -> Overlay {
        Overlay {
            map: map(),
            cache: None,
        }
    }

    /// An empty overlay with a cache of keys found elsewhere.
    pub fn with_cache() -> Overlay {
        Overlay {
            map: map(),
            cache: Some(map()),
        }
    }

    /// Whether this overlay has a cache.
    pub fn has_cache(&self) -> bool {
        self.cache.is_some()
    }

    /// Serves `published` for `key` where nothing is published for it (records found
    /// elsewhere; none: cached as absent). No-op without a cache.
    pub fn cache_insert(&self, key: Key, published: Published) {
        if let Some(c) = &self.cache {
            c.pin().insert(key, published);
        }
    }

    /// Drops `key` from the cache.
    pub fn cache_remove(&self, key: &Key) {
        if let Some(c) = &self.cache {
            c.pin().remove(key);
        }
    }

    /// Keys in the cache.
    pub fn cache_len(&self) -> usize {
        self.cache.as_ref().map_or(0, papaya::HashMap::len)
    }

    /// Makes room for `additional` more keys (before a bulk load).
    pub fn reserve(&self, additional: usize) {
        self.map.pin().reserve(additional);
    }

    /// Serves `published` for `key` from now on, replacing what was there.
    pub fn insert(&self, key: Key, published: Published) {
        self.map.pin().insert(key, published);
    }

    /// Stops serving anything for `key`.
    pub fn remove(&self, key: &Key) {
        self.map.pin().remove(key);
    }

    /// The stamp of what `key` has published, if anything.
    pub fn stamp(&self, key: &Key) -> Option<u64> {
        self.map.pin().get(key).map(Published::stamp)
    }

    /// Every key with its records (shared, not copied).
    pub fn entries(&self) -> Vec<(Key, Published)> {
        self.map
            .pin()
            .iter()
            .map(|(k, p)| (*k, p.clone()))
            .collect()
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no key has published.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// A read guard: entries read through it stay valid (and unchanged) while it lives.
    pub fn reader(&self) -> OverlayReader<'_> {
        OverlayReader {
            overlay: self,
            guard: self.map.guard(),
            cache: self.cache.as_ref().map(|c| (c, c.guard())),
            touched: std::cell::Cell::new(None),
        }
    }
}

/// A map that finishes each resize at once, on the writer that started it. papaya's default
/// copies 64 slots at a time, and only when a write meets an entry already copied: a map that
/// grows to a million keys and then only has its entries replaced (a relay's steady state)
/// stayed half-copied for minutes, every read checking two tables and every replacement of a
/// copied key waiting on the copy (`perf` of a fleet replica after a fill of a million: 4–8% of
/// its CPU per publish, for over 60,000 publishes). The copy is the same work either way; done
/// at once, it is a pause of the one writer (about a tenth of a second at a million keys, once
/// per doubling), and readers keep reading the old table until the new one replaces it.
fn map() -> papaya::HashMap<Key, Published, DefaultHashBuilder> {
    papaya::HashMap::builder()
        .hasher(DefaultHashBuilder::default())
        .resize_mode(papaya::ResizeMode::Blocking)
        .build()
}

/// Reads an [`Overlay`] under one guard (one per map).
pub struct OverlayReader<'a> {
    overlay: &'a Overlay,
    guard: LocalGuard<'a>,
    cache: Option<(
        &'a papaya::HashMap<Key, Published, DefaultHashBuilder>,
        LocalGuard<'a>,
    )>,
    touched: std::cell::Cell<Option<Touch>>,
}

impl OverlayReader<'_> {
    /// What `key` has published here, else what the cache holds for it.
    pub fn get(&self, key: &Key) -> Option<&Published> {
        if let Some(p) = self.overlay.map.get(key, &self.guard) {
            return Some(p);
        }
        let (cache, guard) = self.cache.as_ref()?;
        let found = cache.get(key, guard);
        // A miss outranks a hit: it is what the answer waits for.
        match (found, self.touched.get()) {
            (None, _) => self.touched.set(Some(Touch::Miss(*key))),
            (Some(_), None) => self.touched.set(Some(Touch::Hit(*key))),
            (Some(_), Some(_)) => {}
        }
        found
    }

    /// The cached key this reader's answer used or lacked, if any (the last miss, else the
    /// first hit).
    pub fn touched(&self) -> Option<Touch> {
        self.touched.get()
    }
}

const Z32: &[u8; 32] = b"ybndrfg8ejkmcpqxot1uwisza345h769";

/// Each byte's z-base-32 value, 0xFF for bytes outside the alphabet: a label is decoded on
/// every query under a pkarr origin.
const Z32_VALUE: [u8; 256] = {
    let mut t = [0xFF; 256];
    let mut i = 0;
    while i < 32 {
        t[Z32[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// The z-base-32 spelling of a key (52 characters), as pkarr names keys.
pub fn label_of_key(key: &Key) -> [u8; 52] {
    let mut out = [0u8; 52];
    let (mut acc, mut bits, mut at) = (0u32, 0u32, 0usize);
    for &b in key {
        acc = (acc << 8 | u32::from(b)) & 0xFFFF;
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out[at] = Z32[(acc >> bits) as usize & 31];
            at += 1;
        }
    }
    out[at] = Z32[(acc << (5 - bits)) as usize & 31];
    out
}

/// Decodes a z-base-32 label of 52 characters into the 32-byte key it spells (lower case, as
/// query names are compared).
pub fn key_of_label(label: &[u8]) -> Option<Key> {
    let label: &[u8; 52] = label.try_into().ok()?;
    // Eight characters are 40 bits, five bytes: six such groups, then four characters for
    // the last two bytes and four bits that must be zero. Each group's values are or-ed
    // together to check them at once (every valid value is below 32, a refused byte 0xFF).
    let mut out = [0u8; 32];
    for (chars, bytes) in label.chunks_exact(8).zip(out.chunks_exact_mut(5)) {
        let chars: &[u8; 8] = chars.try_into().ok()?;
        let v = chars.map(|c| u64::from(Z32_VALUE[usize::from(c)]));
        if (v[0] | v[1] | v[2] | v[3] | v[4] | v[5] | v[6] | v[7]) > 31 {
            return None;
        }
        let acc = v[0] << 35
            | v[1] << 30
            | v[2] << 25
            | v[3] << 20
            | v[4] << 15
            | v[5] << 10
            | v[6] << 5
            | v[7];
        bytes.copy_from_slice(&acc.to_be_bytes()[3..]);
    }
    let v: [u64; 4] = [48, 49, 50, 51].map(|i| u64::from(Z32_VALUE[usize::from(label[i])]));
    // 20 bits: 16 for the key's last two bytes, then 4 that must be zero.
    if (v[0] | v[1] | v[2] | v[3]) > 31 || v[3] & 0xF != 0 {
        return None;
    }
    let acc = v[0] << 15 | v[1] << 10 | v[2] << 5 | v[3];
    out[30..].copy_from_slice(&((acc >> 4) as u16).to_be_bytes());
    Some(out)
}

/// A zone together with the keys published under its origin: what one answer reads.
#[derive(Clone, Copy)]
pub struct ZoneView<'n> {
    zone: &'n Zone,
    overlay: Option<&'n OverlayReader<'n>>,
    serial: u32,
}

impl<'n> ZoneView<'n> {
    /// A view of `zone` and, when given, the keys published under it.
    pub fn new(zone: &'n Zone, overlay: Option<&'n OverlayReader<'n>>) -> ZoneView<'n> {
        let serial = zone.soa().serial;
        ZoneView {
            zone,
            overlay,
            serial,
        }
    }

    /// This view serving `serial` as its SOA serial (the catalog's, see
    /// [`super::Catalog::set_serial`]).
    pub fn with_serial(self, serial: u32) -> ZoneView<'n> {
        ZoneView { serial, ..self }
    }

    /// The SOA serial served.
    pub fn serial(&self) -> u32 {
        self.serial
    }

    /// The zone's own data.
    pub fn zone(&self) -> &'n Zone {
        self.zone
    }

    /// The key a name under the origin falls under and the name's prefix above the key label,
    /// with what that key published, when it published anything.
    fn published(&self, name: &'n [u8]) -> Option<(&'n [u8], &'n Published)> {
        let overlay = self.overlay?;
        let rel_len = name.len().checked_sub(self.zone.origin().wire().len())?;
        let key_at = label_offsets(name).take_while(|&o| o < rel_len).last()?;
        let key = key_of_label(&name[key_at + 1..rel_len])?;
        let published = overlay.get(&key).filter(|p| p.record_count() > 0)?;
        Some((&name[..key_at], published))
    }

    /// The node at exactly `name`, the zone's and the published data merged.
    #[inline]
    pub fn node(&self, name: &'n [u8]) -> Option<Node<'n>> {
        // A zone without a pkarr origin (most) costs the check of one field.
        if self.overlay.is_none() {
            return self.zone.node(name);
        }
        let extra = self.published(name).and_then(|(prefix, p)| p.node(prefix));
        self.merged(name, extra)
    }

    /// The zone's node at `name`, with `extra` (published data there) beside it.
    fn merged(&self, name: &'n [u8], extra: Option<&'n [u8]>) -> Option<Node<'n>> {
        let base = self.zone.node(name);
        let Some(extra) = extra else { return base };
        Some(match base {
            Some(b) => b.with_extra(extra),
            None => Node::published(name, extra),
        })
    }

    /// Looks `name` up (lower-cased wire format at or below the origin). The key is found once:
    /// every name the lookup tries (the name, then its ancestors for a wildcard's closest
    /// encloser) is the name or a suffix of it, under the same key or above it.
    #[inline]
    pub fn lookup(&self, name: &'n [u8]) -> Lookup<'n> {
        if self.overlay.is_none() {
            return self.zone.lookup(name);
        }
        self.lookup_published(name)
    }

    /// [`ZoneView::lookup`] under a pkarr origin.
    fn lookup_published(&self, name: &'n [u8]) -> Lookup<'n> {
        let Some((prefix, published)) = self.published(name) else {
            return self.zone.lookup(name);
        };
        // `<key>.<origin>`: names at least this long are under the key.
        let key_name_len = name.len() - prefix.len();
        self.zone.lookup_with(name, |n| {
            let extra = n
                .len()
                .checked_sub(key_name_len)
                .and_then(|at| published.node(&n[..at]));
            self.merged(n, extra)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each RRset once per (name, type) with its lowest TTL and each RDATA once; the names
    /// between an owner and the key are empty nodes; the record count counts what is kept.
    #[test]
    fn build_merges_sets_drops_repeats_and_adds_the_names_between() {
        let iroh = b"\x05_iroh".as_slice();
        let deep = b"\x04deep\x05_iroh\x02er".as_slice();
        let p = Published::build(
            7,
            [
                (iroh, RType::TXT, 300, b"\x01b".as_slice()),
                (b"".as_slice(), RType::A, 60, b"\xc0\x00\x02\x01".as_slice()),
                (iroh, RType::TXT, 30, b"\x01a".as_slice()),
                (iroh, RType::TXT, 90, b"\x01b".as_slice()),
                (deep, RType::TXT, 10, b"\x01x".as_slice()),
                (iroh, RType::AAAA, 5, [0u8; 16].as_slice()),
            ],
        );
        assert_eq!((p.stamp(), p.record_count()), (7, 5));
        type Set = (Vec<u8>, RType, u32, Vec<Vec<u8>>);
        let sets: Vec<Set> = p
            .rrsets()
            .flat_map(|(prefix, sets)| {
                sets.map(move |s| {
                    let rds = s.rdatas().map(<[u8]>::to_vec).collect();
                    (prefix.to_vec(), s.rtype, s.ttl, rds)
                })
            })
            .collect();
        assert_eq!(
            sets,
            vec![
                (vec![], RType::A, 60, vec![b"\xc0\x00\x02\x01".to_vec()]),
                (deep.to_vec(), RType::TXT, 10, vec![b"\x01x".to_vec()]),
                (
                    iroh.to_vec(),
                    RType::TXT,
                    30,
                    vec![b"\x01b".to_vec(), b"\x01a".to_vec()]
                ),
                (iroh.to_vec(), RType::AAAA, 5, vec![vec![0u8; 16]]),
            ]
        );
        // `_iroh.er` and `er` (between `deep._iroh.er` and the key) exist, empty; the key's
        // name has data.
        assert_eq!(p.node(b"\x05_iroh\x02er"), Some(&[][..]));
        assert_eq!(p.node(b"\x02er"), Some(&[][..]));
        assert!(p.node(b"").is_some_and(|d| !d.is_empty()));
        assert_eq!(p.node(b"\x03nope"), None);
        assert_eq!(p.nodes().count(), 5);
        // Nothing published: no node at all.
        let empty = Published::build(1, std::iter::empty());
        assert_eq!((empty.record_count(), empty.node(b"")), (0, None));
    }
}
