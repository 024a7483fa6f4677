//! The pkarr relay's HTTP adapter: `PUT`/`GET /pkarr/<z32>` onto the store, with the status
//! codes of the relay contract (see `meshdns_server::relay`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode};
use meshdns_server::relay::{PkarrRelay, Refusal, Stored};
use meshdns_server::replicate::{Applied, Have, Origin, Page, PeerStore, Replicator, Storing};
use meshdns_sources::{LookupError, PkarrDht, PkarrStore, PutError};

/// The pkarr relay as the HTTP endpoint sees it.
pub struct PkarrHttp {
    /// Where packets are kept; a publish is served as soon as the store acknowledges it.
    pub store: Arc<PkarrStore>,
    /// The other replicas, when there are: each acknowledged publish is sent to them.
    pub replicator: Option<Arc<Replicator>>,
    /// The Mainline DHT, when joined: each publish is put there, and `GET` of a key not
    /// stored here looks it up there.
    pub dht: Option<Arc<PkarrDht>>,
    /// The server's NSID as the `Meshdns-Nsid` header of every response (`--nsid`).
    pub nsid: Option<HeaderValue>,
}

/// The store as replication reads and writes it.
pub struct PkarrPeers {
    /// The store.
    pub store: Arc<PkarrStore>,
}

fn applied(r: &Result<(), PutError>) -> Applied {
    match r {
        Ok(()) => Applied::Stored,
        Err(PutError::Same | PutError::Stale) => Applied::Have,
        Err(PutError::Key(_) | PutError::Payload(_)) => Applied::Invalid,
        Err(PutError::Future { .. }) => Applied::Future,
        Err(PutError::RateLimited) => Applied::RateLimited,
        Err(PutError::Changed { .. } | PutError::Busy | PutError::Io(_)) => Applied::Failed,
    }
}

impl PeerStore for PkarrPeers {
    fn epoch(&self) -> [u8; 16] {
        self.store.epoch()
    }

