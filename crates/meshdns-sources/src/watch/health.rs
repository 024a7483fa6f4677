//! What the watcher tells the rest of the server: each source's counters (for `/metrics`) and
//! whether the server is ready (for `/readyz`).

use std::sync::Mutex;

/// Counters of one source, as `/metrics` shows them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourceCounters {
    /// Successful loads.
    pub reloads_ok: u64,
    /// Failed loads (file unusable).
    pub reloads_error: u64,
    /// Entries skipped, over all loads.
    pub skipped_entries: u64,
    /// Unix time of the last successful load.
    pub last_success_unix: Option<f64>,
    /// The last error, while the file is failing.
    pub last_error: Option<String>,
    /// Whether the file is absent now (served as empty).
    pub absent: bool,
    /// Why a live reader (a ConfigMap watch) cannot read its source now, while it retries.
    pub watch_error: Option<String>,
    /// The cluster's objects read by `--kube-source` and served now, by kind.
    pub objects: std::collections::BTreeMap<&'static str, ObjectCounts>,
}

/// The objects of one kind a live source reads, as the snapshot serving them decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObjectCounts {
    /// Objects read.
    pub read: u64,
    /// Things at fault in them, by reason ([`crate::cluster::Reason`]).
    pub problems: std::collections::BTreeMap<&'static str, u64>,
}

/// Health of the file sources, shared with the HTTP endpoint.
#[derive(Debug, Default)]
pub struct SourceStatus {
    inner: Mutex<StatusInner>,
}

#[derive(Debug, Default)]
pub(super) struct StatusInner {
    pub sources: Vec<(String, SourceCounters)>,
    pub not_ready: Option<String>,
}

impl SourceStatus {
    /// `Ok` once every file has loaded at least once; otherwise why not.
    pub fn readiness(&self) -> Result<(), String> {
        match &self.lock().not_ready {
            None => Ok(()),
            Some(reason) => Err(reason.clone()),
        }
    }

    /// Per-source counters, labelled by path.
    pub fn counters(&self) -> Vec<(String, SourceCounters)> {
        self.lock().sources.clone()
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, StatusInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}
