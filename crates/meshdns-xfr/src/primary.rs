//! The primary's state: every zone's current version and serial, its journal, and what
//! secondaries are told.
//!
//! The loader thread (the one writer of snapshots) calls [`Primary::update`] with each new
//! catalog before serving it, and [`Primary::stamp_published`] with the keys published since
//! the last stamp; both decide serials (see [`crate::serial`]) and record differences. Transfers
//! read [`Primary::version`] and [`Primary::ixfr`] from any thread.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use meshdns_zone::{Catalog, Key, Name, Published, Zone, key_of_label};
use tracing::{info, warn};

use crate::content::{PublishedSet, Rr, Version, diff, published_records, zone_records};
use crate::journal::{Delta, Journal};
use crate::serial::{SerialBook, content_id, digest, next_serial, published_hash, serial_gt};

/// Zones up to this many records (both versions together) get their difference recorded
/// before the new version is served (a few milliseconds); larger ones just after, by
/// [`Primary::record_differences`], so their answers are not held back.
const INLINE_DIFF_RECORDS: usize = 200_000;

/// What an IXFR request gets.
#[derive(Debug)]
pub enum Ixfr {
    /// The client has the current serial (or a newer one): the current SOA only.
    UpToDate(Version),
    /// One condensed difference from the client's serial to the current version.
    Delta(Version, Delta),
    /// The journal does not reach back to the client's serial: the whole zone.
    Full(Version),
}

#[derive(Debug)]
struct ZoneState {
    version: Version,
    digest: [u8; 32],
    journal: Journal,
    /// Records in the journal's file (it is rewritten once it holds twice the journal's).
    file_records: usize,
}

#[derive(Debug, Default)]
struct Inner {
    zones: HashMap<Name, ZoneState>,
    book: SerialBook,
    /// The keys published as of the last stamp (shared by every pkarr origin).
    published: Arc<PublishedSet>,
    /// The sum of [`published_hash`] over `published`.
    published_sum: u64,
    /// Where journals are kept (`<data-dir>/journal`).
    journal_dir: Option<std::path::PathBuf>,
    /// Versions replaced by [`Primary::update`] whose differences are still to be recorded.
    pending: Vec<(Name, Version, Version)>,
}

impl Inner {
    fn content_id(&self, digest: &[u8; 32], pkarr: bool) -> String {
        content_id(digest, pkarr.then_some(self.published_sum))
    }
}

/// Serials, versions and journals of every zone served.
#[derive(Debug)]
pub struct Primary {
    inner: Mutex<Inner>,
    journal_records: usize,
    /// Whether transfers are served: without them, serials are decided but no differences or
    /// published keys are kept.
    transfers: bool,
    serials: tokio::sync::watch::Sender<Arc<BTreeMap<Name, u32>>>,
}

impl Primary {
    /// Keeps serials in `data_dir` (when given) and, when `transfers` are served, at most
    /// `journal_records` records of differences per zone.
    pub fn new(data_dir: Option<&Path>, journal_records: usize, transfers: bool) -> Primary {
        Primary {
            inner: Mutex::new(Inner {
                book: SerialBook::open(data_dir),
                journal_dir: data_dir.filter(|_| transfers).map(|d| d.join("journal")),
                ..Inner::default()
            }),
            journal_records,
            transfers,
            serials: tokio::sync::watch::Sender::new(Arc::default()),
        }
    }

