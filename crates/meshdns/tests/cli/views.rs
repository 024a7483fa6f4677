//! Views (split horizon, issue 31): one name answered differently by client address, over UDP,
//! TCP and DoH behind a trusted proxy; data tagged in a records file (zone and entry), a zone
//! file (`@VIEW`) and DNSRecordSets (`meshdns.io/views`); zones of other views REFUSED; the
//! views kept across a reload; queries counted per view.

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};

use crate::*;

const ZONE: &str = "$ORIGIN example.org.\n$TTL 60\n@ SOA ns1 hostmaster 1 3600 600 86400 30\n@ NS ns1\nns1 A 192.0.2.53\nwww A 192.0.2.1\n";

/// `zones:` of a records file: `www` for the inside view, a name only it has, a zone only it
/// has, and a name every view has.
fn records(inside_www: &str) -> String {
    format!(
        "zones:
  - origin: example.org
    records:
      - {{name: www, type: A, value: {inside_www}, view: inside}}
      - {{name: secret, type: TXT, value: inside only, view: [inside]}}
      - {{name: shared, type: TXT, value: everyone}}
  - origin: corp.internal
    view: inside
    records:
      - {{name: db, type: A, value: 100.64.0.9}}
  - origin: example.com
    records:
      - {{name: www, type: A, value: 192.0.2.20}}
      - {{name: www, type: A, value: {inside_www}, view: inside}}
"
    )
}

/// `dig -b FROM NAME TYPE +short` (UDP, or TCP with `+tcp` in `extra`).
fn from(m: &Meshdns, client: &str, name: &str, rtype: &str, extra: &[&str]) -> String {
    let mut args = vec!["-b", client, name, rtype];
    args.extend_from_slice(extra);
    dig(m.dns, &args)
}

fn short(m: &Meshdns, client: &str, name: &str, rtype: &str) -> String {
    from(m, client, name, rtype, &["+short"]).trim().to_string()
}

