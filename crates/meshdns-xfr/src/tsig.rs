//! TSIG (RFC 8945): shared-secret signatures on transfers and NOTIFY, and the key file.
//!
//! Keys are read from BIND's `key "name" { algorithm hmac-sha256; secret "…"; };` statements,
//! the format NSD, Knot and BIND's tools also read. HMAC is ring's.

use meshdns_zone::{Name, RType};
use ring::hmac;

use crate::message::{CLASS_ANY, HEADER_LEN, Message, TYPE_TSIG};

/// TSIG error codes (RFC 8945 §3, the extended RCODEs it uses).
pub mod error {
    /// No error.
    pub const NOERROR: u16 = 0;
    /// The MAC did not verify.
    pub const BADSIG: u16 = 16;
    /// The key is not known (name and algorithm).
    pub const BADKEY: u16 = 17;
    /// The time signed is outside the fudge.
    pub const BADTIME: u16 = 18;
    /// The MAC is truncated below what is accepted.
    pub const BADTRUNC: u16 = 22;
}

/// RCODE NOTAUTH, sent with a TSIG error.
pub const NOTAUTH: u8 = 9;

/// HMAC algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// hmac-sha1 (legacy; RFC 8945 lists it as mandatory to implement).
    HmacSha1,
    /// hmac-sha256 (the recommended one).
    HmacSha256,
    /// hmac-sha384.
    HmacSha384,
    /// hmac-sha512.
    HmacSha512,
}

impl Algorithm {
    /// By name, as key files and the wire spell it.
    pub fn from_name(name: &str) -> Option<Algorithm> {
        Some(
            match name.trim_end_matches('.').to_ascii_lowercase().as_str() {
                "hmac-sha1" => Algorithm::HmacSha1,
                "hmac-sha256" => Algorithm::HmacSha256,
                "hmac-sha384" => Algorithm::HmacSha384,
                "hmac-sha512" => Algorithm::HmacSha512,
                _ => return None,
            },
        )
    }

    /// The name without the final dot.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::HmacSha1 => "hmac-sha1",
            Algorithm::HmacSha256 => "hmac-sha256",
            Algorithm::HmacSha384 => "hmac-sha384",
            Algorithm::HmacSha512 => "hmac-sha512",
        }
    }

    fn wire(self) -> Vec<u8> {
        Name::parse(self.name(), Some(&Name::root()))
            .expect("algorithm names are valid")
            .wire()
            .to_vec()
    }

    fn ring(self) -> hmac::Algorithm {
        match self {
            Algorithm::HmacSha1 => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            Algorithm::HmacSha256 => hmac::HMAC_SHA256,
            Algorithm::HmacSha384 => hmac::HMAC_SHA384,
            Algorithm::HmacSha512 => hmac::HMAC_SHA512,
        }
    }
}

