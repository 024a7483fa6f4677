//! DNS message wire format (RFC 1035 §4.1): reading queries, writing responses.
//!
//! Written by hand rather than with hickory-proto's `Message` so the answer path allocates
//! nothing per query, echoes the question byte for byte (0x20 case preserved, RFC 1035 §7.3)
//! and compresses answer owners against the question (RFC 1035 §4.1.4).

use crate::name::{MAX_NAME_LEN, label_offsets};
use crate::rdata::{RType, wire_name_len};
use std::mem::MaybeUninit;

/// Size of the fixed header.
pub const HEADER_LEN: usize = 12;

/// The EDNS(0) facts of a query (RFC 6891 §6.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edns {
    /// The requestor's UDP payload size (values below 512 count as 512).
    pub payload: u16,
    /// EDNS version; only 0 exists.
    pub version: u8,
    /// DNSSEC OK bit (RFC 3225), echoed.
    pub dnssec_ok: bool,
    /// The query carries the Padding option (RFC 7830), so a response may be padded.
    pub padding: bool,
    /// The query carries the NSID option (RFC 5001 §2.1, empty in a query), so the response
    /// may name the server that answered.
    pub nsid: bool,
}

/// A parsed query: the fields the answer needs, borrowing the question from the packet.
#[derive(Debug)]
pub struct Query<'a> {
    /// Message ID, echoed.
    pub id: u16,
    /// Opcode (0 = QUERY).
    pub opcode: u8,
    /// Recursion desired, echoed.
    pub rd: bool,
    /// Checking disabled, echoed (RFC 6840 §5.9).
    pub cd: bool,
    /// The question name as the client wrote it (wire format, original case).
    pub qname: &'a [u8],
    /// The question name lower-cased, for lookups.
    pub qname_lower: LowerName,
    /// Question type.
    pub qtype: RType,
    /// Question class.
    pub qclass: u16,
    /// EDNS, when the query had an OPT record.
    pub edns: Option<Edns>,
}

/// A lower-cased wire name on the stack.
#[derive(Clone)]
pub struct LowerName {
    buf: [u8; MAX_NAME_LEN],
    len: u8,
}

impl LowerName {
    /// The lower-cased wire bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }
}

impl std::fmt::Debug for LowerName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", crate::Name::from_wire(self.as_bytes()))
    }
}

/// What is wrong with a packet that is not a usable query.
#[derive(Debug, PartialEq, Eq)]
pub enum Malformed {
    /// No reply at all: too short for a header, or a response (QR=1), which could be reflected.
    Drop,
    /// A reply with this RCODE; the question is echoed when it could be read.
    Reply {
        /// 1 = FORMERR, 4 = NOTIMP.
        rcode: u8,
        /// End of the question in the packet, when it parsed.
        question_end: Option<usize>,
    },
}

const FORMERR: u8 = 1;
const NOTIMP: u8 = 4;
/// The EDNS Padding option's code (RFC 7830 §3).
const PADDING_OPTION: u16 = 12;
/// The EDNS NSID option's code (RFC 5001 §2.3).
pub const NSID_OPTION: u16 = 3;

fn u16_at(p: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*p.get(at)?, *p.get(at + 1)?]))
}

/// The length of the OPT record [`Writer::put_opt`] writes: 11 bytes, and the NSID option's
/// header and text when it carries one.
pub fn opt_len(nsid: Option<&[u8]>) -> usize {
    OPT_LEN + nsid.map_or(0, |text| 4 + text.len().min(usize::from(u8::MAX)))
}

/// An OPT record without options: root owner, type, class, TTL, RDLENGTH.
const OPT_LEN: usize = 11;

/// Reads an uncompressed name starting at `at`; returns its end.
fn read_question_name(p: &[u8], at: usize) -> Option<usize> {
    let mut pos = at;
    loop {
        let len = *p.get(pos)? as usize;
        if len == 0 {
            pos += 1;
            return (pos - at <= MAX_NAME_LEN).then_some(pos);
        }
        if len > 63 {
            return None; // compression pointer or reserved label type: not valid in a question
        }
        pos += 1 + len;
        if pos - at > MAX_NAME_LEN {
            return None;
        }
    }
}

