//! `serve --reverse-zone CIDR`: PTR records for every address served in a range, from any
//! source, asked with `dig -x`; the zones' edges (NXDOMAIN inside, REFUSED outside); an
//! explicit PTR winning; a change followed; the zone transferred and read by NSD's checker.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::*;

const RECORDS: &str = "zones:
  - origin: example.org
    records:
      - {name: www, type: A, value: 100.64.1.2}
      - {name: mail, type: A, value: 100.64.1.2}
      - {name: '*.apps', type: A, value: 100.64.9.9}
      - {name: db, type: AAAA, value: 'fd7a:115c:a1e0::5'}
      - {name: named, type: A, value: 100.64.1.3}
      - {name: outside, type: A, value: 192.0.2.1}
  - origin: 64.100.in-addr.arpa
    records:
      - {name: 3.1, type: PTR, value: explicit.example.org.}
";

fn short(m: &Meshdns, args: &[&str]) -> Vec<String> {
    let mut args = args.to_vec();
    args.push("+short");
    let mut out: Vec<String> = dig(m.dns, &args).lines().map(str::to_string).collect();
    out.sort();
    out
}

#[test]
fn addresses_served_in_a_range_have_their_names_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "records.yaml", RECORDS);
    let m = Meshdns::serve(&[
        "--records",
        &file,
        "--reverse-zone",
        "100.64.0.0/10",
        "--reverse-zone",
        "fd7a:115c:a1e0::/48",
        "--allow-transfer",
        "127.0.0.1",
    ]);
    // Two names, one address: two PTRs. IPv6 by nibbles.
    assert_eq!(
        short(&m, &["-x", "100.64.1.2"]),
        ["mail.example.org.", "www.example.org."]
    );
    assert_eq!(short(&m, &["-x", "fd7a:115c:a1e0::5"]), ["db.example.org."]);
    // A PTR a source gives wins over the generated one.
    assert_eq!(short(&m, &["-x", "100.64.1.3"]), ["explicit.example.org."]);
    // A wildcard names no one address; inside the range that is NXDOMAIN with the zone's SOA.
    let wild = dig(m.dns, &["-x", "100.64.9.9"]);
    assert!(wild.contains("status: NXDOMAIN"), "{wild}");
    assert!(wild.contains("64.100.in-addr.arpa."), "{wild}");
    // Each aligned zone of the /10 is served; outside every range, REFUSED.
    for zone in [
        "64.100.in-addr.arpa",
        "127.100.in-addr.arpa",
        "0.e.1.a.c.5.1.1.a.7.d.f.ip6.arpa",
    ] {
        assert!(
            dig(m.dns, &[zone, "SOA"]).contains("status: NOERROR"),
            "{zone}"
        );
    }
    assert!(dig(m.dns, &["-x", "100.128.0.1"]).contains("status: REFUSED"));
    assert!(dig(m.dns, &["-x", "192.0.2.1"]).contains("status: REFUSED"));

    // The address moves: the PTRs follow.
    let moved = RECORDS.replace(
        "{name: mail, type: A, value: 100.64.1.2}",
        "{name: mail, type: A, value: 100.64.1.4}",
    );
    std::fs::write(&file, moved).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while short(&m, &["-x", "100.64.1.4"]) != ["mail.example.org."] {
        assert!(
            Instant::now() < deadline,
            "the PTR did not follow the address"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(short(&m, &["-x", "100.64.1.2"]), ["www.example.org."]);

    // The reverse zone transfers like any zone, and NSD's checker reads it.
    let axfr = dig(m.dns, &["64.100.in-addr.arpa", "AXFR", "+noall", "+answer"]);
    let text: String = axfr
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(text.contains("PTR\twww.example.org."), "{axfr}");
    let path = dir.path().join("reverse.zone");
    std::fs::write(&path, &text).unwrap();
    let out = Command::new("nsd-checkzone")
        .arg("64.100.in-addr.arpa")
        .arg(&path)
        .output()
        .expect("nsd-checkzone (apt-get install nsd)");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
