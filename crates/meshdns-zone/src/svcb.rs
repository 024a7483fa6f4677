//! SVCB and HTTPS (RFC 9460): `PRIORITY TARGET KEY=VALUE…` to and from the wire form, with
//! the rules a zone should hold: keys once each, mandatory keys present (and not `mandatory`
//! itself), `no-default-alpn` only beside `alpn`, no parameters in AliasMode (priority 0).
//! The target is never compressed on the wire (RFC 9460 §2.2).
//!
//! Keys by name: `mandatory` (0), `alpn` (1), `no-default-alpn` (2), `port` (3), `ipv4hint`
//! (4), `ech` (5, base64), `ipv6hint` (6), and any key as `keyNNNNN`.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::name::Name;
use crate::rdata::{RDataError, RType, parse_ipv6, wire_name_len};
use crate::text::{Token, unescaped};

/// SVCB.
pub const SVCB: RType = RType(64);
/// HTTPS.
pub const HTTPS: RType = RType(65);

const NAMES: [&str; 7] = [
    "mandatory",
    "alpn",
    "no-default-alpn",
    "port",
    "ipv4hint",
    "ech",
    "ipv6hint",
];

fn key_number(name: &str) -> Option<u16> {
    if let Some(i) = NAMES.iter().position(|n| *n == name) {
        return Some(i as u16);
    }
    let digits = name.strip_prefix("key")?;
    if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // 65535 is reserved ("Invalid key").
    digits.parse().ok().filter(|k| *k != 65535)
}

fn key_name(key: u16) -> String {
    NAMES
        .get(usize::from(key))
        .map_or_else(|| format!("key{key}"), |n| n.to_string())
}

fn err<T>(msg: impl Into<String>) -> Result<T, RDataError> {
    Err(RDataError(msg.into()))
}

/// Splits a value list on commas not escaped by `\` (RFC 9460 Appendix A.1).
fn comma_list(value: &[u8]) -> Vec<Vec<u8>> {
    let mut items = vec![Vec::new()];
    let mut bytes = value.iter();
    while let Some(&b) = bytes.next() {
        match b {
            b'\\' => {
                if let Some(&next) = bytes.next() {
                    items.last_mut().expect("one item").push(next);
                }
            }
            b',' => items.push(Vec::new()),
            _ => items.last_mut().expect("one item").push(b),
        }
    }
    items
}

fn text(value: &[u8], key: &str) -> Result<String, RDataError> {
    String::from_utf8(value.to_vec()).map_err(|_| RDataError(format!("{key}: not text")))
}

/// One parameter's wire value from its presentation value (`None`: no value given).
fn value(key: u16, name: &str, v: Option<&[u8]>) -> Result<Vec<u8>, RDataError> {
    let need = || RDataError(format!("{name} needs a value"));
    Ok(match key {
        0 => {
            let mut keys = Vec::new();
            for item in comma_list(v.ok_or_else(need)?) {
                let item = text(&item, name)?;
                let k = key_number(&item)
                    .ok_or_else(|| RDataError(format!("mandatory: {item:?} is not a key")))?;
                if k == 0 {
                    return err("mandatory may not list mandatory itself");
                }
                keys.push(k);
            }
            keys.sort_unstable();
            if keys.windows(2).any(|w| w[0] == w[1]) {
                return err("mandatory lists a key twice");
            }
            keys.iter().flat_map(|k| k.to_be_bytes()).collect()
        }
        1 => {
            let mut out = Vec::new();
            for id in comma_list(v.ok_or_else(need)?) {
                if id.is_empty() || id.len() > 255 {
                    return err("alpn: each protocol id is 1-255 bytes");
                }
                out.push(id.len() as u8);
                out.extend(id);
            }
            out
        }
        2 => {
            if v.is_some() {
                return err("no-default-alpn takes no value");
            }
            Vec::new()
        }
        3 => {
            let t = text(v.ok_or_else(need)?, name)?;
            t.parse::<u16>()
                .map_err(|_| RDataError(format!("port {t:?} is not a number 0-65535")))?
                .to_be_bytes()
                .to_vec()
        }
        4 => {
            let mut out = Vec::new();
            for a in comma_list(v.ok_or_else(need)?) {
                let a = text(&a, name)?;
                let ip: Ipv4Addr = a
                    .parse()
                    .map_err(|_| RDataError(format!("ipv4hint: {a:?} is not an IPv4 address")))?;
                out.extend(ip.octets());
            }
            out
        }
        5 => {
            let t = text(v.ok_or_else(need)?, name)?;
            data_encoding::BASE64
                .decode(t.as_bytes())
                .map_err(|_| RDataError(format!("ech: {t:?} is not base64")))?
        }
        6 => {
            let mut out = Vec::new();
            for a in comma_list(v.ok_or_else(need)?) {
                let a = text(&a, name)?;
                let ip: Ipv6Addr =
                    parse_ipv6(&a).map_err(|e| RDataError(format!("ipv6hint: {}", e.0)))?;
                out.extend(ip.octets());
            }
            out
        }
        _ => v.map(<[u8]>::to_vec).unwrap_or_default(),
    })
}

