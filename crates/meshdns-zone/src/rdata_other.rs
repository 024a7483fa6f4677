//! Record types kept as their wire bytes, with no name compressed in them (RFC 3597 §4):
//! TLSA (RFC 6698), SSHFP (RFC 4255, 6594), DS (RFC 4034 §5), URI (RFC 7553), NAPTR (RFC 3403),
//! DNAME (RFC 6672: its target is never compressed, §2.5), HINFO (RFC 1035 §3.3.2), SVCB and
//! HTTPS (RFC 9460, [`crate::svcb`]), and any other type
//! given in the RFC 3597 generic form
//! (`\# LENGTH HEX`). Each typed one is parsed from its presentation form and checked as
//! strictly as the RFC 1035 types; each is written back in that form.
//!
//! Types refused: those a server must not hold as data (meta types, OPT, TSIG, TKEY), the
//! DNSSEC records meshdns does not sign or answer by DNSSEC's rules (RRSIG, NSEC, NSEC3,
//! NSEC3PARAM).

use std::fmt;

use crate::name::Name;
use crate::rdata::{RDataError, RType, wire_name_len};
use crate::text::{Token, character_string, unescaped};

/// TLSA.
pub const TLSA: RType = RType(52);
/// SSHFP.
pub const SSHFP: RType = RType(44);
/// URI.
pub const URI: RType = RType(256);
/// NAPTR.
pub const NAPTR: RType = RType(35);
/// DNAME.
pub const DNAME: RType = RType(39);

