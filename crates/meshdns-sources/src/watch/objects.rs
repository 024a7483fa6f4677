//! DNSZones and DNSRecordSets handed over by a live reader (`serve --kubernetes`): compiled
//! like a file when their version moves, and handed back with their verdicts once the snapshot
//! serving them is live (for their status).

use std::sync::Arc;

use meshdns_zone::Catalog;
use serde_json::Value;
use tracing::info;

use super::source::{Input, Kept, Loader, Rank, log_skipped};
use crate::manifests::{self, ManifestFeed, Served, Verdicts};
use crate::snapshot::load_parsed;
use crate::status;

/// The feed, the version last taken, and what was loaded but is not live yet.
pub(super) struct ObjectFeed {
    feed: Arc<ManifestFeed>,
    version: u64,
    /// Loaded but not yet in a live snapshot: handed back after the next swap.
    pending: Option<(std::sync::Arc<Vec<Value>>, Verdicts)>,
    /// The cluster objects' last readings: a hand-over reads only the objects that changed.
    cache: crate::cluster::ReadCache,
}

impl ObjectFeed {
    pub fn new(feed: Arc<ManifestFeed>) -> ObjectFeed {
        ObjectFeed {
            feed,
            version: 0,
            pending: None,
            cache: crate::cluster::ReadCache::default(),
        }
    }
}

impl Input for ObjectFeed {
    fn rank(&self) -> Rank {
        Rank::Feed
    }

    fn check(&mut self, kept: &mut Kept, loader: &mut Loader) -> bool {
        let Some((now, objects)) = self.feed.take_if_newer(self.version) else {
            return false;
        };
        let (parsed, verdicts) = manifests::read_cached(
            &kept.label,
            &objects,
            &loader.settings.cluster,
            &mut self.cache,
        );
        let loaded = load_parsed(&kept.label, parsed, loader.defaults());
        // A feed reloads on every object change: only problems that are new are logged.
        kept.reported
            .update(&loaded.problems)
            .into_iter()
            .for_each(log_skipped);
        info!(source = %kept.label, records = loaded.records(), skipped = loaded.problems.len(), "objects loaded");
        self.version = now;
        self.pending = Some((objects, verdicts));
        kept.succeed(loaded);
        true
    }

    /// The feed learns what the live snapshot serves from its objects, with each zone's name
    /// servers as served.
    fn published(&mut self, live: &Catalog) {
        let Some((objects, verdicts)) = self.pending.take() else {
            return;
        };
        let nameservers = verdicts
            .zones
            .iter()
            .filter_map(|z| z.origin.as_ref())
            .map(|o| {
                let ns = live.zone(o).map(|z| status::nameservers(z));
                (o.clone(), ns.unwrap_or_default())
            })
            .collect();
        self.feed.mark_served(Served {
            objects,
            verdicts,
            nameservers,
        });
    }
}