/// The wire form of SVCB or HTTPS data from its presentation fields.
pub fn parse(rtype: RType, t: &[Token<'_>], origin: &Name) -> Result<Vec<u8>, RDataError> {
    if t.len() < 2 {
        return err(format!(
            "{rtype} takes a priority, a target name, then parameters (key=value)"
        ));
    }
    if t[0].quoted || t[1].quoted {
        return err(format!("{rtype}: priority and target must not be quoted"));
    }
    let priority: u16 = t[0]
        .text
        .parse()
        .map_err(|_| RDataError(format!("priority {:?} is not a number 0-65535", t[0].text)))?;
    let target = Name::parse(t[1].text, Some(origin))
        .map_err(|e| RDataError(format!("target {:?}: {e}", t[1].text)))?;
    let mut params: Vec<(u16, Vec<u8>)> = Vec::new();
    let mut i = 2;
    while i < t.len() {
        let tok = &t[i];
        if tok.quoted {
            return err(format!(
                "{rtype}: a quoted value without its key ({:?})",
                tok.text
            ));
        }
        let (name, inline) = match tok.text.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (tok.text, None),
        };
        // `key="value"`: the tokenizer gives `key=` and the quoted value apart.
        let quoted_next = inline == Some("") && t.get(i + 1).is_some_and(|n| n.quoted);
        let raw: Option<Vec<u8>> = if quoted_next {
            i += 1;
            Some(unescaped(&t[i]).map_err(RDataError)?)
        } else {
            match inline {
                Some(v) => Some(
                    unescaped(&Token {
                        text: v,
                        quoted: false,
                    })
                    .map_err(RDataError)?,
                ),
                None => None,
            }
        };
        i += 1;
        let key = key_number(name)
            .ok_or_else(|| RDataError(format!("{name:?} is not a SvcParam key")))?;
        if params.iter().any(|(k, _)| *k == key) {
            return err(format!("{name} is given twice"));
        }
        params.push((key, value(key, name, raw.as_deref())?));
    }
    params.sort_by_key(|(k, _)| *k);
    check(priority, &params)?;
    let mut out = priority.to_be_bytes().to_vec();
    out.extend_from_slice(target.wire());
    for (key, v) in &params {
        if v.len() > usize::from(u16::MAX) {
            return err(format!("{} value too long", key_name(*key)));
        }
        out.extend(key.to_be_bytes());
        out.extend((v.len() as u16).to_be_bytes());
        out.extend(v);
    }
    Ok(out)
}

/// The rules between parameters (RFC 9460 §2.4.3, §7.1.1, §8).
fn check(priority: u16, params: &[(u16, Vec<u8>)]) -> Result<(), RDataError> {
    if priority == 0 && !params.is_empty() {
        return err("AliasMode (priority 0) takes no parameters");
    }
    let has = |k: u16| params.iter().any(|(key, _)| *key == k);
    if has(2) && !has(1) {
        return err("no-default-alpn needs alpn");
    }
    if let Some((_, m)) = params.iter().find(|(k, _)| *k == 0) {
        for k in m.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]])) {
            if !has(k) {
                return err(format!("mandatory key {} is missing", key_name(k)));
            }
        }
    }
    Ok(())
}

/// Wire data read apart.
struct Read<'a> {
    priority: u16,
    target_len: usize,
    params: Vec<(u16, &'a [u8])>,
}

