//! The catalog zone (RFC 9432, version 2) of `--catalog-zone ORIGIN`: every zone served is a
//! member, so that a secondary configured with the catalog alone (Knot's `catalog-role:
//! interpret`, NSD 4.9's and BIND's catalog consumers) follows zones as they come and go.
//! Pure: the origins in, the zone's records out; it is transferred, NOTIFYed and given serials
//! like any zone (a new member changes its content, so its serial moves).
//!
//! ```text
//! catalog.example.                        NS   invalid.
//! version.catalog.example.                TXT  "2"
//! 1f0e7ab3c9d2e4f5.zones.catalog.example. PTR  example.org.
//! ```
//!
//! A member's label is the first 8 bytes of SHA-256 over its name in wire form, in hex: the
//! same on every replica and across restarts, so a consumer never sees a zone leave and come
//! back under another label (which RFC 9432 makes a reset of that zone).

use meshdns_zone::{Name, RData, Record};
use sha2::{Digest, Sha256};

/// The unique label of member `zone` (16 hexadecimal digits).
pub fn member_label(zone: &Name) -> String {
    let digest = Sha256::digest(zone.wire());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The catalog's records at `origin` for the zones `members` (the catalog itself, and any zone
/// below it, left out), each at `ttl`; the SOA is the caller's (synthesised like any zone's).
pub fn records<'a>(
    origin: &Name,
    members: impl IntoIterator<Item = &'a Name>,
    ttl: u32,
) -> Vec<Record> {
    let at = |label: &str| {
        Name::parse(&format!("{label}.{origin}"), None).expect("a label below a name")
    };
    let mut out = vec![
        Record {
            name: origin.clone(),
            ttl,
            data: RData::Ns(Name::parse("invalid.", None).expect("a name")),
        },
        Record {
            name: at("version"),
            ttl,
            data: RData::Txt(vec![Box::from(&b"2"[..])]),
        },
    ];
    // A member at or below the catalog would shadow its names: left out (the caller reports
    // it).
    let members = members
        .into_iter()
        .filter(|z| !meshdns_zone::name::is_wire_subdomain(z.wire(), origin.wire()));
    for zone in members {
        out.push(Record {
            name: at(&format!("{}.zones", member_label(zone))),
            ttl,
            data: RData::Ptr(zone.clone()),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_member_has_a_label_of_its_own_that_does_not_move() {
        let a: Name = "example.org.".parse().unwrap();
        let b: Name = "Example.ORG.".parse().unwrap();
        let c: Name = "example.net.".parse().unwrap();
        assert_eq!(
            member_label(&a),
            member_label(&b),
            "names compare without case"
        );
        assert_ne!(member_label(&a), member_label(&c));
        assert_eq!(member_label(&a).len(), 16);
        // Pinned: a change of the derivation would reset every member on every consumer
        // (the values docs/transfers.md shows: SHA-256 of the wire name, 8 bytes in hex).
        assert_eq!(member_label(&a), "640cf2756b8440ae");
        assert_eq!(
            member_label(&"one.example.".parse().unwrap()),
            "c046afa3a888670f"
        );
        let origin: Name = "catalog.example.".parse().unwrap();
        let recs = records(&origin, [&a, &origin, &c], 0);
        let shown: Vec<String> = recs
            .iter()
            .map(|r| format!("{} {}", r.name, r.data.rtype()))
            .collect();
        assert_eq!(shown.len(), 4, "{shown:?}");
        assert_eq!(shown[0], "catalog.example. NS");
        assert_eq!(shown[1], "version.catalog.example. TXT");
        assert!(shown[2].ends_with(".zones.catalog.example. PTR"));
    }
}
