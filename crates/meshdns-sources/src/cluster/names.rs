//! How the cluster's objects name themselves: external-dns's annotations (under both of its
//! prefixes), host names as Kubernetes and DNS accept them, TTLs, targets, and label selectors.

use std::collections::BTreeMap;
use std::net::IpAddr;

use meshdns_zone::Name;

/// external-dns's annotation prefixes: the GA one (external-dns v0.22 and later) and the alpha
/// one (earlier releases, and k8s_gateway). An object may use either; the GA one is read first.
pub const PREFIXES: [&str; 2] = [
    "external-dns.kubernetes.io/",
    "external-dns.alpha.kubernetes.io/",
];

/// The annotation that keeps an object out of DNS whatever else it says (`"true"`).
pub const IGNORE: &str = "meshdns.io/ignore";

/// An external-dns annotation (`hostname`, `ttl`, …) of `annotations`: its full key and value,
/// the GA prefix before the alpha one; an empty value counts as absent.
pub fn annotation<'a>(
    annotations: &'a BTreeMap<String, String>,
    suffix: &str,
) -> Option<(String, &'a str)> {
    PREFIXES.iter().find_map(|prefix| {
        let key = format!("{prefix}{suffix}");
        // An empty value is no value (as external-dns reads it): the other prefix, or none.
        let value = annotations.get(&key).filter(|v| !v.trim().is_empty())?;
        Some((key, value.as_str()))
    })
}

/// The items of a comma-separated annotation, as external-dns splits them: spaces removed,
/// empty items dropped.
pub fn split_list(value: &str) -> Vec<String> {
    value
        .replace(' ', "")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// A host name as an object writes it (`web.example.org`, with or without the final dot;
/// `*.example.org` as a wildcard): letters, digits, `-` and `_` in labels of 1 to 63 bytes, a
/// `*` only as a whole first label.
pub fn host_name(text: &str) -> Result<Name, String> {
    let bare = text.strip_suffix('.').unwrap_or(text);
    if bare.is_empty() {
        return Err("an empty host name".into());
    }
    for (i, label) in bare.split('.').enumerate() {
        let ok = (label == "*" && i == 0)
            || (!label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        if !ok {
            return Err(format!(
                "{text:?} is not a host name (labels of letters, digits, '-' and '_', a '*' only as the first label)"
            ));
        }
    }
    Name::parse(&format!("{bare}."), None).map_err(|e| format!("{text:?} is not a host name: {e}"))
}

/// Where a name points: an address (A or AAAA), another name (CNAME), or other data (a
/// DNSEndpoint's TXT, MX, SRV, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An IPv4 or IPv6 address.
    Ip(IpAddr),
    /// A host name, served as a CNAME.
    Host(Name),
    /// Any other record's data.
    Data(meshdns_zone::RData),
}

impl Target {
    /// The type of the record this target is.
    pub fn rtype(&self) -> meshdns_zone::RType {
        match self {
            Target::Ip(IpAddr::V4(_)) => meshdns_zone::RType::A,
            Target::Ip(IpAddr::V6(_)) => meshdns_zone::RType::AAAA,
            Target::Host(_) => meshdns_zone::RType::CNAME,
            Target::Data(d) => d.rtype(),
        }
    }

    /// The record this target is.
    pub fn rdata(&self) -> meshdns_zone::RData {
        match self {
            Target::Ip(IpAddr::V4(a)) => meshdns_zone::RData::A(*a),
            Target::Ip(IpAddr::V6(a)) => meshdns_zone::RData::Aaaa(*a),
            Target::Host(h) => meshdns_zone::RData::Cname(h.clone()),
            Target::Data(d) => d.clone(),
        }
    }
}

/// A target as written in a status or a `target` annotation: an address, else a host name.
pub fn target(text: &str) -> Result<Target, String> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(Target::Ip(ip));
    }
    match host_name(text) {
        Ok(name) if !text.starts_with('*') => Ok(Target::Host(name)),
        _ => Err(format!("{text:?} is neither an IP address nor a host name")),
    }
}

/// A TTL annotation, as external-dns reads it: a Go duration (`90s`, `5m`, `1h30m`; a fraction
/// of a second dropped) or whole seconds, from 1 to 2147483647.
pub fn ttl(text: &str) -> Result<u32, String> {
    let bad = || {
        format!(
            "{text:?} is not a TTL (whole seconds such as 300, or a duration such as 5m or 1h30m, from 1s to 2147483647s)"
        )
    };
    let seconds = match text.parse::<i64>() {
        Ok(s) => s,
        Err(_) => duration_seconds(text).ok_or_else(bad)?,
    };
    if (1..=i64::from(i32::MAX)).contains(&seconds) {
        Ok(seconds as u32)
    } else {
        Err(bad())
    }
}