/// Why a type cannot be held as data (`None`: it can).
pub fn refused(rtype: RType) -> Option<&'static str> {
    match rtype.0 {
        0 => Some("type 0 is reserved"),
        41 | 249 | 250 => Some("a meta type (OPT, TKEY, TSIG) is not data"),
        128..=255 => Some("a query type is not data"),
        46 | 47 | 50 | 51 => Some(
            "meshdns does not sign zones: RRSIG, NSEC, NSEC3 and NSEC3PARAM would be served without DNSSEC's rules",
        ),
        _ => None,
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, RDataError> {
    Err(RDataError(msg.into()))
}

fn hex(tokens: &[Token<'_>], what: &str) -> Result<Vec<u8>, RDataError> {
    let text: String = tokens.iter().map(|t| t.text).collect();
    if text.is_empty() || !text.len().is_multiple_of(2) || tokens.iter().any(|t| t.quoted) {
        return err(format!(
            "{what} {text:?} is not hexadecimal (an even number of 0-9, a-f)"
        ));
    }
    (text
        .bytes()
        .all(|b| b.is_ascii_hexdigit())
        .then(|| data_from_hex(&text))
        .flatten())
    .ok_or_else(|| {
        RDataError(format!(
            "{what} {text:?} is not hexadecimal (an even number of 0-9, a-f)"
        ))
    })
}

fn data_from_hex(text: &str) -> Option<Vec<u8>> {
    text.as_bytes()
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

fn number<T: std::str::FromStr>(t: &Token<'_>, what: &str, range: &str) -> Result<T, RDataError> {
    if t.quoted {
        return err(format!("{what} must not be quoted"));
    }
    t.text
        .parse()
        .map_err(|_| RDataError(format!("{what} {:?} is not a number {range}", t.text)))
}

fn at_least(rtype: RType, t: &[Token<'_>], n: usize, fields: &str) -> Result<(), RDataError> {
    if t.len() < n {
        return err(format!("{rtype} takes {fields}, got {} field(s)", t.len()));
    }
    Ok(())
}

/// The wire form of `rtype`'s data from its presentation fields, for the types of this
/// module; `None` for a type parsed elsewhere (the RFC 1035 types, SRV, CAA).
pub fn parse(rtype: RType, t: &[Token<'_>], origin: &Name) -> Option<Result<Vec<u8>, RDataError>> {
    if t.first().is_some_and(|f| f.text == "\\#" && !f.quoted) {
        return Some(generic(rtype, &t[1..]));
    }
    if let Some(why) = refused(rtype) {
        return Some(err(why));
    }
    Some(match rtype {
        TLSA => tlsa(t),
        SSHFP => sshfp(t),
        RType::DS => ds(t),
        URI => uri(t),
        NAPTR => naptr(t, origin),
        DNAME => dname(t, origin),
        RType::HINFO => hinfo(t),
        crate::svcb::SVCB | crate::svcb::HTTPS => crate::svcb::parse(rtype, t, origin),
        // Parsed by `RData` itself.
        RType::A
        | RType::AAAA
        | RType::NS
        | RType::CNAME
        | RType::PTR
        | RType::MX
        | RType::TXT
        | RType::SRV
        | RType::CAA
        | RType::SOA => return None,
        other => err(format!(
            "{other} has no presentation form meshdns reads: give it in the RFC 3597 form \
             `\\# LENGTH HEX`"
        )),
    })
}

/// `\# LENGTH HEX` (RFC 3597 §5), checked against what the type holds when meshdns knows it.
fn generic(rtype: RType, t: &[Token<'_>]) -> Result<Vec<u8>, RDataError> {
    if let Some(why) = refused(rtype) {
        return err(why);
    }
    let Some(len) = t.first() else {
        return err("\\# needs a length, then the data in hexadecimal");
    };
    let len: usize = number::<u16>(len, "\\# length", "0-65535")?.into();
    let data = if len == 0 && t.len() == 1 {
        Vec::new()
    } else {
        hex(&t[1..], "\\# data")?
    };
    if data.len() != len {
        return err(format!(
            "\\# length {len} but {} bytes of data follow",
            data.len()
        ));
    }
    if !valid_wire(rtype, &data) {
        return err(format!(
            "{rtype} data {len} bytes long is not what {rtype} holds"
        ));
    }
    Ok(canonical(rtype, data))
}

fn tlsa(t: &[Token<'_>]) -> Result<Vec<u8>, RDataError> {
    at_least(TLSA, t, 4, "usage selector matching-type data")?;
    let mut out = vec![
        number(&t[0], "TLSA usage", "0-255")?,
        number(&t[1], "TLSA selector", "0-255")?,
        number(&t[2], "TLSA matching type", "0-255")?,
    ];
    out.extend(hex(&t[3..], "TLSA certificate data")?);
    Ok(out)
}

fn sshfp(t: &[Token<'_>]) -> Result<Vec<u8>, RDataError> {
    at_least(SSHFP, t, 3, "algorithm fingerprint-type fingerprint")?;
    let mut out = vec![
        number(&t[0], "SSHFP algorithm", "0-255")?,
        number(&t[1], "SSHFP fingerprint type", "0-255")?,
    ];
    out.extend(hex(&t[2..], "SSHFP fingerprint")?);
    Ok(out)
}

fn ds(t: &[Token<'_>]) -> Result<Vec<u8>, RDataError> {
    at_least(RType::DS, t, 4, "key-tag algorithm digest-type digest")?;
    let mut out = number::<u16>(&t[0], "DS key tag", "0-65535")?
        .to_be_bytes()
        .to_vec();
    out.push(number(&t[1], "DS algorithm", "0-255")?);
    out.push(number(&t[2], "DS digest type", "0-255")?);
    out.extend(hex(&t[3..], "DS digest")?);
    Ok(out)
}

fn uri(t: &[Token<'_>]) -> Result<Vec<u8>, RDataError> {
    if t.len() != 3 {
        return err(format!(
            "URI takes 3 fields (priority weight \"target\"), got {}",
            t.len()
        ));
    }
    let mut out = number::<u16>(&t[0], "URI priority", "0-65535")?
        .to_be_bytes()
        .to_vec();
    out.extend(number::<u16>(&t[1], "URI weight", "0-65535")?.to_be_bytes());
    // The target is the rest of the data, with no length byte: any length.
    let target = unescaped(&t[2]).map_err(RDataError)?;
    if target.is_empty() {
        return err("URI target must not be empty");
    }
    out.extend(target);
    Ok(out)
}

fn naptr(t: &[Token<'_>], origin: &Name) -> Result<Vec<u8>, RDataError> {
    if t.len() != 6 {
        return err(format!(
            "NAPTR takes 6 fields (order preference \"flags\" \"services\" \"regexp\" \
             replacement), got {}",
            t.len()
        ));
    }
    let mut out = number::<u16>(&t[0], "NAPTR order", "0-65535")?
        .to_be_bytes()
        .to_vec();
    out.extend(number::<u16>(&t[1], "NAPTR preference", "0-65535")?.to_be_bytes());
    for tok in &t[2..5] {
        let s = character_string(tok).map_err(RDataError)?;
        out.push(s.len() as u8);
        out.extend(s);
    }
    if t[5].quoted {
        return err("NAPTR replacement must be a name, not quoted");
    }
    let replacement = Name::parse(t[5].text, Some(origin))
        .map_err(|e| RDataError(format!("NAPTR replacement {:?}: {e}", t[5].text)))?;
    out.extend_from_slice(replacement.wire());
    Ok(out)
}

fn dname(t: &[Token<'_>], origin: &Name) -> Result<Vec<u8>, RDataError> {
    match t {
        [target] if !target.quoted => Name::parse(target.text, Some(origin))
            .map(|n| n.wire().to_vec())
            .map_err(|e| RDataError(format!("DNAME target {:?}: {e}", target.text))),
        [_] => err("DNAME target must be a name, not quoted"),
        _ => err(format!("DNAME takes 1 field (target), got {}", t.len())),
    }
}

fn hinfo(t: &[Token<'_>]) -> Result<Vec<u8>, RDataError> {
    if t.len() != 2 {
        return err(format!(
            "HINFO takes 2 fields (\"cpu\" \"os\"), got {}",
            t.len()
        ));
    }
    let mut out = Vec::new();
    for tok in t {
        let s = character_string(tok).map_err(RDataError)?;
        out.push(s.len() as u8);
        out.extend(s);
    }
    Ok(out)
}

/// Reads `n` character-strings from the start of `w`; the offset after them.
fn strings(w: &[u8], n: usize) -> Option<usize> {
    let mut at = 0;
    for _ in 0..n {
        at += 1 + usize::from(*w.get(at)?);
        if at > w.len() {
            return None;
        }
    }
    Some(at)
}

/// `w` (checked by [`valid_wire`]) as the catalog keeps it: the target of a DNAME, SVCB or
/// HTTPS lower-cased, as every name meshdns looks up (label lengths are below `A`, so they are
/// left as they are).
pub fn canonical(rtype: RType, mut w: Vec<u8>) -> Vec<u8> {
    match rtype {
        DNAME => w.make_ascii_lowercase(),
        crate::svcb::SVCB | crate::svcb::HTTPS if w.len() > 2 => {
            let end = 2 + wire_name_len(&w[2..]).unwrap_or(0);
            w[2..end].make_ascii_lowercase();
        }
        _ => {}
    }
    w
}

/// Whether `w` is data `rtype` can hold (for types of this module; any bytes for a type
/// meshdns does not know, none for a refused type).
pub fn valid_wire(rtype: RType, w: &[u8]) -> bool {
    if refused(rtype).is_some() || w.len() > usize::from(u16::MAX) {
        return false;
    }
    match rtype {
        TLSA => w.len() >= 4,
        SSHFP => w.len() >= 3,
        RType::DS => w.len() >= 5,
        URI => w.len() >= 5,
        RType::HINFO => strings(w, 2) == Some(w.len()),
        crate::svcb::SVCB | crate::svcb::HTTPS => crate::svcb::valid_wire(w),
        DNAME => wire_name_len(w) == Some(w.len()) && Name::from_wire(w).is_some(),
        NAPTR => strings(&w[w.len().min(4)..], 3)
            .map(|at| 4 + at)
            .is_some_and(|at| {
                w.len() >= 4
                    && wire_name_len(&w[at..]) == Some(w.len() - at)
                    && Name::from_wire(&w[at..]).is_some()
            }),
        _ => true,
    }
}

fn upper_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    bytes.iter().try_for_each(|b| write!(f, "{b:02X}"))
}

fn quoted(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    let mut out = String::new();
    crate::rdata::write_char_string(&mut out, bytes);
    f.write_str(&out)
}

/// Writes `w` (checked by [`valid_wire`]) in `rtype`'s presentation form; the RFC 3597 form
/// for types without one.
pub fn display(rtype: RType, w: &[u8], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let u16_at = |at: usize| u16::from_be_bytes([w[at], w[at + 1]]);
    match rtype {
        TLSA if w.len() >= 4 => {
            write!(f, "{} {} {} ", w[0], w[1], w[2])?;
            upper_hex(f, &w[3..])
        }
        SSHFP if w.len() >= 3 => {
            write!(f, "{} {} ", w[0], w[1])?;
            upper_hex(f, &w[2..])
        }
        RType::DS if w.len() >= 5 => {
            write!(f, "{} {} {} ", u16_at(0), w[2], w[3])?;
            upper_hex(f, &w[4..])
        }
        URI if w.len() >= 5 => {
            write!(f, "{} {} ", u16_at(0), u16_at(2))?;
            quoted(f, &w[4..])
        }
        RType::HINFO if valid_wire(rtype, w) => {
            let cpu = 1 + usize::from(w[0]);
            quoted(f, &w[1..cpu])?;
            f.write_str(" ")?;
            quoted(f, &w[cpu + 1..])
        }
        crate::svcb::SVCB | crate::svcb::HTTPS if valid_wire(rtype, w) => {
            crate::svcb::display(w, f)
        }
        DNAME if valid_wire(rtype, w) => match Name::from_wire(w) {
            Some(n) => write!(f, "{n}"),
            None => f.write_str("."),
        },
        NAPTR if valid_wire(rtype, w) => {
            write!(f, "{} {}", u16_at(0), u16_at(2))?;
            let mut at = 4;
            for _ in 0..3 {
                let len = usize::from(w[at]);
                f.write_str(" ")?;
                quoted(f, &w[at + 1..at + 1 + len])?;
                at += 1 + len;
            }
            match Name::from_wire(&w[at..]) {
                Some(n) => write!(f, " {n}"),
                None => f.write_str(" ."),
            }
        }
        _ => {
            write!(f, "\\# {}", w.len())?;
            if !w.is_empty() {
                f.write_str(" ")?;
                upper_hex(f, w)?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::name::Name;
    use crate::rdata::{RData, RType};

    fn origin() -> Name {
        "example.org.".parse().unwrap()
    }

    fn parse(rtype: RType, text: &str) -> Result<RData, String> {
        RData::parse(rtype, text, &origin()).map_err(|e| e.0)
    }

    #[test]
    fn each_type_reads_writes_and_reads_back_the_same() {
        for (rtype, text, shown) in [
            (
                super::TLSA,
                "3 1 1 0123456789abcdef",
                "3 1 1 0123456789ABCDEF",
            ),
            (super::TLSA, "3 1 1 0123 4567", "3 1 1 01234567"),
            (super::SSHFP, "4 2 abcdef01", "4 2 ABCDEF01"),
            (RType::DS, "60485 8 2 D4B7D520", "60485 8 2 D4B7D520"),
            (
                super::URI,
                "10 1 \"https://example.org/\"",
                "10 1 \"https://example.org/\"",
            ),
            (
                super::NAPTR,
                "100 10 \"S\" \"SIP+D2U\" \"\" _sip._udp",
                "100 10 \"S\" \"SIP+D2U\" \"\" _sip._udp.example.org.",
            ),
            (RType::HINFO, "\"amd64\" \"linux\"", "\"amd64\" \"linux\""),
            (super::DNAME, "Target", "target.example.org."),
            (super::DNAME, "\\# 5 0141014200", "a.b."),
            (RType(65534), "\\# 4 0A000001", "\\# 4 0A000001"),
            (RType(65534), "\\# 0", "\\# 0"),
            // HTTPS in RFC 3597 form: read as HTTPS (priority 1, the root as target).
            (RType(65), "\\# 3 000100", "1 ."),
            // A type meshdns reads itself, given in RFC 3597 form, is that type.
            (RType::A, "\\# 4 C0000201", "192.0.2.1"),
            (super::TLSA, "\\# 5 0301011234", "3 1 1 1234"),
        ] {
            let rd = parse(rtype, text).unwrap_or_else(|e| panic!("{rtype} {text}: {e}"));
            assert_eq!(rd.rtype(), rtype);
            assert_eq!(rd.to_string(), shown, "{rtype} {text}");
            let mut wire = Vec::new();
            rd.to_wire(&mut wire);
            assert_eq!(
                RData::from_wire(rtype, &wire),
                Some(rd.clone()),
                "{rtype} {text}"
            );
            assert_eq!(parse(rtype, shown), Ok(rd), "{rtype} {shown}");
        }
    }

    #[test]
    fn bad_data_is_refused_with_the_rule() {
        for (rtype, text, want) in [
            (super::TLSA, "3 1 1 xyz0", "not hexadecimal"),
            (super::TLSA, "3 1 1 abc", "not hexadecimal"),
            (
                super::TLSA,
                "3 1 1",
                "TLSA takes usage selector matching-type data",
            ),
            (
                super::TLSA,
                "300 1 1 ab",
                "TLSA usage \"300\" is not a number 0-255",
            ),
            (super::SSHFP, "4 2", "SSHFP takes"),
            (RType::DS, "70000 8 2 ab", "DS key tag"),
            (super::URI, "10 1 \"\"", "URI target must not be empty"),
            (
                super::NAPTR,
                "100 10 \"S\" \"SIP\" \"\"",
                "NAPTR takes 6 fields",
            ),
            (RType::HINFO, "\"amd64\"", "HINFO takes 2 fields"),
            (RType(65534), "\\# 4 0A00", "\\# length 4 but 2 bytes"),
            (RType(65534), "\\#", "needs a length"),
            (RType(65534), "0A000001", "give it in the RFC 3597 form"),
            (RType::A, "\\# 3 C00002", "3 bytes are not what A holds"),
            (RType(46), "\\# 1 00", "does not sign zones"),
            (super::TLSA, "3 1 1 +f+f", "not hexadecimal"),
            (
                RType::CNAME,
                "\\# 2 0000",
                "2 bytes are not what CNAME holds",
            ),
            (RType::TXT, "\\# 0", "0 bytes are not what TXT holds"),
            (super::DNAME, "a. b.", "DNAME takes 1 field (target), got 2"),
            (super::DNAME, "\"a.\"", "DNAME target must be a name"),
            (super::DNAME, "a..b.", "DNAME target \"a..b.\""),
            (
                super::DNAME,
                "\\# 2 0101",
                "2 bytes long is not what DNAME holds",
            ),
            (RType(41), "\\# 0", "meta type"),
            (RType(252), "\\# 0", "query type"),
        ] {
            let got = parse(rtype, text).expect_err(text);
            assert!(got.contains(want), "{rtype} {text}: {got}");
        }
    }

    #[test]
    fn wire_of_the_wrong_shape_is_refused() {
        assert!(RData::from_wire(super::TLSA, &[3, 1, 1]).is_none());
        assert!(RData::from_wire(RType::HINFO, &[1, b'a', 5, b'b']).is_none());
        assert!(RData::from_wire(super::NAPTR, &[0, 1, 0, 2, 0, 0, 0, 1]).is_none());
        assert!(RData::from_wire(super::NAPTR, &[0, 1, 0, 2, 0, 0, 0, 0]).is_some());
        assert!(RData::from_wire(RType(50), &[1]).is_none());
        assert!(RData::from_wire(RType(65534), &[]).is_some());
    }
}
