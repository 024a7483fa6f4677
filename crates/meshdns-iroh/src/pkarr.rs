//! pkarr signed packets, as iroh endpoints publish them to a relay (iroh-dns-server's
//! `PUT /pkarr/<z32>`).
//!
//! A relay payload is `signature(64) ‖ timestamp(8, big-endian µs since the epoch) ‖ DNS
//! message`; the key comes from the URL. The signature is ed25519, by the endpoint key, over
//! the BEP 44 signable `3:seqi<timestamp>e1:v<length>:<DNS message>`. The DNS message is at
//! most 1000 bytes; its answer records are named relative to the key (`_iroh.<z32>`, or
//! `<z32>` itself) and may use name compression.
//!
//! [`SignedPacket::from_relay_payload`] checks all of that, and [`SignedPacket::records`]
//! places the records under a served origin (`_iroh.<z32>.<origin>`). A, AAAA and TXT are
//! served; SOA and NS are dropped, as iroh-dns-server does, and so are other types. A packet
//! naming anything outside its own key is refused whole.

use meshdns_zone::{Name, RData, RType, Record};

use crate::EndpointId;

/// Largest DNS message a signed packet may carry.
pub const MAX_DNS_PACKET: usize = 1000;
/// Signature and timestamp before the DNS message in a relay payload.
pub const PAYLOAD_HEADER: usize = 64 + 8;

/// Why a relay payload is refused (HTTP 400 at the relay).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    /// Shorter than signature, timestamp and a DNS header.
    #[error(
        "payload of {0} bytes is too short (at least 84 expected: signature, timestamp and a DNS header)"
    )]
    TooShort(usize),
    /// A DNS message over 1000 bytes.
    #[error("DNS message of {0} bytes is over the {MAX_DNS_PACKET}-byte limit")]
    TooLong(usize),
    /// The signature does not verify for this key.
    #[error("signature does not verify for this key")]
    Signature,
    /// The key's 32 bytes are not an ed25519 public key (not a point on the curve).
    #[error("the key is not an ed25519 public key (not a point on the curve)")]
    Key,
    /// The DNS message does not parse.
    #[error("DNS message does not parse: {0}")]
    Dns(&'static str),
    /// A record named outside the signer's key.
    #[error("record name {0:?} is not under the signer's key")]
    Outside(String),
}

/// A verified signed packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedPacket {
    /// The signer, whose zone this is.
    pub key: EndpointId,
    /// Microseconds since the Unix epoch; newer replaces older.
    pub timestamp_us: u64,
    payload: Vec<u8>,
}

fn signable(timestamp_us: u64, packet: &[u8]) -> Vec<u8> {
    let mut s = format!("3:seqi{timestamp_us}e1:v{}:", packet.len()).into_bytes();
    s.extend_from_slice(packet);
    s
}

/// Signatures per multi-scalar multiplication in [`SignedPacket::verify_relay_batch`]. From
/// about 100 on, curve25519-dalek multiplies by Pippenger's method, whose work per point falls
/// with the count: a packet cost 14% less to verify in batches of 256 than of 64 (`pkarr_load
/// verify`, one core). A bad signature costs its batch this many single checks (about 13 ms);
/// a caller mixing several senders' packets passes them in smaller slices.
pub const BATCH: usize = 256;

/// A relay payload's parts, ready for its signature to be checked.
struct Prepared {
    key: ed25519_dalek::VerifyingKey,
    signature: ed25519_dalek::Signature,
    signable: Vec<u8>,
    timestamp_us: u64,
}

impl Prepared {
    fn new(key: &[u8; 32], payload: &[u8]) -> Result<Prepared, PacketError> {
        if payload.len() < PAYLOAD_HEADER + 12 {
            return Err(PacketError::TooShort(payload.len()));
        }
        let packet = &payload[PAYLOAD_HEADER..];
        if packet.len() > MAX_DNS_PACKET {
            return Err(PacketError::TooLong(packet.len()));
        }
        let key = ed25519_dalek::VerifyingKey::from_bytes(key).map_err(|_| PacketError::Key)?;
        let signature: [u8; 64] = payload[..64].try_into().expect("length checked");
        let timestamp_us = u64::from_be_bytes(payload[64..72].try_into().expect("length checked"));
        Ok(Prepared {
            key,
            signature: ed25519_dalek::Signature::from_bytes(&signature),
            signable: signable(timestamp_us, packet),
            timestamp_us,
        })
    }

