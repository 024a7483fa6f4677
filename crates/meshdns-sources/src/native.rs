//! meshdns's own records format (YAML or JSON): a top-level `zones:` list of origins with
//! records, SOA settings and iroh endpoints; see `docs/records-files.md`.

use std::collections::BTreeMap;

use meshdns_zone::text::parse_ttl;
use meshdns_zone::{Name, RData, RType, Record, Records, SoaTemplate};
use serde_json::{Map, Value};

use crate::content::{ParseSettings, Parsed, Problem, ZoneContent};

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

const ZONE_KEYS: &[&str] = &["origin", "ttl", "soa", "ns", "records", "iroh", "view"];
const RECORD_KEYS: &[&str] = &["name", "type", "value", "values", "ttl", "view"];

/// The views a `view:` key names (`a`, `a,b`, or a list of names); `None` without one.
fn views_of(map: &Map<String, Value>) -> Result<Option<Vec<String>>, String> {
    let tags: Vec<&str> = match map.get("view") {
        None => return Ok(None),
        // An empty value (a template left blank) is not "every view": what it tags is skipped.
        Some(Value::Null) => {
            return Err("`view` is empty: give a view name, or leave the key out".into());
        }
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| v.as_str().ok_or("`view` must be a name or a list of names"))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`view` must be a name or a list of names".into()),
    };
    crate::content::view_tags(&tags)
        .map(Some)
        .map_err(|e| format!("view: {e}"))
}

/// A zone of a records file: its content seen by every view (or by the zone's `view:`), and
/// the entries that name views of their own, by those views.
struct NativeZone {
    content: ZoneContent,
    views: Option<Vec<String>>,
    tagged: BTreeMap<Vec<String>, Records>,
}
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

/// Parses a meshdns records file whose top-level mapping is `top`.
pub fn parse(
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
            Ok(zone) => {
                for (views, records) in zone.tagged {
                    let part = ZoneContent {
                        origin: zone.content.origin.clone(),
                        soa: None,
                        records,
                    };
                    parsed.tagged.push((views, part));
                }
                match zone.views {
                    Some(views) => parsed.tagged.push((views, zone.content)),
                    None => parsed.zones.push(zone.content),
                }
            }
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
) -> Result<NativeZone, String> {
    let Value::Object(zone) = zone else {
        return Err("expected a mapping with `origin` and `records`".into());
    };
    if let Some(reason) = unknown_keys(zone, ZONE_KEYS) {
        return Err(reason);
    }
    // A zone whose views cannot be read is skipped whole: never served to every client.
    let views = views_of(zone)?;
    let mut tagged: BTreeMap<Vec<String>, Records> = BTreeMap::new();
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
            let own_views = match rec {
                Value::Object(map) => views_of(map),
                _ => Ok(None),
            };
            // An entry's views narrow its zone's (as a DNSRecordSet's narrow its DNSZone's):
            // an entry no view of its zone would see is refused.
            let own_views = own_views.and_then(|v| match (v, &views) {
                (Some(own), Some(zone_views)) => {
                    let both: Vec<String> = own
                        .iter()
                        .filter(|v| zone_views.contains(v))
                        .cloned()
                        .collect();
                    if both.is_empty() {
                        Err(format!(
                            "view: {} is not among its zone's views ({}): no client would see it",
                            own.join(", "),
                            zone_views.join(", ")
                        ))
                    } else {
                        Ok(Some(both))
                    }
                }
                (v, _) => Ok(v),
            });
            match own_views
                .map_err(|e| (String::new(), e))
                .and_then(|v| meshdns_record(rec, &origin, zone_ttl).map(|list| (v, list)))
            {
                Ok((None, list)) => content.records.extend(list),
                Ok((Some(v), list)) => tagged.entry(v).or_default().extend(list),
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
    Ok(NativeZone {
        content,
        views,
        tagged,
    })
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
    let read: Vec<String> = RType::SERVED
        .iter()
        .chain(&RType::PRESENTED)
        .map(ToString::to_string)
        .collect();
    let rtype = RType::from_mnemonic(type_text).ok_or_else(|| {
        fail(format!(
            "unknown or unsupported type {type_text:?}; accepted: {}, or any type as TYPEnnn \
             with its data in the RFC 3597 form (\\# LENGTH HEX)",
            read.join(", ")
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
