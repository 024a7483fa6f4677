//! The one answer function: query bytes in, response bytes out, no I/O.
//!
//! Every transport (UDP, TCP, DoH) and every test calls [`answer`]. It implements the
//! authoritative algorithm of RFC 1034 §4.3.2 with:
//! - NXDOMAIN only when the name and everything below it are absent; NODATA (NOERROR, empty
//!   answer) for a name without the asked type and for empty non-terminals (RFC 8020); both with
//!   the zone's SOA in authority at TTL min(SOA TTL, SOA minimum) (RFC 2308 §3, §5);
//! - CNAME chains followed inside the zone, RCODE from the last name (RFC 6604);
//! - wildcards (RFC 4592) and referrals at zone cuts (AA clear, glue in additional);
//! - EDNS(0): OPT echoed with our payload size, BADVERS for versions above 0 (RFC 6891 §6.1.3);
//! - NSID (RFC 5001): the configured server identifier in the OPT of the reply to a query whose
//!   OPT carries the (empty) NSID option, never otherwise (§2.1); it counts towards the UDP
//!   size limit like the rest of OPT, and a reply cut to its question leaves it out when the
//!   two would not fit;
//! - UDP answers larger than the client's limit truncated to the question with TC
//!   (RFC 1035 §4.2.1, RFC 6891 §7);
//! - QTYPE ANY answered with one RRset (RFC 8482 §4.1; NODATA for an empty non-terminal);
//!   AXFR/IXFR REFUSED (the server answers them itself where transfers are allowed); classes
//!   other than IN (or ANY) REFUSED;
//! - the SOA written (negative answers, SOA queries) carries the serial the catalog serves for
//!   the zone, which may be newer than the zone's own (a pkarr batch);
//! - FORMERR for malformed queries, NOTIMP for opcodes other than QUERY, nothing for responses
//!   (QR=1) or packets without a header.

use std::cell::OnceCell;

use crate::name::is_wire_subdomain;
use crate::rdata::{RType, wire_name_len};
use crate::svcb;
use crate::wire::{self, HEADER_LEN, Malformed, Owner, Section, Writer, parse_query};
use crate::zone::{Catalog, Lookup, Node, RRset, Touch, ZoneView};

/// Response codes (RFC 1035 §4.1.1, RFC 6891 §9).
pub mod rcode {
    /// No error.
    pub const NOERROR: u16 = 0;
    /// Format error.
    pub const FORMERR: u16 = 1;
    /// Server failure.
    pub const SERVFAIL: u16 = 2;
    /// Name does not exist.
    pub const NXDOMAIN: u16 = 3;
    /// Not implemented.
    pub const NOTIMP: u16 = 4;
    /// Refused.
    pub const REFUSED: u16 = 5;
    /// A name exists that should not: here, a DNAME's substitution too long (RFC 6672 §2.2).
    pub const YXDOMAIN: u16 = 6;
    /// Bad EDNS version (extended RCODE).
    pub const BADVERS: u16 = 16;
}

/// How the query arrived; decides the size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Datagram: at most 512 bytes, or the EDNS payload both sides accept.
    Udp,
    /// Stream (TCP, DoH): up to 65,535 bytes.
    Stream,
}

/// Server-wide answer settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerConfig {
    /// The UDP payload size we advertise and accept (RFC 6891 §6.2.5; 1232 avoids fragmentation
    /// on common paths, per DNS Flag Day 2020).
    pub edns_payload: u16,
    /// This server's identifier (RFC 5001), sent to queries that ask for it; `None`: never.
    /// At most 255 bytes (longer is cut); `serve` leaks the configured text once at start, so
    /// the settings stay `Copy`.
    pub nsid: Option<&'static [u8]>,
}

impl Default for AnswerConfig {
    fn default() -> Self {
        AnswerConfig {
            edns_payload: 1232,
            nsid: None,
        }
    }
}

