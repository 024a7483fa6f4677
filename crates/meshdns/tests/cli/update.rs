//! `serve --update-zone` (RFC 2136 dynamic UPDATE, RFC 3007 with TSIG): written with BIND's
//! `nsupdate` and Knot's `knsupdate`, read back with `dig` at once, every refusal with the
//! rcode the RFCs give and nothing applied, and an accepted update kept through `kill -9`.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::*;

const SECRET: &str = "c2VjcmV0LWtleS1mb3ItbWVzaGRucy11cGRhdGVzISE=";
const OTHER: &str = "b3RoZXIta2V5LWZvci1tZXNoZG5zLXVwZGF0ZXMhIQ==";

fn keys(dir: &std::path::Path) -> String {
    write(
        dir,
        "tsig.conf",
        &format!(
            "key \"upd.\" {{ algorithm hmac-sha256; secret \"{SECRET}\"; }};\nkey \"other.\" {{ algorithm hmac-sha256; secret \"{OTHER}\"; }};\n"
        ),
    )
}

/// Runs nsupdate with `key` (`None`: unsigned) on `script`: (exit success, stdout + stderr).
fn nsupdate(m: &Meshdns, key: Option<&str>, script: &str) -> (bool, String) {
    nsupdate_with(m, key, &[], script)
}