    /// Checks the signature alone, as [`ed25519_dalek::VerifyingKey::verify_strict`] does
    /// (the same verdict for every input), one field exponentiation cheaper: `verify_strict`
    /// decompresses `R` only to refuse points of small order, which are told here by their
    /// encodings; an `R` that is not canonical, or not a point, can never equal the
    /// canonical encoding the check computes.
    fn check(&self) -> Result<(), PacketError> {
        use ed25519_dalek::Verifier;
        if self.key.is_weak() || small_order(self.signature.r_bytes()) {
            return Err(PacketError::Signature);
        }
        self.key
            .verify(&self.signable, &self.signature)
            .map_err(|_| PacketError::Signature)
    }

    /// Whether a batch decides this signature as `verify_strict` would: the key is not of
    /// small order, and `R` is canonical and not of small order (checked on its bytes).
    fn batchable(&self) -> bool {
        let r = self.signature.r_bytes();
        !self.key.is_weak() && canonical(r) && !small_order(r)
    }

    /// The packet, once the signature verified: refused if it could never be served.
    fn finish(self, payload: &[u8]) -> Result<SignedPacket, PacketError> {
        let signed = SignedPacket {
            // From the decoded key, without decoding it again (iroh-base's conversion).
            key: EndpointId::from_verifying_key(self.key),
            timestamp_us: self.timestamp_us,
            payload: payload.to_vec(),
        };
        signed.visit(|_, rtype, _, rdata| {
            RData::from_wire(rtype, rdata)
                .map(drop)
                .ok_or(PacketError::Dns("record data does not parse"))
        })?;
        Ok(signed)
    }
}

/// Whether an encoded point's y coordinate is below the field's prime 2^255 - 19.
fn canonical(point: &[u8; 32]) -> bool {
    let top = point[31] & 0x7f == 0x7f;
    !(top && point[1..31].iter().all(|&b| b == 0xff) && point[0] >= 0xed)
}

/// Whether an encoded point is one of the eight points of small order, with either sign bit
/// (the sign of x = 0 is not part of a canonical encoding).
fn small_order(point: &[u8; 32]) -> bool {
    static TORSION: std::sync::OnceLock<[[u8; 32]; 8]> = std::sync::OnceLock::new();
    let torsion = TORSION.get_or_init(|| {
        curve25519_dalek::constants::EIGHT_TORSION.map(|p| p.compress().to_bytes())
    });
    torsion
        .iter()
        .any(|t| t[..31] == point[..31] && t[31] & 0x7f == point[31] & 0x7f)
}

impl SignedPacket {
    /// Verifies a relay payload for `key`.
    pub fn from_relay_payload(
        key: &EndpointId,
        payload: &[u8],
    ) -> Result<SignedPacket, PacketError> {
        Self::verify_relay(key.as_bytes(), payload)
    }

    /// Verifies a relay payload for the key given as its 32 bytes (decoded here, once:
    /// [`PacketError::Key`] when they are not a curve point).
    pub fn verify_relay(key: &[u8; 32], payload: &[u8]) -> Result<SignedPacket, PacketError> {
        let p = Prepared::new(key, payload)?;
        p.check()?;
        p.finish(payload)
    }

