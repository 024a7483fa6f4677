//! Zones and the catalog: immutable snapshots built aside and then served.
//!
//! A [`Zone`] maps every owner name (lower-cased wire format) to a [`Node`]. Every name between
//! an owner and the apex also gets a node, empty when nothing is there, so a lookup can tell an
//! empty non-terminal (NODATA, RFC 8020) from a name that does not exist (NXDOMAIN) with one hash
//! lookup. The [`Catalog`] picks the zone with the longest origin that is a suffix of the query
//! name (RFC 1034 §4.3.2 step 2).
//!
//! Snapshots are built by [`CatalogBuilder`], which is where every rule about what may be served
//! lives: names outside their zone, CNAME beside other data (RFC 1034 §3.6.2, RFC 2181 §10.1),
//! one source per (name, type), and the SOA/NS every apex must have.

use std::collections::{BTreeMap, HashMap};

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

/// All records of one type at one name (RFC 2181 §5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RRset {
    /// The records' type.
    pub rtype: RType,
    /// One TTL for the whole set (the lowest given, RFC 2181 §5.2).
    pub ttl: u32,
    /// The records, in the order their source listed them, duplicates removed.
    pub data: Vec<RData>,
}

/// Everything at one owner name. No RRsets means an empty non-terminal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    rrsets: Vec<RRset>,
}

impl Node {
    /// The RRset of `rtype`, if there is one.
    pub fn get(&self, rtype: RType) -> Option<&RRset> {
        self.rrsets.iter().find(|s| s.rtype == rtype)
    }

    /// All RRsets, ordered by type code.
    pub fn rrsets(&self) -> &[RRset] {
        &self.rrsets
    }

    /// Whether the node is an empty non-terminal.
    pub fn is_empty(&self) -> bool {
        self.rrsets.is_empty()
    }
}

