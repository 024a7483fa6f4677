//! The zones written by dynamic UPDATE (`--update-zone`, RFC 2136): their records, kept in
//! memory and in a journal per zone in the data directory, appended and synced before an
//! UPDATE is answered, so that an acknowledged update survives `kill -9`.
//!
//! The journal of zone `example.org.` is `<data-dir>/updates/example.org.journal`: a sequence
//! of entries, each `u32` length (big-endian) then the records of one accepted UPDATE's update
//! section as [`meshdns_xfr::update::Item`]s, replayed in order with the same rules at start. A
//! torn last entry (a crash in mid-write) is dropped; an entry that is whole but unreadable ends
//! the replay, and the journal is first kept as it was beside it (`….journal.unreadable-<unix
//! time>`). At start the journal is rewritten as one entry holding the zone as it is (written
//! beside it, synced, renamed over it).
//!
//! The watcher serves the zones like any source ([`crate::watch`]); [`UpdateStore::wait_served`]
//! lets the UPDATE's reply wait until a snapshot holding it is live, so a query right after
//! the reply sees it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use meshdns_xfr::message::CLASS_IN;
use meshdns_xfr::update::{Item, Request, Rrsets, apply, process_in_place, rcode};
use meshdns_zone::{Name, RType};

use crate::content::ZoneContent;
use tracing::{error, warn};

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The most records one update zone holds unless told otherwise (`--update-max-records`); an
/// UPDATE that would go beyond is REFUSED.
pub const MAX_RECORDS: usize = 100_000;

/// One update zone.
struct ZoneState {
    rrsets: Rrsets,
    /// Records in `rrsets`, kept as updates apply.
    records: usize,
    journal: std::fs::File,
}

/// Every update zone, its records and journal; the version the watcher last took and served.
pub struct UpdateStore {
    zones: Mutex<BTreeMap<Name, ZoneState>>,
    /// (version, version served).
    versions: Mutex<(u64, u64)>,
    served: Condvar,
    on_change: OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// The most records a zone may hold after an UPDATE.
    max_records: usize,
}

impl std::fmt::Debug for UpdateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UpdateStore")
    }
}

fn encode(items: &[Item], out: &mut Vec<u8>) {
    out.extend_from_slice(&(items.len() as u32).to_be_bytes());
    for i in items {
        out.push(i.owner.len() as u8);
        out.extend_from_slice(&i.owner);
        out.extend_from_slice(&i.rtype.to_be_bytes());
        out.extend_from_slice(&i.class.to_be_bytes());
        out.extend_from_slice(&i.ttl.to_be_bytes());
        out.extend_from_slice(&(i.rdata.len() as u16).to_be_bytes());
        out.extend_from_slice(&i.rdata);
    }
}

fn decode(mut b: &[u8]) -> Option<Vec<Item>> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, tail) = (b.get(..n)?, b.get(n..)?);
        *b = tail;
        Some(head)
    }
    let count = u32::from_be_bytes(take(&mut b, 4)?.try_into().ok()?);
    let mut out = Vec::new();
    for _ in 0..count {
        let owner_len = usize::from(take(&mut b, 1)?[0]);
        let owner = take(&mut b, owner_len)?.to_vec();
        let f = take(&mut b, 10)?;
        let rdlen = usize::from(u16::from_be_bytes([f[8], f[9]]));
        out.push(Item {
            owner,
            rtype: u16::from_be_bytes([f[0], f[1]]),
            class: u16::from_be_bytes([f[2], f[3]]),
            ttl: u32::from_be_bytes([f[4], f[5], f[6], f[7]]),
            rdata: take(&mut b, rdlen)?.to_vec(),
        });
    }
    b.is_empty().then_some(out)
}

/// The zone's records as one journal entry (class IN items).
fn snapshot_items(rrsets: &Rrsets) -> Vec<Item> {
    rrsets
        .iter()
        .flat_map(|((owner, rtype), (ttl, set))| {
            set.iter().map(move |rdata| Item {
                owner: owner.clone(),
                rtype: *rtype,
                class: CLASS_IN,
                ttl: *ttl,
                rdata: rdata.clone(),
            })
        })
        .collect()
}

