//! The pkarr relay's store (`serve --pkarr`): its origins' zones, compiled once, with the
//! store's overlay attached, so publishes are served without a new snapshot.

use std::sync::Arc;

use super::PKARR_LABEL;
use super::source::{Input, Kept, Loader, Rank};
use crate::content::{Parsed, ZoneContent};
use crate::pkarr::PkarrStore;
use crate::snapshot::load_parsed;

/// The store whose origins are served.
pub(super) struct PkarrOrigins {
    store: Arc<PkarrStore>,
}

impl PkarrOrigins {
    pub fn new(store: Arc<PkarrStore>) -> PkarrOrigins {
        PkarrOrigins { store }
    }
}

impl Input for PkarrOrigins {
    fn rank(&self) -> Rank {
        Rank::Pkarr
    }

    fn check(&mut self, kept: &mut Kept, loader: &mut Loader) -> bool {
        if kept.last_good.is_some() {
            return false;
        }
        let zones = self
            .store
            .origins()
            .iter()
            .map(ZoneContent::empty)
            .collect();
        let parsed = Parsed {
            zones,
            ..Parsed::default()
        };
        let mut loaded = load_parsed(PKARR_LABEL, parsed, loader.defaults());
        loaded.compiled.overlay = Some(self.store.overlay().clone());
        kept.succeed(loaded);
        true
    }
}
