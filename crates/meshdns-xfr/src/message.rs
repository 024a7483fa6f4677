//! Reading transfer and NOTIFY messages, and writing transfer responses.
//!
//! `meshdns_zone::wire` writes answers without allocating and compresses against a small fixed
//! table of names borrowed from the zone; a transfer writes names it builds (a published key's
//! owners) into messages of many records, so it has its own writer with an owned table.

use std::collections::HashMap;

use meshdns_zone::RType;

/// Message header length.
pub const HEADER_LEN: usize = 12;
/// Opcode QUERY.
pub const OPCODE_QUERY: u8 = 0;
/// Opcode NOTIFY (RFC 1996).
pub const OPCODE_NOTIFY: u8 = 4;
/// Class ANY.
pub const CLASS_ANY: u16 = 255;
/// Class IN.
pub const CLASS_IN: u16 = 1;
/// TSIG record type (RFC 8945).
pub const TYPE_TSIG: u16 = 250;

/// Why a message could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Shorter than its counts say, a bad name, or a TSIG not last.
    #[error("malformed message: {0}")]
    Malformed(&'static str),
}

/// A message ID nobody can predict (RFC 5452 §9.2: an off-path attacker who cannot guess the
/// ID cannot forge a reply), from the operating system's random source.
pub fn random_id() -> u16 {
    use ring::rand::SecureRandom;
    let mut id = [0u8; 2];
    if ring::rand::SystemRandom::new().fill(&mut id).is_err() {
        // getrandom(2) does not fail once the kernel's pool is ready; should it, std's hasher
        // keys are random per process too.
        use std::hash::{BuildHasher, Hasher};
        let h = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        return h as u16;
    }
    u16::from_be_bytes(id)
}

fn bad(what: &'static str) -> ParseError {
    ParseError::Malformed(what)
}

/// A resource record as read from a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Owner, lower-cased wire format, decompressed.
    pub owner: Vec<u8>,
    /// Type.
    pub rtype: u16,
    /// Class.
    pub class: u16,
    /// TTL.
    pub ttl: u32,
    /// RDATA as sent (names inside may be compressed against the message).
    pub rdata_at: usize,
    /// RDATA length.
    pub rdata_len: usize,
    /// Offset of the record's first byte.
    pub start: usize,
}

/// A message read in full (header, question, and every record's position).
#[derive(Debug, Clone)]
pub struct Message<'a> {
    /// The bytes.
    pub bytes: &'a [u8],
    /// ID.
    pub id: u16,
    /// Flags word.
    pub flags: u16,
    /// The question name as sent (case kept), decompressed.
    pub qname: Vec<u8>,
    /// The question name lower-cased.
    pub qname_lower: Vec<u8>,
    /// Question type.
    pub qtype: u16,
    /// Question class.
    pub qclass: u16,
    /// Where the question ends.
    pub question_end: usize,
    /// Answer records.
    pub answers: Vec<Record>,
    /// Authority records.
    pub authority: Vec<Record>,
    /// Additional records (a TSIG, if any, is last).
    pub additional: Vec<Record>,
}

impl Message<'_> {
    /// Opcode.
    pub fn opcode(&self) -> u8 {
        ((self.flags >> 11) & 0xF) as u8
    }

    /// Whether this is a response.
    pub fn is_response(&self) -> bool {
        self.flags & 0x8000 != 0
    }

    /// Response code (low four bits).
    pub fn rcode(&self) -> u8 {
        (self.flags & 0xF) as u8
    }

    /// The RDATA of `r`.
    pub fn rdata(&self, r: &Record) -> &[u8] {
        &self.bytes[r.rdata_at..r.rdata_at + r.rdata_len]
    }

    /// The TSIG record, when the last additional record is one.
    pub fn tsig(&self) -> Option<&Record> {
        self.additional.last().filter(|r| r.rtype == TYPE_TSIG)
    }

    /// The serial of an SOA record's RDATA (names inside may be compressed).
    pub fn soa_serial(&self, r: &Record) -> Option<u32> {
        let mut at = r.rdata_at;
        for _ in 0..2 {
            at = skip_name(self.bytes, at)?;
        }
        let s = self.bytes.get(at..at + 4)?;
        Some(u32::from_be_bytes(s.try_into().ok()?))
    }
}

