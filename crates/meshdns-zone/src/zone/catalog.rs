//! The [`Catalog`]: the zones of one snapshot, found by longest matching origin.

use std::sync::Arc;

use crate::name::{Name, label_offsets};

use super::compact::{Zone, canonical_cmp};
use super::overlay::Overlay;

/// The set of zones served by one snapshot, each with the keys published under it, if any.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub(super) zones: hashbrown::HashMap<Name, Served>,
}

#[derive(Debug, Clone)]
pub(super) struct Served {
    zone: Arc<Zone>,
    overlay: Option<Arc<Overlay>>,
    /// The SOA serial served: the zone's own until [`Catalog::set_serial`] decides another, so
    /// a serial can change without rebuilding (or copying) the zone.
    serial: u32,
}

/// What the catalog serves for one zone.
#[derive(Debug, Clone, Copy)]
pub struct Found<'c> {
    /// The zone's own data.
    pub zone: &'c Zone,
    /// The keys published under it, if it is a pkarr origin.
    pub overlay: Option<&'c Overlay>,
    /// The SOA serial served.
    pub serial: u32,
}

impl Served {
    fn found(&self) -> Found<'_> {
        Found {
            zone: &self.zone,
            overlay: self.overlay.as_deref(),
            serial: self.serial,
        }
    }
}

impl Catalog {
    /// A catalog with no zones: every query is REFUSED.
    pub fn empty() -> Catalog {
        Catalog::default()
    }

    /// A catalog of these zones (later zones with the same origin replace earlier ones).
    pub fn from_zones(zones: impl IntoIterator<Item = Arc<Zone>>) -> Catalog {
        Catalog {
            zones: zones
                .into_iter()
                .map(|zone| {
                    let served = Served {
                        serial: zone.soa().serial,
                        zone,
                        overlay: None,
                    };
                    (served.zone.origin.clone(), served)
                })
                .collect(),
        }
    }

    /// Serves what keys publish in `overlay` under the zone `origin` (which must be in the
    /// catalog; otherwise nothing changes).
    pub fn attach(&mut self, origin: &Name, overlay: Arc<Overlay>) {
        if let Some(served) = self.zones.get_mut(origin) {
            served.overlay = Some(overlay);
        }
    }

    /// Serves `serial` as the SOA serial of zone `origin` (if it is in the catalog).
    pub fn set_serial(&mut self, origin: &Name, serial: u32) {
        if let Some(served) = self.zones.get_mut(origin) {
            served.serial = serial;
        }
    }

    /// The zone for `qname` (as [`Catalog::find_zone`]), the keys published under it, and its
    /// serial.
    pub fn find(&self, qname: &[u8]) -> Option<Found<'_>> {
        label_offsets(qname)
            .find_map(|o| self.zones.get(&qname[o..]))
            .map(Served::found)
    }

    /// What is served for exactly `origin`.
    pub fn get(&self, origin: &Name) -> Option<Found<'_>> {
        self.zones.get(origin).map(Served::found)
    }

    /// The zone whose origin is the longest suffix of `qname` (lower-cased wire format).
    pub fn find_zone(&self, qname: &[u8]) -> Option<&Zone> {
        self.find(qname).map(|f| f.zone)
    }

    /// The overlay attached under `origin`, shared.
    pub fn overlay(&self, origin: &Name) -> Option<&Arc<Overlay>> {
        self.zones.get(origin).and_then(|s| s.overlay.as_ref())
    }

    /// The zone with exactly this origin.
    pub fn zone(&self, origin: &Name) -> Option<&Arc<Zone>> {
        self.zones.get(origin).map(|s| &s.zone)
    }

    /// All zones, ordered by origin.
    pub fn zones(&self) -> Vec<&Zone> {
        let mut all: Vec<&Zone> = self.zones.values().map(|s| &*s.zone).collect();
        all.sort_by(|a, b| canonical_cmp(&a.origin, &b.origin));
        all
    }

    /// Every origin with the serial it serves.
    pub fn serials(&self) -> impl Iterator<Item = (&Name, u32)> + '_ {
        self.zones.iter().map(|(o, s)| (o, s.serial))
    }

    /// Total number of records across zones (published keys' records not included).
    pub fn record_count(&self) -> usize {
        self.zones.values().map(|s| s.zone.record_count()).sum()
    }
}
