//! Record types beyond RFC 1035's (issue 31, first part): TLSA, SSHFP, DS at a zone cut, URI,
//! NAPTR, HINFO, SVCB and HTTPS, and a type meshdns does not know in the RFC 3597 form, read from a zone file
//! and a records file, answered as `dig` shows them, transferred by AXFR to NSD and Knot
//! (which load them and answer the same), and bad data refused naming the line and the rule.

use crate::secondaries::{Secondary, free_port};
use crate::*;

const H32: &str = "abababababababababababababababababababababababababababababababab";

fn zone() -> String {
    [
        "$ORIGIN example.org.",
        "$TTL 300",
        "@ SOA ns1 hostmaster 1 3600 600 86400 60",
        "@ NS ns1",
        "ns1 A 192.0.2.53",
        &format!("_443._tcp.www TLSA 3 1 1 {H32}"),
        &format!("host SSHFP 4 2 {H32}"),
        "sub NS ns.sub",
        "ns.sub A 192.0.2.54",
        &format!("sub DS 60485 13 2 {H32}"),
        "_http._tcp URI 10 1 \"https://www.example.org/\"",
        "sip NAPTR 100 10 \"S\" \"SIP+D2U\" \"\" _sip._udp",
        "host HINFO \"amd64\" \"linux\"",
        "odd TYPE65534 \\# 4 0A000001",
        "www HTTPS 1 . alpn=h2,h3 ipv4hint=192.0.2.1",
        "_dns SVCB 1 dns mandatory=alpn alpn=dot port=853",
        "",
    ]
    .join("\n")
}

/// (name, type, what `dig +short` shows).
fn expected() -> Vec<(&'static str, &'static str, String)> {
    let hex = H32.to_uppercase();
    // dig splits long hexadecimal data into groups of 56 characters.
    let grouped = format!("{} {}", &hex[..56], &hex[56..]);
    vec![
        (
            "_443._tcp.www.example.org",
            "TLSA",
            format!("3 1 1 {grouped}"),
        ),
        ("host.example.org", "SSHFP", format!("4 2 {grouped}")),
        ("sub.example.org", "DS", format!("60485 13 2 {grouped}")),
        (
            "_http._tcp.example.org",
            "URI",
            "10 1 \"https://www.example.org/\"".into(),
        ),
        (
            "sip.example.org",
            "NAPTR",
            "100 10 \"S\" \"SIP+D2U\" \"\" _sip._udp.example.org.".into(),
        ),
        ("host.example.org", "HINFO", "\"amd64\" \"linux\"".into()),
        ("odd.example.org", "TYPE65534", "\\# 4 0A000001".into()),
        (
            "www.example.org",
            "HTTPS",
            "1 . alpn=\"h2,h3\" ipv4hint=192.0.2.1".into(),
        ),
        (
            "_dns.example.org",
            "SVCB",
            "1 dns.example.org. mandatory=alpn alpn=\"dot\" port=853".into(),
        ),
    ]
}

#[test]
fn new_record_types_are_served_and_transferred_to_nsd_and_knot() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "example.org.zone", &zone());
    // The child zone is served here too: its DS still comes from the parent's side of the cut.
    let m = Meshdns::serve(&[
        "--zone-file",
        &file,
        "--zone",
        "sub.example.org",
        "--allow-transfer",
        "127.0.0.0/8",
    ]);
    for (name, rtype, shown) in expected() {
        let out = dig(m.dns, &[name, rtype, "+short"]);
        assert_eq!(out.trim(), shown, "{name} {rtype}");
    }
    // DS is answered by the parent side of the cut, authoritatively.
    let ds = dig(m.dns, &["sub.example.org", "DS"]);
    assert!(ds.contains(" aa"), "{ds}");
    let nsd_dir = dir.path().join("nsd");
    let knot_dir = dir.path().join("knot");
    std::fs::create_dir_all(&nsd_dir).unwrap();
    let nsd = Secondary::nsd(&nsd_dir, free_port(), m.dns, &["example.org"], "127.0.0.2");
    let knot = Secondary::knot(&knot_dir, free_port(), m.dns, &["example.org"], "127.0.0.3");
    for secondary in [&nsd, &knot] {
        for (name, rtype, shown) in expected() {
            secondary.wait_answer(&[name, rtype], &shown, 20);
        }
    }
}

#[test]
fn records_files_read_the_new_types_and_bad_data_is_refused_naming_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = write(
        dir.path(),
        "zones.yaml",
        &format!(
            "zones:\n  - origin: example.org.\n    records:\n      - {{ name: _443._tcp.www, type: TLSA, value: \"3 1 1 {H32}\" }}\n      - {{ name: odd, type: TYPE65534, value: '\\# 4 0A000001' }}\n      - {{ name: bad, type: TLSA, value: '3 1 1 nothex' }}\n      - {{ name: sig, type: RRSIG, value: '\\# 1 00' }}\n"
        ),
    );
    let out = bin().args(["check", &yaml]).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("is not hexadecimal"), "{text}");
    assert!(text.contains("does not sign zones"), "{text}");
    let m = Meshdns::serve(&["--records", &yaml]);
    let (name, rtype, shown) = &expected()[0];
    assert_eq!(dig(m.dns, &[name, rtype, "+short"]).trim(), shown);
    assert_eq!(
        dig(m.dns, &["odd.example.org", "TYPE65534", "+short"]).trim(),
        "\\# 4 0A000001"
    );
    assert!(dig(m.dns, &["bad.example.org", "TLSA"]).contains("NXDOMAIN"));
}
