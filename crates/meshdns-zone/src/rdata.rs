//! Record types and their data: presentation format in, wire format out.
//!
//! Wire layouts: A/AAAA (RFC 1035 §3.4.1, RFC 3596), NS/CNAME/PTR/MX/SOA/TXT (RFC 1035 §3.3),
//! SRV (RFC 2782; its target is never compressed), CAA (RFC 8659).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::name::Name;
use crate::text::{Token, character_string, character_string_into, parse_ttl, tokenize};

/// A record type code (RFC 1035 §3.2.2 and successors).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RType(pub u16);

impl RType {
    /// IPv4 address.
    pub const A: RType = RType(1);
    /// Name server.
    pub const NS: RType = RType(2);
    /// Canonical name.
    pub const CNAME: RType = RType(5);
    /// Start of authority.
    pub const SOA: RType = RType(6);
    /// Pointer.
    pub const PTR: RType = RType(12);
    /// Host information.
    pub const HINFO: RType = RType(13);
    /// Mail exchange.
    pub const MX: RType = RType(15);
    /// Text.
    pub const TXT: RType = RType(16);
    /// IPv6 address.
    pub const AAAA: RType = RType(28);
    /// Service location.
    pub const SRV: RType = RType(33);
    /// Delegation signer (answered by the parent side of a zone cut).
    pub const DS: RType = RType(43);
    /// EDNS0 pseudo-record.
    pub const OPT: RType = RType(41);
    /// Certification authority authorisation.
    pub const CAA: RType = RType(257);
    /// Incremental zone transfer.
    pub const IXFR: RType = RType(251);
    /// Full zone transfer.
    pub const AXFR: RType = RType(252);
    /// Mailbox-related records (obsolete meta type).
    pub const MAILB: RType = RType(253);
    /// Mail agent records (obsolete meta type).
    pub const MAILA: RType = RType(254);
    /// Any type (QTYPE only).
    pub const ANY: RType = RType(255);

    const NAMES: [(RType, &'static str); 28] = [
        (RType::A, "A"),
        (RType::NS, "NS"),
        (RType::CNAME, "CNAME"),
        (RType::SOA, "SOA"),
        (RType::PTR, "PTR"),
        (RType::HINFO, "HINFO"),
        (RType::MX, "MX"),
        (RType::TXT, "TXT"),
        (RType::AAAA, "AAAA"),
        (RType::SRV, "SRV"),
        (RType::OPT, "OPT"),
        (RType::CAA, "CAA"),
        (RType::IXFR, "IXFR"),
        (RType::AXFR, "AXFR"),
        (RType::ANY, "ANY"),
        (RType(65), "HTTPS"),
        (RType(64), "SVCB"),
        (RType(52), "TLSA"),
        (RType(44), "SSHFP"),
        (RType(35), "NAPTR"),
        (RType(256), "URI"),
        (RType::DS, "DS"),
        (RType(39), "DNAME"),
        (RType(46), "RRSIG"),
        (RType(47), "NSEC"),
        (RType(48), "DNSKEY"),
        (RType(50), "NSEC3"),
        (RType(51), "NSEC3PARAM"),
    ];

    /// Parses a mnemonic (`AAAA`, any case) or the RFC 3597 form `TYPE28`.
    pub fn from_mnemonic(text: &str) -> Option<RType> {
        if text
            .get(..4)
            .is_some_and(|p| p.eq_ignore_ascii_case("TYPE"))
        {
            return text[4..].parse().ok().map(RType);
        }
        Self::NAMES
            .iter()
            .find(|(_, name)| name.eq_ignore_ascii_case(text))
            .map(|(t, _)| *t)
    }

    /// The mnemonic, when the type has one meshdns knows.
    pub fn mnemonic(self) -> Option<&'static str> {
        Self::NAMES
            .iter()
            .find(|(t, _)| *t == self)
            .map(|(_, n)| *n)
    }

    /// The record types every source of meshdns serves, the cluster's objects included.
    pub const SERVED: [RType; 10] = [
        RType::A,
        RType::AAAA,
        RType::CNAME,
        RType::TXT,
        RType::SRV,
        RType::MX,
        RType::NS,
        RType::PTR,
        RType::CAA,
        RType::SOA,
    ];

