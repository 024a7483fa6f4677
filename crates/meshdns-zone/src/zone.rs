//! Zones and the catalog: immutable snapshots built aside and then served.
//!
//! A [`Zone`] is stored compactly, close to the wire: every owner name (lower-cased wire
//! format) sits in one byte arena, every RRset in another, in the layout the answer writer
//! copies from, and a hash table of node ids (seeded foldhash, so query names cannot be chosen
//! to collide) finds a name. Every name between an owner and the apex also gets a node, empty
//! when nothing is there, so one hash lookup tells an empty non-terminal (NODATA, RFC 8020)
//! from a name that does not exist (NXDOMAIN). A 100k-host zone takes a few tens of bytes per
//! record instead of a heap object per name and per record.
//!
//! The [`Catalog`] picks the zone with the longest origin that is a suffix of the query name
//! (RFC 1034 §4.3.2 step 2). Zones are shared between snapshots by `Arc`, so a reload that
//! changes one zone leaves the others untouched.
//!
//! Snapshots are built by [`CatalogBuilder`], which is where every rule about what may be served
//! lives: names outside their zone, CNAME beside other data (RFC 1034 §3.6.2, RFC 2181 §10.1),
//! one source per (name, type), and the SOA/NS every apex must have.
//!
//! Node data layout: RRsets ordered by type, each `type u16 | ttl u32 | count u16`, then
//! `count` × `rdlength u16 | rdata` with names uncompressed.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::name::{Name, is_wire_subdomain, label_offsets};
use crate::rdata::{RData, RType, Soa};
use crate::records::Records;

/// One record as a source hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Absolute owner name.
    pub name: Name,
    /// Time to live in seconds.
    pub ttl: u32,
    /// The data; its type is the record's type.
    pub data: RData,
}

/// All records of one type at one name (RFC 2181 §5), in wire form.
#[derive(Debug, Clone, Copy)]
pub struct RRset<'z> {
    /// The records' type.
    pub rtype: RType,
    /// One TTL for the whole set (the lowest given, RFC 2181 §5.2).
    pub ttl: u32,
    count: u16,
    records: &'z [u8],
}

impl<'z> RRset<'z> {
    /// Number of records.
    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    /// Whether the set is empty (never, for a stored set).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Each record's RDATA in uncompressed wire form.
    pub fn rdatas(&self) -> impl Iterator<Item = &'z [u8]> + 'z {
        let mut rest = self.records;
        std::iter::from_fn(move || {
            let len = usize::from(u16::from_be_bytes([*rest.first()?, *rest.get(1)?]));
            let (rd, tail) = rest[2..].split_at(len);
            rest = tail;
            Some(rd)
        })
    }

    /// The first record's RDATA.
    pub fn first(&self) -> Option<&'z [u8]> {
        self.rdatas().next()
    }

    /// The records decoded (for display, rendering and tests; the answer path uses the wire
    /// form).
    pub fn decoded(&self) -> Vec<RData> {
        self.rdatas()
            .filter_map(|rd| RData::from_wire(self.rtype, rd))
            .collect()
    }
}

/// Everything at one owner name. No RRsets means an empty non-terminal.
#[derive(Debug, Clone, Copy)]
pub struct Node<'z> {
    name: &'z [u8],
    data: &'z [u8],
}

impl<'z> Node<'z> {
    /// The owner name, lower-cased wire format.
    pub fn name(&self) -> &'z [u8] {
        self.name
    }

    /// The RRset of `rtype`, if there is one.
    pub fn get(&self, rtype: RType) -> Option<RRset<'z>> {
        self.rrsets().find(|s| s.rtype == rtype)
    }

    /// All RRsets, ordered by type code.
    pub fn rrsets(&self) -> impl Iterator<Item = RRset<'z>> + 'z {
        let mut rest = self.data;
        std::iter::from_fn(move || {
            if rest.len() < 8 {
                return None;
            }
            let rtype = RType(u16::from_be_bytes([rest[0], rest[1]]));
            let ttl = u32::from_be_bytes([rest[2], rest[3], rest[4], rest[5]]);
            let count = u16::from_be_bytes([rest[6], rest[7]]);
            let mut end = 8;
            for _ in 0..count {
                end += 2 + usize::from(u16::from_be_bytes([rest[end], rest[end + 1]]));
            }
            let set = RRset {
                rtype,
                ttl,
                count,
                records: &rest[8..end],
            };
            rest = &rest[end..];
            Some(set)
        })
    }

    /// Whether the node is an empty non-terminal.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// What a zone holds for a name, as the answer logic needs to know it.
#[derive(Debug)]
pub enum Lookup<'z> {
    /// The name exists with these RRsets.
    Found(Node<'z>),
    /// The name does not exist but a wildcard (RFC 4592) synthesises it from this node.
    Wildcard(Node<'z>),
    /// The name exists only because names below it do (NODATA for every type).
    EmptyNonTerminal,
    /// The name is at or below a zone cut: refer to the child's name servers.
    Delegation {
        /// The owner name of the cut (lower-cased wire format).
        cut: &'z [u8],
        /// The child zone's NS RRset.
        ns: RRset<'z>,
    },
    /// Neither the name nor anything below it exists.
    NxDomain,
}

#[derive(Debug, Clone, Copy)]
struct NodeMeta {
    name_at: u32,
    data_at: u32,
    data_len: u32,
    name_len: u8,
}

/// One authoritative zone.
#[derive(Clone)]
pub struct Zone {
    origin: Name,
    hasher: DefaultHashBuilder,
    table: HashTable<u32>,
    nodes: Vec<NodeMeta>,
    names: Vec<u8>,
    data: Vec<u8>,
    soa: Soa,
    soa_ttl: u32,
    has_cuts: bool,
    has_wildcards: bool,
    record_count: usize,
    given_soa: bool,
    given_ns: bool,
}

impl std::fmt::Debug for Zone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zone")
            .field("origin", &self.origin)
            .field("records", &self.record_count)
            .finish_non_exhaustive()
    }
}

impl Zone {
    /// The apex name.
    pub fn origin(&self) -> &Name {
        &self.origin
    }

    /// The zone's SOA fields.
    pub fn soa(&self) -> &Soa {
        &self.soa
    }

