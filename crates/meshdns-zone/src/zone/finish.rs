//! Finishing a zone: the rules that need every record of the zone at hand, then the compact
//! layout. [`finish_zone`] runs the steps in order:
//!
//! 1. [`ensure_apex`]: empty non-terminals get nodes; the apex gets an SOA and NS when no
//!    source gave one (synthesised from the zone's SOA template and defaults).
//! 2. One stable sort of the entries by (node, type, order added).
//! 3. [`lay_out`]: per node, the CNAME rule; per RRset, precedence between sources,
//!    duplicates, the RRset size limit and one TTL; written in the layout the answer writer
//!    copies.

use crate::name::{Name, ancestors};
use crate::rdata::{RData, RType, Soa};
use crate::rdata_other::DNAME;

use super::compact::{NodeMeta, Zone};
use super::gather::{BuildDefaults, Entry, Refused, Rejection, ZoneBuilder};

/// Builds the compact zone from what was gathered; records refused on the way are appended to
/// `refused`.
pub(super) fn finish_zone(
    mut z: ZoneBuilder,
    defaults: BuildDefaults,
    refused: &mut Vec<Refused>,
) -> Zone {
    z.add_empty_non_terminals();
    let mut entries = std::mem::take(&mut z.entries);
    let apex = ensure_apex(&mut z, &mut entries, defaults);
    // One order: by node, then type, then the order added (which decides precedence). A zone
    // file lists each owner's records together, so the entries are mostly in order already
    // (runs broken only where, say, an SOA precedes an NS): the stable sort finds those runs
    // and merges them in close to linear time, where a quicksort would redo millions.
    entries.sort_by_key(|e| (e.node, e.rtype, e.seq));
    let layout = lay_out(&z, &entries, apex.id, refused);
    let has_wildcards = (0..z.names.len() as u32).any(|id| z.name_of(id).starts_with(b"\x01*"));
    let Some((soa_ttl, Some(RData::Soa(soa)))) = layout.soa else {
        unreachable!("the apex SOA was ensured above")
    };
    let mut names = z.name_arena;
    names.shrink_to_fit();
    Zone {
        origin: z.origin,
        hasher: z.hasher,
        table: z.index,
        nodes: layout.nodes,
        names,
        data: layout.data,
        soa: *soa,
        soa_ttl,
        has_cuts: layout.has_cuts,
        has_wildcards,
        has_dnames: layout.has_dnames,
        record_count: layout.record_count,
        given_soa: apex.given_soa,
        given_serial: apex.given_serial,
        given_ns: apex.given_ns,
    }
}

/// What the sources gave at the apex.
struct Apex {
    id: u32,
    given_soa: bool,
    given_serial: bool,
    given_ns: bool,
}

/// Adds a synthesised SOA (when no source gave an SOA record) and NS (when no source gave
/// one) to the apex. Call before sorting: the first NS added names the SOA's primary.
fn ensure_apex(z: &mut ZoneBuilder, entries: &mut Vec<Entry>, defaults: BuildDefaults) -> Apex {
    let id = z
        .find(z.origin.wire())
        .expect("the apex node exists from the start");
    let at_apex = |rtype: RType| move |e: &&Entry| e.node == id && e.rtype == rtype;
    let given_ns = entries.iter().any(|e| at_apex(RType::NS)(&e));
    let given_soa_record = entries.iter().any(|e| at_apex(RType::SOA)(&e));
    let first_ns = entries.iter().find(at_apex(RType::NS)).and_then(|e| {
        Name::from_wire(&z.rdata_arena[e.rdata_at as usize..][..usize::from(e.rdata_len)])
    });
    let (synth_ns, (soa_ttl, soa)) = synthesised_apex(z, given_ns, first_ns, defaults);
    let mut push = |rtype: RType, ttl: u32, rdata: &[u8]| {
        entries.push(Entry {
            node: id,
            rtype,
            ttl,
            rdata_at: z.rdata_arena.len() as u32,
            rdata_len: rdata.len() as u16,
            source: u32::MAX,
            seq: u32::MAX,
        });
        z.rdata_arena.extend_from_slice(rdata);
    };
    if !given_soa_record {
        push(RType::SOA, soa_ttl, &soa);
    }
    if let Some(ns) = synth_ns {
        push(RType::NS, defaults.default_ttl, &ns);
    }
    Apex {
        id,
        given_soa: given_soa_record || z.soa.is_some(),
        given_serial: z.serial_given.unwrap_or(given_soa_record),
        given_ns,
    }
}

