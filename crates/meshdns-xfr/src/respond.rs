//! Answering AXFR (RFC 5936) and IXFR (RFC 1995) requests: access control, TSIG, and the
//! messages of the reply.

use meshdns_zone::{Name, RType};

use crate::content::{Rr, Version};
use crate::journal::Delta;
use crate::message::{self, CLASS_IN, Message, MessageWriter};
use crate::primary::{Ixfr, Primary};
use crate::tsig::{self, Check, Key, Signer, Verified};

/// Response codes used here.
mod rcode {
    pub const FORMERR: u8 = 1;
    pub const REFUSED: u8 = 5;
    pub const NOTAUTH: u8 = 9;
}

/// A message is closed once it passes this size (several records per message, RFC 5936 §2.2;
/// well under the 65,535 a TCP frame allows, with room for a TSIG).
const MESSAGE_TARGET: usize = 16 * 1024;

/// Who may transfer.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Every TSIG key known (requests signed with another get BADKEY).
    pub keys: Vec<Key>,
    /// Keys whose signed requests are allowed from any address.
    pub allowed_keys: Vec<Name>,
}

/// The kind of transfer a reply was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A whole zone for an AXFR.
    Axfr,
    /// Differences for an IXFR.
    Ixfr,
    /// The whole zone for an IXFR the journal could not serve.
    IxfrFull,
    /// The current SOA only (IXFR from the current serial, or over UDP).
    UpToDate,
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Sent.
    Sent(Kind),
    /// Refused by the access rules.
    Refused,
    /// Not a zone served here.
    NotAuth,
    /// A TSIG error (BADKEY, BADSIG, BADTIME, BADTRUNC).
    Tsig(u16),
    /// Unreadable.
    FormErr,
}

/// How a reply went (its messages went to the sink, in order).
#[derive(Debug)]
pub struct Reply {
    /// Messages sent.
    pub messages: usize,
    /// What happened.
    pub outcome: Outcome,
    /// The zone asked for.
    pub zone: Option<Name>,
    /// Records sent.
    pub records: usize,
}

/// [`respond`] with the messages collected.
pub fn respond_collected(
    primary: &Primary,
    policy: &Policy,
    request: &[u8],
    address_allowed: bool,
    udp: bool,
    now: u64,
) -> Option<(Reply, Vec<Vec<u8>>)> {
    let mut messages = Vec::new();
    let reply = respond(
        primary,
        policy,
        request,
        address_allowed,
        udp,
        now,
        &mut |m| messages.push(m),
    )?;
    Some((reply, messages))
}

/// The primaries a transfer reads a zone from: a view's own (the zones the view changes, with
/// their serials and journals), then the one of the zones every client shares.
#[derive(Debug, Clone, Copy)]
pub struct Primaries<'a> {
    /// The view's zones, when the transfer is for a view.
    pub own: Option<&'a Primary>,
    /// Every other zone.
    pub shared: &'a Primary,
}

