//! The zone core of meshdns: names, records, zones, the catalog, and the one pure
//! [`answer`] function every transport and test calls.
//!
//! This crate does no I/O and reads no clock: a snapshot ([`Catalog`]) is built by
//! [`CatalogBuilder`] from records that sources hand over, and answering is a function of the
//! snapshot and the query bytes. Servers swap whole snapshots; nothing here is ever mutated
//! while it is being read.

pub mod answer;
pub mod cidr;
pub mod name;
pub mod rdata;
pub mod rdata_other;
pub mod records;
pub mod svcb;
pub mod text;
pub mod wire;
pub mod zone;

pub use answer::{
    AnswerConfig, Outcome, Transport, answer, answer_oversized, answer_servfail, rcode,
};
pub use cidr::Cidr;
pub use name::{Name, NameError};
pub use rdata::{RData, RDataError, RType, Soa};
pub use records::{Record, RecordRef, Records};
pub use zone::{
    BuildDefaults, Catalog, CatalogBuilder, Found, Key, Lookup, Node, Overlay, OverlayReader,
    Published, RRset, Rejection, SoaTemplate, SourceId, Touch, Zone, ZoneView, key_of_label,
    label_of_key,
};
