//! What a zone's records are gathered into before it is finished: [`ZoneBuilder`] (names in
//! one arena, RDATA in another, one small [`Entry`] per record), and the settings and refusals
//! the builder and the finishing steps share. [`super::build`] fills it; [`super::finish`]
//! turns it into a [`super::compact::Zone`]. Neither of those depends on the other's internals
//! through here, so the three modules form no cycle.

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::name::{Name, label_offsets};
use crate::rdata::RType;

/// Settings the builder needs to fill in what sources leave out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildDefaults {
    /// TTL for synthesised SOA and NS records, and the SOA minimum (negative-caching TTL).
    pub default_ttl: u32,
    /// Serial for synthesised SOA records; the caller makes it grow with every build.
    pub serial: u32,
}

/// Identifies the source a record came from, so conflicts can name the winner.
pub type SourceId = usize;

/// Why the builder would not take a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// The owner is not at or below the zone's origin.
    #[error("{name} is outside zone {origin}")]
    OutsideZone {
        /// The owner name.
        name: Name,
        /// The zone it was given for.
        origin: Name,
    },
    /// A CNAME and other data at the same name.
    #[error("{name} cannot have a CNAME and other records (RFC 1034 §3.6.2)")]
    CnameConflict {
        /// The owner name.
        name: Name,
    },
    /// A second DNAME at one name.
    #[error("{name} can have one DNAME (RFC 6672 §2.4)")]
    TwoDnames {
        /// The owner name.
        name: Name,
    },
    /// A DNAME beside NS below the apex: a delegation cannot also redirect.
    #[error("{name} cannot have a DNAME and NS below the zone apex (RFC 6672 §2.3)")]
    DnameAtCut {
        /// The owner name.
        name: Name,
    },
    /// A record below a DNAME, which redirects every name below its owner.
    #[error(
        "{name} is below the DNAME at {dname}, which redirects every name below it (RFC 6672 §2.3)"
    )]
    BelowDname {
        /// The owner name.
        name: Name,
        /// The DNAME's owner.
        dname: Name,
    },
    /// A CNAME at a zone apex, which must hold SOA and NS.
    #[error("{name} is a zone apex, which cannot be a CNAME")]
    CnameAtApex {
        /// The apex.
        name: Name,
    },
    /// Another source already supplies this (name, type).
    #[error(
        "{name} {rtype} is already provided by another source (#{winner}), which takes precedence"
    )]
    TakenBy {
        /// The owner name.
        name: Name,
        /// The type.
        rtype: RType,
        /// The source whose records are kept.
        winner: SourceId,
    },
    /// More records in one RRset than a DNS message can count (its counts are 16 bits).
    #[error("{name} {rtype} has {count} records; an RRset holds at most 65535")]
    TooManyRecords {
        /// The owner name.
        name: Name,
        /// The type.
        rtype: RType,
        /// How many distinct records were given.
        count: usize,
    },
}

/// SOA fields a source wants when it gives no SOA record; unset fields take the defaults
/// documented on [`CatalogBuilder::build`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SoaTemplate {
    /// SOA record TTL.
    pub ttl: Option<u32>,
    /// Primary name server.
    pub mname: Option<Name>,
    /// Contact mailbox as a name.
    pub rname: Option<Name>,
    /// Serial; by default the build serial, which grows with every reload.
    pub serial: Option<u32>,
    /// Refresh interval.
    pub refresh: Option<u32>,
    /// Retry interval.
    pub retry: Option<u32>,
    /// Expiry.
    pub expire: Option<u32>,
    /// Negative-caching TTL bound.
    pub minimum: Option<u32>,
}

/// One record waiting in a [`ZoneBuilder`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub(super) node: u32,
    pub(super) rtype: RType,
    pub(super) ttl: u32,
    pub(super) rdata_at: u32,
    pub(super) rdata_len: u16,
    pub(super) source: u32,
    pub(super) seq: u32,
}

/// Where a builder node's name lives in the name arena.
#[derive(Debug, Clone, Copy)]
pub(super) struct NameRef {
    pub(super) at: u32,
    pub(super) len: u8,
}

