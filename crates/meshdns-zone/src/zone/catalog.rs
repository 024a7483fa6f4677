//! The [`Catalog`]: the zones of one snapshot, found by longest matching origin.

use std::sync::Arc;

use crate::name::{Name, label_offsets};

use super::compact::{Zone, canonical_cmp};

/// The set of zones served by one snapshot.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub(super) zones: hashbrown::HashMap<Name, Arc<Zone>>,
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