    /// The record types past [`RType::SERVED`] that zone files and records files read in their
    /// own presentation form; any other type but those refused
    /// ([`crate::rdata_other::refused`]) is read in the RFC 3597 form, `\# LENGTH HEX`.
    pub const PRESENTED: [RType; 9] = [
        crate::rdata_other::TLSA,
        crate::rdata_other::SSHFP,
        RType::DS,
        crate::rdata_other::URI,
        crate::rdata_other::NAPTR,
        crate::rdata_other::DNAME,
        RType::HINFO,
        crate::svcb::SVCB,
        crate::svcb::HTTPS,
    ];
}

impl fmt::Display for RType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mnemonic() {
            Some(n) => f.write_str(n),
            None => write!(f, "TYPE{}", self.0),
        }
    }
}

impl fmt::Debug for RType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The SOA fields (RFC 1035 §3.3.13).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Soa {
    /// Primary name server.
    pub mname: Name,
    /// Mailbox of the person responsible, as a name.
    pub rname: Name,
    /// Version of the zone.
    pub serial: u32,
    /// Seconds between secondary refreshes.
    pub refresh: u32,
    /// Seconds between failed refresh retries.
    pub retry: u32,
    /// Seconds after which a secondary stops answering.
    pub expire: u32,
    /// Negative-caching TTL bound (RFC 2308 §4).
    pub minimum: u32,
}

/// The data of one resource record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RData {
    /// IPv4 address.
    A(Ipv4Addr),
    /// IPv6 address.
    Aaaa(Ipv6Addr),
    /// Alias target.
    Cname(Name),
    /// Name server.
    Ns(Name),
    /// Pointer target.
    Ptr(Name),
    /// Mail exchange.
    Mx {
        /// Lower is preferred.
        preference: u16,
        /// Mail host.
        exchange: Name,
    },
    /// One or more character-strings of at most 255 bytes each.
    Txt(Vec<Box<[u8]>>),
    /// Service location.
    Srv {
        /// Lower is tried first.
        priority: u16,
        /// Relative weight among equal priorities.
        weight: u16,
        /// Service port.
        port: u16,
        /// Host providing the service.
        target: Name,
    },
    /// Certification authority authorisation.
    Caa {
        /// Flags byte (128 = critical).
        flags: u8,
        /// Property tag (`issue`, `issuewild`, `iodef`, …).
        tag: Box<str>,
        /// Property value.
        value: Box<[u8]>,
    },
    /// Start of authority.
    Soa(Box<Soa>),
    /// Any other type, as its wire bytes (no name in them is compressed, RFC 3597 §4): TLSA,
    /// SSHFP, DS, URI, NAPTR, HINFO, and any type given in RFC 3597 form
    /// ([`crate::rdata_other`]).
    Other {
        /// The type.
        rtype: RType,
        /// The data as on the wire.
        data: Box<[u8]>,
    },
}

/// The most data one TXT record may carry: RDLENGTH is 16 bits, and the whole message must
/// also fit in 65,535 bytes.
pub const MAX_TXT_BYTES: usize = 60_000;

/// Why record data did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RDataError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, RDataError> {
    Err(RDataError(msg.into()))
}

impl RData {
    /// The type of this data.
    pub fn rtype(&self) -> RType {
        match self {
            RData::A(_) => RType::A,
            RData::Aaaa(_) => RType::AAAA,
            RData::Cname(_) => RType::CNAME,
            RData::Ns(_) => RType::NS,
            RData::Ptr(_) => RType::PTR,
            RData::Mx { .. } => RType::MX,
            RData::Txt(_) => RType::TXT,
            RData::Srv { .. } => RType::SRV,
            RData::Caa { .. } => RType::CAA,
            RData::Soa(_) => RType::SOA,
            RData::Other { rtype, .. } => *rtype,
        }
    }

