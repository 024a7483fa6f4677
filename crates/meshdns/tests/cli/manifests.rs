//! The whole iroh path without a cluster: Connector manifests -> `render iroh` ->
//! DNSRecordSets -> `serve --manifests` -> the TXT answer iroh reads; and `render zone`.

use std::time::Duration;

use crate::*;

const HEX: &str = "f120d52e42bfcee750508baf28900acac85ad3f397ab4bb653b32be505c32d39";
const Z32: &str = "6ropkm1nz98qqwnotqz1tryk3mrfiw9u16iwzp1usci6kbqdfwho";

const ZONE: &str = "apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSZone
metadata: {name: connectors-zone, namespace: dns, creationTimestamp: '2026-01-01T00:00:00Z'}
spec: {domainName: connectors.example.org, dnsZoneClassName: powerdns}
";

fn connectors() -> String {
    format!(
        "apiVersion: networking.datumapis.com/v1alpha1
kind: ConnectorClass
metadata: {{name: datum-connect}}
spec: {{controllerName: networking.datumapis.com/datum-connect}}
---
apiVersion: networking.datumapis.com/v1alpha1
kind: Connector
metadata: {{name: laptop, namespace: default, uid: u1}}
spec: {{connectorClassName: datum-connect}}
status:
  connectionDetails:
    type: PublicKey
    publicKey:
      id: {HEX}
      homeRelay: https://relay.example.com
      addresses: [{{address: 192.0.2.1, port: 8080}}]
"
    )
}

