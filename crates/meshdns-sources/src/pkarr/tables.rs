//! The store's tables and the rows every write keeps consistent.
//!
//! - `packets_v2`: key → its sequence number (8 bytes, big-endian) ‖ relay payload, exactly as
//!   published.
//! - `log`: sequence → key, then (for packets another replica sent) the epoch and sequence
//!   number the packet had on the replica that took it from its publisher (a publish taken
//!   here has none: it is its own origin). A row per stored key at the number of its last
//!   change, and the rows of replaced packets not yet removed (stale: a row whose number is
//!   not its key's packet's; readers skip them). A replica that wants what changed here since
//!   sequence `s` reads `log` from `s + 1` on ([`changes_after`]): what it missed costs what
//!   was missed, not a walk of every key. A reader names how far it read each replica
//!   ([`Have`]); entries it got first-hand are left out of its pages.
//! - `meta`: this replica's `epoch` (16 random bytes, made with the database: a replica that
//!   lost its disk is a new one, and its peers start reading it from the beginning),
//!   `next_seq` (kept, so a number is never given twice, even after its row went), and from a
//!   clean stop to the next start `stale` (the numbers of the stale log rows, 8 bytes each).
//! - `cursors`: peer epoch → the last of that peer's sequence numbers whose packet is here,
//!   written in the same commit as those packets or a later one (never ahead of the data).
//!
//! A publish changes one row at a random place (its key's) and appends one: every other
//! index would be another page copied and written per publish (the first layout had five such
//! rows: 30% of a replica's CPU per replicated packet). The log row of the packet it replaces
//! is left stale; the writer removes stale rows later, many at a time in number order, so
//! that the removals share pages ([`Tables::remove_stale`]; their numbers are kept in memory,
//! in `meta` across a clean stop, and found again by [`stale_rows`] after a crash). Expiry has
//! no index: it walks `packets_v2` in key order a slice at a time ([`Tables::expired_from`]).
//!
//! Stores of the first layout (`packets` with bare payloads, `seq_of`, `changes`, `origins`,
//! `by_timestamp`) are moved to this one at start ([`prepare`]), a bounded commit at a time.

use redb::{ReadableTable, TableDefinition};

use meshdns_zone::Key;

pub(super) const PACKETS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("packets_v2");
pub(super) const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const CURSORS: TableDefinition<&[u8; 16], u64> = TableDefinition::new("cursors");
/// The `meta` row of the stale log rows' numbers at a clean stop.
const STALE: &str = "stale";

/// The first layout's tables, read once to move their rows.
mod v1 {
    use redb::TableDefinition;
    pub const PACKETS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("packets");
    pub const BY_TIME: TableDefinition<(u64, &[u8; 32]), ()> = TableDefinition::new("by_timestamp");
    pub const CHANGES: TableDefinition<u64, &[u8; 32]> = TableDefinition::new("changes");
    pub const SEQ_OF: TableDefinition<&[u8; 32], u64> = TableDefinition::new("seq_of");
    pub const ORIGINS: TableDefinition<u64, &[u8; 24]> = TableDefinition::new("origins");
}

/// A replica's identity, made with its database.
pub type Epoch = [u8; 16];

/// Where a packet was first taken: that replica's epoch and its sequence number there.
pub type Origin = (Epoch, u64);

/// How far a reader has read each replica: it holds every packet of that replica up to that
/// sequence number (or a newer one of its key). Its own epoch maps to its head.
pub type Have = std::collections::HashMap<Epoch, u64>;

/// The relay payload in a `packets_v2` row.
pub(super) fn payload_of(row: &[u8]) -> &[u8] {
    row.get(8..).unwrap_or_default()
}

