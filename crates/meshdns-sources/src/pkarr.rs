//! The pkarr relay's store: the newest signed packet of every key, persisted in the data
//! directory, expired by age, and compiled into zones under each `--pkarr` origin.
//!
//! Storage is one file per key, `<data-dir>/pkarr/<z32>.pkarr`, holding the relay payload.
//! It is written to a temporary file and renamed over the old one, so a crash leaves either
//! the old packet or the new one, never half of either. Files are verified again when loaded;
//! one that fails is skipped with a warning. No database is needed.
//!
//! Freshness follows the pkarr relay specification: a packet whose timestamp is not newer
//! than the stored one is refused ([`PutError::Stale`], HTTP 409) and changes nothing.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use meshdns_iroh::pkarr::{PacketError, SignedPacket};
use meshdns_iroh::{EndpointId, parse_endpoint_id};
use meshdns_zone::{BuildDefaults, Name};
use tracing::{info, warn};

use crate::content::ZoneContent;
use crate::snapshot::{CompiledSource, compile};

/// How the relay behaves.
#[derive(Debug, Clone)]
pub struct PkarrConfig {
    /// Origins published records are served under (`_iroh.<z32>.<origin>`).
    pub origins: Vec<Name>,
    /// Where packets are kept across restarts; `None` keeps them in memory only.
    pub data_dir: Option<PathBuf>,
    /// Packets older than this (by their own timestamp) are dropped.
    pub max_age: Duration,
    /// Publishes a minute allowed per client address (bursts of as many); 0 means no limit.
    pub put_per_minute: u32,
}

/// Why a publish was refused; each maps to an HTTP status at the relay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PutError {
    /// The key in the path is not an endpoint id (400).
    #[error("invalid key: {0}")]
    Key(String),
    /// The body is not a valid signed packet for that key (400).
    #[error("invalid body payload: {0}")]
    Payload(PacketError),
    /// Not newer than the stored packet (409).
    #[error("a packet with the same or a newer timestamp is already stored")]
    Stale,
    /// The client is over its publish rate (429).
    #[error("too many publishes from this address; try again later")]
    RateLimited,
    /// The packet could not be persisted (500).
    #[error("cannot store the packet: {0}")]
    Io(String),
}

impl PutError {
    /// A short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            PutError::Key(_) => "key",
            PutError::Payload(PacketError::Signature) => "signature",
            PutError::Payload(PacketError::Outside(_)) => "outside_key",
            PutError::Payload(PacketError::TooLong(_) | PacketError::TooShort(_)) => "size",
            PutError::Payload(PacketError::Dns(_)) => "dns",
            PutError::Stale => "stale",
            PutError::RateLimited => "rate_limited",
            PutError::Io(_) => "io",
        }
    }
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct PkarrCounters {
    /// Publishes stored.
    pub accepted: AtomicU64,
    /// Publishes refused, by reason label.
    pub rejected: Mutex<BTreeMap<&'static str, u64>>,
    /// Packets dropped for age.
    pub expired: AtomicU64,
}