/// The end of the question (name, type, class) of a message holding exactly one, read as
/// [`parse_query`] reads it; `None` when there is no such question.
pub fn question_end(p: &[u8]) -> Option<usize> {
    if u16_at(p, 4)? != 1 {
        return None;
    }
    read_question_name(p, HEADER_LEN)
        .map(|end| end + 4)
        .filter(|&end| end <= p.len())
}

/// Skips a possibly compressed name in a record; returns its end and whether it is the root.
fn skip_name(p: &[u8], at: usize) -> Option<(usize, bool)> {
    let mut pos = at;
    let mut root = true;
    loop {
        let len = *p.get(pos)?;
        match len {
            0 => return Some((pos + 1, root)),
            1..=63 => {
                root = false;
                pos += 1 + len as usize;
            }
            0xC0..=0xFF => {
                p.get(pos + 1)?;
                return Some((pos + 2, false));
            }
            _ => return None,
        }
    }
}

/// Walks the records after the question (`before_additional` answer and authority records,
/// then `additional` ones) to find the OPT record (RFC 6891 §6.1.1), and returns it with the
/// end of the last record. `None` when a record runs past the end, OPT is duplicated,
/// misplaced or not owned by the root, or an option runs past the end of OPT's RDATA
/// (RFC 6891 §6.1.2: options fill the RDATA exactly).
fn find_edns(
    p: &[u8],
    mut pos: usize,
    before_additional: usize,
    additional: usize,
) -> Option<(Option<Edns>, usize)> {
    let mut edns = None;
    for i in 0..before_additional + additional {
        let (end, root) = skip_name(p, pos)?;
        // Fixed part of a record: type, class, TTL (two halves), RDLENGTH.
        let field = |at: usize| u16_at(p, end + at);
        let (rtype, class, ttl_hi, ttl_lo, rdlen) = (
            field(0)?,
            field(2)?,
            field(4)?,
            field(6)?,
            usize::from(field(8)?),
        );
        pos = end + 10 + rdlen;
        if pos > p.len() {
            return None;
        }
        if RType(rtype) == RType::OPT {
            if edns.is_some() || !root || i < before_additional {
                return None;
            }
            let mut options = &p[end + 10..pos];
            let (mut padding, mut nsid) = (false, false);
            while !options.is_empty() {
                let code = u16_at(options, 0)?;
                padding |= code == PADDING_OPTION;
                nsid |= code == NSID_OPTION;
                let len = usize::from(u16_at(options, 2)?);
                options = options.get(4 + len..)?;
            }
            edns = Some(Edns {
                payload: class.max(512),
                version: (ttl_hi & 0xFF) as u8,
                dnssec_ok: ttl_lo & 0x8000 != 0,
                padding,
                nsid,
            });
        }
    }
    Some((edns, pos))
}

/// Parses a query packet.
pub fn parse_query(p: &[u8]) -> Result<Query<'_>, Malformed> {
    if p.len() < HEADER_LEN {
        return Err(Malformed::Drop);
    }
    let flags = u16_at(p, 2).ok_or(Malformed::Drop)?;
    if flags & 0x8000 != 0 {
        return Err(Malformed::Drop);
    }
    let opcode = ((flags >> 11) & 0xF) as u8;
    let qdcount = u16_at(p, 4).unwrap_or(0);
    let ancount = u16_at(p, 6).unwrap_or(0);
    let nscount = u16_at(p, 8).unwrap_or(0);
    let arcount = u16_at(p, 10).unwrap_or(0);
    let question_end = if qdcount == 1 {
        read_question_name(p, HEADER_LEN).and_then(|end| (end + 4 <= p.len()).then_some(end + 4))
    } else {
        None
    };
    if opcode != 0 {
        return Err(Malformed::Reply {
            rcode: NOTIMP,
            question_end,
        });
    }
    let Some(qend) = question_end else {
        return Err(Malformed::Reply {
            rcode: FORMERR,
            question_end: None,
        });
    };
    let name_end = qend - 4;
    let qtype = RType(u16_at(p, name_end).ok_or(Malformed::Drop)?);
    let qclass = u16_at(p, name_end + 2).ok_or(Malformed::Drop)?;
    // Bytes after the last record the header counts are not a query's (BIND and Knot refuse
    // trailing data too): FORMERR, as for a record that runs short.
    let edns = find_edns(
        p,
        qend,
        usize::from(ancount) + usize::from(nscount),
        usize::from(arcount),
    )
    .and_then(|(edns, end)| (end == p.len()).then_some(edns))
    .ok_or(Malformed::Reply {
        rcode: FORMERR,
        question_end: Some(qend),
    })?;
    let qname = &p[HEADER_LEN..name_end];
    let mut qname_lower = LowerName {
        buf: [0; MAX_NAME_LEN],
        len: qname.len() as u8,
    };
    for (dst, src) in qname_lower.buf.iter_mut().zip(qname) {
        *dst = src.to_ascii_lowercase();
    }
    Ok(Query {
        id: u16_at(p, 0).unwrap_or(0),
        opcode,
        rd: flags & 0x0100 != 0,
        cd: flags & 0x0010 != 0,
        qname,
        qname_lower,
        qtype,
        qclass,
        edns,
    })
}

