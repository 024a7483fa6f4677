//! Where meshdns records come from.
//!
//! Today: records files in three formats (Tailscale `records.json`, meshdns YAML/JSON, RFC 1035
//! zone files), watched and reloaded ([`watch`]). Parsing ([`records`], [`zonefile`]) and
//! snapshot assembly ([`snapshot`]) are pure; only [`watch`] touches the filesystem.

pub mod manifests;
pub mod pkarr;
pub mod read;
pub mod records;
pub mod snapshot;
pub mod watch;
pub mod zonefile;

pub use pkarr::{PkarrConfig, PkarrStore, PutError};
pub use read::{read_manifests, read_source};
pub use records::{FileKind, ParseSettings, Parsed, Problem, ZoneContent, parse};
pub use snapshot::{
    CompiledSource, Loaded, SourceInput, assemble, compile, load, load_objects, load_parsed,
};
pub use watch::{
    FileSource, FileSources, Poker, SourceConfig, SourceCounters, SourceStatus, WatchHandle,
    spawn_watcher,
};
