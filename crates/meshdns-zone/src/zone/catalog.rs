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

    /// The zone for `qname` (as [`Catalog::find_zone`]) and the keys published under it.
    pub fn find(&self, qname: &[u8]) -> Option<(&Zone, Option<&Overlay>)> {
        label_offsets(qname)
            .find_map(|o| self.zones.get(&qname[o..]))
            .map(|s| (&*s.zone, s.overlay.as_deref()))
    }

    /// The zone whose origin is the longest suffix of `qname` (lower-cased wire format).
    pub fn find_zone(&self, qname: &[u8]) -> Option<&Zone> {
        self.find(qname).map(|(zone, _)| zone)
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

    /// Total number of records across zones (published keys' records not included).
    pub fn record_count(&self) -> usize {
        self.zones.values().map(|s| s.zone.record_count()).sum()
    }
}
