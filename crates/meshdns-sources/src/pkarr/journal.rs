//! The publish journal (`pkarr.journal` beside the database): clients' publishes made durable
//! between commits.
//!
//! A publish is acknowledged once it is durable. Committing the database for every batch of
//! publishes costs a copy of each B-tree page the batch touches and two syncs: at 1,000
//! publishes a second that was a commit every 15 ms or so, 40% of a replica's CPU. Instead the
//! writer appends a batch's winners here and syncs the file (one write, one `fdatasync`),
//! answers them, and writes them into the database with its next commit, at most
//! [`super::LAZY_FLUSH`] later, together with the packets peers pushed meanwhile. Each is
//! numbered when it is answered (replication sends that number along), and the commit stores it
//! under that number.
//!
//! After a crash the start replays the records the database does not hold: those numbered at
//! or above its next sequence number. A record's checksum covers all of it: a record cut short
//! or damaged by the crash (never acknowledged: its sync had not returned) ends the journal.
//!
//! The file is not truncated after a commit: the next batch is written from the header on,
//! over the last round's records, into blocks the file has already, so that a sync writes data
//! and no metadata. What is left of earlier rounds beyond the new records is numbered below
//! the database's next number, and skipped.
//!
//! Layout: a header of [`HEADER`] bytes (the magic, then the epoch of the database the journal
//! belongs to: a journal beside a database made anew is dropped), then records:
//!
//! ```text
//! length: u32 (big-endian, of the body) | CRC-32C of the body: u32 | body
//! body: sequence number u64 | key [32] | 0, or 1 + origin epoch [16] + origin number u64 | payload
//! ```
//!
//! The checksum is written by hand with the `crc` crate (already in the tree, for mainline);
//! no crate keeps an append-only record file with the replay rule this store needs.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::{Epoch, Key, Origin};

/// The journal's file in the data directory.
pub const JOURNAL_FILE: &str = "pkarr.journal";

const MAGIC: &[u8; 8] = b"MDPKJRN1";
/// The header: the magic, the epoch, and room.
const HEADER: u64 = 32;
/// A body, at most: far above a relay payload (1,104 bytes at most), so that a damaged length
/// cannot make the replay read gigabytes.
const MAX_BODY: usize = 64 * 1024;

const CRC: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// One publish as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    pub key: Key,
    pub origin: Option<Origin>,
    pub payload: Vec<u8>,
}

/// The journal, open for appending.
pub struct Journal {
    file: File,
    /// Where the next record goes.
    end: u64,
    /// The records being written, reused.
    buf: Vec<u8>,
}

impl Journal {
    /// Opens (or makes) the journal in `dir` for the database of `epoch`, and returns it with
    /// the records it holds, in the order written; the next append writes from the start. A
    /// journal of another epoch (its database was lost and made anew) is emptied.
    pub fn open(dir: &Path, epoch: &Epoch) -> std::io::Result<(Journal, Vec<Record>)> {
        let path = dir.join(JOURNAL_FILE);
        let named =
            |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(named)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(named)?;
        let records = match header_epoch(&bytes) {
            Some(e) if e == *epoch => records(&bytes[HEADER as usize..]),
            _ => {
                file.set_len(0).map_err(named)?;
                file.seek(SeekFrom::Start(0)).map_err(named)?;
                let mut header = [0u8; HEADER as usize];
                header[..8].copy_from_slice(MAGIC);
                header[8..24].copy_from_slice(epoch);
                file.write_all(&header).map_err(named)?;
                file.sync_all().map_err(named)?;
                // The file's directory entry too: records answered in its first round would
                // go with it.
                File::open(dir).and_then(|d| d.sync_all()).map_err(named)?;
                Vec::new()
            }
        };
        Ok((
            Journal {
                file,
                end: HEADER,
                buf: Vec::new(),
            },
            records,
        ))
    }

    /// Writes `records` after those written since the last [`Journal::rewind`] and returns once
    /// they are durable.
    pub fn append<'a>(
        &mut self,
        records: impl IntoIterator<Item = (u64, &'a Key, Option<&'a Origin>, &'a [u8])>,
    ) -> std::io::Result<()> {
        self.buf.clear();
        for (seq, key, origin, payload) in records {
            encode(&mut self.buf, seq, key, origin, payload);
        }
        self.file.write_all_at(&self.buf, self.end)?;
        self.file.sync_data()?;
        self.end += self.buf.len() as u64;
        Ok(())
    }

    /// The records written so far are in the database (a commit wrote them): the next append
    /// writes from the start again.
    pub fn rewind(&mut self) {
        self.end = HEADER;
    }

    /// Cuts the file to its header (a clean stop, every record committed): the next start
    /// reads nothing.
    pub fn clear(&mut self) -> std::io::Result<()> {
        self.end = HEADER;
        self.file.set_len(HEADER)?;
        self.file.sync_all()
    }
}

fn header_epoch(bytes: &[u8]) -> Option<Epoch> {
    (bytes.len() >= HEADER as usize && &bytes[..8] == MAGIC)
        .then(|| bytes[8..24].try_into().ok())
        .flatten()
}