#[test]
fn connector_to_txt_answer_without_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "iroh.yaml",
        "iroh:\n  dnsZoneRef: {namespace: dns, name: connectors-zone}\n  recordSuffix: connectors\n",
    );
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    write(&input, "connectors.yaml", &connectors());
    let out = bin()
        .args([
            "render",
            "iroh",
            "--config",
            &config,
            "-f",
            input.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let served = dir.path().join("served");
    std::fs::create_dir(&served).unwrap();
    write(&served, "zone.yaml", ZONE);
    // The render output (record sets and Connector statuses) is served as it is.
    write(
        &served,
        "rendered.yaml",
        &String::from_utf8(out.stdout).unwrap(),
    );

    let m = Meshdns::serve(&["--manifests", served.to_str().unwrap()]);
    let name = format!("_iroh.{Z32}.connectors.connectors.example.org");
    let answer = dig(m.dns, &[&name, "TXT", "+short"]);
    assert_eq!(
        answer.lines().collect::<Vec<_>>(),
        [
            "\"relay=https://relay.example.com\"",
            "\"addr=192.0.2.1:8080\""
        ],
        "{answer}"
    );
    assert!(dig(m.dns, &["connectors.example.org", "SOA"]).contains("status: NOERROR"));

    // A record set edited in place is served within a second or so.
    write(
        &served,
        "extra.yaml",
        "apiVersion: dns.networking.miloapis.com/v1alpha1\nkind: DNSRecordSet\nmetadata: {name: www, namespace: dns}\nspec:\n  dnsZoneRef: {name: connectors-zone}\n  recordType: A\n  records:\n  - {name: www, a: {content: 198.51.100.1}}\n",
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if dig(m.dns, &["www.connectors.example.org", "A", "+short"]).trim() == "198.51.100.1" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "new record set not served"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn render_zone_prints_zone_file_text_and_problems() {
    let dir = tempfile::tempdir().unwrap();
    let sets = format!(
        "{ZONE}---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {{name: old, namespace: dns, creationTimestamp: '2026-01-01T00:00:00Z'}}
spec:
  dnsZoneRef: {{name: connectors-zone}}
  recordType: A
  records:
  - {{name: www, ttl: 60, a: {{content: 192.0.2.1}}}}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {{name: young, namespace: dns, creationTimestamp: '2026-02-01T00:00:00Z'}}
spec:
  dnsZoneRef: {{name: connectors-zone}}
  recordType: A
  records:
  - {{name: www, a: {{content: 192.0.2.99}}}}
  - {{name: api, a: {{content: 192.0.2.2}}}}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {{name: txt, namespace: dns}}
spec:
  dnsZoneRef: {{name: connectors-zone}}
  recordType: TXT
  records:
  - {{name: '@', txt: {{content: 'v=spf1 -all'}}}}
  - {{name: '@', txt: {{content: '  '}}}}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {{name: tlsa, namespace: dns}}
spec:
  dnsZoneRef: {{name: connectors-zone}}
  recordType: TLSA
  records:
  - {{name: _443._tcp, tlsa: {{usage: 3, selector: 1, matchingType: 1, certData: abcd}}}}
  - {{name: _853._tcp, tlsa: {{usage: 3, selector: 1, matchingType: 1, certData: nothex}}}}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {{name: https, namespace: dns}}
spec:
  dnsZoneRef: {{name: connectors-zone}}
  recordType: HTTPS
  records:
  - {{name: '@', https: {{priority: 1, target: ., params: {{alpn: 'h2,h3', port: '8443'}}}}}}
  - {{name: www, https: {{priority: 0, target: ., params: {{alpn: h2}}}}}}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {{name: alias, namespace: dns}}
spec:
  dnsZoneRef: {{name: connectors-zone}}
  recordType: ALIAS
  records:
  - {{name: '@', alias: {{content: elsewhere.example.net}}}}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {{name: lost, namespace: other}}
spec:
  dnsZoneRef: {{name: connectors-zone}}
  recordType: A
  records:
  - {{name: x, a: {{content: 192.0.2.3}}}}
"
    );
    let f = write(dir.path(), "all.yaml", &sets);
    let out = bin().args(["render", "zone", "-f", &f]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        text,
        "$ORIGIN connectors.example.org.
@\t5\tIN\tSOA\tns.connectors.example.org. hostmaster.connectors.example.org. 1 3600 600 604800 5
@\t5\tIN\tNS\tns.connectors.example.org.
@\t300\tIN\tHTTPS\t1 . alpn=\"h2,h3\" port=8443
@\t300\tIN\tTXT\t\"v=spf1 -all\"
_443._tcp\t300\tIN\tTLSA\t3 1 1 ABCD
api\t300\tIN\tA\t192.0.2.2
www\t60\tIN\tA\t192.0.2.1
"
    );
    for want in [
        "manifests: DNSRecordSet dns/young records[0]: NotOwner: DNSRecordSet old owns A at www.connectors.example.org.",
        "manifests: DNSRecordSet dns/alias records[0] connectors.example.org.: ALIAS target elsewhere.example.net. is not in a zone meshdns serves; it is not followed (an authoritative server does not recurse): serve its zone here, or use a CNAME below the apex",
        "AliasMode (priority 0) takes no parameters",
        "manifests: DNSRecordSet dns/tlsa records[1].tlsa: \"3 1 1 nothex\": TLSA certificate data \"nothex\" is not hexadecimal",
        "manifests: DNSRecordSet other/lost spec.dnsZoneRef.name: no DNSZone \"connectors-zone\" in namespace \"other\"",
    ] {
        assert!(err.contains(want), "{want} missing from:\n{err}");
    }
}

/// Several zones: each `$ORIGIN` section holds its own zone's records (and the sections are in
/// origin order, whatever order the objects came in).
#[test]
fn render_zone_keeps_each_zones_records_under_its_origin() {
    let dir = tempfile::tempdir().unwrap();
    let mut docs = String::new();
    // Text order (ab.example. before b.example.) differs from wire order (a one-byte label
    // before a two-byte one).
    for (zone, domain, ip) in [
        ("zc", "c.example.org", "192.0.2.3"),
        ("za", "ab.example", "192.0.2.1"),
        ("zb", "b.example", "192.0.2.2"),
    ] {
        docs.push_str(&format!(
            "---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSZone
metadata: {{name: {zone}, namespace: dns}}
spec: {{domainName: {domain}, dnsZoneClassName: meshdns}}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {{name: {zone}-www, namespace: dns}}
spec:
  dnsZoneRef: {{name: {zone}}}
  recordType: A
  records:
  - {{name: www, a: {{content: {ip}}}}}
"
        ));
    }
    let f = write(dir.path(), "zones.yaml", &docs);
    let text = stdout_of(&["render", "zone", "-f", &f]);
    let mut want = String::new();
    for (domain, ip) in [
        ("ab.example", "192.0.2.1"),
        ("b.example", "192.0.2.2"),
        ("c.example.org", "192.0.2.3"),
    ] {
        want.push_str(&format!(
            "$ORIGIN {domain}.
@\t5\tIN\tSOA\tns.{domain}. hostmaster.{domain}. 1 3600 600 604800 5
@\t5\tIN\tNS\tns.{domain}.
www\t300\tIN\tA\t{ip}
"
        ));
    }
    assert_eq!(text, want);
}

/// `render status` prints the status dns-operator would write, from the same reading `serve`
/// uses: the older DNSRecordSet owns a name, the younger is NotOwner there; a CNAME beside
/// older data is a Conflict; an invalid entry is named; a second DNSZone on one domain is
/// DNSZoneInUse.
#[test]
fn render_status_prints_dns_operators_conditions() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "m.yaml",
        "
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSZone
metadata: {name: z, namespace: dns, creationTimestamp: '2026-01-01T00:00:00Z'}
spec: {domainName: example.org, dnsZoneClassName: powerdns}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSZone
metadata: {name: again, namespace: dns, creationTimestamp: '2026-01-05T00:00:00Z'}
spec: {domainName: example.org, dnsZoneClassName: powerdns}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {name: first, namespace: dns, creationTimestamp: '2026-01-02T00:00:00Z'}
spec:
  dnsZoneRef: {name: z}
  recordType: A
  records: [{name: www, a: {content: 192.0.2.1}}]
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {name: second, namespace: dns, creationTimestamp: '2026-01-03T00:00:00Z'}
spec:
  dnsZoneRef: {name: z}
  recordType: A
  records: [{name: www, a: {content: 192.0.2.2}}, {name: bad, a: {content: nope}}]
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {name: alias, namespace: dns, creationTimestamp: '2026-01-04T00:00:00Z'}
spec:
  dnsZoneRef: {name: z}
  recordType: CNAME
  records: [{name: www, cname: {content: other.example.net}}]
",
    );
    let out = stdout_of(&["render", "status", "-f", &file]);
    let docs: Vec<serde_json::Value> = out
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_yaml::from_str(d).unwrap())
        .collect();
    let status = |kind: &str, name: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}:\n{out}"))["status"]
            .clone()
    };
    let reason = |s: &serde_json::Value, ty: &str| {
        s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == ty)
            .unwrap()["reason"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let per_name = |s: &serde_json::Value, name: &str| {
        s["recordSets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap()["conditions"][0]["reason"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let first = status("DNSRecordSet", "first");
    assert_eq!(reason(&first, "Programmed"), "Programmed");
    let second = status("DNSRecordSet", "second");
    assert_eq!(reason(&second, "Programmed"), "Pending");
    assert_eq!(per_name(&second, "www"), "NotOwner");
    assert_eq!(per_name(&second, "bad"), "InvalidDNSRecordSet");
    assert_eq!(
        per_name(&status("DNSRecordSet", "alias"), "www"),
        "Conflict"
    );
    let zone = status("DNSZone", "z");
    assert_eq!(zone["recordCount"], 3);
    assert_eq!(zone["nameservers"], serde_json::json!(["ns.example.org."]));
    assert_eq!(
        reason(&status("DNSZone", "again"), "Accepted"),
        "DNSZoneInUse"
    );
    // Whole seconds, as metav1.Time is written.
    let t = first["conditions"][0]["lastTransitionTime"]
        .as_str()
        .unwrap();
    assert!(t.len() == 20 && t.ends_with('Z'), "{t}");
}

/// A DNSRecordSet `name` of `rtype` in the DNSZone `connectors-zone`; `records` are its
/// entries as YAML list items.
fn record_set(name: &str, rtype: &str, records: &str) -> String {
    crate::process::record_set(name, "connectors-zone", rtype, records, None)
}

/// A DNSRecordSet of one A record at `name`, in the DNSZone `connectors-zone`.
fn a_set(name: &str, ip: &str) -> String {
    record_set(
        name,
        "A",
        &format!("  - {{name: {name}, a: {{content: {ip}}}}}\n"),
    )
}

/// A manifests file whose second document is broken on the file's fourth line.
const BROKEN: &str = "# notes\nkind: Note\n---\nkind: [unclosed\n";

/// Polls `dig +short` until it prints `want` (10 s at most).
fn until_short(m: &Meshdns, name: &str, want: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = dig(m.dns, &[name, "A", "+short"]);
        if got.trim() == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name}: never {want:?}, still {got:?}\nlog:\n{}",
            m.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `check DIR` names a broken file and the line within it (not the directory and a line of
/// all its files run together), calls that file unusable, and still checks the rest.
#[test]
fn check_names_a_broken_manifest_file_and_its_own_line() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("manifests");
    std::fs::create_dir(&m).unwrap();
    write(&m, "a-zone.yaml", ZONE);
    write(&m, "b-www.yaml", &a_set("www", "192.0.2.1"));
    write(&m, "c-broken.yaml", BROKEN);
    let out = bin().args(["check", m.to_str().unwrap()]).output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let broken = m.join("c-broken.yaml").display().to_string();
    let line = stdout.lines().next().unwrap_or_default();
    assert!(
        line.starts_with(&format!("{broken}: document 2: not YAML or JSON: ")),
        "{stdout}"
    );
    assert!(line.contains("line 4"), "the file's own line: {line}");
    assert!(stderr.contains(&format!("{broken}: unusable")), "{stderr}");
    // The rest is read: the zone, its SOA, NS and www.
    assert!(
        stderr.contains(&format!(
            "{}: ok: 3 records served (SOA and NS included) in 1 zone(s), 0 skipped",
            m.display()
        )),
        "{stderr}"
    );
}

/// `serve --manifests DIR` with a broken file: the other files' changes are served, the broken
/// file's last good objects still are; a file broken from the start is reported (named, with
/// its line) and counted, holds `/readyz` back while it gave nothing, and the rest serves.
#[test]
fn serve_keeps_a_broken_manifest_files_last_good_objects_and_serves_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("manifests");
    std::fs::create_dir(&d).unwrap();
    write(&d, "a-zone.yaml", ZONE);
    write(&d, "b-www.yaml", &a_set("www", "192.0.2.1"));
    write(&d, "c-api.yaml", &a_set("api", "192.0.2.2"));
    write(&d, "d-new.yaml", BROKEN);
    let m = Meshdns::serve(&["--manifests", d.to_str().unwrap(), "--http", "127.0.0.1:0"]);
    let new = d.join("d-new.yaml").display().to_string();

    // Broken from the start: the rest serves, the file is named and counted, not ready.
    until_short(&m, "www.connectors.example.org", "192.0.2.1");
    until_short(&m, "api.connectors.example.org", "192.0.2.2");
    let (status, body) = m.get("/readyz");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains(&format!("{new}: document 2: ")), "{body}");
    m.wait_log(&format!("file={new}"));
    let label = d.display().to_string();
    let errors = |m: &Meshdns| {
        metric(
            &m.get("/metrics").1,
            &format!("meshdns_source_reloads_total{{source=\"{label}\",result=\"error\"}}"),
        )
    };
    assert_eq!(errors(&m), 1);

    // A file that breaks after it was good keeps its objects while another file changes.
    write(&d, "c-api.yaml", BROKEN);
    write(&d, "b-www.yaml", &a_set("www", "192.0.2.111"));
    until_short(&m, "www.connectors.example.org", "192.0.2.111");
    until_short(&m, "api.connectors.example.org", "192.0.2.2");
    assert_eq!(errors(&m), 2);

    // Fixing the file broken from the start makes the server ready and serves its objects.
    write(&d, "d-new.yaml", &a_set("new", "192.0.2.3"));
    until_short(&m, "new.connectors.example.org", "192.0.2.3");
    let (status, body) = m.get("/readyz");
    assert_eq!(status, 200, "{body}");
}