    /// The apex SOA RRset.
    pub fn soa_rrset(&self) -> RRset<'_> {
        self.apex()
            .get(RType::SOA)
            .expect("every zone has an apex SOA")
    }

    /// TTL of the SOA in negative answers: min(SOA TTL, SOA minimum) (RFC 2308 §3).
    pub fn negative_ttl(&self) -> u32 {
        self.soa_ttl.min(self.soa.minimum)
    }

    /// Number of records served, SOA and NS included.
    pub fn record_count(&self) -> usize {
        self.record_count
    }

    /// Bytes of record and name data held (for capacity planning and tests).
    pub fn data_bytes(&self) -> usize {
        self.names.len() + self.data.len() + self.nodes.len() * std::mem::size_of::<NodeMeta>()
    }

    fn apex(&self) -> Node<'_> {
        self.node(self.origin.wire())
            .expect("the apex node always exists")
    }

    fn node_at(&self, id: u32) -> Node<'_> {
        let m = self.nodes[id as usize];
        let name = &self.names[m.name_at as usize..m.name_at as usize + usize::from(m.name_len)];
        let data = &self.data[m.data_at as usize..(m.data_at + m.data_len) as usize];
        Node { name, data }
    }

    /// The node at exactly `name` (lower-cased wire format), ignoring zone cuts.
    pub fn node(&self, name: &[u8]) -> Option<Node<'_>> {
        let hash = self.hasher.hash_one(name);
        let id = self.table.find(hash, |&id| {
            let m = self.nodes[id as usize];
            &self.names[m.name_at as usize..m.name_at as usize + usize::from(m.name_len)] == name
        })?;
        Some(self.node_at(*id))
    }

    /// Looks `name` up. `name` is lower-cased wire format at or below the origin.
    pub fn lookup(&self, name: &[u8]) -> Lookup<'_> {
        debug_assert!(is_wire_subdomain(name, self.origin.wire()));
        if self.has_cuts
            && let Some(found) = self.find_cut(name)
        {
            return found;
        }
        if let Some(node) = self.node(name) {
            return if node.is_empty() {
                Lookup::EmptyNonTerminal
            } else {
                Lookup::Found(node)
            };
        }
        if self.has_wildcards
            && let Some(node) = self.find_wildcard(name)
        {
            return Lookup::Wildcard(node);
        }
        Lookup::NxDomain
    }

    /// The highest zone cut strictly below the apex that `name` is at or under.
    fn find_cut(&self, name: &[u8]) -> Option<Lookup<'_>> {
        let apex_len = self.origin.wire().len();
        let mut offsets = [0usize; 128];
        let mut n = 0;
        for o in label_offsets(name).filter(|&o| name.len() - o > apex_len) {
            offsets[n] = o;
            n += 1;
        }
        for &o in offsets[..n].iter().rev() {
            if let Some(node) = self.node(&name[o..])
                && let Some(ns) = node.get(RType::NS)
            {
                return Some(Lookup::Delegation { cut: node.name, ns });
            }
        }
        None
    }

    /// The wildcard node at `*.<closest encloser>` (RFC 4592 §3.3.1), if any.
    fn find_wildcard(&self, name: &[u8]) -> Option<Node<'_>> {
        let encloser = label_offsets(name)
            .skip(1)
            .map(|o| &name[o..])
            .find(|n| self.node(n).is_some())?;
        let mut wild = [0u8; 256];
        wild[0] = 1;
        wild[1] = b'*';
        let len = 2 + encloser.len();
        if len > 255 {
            return None;
        }
        wild[2..len].copy_from_slice(encloser);
        self.node(&wild[..len]).filter(|n| !n.is_empty())
    }
}

/// Canonical DNS name order (RFC 4034 §6.1): compare label by label from the right.
pub fn canonical_cmp(a: &Name, b: &Name) -> std::cmp::Ordering {
    let labels = |n: &Name| -> Vec<Vec<u8>> {
        let w = n.wire();
        let mut v: Vec<Vec<u8>> = label_offsets(w)
            .filter(|&o| w[o] != 0)
            .map(|o| w[o + 1..o + 1 + w[o] as usize].to_vec())
            .collect();
        v.reverse();
        v
    };
    labels(a).cmp(&labels(b))
}

/// The set of zones served by one snapshot.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    zones: hashbrown::HashMap<Name, Arc<Zone>>,
}

impl Catalog {
    /// A catalog with no zones: every query is REFUSED.
    pub fn empty() -> Catalog {
        Catalog::default()
    }

    /// A catalog of these zones (later zones with the same origin replace earlier ones).
    pub fn from_zones(zones: impl IntoIterator<Item = Arc<Zone>>) -> Catalog {
        Catalog {
            zones: zones.into_iter().map(|z| (z.origin.clone(), z)).collect(),
        }
    }

    /// The zone whose origin is the longest suffix of `qname` (lower-cased wire format).
    pub fn find_zone(&self, qname: &[u8]) -> Option<&Zone> {
        label_offsets(qname)
            .find_map(|o| self.zones.get(&qname[o..]))
            .map(|z| &**z)
    }

    /// The zone with exactly this origin.
    pub fn zone(&self, origin: &Name) -> Option<&Arc<Zone>> {
        self.zones.get(origin)
    }

    /// All zones, ordered by origin.
    pub fn zones(&self) -> Vec<&Zone> {
        let mut all: Vec<&Zone> = self.zones.values().map(|z| &**z).collect();
        all.sort_by(|a, b| canonical_cmp(&a.origin, &b.origin));
        all
    }

    /// Total number of records across zones.
    pub fn record_count(&self) -> usize {
        self.zones.values().map(|z| z.record_count()).sum()
    }
}

/// Settings the builder needs to fill in what sources leave out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildDefaults {
    /// TTL for synthesised SOA and NS records, and the SOA minimum (negative-caching TTL).
    pub default_ttl: u32,
    /// Serial for synthesised SOA records; the caller makes it grow with every build.
    pub serial: u32,
}

/// Identifies the source a record came from, so conflicts can name the winner.
pub type SourceId = usize;

/// Why the builder would not take a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// The owner is not at or below the zone's origin.
    #[error("{name} is outside zone {origin}")]
    OutsideZone {
        /// The owner name.
        name: Name,
        /// The zone it was given for.
        origin: Name,
    },
    /// A CNAME and other data at the same name.
    #[error("{name} cannot have a CNAME and other records (RFC 1034 §3.6.2)")]
    CnameConflict {
        /// The owner name.
        name: Name,
    },
    /// A CNAME at a zone apex, which must hold SOA and NS.
    #[error("{name} is a zone apex, which cannot be a CNAME")]
    CnameAtApex {
        /// The apex.
        name: Name,
    },
    /// Another source already supplies this (name, type).
    #[error(
        "{name} {rtype} is already provided by another source (#{winner}), which takes precedence"
    )]
    TakenBy {
        /// The owner name.
        name: Name,
        /// The type.
        rtype: RType,
        /// The source whose records are kept.
        winner: SourceId,
    },
    /// More records in one RRset than a DNS message can count (its counts are 16 bits).
    #[error("{name} {rtype} has {count} records; an RRset holds at most 65535")]
    TooManyRecords {
        /// The owner name.
        name: Name,
        /// The type.
        rtype: RType,
        /// How many distinct records were given.
        count: usize,
    },
}

