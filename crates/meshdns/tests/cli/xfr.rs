//! Zone transfers out, against real clients: `dig` AXFR/IXFR, TSIG with `dig -y`, the zone
//! checked by ldns (signed and verified) and nsd-checkzone, and NSD and Knot as
//! secondaries following changes to a records file, pkarr publishes and DNSRecordSet manifests
//! by NOTIFY and IXFR.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use crate::secondaries::{Primary, Secondary, free_port};
use crate::*;

const RECORDS: &str = "zones:
  - origin: example.org
    records:
      - {name: www, type: A, value: 192.0.2.1}
      - {name: mail, type: MX, value: \"10 mx.example.org.\"}
      - {name: mx, type: A, value: 192.0.2.2}
      - {name: ns, type: A, value: 192.0.2.53}
  - origin: other.example
    records:
      - {name: a, type: A, value: 198.51.100.1}
";

/// Replaces a file whole (a new file renamed over it, as a ConfigMap update or an editor's
/// save does): the server never reads half of it.
pub(crate) fn replace(
    path: impl AsRef<std::path::Path>,
    text: impl AsRef<[u8]>,
) -> std::io::Result<()> {
    let path = path.as_ref();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// The answer lines dig prints (comments and blank lines dropped), fields joined by one space.
fn records(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

fn serial(m: &Meshdns, zone: &str) -> u32 {
    let out = dig(m.dns, &[zone, "SOA", "+short"]);
    out.split_whitespace()
        .nth(2)
        .unwrap_or_else(|| panic!("no SOA for {zone}: {out:?}"))
        .parse()
        .unwrap()
}

/// Waits until the serial of `zone` differs from `old` (a reload is one debounce away).
fn next_serial(m: &Meshdns, zone: &str, old: u32) -> u32 {
    for _ in 0..250 {
        let s = serial(m, zone);
        if s != old {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "the serial of {zone} never changed from {old}:\n{}",
        m.log_text()
    );
}

fn big_records(n: usize) -> String {
    let mut s = String::from("zones:\n  - origin: big.example\n    records:\n");
    for i in 0..n {
        s.push_str(&format!(
            "      - {{name: host-{i}, type: A, value: 10.{}.{}.{}}}\n",
            i >> 16 & 255,
            i >> 8 & 255,
            i & 255
        ));
    }
    s
}

#[test]
fn axfr_ixfr_and_who_may_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "records.yaml", RECORDS);
    let big = write(dir.path(), "big.yaml", &big_records(3000));
    let data = dir.path().join("data");
    let m = Meshdns::serve(&[
        "--records",
        &file,
        "--records",
        &big,
        "--allow-transfer",
        "127.0.0.1/32",
        "--data-dir",
        data.to_str().unwrap(),
        "--http",
        "127.0.0.1:0",
    ]);

    // AXFR: SOA first and last, every record once, several records per message.
    let out = dig(m.dns, &["example.org", "AXFR"]);
    let rrs = records(&out);
    let s1 = serial(&m, "example.org");
    let soa = format!(
        "example.org. 5 IN SOA ns.example.org. hostmaster.example.org. {s1} 3600 600 604800 5"
    );
    assert_eq!(rrs.first(), Some(&soa), "{out}");
    assert_eq!(rrs.last(), Some(&soa), "{out}");
    let mut body: Vec<&String> = rrs[1..rrs.len() - 1].iter().collect();
    body.sort();
    assert_eq!(
        body,
        [
            "example.org. 5 IN NS ns.example.org.",
            "mail.example.org. 5 IN MX 10 mx.example.org.",
            "mx.example.org. 5 IN A 192.0.2.2",
            "ns.example.org. 5 IN A 192.0.2.53",
            "www.example.org. 5 IN A 192.0.2.1",
        ]
    );
    let out = dig(m.dns, &["big.example", "AXFR", "+stats"]);
    assert_eq!(records(&out).len(), 3000 + 3, "SOA, NS, 3000 A, SOA");
    let messages: usize = out
        .lines()
        .find_map(|l| l.split("messages ").nth(1))
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("dig reports the message count: {out}"));
    assert!(
        (2..100).contains(&messages),
        "3000 records in a few messages, not one per record: {messages}"
    );

    // A one-record change: a new serial, and IXFR from the old one is that change alone.
    replace(&file, RECORDS.replace("192.0.2.1}", "192.0.2.9}")).unwrap();
    let s2 = next_serial(&m, "example.org", s1);
    let out = dig(m.dns, &["example.org", &format!("IXFR={s1}")]);
    let soa = |s: u32| {
        format!(
            "example.org. 5 IN SOA ns.example.org. hostmaster.example.org. {s} 3600 600 604800 5"
        )
    };
    assert_eq!(
        records(&out),
        [
            soa(s2),
            soa(s1),
            "www.example.org. 5 IN A 192.0.2.1".into(),
            soa(s2),
            "www.example.org. 5 IN A 192.0.2.9".into(),
            soa(s2)
        ],
        "{out}"
    );
    // Two changes later, the condensed difference (RFC 1995 §5): the record changed twice
    // appears once on each side.
    replace(&file, RECORDS.replace("192.0.2.1}", "192.0.2.10}")).unwrap();
    let s3 = next_serial(&m, "example.org", s2);
    let out = dig(m.dns, &["example.org", &format!("IXFR={s1}")]);
    assert_eq!(
        records(&out),
        [
            soa(s3),
            soa(s1),
            "www.example.org. 5 IN A 192.0.2.1".into(),
            soa(s3),
            "www.example.org. 5 IN A 192.0.2.10".into(),
            soa(s3)
        ],
        "{out}"
    );
    // Up to date: the current SOA alone; over UDP too; a serial the journal never had gets the
    // whole zone.
    assert_eq!(
        records(&dig(m.dns, &["example.org", &format!("IXFR={s3}")])),
        [soa(s3)]
    );
    assert_eq!(
        records(&dig(
            m.dns,
            &["example.org", &format!("IXFR={s1}"), "+notcp"]
        )),
        [soa(s3)],
        "over UDP a difference that may not fit is the current SOA (RFC 1995 §2)"
    );
    let full = records(&dig(m.dns, &["example.org", "IXFR=12345"]));
    assert_eq!(
        (full.first(), full.last(), full.len()),
        (Some(&soa(s3)), Some(&soa(s3)), 7)
    );

    // The other zone did not change: it kept its serial.
    let other = serial(&m, "other.example");
    assert!(
        m.log_text().matches("zone=other.example.").count() == 1,
        "other.example got one serial, at start:\n{}",
        m.log_text()
    );
    assert_ne!(other, 0);

    // Not in the ACL: REFUSED, as before; not a zone here: NOTAUTH; AXFR over UDP: refused.
    let out = Command::new("dig")
        .args([
            "@127.0.0.1",
            "-p",
            &m.dns.port().to_string(),
            "-b",
            "127.0.0.2",
        ])
        .args(["example.org", "AXFR", "+time=2", "+tries=1"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains("Transfer failed"), "{out}");
    assert!(
        m.log_text().contains("peer=127.0.0.2 outcome=Refused"),
        "{}",
        m.log_text()
    );
    let out = dig(m.dns, &["nowhere.example", "AXFR"]);
    assert!(out.contains("Transfer failed"), "{out}");
    assert!(m.log_text().contains("outcome=NotAuth"));
    // dig sends AXFR over TCP whatever it is told: this one goes over UDP by hand.
    let q =
        meshdns_xfr::message::MessageWriter::new(7, 0, Some((b"\x07example\x03org\x00", 252, 1)))
            .finish();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    udp.send_to(&q, m.dns).unwrap();
    let mut buf = [0u8; 512];
    let n = udp.recv(&mut buf).unwrap();
    assert_eq!(
        meshdns_xfr::message::parse(&buf[..n]).unwrap().rcode(),
        5,
        "AXFR over UDP: REFUSED"
    );

    // The counters.
    let metrics = m.get("/metrics").1;
    assert!(
        metrics.contains("meshdns_xfr_out_total{kind=\"axfr\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("meshdns_xfr_out_total{kind=\"ixfr\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "meshdns_zone_serial{{zone=\"example.org.\"}} {s3}"
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains("meshdns_journal_differences{zone=\"example.org.\"} 2"),
        "{metrics}"
    );
}

/// The transferred zone is a valid zone to ldns and NSD's checkers; ldns signs it and verifies
/// every signature and the NSEC chain.
#[test]
fn the_transferred_zone_passes_ldns_and_nsd_checks() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "records.yaml", RECORDS);
    let m = Meshdns::serve(&["--records", &file, "--allow-transfer", "127.0.0.1"]);
    let zone: String = records(&dig(m.dns, &["example.org", "AXFR"]))
        .iter()
        .skip(1)
        .map(|l| format!("{l}\n"))
        .collect();
    let path = dir.path().join("example.org.zone");
    std::fs::write(&path, &zone).unwrap();
    let run = |cmd: &mut Command| {
        let out = cmd
            .current_dir(dir.path())
            .output()
            .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        assert!(
            out.status.success(),
            "{cmd:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(Command::new("ldns-read-zone").arg(&path));
    run(Command::new("nsd-checkzone").arg("example.org").arg(&path));
    let key = run(Command::new("ldns-keygen").args(["-a", "ECDSAP256SHA256", "example.org"]));
    run(Command::new("ldns-signzone").arg(&path).arg(key.trim()));
    let verified =
        run(Command::new("ldns-verify-zone").arg(dir.path().join("example.org.zone.signed")));
    assert!(
        verified.contains("Zone is verified and complete"),
        "{verified}"
    );
}

const KEYS: &str = "key \"xfr.\" {\n  algorithm hmac-sha256;\n  secret \"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=\";\n};\n";
const GOOD: &str = "hmac-sha256:xfr.:c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=";

#[test]
fn tsig_signed_transfers_accepted_and_each_failure_answered() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "records.yaml", RECORDS);
    let keys = write(dir.path(), "tsig.conf", KEYS);
    let m = Meshdns::serve(&[
        "--records",
        &file,
        "--tsig-keys",
        &keys,
        "--allow-transfer-key",
        "xfr.",
    ]);
    // dig checks the signature of every message it gets: a bad one fails the transfer.
    let out = dig(m.dns, &["example.org", "AXFR", "-y", GOOD]);
    assert_eq!(
        records(&out).iter().filter(|l| l.contains(" SOA ")).count(),
        2,
        "{out}"
    );
    assert!(
        !out.contains("Transfer failed") && !out.contains("tsig verify failure"),
        "{out}"
    );
    let out = dig(m.dns, &["example.org", "IXFR=1", "-y", GOOD]);
    assert!(records(&out).len() > 2 && !out.contains("failure"), "{out}");

    let unsigned = dig(m.dns, &["example.org", "AXFR"]);
    assert!(
        unsigned.contains("Transfer failed"),
        "no key, no address: refused\n{unsigned}"
    );
    let bad_key = dig(
        m.dns,
        &["example.org", "AXFR", "-y", &GOOD.replace("xfr.", "other.")],
    );
    assert!(bad_key.contains("BADKEY"), "{bad_key}");
    let bad_sig = dig(
        m.dns,
        &["example.org", "AXFR", "-y", &GOOD.replace("MTI=", "MTM=")],
    );
    assert!(bad_sig.contains("BADSIG"), "{bad_sig}");

    // Time skew: a request signed 20 minutes ago (fudge 300 s) gets NOTAUTH, TSIG error
    // BADTIME, signed, with the server's time in other data (RFC 8945 §5.2.3).
    let key = meshdns_xfr::parse_key_file("k", KEYS).unwrap().remove(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut q = meshdns_xfr::message::MessageWriter::new(
        0x5151,
        0,
        Some((b"\x07example\x03org\x00", 252, 1)),
    )
    .finish();
    meshdns_xfr::tsig::Signer::request(&key, now - 1200).sign(&mut q, 0, &[]);
    let request_mac = {
        let parsed = meshdns_xfr::message::parse(&q).unwrap();
        meshdns_xfr::tsig::Tsig::read(&parsed)
            .unwrap()
            .unwrap()
            .0
            .mac
    };
    let reply = tcp_exchange(m.dns, &q);
    let parsed = meshdns_xfr::message::parse(&reply).unwrap();
    assert_eq!(parsed.rcode(), 9, "NOTAUTH");
    let (tsig, _) = meshdns_xfr::tsig::Tsig::read(&parsed).unwrap().unwrap();
    assert_eq!(tsig.error, meshdns_xfr::tsig::error::BADTIME);
    assert!(!tsig.mac.is_empty(), "BADTIME replies are signed");
    // Time Signed is the client's (so the client can verify the reply with its own clock),
    // the server's time is in Other Data, and the MAC covers both.
    assert_eq!(
        tsig.time_signed,
        now - 1200,
        "Time Signed echoes the request's"
    );
    meshdns_xfr::tsig::verify_error_reply(&key, &request_mac, &parsed)
        .expect("the BADTIME reply verifies with the key");
    let server_time = u64::from_be_bytes([
        0,
        0,
        tsig.other[0],
        tsig.other[1],
        tsig.other[2],
        tsig.other[3],
        tsig.other[4],
        tsig.other[5],
    ]);
    assert!(server_time.abs_diff(now) < 60);
    // And the same request signed now is served.
    let mut q2 = meshdns_xfr::message::MessageWriter::new(
        0x5152,
        0,
        Some((b"\x07example\x03org\x00", 252, 1)),
    )
    .finish();
    meshdns_xfr::tsig::Signer::request(&key, now).sign(&mut q2, 0, &[]);
    let reply = tcp_exchange(m.dns, &q2);
    let parsed = meshdns_xfr::message::parse(&reply).unwrap();
    assert_eq!(
        (parsed.rcode(), parsed.answers.first().map(|r| r.rtype)),
        (0, Some(6))
    );
}

/// Sends one message over TCP and reads the first reply message.
fn tcp_exchange(server: SocketAddr, msg: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(server).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&(msg.len() as u16).to_be_bytes()).unwrap();
    s.write_all(msg).unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).unwrap();
    let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut reply).unwrap();
    reply
}

#[test]
fn serials_follow_content_and_survive_restarts_with_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "records.yaml", RECORDS);
    let zone_file = write(
        dir.path(),
        "given.example.zone",
        "$ORIGIN given.example.\n@ 60 IN SOA ns hostmaster 2024010101 3600 600 86400 60\n@ NS ns\nns A 192.0.2.53\n",
    );
    let data = dir.path().join("data");
    let args = [
        "--records",
        &file,
        "--zone-file",
        &zone_file,
        "--allow-transfer",
        "127.0.0.1",
        "--data-dir",
        data.to_str().unwrap(),
    ];
    let m = Meshdns::serve(&args);
    let (org, other) = (serial(&m, "example.org"), serial(&m, "other.example"));
    assert_eq!(
        serial(&m, "given.example"),
        2024010101,
        "a zone file's serial is served as given"
    );
    replace(&file, RECORDS.replace("192.0.2.1}", "192.0.2.7}")).unwrap();
    let org2 = next_serial(&m, "example.org", org);
    assert!(
        org2.wrapping_sub(org) < 1 << 31 && org2 != org,
        "greater (RFC 1982)"
    );
    assert_eq!(
        serial(&m, "other.example"),
        other,
        "a zone that did not change keeps its serial"
    );
    assert_eq!(m.terminate().code(), Some(0));

    // Restarted on the same content: the same serials, and IXFR from before the restart.
    let m = Meshdns::serve(&args);
    assert_eq!(
        (serial(&m, "example.org"), serial(&m, "other.example")),
        (org2, other)
    );
    let out = records(&dig(m.dns, &["example.org", &format!("IXFR={org}")]));
    assert_eq!(out.len(), 6, "SOA SOA del SOA add SOA: {out:?}");
    assert_eq!(out[2], "www.example.org. 5 IN A 192.0.2.1");
    assert_eq!(out[4], "www.example.org. 5 IN A 192.0.2.7");
    m.terminate();

    // Restarted after the file changed while stopped: a greater serial; the journal cannot
    // bridge the gap, so IXFR from before gets the whole zone.
    replace(&file, RECORDS.replace("192.0.2.1}", "192.0.2.8}")).unwrap();
    let m = Meshdns::serve(&args);
    let org3 = serial(&m, "example.org");
    assert!(org3 != org2 && org3.wrapping_sub(org2) < 1 << 31);
    let out = records(&dig(m.dns, &["example.org", &format!("IXFR={org2}")]));
    assert_eq!(out.len(), 7, "the whole zone: {out:?}");
}

