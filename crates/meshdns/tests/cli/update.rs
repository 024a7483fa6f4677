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

/// An UPDATE datagram adding `flood.dyn.example A 192.0.2.99`, signed with `key` (its name and
/// base64 secret).
pub(crate) fn signed_update(key: (&str, &str)) -> Vec<u8> {
    use meshdns_xfr::message::{CLASS_IN, MessageWriter};
    let mut w = MessageWriter::new(0x4747, 5 << 11, Some((b"\x03dyn\x07example\x00", 6, 1)));
    // The update section is the authority section: one record to add.
    let mut rdata = Vec::new();
    meshdns_zone::RData::A([192, 0, 2, 99].into()).to_wire(&mut rdata);
    w.put_record(
        2,
        b"\x05flood\x03dyn\x07example\x00",
        meshdns_zone::RType::A,
        CLASS_IN,
        60,
        &rdata,
    );
    let mut msg = w.finish();
    let file = format!(
        "key \"{}\" {{ algorithm hmac-sha256; secret \"{}\"; }};\n",
        key.0, key.1
    );
    let key = meshdns_xfr::tsig::parse_key_file("test", &file).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    meshdns_xfr::tsig::Signer::request(&key[0], now).sign(&mut msg, 0, &[]);
    msg
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
    let text = format!("server {} {}\n{script}\nsend\n", m.dns.ip(), m.dns.port());
    run_script(cmd, &text, "nsupdate (apt-get install dnsutils)")
}

/// Runs `cmd` with `text` on its standard input: (exit success, stdout + stderr).
fn run_script(mut cmd: Command, text: &str, what: &str) -> (bool, String) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect(what);
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
    let (ok, out) = knsupdate(
        &m,
        Some(&upd),
        "update add knot.dyn.example. 60 A 192.0.2.30",
    );
    assert!(ok, "{out}");
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
        "--allow-update",
        "other.",
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
    // external-dns writes a record with its TXT registry record beside it, in one UPDATE.
    let owner = "\"heritage=external-dns,external-dns/owner=default,external-dns/resource=service/web/www\"";
    let (ok, out) = nsupdate(
        &m,
        Some(&upd),
        &format!(
            "zone dyn.example\nupdate add www.dyn.example 60 A 192.0.2.10\nupdate add a-www.dyn.example 60 TXT {owner}"
        ),
    );
    assert!(ok, "{out}");
    // It reads the zone with an AXFR signed by its key, and finds both.
    let axfr = dig(
        m.dns,
        &["-y", &upd, "dyn.example", "AXFR", "+noall", "+answer"],
    );
    assert!(
        axfr.contains("192.0.2.10") && axfr.contains("external-dns/owner=default"),
        "{axfr}"
    );
    let unsigned = dig(m.dns, &["dyn.example", "AXFR"]);
    assert!(!unsigned.contains("192.0.2.10"), "{unsigned}");
    // A key granted UPDATE alone does not read the zone: transfers need their own grant.
    let other = format!("hmac-sha256:other.:{OTHER}");
    let update_only = dig(m.dns, &["-y", &other, "dyn.example", "AXFR"]);
    assert!(
        !update_only.contains("192.0.2.10") && update_only.contains("Transfer failed"),
        "{update_only}"
    );
    // Deleting the record, external-dns deletes its registry record in the same UPDATE.
    let (ok, out) = nsupdate(
        &m,
        Some(&upd),
        &format!(
            "zone dyn.example\nupdate add old.dyn.example 60 A 192.0.2.11\nupdate add a-old.dyn.example 60 TXT {owner}"
        ),
    );
    assert!(ok, "{out}");
    let (ok, out) = nsupdate(
        &m,
        Some(&upd),
        &format!(
            "zone dyn.example\nupdate delete old.dyn.example 60 A 192.0.2.11\nupdate delete a-old.dyn.example 60 TXT {owner}"
        ),
    );
    assert!(ok, "{out}");
    for name in ["old.dyn.example", "a-old.dyn.example"] {
        assert!(
            dig(m.dns, &[name, "ANY"]).contains("status: NXDOMAIN"),
            "{name}"
        );
    }

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

/// Runs knsupdate with `key` (`None`: unsigned) on `script`: (exit success, stdout + stderr).
fn knsupdate(m: &Meshdns, key: Option<&str>, script: &str) -> (bool, String) {
    let mut cmd = Command::new("knsupdate");
    if let Some(k) = key {
        cmd.args(["-y", k]);
    }
    cmd.args(["-t", "3", "-r", "0"]);
    let text = format!(
        "server {} {}\nzone dyn.example.\n{script}\nsend\n",
        m.dns.ip(),
        m.dns.port()
    );
    run_script(cmd, &text, "knsupdate (apt-get install knot-dnsutils)")
}

