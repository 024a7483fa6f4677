//! Reverse names (`--reverse-zone CIDR`): `in-addr.arpa` and `ip6.arpa` zones in which every
//! A and AAAA record served, from any source, whose address is inside the range has a PTR to
//! its owner (pure; [`crate::assemble`] calls it on every snapshot).
//!
//! - A range is served as the zones that cover it exactly, on octet (IPv4) or nibble (IPv6)
//!   boundaries: `10.0.0.0/8` is `10.in-addr.arpa`; `100.64.0.0/10` is the 64 zones
//!   `64.100.in-addr.arpa` … `127.100.in-addr.arpa`. Each is a zone like any other: SOA and NS
//!   at its apex, NXDOMAIN for addresses without a name, transfers.
//! - Several names with one address give several PTRs; wildcard owners give none; a PTR a
//!   source gives at that name wins (the generated ones there are left out).
//! - pkarr-published keys' records are not walked (they are answered per key, not held in a
//!   zone).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use meshdns_zone::{Cidr, Name, RData, RType, Record, Zone};

/// The zones that serve `range` exactly.
pub fn zones_of(range: &Cidr) -> Vec<Name> {
    let (bits, width, step): (u128, u32, u32) = match range.addr().to_canonical() {
        IpAddr::V4(a) => (u128::from(u32::from(a)), 32, 8),
        IpAddr::V6(a) => (u128::from(a), 128, 4),
    };
    let len = u32::from(range.prefix_len());
    let aligned = len.div_ceil(step) * step;
    let mask = |l: u32| {
        if l == 0 {
            0
        } else {
            (u128::MAX >> (128 - width)) & !((1u128 << (width - l)) - 1)
        }
    };
    let base = bits & mask(len);
    let count = 1u128 << (aligned - len);
    (0..count)
        .map(|i| {
            // `aligned` is 0 only for a /0: one zone, nothing to shift in.
            let net = if aligned == 0 {
                base
            } else {
                base | (i << (width - aligned))
            };
            zone_name(net, width, aligned / step)
        })
        .collect()
}

/// The reverse zone of `labels` leading octets (IPv4) or nibbles (IPv6) of `net`.
fn zone_name(net: u128, width: u32, labels: u32) -> Name {
    let mut text = String::new();
    if width == 32 {
        for i in (0..labels).rev() {
            let octet = (net >> (24 - 8 * i)) & 0xff;
            text.push_str(&format!("{octet}."));
        }
        text.push_str("in-addr.arpa.");
    } else {
        for i in (0..labels).rev() {
            let nibble = (net >> (124 - 4 * i)) & 0xf;
            text.push_str(&format!("{nibble:x}."));
        }
        text.push_str("ip6.arpa.");
    }
    Name::parse(&text, None).expect("digits and hex nibbles make a name")
}

/// The reverse name of an address (`1.2.0.192.in-addr.arpa.`).
pub fn ptr_name(ip: IpAddr) -> Name {
    match ip.to_canonical() {
        IpAddr::V4(a) => zone_name(u128::from(u32::from(a)), 32, 4),
        IpAddr::V6(a) => zone_name(u128::from(a), 128, 32),
    }
}

/// The PTR records of every A/AAAA record of `zones` inside one of `ranges`, by the reverse
/// zone (among `reverse_zones`) that holds each.
pub fn ptrs(
    zones: &[std::sync::Arc<Zone>],
    ranges: &[Cidr],
    reverse_zones: &BTreeSet<Name>,
) -> BTreeMap<Name, Vec<Record>> {
    let mut out: BTreeMap<Name, Vec<Record>> = BTreeMap::new();
    for zone in zones {
        if reverse_zones.contains(zone.origin()) {
            continue;
        }
        for node in zone.nodes() {
            // A wildcard owner names no one address.
            if node.name().get(..2) == Some(&[1, b'*'][..]) {
                continue;
            }
            for rtype in [RType::A, RType::AAAA] {
                let Some(set) = node.get(rtype) else { continue };
                for rd in set.rdatas() {
                    let ip = match rd.len() {
                        4 => IpAddr::from(<[u8; 4]>::try_from(rd).expect("four bytes")),
                        16 => IpAddr::from(<[u8; 16]>::try_from(rd).expect("sixteen bytes")),
                        _ => continue,
                    };
                    if !ranges.iter().any(|r| r.contains(ip)) {
                        continue;
                    }
                    let name = ptr_name(ip);
                    let Some(origin) = holder(&name, reverse_zones) else {
                        continue;
                    };
                    let Some(target) = Name::from_wire(node.name()) else {
                        continue;
                    };
                    out.entry(origin).or_default().push(Record {
                        name,
                        ttl: set.ttl,
                        data: RData::Ptr(target),
                    });
                }
            }
        }
    }
    out
}

/// The deepest of `zones` that holds `name`.
fn holder(name: &Name, zones: &BTreeSet<Name>) -> Option<Name> {
    let mut at = Some(name.clone());
    while let Some(n) = at {
        if zones.contains(&n) {
            return Some(n);
        }
        at = n.parent();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(range: &str) -> Vec<String> {
        zones_of(&range.parse().unwrap())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn ranges_are_served_as_the_aligned_zones_that_cover_them() {
        assert_eq!(names("10.0.0.0/8"), ["10.in-addr.arpa."]);
        assert_eq!(names("192.0.2.0/24"), ["2.0.192.in-addr.arpa."]);
        let cgnat = names("100.64.0.0/10");
        assert_eq!(cgnat.len(), 64);
        assert_eq!(cgnat[0], "64.100.in-addr.arpa.");
        assert_eq!(cgnat[63], "127.100.in-addr.arpa.");
        assert_eq!(names("192.0.2.128/25").len(), 128);
        assert_eq!(names("192.0.2.7/32"), ["7.2.0.192.in-addr.arpa."]);
        assert_eq!(
            names("fd7a:115c:a1e0::/48"),
            ["0.e.1.a.c.5.1.1.a.7.d.f.ip6.arpa."]
        );
        let odd = names("2001:db8::/30");
        assert_eq!(
            odd,
            [
                "8.b.d.0.1.0.0.2.ip6.arpa.",
                "9.b.d.0.1.0.0.2.ip6.arpa.",
                "a.b.d.0.1.0.0.2.ip6.arpa.",
                "b.b.d.0.1.0.0.2.ip6.arpa."
            ]
        );
        assert_eq!(names("0.0.0.0/0"), ["in-addr.arpa."]);
        assert_eq!(names("::/0"), ["ip6.arpa."]);
    }

    #[test]
    fn reverse_names_of_addresses() {
        assert_eq!(
            ptr_name("192.0.2.1".parse().unwrap()).to_string(),
            "1.2.0.192.in-addr.arpa."
        );
        assert_eq!(
            ptr_name("2001:db8::1".parse().unwrap()).to_string(),
            "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."
        );
    }
}