    /// Every zone's current serial, updated by [`Primary::announce`] (for NOTIFY).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Arc<BTreeMap<Name, u32>>> {
        self.serials.subscribe()
    }

    /// Decides the serial of every zone of a new snapshot, before it is served: a zone whose
    /// content is unchanged keeps its serial; a changed one gets the serial its source gave, or
    /// the next one (RFC 1982), and the difference goes in its journal. Returns the zones whose
    /// serial changed.
    pub fn update(&self, catalog: &mut Catalog, now: u32) -> Vec<(Name, u32)> {
        self.update_above(catalog, now, &|_| None)
    }

    /// [`Primary::update`], where a zone new to this primary gets a serial above `floor`'s for
    /// it, if any: a view's zone that was served with the shared serial until the view changed
    /// it must not go back below what its secondaries have.
    pub fn update_above(
        &self,
        catalog: &mut Catalog,
        now: u32,
        floor: &dyn Fn(&Name) -> Option<u32>,
    ) -> Vec<(Name, u32)> {
        let mut inner = self.inner.lock().expect("primary state");
        let inner = &mut *inner;
        let mut changed = Vec::new();
        let origins: Vec<Name> = catalog.zones().iter().map(|z| z.origin().clone()).collect();
        for origin in &origins {
            let zone = catalog.zone(origin).expect("listed above").clone();
            let pkarr = catalog.overlay(origin).is_some();
            let published = pkarr.then(|| inner.published.clone());
            let state = inner.zones.get_mut(origin);
            if let Some(s) = &state
                && Arc::ptr_eq(&s.version.zone, &zone)
            {
                catalog.set_serial(origin, s.version.serial);
                continue;
            }
            let d = digest(&zone);
            let serial = match state {
                Some(s) if s.digest == d => {
                    s.version.zone = zone;
                    s.version.published = published;
                    s.version.serial
                }
                Some(s) => {
                    let serial = match zone.given_serial() {
                        Some(given) => given,
                        None => next_serial(s.version.serial, now),
                    };
                    let new = Version {
                        serial,
                        zone,
                        published,
                    };
                    if serial_gt(serial, s.version.serial) {
                        if self.transfers {
                            let old = s.version.clone();
                            if old.zone.record_count() + new.zone.record_count()
                                <= INLINE_DIFF_RECORDS
                            {
                                // Small: the difference is in the journal before the new
                                // serial is served, so an IXFR never misses it.
                                let delta = version_delta(&old, &new);
                                files::push(inner.journal_dir.as_deref(), origin, s, delta);
                            } else {
                                inner.pending.push((origin.clone(), old, new.clone()));
                            }
                        }
                        changed.push((origin.clone(), serial));
                    } else {
                        warn!(zone = %origin, serial, "zone changed but its given serial did not grow; secondaries will not see the change");
                        s.journal.clear();
                        files::rewrite(inner.journal_dir.as_deref(), origin, s);
                    }
                    s.version = new;
                    s.digest = d;
                    let id = content_id(&d, pkarr.then_some(inner.published_sum));
                    inner.book.set(&origin.to_string(), serial, id);
                    serial
                }
                None => {
                    let id = inner.content_id(&d, pkarr);
                    // A pkarr origin's keys are known only when transfers keep them.
                    let comparable = !pkarr || self.transfers;
                    let kept = inner.book.get(&origin.to_string()).cloned();
                    // A reservation left by a run that did not stop cleanly: serials up to
                    // it may have been served for other content.
                    let unchanged = kept
                        .as_ref()
                        .filter(|k| comparable && k.digest == id && k.reserved.is_none())
                        .map(|k| k.serial);
                    let serial = match (zone.given_serial(), unchanged, &kept) {
                        (Some(given), _, _) => given,
                        // Unchanged since the last run: the same serial, and its journal.
                        (None, Some(serial), _) => serial,
                        (None, None, Some(k)) => next_serial(k.highest(), now),
                        (None, None, None) => now,
                    };
                    let serial = match floor(origin) {
                        Some(f) if zone.given_serial().is_none() && !serial_gt(serial, f) => {
                            next_serial(f, now)
                        }
                        _ => serial,
                    };
                    let mut state = ZoneState {
                        version: Version {
                            serial,
                            zone,
                            published,
                        },
                        digest: d,
                        journal: Journal::new(self.journal_records),
                        file_records: 0,
                    };
                    if self.transfers {
                        files::load(inner.journal_dir.as_deref(), origin, &mut state);
                    }
                    inner.zones.insert(origin.clone(), state);
                    inner.book.set(&origin.to_string(), serial, id);
                    changed.push((origin.clone(), serial));
                    serial
                }
            };
            catalog.set_serial(origin, serial);
        }
        let live: HashSet<&Name> = origins.iter().collect();
        inner.zones.retain(|o, _| live.contains(o));
        if !changed.is_empty() {
            inner.book.save();
        }
        changed
    }

    /// Records the differences of the large zones [`Primary::update`] replaced. Call after the
    /// new catalog is served: a large zone's difference (a sort of both versions) then does not
    /// delay its answers. Until it is recorded, an IXFR gets the whole zone.
    pub fn record_differences(&self) {
        let pending = std::mem::take(&mut self.inner.lock().expect("primary state").pending);
        if pending.is_empty() {
            return;
        }
        let deltas: Vec<(Name, Delta)> = pending
            .iter()
            .map(|(origin, old, new)| (origin.clone(), version_delta(old, new)))
            .collect();
        let mut inner = self.inner.lock().expect("primary state");
        let inner = &mut *inner;
        for (origin, delta) in deltas {
            if let Some(state) = inner.zones.get_mut(&origin) {
                files::push(inner.journal_dir.as_deref(), &origin, state, delta);
            }
        }
    }

    /// Applies the keys published (or removed) since the last stamp to every pkarr origin of
    /// `catalog`: each gets the next serial and a journal entry; `catalog`'s serials are set.
    pub fn stamp_published(
        &self,
        catalog: &mut Catalog,
        changes: Vec<(Key, Option<Published>)>,
        now: u32,
    ) -> Vec<(Name, u32)> {
        if changes.is_empty() {
            return Vec::new();
        }
        let mut inner = self.inner.lock().expect("primary state");
        let inner = &mut *inner;
        // The book is written only when a serial passes its reservation.
        let mut write = false;
        if !self.transfers {
            // Serials only.
            let mut changed = Vec::new();
            for (origin, state) in inner.zones.iter_mut() {
                if catalog.overlay(origin).is_some() {
                    state.version.serial = next_serial(state.version.serial, now);
                    catalog.set_serial(origin, state.version.serial);
                    let id = content_id(&state.digest, None);
                    write |= inner
                        .book
                        .stamp(&origin.to_string(), state.version.serial, id);
                    changed.push((origin.clone(), state.version.serial));
                }
            }
            if write {
                inner.book.save();
            }
            return changed;
        }
        let old = inner.published.clone();
        let set = Arc::make_mut(&mut inner.published);
        let mut sum = inner.published_sum;
        for (key, p) in &changes {
            let before = match p {
                Some(p) => {
                    sum = sum.wrapping_add(published_hash(key, p.stamp()));
                    set.insert(*key, p.clone())
                }
                None => set.remove(key),
            };
            if let Some(b) = before {
                sum = sum.wrapping_sub(published_hash(key, b.stamp()));
            }
        }
        inner.published_sum = sum;
        let new_set = inner.published.clone();
        let mut changed = Vec::new();
        for (origin, state) in inner.zones.iter_mut() {
            if catalog.overlay(origin).is_none() {
                continue;
            }
            let zone = &state.version.zone;
            let o = origin.wire();
            let before = changes
                .iter()
                .filter_map(|(k, _)| old.get(k).map(|p| (k, p)))
                .flat_map(|(k, p)| published_records(zone, o, k, p));
            let after = changes
                .iter()
                .filter_map(|(k, p)| p.as_ref().map(|p| (k, p)))
                .flat_map(|(k, p)| published_records(zone, o, k, p));
            let (removed, added) = diff(before, after);
            let serial = next_serial(state.version.serial, now);
            let delta = Delta {
                from: state.version.serial,
                to: serial,
                removed: removed.iter().map(Rr::to_owned).collect(),
                added: added.iter().map(Rr::to_owned).collect(),
            };
            files::push(inner.journal_dir.as_deref(), origin, state, delta);
            state.version.serial = serial;
            state.version.published = Some(new_set.clone());
            catalog.set_serial(origin, serial);
            let id = content_id(&state.digest, Some(sum));
            write |= inner.book.stamp(&origin.to_string(), serial, id);
            changed.push((origin.clone(), serial));
        }
        if write {
            inner.book.save();
        }
        changed
    }

    /// Writes the serial book exactly, its reservations dropped (see [`SerialBook::stamp`]):
    /// call once no more stamps come (a clean stop), so that the next start with the same
    /// content serves the same serials.
    pub fn settle(&self) {
        self.inner.lock().expect("primary state").book.settle();
    }

    /// Loads the keys published before start-up as the first stamped set (no journal entry).
    /// Call before the first [`Primary::update`], so a restart with the same keys keeps the
    /// pkarr origins' serials and journals.
    pub fn load_published(&self, set: PublishedSet) {
        if !self.transfers {
            return;
        }
        let mut inner = self.inner.lock().expect("primary state");
        info!(keys = set.len(), "pkarr keys ready for transfers");
        inner.published_sum = set.iter().fold(0u64, |s, (k, p)| {
            s.wrapping_add(published_hash(k, p.stamp()))
        });
        inner.published = Arc::new(set);
        let new = inner.published.clone();
        for state in inner.zones.values_mut() {
            if state.version.published.is_some() {
                state.version.published = Some(new.clone());
            }
        }
    }

    /// The current version of zone `origin`.
    pub fn version(&self, origin: &Name) -> Option<Version> {
        let inner = self.inner.lock().expect("primary state");
        inner.zones.get(origin).map(|s| s.version.clone())
    }

    /// What an IXFR from `serial` gets.
    pub fn ixfr(&self, origin: &Name, serial: u32) -> Option<Ixfr> {
        let inner = self.inner.lock().expect("primary state");
        let state = inner.zones.get(origin)?;
        let current = state.version.clone();
        if !serial_gt(current.serial, serial) {
            return Some(Ixfr::UpToDate(current));
        }
        // The journal must lead to the serial served (its last difference may still be being
        // recorded).
        let delta = state
            .journal
            .condensed(serial)
            .filter(|d| d.to == current.serial);
        Some(match delta {
            Some(delta) => Ixfr::Delta(current, delta),
            None => Ixfr::Full(current),
        })
    }

    /// Per zone: serial, differences kept and records in them (for metrics).
    pub fn journal_sizes(&self) -> Vec<(Name, u32, usize, usize)> {
        let inner = self.inner.lock().expect("primary state");
        let mut out: Vec<_> = inner
            .zones
            .iter()
            .map(|(o, s)| {
                (
                    o.clone(),
                    s.version.serial,
                    s.journal.len(),
                    s.journal.records(),
                )
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Tells the NOTIFY senders the serials decided since the last call. Call once the catalog
    /// serving them is live: a secondary notified earlier could ask for the SOA, see the old
    /// serial, and wait for its refresh timer.
    pub fn announce(&self) {
        let inner = self.inner.lock().expect("primary state");
        self.share(&inner);
    }

    fn share(&self, inner: &Inner) {
        let serials: BTreeMap<Name, u32> = inner
            .zones
            .iter()
            .map(|(o, s)| (o.clone(), s.version.serial))
            .collect();
        self.serials.send_if_modified(|current| {
            if **current == serials {
                false
            } else {
                *current = Arc::new(serials);
                true
            }
        });
    }
}

/// The difference between two versions of a zone: the zone's own records, and, for a pkarr
/// origin, the published records whose hiding changed (those at names the zone has in either
/// version).
fn version_delta(old: &Version, new: &Version) -> Delta {
    let origin = new.zone.origin().wire();
    let keys = |zone: &Zone| -> Vec<Key> {
        zone.nodes()
            .filter_map(|n| key_under(n.name(), origin))
            .collect()
    };
    let touched: Vec<Key> = match &new.published {
        Some(_) => {
            let mut k = keys(&old.zone);
            k.extend(keys(&new.zone));
            k.sort_unstable();
            k.dedup();
            k
        }
        None => Vec::new(),
    };
    let (removed, added) = diff(
        with_published(old, &touched, origin),
        with_published(new, &touched, origin),
    );
    Delta {
        from: old.serial,
        to: new.serial,
        removed: removed.iter().map(Rr::to_owned).collect(),
        added: added.iter().map(Rr::to_owned).collect(),
    }
}

/// The zone's records and those the `touched` keys published.
fn with_published<'v>(v: &'v Version, touched: &[Key], origin: &'v [u8]) -> Vec<Rr<'v>> {
    let mut rrs: Vec<Rr<'v>> = zone_records(&v.zone).collect();
    if let Some(set) = &v.published {
        for k in touched {
            if let Some((k, p)) = set.get_key_value(k) {
                rrs.extend(published_records(&v.zone, origin, k, p));
            }
        }
    }
    rrs
}

/// The key whose label is the one left of `origin` in `name`, if it is a key.
fn key_under(name: &[u8], origin: &[u8]) -> Option<Key> {
    let rel = name.len().checked_sub(origin.len())?;
    if rel == 0 || &name[rel..] != origin {
        return None;
    }
    let mut at = 0;
    let mut last = None;
    while at < rel {
        last = Some(at);
        at += 1 + usize::from(name[at]);
    }
    let at = last?;
    key_of_label(&name[at + 1..rel])
}

/// The journals' files: `<data-dir>/journal/<origin>ixfr` (the origin with its final dot), the
/// differences appended as they are made, rewritten when trimming has left most of a file
/// stale. Written without fsync: a journal cut short by a crash no longer leads to the serial
/// the book names, and is dropped at the next start (secondaries then get the whole zone once).
mod files {
    use std::io::Write as _;
    use std::path::{Path, PathBuf};

    use meshdns_zone::Name;
    use tracing::warn;

    use super::ZoneState;
    use crate::journal::Delta;

    fn path(dir: &Path, origin: &Name) -> PathBuf {
        let name = origin.to_string();
        let name = if name == "." {
            "root.".to_string()
        } else {
            name
        };
        dir.join(format!("{}ixfr", name.replace('/', "_")))
    }

    /// Adds `delta` to the zone's journal and its file.
    pub(super) fn push(dir: Option<&Path>, origin: &Name, state: &mut ZoneState, delta: Delta) {
        let mut bytes = Vec::new();
        delta.encode(&mut bytes);
        let records = delta.removed.len() + delta.added.len();
        let follows = state.journal.last_serial().is_none_or(|s| s == delta.from);
        state.journal.push(delta);
        let Some(dir) = dir else { return };
        if !follows || state.file_records > 2 * state.journal.records().max(1024) {
            rewrite(Some(dir), origin, state);
            return;
        }
        let p = path(dir, origin);
        let result = std::fs::create_dir_all(dir).and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&p)?
                .write_all(&bytes)
        });
        match result {
            Ok(()) => state.file_records += records,
            Err(e) => warn!(file = %p.display(), error = %e, "cannot write the IXFR journal"),
        }
    }

    /// Writes the zone's whole journal afresh (or removes the file when it is empty).
    pub(super) fn rewrite(dir: Option<&Path>, origin: &Name, state: &mut ZoneState) {
        let Some(dir) = dir else { return };
        let p = path(dir, origin);
        state.file_records = 0;
        if state.journal.is_empty() {
            let _ = std::fs::remove_file(&p);
            return;
        }
        let mut bytes = Vec::new();
        for d in state.journal.deltas() {
            d.encode(&mut bytes);
        }
        let tmp = p.with_extension("ixfr.tmp");
        let result = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&tmp, &bytes))
            .and_then(|()| std::fs::rename(&tmp, &p));
        match result {
            Ok(()) => state.file_records = state.journal.records(),
            Err(e) => warn!(file = %p.display(), error = %e, "cannot write the IXFR journal"),
        }
    }

    /// Reads the zone's journal back, if it leads to the serial the zone starts with.
    pub(super) fn load(dir: Option<&Path>, origin: &Name, state: &mut ZoneState) {
        let Some(dir) = dir else { return };
        let p = path(dir, origin);
        let Ok(bytes) = std::fs::read(&p) else { return };
        let mut rest = &bytes[..];
        let mut records = 0;
        while let Some((delta, tail)) = Delta::decode(rest) {
            records += delta.removed.len() + delta.added.len();
            state.journal.push(delta);
            rest = tail;
        }
        if state.journal.last_serial() == Some(state.version.serial) {
            state.file_records = records;
            tracing::info!(zone = %origin, differences = state.journal.len(), "IXFR journal kept from the last run");
        } else {
            state.journal.clear();
            let _ = std::fs::remove_file(&p);
        }
    }
}