    fn put_replicated(
        &self,
        client: Option<std::net::IpAddr>,
        items: Vec<([u8; 32], Vec<u8>, Option<Origin>)>,
    ) -> Pin<Box<dyn Future<Output = Vec<Applied>> + Send + '_>> {
        Box::pin(async move {
            let results = self.store.put_replicated(client, items, None).await;
            results.iter().map(applied).collect()
        })
    }

    #[expect(
        clippy::async_yields_async,
        reason = "the checking is awaited now, the storing it gives later"
    )]
    fn check_page(
        &self,
        items: Vec<([u8; 32], Vec<u8>, Option<Origin>)>,
        cursor: ([u8; 16], u64),
    ) -> Pin<Box<dyn Future<Output = Storing<'_>> + Send + '_>> {
        Box::pin(async move {
            let checked = self.store.check_replicated(None, items).await;
            let storing: Storing<'_> = Box::pin(async move {
                let results = self.store.store_checked(checked, Some(cursor)).await;
                results.iter().map(applied).collect()
            });
            storing
        })
    }

    fn put_pushed(
        &self,
        items: Vec<([u8; 32], Vec<u8>, Option<Origin>)>,
    ) -> Pin<Box<dyn Future<Output = Vec<Applied>> + Send + '_>> {
        Box::pin(async move {
            let results = self.store.put_pushed(items).await;
            results.iter().map(applied).collect()
        })
    }

    fn durable_head(&self) -> Option<u64> {
        self.store.durable_head()
    }

    fn flush(&self) -> Pin<Box<dyn Future<Output = Result<bool, String>> + Send + '_>> {
        Box::pin(async move { self.store.flush().await.map_err(|e| e.to_string()) })
    }

    fn waiting(&self) -> bool {
        self.store.waiting()
    }

    fn changes_after(
        &self,
        after: u64,
        max_bytes: usize,
        have: &Have,
        held: &dyn Fn(u64) -> bool,
    ) -> std::io::Result<Page> {
        let page = self.store.changes_after(after, max_bytes, have, held)?;
        Ok(Page {
            epoch: page.epoch,
            head: page.head,
            entries: page.entries,
            next: page.next,
        })
    }

    fn cursor(&self, epoch: &[u8; 16]) -> std::io::Result<u64> {
        self.store.cursor(epoch)
    }

    fn have(&self) -> std::io::Result<Have> {
        self.store.have()
    }

    fn head(&self) -> u64 {
        self.store
            .counters
            .head
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

fn status(e: &PutError) -> StatusCode {
    match e {
        PutError::Key(_) | PutError::Payload(_) | PutError::Future { .. } => {
            StatusCode::BAD_REQUEST
        }
        PutError::Stale | PutError::Same => StatusCode::CONFLICT,
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
            let seq = self
                .store
                .put(Some(client), key, body, if_match)
                .await
                .map_err(|e| (status(&e), e.to_string()))?;
            // The store checked the signature, so the key is a point: its bytes are decoded
            // again, not its point (decompressing it costs as much as a tenth of the publish).
            let Ok(id) = meshdns_iroh::endpoint_id_bytes(key) else {
                return Ok(());
            };
            // Durable here: to the DHT (never waited for), and on to the other replicas
            // (waited for only with --pkarr-ack-replicas).
            if let Some(dht) = &self.dht {
                dht.put(id, body);
            }
            match &self.replicator {
                Some(r) => r.publish(id, seq, body).await,
                None => Ok(()),
            }
        })
    }

    fn get<'a>(
        &'a self,
        client: std::net::IpAddr,
        key: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<Option<Stored>, Refusal>> + Send + 'a>> {
        Box::pin(async move {
            let stored = self
                .store
                .get(key)
                .map_err(|e| (status(&e), e.to_string()))?;
            if let Some(p) = stored {
                return Ok(Some(Stored {
                    payload: p.payload,
                    min_ttl: p.min_ttl,
                }));
            }
            let (Some(dht), Ok(id)) = (&self.dht, meshdns_iroh::parse_endpoint_id(key)) else {
                return Ok(None);
            };
            match dht.packet(*id.as_bytes(), Some(client)).await {
                Ok(found) => Ok(found.map(|payload| {
                    let min_ttl = meshdns_iroh::pkarr::SignedPacket::from_stored(&id, &payload)
                        .ok()
                        .and_then(|p| p.min_ttl());
                    Stored {
                        payload: payload.to_vec(),
                        min_ttl,
                    }
                })),
                Err(e) => Err((
                    StatusCode::SERVICE_UNAVAILABLE,
                    match e {
                        LookupError::Refused => {
                            "not stored here, and the Mainline DHT lookup was refused: too many in flight, or this client started too many a second (--pkarr-dht-lookups, --pkarr-dht-client-lookups); try again"
                        }
                        LookupError::Timeout => {
                            "not stored here, and no Mainline DHT node answered within --pkarr-dht-timeout; try again"
                        }
                        LookupError::Failed => {
                            "not stored here, and the Mainline DHT nodes answered only with errors; try again"
                        }
                    }
                    .to_string(),
                )),
            }
        })
    }

    fn nsid(&self) -> Option<HeaderValue> {
        self.nsid.clone()
    }
}

/// The DHT as the DNS listeners see it: where a key missing from the cache is looked up.
pub struct DhtLookups(pub Arc<PkarrDht>);

impl meshdns_server::lookups::Lookups for DhtLookups {
    fn hit(&self, key: &[u8; 32]) {
        self.0.hit(key);
    }

    fn lookup(
        &self,
        key: [u8; 32],
        client: Option<std::net::IpAddr>,
    ) -> Pin<Box<dyn Future<Output = bool> + Send>> {
        let dht = self.0.clone();
        Box::pin(async move { dht.lookup(key, client).await.is_ok() })
    }
}