/// Records of one zone, gathered flat: names in one arena (each once; empty non-terminals
/// are suffixes of names already there), RDATA in another, one small [`Entry`] per record.
/// Rules that depend on other records (precedence, CNAME) are applied at build time, after
/// sorting, so adding is one hash lookup and two copies.
#[derive(Debug)]
pub(super) struct ZoneBuilder {
    pub(super) origin: Name,
    pub(super) hasher: DefaultHashBuilder,
    pub(super) index: HashTable<u32>,
    pub(super) names: Vec<NameRef>,
    pub(super) name_arena: Vec<u8>,
    pub(super) rdata_arena: Vec<u8>,
    pub(super) entries: Vec<Entry>,
    pub(super) soa: Option<(SoaTemplate, SourceId)>,
    /// Whether the SOA serial was given by a source (`None`: decided by whether an SOA record
    /// was given).
    pub(super) serial_given: Option<bool>,
}

impl ZoneBuilder {
    pub(super) fn new(origin: &Name) -> ZoneBuilder {
        let mut b = ZoneBuilder {
            serial_given: None,
            origin: origin.clone(),
            hasher: DefaultHashBuilder::default(),
            index: HashTable::new(),
            names: Vec::new(),
            name_arena: Vec::new(),
            rdata_arena: Vec::new(),
            entries: Vec::new(),
            soa: None,
        };
        b.node_id(origin.wire());
        b
    }

    pub(super) fn name_of(&self, id: u32) -> &[u8] {
        let r = self.names[id as usize];
        &self.name_arena[r.at as usize..r.at as usize + usize::from(r.len)]
    }

    pub(super) fn find(&self, name: &[u8]) -> Option<u32> {
        let hash = self.hasher.hash_one(name);
        self.index
            .find(hash, |&id| self.name_of(id) == name)
            .copied()
    }

    /// The node id of `name`, added (name copied into the arena) if new.
    pub(super) fn node_id(&mut self, name: &[u8]) -> u32 {
        if let Some(id) = self.find(name) {
            return id;
        }
        let at = self.name_arena.len() as u32;
        self.name_arena.extend_from_slice(name);
        self.insert(NameRef {
            at,
            len: name.len() as u8,
        })
    }

    pub(super) fn insert(&mut self, r: NameRef) -> u32 {
        let id = self.names.len() as u32;
        self.names.push(r);
        let (names, arena, hasher) = (&self.names, &self.name_arena, &self.hasher);
        let name = &arena[r.at as usize..r.at as usize + usize::from(r.len)];
        let hash = hasher.hash_one(name);
        self.index.insert_unique(hash, id, |&other| {
            let o = names[other as usize];
            hasher.hash_one(&arena[o.at as usize..o.at as usize + usize::from(o.len)])
        });
        id
    }

    /// Adds a node for every name between an owner and the apex that has none (RFC 8020 empty
    /// non-terminals); their names are suffixes of the owner's bytes, so nothing is copied.
    pub(super) fn add_empty_non_terminals(&mut self) {
        let apex_len = self.origin.wire().len();
        let mut wire = [0u8; 256];
        for id in 0..self.names.len() as u32 {
            let owner = self.names[id as usize];
            let len = usize::from(owner.len);
            wire[..len].copy_from_slice(self.name_of(id));
            for o in label_offsets(&wire[..len]).skip(1) {
                if len - o < apex_len || self.find(&wire[o..len]).is_some() {
                    break;
                }
                self.insert(NameRef {
                    at: owner.at + o as u32,
                    len: (len - o) as u8,
                });
            }
        }
    }

    /// Makes room for `records` more records with `rdata_bytes` of RDATA in all.
    pub(super) fn reserve(&mut self, records: usize, rdata_bytes: usize) {
        self.entries.reserve(records);
        self.rdata_arena.reserve(rdata_bytes);
        self.name_arena.reserve(records * 16);
        let (names, arena, hasher) = (&self.names, &self.name_arena, &self.hasher);
        self.index.reserve(records, |&other| {
            let o = names[other as usize];
            hasher.hash_one(&arena[o.at as usize..o.at as usize + usize::from(o.len)])
        });
    }
}

/// A record the builder refused: its owner, type and why.
pub type Refused = (Name, RType, Rejection);
