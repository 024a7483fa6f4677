//! A records file or zone file on disk (`--records`, `--zone-file`): read again when its
//! identity or content changes, served as empty while absent. (A manifests path is read by
//! [`super::manifests`].)

use std::path::PathBuf;

use super::source::{
    Fingerprint, Input, Kept, Loader, Rank, content_hash, empty_zones, fingerprint, missing,
    parent_dir, stays_missing,
};
use crate::content::Problem;
use crate::watch::FileSource;

/// One file and how far it has been read.
pub(super) struct RecordsFile {
    file: FileSource,
    /// The identity of the version last read.
    seen: Option<Fingerprint>,
    /// The hash of the bytes last parsed.
    content_hash: Option<u64>,
}

impl RecordsFile {
    pub fn new(file: FileSource) -> RecordsFile {
        RecordsFile {
            file,
            seen: None,
            content_hash: None,
        }
    }

    /// Reads the file when its identity changed (or while it fails), and loads it when its
    /// bytes did.
    fn read(&mut self, kept: &mut Kept, loader: &mut Loader) -> bool {
        let path = &self.file.path;
        let fp = fingerprint(path);
        if fp.is_some() && fp == self.seen && !kept.failing {
            return false;
        }
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                self.seen = None;
                kept.fail(Problem::new(
                    &kept.label,
                    "file",
                    format!("cannot read: {e}"),
                ));
                return false;
            }
        };
        let hash = content_hash(&bytes);
        self.seen = fp;
        if self.content_hash == Some(hash) && kept.last_good.is_some() && !kept.failing {
            return false;
        }
        self.content_hash = Some(hash);
        kept.load_bytes(&self.file.kind, bytes, loader)
    }
}

impl Input for RecordsFile {
    fn rank(&self) -> Rank {
        Rank::File
    }

    fn check(&mut self, kept: &mut Kept, loader: &mut Loader) -> bool {
        let path = &self.file.path;
        if missing(path) {
            if kept.counters.absent {
                return false;
            }
            // Absent is empty (as Tailscale's nameserver reads a missing records.json).
            if stays_missing(path, kept.last_good.is_some(), loader.debounce) {
                self.seen = None;
                self.content_hash = None;
                let never_read = empty_zones(&self.file.kind, &loader.settings.tailscale_zones);
                return kept.set_absent(never_read, loader);
            }
        }
        kept.set_present();
        self.read(kept, loader)
    }

    fn watch_dir(&self) -> Option<PathBuf> {
        Some(parent_dir(&self.file.path))
    }
}