/// SOA fields a source wants when it gives no SOA record; unset fields take the defaults
/// documented on [`CatalogBuilder::build`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SoaTemplate {
    /// SOA record TTL.
    pub ttl: Option<u32>,
    /// Primary name server.
    pub mname: Option<Name>,
    /// Contact mailbox as a name.
    pub rname: Option<Name>,
    /// Serial; by default the build serial, which grows with every reload.
    pub serial: Option<u32>,
    /// Refresh interval.
    pub refresh: Option<u32>,
    /// Retry interval.
    pub retry: Option<u32>,
    /// Expiry.
    pub expire: Option<u32>,
    /// Negative-caching TTL bound.
    pub minimum: Option<u32>,
}

/// One record waiting in a [`ZoneBuilder`].
#[derive(Debug, Clone, Copy)]
struct Entry {
    node: u32,
    rtype: RType,
    ttl: u32,
    rdata_at: u32,
    rdata_len: u16,
    source: u32,
    seq: u32,
}

/// Where a builder node's name lives in the name arena.
#[derive(Debug, Clone, Copy)]
struct NameRef {
    at: u32,
    len: u8,
}

/// Records of one zone, gathered flat: names in one arena (each once; empty non-terminals
/// are suffixes of names already there), RDATA in another, one small [`Entry`] per record.
/// Rules that depend on other records (precedence, CNAME) are applied at build time, after
/// sorting, so adding is one hash lookup and two copies.
#[derive(Debug)]
struct ZoneBuilder {
    origin: Name,
    hasher: DefaultHashBuilder,
    index: HashTable<u32>,
    names: Vec<NameRef>,
    name_arena: Vec<u8>,
    rdata_arena: Vec<u8>,
    entries: Vec<Entry>,
    soa: Option<(SoaTemplate, SourceId)>,
}

impl ZoneBuilder {
    fn new(origin: &Name) -> ZoneBuilder {
        let mut b = ZoneBuilder {
            origin: origin.clone(),
            hasher: DefaultHashBuilder::default(),
            index: HashTable::new(),
            names: Vec::new(),
            name_arena: Vec::new(),
            rdata_arena: Vec::new(),
            entries: Vec::new(),
            soa: None,
        };
        b.node_id(origin.wire());
        b
    }

    fn name_of(&self, id: u32) -> &[u8] {
        let r = self.names[id as usize];
        &self.name_arena[r.at as usize..r.at as usize + usize::from(r.len)]
    }

    fn find(&self, name: &[u8]) -> Option<u32> {
        let hash = self.hasher.hash_one(name);
        self.index
            .find(hash, |&id| self.name_of(id) == name)
            .copied()
    }

    /// The node id of `name`, added (name copied into the arena) if new.
    fn node_id(&mut self, name: &[u8]) -> u32 {
        if let Some(id) = self.find(name) {
            return id;
        }
        let at = self.name_arena.len() as u32;
        self.name_arena.extend_from_slice(name);
        self.insert(NameRef {
            at,
            len: name.len() as u8,
        })
    }

    fn insert(&mut self, r: NameRef) -> u32 {
        let id = self.names.len() as u32;
        self.names.push(r);
        let (names, arena, hasher) = (&self.names, &self.name_arena, &self.hasher);
        let name = &arena[r.at as usize..r.at as usize + usize::from(r.len)];
        let hash = hasher.hash_one(name);
        self.index.insert_unique(hash, id, |&other| {
            let o = names[other as usize];
            hasher.hash_one(&arena[o.at as usize..o.at as usize + usize::from(o.len)])
        });
        id
    }

    /// Adds a node for every name between an owner and the apex that has none (RFC 8020 empty
    /// non-terminals); their names are suffixes of the owner's bytes, so nothing is copied.
    fn add_empty_non_terminals(&mut self) {
        let apex_len = self.origin.wire().len();
        let mut wire = [0u8; 256];
        for id in 0..self.names.len() as u32 {
            let owner = self.names[id as usize];
            let len = usize::from(owner.len);
            wire[..len].copy_from_slice(self.name_of(id));
            for o in label_offsets(&wire[..len]).skip(1) {
                if len - o < apex_len || self.find(&wire[o..len]).is_some() {
                    break;
                }
                self.insert(NameRef {
                    at: owner.at + o as u32,
                    len: (len - o) as u8,
                });
            }
        }
    }

    /// Makes room for `records` more records with `rdata_bytes` of RDATA in all.
    fn reserve(&mut self, records: usize, rdata_bytes: usize) {
        self.entries.reserve(records);
        self.rdata_arena.reserve(rdata_bytes);
        self.name_arena.reserve(records * 16);
        let (names, arena, hasher) = (&self.names, &self.name_arena, &self.hasher);
        self.index.reserve(records, |&other| {
            let o = names[other as usize];
            hasher.hash_one(&arena[o.at as usize..o.at as usize + usize::from(o.len)])
        });
    }
}

/// Collects records from sources and builds zones (and catalogs of them).
///
/// Precedence: the first source to supply a (name, type) keeps it; later sources' records for
/// that pair are refused with [`Rejection::TakenBy`] and the answer never mixes the two. A
/// CNAME and other data at one name: whichever was added first stays.
#[derive(Debug)]
pub struct CatalogBuilder {
    defaults: BuildDefaults,
    zones: BTreeMap<Name, ZoneBuilder>,
}

/// A record the builder refused: its owner, type and why.
pub type Refused = (Name, RType, Rejection);

impl CatalogBuilder {
    /// An empty builder.
    pub fn new(defaults: BuildDefaults) -> CatalogBuilder {
        CatalogBuilder {
            defaults,
            zones: BTreeMap::new(),
        }
    }

