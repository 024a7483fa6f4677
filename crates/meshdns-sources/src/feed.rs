//! Bytes handed over by a live reader: a ConfigMap key watched through the Kubernetes API
//! (`serve --configmap`), read by the watcher thread as a file's bytes would be.

use std::sync::{Arc, Mutex};

/// The latest content of one watched object, with the reader's state.
#[derive(Debug)]
pub struct BytesFeed {
    label: String,
    state: Mutex<FeedState>,
}

#[derive(Debug, Default)]
struct FeedState {
    /// Moves with every [`BytesFeed::set`]; 0 until the first.
    version: u64,
    /// The bytes (`None`: the object or its key does not exist).
    content: Option<Vec<u8>>,
    /// Why the reader cannot read now (it retries), if so.
    error: Option<String>,
}

impl BytesFeed {
    /// A feed named `label` in logs, metrics and problems; not synced until the first
    /// [`BytesFeed::set`].
    pub fn new(label: &str) -> Arc<BytesFeed> {
        Arc::new(BytesFeed {
            label: label.to_string(),
            state: Mutex::new(FeedState::default()),
        })
    }

    /// The feed's name.
    pub fn label(&self) -> &str {
        &self.label
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FeedState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands over the current content (`None`: absent). The same content again is no change.
    pub fn set(&self, content: Option<Vec<u8>>) {
        let mut st = self.lock();
        if st.version == 0 || st.content != content {
            st.version += 1;
            st.content = content;
        }
    }

    /// Records why the reader cannot read now (`None` once it can again).
    pub fn set_error(&self, error: Option<String>) {
        self.lock().error = error;
    }

    /// Why the reader cannot read now, if so.
    pub fn error(&self) -> Option<String> {
        self.lock().error.clone()
    }

    /// The version and content when the version differs from `seen` (0 until the first set).
    pub fn take_if_newer(&self, seen: u64) -> Option<(u64, Option<Vec<u8>>)> {
        let st = self.lock();
        (st.version != 0 && st.version != seen).then(|| (st.version, st.content.clone()))
    }
}
