//! meshdns as a secondary of Knot with a TSIG key: the SOA query of each refresh is signed,
//! and Knot's signed reply is the one meshdns accepts.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::secondaries::{Secondary, free_port};
use crate::*;

const SECRET: &str = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=";

/// Before, the SOA query was unsigned, so a forged "nothing newer" could hold the zone. Now it
/// is signed and only a reply signed with the key counts; Knot, which signs its answers to
/// signed queries as RFC 8945 asks, keeps meshdns refreshed and transferring with the key alone
/// (its ACL allows nothing unsigned).
#[test]
fn meshdns_follows_a_knot_primary_with_signed_soa_queries() {
    let dir = tempfile::tempdir().unwrap();
    let knot_dir = dir.path().join("knot");
    std::fs::create_dir_all(knot_dir.join("db")).unwrap();
    let port = free_port();
    let d = knot_dir.display();
    let zone = |serial: u32, ip: &str| {
        format!(
            "$ORIGIN b.example.\n$TTL 60\n@ SOA ns hostmaster {serial} 1 1 3600 60\n@ NS ns\nns A 192.0.2.53\nwww A {ip}\n"
        )
    };
    std::fs::write(knot_dir.join("b.example.zone"), zone(1, "192.0.2.2")).unwrap();
    let conf = format!(
        "server:\n  listen: 127.0.0.1@{port}\n  rundir: {d}\n  user: root\nlog:\n  - target: {d}/knot.log\n    any: info\ndatabase:\n  storage: {d}/db\nkey:\n  - id: xfr.\n    algorithm: hmac-sha256\n    secret: {SECRET}\nacl:\n  - id: transfer\n    address: 127.0.0.0/8\n    key: xfr.\n    action: transfer\ntemplate:\n  - id: default\n    storage: {d}\n    zonefile-sync: -1\n    zonefile-load: difference\n    journal-content: changes\n    semantic-checks: off\nzone:\n  - domain: b.example\n    file: b.example.zone\n    acl: transfer\n"
    );
    std::fs::write(knot_dir.join("knot.conf"), conf).unwrap();
    let child = Command::new("knotd")
        .arg("-c")
        .arg(knot_dir.join("knot.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("knotd is installed (.ci/run installs knot)");
    let knot = Secondary {
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        log: knot_dir.join("knot.log"),
        name: "knot",
    };
    let keys = write(
        dir.path(),
        "tsig.conf",
        &format!("key \"xfr.\" {{\n  algorithm hmac-sha256;\n  secret \"{SECRET}\";\n}};\n"),
    );
    let spec = format!("b.example={}@xfr.", knot.addr);
    let data = dir.path().join("data");
    let m = Meshdns::serve(&[
        "--secondary",
        &spec,
        "--tsig-keys",
        &keys,
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    let wait = |want: &str| {
        // Knot and meshdns are other processes: poll what meshdns answers.
        let deadline = Instant::now() + Duration::from_secs(30);
        while dig(m.dns, &["www.b.example", "A", "+short"]).trim() != want {
            assert!(
                Instant::now() < deadline,
                "never answered {want}:\n{}\nknot: {}",
                m.log_text(),
                knot.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait("192.0.2.2");
    // A change at Knot (SOA refresh 1 s): the signed SOA query sees the new serial.
    std::fs::write(knot_dir.join("b.example.zone"), zone(2, "192.0.2.22")).unwrap();
    let out = Command::new("knotc")
        .arg("-c")
        .arg(knot_dir.join("knot.conf"))
        .args(["zone-reload", "b.example"])
        .output()
        .expect("knotc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait("192.0.2.22");
}