/// An entry given twice is served once (`serve` drops the duplicate record), and `render zone`
/// prints it once, as served: both print what the same compiled zone holds.
#[test]
fn render_zone_prints_a_repeated_entry_once_as_serve_serves_it() {
    let dir = tempfile::tempdir().unwrap();
    let sets = format!(
        "{ZONE}---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {{name: www, namespace: dns}}
spec:
  dnsZoneRef: {{name: connectors-zone}}
  recordType: A
  records:
  - {{name: www, a: {{content: 192.0.2.1}}}}
  - {{name: www, a: {{content: 192.0.2.2}}}}
  - {{name: www, a: {{content: 192.0.2.1}}}}
"
    );
    let f = write(dir.path(), "all.yaml", &sets);
    let text = stdout_of(&["render", "zone", "-f", &f]);
    let www: Vec<&str> = text.lines().filter(|l| l.starts_with("www\t")).collect();
    assert_eq!(
        www,
        ["www\t300\tIN\tA\t192.0.2.1", "www\t300\tIN\tA\t192.0.2.2"],
        "{text}"
    );
    let m = Meshdns::serve(&["--manifests", &f]);
    let mut served: Vec<String> = dig(m.dns, &["www.connectors.example.org", "A", "+short"])
        .lines()
        .map(str::to_string)
        .collect();
    served.sort();
    assert_eq!(served, ["192.0.2.1", "192.0.2.2"]);
}

