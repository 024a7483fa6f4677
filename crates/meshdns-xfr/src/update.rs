//! Dynamic UPDATE (RFC 2136): what an UPDATE message asks, checked and applied to a zone's
//! records, purely. The caller has authenticated the request (TSIG, RFC 3007) and chosen the
//! zone; this module reads the sections ([`read`]), checks the prerequisites (§3.2), prescans
//! the updates (§3.4.1) and applies them (§3.4.2) to a copy, so that nothing is applied unless
//! everything is accepted.
//!
//! The zone's records are kept as [`Rrsets`]: by owner (lower-cased wire) and type, each RRset's
//! TTL and its RDATAs (uncompressed wire, in the order added). The apex SOA is the server's (its
//! serial is raised once per accepted UPDATE, as for every zone it serves): an SOA in an update
//! is ignored, and the apex is always a name in use.

use std::collections::BTreeMap;

use meshdns_zone::RType;

use crate::message::{CLASS_ANY, Message, Record};

/// Class NONE (RFC 2136 §1.3).
pub const CLASS_NONE: u16 = 254;

/// Response codes of RFC 2136 (and RFC 1035's) that an UPDATE is answered with.
pub mod rcode {
    /// Accepted (or nothing to do).
    pub const NOERROR: u8 = 0;
    /// The message is malformed.
    pub const FORMERR: u8 = 1;
    /// A name that should exist does not.
    pub const NXDOMAIN: u8 = 3;
    /// The operation is refused by policy.
    pub const REFUSED: u8 = 5;
    /// A name that should not exist does.
    pub const YXDOMAIN: u8 = 6;
    /// An RRset that should not exist does.
    pub const YXRRSET: u8 = 7;
    /// An RRset that should exist does not (or differs).
    pub const NXRRSET: u8 = 8;
    /// Not authoritative for the zone (or TSIG failed, RFC 8945).
    pub const NOTAUTH: u8 = 9;
    /// A name outside the zone.
    pub const NOTZONE: u8 = 10;

    /// The names of the rcodes an UPDATE is answered with (0 to 10), as metrics label them.
    pub const NAMES: [&str; 11] = [
        "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", "YXDOMAIN", "YXRRSET",
        "NXRRSET", "NOTAUTH", "NOTZONE",
    ];
}

/// UPDATEs answered, by rcode, and those dropped unanswered.
#[derive(Debug, Default)]
pub struct UpdateCounts {
    answered: [std::sync::atomic::AtomicU64; rcode::NAMES.len()],
    dropped: std::sync::atomic::AtomicU64,
}