/// A TSIG key.
#[derive(Clone)]
pub struct Key {
    /// The key's name (lower-cased).
    pub name: Name,
    /// Its algorithm.
    pub algorithm: Algorithm,
    key: hmac::Key,
    /// Default fudge (seconds of clock difference accepted).
    pub fudge: u16,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("name", &self.name)
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl Key {
    /// A key from its secret bytes.
    pub fn new(name: Name, algorithm: Algorithm, secret: &[u8]) -> Key {
        Key {
            name,
            algorithm,
            key: hmac::Key::new(algorithm.ring(), secret),
            fudge: 300,
        }
    }
}

/// Why a key file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: line {line}: {reason}")]
pub struct KeyFileError {
    /// The file.
    pub file: String,
    /// Line number (1-based).
    pub line: usize,
    /// What was wrong and what is accepted.
    pub reason: String,
}

/// Reads `key "name" { algorithm …; secret "…"; };` statements (comments `#`, `//`, `/* */`;
/// other statements are refused, since a key file holds keys only).
pub fn parse_key_file(file: &str, text: &str) -> Result<Vec<Key>, KeyFileError> {
    let tokens = tokenize(text);
    let err = |line: usize, reason: String| KeyFileError {
        file: file.to_string(),
        line,
        reason,
    };
    let mut keys = Vec::new();
    let mut i = 0;
    let next = |i: &mut usize| {
        let t = tokens.get(*i).cloned();
        *i += 1;
        t
    };
    while let Some((line, word)) = next(&mut i) {
        if word != "key" {
            return Err(err(line, format!("expected `key`, found `{word}`")));
        }
        let (line, name) = next(&mut i).ok_or_else(|| err(line, "key name missing".into()))?;
        let name = Name::parse(name.trim_matches('"'), Some(&Name::root()))
            .map_err(|e| err(line, format!("key name {name}: {e}")))?;
        match next(&mut i) {
            Some((_, b)) if b == "{" => {}
            _ => return Err(err(line, "expected `{` after the key name".into())),
        }
        let (mut algorithm, mut secret) = (None, None);
        loop {
            let (line, field) = next(&mut i).ok_or_else(|| err(line, "unclosed `{`".into()))?;
            if field == "}" {
                break;
            }
            let (_, value) =
                next(&mut i).ok_or_else(|| err(line, format!("{field} has no value")))?;
            let value = value.trim_matches('"').to_string();
            match field.as_str() {
                "algorithm" => {
                    algorithm = Some(Algorithm::from_name(&value).ok_or_else(|| {
                        err(line, format!("algorithm {value} not supported (hmac-sha1, hmac-sha256, hmac-sha384, hmac-sha512)"))
                    })?)
                }
                "secret" => {
                    secret = Some(data_encoding::BASE64.decode(value.as_bytes()).map_err(|e| {
                        err(line, format!("secret is not base64: {e}"))
                    })?)
                }
                other => return Err(err(line, format!("unknown key field `{other}` (algorithm, secret)"))),
            }
            match next(&mut i) {
                Some((_, s)) if s == ";" => {}
                _ => return Err(err(line, format!("expected `;` after {field}"))),
            }
        }
        if let Some((_, s)) = tokens.get(i)
            && s == ";"
        {
            i += 1;
        }
        let algorithm =
            algorithm.ok_or_else(|| err(line, format!("key {name} has no algorithm")))?;
        let secret = secret.ok_or_else(|| err(line, format!("key {name} has no secret")))?;
        if keys.iter().any(|k: &Key| k.name == name) {
            return Err(err(line, format!("key {name} defined twice")));
        }
        keys.push(Key::new(name, algorithm, &secret));
    }
    Ok(keys)
}

fn tokenize(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                    }
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
            }
            '{' | '}' | ';' => out.push((line, c.to_string())),
            '"' => {
                let mut s = String::from('"');
                for c in chars.by_ref() {
                    s.push(c);
                    if c == '"' {
                        break;
                    }
                }
                out.push((line, s));
            }
            c => {
                let mut s = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || matches!(n, '{' | '}' | ';' | '"') {
                        break;
                    }
                    s.push(n);
                    chars.next();
                }
                out.push((line, s));
            }
        }
    }
    out
}

/// The fields of a TSIG record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tsig {
    /// Key name (lower-cased wire).
    pub key_name: Vec<u8>,
    /// Algorithm name (lower-cased wire).
    pub algorithm: Vec<u8>,
    /// Time signed (48 bits).
    pub time_signed: u64,
    /// Fudge.
    pub fudge: u16,
    /// MAC.
    pub mac: Vec<u8>,
    /// Original ID.
    pub original_id: u16,
    /// Error.
    pub error: u16,
    /// Other data.
    pub other: Vec<u8>,
}