impl<'a> Primaries<'a> {
    /// The zones of one primary.
    pub fn one(primary: &'a Primary) -> Primaries<'a> {
        Primaries {
            own: None,
            shared: primary,
        }
    }

    /// The current version of `origin` (the view's own first).
    pub fn version(&self, origin: &Name) -> Option<Version> {
        self.holding(origin).map(|(_, v)| v)
    }

    /// The primary that holds `origin` (the view's own first).
    fn holding(&self, origin: &Name) -> Option<(&'a Primary, Version)> {
        self.own
            .and_then(|p| Some((p, p.version(origin)?)))
            .or_else(|| Some((self.shared, self.shared.version(origin)?)))
    }
}

/// Answers `request` if it is an AXFR or IXFR (otherwise `None`: an ordinary query), handing
/// each message to `sink` as soon as it is complete (a large zone is sent while the rest is
/// still being written). `address_allowed` says whether the client's address is in the
/// transfer ACL; `udp` limits the reply to one message (IXFR only; AXFR over UDP is refused).
pub fn respond(
    primary: &Primary,
    policy: &Policy,
    request: &[u8],
    address_allowed: bool,
    udp: bool,
    now: u64,
    sink: &mut dyn FnMut(Vec<u8>),
) -> Option<Reply> {
    let one = |_: Option<&Name>| Primaries::one(primary);
    respond_from(&one, policy, request, address_allowed, udp, now, sink)
}

/// [`respond`] from the primaries `select` gives for the key the request is signed with
/// (`None`: unsigned): the view a secondary's key or address selects.
pub fn respond_from<'p>(
    select: &dyn Fn(Option<&Name>) -> Primaries<'p>,
    policy: &Policy,
    request: &[u8],
    address_allowed: bool,
    udp: bool,
    now: u64,
    sink: &mut dyn FnMut(Vec<u8>),
) -> Option<Reply> {
    let msg = message::parse(request).ok()?;
    if msg.is_response() || msg.opcode() != message::OPCODE_QUERY {
        return None;
    }
    let qtype = RType(msg.qtype);
    if qtype != RType::AXFR && qtype != RType::IXFR {
        return None;
    }
    // The client's EDNS payload, echoed in the first message (RFC 5936 §2.2.5).
    let edns = msg
        .additional
        .iter()
        .find(|r| r.rtype == RType::OPT.0)
        .map(|_| ());
    let mut reply = |messages: Vec<Vec<u8>>, outcome| {
        let n = messages.len();
        messages.into_iter().for_each(&mut *sink);
        Some(Reply {
            messages: n,
            outcome,
            zone: None,
            records: 0,
        })
    };
    let verified = match tsig::check(&msg, &policy.keys, now) {
        Check::Unsigned => None,
        Check::Signed(v) => Some(v),
        Check::Malformed => {
            return reply(
                vec![error(&msg, rcode::FORMERR, None, now)],
                Outcome::FormErr,
            );
        }
        Check::Failed {
            error: e,
            signer,
            tsig,
        } => {
            return reply(
                vec![tsig_error(&msg, e, signer, &tsig, now)],
                Outcome::Tsig(e),
            );
        }
    };
    let key_allowed = verified
        .as_ref()
        .is_some_and(|v| policy.allowed_keys.contains(&v.key.name));
    if !(address_allowed || key_allowed) {
        return reply(
            vec![error(&msg, rcode::REFUSED, verified.as_ref(), now)],
            Outcome::Refused,
        );
    }
    if msg.qclass != CLASS_IN {
        return reply(
            vec![error(&msg, rcode::REFUSED, verified.as_ref(), now)],
            Outcome::Refused,
        );
    }
    let origin = Name::from_wire(&msg.qname_lower)?;
    let primaries = select(verified.as_ref().map(|v| &v.key.name));
    let Some((primary, version)) = primaries.holding(&origin) else {
        return reply(
            vec![error(&msg, rcode::NOTAUTH, verified.as_ref(), now)],
            Outcome::NotAuth,
        );
    };
    let plan = if qtype == RType::AXFR {
        if udp {
            return reply(
                vec![error(&msg, rcode::REFUSED, verified.as_ref(), now)],
                Outcome::Refused,
            );
        }
        Ixfr::Full(version)
    } else {
        let client = msg
            .authority
            .iter()
            .find(|r| r.rtype == RType::SOA.0)
            .and_then(|r| msg.soa_serial(r));
        let Some(client) = client else {
            return reply(
                vec![error(&msg, rcode::FORMERR, verified.as_ref(), now)],
                Outcome::FormErr,
            );
        };
        match primary.ixfr(&origin, client)? {
            Ixfr::UpToDate(v) => Ixfr::UpToDate(v),
            // RFC 1995 §2: over UDP, a reply that would not fit is the current SOA alone, and
            // the client comes back over TCP.
            other if udp => Ixfr::UpToDate(match other {
                Ixfr::Delta(v, _) | Ixfr::Full(v) | Ixfr::UpToDate(v) => v,
            }),
            other => other,
        }
    };
    let mut out = Out::new(&msg, verified.as_ref(), now, sink);
    out.edns = edns.is_some();
    let kind = match &plan {
        Ixfr::UpToDate(v) => {
            out.soa(v, v.serial);
            Kind::UpToDate
        }
        Ixfr::Delta(v, delta) => {
            write_delta(&mut out, v, delta);
            Kind::Ixfr
        }
        Ixfr::Full(v) => {
            out.soa(v, v.serial);
            v.for_each_record(|rr| out.record(rr));
            out.soa(v, v.serial);
            if qtype == RType::AXFR {
                Kind::Axfr
            } else {
                Kind::IxfrFull
            }
        }
    };
    let records = out.records;
    Some(Reply {
        messages: out.finish(),
        outcome: Outcome::Sent(kind),
        zone: Some(origin),
        records,
    })
}

/// current SOA, old SOA, removed, current SOA, added, current SOA (RFC 1995 §4).
fn write_delta(out: &mut Out<'_>, v: &Version, delta: &Delta) {
    out.soa(v, v.serial);
    out.soa(v, delta.from);
    for rr in &delta.removed {
        out.record(rr);
    }
    out.soa(v, delta.to);
    for rr in &delta.added {
        out.record(rr);
    }
    out.soa(v, v.serial);
}

