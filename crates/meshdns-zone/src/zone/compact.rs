//! The compact [`Zone`]: one arena of owner names, one of RRsets in the layout the answer
//! writer copies, and a hash table of node ids.

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::name::{Name, ancestors, is_wire_subdomain, label_offsets};
use crate::rdata::{RType, Soa};

use super::view::{Lookup, Node, RRset};

#[derive(Debug, Clone, Copy)]
pub(super) struct NodeMeta {
    pub(super) name_at: u32,
    pub(super) data_at: u32,
    pub(super) data_len: u32,
    pub(super) name_len: u8,
}

/// One authoritative zone.
#[derive(Clone)]
pub struct Zone {
    pub(super) origin: Name,
    pub(super) hasher: DefaultHashBuilder,
    pub(super) table: HashTable<u32>,
    pub(super) nodes: Vec<NodeMeta>,
    pub(super) names: Vec<u8>,
    pub(super) data: Vec<u8>,
    pub(super) soa: Soa,
    pub(super) soa_ttl: u32,
    pub(super) has_cuts: bool,
    pub(super) has_wildcards: bool,
    /// Whether a DNAME is served (below one, names are synthesised: RFC 6672).
    pub(super) has_dnames: bool,
    pub(super) record_count: usize,
    pub(super) given_soa: bool,
    pub(super) given_serial: bool,
    pub(super) given_ns: bool,
}

impl std::fmt::Debug for Zone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zone")
            .field("origin", &self.origin)
            .field("records", &self.record_count)
            .finish_non_exhaustive()
    }
}

impl Zone {
    /// The apex name.
    pub fn origin(&self) -> &Name {
        &self.origin
    }

    /// The zone's SOA fields.
    pub fn soa(&self) -> &Soa {
        &self.soa
    }

