//! Records files: detecting the format, and the two JSON/YAML formats.
//!
//! - **Tailscale** `records.json` (the `dnsrecords` ConfigMap of Tailscale's k8s-nameserver):
//!   `{"version":"v1alpha1","ip4":{name:[ipv4…]},"ip6":{name:[ipv6…]}}`, recognised by its
//!   `version` key. Names are placed in the longest matching zone of the configured list
//!   (default `ts.net.`); names are lower-cased, so lookups are case-insensitive.
//! - **meshdns** (YAML or JSON): a top-level `zones:` list; see `docs/records-files.md`.
//! - **Zone files** (RFC 1035 master format) live in [`crate::zonefile`].
//!
//! Parsing is pure: bytes in, [`Parsed`] or an unusable-file [`Problem`] out. A bad entry is a
//! [`Problem`] in [`Parsed::problems`] and is skipped; the rest of the file still loads.

use std::fmt;
use std::net::Ipv4Addr;

use meshdns_zone::rdata::parse_ipv6;
use meshdns_zone::text::parse_ttl;
use meshdns_zone::{Name, RData, RType, Record, Records, SoaTemplate};
use serde_json::{Map, Value};

use crate::zonefile;

/// One thing wrong with a file: `FILE: ENTRY: REASON`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file, as the user named it.
    pub file: String,
    /// The key or value at fault (`ip4.foo.ts.net`, `zones[0].records[2]`, `line 7`), or `file`.
    pub entry: String,
    /// What is wrong and what would be accepted.
    pub reason: String,
}

impl Problem {
    /// A problem with an entry of `file`.
    pub fn new(file: &str, entry: impl Into<String>, reason: impl Into<String>) -> Problem {
        Problem {
            file: file.to_string(),
            entry: entry.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.file, self.entry, self.reason)
    }
}

/// What one file contributes to one zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneContent {
    /// The zone's apex.
    pub origin: Name,
    /// SOA settings when the file gives them without an SOA record.
    pub soa: Option<SoaTemplate>,
    /// The records, all at or below `origin`.
    pub records: Records,
}

impl ZoneContent {
    /// A zone with no records.
    pub fn empty(origin: &Name) -> ZoneContent {
        ZoneContent {
            origin: origin.clone(),
            soa: None,
            records: Records::new(),
        }
    }
}

/// A usable file: its zones and the entries that were skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Zones, in file order.
    pub zones: Vec<ZoneContent>,
    /// Entries skipped, each with its reason.
    pub problems: Vec<Problem>,
}

/// How a file should be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileKind {
    /// Decide from the name and content: `.zone`/`.db` files and text starting with a `$`
    /// directive or `;` comment are zone files, everything else JSON/YAML.
    Auto,
    /// An RFC 1035 zone file; `origin` is the initial `$ORIGIN` when given.
    ZoneFile {
        /// Initial origin (and zone apex unless the file's SOA says otherwise).
        origin: Option<Name>,
    },
    /// Kubernetes manifests: the zones their DNSZones and DNSRecordSets make
    /// ([`crate::manifests`]). The path may be a directory: every `.yaml`, `.yml` and
    /// `.json` file in it, in name order.
    Manifests,
}

/// What parsing needs besides the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseSettings {
    /// TTL for records that do not give one.
    pub default_ttl: u32,
    /// Zones that Tailscale-format names are placed in.
    pub tailscale_zones: Vec<Name>,
}

impl Default for ParseSettings {
    fn default() -> Self {
        ParseSettings {
            default_ttl: 5,
            tailscale_zones: vec![Name::parse("ts.net.", None).expect("valid name")],
        }
    }
}

/// Parses a records or zone file. `file` is the name used in problems.
pub fn parse(
    file: &str,
    kind: &FileKind,
    bytes: &[u8],
    settings: &ParseSettings,
) -> Result<Parsed, Problem> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Problem::new(
            file,
            "file",
            format!("not UTF-8 text (byte {})", e.valid_up_to()),
        )
    })?;
    if text.trim().is_empty() {
        // An empty file clears this source's records (as Tailscale's nameserver does).
        return Ok(Parsed::default());
    }
    match kind {
        FileKind::ZoneFile { origin } => {
            zonefile::parse(file, text, origin.as_ref(), settings.default_ttl)
        }
        FileKind::Manifests => {
            let objects = crate::manifests::objects(file, text)?;
            Ok(crate::manifests::zones(file, &objects))
        }
        FileKind::Auto if crate::manifests::looks_like_manifests(text) => {
            let objects = crate::manifests::objects(file, text)?;
            Ok(crate::manifests::zones(file, &objects))
        }
        FileKind::Auto if looks_like_zone_file(file, text) => {
            zonefile::parse(file, text, None, settings.default_ttl)
        }
        FileKind::Auto => parse_structured(file, text, settings),
    }
}