    /// One TXT record holding `text`, split into 255-byte character-strings when longer.
    pub fn txt_from_text(text: &[u8]) -> Result<RData, RDataError> {
        if text.len() > MAX_TXT_BYTES {
            return err(format!(
                "TXT text of {} bytes is longer than {MAX_TXT_BYTES}",
                text.len()
            ));
        }
        if text.is_empty() {
            return Ok(RData::Txt(vec![Box::new([])]));
        }
        Ok(RData::Txt(text.chunks(255).map(Box::from).collect()))
    }

    /// Parses the presentation form of `rtype`'s data from one line of text, with relative
    /// names completed by `origin`.
    pub fn parse(rtype: RType, text: &str, origin: &Name) -> Result<RData, RDataError> {
        let tokens = tokenize(text).map_err(RDataError)?;
        Self::from_tokens(rtype, &tokens, origin)
    }

    /// Parses `rtype`'s data from presentation-format fields and appends its uncompressed wire
    /// form to `out`: the same bytes and the same errors as [`RData::from_tokens`] followed by
    /// [`RData::to_wire`]. A bulk load calls this; the common types (A, AAAA, TXT, and the
    /// name-only CNAME, NS and PTR) are written without building an [`RData`] and allocate
    /// nothing. On error `out` is left as it was.
    pub fn wire_from_tokens(
        rtype: RType,
        t: &[Token<'_>],
        origin: &Name,
        out: &mut Vec<u8>,
    ) -> Result<(), RDataError> {
        let start = out.len();
        let single = (t.len() == 1 && !t[0].quoted).then(|| t[0].text);
        let written = match (rtype, single) {
            (RType::A, Some(text)) => text
                .parse::<Ipv4Addr>()
                .map(|a| out.extend_from_slice(&a.octets()))
                .is_ok(),
            (RType::AAAA, Some(text)) => parse_ipv6(text)
                .map(|a| out.extend_from_slice(&a.octets()))
                .is_ok(),
            (RType::CNAME | RType::NS | RType::PTR, Some(text)) => {
                Name::parse_into(text, Some(origin), out).is_ok()
            }
            (RType::TXT, _) => {
                !t.is_empty()
                    && t.iter().all(|tok| character_string_into(tok, out).is_ok())
                    && out.len() - start <= MAX_TXT_BYTES
            }
            _ => false,
        };
        if !written {
            // Other types, and every error: the general path, which words the reason.
            out.truncate(start);
            Self::from_tokens(rtype, t, origin)?.to_wire(out);
        }
        Ok(())
    }

    /// Parses `rtype`'s data from presentation-format fields.
    pub fn from_tokens(rtype: RType, t: &[Token<'_>], origin: &Name) -> Result<RData, RDataError> {
        if let Some(data) = crate::rdata_other::parse(rtype, t, origin) {
            let data = data?;
            // The RFC 3597 form of a type meshdns parses itself: read back as that type.
            // Read back exactly (no bytes left over), and a TXT holds at least one string.
            return Self::from_wire(rtype, &data)
                .filter(|rd| {
                    let mut back = Vec::new();
                    rd.to_wire(&mut back);
                    back == data && !matches!(rd, RData::Txt(s) if s.is_empty())
                })
                .ok_or_else(|| {
                    RDataError(format!("{} bytes are not what {rtype} holds", data.len()))
                });
        }
        let want = |n: usize, fields: &str| -> Result<(), RDataError> {
            if t.len() == n {
                Ok(())
            } else {
                err(format!(
                    "{rtype} takes {n} field(s) ({fields}), got {}",
                    t.len()
                ))
            }
        };
        let bare = |i: usize| -> Result<&str, RDataError> {
            let tok = &t[i];
            if tok.quoted {
                return err(format!("{rtype}: field {} must not be quoted", i + 1));
            }
            Ok(tok.text)
        };
        let name = |i: usize| -> Result<Name, RDataError> {
            let text = bare(i)?;
            Name::parse(text, Some(origin)).map_err(|e| RDataError(format!("{text:?}: {e}")))
        };
        let num16 = |i: usize, what: &str| -> Result<u16, RDataError> {
            let text = bare(i)?;
            text.parse()
                .map_err(|_| RDataError(format!("{what} {text:?} is not a number 0-65535")))
        };
        let num32 = |i: usize, what: &str| -> Result<u32, RDataError> {
            let text = bare(i)?;
            parse_ttl(text)
                .map_err(|_| RDataError(format!("{what} {text:?} is not a 32-bit number")))
        };
        Ok(match rtype {
            RType::A => {
                want(1, "IPv4 address")?;
                let text = bare(0)?;
                RData::A(
                    text.parse()
                        .map_err(|_| RDataError(format!("{text:?} is not an IPv4 address")))?,
                )
            }
            RType::AAAA => {
                want(1, "IPv6 address")?;
                let text = bare(0)?;
                RData::Aaaa(parse_ipv6(text)?)
            }
            RType::CNAME => {
                want(1, "target name")?;
                RData::Cname(name(0)?)
            }
            RType::NS => {
                want(1, "name server")?;
                RData::Ns(name(0)?)
            }
            RType::PTR => {
                want(1, "target name")?;
                RData::Ptr(name(0)?)
            }
            RType::MX => {
                want(2, "preference exchange")?;
                RData::Mx {
                    preference: num16(0, "preference")?,
                    exchange: name(1)?,
                }
            }
            RType::TXT => {
                if t.is_empty() {
                    return err("TXT needs at least one string");
                }
                let strings = t
                    .iter()
                    .map(|tok| character_string(tok).map(Box::from))
                    .collect::<Result<Vec<Box<[u8]>>, _>>()
                    .map_err(RDataError)?;
                let total: usize = strings.iter().map(|s| s.len() + 1).sum();
                if total > MAX_TXT_BYTES {
                    return err(format!(
                        "TXT data of {total} bytes is longer than {MAX_TXT_BYTES}"
                    ));
                }
                RData::Txt(strings)
            }
            RType::SRV => {
                want(4, "priority weight port target")?;
                RData::Srv {
                    priority: num16(0, "priority")?,
                    weight: num16(1, "weight")?,
                    port: num16(2, "port")?,
                    target: name(3)?,
                }
            }
            RType::CAA => {
                want(3, "flags tag value")?;
                let flags_text = bare(0)?;
                let flags = flags_text.parse().map_err(|_| {
                    RDataError(format!("flags {flags_text:?} is not a number 0-255"))
                })?;
                let tag = bare(1)?;
                if tag.is_empty()
                    || tag.len() > 15
                    || !tag.bytes().all(|b| b.is_ascii_alphanumeric())
                {
                    return err(format!("CAA tag {tag:?} must be 1-15 letters or digits"));
                }
                let value = character_string(&t[2]).map_err(RDataError)?;
                RData::Caa {
                    flags,
                    tag: tag.to_ascii_lowercase().into(),
                    value: value.into(),
                }
            }
            RType::SOA => {
                want(7, "mname rname serial refresh retry expire minimum")?;
                RData::Soa(Box::new(Soa {
                    mname: name(0)?,
                    rname: name(1)?,
                    serial: num32(2, "serial")?,
                    refresh: num32(3, "refresh")?,
                    retry: num32(4, "retry")?,
                    expire: num32(5, "expire")?,
                    minimum: num32(6, "minimum")?,
                }))
            }
            other => unreachable!("{other} is parsed by rdata_other"),
        })
    }
}

impl RData {
    /// Appends the uncompressed wire form (RFC 1035 §3.3; names lower-cased, absolute).
    pub fn to_wire(&self, out: &mut Vec<u8>) {
        match self {
            RData::A(a) => out.extend_from_slice(&a.octets()),
            RData::Aaaa(a) => out.extend_from_slice(&a.octets()),
            RData::Cname(n) | RData::Ns(n) | RData::Ptr(n) => out.extend_from_slice(n.wire()),
            RData::Mx {
                preference,
                exchange,
            } => {
                out.extend_from_slice(&preference.to_be_bytes());
                out.extend_from_slice(exchange.wire());
            }
            RData::Txt(strings) => {
                for s in strings {
                    out.push(s.len() as u8);
                    out.extend_from_slice(s);
                }
            }
            RData::Srv {
                priority,
                weight,
                port,
                target,
            } => {
                for v in [priority, weight, port] {
                    out.extend_from_slice(&v.to_be_bytes());
                }
                out.extend_from_slice(target.wire());
            }
            RData::Caa { flags, tag, value } => {
                out.push(*flags);
                out.push(tag.len() as u8);
                out.extend_from_slice(tag.as_bytes());
                out.extend_from_slice(value);
            }
            RData::Soa(s) => {
                out.extend_from_slice(s.mname.wire());
                out.extend_from_slice(s.rname.wire());
                for v in [s.serial, s.refresh, s.retry, s.expire, s.minimum] {
                    out.extend_from_slice(&v.to_be_bytes());
                }
            }
            RData::Other { data, .. } => out.extend_from_slice(data),
        }
    }

    /// Decodes the uncompressed wire form written by [`RData::to_wire`].
    pub fn from_wire(rtype: RType, w: &[u8]) -> Option<RData> {
        let u16_at = |at: usize| Some(u16::from_be_bytes([*w.get(at)?, *w.get(at + 1)?]));
        let u32_at = |at: usize| Some(u32::from_be_bytes(w.get(at..at + 4)?.try_into().ok()?));
        let name_at = |at: usize| -> Option<(Name, usize)> {
            let len = wire_name_len(w.get(at..)?)?;
            Some((Name::from_wire(&w[at..at + len])?, at + len))
        };
        Some(match rtype {
            RType::A => RData::A(<[u8; 4]>::try_from(w).ok()?.into()),
            RType::AAAA => RData::Aaaa(<[u8; 16]>::try_from(w).ok()?.into()),
            RType::CNAME => RData::Cname(name_at(0)?.0),
            RType::NS => RData::Ns(name_at(0)?.0),
            RType::PTR => RData::Ptr(name_at(0)?.0),
            RType::MX => RData::Mx {
                preference: u16_at(0)?,
                exchange: name_at(2)?.0,
            },
            RType::TXT => {
                let mut strings = Vec::new();
                let mut at = 0;
                while at < w.len() {
                    let len = w[at] as usize;
                    strings.push(Box::from(w.get(at + 1..at + 1 + len)?));
                    at += 1 + len;
                }
                RData::Txt(strings)
            }
            RType::SRV => RData::Srv {
                priority: u16_at(0)?,
                weight: u16_at(2)?,
                port: u16_at(4)?,
                target: name_at(6)?.0,
            },
            RType::CAA => {
                let tag_len = *w.get(1)? as usize;
                let tag = std::str::from_utf8(w.get(2..2 + tag_len)?).ok()?;
                RData::Caa {
                    flags: w[0],
                    tag: tag.into(),
                    value: w[2 + tag_len..].into(),
                }
            }
            RType::SOA => {
                let (mname, at) = name_at(0)?;
                let (rname, at) = name_at(at)?;
                RData::Soa(Box::new(Soa {
                    mname,
                    rname,
                    serial: u32_at(at)?,
                    refresh: u32_at(at + 4)?,
                    retry: u32_at(at + 8)?,
                    expire: u32_at(at + 12)?,
                    minimum: u32_at(at + 16)?,
                }))
            }
            other => {
                if !crate::rdata_other::valid_wire(other, w) {
                    return None;
                }
                RData::Other {
                    rtype: other,
                    data: crate::rdata_other::canonical(other, w.to_vec()).into(),
                }
            }
        })
    }
}

/// Length of the uncompressed wire name at the start of `w`, root byte included.
pub fn wire_name_len(w: &[u8]) -> Option<usize> {
    let mut at = 0;
    loop {
        let len = *w.get(at)? as usize;
        if len > 63 {
            return None;
        }
        at += 1 + len;
        if len == 0 {
            return Some(at);
        }
    }
}

/// Parses an IPv6 address, refusing IPv4 text and IPv4-mapped addresses with a clear reason.
pub fn parse_ipv6(text: &str) -> Result<Ipv6Addr, RDataError> {
    if !text.contains(':') && text.parse::<Ipv4Addr>().is_ok() {
        return err(format!(
            "{text:?} is an IPv4 address where IPv6 is expected"
        ));
    }
    let addr: Ipv6Addr = text
        .parse()
        .map_err(|_| RDataError(format!("{text:?} is not an IPv6 address")))?;
    if addr.to_ipv4_mapped().is_some() {
        return err(format!(
            "{text:?} is an IPv4-mapped address where IPv6 is expected"
        ));
    }
    Ok(addr)
}

pub(crate) fn write_char_string(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for &b in bytes {
        match b {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(b as char);
            }
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03}")),
        }
    }
    out.push('"');
}