/// The synthesised apex records in wire form: the NS (when none was given) and the SOA with
/// its TTL.
fn synthesised_apex(
    z: &ZoneBuilder,
    has_ns: bool,
    first_ns: Option<Name>,
    defaults: BuildDefaults,
) -> (Option<Vec<u8>>, (u32, Vec<u8>)) {
    let origin = &z.origin;
    let ns_name = origin.prepend(b"ns").unwrap_or_else(|_| origin.clone());
    let ns = (!has_ns).then(|| ns_name.wire().to_vec());
    let t = z.soa.as_ref().map(|(t, _)| t.clone()).unwrap_or_default();
    let soa = Soa {
        mname: t.mname.or(first_ns).unwrap_or(ns_name),
        rname: t.rname.unwrap_or_else(|| {
            origin
                .prepend(b"hostmaster")
                .unwrap_or_else(|_| origin.clone())
        }),
        serial: t.serial.unwrap_or(defaults.serial),
        refresh: t.refresh.unwrap_or(3600),
        retry: t.retry.unwrap_or(600),
        expire: t.expire.unwrap_or(604_800),
        minimum: t.minimum.unwrap_or(defaults.default_ttl),
    };
    let mut wire = Vec::new();
    RData::Soa(Box::new(soa)).to_wire(&mut wire);
    (ns, (t.ttl.unwrap_or(defaults.default_ttl), wire))
}

/// The zone's data in the answer writer's layout, and what was learnt writing it.
struct Layout {
    nodes: Vec<NodeMeta>,
    data: Vec<u8>,
    record_count: usize,
    has_cuts: bool,
    has_dnames: bool,
    /// The apex SOA's TTL and data.
    soa: Option<(u32, Option<RData>)>,
}

/// Writes every node's RRsets from sorted entries, applying the rules per node and per RRset.
fn lay_out(z: &ZoneBuilder, entries: &[Entry], apex_id: u32, refused: &mut Vec<Refused>) -> Layout {
    let mut out = Layout {
        nodes: z
            .names
            .iter()
            .map(|r| NodeMeta {
                name_at: r.at,
                data_at: 0,
                data_len: 0,
                name_len: r.len,
            })
            .collect(),
        data: Vec::with_capacity(z.rdata_arena.len() + entries.len() * 3),
        record_count: 0,
        has_cuts: false,
        has_dnames: false,
        soa: None,
    };
    let rdata = |e: &Entry| &z.rdata_arena[e.rdata_at as usize..][..usize::from(e.rdata_len)];
    let name_of = |id: u32| Name::from_wire(z.name_of(id)).unwrap_or_else(Name::root);
    let dnames = dname_owners(z, entries, apex_id);
    out.has_dnames = !dnames.is_empty();
    for group in entries.chunk_by(|a, b| a.node == b.node) {
        let node = group[0].node;
        if let Some(dname) = below_dname(&dnames, z.name_of(node)) {
            for set in group.chunk_by(|a, b| a.rtype == b.rtype) {
                let why = Rejection::BelowDname {
                    name: name_of(node),
                    dname: Name::from_wire(dname).unwrap_or_else(Name::root),
                };
                refused.push((name_of(node), set[0].rtype, why));
            }
            continue;
        }
        // CNAME beside other data: whichever came first stays (RFC 1034 §3.6.2).
        let cname_only = cname_first(group);
        let data_at = out.data.len() as u32;
        for set in group.chunk_by(|a, b| a.rtype == b.rtype) {
            let rtype = set[0].rtype;
            if (rtype == RType::CNAME) != cname_only {
                let why = Rejection::CnameConflict {
                    name: name_of(node),
                };
                refused.push((name_of(node), rtype, why));
                continue;
            }
            if rtype == DNAME && !dnames.contains(z.name_of(node)) {
                // Beside NS below the apex (a CNAME first was refused above).
                let why = Rejection::DnameAtCut {
                    name: name_of(node),
                };
                refused.push((name_of(node), rtype, why));
                continue;
            }
            let Some((ttl, kept)) = rrset(set, &rdata, &|| name_of(node), node == apex_id, refused)
            else {
                continue;
            };
            out.data.extend_from_slice(&rtype.0.to_be_bytes());
            out.data.extend_from_slice(&ttl.to_be_bytes());
            out.data
                .extend_from_slice(&(kept.len() as u16).to_be_bytes());
            for e in &kept {
                out.data.extend_from_slice(&e.rdata_len.to_be_bytes());
                out.data.extend_from_slice(rdata(e));
            }
            out.record_count += kept.len();
            out.has_cuts |= rtype == RType::NS && node != apex_id;
            if rtype == RType::SOA && node == apex_id {
                out.soa = Some((ttl, RData::from_wire(RType::SOA, rdata(kept[0]))));
            }
        }
        out.nodes[node as usize].data_at = data_at;
        out.nodes[node as usize].data_len = out.data.len() as u32 - data_at;
    }
    out.data.shrink_to_fit();
    out
}

