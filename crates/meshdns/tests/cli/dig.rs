//! `dig` against the real binary: flags, sections, TTLs.

use std::time::Duration;

use crate::*;

const ZONE: &str = r#"$ORIGIN example.org.
$TTL 300
@ 3600 IN SOA ns1 hostmaster ( 7 3600 600 86400 60 )
@ NS ns1
ns1 A 192.0.2.53
www A 192.0.2.1
www A 192.0.2.2
_iroh.k1.nodes TXT "relay=https://relay.example./" 
"#;

fn big_txt_zone() -> String {
    let mut z = String::from(ZONE);
    for i in 0..30 {
        z.push_str(&format!("big TXT \"big-{i:02}-{}\"\n", "x".repeat(52)));
    }
    z
}

/// The sections dig prints, without comments.
fn section(out: &str, name: &str) -> Vec<String> {
    let mut lines = out
        .lines()
        .skip_while(|l| !l.starts_with(&format!(";; {name} SECTION:")))
        .skip(1);
    let mut found = Vec::new();
    for l in lines.by_ref() {
        if l.trim().is_empty() {
            break;
        }
        found.push(l.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    found
}

#[test]
fn dig_sees_authoritative_answers_negative_answers_and_ttls() {
    let dir = tempfile::tempdir().unwrap();
    let zone = write(dir.path(), "example.org.zone", &big_txt_zone());
    let m = Meshdns::serve(&["--zone-file", &zone]);

    let out = dig(m.dns, &["www.example.org", "A"]);
    assert!(out.contains("status: NOERROR"), "{out}");
    assert!(out.contains("flags: qr aa;"), "AA, no RA: {out}");
    assert!(
        out.contains("; EDNS: version: 0, flags:; udp: 1232"),
        "{out}"
    );
    assert_eq!(
        section(&out, "ANSWER"),
        [
            "www.example.org. 300 IN A 192.0.2.1",
            "www.example.org. 300 IN A 192.0.2.2"
        ]
    );

    let out = dig(m.dns, &["nope.example.org", "A"]);
    assert!(
        out.contains("status: NXDOMAIN") && out.contains("flags: qr aa;"),
        "{out}"
    );
    assert_eq!(
        section(&out, "AUTHORITY"),
        ["example.org. 60 IN SOA ns1.example.org. hostmaster.example.org. 7 3600 600 86400 60"]
    );

    let out = dig(m.dns, &["www.example.org", "TXT"]);
    assert!(
        out.contains("status: NOERROR")
            && out.contains("ANSWER: 0,")
            && out.contains("AUTHORITY: 1,"),
        "{out}"
    );

    let out = dig(m.dns, &["k1.nodes.example.org", "TXT"]);
    assert!(
        out.contains("status: NOERROR") && out.contains("ANSWER: 0,"),
        "empty non-terminal: {out}"
    );

    let out = dig(m.dns, &["_iroh.k1.nodes.example.org", "TXT"]);
    assert_eq!(
        section(&out, "ANSWER"),
        ["_iroh.k1.nodes.example.org. 300 IN TXT \"relay=https://relay.example./\""]
    );

    let out = dig(m.dns, &["example.com", "A"]);
    assert!(
        out.contains("status: REFUSED") && out.contains("flags: qr;"),
        "{out}"
    );

    let out = dig(m.dns, &["WWW.EXAMPLE.ORG", "A"]);
    assert_eq!(
        section(&out, "ANSWER")[0],
        "WWW.EXAMPLE.ORG. 300 IN A 192.0.2.1"
    );

    let out = dig(m.dns, &["+noedns", "+ignore", "big.example.org", "TXT"]);
    assert!(
        out.contains("flags: qr aa tc;") && out.contains("ANSWER: 0,"),
        "{out}"
    );
    assert!(
        !out.contains("OPT PSEUDOSECTION"),
        "no OPT without EDNS: {out}"
    );

    let out = dig(m.dns, &["+tcp", "big.example.org", "TXT"]);
    assert!(out.contains("ANSWER: 30,") && !out.contains(" tc"), "{out}");

    let out = dig(m.dns, &["+edns=1", "+noednsneg", "www.example.org", "A"]);
    assert!(out.contains("status: BADVERS"), "{out}");

    let out = dig(m.dns, &["example.org", "AXFR"]);
    assert!(
        out.contains("Transfer failed") || out.contains("REFUSED"),
        "{out}"
    );
}

#[test]
fn sigterm_drains_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let zone = write(dir.path(), "example.org.zone", ZONE);
    let m = Meshdns::serve(&["--zone-file", &zone]);
    assert!(dig(m.dns, &["www.example.org"]).contains("status: NOERROR"));
    let log = m.log.clone();
    let status = m.terminate();
    assert!(status.success(), "exit status {status:?}");
    let log = log.lock().unwrap().join("\n");
    assert!(log.contains("SIGTERM") && log.contains("stopped"), "{log}");
}

#[test]
fn http_serves_health_readiness_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let zone = write(dir.path(), "example.org.zone", ZONE);
    let ts = write(
        dir.path(),
        "records.json",
        r#"{"version":"v1alpha1","ip4":{"a.ts.net":["100.64.0.1"],"bad":["x"]}}"#,
    );
    let m = Meshdns::serve(&[
        "--zone-file",
        &zone,
        "--records",
        &ts,
        "--http",
        "127.0.0.1:0",
    ]);
    assert_eq!(m.get("/healthz"), (200, "ok\n".into()));
    assert_eq!(m.get("/readyz").0, 200);
    dig(m.dns, &["www.example.org"]);
    dig(m.dns, &["nope.example.org"]);
    dig(m.dns, &["+tcp", "a.ts.net", "AAAA"]);
    let (status, body) = m.get("/metrics");
    assert_eq!(status, 200);
    for want in [
        r#"meshdns_dns_queries_total{transport="udp",qtype="A",rcode="NOERROR"} 1"#,
        r#"meshdns_dns_queries_total{transport="udp",qtype="A",rcode="NXDOMAIN"} 1"#,
        r#"meshdns_dns_queries_total{transport="tcp",qtype="AAAA",rcode="NOERROR"} 1"#,
        "meshdns_dns_answer_seconds_count 3",
        "meshdns_dns_truncated_total 0",
        r#"meshdns_zone_records{zone="example.org."} 6"#,
        r#"meshdns_zone_records{zone="ts.net."} 3"#,
        "meshdns_source_reloads_total{source=",
        "meshdns_source_last_success_timestamp_seconds{source=",
    ] {
        assert!(body.contains(want), "missing {want:?} in\n{body}");
    }
    assert!(
        body.contains(&format!(
            "meshdns_source_skipped_entries_total{{source=\"{ts}\"}} 1"
        )),
        "{body}"
    );
}