/// Reads a name at `at` (following compression pointers), appending it to `out`; returns the
/// offset after the name in place.
pub fn read_name(msg: &[u8], mut at: usize, out: &mut Vec<u8>) -> Option<usize> {
    let mut end = None;
    let mut hops = 0;
    loop {
        let len = *msg.get(at)?;
        match len {
            0 => {
                out.push(0);
                return Some(end.unwrap_or(at + 1));
            }
            l if l & 0xC0 == 0xC0 => {
                let ptr = usize::from(u16::from_be_bytes([l & 0x3F, *msg.get(at + 1)?]));
                end.get_or_insert(at + 2);
                hops += 1;
                if hops > 64 || ptr >= msg.len() {
                    return None;
                }
                at = ptr;
            }
            l if l < 64 => {
                let label = msg.get(at..at + 1 + usize::from(l))?;
                out.extend_from_slice(label);
                if out.len() > 255 {
                    return None;
                }
                at += 1 + usize::from(l);
            }
            _ => return None,
        }
    }
}

fn skip_name(msg: &[u8], at: usize) -> Option<usize> {
    read_name(msg, at, &mut Vec::new())
}

fn lower(name: &[u8]) -> Vec<u8> {
    name.iter().map(u8::to_ascii_lowercase).collect()
}

/// Reads a whole message (one question at most).
pub fn parse(bytes: &[u8]) -> Result<Message<'_>, ParseError> {
    if bytes.len() < HEADER_LEN {
        return Err(bad("shorter than a header"));
    }
    let word = |i: usize| u16::from_be_bytes([bytes[i], bytes[i + 1]]);
    let (qd, an, ns, ar) = (word(4), word(6), word(8), word(10));
    if qd > 1 {
        return Err(bad("more than one question"));
    }
    let mut at = HEADER_LEN;
    let mut qname = Vec::new();
    let (mut qtype, mut qclass) = (0, 0);
    if qd == 1 {
        at = read_name(bytes, at, &mut qname).ok_or(bad("question name"))?;
        let q = bytes.get(at..at + 4).ok_or(bad("question"))?;
        qtype = u16::from_be_bytes([q[0], q[1]]);
        qclass = u16::from_be_bytes([q[2], q[3]]);
        at += 4;
    }
    let question_end = at;
    let mut sections: [Vec<Record>; 3] = Default::default();
    for (i, count) in [an, ns, ar].into_iter().enumerate() {
        for _ in 0..count {
            let start = at;
            let mut owner = Vec::new();
            at = read_name(bytes, at, &mut owner).ok_or(bad("record owner"))?;
            let f = bytes.get(at..at + 10).ok_or(bad("record header"))?;
            let rdata_len = usize::from(u16::from_be_bytes([f[8], f[9]]));
            let rdata_at = at + 10;
            if bytes.len() < rdata_at + rdata_len {
                return Err(bad("record data"));
            }
            sections[i].push(Record {
                owner: lower(&owner),
                rtype: u16::from_be_bytes([f[0], f[1]]),
                class: u16::from_be_bytes([f[2], f[3]]),
                ttl: u32::from_be_bytes([f[4], f[5], f[6], f[7]]),
                rdata_at,
                rdata_len,
                start,
            });
            at = rdata_at + rdata_len;
        }
    }
    let [answers, authority, additional] = sections;
    let tsigs = additional.iter().filter(|r| r.rtype == TYPE_TSIG).count();
    if tsigs > 1 || (tsigs == 1 && additional.last().is_some_and(|r| r.rtype != TYPE_TSIG)) {
        return Err(bad("a TSIG record must be the last additional record"));
    }
    Ok(Message {
        bytes,
        id: word(0),
        flags: word(2),
        qname_lower: lower(&qname),
        qname,
        qtype,
        qclass,
        question_end,
        answers,
        authority,
        additional,
    })
}

/// Writes one message: header, an optional question, then records, compressing names.
///
/// The compression table maps a hash of each name suffix written (lower-cased) to its offset;
/// a hit is confirmed by reading the name back from the message. No allocation per name: a
/// transfer writes millions.
pub struct MessageWriter {
    buf: Vec<u8>,
    table: Table,
    counts: [u16; 3],
    qd: u16,
    /// Per name written: each label's (offset, suffix hash); kept to reuse its memory.
    scratch: Vec<(u16, u64)>,
}

