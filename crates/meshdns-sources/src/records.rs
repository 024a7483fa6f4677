//! Records files: detecting the format of a file and handing it to its parser.
//!
//! - **Tailscale** `records.json`, recognised by its `version` key ([`crate::tailscale`]);
//! - **meshdns** YAML or JSON, recognised by its `zones` key ([`crate::native`]);
//! - **zone files** (RFC 1035), by extension (`.zone`, `.db`) or a first `$` directive or `;`
//!   comment ([`crate::zonefile`]);
//! - **Kubernetes manifests** (DNSZones and DNSRecordSets), by `apiVersion` and `kind`
//!   ([`crate::manifests`]).
//!
//! Parsing is pure: bytes in, [`Parsed`] or an unusable-file [`Problem`] out. A bad entry is a
//! [`Problem`] in [`Parsed::problems`] and is skipped; the rest of the file still loads.

use serde_json::Value;

use crate::content::{FileKind, ParseSettings, Parsed, Problem};
use crate::{limits, manifests, native, tailscale, zonefile};

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
        FileKind::ZoneFile { origin, views } => {
            let mut parsed = zonefile::parse(file, text, origin.as_ref(), settings.default_ttl)?;
            if !views.is_empty() {
                parsed.tagged = std::mem::take(&mut parsed.zones)
                    .into_iter()
                    .map(|z| (views.clone(), z))
                    .collect();
            }
            Ok(parsed)
        }
        FileKind::Manifests => {
            let objects = manifests::objects(file, text)?;
            Ok(manifests::zones(file, &objects, &settings.cluster))
        }
        FileKind::Auto if manifests::looks_like_manifests(text) => {
            let objects = manifests::objects(file, text)?;
            Ok(manifests::zones(file, &objects, &settings.cluster))
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
        limits::check_json(file, text)?;
        serde_json::from_str(text)
            .map_err(|e| Problem::new(file, "file", format!("not valid JSON: {e}")))?
    } else {
        limits::check_yaml(file, text)?;
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
        tailscale::parse(file, &top, settings)
    } else if top.contains_key("zones") {
        native::parse(file, &top, settings)
    } else {
        Err(Problem::new(
            file,
            "file",
            "expected a `version` key (Tailscale records.json) or a `zones` key (meshdns records)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshdns_zone::RData;

    fn settings() -> ParseSettings {
        ParseSettings::default()
    }

    #[test]
    fn an_ipv4_mapped_address_is_an_a_record_in_ip4_and_refused_in_ip6() {
        let json = br#"{"version":"v1alpha1",
            "ip4":{"m.ts.net":["::ffff:192.0.2.13"],"v6.ts.net":["2001:db8::1"]},
            "ip6":{"m6.ts.net":["::ffff:192.0.2.14"]}}"#;
        let p = parse("records.json", &FileKind::Auto, json, &settings()).unwrap();
        let recs = p.zones[0].records.to_vec();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].data, RData::A("192.0.2.13".parse().unwrap()));
        let shown: Vec<String> = p.problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                r#"records.json: ip4.v6.ts.net[0]: "2001:db8::1" is not an IPv4 address"#,
                r#"records.json: ip6.m6.ts.net[0]: "::ffff:192.0.2.14" is an IPv4-mapped address where IPv6 is expected"#,
            ]
        );
    }

    #[test]
    fn an_entrys_views_narrow_its_zones() {
        let yaml = b"zones:
  - origin: example.org
    view: [inside, lab]
    records:
      - {name: a, type: A, value: 192.0.2.1}
      - {name: b, type: A, value: 192.0.2.2, view: [lab, outside]}
      - {name: c, type: A, value: 192.0.2.3, view: outside}
";
        let p = parse("r.yaml", &FileKind::Auto, yaml, &settings()).unwrap();
        let tagged: Vec<(Vec<String>, Vec<String>)> = p
            .tagged
            .iter()
            .map(|(views, z)| {
                let names = z
                    .records
                    .to_vec()
                    .iter()
                    .map(|r| r.name.to_string())
                    .collect();
                (views.clone(), names)
            })
            .collect();
        let v = |list: &[&str]| list.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(
            tagged,
            [
                (v(&["lab"]), v(&["b.example.org."])),
                (v(&["inside", "lab"]), v(&["a.example.org."])),
            ]
        );
        assert!(p.zones.is_empty());
        let shown: Vec<String> = p.problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "r.yaml: zones[0].records[2]: view: outside is not among its zone's views (inside, lab): no client would see it"
            ]
        );
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