/// RDATA of `rtype` as the parts a writer copies (`false`) and the names it may compress
/// (`true`): names inside NS, CNAME, PTR, MX and SOA data (RFC 3597 §4 allows compression for
/// exactly the RFC 1035 types; SRV targets stay uncompressed, RFC 2782). Every writer of
/// records (answers, transfers) splits RDATA here.
pub fn rdata_parts(rtype: RType, rdata: &[u8]) -> impl Iterator<Item = (bool, &[u8])> {
    let name_len = |w: &[u8]| wire_name_len(w).unwrap_or(w.len());
    let parts: [(bool, &[u8]); 3] = match rtype {
        RType::NS | RType::CNAME | RType::PTR => [(true, rdata), (false, &[]), (false, &[])],
        RType::MX if rdata.len() > 2 => [(false, &rdata[..2]), (true, &rdata[2..]), (false, &[])],
        RType::SOA => {
            let m = name_len(rdata);
            let r = m + name_len(&rdata[m..]);
            [
                (true, &rdata[..m]),
                (true, &rdata[m..r]),
                (false, &rdata[r..]),
            ]
        }
        _ => [(false, rdata), (false, &[]), (false, &[])],
    };
    parts.into_iter().filter(|(_, p)| !p.is_empty())
}

/// The owner name of a record being written.
#[derive(Clone, Copy)]
pub enum Owner<'n> {
    /// The question name: written as a pointer to offset 12, so it carries the client's case.
    Question,
    /// Any other name, lower-cased wire format.
    Name(&'n [u8]),
    /// A name already written at this offset of the message (below 0x4000), as a pointer: a
    /// name the answer made up (a DNAME's synthesised target, [`Writer::put_cname_to`]).
    At(u16),
}

const MAX_COMPRESSION_ENTRIES: usize = 48;

/// The storage of a [`Writer`]'s compression table; make one with [`table`].
pub type Table<'n> = [MaybeUninit<(u16, &'n [u8])>; MAX_COMPRESSION_ENTRIES];

/// An empty [`Table`] (uninitialised: nothing is written until a name is).
#[inline(always)]
pub fn table<'n>() -> Table<'n> {
    [const { MaybeUninit::uninit() }; MAX_COMPRESSION_ENTRIES]
}

/// Writes a response message, compressing names against those already written.
///
/// The compression table holds (offset, lower-cased suffix) pairs in a fixed array: no
/// allocation; names beyond its capacity are still correct, just written in full. The array
/// ([`Table`]) lives in the caller's frame and is borrowed: it is left uninitialised and only
/// its first `entries` slots are ever read. Zeroing its 1,152 bytes for every answer, and
/// copying it with the writer, were about a sixth of the instructions of a query.
pub struct Writer<'b, 'n> {
    buf: &'b mut Vec<u8>,
    table: &'b mut Table<'n>,
    entries: usize,
    counts: [u16; 3],
    question_end: usize,
    question_entries: usize,
}

/// A point in a message being written (see [`Writer::mark`]).
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    len: usize,
    counts: [u16; 3],
    entries: usize,
}