fn status(out: &str) -> &str {
    out.split("status: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap_or("(no reply)")
}

#[test]
fn one_name_answers_by_the_clients_view_over_udp_tcp_and_doh() {
    let dir = tempfile::tempdir().unwrap();
    let zone = write(dir.path(), "example.org.zone", ZONE);
    let outside_zone = write(
        dir.path(),
        "outside.zone",
        "$ORIGIN example.net.\n$TTL 60\nwww A 198.51.100.7\n",
    );
    let yaml = write(dir.path(), "views.yaml", &records("100.64.0.1"));
    let outside_spec = format!("example.net={outside_zone}@outside");
    let m = Meshdns::serve(&[
        "--records",
        &yaml,
        "--zone-file",
        &zone,
        "--zone-file",
        &outside_spec,
        "--view",
        "inside=127.0.0.2/32,10.0.0.0/8",
        "--view",
        "outside=127.0.0.3/32,127.0.0.4/32",
        "--http",
        "127.0.0.1:0",
        "--trusted-proxy",
        "127.0.0.1/32",
    ]);
    // The view's own record wins the name over the one every view sees; a client in no view
    // (127.0.0.5) sees what every view sees.
    assert_eq!(short(&m, "127.0.0.2", "www.example.org", "A"), "100.64.0.1");
    assert_eq!(short(&m, "127.0.0.3", "www.example.org", "A"), "192.0.2.1");
    assert_eq!(short(&m, "127.0.0.5", "www.example.org", "A"), "192.0.2.1");
    assert_eq!(
        from(&m, "127.0.0.2", "www.example.org", "A", &["+tcp", "+short"]).trim(),
        "100.64.0.1"
    );
    assert_eq!(
        from(&m, "127.0.0.3", "www.example.org", "A", &["+tcp", "+short"]).trim(),
        "192.0.2.1"
    );
    // Data in one view, NXDOMAIN in the others; what every view has, everywhere.
    assert_eq!(
        short(&m, "127.0.0.2", "secret.example.org", "TXT"),
        "\"inside only\""
    );
    for client in ["127.0.0.3", "127.0.0.5"] {
        let out = from(&m, client, "secret.example.org", "TXT", &[]);
        assert_eq!(status(&out), "NXDOMAIN", "{client}: {out}");
    }
    for client in ["127.0.0.2", "127.0.0.3", "127.0.0.5"] {
        assert_eq!(
            short(&m, client, "shared.example.org", "TXT"),
            "\"everyone\""
        );
    }
    // A zone of one view: answered there, REFUSED elsewhere, as a zone not served.
    assert_eq!(
        short(&m, "127.0.0.2", "db.corp.internal", "A"),
        "100.64.0.9"
    );
    let out = from(&m, "127.0.0.3", "db.corp.internal", "A", &[]);
    assert_eq!(status(&out), "REFUSED", "{out}");
    // A zone file given for a view (`@outside`): the second range of the view too.
    assert_eq!(
        short(&m, "127.0.0.4", "www.example.net", "A"),
        "198.51.100.7"
    );
    let out = from(&m, "127.0.0.2", "www.example.net", "A", &[]);
    assert_eq!(status(&out), "REFUSED", "{out}");

    // DoH behind a trusted proxy: the forwarded address picks the view.
    let doh = |client: &str| {
        let mut q = Message::new(0, MessageType::Query, OpCode::Query);
        q.add_query(Query::query(
            Name::from_ascii("www.example.org.").unwrap(),
            RecordType::A,
        ));
        let (status, _, body) = http_with(
            m.http.unwrap(),
            "POST",
            "/dns-query",
            &[
                ("Content-Type", "application/dns-message"),
                ("X-Forwarded-For", client),
            ],
            &q.to_vec().unwrap(),
        );
        assert_eq!(status, 200);
        let r = Message::from_vec(&body).unwrap();
        assert_eq!(r.metadata.response_code, ResponseCode::NoError);
        r.answers[0].data.to_string()
    };
    assert_eq!(doh("10.1.2.3"), "100.64.0.1");
    assert_eq!(doh("203.0.113.9"), "192.0.2.1");

    // Counted per view: inside 127.0.0.2 six times and 10.1.2.3 once (DoH); outside
    // 127.0.0.3 five times and 127.0.0.4 once; in no view 127.0.0.5 three times and
    // 203.0.113.9 once (DoH).
    let page = m.get("/metrics").1;
    assert_eq!(
        metric(&page, "meshdns_view_queries_total{view=\"inside\"}"),
        7
    );
    assert_eq!(
        metric(&page, "meshdns_view_queries_total{view=\"outside\"}"),
        6
    );
    assert_eq!(metric(&page, "meshdns_view_queries_total{view=\"\"}"), 4);

    // A view's own records winning over untagged ones is what they are for: not reported.
    assert!(
        !m.log_text().contains("already provided"),
        "{}",
        m.log_text()
    );

    // A reload keeps the views: the inside record changes, the others do not. A zone's
    // serial follows each view's content: example.com changed inside only.
    let serial = |client: &str| {
        let soa = short(&m, client, "example.com", "SOA");
        soa.split_whitespace()
            .nth(2)
            .unwrap_or_default()
            .parse::<u32>()
            .unwrap()
    };
    let (inside_before, outside_before) = (serial("127.0.0.2"), serial("127.0.0.3"));
    write(dir.path(), "views.yaml", &records("100.64.0.2"));
    until_from(&m, "127.0.0.2", "www.example.org", "100.64.0.2");
    assert_eq!(short(&m, "127.0.0.3", "www.example.org", "A"), "192.0.2.1");
    assert_eq!(
        short(&m, "127.0.0.2", "db.corp.internal", "A"),
        "100.64.0.9"
    );
    assert_eq!(short(&m, "127.0.0.2", "www.example.com", "A"), "100.64.0.2");
    assert!(serial("127.0.0.2") > inside_before);
    assert_eq!(serial("127.0.0.3"), outside_before);
}

/// Polls `dig -b client name A +short` until it prints `want` (10 s at most).
fn until_from(m: &Meshdns, client: &str, name: &str, want: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let got = short(m, client, name, "A");
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name} from {client}: never {want:?}, still {got:?}\n{}",
            m.log_text()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn dns_record_sets_annotated_with_views_and_views_not_configured_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("manifests");
    std::fs::create_dir(&d).unwrap();
    let zone = "apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSZone
metadata: {name: z, namespace: dns, creationTimestamp: '2026-01-01T00:00:00Z'}
spec: {domainName: mesh.example.org, dnsZoneClassName: powerdns}
";
    let set = |name: &str, views: Option<&str>, ip: &str| {
        let records = format!("  - {{name: app, a: {{content: {ip}}}}}\n");
        crate::process::record_set(name, "z", "A", &records, views)
    };
    write(&d, "a-zone.yaml", zone);
    write(&d, "b-public.yaml", &set("public", None, "192.0.2.10"));
    write(
        &d,
        "c-mesh.yaml",
        &set("mesh", Some("inside"), "100.64.0.10"),
    );
    write(
        &d,
        "d-typo.yaml",
        &set("typo", Some("insde"), "100.64.0.11"),
    );
    // An ALIAS of the inside view: flattened there alone.
    let alias = set("alias", Some("inside"), "0.0.0.0")
        .replace("recordType: A", "recordType: ALIAS")
        .replace(
            "{name: app, a: {content: 0.0.0.0}}",
            "{name: front, alias: {content: app.mesh.example.org}}",
        );
    write(&d, "f-alias.yaml", &alias);
    let m = Meshdns::serve(&[
        "--manifests",
        d.to_str().unwrap(),
        "--view",
        "inside=127.0.0.2/32",
    ]);
    // Two DNSRecordSets own `app` A, one per view: both are served, each in its view.
    assert_eq!(
        short(&m, "127.0.0.2", "app.mesh.example.org", "A"),
        "100.64.0.10"
    );
    assert_eq!(
        short(&m, "127.0.0.3", "app.mesh.example.org", "A"),
        "192.0.2.10"
    );
    assert_eq!(
        short(&m, "127.0.0.2", "front.mesh.example.org", "A"),
        "100.64.0.10"
    );
    let out = from(&m, "127.0.0.3", "front.mesh.example.org", "A", &[]);
    assert_eq!(status(&out), "NXDOMAIN", "{out}");
    // A view not configured: reported, and its data reaches no client.
    m.wait_log("is not configured (--view gives inside)");
    let out = bin()
        .args([
            "check",
            d.to_str().unwrap(),
            "--view",
            "inside=127.0.0.2/32",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "{}: zone mesh.example.org.: view \"insde\" is not configured (--view gives inside); no client sees what is given for it",
            d.display()
        )),
        "{stdout}"
    );
    // An annotation that names no view refuses its object (never served to everyone).
    write(&d, "e-bad.yaml", &set("bad", Some("a b"), "100.64.0.12"));
    let out = bin().args(["check", d.to_str().unwrap()]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("DNSRecordSet dns/bad metadata.annotations[meshdns.io/views]: \"a b\" is not a view name"),
        "{stdout}"
    );
}