impl UpdateCounts {
    /// Counts one reply with `rc` (rcodes past NOTZONE are not given to an UPDATE).
    pub fn add(&self, rc: u8) {
        if let Some(c) = self.answered.get(usize::from(rc)) {
            c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Counts one UPDATE dropped before it was checked (a datagram, or a TCP connection
    /// closed): past its key's rate.
    pub fn drop_one(&self) {
        self.dropped
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Each rcode's name with its count.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        rcode::NAMES
            .iter()
            .zip(&self.answered)
            .map(|(name, c)| (*name, c.load(std::sync::atomic::Ordering::Relaxed)))
    }

    /// Datagrams dropped unanswered ([`UpdateCounts::drop_one`]).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The key an UPDATE says it is signed with, unverified (`None`: unsigned, or not a message):
/// enough to hold a flood of one key's datagrams to its rate before checking signatures.
pub fn signer(packet: &[u8]) -> Option<meshdns_zone::Name> {
    let msg = crate::message::parse(packet).ok()?;
    let (tsig, _) = crate::tsig::Tsig::read(&msg)?.ok()?;
    meshdns_zone::Name::from_wire(&tsig.key_name)
}

/// An RRset's key: owner (lower-cased wire) and type.
pub type RrsetKey = (Vec<u8>, u16);

/// An RRset's TTL and its RDATAs, sorted.
pub type RrsetData = (u32, Vec<Vec<u8>>);

/// A zone's records: (owner wire, type) → (TTL, RDATAs, sorted).
pub type Rrsets = BTreeMap<RrsetKey, RrsetData>;

/// One record of the prerequisite or update section, its RDATA decompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Owner, lower-cased wire.
    pub owner: Vec<u8>,
    /// Type.
    pub rtype: u16,
    /// Class: IN, ANY or NONE.
    pub class: u16,
    /// TTL.
    pub ttl: u32,
    /// RDATA, uncompressed (empty for the ANY and NONE forms that carry none).
    pub rdata: Vec<u8>,
}

/// An UPDATE's sections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The zone named (lower-cased wire).
    pub zone: Vec<u8>,
    /// The zone section's class.
    pub class: u16,
    /// Prerequisites.
    pub prerequisites: Vec<Item>,
    /// Updates.
    pub updates: Vec<Item>,
}

/// Meta types an update may not add (§3.4.1.2): ANY, AXFR, IXFR, MAILA, MAILB, and the other
/// meta and question types (OPT, TKEY, TSIG, 128 to 255).
fn is_meta(rtype: u16) -> bool {
    rtype == 41 || (128..=255).contains(&rtype)
}

/// Whether an added record's data is what its type holds (a record meshdns could not serve or
/// a secondary could not load is FORMERR, not stored).
fn well_formed(rtype: u16, rdata: &[u8]) -> bool {
    meshdns_zone::RData::from_wire(RType(rtype), rdata).is_some_and(|d| {
        let mut back = Vec::new();
        d.to_wire(&mut back);
        back == rdata
    })
}

fn item(msg: &Message<'_>, r: &Record) -> Option<Item> {
    let rdata = if r.rdata_len == 0 {
        Vec::new()
    } else {
        let given = crate::secondary::record(msg, r)?.rdata.into_owned();
        // In the form the catalog keeps (names inside lower-cased), so that data given in
        // another case is compared, stored and looked up as the same.
        match meshdns_zone::RData::from_wire(RType(r.rtype), &given) {
            Some(d) => {
                let mut canonical = Vec::with_capacity(given.len());
                d.to_wire(&mut canonical);
                canonical
            }
            None => given,
        }
    };
    Some(Item {
        owner: r.owner.clone(),
        rtype: r.rtype,
        class: r.class,
        ttl: r.ttl,
        rdata,
    })
}

/// The sections of an UPDATE message (opcode 5): the zone (one, of type SOA), the
/// prerequisites (the answer section) and the updates (the authority section). FORMERR when
/// they are not of that shape.
pub fn read(msg: &Message<'_>) -> Result<Request, u8> {
    let zone_count = u16::from_be_bytes([msg.bytes[4], msg.bytes[5]]);
    if zone_count != 1 || msg.qtype != RType::SOA.0 {
        return Err(rcode::FORMERR);
    }
    let section = |records: &[Record]| -> Result<Vec<Item>, u8> {
        records
            .iter()
            .map(|r| item(msg, r).ok_or(rcode::FORMERR))
            .collect()
    };
    Ok(Request {
        zone: msg.qname_lower.clone(),
        class: msg.qclass,
        prerequisites: section(&msg.answers)?,
        updates: section(&msg.authority)?,
    })
}

/// Whether `name` is `zone` or below it.
fn in_zone(name: &[u8], zone: &[u8]) -> bool {
    meshdns_zone::name::is_wire_subdomain(name, zone)
}

/// Whether `name` owns any record (the apex always: its SOA).
fn in_use(rrsets: &Rrsets, zone: &[u8], name: &[u8]) -> bool {
    name == zone
        || rrsets
            .range((name.to_vec(), 0)..=(name.to_vec(), u16::MAX))
            .next()
            .is_some()
}

/// Checks the prerequisites (§3.2) against the zone's records.
pub fn check_prerequisites(req: &Request, rrsets: &Rrsets) -> Result<(), u8> {
    // RRsets that must exist exactly (class IN), gathered first (§3.2.3).
    let mut exact: BTreeMap<(Vec<u8>, u16), Vec<Vec<u8>>> = BTreeMap::new();
    for p in &req.prerequisites {
        if p.ttl != 0 {
            return Err(rcode::FORMERR);
        }
        if !in_zone(&p.owner, &req.zone) {
            return Err(rcode::NOTZONE);
        }
        // The apex's SOA and NS are the server's: always there.
        let exists = |rtype: u16| {
            ((rtype == RType::SOA.0 || rtype == RType::NS.0) && p.owner == req.zone)
                || rrsets.contains_key(&(p.owner.clone(), rtype))
        };
        match p.class {
            CLASS_ANY => {
                if !p.rdata.is_empty() {
                    return Err(rcode::FORMERR);
                }
                if p.rtype == 255 {
                    if !in_use(rrsets, &req.zone, &p.owner) {
                        return Err(rcode::NXDOMAIN);
                    }
                } else if !exists(p.rtype) {
                    return Err(rcode::NXRRSET);
                }
            }
            CLASS_NONE => {
                if !p.rdata.is_empty() {
                    return Err(rcode::FORMERR);
                }
                if p.rtype == 255 {
                    if in_use(rrsets, &req.zone, &p.owner) {
                        return Err(rcode::YXDOMAIN);
                    }
                } else if exists(p.rtype) {
                    return Err(rcode::YXRRSET);
                }
            }
            c if c == req.class => {
                let set = exact.entry((p.owner.clone(), p.rtype)).or_default();
                if !set.contains(&p.rdata) {
                    set.push(p.rdata.clone());
                }
            }
            _ => return Err(rcode::FORMERR),
        }
    }
    for (key, want) in exact {
        let have = rrsets.get(&key).map(|(_, r)| r.as_slice()).unwrap_or(&[]);
        let same = have.len() == want.len() && want.iter().all(|w| have.contains(w));
        if !same {
            return Err(rcode::NXRRSET);
        }
    }
    Ok(())
}

/// Prescans the updates (§3.4.1): every one inside the zone and of a form RFC 2136 allows.
pub fn prescan(req: &Request) -> Result<(), u8> {
    for u in &req.updates {
        if !in_zone(&u.owner, &req.zone) {
            return Err(rcode::NOTZONE);
        }
        // A name is at most 255 bytes (RFC 1035 §3.1).
        if u.owner.len() > 255 {
            return Err(rcode::FORMERR);
        }
        let ok = match u.class {
            c if c == req.class => !is_meta(u.rtype) && well_formed(u.rtype, &u.rdata),
            CLASS_ANY => u.ttl == 0 && u.rdata.is_empty() && (u.rtype == 255 || !is_meta(u.rtype)),
            CLASS_NONE => u.ttl == 0 && !is_meta(u.rtype),
            _ => false,
        };
        if !ok {
            return Err(rcode::FORMERR);
        }
    }
    Ok(())
}

/// The RRsets at every owner an UPDATE names, as they were before it: what it can change
/// (each rule of [`apply`] acts at the owner of its record), to tell whether it did and to
/// put them back. Saving them costs what the update touches, not the zone.
#[derive(Debug)]
pub struct Undo {
    owners: Vec<Vec<u8>>,
    saved: Vec<(RrsetKey, RrsetData)>,
}

fn at_owner<'a>(
    rrsets: &'a Rrsets,
    owner: &[u8],
) -> impl Iterator<Item = (&'a RrsetKey, &'a RrsetData)> + 'a {
    rrsets.range((owner.to_vec(), 0)..=(owner.to_vec(), u16::MAX))
}