/// What happened to a query, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Whether a response was written (false: drop the packet silently).
    pub reply: bool,
    /// Response code, extended (BADVERS = 16).
    pub rcode: u16,
    /// The question type, when the question could be read.
    pub qtype: Option<RType>,
    /// Whether the answer was truncated (TC set).
    pub truncated: bool,
    /// Whether the query carried the EDNS Padding option (RFC 7830): a stream transport that
    /// pads (DoT, RFC 8467) may pad the response.
    pub padding: bool,
    /// The key of a pkarr origin's cache (keys found in the Mainline DHT) this answer used or
    /// lacked: with a [`Touch::Miss`] the server looks the key up and answers again.
    pub touched: Option<Touch>,
}

impl Outcome {
    /// Nothing was written: the packet is dropped.
    fn dropped() -> Outcome {
        Outcome {
            reply: false,
            rcode: rcode::FORMERR,
            qtype: None,
            truncated: false,
            padding: false,
            touched: None,
        }
    }
}

const MAX_CNAME_HOPS: usize = 16;
/// DNAMEs followed in one answer (each synthesises a name: [`Synthesised`]).
const MAX_DNAME_HOPS: usize = 4;

/// The names an answer's DNAMEs synthesise (RFC 6672 §3.1), each set once. Boxed: the empty
/// slots cost a query 64 bytes of its frame (a slot of 255 bytes each, zeroed for every query,
/// was 77 instructions of `memset` per query); only a DNAME's answer allocates.
type Synthesised = [OnceCell<Box<[u8]>>; MAX_DNAME_HOPS];
const FLAG_QR: u16 = 0x8000;
const FLAG_AA: u16 = 0x0400;
const FLAG_TC: u16 = 0x0200;
const FLAG_RD: u16 = 0x0100;
const FLAG_CD: u16 = 0x0010;
const CLASS_IN: u16 = 1;
const CLASS_ANY: u16 = 255;