/// The reply's messages as they fill.
struct Out<'m> {
    request: &'m Message<'m>,
    current: Option<MessageWriter>,
    sink: &'m mut dyn FnMut(Vec<u8>),
    sent: usize,
    /// The compression table of the last message, reused.
    spare: crate::message::Table,
    signer: Option<Signer>,
    records: usize,
    /// Whether the request had EDNS (an OPT goes in the first message).
    edns: bool,
}

/// A message never grows past this (a TCP frame holds 65,535 bytes; room is left for a TSIG).
const MESSAGE_MAX: usize = 65_535 - 512;

impl<'m> Out<'m> {
    fn new(
        request: &'m Message<'m>,
        verified: Option<&Verified>,
        now: u64,
        sink: &'m mut dyn FnMut(Vec<u8>),
    ) -> Out<'m> {
        Out {
            request,
            current: None,
            sink,
            sent: 0,
            spare: Default::default(),
            signer: verified.map(|v| Signer::reply(v, now)),
            records: 0,
            edns: false,
        }
    }

    /// The message to add a record of about `size` bytes to.
    fn writer(&mut self, size: usize) -> &mut MessageWriter {
        if self
            .current
            .as_ref()
            .is_some_and(|w| w.len() > MESSAGE_TARGET || w.len() + size > MESSAGE_MAX)
        {
            self.close();
        }
        let first = self.sent == 0;
        let r = self.request;
        let spare = &mut self.spare;
        self.current.get_or_insert_with(|| {
            let q = first.then_some((&r.qname[..], r.qtype, r.qclass));
            MessageWriter::with_table(r.id, reply_flags(r, 0), q, std::mem::take(spare))
        })
    }

    fn close(&mut self) {
        if let Some(mut w) = self.current.take() {
            if self.sent == 0 && self.edns {
                // OPT: owner root, class = our UDP payload size, TTL 0 (version 0, no flags).
                w.put_record(2, b"\x00", RType::OPT, 1232, 0, &[]);
            }
            let (mut m, table) = w.finish_with_table();
            self.spare = table;
            if let Some(s) = &mut self.signer {
                s.sign(&mut m, 0, &[]);
            }
            (self.sink)(m);
            self.sent += 1;
        }
    }

    fn soa(&mut self, v: &Version, serial: u32) {
        let mut rd = v.soa_rdata();
        crate::content::set_serial(&mut rd, serial);
        let ttl = v.soa_ttl();
        let origin = v.zone.origin().wire().to_vec();
        self.writer(origin.len() + 10 + rd.len()).put_record(
            0,
            &origin,
            RType::SOA,
            CLASS_IN,
            ttl,
            &rd,
        );
        self.records += 1;
    }

    fn record(&mut self, rr: &Rr<'_>) {
        self.writer(rr.owner.len() + 10 + rr.rdata.len())
            .put_record(0, &rr.owner, rr.rtype, CLASS_IN, rr.ttl, &rr.rdata);
        self.records += 1;
    }

    /// Sends the last message; returns how many were sent.
    fn finish(mut self) -> usize {
        self.close();
        self.sent
    }
}

fn reply_flags(request: &Message<'_>, rcode: u8) -> u16 {
    0x8000 | 0x0400 | (request.flags & 0x7900) | u16::from(rcode)
}

pub(crate) fn header_only(request: &Message<'_>, rcode: u8) -> Vec<u8> {
    MessageWriter::new(
        request.id,
        reply_flags(request, rcode) & !0x0400,
        Some((&request.qname[..], request.qtype, request.qclass)),
    )
    .finish()
}

/// NOTAUTH with TSIG error `e`: unsigned for BADKEY and BADSIG, signed for BADTIME
/// (RFC 8945 §5.2).
pub(crate) fn tsig_error(
    request: &Message<'_>,
    e: u16,
    signer: Option<Verified>,
    tsig: &tsig::Tsig,
    now: u64,
) -> Vec<u8> {
    let mut m = header_only(request, rcode::NOTAUTH);
    match signer {
        // RFC 8945 §5.2.3: Time Signed is the request's, so that the client can check the
        // reply against its own clock; the server's time goes in Other Data.
        Some(v) => Signer::reply(&v, tsig.time_signed).sign(&mut m, e, &now.to_be_bytes()[2..]),
        None => tsig::append_unsigned(&mut m, tsig, now, e),
    }
    m
}

