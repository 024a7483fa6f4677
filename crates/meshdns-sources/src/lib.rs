//! Where meshdns records come from: records files in three formats (Tailscale `records.json`,
//! meshdns YAML/JSON, RFC 1035 zone files), Kubernetes manifests (files, directories, or a
//! live feed from a cluster) and the pkarr relay's store.
//!
//! Parsing ([`records`], [`zonefile`], [`manifests`]) and compiling and assembling snapshots
//! ([`snapshot`]) are pure. [`read`] is the one reader of files and directories, shared by
//! `serve`, `check` and `render`; [`watch`] is the one loop that watches them and publishes
//! snapshots; [`pkarr`] keeps published packets.

pub mod alias;
pub mod catalog;
pub mod challenges;
pub mod cluster;
pub mod content;
pub mod feed;
pub mod limits;
pub mod manifests;
pub mod native;
pub mod pkarr;
pub mod read;
pub mod records;
pub mod reverse;
pub mod secondary;
pub mod snapshot;
pub mod status;
pub mod tailscale;
pub mod update;
pub mod watch;
pub mod zonefile;

pub use content::{FileKind, ParseSettings, Parsed, Problem, ZoneContent};
pub use feed::BytesFeed;
pub use pkarr::dht::{DhtConfig, DhtCounters, LookupError, PkarrDht};

/// The upper bounds (seconds) of the DHT lookup latency histogram.
pub fn pkarr_dht_buckets() -> &'static [f64] {
    &pkarr::dht::LATENCY_BUCKETS
}
pub use pkarr::{ChangePage, Checked, Epoch, PkarrConfig, PkarrStore, PutError, StoredPacket};
pub use read::{load_source, read_manifests};
pub use records::parse;
pub use snapshot::{
    CompiledSource, Generated, Loaded, SourceInput, assemble, compile, load, load_parsed,
};
pub use watch::{
    FileSource, FileSources, Poker, SourceConfig, SourceCounters, SourceStatus, WatchHandle,
    spawn_watcher,
};