/// The parts of wire data, when well formed (keys strictly increasing).
fn read(w: &[u8]) -> Option<Read<'_>> {
    let priority = u16::from_be_bytes([*w.first()?, *w.get(1)?]);
    let target_len = wire_name_len(w.get(2..)?)?;
    Name::from_wire(&w[2..2 + target_len])?;
    let mut at = 2 + target_len;
    let mut params = Vec::new();
    let mut last = None;
    while at < w.len() {
        let key = u16::from_be_bytes([*w.get(at)?, *w.get(at + 1)?]);
        let len = usize::from(u16::from_be_bytes([*w.get(at + 2)?, *w.get(at + 3)?]));
        let v = w.get(at + 4..at + 4 + len)?;
        // Keys strictly increasing (RFC 9460 §2.2).
        if last.is_some_and(|l| key <= l) {
            return None;
        }
        last = Some(key);
        params.push((key, v));
        at += 4 + len;
    }
    Some(Read {
        priority,
        target_len,
        params,
    })
}

/// Whether `w` is well-formed SVCB/HTTPS data, values shaped as their keys need.
pub fn valid_wire(w: &[u8]) -> bool {
    let Some(Read {
        priority, params, ..
    }) = read(w)
    else {
        return false;
    };
    let shaped = params.iter().all(|(k, v)| match k {
        // Keys strictly increasing, never mandatory itself (what the parser writes).
        0 => {
            let keys: Vec<u16> = v
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)]))
                .collect();
            !v.is_empty()
                && v.len() % 2 == 0
                && keys[0] != 0
                && keys.windows(2).all(|k| k[0] < k[1])
        }
        1 => {
            let mut at = 0;
            while at < v.len() {
                let len = usize::from(v[at]);
                if len == 0 {
                    return false;
                }
                at += 1 + len;
            }
            !v.is_empty() && at == v.len()
        }
        2 => v.is_empty(),
        3 => v.len() == 2,
        4 => !v.is_empty() && v.len() % 4 == 0,
        6 => !v.is_empty() && v.len() % 16 == 0,
        65535 => false,
        _ => true,
    });
    let owned: Vec<(u16, Vec<u8>)> = params.iter().map(|(k, v)| (*k, v.to_vec())).collect();
    shaped && check(priority, &owned).is_ok()
}

/// Writes a value byte by byte, escaping what presentation form must (and commas, for lists).
fn escaped(out: &mut String, bytes: &[u8], commas: bool) {
    for &b in bytes {
        match b {
            b',' if commas => out.push_str("\\\\,"),
            // In a list a backslash is escaped twice: once for the list, once for the text.
            b'\\' if commas => out.push_str("\\\\\\\\"),
            b'"' | b'\\' => {
                out.push('\\');
                out.push(b as char);
            }
            0x21..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03}")),
        }
    }
}