fn looks_like_zone_file(file: &str, text: &str) -> bool {
    let lower = file.to_ascii_lowercase();
    if lower.ends_with(".zone") || lower.ends_with(".db") {
        return true;
    }
    if lower.ends_with(".json") || lower.ends_with(".yaml") || lower.ends_with(".yml") {
        return false;
    }
    let first = text
        .lines()
        .map(str::trim_start)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    first.starts_with('$') || first.starts_with(';')
}

fn parse_structured(file: &str, text: &str, settings: &ParseSettings) -> Result<Parsed, Problem> {
    let trimmed = text.trim_start();
    let value: Value = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        serde_json::from_str(text)
            .map_err(|e| Problem::new(file, "file", format!("not valid JSON: {e}")))?
    } else {
        serde_yaml::from_str(text)
            .map_err(|e| Problem::new(file, "file", format!("not valid YAML or JSON: {e}")))?
    };
    let Value::Object(top) = value else {
        return Err(Problem::new(
            file,
            "file",
            "expected a mapping with a `version` key (Tailscale records.json) or a `zones` key (meshdns records)",
        ));
    };
    if top.contains_key("version") {
        tailscale(file, &top, settings)
    } else if top.contains_key("zones") {
        meshdns(file, &top, settings)
    } else {
        Err(Problem::new(
            file,
            "file",
            "expected a `version` key (Tailscale records.json) or a `zones` key (meshdns records)",
        ))
    }
}

/// The Tailscale version this format was written against.
pub const TAILSCALE_VERSION: &str = "v1alpha1";

fn tailscale(
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
                            ("ip4", Some(text)) => text
                                .parse::<Ipv4Addr>()
                                .map(RData::A)
                                .map_err(|_| format!("{text:?} is not an IPv4 address")),
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

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn ttl_value(v: &Value) -> Result<u32, String> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| format!("ttl {n} is not a number of seconds 0-4294967295")),
        Value::String(s) => parse_ttl(s),
        other => Err(format!("ttl {other} is not a number of seconds")),
    }
}

const ZONE_KEYS: &[&str] = &["origin", "ttl", "soa", "ns", "records", "iroh"];
const RECORD_KEYS: &[&str] = &["name", "type", "value", "values", "ttl"];
const SOA_KEYS: &[&str] = &[
    "ttl", "mname", "rname", "serial", "refresh", "retry", "expire", "minimum",
];

fn unknown_keys(map: &Map<String, Value>, allowed: &[&str]) -> Option<String> {
    let unknown: Vec<&str> = map
        .keys()
        .map(String::as_str)
        .filter(|k| !allowed.contains(k))
        .collect();
    (!unknown.is_empty()).then(|| {
        format!(
            "unknown key(s) {}; accepted: {}",
            unknown.join(", "),
            allowed.join(", ")
        )
    })
}

fn meshdns(
    file: &str,
    top: &Map<String, Value>,
    settings: &ParseSettings,
) -> Result<Parsed, Problem> {
    if let Some(reason) = unknown_keys(top, &["zones"]) {
        return Err(Problem::new(file, "file", reason));
    }
    let Some(Value::Array(zones)) = top.get("zones") else {
        return Err(Problem::new(file, "zones", "expected a list of zones"));
    };
    let mut parsed = Parsed::default();
    for (zi, zone) in zones.iter().enumerate() {
        let entry = format!("zones[{zi}]");
        match meshdns_zone(file, &entry, zone, settings, &mut parsed.problems) {
            Ok(content) => parsed.zones.push(content),
            Err(reason) => parsed.problems.push(Problem::new(file, entry, reason)),
        }
    }
    Ok(parsed)
}