fn encode(buf: &mut Vec<u8>, seq: u64, key: &Key, origin: Option<&Origin>, payload: &[u8]) {
    let start = buf.len();
    buf.extend_from_slice(&[0; 8]);
    buf.extend_from_slice(&seq.to_be_bytes());
    buf.extend_from_slice(key);
    match origin {
        None => buf.push(0),
        Some((epoch, n)) => {
            buf.push(1);
            buf.extend_from_slice(epoch);
            buf.extend_from_slice(&n.to_be_bytes());
        }
    }
    buf.extend_from_slice(payload);
    let body = &buf[start + 8..];
    let (len, crc) = (body.len() as u32, CRC.checksum(body));
    buf[start..start + 4].copy_from_slice(&len.to_be_bytes());
    buf[start + 4..start + 8].copy_from_slice(&crc.to_be_bytes());
}

/// The records in `bytes` (what follows the header), up to the first that is cut short,
/// damaged or not a record.
fn records(mut bytes: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    while let Some(record) = next(&mut bytes) {
        out.push(record);
    }
    out
}

fn next(bytes: &mut &[u8]) -> Option<Record> {
    let len = u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    let crc = u32::from_be_bytes(bytes.get(4..8)?.try_into().ok()?);
    if len > MAX_BODY {
        return None;
    }
    let body = bytes.get(8..8 + len)?;
    if CRC.checksum(body) != crc {
        return None;
    }
    let seq = u64::from_be_bytes(body.get(..8)?.try_into().ok()?);
    let key: Key = body.get(8..40)?.try_into().ok()?;
    let (origin, rest) = match body.get(40)? {
        0 => (None, body.get(41..)?),
        1 => {
            let epoch: Epoch = body.get(41..57)?.try_into().ok()?;
            let n = u64::from_be_bytes(body.get(57..65)?.try_into().ok()?);
            (Some((epoch, n)), body.get(65..)?)
        }
        _ => return None,
    };
    *bytes = &bytes[8 + len..];
    Some(Record {
        seq,
        key,
        origin,
        payload: rest.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64, origin: Option<Origin>) -> Record {
        Record {
            seq,
            key: [seq as u8; 32],
            origin,
            payload: vec![seq as u8; 100 + seq as usize],
        }
    }

    fn append(j: &mut Journal, records: &[Record]) {
        j.append(
            records
                .iter()
                .map(|r| (r.seq, &r.key, r.origin.as_ref(), r.payload.as_slice())),
        )
        .unwrap();
    }

    #[test]
    fn records_come_back_as_written_until_one_is_cut_short_or_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let epoch = [7; 16];
        let written = vec![
            record(1, None),
            record(2, Some(([9; 16], 40))),
            record(3, None),
        ];
        {
            let (mut j, found) = Journal::open(dir.path(), &epoch).unwrap();
            assert!(found.is_empty());
            append(&mut j, &written[..2]);
            append(&mut j, &written[2..]);
        }
        let (_, found) = Journal::open(dir.path(), &epoch).unwrap();
        assert_eq!(found, written);

        let path = dir.path().join(JOURNAL_FILE);
        let bytes = std::fs::read(&path).unwrap();
        // The last record cut short: the two before it.
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert_eq!(Journal::open(dir.path(), &epoch).unwrap().1, written[..2]);
        // A byte of the second record's payload changed: the first alone.
        let mut damaged = bytes.clone();
        let second = HEADER as usize + 8 + 41 + 101 + 8 + 65 + 10;
        damaged[second] ^= 1;
        std::fs::write(&path, &damaged).unwrap();
        assert_eq!(Journal::open(dir.path(), &epoch).unwrap().1, written[..1]);
        // A length beyond any record: nothing is read past it.
        let mut huge = bytes;
        huge[HEADER as usize..HEADER as usize + 4].copy_from_slice(&u32::MAX.to_be_bytes());
        std::fs::write(&path, &huge).unwrap();
        assert!(Journal::open(dir.path(), &epoch).unwrap().1.is_empty());
    }

    #[test]
    fn a_rewound_journal_writes_over_the_last_round() {
        let dir = tempfile::tempdir().unwrap();
        let epoch = [7; 16];
        let (mut j, _) = Journal::open(dir.path(), &epoch).unwrap();
        append(&mut j, &[record(1, None), record(2, None), record(3, None)]);
        j.rewind();
        // A record of the same size as the first: the last round's others follow it whole,
        // and are read (the store skips them by their numbers, below its next one).
        let same_size = |seq: u64| Record {
            payload: vec![seq as u8; 101],
            ..record(seq, None)
        };
        append(&mut j, &[same_size(4)]);
        let found = Journal::open(dir.path(), &epoch).unwrap().1;
        assert_eq!(found, vec![same_size(4), record(2, None), record(3, None)]);
        let (mut j, _) = Journal::open(dir.path(), &epoch).unwrap();
        j.clear().unwrap();
        assert!(Journal::open(dir.path(), &epoch).unwrap().1.is_empty());
    }

    #[test]
    fn a_journal_of_another_database_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path(), &[1; 16]).unwrap();
        append(&mut j, &[record(5, None)]);
        assert_eq!(Journal::open(dir.path(), &[2; 16]).unwrap().1, vec![]);
        // Emptied: not read again under either epoch.
        assert_eq!(Journal::open(dir.path(), &[1; 16]).unwrap().1, vec![]);
        assert_eq!(
            std::fs::metadata(dir.path().join(JOURNAL_FILE))
                .unwrap()
                .len(),
            HEADER
        );
    }
}
