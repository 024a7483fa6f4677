//! `meshdns serve --configmap NAMESPACE/NAME[:KEY]`: one key of one ConfigMap (a Tailscale
//! `records.json`, or meshdns records) read through the API instead of a mounted volume, so a
//! change is served within a second rather than after the kubelet's sync (a minute or more).
//!
//! A watcher on that one ConfigMap (a field selector on its name) lists it, then watches; it
//! re-lists after an expired resource version (410 Gone) and retries outages with backoff,
//! while the watcher thread keeps the last good records serving. Each new content is handed to
//! a [`BytesFeed`] and the watcher nudged; a deleted ConfigMap, or one without the key, hands
//! over "absent", which serves as an empty file (as Tailscale's nameserver reads a missing
//! `records.json`).

use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use meshdns_objects::core::ConfigMap;
use meshdns_sources::BytesFeed;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

/// Which ConfigMap key to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMapKey {
    /// Namespace.
    pub namespace: String,
    /// ConfigMap name.
    pub name: String,
    /// Key in `data` (or `binaryData`).
    pub key: String,
}

impl std::fmt::Display for ConfigMapKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "configmap {}/{}:{}", self.namespace, self.name, self.key)
    }
}

/// The key's bytes, if the ConfigMap has it.
fn content(cm: &ConfigMap, key: &str) -> Option<Vec<u8>> {
    cm.data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|s| s.as_bytes().to_vec())
        .or_else(|| {
            cm.binary_data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|b| b.0.clone())
        })
}

/// Watches `which` and hands its content to `feed` until `shutdown`, calling `nudge` after
/// each hand-over (and after the watch fails or recovers).
pub async fn watch(
    client: Client,
    which: ConfigMapKey,
    feed: Arc<BytesFeed>,
    nudge: impl Fn() + Send + Sync + 'static,
    shutdown: CancellationToken,
) {
    let api = Api::<ConfigMap>::namespaced(client, &which.namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", which.name));
    let mut events = watcher(api, config).default_backoff().boxed();
    // During a (re-)list: what the list has shown so far.
    let mut listing: Option<Option<Vec<u8>>> = None;
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => return,
            e = events.next() => e,
        };
        let event = match next {
            None => return,
            Some(Err(e)) => {
                // The backoff retries; the last good records keep serving.
                if feed.error().is_none() {
                    feed.set_error(Some(e.to_string()));
                    nudge();
                }
                continue;
            }
            Some(Ok(event)) => event,
        };
        if feed.error().is_some() {
            feed.set_error(None);
            nudge();
        }
        let handed = match event {
            watcher::Event::Init => {
                listing = Some(None);
                None
            }
            watcher::Event::InitApply(cm) => {
                listing = Some(content(&cm, &which.key));
                None
            }
            watcher::Event::InitDone => Some(listing.take().flatten()),
            watcher::Event::Apply(cm) => Some(content(&cm, &which.key)),
            watcher::Event::Delete(_) => Some(None),
        };
        if let Some(now) = handed {
            match &now {
                Some(bytes) => debug!(source = %which, bytes = bytes.len(), "read"),
                None => info!(source = %which, "absent (no such ConfigMap or key)"),
            }
            feed.set(now);
            nudge();
        }
    }
}
