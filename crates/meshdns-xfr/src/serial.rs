//! SOA serials (RFC 1982 arithmetic) and the book that keeps them across restarts.
//!
//! A zone's serial changes exactly when its content does. A new serial is the current unix
//! time, or one more than the last when that is not greater (several changes in one second, or
//! a serial that was set ahead of the clock). Replicas computing the same content therefore
//! agree to within the second the change reached each, and any one of them only moves
//! forward. The book (`serials.json` in the data directory) keeps each zone's serial with a
//! digest of its content, so a restart with unchanged content serves the same serial (a
//! secondary sees nothing new), and a restart with changed content a greater one.
//!
//! A pkarr origin's serial moves with every stamp of its published keys (up to ten a second).
//! Writing the book at each (a new file, written and renamed) cost a relay replica 5% of its
//! CPU per replicated publish, so a stamp writes it only when its serial passes the one the
//! file reserves, and then reserves [`RESERVE`] more ([`SerialBook::stamp`]). A start that finds
//! a reservation (the last run did not stop cleanly: a clean stop writes the book exactly,
//! [`SerialBook::settle`]) may have served any serial up to it, for content it cannot know, so
//! it starts above it whatever its content.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use meshdns_zone::Zone;
use serde::{Deserialize, Serialize};
use tracing::warn;

/// Whether serial `a` is greater than `b` in RFC 1982 sequence-space arithmetic.
pub fn serial_gt(a: u32, b: u32) -> bool {
    a != b && (a.wrapping_sub(b) as i32) > 0
}

/// The serial that follows `previous` at unix time `now`: `now` when that is greater, otherwise
/// `previous + 1`.
pub fn next_serial(previous: u32, now: u32) -> u32 {
    if serial_gt(now, previous) && now.wrapping_sub(previous) < 1 << 31 {
        now
    } else {
        previous.wrapping_add(1)
    }
}

/// A digest of a zone's content without its serial (SHA-256, so it is the same in every
/// process and version that builds the same zone).
pub fn digest(zone: &Zone) -> [u8; 32] {
    struct Sha(ring::digest::Context);
    impl std::hash::Hasher for Sha {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut h = Sha(ring::digest::Context::new(&ring::digest::SHA256));
    zone.hash_content(&mut h);
    h.0.finish().as_ref().try_into().expect("32 bytes")
}

/// The serials a written book reserves beyond a stamped one: at ten stamps a second the book
/// is written every ten seconds, and a start after a crash begins at most this far beyond the
/// last serial served.
pub const RESERVE: u32 = 100;

/// One zone's entry in the book.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The serial last served, or last written while stamps go on (see `reserved`).
    pub serial: u32,
    /// Hex SHA-256 of the content it was served for (see [`digest`]).
    pub digest: String,
    /// Serials beyond `serial` up to this one may have been served since (for content the book
    /// does not know): the next serial must be greater than it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<u32>,
}

