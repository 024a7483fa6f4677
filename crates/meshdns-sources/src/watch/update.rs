//! The zones written by dynamic UPDATE (`--update-zone`): compiled when an UPDATE changed one,
//! and told once the snapshot holding the change is live (the UPDATE's reply waits for it).

use std::sync::Arc;

use meshdns_zone::Catalog;

use super::secondary::load_zones;
use super::source::{Input, Kept, Loader, Rank};
use crate::content::Problem;
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
        load_zones(kept, loader, zones);
        true
    }

    fn published(&mut self, _kept: &mut Kept, _live: &Catalog, _refused: &[Problem]) {
        self.store.mark_served(self.version);
    }
}