/// Answers one query packet, writing the response into `out` (cleared first; its capacity is
/// reused, so a caller that keeps `out` allocates nothing per query).
pub fn answer(
    catalog: &Catalog,
    packet: &[u8],
    transport: Transport,
    config: &AnswerConfig,
    out: &mut Vec<u8>,
) -> Outcome {
    let query = match parse_query(packet) {
        Ok(q) => q,
        Err(Malformed::Drop) => {
            out.clear();
            return Outcome::dropped();
        }
        Err(Malformed::Reply {
            rcode,
            question_end,
        }) => return malformed_reply(packet, rcode, question_end, out),
    };
    let qname_lower = query.qname_lower.as_bytes();
    let question = &packet[HEADER_LEN..HEADER_LEN + query.qname.len() + 4];
    // Room for the names DNAMEs synthesise, which the answer refers to as it writes.
    let synthesised: Synthesised = [const { OnceCell::new() }; MAX_DNAME_HOPS];
    let mut table = wire::table();
    let mut w = Writer::new(out, &mut table, Some((question, qname_lower)));
    let mut flags =
        FLAG_QR | if query.rd { FLAG_RD } else { 0 } | if query.cd { FLAG_CD } else { 0 };
    let edns = query.edns;
    // RFC 5001 §2.1: a name server "MUST NOT" send NSID to a query that did not ask for it.
    let nsid = match edns {
        Some(e) if e.nsid => config.nsid,
        _ => None,
    };
    let limit = match (transport, edns) {
        (Transport::Stream, _) => usize::from(u16::MAX),
        (Transport::Udp, None) => 512,
        (Transport::Udp, Some(e)) => usize::from(e.payload.min(config.edns_payload).max(512)),
    };
    // The writer stays where it is: passing it by value would copy its table each time.
    let reply = |w: &mut Writer<'_, '_>, flags: u16, rc: u16, truncated: bool| {
        if let Some(e) = edns {
            // A reply keeps the NSID only if it fits: cut to its question, or an error reply
            // to a long name, with a long NSID, may not in 512 bytes.
            let nsid = nsid.filter(|_| w.len() + wire::opt_len(nsid) <= limit);
            w.put_opt(config.edns_payload, (rc >> 4) as u8, e.dnssec_ok, nsid);
        }
        w.finish(
            query.id,
            flags | (rc & 0xF) | if truncated { FLAG_TC } else { 0 },
        );
        Outcome {
            reply: true,
            rcode: rc,
            qtype: Some(query.qtype),
            truncated,
            padding: edns.is_some_and(|e| e.padding),
            touched: None,
        }
    };

    if edns.is_some_and(|e| e.version > 0) {
        return reply(&mut w, flags, rcode::BADVERS, false);
    }
    match query.qtype {
        RType::OPT => return reply(&mut w, flags, rcode::FORMERR, false),
        RType::AXFR | RType::IXFR => return reply(&mut w, flags, rcode::REFUSED, false),
        RType::MAILA | RType::MAILB => return reply(&mut w, flags, rcode::NOTIMP, false),
        _ => {}
    }
    if query.qclass != CLASS_IN && query.qclass != CLASS_ANY {
        return reply(&mut w, flags, rcode::REFUSED, false);
    }
    let Some(mut found) = catalog.find(qname_lower) else {
        return reply(&mut w, flags, rcode::REFUSED, false);
    };
    if query.qtype == RType::DS
        && found.zone.origin().wire() == qname_lower
        && let Some(parent) = ds_parent(catalog, qname_lower)
    {
        found = parent;
    }
    // Published keys are read under one guard for the whole answer (CNAME hops and additional
    // addresses included): each key is seen at one version.
    let reader = found.overlay.map(|o| o.reader());
    let zone = ZoneView::new(found.zone, reader.as_ref()).with_serial(found.serial);

    let resolved = resolve(&mut w, zone, qname_lower, query.qtype, &synthesised);
    // What the answer itself read of a cache: the optional additional addresses below never
    // make it wait for a lookup (RFC 2181 §9: they may be left out).
    let touched = reader.as_ref().and_then(|r| r.touched());
    if resolved.authoritative {
        flags |= FLAG_AA;
    }
    let opt_len = if edns.is_some() {
        wire::opt_len(nsid)
    } else {
        0
    };
    let truncated = w.len() + opt_len > limit;
    if truncated {
        w.truncate_to_question();
    } else if let Some((set, owner)) = resolved.additional {
        // Optional addresses of in-zone targets (RFC 1034 §4.3.2 step 6, RFC 9460 §4.1):
        // dropped, without TC, when they do not fit (RFC 2181 §9).
        let mark = w.mark();
        put_target_addresses(&mut w, zone, set, owner);
        if w.len() + opt_len > limit {
            w.rollback(mark);
        }
    }
    let mut outcome = reply(&mut w, flags, resolved.rcode, truncated);
    outcome.touched = touched;
    outcome
}

/// SERVFAIL for `packet` (a query [`answer`] replied to): its question echoed, EDNS
/// answered as [`answer`] would (NSID included when asked). For a query whose answer waited
/// on a lookup that failed: a resolver tries again or elsewhere.
pub fn answer_servfail(
    packet: &[u8],
    transport: Transport,
    config: &AnswerConfig,
    out: &mut Vec<u8>,
) -> Outcome {
    let Ok(query) = parse_query(packet) else {
        out.clear();
        return Outcome::dropped();
    };
    let question = &packet[HEADER_LEN..HEADER_LEN + query.qname.len() + 4];
    let mut table = wire::table();
    let mut w = Writer::new(
        out,
        &mut table,
        Some((question, query.qname_lower.as_bytes())),
    );
    let flags = FLAG_QR | if query.rd { FLAG_RD } else { 0 } | if query.cd { FLAG_CD } else { 0 };
    if let Some(e) = query.edns {
        // The NSID only where it fits, as in `answer`.
        let limit = match transport {
            Transport::Stream => usize::from(u16::MAX),
            Transport::Udp => usize::from(e.payload.min(config.edns_payload).max(512)),
        };
        let nsid = config
            .nsid
            .filter(|n| e.nsid && w.len() + wire::opt_len(Some(n)) <= limit);
        w.put_opt(config.edns_payload, 0, e.dnssec_ok, nsid);
    }
    w.finish(query.id, flags | rcode::SERVFAIL);
    Outcome {
        reply: true,
        rcode: rcode::SERVFAIL,
        qtype: Some(query.qtype),
        truncated: false,
        padding: query.edns.is_some_and(|e| e.padding),
        touched: None,
    }
}

