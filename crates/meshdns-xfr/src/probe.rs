//! Asking a secondary whether it answers a record yet: what the ACME client waits for before a
//! CA is told to look up a DNS-01 record, since the CA may ask any of the zone's servers.

use meshdns_zone::{Name, RType};

use crate::message::{self, CLASS_IN, MessageWriter};

/// A query for `name` `rtype` (no recursion wanted: the server asked is authoritative).
pub fn request(id: u16, name: &Name, rtype: RType) -> Vec<u8> {
    MessageWriter::new(id, 0, Some((name.wire(), rtype.0, CLASS_IN))).finish()
}

/// Whether `reply` (to the query `id` for `name` `rtype`) answers a record with exactly
/// `rdata` (a type whose RDATA holds no name, so it is sent as it is stored); `Err` when it
/// is not a reply to that query, or an error.
pub fn answers(
    reply: &[u8],
    id: u16,
    name: &Name,
    rtype: RType,
    rdata: &[u8],
) -> Result<bool, String> {
    let m = message::parse(reply).map_err(|e| e.to_string())?;
    if !m.is_response() || m.id != id || m.qname_lower != name.wire() || m.qtype != rtype.0 {
        return Err("not a reply to this query".into());
    }
    match m.rcode() {
        // NXDOMAIN: not there yet.
        0 | 3 => Ok(m
            .answers
            .iter()
            .any(|r| r.rtype == rtype.0 && r.owner == name.wire() && m.rdata(r) == rdata)),
        5 => Err("refused: it does not serve the zone".into()),
        rc => Err(format!("rcode {rc}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshdns_zone::RData;

    #[test]
    fn a_reply_holding_the_record_answers_and_others_do_not() {
        let name: Name = "_acme-challenge.example.org.".parse().unwrap();
        let mut wanted = Vec::new();
        RData::Txt(vec![b"digest".as_slice().into()]).to_wire(&mut wanted);
        let query = request(7, &name, RType::TXT);
        let reply = |id: u16, rcode: u16, rdata: Option<&[u8]>| {
            let mut w = MessageWriter::new(
                id,
                0x8400 | rcode,
                Some((name.wire(), RType::TXT.0, CLASS_IN)),
            );
            if let Some(rdata) = rdata {
                w.put_record(0, name.wire(), RType::TXT, CLASS_IN, 60, rdata);
            }
            w.finish()
        };
        assert_eq!(message::parse(&query).unwrap().qtype, RType::TXT.0);
        let with = reply(7, 0, Some(&wanted));
        assert_eq!(answers(&with, 7, &name, RType::TXT, &wanted), Ok(true));
        let other = reply(7, 0, Some(b"\x05other"));
        assert_eq!(answers(&other, 7, &name, RType::TXT, &wanted), Ok(false));
        assert_eq!(
            answers(&reply(7, 3, None), 7, &name, RType::TXT, &wanted),
            Ok(false)
        );
        assert!(answers(&reply(8, 0, Some(&wanted)), 7, &name, RType::TXT, &wanted).is_err());
        assert!(answers(&reply(7, 5, None), 7, &name, RType::TXT, &wanted).is_err());
        assert!(answers(&query, 7, &name, RType::TXT, &wanted).is_err());
    }
}
