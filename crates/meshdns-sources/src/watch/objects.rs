//! DNSZones and DNSRecordSets handed over by a live reader (`serve --kubernetes`): compiled
//! like a file when their version moves, and handed back with their verdicts once the snapshot
//! serving them is live (for their status).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use meshdns_zone::Catalog;
use tracing::info;

use super::health::ObjectCounts;
use super::source::{Input, Kept, Loader, Rank, log_skipped};
use crate::cluster::{ObjectProblem, ObjectVerdict, Reason};
use crate::content::Problem;
use crate::manifests::{self, Manifest, ManifestFeed, Served, Verdicts};
use crate::snapshot::load_parsed;
use crate::status;

/// The feed, the version last taken, and what was loaded but is not live yet.
pub(super) struct ObjectFeed {
    feed: Arc<ManifestFeed>,
    version: u64,
    /// Loaded but not yet in a live snapshot: handed back after the next swap.
    pending: Option<(Arc<Vec<Manifest>>, Arc<Verdicts>)>,
    /// The cluster objects' last readings: a hand-over reads only the objects that changed.
    cache: crate::cluster::ReadCache,
    /// The kinds of the cluster's objects read (their counts are shown even when none is).
    kinds: Vec<&'static str>,
    /// What was last handed back: the objects, their verdicts as read, and what the assembly
    /// refused of them.
    last: (Option<Arc<Vec<Manifest>>>, Arc<Verdicts>, Vec<Problem>),
}

impl ObjectFeed {
    pub fn new(feed: Arc<ManifestFeed>) -> ObjectFeed {
        ObjectFeed {
            feed,
            version: 0,
            pending: None,
            cache: crate::cluster::ReadCache::default(),
            kinds: Vec::new(),
            last: Default::default(),
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
        let started = std::time::Instant::now();
        let (parsed, verdicts) = manifests::read_cached(
            &kept.label,
            &objects,
            &loader.settings.cluster,
            &mut self.cache,
        );
        let read_ms = started.elapsed().as_millis() as u64;
        let loaded = load_parsed(&kept.label, parsed, loader.defaults());
        // A feed reloads on every object change: only problems that are new are logged.
        kept.reported
            .update(&loaded.problems)
            .into_iter()
            .for_each(log_skipped);
        info!(source = %kept.label, records = loaded.records(), skipped = loaded.problems.len(),
            read_ms, elapsed_ms = started.elapsed().as_millis() as u64, "objects loaded");
        self.version = now;
        self.kinds = (loader.settings.cluster.kinds.iter())
            .map(|k| k.object_kind())
            .collect();
        self.pending = Some((objects, Arc::new(verdicts)));
        kept.succeed(loaded);
        true
    }

    /// The feed learns what the live snapshot serves from its objects, with each zone's name
    /// servers as served, and what the catalog's assembly refused of the cluster's objects
    /// (again when only that changed: a file now gives a name an object gave).
    fn published(&mut self, kept: &mut Kept, live: &Catalog, refused: &[Problem]) {
        let ours: Vec<Problem> = refused
            .iter()
            .filter(|p| p.file == kept.label)
            .cloned()
            .collect();
        let Some((objects, verdicts)) = self.pending.take().or_else(|| {
            (ours != self.last.2)
                .then(|| self.last.0.clone().map(|o| (o, self.last.1.clone())))
                .flatten()
        }) else {
            return;
        };
        // Shared unless the assembly refused some of the objects' records.
        let mut served = verdicts.clone();
        if !ours.is_empty() {
            not_served(&mut Arc::make_mut(&mut served).objects, &ours);
        }
        kept.counters.objects = counts(&self.kinds, &served.objects);
        let nameservers = served
            .zones
            .iter()
            .filter_map(|z| z.origin.as_ref())
            .map(|o| {
                let ns = live.zone(o).map(|z| status::nameservers(z));
                (o.clone(), ns.unwrap_or_default())
            })
            .collect();
        self.last = (Some(objects.clone()), verdicts, ours);
        self.feed.mark_served(Served {
            objects,
            verdicts: served,
            nameservers,
        });
    }
}

/// Adds to each object's verdict what the assembly refused of its records (`refused` names
/// the object first: `Service shop/web web.example.org`).
fn not_served(verdicts: &mut [ObjectVerdict], refused: &[Problem]) {
    if refused.is_empty() {
        return;
    }
    let by_label: HashMap<String, usize> = verdicts
        .iter()
        .enumerate()
        .map(|(i, v)| (v.label(), i))
        .collect();
    for p in refused {
        let mut words = p.entry.splitn(3, ' ');
        let (Some(kind), Some(object)) = (words.next(), words.next()) else {
            continue;
        };
        if let Some(&i) = by_label.get(&format!("{kind} {object}")) {
            verdicts[i].problems.push(ObjectProblem {
                reason: Reason::NotServed,
                field: words.next().unwrap_or_default().to_string(),
                why: p.reason.clone(),
            });
        }
    }
}

/// The objects and their problems by kind (every kind read, none of them too).
fn counts(
    kinds: &[&'static str],
    verdicts: &[ObjectVerdict],
) -> BTreeMap<&'static str, ObjectCounts> {
    let mut out: BTreeMap<&'static str, ObjectCounts> = kinds
        .iter()
        .map(|k| (*k, ObjectCounts::default()))
        .collect();
    for v in verdicts {
        let c = out.entry(v.kind).or_default();
        c.read += 1;
        for p in &v.problems {
            *c.problems.entry(p.reason.as_str()).or_default() += 1;
        }
    }
    out
}