/// FORMERR or NOTIMP for a packet that is not a usable query; the question is echoed when it
/// could be read (so resolvers can match the reply), EDNS is not, since it was not parsed.
/// The reply to a datagram longer than the receive buffer, of which `head` is the start: FORMERR
/// with the ID echoed and no question (nothing that long is a query we answer), or nothing when
/// even the header is not a query's. The reply is a bare header, so it amplifies nothing.
pub fn answer_oversized(head: &[u8], out: &mut Vec<u8>) -> Outcome {
    if head.len() < HEADER_LEN || head[2] & 0x80 != 0 {
        return Outcome::dropped();
    }
    malformed_reply(head, rcode::FORMERR as u8, None, out)
}

fn malformed_reply(
    packet: &[u8],
    rc: u8,
    question_end: Option<usize>,
    out: &mut Vec<u8>,
) -> Outcome {
    let id = u16::from_be_bytes([packet[0], packet[1]]);
    let query_flags = u16::from_be_bytes([packet[2], packet[3]]);
    let flags = FLAG_QR | (query_flags & (0x7800 | FLAG_RD | FLAG_CD)) | u16::from(rc);
    let question = question_end.map(|end| &packet[HEADER_LEN..end]);
    let qtype =
        question_end.map(|end| RType(u16::from_be_bytes([packet[end - 4], packet[end - 3]])));
    // The lower-cased name is only used for compression, and nothing follows the question here.
    let mut table = wire::table();
    let mut w = Writer::new(out, &mut table, question.map(|q| (q, &[][..])));
    w.finish(id, flags);
    Outcome {
        reply: true,
        rcode: u16::from(rc),
        qtype,
        truncated: false,
        padding: false,
        touched: None,
    }
}

/// The zone served here that delegates `apex` (another zone's apex), when there is one: DS
/// belongs to the parent side of a cut (RFC 4035 §3.1.4.1), so it answers a DS query there.
fn ds_parent<'c>(catalog: &'c Catalog, apex: &[u8]) -> Option<crate::zone::Found<'c>> {
    let parent = apex
        .get(1 + usize::from(*apex.first()?)..)
        .filter(|p| !p.is_empty())?;
    let found = catalog.find(parent)?;
    found.zone.node(apex)?.get(RType::NS)?;
    Some(found)
}

/// What [`resolve`] decided.
struct Resolved<'n> {
    rcode: u16,
    authoritative: bool,
    /// An NS, MX, SRV, SVCB or HTTPS answer whose in-zone targets' addresses may go in
    /// additional, with its owner's name (an SVCB target of `.` is the owner).
    additional: Option<(RRset<'n>, &'n [u8])>,
}

impl Resolved<'_> {
    fn done(rcode: u16, authoritative: bool) -> Self {
        Resolved {
            rcode,
            authoritative,
            additional: None,
        }
    }
}