    /// The apex SOA RRset.
    pub fn soa_rrset(&self) -> RRset<'_> {
        self.apex()
            .get(RType::SOA)
            .expect("every zone has an apex SOA")
    }

    /// TTL of the SOA in negative answers: min(SOA TTL, SOA minimum) (RFC 2308 §3).
    pub fn negative_ttl(&self) -> u32 {
        self.soa_ttl.min(self.soa.minimum)
    }

    /// The SOA serial a source gave (a zone file's SOA record, or a `soa.serial`), if one did:
    /// it is served as given. Otherwise the zone's serial is the catalog's to decide.
    pub fn given_serial(&self) -> Option<u32> {
        self.given_serial.then_some(self.soa.serial)
    }

    /// Every node with data (empty non-terminals left out), the apex first, then in the order
    /// the zone was built.
    pub fn nodes(&self) -> impl Iterator<Item = Node<'_>> + '_ {
        let apex = self.apex();
        std::iter::once(apex).chain(
            (0..self.nodes.len() as u32)
                .map(|id| self.node_at(id))
                .filter(move |n| !n.is_empty() && n.name != apex.name),
        )
    }

    /// Feeds the zone's content to `hasher`, the SOA serial left out: two builds of the same
    /// records in the same order hash the same, whatever serial each was given.
    pub fn hash_content(&self, hasher: &mut impl std::hash::Hasher) {
        let apex = self.apex();
        let serial_at = apex.get(RType::SOA).and_then(|set| {
            let rd = set.first()?;
            let end = rd.as_ptr() as usize + rd.len() - self.data.as_ptr() as usize;
            end.checked_sub(20)
        });
        hasher.write(self.origin.wire());
        hasher.write(&self.names);
        for m in &self.nodes {
            hasher.write(&[m.name_len]);
            hasher.write(&m.name_at.to_le_bytes());
            hasher.write(&m.data_len.to_le_bytes());
        }
        match serial_at {
            Some(at) => {
                hasher.write(&self.data[..at]);
                hasher.write(&self.data[at + 4..]);
            }
            None => hasher.write(&self.data),
        }
    }

    /// Number of records served, SOA and NS included.
    pub fn record_count(&self) -> usize {
        self.record_count
    }

    /// Bytes of record and name data held (for capacity planning and tests).
    pub fn data_bytes(&self) -> usize {
        self.names.len() + self.data.len() + self.nodes.len() * std::mem::size_of::<NodeMeta>()
    }

    pub(super) fn apex(&self) -> Node<'_> {
        self.node(self.origin.wire())
            .expect("the apex node always exists")
    }

    pub(super) fn node_at(&self, id: u32) -> Node<'_> {
        let m = self.nodes[id as usize];
        let name = &self.names[m.name_at as usize..m.name_at as usize + usize::from(m.name_len)];
        let data = &self.data[m.data_at as usize..(m.data_at + m.data_len) as usize];
        Node {
            name,
            data,
            extra: &[],
        }
    }

    /// The node at exactly `name` (lower-cased wire format), ignoring zone cuts.
    pub fn node(&self, name: &[u8]) -> Option<Node<'_>> {
        let hash = self.hasher.hash_one(name);
        let id = self.table.find(hash, |&id| {
            let m = self.nodes[id as usize];
            &self.names[m.name_at as usize..m.name_at as usize + usize::from(m.name_len)] == name
        })?;
        Some(self.node_at(*id))
    }

    /// Looks `name` up. `name` is lower-cased wire format at or below the origin.
    pub fn lookup(&self, name: &[u8]) -> Lookup<'_> {
        debug_assert!(is_wire_subdomain(name, self.origin.wire()));
        self.lookup_with(name, |n| self.node(n))
    }

    /// [`Zone::lookup`], with `node` finding the node at a name (the zone's own, or merged with
    /// what a key published there).
    pub(super) fn lookup_with<'a, 'q>(
        &'a self,
        name: &'q [u8],
        node: impl Fn(&'q [u8]) -> Option<Node<'a>>,
    ) -> Lookup<'a> {
        if self.has_cuts
            && let Some(found) = self.find_cut(name)
        {
            return found;
        }
        if self.has_dnames
            && let Some(found) = self.find_dname(name)
        {
            return found;
        }
        if let Some(node) = node(name) {
            return if node.is_empty() {
                Lookup::EmptyNonTerminal
            } else {
                Lookup::Found(node)
            };
        }
        if self.has_wildcards
            && let Some(node) = self.find_wildcard_from(name, |n| node(n).is_some())
        {
            return Lookup::Wildcard(node);
        }
        Lookup::NxDomain
    }

    /// The highest zone cut strictly below the apex that `name` is at or under.
    pub(super) fn find_cut(&self, name: &[u8]) -> Option<Lookup<'_>> {
        let apex_len = self.origin.wire().len();
        let mut offsets = [0usize; 128];
        let mut n = 0;
        for o in label_offsets(name).filter(|&o| name.len() - o > apex_len) {
            offsets[n] = o;
            n += 1;
        }
        for &o in offsets[..n].iter().rev() {
            if let Some(node) = self.node(&name[o..])
                && let Some(ns) = node.get(RType::NS)
            {
                return Some(Lookup::Delegation { cut: node.name, ns });
            }
        }
        None
    }

    /// The DNAME strictly above `name` (RFC 6672 §2.3; the zone holds nothing below one, so
    /// there is at most one).
    fn find_dname(&self, name: &[u8]) -> Option<Lookup<'_>> {
        let apex_len = self.origin.wire().len();
        ancestors(name)
            .take_while(|n| n.len() >= apex_len)
            .find_map(|n| {
                let node = self.node(n)?;
                let dname = node.get(crate::rdata_other::DNAME)?;
                Some(Lookup::Dname {
                    owner: node.name,
                    dname,
                })
            })
    }

    /// The wildcard node at `*.<closest encloser>` (RFC 4592 §3.3.1), if any, with `exists`
    /// telling which names exist (the closest encloser may be a name only published data
    /// gives).
    pub(super) fn find_wildcard_from<'q>(
        &self,
        name: &'q [u8],
        exists: impl Fn(&'q [u8]) -> bool,
    ) -> Option<Node<'_>> {
        let encloser = ancestors(name).find(|n| exists(n))?;
        let mut wild = [0u8; 256];
        wild[0] = 1;
        wild[1] = b'*';
        let len = 2 + encloser.len();
        if len > 255 {
            return None;
        }
        wild[2..len].copy_from_slice(encloser);
        self.node(&wild[..len]).filter(|n| !n.is_empty())
    }
}

/// Canonical DNS name order (RFC 4034 §6.1): compare label by label from the right.
pub fn canonical_cmp(a: &Name, b: &Name) -> std::cmp::Ordering {
    let labels = |n: &Name| -> Vec<Vec<u8>> {
        let w = n.wire();
        let mut v: Vec<Vec<u8>> = label_offsets(w)
            .filter(|&o| w[o] != 0)
            .map(|o| w[o + 1..o + 1 + w[o] as usize].to_vec())
            .collect();
        v.reverse();
        v
    };
    labels(a).cmp(&labels(b))
}
