//! Read views of a zone: a node and its RRsets, borrowed from the zone's arenas, and what a
//! lookup finds.

use crate::rdata::{RData, RType};

/// All records of one type at one name (RFC 2181 §5), in wire form.
#[derive(Debug, Clone, Copy)]
pub struct RRset<'z> {
    /// The records' type.
    pub rtype: RType,
    /// One TTL for the whole set (the lowest given, RFC 2181 §5.2).
    pub ttl: u32,
    pub(super) count: u16,
    pub(super) records: &'z [u8],
}

impl<'z> RRset<'z> {
    /// Number of records.
    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    /// Whether the set is empty (never, for a stored set).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Each record's RDATA in uncompressed wire form.
    pub fn rdatas(&self) -> impl Iterator<Item = &'z [u8]> + use<'z> {
        let mut rest = self.records;
        std::iter::from_fn(move || {
            let len = usize::from(u16::from_be_bytes([*rest.first()?, *rest.get(1)?]));
            let (rd, tail) = rest[2..].split_at(len);
            rest = tail;
            Some(rd)
        })
    }

    /// The first record's RDATA.
    pub fn first(&self) -> Option<&'z [u8]> {
        self.rdatas().next()
    }

    /// The records decoded (for display, rendering and tests; the answer path uses the wire
    /// form).
    pub fn decoded(&self) -> Vec<RData> {
        self.rdatas()
            .filter_map(|rd| RData::from_wire(self.rtype, rd))
            .collect()
    }
}

/// Everything at one owner name. No RRsets means an empty non-terminal.
///
/// A node may merge the zone's own data with what a key published there (see
/// [`super::ZoneView`]): the zone's RRsets win their types, and a CNAME in the zone hides the
/// published ones.
#[derive(Debug, Clone, Copy)]
pub struct Node<'z> {
    pub(super) name: &'z [u8],
    pub(super) data: &'z [u8],
    pub(super) extra: &'z [u8],
}

impl<'z> Node<'z> {
    /// A node of published data only.
    pub(super) fn published(name: &'z [u8], data: &'z [u8]) -> Node<'z> {
        Node {
            name,
            data,
            extra: &[],
        }
    }

    /// This node with published data beside the zone's own.
    pub(super) fn with_extra(self, extra: &'z [u8]) -> Node<'z> {
        Node { extra, ..self }
    }

    /// The owner name, lower-cased wire format.
    pub fn name(&self) -> &'z [u8] {
        self.name
    }

    /// The RRset of `rtype`, if there is one.
    pub fn get(&self, rtype: RType) -> Option<RRset<'z>> {
        // Most nodes hold nothing published: their own sets, without the merge.
        if self.extra.is_empty() {
            return sets(self.data).find(|s| s.rtype == rtype);
        }
        self.rrsets().find(|s| s.rtype == rtype)
    }

    /// All RRsets: the zone's own, ordered by type code, then the published types it lacks.
    pub fn rrsets(&self) -> impl Iterator<Item = RRset<'z>> + use<'z> {
        let own = sets(self.data);
        let hidden = self.extra.is_empty() || own.clone().any(|s| s.rtype == RType::CNAME);
        let extra = sets(if hidden { &[] } else { self.extra });
        let data = self.data;
        own.chain(extra.filter(move |e| sets(data).all(|s| s.rtype != e.rtype)))
    }

    /// Whether the node is an empty non-terminal.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty() && self.extra.is_empty()
    }
}

/// The RRsets laid out in `data`.
fn sets<'z>(data: &'z [u8]) -> impl Iterator<Item = RRset<'z>> + Clone + 'z {
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.len() < 8 {
            return None;
        }
        let rtype = RType(u16::from_be_bytes([rest[0], rest[1]]));
        let ttl = u32::from_be_bytes([rest[2], rest[3], rest[4], rest[5]]);
        let count = u16::from_be_bytes([rest[6], rest[7]]);
        let mut end = 8;
        for _ in 0..count {
            end += 2 + usize::from(u16::from_be_bytes([rest[end], rest[end + 1]]));
        }
        let set = RRset {
            rtype,
            ttl,
            count,
            records: &rest[8..end],
        };
        rest = &rest[end..];
        Some(set)
    })
}

/// What a zone holds for a name, as the answer logic needs to know it.
#[derive(Debug)]
pub enum Lookup<'z> {
    /// The name exists with these RRsets.
    Found(Node<'z>),
    /// The name does not exist but a wildcard (RFC 4592) synthesises it from this node.
    Wildcard(Node<'z>),
    /// The name exists only because names below it do (NODATA for every type).
    EmptyNonTerminal,
    /// The name is at or below a zone cut: refer to the child's name servers.
    Delegation {
        /// The owner name of the cut (lower-cased wire format).
        cut: &'z [u8],
        /// The child zone's NS RRset.
        ns: RRset<'z>,
    },
    /// The name is below a DNAME (RFC 6672): the answer is the DNAME and a CNAME synthesised
    /// from it.
    Dname {
        /// The owner name of the DNAME (lower-cased wire format).
        owner: &'z [u8],
        /// The DNAME RRset (one record).
        dname: RRset<'z>,
    },
    /// Neither the name nor anything below it exists.
    NxDomain,
}