/// The relay's packets.
#[derive(Debug)]
pub struct PkarrStore {
    config: PkarrConfig,
    buckets: Mutex<std::collections::HashMap<IpAddr, (f64, Instant)>>,
    packets: Mutex<BTreeMap<[u8; 32], SignedPacket>>,
    version: AtomicU64,
    /// Publish counters.
    pub counters: PkarrCounters,
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

impl PkarrStore {
    /// Opens the store, loading (and re-verifying) the packets kept in the data directory.
    pub fn open(config: PkarrConfig) -> std::io::Result<PkarrStore> {
        let mut packets = BTreeMap::new();
        if let Some(dir) = &config.data_dir {
            std::fs::create_dir_all(dir)?;
            for entry in std::fs::read_dir(dir)? {
                let path = entry?.path();
                let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
                    continue;
                };
                if path.extension().and_then(|e| e.to_str()) != Some("pkarr") {
                    continue;
                }
                let loaded = parse_endpoint_id(stem)
                    .map_err(|e| e.to_string())
                    .and_then(|id| {
                        let body = std::fs::read(&path).map_err(|e| e.to_string())?;
                        SignedPacket::from_relay_payload(&id, &body).map_err(|e| e.to_string())
                    });
                match loaded {
                    Ok(p) => {
                        packets.insert(*p.key.as_bytes(), p);
                    }
                    Err(e) => {
                        warn!(file = %path.display(), error = %e, "stored pkarr packet skipped")
                    }
                }
            }
            info!(dir = %dir.display(), packets = packets.len(), "pkarr store loaded");
        }
        let store = PkarrStore {
            config,
            buckets: Mutex::default(),
            packets: Mutex::new(packets),
            version: AtomicU64::new(1),
            counters: PkarrCounters::default(),
        };
        store.expire_older_than(now_us());
        Ok(store)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<[u8; 32], SignedPacket>> {
        self.packets.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn path_of(&self, id: &EndpointId) -> Option<PathBuf> {
        self.config
            .data_dir
            .as_ref()
            .map(|d| d.join(format!("{}.pkarr", id.to_z32())))
    }

    /// Stores a publish for the key in the URL path (`z32`, or 64 hex) from `client` (rate
    /// limited per address when configured).
    pub fn put(&self, client: Option<IpAddr>, key: &str, body: &[u8]) -> Result<(), PutError> {
        let result = match client {
            Some(ip) if !self.allow(ip, Instant::now()) => Err(PutError::RateLimited),
            _ => self.try_put(key, body),
        };
        match &result {
            Ok(()) => {
                self.counters.accepted.fetch_add(1, Relaxed);
            }
            Err(e) => {
                let mut r = self
                    .counters
                    .rejected
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                *r.entry(e.metric_label()).or_default() += 1;
            }
        }
        result
    }

    /// Token bucket per client address: `put_per_minute` tokens, refilled at that rate.
    fn allow(&self, ip: IpAddr, now: Instant) -> bool {
        let rate = self.config.put_per_minute;
        if rate == 0 {
            return true;
        }
        let capacity = f64::from(rate);
        let refill = |tokens: f64, at: Instant| {
            (tokens + now.duration_since(at).as_secs_f64() * capacity / 60.0).min(capacity)
        };
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() > 100_000 {
            // Forget addresses whose bucket has refilled: they are back to the default anyway.
            buckets.retain(|_, (tokens, at)| refill(*tokens, *at) < capacity);
        }
        let (tokens, at) = buckets.entry(ip).or_insert((capacity, now));
        *tokens = refill(*tokens, *at);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }

    fn try_put(&self, key: &str, body: &[u8]) -> Result<(), PutError> {
        let id = parse_endpoint_id(key).map_err(|e| PutError::Key(e.to_string()))?;
        let packet = SignedPacket::from_relay_payload(&id, body).map_err(PutError::Payload)?;
        let mut packets = self.lock();
        if packets
            .get(id.as_bytes())
            .is_some_and(|old| old.timestamp_us >= packet.timestamp_us)
        {
            return Err(PutError::Stale);
        }
        if let Some(path) = self.path_of(&id) {
            let tmp = path.with_extension("pkarr.tmp");
            std::fs::write(&tmp, packet.payload())
                .and_then(|()| std::fs::rename(&tmp, &path))
                .map_err(|e| PutError::Io(e.to_string()))?;
        }
        packets.insert(*id.as_bytes(), packet);
        self.version.fetch_add(1, Relaxed);
        Ok(())
    }

    /// The stored relay payload of a key, if any.
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, PutError> {
        let id = parse_endpoint_id(key).map_err(|e| PutError::Key(e.to_string()))?;
        Ok(self.lock().get(id.as_bytes()).map(|p| p.payload().to_vec()))
    }

    /// Drops packets whose timestamp is older than the configured age; returns how many.
    pub fn expire(&self) -> usize {
        self.expire_older_than(now_us())
    }

    fn expire_older_than(&self, now_us: u64) -> usize {
        let limit = now_us.saturating_sub(self.config.max_age.as_micros() as u64);
        let mut packets = self.lock();
        let old: Vec<[u8; 32]> = packets
            .iter()
            .filter(|(_, p)| p.timestamp_us < limit)
            .map(|(k, _)| *k)
            .collect();
        for key in &old {
            if let Some(p) = packets.remove(key)
                && let Some(path) = self.path_of(&p.key)
            {
                let _ = std::fs::remove_file(path);
            }
        }
        if !old.is_empty() {
            self.counters.expired.fetch_add(old.len() as u64, Relaxed);
            self.version.fetch_add(1, Relaxed);
            info!(expired = old.len(), "pkarr packets expired");
        }
        old.len()
    }

    /// Changes whenever the set of packets changes.
    pub fn version(&self) -> u64 {
        self.version.load(Relaxed)
    }

    /// Number of packets stored.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no packet is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every packet's records as zones, one per origin.
    pub fn compile(&self, defaults: BuildDefaults) -> CompiledSource {
        let packets = self.lock();
        let zones: Vec<ZoneContent> = self
            .config
            .origins
            .iter()
            .map(|origin| {
                let records = packets
                    .values()
                    .flat_map(|p| p.records(origin).unwrap_or_default())
                    .collect();
                ZoneContent {
                    origin: origin.clone(),
                    soa: None,
                    records,
                }
            })
            .collect();
        drop(packets);
        compile("pkarr", zones, defaults).0
    }
}

#[cfg(test)]
mod tests {
    use iroh_base::SecretKey;

