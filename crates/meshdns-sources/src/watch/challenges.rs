//! The ACME DNS-01 challenge records (`--acme-challenge dns-01`): placed into the deepest zone
//! served, ahead of the cluster's objects' names, and taken out once validated.

use std::sync::Arc;

use super::source::{Input, Kept, Loader, Rank};
use crate::challenges::{CHALLENGE_OBJECT, Dns01Challenges};
use crate::snapshot::{CompiledSource, Loaded};

/// The store and the version last taken.
pub(super) struct Challenges {
    store: Arc<Dns01Challenges>,
    version: u64,
}

impl Challenges {
    pub fn new(store: Arc<Dns01Challenges>) -> Challenges {
        Challenges { store, version: 0 }
    }
}

impl Input for Challenges {
    fn rank(&self) -> Rank {
        Rank::Challenge
    }

    fn check(&mut self, kept: &mut Kept, _loader: &mut Loader) -> bool {
        let Some((now, records)) = self.store.take_if_newer(self.version) else {
            return false;
        };
        self.version = now;
        let placed = records
            .into_iter()
            .map(|r| (r, CHALLENGE_OBJECT.to_string()))
            .collect();
        kept.succeed(Loaded {
            compiled: CompiledSource {
                placed: Arc::new(placed),
                ..CompiledSource::default()
            },
            ..Loaded::default()
        });
        true
    }

    /// Challenges come and go: there is never anything to wait for.
    fn not_loaded(&self, _kept: &Kept) -> Option<String> {
        None
    }
}
