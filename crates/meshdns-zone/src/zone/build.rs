//! Gathering records: [`CatalogBuilder`] takes records one by one or as a [`Records`]
//! buffer, places them in their zone's [`ZoneBuilder`], and refuses what cannot be placed.
//! Rules that depend on other records are applied when the zones are finished
//! ([`super::finish`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::name::{Name, is_wire_subdomain};
use crate::rdata::RType;
use crate::records::{Record, Records};

use super::catalog::Catalog;
use super::compact::Zone;
use super::finish::finish_zone;
use super::gather::{BuildDefaults, Refused, Rejection, SoaTemplate, SourceId};
use super::gather::{Entry, ZoneBuilder};

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

impl Zone {
    /// This zone built again with `records` added after its own (a second source: its own
    /// (name, type) pairs win), and what was refused of them. Records outside the zone are
    /// refused too.
    pub fn with_records(
        &self,
        records: impl IntoIterator<Item = Record>,
        defaults: BuildDefaults,
    ) -> (Zone, Vec<Refused>) {
        let mut builder = CatalogBuilder::new(defaults);
        builder.add_zone(self, 0);
        let mut refused = Vec::new();
        for record in records {
            let (name, rtype) = (record.name.clone(), record.data.rtype());
            if let Err(why) = builder.add(&self.origin, record, 1) {
                refused.push((name, rtype, why));
            }
        }
        let (built, more) = builder.build_zones();
        refused.extend(more);
        let zone = built.into_iter().next().expect("the zone was added");
        (zone, refused)
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