/// Writes `w` (checked by [`valid_wire`]) in presentation form.
pub fn display(w: &[u8], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let Some(Read {
        priority,
        target_len,
        params,
    }) = read(w)
    else {
        return f.write_str("\\# malformed");
    };
    let target = Name::from_wire(&w[2..2 + target_len]);
    match target {
        Some(t) => write!(f, "{priority} {t}")?,
        None => write!(f, "{priority} .")?,
    }
    for (key, v) in params {
        write!(f, " {}", key_name(key))?;
        let mut out = String::new();
        match key {
            0 => {
                let names: Vec<String> = v
                    .chunks(2)
                    .map(|c| key_name(u16::from_be_bytes([c[0], c[1]])))
                    .collect();
                out = names.join(",");
            }
            1 => {
                let mut at = 0;
                let mut first = true;
                while at < v.len() {
                    let len = usize::from(v[at]);
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    escaped(&mut out, &v[at + 1..at + 1 + len], true);
                    at += 1 + len;
                }
                out = format!("\"{out}\"");
            }
            2 => {}
            3 => out = u16::from_be_bytes([v[0], v[1]]).to_string(),
            4 => {
                let ips: Vec<String> = v
                    .chunks(4)
                    .map(|c| Ipv4Addr::new(c[0], c[1], c[2], c[3]).to_string())
                    .collect();
                out = ips.join(",");
            }
            5 => out = data_encoding::BASE64.encode(v),
            6 => {
                let ips: Vec<String> = v
                    .chunks(16)
                    .map(|c| Ipv6Addr::from(<[u8; 16]>::try_from(c).expect("16")).to_string())
                    .collect();
                out = ips.join(",");
            }
            _ => {
                if !v.is_empty() {
                    escaped(&mut out, v, false);
                    out = format!("\"{out}\"");
                }
            }
        }
        if key != 2 && !(key > 6 && v.is_empty()) {
            write!(f, "={out}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdata::RData;

    fn origin() -> Name {
        "example.org.".parse().unwrap()
    }

    #[test]
    fn presentation_and_wire_round_trip() {
        for (rtype, text, shown) in [
            (HTTPS, "0 pool.example.org.", "0 pool.example.org."),
            (
                HTTPS,
                "1 . alpn=h2,h3 port=8443",
                "1 . alpn=\"h2,h3\" port=8443",
            ),
            (
                HTTPS,
                "1 . alpn=\"h3,h2\" ipv4hint=192.0.2.1,192.0.2.2 ipv6hint=2001:db8::1",
                "1 . alpn=\"h3,h2\" ipv4hint=192.0.2.1,192.0.2.2 ipv6hint=2001:db8::1",
            ),
            (
                SVCB,
                "2 svc mandatory=port,alpn alpn=dot port=853 no-default-alpn",
                "2 svc.example.org. mandatory=alpn,port alpn=\"dot\" no-default-alpn port=853",
            ),
            (
                HTTPS,
                "1 . ech=AEX+DQ== key65000=hi key65001",
                "1 . ech=AEX+DQ== key65000=\"hi\" key65001",
            ),
        ] {
            let rd = RData::parse(rtype, text, &origin()).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(rd.to_string(), shown, "{text}");
            let mut wire = Vec::new();
            rd.to_wire(&mut wire);
            assert!(valid_wire(&wire), "{text}");
            assert_eq!(RData::from_wire(rtype, &wire), Some(rd.clone()));
            assert_eq!(RData::parse(rtype, shown, &origin()), Ok(rd), "{shown}");
        }
    }

    #[test]
    fn malformed_parameters_are_refused_with_the_rule() {
        for (text, want) in [
            ("0 . alpn=h2", "AliasMode (priority 0) takes no parameters"),
            ("1 . no-default-alpn", "no-default-alpn needs alpn"),
            (
                "1 . mandatory=port alpn=h2",
                "mandatory key port is missing",
            ),
            ("1 . mandatory=mandatory", "may not list mandatory itself"),
            ("1 . port=80 port=81", "port is given twice"),
            ("1 . port=http", "port \"http\" is not a number"),
            ("1 . ipv4hint=2001:db8::1", "is not an IPv4 address"),
            ("1 . ech=***", "is not base64"),
            ("1 . bogus=1", "\"bogus\" is not a SvcParam key"),
            ("1 . key65535=x", "\"key65535\" is not a SvcParam key"),
            ("1 . alpn", "alpn needs a value"),
            ("x .", "priority \"x\" is not a number"),
            ("1", "takes a priority, a target name"),
        ] {
            let got = RData::parse(HTTPS, text, &origin()).expect_err(text).0;
            assert!(got.contains(want), "{text}: {got}");
        }
        // A long value (over one character-string's 255 bytes) reads and writes back.
        let long = format!("1 . ech={}", data_encoding::BASE64.encode(&[7u8; 300]));
        let rd = RData::parse(HTTPS, &long, &origin()).unwrap();
        assert_eq!(rd.to_string(), long);
        // A backslash and a comma inside one alpn id survive the round trip.
        let rd = RData::parse(HTTPS, r#"1 . alpn="a\\\\b\\,c,h2""#, &origin()).unwrap();
        let mut wire = Vec::new();
        rd.to_wire(&mut wire);
        assert_eq!(&wire[7..], b"\x05a\\b,c\x02h2");
        assert_eq!(RData::parse(HTTPS, &rd.to_string(), &origin()), Ok(rd));
        // mandatory on the wire: keys increasing and never mandatory itself.
        for bad in [vec![0u8, 0], vec![0, 3, 0, 3]] {
            let mut w = vec![0, 1, 0, 0, 0, 0, bad.len() as u8];
            w.extend(&bad);
            w.extend([0, 3, 0, 2, 1, 187]);
            assert!(!valid_wire(&w), "{bad:?}");
        }
        // Keys out of order on the wire are not SVCB data.
        let mut w = vec![0, 1, 0];
        w.extend([0, 3, 0, 2, 1, 187, 0, 1, 0, 3, 2, b'h', b'2']);
        assert!(!valid_wire(&w));
    }
}
