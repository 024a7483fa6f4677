//! Gathering records: [`CatalogBuilder`] takes records one by one or as a [`Records`]
//! buffer, places them in their zone's [`ZoneBuilder`], and refuses what cannot be placed.
//! Rules that depend on other records are applied when the zones are finished
//! ([`super::finish`]).

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::name::{Name, is_wire_subdomain, label_offsets};
use crate::rdata::RType;
use crate::records::{Record, Records};

use super::catalog::Catalog;
use super::compact::Zone;
use super::finish::finish_zone;

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
pub(super) struct Entry {
    pub(super) node: u32,
    pub(super) rtype: RType,
    pub(super) ttl: u32,
    pub(super) rdata_at: u32,
    pub(super) rdata_len: u16,
    pub(super) source: u32,
    pub(super) seq: u32,
}

/// Where a builder node's name lives in the name arena.
#[derive(Debug, Clone, Copy)]
pub(super) struct NameRef {
    pub(super) at: u32,
    pub(super) len: u8,
}

/// Records of one zone, gathered flat: names in one arena (each once; empty non-terminals
/// are suffixes of names already there), RDATA in another, one small [`Entry`] per record.
/// Rules that depend on other records (precedence, CNAME) are applied at build time, after
/// sorting, so adding is one hash lookup and two copies.
#[derive(Debug)]
pub(super) struct ZoneBuilder {
    pub(super) origin: Name,
    pub(super) hasher: DefaultHashBuilder,
    pub(super) index: HashTable<u32>,
    pub(super) names: Vec<NameRef>,
    pub(super) name_arena: Vec<u8>,
    pub(super) rdata_arena: Vec<u8>,
    pub(super) entries: Vec<Entry>,
    pub(super) soa: Option<(SoaTemplate, SourceId)>,
    /// Whether the SOA serial was given by a source (`None`: decided by whether an SOA record
    /// was given).
    pub(super) serial_given: Option<bool>,
}

impl ZoneBuilder {
    pub(super) fn new(origin: &Name) -> ZoneBuilder {
        let mut b = ZoneBuilder {
            serial_given: None,
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

    pub(super) fn name_of(&self, id: u32) -> &[u8] {
        let r = self.names[id as usize];
        &self.name_arena[r.at as usize..r.at as usize + usize::from(r.len)]
    }

    pub(super) fn find(&self, name: &[u8]) -> Option<u32> {
        let hash = self.hasher.hash_one(name);
        self.index
            .find(hash, |&id| self.name_of(id) == name)
            .copied()
    }

    /// The node id of `name`, added (name copied into the arena) if new.
    pub(super) fn node_id(&mut self, name: &[u8]) -> u32 {
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

    pub(super) fn insert(&mut self, r: NameRef) -> u32 {
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
    pub(super) fn add_empty_non_terminals(&mut self) {
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
    pub(super) fn reserve(&mut self, records: usize, rdata_bytes: usize) {
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
    pub(super) defaults: BuildDefaults,
    pub(super) zones: BTreeMap<Name, ZoneBuilder>,
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
                if template.serial.is_some() {
                    zone.serial_given = Some(true);
                }
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

    pub(super) fn zone_for(
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
        if zone.given_soa {
            target.serial_given.get_or_insert(zone.given_serial);
        }
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
pub(super) fn placement_refusal(origin: &Name, owner: &[u8], rtype: RType) -> Option<Rejection> {
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

pub(super) fn push_entry(
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
