//! SOA serials (RFC 1982 arithmetic) and the book that keeps them across restarts.
//!
//! A zone's serial changes exactly when its content does. A new serial is the current unix
//! time, or one more than the last when that is not greater (several changes in one second, or
//! a serial that was set ahead of the clock). Replicas computing the same content therefore
//! agree to within the second the change reached each, and any one of them only moves
//! forward. The book (`serials.json` in the data directory) keeps each zone's serial with a
//! digest of its content, so a restart with unchanged content serves the same serial (a
//! secondary sees nothing new), and a restart with changed content a greater one.

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

/// One zone's entry in the book.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The serial last served.
    pub serial: u32,
    /// Hex SHA-256 of the content it was served for (see [`digest`]).
    pub digest: String,
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

    /// Records what `origin` serves now (`digest` as [`content_id`] spells it).
    pub fn set(&mut self, origin: &str, serial: u32, digest: String) {
        self.zones
            .insert(origin.to_string(), Entry { serial, digest });
    }

    /// Writes the book (atomically: a new file renamed over the old). Errors are logged: the
    /// serials served stay right; only a restart may then change a serial needlessly.
    pub fn save(&self) {
        let Some(path) = &self.path else { return };
        let file = File {
            zones: self.zones.clone(),
        };
        let tmp = path.with_extension("json.tmp");
        let result = serde_json::to_vec_pretty(&file)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&tmp, bytes))
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = result {
            warn!(file = %path.display(), error = %e, "cannot save the serial book");
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
