//! Tailscale's `records.json` (the `dnsrecords` ConfigMap of its k8s-nameserver):
//! `{"version":"v1alpha1","ip4":{name:[ipv4…]},"ip6":{name:[ipv6…]}}`. Names are placed in the
//! longest matching zone of the configured list (default `ts.net.`) and lower-cased, so
//! lookups are case-insensitive.

use std::net::{Ipv4Addr, Ipv6Addr};

use meshdns_zone::rdata::parse_ipv6;
use meshdns_zone::{Name, RData, Record, Records};
use serde_json::{Map, Value};

use crate::content::{ParseSettings, Parsed, Problem, ZoneContent};

/// The Tailscale version this format was written against.
pub const TAILSCALE_VERSION: &str = "v1alpha1";

/// Parses a Tailscale records file whose top-level mapping is `top`.
pub fn parse(
    file: &str,
    top: &Map<String, Value>,
    settings: &ParseSettings,
) -> Result<Parsed, Problem> {
    match top.get("version") {
        Some(Value::String(v)) if v == TAILSCALE_VERSION => {}
        Some(other) => {
            return Err(Problem::new(
                file,
                "version",
                format!("unsupported version {other}; supported: {TAILSCALE_VERSION}"),
            ));
        }
        None => unreachable!("checked by the caller"),
    }
    let mut parsed = Parsed::default();
    let mut zones: Vec<ZoneContent> = settings
        .tailscale_zones
        .iter()
        .map(|origin| ZoneContent {
            origin: origin.clone(),
            soa: None,
            records: Records::new(),
        })
        .collect();
    for (key, value) in top {
        match key.as_str() {
            "version" => {}
            "ip4" | "ip6" => {
                let Value::Object(names) = value else {
                    parsed.problems.push(Problem::new(file, key, "expected an object of name -> list of addresses"));
                    continue;
                };
                for (raw_name, addrs) in names {
                    let entry = format!("{key}.{raw_name}");
                    let name = match tailscale_name(raw_name) {
                        Ok(n) => n,
                        Err(reason) => {
                            parsed.problems.push(Problem::new(file, &entry, reason));
                            continue;
                        }
                    };
                    let Some(zone) = zones
                        .iter_mut()
                        .filter(|z| name.is_subdomain_of(&z.origin))
                        .max_by_key(|z| z.origin.wire().len())
                    else {
                        let served: Vec<String> = settings.tailscale_zones.iter().map(ToString::to_string).collect();
                        parsed.problems.push(Problem::new(file, &entry, format!("{name} is outside every served zone ({})", served.join(", "))));
                        continue;
                    };
                    let Value::Array(list) = addrs else {
                        parsed.problems.push(Problem::new(file, &entry, "expected a list of address strings"));
                        continue;
                    };
                    for (i, addr) in list.iter().enumerate() {
                        let data = match (key.as_str(), addr.as_str()) {
                            (_, None) => Err(format!("{addr} is not a string")),
                            ("ip4", Some(text)) => ipv4(text).map(RData::A),
                            (_, Some(text)) => parse_ipv6(text).map(RData::Aaaa).map_err(|e| e.0),
                        };
                        match data {
                            Ok(data) => zone.records.push(Record { name: name.clone(), ttl: settings.default_ttl, data }),
                            Err(reason) => parsed.problems.push(Problem::new(file, format!("{entry}[{i}]"), reason)),
                        }
                    }
                }
            }
            other => parsed.problems.push(Problem::new(
                file,
                other,
                format!("unknown key ignored (a {TAILSCALE_VERSION} records file has `version`, `ip4` and `ip6`)"),
            )),
        }
    }
    parsed.zones = zones;
    Ok(parsed)
}

/// An `ip4` entry: an IPv4 address, or an IPv4-mapped IPv6 one (`::ffff:192.0.2.13`), which
/// Tailscale's nameserver unmaps and serves as the IPv4 address.
fn ipv4(text: &str) -> Result<Ipv4Addr, String> {
    text.parse::<Ipv4Addr>()
        .ok()
        .or_else(|| text.parse::<Ipv6Addr>().ok()?.to_ipv4_mapped())
        .ok_or_else(|| format!("{text:?} is not an IPv4 address"))
}

/// Tailscale's FQDN rule: one leading dot is dropped, the trailing dot is optional.
fn tailscale_name(raw: &str) -> Result<Name, String> {
    let text = raw.strip_prefix('.').unwrap_or(raw);
    let absolute = if text.ends_with('.') {
        text.to_string()
    } else {
        format!("{text}.")
    };
    Name::parse(&absolute, None).map_err(|e| format!("{raw:?} is not a valid DNS name: {e}"))
}
