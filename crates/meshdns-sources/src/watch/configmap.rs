//! A ConfigMap key read through the API (`serve --configmap`): each new version is loaded as
//! a file's bytes would be; a missing ConfigMap or key is an absent file.

use std::sync::Arc;

use tracing::{info, warn};

use super::source::{Input, Kept, Loader, Rank, empty_zones};
use crate::content::FileKind;
use crate::feed::BytesFeed;

/// The feed, how to read its bytes, and the version last taken.
pub(super) struct ConfigMapKey {
    feed: Arc<BytesFeed>,
    kind: FileKind,
    version: u64,
}

impl ConfigMapKey {
    pub fn new(feed: Arc<BytesFeed>, kind: FileKind) -> ConfigMapKey {
        ConfigMapKey {
            feed,
            kind,
            version: 0,
        }
    }
}

impl Input for ConfigMapKey {
    fn rank(&self) -> Rank {
        Rank::Bytes
    }

    /// A new version is loaded as a file's would be; a missing ConfigMap or key is an absent
    /// file (the API says so at once: no debounce).
    fn check(&mut self, kept: &mut Kept, loader: &mut Loader) -> bool {
        let watch_error = self.feed.error();
        if watch_error != kept.counters.watch_error {
            match &watch_error {
                Some(e) => {
                    warn!(source = %kept.label, error = %e, "cannot watch; serving the last good records")
                }
                None => info!(source = %kept.label, "watching again"),
            }
            kept.counters.watch_error = watch_error;
        }
        let Some((now, content)) = self.feed.take_if_newer(self.version) else {
            return false;
        };
        self.version = now;
        match content {
            None if kept.counters.absent => false,
            None => {
                let never_read = empty_zones(&self.kind, &loader.settings.tailscale_zones);
                kept.set_absent(never_read, loader)
            }
            Some(bytes) => {
                if kept.counters.absent {
                    kept.counters.absent = false;
                    info!(file = %kept.label, "records present again");
                }
                kept.load_bytes(&self.kind, bytes, loader)
            }
        }
    }
}