    /// [`SignedPacket::verify_relay`] for many payloads, with the same verdict for each, in
    /// order. Signatures are checked together in batches of [`BATCH`] (one multi-scalar
    /// multiplication per batch: under half the work per signature of checking each alone);
    /// a batch that fails is checked one by one, so a bad signature costs its batch a second
    /// pass, never another packet its verdict.
    ///
    /// A batch proves every signature in it valid under the same equation
    /// [`ed25519_dalek::VerifyingKey::verify_strict`] checks, except that it cannot see a
    /// small-order (torsion) difference with certainty; the shapes only such a difference can
    /// take are checked before batching (a key or `R` of small order, a non-canonical `R`) and
    /// sent to the one-by-one check. What remains is a signature crafted by the key's own
    /// holder with a torsion component in `R`, which `verify_strict` refuses and a batch may
    /// accept: it can never make a packet its key did not sign pass.
    pub fn verify_relay_batch(
        items: &[([u8; 32], &[u8])],
    ) -> Vec<Result<SignedPacket, PacketError>> {
        let mut verdicts: Vec<Option<Result<(), PacketError>>> = vec![None; items.len()];
        let prepared: Vec<Option<Prepared>> = items
            .iter()
            .enumerate()
            .map(|(i, (key, payload))| match Prepared::new(key, payload) {
                Ok(p) => Some(p),
                Err(e) => {
                    verdicts[i] = Some(Err(e));
                    None
                }
            })
            .collect();
        let mut batchable = Vec::with_capacity(items.len());
        for (i, p) in prepared.iter().enumerate() {
            if let Some(p) = p {
                if p.batchable() {
                    batchable.push(i);
                } else {
                    verdicts[i] = Some(p.check());
                }
            }
        }
        for chunk in batchable.chunks(BATCH) {
            let ps: Vec<&Prepared> = chunk
                .iter()
                .map(|&i| prepared[i].as_ref().expect("prepared"))
                .collect();
            let messages: Vec<&[u8]> = ps.iter().map(|p| p.signable.as_slice()).collect();
            let signatures: Vec<ed25519_dalek::Signature> =
                ps.iter().map(|p| p.signature).collect();
            let keys: Vec<ed25519_dalek::VerifyingKey> = ps.iter().map(|p| p.key).collect();
            let all = chunk.len() > 1
                && ed25519_dalek::verify_batch(&messages, &signatures, &keys).is_ok();
            for (&i, p) in chunk.iter().zip(&ps) {
                verdicts[i] = Some(if all { Ok(()) } else { p.check() });
            }
        }
        prepared
            .into_iter()
            .zip(verdicts)
            .zip(items)
            .map(|((p, verdict), (_, payload))| {
                verdict.expect("every item decided")?;
                p.expect("verified items were prepared").finish(payload)
            })
            .collect()
    }

    /// The relay payload (`signature ‖ timestamp ‖ DNS message`), as `GET /pkarr/<z32>` returns it.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The DNS message.
    pub fn dns_message(&self) -> &[u8] {
        &self.payload[PAYLOAD_HEADER..]
    }

    /// A packet read back from the store, where it was verified when it was published: the
    /// structure is checked again (what could not be served is refused), the signature is not.
    pub fn from_stored(key: &EndpointId, payload: &[u8]) -> Result<SignedPacket, PacketError> {
        if payload.len() < PAYLOAD_HEADER + 12 {
            return Err(PacketError::TooShort(payload.len()));
        }
        let signed = SignedPacket {
            key: *key,
            timestamp_us: u64::from_be_bytes(payload[64..72].try_into().expect("length checked")),
            payload: payload.to_vec(),
        };
        signed.visit(|_, _, _, _| Ok(()))?;
        Ok(signed)
    }

    /// Calls `f` with each served record (A, AAAA, TXT, class IN): the owner's labels above the
    /// key label (lower-cased wire format, no root), type, TTL and RDATA. A record named outside
    /// the key refuses the whole packet.
    pub fn visit(
        &self,
        f: impl FnMut(&[u8], RType, u32, &[u8]) -> Result<(), PacketError>,
    ) -> Result<(), PacketError> {
        visit_message(self.dns_message(), &self.key.to_z32(), f)
    }
    /// The packet's A, AAAA and TXT records, renamed from `<name>.<z32>` to
    /// `<name>.<z32>.<origin>`.
    pub fn records(&self, origin: &Name) -> Result<Vec<Record>, PacketError> {
        let key_label = self.key_label();
        let mut records = Vec::new();
        self.visit(|prefix, rtype, ttl, rdata| {
            let data = RData::from_wire(rtype, rdata)
                .ok_or(PacketError::Dns("record data does not parse"))?;
            let mut wire = prefix.to_vec();
            wire.extend_from_slice(&key_label);
            wire.extend_from_slice(origin.wire());
            let name =
                Name::from_wire(&wire).ok_or(PacketError::Dns("name too long under the origin"))?;
            records.push(Record { name, ttl, data });
            Ok(())
        })?;
        Ok(records)
    }