fn meshdns_zone(
    file: &str,
    entry: &str,
    zone: &Value,
    settings: &ParseSettings,
    problems: &mut Vec<Problem>,
) -> Result<ZoneContent, String> {
    let Value::Object(zone) = zone else {
        return Err("expected a mapping with `origin` and `records`".into());
    };
    if let Some(reason) = unknown_keys(zone, ZONE_KEYS) {
        return Err(reason);
    }
    let origin_text = zone
        .get("origin")
        .and_then(Value::as_str)
        .ok_or("missing `origin` (the zone's domain name)")?;
    let origin: Name = origin_text
        .parse()
        .map_err(|e| format!("origin {origin_text:?}: {e}"))?;
    let zone_ttl = match zone.get("ttl") {
        Some(v) => ttl_value(v)?,
        None => settings.default_ttl,
    };
    let mut content = ZoneContent {
        origin: origin.clone(),
        soa: None,
        records: Records::new(),
    };
    if let Some(soa) = zone.get("soa") {
        match soa_template(soa, &origin) {
            Ok(t) => content.soa = Some(t),
            Err(reason) => problems.push(Problem::new(file, format!("{entry}.soa"), reason)),
        }
    }
    if let Some(ns) = zone.get("ns") {
        let list = match ns {
            Value::Array(list) => list.clone(),
            other => vec![other.clone()],
        };
        for (i, v) in list.iter().enumerate() {
            let text = scalar_text(v).unwrap_or_default();
            match Name::parse(&text, Some(&origin)) {
                Ok(n) => content.records.push(Record {
                    name: origin.clone(),
                    ttl: zone_ttl,
                    data: RData::Ns(n),
                }),
                Err(e) => problems.push(Problem::new(
                    file,
                    format!("{entry}.ns[{i}]"),
                    format!("{text:?}: {e}"),
                )),
            }
        }
    }
    if let Some(records) = zone.get("records") {
        let Value::Array(records) = records else {
            return Err("`records` must be a list".into());
        };
        for (ri, rec) in records.iter().enumerate() {
            let rentry = format!("{entry}.records[{ri}]");
            match meshdns_record(rec, &origin, zone_ttl) {
                Ok(list) => content.records.extend(list),
                Err((label, reason)) => {
                    let entry = if label.is_empty() {
                        rentry
                    } else {
                        format!("{rentry} ({label})")
                    };
                    problems.push(Problem::new(file, entry, reason));
                }
            }
        }
    }
    match zone.get("iroh") {
        None | Some(Value::Null) => {}
        Some(Value::Array(endpoints)) => {
            for (i, ep) in endpoints.iter().enumerate() {
                let ientry = format!("{entry}.iroh[{i}]");
                match iroh_endpoint(ep, &origin) {
                    Ok(records) => content.records.extend(records),
                    Err((label, reason)) => {
                        let at = if label.is_empty() {
                            ientry
                        } else {
                            format!("{ientry} ({label})")
                        };
                        problems.push(Problem::new(file, at, reason));
                    }
                }
            }
        }
        Some(_) => problems.push(Problem::new(
            file,
            format!("{entry}.iroh"),
            "`iroh` must be a list of endpoints",
        )),
    }
    Ok(content)
}

const IROH_KEYS: &[&str] = &["endpoint", "relay", "addrs", "userData", "suffix", "ttl"];

