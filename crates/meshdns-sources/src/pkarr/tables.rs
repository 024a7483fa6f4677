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
//! - `origins`: sequence → the epoch and sequence number the packet had on the replica that
//!   took it from its publisher, for packets another replica sent (a publish taken here has
//!   no row: it is its own origin). A reader names how far it read each replica
//!   ([`Have`]); entries it got first-hand are left out of its pages ([`changes_after`]).

use redb::{ReadableTable, ReadableTableMetadata, TableDefinition};

use meshdns_zone::Key;

pub(super) const PACKETS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("packets");
pub(super) const BY_TIME: TableDefinition<(u64, &[u8; 32]), ()> =
    TableDefinition::new("by_timestamp");
const CHANGES: TableDefinition<u64, &[u8; 32]> = TableDefinition::new("changes");
const SEQ_OF: TableDefinition<&[u8; 32], u64> = TableDefinition::new("seq_of");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const CURSORS: TableDefinition<&[u8; 16], u64> = TableDefinition::new("cursors");
const ORIGINS: TableDefinition<u64, &[u8; 24]> = TableDefinition::new("origins");

/// A replica's identity, made with its database.
pub type Epoch = [u8; 16];

/// Where a packet was first taken: that replica's epoch and its sequence number there.
pub type Origin = (Epoch, u64);

/// How far a reader has read each replica: it holds every packet of that replica up to that
/// sequence number (or a newer one of its key). Its own epoch maps to its head.
pub type Have = std::collections::HashMap<Epoch, u64>;

fn origin_bytes((epoch, seq): &Origin) -> [u8; 24] {
    let mut b = [0u8; 24];
    b[..16].copy_from_slice(epoch);
    b[16..].copy_from_slice(&seq.to_be_bytes());
    b
}

fn origin_of(b: &[u8; 24]) -> Origin {
    let mut epoch = [0u8; 16];
    epoch.copy_from_slice(&b[..16]);
    (
        epoch,
        u64::from_be_bytes(b[16..].try_into().expect("8 bytes")),
    )
}

/// The tables one write transaction changes.
pub(super) struct Tables<'t> {
    pub packets: redb::Table<'t, &'static [u8; 32], &'static [u8]>,
    by_time: redb::Table<'t, (u64, &'static [u8; 32]), ()>,
    changes: redb::Table<'t, u64, &'static [u8; 32]>,
    seq_of: redb::Table<'t, &'static [u8; 32], u64>,
    meta: redb::Table<'t, &'static str, &'static [u8]>,
    cursors: redb::Table<'t, &'static [u8; 16], u64>,
    origins: redb::Table<'t, u64, &'static [u8; 24]>,
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
            origins: txn.open_table(ORIGINS)?,
            next_seq,
        })
    }

    /// Stores `payload` as `key`'s packet at `timestamp_us`, replacing the row of the packet
    /// stored at `old` (if any), under the next sequence number, which it returns; with the
    /// replica it came from when another replica sent it.
    pub fn write(
        &mut self,
        key: &Key,
        payload: &[u8],
        timestamp_us: u64,
        old: Option<u64>,
        origin: Option<&Origin>,
    ) -> Result<u64, redb::StorageError> {
        self.packets.insert(key, payload)?;
        if let Some(old) = old {
            self.by_time.remove((old, key))?;
        }
        self.by_time.insert((timestamp_us, key), ())?;
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(previous) = self.seq_of.insert(key, seq)? {
            let previous = previous.value();
            self.changes.remove(previous)?;
            self.origins.remove(previous)?;
        }
        self.changes.insert(seq, key)?;
        if let Some(origin) = origin {
            self.origins.insert(seq, &origin_bytes(origin))?;
        }
        Ok(seq)
    }

    /// Removes `key`'s packet, stored at `timestamp_us`.
    pub fn remove(&mut self, key: &Key, timestamp_us: u64) -> Result<(), redb::StorageError> {
        self.by_time.remove((timestamp_us, key))?;
        self.packets.remove(key)?;
        if let Some(seq) = self.seq_of.remove(key)? {
            let seq = seq.value();
            self.changes.remove(seq)?;
            self.origins.remove(seq)?;
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
pub(super) fn changes_after(
    db: &redb::Database,
    epoch: Epoch,
    after: u64,
    max_bytes: usize,
    have: &Have,
    held: &dyn Fn(u64) -> bool,
) -> Result<ChangePage, redb::Error> {
    use redb::ReadableDatabase;
    let txn = db.begin_read()?;
    let changes = txn.open_table(CHANGES)?;
    let packets = txn.open_table(PACKETS)?;
    let meta = txn.open_table(META)?;
    let origins = match txn.open_table(ORIGINS) {
        Ok(t) => Some(t),
        Err(redb::TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(e.into()),
    };
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
    for (rows, entry) in changes.range(after.saturating_add(1)..)?.enumerate() {
        let (seq, key) = entry?;
        let seq = seq.value();
        if rows >= PAGE_ROWS {
            page.next = seq - 1;
            break;
        }
        let origin = match &origins {
            Some(t) => t.get(seq)?.map(|o| origin_of(o.value())),
            None => None,
        }
        .unwrap_or((epoch, seq));
        if have.get(&origin.0).is_some_and(|read| *read >= origin.1) || held(seq) {
            continue;
        }
        let key = *key.value();
        let Some(payload) = packets.get(&key)? else {
            continue;
        };
        let payload = payload.value().to_vec();
        bytes += payload.len() + 66;
        page.entries.push((seq, key, payload, origin));
        if bytes >= max_bytes {
            page.next = seq;
            break;
        }
    }
    Ok(page)
}

/// Every cursor kept, and this replica's own epoch as read to its head: what a page read from
/// a peer can leave out. (Its head, not everything: a replica whose disk went back to an
/// older copy gets back from its peers the publishes it took after that copy.)
pub(super) fn have(db: &redb::Database, own: Epoch) -> Result<Have, redb::Error> {
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
    have.insert(own, head);
    Ok(have)
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