    /// The key's label in wire form: its length, then its z-base-32 spelling.
    fn key_label(&self) -> Vec<u8> {
        let z32 = self.key.to_z32();
        let mut label = vec![z32.len() as u8];
        label.extend_from_slice(z32.as_bytes());
        label
    }

    /// What a stored payload serves, compiled, without decoding the key (a stored packet
    /// verified when it was published). `Err` when the payload does not parse.
    pub fn published_from_stored(
        key: &[u8; 32],
        payload: &[u8],
    ) -> Result<meshdns_zone::Published, PacketError> {
        if payload.len() < PAYLOAD_HEADER + 12 {
            return Err(PacketError::TooShort(payload.len()));
        }
        let label = meshdns_zone::label_of_key(key);
        let z32 = std::str::from_utf8(&label).expect("z-base-32 is ASCII");
        let timestamp_us = u64::from_be_bytes(payload[64..72].try_into().expect("length checked"));
        compile(timestamp_us, |f| {
            visit_message(&payload[PAYLOAD_HEADER..], z32, f)
        })
    }

    /// The smallest TTL of the served records (`None` without any).
    pub fn min_ttl(&self) -> Option<u32> {
        let mut min: Option<u32> = None;
        let _ = self.visit(|_, _, ttl, _| {
            min = Some(min.map_or(ttl, |m| m.min(ttl)));
            Ok(())
        });
        min
    }

    /// The records compiled for serving beside a zone (see [`meshdns_zone::Overlay`]), stamped
    /// with the packet's timestamp. Call on a packet that verified: RDATA is copied as signed.
    pub fn published(&self) -> meshdns_zone::Published {
        compile(self.timestamp_us, |f| self.visit(f)).unwrap_or_else(|_| {
            meshdns_zone::Published::build(self.timestamp_us, std::iter::empty())
        })
    }
}

type Visitor<'v> = &'v mut dyn FnMut(&[u8], RType, u32, &[u8]) -> Result<(), PacketError>;

