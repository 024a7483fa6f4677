//! Helpers shared by this crate's test binaries.
#![allow(dead_code, missing_docs)]

use meshdns_zone::{BuildDefaults, Catalog, CatalogBuilder, Name, RData, RType, Record};

/// xorshift64*: deterministic, so a failure reproduces.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A query for `name` (dotted, no trailing dot needed) and `qtype`, ID 0xABCD, with an EDNS
/// OPT of 1232 bytes when `edns`.
pub fn query(name: &str, qtype: u16, edns: bool) -> Vec<u8> {
    let mut p = vec![0xAB, 0xCD, 0, 0, 0, 1, 0, 0, 0, 0, 0, u8::from(edns)];
    for label in name
        .trim_end_matches('.')
        .split('.')
        .filter(|l| !l.is_empty())
    {
        p.push(label.len() as u8);
        p.extend_from_slice(label.as_bytes());
    }
    p.push(0);
    p.extend_from_slice(&qtype.to_be_bytes());
    p.extend_from_slice(&[0, 1]);
    if edns {
        p.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0]);
    }
    p
}

/// A catalog holding zone `example.org.` with these records (names relative to it, values in
/// presentation format, TTL 60).
pub fn catalog(records: &[(&str, RType, String)]) -> Catalog {
    let origin: Name = "example.org.".parse().unwrap();
    let mut b = CatalogBuilder::new(BuildDefaults {
        default_ttl: 5,
        serial: 1,
    });
    for (name, t, value) in records {
        let data = RData::parse(*t, value, &origin).unwrap();
        b.add(
            &origin,
            Record {
                name: Name::parse(name, Some(&origin)).unwrap(),
                ttl: 60,
                data,
            },
            0,
        )
        .unwrap();
    }
    let (catalog, refused) = b.build();
    assert!(refused.is_empty(), "{refused:?}");
    catalog
}
