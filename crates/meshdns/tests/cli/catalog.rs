//! `serve --catalog-zone ORIGIN` (RFC 9432): a catalog listing every zone served, followed by
//! a real Knot (3.2, Debian's) configured with the catalog alone: zones added and removed
//! through a manifests directory appear on it and disappear from it.

use std::time::{Duration, Instant};

use crate::secondaries::{Secondary, free_port};
use crate::*;

fn dns_zone(name: &str, domain: &str, ip: &str) -> String {
    format!(
        "apiVersion: dns.networking.miloapis.com/v1alpha1\nkind: DNSZone\nmetadata: {{name: {name}, namespace: dns, creationTimestamp: '2026-01-01T00:00:00Z'}}\nspec: {{domainName: {domain}, dnsZoneClassName: powerdns}}\n---\napiVersion: dns.networking.miloapis.com/v1alpha1\nkind: DNSRecordSet\nmetadata: {{name: {name}-www, namespace: dns}}\nspec:\n  dnsZoneRef: {{name: {name}}}\n  recordType: A\n  records:\n  - {{name: www, a: {{content: {ip}}}}}\n"
    )
}

#[test]
fn a_knot_secondary_follows_zones_through_the_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "records.yaml",
        "zones:\n  - origin: example.org\n    records:\n      - {name: www, type: A, value: 192.0.2.1}\n",
    );
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    let one = write(
        &manifests,
        "one.yaml",
        &dns_zone("one", "one.example", "198.51.100.1"),
    );
    let knot_port = free_port();
    let data = dir.path().join("data");
    let m = Meshdns::serve(&[
        "--records",
        &file,
        "--manifests",
        manifests.to_str().unwrap(),
        "--catalog-zone",
        "catalog.example",
        "--data-dir",
        data.to_str().unwrap(),
        "--allow-transfer",
        "127.0.0.0/8",
        "--notify",
        &format!("127.0.0.1:{knot_port}"),
    ]);
    // The catalog: version 2, one PTR per zone served, the catalog itself not among them.
    assert_eq!(
        dig(m.dns, &["version.catalog.example", "TXT", "+short"]).trim(),
        "\"2\""
    );
    let axfr = dig(m.dns, &["catalog.example", "AXFR", "+noall", "+answer"]);
    let records: Vec<Vec<&str>> = axfr
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let mut members: Vec<&str> = records
        .iter()
        .filter(|r| r.get(3) == Some(&"PTR"))
        .map(|r| r[4])
        .collect();
    members.sort();
    assert_eq!(members, ["example.org.", "one.example."], "{axfr}");
    assert!(
        records.contains(&vec!["catalog.example.", "5", "IN", "NS", "invalid."]),
        "{axfr}"
    );

    let knot_dir = dir.path().join("knot");
    std::fs::create_dir(&knot_dir).unwrap();
    let knot = Secondary::knot_catalog(&knot_dir, knot_port, m.dns, "catalog.example", "127.0.0.3");
    knot.wait_answer(&["www.one.example", "A"], "198.51.100.1", 30);
    knot.wait_answer(&["www.example.org", "A"], "192.0.2.1", 30);

    let serial = |m: &Meshdns| -> u32 {
        let soa = dig(m.dns, &["catalog.example", "SOA", "+short"]);
        soa.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    let before = serial(&m);
    // A new DNSZone: a new member, on Knot within seconds.
    write(
        &manifests,
        "two.yaml",
        &dns_zone("two", "two.example", "198.51.100.2"),
    );
    let took = knot.wait_answer(&["www.two.example", "A"], "198.51.100.2", 30);
    eprintln!("knot: a new zone answered after {took:?}");
    // The catalog's serial was raised with its members.
    assert!(serial(&m) > before, "{before}");
    // A DNSZone removed: gone from the catalog, and from Knot.
    std::fs::remove_file(&one).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = dig(knot.addr, &["one.example", "SOA"]);
        if out.contains("status: REFUSED") || out.contains("status: NOTAUTH") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "one.example still on knot: {out}\n{}",
            knot.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The others stay.
    assert_eq!(
        dig(knot.addr, &["www.two.example", "A", "+short"]).trim(),
        "198.51.100.2"
    );
}

/// Every kind of zone served is a member, under a label that does not move across restarts:
/// a records file's, a zone file's, an update zone, a pkarr origin and a reverse zone; not the
/// catalog itself, nor a zone below it.
#[test]
fn every_kind_of_zone_is_a_member_under_a_label_kept_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let records = write(
        dir.path(),
        "records.yaml",
        "zones:\n  - origin: example.org\n    records:\n      - {name: www, type: A, value: 100.64.0.7}\n  - origin: sub.catalog.example\n    records:\n      - {name: www, type: A, value: 192.0.2.2}\n",
    );
    let zone_file = write(
        dir.path(),
        "file.zone",
        &SMALL_ZONE.replace("$ORIGIN example.org.", "$ORIGIN zonefile.example."),
    );
    let keys = write(
        dir.path(),
        "tsig.conf",
        "key \"upd.\" { algorithm hmac-sha256; secret \"c2VjcmV0LWtleS1mb3ItbWVzaGRucy11cGRhdGVzISE=\"; };\n",
    );
    let data = dir.path().join("data");
    let args = [
        "--allow-update",
        "upd.",
        "--tsig-keys",
        &keys,
        "--records",
        &records,
        "--zone-file",
        &format!("zonefile.example={zone_file}"),
        "--update-zone",
        "dyn.example",
        "--pkarr",
        "relay.example",
        "--reverse-zone",
        "100.64.0.0/16",
        "--catalog-zone",
        "catalog.example",
        "--data-dir",
        data.to_str().unwrap(),
        "--allow-transfer",
        "127.0.0.0/8",
        "--http",
        "127.0.0.1:0",
    ];
    let members = |m: &Meshdns| -> Vec<String> {
        let axfr = dig(m.dns, &["catalog.example", "AXFR", "+noall", "+answer"]);
        let mut out: Vec<String> = axfr
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|r| r.get(3) == Some(&"PTR"))
            .map(|r| format!("{} {}", r[0], r[4]))
            .collect();
        out.sort();
        out
    };
    let m = Meshdns::serve(&args);
    let first = members(&m);
    let mut zones: Vec<&str> = first.iter().map(|l| l.split_once(' ').unwrap().1).collect();
    zones.sort();
    assert_eq!(
        zones,
        [
            "64.100.in-addr.arpa.",
            "dyn.example.",
            "example.org.",
            "relay.example.",
            "zonefile.example."
        ],
        "{first:?}"
    );
    assert!(
        first
            .iter()
            .any(|l| l == "640cf2756b8440ae.zones.catalog.example. example.org."),
        "{first:?}"
    );
    // Restarted on the same data: the same members under the same labels.
    drop(m);
    let m = Meshdns::serve(&args);
    assert_eq!(members(&m), first);
    m.wait_log("a zone below the catalog catalog.example. is not listed in it");
}