impl Undo {
    /// Saves the RRsets at the owners `req` names.
    pub fn save(req: &Request, rrsets: &Rrsets) -> Undo {
        let mut owners: Vec<Vec<u8>> = req.updates.iter().map(|u| u.owner.clone()).collect();
        owners.sort();
        owners.dedup();
        let saved = owners
            .iter()
            .flat_map(|o| at_owner(rrsets, o).map(|(k, v)| (k.clone(), v.clone())))
            .collect();
        Undo { owners, saved }
    }

    /// Whether the RRsets at those owners differ from the saved ones.
    pub fn changed(&self, rrsets: &Rrsets) -> bool {
        let now = self.owners.iter().flat_map(|o| at_owner(rrsets, o));
        !now.eq(self.saved.iter().map(|(k, v)| (k, v)))
    }

    /// Records at those owners now, less those saved.
    pub fn records_added(&self, rrsets: &Rrsets) -> isize {
        let now: usize = self
            .owners
            .iter()
            .flat_map(|o| at_owner(rrsets, o))
            .map(|(_, (_, set))| set.len())
            .sum();
        let before: usize = self.saved.iter().map(|(_, (_, set))| set.len()).sum();
        now as isize - before as isize
    }

    /// Puts the saved RRsets back.
    pub fn restore(self, rrsets: &mut Rrsets) {
        for owner in &self.owners {
            let now: Vec<_> = at_owner(rrsets, owner).map(|(k, _)| k.clone()).collect();
            for k in now {
                rrsets.remove(&k);
            }
        }
        rrsets.extend(self.saved);
    }
}