/// Compiles what `visit` visits into a [`meshdns_zone::Published`].
fn compile(
    timestamp_us: u64,
    visit: impl FnOnce(Visitor<'_>) -> Result<(), PacketError>,
) -> Result<meshdns_zone::Published, PacketError> {
    // Owners and RDATA side by side in one buffer: (prefix range, type, ttl, rdata range).
    let mut bytes = Vec::with_capacity(512);
    let mut items: Vec<(usize, usize, RType, u32, usize)> = Vec::with_capacity(8);
    visit(&mut |prefix, rtype, ttl, rdata| {
        let at = bytes.len();
        bytes.extend_from_slice(prefix);
        bytes.extend_from_slice(rdata);
        items.push((at, prefix.len(), rtype, ttl, rdata.len()));
        Ok(())
    })?;
    Ok(meshdns_zone::Published::build(
        timestamp_us,
        items.iter().map(|&(at, plen, rtype, ttl, rdlen)| {
            (
                &bytes[at..at + plen],
                rtype,
                ttl,
                &bytes[at + plen..at + plen + rdlen],
            )
        }),
    ))
}

/// [`SignedPacket::visit`] on a DNS message signed by the key spelled `z32`.
fn visit_message(
    p: &[u8],
    z32: &str,
    mut f: impl FnMut(&[u8], RType, u32, &[u8]) -> Result<(), PacketError>,
) -> Result<(), PacketError> {
    let u16_at = |at: usize| {
        p.get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or(PacketError::Dns("truncated"))
    };
    let (qd, an) = (u16_at(4)?, u16_at(6)?);
    let mut pos = 12;
    let mut owner = [0u8; 256];
    for _ in 0..qd {
        pos = read_name(p, pos, &mut owner)
            .ok_or(PacketError::Dns("bad question name"))?
            .1
            + 4;
    }
    for _ in 0..an {
        let (len, next) =
            read_name(p, pos, &mut owner).ok_or(PacketError::Dns("bad record name"))?;
        let owner = &owner[..len];
        let rtype = RType(u16_at(next)?);
        let class = u16_at(next + 2)?;
        let ttl = u32::from(u16_at(next + 4)?) << 16 | u32::from(u16_at(next + 6)?);
        let rdlen = usize::from(u16_at(next + 8)?);
        let rdata = p
            .get(next + 10..next + 10 + rdlen)
            .ok_or(PacketError::Dns("record data runs past the end"))?;
        pos = next + 10 + rdlen;
        let relative =
            under_key(owner, z32).ok_or_else(|| PacketError::Outside(wire_text(owner)))?;
        if class != 1 || !matches!(rtype, RType::A | RType::AAAA | RType::TXT) {
            continue;
        }
        f(
            &relative[..relative.len() - z32.len() - 1],
            rtype,
            ttl,
            rdata,
        )?;
    }
    Ok(())
}

/// If `owner` (wire, lower-cased) ends with the label `z32` just before the root, the owner's
/// labels without the root byte.
fn under_key<'a>(owner: &'a [u8], z32: &str) -> Option<&'a [u8]> {
    let body = &owner[..owner.len() - 1];
    let tail = body.len().checked_sub(z32.len() + 1)?;
    (body[tail] as usize == z32.len()
        && &body[tail + 1..] == z32.as_bytes()
        && label_boundary(body, tail))
    .then_some(body)
}

fn label_boundary(wire: &[u8], at: usize) -> bool {
    let mut pos = 0;
    while pos < at {
        pos += 1 + wire[pos] as usize;
    }
    pos == at
}

fn wire_text(wire: &[u8]) -> String {
    Name::from_wire(wire).map_or_else(|| format!("{wire:?}"), |n| n.to_string())
}