/// Sorted `dig +short` lines.
fn short(m: &Meshdns, name: &str, rtype: &str) -> Vec<String> {
    let mut got: Vec<String> = dig(m.dns, &[name, rtype, "+short"])
        .lines()
        .map(str::to_string)
        .collect();
    got.sort();
    got
}

/// knsupdate's deletes and refusals (each with its rcode or TSIG error, nothing applied); the
/// bounds (records per zone, UPDATEs per second per key, size over UDP); a records file giving
/// a name and type of an update zone wins them, and the log says so.
#[test]
fn knsupdate_deletes_and_refusals_bounds_and_precedence() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let keys = keys(dir.path());
    // The records file gives the update zone's www A: it wins over what UPDATE gives there.
    let records = write(
        dir.path(),
        "records.yaml",
        "zones:\n  - origin: dyn.example\n    records:\n      - {name: www, type: A, value: 192.0.2.1}\n",
    );
    let m = Meshdns::serve(&[
        "--records",
        &records,
        "--update-zone",
        "dyn.example",
        "--allow-update",
        "upd.",
        "--tsig-keys",
        &keys,
        "--data-dir",
        data.to_str().unwrap(),
        "--update-max-records",
        "4",
        "--http",
        "127.0.0.1:0",
    ]);
    let upd = format!("hmac-sha256:upd.:{SECRET}");
    let (ok, out) = knsupdate(
        &m,
        Some(&upd),
        "update add www.dyn.example. 60 A 192.0.2.9\nupdate add a.dyn.example. 60 A 192.0.2.10\nupdate add a.dyn.example. 60 A 192.0.2.11\nupdate add b.dyn.example. 60 TXT \"b\"",
    );
    assert!(ok, "{out}");
    // Accepted, but the file's record is answered; the log names the file that won.
    assert_eq!(short(&m, "www.dyn.example", "A"), ["192.0.2.1"]);
    assert_eq!(
        short(&m, "a.dyn.example", "A"),
        ["192.0.2.10", "192.0.2.11"]
    );
    m.wait_log("entry=www.dyn.example. A reason=already provided by");
    assert!(
        m.log_text()
            .contains("records.yaml, which takes precedence")
    );

    // Four records held: two more and one fewer is beyond --update-max-records, REFUSED,
    // nothing applied.
    let (ok, out) = knsupdate(
        &m,
        Some(&upd),
        "update add c.dyn.example. 60 A 192.0.2.12\nupdate add c.dyn.example. 60 A 192.0.2.14\nupdate delete b.dyn.example. TXT",
    );
    assert!(!ok && out.contains("REFUSED"), "{out}");
    assert!(dig(m.dns, &["c.dyn.example", "A"]).contains("status: NXDOMAIN"));
    assert_eq!(short(&m, "b.dyn.example", "TXT"), ["\"b\""]);
    // One record deleted, then a whole name: room again.
    let (ok, out) = knsupdate(&m, Some(&upd), "update delete a.dyn.example. A 192.0.2.10");
    assert!(ok, "{out}");
    assert_eq!(short(&m, "a.dyn.example", "A"), ["192.0.2.11"]);
    let (ok, out) = knsupdate(&m, Some(&upd), "update delete b.dyn.example.");
    assert!(ok, "{out}");
    assert!(dig(m.dns, &["b.dyn.example", "TXT"]).contains("status: NXDOMAIN"));
    let (ok, out) = knsupdate(&m, Some(&upd), "update add c.dyn.example. 60 A 192.0.2.12");
    assert!(ok, "{out}");
    assert_eq!(short(&m, "c.dyn.example", "A"), ["192.0.2.12"]);

    // Refusals: a prerequisite, a wrong secret (BADSIG), an unknown key (BADKEY), unsigned.
    let add = "update add d.dyn.example. 60 A 192.0.2.13";
    let wrong = format!("hmac-sha256:upd.:{OTHER}");
    let unknown = format!("hmac-sha256:nokey.:{SECRET}");
    for (key, script, want) in [
        (
            Some(upd.as_str()),
            format!("prereq nxdomain c.dyn.example.\n{add}"),
            "YXDOMAIN",
        ),
        (Some(wrong.as_str()), add.to_string(), "BADSIG"),
        (Some(unknown.as_str()), add.to_string(), "BADKEY"),
        (None, add.to_string(), "REFUSED"),
    ] {
        let (ok, out) = knsupdate(&m, key, &script);
        assert!(!ok && out.contains(want), "{script}: want {want}: {out}");
    }
    assert!(dig(m.dns, &["d.dyn.example", "A"]).contains("status: NXDOMAIN"));
    let (_, metrics) = m.get("/metrics");
    assert!(
        metrics.contains("meshdns_update_requests_total{rcode=\"NOTAUTH\"} 2\n"),
        "{metrics}"
    );

    // Larger than 4,096 bytes over UDP: FORMERR, the header alone, nothing applied.
    let mut big = vec![0x4d, 0x44, 0x28, 0x00, 0, 1, 0, 0, 0, 1, 0, 0];
    big.extend_from_slice(b"\x03dyn\x07example\x00\x00\x06\x00\x01");
    big.extend_from_slice(b"\x01d\x03dyn\x07example\x00\x00\x10\x00\x01\x00\x00\x00\x3c");
    let text = vec![b'x'; 255];
    let rdata: Vec<u8> = (0..20)
        .flat_map(|_| [&[255u8][..], &text].concat())
        .collect();
    big.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    big.extend_from_slice(&rdata);
    assert!(big.len() > 4096);
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    sock.send_to(&big, m.dns).unwrap();
    let mut reply = [0u8; 512];
    let n = sock
        .recv(&mut reply)
        .expect("a reply to an oversized UPDATE");
    assert_eq!(n, 12, "the header alone");
    assert_eq!(&reply[..2], &[0x4d, 0x44], "its id");
    assert_eq!(reply[3] & 0x0f, 1, "FORMERR");
    assert!(dig(m.dns, &["d.dyn.example", "TXT"]).contains("status: NXDOMAIN"));
}