    /// Makes sure a zone with this origin exists (with a synthesised SOA and NS if nobody gives
    /// one).
    pub fn declare(&mut self, origin: &Name) {
        // Looked up first: `entry` would clone the origin on every record added.
        if !self.zones.contains_key(origin) {
            self.zones.insert(origin.clone(), ZoneBuilder::new(origin));
        }
    }

    /// Makes room for about `records` more records in zone `origin` (declaring it), so a large
    /// load does not grow its tables step by step.
    pub fn reserve(&mut self, origin: &Name, records: usize) {
        self.declare(origin);
        self.zones
            .get_mut(origin)
            .expect("declared above")
            .reserve(records, records * 16);
    }

    /// Sets the SOA template of zone `origin` (declaring it); the first source to set one keeps
    /// it.
    pub fn set_soa_template(
        &mut self,
        origin: &Name,
        template: SoaTemplate,
        source: SourceId,
    ) -> Result<(), Rejection> {
        self.declare(origin);
        let zone = self.zones.get_mut(origin).expect("declared above");
        match &zone.soa {
            Some((_, winner)) if *winner != source => Err(Rejection::TakenBy {
                name: origin.clone(),
                rtype: RType::SOA,
                winner: *winner,
            }),
            _ => {
                zone.soa = Some((template, source));
                Ok(())
            }
        }
    }

    /// Adds one record to the zone `origin` (declaring the zone if needed). Refusals that need
    /// the other records (precedence, CNAME rules) come from [`CatalogBuilder::build_zones`].
    pub fn add(
        &mut self,
        origin: &Name,
        record: Record,
        source: SourceId,
    ) -> Result<(), Rejection> {
        let rtype = record.data.rtype();
        let zone = self.zone_for(origin, &record.name, rtype)?;
        let at = zone.rdata_arena.len();
        record.data.to_wire(&mut zone.rdata_arena);
        let len = zone.rdata_arena.len() - at;
        push_entry(
            zone,
            record.name.wire(),
            rtype,
            record.ttl,
            (at, len),
            source,
        );
        Ok(())
    }

    /// Adds every record of `records` to zone `origin` (declaring it), in order, as
    /// [`CatalogBuilder::add`] would one by one; returns the refused ones.
    /// A zone with no records yet takes the RDATA buffer over instead of copying it.
    pub fn add_records(
        &mut self,
        origin: &Name,
        records: Records,
        source: SourceId,
    ) -> Vec<Refused> {
        self.declare(origin);
        let zone = self.zones.get_mut(origin).expect("declared above");
        let (names, data, items) = records.into_parts();
        let base = if zone.rdata_arena.is_empty() {
            zone.reserve(items.len(), 0);
            zone.rdata_arena = data;
            0
        } else {
            zone.reserve(items.len(), data.len());
            let base = zone.rdata_arena.len();
            zone.rdata_arena.extend_from_slice(&data);
            base
        };
        let mut refused = Vec::new();
        // A run of records at one owner strictly inside the zone can refuse none of them: that
        // is checked once per owner, and only the apex and strays take the full rule.
        let mut run: Option<(u32, bool)> = None;
        for item in &items {
            let owner = item.owner(&names);
            let inside = match run {
                Some((name_at, inside)) if name_at == item.name_at => inside,
                _ => {
                    let inside = owner != origin.wire() && is_wire_subdomain(owner, origin.wire());
                    run = Some((item.name_at, inside));
                    inside
                }
            };
            let refusal = if inside {
                None
            } else {
                placement_refusal(origin, owner, item.rtype)
            };
            match refusal {
                Some(why) => {
                    let name = Name::from_wire(owner).unwrap_or_else(Name::root);
                    refused.push((name, item.rtype, why));
                }
                None => {
                    let rdata = (base + item.data_at as usize, usize::from(item.data_len));
                    push_entry(zone, owner, item.rtype, item.ttl, rdata, source);
                }
            }
        }
        refused
    }

    fn zone_for(
        &mut self,
        origin: &Name,
        name: &Name,
        rtype: RType,
    ) -> Result<&mut ZoneBuilder, Rejection> {
        if let Some(why) = placement_refusal(origin, name.wire(), rtype) {
            return Err(why);
        }
        self.declare(origin);
        Ok(self.zones.get_mut(origin).expect("declared above"))
    }

    /// Adds every record of a built zone, as source `source`, except an SOA or apex NS that
    /// zone synthesised (those yield to ones a source gave).
    pub fn add_zone(&mut self, zone: &Zone, source: SourceId) {
        let origin = zone.origin.clone();
        self.declare(&origin);
        let target = self.zones.get_mut(&origin).expect("declared above");
        for id in 0..zone.nodes.len() as u32 {
            let node = zone.node_at(id);
            let apex = node.name == origin.wire();
            for set in node.rrsets() {
                if apex
                    && ((set.rtype == RType::SOA && !zone.given_soa)
                        || (set.rtype == RType::NS && !zone.given_ns))
                {
                    continue;
                }
                for rd in set.rdatas() {
                    let at = target.rdata_arena.len();
                    target.rdata_arena.extend_from_slice(rd);
                    push_entry(
                        target,
                        node.name,
                        set.rtype,
                        set.ttl,
                        (at, rd.len()),
                        source,
                    );
                }
            }
        }
    }

    /// Builds every declared zone and reports the records refused. Apex SOA and NS are
    /// synthesised where no source gave them, from the zone's [`SoaTemplate`] and these
    /// defaults: `ns.<origin>` as name server (or the first NS record), `hostmaster.<origin>`
    /// as contact, the build serial, refresh 3600, retry 600, expire 604800, and the default
    /// TTL as SOA TTL and minimum.
    pub fn build_zones(self) -> (Vec<Zone>, Vec<Refused>) {
        let defaults = self.defaults;
        let mut refused = Vec::new();
        let zones = self
            .zones
            .into_values()
            .map(|z| finish_zone(z, defaults, &mut refused))
            .collect();
        (zones, refused)
    }

    /// Builds a catalog of every declared zone (see [`CatalogBuilder::build_zones`]).
    pub fn build(self) -> (Catalog, Vec<Refused>) {
        let (zones, refused) = self.build_zones();
        (
            Catalog::from_zones(zones.into_iter().map(Arc::new)),
            refused,
        )
    }
}

/// Why a record at `owner` (wire form) of type `rtype` cannot go into zone `origin`, if it
/// cannot: outside the zone, or a CNAME at the apex.
fn placement_refusal(origin: &Name, owner: &[u8], rtype: RType) -> Option<Rejection> {
    let name = || Name::from_wire(owner).unwrap_or_else(Name::root);
    if !is_wire_subdomain(owner, origin.wire()) {
        Some(Rejection::OutsideZone {
            name: name(),
            origin: origin.clone(),
        })
    } else if rtype == RType::CNAME && owner == origin.wire() {
        Some(Rejection::CnameAtApex { name: name() })
    } else {
        None
    }
}