#[test]
fn readyz_is_503_until_the_first_file_is_usable() {
    let dir = tempfile::tempdir().unwrap();
    let ts = write(dir.path(), "records.json", "{ not json");
    let m = Meshdns::serve(&["--records", &ts, "--http", "127.0.0.1:0"]);
    let (status, body) = m.get("/readyz");
    assert_eq!(status, 503);
    assert!(
        body.contains("records.json: file: not valid JSON"),
        "{body}"
    );
    write(
        dir.path(),
        "records.json",
        r#"{"version":"v1alpha1","ip4":{"a.ts.net":["100.64.0.1"]}}"#,
    );
    let mut ready = false;
    for _ in 0..200 {
        if m.get("/readyz").0 == 200 {
            ready = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(
        ready,
        "ready once the file is fixed; log:\n{}",
        m.log_text()
    );
    assert!(dig(m.dns, &["a.ts.net"]).contains("100.64.0.1"));
    assert!(m.log_text().contains("records file unusable"));
}

#[test]
fn the_quickstart_config_serves_all_three_formats() {
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/quickstart.yaml"
    );
    let m = Meshdns::serve(&["--config", config, "--http", "127.0.0.1:0"]);
    assert_eq!(
        section(&dig(m.dns, &["www.example.org", "A"]), "ANSWER").len(),
        2
    );
    assert!(dig(m.dns, &["web.tailnet-1234.ts.net", "AAAA"]).contains("fd7a:115c:a1e0::a"));
    assert!(dig(m.dns, &["host.example.net", "A"]).contains("198.51.100.7"));
    assert_eq!(m.get("/readyz").0, 200);
}

#[test]
fn a_bad_config_file_is_refused_with_the_key_named() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "meshdns.yaml",
        "serve:\n  listne: ['127.0.0.1:0']\n",
    );
    let out = bin().args(["serve", "--config", &cfg]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown field `listne`") && err.contains("meshdns.yaml"),
        "{err}"
    );
}

#[test]
fn default_ttl_flag_applies_to_records_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let ts = write(
        dir.path(),
        "records.json",
        r#"{"version":"v1alpha1","ip4":{"a.ts.net":["100.64.0.1"]}}"#,
    );
    let m = Meshdns::serve(&["--records", &ts, "--default-ttl", "42"]);
    assert_eq!(
        section(&dig(m.dns, &["a.ts.net", "A"]), "ANSWER"),
        ["a.ts.net. 42 IN A 100.64.0.1"]
    );
    let out = dig(m.dns, &["b.ts.net", "A"]);
    assert!(out.contains("status: NXDOMAIN"), "{out}");
    assert_eq!(
        section(&out, "AUTHORITY")[0].split(' ').nth(1),
        Some("42"),
        "negative TTL = SOA minimum = default TTL"
    );
}