/// Signs `answer`, the reply `answer()` wrote to the ordinary query `request`, when `request`
/// carries a TSIG (RFC 8945 §5.3). A secondary with a key signs the SOA query of each refresh
/// and accepts only a signed reply to it (meshdns does, as BIND, NSD and Knot do). A TSIG that
/// does not verify replaces the answer with NOTAUTH and the TSIG error, as for transfers
/// (`Some(Err)`, with the outcome to count; an unreadable TSIG: FORMERR). `None`: the request
/// is unsigned, and its answer is left as it is.
pub fn sign_answer(
    policy: &Policy,
    request: &[u8],
    answer: &mut Vec<u8>,
    now: u64,
    view_answer: impl FnOnce(&Name) -> Option<Vec<u8>>,
) -> Option<Result<(), Outcome>> {
    sign_answer_with(&policy.keys, request, answer, now, view_answer)
}

/// [`sign_answer`] with the keys given (a secondary zone's own key, for the reply to a NOTIFY).
pub fn sign_answer_with(
    keys: &[Key],
    request: &[u8],
    answer: &mut Vec<u8>,
    now: u64,
    view_answer: impl FnOnce(&Name) -> Option<Vec<u8>>,
) -> Option<Result<(), Outcome>> {
    // No additional records: no TSIG, and nothing to parse.
    if request.get(10..12).is_none_or(|ar| ar == [0, 0]) || answer.len() < message::HEADER_LEN {
        return None;
    }
    let msg = message::parse(request).ok()?;
    match tsig::check(&msg, keys, now) {
        Check::Unsigned => None,
        Check::Signed(v) => {
            // A key that selects a view is answered from that view (the serial its
            // transfers carry).
            if let Some(other) = view_answer(&v.key.name) {
                *answer = other;
            }
            Signer::reply(&v, now).sign(answer, 0, &[]);
            Some(Ok(()))
        }
        Check::Malformed => {
            *answer = error(&msg, rcode::FORMERR, None, now);
            Some(Err(Outcome::FormErr))
        }
        Check::Failed {
            error: e,
            signer,
            tsig,
        } => {
            *answer = tsig_error(&msg, e, signer, &tsig, now);
            Some(Err(Outcome::Tsig(e)))
        }
    }
}

pub(crate) fn error(
    request: &Message<'_>,
    rcode: u8,
    verified: Option<&Verified>,
    now: u64,
) -> Vec<u8> {
    let mut m = header_only(request, rcode);
    if let Some(v) = verified {
        Signer::reply(v, now).sign(&mut m, 0, &[]);
    }
    m
}

#[cfg(test)]
mod tests {
    use meshdns_zone::{BuildDefaults, CatalogBuilder, RData, Record};

    use super::*;
    use crate::message::{MessageWriter, parse};

    fn primary(txt_records: usize, txt_len: usize) -> Primary {
        let origin: Name = "example.".parse().unwrap();
        let mut b = CatalogBuilder::new(BuildDefaults {
            default_ttl: 60,
            serial: 1,
        });
        for i in 0..txt_records {
            let text = vec![b'a' + (i % 26) as u8; txt_len];
            let record = Record {
                name: format!("t{i}.example.").parse().unwrap(),
                ttl: 60,
                data: RData::Txt(text.chunks(255).map(Box::from).collect()),
            };
            b.add(&origin, record, 0).unwrap();
        }
        let (mut catalog, _) = b.build();
        let p = Primary::new(None, 1000, true);
        p.update(&mut catalog, 1_800_000_000);
        p
    }

    fn axfr(class: u16, edns: bool) -> Vec<u8> {
        let mut w = MessageWriter::new(3, 0, Some((b"\x07example\x00", 252, class)));
        if edns {
            w.put_record(2, b"\x00", RType::OPT, 4096, 0, &[]);
        }
        w.finish()
    }