fn push_entry(
    zone: &mut ZoneBuilder,
    name: &[u8],
    rtype: RType,
    ttl: u32,
    (rdata_at, rdata_len): (usize, usize),
    source: SourceId,
) {
    // Records come in runs at one owner (a zone file's usual order): the last owner's id is
    // reused without hashing the name again.
    let node = match zone.entries.last() {
        Some(last) if zone.name_of(last.node) == name => last.node,
        _ => zone.node_id(name),
    };
    let seq = zone.entries.len() as u32;
    zone.entries.push(Entry {
        node,
        rtype,
        ttl,
        rdata_at: rdata_at as u32,
        rdata_len: rdata_len as u16,
        source: source as u32,
        seq,
    });
}

/// The synthesised apex records, in wire form.
fn synthesised_apex(
    z: &ZoneBuilder,
    has_ns: bool,
    first_ns: Option<Name>,
    defaults: BuildDefaults,
) -> (Option<Vec<u8>>, (u32, Vec<u8>)) {
    let origin = &z.origin;
    let ns_name = origin.prepend(b"ns").unwrap_or_else(|_| origin.clone());
    let ns = (!has_ns).then(|| ns_name.wire().to_vec());
    let t = z.soa.as_ref().map(|(t, _)| t.clone()).unwrap_or_default();
    let soa = Soa {
        mname: t.mname.or(first_ns).unwrap_or(ns_name),
        rname: t.rname.unwrap_or_else(|| {
            origin
                .prepend(b"hostmaster")
                .unwrap_or_else(|_| origin.clone())
        }),
        serial: t.serial.unwrap_or(defaults.serial),
        refresh: t.refresh.unwrap_or(3600),
        retry: t.retry.unwrap_or(600),
        expire: t.expire.unwrap_or(604_800),
        minimum: t.minimum.unwrap_or(defaults.default_ttl),
    };
    let mut wire = Vec::new();
    RData::Soa(Box::new(soa)).to_wire(&mut wire);
    (ns, (t.ttl.unwrap_or(defaults.default_ttl), wire))
}

/// RRsets up to this size find duplicates by scanning what they kept.
const SMALL_SET: usize = 16;

/// Whether `data` is not among the RDATA kept so far (recording it in `seen` when given).
fn is_new<'a>(
    seen: &mut Option<hashbrown::HashSet<&'a [u8]>>,
    kept: &[&Entry],
    data: &'a [u8],
    rdata: &impl Fn(&Entry) -> &'a [u8],
) -> bool {
    match seen {
        Some(seen) => seen.insert(data),
        None => !kept.iter().any(|k| rdata(k) == data),
    }
}

