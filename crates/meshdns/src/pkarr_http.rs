//! The pkarr relay's HTTP adapter: `PUT`/`GET /pkarr/<z32>` onto the store, with the status
//! codes of the relay contract (see `meshdns_server::relay`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::http::StatusCode;
use meshdns_server::relay::{PkarrRelay, Refusal, Stored};
use meshdns_sources::{PkarrStore, PutError};

/// The pkarr relay as the HTTP endpoint sees it.
pub struct PkarrHttp {
    /// Where packets are kept; a publish is served as soon as the store acknowledges it.
    pub store: Arc<PkarrStore>,
}

fn status(e: &PutError) -> StatusCode {
    match e {
        PutError::Key(_) | PutError::Payload(_) | PutError::Future { .. } => {
            StatusCode::BAD_REQUEST
        }
        PutError::Stale => StatusCode::CONFLICT,
        PutError::Changed { .. } => StatusCode::PRECONDITION_FAILED,
        PutError::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        PutError::Busy => StatusCode::SERVICE_UNAVAILABLE,
        PutError::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl PkarrRelay for PkarrHttp {
    fn put<'a>(
        &'a self,
        client: std::net::IpAddr,
        key: &'a str,
        body: &'a [u8],
        if_match: Option<u64>,
    ) -> Pin<Box<dyn Future<Output = Result<(), Refusal>> + Send + 'a>> {
        Box::pin(async move {
            self.store
                .put(Some(client), key, body, if_match)
                .await
                .map_err(|e| (status(&e), e.to_string()))
        })
    }

    fn get(&self, key: &str) -> Result<Option<Stored>, Refusal> {
        let stored = self
            .store
            .get(key)
            .map_err(|e| (status(&e), e.to_string()))?;
        Ok(stored.map(|p| Stored {
            payload: p.payload,
            min_ttl: p.min_ttl,
        }))
    }
}