/// What a zone holds for a name, as the answer logic needs to know it.
#[derive(Debug)]
pub enum Lookup<'z> {
    /// The name exists with these RRsets.
    Found(&'z Node),
    /// The name does not exist but a wildcard (RFC 4592) synthesises it from this node.
    Wildcard(&'z Node),
    /// The name exists only because names below it do (NODATA for every type).
    EmptyNonTerminal,
    /// The name is at or below a zone cut: refer to the child's name servers.
    Delegation {
        /// The owner name of the cut.
        cut: &'z Name,
        /// The child zone's NS RRset.
        ns: &'z RRset,
    },
    /// Neither the name nor anything below it exists.
    NxDomain,
}

/// One authoritative zone.
#[derive(Debug, Clone)]
pub struct Zone {
    origin: Name,
    nodes: HashMap<Name, Node>,
    soa: Soa,
    soa_ttl: u32,
    has_cuts: bool,
    has_wildcards: bool,
    record_count: usize,
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
    pub fn soa_rrset(&self) -> &RRset {
        self.nodes[&self.origin]
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

    /// The node at exactly `name` (lower-cased wire format), ignoring zone cuts.
    pub fn node(&self, name: &[u8]) -> Option<&Node> {
        self.nodes.get(name)
    }

    /// Every (name, node) pair, ordered by name in canonical order (RFC 4034 §6.1).
    pub fn nodes_sorted(&self) -> Vec<(&Name, &Node)> {
        let mut all: Vec<_> = self.nodes.iter().filter(|(_, n)| !n.is_empty()).collect();
        all.sort_by(|a, b| canonical_cmp(a.0, b.0));
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
        if let Some(node) = self.nodes.get(name) {
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
        let offsets: Vec<usize> = label_offsets(name)
            .filter(|&o| name.len() - o > apex_len)
            .collect();
        for &o in offsets.iter().rev() {
            if let Some((cut, node)) = self.nodes.get_key_value(&name[o..])
                && let Some(ns) = node.get(RType::NS)
            {
                return Some(Lookup::Delegation { cut, ns });
            }
        }
        None
    }

    /// The wildcard node at `*.<closest encloser>` (RFC 4592 §3.3.1), if any.
    fn find_wildcard(&self, name: &[u8]) -> Option<&Node> {
        let encloser = label_offsets(name)
            .skip(1)
            .map(|o| &name[o..])
            .find(|n| self.nodes.contains_key(*n))?;
        let mut wild = [0u8; 256];
        wild[0] = 1;
        wild[1] = b'*';
        let len = 2 + encloser.len();
        if len > 255 {
            return None;
        }
        wild[2..len].copy_from_slice(encloser);
        self.nodes.get(&wild[..len]).filter(|n| !n.is_empty())
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
    zones: HashMap<Name, Zone>,
}

impl Catalog {
    /// A catalog with no zones: every query is REFUSED.
    pub fn empty() -> Catalog {
        Catalog::default()
    }

    /// The zone whose origin is the longest suffix of `qname` (lower-cased wire format).
    pub fn find_zone(&self, qname: &[u8]) -> Option<&Zone> {
        label_offsets(qname).find_map(|o| self.zones.get(&qname[o..]))
    }

    /// The zone with exactly this origin.
    pub fn zone(&self, origin: &Name) -> Option<&Zone> {
        self.zones.get(origin)
    }

    /// All zones, ordered by origin.
    pub fn zones(&self) -> Vec<&Zone> {
        let mut all: Vec<&Zone> = self.zones.values().collect();
        all.sort_by(|a, b| canonical_cmp(&a.origin, &b.origin));
        all
    }

    /// Total number of records across zones.
    pub fn record_count(&self) -> usize {
        self.zones.values().map(Zone::record_count).sum()
    }
}

/// Settings the builder needs to fill in what sources leave out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildDefaults {
    /// TTL for synthesised SOA and NS records, and the SOA minimum (negative-caching TTL).
    pub default_ttl: u32,
    /// Serial for synthesised SOA records; the caller makes it grow with every snapshot.
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

#[derive(Debug)]
struct PendingSet {
    set: RRset,
    source: SourceId,
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
    /// Serial; by default the snapshot serial, which grows with every reload.
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
struct ZoneBuilder {
    origin: Name,
    names: HashMap<Name, Vec<PendingSet>>,
    soa: Option<(SoaTemplate, SourceId)>,
}

/// Collects records from every source and builds a [`Catalog`].
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

    /// Whether a zone with this origin has been declared.
    pub fn has_zone(&self, origin: &Name) -> bool {
        self.zones.contains_key(origin)
    }

    /// The declared zone with the longest origin that `name` is at or below.
    pub fn enclosing_zone(&self, name: &Name) -> Option<&Name> {
        let wire = name.wire();
        label_offsets(wire).find_map(|o| self.zones.get_key_value(&wire[o..]).map(|(k, _)| k))
    }

    /// Adds one record to the zone `origin` (declaring the zone if needed).
    pub fn add(
        &mut self,
        origin: &Name,
        record: Record,
        source: SourceId,
    ) -> Result<(), Rejection> {
        if !record.name.is_subdomain_of(origin) {
            return Err(Rejection::OutsideZone {
                name: record.name,
                origin: origin.clone(),
            });
        }
        self.declare(origin);
        let zone = self.zones.get_mut(origin).expect("declared above");
        let rtype = record.data.rtype();
        if rtype == RType::CNAME && record.name == zone.origin {
            return Err(Rejection::CnameAtApex { name: record.name });
        }
        let sets = zone.names.entry(record.name.clone()).or_default();
        if let Some(pending) = sets.iter_mut().find(|p| p.set.rtype == rtype) {
            if pending.source != source {
                return Err(Rejection::TakenBy {
                    name: record.name,
                    rtype,
                    winner: pending.source,
                });
            }
            if rtype == RType::CNAME && pending.set.data[0] != record.data {
                return Err(Rejection::CnameConflict { name: record.name });
            }
            pending.set.ttl = pending.set.ttl.min(record.ttl);
            if !pending.set.data.contains(&record.data) {
                pending.set.data.push(record.data);
            }
            return Ok(());
        }
        let has_cname = sets.iter().any(|p| p.set.rtype == RType::CNAME);
        if (rtype == RType::CNAME && !sets.is_empty()) || has_cname {
            return Err(Rejection::CnameConflict { name: record.name });
        }
        sets.push(PendingSet {
            set: RRset {
                rtype,
                ttl: record.ttl,
                data: vec![record.data],
            },
            source,
        });
        Ok(())
    }

    /// Builds the snapshot. Apex SOA and NS are synthesised where no source gave them, from the
    /// zone's [`SoaTemplate`] and these defaults: `ns.<origin>` as name server (or the first NS
    /// record), `hostmaster.<origin>` as contact, the snapshot serial, refresh 3600, retry 600,
    /// expire 604800, and the default TTL as SOA TTL and minimum.
    pub fn build(self) -> Catalog {
        let defaults = self.defaults;
        let zones = self
            .zones
            .into_values()
            .map(|z| (z.origin.clone(), finish_zone(z, defaults)))
            .collect();
        Catalog { zones }
    }
}

fn finish_zone(builder: ZoneBuilder, defaults: BuildDefaults) -> Zone {
    let origin = builder.origin;
    let mut nodes: HashMap<Name, Node> = HashMap::with_capacity(builder.names.len() + 1);
    let mut record_count = 0;
    for (name, sets) in builder.names {
        let mut rrsets: Vec<RRset> = sets.into_iter().map(|p| p.set).collect();
        rrsets.sort_by_key(|s| s.rtype);
        record_count += rrsets.iter().map(|s| s.data.len()).sum::<usize>();
        nodes.insert(name, Node { rrsets });
    }
    // Empty non-terminals: every name between an owner and the apex.
    let owners: Vec<Name> = nodes.keys().cloned().collect();
    for owner in owners {
        let mut cur = owner.parent();
        while let Some(name) = cur {
            if !name.is_subdomain_of(&origin) || nodes.contains_key(&name) {
                break;
            }
            cur = name.parent();
            nodes.insert(name, Node::default());
        }
    }
    let apex = nodes.entry(origin.clone()).or_default();
    let ns_name = origin.prepend(b"ns").unwrap_or_else(|_| origin.clone());
    if apex.get(RType::NS).is_none() {
        apex.rrsets.push(RRset {
            rtype: RType::NS,
            ttl: defaults.default_ttl,
            data: vec![RData::Ns(ns_name.clone())],
        });
        record_count += 1;
    }
    if apex.get(RType::SOA).is_none() {
        let t = builder.soa.map(|(t, _)| t).unwrap_or_default();
        let mname = match apex.get(RType::NS).and_then(|s| s.data.first()) {
            Some(RData::Ns(n)) => n.clone(),
            _ => ns_name,
        };
        let soa = Soa {
            mname: t.mname.unwrap_or(mname),
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
        let ttl = t.ttl.unwrap_or(defaults.default_ttl);
        apex.rrsets.push(RRset {
            rtype: RType::SOA,
            ttl,
            data: vec![RData::Soa(Box::new(soa))],
        });
        record_count += 1;
    }
    apex.rrsets.sort_by_key(|s| s.rtype);
    let soa_set = apex.get(RType::SOA).expect("ensured above");
    let soa_ttl = soa_set.ttl;
    let RData::Soa(soa) = &soa_set.data[0] else {
        unreachable!("SOA RRset holds SOA data")
    };
    let soa = (**soa).clone();
    let has_cuts = nodes
        .iter()
        .any(|(n, node)| *n != origin && node.get(RType::NS).is_some());
    let has_wildcards = nodes.keys().any(|n| n.first_label() == Some(b"*"));
    Zone {
        origin,
        nodes,
        soa,
        soa_ttl,
        has_cuts,
        has_wildcards,
        record_count,
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
        assert_eq!(node.get(RType::A).unwrap().data.len(), 1);
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
