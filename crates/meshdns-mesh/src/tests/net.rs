//! The mesh planner: CIDR utilities.

use crate::net::*;

use super::*;

#[test]
fn cidr_parsing() {
    for (input, want) in [
        ("10.0.0.0/16", Some("10.0.0.0/16")),
        ("10.0.1.5/16", Some("10.0.0.0/16")),
        ("fd00::/64", Some("fd00::/64")),
        ("10.0.0.1/32", Some("10.0.0.1/32")),
        ("fd00::1/128", Some("fd00::1/128")),
        ("not-a-cidr", None),
        ("", None),
        ("10.0.0.1", None),
    ] {
        assert_eq!(
            parse_cidr(input).map(|n| n.to_string()).as_deref(),
            want,
            "{input}"
        );
    }
    for (input, host, net) in [
        ("10.4.0.1/32", "10.4.0.1", "10.4.0.1/32"),
        ("100.66.0.3/16", "100.66.0.3", "100.66.0.0/16"),
        ("10.4.0.1/24", "10.4.0.1", "10.4.0.0/24"),
        ("fd00::1/128", "fd00::1", "fd00::1/128"),
        ("fd00::1/64", "fd00::1", "fd00::/64"),
    ] {
        let (ip, n) = parse_host_in_cidr(input).unwrap();
        assert_eq!(
            (ip.to_string().as_str(), n.to_string().as_str()),
            (host, net)
        );
    }
    for bad in ["not-a-cidr", "", "10.0.0.1"] {
        assert!(parse_host_in_cidr(bad).is_none());
    }
}

#[test]
fn cidr_relations() {
    let p = |s: &str| parse_cidr(s).unwrap();
    for (outer, inner, want) in [
        ("10.0.0.0/8", "10.1.0.0/16", true),
        ("10.0.0.0/16", "10.0.0.0/16", true),
        ("10.0.0.0/16", "10.1.0.0/16", false),
        ("10.0.0.0/16", "10.0.128.0/15", false),
        ("10.0.0.0/24", "10.0.0.5/32", true),
        ("10.0.0.0/24", "10.0.1.5/32", false),
        ("fd00::/48", "fd00::/64", true),
        ("fd00::/64", "fd01::/64", false),
    ] {
        assert_eq!(
            cidr_contains(&p(outer), &p(inner)),
            want,
            "{outer} ⊇ {inner}"
        );
    }
    for (a, b, want) in [
        ("10.0.0.0/16", "10.0.0.0/16", true),
        ("10.0.0.0/8", "10.1.0.0/16", true),
        ("10.0.0.0/15", "10.1.0.0/16", true),
        ("10.0.0.0/16", "10.1.0.0/16", false),
        ("10.0.0.0/8", "192.168.0.0/16", false),
        ("fd00::/48", "fd00::/64", true),
        ("fd00::/48", "fd01::/48", false),
    ] {
        assert_eq!(cidr_overlaps(&p(a), &p(b)), want, "{a} ∩ {b}");
        assert_eq!(cidr_overlaps(&p(b), &p(a)), want, "{b} ∩ {a}");
    }
    for (c, want) in [
        ("10.0.0.1/32", true),
        ("10.0.0.0/24", false),
        ("0.0.0.0/0", false),
        ("fd00::1/128", true),
        ("fd00::/64", false),
    ] {
        assert_eq!(is_host_route(&p(c)), want, "{c}");
    }
    for (ip, want) in [
        ("100.66.0.3", "100.66.0.3/32"),
        ("10.0.0.0", "10.0.0.0/32"),
        ("fd00::1", "fd00::1/128"),
    ] {
        assert_eq!(host_route(ip.parse().unwrap()), want);
    }
}

#[test]
fn host_port_parsing() {
    for (input, want) in [
        ("203.0.113.7:51820", Some(("203.0.113.7", 51820))),
        ("[2001:db8::1]:51820", Some(("2001:db8::1", 51820))),
        ("node.example.com:1", Some(("node.example.com", 1))),
        ("203.0.113.7", None),
        ("203.0.113.7:abc", None),
        ("203.0.113.7:0", None),
        ("203.0.113.7:65536", None),
        ("203.0.113.7:+5", None),
        (":51820", None),
        ("2001:db8::1:51820", None),
        ("[2001:db8::1]", None),
        ("no-colon-at-all", None),
    ] {
        let got = HostPort::parse(input).ok();
        assert_eq!(
            got.as_ref().map(|h| (h.host.as_str(), h.port)),
            want,
            "{input}"
        );
        if let Some(h) = got {
            assert_eq!(h.to_string(), input);
        }
    }
}
