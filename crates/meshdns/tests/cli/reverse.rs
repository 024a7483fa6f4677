//! `serve --reverse-zone CIDR`: PTR records for every address served in a range, from any
//! source, asked with `dig -x`; the zones' edges (NXDOMAIN inside, REFUSED outside); an
//! explicit PTR winning; a change followed; the zone transferred, read by NSD's checker, and
//! followed by a running NSD secondary.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::secondaries::{Secondary, free_port};
use crate::xfr::replace;
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

/// The reverse zones of a Service's addresses (read by `--kube-source` from a manifests
/// directory) and of a records file's, followed by a real NSD secondary: transferred, and
/// changed on NOTIFY when an address moves.
#[test]
fn an_nsd_secondary_follows_the_reverse_zones() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "records.yaml",
        "zones:\n  - origin: example.org\n    records:\n      - {name: www, type: A, value: 192.0.2.2}\n",
    );
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    let service = |v4: &str| {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\n  annotations: {{external-dns.kubernetes.io/hostname: web.example.org}}\nspec: {{type: LoadBalancer}}\nstatus:\n  loadBalancer:\n    ingress: [{{ip: {v4}}}, {{ip: '2001:db8::10'}}]\n"
        )
    };
    let svc = write(&manifests, "web.yaml", &service("192.0.2.10"));
    let nsd_port = free_port();
    let data = dir.path().join("data");
    let m = Meshdns::serve(&[
        "--records",
        &file,
        "--manifests",
        manifests.to_str().unwrap(),
        "--kube-source",
        "service",
        "--reverse-zone",
        "192.0.2.0/24",
        "--reverse-zone",
        "2001:db8::/32",
        "--data-dir",
        data.to_str().unwrap(),
        "--allow-transfer",
        "127.0.0.0/8",
        "--notify",
        &format!("127.0.0.1:{nsd_port}"),
    ]);
    assert_eq!(short(&m, &["-x", "192.0.2.10"]), ["web.example.org."]);
    assert_eq!(short(&m, &["-x", "2001:db8::10"]), ["web.example.org."]);
    let v4 = "2.0.192.in-addr.arpa";
    let v6 = "8.b.d.0.1.0.0.2.ip6.arpa";
    let nsd_dir = dir.path().join("nsd");
    std::fs::create_dir(&nsd_dir).unwrap();
    let nsd = Secondary::nsd(&nsd_dir, nsd_port, m.dns, &[v4, v6], "127.0.0.2");
    nsd.wait_answer(&["-x", "192.0.2.10"], "web.example.org.", 20);
    nsd.wait_answer(&["-x", "192.0.2.2"], "www.example.org.", 20);
    nsd.wait_answer(&["-x", "2001:db8::10"], "web.example.org.", 20);

    // The load balancer's address moves: the secondary follows, by NOTIFY.
    replace(&svc, service("192.0.2.11")).unwrap();
    nsd.wait_answer(&["-x", "192.0.2.11"], "web.example.org.", 10);
    let gone = dig(nsd.addr, &["-x", "192.0.2.10"]);
    assert!(gone.contains("status: NXDOMAIN"), "{gone}");
    let log = m.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("peer=127.0.0.2") && l.contains(&format!("zone={v4}."))),
        "nsd transferred {v4}:\n{log}"
    );
}
