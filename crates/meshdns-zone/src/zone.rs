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

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::name::{Name, is_wire_subdomain, label_offsets};
use crate::rdata::{RData, RType, Soa};

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

    /// Every non-empty node, ordered by name in canonical order (RFC 4034 §6.1).
    pub fn nodes_sorted(&self) -> Vec<(Name, Node<'_>)> {
        let mut all: Vec<(Name, Node<'_>)> = (0..self.nodes.len() as u32)
            .map(|id| self.node_at(id))
            .filter(|n| !n.is_empty())
            .filter_map(|n| Some((Name::from_wire(n.name)?, n)))
            .collect();
        all.sort_by(|a, b| canonical_cmp(&a.0, &b.0));
        all
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

#[derive(Debug)]
struct PendingSet {
    rtype: RType,
    ttl: u32,
    rdatas: Vec<Box<[u8]>>,
    source: SourceId,
}

#[derive(Debug)]
struct ZoneBuilder {
    origin: Name,
    names: HashMap<Name, Vec<PendingSet>>,
    soa: Option<(SoaTemplate, SourceId)>,
}

/// Collects records from sources and builds zones (and catalogs of them).
///
/// Precedence: the first source to supply a (name, type) keeps it; later sources' records for
/// that pair are rejected with [`Rejection::TakenBy`] and the answer never mixes the two.
#[derive(Debug)]
pub struct CatalogBuilder {
    defaults: BuildDefaults,
    zones: BTreeMap<Name, ZoneBuilder>,
}

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
        self.zones
            .entry(origin.clone())
            .or_insert_with(|| ZoneBuilder {
                origin: origin.clone(),
                names: HashMap::new(),
                soa: None,
            });
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

    /// Adds one record to the zone `origin` (declaring the zone if needed).
    pub fn add(
        &mut self,
        origin: &Name,
        record: Record,
        source: SourceId,
    ) -> Result<(), Rejection> {
        let mut wire = Vec::with_capacity(32);
        record.data.to_wire(&mut wire);
        self.add_wire(
            origin,
            record.name,
            record.data.rtype(),
            record.ttl,
            wire.into(),
            source,
        )
    }

    /// Adds one record given in uncompressed wire form (as another zone holds it).
    pub fn add_wire(
        &mut self,
        origin: &Name,
        name: Name,
        rtype: RType,
        ttl: u32,
        rdata: Box<[u8]>,
        source: SourceId,
    ) -> Result<(), Rejection> {
        if !name.is_subdomain_of(origin) {
            return Err(Rejection::OutsideZone {
                name,
                origin: origin.clone(),
            });
        }
        self.declare(origin);
        let zone = self.zones.get_mut(origin).expect("declared above");
        if rtype == RType::CNAME && name == zone.origin {
            return Err(Rejection::CnameAtApex { name });
        }
        let sets = zone.names.entry(name.clone()).or_default();
        if let Some(pending) = sets.iter_mut().find(|p| p.rtype == rtype) {
            if pending.source != source {
                return Err(Rejection::TakenBy {
                    name,
                    rtype,
                    winner: pending.source,
                });
            }
            if rtype == RType::CNAME && pending.rdatas[0] != rdata {
                return Err(Rejection::CnameConflict { name });
            }
            pending.ttl = pending.ttl.min(ttl);
            if !pending.rdatas.contains(&rdata) {
                pending.rdatas.push(rdata);
            }
            return Ok(());
        }
        let has_cname = sets.iter().any(|p| p.rtype == RType::CNAME);
        if (rtype == RType::CNAME && !sets.is_empty()) || has_cname {
            return Err(Rejection::CnameConflict { name });
        }
        sets.push(PendingSet {
            rtype,
            ttl,
            rdatas: vec![rdata],
            source,
        });
        Ok(())
    }

    /// Adds every record of a built zone, as source `source`, except an SOA or apex NS that
    /// zone synthesised (those yield to ones a source gave). Returns the records refused.
    pub fn add_zone(&mut self, zone: &Zone, source: SourceId) -> Vec<(Name, RType, Rejection)> {
        let mut refused = Vec::new();
        let origin = zone.origin.clone();
        self.declare(&origin);
        for id in 0..zone.nodes.len() as u32 {
            let node = zone.node_at(id);
            let Some(name) = Name::from_wire(node.name) else {
                continue;
            };
            for set in node.rrsets() {
                let apex = name == origin;
                if apex
                    && ((set.rtype == RType::SOA && !zone.given_soa)
                        || (set.rtype == RType::NS && !zone.given_ns))
                {
                    continue;
                }
                for rd in set.rdatas() {
                    if let Err(why) =
                        self.add_wire(&origin, name.clone(), set.rtype, set.ttl, rd.into(), source)
                    {
                        refused.push((name.clone(), set.rtype, why));
                        break;
                    }
                }
            }
        }
        refused
    }

    /// Builds every declared zone. Apex SOA and NS are synthesised where no source gave them,
    /// from the zone's [`SoaTemplate`] and these defaults: `ns.<origin>` as name server (or the
    /// first NS record), `hostmaster.<origin>` as contact, the build serial, refresh 3600,
    /// retry 600, expire 604800, and the default TTL as SOA TTL and minimum.
    pub fn build_zones(self) -> Vec<Zone> {
        let defaults = self.defaults;
        self.zones
            .into_values()
            .map(|z| finish_zone(z, defaults))
            .collect()
    }

    /// Builds a catalog of every declared zone (see [`CatalogBuilder::build_zones`]).
    pub fn build(self) -> Catalog {
        Catalog::from_zones(self.build_zones().into_iter().map(Arc::new))
    }
}

fn finish_zone(builder: ZoneBuilder, defaults: BuildDefaults) -> Zone {
    let origin = builder.origin;
    let mut names = builder.names;
    // Empty non-terminals: every name between an owner and the apex.
    let owners: Vec<Name> = names.keys().cloned().collect();
    for owner in owners {
        let mut cur = owner.parent();
        while let Some(name) = cur {
            if !name.is_subdomain_of(&origin) || names.contains_key(&name) {
                break;
            }
            cur = name.parent();
            names.insert(name, Vec::new());
        }
    }
    let apex = names.entry(origin.clone()).or_default();
    let given_ns = apex.iter().any(|p| p.rtype == RType::NS);
    let given_soa = apex.iter().any(|p| p.rtype == RType::SOA) || builder.soa.is_some();
    let ns_name = origin.prepend(b"ns").unwrap_or_else(|_| origin.clone());
    if !given_ns {
        apex.push(PendingSet {
            rtype: RType::NS,
            ttl: defaults.default_ttl,
            rdatas: vec![ns_name.wire().into()],
            source: 0,
        });
    }
    if !apex.iter().any(|p| p.rtype == RType::SOA) {
        let t = builder.soa.map(|(t, _)| t).unwrap_or_default();
        let first_ns = apex
            .iter()
            .find(|p| p.rtype == RType::NS)
            .and_then(|p| Name::from_wire(&p.rdatas[0]));
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
        apex.push(PendingSet {
            rtype: RType::SOA,
            ttl: t.ttl.unwrap_or(defaults.default_ttl),
            rdatas: vec![wire.into()],
            source: 0,
        });
    }

    let hasher = DefaultHashBuilder::default();
    let mut table = HashTable::with_capacity(names.len());
    let mut nodes = Vec::with_capacity(names.len());
    let mut name_arena = Vec::with_capacity(names.keys().map(|n| n.wire().len()).sum());
    let mut data = Vec::new();
    let mut record_count = 0;
    let mut has_cuts = false;
    let mut has_wildcards = false;
    let mut soa = None;
    for (name, mut sets) in names {
        sets.sort_by_key(|s| s.rtype);
        let data_at = data.len() as u32;
        for set in &sets {
            data.extend_from_slice(&set.rtype.0.to_be_bytes());
            data.extend_from_slice(&set.ttl.to_be_bytes());
            data.extend_from_slice(&(set.rdatas.len() as u16).to_be_bytes());
            for rd in &set.rdatas {
                data.extend_from_slice(&(rd.len() as u16).to_be_bytes());
                data.extend_from_slice(rd);
            }
            record_count += set.rdatas.len();
            if set.rtype == RType::NS && name != origin {
                has_cuts = true;
            }
            if set.rtype == RType::SOA && name == origin {
                soa = Some((set.ttl, RData::from_wire(RType::SOA, &set.rdatas[0])));
            }
        }
        has_wildcards |= name.first_label() == Some(b"*");
        let meta = NodeMeta {
            name_at: name_arena.len() as u32,
            data_at,
            data_len: data.len() as u32 - data_at,
            name_len: name.wire().len() as u8,
        };
        name_arena.extend_from_slice(name.wire());
        let id = nodes.len() as u32;
        nodes.push(meta);
        let hash = hasher.hash_one(name.wire());
        table.insert_unique(hash, id, |&other: &u32| {
            let m: NodeMeta = nodes[other as usize];
            hasher.hash_one(
                &name_arena[m.name_at as usize..m.name_at as usize + usize::from(m.name_len)],
            )
        });
    }
    data.shrink_to_fit();
    let Some((soa_ttl, Some(RData::Soa(soa)))) = soa else {
        unreachable!("the apex SOA was ensured above")
    };
    Zone {
        origin,
        hasher,
        table,
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

    #[test]
    fn builds_empty_non_terminals_and_synthesises_apex() {
        let origin = n("example.org.");
        let mut b = CatalogBuilder::new(defaults());
        b.add(&origin, rec("_iroh.abc.example.org.", RType::TXT, "x=y"), 0)
            .unwrap();
        let cat = b.build();
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

    #[test]
    fn longest_suffix_zone_wins() {
        let mut b = CatalogBuilder::new(defaults());
        b.declare(&n("example.org."));
        b.declare(&n("sub.example.org."));
        let cat = b.build();
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
        assert!(matches!(
            b.add(&origin, rec("a.example.org.", RType::CNAME, "b"), 0),
            Err(Rejection::CnameConflict { .. })
        ));
        assert!(matches!(
            b.add(&origin, rec("a.example.org.", RType::A, "192.0.2.2"), 1),
            Err(Rejection::TakenBy { winner: 0, .. })
        ));
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
        let cat = b.build();
        let Lookup::Found(node) = cat
            .zone(&origin)
            .unwrap()
            .lookup(n("a.example.org.").wire())
        else {
            panic!()
        };
        assert_eq!(node.get(RType::A).unwrap().ttl, 30);
        assert_eq!(node.get(RType::A).unwrap().len(), 1);
    }

    #[test]
    fn finds_wildcards_and_delegations() {
        let origin = n("example.org.");
        let mut b = CatalogBuilder::new(defaults());
        b.add(&origin, rec("*.w.example.org.", RType::A, "192.0.2.9"), 0)
            .unwrap();
        b.add(&origin, rec("child.example.org.", RType::NS, "ns.child"), 0)
            .unwrap();
        let cat = b.build();
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
        let za = a.build_zones().remove(0);
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
        let zb = b.build_zones().remove(0);
        let mut m = CatalogBuilder::new(defaults());
        assert!(m.add_zone(&za, 0).is_empty());
        let refused = m.add_zone(&zb, 1);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].1, RType::A);
        let merged = m.build_zones().remove(0);
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
        let zone = b.build_zones().remove(0);
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
