//! A manifests directory (`--manifests DIR`, or a directory given as a records file): its
//! DNSZones and DNSRecordSets, read file by file.
//!
//! Each file keeps its own last good objects. A file that cannot be used (not YAML or JSON, not
//! UTF-8, unreadable) is reported by its own name and the line within it, and keeps its last
//! good objects serving while the other files' changes are served; a file that was never good
//! contributes nothing. The objects of every file are then read together
//! ([`crate::manifests::read`]: a DNSRecordSet may name a DNSZone of another file).
//!
//! Counters and readiness, for the directory as one source:
//! - a load (`reloads_ok`) happens whenever the objects served change (a file added, changed,
//!   removed, or fixed); each new problem of a broken file is an error (`reloads_error`), and
//!   the broken files' problems are the source's `last_error` while they last;
//! - readiness follows the rule for a records file, applied to each file alone: a file broken
//!   since it appeared holds readiness back, naming it, until it is fixed or removed; a file
//!   that breaks after it was good does not (its last good objects keep serving).
//!
//! A manifests path that is a single file is read the same way, as a directory of one file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tracing::error;

use super::source::{
    Fingerprint, Input, Kept, Loader, Rank, content_hash, fingerprint, missing, parent_dir,
    stays_missing,
};
use crate::content::Problem;
use crate::limits::read_file;
use crate::manifests;
use crate::manifests::Manifest;
use crate::read::{manifest_files, manifest_objects};

/// The directory (or single manifests file) and what each of its files last gave.
pub(super) struct ManifestDir {
    path: PathBuf,
    /// Every file read, by path (so in name order).
    files: BTreeMap<PathBuf, ManifestFile>,
}

/// One file of the directory.
#[derive(Default)]
struct ManifestFile {
    /// The identity of the version last read.
    seen: Option<Fingerprint>,
    /// The hash of the bytes last parsed.
    hash: Option<u64>,
    /// Its last good objects (`None`: never good).
    objects: Option<Vec<Manifest>>,
    /// Why its current version cannot be used.
    broken: Option<Problem>,
}

impl ManifestDir {
    pub fn new(path: PathBuf) -> ManifestDir {
        ManifestDir {
            path,
            files: BTreeMap::new(),
        }
    }

    /// The files to read now: the directory's manifest files, or the path itself.
    fn listing(&self) -> std::io::Result<Vec<PathBuf>> {
        if self.path.is_dir() {
            manifest_files(&self.path)
        } else {
            Ok(vec![self.path.clone()])
        }
    }

    /// Reads the files that changed (and those failing); whether any file's good objects
    /// changed.
    fn read(&mut self, listing: Vec<PathBuf>) -> bool {
        let before = self.files.len();
        self.files.retain(|path, _| listing.contains(path));
        let mut changed = self.files.len() != before;
        for path in listing {
            let file = self.files.entry(path.clone()).or_default();
            changed |= file.read(&path);
        }
        changed
    }

    /// The broken files' problems, in name order.
    fn broken(&self) -> impl Iterator<Item = &Problem> {
        self.files.values().filter_map(|f| f.broken.as_ref())
    }

    /// Compiles every file's last good objects together.
    fn load(&self, kept: &mut Kept, loader: &mut Loader) {
        let started = Instant::now();
        let objects: Vec<Manifest> = self
            .files
            .values()
            .filter_map(|f| f.objects.as_deref())
            .flatten()
            .cloned()
            .collect();
        let (parsed, _) = manifests::read(&kept.label, &objects, &loader.settings.cluster);
        drop(objects);
        kept.load_parsed_file(parsed, loader, started);
    }

    /// Counts and logs the broken files' new problems (`was`: those already reported); their
    /// problems are the source's last error while they last.
    fn report_broken(&self, kept: &mut Kept, was: &[String]) {
        let mut now = Vec::new();
        for file in self.files.values() {
            let Some(problem) = &file.broken else {
                continue;
            };
            let text = problem.to_string();
            if !was.contains(&text) {
                let keeping = if file.objects.is_some() {
                    "keeping the last good records"
                } else {
                    "no records from it yet"
                };
                error!(file = %problem.file, entry = %problem.entry, reason = %problem.reason,
                    directory = %kept.label, "records file unusable; {keeping}");
                kept.counters.reloads_error += 1;
            }
            now.push(text);
        }
        kept.failing = !now.is_empty();
        kept.counters.last_error = (!now.is_empty()).then(|| now.join("; "));
    }
}

impl ManifestFile {
    /// Reads the file if its identity changed (or while it is broken); whether its good
    /// objects changed.
    fn read(&mut self, path: &Path) -> bool {
        let fp = fingerprint(path);
        if fp.is_some() && fp == self.seen && self.broken.is_none() {
            return false;
        }
        let label = path.display().to_string();
        let bytes = match read_file(&label, path) {
            Ok(b) => b,
            Err(problem) => {
                self.seen = None;
                self.broken = Some(problem);
                return false;
            }
        };
        self.seen = fp;
        let hash = content_hash(&bytes);
        if self.hash == Some(hash) && self.objects.is_some() && self.broken.is_none() {
            return false;
        }
        self.hash = Some(hash);
        match manifest_objects(&label, &bytes) {
            Ok(objects) => {
                self.broken = None;
                self.objects = Some(objects);
                true
            }
            Err(problem) => {
                self.broken = Some(problem);
                false
            }
        }
    }
}

impl Input for ManifestDir {
    fn rank(&self) -> Rank {
        Rank::File
    }

    fn check(&mut self, kept: &mut Kept, loader: &mut Loader) -> bool {
        if missing(&self.path) {
            if kept.counters.absent {
                return false;
            }
            if stays_missing(&self.path, kept.last_good.is_some(), loader.debounce) {
                self.files.clear();
                return kept.set_absent(Vec::new(), loader);
            }
        }
        kept.set_present();
        let listing = match self.listing() {
            Ok(listing) => listing,
            Err(e) => {
                kept.fail(Problem::new(
                    &kept.label,
                    "file",
                    format!("cannot read: {e}"),
                ));
                return false;
            }
        };
        let was: Vec<String> = self.broken().map(ToString::to_string).collect();
        // The directory itself could not be read at the last check.
        let recovering = kept.failing && was.is_empty();
        let changed = self.read(listing);
        // Loaded when a file's good objects changed, and at the first check unless every file
        // is broken (an empty directory loads, empty).
        let first = kept.last_good.is_none() && self.broken().next().is_none();
        if changed || first || recovering {
            self.load(kept, loader);
        }
        self.report_broken(kept, &was);
        changed || first || recovering
    }

    fn watch_dir(&self) -> Option<PathBuf> {
        Some(if self.path.is_dir() {
            self.path.clone()
        } else {
            parent_dir(&self.path)
        })
    }

    /// Not ready while nothing loaded, or while a file broken since it appeared has given no
    /// objects (each such file named).
    fn not_loaded(&self, kept: &Kept) -> Option<String> {
        if kept.last_good.is_none() {
            return Some(kept.unloaded_reason());
        }
        let never_good: Vec<String> = self
            .files
            .values()
            .filter(|f| f.objects.is_none())
            .filter_map(|f| f.broken.as_ref().map(ToString::to_string))
            .collect();
        (!never_good.is_empty()).then(|| never_good.join("; "))
    }
}