/// A DNSRecordSet of ALIAS entries `(name, target)`, in the DNSZone `connectors-zone`.
fn alias_set(name: &str, entries: &[(&str, &str)]) -> String {
    let records: String = entries
        .iter()
        .map(|(n, t)| format!("  - {{name: '{n}', ttl: 120, alias: {{content: {t}}}}}\n"))
        .collect();
    record_set(name, "ALIAS", &records)
}

/// ALIAS at the apex answers its target's A and AAAA (flattened, with the ALIAS's TTL),
/// follows the target's changes, goes through CNAMEs, goes by AXFR as A records, and a target
/// outside the zones served is reported and not followed; records of the name's own win.
#[test]
fn an_alias_answers_its_targets_addresses_and_follows_their_changes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("manifests");
    std::fs::create_dir(&d).unwrap();
    write(&d, "a-zone.yaml", ZONE);
    write(&d, "b-www.yaml", &a_set("www", "192.0.2.1"));
    let cname = record_set(
        "via",
        "CNAME",
        "  - {name: via, cname: {content: www.connectors.example.org}}\n",
    );
    write(&d, "c-via.yaml", &cname);
    write(
        &d,
        "d-alias.yaml",
        &alias_set(
            "apex",
            &[
                ("@", "www.connectors.example.org"),
                ("through", "via.connectors.example.org."),
                ("away", "www.example.net"),
                ("www", "via.connectors.example.org"),
            ],
        ),
    );
    let m = Meshdns::serve(&[
        "--manifests",
        d.to_str().unwrap(),
        "--allow-transfer",
        "127.0.0.0/8",
    ]);
    until_short(&m, "connectors.example.org", "192.0.2.1");
    let answer = dig(m.dns, &["connectors.example.org", "A", "+noall", "+answer"]);
    let answer: Vec<_> = answer.split_whitespace().collect();
    assert_eq!(
        answer,
        ["connectors.example.org.", "120", "IN", "A", "192.0.2.1"]
    );
    assert_eq!(
        dig(m.dns, &["through.connectors.example.org", "A", "+short"]).trim(),
        "192.0.2.1"
    );
    assert_eq!(
        dig(m.dns, &["away.connectors.example.org", "A", "+short"]).trim(),
        ""
    );
    let axfr = dig(m.dns, &["connectors.example.org", "AXFR"]);
    assert!(
        axfr.contains("connectors.example.org.\t120\tIN\tA\t192.0.2.1"),
        "{axfr}"
    );
    // The target changes: the alias follows.
    write(&d, "b-www.yaml", &a_set("www", "192.0.2.77"));
    until_short(&m, "connectors.example.org", "192.0.2.77");
    assert_eq!(
        dig(m.dns, &["through.connectors.example.org", "A", "+short"]).trim(),
        "192.0.2.77"
    );
    // What `check` says: the target outside, and the name with A records of its own.
    let out = bin().args(["check", d.to_str().unwrap()]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let label = d.display();
    assert!(
        stdout.contains(&format!(
            "{label}: DNSRecordSet dns/apex records[2] away.connectors.example.org.: ALIAS target www.example.net. is not in a zone meshdns serves"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "{label}: DNSRecordSet dns/apex records[3] www.connectors.example.org.: www.connectors.example.org. has A records of its own, which take precedence over the ALIAS"
        )),
        "{stdout}"
    );
    assert_eq!(
        dig(m.dns, &["www.connectors.example.org", "A", "+short"]).trim(),
        "192.0.2.77"
    );
}