impl fmt::Display for RData {
    /// Presentation format, as a zone file would hold it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RData::A(a) => write!(f, "{a}"),
            RData::Aaaa(a) => write!(f, "{a}"),
            RData::Cname(n) | RData::Ns(n) | RData::Ptr(n) => write!(f, "{n}"),
            RData::Mx {
                preference,
                exchange,
            } => write!(f, "{preference} {exchange}"),
            RData::Txt(strings) => {
                let mut out = String::new();
                for (i, s) in strings.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    write_char_string(&mut out, s);
                }
                f.write_str(&out)
            }
            RData::Srv {
                priority,
                weight,
                port,
                target,
            } => write!(f, "{priority} {weight} {port} {target}"),
            RData::Caa { flags, tag, value } => {
                let mut out = String::new();
                write_char_string(&mut out, value);
                write!(f, "{flags} {tag} {out}")
            }
            RData::Soa(s) => write!(
                f,
                "{} {} {} {} {} {} {}",
                s.mname, s.rname, s.serial, s.refresh, s.retry, s.expire, s.minimum
            ),
            RData::Other { rtype, data } => crate::rdata_other::display(*rtype, data, f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Name {
        "example.org.".parse().unwrap()
    }

    #[test]
    fn the_bulk_wire_writer_matches_parse_then_to_wire_bytes_and_errors() {
        let long = format!("\"{}\"", "x".repeat(256));
        let many = vec![format!("\"{}\"", "y".repeat(250)); 241].join(" ");
        let cases: &[(RType, &str)] = &[
            (RType::A, "192.0.2.1"),
            (RType::A, "300.1.1.1"),
            (RType::A, "\"192.0.2.1\""),
            (RType::A, "192.0.2.1 192.0.2.2"),
            (RType::A, ""),
            (RType::AAAA, "2001:DB8::1"),
            (RType::AAAA, "192.0.2.1"),
            (RType::AAAA, "::ffff:192.0.2.1"),
            (RType::CNAME, "WWW"),
            (RType::CNAME, "www.other.net."),
            (RType::CNAME, "a..b"),
            (RType::CNAME, "@"),
            (RType::NS, "ns\\.1"),
            (RType::PTR, "host x"),
            (RType::TXT, r#""hello world" two "\065\"q""#),
            (RType::TXT, r#""""#),
            (RType::TXT, r#""bad \9""#),
            (RType::TXT, &long),
            (RType::TXT, &many),
            (RType::TXT, ""),
            (RType::MX, "10 mail"),
            (RType::SRV, "0 5 443 svc"),
            (RType::CAA, r#"0 issue "letsencrypt.org""#),
            (RType::SOA, "ns1 hostmaster 1 2 3 4 5"),
            (RType::SOA, "ns1 hostmaster 1 2 3 4"),
        ];
        for (rtype, text) in cases {
            let tokens = tokenize(text).unwrap();
            let expected = RData::from_tokens(*rtype, &tokens, &origin()).map(|d| {
                let mut w = vec![0xAA];
                d.to_wire(&mut w);
                w
            });
            let mut out = vec![0xAA];
            let got =
                RData::wire_from_tokens(*rtype, &tokens, &origin(), &mut out).map(|()| out.clone());
            assert_eq!(got, expected, "{rtype} {text:?}");
            if got.is_err() {
                assert_eq!(out, [0xAA], "{rtype} {text:?}: nothing written on error");
            }
        }
    }

    #[test]
    fn parses_every_served_type_and_prints_it_back() {
        let cases = [
            (RType::A, "192.0.2.1", "192.0.2.1"),
            (RType::AAAA, "2001:db8::1", "2001:db8::1"),
            (RType::CNAME, "www", "www.example.org."),
            (RType::NS, "ns1.other.net.", "ns1.other.net."),
            (RType::PTR, "host", "host.example.org."),
            (RType::MX, "10 mail", "10 mail.example.org."),
            (
                RType::TXT,
                r#""hello world" "two""#,
                r#""hello world" "two""#,
            ),
            (RType::SRV, "0 5 443 svc", "0 5 443 svc.example.org."),
            (
                RType::CAA,
                r#"0 issue "letsencrypt.org""#,
                r#"0 issue "letsencrypt.org""#,
            ),
            (
                RType::SOA,
                "ns hostmaster 1 1h 10m 1d 5",
                "ns.example.org. hostmaster.example.org. 1 3600 600 86400 5",
            ),
        ];
        for (t, input, shown) in cases {
            let rd =
                RData::parse(t, input, &origin()).unwrap_or_else(|e| panic!("{t} {input}: {e}"));
            assert_eq!(rd.rtype(), t);
            assert_eq!(rd.to_string(), shown);
        }
    }

    #[test]
    fn rejects_bad_values_with_a_reason() {
        let o = origin();
        assert!(
            RData::parse(RType::A, "300.1.1.1", &o)
                .unwrap_err()
                .0
                .contains("not an IPv4")
        );
        assert!(
            RData::parse(RType::AAAA, "192.0.2.1", &o)
                .unwrap_err()
                .0
                .contains("IPv4 address where IPv6")
        );
        assert!(
            RData::parse(RType::AAAA, "::ffff:192.0.2.1", &o)
                .unwrap_err()
                .0
                .contains("IPv4-mapped")
        );
        assert!(
            RData::parse(RType::MX, "x mail", &o)
                .unwrap_err()
                .0
                .contains("preference")
        );
        assert!(
            RData::parse(RType::SRV, "1 2 3", &o)
                .unwrap_err()
                .0
                .contains("4 field")
        );
        assert!(
            RData::parse(RType(99), "x", &o)
                .unwrap_err()
                .0
                .contains("give it in the RFC 3597 form")
        );
    }

    #[test]
    fn wire_form_round_trips_every_type() {
        let o = origin();
        let cases = [
            (RType::A, "192.0.2.1"),
            (RType::AAAA, "2001:db8::1"),
            (RType::CNAME, "www"),
            (RType::NS, "ns1.other.net."),
            (RType::PTR, "host"),
            (RType::MX, "10 mail"),
            (RType::TXT, r#""hello world" "" "two""#),
            (RType::SRV, "0 5 443 svc"),
            (RType::CAA, r#"128 issuewild "ca.example""#),
            (RType::SOA, "ns hostmaster 1 2 3 4 5"),
        ];
        for (t, text) in cases {
            let rd = RData::parse(t, text, &o).unwrap();
            let mut wire = Vec::new();
            rd.to_wire(&mut wire);
            assert_eq!(RData::from_wire(t, &wire), Some(rd), "{t} {text}");
        }
        assert_eq!(RData::from_wire(RType::A, &[1, 2, 3]), None);
        assert_eq!(RData::from_wire(RType::MX, &[0, 1, 5, b'a']), None);
    }

    #[test]
    fn mnemonics_parse_both_forms() {
        assert_eq!(RType::from_mnemonic("aaaa"), Some(RType::AAAA));
        assert_eq!(RType::from_mnemonic("TYPE99"), Some(RType(99)));
        assert_eq!(RType::from_mnemonic("BOGUS"), None);
        assert_eq!(RType(99).to_string(), "TYPE99");
    }

    #[test]
    fn long_txt_is_split_into_255_byte_strings() {
        let RData::Txt(parts) = RData::txt_from_text(&[b'a'; 300]).unwrap() else {
            unreachable!()
        };
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            vec![255, 45]
        );
        assert!(RData::txt_from_text(&vec![b'a'; MAX_TXT_BYTES + 1]).is_err());
    }
}