    use super::*;

    fn payload(secret: &SecretKey, text: &str) -> Vec<u8> {
        iroh_dns::pkarr::SignedPacket::from_txt_strings(secret, "_iroh", [text], 30)
            .unwrap()
            .to_relay_payload()
    }

    fn config(dir: Option<PathBuf>, max_age: Duration) -> PkarrConfig {
        PkarrConfig {
            origins: vec!["dns.example.org.".parse().unwrap()],
            data_dir: dir,
            max_age,
            put_per_minute: 0,
        }
    }

    #[test]
    fn stores_the_newest_packet_persists_it_and_compiles_it_into_zones() {
        let dir = tempfile::tempdir().unwrap();
        let secret = SecretKey::generate();
        let key = secret.public().to_z32();
        let store =
            PkarrStore::open(config(Some(dir.path().into()), Duration::from_secs(3600))).unwrap();
        let first = payload(&secret, "addr=192.0.2.1:1");
        store.put(None, &key, &first).unwrap();
        assert_eq!(
            store.put(None, &key, &first),
            Err(PutError::Stale),
            "the same packet again is not newer"
        );
        let second = payload(&secret, "addr=192.0.2.2:2");
        store.put(None, &key, &second).unwrap();
        assert_eq!(
            store.put(None, &key, &first),
            Err(PutError::Stale),
            "an older packet changes nothing"
        );
        assert_eq!(store.get(&key).unwrap().as_deref(), Some(second.as_slice()));
        assert!(matches!(
            store.put(None, "nope", &second),
            Err(PutError::Key(_))
        ));
        let other = SecretKey::generate().public().to_z32();
        assert!(matches!(
            store.put(None, &other, &second),
            Err(PutError::Payload(PacketError::Signature))
        ));
        assert_eq!(store.counters.accepted.load(Relaxed), 2);

        // A new store over the same directory has the packet back.
        let reopened =
            PkarrStore::open(config(Some(dir.path().into()), Duration::from_secs(3600))).unwrap();
        assert_eq!(
            reopened.get(&key).unwrap().as_deref(),
            Some(second.as_slice())
        );
        let compiled = reopened.compile(BuildDefaults {
            default_ttl: 5,
            serial: 1,
        });
        let zone = &compiled.zones[0];
        let name: Name = format!("_iroh.{key}.dns.example.org.").parse().unwrap();
        let txt = zone
            .node(name.wire())
            .unwrap()
            .get(meshdns_zone::RType::TXT)
            .unwrap();
        assert_eq!(txt.decoded()[0].to_string(), "\"addr=192.0.2.2:2\"");

        // Expired by age: dropped from memory and disk.
        let expiring = PkarrStore::open(config(Some(dir.path().into()), Duration::ZERO)).unwrap();
        assert!(expiring.is_empty());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn publishes_are_rate_limited_per_address_when_configured() {
        let mut c = config(None, Duration::from_secs(3600));
        c.put_per_minute = 2;
        let store = PkarrStore::open(c).unwrap();
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let t0 = Instant::now();
        assert!(store.allow(a, t0) && store.allow(a, t0), "a burst of two");
        assert!(!store.allow(a, t0), "the third waits");
        assert!(store.allow(b, t0), "other addresses are not affected");
        assert!(
            !store.allow(a, t0 + Duration::from_secs(10)),
            "one token takes 30 s to come back"
        );
        assert!(store.allow(a, t0 + Duration::from_secs(31)));
        let secret = SecretKey::generate();
        let key = secret.public().to_z32();
        let blocked = store.put(Some(a), &key, &payload(&secret, "addr=192.0.2.1:1"));
        assert_eq!(blocked, Err(PutError::RateLimited));
        assert_eq!(
            store.counters.rejected.lock().unwrap().get("rate_limited"),
            Some(&1)
        );
    }
}