/// Applies the updates (§3.4.2) to `rrsets`, in order. The SOA is the server's (updates to it
/// are ignored), the apex keeps at least one NS when it has some, and CNAMEs do not share a
/// name with other data (an update that would break that is ignored, as the RFC says).
pub fn apply(req: &Request, rrsets: &mut Rrsets) {
    for u in &req.updates {
        let key = (u.owner.clone(), u.rtype);
        let at_apex = u.owner == req.zone;
        if u.rtype == RType::SOA.0 {
            continue;
        }
        match u.class {
            CLASS_ANY if u.rtype == 255 => {
                let range = (u.owner.clone(), 0)..=(u.owner.clone(), u16::MAX);
                let doomed: Vec<_> = rrsets
                    .range(range)
                    .map(|(k, _)| k.clone())
                    .filter(|(_, t)| !(at_apex && *t == RType::NS.0))
                    .collect();
                for k in doomed {
                    rrsets.remove(&k);
                }
            }
            CLASS_ANY => {
                if !(at_apex && u.rtype == RType::NS.0) {
                    rrsets.remove(&key);
                }
            }
            CLASS_NONE => {
                if let Some((_, set)) = rrsets.get_mut(&key) {
                    let last_apex_ns = at_apex && u.rtype == RType::NS.0 && set.len() == 1;
                    if !last_apex_ns {
                        set.retain(|r| *r != u.rdata);
                    }
                    if set.is_empty() {
                        rrsets.remove(&key);
                    }
                }
            }
            _ => {
                let range = (u.owner.clone(), 0)..=(u.owner.clone(), u16::MAX);
                let mut others = rrsets.range(range).map(|((_, t), _)| *t);
                let cname = RType::CNAME.0;
                // The apex has its SOA and NS (the server's): no CNAME there.
                let clash = if u.rtype == cname {
                    at_apex || others.any(|t| t != cname)
                } else {
                    others.any(|t| t == cname)
                };
                if clash {
                    continue;
                }
                let (ttl, set) = rrsets.entry(key).or_insert_with(|| (u.ttl, Vec::new()));
                // One TTL per RRset: the last one given (RFC 2181 §5.2).
                *ttl = u.ttl;
                if u.rtype == cname {
                    // A name has one CNAME: a new one replaces it.
                    set.clear();
                }
                // Kept sorted: an RRset is a set, and the same records in another order are
                // no change (the serial does not move).
                if let Err(at) = set.binary_search(&u.rdata) {
                    set.insert(at, u.rdata.clone());
                }
            }
        }
    }
}

/// Checks and applies `req` to a copy of `rrsets`: the new records when everything is
/// accepted (and whether they differ), else the rcode to answer; nothing is applied unless
/// all is.
pub fn process(req: &Request, rrsets: &Rrsets) -> Result<(Rrsets, bool), u8> {
    let mut next = rrsets.clone();
    let changed = process_in_place(req, &mut next)?.is_some();
    Ok((next, changed))
}

/// Checks `req` and applies it to `rrsets` in place when everything is accepted: what undoes
/// it when it changed anything (`None`: no change), else the rcode to answer, with nothing
/// applied. Costs what the update touches, whatever the zone's size.
pub fn process_in_place(req: &Request, rrsets: &mut Rrsets) -> Result<Option<Undo>, u8> {
    check_prerequisites(req, rrsets)?;
    prescan(req)?;
    let undo = Undo::save(req, rrsets);
    apply(req, rrsets);
    Ok(undo.changed(rrsets).then_some(undo))
}

/// What the server holds of the zone an UPDATE names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneIs {
    /// An update zone: UPDATE writes it.
    Updatable,
    /// Served from another source (a records file, a DNSZone): REFUSED.
    ServedOtherwise,
    /// Not served: NOTAUTH.
    NotServed,
}

/// Who may update what: the TSIG keys, and each key granted for one zone (`Some`) or every
/// update zone (`None`).
#[derive(Debug, Clone, Default)]
pub struct UpdatePolicy {
    /// Every key the server knows.
    pub keys: Vec<crate::tsig::Key>,
    /// (key name, zone) grants.
    pub grants: Vec<(meshdns_zone::Name, Option<meshdns_zone::Name>)>,
}