fn entry(items: &[Item]) -> Vec<u8> {
    let mut payload = Vec::new();
    encode(items, &mut payload);
    let mut out = (payload.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&payload);
    out
}

/// Where replaying a journal stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    /// At a last entry cut short: a crash in mid-write, whose UPDATE was never answered.
    Torn { at: usize },
    /// At an entry that is whole but cannot be read (the file was damaged).
    Unreadable { at: usize },
}

/// Replays a journal's entries into records, up to the first entry it cannot use.
fn replay(origin: &Name, bytes: &[u8]) -> (Rrsets, Option<Stopped>) {
    let mut rrsets = Rrsets::new();
    let mut at = 0;
    while at < bytes.len() {
        let Some(len) = bytes.get(at..at + 4) else {
            return (rrsets, Some(Stopped::Torn { at }));
        };
        let len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
        let Some(entry) = bytes.get(at + 4..at + 4 + len) else {
            return (rrsets, Some(Stopped::Torn { at }));
        };
        let Some(items) = decode(entry) else {
            return (rrsets, Some(Stopped::Unreadable { at }));
        };
        let req = Request {
            zone: origin.wire().to_vec(),
            class: CLASS_IN,
            prerequisites: Vec::new(),
            updates: items,
        };
        apply(&req, &mut rrsets);
        at += 4 + len;
    }
    (rrsets, None)
}

/// A zone's records as a source hands them over.
fn content(origin: &Name, rrsets: &Rrsets) -> ZoneContent {
    let rrs = rrsets.iter().flat_map(|((owner, rtype), (ttl, set))| {
        set.iter()
            .map(move |rdata| (&owner[..], RType(*rtype), *ttl, &rdata[..]))
    });
    ZoneContent::from_wire(origin, rrs)
}

fn journal_path(dir: &Path, origin: &Name) -> PathBuf {
    dir.join(format!("{origin}journal"))
}