    #[test]
    fn a_view_serves_its_own_zones_first_and_a_zone_new_to_it_starts_above_the_floor() {
        let shared = primary(1, 10);
        let origin: Name = "example.".parse().unwrap();
        let at = shared.version(&origin).unwrap().serial;
        // The view changes the zone: its primary takes it over, above the shared serial.
        let view = Primary::new(None, 1000, true);
        let mut b = CatalogBuilder::new(BuildDefaults {
            default_ttl: 60,
            serial: 1,
        });
        b.declare(&origin);
        let (mut own, _) = b.build();
        let floor = at.wrapping_add(1_000);
        view.update_above(&mut own, 1_800_000_000, &|o| {
            (o == &origin).then_some(floor)
        });
        let own_serial = view.version(&origin).unwrap().serial;
        assert!(
            crate::serial::serial_gt(own_serial, floor),
            "{own_serial} {floor}"
        );
        let both = Primaries {
            own: Some(&view),
            shared: &shared,
        };
        assert_eq!(both.version(&origin).unwrap().serial, own_serial);
        assert_eq!(Primaries::one(&shared).version(&origin).unwrap().serial, at);
        let other: Name = "other.".parse().unwrap();
        assert!(both.version(&other).is_none());
    }

    #[test]
    fn big_records_split_messages_below_a_tcp_frame_and_edns_is_echoed() {
        // 40 records of 20 KB: several must not share a message.
        let p = primary(40, 20_000);
        let (reply, messages) =
            respond_collected(&p, &Policy::default(), &axfr(1, true), true, false, 0).unwrap();
        assert_eq!(reply.outcome, Outcome::Sent(Kind::Axfr));
        assert!(
            messages.iter().all(|m| m.len() <= 65_535),
            "every message fits a frame"
        );
        let first = parse(&messages[0]).unwrap();
        assert!(
            first.additional.iter().any(|r| r.rtype == RType::OPT.0),
            "OPT echoed"
        );
        assert!(
            messages[1..]
                .iter()
                .all(|m| parse(m).unwrap().additional.is_empty())
        );
        let records: usize = messages
            .iter()
            .map(|m| parse(m).unwrap().answers.len())
            .sum();
        assert_eq!(records, 40 + 3, "SOA, NS, 40 TXT, SOA");
    }

    #[test]
    fn answers_to_signed_queries_are_signed_and_bad_signatures_refused() {
        let key = Key::new(
            "xfr.".parse().unwrap(),
            tsig::Algorithm::HmacSha256,
            b"secret",
        );
        let policy = Policy {
            keys: vec![key.clone()],
            allowed_keys: Vec::new(),
        };
        let now = 1_800_000_000;
        let query = MessageWriter::new(7, 0, Some((b"\x07example\x00", 6, 1))).finish();
        let answer = MessageWriter::new(7, 0x8400, Some((b"\x07example\x00", 6, 1))).finish();

        let mut out = answer.clone();
        assert!(sign_answer(&policy, &query, &mut out, now, |_| None).is_none());
        assert_eq!(out, answer, "an unsigned query's answer is left alone");

        let mut signed = query.clone();
        let mut signer = Signer::request(&key, now);
        signer.sign(&mut signed, 0, &[]);
        let mut out = answer.clone();
        assert_eq!(
            sign_answer(&policy, &signed, &mut out, now, |_| None),
            Some(Ok(()))
        );
        let mut verifier = tsig::ReplyVerifier::new(&key, signer.last_mac().unwrap().to_vec());
        verifier.check(&parse(&out).unwrap()).unwrap();

        let mut out = answer.clone();
        let outcome = sign_answer(&Policy::default(), &signed, &mut out, now, |_| None);
        assert_eq!(outcome, Some(Err(Outcome::Tsig(tsig::error::BADKEY))));
        assert_eq!(parse(&out).unwrap().rcode(), rcode::NOTAUTH);
    }

    #[test]
    fn other_classes_and_unknown_zones_are_not_transferred() {
        let p = primary(1, 10);
        let (chaos, _) =
            respond_collected(&p, &Policy::default(), &axfr(3, false), true, false, 0).unwrap();
        assert_eq!(chaos.outcome, Outcome::Refused);
        let (denied, denied_messages) =
            respond_collected(&p, &Policy::default(), &axfr(1, false), false, false, 0).unwrap();
        assert_eq!(
            (denied.outcome, parse(&denied_messages[0]).unwrap().rcode()),
            (Outcome::Refused, 5)
        );
        let mut other = MessageWriter::new(3, 0, Some((b"\x05other\x00", 252, 1))).finish();
        let (r, _) = respond_collected(&p, &Policy::default(), &other, true, false, 0).unwrap();
        assert_eq!(r.outcome, Outcome::NotAuth);
        other[2] = 0x80; // a response: not ours to answer
        assert!(respond_collected(&p, &Policy::default(), &other, true, false, 0).is_none());
        let (udp, _) =
            respond_collected(&p, &Policy::default(), &axfr(1, false), true, true, 0).unwrap();
        assert_eq!(udp.outcome, Outcome::Refused, "AXFR over UDP");
    }
}
