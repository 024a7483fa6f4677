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

/// The records of `dig +noall +SECTION` lines, whitespace collapsed ("owner ttl IN type data").
fn section(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with(';'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn a_dname_synthesises_cnames_and_svcb_targets_come_with_their_addresses() {
    let dir = tempfile::tempdir().unwrap();
    // A target of 248 bytes: any name of more than 7 bytes above `long` cannot be substituted.
    let l63 = "a".repeat(63);
    let long_target = format!("{l63}.{l63}.{l63}.{}.", "b".repeat(50));
    let file = write(
        dir.path(),
        "example.org.zone",
        &[
            "$ORIGIN example.org.",
            "$TTL 300",
            "@ SOA ns1 hostmaster 1 3600 600 86400 60",
            "@ NS ns1",
            "ns1 A 192.0.2.53",
            "old 120 DNAME new",
            "old TXT \"the owner keeps its own data\"",
            "www.new A 192.0.2.80",
            "www.new AAAA 2001:db8::80",
            "alias.new CNAME www.new",
            "away DNAME example.net.",
            &format!("long DNAME {long_target}"),
            "svc HTTPS 1 www.new alpn=h2",
            "self HTTPS 1 . alpn=h2",
            "self A 192.0.2.81",
            "front HTTPS 0 svc",
            "",
        ]
        .join("\n"),
    );
    let m = Meshdns::serve(&["--zone-file", &file, "--allow-transfer", "127.0.0.0/8"]);
    let answer =
        |name: &str, rtype: &str| section(&dig(m.dns, &[name, rtype, "+noall", "+answer"]));
    // A name below the DNAME: the DNAME, the CNAME it synthesises (the DNAME's TTL, the case
    // asked), then the target's data, followed in the zone.
    assert_eq!(
        answer("WWW.old.example.org", "A"),
        [
            "old.example.org. 120 IN DNAME new.example.org.",
            "WWW.old.example.org. 120 IN CNAME www.new.example.org.",
            "www.new.example.org. 300 IN A 192.0.2.80",
        ]
    );
    // Through a CNAME at the target, with the RCODE of the last name (RFC 6604).
    assert_eq!(
        answer("alias.old.example.org", "AAAA"),
        [
            "old.example.org. 120 IN DNAME new.example.org.",
            "alias.old.example.org. 120 IN CNAME alias.new.example.org.",
            "alias.new.example.org. 300 IN CNAME www.new.example.org.",
            "www.new.example.org. 300 IN AAAA 2001:db8::80",
        ]
    );
    let missing = dig(m.dns, &["nothing.old.example.org", "A"]);
    assert!(missing.contains("status: NXDOMAIN"), "{missing}");
    assert!(
        section(&missing)
            .contains(&"nothing.old.example.org. 120 IN CNAME nothing.new.example.org.".into()),
        "{missing}"
    );
    // The owner itself is not redirected.
    assert_eq!(
        answer("old.example.org", "TXT"),
        ["old.example.org. 300 IN TXT \"the owner keeps its own data\""]
    );
    assert_eq!(
        answer("old.example.org", "DNAME"),
        ["old.example.org. 120 IN DNAME new.example.org."]
    );
    // A target outside the zone: the DNAME and the CNAME, nothing followed.
    assert_eq!(
        answer("a.b.away.example.org", "A"),
        [
            "away.example.org. 300 IN DNAME example.net.",
            "a.b.away.example.org. 300 IN CNAME a.b.example.net.",
        ]
    );
    // A substitution longer than a name can be: YXDOMAIN (RFC 6672 §2.2), the DNAME given.
    let long = dig(m.dns, &["too-long-a-name.long.example.org", "A"]);
    assert!(long.contains("status: YXDOMAIN"), "{long}");
    assert!(
        section(&long).iter().any(|r| r.contains(" IN DNAME ")),
        "{long}"
    );
    // Over TCP too, and by AXFR the DNAME goes as it is.
    let tcp = dig(m.dns, &["WWW.old.example.org", "A", "+tcp", "+short"]);
    assert_eq!(
        tcp.trim(),
        "new.example.org.\nwww.new.example.org.\n192.0.2.80"
    );
    let axfr = dig(m.dns, &["example.org", "AXFR"]);
    assert!(
        axfr.contains("old.example.org.\t120\tIN\tDNAME\tnew.example.org."),
        "{axfr}"
    );

    // SVCB/HTTPS (RFC 9460 §4.1): the target's addresses in additional; "." is the owner.
    let additional = |name: &str| section(&dig(m.dns, &[name, "HTTPS", "+noall", "+additional"]));
    assert_eq!(
        additional("svc.example.org"),
        [
            "www.new.example.org. 300 IN A 192.0.2.80",
            "www.new.example.org. 300 IN AAAA 2001:db8::80",
        ]
    );
    assert_eq!(
        additional("self.example.org"),
        ["self.example.org. 300 IN A 192.0.2.81"]
    );
    // AliasMode: the target's own HTTPS RRset too.
    assert_eq!(
        additional("front.example.org"),
        ["svc.example.org. 300 IN HTTPS 1 www.new.example.org. alpn=\"h2\""]
    );
}

#[test]
fn data_below_a_dname_is_refused_naming_it_and_the_rest_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "example.org.zone",
        "$ORIGIN example.org.\n$TTL 300\nold DNAME new\nx.old A 192.0.2.1\nkept A 192.0.2.2\n",
    );
    let out = bin().args(["check", &file]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Skipped as any invalid entry is: reported, and the file still usable.
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(
        stdout.trim(),
        format!(
            "{file}: x.old.example.org. A: x.old.example.org. is below the DNAME at old.example.org., which redirects every name below it (RFC 6672 §2.3)"
        )
    );
    let m = Meshdns::serve(&["--zone-file", &file]);
    assert_eq!(
        dig(m.dns, &["kept.example.org", "A", "+short"]).trim(),
        "192.0.2.2"
    );
    assert_eq!(
        dig(m.dns, &["x.old.example.org", "A", "+short"]).trim(),
        "new.example.org.\nx.new.example.org."
    );
}