fn finish_zone(mut z: ZoneBuilder, defaults: BuildDefaults, refused: &mut Vec<Refused>) -> Zone {
    z.add_empty_non_terminals();
    let origin = z.origin.clone();
    let apex_id = z
        .find(origin.wire())
        .expect("the apex node exists from the start");
    // Entries are still in the order added here, so `find` gives the first of each kind.
    let mut entries = std::mem::take(&mut z.entries);

    let given_ns = entries
        .iter()
        .any(|e| e.node == apex_id && e.rtype == RType::NS);
    let given_soa_record = entries
        .iter()
        .any(|e| e.node == apex_id && e.rtype == RType::SOA);
    let given_soa = given_soa_record || z.soa.is_some();
    let first_ns = entries
        .iter()
        .find(|e| e.node == apex_id && e.rtype == RType::NS)
        .and_then(|e| {
            Name::from_wire(
                &z.rdata_arena[e.rdata_at as usize..e.rdata_at as usize + usize::from(e.rdata_len)],
            )
        });
    let (synth_ns, synth_soa) = synthesised_apex(&z, given_ns, first_ns, defaults);
    if !given_soa_record {
        let at = z.rdata_arena.len() as u32;
        z.rdata_arena.extend_from_slice(&synth_soa.1);
        entries.push(Entry {
            node: apex_id,
            rtype: RType::SOA,
            ttl: synth_soa.0,
            rdata_at: at,
            rdata_len: synth_soa.1.len() as u16,
            source: u32::MAX,
            seq: u32::MAX,
        });
    }
    if let Some(ns) = synth_ns {
        let at = z.rdata_arena.len() as u32;
        z.rdata_arena.extend_from_slice(&ns);
        entries.push(Entry {
            node: apex_id,
            rtype: RType::NS,
            ttl: defaults.default_ttl,
            rdata_at: at,
            rdata_len: ns.len() as u16,
            source: u32::MAX,
            seq: u32::MAX,
        });
    }
    // One order: by node, then type, then the order added (which decides precedence). A zone
    // file lists each owner's records together, so the entries are mostly in order already
    // (runs broken only where, say, an SOA precedes an NS): the stable sort finds those runs
    // and merges them in close to linear time, where a quicksort would redo millions.
    entries.sort_by_key(|e| (e.node, e.rtype, e.seq));

    let mut nodes: Vec<NodeMeta> = z
        .names
        .iter()
        .map(|r| NodeMeta {
            name_at: r.at,
            data_at: 0,
            data_len: 0,
            name_len: r.len,
        })
        .collect();
    let mut data = Vec::with_capacity(z.rdata_arena.len() + entries.len() * 3);
    let mut record_count = 0;
    let mut has_cuts = false;
    let mut soa = None;
    let rdata = |e: &Entry| {
        &z.rdata_arena[e.rdata_at as usize..e.rdata_at as usize + usize::from(e.rdata_len)]
    };
    let name_of = |id: u32| Name::from_wire(z.name_of(id)).unwrap_or_else(Name::root);
    let mut i = 0;
    while i < entries.len() {
        let node = entries[i].node;
        let end = i + entries[i..].iter().take_while(|e| e.node == node).count();
        let group = &entries[i..end];
        i = end;
        // CNAME beside other data: whichever came first stays (RFC 1034 §3.6.2).
        let first = group
            .iter()
            .min_by_key(|e| e.seq)
            .expect("a group is never empty");
        let cname_only = first.rtype == RType::CNAME;
        let data_at = data.len() as u32;
        let mut j = 0;
        while j < group.len() {
            let rtype = group[j].rtype;
            let set_end = j + group[j..].iter().take_while(|e| e.rtype == rtype).count();
            let set = &group[j..set_end];
            j = set_end;
            if (rtype == RType::CNAME) != cname_only {
                let why = Rejection::CnameConflict {
                    name: name_of(node),
                };
                refused.push((name_of(node), rtype, why));
                continue;
            }
            // The first source to give (name, type) keeps it; entries are in order added.
            let winner = set[0].source;
            let mut kept: Vec<&Entry> = Vec::with_capacity(set.len());
            // Duplicates are found by a scan in small sets, by a hash set in large ones.
            let mut seen: Option<hashbrown::HashSet<&[u8]>> =
                (set.len() > SMALL_SET).then(hashbrown::HashSet::new);
            for e in set {
                if e.source != winner {
                    let why = Rejection::TakenBy {
                        name: name_of(node),
                        rtype,
                        winner: winner as usize,
                    };
                    if !refused
                        .iter()
                        .any(|(n, t, w)| *t == rtype && *w == why && n == &name_of(node))
                    {
                        refused.push((name_of(node), rtype, why));
                    }
                } else if rtype == RType::CNAME && !kept.is_empty() && rdata(e) != rdata(kept[0]) {
                    refused.push((
                        name_of(node),
                        rtype,
                        Rejection::CnameConflict {
                            name: name_of(node),
                        },
                    ));
                } else if is_new(&mut seen, &kept, rdata(e), &rdata) {
                    kept.push(e);
                }
            }
            if kept.len() > usize::from(u16::MAX) {
                let why = Rejection::TooManyRecords {
                    name: name_of(node),
                    rtype,
                    count: kept.len(),
                };
                refused.push((name_of(node), rtype, why));
                if !(rtype == RType::SOA && node == apex_id) {
                    continue;
                }
                // The apex must keep an SOA: the first one given stays.
                kept.truncate(1);
            }
            // RFC 2181 §5.2: one TTL per RRset, the lowest given (duplicates included).
            let ttl = set
                .iter()
                .filter(|e| e.source == winner)
                .map(|e| e.ttl)
                .min()
                .unwrap_or(0);
            data.extend_from_slice(&rtype.0.to_be_bytes());
            data.extend_from_slice(&ttl.to_be_bytes());
            data.extend_from_slice(&(kept.len() as u16).to_be_bytes());
            for e in &kept {
                data.extend_from_slice(&e.rdata_len.to_be_bytes());
                data.extend_from_slice(rdata(e));
            }
            record_count += kept.len();
            if rtype == RType::NS && node != apex_id {
                has_cuts = true;
            }
            if rtype == RType::SOA && node == apex_id {
                soa = Some((ttl, RData::from_wire(RType::SOA, rdata(kept[0]))));
            }
        }
        nodes[node as usize].data_at = data_at;
        nodes[node as usize].data_len = data.len() as u32 - data_at;
    }
    data.shrink_to_fit();
    let has_wildcards = (0..z.names.len() as u32).any(|id| z.name_of(id).starts_with(b"\x01*"));
    let Some((soa_ttl, Some(RData::Soa(soa)))) = soa else {
        unreachable!("the apex SOA was ensured above")
    };
    let mut name_arena = z.name_arena;
    name_arena.shrink_to_fit();
    Zone {
        origin,
        hasher: z.hasher,
        table: z.index,
        nodes,
        names: name_arena,
        data,
        soa: *soa,
        soa_ttl,
        has_cuts,
        has_wildcards,
        record_count,
        given_soa,
        given_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        s.parse().unwrap()
    }

    fn rec(name: &str, t: RType, data: &str) -> Record {
        Record {
            name: n(name),
            ttl: 60,
            data: RData::parse(t, data, &n("example.org.")).unwrap(),
        }
    }

    fn defaults() -> BuildDefaults {
        BuildDefaults {
            default_ttl: 5,
            serial: 7,
        }
    }

    /// Every node's RRsets, decoded, in node order.
    fn dump(zone: &Zone) -> Vec<String> {
        (0..zone.nodes.len() as u32)
            .flat_map(|id| {
                let node = zone.node_at(id);
                let name = Name::from_wire(node.name).unwrap();
                node.rrsets()
                    .map(|set| format!("{name} {} {} {:?}", set.rtype, set.ttl, set.decoded()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn an_rrset_too_large_to_count_is_refused_not_wrapped() {
        let origin = n("example.org.");
        let mut b = CatalogBuilder::new(defaults());
        let big: Records = (0..=u32::from(u16::MAX))
            .map(|i| {
                let [_, _, hi, lo] = i.to_be_bytes();
                rec("big.example.org.", RType::A, &format!("10.0.{hi}.{lo}"))
            })
            .chain([rec("small.example.org.", RType::A, "192.0.2.1")])
            .collect();
        assert!(b.add_records(&origin, big, 0).is_empty());
        let (zones, refused) = b.build_zones();
        assert_eq!(
            refused,
            vec![(
                n("big.example.org."),
                RType::A,
                Rejection::TooManyRecords {
                    name: n("big.example.org."),
                    rtype: RType::A,
                    count: 65536
                }
            )]
        );
        assert_eq!(
            refused[0].2.to_string(),
            "big.example.org. A has 65536 records; an RRset holds at most 65535"
        );
        let zone = &zones[0];
        assert!(
            zone.node(n("big.example.org.").wire())
                .is_none_or(|node| node.get(RType::A).is_none())
        );
        assert_eq!(
            zone.node(n("small.example.org.").wire())
                .and_then(|node| node.get(RType::A))
                .map(|set| set.rdatas().count()),
            Some(1)
        );
    }

    #[test]
    fn adding_a_record_list_builds_what_adding_one_by_one_builds() {
        let origin = n("example.org.");
        let list = [
            rec("www.example.org.", RType::A, "192.0.2.1"),
            rec("www.example.org.", RType::A, "192.0.2.2"),
            rec("www.example.org.", RType::A, "192.0.2.1"),
            rec("other.net.", RType::A, "192.0.2.9"),
            rec("example.org.", RType::CNAME, "www"),
            rec("alias.example.org.", RType::CNAME, "www"),
            rec("alias.example.org.", RType::TXT, "\"beside a CNAME\""),
            rec(
                "_iroh.k.example.org.",
                RType::TXT,
                "\"addr=192.0.2.7:4433\"",
            ),
            rec("www.example.org.", RType::AAAA, "2001:db8::1"),
        ];
        let first = [rec("www.example.org.", RType::MX, "10 mail")];

        let mut one_by_one = CatalogBuilder::new(defaults());
        let mut refused_one = Vec::new();
        for r in first.iter().chain(&list).chain(&list[..2]) {
            if let Err(why) = one_by_one.add(&origin, r.clone(), 0) {
                refused_one.push((r.name.clone(), r.data.rtype(), why));
            }
        }
        let (zones_one, built_refused_one) = one_by_one.build_zones();

        // Once into a fresh zone (the buffer is taken over), then appended to a filled one.
        let mut listed = CatalogBuilder::new(defaults());
        let mut refused_list = listed.add_records(&origin, first.iter().cloned().collect(), 0);
        refused_list.extend(listed.add_records(&origin, list.iter().cloned().collect(), 0));
        refused_list.extend(listed.add_records(&origin, list[..2].iter().cloned().collect(), 0));
        let (zones_list, built_refused_list) = listed.build_zones();

        assert_eq!(refused_list, refused_one);
        assert_eq!(refused_list.len(), 2, "outside the zone, CNAME at the apex");
        assert_eq!(built_refused_list, built_refused_one);
        assert_eq!(dump(&zones_list[0]), dump(&zones_one[0]));
        assert!(
            dump(&zones_one[0])
                .contains(&"www.example.org. A 60 [A(192.0.2.1), A(192.0.2.2)]".to_string())
        );
    }

    #[test]
    fn a_record_list_keeps_order_and_round_trips_each_record() {
        let mut records = Records::new();
        let all = [
            rec("a.example.org.", RType::A, "192.0.2.1"),
            rec("a.example.org.", RType::TXT, "x \"y z\""),
            rec("b.example.org.", RType::SRV, "0 5 443 svc"),
            rec("a.example.org.", RType::NS, "ns.other.net."),
        ];
        records.extend(all.iter().cloned());
        assert_eq!(records.len(), 4);
        assert_eq!(records.to_vec(), all);
        assert_eq!(records.get(2).unwrap().to_record(), all[2]);
        assert_eq!(records.get(3).unwrap().owner, n("a.example.org.").wire());
        let refused: Result<(), &str> =
            records.push_with(n("c.example.org.").wire(), RType::A, 1, |out| {
                out.extend_from_slice(b"partial");
                Err("bad")
            });
        assert_eq!(refused, Err("bad"));
        assert_eq!(records.to_vec(), all, "a failed write adds nothing");
        records.retain(|i, r| i != 1 && r.rtype != RType::SRV);
        assert_eq!(records.to_vec(), [all[0].clone(), all[3].clone()]);
    }

    #[test]
    fn builds_empty_non_terminals_and_synthesises_apex() {
        let origin = n("example.org.");
        let mut b = CatalogBuilder::new(defaults());
        b.add(&origin, rec("_iroh.abc.example.org.", RType::TXT, "x=y"), 0)
            .unwrap();
        let (cat, _) = b.build();
        let zone = cat.find_zone(n("foo.bar.example.org.").wire()).unwrap();
        assert!(matches!(
            zone.lookup(n("abc.example.org.").wire()),
            Lookup::EmptyNonTerminal
        ));
        assert!(matches!(
            zone.lookup(n("_iroh.abc.example.org.").wire()),
            Lookup::Found(_)
        ));
        assert!(matches!(
            zone.lookup(n("zzz.example.org.").wire()),
            Lookup::NxDomain
        ));
        assert_eq!(zone.soa().serial, 7);
        assert_eq!(zone.soa().mname, n("ns.example.org."));
        assert_eq!(zone.negative_ttl(), 5);
        assert_eq!(zone.record_count(), 3);
        assert!(cat.find_zone(n("example.com.").wire()).is_none());
    }

    /// Records added in zone-file order (runs the build's sort merges) and in any other order
    /// build the same zone.
    #[test]
    fn records_in_order_and_out_of_order_build_the_same_zone() {
        let origin = n("example.org.");
        let records = [
            ("example.org.", RType::NS, "ns1.example.org."),
            ("a.example.org.", RType::A, "192.0.2.1"),
            ("a.example.org.", RType::A, "192.0.2.2"),
            ("a.example.org.", RType::TXT, "t"),
            ("a.example.org.", RType::AAAA, "2001:db8::1"),
            ("b.c.example.org.", RType::A, "192.0.2.3"),
        ];
        let build = |order: &[usize]| {
            let mut b = CatalogBuilder::new(defaults());
            for &i in order {
                let (name, t, data) = records[i];
                b.add(&origin, rec(name, t, data), 0).unwrap();
            }
            b.build().0
        };
        let sorted = build(&[0, 1, 2, 3, 4, 5]);
        let shuffled = build(&[5, 4, 1, 3, 0, 2]);
        for name in [
            "example.org.",
            "a.example.org.",
            "c.example.org.",
            "b.c.example.org.",
        ] {
            let dump = |cat: &Catalog| {
                let zone = cat.find_zone(n(name).wire()).unwrap();
                zone.node(n(name).wire())
                    .map(|node| {
                        node.rrsets()
                            .map(|set| (set.rtype, set.ttl, set.decoded()))
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default()
            };
            let (a, b) = (dump(&sorted), dump(&shuffled));
            assert_eq!(a.len(), b.len(), "{name}");
            for (x, y) in a.iter().zip(&b) {
                assert_eq!((x.0, x.1), (y.0, y.1), "{name}");
                let mut xs = x.2.clone();
                let mut ys = y.2.clone();
                xs.sort_by_key(|d| d.to_string());
                ys.sort_by_key(|d| d.to_string());
                assert_eq!(xs, ys, "{name}");
            }
        }
        let apex = sorted.find_zone(origin.wire()).unwrap();
        assert_eq!(
            apex.soa().mname,
            n("ns1.example.org."),
            "synthesised SOA placed at the apex"
        );
    }

    #[test]
    fn longest_suffix_zone_wins() {
        let mut b = CatalogBuilder::new(defaults());
        b.declare(&n("example.org."));
        b.declare(&n("sub.example.org."));
        let (cat, _) = b.build();
        assert_eq!(
            cat.find_zone(n("a.sub.example.org.").wire())
                .unwrap()
                .origin(),
            &n("sub.example.org.")
        );
        assert_eq!(
            cat.find_zone(n("a.example.org.").wire()).unwrap().origin(),
            &n("example.org.")
        );
    }

    #[test]
    fn rejects_cname_conflicts_and_second_sources() {
        let origin = n("example.org.");
        let mut b = CatalogBuilder::new(defaults());
        b.add(&origin, rec("a.example.org.", RType::A, "192.0.2.1"), 0)
            .unwrap();
        b.add(&origin, rec("a.example.org.", RType::CNAME, "b"), 0)
            .unwrap();
        b.add(&origin, rec("a.example.org.", RType::A, "192.0.2.2"), 1)
            .unwrap();
        b.add(&origin, rec("c.example.org.", RType::CNAME, "x"), 0)
            .unwrap();
        b.add(&origin, rec("c.example.org.", RType::CNAME, "y"), 0)
            .unwrap();
        b.add(&origin, rec("c.example.org.", RType::TXT, "t"), 0)
            .unwrap();
        assert!(matches!(
            b.add(&origin, rec("example.org.", RType::CNAME, "b"), 0),
            Err(Rejection::CnameAtApex { .. })
        ));
        assert!(matches!(
            b.add(&origin, rec("a.example.com.", RType::A, "192.0.2.1"), 0),
            Err(Rejection::OutsideZone { .. })
        ));
        // Same source, same set: merged, duplicates dropped, lowest TTL kept.
        let mut r = rec("a.example.org.", RType::A, "192.0.2.1");
        r.ttl = 30;
        b.add(&origin, r, 0).unwrap();
        let (cat, refused) = b.build();
        let shown: Vec<String> = refused
            .iter()
            .map(|(n, t, why)| format!("{n} {t}: {why}"))
            .collect();
        assert_eq!(
            shown,
            [
                "a.example.org. A: a.example.org. A is already provided by another source (#0), which takes precedence",
                "a.example.org. CNAME: a.example.org. cannot have a CNAME and other records (RFC 1034 §3.6.2)",
                "c.example.org. CNAME: c.example.org. cannot have a CNAME and other records (RFC 1034 §3.6.2)",
                "c.example.org. TXT: c.example.org. cannot have a CNAME and other records (RFC 1034 §3.6.2)",
            ]
        );
        let Lookup::Found(node) = cat
            .zone(&origin)
            .unwrap()
            .lookup(n("a.example.org.").wire())
        else {
            panic!()
        };
        assert_eq!(node.get(RType::A).unwrap().ttl, 30);
        assert_eq!(node.get(RType::A).unwrap().len(), 1);
        let Lookup::Found(c) = cat
            .zone(&origin)
            .unwrap()
            .lookup(n("c.example.org.").wire())
        else {
            panic!()
        };
        assert_eq!(
            c.get(RType::CNAME).unwrap().decoded(),
            [RData::Cname(n("x.example.org."))]
        );
    }

    #[test]
    fn finds_wildcards_and_delegations() {
        let origin = n("example.org.");
        let mut b = CatalogBuilder::new(defaults());
        b.add(&origin, rec("*.w.example.org.", RType::A, "192.0.2.9"), 0)
            .unwrap();
        b.add(&origin, rec("child.example.org.", RType::NS, "ns.child"), 0)
            .unwrap();
        let (cat, _) = b.build();
        let zone = cat.zone(&origin).unwrap();
        assert!(matches!(
            zone.lookup(n("x.w.example.org.").wire()),
            Lookup::Wildcard(_)
        ));
        assert!(matches!(
            zone.lookup(n("w.example.org.").wire()),
            Lookup::EmptyNonTerminal
        ));
        assert!(matches!(
            zone.lookup(n("a.b.child.example.org.").wire()),
            Lookup::Delegation { .. }
        ));
        assert!(matches!(
            zone.lookup(n("child.example.org.").wire()),
            Lookup::Delegation { .. }
        ));
    }

    #[test]
    fn merging_built_zones_keeps_the_first_source_and_given_soa() {
        let origin = n("example.org.");
        let mut a = CatalogBuilder::new(defaults());
        a.add(&origin, rec("x.example.org.", RType::A, "192.0.2.1"), 0)
            .unwrap();
        let za = a.build_zones().0.remove(0);
        let mut b = CatalogBuilder::new(BuildDefaults {
            default_ttl: 5,
            serial: 9,
        });
        b.add(&origin, rec("x.example.org.", RType::A, "192.0.2.2"), 0)
            .unwrap();
        b.add(&origin, rec("y.example.org.", RType::A, "192.0.2.3"), 0)
            .unwrap();
        b.add(
            &origin,
            rec("example.org.", RType::SOA, "ns h 42 1 2 3 4"),
            0,
        )
        .unwrap();
        let zb = b.build_zones().0.remove(0);
        let mut m = CatalogBuilder::new(defaults());
        m.add_zone(&za, 0);
        m.add_zone(&zb, 1);
        let (mut merged, refused) = m.build_zones();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].1, RType::A);
        let merged = merged.remove(0);
        assert_eq!(
            merged.soa().serial,
            42,
            "a given SOA beats a synthesised one"
        );
        let Lookup::Found(x) = merged.lookup(n("x.example.org.").wire()) else {
            panic!()
        };
        assert_eq!(
            x.get(RType::A).unwrap().decoded(),
            [RData::A("192.0.2.1".parse().unwrap())]
        );
        assert!(matches!(
            merged.lookup(n("y.example.org.").wire()),
            Lookup::Found(_)
        ));
    }

    #[test]
    fn storage_is_compact() {
        let origin = n("example.org.");
        let mut b = CatalogBuilder::new(defaults());
        for i in 0..1000u32 {
            let name = n(&format!("host{i:07}.example.org."));
            b.add(
                &origin,
                Record {
                    name: name.clone(),
                    ttl: 300,
                    data: RData::A(i.into()),
                },
                0,
            )
            .unwrap();
            b.add(
                &origin,
                Record {
                    name,
                    ttl: 300,
                    data: RData::Aaaa(u128::from(i).into()),
                },
                0,
            )
            .unwrap();
        }
        let zone = b.build_zones().0.remove(0);
        let per_host = zone.data_bytes() / 1000;
        assert!(
            per_host < 100,
            "{per_host} bytes of names and records per A+AAAA host"
        );
    }

    #[test]
    fn canonical_order_sorts_from_the_right() {
        let mut names = [
            n("b.example."),
            n("example."),
            n("a.b.example."),
            n("z.a.example."),
        ];
        names.sort_by(canonical_cmp);
        let shown: Vec<String> = names.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            ["example.", "z.a.example.", "b.example.", "a.b.example."]
        );
    }
}
