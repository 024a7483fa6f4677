//! Every configuration `serve` refuses at start is refused by `check -c` and by
//! `check --config-only -c` with the same message and exit status 2 (`docs/configuration.md`).

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::*;

/// A small records file, so `check -c` has something to read beside the configuration.
const RECORDS: &str = "zones:\n  - origin: example.org\n    records:\n      - {name: www, type: A, value: 192.0.2.1}\n";

/// A TSIG key file with one key, `k.`.
const KEYS: &str = "key \"k.\" {\n  algorithm hmac-sha256;\n  secret \"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0\";\n};\n";

/// Runs `meshdns ARGS` to its end (a `serve` that would start instead fails the test once the
/// deadline passes); its exit status and what it printed on stderr after `meshdns CMD: `.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let mut child = bin()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{args:?} started instead of refusing:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let prefix = format!("meshdns {}: ", args[0]);
    let message = stderr
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{args:?}: no `{prefix}` in {stderr:?}"))
        .trim_end()
        .to_string();
    (out.status.code(), message)
}

#[test]
fn every_refusal_of_serve_is_check_s_with_the_same_message_and_status() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "records.yaml", RECORDS);
    write(d, "keys.conf", KEYS);
    write(
        d,
        "broken-keys.conf",
        "key \"k.\" { algorithm hmac-sha256; };\n",
    );
    write(d, "garbage.pem", "not a certificate\n");
    let base = "serve:\n  listen: ['127.0.0.1:0']\n  records: [records.yaml]\n";
    // (the `serve:` block's further keys, what the message must say)
    let table: &[(&str, &str)] = &[
        (
            "  https: 127.0.0.1:0\n",
            "--https and --dot need a certificate",
        ),
        (
            "  dot: ['127.0.0.1:0']\n  tlsCert: garbage.pem\n",
            "--tls-cert needs --tls-key",
        ),
        (
            "  dot: ['127.0.0.1:0']\n  tlsKey: garbage.pem\n",
            "--tls-key needs --tls-cert",
        ),
        (
            "  dot: ['127.0.0.1:0']\n  tlsCert: a.pem\n  tlsKey: b.pem\n  tlsSelfSigned: true\n",
            "choose one",
        ),
        ("  tlsSelfSigned: true\n", "no TLS listener"),
        (
            "  dot: ['127.0.0.1:0']\n  acmeDomains: [dns.example.org]\n",
            "answered on --https",
        ),
        (
            "  dot: ['127.0.0.1:0']\n  acmeDomains: [dns.example.org]\n  acmeChallenge: http-01\n",
            "answered on --http",
        ),
        (
            "  dot: ['127.0.0.1:0']\n  http: 127.0.0.1:0\n  acmeDomains: ['*.example.org']\n  acmeChallenge: http-01\n",
            "a CA validates a wildcard name by DNS-01 only: add --acme-challenge dns-01",
        ),
        (
            "  dot: ['127.0.0.1:0']\n  tlsSelfSigned: true\n  acmeContacts: [ops@example.org]\n",
            "need --acme-domain",
        ),
        (
            "  dot: ['127.0.0.1:0']\n  tlsCert: missing.pem\n  tlsKey: missing.key\n",
            "--tls-cert/--tls-key: no certificate to serve: cannot read",
        ),
        (
            "  dot: ['127.0.0.1:0']\n  tlsCert: garbage.pem\n  tlsKey: garbage.pem\n",
            "--tls-cert/--tls-key: no certificate to serve",
        ),
        (
            "  http: 127.0.0.1:0\n  dot: ['127.0.0.1:0']\n  acmeDomains: [dns.example.org]\n  acmeChallenge: http-01\n  acmeCa: missing-ca.pem\n  dataDir: data\n",
            "--acme-ca",
        ),
        (
            "  tsigKeys: missing.conf\n  allowTransferKeys: [k.]\n",
            "--tsig-keys (tsigKeys): cannot read",
        ),
        (
            "  tsigKeys: broken-keys.conf\n  allowTransferKeys: [k.]\n",
            "--tsig-keys (tsigKeys):",
        ),
        (
            "  tsigKeys: keys.conf\n  allowTransferKeys: [nope.]\n",
            "--allow-transfer-key (allowTransferKeys) nope.: no such key in --tsig-keys (keys: k.)",
        ),
        (
            "  tsigKeys: keys.conf\n  notify: ['127.0.0.1:5300@nope.']\n",
            "--notify (notify) nope.: no such key",
        ),
        (
            "  secondaries: ['example.net=127.0.0.1:5300@nope.']\n  dataDir: data\n",
            "--secondary (secondaries) nope.: no such key in --tsig-keys (keys: none)",
        ),
        ("  writeStatus: true\n", "--write-status (writeStatus)"),
        (
            "  updateZones: [dyn.example]\n  dataDir: data\n",
            "--update-zone (updateZones) is written only by UPDATEs signed with a granted key",
        ),
        (
            "  tsigKeys: keys.conf\n  updateZones: [dyn.example]\n  allowUpdate: [k.]\n  updateMaxRecords: 0\n  dataDir: data\n",
            "--update-max-records (updateMaxRecords) 0 would refuse every record: at least 1",
        ),
        (
            "  tsigKeys: keys.conf\n  allowTransferKeys: [k.]\n  views: ['inside=10.0.0.0/8']\n  viewKeys: ['insde=k.']\n",
            "--view-key (viewKeys) insde=k.: no view \"insde\" is given by --view (views: inside)",
        ),
        (
            "  tsigKeys: keys.conf\n  views: ['inside=10.0.0.0/8']\n  viewKeys: ['inside=k.']\n",
            "--view-key (viewKeys) selects a view for zone transfers and NOTIFY: it needs",
        ),
        (
            "  allowUpdate: [k.]\n",
            "--allow-update (allowUpdate) grants UPDATE of update zones: it needs --update-zone",
        ),
        (
            "  tsigKeys: keys.conf\n  updateZones: [dyn.example]\n  allowUpdate: ['k.=other.example', 'nope.']\n  dataDir: data\n",
            "--allow-update (allowUpdate) k.=other.example.: other.example. is not an update zone",
        ),
        (
            "  allowNotify: [10.0.0.0/8]\n",
            "--allow-notify (allowNotify) says who may NOTIFY a secondary zone",
        ),
        (
            "  nsid: 'replica a'\n",
            "--nsid (nsid) \"replica a\" has byte 0x20 at 7",
        ),
        ("  nope: 1\n", "unknown field `nope`"),
        (
            "  ednsPayload: 100\n",
            "serve.ednsPayload: \"100\": expected a payload size from 512 to 65535 at line",
        ),
        // Several problems are reported together.
        (
            "  writeStatus: true\n  tlsSelfSigned: true\n  tsigKeys: keys.conf\n  allowTransferKeys: [nope.]\n",
            "3 problems in the configuration:\n  a TLS certificate is set but no TLS listener",
        ),
    ];
    for (i, (extra, want)) in table.iter().enumerate() {
        let cfg = write(d, &format!("c{i}.yaml"), &format!("{base}{extra}"));
        let serve = refused(&["serve", "-c", &cfg]);
        assert_eq!(serve.0, Some(2), "serve: {extra}{}", serve.1);
        assert!(serve.1.contains(want), "serve: {extra}: {}", serve.1);
        for check in [
            &["check", "-c", &cfg][..],
            &["check", "--config-only", "-c", &cfg],
        ] {
            assert_eq!(refused(check), serve, "{check:?}: {extra}");
        }
    }
}

#[test]
fn a_configuration_serve_accepts_passes_both_checks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "records.yaml", RECORDS);
    write(d, "keys.conf", KEYS);
    let cfg = write(
        d,
        "c.yaml",
        "serve:\n  listen: ['127.0.0.1:0']\n  records: [records.yaml]\n  tsigKeys: keys.conf\n  allowTransferKeys: [k.]\n  notify: ['127.0.0.1:5300@k.']\n  dataDir: data\n  dot: ['127.0.0.1:0']\n  tlsSelfSigned: true\n",
    );
    for args in [
        &["check", "-c", &cfg][..],
        &["check", "--config-only", "-c", &cfg],
    ] {
        let out = bin().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A config file that cannot be read is a refused configuration for all three, alike.
#[test]
fn a_missing_config_file_is_refused_alike() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.yaml");
    let missing = missing.to_str().unwrap();
    let serve = refused(&["serve", "-c", missing]);
    assert_eq!(serve.0, Some(2), "{}", serve.1);
    assert!(serve.1.contains("cannot read config file"), "{}", serve.1);
    for check in [
        &["check", "-c", missing][..],
        &["check", "--config-only", "-c", missing],
    ] {
        assert_eq!(refused(check), serve, "{check:?}");
    }
}