/// [`nsupdate`] with more arguments (`-v`: over TCP).
fn nsupdate_with(m: &Meshdns, key: Option<&str>, args: &[&str], script: &str) -> (bool, String) {
    let mut cmd = Command::new("nsupdate");
    cmd.args(args);
    if let Some(k) = key {
        cmd.args(["-y", k]);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nsupdate (apt-get install dnsutils)");
    let text = format!("server {} {}\n{script}\nsend\n", m.dns.ip(), m.dns.port());
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn serve(dir: &std::path::Path, data: &str) -> Meshdns {
    let records = write(
        dir,
        "records.yaml",
        "zones:\n  - origin: example.org\n    records:\n      - {name: www, type: A, value: 192.0.2.1}\n",
    );
    let keys = keys(dir);
    Meshdns::serve(&[
        "--records",
        &records,
        "--update-zone",
        "dyn.example",
        "--update-zone",
        "other.example",
        "--allow-update",
        "upd.=dyn.example",
        "--allow-update",
        "other.=other.example",
        "--tsig-keys",
        &keys,
        "--data-dir",
        data,
        "--http",
        "127.0.0.1:0",
    ])
}

#[test]
fn nsupdate_writes_and_every_refusal_has_its_rcode() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let upd = format!("hmac-sha256:upd.:{SECRET}");
    let m = serve(dir.path(), data);
    // Before any update: the zone answers its own SOA and NS.
    assert!(dig(m.dns, &["dyn.example", "SOA"]).contains("status: NOERROR"));

    // Add, answered at once.
    let (ok, out) = nsupdate(
        &m,
        Some(&upd),
        "zone dyn.example\nupdate add www.dyn.example 60 A 192.0.2.10\nupdate add www.dyn.example 60 A 192.0.2.11\nupdate add dyn.example 60 TXT \"hello\"",
    );
    assert!(ok, "{out}");
    let mut got: Vec<String> = dig(m.dns, &["www.dyn.example", "A", "+short"])
        .lines()
        .map(str::to_string)
        .collect();
    got.sort();
    assert_eq!(got, ["192.0.2.10", "192.0.2.11"]);
    assert_eq!(
        dig(m.dns, &["dyn.example", "TXT", "+short"]).trim(),
        "\"hello\""
    );
    // Replace: delete the RRset, add one.
    let (ok, out) = nsupdate(
        &m,
        Some(&upd),
        "zone dyn.example\nupdate delete www.dyn.example A\nupdate add www.dyn.example 60 A 192.0.2.12",
    );
    assert!(ok, "{out}");
    assert_eq!(
        dig(m.dns, &["www.dyn.example", "A", "+short"]).trim(),
        "192.0.2.12"
    );

    // Prerequisites that fail: their rcode, nothing applied.
    for (script, rcode) in [
        (
            "prereq nxdomain www.dyn.example\nupdate add new.dyn.example 60 A 192.0.2.99",
            "YXDOMAIN",
        ),
        (
            "prereq yxdomain none.dyn.example\nupdate add new.dyn.example 60 A 192.0.2.99",
            "NXDOMAIN",
        ),
        (
            "prereq yxrrset www.dyn.example AAAA\nupdate add new.dyn.example 60 A 192.0.2.99",
            "NXRRSET",
        ),
        (
            "prereq nxrrset www.dyn.example A\nupdate add new.dyn.example 60 A 192.0.2.99",
            "YXRRSET",
        ),
        (
            "prereq yxrrset www.dyn.example A 192.0.2.10\nupdate add new.dyn.example 60 A 192.0.2.99",
            "NXRRSET",
        ),
    ] {
        let (ok, out) = nsupdate(&m, Some(&upd), &format!("zone dyn.example\n{script}"));
        assert!(!ok && out.contains(rcode), "{script}: want {rcode}: {out}");
    }
    assert!(dig(m.dns, &["new.dyn.example", "A"]).contains("status: NXDOMAIN"));

    let add = "update add new.dyn.example 60 A 192.0.2.99";
    // A wrong key: NOTAUTH (BADSIG); unsigned: REFUSED; a key not granted for the zone:
    // REFUSED; a zone not served: NOTAUTH; a zone served from a records file: REFUSED; a
    // record outside the zone named: NOTZONE. Nothing applied.
    let wrong = format!("hmac-sha256:upd.:{OTHER}");
    let other = format!("hmac-sha256:other.:{OTHER}");
    for (key, script, want) in [
        (
            Some(wrong.as_str()),
            format!("zone dyn.example\n{add}"),
            "NOTAUTH",
        ),
        (None, format!("zone dyn.example\n{add}"), "REFUSED"),
        (
            Some(other.as_str()),
            format!("zone dyn.example\n{add}"),
            "REFUSED",
        ),
        (
            Some(upd.as_str()),
            "zone nowhere.example\nupdate add a.nowhere.example 60 A 192.0.2.1".to_string(),
            "NOTAUTH",
        ),
        (
            Some(upd.as_str()),
            "zone example.org\nupdate add a.example.org 60 A 192.0.2.1".to_string(),
            "REFUSED",
        ),
        (
            Some(upd.as_str()),
            "zone dyn.example\nupdate add a.example.net 60 A 192.0.2.1".to_string(),
            "NOTZONE",
        ),
    ] {
        let (ok, out) = nsupdate(&m, key, &script);
        assert!(!ok && out.contains(want), "{script}: want {want}: {out}");
    }
    assert!(dig(m.dns, &["new.dyn.example", "A"]).contains("status: NXDOMAIN"));
    assert!(dig(m.dns, &["a.example.org", "A"]).contains("status: NXDOMAIN"));
    // Each reply counted by its rcode.
    let (_, metrics) = m.get("/metrics");
    for (rcode, n) in [
        ("NOTAUTH", 2),
        ("REFUSED", 3),
        ("NOTZONE", 1),
        ("YXDOMAIN", 1),
        ("NXRRSET", 2),
    ] {
        let line = format!("meshdns_update_requests_total{{rcode=\"{rcode}\"}} {n}\n");
        assert!(metrics.contains(&line), "{line}{metrics}");
    }
    // The other key writes its own zone.
    let (ok, out) = nsupdate(
        &m,
        Some(&other),
        "zone other.example\nupdate add x.other.example 60 A 192.0.2.20",
    );
    assert!(ok, "{out}");

    // Over TCP too.
    let (ok, out) = nsupdate_with(
        &m,
        Some(&upd),
        &["-v"],
        "zone dyn.example\nupdate add tcp.dyn.example 60 A 192.0.2.31",
    );
    assert!(ok, "{out}");
    assert_eq!(
        dig(m.dns, &["tcp.dyn.example", "A", "+short"]).trim(),
        "192.0.2.31"
    );

    // knsupdate (Knot's client) too.
    let mut child = Command::new("knsupdate")
        .args(["-y", &upd])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("knsupdate (apt-get install knot-dnsutils)");
    let script = format!(
        "server {} {}\nzone dyn.example.\nupdate add knot.dyn.example. 60 A 192.0.2.30\nsend\n",
        m.dns.ip(),
        m.dns.port()
    );
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        dig(m.dns, &["knot.dyn.example", "A", "+short"]).trim(),
        "192.0.2.30"
    );

    // kill -9 right after a reply: the update is kept.
    let (ok, out) = nsupdate(
        &m,
        Some(&upd),
        "zone dyn.example\nupdate add last.dyn.example 60 A 192.0.2.40",
    );
    assert!(ok, "{out}");
    drop(m);
    let m = serve(dir.path(), data);
    assert_eq!(
        dig(m.dns, &["last.dyn.example", "A", "+short"]).trim(),
        "192.0.2.40"
    );
    assert_eq!(
        dig(m.dns, &["www.dyn.example", "A", "+short"]).trim(),
        "192.0.2.12"
    );
    assert_eq!(
        dig(m.dns, &["x.other.example", "A", "+short"]).trim(),
        "192.0.2.20"
    );
}