/// A pkarr origin's serial moves with each stamp of its publishes, and the serial book is
/// written only when a serial passes what the book reserved: a clean stop writes it exactly
/// (the same serial after a restart on the same content), and a start after `kill -9` serves
/// one above every serial stamped before it.
#[test]
fn pkarr_serials_pass_every_stamped_one_after_a_kill_and_stay_after_a_clean_stop() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = [
        "--pkarr",
        "dns.example",
        "--http",
        "127.0.0.1:0",
        "--data-dir",
        data.to_str().unwrap(),
        "--allow-transfer",
        "127.0.0.1",
    ];
    let book = || std::fs::read_to_string(data.join("serials.json")).unwrap();
    let m = Meshdns::serve(&args);
    let mut last = serial(&m, "dns.example");
    let mut stamped = vec![last];
    for i in 0..3 {
        publish(
            m.http.unwrap(),
            &iroh_base::SecretKey::generate(),
            [203, 0, 113, i],
        );
        last = next_serial(&m, "dns.example", last);
        stamped.push(last);
    }
    assert!(
        book().contains("\"reserved\""),
        "stamps reserve serials ahead: {}",
        book()
    );
    let mut m = m;
    m.child.kill().unwrap();
    m.child.wait().unwrap();

    let m = Meshdns::serve(&args);
    let after_kill = serial(&m, "dns.example");
    for s in &stamped {
        assert!(
            after_kill != *s && after_kill.wrapping_sub(*s) < 1 << 31,
            "{after_kill} is above every serial stamped before the kill: {stamped:?}"
        );
    }
    assert_eq!(m.terminate().code(), Some(0));
    assert!(
        !book().contains("\"reserved\""),
        "written exactly: {}",
        book()
    );
    let m = Meshdns::serve(&args);
    assert_eq!(
        serial(&m, "dns.example"),
        after_kill,
        "the same content after a clean stop: the same serial"
    );
    m.terminate();
}