/// One iroh endpoint entry: `endpoint` (64 hex or 52 z-base-32), `relay`, `addrs`
/// (`ip:port`, IPv6 as `[ip]:port`), `userData`, `suffix`, `ttl` (default 5 s). Published as the
/// TXT records iroh resolves at `_iroh.<z32>[.<suffix>].<origin>` (see `meshdns_iroh`).
fn iroh_endpoint(ep: &Value, origin: &Name) -> Result<Vec<Record>, (String, String)> {
    let Value::Object(ep) = ep else {
        return Err((
            String::new(),
            "expected a mapping with `endpoint` and `relay` and/or `addrs`".into(),
        ));
    };
    let id_text = ep.get("endpoint").and_then(scalar_text).unwrap_or_default();
    let label: String = id_text.chars().take(12).collect();
    let fail = |reason: String| (label.clone(), reason);
    if let Some(reason) = unknown_keys(ep, IROH_KEYS) {
        return Err(fail(reason));
    }
    if id_text.is_empty() {
        return Err(fail(
            "missing `endpoint` (the endpoint id, 64 hex or 52 z-base-32 characters)".into(),
        ));
    }
    let id = meshdns_iroh::parse_endpoint_id(&id_text).map_err(|e| fail(e.to_string()))?;
    let text_list = |key: &str| -> Result<Vec<String>, String> {
        match ep.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(list)) => list
                .iter()
                .map(|v| scalar_text(v).ok_or_else(|| format!("{key}: {v} is not a string")))
                .collect(),
            Some(v) => scalar_text(v)
                .map(|s| vec![s])
                .ok_or_else(|| format!("{key}: {v} is not a string")),
        }
    };
    let addrs = text_list("addrs")
        .map_err(&fail)?
        .iter()
        .map(|a| {
            a.parse::<std::net::SocketAddr>()
                .map_err(|_| fail(format!("address {a:?} is not ip:port (IPv6 as [ip]:port)")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let ttl = match ep.get("ttl") {
        Some(v) => ttl_value(v).map_err(&fail)?,
        None => meshdns_iroh::DEFAULT_TTL,
    };
    let info = meshdns_iroh::EndpointInfo {
        id,
        relay: ep.get("relay").and_then(scalar_text),
        addrs,
        user_data: ep.get("userData").and_then(scalar_text),
        suffix: ep.get("suffix").and_then(scalar_text),
        ttl,
    };
    meshdns_iroh::endpoint_txt(&info, origin).map_err(|e| fail(e.to_string()))
}

/// One record entry: `name`, `type`, `value` or `values`, optional `ttl`.
/// TXT values are literal text (split into 255-byte strings); other types use presentation
/// format (`10 mail.example.org.` for MX).
fn meshdns_record(
    rec: &Value,
    origin: &Name,
    zone_ttl: u32,
) -> Result<Vec<Record>, (String, String)> {
    let Value::Object(rec) = rec else {
        return Err((
            String::new(),
            "expected a mapping with `name`, `type` and `values`".into(),
        ));
    };
    let name_text = rec
        .get("name")
        .and_then(scalar_text)
        .unwrap_or_else(|| "@".to_string());
    let type_text = rec.get("type").and_then(Value::as_str).unwrap_or("");
    let label = format!("{name_text} {type_text}").trim().to_string();
    let fail = |reason: String| (label.clone(), reason);
    if let Some(reason) = unknown_keys(rec, RECORD_KEYS) {
        return Err(fail(reason));
    }
    let name = Name::parse(&name_text, Some(origin))
        .map_err(|e| fail(format!("name {name_text:?}: {e}")))?;
    if !name.is_subdomain_of(origin) {
        return Err(fail(format!("{name} is outside zone {origin}")));
    }
    let served: Vec<String> = RType::SERVED.iter().map(ToString::to_string).collect();
    let rtype = RType::from_mnemonic(type_text)
        .filter(|t| RType::SERVED.contains(t))
        .ok_or_else(|| {
            fail(format!(
                "unknown or unsupported type {type_text:?}; accepted: {}",
                served.join(", ")
            ))
        })?;
    let ttl = match rec.get("ttl") {
        Some(v) => ttl_value(v).map_err(&fail)?,
        None => zone_ttl,
    };
    let values: Vec<&Value> = match (rec.get("value"), rec.get("values")) {
        (Some(v), None) => vec![v],
        (None, Some(Value::Array(list))) => list.iter().collect(),
        (None, Some(v)) => vec![v],
        (Some(_), Some(_)) => return Err(fail("give either `value` or `values`, not both".into())),
        (None, None) => return Err(fail("missing `values`".into())),
    };
    if values.is_empty() {
        return Err(fail("`values` is empty".into()));
    }
    let mut out = Vec::with_capacity(values.len());
    for v in values {
        let text = scalar_text(v).ok_or_else(|| fail(format!("value {v} is not a string")))?;
        let data = if rtype == RType::TXT {
            RData::txt_from_text(text.as_bytes())
        } else {
            RData::parse(rtype, &text, origin)
        }
        .map_err(|e| fail(e.0))?;
        out.push(Record {
            name: name.clone(),
            ttl,
            data,
        });
    }
    Ok(out)
}

fn soa_template(v: &Value, origin: &Name) -> Result<SoaTemplate, String> {
    let Value::Object(m) = v else {
        return Err("expected a mapping of SOA fields".into());
    };
    if let Some(reason) = unknown_keys(m, SOA_KEYS) {
        return Err(reason);
    }
    let name = |k: &str| -> Result<Option<Name>, String> {
        m.get(k)
            .map(|v| {
                let text = scalar_text(v).unwrap_or_default();
                Name::parse(&text, Some(origin)).map_err(|e| format!("{k} {text:?}: {e}"))
            })
            .transpose()
    };
    let num = |k: &str| -> Result<Option<u32>, String> {
        m.get(k)
            .map(|v| ttl_value(v).map_err(|e| format!("{k}: {e}")))
            .transpose()
    };
    Ok(SoaTemplate {
        ttl: num("ttl")?,
        mname: name("mname")?,
        rname: name("rname")?,
        serial: num("serial")?,
        refresh: num("refresh")?,
        retry: num("retry")?,
        expire: num("expire")?,
        minimum: num("minimum")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> ParseSettings {
        ParseSettings::default()
    }

    #[test]
    fn tailscale_file_loads_and_skips_bad_entries() {
        let json = br#"{"version":"v1alpha1",
            "ip4":{"Foo.ts.net":["100.64.0.1","not-an-ip"],"a..ts.net":["1.2.3.4"],"x.example.com":["1.1.1.1"]},
            "ip6":{"v6.ts.net.":["fd7a::1","100.64.0.9"]},
            "forwards":{}}"#;
        let p = parse("records.json", &FileKind::Auto, json, &settings()).unwrap();
        let recs = &p.zones[0].records.to_vec();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].name.to_string(), "foo.ts.net.");
        assert_eq!(recs[0].ttl, 5);
        assert_eq!(recs[1].data, RData::Aaaa("fd7a::1".parse().unwrap()));
        let shown: Vec<String> = p.problems.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 5, "{shown:#?}");
        assert!(shown.contains(
            &r#"records.json: ip4.Foo.ts.net[1]: "not-an-ip" is not an IPv4 address"#.to_string()
        ));
        assert!(
            shown.iter().any(
                |s| s.starts_with("records.json: ip4.a..ts.net: ") && s.contains("empty label")
            )
        );
        assert!(
            shown
                .iter()
                .any(|s| s.starts_with("records.json: ip4.x.example.com: ")
                    && s.contains("outside every served zone (ts.net.)"))
        );
        assert!(
            shown
                .iter()
                .any(|s| s.starts_with("records.json: ip6.v6.ts.net.[1]: ")
                    && s.contains("IPv4 address where IPv6"))
        );
        assert!(
            shown
                .iter()
                .any(|s| s.starts_with("records.json: forwards: unknown key"))
        );
    }

    #[test]
    fn wrong_version_or_bad_json_makes_the_file_unusable() {
        let p = parse(
            "r.json",
            &FileKind::Auto,
            br#"{"version":"v2"}"#,
            &settings(),
        )
        .unwrap_err();
        assert_eq!(
            p.to_string(),
            r#"r.json: version: unsupported version "v2"; supported: v1alpha1"#
        );
        let p = parse("r.json", &FileKind::Auto, b"{not json", &settings()).unwrap_err();
        assert!(
            p.to_string().starts_with("r.json: file: not valid JSON"),
            "{p}"
        );
        let p = parse("r.yaml", &FileKind::Auto, b"hello: world", &settings()).unwrap_err();
        assert!(p.reason.contains("`version`"), "{p}");
    }

    #[test]
    fn empty_file_is_usable_and_empty() {
        assert_eq!(
            parse("r.json", &FileKind::Auto, b"  \n", &settings()).unwrap(),
            Parsed::default()
        );
    }

    #[test]
    fn meshdns_yaml_loads_every_type_and_skips_bad_records() {
        let yaml = br#"
zones:
  - origin: Example.org
    ttl: 60
    soa: { rname: admin, serial: 42 }
    ns: [ns1, ns2.other.net.]
    records:
      - { name: www, type: A, values: [192.0.2.1, 192.0.2.2] }
      - { name: www, type: AAAA, value: "2001:db8::1", ttl: 30 }
      - { name: txt, type: TXT, values: ["hello world", 123] }
      - { name: "@", type: MX, value: "10 mail" }
      - { name: bad, type: A, value: 300.0.0.1 }
      - { name: bad2, type: BOGUS, value: x }
      - { name: "a b", type: A, value: 1.2.3.4 }
      - { name: out.example.com., type: A, value: 1.2.3.4 }
      - { name: x, type: A, value: 1.2.3.4, colour: red }
  - origin: "bad..zone"
"#;
        let p = parse("z.yaml", &FileKind::Auto, yaml, &settings()).unwrap();
        assert_eq!(p.zones.len(), 1);
        let z = &p.zones[0];
        assert_eq!(z.origin.to_string(), "example.org.");
        assert_eq!(z.soa.as_ref().unwrap().serial, Some(42));
        assert_eq!(
            z.soa.as_ref().unwrap().rname.as_ref().unwrap().to_string(),
            "admin.example.org."
        );
        assert_eq!(z.records.len(), 8);
        assert_eq!(z.records.to_vec()[0].ttl, 60);
        assert_eq!(z.records.to_vec()[4].ttl, 30);
        assert_eq!(
            z.records.to_vec()[5].data,
            RData::txt_from_text(b"hello world").unwrap()
        );
        assert_eq!(
            z.records.to_vec()[6].data,
            RData::txt_from_text(b"123").unwrap()
        );
        let shown: Vec<String> = p.problems.iter().map(ToString::to_string).collect();
        assert_eq!(shown.len(), 6, "{shown:#?}");
        assert!(
            shown[0]
                .starts_with("z.yaml: zones[0].records[4] (bad A): \"300.0.0.1\" is not an IPv4"),
            "{}",
            shown[0]
        );
        assert!(shown[1].contains("records[5] (bad2 BOGUS): unknown or unsupported type"));
        assert!(shown[2].contains("records[6] (a b A): name \"a b\""));
        assert!(shown[3].contains("outside zone example.org."));
        assert!(shown[4].contains("unknown key(s) colour"));
        assert!(shown[5].starts_with("z.yaml: zones[1]: origin \"bad..zone\""));
    }

    /// RFC 8032 §7.1 test 1 public key: a valid ed25519 point.
    const KEY: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";

    #[test]
    fn iroh_endpoints_become_txt_records_and_bad_ones_are_skipped() {
        let yaml = format!(
            r#"
zones:
  - origin: mesh.example.org
    iroh:
      - endpoint: {upper}
        relay: https://relay.example.org
        addrs: ["192.0.2.1:4433", "[2001:db8::1]:4433"]
        suffix: nodes
        userData: rack-7
      - endpoint: abc
      - {{ endpoint: {KEY}, addrs: ["192.0.2.1:0"] }}
      - {{ endpoint: {KEY}, relay: "https://r.example/?a=b" }}
      - {{ endpoint: {KEY}, relay: "https://r.example/", colour: red }}
      - {{ endpoint: {KEY}, addrs: ["192.0.2.1"] }}
"#,
            upper = KEY.to_uppercase()
        );
        let p = parse("e.yaml", &FileKind::Auto, yaml.as_bytes(), &settings()).unwrap();
        let recs = &p.zones[0].records.to_vec();
        let shown: Vec<String> = recs
            .iter()
            .map(|r| format!("{} {} {}", r.name, r.ttl, r.data))
            .collect();
        let id = meshdns_iroh::parse_endpoint_id(KEY).unwrap().to_z32();
        let name = format!("_iroh.{id}.nodes.mesh.example.org.");
        assert_eq!(
            shown,
            [
                format!("{name} 5 \"relay=https://relay.example.org\""),
                format!("{name} 5 \"addr=192.0.2.1:4433\""),
                format!("{name} 5 \"addr=[2001:db8::1]:4433\""),
                format!("{name} 5 \"user-data=rack-7\""),
            ]
        );
        let problems: Vec<String> = p.problems.iter().map(ToString::to_string).collect();
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert!(problems[0].starts_with("e.yaml: zones[0].iroh[1] (abc): \"abc\" is not an endpoint id: expected 64 hexadecimal"), "{}", problems[0]);
        assert!(
            problems[1].contains("iroh[2] (d75a980182b1): address 192.0.2.1:0 has port 0"),
            "{}",
            problems[1]
        );
        assert!(
            problems[2].contains("contains '=', which iroh's TXT parser would cut off"),
            "{}",
            problems[2]
        );
        assert!(
            problems[3].contains("unknown key(s) colour"),
            "{}",
            problems[3]
        );
        assert!(
            problems[4].contains("\"192.0.2.1\" is not ip:port"),
            "{}",
            problems[4]
        );
    }

    #[test]
    fn meshdns_json_is_read_too() {
        let json = br#"{"zones":[{"origin":"example.org.","records":[{"name":"a","type":"A","values":["192.0.2.1"]}]}]}"#;
        let p = parse("z.json", &FileKind::Auto, json, &settings()).unwrap();
        assert_eq!(p.zones[0].records.to_vec()[0].ttl, 5);
        assert!(p.problems.is_empty());
    }
}