/// Reads a possibly compressed name at `pos` into `out`, lower-cased and uncompressed;
/// returns its length and where the record continues.
fn read_name(p: &[u8], mut pos: usize, out: &mut [u8; 256]) -> Option<(usize, usize)> {
    let mut len_out = 0usize;
    let mut resume = None;
    for _ in 0..128 {
        let len = *p.get(pos)?;
        match len {
            0 => {
                *out.get_mut(len_out)? = 0;
                return Some((len_out + 1, resume.unwrap_or(pos + 1)));
            }
            1..=63 => {
                let label = p.get(pos + 1..pos + 1 + len as usize)?;
                let end = len_out + 1 + label.len();
                if end >= 255 {
                    return None;
                }
                out[len_out] = len;
                for (o, c) in out[len_out + 1..end].iter_mut().zip(label) {
                    *o = c.to_ascii_lowercase();
                }
                len_out = end;
                pos += 1 + len as usize;
            }
            0xC0..=0xFF => {
                let target = usize::from(len & 0x3F) << 8 | usize::from(*p.get(pos + 1)?);
                resume.get_or_insert(pos + 2);
                if target >= pos {
                    return None; // pointers must point backwards
                }
                pos = target;
            }
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use iroh_base::SecretKey;

    use super::*;

    fn origin() -> Name {
        "dns.example.org.".parse().unwrap()
    }

    /// A relay payload signed by `secret` for a hand-built DNS message.
    fn sign(secret: &SecretKey, timestamp_us: u64, dns: &[u8]) -> Vec<u8> {
        let sig = secret.sign(&signable(timestamp_us, dns));
        let mut out = sig.to_bytes().to_vec();
        out.extend_from_slice(&timestamp_us.to_be_bytes());
        out.extend_from_slice(dns);
        out
    }

    fn txt_message(owner: &[u8], text: &str) -> Vec<u8> {
        let mut m = vec![0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        m.extend_from_slice(owner);
        m.extend_from_slice(&[0, 16, 0, 1, 0, 0, 0, 30]);
        m.extend_from_slice(&((text.len() + 1) as u16).to_be_bytes());
        m.push(text.len() as u8);
        m.extend_from_slice(text.as_bytes());
        m
    }

    fn owner(labels: &[&str]) -> Vec<u8> {
        let mut w = Vec::new();
        for l in labels {
            w.push(l.len() as u8);
            w.extend_from_slice(l.as_bytes());
        }
        w.push(0);
        w
    }

    #[test]
    fn iroh_published_packets_verify_and_land_under_the_origin() {
        let secret = SecretKey::generate();
        let id = secret.public();
        let strings = [
            "relay=https://relay.example.org/",
            "addr=192.0.2.1:4433",
            "addr=[2001:db8::1]:4433",
        ];
        let packet =
            iroh_dns::pkarr::SignedPacket::from_txt_strings(&secret, "_iroh", strings, 30).unwrap();
        let payload = packet.to_relay_payload();
        let signed = SignedPacket::from_relay_payload(&id, &payload).unwrap();
        assert_eq!(signed.payload(), payload.as_slice());
        assert_eq!(signed.timestamp_us, packet.timestamp().as_micros());
        let records = signed.records(&origin()).unwrap();
        let name = format!("_iroh.{}.dns.example.org.", id.to_z32());
        let shown: Vec<String> = records
            .iter()
            .map(|r| format!("{} {} {}", r.name, r.ttl, r.data))
            .collect();
        assert_eq!(shown, strings.map(|s| format!("{name} 30 \"{s}\"")));
    }

    #[test]
    fn bad_payloads_are_refused_with_a_reason() {
        let secret = SecretKey::generate();
        let id = secret.public();
        let good = sign(
            &secret,
            1_000_000,
            &txt_message(&owner(&["_iroh", &id.to_z32()]), "addr=192.0.2.1:1"),
        );
        assert!(SignedPacket::from_relay_payload(&id, &good).is_ok());
        // Another key in the path.
        let other = SecretKey::generate().public();
        assert_eq!(
            SignedPacket::from_relay_payload(&other, &good),
            Err(PacketError::Signature)
        );
        // A flipped bit in the message.
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(
            SignedPacket::from_relay_payload(&id, &flipped),
            Err(PacketError::Signature)
        );
        // Truncated.
        assert_eq!(
            SignedPacket::from_relay_payload(&id, &good[..80]),
            Err(PacketError::TooShort(80))
        );
        // Oversized message (validly signed).
        let big = sign(&secret, 1, &[0u8; 1001]);
        assert_eq!(
            SignedPacket::from_relay_payload(&id, &big),
            Err(PacketError::TooLong(1001))
        );
        // A name outside the signer's key (validly signed).
        let outside = sign(
            &secret,
            2,
            &txt_message(&owner(&["_iroh", "someone-else"]), "addr=192.0.2.1:1"),
        );
        assert!(matches!(
            SignedPacket::from_relay_payload(&id, &outside),
            Err(PacketError::Outside(_))
        ));
        // A compression pointer that points forwards.
        let mut m = txt_message(&owner(&["_iroh", &id.to_z32()]), "x=y");
        m[12] = 0xC0;
        m[13] = 0xFF;
        assert!(matches!(
            SignedPacket::from_relay_payload(&id, &sign(&secret, 3, &m)),
            Err(PacketError::Dns(_))
        ));
    }

    #[test]
    fn a_batch_decides_each_packet_as_checking_it_alone_does() {
        // Three batches: spoiled packets in the first two, the third all good.
        let b = BATCH;
        let secrets: Vec<SecretKey> = (0..2 * b + 22).map(|_| SecretKey::generate()).collect();
        let mut items: Vec<([u8; 32], Vec<u8>)> = secrets
            .iter()
            .enumerate()
            .map(|(i, secret)| {
                let id = secret.public();
                let text = format!("addr=192.0.2.1:{i}");
                let m = txt_message(&owner(&["_iroh", &id.to_z32()]), &text);
                (*id.as_bytes(), sign(secret, 1_000_000 + i as u64, &m))
            })
            .collect();
        // Every one good: every one accepted, in order.
        let refs: Vec<([u8; 32], &[u8])> = items.iter().map(|(k, p)| (*k, p.as_slice())).collect();
        let all = SignedPacket::verify_relay_batch(&refs);
        assert!(all.iter().all(|r| r.is_ok()));
        assert_eq!(
            all.iter()
                .map(|r| r.as_ref().unwrap().timestamp_us)
                .collect::<Vec<_>>(),
            (0..2 * b as u64 + 22)
                .map(|i| 1_000_000 + i)
                .collect::<Vec<u64>>()
        );
        // Spoiled in every way, in two of the three batches.
        *items[5].1.last_mut().unwrap() ^= 1; // a flipped bit in the message
        items[b + 6].0 = items[b + 7].0; // another key
        let not_a_point = (0u8..=255)
            .map(|b| [b; 32])
            .find(|k| ed25519_dalek::VerifyingKey::from_bytes(k).is_err())
            .expect("a byte pattern off the curve");
        items[b + 8].0 = not_a_point;
        items[b + 36].1[..32].copy_from_slice(&{
            let mut identity = [0u8; 32];
            identity[0] = 1;
            identity
        }); // R of small order
        items[b + 37].1[..32].fill(0xff); // R not canonical (y >= p)
        items[b + 46].0 = {
            let mut identity = [0u8; 32];
            identity[0] = 1;
            identity
        }; // a key of small order
        items[b + 56].1.truncate(80);
        let secret = &secrets[b + 66];
        items[b + 66].1 = sign(
            secret,
            9,
            &txt_message(&owner(&["_iroh", "someone-else"]), "x=y"),
        );
        let refs: Vec<([u8; 32], &[u8])> = items.iter().map(|(k, p)| (*k, p.as_slice())).collect();
        for (k, payload) in &refs {
            if let Ok(p) = Prepared::new(k, payload) {
                let strict = p.key.verify_strict(&p.signable, &p.signature).is_ok();
                assert_eq!(
                    p.check().is_ok(),
                    strict,
                    "the single check is verify_strict's"
                );
            }
        }
        let batch = SignedPacket::verify_relay_batch(&refs);
        let alone: Vec<_> = refs
            .iter()
            .map(|(k, p)| SignedPacket::verify_relay(k, p))
            .collect();
        assert_eq!(batch, alone);
        let refused: Vec<(usize, &PacketError)> = batch
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.as_ref().err().map(|e| (i, e)))
            .collect();
        assert_eq!(
            refused.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            [5, b + 6, b + 8, b + 36, b + 37, b + 46, b + 56, b + 66]
        );
        assert_eq!(refused[2].1, &PacketError::Key);
        assert_eq!(refused[5].1, &PacketError::Signature);
        assert_eq!(refused[6].1, &PacketError::TooShort(80));
        assert!(matches!(refused[7].1, PacketError::Outside(_)));
        assert!(SignedPacket::verify_relay_batch(&[]).is_empty());
    }

    #[test]
    fn small_order_and_non_canonical_encodings_are_told_by_their_bytes() {
        use curve25519_dalek::constants::EIGHT_TORSION;
        for t in EIGHT_TORSION {
            let mut b = t.compress().to_bytes();
            assert!(small_order(&b));
            b[31] ^= 0x80;
            assert!(small_order(&b), "either sign bit");
        }
        let key = SecretKey::generate().public();
        assert!(!small_order(key.as_bytes()) && canonical(key.as_bytes()));
        // p = 2^255 - 19 and the 18 values above it spell y again, reduced.
        let mut p = [0xff; 32];
        p[0] = 0xed;
        p[31] = 0x7f;
        assert!(!canonical(&p));
        p[0] = 0xec;
        assert!(canonical(&p));
    }
}