/// Publishes a fresh key's endpoint at `ip` to the relay; returns its z32.
fn publish(http_addr: SocketAddr, secret: &iroh_base::SecretKey, ip: [u8; 4]) -> String {
    let payload = iroh_dns::endpoint_info::EndpointInfo::new(secret.public())
        .with_ip_addrs(vec![SocketAddr::from((ip, 4433))])
        .to_pkarr_signed_packet(secret, 30)
        .unwrap()
        .to_relay_payload();
    let z32 = secret.public().to_z32();
    let (status, _, _) = http(http_addr, "PUT", &format!("/pkarr/{z32}"), None, &payload);
    assert_eq!(status, 204);
    z32
}

#[test]
fn nsd_and_knot_follow_files_pkarr_and_manifests_by_notify_and_ixfr() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "records.yaml", RECORDS);
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    let zone_obj = "apiVersion: dns.networking.miloapis.com/v1alpha1\nkind: DNSZone\nmetadata: {name: zone, namespace: dns, creationTimestamp: '2026-01-01T00:00:00Z'}\nspec: {domainName: k8s.example, dnsZoneClassName: powerdns}\n";
    let rs = |ip: &str| {
        format!(
            "apiVersion: dns.networking.miloapis.com/v1alpha1\nkind: DNSRecordSet\nmetadata: {{name: www, namespace: dns}}\nspec:\n  dnsZoneRef: {{name: zone}}\n  recordType: A\n  records:\n  - {{name: www, a: {{content: {ip}}}}}\n"
        )
    };
    write(&manifests, "zone.yaml", zone_obj);
    write(&manifests, "www.yaml", &rs("198.51.100.1"));
    let (nsd_port, knot_port) = (free_port(), free_port());
    let data = dir.path().join("data");
    let m = Meshdns::serve(&[
        "--records",
        &file,
        "--manifests",
        manifests.to_str().unwrap(),
        "--pkarr",
        "dns.example",
        "--http",
        "127.0.0.1:0",
        "--data-dir",
        data.to_str().unwrap(),
        "--allow-transfer",
        "127.0.0.0/8",
        "--notify",
        &format!("127.0.0.1:{nsd_port}"),
        "--notify",
        &format!("127.0.0.1:{knot_port}"),
    ]);
    let zones = ["example.org", "k8s.example", "dns.example"];
    let nsd_dir = dir.path().join("nsd");
    let knot_dir = dir.path().join("knot");
    std::fs::create_dir(&nsd_dir).unwrap();
    std::fs::create_dir(&knot_dir).unwrap();
    let nsd = Secondary::nsd(&nsd_dir, nsd_port, m.dns, &zones, "127.0.0.2");
    let knot = Secondary::knot(&knot_dir, knot_port, m.dns, &zones, "127.0.0.3");
    for s in [&nsd, &knot] {
        s.wait_answer(&["www.example.org", "A"], "192.0.2.1", 20);
        s.wait_answer(&["www.k8s.example", "A"], "198.51.100.1", 20);
    }

    // A records file edit.
    replace(&file, RECORDS.replace("192.0.2.1}", "192.0.2.77}")).unwrap();
    for s in [&nsd, &knot] {
        let took = s.wait_answer(&["www.example.org", "A"], "192.0.2.77", 10);
        eprintln!("{}: records file change answered after {took:?}", s.name);
    }
    // A pkarr publish.
    let secret = iroh_base::SecretKey::generate();
    let z32 = publish(m.http.unwrap(), &secret, [203, 0, 113, 5]);
    let name = format!("_iroh.{z32}.dns.example");
    for s in [&nsd, &knot] {
        let took = s.wait_answer(&[&name, "TXT"], "\"addr=203.0.113.5:4433\"", 10);
        eprintln!("{}: pkarr publish answered after {took:?}", s.name);
    }
    // A DNSRecordSet edit.
    replace(manifests.join("www.yaml"), rs("198.51.100.99")).unwrap();
    for s in [&nsd, &knot] {
        let took = s.wait_answer(&["www.k8s.example", "A"], "198.51.100.99", 10);
        eprintln!("{}: DNSRecordSet change answered after {took:?}", s.name);
    }

    // Each one-record change went by IXFR: Knot logs it; meshdns logs each transfer with the
    // secondary's address (NSD's transfers leave from 127.0.0.2).
    let knot_log = knot.log_text();
    for zone in zones {
        assert!(
            knot_log.contains(&format!("[{zone}.] IXFR, incoming")),
            "knot took an IXFR for {zone}:\n{knot_log}"
        );
    }
    let log = m.log_text();
    for zone in zones {
        let ixfrs = log
            .lines()
            .filter(|l| l.contains("peer=127.0.0.2") && l.contains(&format!("zone={zone}.")))
            .filter(|l| l.contains("kind=\"ixfr\""))
            .count();
        assert!(ixfrs >= 1, "nsd took an IXFR for {zone}:\n{log}");
        let axfrs = log
            .lines()
            .filter(|l| l.contains(&format!("zone={zone}.")) && l.contains("kind=\"axfr\""))
            .count();
        assert_eq!(axfrs, 2, "one AXFR per secondary, at first:\n{log}");
    }
    let metrics = m.get("/metrics").1;
    assert!(
        !metrics.contains("meshdns_notify_total{result=\"acknowledged\"} 0"),
        "{metrics}"
    );
}