impl Tsig {
    /// Reads the TSIG record of `msg`, if it has one.
    pub fn read(msg: &Message<'_>) -> Option<Result<(Tsig, usize), ()>> {
        let r = msg.tsig()?;
        let rd = msg.rdata(r);
        let parse = || -> Option<Tsig> {
            let mut algorithm = Vec::new();
            let at = crate::message::read_name(msg.bytes, r.rdata_at, &mut algorithm)? - r.rdata_at;
            let f = rd.get(at..at + 10)?;
            let time_signed = u64::from_be_bytes([0, 0, f[0], f[1], f[2], f[3], f[4], f[5]]);
            let fudge = u16::from_be_bytes([f[6], f[7]]);
            let mac_len = usize::from(u16::from_be_bytes([f[8], f[9]]));
            let mac = rd.get(at + 10..at + 10 + mac_len)?.to_vec();
            let t = rd.get(at + 10 + mac_len..at + 16 + mac_len)?;
            let other_len = usize::from(u16::from_be_bytes([t[4], t[5]]));
            let other = rd
                .get(at + 16 + mac_len..at + 16 + mac_len + other_len)?
                .to_vec();
            Some(Tsig {
                key_name: r.owner.clone(),
                algorithm: algorithm.iter().map(u8::to_ascii_lowercase).collect(),
                time_signed,
                fudge,
                mac,
                original_id: u16::from_be_bytes([t[0], t[1]]),
                error: u16::from_be_bytes([t[2], t[3]]),
                other,
            })
        };
        Some(parse().map(|t| (t, r.start)).ok_or(()))
    }
}

/// The message as it was before the TSIG was added: the TSIG removed, ARCOUNT one less, the
/// original ID back.
fn unsigned_part(bytes: &[u8], tsig_start: usize, original_id: u16) -> Vec<u8> {
    let mut m = bytes[..tsig_start].to_vec();
    m[0..2].copy_from_slice(&original_id.to_be_bytes());
    let ar = u16::from_be_bytes([m[10], m[11]]).saturating_sub(1);
    m[10..12].copy_from_slice(&ar.to_be_bytes());
    m
}

fn variables(key: &Key, time_signed: u64, fudge: u16, error: u16, other: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(64);
    v.extend_from_slice(key.name.wire());
    v.extend_from_slice(&CLASS_ANY.to_be_bytes());
    v.extend_from_slice(&0u32.to_be_bytes());
    v.extend_from_slice(&key.algorithm.wire());
    v.extend_from_slice(&time_signed.to_be_bytes()[2..]);
    v.extend_from_slice(&fudge.to_be_bytes());
    v.extend_from_slice(&error.to_be_bytes());
    v.extend_from_slice(&(other.len() as u16).to_be_bytes());
    v.extend_from_slice(other);
    v
}

/// A request whose signature verified, with what signing the reply needs.
#[derive(Debug, Clone)]
pub struct Verified {
    /// The key.
    pub key: Key,
    /// The request's MAC (the first reply's MAC covers it).
    pub request_mac: Vec<u8>,
}

/// What checking a request's TSIG found.
#[derive(Debug, Clone)]
pub enum Check {
    /// No TSIG.
    Unsigned,
    /// Verified.
    Signed(Verified),
    /// A TSIG error to answer with NOTAUTH: unsigned for BADKEY and BADSIG (RFC 8945 §5.2.1,
    /// §5.2.2), signed for BADTIME (§5.2.3).
    Failed {
        /// The TSIG error.
        error: u16,
        /// The key, when the reply is to be signed (BADTIME).
        signer: Option<Verified>,
        /// The TSIG as received (its key name and algorithm are echoed).
        tsig: Tsig,
    },
    /// The TSIG record could not be read.
    Malformed,
}

