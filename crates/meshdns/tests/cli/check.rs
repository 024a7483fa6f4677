//! `meshdns check`: every problem as `FILE: ENTRY: REASON`, exit 1 when a file is unusable.

use crate::*;

fn check(args: &[&str]) -> (i32, String, String) {
    let out = bin().arg("check").args(args).output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_prints_each_skipped_entry_and_exits_zero_when_usable() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "records.json",
        r#"{"version":"v1alpha1","ip4":{"a.ts.net":["100.64.0.1","nope"],"b..ts.net":["1.2.3.4"]},"ip6":{"c.ts.net":["100.64.0.2"]}}"#,
    );
    let (code, stdout, stderr) = check(&[&f]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            format!("{f}: ip4.a.ts.net[1]: \"nope\" is not an IPv4 address"),
            format!("{f}: ip4.b..ts.net: \"b..ts.net\" is not a valid DNS name: empty label"),
            format!(
                "{f}: ip6.c.ts.net[0]: \"100.64.0.2\" is an IPv4 address where IPv6 is expected"
            ),
        ]
    );
    assert!(
        stderr.contains("ok: 3 records served (SOA and NS included) in 1 zone(s), 3 skipped"),
        "{stderr}"
    );
}

#[test]
fn check_exits_one_for_an_unusable_file_and_still_checks_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "bad.json", r#"{"version":"v9"}"#);
    let zone = write(
        dir.path(),
        "z.zone",
        "$ORIGIN example.org.\nwww A 192.0.2.1\nmail MX ten mail\nx TXT \"open\n",
    );
    let good = write(
        dir.path(),
        "good.yaml",
        "zones:\n  - origin: example.net\n    records:\n      - {name: a, type: A, value: 192.0.2.1}\n      - {name: a, type: CNAME, value: b}\n",
    );
    let (code, stdout, _) = check(&[&bad, &zone, &good]);
    assert_eq!(code, 1);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            format!("{bad}: version: unsupported version \"v9\"; supported: v1alpha1"),
            format!("{zone}: line 4: unterminated quoted string"),
            format!(
                "{good}: a.example.net. CNAME: a.example.net. cannot have a CNAME and other records (RFC 1034 §3.6.2)"
            ),
        ]
    );
}

#[test]
fn check_reports_conflicts_between_files_as_serve_would() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(
        dir.path(),
        "a.json",
        r#"{"version":"v1alpha1","ip4":{"x.ts.net":["100.64.0.1"]}}"#,
    );
    let b = write(
        dir.path(),
        "b.yaml",
        "zones: [{origin: ts.net, records: [{name: x, type: A, value: 100.64.0.2}]}]\n",
    );
    let (code, stdout, _) = check(&[&a, &b]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout.trim(),
        format!(
            "{b}: x.ts.net. A: already provided by {a}, which takes precedence (sources listed first win)"
        )
    );
    let zone = write(dir.path(), "plain", "www A 192.0.2.1\n");
    let (code, stdout, _) = check(&["--zone-file", &format!("example.org.={zone}")]);
    assert_eq!((code, stdout.as_str()), (0, ""));
}

const MANIFESTS: &str = "apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSZone
metadata: {name: z, namespace: dns}
spec: {domainName: example.org}
---
apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata: {name: www, namespace: dns}
spec:
  dnsZoneRef: {name: z}
  recordType: A
  records:
  - {name: www, a: {content: 192.0.2.1}}
  - {name: bad, a: {content: nope}}
";

/// A directory of manifests is read as `serve --manifests` reads it, whether given as
/// `--manifests`, as a positional path, or through a config file's `serve:` block (beside the
/// other commands' blocks).
#[test]
fn check_reads_manifest_directories_and_config_files_as_serve_does() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    write(&manifests, "zone.yaml", MANIFESTS);
    write(&manifests, "README.txt", "not a manifest");
    let m = manifests.display().to_string();
    let config = write(
        dir.path(),
        "meshdns.yaml",
        "serve:\n  manifests: [manifests]\n  listen: ['127.0.0.1:0']\niroh:\n  dnsZoneRef: {namespace: dns, name: z}\nmesh:\n  namespace: kilo\n",
    );
    for args in [vec!["--manifests", &m], vec![&m], vec!["-c", &config]] {
        let (code, stdout, stderr) = check(&args);
        assert_eq!(code, 0, "{args:?}: {stdout}{stderr}");
        assert_eq!(
            stdout,
            format!(
                "{m}: DNSRecordSet dns/www records[1].a: \"nope\": \"nope\" is not an IPv4 address\n"
            ),
            "{args:?}"
        );
        assert!(
            stderr.contains(&format!(
                "{m}: ok: 3 records served (SOA and NS included) in 1 zone(s), 1 skipped"
            )),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn check_refuses_bad_flags_before_reading_anything() {
    let (code, _, stderr) = check(&["--default-ttl", "forever", "x.json"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--default-ttl"), "{stderr}");
    let (code, _, stderr) = check(&[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("nothing to check"), "{stderr}");
}