impl Entry {
    /// The highest serial that may have been served: what the next one must pass.
    pub fn highest(&self) -> u32 {
        match self.reserved {
            Some(r) if serial_gt(r, self.serial) => r,
            _ => self.serial,
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    zones: BTreeMap<String, Entry>,
}

/// The serial last served for each zone, with its content's digest, kept in a file when a data
/// directory is given.
#[derive(Debug, Default)]
pub struct SerialBook {
    path: Option<PathBuf>,
    zones: BTreeMap<String, Entry>,
}

impl SerialBook {
    /// The book in `data_dir` (`serials.json`), or one in memory only. An unreadable file is
    /// logged and started afresh: serials then restart from the clock, which is still ahead of
    /// any serial served before (unless the clock went back).
    pub fn open(data_dir: Option<&Path>) -> SerialBook {
        let path = data_dir.map(|d| d.join("serials.json"));
        let zones = match &path {
            Some(p) => match std::fs::read(p) {
                Ok(bytes) => match serde_json::from_slice::<File>(&bytes) {
                    Ok(f) => f.zones,
                    Err(e) => {
                        warn!(file = %p.display(), error = %e, "serial book unreadable; starting afresh");
                        BTreeMap::new()
                    }
                },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
                Err(e) => {
                    warn!(file = %p.display(), error = %e, "cannot read the serial book; starting afresh");
                    BTreeMap::new()
                }
            },
            None => BTreeMap::new(),
        };
        SerialBook { path, zones }
    }

    /// The entry of zone `origin` (presentation format, with the final dot).
    pub fn get(&self, origin: &str) -> Option<&Entry> {
        self.zones.get(origin)
    }

    /// Records what `origin` serves now (`digest` as [`content_id`] spells it). A reservation
    /// `serial` has not passed is kept: stamps may go on to it without writing the book.
    pub fn set(&mut self, origin: &str, serial: u32, digest: String) {
        let reserved = self
            .zones
            .get(origin)
            .and_then(|e| e.reserved)
            .filter(|&r| !serial_gt(serial, r));
        self.zones.insert(
            origin.to_string(),
            Entry {
                serial,
                digest,
                reserved,
            },
        );
    }

    /// Records a stamp of `origin` (a pkarr origin's next serial for its published keys).
    /// True when the book must be written ([`SerialBook::save`]): `serial` passed the
    /// reservation, and [`RESERVE`] more are reserved.
    pub fn stamp(&mut self, origin: &str, serial: u32, digest: String) -> bool {
        self.set(origin, serial, digest);
        let entry = self.zones.get_mut(origin).expect("just set");
        if entry.reserved.is_some() {
            return false;
        }
        entry.reserved = Some(serial.wrapping_add(RESERVE));
        true
    }

    /// Writes the book exactly (no serial reserved): at a clean stop, so that the next start
    /// with the same content serves the same serials.
    pub fn settle(&mut self) {
        let reserved = self.zones.values().any(|e| e.reserved.is_some());
        for entry in self.zones.values_mut() {
            entry.reserved = None;
        }
        if reserved {
            self.save();
        }
    }

    /// Writes the book (atomically: a new file, synced, renamed over the old). Errors are
    /// logged: the serials served stay right; only a restart may then change a serial
    /// needlessly. A write that failed drops the reservations, so that the next stamp writes
    /// again: a crash must not find a reservation older than the serials served.
    pub fn save(&mut self) {
        let Some(path) = &self.path else { return };
        let file = File {
            zones: self.zones.clone(),
        };
        let tmp = path.with_extension("json.tmp");
        let result = serde_json::to_vec_pretty(&file)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                use std::io::Write;
                let mut f = std::fs::File::create(&tmp)?;
                f.write_all(&bytes)?;
                f.sync_all()
            })
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = result {
            warn!(file = %path.display(), error = %e, "cannot save the serial book");
            for entry in self.zones.values_mut() {
                entry.reserved = None;
            }
        }
    }
}

/// How the book names a version's content: the zone's digest, and for a pkarr origin the sum
/// of what its keys published (see [`published_hash`]).
pub fn content_id(zone: &[u8; 32], published: Option<u64>) -> String {
    match published {
        Some(sum) => format!("{}:{sum:016x}", hex(zone)),
        None => hex(zone),
    }
}