/// Checks the TSIG of `msg` against `keys` at unix time `now`.
pub fn check(msg: &Message<'_>, keys: &[Key], now: u64) -> Check {
    let (tsig, start) = match Tsig::read(msg) {
        None => return Check::Unsigned,
        Some(Err(())) => return Check::Malformed,
        Some(Ok(t)) => t,
    };
    let key = keys.iter().find(|k| {
        k.name.wire() == tsig.key_name.as_slice() && k.algorithm.wire() == tsig.algorithm
    });
    let Some(key) = key else {
        return Check::Failed {
            error: error::BADKEY,
            signer: None,
            tsig,
        };
    };
    let out_len = key.algorithm.ring().digest_algorithm().output_len();
    if tsig.mac.len() > out_len || tsig.mac.len() < (out_len / 2).max(10) {
        let error = if tsig.mac.len() > out_len {
            error::BADSIG
        } else {
            error::BADTRUNC
        };
        return Check::Failed {
            error,
            signer: None,
            tsig,
        };
    }
    let mut data = unsigned_part(msg.bytes, start, tsig.original_id);
    data.extend_from_slice(&variables(
        key,
        tsig.time_signed,
        tsig.fudge,
        tsig.error,
        &tsig.other,
    ));
    let expected = hmac::sign(&key.key, &data);
    if !constant_time_eq(&expected.as_ref()[..tsig.mac.len()], &tsig.mac) {
        return Check::Failed {
            error: error::BADSIG,
            signer: None,
            tsig,
        };
    }
    let verified = Verified {
        key: key.clone(),
        request_mac: tsig.mac.clone(),
    };
    if now.abs_diff(tsig.time_signed) > u64::from(tsig.fudge) {
        return Check::Failed {
            error: error::BADTIME,
            signer: Some(verified),
            tsig,
        };
    }
    Check::Signed(verified)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Signs the messages of one reply (or one request) in order: the first MAC covers the
/// request's MAC (when replying), each later one the MAC before it and only the timers
/// (RFC 8945 §5.3.1).
pub struct Signer {
    key: Key,
    prior_mac: Option<Vec<u8>>,
    first: bool,
    now: u64,
}

impl Signer {
    /// Signs a reply to a request verified with `verified`.
    pub fn reply(verified: &Verified, now: u64) -> Signer {
        Signer {
            key: verified.key.clone(),
            prior_mac: Some(verified.request_mac.clone()),
            first: true,
            now,
        }
    }

    /// Signs a request (a NOTIFY, a transfer request).
    pub fn request(key: &Key, now: u64) -> Signer {
        Signer {
            key: key.clone(),
            prior_mac: None,
            first: true,
            now,
        }
    }

    /// Appends a TSIG record to `msg` (a finished message), with `error` and `other` data.
    pub fn sign(&mut self, msg: &mut Vec<u8>, error: u16, other: &[u8]) {
        let mut data = Vec::with_capacity(msg.len() + 128);
        if let Some(prior) = &self.prior_mac {
            data.extend_from_slice(&(prior.len() as u16).to_be_bytes());
            data.extend_from_slice(prior);
        }
        data.extend_from_slice(msg);
        if self.first {
            data.extend_from_slice(&variables(
                &self.key,
                self.now,
                self.key.fudge,
                error,
                other,
            ));
        } else {
            data.extend_from_slice(&self.now.to_be_bytes()[2..]);
            data.extend_from_slice(&self.key.fudge.to_be_bytes());
        }
        let mac = hmac::sign(&self.key.key, &data).as_ref().to_vec();
        append_tsig(msg, &self.key, self.now, &mac, error, other);
        self.prior_mac = Some(mac);
        self.first = false;
    }
}

/// Checks the TSIG of each message of a reply to a request signed with `key` (RFC 8945 §5.3.1):
/// the first must be signed; up to 99 unsigned ones may follow a signed one, covered by the
/// next signature. Cloned to try a message that may not be the reply (a datagram that could be
/// forged) without advancing the chain.
#[derive(Clone)]
pub struct ReplyVerifier {
    key: Key,
    prior_mac: Vec<u8>,
    pending: Vec<u8>,
    unsigned: usize,
    first: bool,
}

impl ReplyVerifier {
    /// Verifies replies to a request whose MAC was `request_mac`.
    pub fn new(key: &Key, request_mac: Vec<u8>) -> ReplyVerifier {
        ReplyVerifier {
            key: key.clone(),
            prior_mac: request_mac,
            pending: Vec::new(),
            unsigned: 0,
            first: true,
        }
    }

    /// Checks one message.
    pub fn check(&mut self, msg: &Message<'_>) -> Result<(), String> {
        let (tsig, start) = match Tsig::read(msg) {
            None if self.first => return Err("the reply is not signed".into()),
            None => {
                self.unsigned += 1;
                if self.unsigned > 99 {
                    return Err("more than 99 unsigned messages in a row".into());
                }
                self.pending.extend_from_slice(msg.bytes);
                return Ok(());
            }
            Some(Err(())) => return Err("an unreadable TSIG".into()),
            Some(Ok(t)) => t,
        };
        if tsig.error != error::NOERROR {
            return Err(format!("TSIG error {}", tsig.error));
        }
        if tsig.key_name != self.key.name.wire() {
            return Err("signed with another key".into());
        }
        let pending = std::mem::take(&mut self.pending);
        verify_mac(
            &self.key,
            &self.prior_mac,
            &pending,
            msg,
            start,
            &tsig,
            self.first,
        )?;
        self.prior_mac = tsig.mac;
        self.first = false;
        self.unsigned = 0;
        Ok(())
    }
}

/// Checks the MAC of `tsig`, the TSIG of `msg` starting at `start`, that follows `prior_mac`
/// and the unsigned messages `pending` (RFC 8945 §5.3.1): with every variable for the first
/// message of a reply, only the timers for later ones.
fn verify_mac(
    key: &Key,
    prior_mac: &[u8],
    pending: &[u8],
    msg: &Message<'_>,
    start: usize,
    tsig: &Tsig,
    first: bool,
) -> Result<(), String> {
    let mut data = Vec::with_capacity(msg.bytes.len() + pending.len() + 128);
    data.extend_from_slice(&(prior_mac.len() as u16).to_be_bytes());
    data.extend_from_slice(prior_mac);
    data.extend_from_slice(pending);
    data.extend_from_slice(&unsigned_part(msg.bytes, start, tsig.original_id));
    if first {
        data.extend_from_slice(&variables(
            key,
            tsig.time_signed,
            tsig.fudge,
            tsig.error,
            &tsig.other,
        ));
    } else {
        data.extend_from_slice(&tsig.time_signed.to_be_bytes()[2..]);
        data.extend_from_slice(&tsig.fudge.to_be_bytes());
    }
    hmac::verify(&key.key, &data, &tsig.mac)
        .map_err(|_| "the reply's signature does not verify (BADSIG)".to_string())
}

/// Verifies a signed TSIG error reply (BADTIME, RFC 8945 §5.2.3) to a request whose MAC was
/// `request_mac`, and returns its TSIG: Time Signed is the request's, the server's time is in
/// Other Data.
pub fn verify_error_reply(
    key: &Key,
    request_mac: &[u8],
    msg: &Message<'_>,
) -> Result<Tsig, String> {
    let Some(Ok((tsig, start))) = Tsig::read(msg) else {
        return Err("no readable TSIG".into());
    };
    verify_mac(key, request_mac, &[], msg, start, &tsig, true)?;
    Ok(tsig)
}

impl Signer {
    /// The MAC of the last message signed (a request's, for verifying its reply).
    pub fn last_mac(&self) -> Option<&[u8]> {
        self.prior_mac.as_deref()
    }
}

/// Appends an unsigned TSIG (empty MAC) carrying `error`: the reply to BADKEY and BADSIG.
pub fn append_unsigned(msg: &mut Vec<u8>, tsig: &Tsig, now: u64, error: u16) {
    let mut rdata = tsig.algorithm.clone();
    rdata.extend_from_slice(&now.to_be_bytes()[2..]);
    rdata.extend_from_slice(&tsig.fudge.to_be_bytes());
    rdata.extend_from_slice(&0u16.to_be_bytes());
    rdata.extend_from_slice(&u16::from_be_bytes([msg[0], msg[1]]).to_be_bytes());
    rdata.extend_from_slice(&error.to_be_bytes());
    rdata.extend_from_slice(&0u16.to_be_bytes());
    push_record(msg, &tsig.key_name, &rdata);
}

fn append_tsig(msg: &mut Vec<u8>, key: &Key, now: u64, mac: &[u8], error: u16, other: &[u8]) {
    let mut rdata = key.algorithm.wire();
    rdata.extend_from_slice(&now.to_be_bytes()[2..]);
    rdata.extend_from_slice(&key.fudge.to_be_bytes());
    rdata.extend_from_slice(&(mac.len() as u16).to_be_bytes());
    rdata.extend_from_slice(mac);
    rdata.extend_from_slice(&msg[0..2]);
    rdata.extend_from_slice(&error.to_be_bytes());
    rdata.extend_from_slice(&(other.len() as u16).to_be_bytes());
    rdata.extend_from_slice(other);
    push_record(msg, key.name.wire(), &rdata);
}

fn push_record(msg: &mut Vec<u8>, owner: &[u8], rdata: &[u8]) {
    msg.extend_from_slice(owner);
    msg.extend_from_slice(&TYPE_TSIG.to_be_bytes());
    msg.extend_from_slice(&CLASS_ANY.to_be_bytes());
    msg.extend_from_slice(&0u32.to_be_bytes());
    msg.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    msg.extend_from_slice(rdata);
    let ar = u16::from_be_bytes([msg[10], msg[11]]) + 1;
    msg[10..12].copy_from_slice(&ar.to_be_bytes());
}

/// Whether a type is TSIG (for callers matching on [`RType`]).
pub fn is_tsig(rtype: RType) -> bool {
    rtype.0 == TYPE_TSIG
}

const _: () = assert!(HEADER_LEN == 12);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{MessageWriter, parse};

    const FILE: &str = r#"
        # a comment
        key "xfr-key." {
            algorithm hmac-sha256;   // trailing
            secret "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0";
        };
        /* block */ key other { algorithm "hmac-sha512"; secret "AAAA"; };
    "#;

    #[test]
    fn reads_bind_key_files() {
        let keys = parse_key_file("keys.conf", FILE).unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].name.to_string(), "xfr-key.");
        assert_eq!(keys[0].algorithm, Algorithm::HmacSha256);
        assert_eq!(keys[1].algorithm, Algorithm::HmacSha512);
        let e = parse_key_file(
            "keys.conf",
            "key a { algorithm hmac-md5; secret \"AA==\"; };",
        )
        .unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.to_string().contains("hmac-md5 not supported"), "{e}");
        let e = parse_key_file("k", "options { };").unwrap_err();
        assert!(e.to_string().contains("expected `key`"), "{e}");
        let e = parse_key_file("k", "key a {\n algorithm hmac-sha256;\n secret \"!!\";\n};")
            .unwrap_err();
        assert_eq!(e.line, 3);
    }

    fn signed_query(key: &Key, now: u64) -> Vec<u8> {
        let w = MessageWriter::new(0x4242, 0, Some((b"\x07example\x00", 252, 1)));
        let mut msg = w.finish();
        Signer::request(key, now).sign(&mut msg, 0, &[]);
        msg
    }

    #[test]
    fn signs_and_verifies_and_names_each_failure() {
        let keys = parse_key_file("k", FILE).unwrap();
        let now = 1_800_000_000;
        let msg = signed_query(&keys[0], now);
        let parsed = parse(&msg).unwrap();
        let Check::Signed(v) = check(&parsed, &keys, now + 10) else {
            panic!("a good signature")
        };
        // A reply signed with the request's MAC verifies as hickory/dig would check it: here,
        // by recomputing with the same construction.
        let mut reply =
            MessageWriter::new(0x4242, 0x8400, Some((b"\x07example\x00", 252, 1))).finish();
        Signer::reply(&v, now).sign(&mut reply, 0, &[]);
        assert!(parse(&reply).unwrap().tsig().is_some());

        let Check::Failed { error, .. } = check(&parsed, &keys[1..], now) else {
            panic!("unknown key")
        };
        assert_eq!(error, error::BADKEY);
        let mut tampered = msg.clone();
        tampered[13] ^= 0x20; // the question name's case
        let Check::Failed { error, .. } = check(&parse(&tampered).unwrap(), &keys, now) else {
            panic!("bad signature")
        };
        assert_eq!(error, error::BADSIG);
        let Check::Failed { error, signer, .. } = check(&parsed, &keys, now + 1000) else {
            panic!("time skew")
        };
        assert_eq!(error, error::BADTIME);
        assert!(signer.is_some(), "BADTIME replies are signed");
        assert!(matches!(
            check(&parse(&reply[..]).unwrap(), &[], now),
            Check::Failed { .. }
        ));
    }
}