#[test]
fn a_view_given_twice_or_malformed_is_refused_at_start() {
    for (args, want) in [
        (
            vec!["--view", "a=127.0.0.2/32", "--view", "a=127.0.0.3/32"],
            "--view a: a view of that name is given already",
        ),
        (vec!["--view", "a"], "expected NAME=CIDR"),
        (
            vec!["--view", "a b=127.0.0.2/32"],
            "must be letters, digits",
        ),
        (vec!["--view", "a=not-an-address"], "\"a=not-an-address\""),
    ] {
        let mut all = vec!["serve", "--listen", "127.0.0.1:0"];
        all.extend_from_slice(&args);
        let out = bin().args(&all).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

const INSIDE_KEY: &str = "aW5zaWRlLXRyYW5zZmVyLWtleS1mb3ItbWVzaGRucyE=";
const PUBLIC_KEY: &str = "cHVibGljLXRyYW5zZmVyLWtleS1mb3ItbWVzaGRucyE=";

/// The serial in `dig +short SOA` output.
fn serial_of(soa: &str) -> u32 {
    soa.split_whitespace()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no SOA: {soa:?}"))
}

/// Transfers by view: a key of `--view-key` selects its view for AXFR, IXFR (from the view's
/// own journal) and the SOA queries it signs; an unsigned transfer takes the view of its
/// address; an NSD secondary whose address is in a view follows that view through NOTIFY and
/// IXFR, and never sees what other clients see.
#[test]
fn transfers_soa_queries_and_notify_follow_the_view_of_the_key_or_address() {
    use crate::secondaries::{Secondary, free_port};
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "records.yaml", &records("100.64.0.1"));
    let keys = write(
        dir.path(),
        "tsig.conf",
        &format!(
            "key \"inside-xfr.\" {{ algorithm hmac-sha256; secret \"{INSIDE_KEY}\"; }};\nkey \"public-xfr.\" {{ algorithm hmac-sha256; secret \"{PUBLIC_KEY}\"; }};\n"
        ),
    );
    let data = dir.path().join("data");
    let nsd_port = free_port();
    let knot_port = free_port();
    let m = Meshdns::serve(&[
        "--records",
        &file,
        // NSD transfers from 127.0.0.2 and is notified at 127.0.0.1: both inside.
        "--view",
        "inside=127.0.0.1/32,127.0.0.2/32",
        "--tsig-keys",
        &keys,
        "--allow-transfer-key",
        "inside-xfr.",
        "--allow-transfer-key",
        "public-xfr.",
        "--view-key",
        "inside=inside-xfr.",
        "--allow-transfer",
        "127.0.0.2",
        "--data-dir",
        data.to_str().unwrap(),
        "--notify",
        &format!("127.0.0.1:{nsd_port}"),
        // Knot transfers from 127.0.0.3, in no view: its key selects the view.
        "--notify",
        &format!("127.0.0.1:{knot_port}@inside-xfr."),
        "--http",
        "127.0.0.1:0",
    ]);
    let inside = format!("hmac-sha256:inside-xfr.:{INSIDE_KEY}");
    let public = format!("hmac-sha256:public-xfr.:{PUBLIC_KEY}");
    // `dig -b CLIENT [-y KEY] ARGS…`.
    let signed = |client: &str, key: Option<&str>, rest: &[&str]| {
        let mut args = vec!["-b", client];
        if let Some(k) = key {
            args.extend(["-y", k]);
        }
        args.extend(rest);
        dig(m.dns, &args)
    };
    let axfr = |client: &str, key: Option<&str>, zone: &str| {
        signed(client, key, &[zone, "AXFR", "+noall", "+answer"])
    };
    // By key, from an address in no view: the key's view, or every client's data.
    let by_inside_key = axfr("127.0.0.3", Some(&inside), "example.org");
    assert!(
        by_inside_key.contains("100.64.0.1") && by_inside_key.contains("inside only"),
        "{by_inside_key}"
    );
    let by_public_key = axfr("127.0.0.3", Some(&public), "example.org");
    assert!(
        !by_public_key.contains("100.64.0.1") && by_public_key.contains("everyone"),
        "{by_public_key}"
    );
    // A zone of the view alone: transferred to the view's key, NOTAUTH for the others.
    assert!(axfr("127.0.0.3", Some(&inside), "corp.internal").contains("100.64.0.9"));
    let other = signed("127.0.0.3", Some(&public), &["corp.internal", "AXFR"]);
    assert!(
        !other.contains("100.64.0.9") && other.contains("Transfer failed"),
        "{other}"
    );
    // Unsigned, by address: 127.0.0.2 is inside.
    let by_address = axfr("127.0.0.2", None, "example.org");
    assert!(by_address.contains("100.64.0.1"), "{by_address}");

    // The SOA a key signs for is its view's: the serial its transfers carry.
    let soa = |client: &str, key: Option<&str>| {
        serial_of(&signed(client, key, &["example.org", "SOA", "+short"]))
    };
    let inside_serial = soa("127.0.0.3", Some(&inside));
    let shared_serial = soa("127.0.0.3", None);

    let nsd_dir = dir.path().join("nsd");
    std::fs::create_dir(&nsd_dir).unwrap();
    let nsd = Secondary::nsd(
        &nsd_dir,
        nsd_port,
        m.dns,
        &["example.org", "corp.internal"],
        "127.0.0.2",
    );
    nsd.wait_answer(&["www.example.org", "A"], "100.64.0.1", 30);
    nsd.wait_answer(&["db.corp.internal", "A"], "100.64.0.9", 30);
    let knot_dir = dir.path().join("knot");
    std::fs::create_dir(&knot_dir).unwrap();
    let knot = Secondary::knot_keyed(
        &knot_dir,
        knot_port,
        m.dns,
        &["example.org", "corp.internal"],
        "127.0.0.3",
        Some(("inside-xfr.", INSIDE_KEY)),
    );
    knot.wait_answer(&["www.example.org", "A"], "100.64.0.1", 30);
    knot.wait_answer(&["db.corp.internal", "A"], "100.64.0.9", 30);

    // Only the inside view changes: its serial grows, every client's stays; NSD follows.
    write(dir.path(), "records.yaml", &records("100.64.0.2"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while short(&m, "127.0.0.1", "www.example.org", "A") != "100.64.0.2" {
        assert!(std::time::Instant::now() < deadline, "never reloaded");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let grown = soa("127.0.0.3", Some(&inside));
    assert!(grown > inside_serial, "{grown} after {inside_serial}");
    assert_eq!(soa("127.0.0.3", None), shared_serial);
    assert_eq!(soa("127.0.0.3", Some(&public)), shared_serial);
    let took = nsd.wait_answer(&["www.example.org", "A"], "100.64.0.2", 20);
    eprintln!("nsd followed the inside view after {took:?}");
    let took = knot.wait_answer(&["www.example.org", "A"], "100.64.0.2", 20);
    eprintln!("knot followed the inside view by its key after {took:?}");
    // IXFR from the view's own journal: the old address removed, the new one added (asked
    // from 127.0.0.4, so that the log's IXFRs to 127.0.0.3 are Knot's).
    let ixfr = signed(
        "127.0.0.4",
        Some(&inside),
        &[
            "example.org",
            &format!("IXFR={inside_serial}"),
            "+noall",
            "+answer",
        ],
    );
    assert!(
        ixfr.contains("100.64.0.1") && ixfr.contains("100.64.0.2") && !ixfr.contains("everyone"),
        "an incremental transfer: {ixfr}"
    );
    // The view's journal is reported with its view.
    let (_, metrics) = m.get("/metrics");
    assert!(
        metrics.lines().any(|l| l
            .starts_with("meshdns_journal_differences{zone=\"example.org.\",view=\"inside\"}")
            && !l.ends_with(" 0")),
        "{metrics}"
    );
    let log = m.log_text();
    assert!(
        log.lines().any(|l| l.contains("peer=127.0.0.2")
            && l.contains("zone=example.org.")
            && l.contains("kind=\"ixfr\"")),
        "nsd took an IXFR of the view:\n{log}"
    );
    assert!(
        log.lines().any(|l| l.contains("peer=127.0.0.3")
            && l.contains("zone=example.org.")
            && l.contains("kind=\"ixfr\"")),
        "knot took an IXFR of the view by its key:\n{log}"
    );
    // The secondary holds what the view alone holds.
    assert_eq!(
        dig(nsd.addr, &["secret.example.org", "TXT", "+short"]).trim(),
        "\"inside only\""
    );

    // The view's last records of example.org go: the zone is the same as every client's
    // again, but its serial in the view goes on upwards, and both secondaries drop them.
    let untagged = records("100.64.0.2")
        .replace(
            "      - {name: www, type: A, value: 100.64.0.2, view: inside}\n",
            "",
        )
        .replace(
            "      - {name: secret, type: TXT, value: inside only, view: [inside]}\n",
            "",
        );
    assert!(!untagged.contains("secret"), "{untagged}");
    write(dir.path(), "records.yaml", &untagged);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !from(&m, "127.0.0.1", "secret.example.org", "TXT", &[]).contains("NXDOMAIN") {
        assert!(std::time::Instant::now() < deadline, "never reloaded");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let after = soa("127.0.0.3", Some(&inside));
    assert!(after > grown, "{after} after {grown}");
    for secondary in [&nsd, &knot] {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !dig(secondary.addr, &["secret.example.org", "TXT"]).contains("NXDOMAIN") {
            assert!(
                std::time::Instant::now() < deadline,
                "{} kept the view's removed record",
                secondary.addr
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}