/// One key's publish, hashed for an order-independent sum over keys (a wrapping sum of these
/// changes by one term when one key publishes).
pub fn published_hash(key: &[u8; 32], stamp: u64) -> u64 {
    let mut h = stamp ^ 0x9E37_79B9_7F4A_7C15;
    for chunk in key.chunks_exact(8) {
        h ^= u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        h ^= h >> 33;
    }
    h
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    data_encoding::HEXLOWER.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1982_comparison_and_next() {
        assert!(serial_gt(2, 1));
        assert!(!serial_gt(1, 2));
        assert!(!serial_gt(5, 5));
        assert!(serial_gt(0, u32::MAX), "wraps");
        assert!(serial_gt(100, u32::MAX - 100));
        assert!(!serial_gt(1 << 31, 0) || !serial_gt(0, 1 << 31));
        assert_eq!(next_serial(10, 1_700_000_000), 1_700_000_000);
        assert_eq!(next_serial(1_700_000_000, 1_700_000_000), 1_700_000_001);
        // A date-style serial ahead of the clock keeps counting by one.
        assert_eq!(next_serial(2_026_112_301, 1_795_000_000), 2_026_112_302);
        assert_eq!(next_serial(u32::MAX, 5), 5, "wraps forward to the clock");
    }

    #[test]
    fn stamps_write_the_book_only_past_its_reservation() {
        let dir = tempfile::tempdir().unwrap();
        let mut book = SerialBook::open(Some(dir.path()));
        let id = |n: u8| content_id(&[n; 32], Some(u64::from(n)));
        assert!(
            book.stamp("relay.", 1_000, id(1)),
            "the first stamp reserves"
        );
        book.save();
        assert!(
            !book.stamp("relay.", 1_001, id(2)),
            "within the reservation"
        );
        assert!(
            !book.stamp("relay.", 1_000 + RESERVE, id(3)),
            "up to its end"
        );
        // What a crash leaves: the written entry, reserving beyond what was served since.
        let crashed = SerialBook::open(Some(dir.path()));
        let entry = crashed.get("relay.").unwrap();
        assert_eq!(
            (entry.serial, entry.reserved),
            (1_000, Some(1_000 + RESERVE))
        );
        assert_eq!(entry.highest(), 1_000 + RESERVE);
        assert!(
            book.stamp("relay.", 1_001 + RESERVE, id(4)),
            "past it: written again"
        );
        // A set keeps a reservation it has not passed, and drops one it passed.
        book.set("relay.", 1_001 + 2 * RESERVE, id(5));
        assert_eq!(
            book.get("relay.").unwrap().reserved,
            Some(1_001 + 2 * RESERVE)
        );
        book.set("relay.", 1_002 + 2 * RESERVE, id(6));
        assert_eq!(book.get("relay.").unwrap().reserved, None);
        assert!(book.stamp("relay.", 1_003 + 2 * RESERVE, id(7)));
        book.settle();
        let settled = SerialBook::open(Some(dir.path()));
        let entry = settled.get("relay.").unwrap();
        assert_eq!((entry.serial, entry.reserved), (1_003 + 2 * RESERVE, None));
        assert_eq!(entry.digest, id(7));
        assert!(
            !std::fs::read_to_string(dir.path().join("serials.json"))
                .unwrap()
                .contains("reserved"),
            "an exact book has no reservations"
        );
    }

    #[test]
    fn a_book_write_that_failed_is_tried_again_at_the_next_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let mut book = SerialBook::open(Some(dir.path()));
        let id = content_id(&[1; 32], Some(1));
        // The temporary file cannot be made: the write fails.
        std::fs::create_dir(dir.path().join("serials.json.tmp")).unwrap();
        assert!(book.stamp("relay.", 1_000, id.clone()));
        book.save();
        assert_eq!(
            book.get("relay.").unwrap().reserved,
            None,
            "not on disk: dropped"
        );
        std::fs::remove_dir(dir.path().join("serials.json.tmp")).unwrap();
        assert!(book.stamp("relay.", 1_001, id), "written again");
        book.save();
        let reopened = SerialBook::open(Some(dir.path()));
        assert_eq!(reopened.get("relay.").unwrap().highest(), 1_001 + RESERVE);
    }

    #[test]
    fn the_book_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut book = SerialBook::open(Some(dir.path()));
        book.set("example.org.", 42, content_id(&[7; 32], None));
        book.save();
        let again = SerialBook::open(Some(dir.path()));
        assert_eq!(again.get("example.org.").unwrap().serial, 42);
        assert_eq!(again.get("example.org.").unwrap().digest, hex(&[7; 32]));
        std::fs::write(dir.path().join("serials.json"), b"{not json").unwrap();
        assert!(
            SerialBook::open(Some(dir.path()))
                .get("example.org.")
                .is_none()
        );
    }
}
