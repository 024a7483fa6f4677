//! Address prefixes (`192.0.2.0/24`, `2001:db8::/32`, or one address), as every setting that
//! names clients takes them: `--trusted-proxy`, `--allow-transfer`, `--rrl-exempt`. Here, at
//! the bottom of the crate graph, so every crate that reads or checks such a setting reaches
//! the one type.

use std::net::IpAddr;
use std::str::FromStr;

/// An address prefix: `192.0.2.0/24`, `2001:db8::/32`, or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    len: u8,
}

impl Cidr {
    /// The network address (as written; bits past the prefix kept).
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// Whether `ip` is inside (an IPv4-mapped IPv6 address counts as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let (v4, net, mask) = self.masked();
        let (ip_v4, addr) = ip_bits(ip);
        v4 == ip_v4 && addr & mask == net
    }

    /// The prefix ready for comparing with [`ip_bits`]: its family (IPv4 or not), its network
    /// bits and its mask, both over 128 bits (IPv4 in the top 32, so the prefix counts from
    /// the top either way). `ip` is inside when the families agree and `addr & mask == net`.
    pub fn masked(&self) -> (bool, u128, u128) {
        let (v4, net) = ip_bits(self.addr);
        let mask = match self.len {
            0 => 0,
            len => u128::MAX << (128 - u32::from(len)),
        };
        (v4, net & mask, mask)
    }
}

/// An address as 128 bits and whether it is IPv4: IPv4 in the top 32 bits, an IPv4-mapped
/// IPv6 address read as its IPv4 address (a dual-stack socket reports IPv4 clients so).
pub fn ip_bits(ip: IpAddr) -> (bool, u128) {
    match ip.to_canonical() {
        IpAddr::V4(v4) => (true, u128::from(u32::from(v4)) << 96),
        IpAddr::V6(v6) => (false, u128::from(v6)),
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(s: &str) -> Result<Cidr, String> {
        let bad = || format!("{s:?} is not an address or prefix (192.0.2.0/24, 2001:db8::/32)");
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        let addr = addr.to_canonical();
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => l.parse::<u8>().ok().filter(|l| *l <= max).ok_or_else(bad)?,
        };
        Ok(Cidr { addr, len })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes_parse_and_match() {
        let c: Cidr = "10.1.0.0/16".parse().unwrap();
        assert!(c.contains(ip("10.1.2.3")) && !c.contains(ip("10.2.0.1")));
        assert!(c.contains(ip("::ffff:10.1.9.9")), "IPv4-mapped peers count");
        let v6: Cidr = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(ip("2001:db8:1::1")) && !v6.contains(ip("2001:db9::1")));
        assert!(!v6.contains(ip("10.1.2.3")));
        let one: Cidr = "192.0.2.7".parse().unwrap();
        assert!(one.contains(ip("192.0.2.7")) && !one.contains(ip("192.0.2.8")));
        assert!(
            "0.0.0.0/0"
                .parse::<Cidr>()
                .unwrap()
                .contains(ip("203.0.113.1"))
        );
        for bad in ["10.0.0.0/33", "nope", "10.0.0.0/x", "::/129"] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }
}