/// Answers an UPDATE request: the reply (signed when the request verified) and its rcode.
/// `zone_is` says what the zone named is; `admit` is asked once for a verified, granted key
/// (a rate limit: `false` is REFUSED); `apply` checks and applies the request to the zone
/// (durably, before it returns `Ok`). Nothing is applied unless the request is signed by a
/// key granted for its zone, and every prerequisite and update is accepted.
pub fn respond(
    policy: &UpdatePolicy,
    packet: &[u8],
    now: u64,
    zone_is: impl Fn(&[u8]) -> ZoneIs,
    admit: impl FnOnce(&meshdns_zone::Name) -> bool,
    apply: impl FnOnce(&Request) -> Result<(), u8>,
) -> Option<(Vec<u8>, u8)> {
    use crate::respond::{error, tsig_error};
    use crate::tsig::{Check, check};
    let Ok(msg) = crate::message::parse(packet) else {
        return header_only_formerr(packet).map(|reply| (reply, rcode::FORMERR));
    };
    if msg.is_response() {
        return None;
    }
    let verified = match check(&msg, &policy.keys, now) {
        Check::Signed(v) => v,
        Check::Unsigned => return Some((error(&msg, rcode::REFUSED, None, now), rcode::REFUSED)),
        Check::Malformed => return Some((error(&msg, rcode::FORMERR, None, now), rcode::FORMERR)),
        Check::Failed {
            error: e,
            signer,
            tsig,
        } => {
            return Some((tsig_error(&msg, e, signer, &tsig, now), rcode::NOTAUTH));
        }
    };
    let answer = |rc: u8| Some((error(&msg, rc, Some(&verified), now), rc));
    let req = match read(&msg) {
        Ok(r) => r,
        Err(rc) => return answer(rc),
    };
    // Only class IN zones are served.
    if req.class != crate::message::CLASS_IN {
        return answer(rcode::NOTAUTH);
    }
    match zone_is(&req.zone) {
        ZoneIs::Updatable => {}
        ZoneIs::ServedOtherwise => return answer(rcode::REFUSED),
        ZoneIs::NotServed => return answer(rcode::NOTAUTH),
    }
    let key = &verified.key.name;
    let granted = policy.grants.iter().any(|(k, zone)| {
        k == key
            && zone
                .as_ref()
                .is_none_or(|z| z.wire() == req.zone.as_slice())
    });
    if !granted || !admit(key) {
        return answer(rcode::REFUSED);
    }
    match apply(&req) {
        Ok(()) => answer(rcode::NOERROR),
        Err(rc) => answer(rc),
    }
}