/// Name-suffix hash → offset. The keys are hashes already: the map uses them as they are.
pub type Table = HashMap<u64, u16, std::hash::BuildHasherDefault<KeyIsHash>>;

/// A hasher for keys that are hashes.
#[derive(Default)]
pub struct KeyIsHash(u64);

impl std::hash::Hasher for KeyIsHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The (offset, hash) of every suffix of `name` (lower-cased), by label, longest first, in one
/// pass from the root up: the hash of a suffix folds its first label into the hash of the rest.
fn suffix_hashes(name: &[u8], out: &mut Vec<(u16, u64)>) {
    out.clear();
    let mut at = 0;
    while at < name.len() && name[at] != 0 {
        out.push((at as u16, 0));
        at += 1 + usize::from(name[at]);
    }
    let mut h: u64 = 0x9E37_79B9_7F4A_7C15;
    for entry in out.iter_mut().rev() {
        let start = usize::from(entry.0);
        let end = (start + 1 + usize::from(name[start])).min(name.len());
        for b in &name[start..end] {
            h = (h ^ u64::from(b.to_ascii_lowercase())).wrapping_mul(0x0100_0000_01b3);
        }
        // Spread the bits the table indexes by.
        entry.1 = (h ^ (h >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    }
}

/// Whether the name at `at` in `msg` (following pointers) is `suffix`, ignoring case.
fn name_equals(msg: &[u8], mut at: usize, suffix: &[u8]) -> bool {
    let mut i = 0;
    for _ in 0..128 {
        let Some(&len) = msg.get(at) else {
            return false;
        };
        if len & 0xC0 == 0xC0 {
            let Some(&lo) = msg.get(at + 1) else {
                return false;
            };
            at = usize::from(u16::from_be_bytes([len & 0x3F, lo]));
            continue;
        }
        let l = usize::from(len);
        let (Some(a), Some(b)) = (msg.get(at..at + 1 + l), suffix.get(i..i + 1 + l)) else {
            return false;
        };
        if !a.eq_ignore_ascii_case(b) {
            return false;
        }
        if l == 0 {
            return i + 1 == suffix.len();
        }
        at += 1 + l;
        i += 1 + l;
    }
    false
}

impl MessageWriter {
    /// A message with this ID and flags, and the question if given (`name` as sent).
    pub fn new(id: u16, flags: u16, question: Option<(&[u8], u16, u16)>) -> MessageWriter {
        MessageWriter::with_table(id, flags, question, Table::default())
    }

    /// [`MessageWriter::new`] reusing the table of a finished message (its memory, not its
    /// entries).
    pub fn with_table(
        id: u16,
        flags: u16,
        question: Option<(&[u8], u16, u16)>,
        mut table: Table,
    ) -> MessageWriter {
        table.clear();
        let mut w = MessageWriter {
            buf: Vec::with_capacity(1024),
            table,
            counts: [0; 3],
            qd: 0,
            scratch: Vec::with_capacity(16),
        };
        w.buf.extend_from_slice(&id.to_be_bytes());
        w.buf.extend_from_slice(&flags.to_be_bytes());
        w.buf.extend_from_slice(&[0; 8]);
        if let Some((name, qtype, qclass)) = question {
            w.put_name(name);
            w.buf.extend_from_slice(&qtype.to_be_bytes());
            w.buf.extend_from_slice(&qclass.to_be_bytes());
            w.qd = 1;
        }
        w
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether only the header (and question) is written.
    pub fn is_empty(&self) -> bool {
        self.counts == [0; 3]
    }

    /// Records written in the answer section.
    pub fn answers(&self) -> u16 {
        self.counts[0]
    }

    /// Writes a name, compressed against the names already written (matched case-insensitively;
    /// `name` is written with its case).
    pub fn put_name(&mut self, name: &[u8]) {
        let start = self.buf.len();
        let mut suffixes = std::mem::take(&mut self.scratch);
        suffix_hashes(name, &mut suffixes);
        let hit = suffixes.iter().enumerate().find_map(|(i, &(at, hash))| {
            let at = usize::from(at);
            let ptr = *self.table.get(&hash)?;
            name_equals(&self.buf, usize::from(ptr), &name[at..]).then_some((i, at, ptr))
        });
        let upto = match hit {
            Some((i, at, ptr)) => {
                self.buf.extend_from_slice(&name[..at]);
                self.buf.extend_from_slice(&(0xC000 | ptr).to_be_bytes());
                i
            }
            None => {
                self.buf.extend_from_slice(name);
                suffixes.len()
            }
        };
        // Remember the suffixes written out in full.
        for &(at, hash) in &suffixes[..upto] {
            let pos = start + usize::from(at);
            if pos < 0x3FFF {
                self.table.entry(hash).or_insert(pos as u16);
            }
        }
        self.scratch = suffixes;
    }

    /// Writes a record of class `class` from uncompressed RDATA, compressing the names in NS,
    /// CNAME, PTR, MX and SOA data (RFC 3597 §4).
    pub fn put_record(
        &mut self,
        section: usize,
        owner: &[u8],
        rtype: RType,
        class: u16,
        ttl: u32,
        rdata: &[u8],
    ) {
        self.put_name(owner);
        self.buf.extend_from_slice(&rtype.0.to_be_bytes());
        self.buf.extend_from_slice(&class.to_be_bytes());
        self.buf.extend_from_slice(&ttl.to_be_bytes());
        let len_at = self.buf.len();
        self.buf.extend_from_slice(&[0, 0]);
        for (is_name, part) in meshdns_zone::wire::rdata_parts(rtype, rdata) {
            if is_name {
                self.put_name(part);
            } else {
                self.buf.extend_from_slice(part);
            }
        }
        let rdlen = (self.buf.len() - len_at - 2) as u16;
        self.buf[len_at..len_at + 2].copy_from_slice(&rdlen.to_be_bytes());
        self.counts[section] += 1;
    }

    /// The finished message, and the table to reuse for the next.
    pub fn finish_with_table(mut self) -> (Vec<u8>, Table) {
        self.fill_header();
        (self.buf, self.table)
    }

    fn fill_header(&mut self) {
        self.buf[4..6].copy_from_slice(&self.qd.to_be_bytes());
        for (i, c) in self.counts.iter().enumerate() {
            self.buf[6 + 2 * i..8 + 2 * i].copy_from_slice(&c.to_be_bytes());
        }
    }

    /// The finished message.
    pub fn finish(self) -> Vec<u8> {
        self.finish_with_table().0
    }
}

/// Sets the response code of a finished message.
pub fn set_rcode(msg: &mut [u8], rcode: u8) {
    msg[3] = (msg[3] & 0xF0) | (rcode & 0xF);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_compressed_and_reads_back() {
        let mut w = MessageWriter::new(7, 0x8400, Some((b"\x07Example\x00", 252, 1)));
        w.put_record(
            0,
            b"\x03www\x07example\x00",
            RType::A,
            1,
            60,
            &[192, 0, 2, 1],
        );
        w.put_record(
            0,
            b"\x07example\x00",
            RType::NS,
            1,
            60,
            b"\x02ns\x07example\x00",
        );
        let msg = w.finish();
        let m = parse(&msg).unwrap();
        assert_eq!((m.id, m.qtype, m.answers.len()), (7, 252, 2));
        assert_eq!(m.qname, b"\x07Example\x00");
        assert_eq!(m.answers[0].owner, b"\x03www\x07example\x00");
        assert_eq!(m.answers[1].owner, b"\x07example\x00");
        // "www" + pointer; the NS owner is one pointer; the NS target "ns" + pointer.
        assert!(msg.len() < 12 + 13 + 4 + (6 + 10 + 4) + (2 + 10 + 5));
        let mut target = Vec::new();
        read_name(&msg, m.answers[1].rdata_at, &mut target).unwrap();
        // Compressed against the question, whose case it takes (names compare without case).
        assert_eq!(target.to_ascii_lowercase(), b"\x02ns\x07example\x00");
    }

    #[test]
    fn refuses_pointer_loops_and_misplaced_tsig() {
        let mut loop_msg = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        loop_msg.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1]);
        assert!(parse(&loop_msg).is_err());
        let mut w = MessageWriter::new(1, 0, None);
        w.put_record(2, b"\x01k\x00", RType(TYPE_TSIG), CLASS_ANY, 0, &[]);
        w.put_record(2, b"\x00", RType::A, 1, 0, &[1, 2, 3, 4]);
        assert!(parse(&w.finish()).is_err());
    }
}