fn zone_text(origin: &str, serial: u32, ip: &str) -> String {
    format!(
        "$ORIGIN {origin}.\n$TTL 60\n@ SOA ns hostmaster {serial} 1 1 3600 60\n@ NS ns\nns A 192.0.2.53\nwww A {ip}\n"
    )
}

/// Waits until `dig ARGS +short` at meshdns prints `want`.
fn wait_meshdns(m: &Meshdns, args: &[&str], want: &str) {
    for _ in 0..500 {
        let mut a = args.to_vec();
        a.push("+short");
        if dig(m.dns, &a).trim() == want {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "meshdns never answered {args:?} with {want:?}:\n{}",
        m.log_text()
    );
}

#[test]
fn meshdns_as_a_secondary_of_nsd_and_knot_notified_and_kept_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let (nsd_port, knot_port, own_port) = (free_port(), free_port(), free_port());
    let own = SocketAddr::from(([127, 0, 0, 1], own_port));
    let nsd_dir = dir.path().join("nsd");
    let knot_dir = dir.path().join("knot");
    std::fs::create_dir(&nsd_dir).unwrap();
    std::fs::create_dir(&knot_dir).unwrap();
    let nsd = Primary::nsd(
        &nsd_dir,
        nsd_port,
        &[("a.example", &zone_text("a.example", 1, "192.0.2.1"))],
        own,
    );
    let knot = Primary::knot(
        &knot_dir,
        knot_port,
        &[("b.example", &zone_text("b.example", 1, "192.0.2.2"))],
        own,
    );
    std::thread::sleep(Duration::from_millis(500));
    let data = dir.path().join("data");
    let listen = own.to_string();
    let a = format!("a.example=127.0.0.1:{nsd_port}");
    let b = format!("b.example=127.0.0.1:{knot_port}");
    let args = [
        "--secondary",
        &a,
        "--secondary",
        &b,
        "--data-dir",
        data.to_str().unwrap(),
        "--http",
        "127.0.0.1:0",
    ];
    let serve = |extra: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(extra);
        all.extend_from_slice(&["--listen", &listen]);
        Meshdns::serve(&all)
    };
    let m = serve(&[]);
    wait_meshdns(&m, &["www.a.example", "A"], "192.0.2.1");
    wait_meshdns(&m, &["www.b.example", "A"], "192.0.2.2");
    let out = dig(m.dns, &["www.a.example", "A"]);
    assert!(
        out.contains("flags: qr aa"),
        "served authoritatively: {out}"
    );
    assert_eq!(m.get("/readyz").0, 200);

    // Changes at the primaries reach meshdns by NOTIFY (the SOA refresh is 1 s here, so the
    // logs tell which it was).
    nsd.change("a.example", &zone_text("a.example", 2, "192.0.2.11"));
    knot.change("b.example", &zone_text("b.example", 2, "192.0.2.22"));
    wait_meshdns(&m, &["www.a.example", "A"], "192.0.2.11");
    wait_meshdns(&m, &["www.b.example", "A"], "192.0.2.22");
    let log = m.log_text();
    assert!(
        log.contains("NOTIFY from the primary: refreshing zone=a.example."),
        "{log}"
    );
    assert!(
        log.contains("NOTIFY from the primary: refreshing zone=b.example."),
        "{log}"
    );
    assert!(
        log.contains("secondary zone updated by IXFR zone=b.example."),
        "Knot keeps differences: an IXFR\n{log}"
    );

    // A NOTIFY from a stranger is refused and changes nothing.
    let q = meshdns_xfr::notify::request(77, &"a.example.".parse().unwrap(), &[0; 22], 60, None, 0);
    let udp = std::net::UdpSocket::bind("127.0.0.2:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    udp.send_to(&q, m.dns).unwrap();
    let mut buf = [0u8; 512];
    let n = udp.recv(&mut buf).unwrap();
    let reply = meshdns_xfr::message::parse(&buf[..n]).unwrap();
    assert_eq!((reply.id, reply.rcode(), reply.opcode()), (77, 5, 4));
    m.wait_log("NOTIFY from an address that is not the zone's primary: ignored zone=a.example. peer=127.0.0.2");
    let metrics = m.get("/metrics").1;
    assert!(
        metrics.contains("meshdns_secondary_serial{zone=\"a.example.\"} 2"),
        "{metrics}"
    );
    m.terminate();

    // Restarted with both primaries gone: the kept copies are served at once.
    drop(nsd);
    drop(knot);
    let m = serve(&[]);
    assert_eq!(
        dig(m.dns, &["www.a.example", "A", "+short"]).trim(),
        "192.0.2.11"
    );
    assert_eq!(
        dig(m.dns, &["www.b.example", "A", "+short"]).trim(),
        "192.0.2.22"
    );
    m.wait_log("serving the kept copy of the secondary zone");
}

