//! CIDR and `host:port` helpers with the reference operator's semantics (Go's
//! `net.ParseCIDR` and `net.SplitHostPort`), on top of `ipnet`.

use std::net::IpAddr;

use ipnet::IpNet;

/// Parses `<ip>/<len>` (host bits allowed, as Go's `net.ParseCIDR`); a bare IP is an error.
/// Returns the address as written and the masked network.
pub fn parse_host_in_cidr(text: &str) -> Option<(IpAddr, IpNet)> {
    let net: IpNet = text.trim().parse().ok()?;
    Some((net.addr(), net.trunc()))
}

/// Parses a CIDR and masks it to its network (`10.0.1.5/16` -> `10.0.0.0/16`).
pub fn parse_cidr(text: &str) -> Option<IpNet> {
    parse_host_in_cidr(text).map(|(_, net)| net)
}

/// `inner` lies entirely inside `outer`.
pub fn cidr_contains(outer: &IpNet, inner: &IpNet) -> bool {
    outer.contains(inner)
}

/// The networks share an address: either contains the other's base address.
pub fn cidr_overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// `/32` or `/128`.
pub fn is_host_route(net: &IpNet) -> bool {
    net.prefix_len() == net.max_prefix_len()
}

/// The host route of an address: `/32` for IPv4, `/128` for IPv6.
pub fn host_route(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => format!("{v4}/32"),
        IpAddr::V6(v6) => format!("{v6}/128"),
    }
}

/// A `host:port` as the reference accepts it: splits as Go's `net.SplitHostPort` (IPv6 in
/// brackets), the host is non-empty and the port is a decimal 1..65535.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    /// Host without brackets: an IP or a DNS name.
    pub host: String,
    /// Port, never 0.
    pub port: u16,
}

impl HostPort {
    /// Parses `host:port` / `[v6]:port`.
    pub fn parse(text: &str) -> Result<HostPort, String> {
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (host, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("{text:?}: missing ']' after an IPv6 host"))?;
            let port = after
                .strip_prefix(':')
                .ok_or_else(|| format!("{text:?}: missing port after ']'"))?;
            (host, port)
        } else {
            let (host, port) = text
                .rsplit_once(':')
                .ok_or_else(|| format!("{text:?}: want host:port"))?;
            if host.contains(':') {
                return Err(format!(
                    "{text:?}: too many colons (write an IPv6 host in brackets: [2001:db8::1]:51820)"
                ));
            }
            (host, port)
        };
        if host.is_empty() {
            return Err(format!("{text:?}: empty host"));
        }
        if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{text:?}: port {port:?} is not a number"));
        }
        match port.parse::<u16>() {
            Ok(0) | Err(_) => Err(format!("{text:?}: port must be 1..65535")),
            Ok(port) => Ok(HostPort {
                host: host.to_string(),
                port,
            }),
        }
    }

    /// The host as an IP, when it is one.
    pub fn ip(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }
}

impl std::fmt::Display for HostPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// An RFC 1123 subdomain as Kubernetes (and Kilo's Peer validation) checks it: lowercase
/// alphanumeric labels with inner `-`, separated by `.`, at most 253 characters.
pub fn is_dns1123_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}