/// Sections after the question.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Section {
    /// Answer.
    Answer = 0,
    /// Authority.
    Authority = 1,
    /// Additional.
    Additional = 2,
}

impl<'b, 'n> Writer<'b, 'n> {
    /// Starts a response in `buf` (cleared) with room for the header, and the question copied
    /// from the query packet as asked. `qname_lower` is the question name lower-cased.
    /// `table` is the compression table's storage (from [`table`]).
    pub fn new(
        buf: &'b mut Vec<u8>,
        table: &'b mut Table<'n>,
        question: Option<(&[u8], &'n [u8])>,
    ) -> Self {
        buf.clear();
        buf.extend_from_slice(&[0; HEADER_LEN]);
        let mut w = Writer {
            buf,
            table,
            entries: 0,
            counts: [0; 3],
            question_end: HEADER_LEN,
            question_entries: 0,
        };
        if let Some((wire_question, lower_name)) = question {
            w.buf.extend_from_slice(wire_question);
            w.remember(HEADER_LEN, lower_name, lower_name.len());
            w.question_end = w.buf.len();
            w.question_entries = w.entries;
        }
        w
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether only the header has been written.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == HEADER_LEN
    }

    fn remember(&mut self, at: usize, name: &'n [u8], upto: usize) {
        for o in label_offsets(name) {
            if o >= upto || name[o] == 0 {
                break;
            }
            let pos = at + o;
            if pos >= 0x3FFF || self.entries == MAX_COMPRESSION_ENTRIES {
                break;
            }
            self.table[self.entries].write((pos as u16, &name[o..]));
            self.entries += 1;
        }
    }

    /// The entries written so far.
    fn used(&self) -> &[(u16, &'n [u8])] {
        let used = &self.table[..self.entries];
        // SAFETY: slots below `entries` have been written: `remember` is the only place that
        // raises `entries`, one slot at a time, right after writing that slot; everything else
        // (`rollback`, `truncate_to_question`) only ever lowers it. `MaybeUninit<T>` has the layout
        // of `T`, so the initialised prefix may be read as `[T]`.
        unsafe { std::slice::from_raw_parts(used.as_ptr().cast(), used.len()) }
    }

    fn find(&self, suffix: &[u8]) -> Option<u16> {
        self.used()
            .iter()
            .find(|(_, s)| *s == suffix)
            .map(|(o, _)| *o)
    }

    /// Writes a lower-cased wire name, compressed against earlier names.
    pub fn put_name(&mut self, name: &'n [u8]) {
        let start = self.buf.len();
        for o in label_offsets(name) {
            if name[o] == 0 {
                break;
            }
            if let Some(ptr) = self.find(&name[o..]) {
                self.buf.extend_from_slice(&name[..o]);
                self.buf.extend_from_slice(&(0xC000 | ptr).to_be_bytes());
                self.remember(start, name, o);
                return;
            }
        }
        self.buf.extend_from_slice(name);
        self.remember(start, name, name.len());
    }

    fn put_owner(&mut self, owner: Owner<'n>) {
        match owner {
            Owner::Question => self.buf.extend_from_slice(&[0xC0, HEADER_LEN as u8]),
            Owner::Name(n) => self.put_name(n),
            Owner::At(at) => self.buf.extend_from_slice(&(0xC000 | at).to_be_bytes()),
        }
    }

    /// Writes the CNAME a DNAME synthesises (RFC 6672 §3.1): its target is `prefix` (the
    /// whole labels of the name below the DNAME, lower-cased) followed by `suffix` (compressed
    /// against earlier names). The offset of the target, for records owned by it
    /// ([`Owner::At`]); `None` when it lies beyond a compression pointer's reach.
    pub fn put_cname_to(
        &mut self,
        section: Section,
        owner: Owner<'n>,
        ttl: u32,
        prefix: &[u8],
        suffix: &'n [u8],
    ) -> Option<u16> {
        let len_at = self.begin_record(owner, RType::CNAME, ttl);
        let at = self.buf.len();
        self.buf.extend_from_slice(prefix);
        self.put_name(suffix);
        self.end_record(section, len_at);
        u16::try_from(at).ok().filter(|&at| at < 0x4000)
    }

    /// Writes one resource record of class IN from its uncompressed wire RDATA, compressing
    /// the names inside NS, CNAME, PTR, MX and SOA data (RFC 3597 §4 allows it for exactly the
    /// RFC 1035 types; SRV targets stay uncompressed, RFC 2782).
    pub fn put_record(
        &mut self,
        section: Section,
        owner: Owner<'n>,
        rtype: RType,
        ttl: u32,
        rdata: &'n [u8],
    ) {
        let len_at = self.begin_record(owner, rtype, ttl);
        for (is_name, part) in rdata_parts(rtype, rdata) {
            if is_name {
                self.put_name(part);
            } else {
                self.buf.extend_from_slice(part);
            }
        }
        self.end_record(section, len_at);
    }

    /// Writes a record's owner, type, class IN, TTL and a placeholder RDLENGTH, whose place
    /// it returns for [`Writer::end_record`].
    #[inline(always)]
    fn begin_record(&mut self, owner: Owner<'n>, rtype: RType, ttl: u32) -> usize {
        self.put_owner(owner);
        self.buf.extend_from_slice(&rtype.0.to_be_bytes());
        self.buf.extend_from_slice(&1u16.to_be_bytes());
        self.buf.extend_from_slice(&ttl.to_be_bytes());
        let len_at = self.buf.len();
        self.buf.extend_from_slice(&[0, 0]);
        len_at
    }

    /// Fills in the RDLENGTH at `len_at` for the RDATA written since, and counts the record.
    #[inline(always)]
    fn end_record(&mut self, section: Section, len_at: usize) {
        let rdlen = (self.buf.len() - len_at - 2) as u16;
        self.buf[len_at..len_at + 2].copy_from_slice(&rdlen.to_be_bytes());
        // Saturating: an RRset too large to count is also too large to send, and gets truncated.
        self.counts[section as usize] = self.counts[section as usize].saturating_add(1);
    }

    /// Sets the serial of the SOA record just written (its RDATA ends with serial, refresh,
    /// retry, expire and minimum: 20 bytes).
    pub fn set_last_serial(&mut self, serial: u32) {
        let at = self.buf.len() - 20;
        self.buf[at..at + 4].copy_from_slice(&serial.to_be_bytes());
    }

    /// Appends the OPT pseudo-record (RFC 6891 §6.1.2) in the additional section, carrying
    /// the NSID option (RFC 5001 §2.3) with `nsid` when given: [`opt_len`] bytes in all.
    pub fn put_opt(
        &mut self,
        payload: u16,
        extended_rcode: u8,
        dnssec_ok: bool,
        nsid: Option<&[u8]>,
    ) {
        self.buf.push(0);
        self.buf.extend_from_slice(&RType::OPT.0.to_be_bytes());
        self.buf.extend_from_slice(&payload.to_be_bytes());
        self.buf.push(extended_rcode);
        self.buf.push(0); // version
        self.buf
            .extend_from_slice(&(if dnssec_ok { 0x8000u16 } else { 0 }).to_be_bytes());
        match nsid {
            None => self.buf.extend_from_slice(&[0, 0]),
            Some(text) => {
                // An NSID is at most 255 bytes (the configuration refuses more); a longer one
                // is cut rather than overrunning the 16-bit lengths.
                let text = &text[..text.len().min(usize::from(u8::MAX))];
                let len = text.len() as u16;
                self.buf.extend_from_slice(&(4 + len).to_be_bytes());
                self.buf.extend_from_slice(&NSID_OPTION.to_be_bytes());
                self.buf.extend_from_slice(&len.to_be_bytes());
                self.buf.extend_from_slice(text);
            }
        }
        self.counts[Section::Additional as usize] =
            self.counts[Section::Additional as usize].saturating_add(1);
    }

    /// The current end of the message, to return to with [`Writer::rollback`].
    pub fn mark(&self) -> Mark {
        Mark {
            len: self.buf.len(),
            counts: self.counts,
            entries: self.entries,
        }
    }

    /// Drops everything written since `mark` (optional additional data that did not fit).
    pub fn rollback(&mut self, mark: Mark) {
        self.buf.truncate(mark.len);
        self.counts = mark.counts;
        // Never raised: slots above the current count may be unwritten (a mark from another
        // writer, or from before `truncate_to_question`), and names at offsets now cut off
        // must not be pointed to.
        self.entries = mark.entries.min(self.entries);
    }

    /// Drops everything after the question and sets TC (RFC 2181 §9): the client retries over
    /// TCP rather than caching a partial RRset.
    pub fn truncate_to_question(&mut self) {
        self.buf.truncate(self.question_end);
        self.counts = [0; 3];
        self.entries = self.question_entries;
    }

    /// Fills in the header.
    pub fn finish(&mut self, id: u16, flags: u16) {
        let qd: u16 = u16::from(self.question_end > HEADER_LEN);
        let h = &mut self.buf[..HEADER_LEN];
        h[0..2].copy_from_slice(&id.to_be_bytes());
        h[2..4].copy_from_slice(&flags.to_be_bytes());
        h[4..6].copy_from_slice(&qd.to_be_bytes());
        h[6..8].copy_from_slice(&self.counts[0].to_be_bytes());
        h[8..10].copy_from_slice(&self.counts[1].to_be_bytes());
        h[10..12].copy_from_slice(&self.counts[2].to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(name: &[u8], qtype: u16, extra: &[u8], arcount: u16) -> Vec<u8> {
        let mut p = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0];
        p.extend_from_slice(&arcount.to_be_bytes());
        p.extend_from_slice(name);
        p.extend_from_slice(&qtype.to_be_bytes());
        p.extend_from_slice(&1u16.to_be_bytes());
        p.extend_from_slice(extra);
        p
    }

    #[test]
    fn parses_question_and_edns() {
        let opt = [0, 0, 41, 0x10, 0, 0, 0, 0x80, 0, 0, 0];
        let p = query(b"\x03WwW\x07example\x00", 1, &opt, 1);
        let q = parse_query(&p).unwrap();
        assert_eq!(q.id, 0x1234);
        assert!(q.rd);
        assert_eq!(q.qname, b"\x03WwW\x07example\x00");
        assert_eq!(q.qname_lower.as_bytes(), b"\x03www\x07example\x00");
        assert_eq!(
            q.edns,
            Some(Edns {
                payload: 4096,
                version: 0,
                dnssec_ok: true,
                padding: false,
                nsid: false,
            })
        );
    }

    /// A query for `example.` A whose OPT carries `options`.
    fn with_options(options: &[u8]) -> Vec<u8> {
        let mut opt = vec![0, 0, 41, 4, 0xd0, 0, 0, 0, 0];
        opt.extend_from_slice(&(options.len() as u16).to_be_bytes());
        opt.extend_from_slice(options);
        query(b"\x07example\x00", 1, &opt, 1)
    }

    #[test]
    fn padding_is_seen_among_other_options() {
        let padding =
            |options: &[u8]| parse_query(&with_options(options)).map(|q| q.edns.unwrap().padding);
        assert_eq!(padding(&[0, 12, 0, 3, 0, 0, 0]), Ok(true));
        // A cookie (10) first, then padding.
        let mut opts = vec![0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8];
        opts.extend_from_slice(&[0, 12, 0, 0]);
        assert_eq!(padding(&opts), Ok(true));
        assert_eq!(padding(&[0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]), Ok(false));
        assert_eq!(padding(&[]), Ok(false));
        // An option overrunning the RDATA is no padding request: the query is malformed.
        assert!(padding(&[0, 10, 0, 200, 0, 12]).is_err());
    }

    #[test]
    fn nsid_requests_are_seen_empty_or_not_among_other_options() {
        let nsid = |options: &[u8]| parse_query(&with_options(options)).map(|q| q.edns.unwrap());
        // RFC 5001 §2.1: a request carries the option empty.
        assert!(nsid(&[0, 3, 0, 0]).unwrap().nsid);
        // With data it is still the option (a server ignores what a query puts in it).
        assert!(nsid(&[0, 3, 0, 2, 0xab, 0xcd]).unwrap().nsid);
        // After a cookie, before padding: both seen.
        let both = nsid(&[0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 3, 0, 0, 0, 12, 0, 0]).unwrap();
        assert!(both.nsid && both.padding);
        assert!(!nsid(&[0, 12, 0, 0]).unwrap().nsid);
        assert!(!nsid(&[]).unwrap().nsid);
        // Option 3's code as another option's data is not a request.
        assert!(!nsid(&[0, 10, 0, 4, 0, 3, 0, 0]).unwrap().nsid);
        // An NSID option overrunning the RDATA makes the query malformed.
        assert!(nsid(&[0, 3, 0, 9, 1]).is_err());
    }

    #[test]
    fn the_opt_carries_nsid_as_option_3_and_its_length_is_known() {
        let mut out = Vec::new();
        let mut t = table();
        let mut w = Writer::new(&mut out, &mut t, None);
        w.put_opt(1232, 0, true, Some(b"replica-a"));
        w.finish(7, 0x8000);
        let opt = &out[HEADER_LEN..];
        assert_eq!(opt.len(), opt_len(Some(b"replica-a")));
        assert_eq!(
            opt,
            [
                &[0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 13, 0, 3, 0, 9][..],
                b"replica-a"
            ]
            .concat()
        );
        assert_eq!(out[10..12], [0, 1]);
        assert_eq!(opt_len(None), 11);
        // Longer than 255 bytes is cut, never a length that overruns.
        let mut out = Vec::new();
        let mut t = table();
        let mut w = Writer::new(&mut out, &mut t, None);
        w.put_opt(1232, 0, false, Some(&[b'x'; 300]));
        assert_eq!(out.len() - HEADER_LEN, opt_len(Some(&[b'x'; 300])));
        assert_eq!(out.len() - HEADER_LEN, 11 + 4 + 255);
    }

    #[test]
    fn classifies_malformed_packets() {
        assert_eq!(parse_query(&[0; 5]).unwrap_err(), Malformed::Drop);
        let mut resp = query(b"\x00", 1, &[], 0);
        resp[2] |= 0x80;
        assert_eq!(parse_query(&resp).unwrap_err(), Malformed::Drop);
        let mut notify = query(b"\x00", 6, &[], 0);
        notify[2] |= 4 << 3;
        assert_eq!(
            parse_query(&notify).unwrap_err(),
            Malformed::Reply {
                rcode: NOTIMP,
                question_end: Some(17)
            }
        );
        let mut two = query(b"\x00", 1, &[], 0);
        two[5] = 2;
        assert_eq!(
            parse_query(&two).unwrap_err(),
            Malformed::Reply {
                rcode: FORMERR,
                question_end: None
            }
        );
        let pointer = query(b"\xC0\x0C", 1, &[], 0);
        assert!(matches!(
            parse_query(&pointer),
            Err(Malformed::Reply { rcode: FORMERR, .. })
        ));
        let short_opt = query(b"\x00", 1, &[0, 0, 41], 1);
        assert!(matches!(
            parse_query(&short_opt),
            Err(Malformed::Reply {
                rcode: FORMERR,
                question_end: Some(_)
            })
        ));
        let opt = [0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0];
        let two_opts = query(b"\x00", 1, &[opt, opt].concat(), 2);
        assert!(matches!(
            parse_query(&two_opts),
            Err(Malformed::Reply { rcode: FORMERR, .. })
        ));
    }

    #[test]
    fn compresses_names_against_the_question() {
        let mut buf = Vec::new();
        let q = b"\x03WWW\x07example\x00\x00\x01\x00\x01";
        let lower: &[u8] = b"\x03www\x07example\x00";
        let target: &[u8] = b"\x04mail\x07example\x00";
        let mut table = table();
        let mut w = Writer::new(&mut buf, &mut table, Some((q, lower)));
        w.put_record(Section::Answer, Owner::Question, RType::CNAME, 5, target);
        w.finish(1, 0x8400);
        // owner = pointer to 12; target = "mail" + pointer to "example" at 16.
        assert_eq!(&buf[29..31], &[0xC0, 0x0C]);
        assert_eq!(&buf[41..48], b"\x04mail\xC0\x10");
        assert_eq!(u16::from_be_bytes([buf[39], buf[40]]), 7);
    }
}
