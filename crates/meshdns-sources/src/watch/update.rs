//! The zones written by dynamic UPDATE (`--update-zone`): compiled when an UPDATE changed one,
//! and told once the snapshot holding the change is live (the UPDATE's reply waits for it).

use std::sync::Arc;

use meshdns_zone::{Catalog, Records};

use super::source::{Input, Kept, Loader, Rank, log_skipped};
use crate::content::{Parsed, Problem, ZoneContent};
use crate::snapshot::load_parsed;
use crate::update::UpdateStore;

/// The store and the version last taken.
pub(super) struct UpdateZones {
    store: Arc<UpdateStore>,
    version: u64,
}

impl UpdateZones {
    pub fn new(store: Arc<UpdateStore>) -> UpdateZones {
        UpdateZones { store, version: 0 }
    }
}

impl Input for UpdateZones {
    fn rank(&self) -> Rank {
        Rank::Update
    }

    fn check(&mut self, kept: &mut Kept, loader: &mut Loader) -> bool {
        let Some((now, zones)) = self.store.take_if_newer(self.version) else {
            return false;
        };
        self.version = now;
        let zones = zones
            .into_iter()
            .map(|(origin, rrsets)| {
                let mut records = Records::new();
                for ((owner, rtype), (ttl, set)) in &rrsets {
                    for rdata in set {
                        let _ = records.push_with(owner, meshdns_zone::RType(*rtype), *ttl, |b| {
                            b.extend_from_slice(rdata);
                            Ok::<(), ()>(())
                        });
                    }
                }
                ZoneContent {
                    origin,
                    soa: None,
                    records,
                }
            })
            .collect();
        let parsed = Parsed {
            zones,
            ..Parsed::default()
        };
        let loaded = load_parsed(&kept.label, parsed, loader.defaults());
        loaded.problems.iter().for_each(log_skipped);
        kept.succeed(loaded);
        true
    }

    fn published(&mut self, _kept: &mut Kept, _live: &Catalog, _refused: &[Problem]) {
        self.store.mark_served(self.version);
    }
}