/// An update zone is transferred like any zone: external-dns's rfc2136 sequence (an AXFR
/// signed with its key to read, then UPDATE to write) works with the key granted both, and an
/// NSD secondary follows each accepted update by NOTIFY and IXFR.
#[test]
fn an_nsd_secondary_follows_updates_and_external_dns_reads_by_axfr() {
    use crate::secondaries::{Secondary, free_port};
    let dir = tempfile::tempdir().unwrap();
    let keys = keys(dir.path());
    let data = dir.path().join("data");
    let nsd_port = free_port();
    let m = Meshdns::serve(&[
        "--update-zone",
        "dyn.example",
        "--allow-update",
        "upd.",
        "--allow-transfer-key",
        "upd.",
        "--allow-transfer",
        "127.0.0.2",
        "--tsig-keys",
        &keys,
        "--data-dir",
        data.to_str().unwrap(),
        "--notify",
        &format!("127.0.0.1:{nsd_port}"),
    ]);
    let upd = format!("hmac-sha256:upd.:{SECRET}");
    let (ok, out) = nsupdate(
        &m,
        Some(&upd),
        "zone dyn.example\nupdate add www.dyn.example 60 A 192.0.2.10",
    );
    assert!(ok, "{out}");
    // external-dns reads the zone with an AXFR signed by its key.
    let axfr = dig(
        m.dns,
        &["-y", &upd, "dyn.example", "AXFR", "+noall", "+answer"],
    );
    assert!(axfr.contains("192.0.2.10"), "{axfr}");
    let unsigned = dig(m.dns, &["dyn.example", "AXFR"]);
    assert!(!unsigned.contains("192.0.2.10"), "{unsigned}");

    let nsd_dir = dir.path().join("nsd");
    std::fs::create_dir(&nsd_dir).unwrap();
    let nsd = Secondary::nsd(&nsd_dir, nsd_port, m.dns, &["dyn.example"], "127.0.0.2");
    nsd.wait_answer(&["www.dyn.example", "A"], "192.0.2.10", 20);
    for i in 0..3 {
        let (ok, out) = nsupdate(
            &m,
            Some(&upd),
            &format!(
                "zone dyn.example\nupdate delete www.dyn.example A\nupdate add www.dyn.example 60 A 192.0.2.{}",
                20 + i
            ),
        );
        assert!(ok, "{out}");
        let took = nsd.wait_answer(
            &["www.dyn.example", "A"],
            &format!("192.0.2.{}", 20 + i),
            10,
        );
        eprintln!("nsd: update {i} answered after {took:?}");
    }
    let log = m.log_text();
    assert!(
        log.lines().any(|l| l.contains("peer=127.0.0.2")
            && l.contains("zone=dyn.example.")
            && l.contains("kind=\"ixfr\"")),
        "nsd took an IXFR:\n{log}"
    );
}