/// Fills the answer and authority sections (and referral glue).
fn resolve<'n>(
    w: &mut Writer<'_, 'n>,
    zone: ZoneView<'n>,
    qname: &'n [u8],
    qtype: RType,
    synthesised: &'n Synthesised,
) -> Resolved<'n> {
    let mut name: &'n [u8] = qname;
    let mut owner = Owner::Question;
    let mut slots = synthesised.iter();
    for hop in 0..MAX_CNAME_HOPS {
        let node: Node<'n> = match zone.lookup(name) {
            Lookup::Found(node) | Lookup::Wildcard(node) => node,
            Lookup::Dname {
                owner: at,
                dname: set,
            } => {
                put_set(w, Section::Answer, Owner::Name(at), set);
                let Some(target) = set.first() else {
                    return Resolved::done(rcode::NOERROR, true);
                };
                let prefix_len = name.len() - at.len();
                let len = prefix_len + target.len();
                if len > 255 {
                    // The name would be too long (RFC 6672 §2.2).
                    return Resolved::done(rcode::YXDOMAIN, true);
                }
                let mut next = [0u8; 255];
                next[..prefix_len].copy_from_slice(&name[..prefix_len]);
                next[prefix_len..len].copy_from_slice(target);
                let written =
                    w.put_cname_to(Section::Answer, owner, set.ttl, &name[..prefix_len], target);
                let (Some(written), Some(slot)) = (written, slots.next()) else {
                    // Beyond a pointer's reach, or too many DNAMEs: the CNAME is the answer.
                    return Resolved::done(rcode::NOERROR, true);
                };
                name = slot.get_or_init(|| next[..len].into());
                if qtype == RType::CNAME
                    || qtype == RType::ANY
                    || !is_wire_subdomain(name, zone.zone().origin().wire())
                {
                    return Resolved::done(rcode::NOERROR, true);
                }
                owner = Owner::At(written);
                continue;
            }
            Lookup::EmptyNonTerminal => return nodata(w, zone),
            Lookup::NxDomain => {
                put_soa(w, zone);
                return Resolved::done(rcode::NXDOMAIN, true);
            }
            // DS belongs to the parent side of a cut (RFC 4035 §3.1.4.1): answered from the
            // cut's node when the zone holds one, else no data.
            Lookup::Delegation { cut, .. } if qtype == RType::DS && cut == name => {
                return match zone.node(cut).and_then(|n| n.get(RType::DS)) {
                    Some(ds) => {
                        put_set(w, Section::Answer, owner, ds);
                        Resolved::done(rcode::NOERROR, true)
                    }
                    None => nodata(w, zone),
                };
            }
            Lookup::Delegation { cut, ns } => {
                put_set(w, Section::Authority, Owner::Name(cut), ns);
                put_target_addresses(w, zone, ns, cut);
                return Resolved::done(rcode::NOERROR, hop > 0);
            }
        };
        if qtype != RType::CNAME
            && qtype != RType::ANY
            && let Some(cname) = node.get(RType::CNAME)
        {
            put_set(w, Section::Answer, owner, cname);
            let Some(target) = cname.first() else {
                return Resolved::done(rcode::NOERROR, true);
            };
            if !is_wire_subdomain(target, zone.zone().origin().wire()) {
                return Resolved::done(rcode::NOERROR, true);
            }
            name = target;
            owner = Owner::Name(name);
            continue;
        }
        if qtype == RType::ANY {
            // RFC 8482 §4.1: one RRset is enough; SOA/NS at the apex are not listed first.
            let pick = node
                .rrsets()
                .find(|s| s.rtype != RType::SOA && s.rtype != RType::NS)
                .or(node.rrsets().next());
            return match pick {
                Some(set) => answered(w, zone, node, owner, set),
                None => nodata(w, zone),
            };
        }
        return match node.get(qtype) {
            Some(set) => answered(w, zone, node, owner, set),
            None => nodata(w, zone),
        };
    }
    // A chain longer than any sane zone has: answer with what was written.
    Resolved::done(rcode::NOERROR, true)
}

fn answered<'n>(
    w: &mut Writer<'_, 'n>,
    zone: ZoneView<'n>,
    node: Node<'n>,
    owner: Owner<'n>,
    set: RRset<'n>,
) -> Resolved<'n> {
    put_set(w, Section::Answer, owner, set);
    if set.rtype == RType::SOA && node.name() == zone.zone().origin().wire() {
        // The apex SOA (one record) carries the serial the catalog serves.
        w.set_last_serial(zone.serial());
    }
    let additional = matches!(
        set.rtype,
        RType::NS | RType::MX | RType::SRV | svcb::SVCB | svcb::HTTPS
    )
    .then_some((set, node.name()));
    Resolved {
        rcode: rcode::NOERROR,
        authoritative: true,
        additional,
    }
}