/// `--update-rate`: a key beyond its rate is REFUSED and nothing of it applied, while another
/// key still writes. Past its refusals too (as many as it may be accepted), a key's datagrams
/// are dropped unanswered, and counted.
#[test]
fn a_key_beyond_its_rate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let keys = keys(dir.path());
    let m = Meshdns::serve(&[
        "--update-zone",
        "dyn.example",
        "--allow-update",
        "upd.",
        "--allow-update",
        "other.",
        "--tsig-keys",
        &keys,
        "--data-dir",
        data.to_str().unwrap(),
        "--update-rate",
        "1",
        "--http",
        "127.0.0.1:0",
    ]);
    let upd = format!("hmac-sha256:upd.:{SECRET}");
    // A burst of twice the rate (2), then one a second: of six sent back to back, at least
    // one is refused (or, past as many refusals again, dropped: it times out).
    let started = std::time::Instant::now();
    let (mut refused, mut dropped) = (Vec::new(), 0);
    for i in 0..6 {
        let (ok, out) = knsupdate(
            &m,
            Some(&upd),
            &format!("update add r{i}.dyn.example. 60 A 192.0.2.{i}"),
        );
        if !ok {
            if out.contains("REFUSED") {
                refused.push(i);
            } else {
                assert!(out.contains("response timeout"), "{out}");
                dropped += 1;
            }
        }
    }
    let accepted = 6 - refused.len() - dropped;
    let allowed = 2 + started.elapsed().as_secs() as usize;
    assert!(
        !refused.is_empty() && accepted <= allowed,
        "{accepted} accepted in {:?}",
        started.elapsed()
    );
    // Fifty datagrams at once: at most twice the burst (4) are let through to be checked,
    // whatever is accepted meanwhile; the rest are dropped unread, and counted.
    let dropped_total = || metric(&m.get("/metrics").1, "meshdns_update_dropped_total ");
    let before = dropped_total();
    assert_eq!(before, dropped as u64);
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(std::time::Duration::from_secs(3)))
        .unwrap();
    let burst = signed_update(("upd.", SECRET));
    for _ in 0..50 {
        socket.send_to(&burst, m.dns).unwrap();
    }
    let mut replies = 0;
    let mut buf = [0u8; 4096];
    while socket.recv(&mut buf).is_ok() {
        replies += 1;
    }
    assert!(replies <= 5, "{replies} of 50 answered");
    assert_eq!(
        dropped_total() - before,
        50 - replies,
        "every other one dropped"
    );
    for i in refused {
        let name = format!("r{i}.dyn.example");
        assert!(
            dig(m.dns, &[&name, "A"]).contains("status: NXDOMAIN"),
            "{name}"
        );
    }
    // The other key has its own budget.
    let other = format!("hmac-sha256:other.:{OTHER}");
    let (ok, out) = knsupdate(
        &m,
        Some(&other),
        "update add o.dyn.example. 60 A 192.0.2.99",
    );
    assert!(ok, "{out}");
    assert_eq!(short(&m, "o.dyn.example", "A"), ["192.0.2.99"]);
}