/// The sequence number in a `packets_v2` row.
fn seq_of(row: &[u8]) -> u64 {
    row.get(..8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

/// A `log` row: the key, and the origin when another replica sent the packet.
fn log_row(key: &Key, origin: Option<&Origin>) -> ([u8; 56], usize) {
    let mut row = [0u8; 56];
    row[..32].copy_from_slice(key);
    match origin {
        Some((epoch, seq)) => {
            row[32..48].copy_from_slice(epoch);
            row[48..].copy_from_slice(&seq.to_be_bytes());
            (row, 56)
        }
        None => (row, 32),
    }
}

/// An origin as rows keep it: the epoch (16 bytes), then the sequence number (8, big-endian).
fn origin_of(bytes: &[u8]) -> Option<Origin> {
    let epoch: Epoch = bytes.get(..16)?.try_into().ok()?;
    let seq = u64::from_be_bytes(bytes.get(16..24)?.try_into().ok()?);
    Some((epoch, seq))
}

/// A `log` row read back: its key and origin (`None`: taken here).
fn read_log_row(row: &[u8]) -> Option<(Key, Option<Origin>)> {
    let key: Key = row.get(..32)?.try_into().ok()?;
    Some((key, row.get(32..).and_then(origin_of)))
}

/// The tables one write transaction changes.
pub(super) struct Tables<'t> {
    pub packets: redb::Table<'t, &'static [u8; 32], &'static [u8]>,
    log: redb::Table<'t, u64, &'static [u8]>,
    meta: redb::Table<'t, &'static str, &'static [u8]>,
    cursors: redb::Table<'t, &'static [u8; 16], u64>,
    /// The next sequence number to give.
    pub next_seq: u64,
}

impl<'t> Tables<'t> {
    /// Opens every table in `txn` (creating those missing).
    pub fn open(txn: &'t redb::WriteTransaction) -> Result<Tables<'t>, redb::Error> {
        let meta = txn.open_table(META)?;
        let next_seq = meta
            .get("next_seq")?
            .and_then(|v| v.value().try_into().ok().map(u64::from_be_bytes))
            .unwrap_or(1);
        Ok(Tables {
            packets: txn.open_table(PACKETS)?,
            log: txn.open_table(LOG)?,
            meta,
            cursors: txn.open_table(CURSORS)?,
            next_seq,
        })
    }

    /// The relay payload stored for `key`.
    pub fn payload(&self, key: &Key) -> Result<Option<Vec<u8>>, redb::StorageError> {
        Ok(self
            .packets
            .get(key)?
            .map(|row| payload_of(row.value()).to_vec()))
    }

    /// Stores `payload` as `key`'s packet under the next sequence number, with the replica it
    /// came from when another replica sent it. Returns that number, and the number of the log
    /// row of the packet it replaced, left stale for [`Tables::remove_stale`].
    pub fn write(
        &mut self,
        key: &Key,
        payload: &[u8],
        origin: Option<&Origin>,
    ) -> Result<(u64, Option<u64>), redb::StorageError> {
        let seq = self.next_seq;
        Ok((seq, self.write_at(key, seq, payload, origin)?))
    }

    /// [`Tables::write`], the replaced packet's log row removed at once.
    pub fn write_now(
        &mut self,
        key: &Key,
        payload: &[u8],
        origin: Option<&Origin>,
    ) -> Result<u64, redb::StorageError> {
        let seq = self.next_seq;
        self.write_at_now(key, seq, payload, origin)?;
        Ok(seq)
    }

    /// [`Tables::write`] under `seq`, a number given earlier (a publish the journal holds,
    /// numbered when it was answered); the next number given is above it.
    pub fn write_at(
        &mut self,
        key: &Key,
        seq: u64,
        payload: &[u8],
        origin: Option<&Origin>,
    ) -> Result<Option<u64>, redb::StorageError> {
        self.next_seq = self.next_seq.max(seq + 1);
        self.put(key, seq, payload, origin)
    }

    /// [`Tables::write_at`], the replaced packet's log row removed at once.
    pub fn write_at_now(
        &mut self,
        key: &Key,
        seq: u64,
        payload: &[u8],
        origin: Option<&Origin>,
    ) -> Result<(), redb::StorageError> {
        self.next_seq = self.next_seq.max(seq + 1);
        self.put_now(key, seq, payload, origin)
    }

    /// Stores the packet under `seq`, the log row it made stale removed at once.
    fn put_now(
        &mut self,
        key: &Key,
        seq: u64,
        payload: &[u8],
        origin: Option<&Origin>,
    ) -> Result<(), redb::StorageError> {
        if let Some(stale) = self.put(key, seq, payload, origin)? {
            self.log.remove(stale)?;
        }
        Ok(())
    }

    /// Stores the packet and its log row; returns the number of the row it made stale.
    fn put(
        &mut self,
        key: &Key,
        seq: u64,
        payload: &[u8],
        origin: Option<&Origin>,
    ) -> Result<Option<u64>, redb::StorageError> {
        let mut row = Vec::with_capacity(8 + payload.len());
        row.extend_from_slice(&seq.to_be_bytes());
        row.extend_from_slice(payload);
        let previous = self
            .packets
            .insert(key, row.as_slice())?
            .map(|old| seq_of(old.value()));
        let (entry, len) = log_row(key, origin);
        self.log.insert(seq, &entry[..len])?;
        Ok(previous)
    }

    /// Removes the stale log rows numbered `seqs` (rows already gone are skipped).
    pub fn remove_stale(&mut self, seqs: &[u64]) -> Result<(), redb::StorageError> {
        for seq in seqs {
            self.log.remove(*seq)?;
        }
        Ok(())
    }

    /// Keeps the numbers of stale log rows not removed yet, for the next start (a clean stop).
    pub fn keep_stale(&mut self, seqs: &[u64]) -> Result<(), redb::StorageError> {
        let bytes: Vec<u8> = seqs.iter().flat_map(|s| s.to_be_bytes()).collect();
        self.meta.insert(STALE, bytes.as_slice())?;
        Ok(())
    }

    /// Removes `key`'s packet and its log row.
    pub fn remove(&mut self, key: &Key) -> Result<(), redb::StorageError> {
        let previous = self.packets.remove(key)?.map(|old| seq_of(old.value()));
        if let Some(previous) = previous {
            self.log.remove(previous)?;
        }
        Ok(())
    }

    /// [`expired_from`] over this transaction's packets.
    #[allow(clippy::type_complexity)]
    pub fn expired_from(
        &self,
        from: Option<Key>,
        rows: usize,
        limit: u64,
    ) -> Result<(Vec<(u64, Key)>, Option<Key>), redb::Error> {
        expired_from(&self.packets, from, rows, limit)
    }

    /// Records that every packet of `peer` up to its sequence number `seq` is here.
    pub fn set_cursor(&mut self, peer: &Epoch, seq: u64) -> Result<(), redb::StorageError> {
        self.cursors.insert(peer, seq)?;
        Ok(())
    }

    /// Keeps the next sequence number; called before the commit.
    pub fn finish(&mut self) -> Result<(), redb::StorageError> {
        self.meta
            .insert("next_seq", self.next_seq.to_be_bytes().as_slice())?;
        Ok(())
    }
}

/// Walks at most `rows` packets of `packets` in key order from `from` (the start when `None`):
/// the timestamps and keys of those dated before `limit`, and where the next walk starts
/// (`None` once it reached the end).
#[allow(clippy::type_complexity)]
pub(super) fn expired_from(
    packets: &impl ReadableTable<&'static [u8; 32], &'static [u8]>,
    from: Option<Key>,
    rows: usize,
    limit: u64,
) -> Result<(Vec<(u64, Key)>, Option<Key>), redb::Error> {
    let mut out = Vec::new();
    let start = from.unwrap_or([0u8; 32]);
    for (walked, entry) in packets.range::<&[u8; 32]>(&start..)?.enumerate() {
        let (k, row) = entry?;
        let key = *k.value();
        if walked == rows {
            return Ok((out, Some(key)));
        }
        let stamp = super::stamp_of(payload_of(row.value())).unwrap_or(0);
        if stamp < limit {
            out.push((stamp, key));
        }
    }
    Ok((out, None))
}

/// Makes the tables and this replica's epoch (when missing: a new database), and moves a store
/// of the first layout into them. Returns the epoch.
pub(super) fn prepare(db: &redb::Database) -> Result<Epoch, redb::Error> {
    let txn = db.begin_write()?;
    let epoch = {
        let mut t = Tables::open(&txn)?;
        let stored = t.meta.get("epoch")?.map(|v| v.value().to_vec());
        let epoch = match stored {
            Some(e) if e.len() == 16 => {
                let mut epoch = [0u8; 16];
                epoch.copy_from_slice(&e);
                epoch
            }
            _ => {
                let epoch = random_epoch();
                t.meta.insert("epoch", epoch.as_slice())?;
                epoch
            }
        };
        t.finish()?;
        epoch
    };
    txn.commit()?;
    move_v1(db)?;
    Ok(epoch)
}

/// Rows moved from the first layout per commit: bounded memory and commit size at any store
/// size, and a start interrupted halfway goes on where it stopped.
const MOVE_ROWS: usize = 20_000;

/// Moves the rows of a store of the first layout into this one's tables (packets without a
/// sequence number, from before the log, get the next ones, in key order), then drops the
/// first layout's tables.
fn move_v1(db: &redb::Database) -> Result<(), redb::Error> {
    use redb::ReadableDatabase;
    {
        let txn = db.begin_read()?;
        match txn.open_table(v1::PACKETS) {
            Ok(_) => {}
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
    let mut moved = 0usize;
    loop {
        let txn = db.begin_write()?;
        let done = {
            let mut old = txn.open_table(v1::PACKETS)?;
            let seq_of = txn.open_table(v1::SEQ_OF)?;
            let origins = txn.open_table(v1::ORIGINS)?;
            let mut t = Tables::open(&txn)?;
            let rows: Vec<(Key, Vec<u8>)> = old
                .iter()?
                .take(MOVE_ROWS)
                .map(|e| e.map(|(k, v)| (*k.value(), v.value().to_vec())))
                .collect::<Result<_, _>>()?;
            for (key, payload) in &rows {
                let seq = match seq_of.get(key)?.map(|s| s.value()) {
                    Some(seq) => seq,
                    None => {
                        let seq = t.next_seq;
                        t.next_seq += 1;
                        seq
                    }
                };
                let origin = origins.get(seq)?.and_then(|o| origin_of(o.value()));
                t.put_now(key, seq, payload, origin.as_ref())?;
                old.remove(key)?;
            }
            t.finish()?;
            moved += rows.len();
            rows.len() < MOVE_ROWS
        };
        if done {
            txn.delete_table(v1::PACKETS)?;
            txn.delete_table(v1::SEQ_OF)?;
            txn.delete_table(v1::ORIGINS)?;
            txn.delete_table(v1::CHANGES)?;
            txn.delete_table(v1::BY_TIME)?;
        }
        txn.commit()?;
        if done {
            tracing::info!(moved, "pkarr store moved to its second layout");
            return Ok(());
        }
    }
}

fn random_epoch() -> Epoch {
    use std::io::Read;
    let mut epoch = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut epoch));
    if read.is_err() {
        // No /dev/urandom: the clock and the process id, distinct enough between replicas
        // started apart (the epoch only tells replicas and their disks apart).
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        epoch[..12].copy_from_slice(&now.to_be_bytes()[4..]);
        epoch[12..].copy_from_slice(&std::process::id().to_be_bytes());
    }
    epoch
}

/// One page of what changed on this replica after a sequence number.
#[derive(Debug, Clone, Default)]
pub struct ChangePage {
    /// This replica's epoch.
    pub epoch: Epoch,
    /// The highest sequence number given when the page was read: a reader that got every
    /// page up to it has every packet this replica held then (or a newer one of its key).
    pub head: u64,
    /// Sequence number, key, payload and origin of each changed key, in order.
    pub entries: Vec<(u64, Key, Vec<u8>, Origin)>,
    /// Where the next page starts: the last number this page read (entries left out, such as
    /// those dated beyond the bound, included), or `head` when it reached the end.
    pub next: u64,
}

impl ChangePage {
    /// Whether the log ends with this page.
    pub fn complete(&self) -> bool {
        self.next >= self.head
    }
}

/// Rows one page looks at, at most, entries left out included: a reader that has everything
/// still gets pages of bounded work, each moving its cursor.
const PAGE_ROWS: usize = 65_536;

/// The packets changed after `after`, in sequence order, until their payloads reach
/// `max_bytes` (at least one entry when there is one), read in one snapshot; those `have`
/// says the reader holds (it read their origin that far, or is their origin) are left out.
/// Nothing above `durable` is read: a crash may take the database back to it, and those
/// numbers would be given again.
pub(super) fn changes_after(
    db: &redb::Database,
    epoch: Epoch,
    (after, durable): (u64, u64),
    max_bytes: usize,
    have: &Have,
    held: &dyn Fn(u64) -> bool,
) -> Result<ChangePage, redb::Error> {
    use redb::ReadableDatabase;
    let txn = db.begin_read()?;
    let log = txn.open_table(LOG)?;
    let packets = txn.open_table(PACKETS)?;
    let meta = txn.open_table(META)?;
    let head = (meta
        .get("next_seq")?
        .and_then(|v| v.value().try_into().ok().map(u64::from_be_bytes))
        .unwrap_or(1)
        - 1)
    .min(durable);
    let mut page = ChangePage {
        epoch,
        head,
        entries: Vec::new(),
        next: head.max(after),
    };
    let mut bytes = 0;
    for (rows, entry) in log.range(after.saturating_add(1)..)?.enumerate() {
        let (seq, row) = entry?;
        let seq = seq.value();
        if seq > head {
            break;
        }
        if rows >= PAGE_ROWS {
            page.next = seq - 1;
            break;
        }
        let Some((key, origin)) = read_log_row(row.value()) else {
            continue;
        };
        let origin = origin.unwrap_or((epoch, seq));
        if have.get(&origin.0).is_some_and(|read| *read >= origin.1) || held(seq) {
            continue;
        }
        // A stale row (its key has a newer packet, under a later number), or a packet gone.
        let Some(row) = packets.get(&key)?.filter(|r| seq_of(r.value()) == seq) else {
            continue;
        };
        let payload = payload_of(row.value()).to_vec();
        bytes += payload.len() + 66;
        page.entries.push((seq, key, payload, origin));
        if bytes >= max_bytes {
            page.next = seq;
            break;
        }
    }
    Ok(page)
}

/// Every cursor kept, and this replica's own epoch as read to its head (at most `durable`):
/// what a page read from a peer can leave out. (Its head, not everything: a replica whose disk
/// went back to an older copy gets back from its peers the publishes it took after that copy.)
pub(super) fn have(db: &redb::Database, own: Epoch, durable: u64) -> Result<Have, redb::Error> {
    use redb::ReadableDatabase;
    let mut have = Have::new();
    let txn = db.begin_read()?;
    match txn.open_table(CURSORS) {
        Ok(cursors) => {
            for entry in cursors.iter()? {
                let (epoch, seq) = entry?;
                have.insert(*epoch.value(), seq.value());
            }
        }
        Err(redb::TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(e.into()),
    }
    let head = txn
        .open_table(META)?
        .get("next_seq")?
        .and_then(|v| v.value().try_into().ok().map(u64::from_be_bytes))
        .unwrap_or(1)
        - 1;
    have.insert(own, head.min(durable));
    Ok(have)
}

/// The next sequence number the database gives.
pub(super) fn next_seq(db: &redb::Database) -> Result<u64, redb::Error> {
    use redb::ReadableDatabase;
    let txn = db.begin_read()?;
    let meta = match txn.open_table(META) {
        Ok(m) => m,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(1),
        Err(e) => return Err(e.into()),
    };
    Ok(meta
        .get("next_seq")?
        .and_then(|v| v.value().try_into().ok().map(u64::from_be_bytes))
        .unwrap_or(1))
}

/// Whether the last run stopped cleanly: its last commit kept the stale rows' numbers (a
/// `meta` row [`stale_rows`] takes back), or there was no last run (no epoch yet: a new
/// database). Read before [`prepare`].
pub(super) fn stopped_cleanly(db: &redb::Database) -> Result<bool, redb::Error> {
    use redb::ReadableDatabase;
    let txn = db.begin_read()?;
    let meta = match txn.open_table(META) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(true),
        Err(e) => return Err(e.into()),
    };
    Ok(meta.get("epoch")?.is_none() || meta.get(STALE)?.is_some())
}

/// The numbers of the stale log rows, in order: those kept at the last clean stop (taken from
/// `meta`), or, when the log holds other rows than one per packet and those (a crash, or a
/// stop that could not keep them), found by walking the packets and the log.
pub(super) fn stale_rows(db: &redb::Database) -> Result<Vec<u64>, redb::Error> {
    use redb::ReadableTableMetadata;
    let txn = db.begin_write()?;
    let stale = {
        let mut t = Tables::open(&txn)?;
        let kept: Vec<u64> = t
            .meta
            .remove(STALE)?
            .map(|v| {
                v.value()
                    .chunks_exact(8)
                    .map(|c| u64::from_be_bytes(c.try_into().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default();
        let (rows, packets) = (t.log.len()?, t.packets.len()?);
        if rows == packets + kept.len() as u64 {
            let mut kept = kept;
            kept.sort_unstable();
            kept
        } else {
            let mut live = Vec::with_capacity(packets as usize);
            for entry in t.packets.iter()? {
                live.push(seq_of(entry?.1.value()));
            }
            live.sort_unstable();
            let mut stale = Vec::new();
            for entry in t.log.iter()? {
                let seq = entry?.0.value();
                if live.binary_search(&seq).is_err() {
                    stale.push(seq);
                }
            }
            tracing::info!(
                stale = stale.len(),
                "pkarr change log: stale rows found after an unclean stop"
            );
            stale
        }
    };
    txn.commit()?;
    Ok(stale)
}

/// The cursor kept for `peer` (0: nothing read from it yet).
pub(super) fn cursor(db: &redb::Database, peer: &Epoch) -> Result<u64, redb::Error> {
    use redb::ReadableDatabase;
    let txn = db.begin_read()?;
    let cursors = match txn.open_table(CURSORS) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    Ok(cursors.get(peer)?.map_or(0, |v| v.value()))
}

/// How two different packets of one key with the same timestamp are ordered, the same way on
/// every replica (pkarr's own rule): the larger DNS message wins, then the larger signature.
/// `Equal` means the same bytes.
pub fn tie(new: &[u8], stored: &[u8]) -> std::cmp::Ordering {
    let (new_sig, new_msg) = new.split_at(new.len().min(64));
    let (old_sig, old_msg) = stored.split_at(stored.len().min(64));
    new_msg
        .get(8..)
        .cmp(&old_msg.get(8..))
        .then_with(|| new_sig.cmp(old_sig))
}

#[cfg(test)]
mod tests {
    use redb::ReadableTableMetadata;

    use super::*;

    /// A prepared database in memory.
    fn memory_db() -> redb::Database {
        let db = redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .unwrap();
        prepare(&db).unwrap();
        db
    }

    /// A payload dated `stamp` (only its date is read here).
    fn dated(stamp: u64) -> Vec<u8> {
        let mut p = vec![0u8; 84];
        p[64..72].copy_from_slice(&stamp.to_be_bytes());
        p
    }

    #[test]
    fn stale_log_rows_are_kept_at_a_clean_stop_and_found_after_a_crash() {
        let db = memory_db();
        let epoch = [1u8; 16];
        let txn = db.begin_write().unwrap();
        let mut made_stale = Vec::new();
        {
            let mut t = Tables::open(&txn).unwrap();
            for round in 0..3u64 {
                for k in 0..4u8 {
                    let (_, stale) = t.write(&[k; 32], &dated(round), None).unwrap();
                    made_stale.extend(stale);
                }
            }
            t.finish().unwrap();
        }
        txn.commit().unwrap();
        assert_eq!(made_stale, [1, 2, 3, 4, 5, 6, 7, 8]);
        // Readers see each key once, at its last number.
        let page = changes_after(&db, epoch, (0, u64::MAX), usize::MAX, &Have::new(), &|_| {
            false
        })
        .unwrap();
        let seqs: Vec<u64> = page.entries.iter().map(|e| e.0).collect();
        assert_eq!(seqs, [9, 10, 11, 12]);
        // No numbers kept (a crash): the walk finds the stale rows.
        assert_eq!(stale_rows(&db).unwrap(), made_stale);
        // Kept at a stop: taken back as they were, and only once.
        let txn = db.begin_write().unwrap();
        {
            let mut t = Tables::open(&txn).unwrap();
            t.keep_stale(&[8, 2, 4, 1, 3, 5, 7, 6]).unwrap();
            t.remove_stale(&[]).unwrap();
        }
        txn.commit().unwrap();
        assert_eq!(stale_rows(&db).unwrap(), made_stale);
        // Removed: the log holds one row per packet, and nothing is stale.
        let txn = db.begin_write().unwrap();
        {
            let mut t = Tables::open(&txn).unwrap();
            t.remove_stale(&made_stale).unwrap();
            assert_eq!(t.log.len().unwrap(), 4);
        }
        txn.commit().unwrap();
        assert_eq!(stale_rows(&db).unwrap(), Vec::<u64>::new());
        let page = changes_after(&db, epoch, (0, u64::MAX), usize::MAX, &Have::new(), &|_| {
            false
        })
        .unwrap();
        assert_eq!(page.entries.len(), 4);
    }

    #[test]
    fn slices_of_the_expiry_walk_cover_the_store_once_and_find_only_the_old() {
        let db = memory_db();
        let txn = db.begin_write().unwrap();
        let mut t = Tables::open(&txn).unwrap();
        let mut old = Vec::new();
        for i in 0u32..2_500 {
            let mut key = [0u8; 32];
            key[..4].copy_from_slice(&i.wrapping_mul(2_654_435_761).to_be_bytes());
            let stamp = if i % 3 == 0 { 10 } else { 1_000 };
            if stamp < 100 {
                old.push(key);
            }
            t.write_now(&key, &dated(stamp), None).unwrap();
        }
        let (mut found, mut from, mut slices) = (Vec::new(), None, 0);
        loop {
            let (expired, next) = t.expired_from(from, 1_000, 100).unwrap();
            slices += 1;
            found.extend(expired.into_iter().map(|(stamp, key)| {
                assert_eq!(stamp, 10);
                key
            }));
            match next {
                Some(key) => from = Some(key),
                None => break,
            }
        }
        assert_eq!(slices, 3);
        old.sort();
        assert_eq!(found, old, "each old packet once, in key order");
        // Removing them leaves the rest and their log rows.
        for key in &found {
            t.remove(key).unwrap();
        }
        assert_eq!(
            t.expired_from(None, usize::MAX, 100).unwrap(),
            (vec![], None)
        );
        assert_eq!(t.log.len().unwrap(), 2_500 - old.len() as u64);
    }
}
