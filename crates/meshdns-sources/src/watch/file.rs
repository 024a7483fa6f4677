//! A records file or zone file on disk (`--records`, `--zone-file`): read again when its
//! identity or content changes, served as empty while absent. (A manifests path is read by
//! [`super::manifests`].)
//!
//! Only a regular file (or a symlink to one) is read, opened without blocking
//! ([`crate::limits::read_file`]): a named pipe in its place is unusable, not a wait.
//!
//! Each new version is parsed and compiled on a thread of its own. The check waits for it
//! up to [`PARSE_BUDGET`] (every parse at the first check) and then goes on to the other
//! sources: a large or slow file delays neither their reloads nor shutdown. Its result is
//! taken by the next check, which the parse asks for when it ends. One parse of a file is in
//! flight at a time; a version written meanwhile is read when it ends.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, TryRecvError};
use std::time::Instant;

use tracing::warn;

use super::source::{
    Compile, Fingerprint, Input, Kept, Loader, PARSE_BUDGET, Rank, content_hash, empty_zones,
    fingerprint, missing, parent_dir, stays_missing,
};
use crate::content::Problem;
use crate::limits::read_file;
use crate::snapshot::Loaded;
use crate::watch::FileSource;

/// One file and how far it has been read.
pub(super) struct RecordsFile {
    file: FileSource,
    /// The identity of the version last read.
    seen: Option<Fingerprint>,
    /// The hash of the bytes last parsed.
    content_hash: Option<u64>,
    /// The parse of the version last read, while it runs past its budget.
    parsing: Option<Parsing>,
}

/// A parse running on its own thread.
struct Parsing {
    result: mpsc::Receiver<Result<Loaded, Problem>>,
    started: Instant,
}

impl RecordsFile {
    pub fn new(file: FileSource) -> RecordsFile {
        RecordsFile {
            file,
            seen: None,
            content_hash: None,
            parsing: None,
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
        let bytes = match read_file(&kept.label, path) {
            Ok(b) => b,
            Err(problem) => {
                self.seen = None;
                kept.fail(problem);
                return false;
            }
        };
        let hash = content_hash(&bytes);
        self.seen = fp;
        if self.content_hash == Some(hash) && kept.last_good.is_some() && !kept.failing {
            return false;
        }
        self.content_hash = Some(hash);
        let compile = kept.compile(&self.file.kind, bytes, loader);
        self.start(compile, kept, loader)
    }

    /// Runs a parse on its own thread and waits for it within the budget; whether the content
    /// to serve changed by then.
    fn start(&mut self, compile: Compile, kept: &mut Kept, loader: &mut Loader) -> bool {
        let started = Instant::now();
        let (tx, rx) = mpsc::sync_channel(1);
        let waker = loader.waker.clone();
        // Set once this check stops waiting: only then does the parse ask for a check when it
        // ends. (Poking after a result already taken made a file that fails to parse be read
        // and parsed again at once, in a loop.)
        let detached = Arc::new(AtomicBool::new(false));
        let gone = detached.clone();
        let spawned = std::thread::Builder::new()
            .name("meshdns-parse".into())
            .spawn(move || {
                super::lower_own_priority();
                let _ = tx.send(compile.run());
                if gone.load(Ordering::SeqCst)
                    && let Some(waker) = waker
                {
                    waker.poke_now();
                }
            });
        if let Err(e) = spawned {
            // Read again at the next check.
            warn!(file = %kept.label, error = %e, "cannot start a parse; will retry");
            self.seen = None;
            self.content_hash = None;
            return false;
        }
        let result = if loader.wait_all {
            rx.recv().ok()
        } else {
            rx.recv_timeout(PARSE_BUDGET).ok().or_else(|| {
                detached.store(true, Ordering::SeqCst);
                // A result sent before the flag was seen would not poke: take it now.
                rx.try_recv().ok()
            })
        };
        match result {
            Some(result) => kept.finish(result, started),
            None => {
                self.parsing = Some(Parsing {
                    result: rx,
                    started,
                });
                false
            }
        }
    }

    /// Takes the result of a parse in flight, if it ended: `None` while it runs.
    fn take_parsed(&mut self, kept: &mut Kept) -> Option<bool> {
        let Some(parsing) = &self.parsing else {
            return Some(false);
        };
        match parsing.result.try_recv() {
            Err(TryRecvError::Empty) => None,
            Ok(result) => {
                let started = parsing.started;
                self.parsing = None;
                Some(kept.finish(result, started))
            }
            Err(TryRecvError::Disconnected) => {
                // The parse ended without a result: read the file again.
                self.parsing = None;
                self.seen = None;
                self.content_hash = None;
                Some(false)
            }
        }
    }
}

impl Input for RecordsFile {
    fn rank(&self) -> Rank {
        Rank::File
    }

    fn check(&mut self, kept: &mut Kept, loader: &mut Loader) -> bool {
        let Some(parsed) = self.take_parsed(kept) else {
            // Still parsing: the file is looked at again once the parse ends.
            return false;
        };
        let path = &self.file.path;
        if missing(path) {
            if kept.counters.absent {
                return parsed;
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
        self.read(kept, loader) | parsed
    }

    fn watch_dir(&self) -> Option<PathBuf> {
        Some(parent_dir(&self.file.path))
    }
}
