//! The pkarr relay's HTTP adapter: `PUT`/`GET /pkarr/<z32>` onto the store, with the status
//! codes iroh-dns-server gives.

use std::sync::Arc;

use axum::http::StatusCode;
use meshdns_server::http::PkarrRelay;
use meshdns_sources::{PkarrStore, Poker, PutError};

/// The pkarr relay as the HTTP endpoint sees it: the store, plus a nudge to the watcher so a
/// publish is served at once.
pub struct PkarrHttp {
    /// Where packets are kept.
    pub store: Arc<PkarrStore>,
    /// Wakes the watcher.
    pub poker: Poker,
}

impl PkarrRelay for PkarrHttp {
    fn put(
        &self,
        client: std::net::IpAddr,
        key: &str,
        body: &[u8],
    ) -> Result<(), (StatusCode, String)> {
        match self.store.put(Some(client), key, body) {
            Ok(()) => {
                self.poker.poke();
                Ok(())
            }
            Err(e) => {
                let status = match e {
                    PutError::Key(_) | PutError::Payload(_) => StatusCode::BAD_REQUEST,
                    PutError::Stale => StatusCode::CONFLICT,
                    PutError::RateLimited => StatusCode::TOO_MANY_REQUESTS,
                    PutError::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
                };
                Err((status, e.to_string()))
            }
        }
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, (StatusCode, String)> {
        self.store
            .get(key)
            .map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))
    }
}