#[test]
fn a_secondary_stops_answering_past_expire_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "records.yaml",
        "zones:\n  - origin: example.org\n    soa: {refresh: 1, retry: 1, expire: 3}\n    records:\n      - {name: www, type: A, value: 192.0.2.1}\n",
    );
    let primary = Meshdns::serve(&["--records", &file, "--allow-transfer", "127.0.0.1"]);
    let spec = format!("example.org={}", primary.dns);
    let data = dir.path().join("data");
    let m = Meshdns::serve(&[
        "--secondary",
        &spec,
        "--data-dir",
        data.to_str().unwrap(),
        "--http",
        "127.0.0.1:0",
    ]);
    wait_meshdns(&m, &["www.example.org", "A"], "192.0.2.1");
    drop(primary);
    m.wait_log("secondary refresh failed");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let (status, body) = m.get("/readyz");
        if status == 503 {
            assert!(
                body.contains("secondary zone example.org.: expired"),
                "{body}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never expired:\n{}",
            m.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = dig(m.dns, &["www.example.org", "A"]);
    assert!(
        out.contains("status: REFUSED"),
        "an expired zone is not answered: {out}"
    );
    assert!(
        m.get("/metrics")
            .1
            .contains("meshdns_secondary_expired{zone=\"example.org.\"} 1")
    );
}

/// records file → meshdns primary → meshdns secondary, under a stream of changes: every
/// version the secondary serves (read whole, by AXFR) is one the primary served at that serial.
#[test]
fn a_chain_of_meshdns_serves_only_consistent_versions() {
    let dir = tempfile::tempdir().unwrap();
    let version = |k: u32| {
        format!(
            "zones:\n  - origin: example.org\n    records:\n      - {{name: v, type: TXT, value: \"{k}\"}}\n      - {{name: w, type: TXT, value: \"{k}\"}}\n      - {{name: n{k}, type: A, value: 192.0.2.1}}\n"
        )
    };
    let file = write(dir.path(), "records.yaml", &version(0));
    let keys = write(dir.path(), "tsig.conf", KEYS);
    let own_port = free_port();
    // Transfers by key only: the secondary signs its requests, the primary signs every message
    // of its replies (and its NOTIFY), and the secondary checks each.
    let primary = Meshdns::serve(&[
        "--records",
        &file,
        "--tsig-keys",
        &keys,
        "--allow-transfer-key",
        "xfr.",
        "--notify",
        &format!("127.0.0.1:{own_port}@xfr."),
    ]);
    let spec = format!("example.org={}@xfr.", primary.dns);
    let data = dir.path().join("data");
    let listen = format!("127.0.0.1:{own_port}");
    let secondary = Meshdns::serve(&[
        "--secondary",
        &spec,
        "--tsig-keys",
        &keys,
        "--data-dir",
        data.to_str().unwrap(),
        "--allow-transfer",
        "127.0.0.1",
        "--listen",
        &listen,
    ]);
    let mut served = std::collections::HashMap::new();
    served.insert(serial(&primary, "example.org"), 0u32);
    let mut seen = std::collections::BTreeSet::new();
    let check = |seen: &mut std::collections::BTreeSet<u32>,
                 served: &std::collections::HashMap<u32, u32>| {
        let rrs = records(&dig(secondary.dns, &["example.org", "AXFR"]));
        if rrs.is_empty() {
            return;
        }
        let s: u32 = rrs[0].split(' ').nth(6).unwrap().parse().unwrap();
        let txt = |name: &str| {
            rrs.iter()
                .find(|l| l.starts_with(&format!("{name}.example.org. ")) && l.contains(" TXT "))
                .map(|l| {
                    l.rsplit(' ')
                        .next()
                        .unwrap()
                        .trim_matches('"')
                        .parse::<u32>()
                        .unwrap()
                })
        };
        let (v, w) = (txt("v").unwrap(), txt("w").unwrap());
        assert_eq!(v, w, "one version, not a mix: {rrs:?}");
        let hosts: Vec<&String> = rrs.iter().filter(|l| l.starts_with('n')).collect();
        assert_eq!(hosts.len(), 1, "{rrs:?}");
        assert!(hosts[0].starts_with(&format!("n{v}.")), "{rrs:?}");
        if let Some(k) = served.get(&s) {
            assert_eq!(*k, v, "serial {s} was version {k} at the primary: {rrs:?}");
        }
        seen.insert(v);
    };
    for k in 1..=30u32 {
        replace(&file, version(k)).unwrap();
        let before = *served.keys().max().unwrap();
        let s = next_serial(&primary, "example.org", before);
        served.insert(s, k);
        check(&mut seen, &served);
    }
    // The secondary ends at the last version.
    wait_meshdns(&secondary, &["v.example.org", "TXT"], "\"30\"");
    check(&mut seen, &served);
    assert!(seen.len() > 3, "the secondary followed along: {seen:?}");
    assert!(
        !primary.log_text().contains("zone transfer refused"),
        "every signed request was served:\n{}",
        primary.log_text()
    );
}
