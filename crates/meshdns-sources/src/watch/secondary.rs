//! A zone transferred from a primary (`serve --secondary`): its records as the last transfer
//! gave them, nothing before the first transfer or once it expired.

use std::sync::Arc;

use super::source::{Input, Kept, Loader, Rank, log_skipped};
use crate::content::{Parsed, ZoneContent};
use crate::secondary::SecondaryFeed;
use crate::snapshot::load_parsed;

/// The feed and the version last taken.
pub(super) struct SecondaryZone {
    feed: Arc<SecondaryFeed>,
    version: u64,
}

impl SecondaryZone {
    pub fn new(feed: Arc<SecondaryFeed>) -> SecondaryZone {
        SecondaryZone { feed, version: 0 }
    }
}

impl Input for SecondaryZone {
    fn rank(&self) -> Rank {
        Rank::Secondary
    }

    fn check(&mut self, kept: &mut Kept, loader: &mut Loader) -> bool {
        let Some((now, records)) = self.feed.take_if_newer(self.version) else {
            return false;
        };
        self.version = now;
        let zones = match records {
            Some(rrs) => vec![ZoneContent::from_wire(
                self.feed.origin(),
                rrs.iter()
                    .map(|r| (&r.owner[..], r.rtype, r.ttl, &r.rdata[..])),
            )],
            // Not transferred yet, or expired: the zone is not served.
            None => Vec::new(),
        };
        load_zones(kept, loader, zones);
        true
    }

    /// A secondary zone's readiness is its transfer's, not a first load's.
    fn not_loaded(&self, _kept: &Kept) -> Option<String> {
        None
    }

    fn not_ready(&self) -> Option<String> {
        self.feed.not_ready()
    }
}

/// Loads zones given whole into `kept` (their problems logged).
pub(super) fn load_zones(kept: &mut Kept, loader: &mut Loader, zones: Vec<ZoneContent>) {
    let parsed = Parsed {
        zones,
        ..Parsed::default()
    };
    let loaded = load_parsed(&kept.label, parsed, loader.defaults());
    loaded.problems.iter().for_each(log_skipped);
    kept.succeed(loaded);
}