/// FORMERR for a request that cannot be read (more than one zone, RFC 2136 §3.1.1; a section
/// cut short): its header alone, with its ID and opcode, and every count zero. `None` for what
/// has no header or is itself a response.
fn header_only_formerr(packet: &[u8]) -> Option<Vec<u8>> {
    let header = packet.get(..crate::message::HEADER_LEN)?;
    if header[2] & 0x80 != 0 {
        return None;
    }
    let mut reply = vec![0; crate::message::HEADER_LEN];
    reply[..2].copy_from_slice(&header[..2]);
    // QR, the opcode as asked; RD echoed as RFC 1035 does; rcode FORMERR.
    reply[2] = 0x80 | (header[2] & 0x79);
    reply[3] = rcode::FORMERR;
    Some(reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{CLASS_IN, MessageWriter, parse};
    use meshdns_zone::{Name, RData};

    fn wire(name: &str) -> Vec<u8> {
        name.parse::<Name>().unwrap().wire().to_vec()
    }

    fn a(ip: &str) -> Vec<u8> {
        let mut out = Vec::new();
        RData::A(ip.parse().unwrap()).to_wire(&mut out);
        out
    }

    fn it(owner: &str, rtype: RType, class: u16, ttl: u32, rdata: Vec<u8>) -> Item {
        Item {
            owner: wire(owner),
            rtype: rtype.0,
            class,
            ttl,
            rdata,
        }
    }

    fn req(prerequisites: Vec<Item>, updates: Vec<Item>) -> Request {
        Request {
            zone: wire("example.org."),
            class: CLASS_IN,
            prerequisites,
            updates,
        }
    }

    fn zone() -> Rrsets {
        let mut z = Rrsets::new();
        z.insert((wire("www.example.org."), 1), (300, vec![a("192.0.2.1")]));
        z
    }

    #[test]
    fn adds_replace_and_deletes_follow_rfc_2136() {
        let z = zone();
        // Add a second address to www, and a new name.
        let r = req(
            vec![],
            vec![
                it("www.example.org.", RType::A, CLASS_IN, 60, a("192.0.2.2")),
                it("new.example.org.", RType::A, CLASS_IN, 60, a("192.0.2.9")),
            ],
        );
        let (z, changed) = process(&r, &z).unwrap();
        assert!(changed);
        assert_eq!(
            z[&(wire("www.example.org."), 1)],
            (60, vec![a("192.0.2.1"), a("192.0.2.2")])
        );
        // The same again changes nothing.
        assert!(!process(&r, &z).unwrap().1);
        // Delete one record (class NONE), then a whole RRset (class ANY), then a name.
        let r = req(
            vec![],
            vec![it(
                "www.example.org.",
                RType::A,
                CLASS_NONE,
                0,
                a("192.0.2.1"),
            )],
        );
        let (z, _) = process(&r, &z).unwrap();
        assert_eq!(z[&(wire("www.example.org."), 1)].1, vec![a("192.0.2.2")]);
        let r = req(
            vec![],
            vec![it("www.example.org.", RType::A, CLASS_ANY, 0, vec![])],
        );
        let (z, _) = process(&r, &z).unwrap();
        assert!(!z.contains_key(&(wire("www.example.org."), 1)));
        let r = req(
            vec![],
            vec![it("new.example.org.", RType(255), CLASS_ANY, 0, vec![])],
        );
        let (z, _) = process(&r, &z).unwrap();
        assert!(z.is_empty());
    }

    #[test]
    fn each_prerequisite_answers_its_own_rcode_and_nothing_is_applied() {
        let z = zone();
        let add = it("x.example.org.", RType::A, CLASS_IN, 60, a("192.0.2.5"));
        let cases = [
            // Name in use / not in use.
            (
                it("nope.example.org.", RType(255), CLASS_ANY, 0, vec![]),
                rcode::NXDOMAIN,
            ),
            (
                it("www.example.org.", RType(255), CLASS_NONE, 0, vec![]),
                rcode::YXDOMAIN,
            ),
            // RRset exists / does not.
            (
                it("www.example.org.", RType::AAAA, CLASS_ANY, 0, vec![]),
                rcode::NXRRSET,
            ),
            (
                it("www.example.org.", RType::A, CLASS_NONE, 0, vec![]),
                rcode::YXRRSET,
            ),
            // RRset exists with exactly these values.
            (
                it("www.example.org.", RType::A, CLASS_IN, 0, a("192.0.2.7")),
                rcode::NXRRSET,
            ),
            // Malformed: a TTL, data where none belongs; outside the zone.
            (
                it("www.example.org.", RType::A, CLASS_ANY, 5, vec![]),
                rcode::FORMERR,
            ),
            (
                it("www.example.org.", RType::A, CLASS_NONE, 0, a("192.0.2.1")),
                rcode::FORMERR,
            ),
            (
                it("www.example.net.", RType::A, CLASS_ANY, 0, vec![]),
                rcode::NOTZONE,
            ),
        ];
        for (pre, want) in cases {
            let r = req(vec![pre.clone()], vec![add.clone()]);
            assert_eq!(process(&r, &z).map(|_| ()), Err(want), "{pre:?}");
        }
        // The ones that hold.
        let ok = [
            it("www.example.org.", RType(255), CLASS_ANY, 0, vec![]),
            it("example.org.", RType(255), CLASS_ANY, 0, vec![]),
            it("nope.example.org.", RType(255), CLASS_NONE, 0, vec![]),
            it("www.example.org.", RType::A, CLASS_ANY, 0, vec![]),
            it("www.example.org.", RType::A, CLASS_IN, 0, a("192.0.2.1")),
            it("example.org.", RType::SOA, CLASS_ANY, 0, vec![]),
        ];
        let r = req(ok.to_vec(), vec![add]);
        assert!(process(&r, &z).unwrap().1);
    }

    #[test]
    fn in_place_updates_count_their_records_and_undo_exactly() {
        let z = zone();
        let mut live = z.clone();
        let r = req(
            vec![],
            vec![
                it("www.example.org.", RType(255), CLASS_ANY, 0, vec![]),
                it("new.example.org.", RType::A, CLASS_IN, 60, a("192.0.2.7")),
                it("new.example.org.", RType::A, CLASS_IN, 60, a("192.0.2.8")),
            ],
        );
        let undo = process_in_place(&r, &mut live).unwrap().expect("a change");
        let before: usize = z.values().map(|(_, s)| s.len()).sum();
        let after: usize = live.values().map(|(_, s)| s.len()).sum();
        assert_eq!(undo.records_added(&live), after as isize - before as isize);
        assert_eq!((live.clone(), true), process(&r, &z).unwrap());
        undo.restore(&mut live);
        assert_eq!(live, z);
        // The same again on the result: no change, nothing to undo.
        let mut twice = process(&r, &z).unwrap().0;
        assert!(process_in_place(&r, &mut twice).unwrap().is_none());
    }

    #[test]
    fn updates_outside_the_zone_or_of_meta_types_are_refused_whole() {
        let z = zone();
        let good = it("ok.example.org.", RType::A, CLASS_IN, 60, a("192.0.2.3"));
        for (bad, want) in [
            (
                it("x.example.net.", RType::A, CLASS_IN, 60, a("192.0.2.3")),
                rcode::NOTZONE,
            ),
            (
                it("x.example.org.", RType(255), CLASS_IN, 60, vec![1]),
                rcode::FORMERR,
            ),
            (
                it("x.example.org.", RType(252), CLASS_ANY, 0, vec![]),
                rcode::FORMERR,
            ),
            (
                it("x.example.org.", RType::A, CLASS_ANY, 30, vec![]),
                rcode::FORMERR,
            ),
            (
                it("x.example.org.", RType::A, CLASS_NONE, 30, a("192.0.2.3")),
                rcode::FORMERR,
            ),
            (
                it("x.example.org.", RType::A, 3, 30, a("192.0.2.3")),
                rcode::FORMERR,
            ),
        ] {
            let r = req(vec![], vec![good.clone(), bad.clone()]);
            assert_eq!(process(&r, &z).map(|_| ()), Err(want), "{bad:?}");
        }
    }

    #[test]
    fn cnames_stand_alone_the_soa_is_the_servers_and_the_apex_keeps_an_ns() {
        let mut z = zone();
        let ns = |n: &str| {
            let mut out = Vec::new();
            RData::Ns(n.parse().unwrap()).to_wire(&mut out);
            out
        };
        z.insert(
            (wire("example.org."), RType::NS.0),
            (300, vec![ns("ns1.example.org.")]),
        );
        let cname = {
            let mut out = Vec::new();
            RData::Cname("elsewhere.example.net.".parse().unwrap()).to_wire(&mut out);
            out
        };
        let r = req(
            vec![],
            vec![
                // A CNAME where data is: ignored.
                it(
                    "www.example.org.",
                    RType::CNAME,
                    CLASS_IN,
                    60,
                    cname.clone(),
                ),
                // An SOA: ignored (the serial is the server's).
                it("example.org.", RType::SOA, CLASS_IN, 60, vec![0; 22]),
                // The apex's last NS: kept; its NS RRset: kept.
                it(
                    "example.org.",
                    RType::NS,
                    CLASS_NONE,
                    0,
                    ns("ns1.example.org."),
                ),
                it("example.org.", RType::NS, CLASS_ANY, 0, vec![]),
                it("example.org.", RType(255), CLASS_ANY, 0, vec![]),
            ],
        );
        let (after, changed) = process(&r, &z).unwrap();
        assert!(!changed, "{after:?}");
        // Data where a CNAME is: ignored.
        let mut c = Rrsets::new();
        c.insert(
            (wire("alias.example.org."), RType::CNAME.0),
            (60, vec![cname]),
        );
        let r = req(
            vec![],
            vec![it(
                "alias.example.org.",
                RType::A,
                CLASS_IN,
                60,
                a("192.0.2.4"),
            )],
        );
        assert!(!process(&r, &c).unwrap().1);
    }

    #[test]
    fn an_update_message_is_read_section_by_section_with_names_decompressed() {
        let zone = wire("example.org.");
        let mut w = MessageWriter::new(7, 5 << 11, Some((&zone, RType::SOA.0, CLASS_IN)));
        w.put_record(0, &wire("www.example.org."), RType(255), CLASS_ANY, 0, &[]);
        let mut mx = Vec::new();
        RData::Mx {
            preference: 10,
            exchange: "mail.example.org.".parse().unwrap(),
        }
        .to_wire(&mut mx);
        w.put_record(1, &wire("Example.ORG."), RType::MX, CLASS_IN, 300, &mx);
        w.put_record(1, &wire("old.example.org."), RType::A, CLASS_ANY, 0, &[]);
        let bytes = w.finish();
        let msg = parse(&bytes).unwrap();
        let r = read(&msg).unwrap();
        assert_eq!(r.zone, zone);
        assert_eq!(r.prerequisites.len(), 1);
        assert_eq!(r.updates[0].owner, zone, "owners lower-cased");
        assert_eq!(r.updates[0].rdata, mx, "the exchange decompressed");
        assert!(r.updates[1].rdata.is_empty());
        // A zone section that is not one SOA question: FORMERR.
        let w = MessageWriter::new(7, 5 << 11, Some((&zone, RType::A.0, CLASS_IN)));
        let bytes = w.finish();
        assert_eq!(read(&parse(&bytes).unwrap()), Err(rcode::FORMERR));
    }

    #[test]
    fn bad_data_meta_types_and_the_apex_are_held_to_the_rules() {
        for (bad, want) in [
            (
                it("x.example.org.", RType::A, CLASS_IN, 30, vec![192, 0, 2]),
                rcode::FORMERR,
            ),
            (
                it("x.example.org.", RType(250), CLASS_IN, 30, vec![0]),
                rcode::FORMERR,
            ),
            (
                it("x.example.org.", RType(41), CLASS_IN, 30, vec![0]),
                rcode::FORMERR,
            ),
        ] {
            let r = req(vec![], vec![bad.clone()]);
            assert_eq!(process(&r, &zone()).map(|_| ()), Err(want), "{bad:?}");
        }
        let mut cname = Vec::new();
        RData::Cname("elsewhere.example.net.".parse().unwrap()).to_wire(&mut cname);
        // A CNAME at the apex (its SOA and NS are there): ignored.
        let r = req(
            vec![],
            vec![it("example.org.", RType::CNAME, CLASS_IN, 60, cname)],
        );
        assert!(!process(&r, &Rrsets::new()).unwrap().1);
        // The apex NS exists for a prerequisite (the server's).
        let r = req(
            vec![it("example.org.", RType::NS, CLASS_ANY, 0, vec![])],
            vec![it(
                "ok.example.org.",
                RType::A,
                CLASS_IN,
                60,
                a("192.0.2.8"),
            )],
        );
        assert!(process(&r, &Rrsets::new()).unwrap().1);
    }
}

#[cfg(test)]
mod unreadable {
    use super::*;

    fn respond_to(packet: &[u8]) -> Option<(Vec<u8>, u8)> {
        let policy = UpdatePolicy {
            keys: Vec::new(),
            grants: Vec::new(),
        };
        respond(
            &policy,
            packet,
            0,
            |_| ZoneIs::NotServed,
            |_| true,
            |_| Ok(()),
        )
    }

    #[test]
    fn two_zones_or_a_cut_section_get_formerr_with_the_header_alone() {
        // ID 0x1234, opcode UPDATE, ZOCOUNT 2: RFC 2136 §3.1.1 wants exactly one zone.
        let mut two = vec![0x12, 0x34, 0x28, 0x00, 0, 2, 0, 0, 0, 0, 0, 0];
        for _ in 0..2 {
            two.extend_from_slice(b"\x07example\x00\x00\x06\x00\x01");
        }
        let (reply, rc) = respond_to(&two).unwrap();
        assert_eq!(rc, rcode::FORMERR);
        assert_eq!(reply, [0x12, 0x34, 0xA8, 0x01, 0, 0, 0, 0, 0, 0, 0, 0]);
        // An update section that claims a record it does not hold.
        let mut cut = vec![0xAB, 0xCD, 0x28, 0x00, 0, 1, 0, 0, 0, 1, 0, 0];
        cut.extend_from_slice(b"\x07example\x00\x00\x06\x00\x01");
        assert_eq!(respond_to(&cut).unwrap().0[..4], [0xAB, 0xCD, 0xA8, 0x01]);
        // No header, or a response: nothing.
        assert!(respond_to(&[0x12, 0x34, 0x28]).is_none());
        let mut response = two.clone();
        response[2] |= 0x80;
        assert!(respond_to(&response).is_none());
    }

    #[test]
    fn counts_go_by_rcode() {
        let counts = UpdateCounts::default();
        counts.add(rcode::NOERROR);
        counts.add(rcode::NOTZONE);
        counts.add(rcode::NOTZONE);
        counts.add(200);
        let all: Vec<_> = counts.iter().filter(|(_, n)| *n > 0).collect();
        assert_eq!(all, [("NOERROR", 1), ("NOTZONE", 2)]);
    }
}