/// The owners of the DNAMEs a zone serves: not beside NS below the apex (RFC 6672 §2.3), and
/// not where a CNAME came first (RFC 1034 §3.6.2); `entries` sorted by node.
fn dname_owners<'z>(
    z: &'z ZoneBuilder,
    entries: &[Entry],
    apex_id: u32,
) -> hashbrown::HashSet<&'z [u8]> {
    if !entries.iter().any(|e| e.rtype == DNAME) {
        return hashbrown::HashSet::new();
    }
    entries
        .chunk_by(|a, b| a.node == b.node)
        .filter(|group| {
            let has = |t: RType| group.iter().any(|e| e.rtype == t);
            has(DNAME) && !cname_first(group) && (group[0].node == apex_id || !has(RType::NS))
        })
        .map(|group| z.name_of(group[0].node))
        .collect()
}

/// Whether a node's first entry given (of a non-empty group) is a CNAME: then the CNAME
/// stays and the node's other data is refused (RFC 1034 §3.6.2).
fn cname_first(group: &[Entry]) -> bool {
    group.iter().min_by_key(|e| e.seq).map(|e| e.rtype) == Some(RType::CNAME)
}

/// The DNAME owner strictly above `name`, if any (the highest: its redirection wins).
fn below_dname<'z>(dnames: &hashbrown::HashSet<&'z [u8]>, name: &[u8]) -> Option<&'z [u8]> {
    if dnames.is_empty() {
        return None;
    }
    ancestors(name)
        .filter_map(|n| dnames.get(n).copied())
        .last()
}

/// One RRset's records and TTL: the first source to give (name, type) keeps it, one CNAME
/// and one DNAME per name, duplicates once, at most 65535 records, and one TTL, the lowest given (RFC 2181
/// §5.2). `None` when nothing of it is served.
fn rrset<'e, 'a>(
    set: &'e [Entry],
    rdata: &impl Fn(&Entry) -> &'a [u8],
    owner: &dyn Fn() -> Name,
    at_apex: bool,
    refused: &mut Vec<Refused>,
) -> Option<(u32, Vec<&'e Entry>)> {
    let rtype = set[0].rtype;
    let winner = set[0].source;
    let mut kept: Vec<&Entry> = Vec::with_capacity(set.len());
    // Duplicates are found by a scan in small sets, by a hash set in large ones.
    let mut seen: Option<hashbrown::HashSet<&[u8]>> =
        (set.len() > SMALL_SET).then(hashbrown::HashSet::new);
    for e in set {
        if e.source != winner {
            let why = Rejection::TakenBy {
                name: owner(),
                rtype,
                winner: winner as usize,
            };
            if !refused.iter().any(|(_, t, w)| *t == rtype && *w == why) {
                refused.push((owner(), rtype, why));
            }
        } else if (rtype == RType::CNAME || rtype == DNAME)
            && !kept.is_empty()
            && rdata(e) != rdata(kept[0])
        {
            // One CNAME and one DNAME per name: the first stays.
            let why = if rtype == DNAME {
                Rejection::TwoDnames { name: owner() }
            } else {
                Rejection::CnameConflict { name: owner() }
            };
            refused.push((owner(), rtype, why));
        } else if is_new(&mut seen, &kept, rdata(e), rdata) {
            kept.push(e);
        }
    }
    if kept.len() > usize::from(u16::MAX) {
        let why = Rejection::TooManyRecords {
            name: owner(),
            rtype,
            count: kept.len(),
        };
        refused.push((owner(), rtype, why));
        if !(rtype == RType::SOA && at_apex) {
            return None;
        }
        // The apex must keep an SOA: the first one given stays.
        kept.truncate(1);
    }
    let ttl = set
        .iter()
        .filter(|e| e.source == winner)
        .map(|e| e.ttl)
        .min()
        .unwrap_or(0);
    Some((ttl, kept))
}

/// RRsets up to this size find duplicates by scanning what they kept.
const SMALL_SET: usize = 16;

/// Whether `data` is not among the RDATA kept so far (recording it in `seen` when given).
fn is_new<'a>(
    seen: &mut Option<hashbrown::HashSet<&'a [u8]>>,
    kept: &[&Entry],
    data: &'a [u8],
    rdata: &impl Fn(&Entry) -> &'a [u8],
) -> bool {
    match seen {
        Some(seen) => seen.insert(data),
        None => !kept.iter().any(|k| rdata(k) == data),
    }
}