/// A Go duration (`1h30m`, `90s`, `1.5m`, `500ms`) in whole seconds, rounded down.
fn duration_seconds(text: &str) -> Option<i64> {
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest.is_empty() || rest.starts_with('-') {
        return None;
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        nanos += number * scale;
    }
    (nanos < 1e19).then(|| (nanos / 1e9) as i64)
}

/// An equality-based label selector, as `kubectl -l` takes it: `k=v`, `k==v`, `k!=v`, `k`
/// (present) and `!k` (absent), comma-separated, all of which must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(Vec<(String, Requirement)>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String),
    Differs(String),
    Present,
    Absent,
}

impl Selector {
    /// Parses a selector; the error names the requirement at fault.
    pub fn parse(text: &str) -> Result<Selector, String> {
        let mut out = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, req) = if let Some((k, v)) = part.split_once("!=") {
                (k, Requirement::Differs(v.trim().into()))
            } else if let Some((k, v)) = part.split_once("==") {
                (k, Requirement::Equals(v.trim().into()))
            } else if let Some((k, v)) = part.split_once('=') {
                (k, Requirement::Equals(v.trim().into()))
            } else if let Some(k) = part.strip_prefix('!') {
                (k, Requirement::Absent)
            } else {
                (part, Requirement::Present)
            };
            let key = key.trim();
            let valid = |s: &str| {
                s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b))
            };
            let value_ok = match &req {
                Requirement::Equals(v) | Requirement::Differs(v) => valid(v),
                _ => true,
            };
            if key.is_empty() || !valid(key) || !value_ok || part.contains(' ') {
                return Err(format!(
                    "{part:?} is not a label requirement (key=value, key!=value, key or !key)"
                ));
            }
            out.push((key.to_string(), req));
        }
        Ok(Selector(out))
    }

    /// Whether `labels` meet every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|(key, req)| match req {
            Requirement::Equals(v) => labels.get(key) == Some(v),
            Requirement::Differs(v) => labels.get(key) != Some(v),
            Requirement::Present => labels.contains_key(key),
            Requirement::Absent => !labels.contains_key(key),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_as_seconds_and_durations() {
        assert_eq!(ttl("600"), Ok(600));
        assert_eq!(ttl("5m"), Ok(300));
        assert_eq!(ttl("1h30m"), Ok(5400));
        assert_eq!(ttl("1.5s"), Ok(1));
        assert_eq!(ttl("90s"), Ok(90));
        for bad in ["0", "-5", "5 m", "soon", "", "3000000000", "500ms"] {
            assert!(ttl(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn host_names_and_targets() {
        assert_eq!(
            host_name("Web.Example.org.").unwrap().to_string(),
            "web.example.org."
        );
        assert_eq!(
            host_name("*.apps.example.org").unwrap().to_string(),
            "*.apps.example.org."
        );
        for bad in [
            "",
            "a..b",
            "a.*.b",
            "has space.org",
            "x/y.org",
            &"a".repeat(64),
        ] {
            assert!(host_name(bad).is_err(), "{bad}");
        }
        assert_eq!(
            target("192.0.2.1"),
            Ok(Target::Ip("192.0.2.1".parse().unwrap()))
        );
        assert_eq!(
            target("2001:db8::1"),
            Ok(Target::Ip("2001:db8::1".parse().unwrap()))
        );
        assert_eq!(
            target("lb.example.net."),
            Ok(Target::Host(Name::parse("lb.example.net.", None).unwrap()))
        );
        assert!(target("*.example.net").is_err());
        assert!(target("10.0.0.300/8").is_err());
    }

    #[test]
    fn lists_split_as_external_dns_splits_them() {
        assert_eq!(
            split_list(" a.org, b.org ,,c.org,"),
            ["a.org", "b.org", "c.org"]
        );
    }

    #[test]
    fn selectors() {
        let labels: BTreeMap<String, String> = [
            ("app".to_string(), "web".to_string()),
            ("tier".into(), "edge".into()),
        ]
        .into();
        for (text, hit) in [
            ("app=web", true),
            ("app==web,tier", true),
            ("app!=web", false),
            ("!canary", true),
            ("!tier", false),
            ("", true),
        ] {
            assert_eq!(
                Selector::parse(text).unwrap().matches(&labels),
                hit,
                "{text}"
            );
        }
        assert!(Selector::parse("app in (a,b)").is_err());
    }
}
