//! Zones and the catalog: immutable snapshots built aside and then served.
//!
//! A [`Zone`] is stored compactly, close to the wire: every owner name (lower-cased wire
//! format) sits in one byte arena, every RRset in another, in the layout the answer writer
//! copies from, and a hash table of node ids (seeded foldhash, so query names cannot be chosen
//! to collide) finds a name. Every name between an owner and the apex also gets a node, empty
//! when nothing is there, so one hash lookup tells an empty non-terminal (NODATA, RFC 8020)
//! from a name that does not exist (NXDOMAIN). A 100k-host zone takes a few tens of bytes per
//! record instead of a heap object per name and per record.
//!
//! The [`Catalog`] picks the zone with the longest origin that is a suffix of the query name
//! (RFC 1034 §4.3.2 step 2). Zones are shared between snapshots by `Arc`, so a reload that
//! changes one zone leaves the others untouched.
//!
//! Snapshots are built by [`CatalogBuilder`], which is where every rule about what may be served
//! lives: names outside their zone, CNAME beside other data (RFC 1034 §3.6.2, RFC 2181 §10.1),
//! one source per (name, type), and the SOA/NS every apex must have.
//!
//! Node data layout: RRsets ordered by type, each `type u16 | ttl u32 | count u16`, then
//! `count` × `rdlength u16 | rdata` with names uncompressed.

mod build;
mod catalog;
mod compact;
mod finish;
mod gather;
mod overlay;
mod view;

#[cfg(test)]
mod tests;

pub use build::CatalogBuilder;
pub use catalog::{Catalog, Found};
pub use compact::{Zone, canonical_cmp};
pub use gather::{BuildDefaults, Refused, Rejection, SoaTemplate, SourceId};
pub use overlay::{
    Key, Overlay, OverlayReader, Published, Touch, ZoneView, key_of_label, label_of_key,
};
pub use view::{Lookup, Node, RRset};
