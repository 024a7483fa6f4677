//! One external-dns `DNSEndpoint`'s records: each endpoint a name, a type and its targets in
//! presentation form, as external-dns's CRD source reads them.

use meshdns_objects::gateway::DNSEndpoint;
use meshdns_zone::{Name, RData, RType};
use serde_json::Value;

use super::names::{self, Target};
use super::{ClusterSettings, Reading, Reason};

/// The types a DNSEndpoint may give (what meshdns serves, less the SOA a zone owns).
const TYPES: &str = "A, AAAA, CNAME, TXT, MX, SRV, CAA, NS, PTR";

pub(super) fn read_dnsendpoint(value: &Value, settings: &ClusterSettings) -> Reading {
    let mut r = Reading::default();
    let ep: DNSEndpoint = match <_ as serde::Deserialize>::deserialize(value) {
        Ok(ep) => ep,
        Err(e) => {
            r.problem("spec", format!("not of the kind's shape: {e}"));
            return r;
        }
    };
    for (i, e) in ep.spec.endpoints.iter().enumerate() {
        let at = format!("spec.endpoints[{i}]");
        let name = match names::host_name(&e.dns_name) {
            Ok(n) => n,
            Err(why) => {
                r.problem(format!("{at}.dnsName"), why);
                continue;
            }
        };
        let rtype = match RType::from_mnemonic(e.record_type.trim()) {
            Some(t)
                if RType::SERVED.contains(&t)
                    && t != RType::SOA
                    && e.record_type.trim() != "ALIAS" =>
            {
                t
            }
            _ => {
                r.problem(
                    format!("{at}.recordType"),
                    format!("{:?} is not served ({TYPES} are)", e.record_type),
                );
                continue;
            }
        };
        let ttl = match e.record_ttl {
            None | Some(0) => settings.default_ttl,
            Some(t) if (1..=i64::from(i32::MAX)).contains(&t) => t as u32,
            Some(t) => {
                r.problem(
                    format!("{at}.recordTTL"),
                    format!("{t} is not a TTL (1 to 2147483647 seconds; 0 for the default)"),
                );
                settings.default_ttl
            }
        };
        if e.set_identifier.as_deref().is_some_and(|s| !s.is_empty()) {
            r.report(
                Reason::Unsupported,
                format!("{at}.setIdentifier"),
                "routing policies (weighted, geo, ...) are a provider's: the targets are served as one RRset",
            );
        }
        for (j, t) in e.targets.iter().enumerate() {
            match target(rtype, t) {
                Ok(target) => r.claim(&name, &target, ttl),
                Err(why) => r.problem(format!("{at}.targets[{j}]"), why),
            }
        }
    }
    r
}

/// One target of type `rtype`: an address for A/AAAA (no final dot, as external-dns requires),
/// TXT content as one record (or as quoted presentation text), anything else in presentation
/// form with names absolute (a final dot optional).
fn target(rtype: RType, text: &str) -> Result<Target, String> {
    // TXT content is kept as written, its spaces included; other data is trimmed.
    let text = if rtype == RType::TXT {
        text
    } else {
        text.trim()
    };
    let bad = |e: &dyn std::fmt::Display| format!("{text:?} is not {rtype} data: {e}");
    match rtype {
        RType::A | RType::AAAA => {
            let ip: std::net::IpAddr = text.parse().map_err(|e| bad(&e))?;
            if ip.is_ipv4() != (rtype == RType::A) {
                return Err(format!(
                    "{text:?} is not an {} address",
                    if rtype == RType::A { "IPv4" } else { "IPv6" }
                ));
            }
            Ok(Target::Ip(ip))
        }
        RType::CNAME => match names::host_name(text) {
            Ok(h) if !text.starts_with('*') => Ok(Target::Host(h)),
            _ => Err(format!("{text:?} is not a host name")),
        },
        RType::TXT if !(text.len() >= 2 && text.starts_with('"') && text.ends_with('"')) => {
            RData::txt_from_text(text.as_bytes())
                .map(Target::Data)
                .map_err(|e| bad(&e))
        }
        _ => RData::parse(rtype, text, &Name::root())
            .map(Target::Data)
            .map_err(|e| bad(&e)),
    }
}