/// Rewrites `origin`'s journal as one entry of its records, atomically; returns it opened for
/// appending.
fn compact(dir: &Path, origin: &Name, rrsets: &Rrsets) -> std::io::Result<std::fs::File> {
    let path = journal_path(dir, origin);
    let tmp = path.with_extension("journal.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&entry(&snapshot_items(rrsets)))?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    std::fs::File::open(dir)?.sync_all()?;
    std::fs::OpenOptions::new().append(true).open(&path)
}

impl UpdateStore {
    /// The update zones `origins`, their journals under `data_dir/updates` replayed (and
    /// compacted; a journal holding more than `max_records` is replayed whole, and UPDATEs
    /// that add records are refused until it holds fewer); errors name the file.
    pub fn open(
        data_dir: &Path,
        origins: &[Name],
        max_records: usize,
    ) -> Result<Arc<UpdateStore>, String> {
        let dir = data_dir.join("updates");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut zones = BTreeMap::new();
        for origin in origins {
            let path = journal_path(&dir, origin);
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(format!("{}: {e}", path.display())),
            };
            let (rrsets, stopped) = replay(origin, &bytes);
            // Compaction would lose what replay left for good: the file is kept as it was.
            let keep = |what: &str| -> Result<PathBuf, String> {
                let kept = path.with_extension(format!("journal.{what}-{}", unix_now()));
                std::fs::write(&kept, &bytes).map_err(|e| format!("{}: {e}", kept.display()))?;
                Ok(kept)
            };
            match stopped {
                None => {}
                Some(Stopped::Torn { at }) => {
                    // Most likely a crash in mid-write (never answered); a length damaged in
                    // the middle looks the same, so the journal is kept either way.
                    let kept = keep("torn")?;
                    warn!(
                        journal = %path.display(),
                        dropped_bytes = bytes.len() - at,
                        kept = %kept.display(),
                        "a last entry cut short (a crash in mid-write, never answered) is dropped; the journal as it was is kept"
                    );
                }
                Some(Stopped::Unreadable { at }) => {
                    let kept = keep("unreadable")?;
                    error!(
                        journal = %path.display(),
                        at_byte = at,
                        not_replayed_bytes = bytes.len() - at,
                        kept = %kept.display(),
                        "an entry of the journal cannot be read: the updates before it are served, \
                         the rest is not; the journal as it was is kept"
                    );
                }
            }
            let journal =
                compact(&dir, origin, &rrsets).map_err(|e| format!("{}: {e}", path.display()))?;
            let records = rrsets.values().map(|(_, set)| set.len()).sum();
            zones.insert(
                origin.clone(),
                ZoneState {
                    rrsets,
                    records,
                    journal,
                },
            );
        }
        Ok(Arc::new(UpdateStore {
            zones: Mutex::new(zones),
            versions: Mutex::new((1, 0)),
            served: Condvar::new(),
            on_change: OnceLock::new(),
            max_records,
        }))
    }

    /// Calls `hook` after each accepted UPDATE that changed a zone (the watcher's poke).
    pub fn on_change(&self, hook: impl Fn() + Send + Sync + 'static) {
        let _ = self.on_change.set(Box::new(hook));
    }

    /// The update zones.
    pub fn origins(&self) -> Vec<Name> {
        self.lock().keys().cloned().collect()
    }

    /// Whether `zone` (lower-cased wire) is an update zone.
    pub fn has(&self, zone: &[u8]) -> bool {
        self.lock().keys().any(|o| o.wire() == zone)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Name, ZoneState>> {
        self.zones.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks and applies `req` to its zone: the version holding it (`None`: nothing changed),
    /// else the rcode. An accepted change is in the journal, synced, before this returns.
    pub fn update(&self, req: &Request) -> Result<Option<u64>, u8> {
        let mut zones = self.lock();
        let Some((_, zone)) = zones.iter_mut().find(|(o, _)| o.wire() == req.zone) else {
            return Err(rcode::NOTAUTH);
        };
        let Some(undo) = process_in_place(req, &mut zone.rrsets)? else {
            return Ok(None);
        };
        let records = zone
            .records
            .saturating_add_signed(undo.records_added(&zone.rrsets));
        if records > self.max_records && records > zone.records {
            undo.restore(&mut zone.rrsets);
            return Err(rcode::REFUSED);
        }
        let e = entry(&req.updates);
        // Not applied unless durable: a failed write is a failure to answer, and what it left
        // is cut off again, so that no torn entry sits before later ones (replay stops at one).
        let before = zone.journal.metadata().map(|m| m.len());
        if zone
            .journal
            .write_all(&e)
            .and_then(|()| zone.journal.sync_data())
            .is_err()
        {
            if let Ok(len) = before {
                let _ = zone
                    .journal
                    .set_len(len)
                    .and_then(|()| zone.journal.sync_data());
            }
            undo.restore(&mut zone.rrsets);
            return Err(2); // SERVFAIL
        }
        zone.records = records;
        drop(zones);
        let version = {
            let mut v = self.versions.lock().unwrap_or_else(|e| e.into_inner());
            v.0 += 1;
            v.0
        };
        if let Some(hook) = self.on_change.get() {
            hook();
        }
        Ok(Some(version))
    }

    /// The current version and every zone's records (written straight into the flat buffers a
    /// source hands over, with no copy of the RRsets), when the version differs from `seen`.
    pub fn take_if_newer(&self, seen: u64) -> Option<(u64, Vec<ZoneContent>)> {
        let zones = self.lock();
        let version = self.versions.lock().unwrap_or_else(|e| e.into_inner()).0;
        (version != seen).then(|| {
            let all = zones.iter().map(|(o, z)| content(o, &z.rrsets)).collect();
            (version, all)
        })
    }

    /// A snapshot holding `version` is live.
    pub fn mark_served(&self, version: u64) {
        let mut v = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        v.1 = v.1.max(version);
        self.served.notify_all();
    }

    /// Waits (at most `timeout`) until a snapshot holding `version` is live; whether it is.
    pub fn wait_served(&self, version: u64, timeout: Duration) -> bool {
        let v = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        let (v, _) = self
            .served
            .wait_timeout_while(v, timeout, |v| v.1 < version)
            .unwrap_or_else(|e| e.into_inner());
        v.1 >= version
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshdns_zone::RData;

    fn add(owner: &str, ip: &str) -> Request {
        let mut rdata = Vec::new();
        RData::A(ip.parse().unwrap()).to_wire(&mut rdata);
        Request {
            zone: "example.org.".parse::<Name>().unwrap().wire().to_vec(),
            class: CLASS_IN,
            prerequisites: Vec::new(),
            updates: vec![Item {
                owner: owner.parse::<Name>().unwrap().wire().to_vec(),
                rtype: 1,
                class: CLASS_IN,
                ttl: 60,
                rdata,
            }],
        }
    }

    #[test]
    fn accepted_updates_survive_a_restart_and_a_torn_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let origin: Name = "example.org.".parse().unwrap();
        let store =
            UpdateStore::open(dir.path(), std::slice::from_ref(&origin), MAX_RECORDS).unwrap();
        assert_eq!(
            store.update(&add("a.example.org.", "192.0.2.1")),
            Ok(Some(2))
        );
        assert_eq!(
            store.update(&add("b.example.org.", "192.0.2.2")),
            Ok(Some(3))
        );
        // The same again: nothing to write.
        assert_eq!(store.update(&add("b.example.org.", "192.0.2.2")), Ok(None));
        let mut other = add("x.example.net.", "192.0.2.3");
        other.zone = "example.net.".parse::<Name>().unwrap().wire().to_vec();
        assert_eq!(store.update(&other), Err(rcode::NOTAUTH));
        drop(store);
        // A crash in mid-append: half an entry at the end.
        let path = dir.path().join("updates/example.org.journal");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(&[0, 0, 0, 40, 0, 0]).unwrap();
        drop(f);
        let store =
            UpdateStore::open(dir.path(), std::slice::from_ref(&origin), MAX_RECORDS).unwrap();
        let (_, zones) = store.take_if_newer(0).unwrap();
        assert_eq!(zones[0].records.len(), 2, "{zones:?}");
        // Compacted: one entry.
        let bytes = std::fs::read(&path).unwrap();
        let len = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
        assert_eq!(bytes.len(), 4 + len);
    }

    #[test]
    fn a_damaged_entry_stops_the_replay_and_the_journal_is_kept_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let origin: Name = "example.org.".parse().unwrap();
        let store =
            UpdateStore::open(dir.path(), std::slice::from_ref(&origin), MAX_RECORDS).unwrap();
        store.update(&add("a.example.org.", "192.0.2.1")).unwrap();
        store.update(&add("b.example.org.", "192.0.2.2")).unwrap();
        drop(store);
        let path = dir.path().join("updates/example.org.journal");
        let mut bytes = std::fs::read(&path).unwrap();
        // The second entry (the first is the compacted, empty zone), which adds a: its item
        // count says two items, where one follows.
        let first = 4 + u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
        bytes[first + 4 + 3] = 2;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(
            replay(&origin, &bytes).1,
            Some(Stopped::Unreadable { at: first })
        );
        let store =
            UpdateStore::open(dir.path(), std::slice::from_ref(&origin), MAX_RECORDS).unwrap();
        let (_, zones) = store.take_if_newer(0).unwrap();
        assert!(zones[0].records.is_empty(), "{zones:?}");
        let kept: Vec<_> = std::fs::read_dir(dir.path().join("updates"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("example.org.journal.unreadable-"))
            .collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
        let original = std::fs::read(dir.path().join("updates").join(&kept[0])).unwrap();
        assert_eq!(original, bytes);
        // A torn tail is told apart.
        assert_eq!(
            replay(&origin, &bytes[..first + 6]).1,
            Some(Stopped::Torn { at: first })
        );
    }
}
