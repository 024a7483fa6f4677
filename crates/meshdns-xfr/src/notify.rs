//! NOTIFY (RFC 1996): telling a secondary that a zone has a new serial.

use meshdns_zone::{Name, RType};

use crate::message::{self, CLASS_IN, MessageWriter, OPCODE_NOTIFY};
use crate::tsig::{Key, Signer};

/// A NOTIFY for `origin` at `serial` (the SOA in the answer section as a hint, §3.7), signed
/// with `key` when given.
pub fn request(
    id: u16,
    origin: &Name,
    soa_rdata: &[u8],
    soa_ttl: u32,
    key: Option<&Key>,
    now: u64,
) -> Vec<u8> {
    let flags = u16::from(OPCODE_NOTIFY) << 11 | 0x0400;
    let mut w = MessageWriter::new(id, flags, Some((origin.wire(), RType::SOA.0, CLASS_IN)));
    w.put_record(0, origin.wire(), RType::SOA, CLASS_IN, soa_ttl, soa_rdata);
    let mut msg = w.finish();
    if let Some(key) = key {
        Signer::request(key, now).sign(&mut msg, 0, &[]);
    }
    msg
}

/// Whether `reply` acknowledges the NOTIFY `id` for `origin`: a response, opcode NOTIFY, the
/// same ID and zone, NOERROR.
pub fn is_ack(reply: &[u8], id: u16, origin: &Name) -> Result<(), String> {
    let m = message::parse(reply).map_err(|e| e.to_string())?;
    if !m.is_response() || m.id != id || m.opcode() != OPCODE_NOTIFY {
        return Err("not a reply to this NOTIFY".into());
    }
    if m.qname_lower != origin.wire() {
        return Err("a reply for another zone".into());
    }
    match m.rcode() {
        0 => Ok(()),
        rc => Err(format!("rcode {rc}")),
    }
}
