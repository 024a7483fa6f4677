//! The secondary side of a transfer: checking the reply to the SOA query that starts each
//! refresh, reading an AXFR or IXFR reply (RFC 5936, RFC 1995) into the records it holds, and
//! applying differences to the records kept.

use std::borrow::Cow;
use std::collections::BTreeSet;

use meshdns_zone::{Name, RType};

use crate::content::Rr;
use crate::journal::Delta;
use crate::message::{CLASS_IN, Message, OPCODE_QUERY, parse, read_name};
use crate::tsig::ReplyVerifier;

/// What a reply brought.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// The primary has no newer serial.
    UpToDate(u32),
    /// The whole zone: the SOA first, then every other record.
    Full(Vec<Rr<'static>>),
    /// Differences from the serial asked about, in order, then the new SOA.
    Incremental(Vec<Delta>, Rr<'static>),
}

/// A record of a reply in transfer form: owner lower-cased, names in RDATA decompressed.
pub fn record(msg: &Message<'_>, r: &crate::message::Record) -> Option<Rr<'static>> {
    let rtype = RType(r.rtype);
    let mut rdata = Vec::with_capacity(r.rdata_len + 16);
    let start = r.rdata_at;
    let end = start + r.rdata_len;
    let name_at = |at: usize, out: &mut Vec<u8>| -> Option<usize> {
        let mut n = Vec::new();
        let next = read_name(msg.bytes, at, &mut n)?;
        out.extend(n.iter().map(u8::to_ascii_lowercase));
        Some(next)
    };
    match rtype {
        RType::NS | RType::CNAME | RType::PTR | RType(39) => {
            if name_at(start, &mut rdata)? != end {
                return None;
            }
        }
        RType::MX | RType(18) | RType(21) | RType(36) => {
            rdata.extend_from_slice(msg.bytes.get(start..start + 2)?);
            if name_at(start + 2, &mut rdata)? != end {
                return None;
            }
        }
        RType::SOA => {
            let at = name_at(start, &mut rdata)?;
            let at = name_at(at, &mut rdata)?;
            if end.checked_sub(at)? != 20 {
                return None;
            }
            rdata.extend_from_slice(&msg.bytes[at..end]);
        }
        _ => rdata.extend_from_slice(&msg.bytes[start..end]),
    }
    Some(Rr {
        owner: Cow::Owned(r.owner.clone()),
        rtype,
        rdata: Cow::Owned(rdata),
        ttl: r.ttl,
    })
}

/// The serial in SOA RDATA (uncompressed).
pub fn soa_serial(rdata: &[u8]) -> Option<u32> {
    let at = rdata.len().checked_sub(20)?;
    Some(u32::from_be_bytes(rdata[at..at + 4].try_into().ok()?))
}

/// Reads the messages of one reply in order and says when the reply is complete.
#[derive(Debug, Default)]
pub struct ReplyReader {
    rrs: Vec<Rr<'static>>,
    soas_seen: usize,
    done: bool,
    first_serial: Option<u32>,
}

impl ReplyReader {
    /// A reader for a reply to a request for `origin`'s zone.
    pub fn new() -> ReplyReader {
        ReplyReader::default()
    }

    /// Takes the answer records of the next message; returns whether the reply is complete.
    /// `asked` is the serial an IXFR asked from (`None` for AXFR).
    pub fn feed(&mut self, msg: &Message<'_>, asked: Option<u32>) -> Result<bool, String> {
        if self.done {
            return Err("records after the end of the transfer".into());
        }
        if msg.rcode() != 0 {
            return Err(format!("the primary answered rcode {}", msg.rcode()));
        }
        for r in &msg.answers {
            let rr = record(msg, r).ok_or("a record could not be read")?;
            if rr.rtype == RType::SOA {
                let serial = soa_serial(&rr.rdata).ok_or("a malformed SOA")?;
                let first = *self.first_serial.get_or_insert(serial);
                self.soas_seen += 1;
                // The closing SOA: the first serial again, after at least one other record,
                // in an AXFR (any position) or an IXFR's closing position (checked in finish).
                if self.rrs.len() > 1 && serial == first && self.closes() {
                    self.rrs.push(rr);
                    self.done = true;
                    return Ok(true);
                }
            }
            self.rrs.push(rr);
        }
        // A lone SOA at or below the serial asked: up to date.
        if self.rrs.len() == 1
            && let (Some(asked), Some(first)) = (asked, self.first_serial)
            && !crate::serial::serial_gt(first, asked)
        {
            self.done = true;
        }
        Ok(self.done)
    }

    /// Whether an SOA with the first serial ends the reply here: always in an AXFR-style reply;
    /// in an incremental one only where an addition section ends (an even number of SOAs
    /// before it besides the first: first, (from, to)*).
    fn closes(&self) -> bool {
        let incremental = self.rrs.get(1).is_some_and(|r| r.rtype == RType::SOA);
        !incremental || self.soas_seen.is_multiple_of(2)
    }

    /// What the reply brought.
    pub fn finish(self) -> Result<Received, String> {
        let first = self.first_serial.ok_or("an empty reply")?;
        if !self.done {
            return Err("the transfer ended early".into());
        }
        let mut rrs = self.rrs;
        if rrs.len() == 1 {
            return Ok(Received::UpToDate(first));
        }
        let last = rrs.pop().expect("two or more");
        if rrs.get(1).is_some_and(|r| r.rtype == RType::SOA) && rrs.len() > 2 {
            // SOA(new) [SOA(from) removed… SOA(to) added…]…
            let mut deltas = Vec::new();
            let mut it = rrs.into_iter().skip(1).peekable();
            while let Some(from) = it.next() {
                let mut removed = Vec::new();
                while it.peek().is_some_and(|r| r.rtype != RType::SOA) {
                    removed.push(it.next().expect("peeked"));
                }
                let to = it.next().ok_or("a difference without its new SOA")?;
                let mut added = vec![to.clone()];
                while it.peek().is_some_and(|r| r.rtype != RType::SOA) {
                    added.push(it.next().expect("peeked"));
                }
                removed.insert(0, from.clone());
                deltas.push(Delta {
                    from: soa_serial(&from.rdata).ok_or("SOA")?,
                    to: soa_serial(&to.rdata).ok_or("SOA")?,
                    removed,
                    added,
                });
            }
            return Ok(Received::Incremental(deltas, last));
        }
        Ok(Received::Full(rrs))
    }
}

/// What a reply to the SOA query said, once [`check_soa_reply`] found it is the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SoaReply {
    /// The primary's serial: the refresh may count it.
    Serial(u32),
    /// TC set: ask again over TCP (RFC 1035 §4.2.1). Not signature-checked; the TCP answer is.
    Truncated,
    /// The primary answered, but not with the zone's SOA (an error rcode, no SOA).
    Failed(String),
}

/// Checks that `reply` answers the SOA query `query` for `origin` (RFC 5452 §9.1: the same ID
/// and question; a response with opcode QUERY), and, when the query was signed, that the reply
/// verifies with `verifier` (RFC 8945 §5.3.2). `Err` says why the reply is not the one waited
/// for: the caller ignores it and keeps waiting, as resolvers do, so a forged datagram can
/// neither end the wait nor count as a refresh.
///
/// The verifier is used on a copy: a forged reply does not disturb the chain of MACs.
pub fn check_soa_reply(
    query: &[u8],
    reply: &[u8],
    origin: &Name,
    verifier: Option<&ReplyVerifier>,
) -> Result<SoaReply, String> {
    let q = parse(query).map_err(|e| format!("the query: {e}"))?;
    let m = parse(reply).map_err(|e| e.to_string())?;
    if !m.is_response() || m.opcode() != OPCODE_QUERY {
        return Err("not a response to a query".into());
    }
    if m.id != q.id {
        return Err(format!("ID {} where the query had {}", m.id, q.id));
    }
    if m.qname_lower != origin.wire() || m.qtype != RType::SOA.0 || m.qclass != CLASS_IN {
        return Err("another question than the query's".into());
    }
    if m.flags & 0x0200 != 0 {
        return Ok(SoaReply::Truncated);
    }
    if let Some(v) = verifier {
        v.clone().check(&m)?;
    }
    if m.rcode() != 0 {
        return Ok(SoaReply::Failed(format!(
            "the primary answered the SOA query with rcode {}",
            m.rcode()
        )));
    }
    Ok(m.answers
        .iter()
        .find(|r| r.rtype == RType::SOA.0 && r.owner == origin.wire())
        .and_then(|r| m.soa_serial(r))
        .map_or_else(
            || {
                SoaReply::Failed(
                    "no SOA in the primary's answer (is it authoritative for the zone?)".into(),
                )
            },
            SoaReply::Serial,
        ))
}

/// Applies `deltas` (each removing its old SOA and adding its new one) to `records`, the zone
/// as kept (the SOA among them). Fails, changing nothing, when a difference does not start
/// at the serial kept or removes a record that is not there: the caller then asks for AXFR.
pub fn apply(
    records: &BTreeSet<Rr<'static>>,
    deltas: &[Delta],
) -> Result<BTreeSet<Rr<'static>>, String> {
    let mut out = records.clone();
    for d in deltas {
        for r in &d.removed {
            // Removal matches name, type and data (RFC 1995 §3: the TTL does not matter); the
            // old SOA is whatever SOA is held.
            let lo = Rr {
                ttl: 0,
                rdata: if r.rtype == RType::SOA {
                    Cow::Owned(Vec::new())
                } else {
                    r.rdata.clone()
                },
                ..r.clone()
            };
            let hit = out
                .range(lo..)
                .next()
                .filter(|x| {
                    x.owner == r.owner
                        && x.rtype == r.rtype
                        && (r.rtype == RType::SOA || x.rdata == r.rdata)
                })
                .cloned()
                .ok_or_else(|| format!("the difference to {} removes a record not held", d.to))?;
            out.remove(&hit);
        }
        for r in &d.added {
            out.insert(r.clone());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::MessageWriter;
    use crate::tsig::{self, Algorithm, Check, Key, Signer, Verified};

    fn soa(serial: u32) -> Vec<u8> {
        let mut rd = b"\x02ns\x07example\x00\x0ahostmaster\x07example\x00".to_vec();
        for n in [serial, 3600, 600, 86400, 60] {
            rd.extend_from_slice(&n.to_be_bytes());
        }
        rd
    }

    fn msg(rrs: &[(RType, Vec<u8>)]) -> Vec<u8> {
        let mut w = MessageWriter::new(1, 0x8400, Some((b"\x07example\x00", 251, 1)));
        for (t, rd) in rrs {
            let owner: &[u8] = if *t == RType::SOA {
                b"\x07example\x00"
            } else {
                b"\x01a\x07example\x00"
            };
            w.put_record(0, owner, *t, 1, 60, rd);
        }
        w.finish()
    }

    fn read(messages: &[Vec<u8>], asked: Option<u32>) -> Received {
        let mut r = ReplyReader::new();
        for (i, m) in messages.iter().enumerate() {
            let done = r.feed(&parse(m).unwrap(), asked).unwrap();
            assert_eq!(
                done,
                i == messages.len() - 1,
                "done exactly at the last message"
            );
        }
        r.finish().unwrap()
    }

    #[test]
    fn reads_axfr_ixfr_and_up_to_date_replies() {
        let a = |x: u8| (RType::A, vec![192, 0, 2, x]);
        let full = read(
            &[
                msg(&[(RType::SOA, soa(5)), a(1)]),
                msg(&[a(2), (RType::SOA, soa(5))]),
            ],
            None,
        );
        let Received::Full(rrs) = full else {
            panic!("{full:?}")
        };
        assert_eq!(rrs.len(), 3);
        let inc = read(
            &[msg(&[
                (RType::SOA, soa(7)),
                (RType::SOA, soa(5)),
                a(1),
                (RType::SOA, soa(6)),
                a(2),
                (RType::SOA, soa(6)),
                (RType::SOA, soa(7)),
                (RType::SOA, soa(7)),
            ])],
            Some(5),
        );
        let Received::Incremental(deltas, last) = inc else {
            panic!("{inc:?}")
        };
        assert_eq!(
            deltas.iter().map(|d| (d.from, d.to)).collect::<Vec<_>>(),
            [(5, 6), (6, 7)]
        );
        assert_eq!(soa_serial(&last.rdata), Some(7));
        assert_eq!(
            read(&[msg(&[(RType::SOA, soa(5))])], Some(5)),
            Received::UpToDate(5)
        );
        // An IXFR answered with the whole zone.
        let Received::Full(rrs) = read(
            &[msg(&[(RType::SOA, soa(9)), a(3), (RType::SOA, soa(9))])],
            Some(5),
        ) else {
            panic!()
        };
        assert_eq!(rrs.len(), 2);
    }

    /// The SOA query for `example.` with ID 0x1234, signed with `key` when given.
    fn soa_query(key: Option<&Key>) -> (Vec<u8>, Option<ReplyVerifier>) {
        let mut q = MessageWriter::new(0x1234, 0, Some((b"\x07example\x00", 6, 1))).finish();
        let verifier = key.map(|k| {
            let mut s = Signer::request(k, NOW);
            s.sign(&mut q, 0, &[]);
            ReplyVerifier::new(k, s.last_mac().unwrap().to_vec())
        });
        (q, verifier)
    }

    const NOW: u64 = 1_800_000_000;

    /// A reply: `id`, `flags`, question (`qname`, `qtype`), and the SOA at `serial`.
    fn soa_reply(id: u16, flags: u16, qname: &[u8], qtype: u16, serial: u32) -> Vec<u8> {
        let mut w = MessageWriter::new(id, flags, Some((qname, qtype, 1)));
        w.put_record(0, b"\x07example\x00", RType::SOA, 1, 60, &soa(serial));
        w.finish()
    }

    #[test]
    fn an_soa_reply_counts_only_with_the_query_s_id_and_question() {
        let origin: Name = "example.".parse().unwrap();
        let (q, _) = soa_query(None);
        let check = |r: &[u8]| check_soa_reply(&q, r, &origin, None);
        let zone = b"\x07example\x00";
        assert_eq!(
            check(&soa_reply(0x1234, 0x8400, zone, 6, 5)),
            Ok(SoaReply::Serial(5))
        );
        // Case in the question does not matter (0x20).
        assert_eq!(
            check(&soa_reply(0x1234, 0x8400, b"\x07EXAMPLE\x00", 6, 5)),
            Ok(SoaReply::Serial(5))
        );
        let refused = [
            ("another ID", soa_reply(0x1235, 0x8400, zone, 6, 5)),
            ("not a response", soa_reply(0x1234, 0x0400, zone, 6, 5)),
            ("opcode NOTIFY", soa_reply(0x1234, 0xA400, zone, 6, 5)),
            (
                "another name",
                soa_reply(0x1234, 0x8400, b"\x05other\x00", 6, 5),
            ),
            ("another type", soa_reply(0x1234, 0x8400, zone, 1, 5)),
            ("no question", {
                let mut w = MessageWriter::new(0x1234, 0x8400, None);
                w.put_record(0, zone, RType::SOA, 1, 60, &soa(5));
                w.finish()
            }),
            ("garbage", vec![0x12, 0x34, 0x84]),
        ];
        for (what, reply) in refused {
            assert!(check(&reply).is_err(), "{what} is not the reply");
        }
        assert_eq!(
            check(&soa_reply(0x1234, 0x8600, zone, 6, 5)),
            Ok(SoaReply::Truncated)
        );
        assert!(matches!(
            check(&soa_reply(0x1234, 0x8405, zone, 6, 5)),
            Ok(SoaReply::Failed(_))
        ));
    }

    #[test]
    fn with_a_key_only_a_reply_signed_over_the_query_counts() {
        let origin: Name = "example.".parse().unwrap();
        let key = Key::new("xfr.".parse().unwrap(), Algorithm::HmacSha256, b"secret");
        let other = Key::new("xfr.".parse().unwrap(), Algorithm::HmacSha256, b"guess");
        let (q, verifier) = soa_query(Some(&key));
        let Check::Signed(verified) =
            tsig::check(&parse(&q).unwrap(), std::slice::from_ref(&key), NOW)
        else {
            panic!("the query is signed")
        };
        let zone = b"\x07example\x00";
        let unsigned = soa_reply(0x1234, 0x8400, zone, 6, 5);
        let mut forged = unsigned.clone();
        let forger = Verified {
            key: other,
            request_mac: verified.request_mac.clone(),
        };
        Signer::reply(&forger, NOW).sign(&mut forged, 0, &[]);
        let mut good = unsigned.clone();
        Signer::reply(&verified, NOW).sign(&mut good, 0, &[]);
        let check = |r: &[u8]| check_soa_reply(&q, r, &origin, verifier.as_ref());
        assert!(check(&unsigned).is_err(), "unsigned");
        assert!(check(&forged).is_err(), "signed with another secret");
        // The forgeries left the verifier as it was: the real reply still verifies.
        assert_eq!(check(&good), Ok(SoaReply::Serial(5)));
        let mut tampered = good.clone();
        tampered[14] ^= 0x20; // the question's case: the same question, another MAC
        assert!(check(&tampered).is_err(), "changed after signing");
    }

    #[test]
    fn applies_differences_or_refuses_them() {
        let rr = |t: RType, rd: Vec<u8>| Rr {
            owner: Cow::Owned(if t == RType::SOA {
                b"\x07example\x00".to_vec()
            } else {
                b"\x01a\x07example\x00".to_vec()
            }),
            rtype: t,
            rdata: Cow::Owned(rd),
            ttl: 60,
        };
        let held: BTreeSet<_> = [rr(RType::SOA, soa(5)), rr(RType::A, vec![1, 1, 1, 1])].into();
        let d = Delta {
            from: 5,
            to: 6,
            removed: vec![rr(RType::SOA, soa(5)), rr(RType::A, vec![1, 1, 1, 1])],
            added: vec![rr(RType::SOA, soa(6)), rr(RType::A, vec![2, 2, 2, 2])],
        };
        let new = apply(&held, std::slice::from_ref(&d)).unwrap();
        assert!(new.contains(&rr(RType::A, vec![2, 2, 2, 2])) && new.len() == 2);
        assert!(apply(&new, &[d]).is_err(), "removes what is not held");
    }
}