fn nodata<'n>(w: &mut Writer<'_, 'n>, zone: ZoneView<'n>) -> Resolved<'n> {
    put_soa(w, zone);
    Resolved::done(rcode::NOERROR, true)
}

fn put_set<'n>(w: &mut Writer<'_, 'n>, section: Section, owner: Owner<'n>, set: RRset<'n>) {
    for rdata in set.rdatas() {
        w.put_record(section, owner, set.rtype, set.ttl, rdata);
    }
}

fn put_soa<'n>(w: &mut Writer<'_, 'n>, view: ZoneView<'n>) {
    let zone = view.zone();
    let set = zone.soa_rrset();
    if let Some(rdata) = set.first() {
        w.put_record(
            Section::Authority,
            Owner::Name(zone.origin().wire()),
            RType::SOA,
            zone.negative_ttl(),
            rdata,
        );
        w.set_last_serial(view.serial());
    }
}

/// A/AAAA of the in-zone hosts an NS, MX, SRV, SVCB or HTTPS RRset (owned by `owner`) names,
/// in the additional section: glue for referrals (RFC 1034 §4.3.2 step 3b), helpful extras
/// otherwise. An SVCB or HTTPS target in AliasMode also brings its own RRset of that type
/// (RFC 9460 §4.1).
fn put_target_addresses<'n>(
    w: &mut Writer<'_, 'n>,
    zone: ZoneView<'n>,
    set: RRset<'n>,
    owner: &'n [u8],
) {
    // Each target once: several records naming one host (SVCB's `.`, two MX at one
    // exchange) add its addresses once.
    let mut seen: [&[u8]; 8] = [&[]; 8];
    let mut seen_len = 0;
    for rdata in set.rdatas() {
        let mut alias = false;
        let target = match set.rtype {
            RType::NS => rdata,
            RType::MX => rdata.get(2..).unwrap_or_default(),
            RType::SRV => rdata.get(6..).unwrap_or_default(),
            svcb::SVCB | svcb::HTTPS => {
                let rest = rdata.get(2..).unwrap_or_default();
                let target = &rest[..wire_name_len(rest).unwrap_or(0)];
                alias = rdata.starts_with(&[0, 0]);
                match target {
                    // "." in ServiceMode is the owner itself (RFC 9460 §2.5.2), unless that is
                    // a wildcard's name.
                    [0] if !alias && !owner.starts_with(b"\x01*") => owner,
                    [0] => continue,
                    _ => target,
                }
            }
            _ => continue,
        };
        if target.is_empty()
            || seen[..seen_len].contains(&target)
            || !is_wire_subdomain(target, zone.zone().origin().wire())
        {
            continue;
        }
        if seen_len < seen.len() {
            seen[seen_len] = target;
            seen_len += 1;
        }
        if let Some(node) = zone.node(target) {
            if alias && let Some(next) = node.get(set.rtype) {
                put_set(w, Section::Additional, Owner::Name(node.name()), next);
            }
            for t in [RType::A, RType::AAAA] {
                if let Some(addrs) = node.get(t) {
                    put_set(w, Section::Additional, Owner::Name(node.name()), addrs);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BuildDefaults, CatalogBuilder, Name, RData, Record};

    const NSID: &[u8] = b"replica-a";

    /// `example.org.` with `www` (one A), `big` (29 A records: 508 bytes with an empty OPT, 521
    /// with the NSID above, so it fits 512 only without it) and a wildcard as large.
    fn catalog() -> Catalog {
        let origin: Name = "example.org.".parse().unwrap();
        let mut b = CatalogBuilder::new(BuildDefaults {
            default_ttl: 5,
            serial: 1,
        });
        let mut add = |name: &str, i: u32| {
            let record = Record {
                name: Name::parse(name, Some(&origin)).unwrap(),
                ttl: 60,
                data: RData::A(std::net::Ipv4Addr::from(0x0A00_0000 + i)),
            };
            b.add(&origin, record, 0).unwrap();
        };
        add("www", 0);
        for i in 0..29 {
            add("big", i);
            add("*", i);
        }
        b.build().0
    }

    /// A query for `name` A; with an OPT offering `payload` and carrying `options` when given.
    fn query(name: &str, opt: Option<(u16, &[u8])>) -> Vec<u8> {
        let name: Name = name.parse().unwrap();
        // ID, flags, one question, no answer or authority, OPT in additional when given.
        let mut q = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0];
        q.push(u8::from(opt.is_some()));
        q.extend_from_slice(name.wire());
        q.extend_from_slice(&[0, 1, 0, 1]);
        if let Some((payload, options)) = opt {
            q.extend_from_slice(&[0, 0, 41]);
            q.extend_from_slice(&payload.to_be_bytes());
            q.extend_from_slice(&[0, 0, 0, 0]);
            q.extend_from_slice(&(options.len() as u16).to_be_bytes());
            q.extend_from_slice(options);
        }
        q
    }

    /// The empty NSID option a query asks with (RFC 5001 §2.1).
    const ASK: &[u8] = &[0, 3, 0, 0];

    fn ask(
        catalog: &Catalog,
        packet: &[u8],
        transport: Transport,
        nsid: Option<&'static [u8]>,
    ) -> (Outcome, Vec<u8>) {
        let config = AnswerConfig {
            nsid,
            ..AnswerConfig::default()
        };
        let mut out = Vec::new();
        let outcome = answer(catalog, packet, transport, &config, &mut out);
        // Whatever it carries, the reply is a DNS message hickory reads.
        hickory_proto::op::Message::from_vec(&out).expect("a well-formed reply");
        (outcome, out)
    }

    /// The OPT record every reply here ends with, as bytes: an empty one, or one carrying
    /// `nsid`.
    fn opt(nsid: Option<&[u8]>) -> Vec<u8> {
        let mut r = vec![0, 0, 41];
        r.extend_from_slice(&1232u16.to_be_bytes());
        r.extend_from_slice(&[0, 0, 0, 0]);
        match nsid {
            None => r.extend_from_slice(&[0, 0]),
            Some(text) => {
                r.extend_from_slice(&(4 + text.len() as u16).to_be_bytes());
                r.extend_from_slice(&[0, 3, 0, text.len() as u8]);
                r.extend_from_slice(text);
            }
        }
        r
    }

    #[test]
    fn nsid_is_sent_with_its_text_when_asked_and_configured() {
        let catalog = catalog();
        for transport in [Transport::Udp, Transport::Stream] {
            let q = query("www.example.org.", Some((1232, ASK)));
            let (outcome, reply) = ask(&catalog, &q, transport, Some(NSID));
            assert!(outcome.reply && !outcome.truncated);
            assert!(reply.ends_with(&opt(Some(NSID))), "{reply:02x?}");
            // The answer itself is the one a query without NSID gets.
            let plain = query("www.example.org.", Some((1232, &[])));
            let (_, without) = ask(&catalog, &plain, transport, Some(NSID));
            let head = reply.len() - opt(Some(NSID)).len();
            assert_eq!(reply[..head], without[..without.len() - opt(None).len()]);
        }
        // Among other options (a cookie first).
        let cookie_then_nsid = [&[0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8][..], ASK].concat();
        let q = query("www.example.org.", Some((1232, &cookie_then_nsid)));
        let (_, reply) = ask(&catalog, &q, Transport::Udp, Some(NSID));
        assert!(reply.ends_with(&opt(Some(NSID))));
        // An NSID option with data in a query is still a request.
        let q = query("www.example.org.", Some((1232, &[0, 3, 0, 2, 0xab, 0xcd])));
        let (_, reply) = ask(&catalog, &q, Transport::Udp, Some(NSID));
        assert!(reply.ends_with(&opt(Some(NSID))));
        // Negative answers and refusals carry it too.
        for name in ["nope.www.example.org.", "example.net."] {
            let q = query(name, Some((1232, ASK)));
            let (_, reply) = ask(&catalog, &q, Transport::Udp, Some(NSID));
            assert!(reply.ends_with(&opt(Some(NSID))), "{name}");
        }
    }

    #[test]
    fn nsid_is_never_sent_unasked_nor_unconfigured() {
        let catalog = catalog();
        let cookie = [0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8];
        for options in [&[][..], &cookie, &[0, 12, 0, 0]] {
            let q = query("www.example.org.", Some((1232, options)));
            let (_, with) = ask(&catalog, &q, Transport::Udp, Some(NSID));
            let (_, without) = ask(&catalog, &q, Transport::Udp, None);
            assert_eq!(with, without, "options {options:?}");
            assert!(with.ends_with(&opt(None)));
        }
        // Asked, but none configured: the empty OPT.
        let q = query("www.example.org.", Some((1232, ASK)));
        let (_, reply) = ask(&catalog, &q, Transport::Udp, None);
        assert!(reply.ends_with(&opt(None)));
        // No EDNS, no OPT at all.
        let q = query("www.example.org.", None);
        let (_, reply) = ask(&catalog, &q, Transport::Udp, Some(NSID));
        assert_eq!(reply[10..12], [0, 0], "no additional record");
    }

    #[test]
    fn nsid_counts_towards_the_udp_limit_and_survives_truncation_when_it_fits() {
        let catalog = catalog();
        // 508 bytes with an empty OPT fits 512; with the NSID it does not: TC, and the reply cut
        // to its question still names the server.
        let q = query("big.example.org.", Some((512, &[])));
        let (outcome, reply) = ask(&catalog, &q, Transport::Udp, Some(NSID));
        assert!(!outcome.truncated);
        assert_eq!(reply.len(), 508);
        let q = query("big.example.org.", Some((512, ASK)));
        let (outcome, reply) = ask(&catalog, &q, Transport::Udp, Some(NSID));
        assert!(outcome.truncated);
        assert_ne!(reply[2] & 0x02, 0, "TC");
        assert_eq!(reply[6..10], [0, 0, 0, 0], "no answer, no authority");
        assert_eq!(reply[10..12], [0, 1], "the OPT");
        assert!(reply.ends_with(&opt(Some(NSID))));
        assert!(reply.len() <= 512);
        // Over TCP nothing is cut.
        let (outcome, reply) = ask(&catalog, &q, Transport::Stream, Some(NSID));
        assert!(!outcome.truncated);
        assert!(reply.ends_with(&opt(Some(NSID))));
        assert_eq!(reply.len(), 508 + 4 + NSID.len());
    }

    #[test]
    fn a_truncated_reply_leaves_out_an_nsid_that_would_not_fit() {
        let catalog = catalog();
        // A 246-byte name (the wildcard answers it) and a 255-byte NSID: the question and OPT
        // alone are 536 bytes, over 512.
        let long = format!(
            "{a}.{a}.{a}.{b}.example.org.",
            a = "a".repeat(63),
            b = "b".repeat(40)
        );
        let text: &'static [u8] = Box::leak(vec![b'n'; 255].into_boxed_slice());
        let q = query(&long, Some((512, ASK)));
        let (outcome, reply) = ask(&catalog, &q, Transport::Udp, Some(text));
        assert!(outcome.truncated);
        assert!(reply.ends_with(&opt(None)), "{} bytes", reply.len());
        assert!(reply.len() <= 512);
        // A short one fits beside the same question.
        let (outcome, reply) = ask(&catalog, &q, Transport::Udp, Some(NSID));
        assert!(outcome.truncated);
        assert!(reply.ends_with(&opt(Some(NSID))));
        assert!(reply.len() <= 512);
        // An error reply to the same long name (AXFR over UDP: REFUSED) leaves it out too.
        let mut axfr = q.clone();
        let at = 12 + long.len() + 1;
        axfr[at..at + 2].copy_from_slice(&252u16.to_be_bytes());
        let (outcome, reply) = ask(&catalog, &axfr, Transport::Udp, Some(text));
        assert_eq!(outcome.rcode, rcode::REFUSED);
        assert!(reply.ends_with(&opt(None)), "{} bytes", reply.len());
        assert!(reply.len() <= 512, "{} bytes", reply.len());
    }
}
