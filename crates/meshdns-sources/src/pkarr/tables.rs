//! The store's tables and the rows every write keeps consistent.
//!
//! - `packets`: key → relay payload, exactly as published.
//! - `by_timestamp`: (timestamp, key) → (), the expiry index.
//! - `changes`: sequence → key, one row per stored key at the sequence number of its last
//!   change; `seq_of`: key → that number. A replica that wants what changed here since
//!   sequence `s` reads `changes` from `s + 1` on ([`changes_after`]): what it missed costs what
//!   was missed, not a walk of every key.
//! - `meta`: this replica's `epoch` (16 random bytes, made with the database: a replica that
//!   lost its disk is a new one, and its peers start reading it from the beginning) and
//!   `next_seq` (kept, so a number is never given twice, even after its row went).
//! - `cursors`: peer epoch → the last of that peer's sequence numbers whose packet is here,
//!   written in the same commit as those packets or a later one (never ahead of the data).

use redb::{ReadableTable, ReadableTableMetadata, TableDefinition};

use meshdns_zone::Key;

pub(super) const PACKETS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("packets");
pub(super) const BY_TIME: TableDefinition<(u64, &[u8; 32]), ()> =
    TableDefinition::new("by_timestamp");
const CHANGES: TableDefinition<u64, &[u8; 32]> = TableDefinition::new("changes");
const SEQ_OF: TableDefinition<&[u8; 32], u64> = TableDefinition::new("seq_of");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const CURSORS: TableDefinition<&[u8; 16], u64> = TableDefinition::new("cursors");

/// A replica's identity, made with its database.
pub type Epoch = [u8; 16];

/// The tables one write transaction changes.
pub(super) struct Tables<'t> {
    pub packets: redb::Table<'t, &'static [u8; 32], &'static [u8]>,
    by_time: redb::Table<'t, (u64, &'static [u8; 32]), ()>,
    changes: redb::Table<'t, u64, &'static [u8; 32]>,
    seq_of: redb::Table<'t, &'static [u8; 32], u64>,
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
            by_time: txn.open_table(BY_TIME)?,
            changes: txn.open_table(CHANGES)?,
            seq_of: txn.open_table(SEQ_OF)?,
            meta,
            cursors: txn.open_table(CURSORS)?,
            next_seq,
        })
    }

    /// Stores `payload` as `key`'s packet at `timestamp_us`, replacing the row of the packet
    /// stored at `old` (if any), under the next sequence number.
    pub fn write(
        &mut self,
        key: &Key,
        payload: &[u8],
        timestamp_us: u64,
        old: Option<u64>,
    ) -> Result<(), redb::StorageError> {
        self.packets.insert(key, payload)?;
        if let Some(old) = old {
            self.by_time.remove((old, key))?;
        }
        self.by_time.insert((timestamp_us, key), ())?;
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(previous) = self.seq_of.insert(key, seq)? {
            self.changes.remove(previous.value())?;
        }
        self.changes.insert(seq, key)?;
        Ok(())
    }

    /// Removes `key`'s packet, stored at `timestamp_us`.
    pub fn remove(&mut self, key: &Key, timestamp_us: u64) -> Result<(), redb::StorageError> {
        self.by_time.remove((timestamp_us, key))?;
        self.packets.remove(key)?;
        if let Some(seq) = self.seq_of.remove(key)? {
            self.changes.remove(seq.value())?;
        }
        Ok(())
    }

    /// The packets dated before `limit`, oldest first, at most `max`.
    pub fn older_than(&self, limit: u64, max: usize) -> Result<Vec<(u64, Key)>, redb::Error> {
        let mut out = Vec::new();
        for entry in self.by_time.range(..(limit, &[0u8; 32]))?.take(max) {
            let (k, _) = entry?;
            let (ts, key) = k.value();
            out.push((ts, *key));
        }
        Ok(out)
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

/// Makes the tables, this replica's epoch (when missing: a new database), and sequence numbers
/// for packets stored by a version without them (once, in key order). Returns the epoch.
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
        if t.changes.is_empty()? && !t.packets.is_empty()? {
            let keys: Vec<Key> = t
                .packets
                .iter()?
                .map(|e| e.map(|(k, _)| *k.value()))
                .collect::<Result<_, _>>()?;
            for key in &keys {
                let seq = t.next_seq;
                t.next_seq += 1;
                t.seq_of.insert(key, seq)?;
                t.changes.insert(seq, key)?;
            }
        }
        t.finish()?;
        epoch
    };
    txn.commit()?;
    Ok(epoch)
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
    /// Sequence number, key and payload of each changed key, in order.
    pub entries: Vec<(u64, Key, Vec<u8>)>,
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

/// The packets changed after `after`, in sequence order, until their payloads reach
/// `max_bytes` (at least one entry when there is one), read in one snapshot.
pub(super) fn changes_after(
    db: &redb::Database,
    epoch: Epoch,
    after: u64,
    max_bytes: usize,
) -> Result<ChangePage, redb::Error> {
    use redb::ReadableDatabase;
    let txn = db.begin_read()?;
    let changes = txn.open_table(CHANGES)?;
    let packets = txn.open_table(PACKETS)?;
    let meta = txn.open_table(META)?;
    let head = meta
        .get("next_seq")?
        .and_then(|v| v.value().try_into().ok().map(u64::from_be_bytes))
        .unwrap_or(1)
        - 1;
    let mut page = ChangePage {
        epoch,
        head,
        entries: Vec::new(),
        next: head.max(after),
    };
    let mut bytes = 0;
    for entry in changes.range(after.saturating_add(1)..)? {
        let (seq, key) = entry?;
        let key = *key.value();
        let Some(payload) = packets.get(&key)? else {
            continue;
        };
        let payload = payload.value().to_vec();
        bytes += payload.len() + 42;
        page.entries.push((seq.value(), key, payload));
        if bytes >= max_bytes {
            page.next = seq.value();
            break;
        }
    }
    Ok(page)
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
