//! The configuration as users meet it: one file for every command, flags over the file in
//! both directions, values refused by clap before anything starts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use meshdns_sources::FileKind;

use super::values::LogFormat;
use super::*;
use crate::cli::{Cli, Command, ControllerTarget, RenderTarget};

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn parse(args: &[&str]) -> Command {
    Cli::try_parse_from(std::iter::once("meshdns").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        .command
}

fn serve(args: &[&str]) -> ServeConfig {
    match parse(args) {
        Command::Serve(cmd) => cmd.resolve().unwrap(),
        other => panic!("{other:?}"),
    }
}

const EVERY_BLOCK: &str = "serve:
  listen: ['127.0.0.1:5353']
  records: [a.json]
  zoneFiles: ['example.org=ex.zone']
  defaultTtl: 1m
  workers: 3
  doh: false
  kubernetes: true
  tcpIdleTimeout: 30s
  logFormat: json
iroh:
  dnsZoneRef: {namespace: dns, name: z}
  dnsEnabled: false
  downstreamKubeconfigPath: downstream.kubeconfig
mesh:
  namespace: kilo
  resyncSeconds: 60
";

#[test]
fn flags_override_the_file_and_paths_are_relative_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "meshdns.yaml", EVERY_BLOCK);
    let s = serve(&["serve", "-c", &cfg, "--workers", "1"]);
    assert_eq!(s.listen, vec!["127.0.0.1:5353".parse().unwrap()]);
    let files = s.files();
    assert_eq!(files[0].path, dir.path().join("a.json"));
    assert_eq!(files[1].path, dir.path().join("ex.zone"));
    assert_eq!(
        files[1].kind,
        FileKind::ZoneFile {
            origin: Some("example.org.".parse().unwrap()),
            views: Vec::new(),
        }
    );
    assert_eq!(s.default_ttl(), 60);
    assert_eq!(s.workers, Some(1));
    assert_eq!(s.tcp_idle_timeout, Some(Duration::from_secs(30)));
    assert_eq!(s.log_format, Some(LogFormat::Json));
    assert_eq!(s.parse_settings().tailscale_zones[0].to_string(), "ts.net.");
}

#[test]
fn one_file_configures_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "meshdns.yaml", EVERY_BLOCK);
    // serve reads serve: and accepts the others.
    assert_eq!(serve(&["serve", "-c", &cfg]).workers, Some(3));
    // The controllers read their own blocks and accept serve:.
    let Command::Controller(ControllerTarget::Iroh(iroh)) =
        parse(&["controller", "iroh", "-c", &cfg])
    else {
        panic!()
    };
    let iroh = iroh.resolve().unwrap();
    assert_eq!(iroh.settings().unwrap().zone_namespace, "dns");
    assert_eq!(iroh.dns_enabled, Some(false));
    assert_eq!(
        iroh.downstream_kubeconfig_path,
        Some(dir.path().join("downstream.kubeconfig"))
    );
    let Command::Controller(ControllerTarget::Mesh(mesh)) =
        parse(&["controller", "mesh", "-c", &cfg])
    else {
        panic!()
    };
    let mesh = mesh.resolve().unwrap();
    assert_eq!(mesh.namespace(), "kilo");
    assert_eq!(mesh.resync(), Duration::from_secs(60));
    // check reads what serve reads.
    let Command::Check(check) = parse(&["check", "-c", &cfg, "extra.json"]) else {
        panic!()
    };
    let checked = check.resolve();
    // The file asks for --kubernetes, which check cannot read.
    assert!(
        format!("{:#}", checked.unwrap_err()).contains("--kubernetes"),
        "check refuses a cluster source"
    );
    let Command::Check(check) = parse(&["check", "-c", &cfg, "--no-kubernetes", "extra.json"])
    else {
        panic!()
    };
    let files: Vec<PathBuf> = check
        .resolve()
        .unwrap()
        .files()
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(
        files,
        vec![
            PathBuf::from("extra.json"),
            dir.path().join("a.json"),
            dir.path().join("ex.zone")
        ]
    );
}

#[test]
fn every_toggle_overrides_the_file_in_both_directions() {
    let dir = tempfile::tempdir().unwrap();
    let on = write(
        dir.path(),
        "on.yaml",
        "serve: {doh: true, kubernetes: true}\n",
    );
    let off = write(
        dir.path(),
        "off.yaml",
        "serve: {doh: false, kubernetes: false}\n",
    );
    let none = write(dir.path(), "none.yaml", "serve: {}\n");
    assert_eq!(serve(&["serve", "-c", &on]).doh, Some(true));
    assert_eq!(serve(&["serve", "-c", &on, "--no-doh"]).doh, Some(false));
    assert_eq!(serve(&["serve", "-c", &on, "--doh=false"]).doh, Some(false));
    assert_eq!(serve(&["serve", "-c", &off, "--doh"]).doh, Some(true));
    assert_eq!(serve(&["serve", "-c", &off, "--doh=true"]).doh, Some(true));
    assert_eq!(serve(&["serve", "-c", &none]).doh, None);
    // The last of a pair wins.
    assert_eq!(serve(&["serve", "--no-doh", "--doh"]).doh, Some(true));
    assert_eq!(serve(&["serve", "--doh", "--no-doh"]).doh, Some(false));
    assert!(
        serve(&["serve", "-c", &on, "--no-kubernetes"])
            .kubernetes()
            .is_none()
    );
    assert!(
        serve(&["serve", "-c", &off, "--kubernetes"])
            .kubernetes()
            .is_some()
    );

    let tls = write(dir.path(), "tls.yaml", "serve: {tlsSelfSigned: true}\n");
    assert_eq!(serve(&["serve", "-c", &tls]).tls_self_signed, Some(true));
    assert_eq!(
        serve(&["serve", "-c", &tls, "--no-tls-self-signed"]).tls_self_signed,
        Some(false)
    );
    assert_eq!(
        serve(&["serve", "--no-tls-self-signed", "--tls-self-signed"]).tls_self_signed,
        Some(true)
    );

    let iroh = write(
        dir.path(),
        "iroh.yaml",
        "iroh: {dnsZoneRef: {namespace: dns, name: z}, dnsEnabled: true, includeLocal: false}\n",
    );
    let Command::Controller(ControllerTarget::Iroh(cmd)) = parse(&[
        "controller",
        "iroh",
        "-c",
        &iroh,
        "--no-dns-enabled",
        "--include-local",
        "--dns-zone-name",
        "other",
    ]) else {
        panic!()
    };
    let iroh = cmd.resolve().unwrap();
    assert_eq!(iroh.dns_enabled, Some(false));
    assert_eq!(iroh.include_local, Some(true));
    assert_eq!(iroh.settings().unwrap().zone_name, "other");
    assert_eq!(iroh.settings().unwrap().zone_namespace, "dns");
    assert!(cmd.process.leader_elect());
    let Command::Controller(ControllerTarget::Mesh(cmd)) =
        parse(&["controller", "mesh", "--no-leader-elect"])
    else {
        panic!()
    };
    assert!(!cmd.process.leader_elect());
}

#[test]
fn the_relay_settings_read_from_flags_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "c.yaml",
        "serve: {trustedProxies: [10.0.0.0/8, '2001:db8::/32'], pkarrPutBurst: 50, pkarrCommitWindow: 2ms, pkarrMaxFuture: 90s, pkarrPageBytes: 65536}\n",
    );
    let s = serve(&["serve", "-c", &cfg]);
    assert_eq!(s.pkarr_page_bytes, Some(65_536));
    let s2 = serve(&["serve", "-c", &cfg, "--pkarr-page-bytes", "2048"]);
    assert_eq!(s2.pkarr_page_bytes, Some(2048), "the flag over the file");
    let shown: Vec<String> = s.trusted_proxies.iter().map(|c| c.to_string()).collect();
    assert_eq!(shown, ["10.0.0.0/8", "2001:db8::/32"]);
    assert_eq!(s.pkarr_put_burst, Some(50));
    assert_eq!(
        s.pkarr_commit_window,
        Some(std::time::Duration::from_millis(2))
    );
    assert_eq!(s.pkarr_max_future, Some(std::time::Duration::from_secs(90)));
    let s = serve(&["serve", "-c", &cfg, "--pkarr-max-future", "10m"]);
    assert_eq!(
        s.pkarr_max_future,
        Some(std::time::Duration::from_secs(600)),
        "the flag over the file"
    );
    let s = serve(&["serve", "-c", &cfg, "--trusted-proxy", "192.0.2.7"]);
    let shown: Vec<String> = s.trusted_proxies.iter().map(|c| c.to_string()).collect();
    assert_eq!(shown, ["192.0.2.7/32"], "flags replace the file's list");
}

#[test]
fn the_nsid_reads_from_flag_and_file_and_an_empty_one_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "c.yaml", "serve: {nsid: replica-file}\n");
    let nsid = |args: &[&str]| {
        let s = serve(args);
        let plan = crate::serve::plan::resolve(&s).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        (s.nsid, plan.server.answer.nsid)
    };
    assert_eq!(
        nsid(&["serve", "-c", &cfg]),
        (Some("replica-file".into()), Some(&b"replica-file"[..]))
    );
    assert_eq!(
        nsid(&["serve", "-c", &cfg, "--nsid", "replica-flag"]),
        (Some("replica-flag".into()), Some(&b"replica-flag"[..])),
        "the flag over the file"
    );
    assert_eq!(
        nsid(&["serve", "-c", &cfg, "--nsid", ""]),
        (Some(String::new()), None),
        "\"\" turns it off"
    );
    // Without either, the host name.
    let host = defaults::nsid();
    assert_eq!(nsid(&["serve"]).1, host.as_deref().map(str::as_bytes));
}

#[test]
fn lists_given_as_flags_replace_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "c.yaml",
        "serve: {records: [a.json, b.json], zones: [example.org]}\n",
    );
    let s = serve(&["serve", "-c", &cfg, "--records", "c.json"]);
    assert_eq!(s.records, vec![PathBuf::from("c.json")]);
    assert_eq!(s.zones[0].to_string(), "example.org.");
}

#[test]
fn bad_values_are_refused_before_anything_starts() {
    for args in [
        &["serve", "--tcp-idle-timeout", "soon"][..],
        &["serve", "--log-format", "xml"],
        &["serve", "--edns-payload", "100"],
        &["serve", "--zone", "bad..name"],
        &["serve", "--default-ttl", "forever"],
        &["serve", "--workers", "0"],
        &["serve", "--doh=maybe"],
        &["serve", "--trusted-proxy", "10.0.0.0/33"],
        &["serve", "--pkarr-put-burst", "0"],
        &["serve", "--pkarr-commit-window", "soon"],
        &["serve", "--rrl-rate", "2000000"],
        &["serve", "--rrl-ipv4-prefix", "33"],
        &["serve", "--rrl-ipv6-prefix", "129"],
        &["serve", "--rrl-exempt", "nope"],
        &["controller", "iroh"],
        &["render", "iroh", "-f", "x.yaml"],
    ] {
        let err = Cli::try_parse_from(std::iter::once("meshdns").chain(args.iter().copied()))
            .expect_err(&format!("{args:?} must be refused"));
        assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
    }
    // Flags alone can replace the config file of the iroh commands.
    assert!(matches!(
        parse(&[
            "render",
            "iroh",
            "--dns-zone-namespace",
            "dns",
            "--dns-zone-name",
            "z",
            "-f",
            "x.yaml"
        ]),
        Command::Render(RenderTarget::Iroh(_))
    ));
}

#[test]
fn bad_values_in_the_file_are_refused_naming_key_and_file() {
    let dir = tempfile::tempdir().unwrap();
    for (text, want) in [
        (
            "serve:\n  listn: ['127.0.0.1:5353']\n",
            "unknown field `listn`",
        ),
        ("serve:\n  tcpIdleTimeout: soon\n", "not a duration"),
        ("serve:\n  logFormat: xml\n", "unknown variant `xml`"),
        ("serve:\n  zones: ['bad..name']\n", "bad..name"),
        ("serve:\n  ednsPayload: 100\n", "512 to 65535"),
        (
            "serve:\n  trustedProxies: [10.0.0.0/8, nope]\n",
            "\"nope\" is not an address or prefix",
        ),
        ("serve:\n  pkarrPutBurst: 0\n", "at least 1"),
        (
            "serve:\n  pkarrPageBytes: 8388608\n",
            "expected bytes from 1024 to 4194304",
        ),
        ("serve:\n  rrlRate: 5000000\n", "from 0 (off)"),
        ("serve:\n  rrlIpv6Prefix: 200\n", "0 to 128"),
        ("serv:\n  listen: []\n", "unknown field `serv`"),
    ] {
        let cfg = write(dir.path(), "c.yaml", text);
        let Command::Serve(cmd) = parse(&["serve", "-c", &cfg]) else {
            panic!()
        };
        let err = format!("{:#}", cmd.resolve().unwrap_err());
        assert!(err.contains(want), "{text}: {err}");
        assert!(err.contains(&cfg), "{text}: {err}");
    }
}

#[test]
fn a_bad_value_in_the_file_is_named_by_its_key_path() {
    let dir = tempfile::tempdir().unwrap();
    for (text, want) in [
        (
            "serve:\n  tcpIdleTimeout: soon\n",
            "serve.tcpIdleTimeout: \"soon\"",
        ),
        (
            "serve:\n  ednsPayload: 100\n",
            "serve.ednsPayload: \"100\": expected",
        ),
        (
            "serve:\n  listn: []\n",
            "serve.listn: unknown field `listn`",
        ),
        (
            "mesh:\n  resync: 5\n",
            "mesh.resync: unknown field `resync`",
        ),
        ("serv:\n  listen: []\n", ": serv: unknown field `serv`"),
        // The line of the value, not of its block.
        (
            "# a comment\nserve:\n  listen: ['127.0.0.1:0']\n  http: 127.0.0.1:0\n  tcpIdleTimeout: 10 s\n",
            "serve.tcpIdleTimeout: \"10 s\" is not a duration",
        ),
    ] {
        let cfg = write(dir.path(), "c.yaml", text);
        let err = format!("{:#}", ConfigFile::read(Path::new(&cfg)).unwrap_err());
        assert!(err.contains(want), "{text}: {err}");
    }
    for (text, line) in [
        (
            "# a comment\nserve:\n  listen: ['127.0.0.1:0']\n  http: 127.0.0.1:0\n  tcpIdleTimeout: 10 s\n",
            5,
        ),
        (
            "mesh:\n  namespace: x\nserve:\n\n  defaultTtl: forever\n",
            5,
        ),
        ("serve:\n  zones: ['bad..name']\n", 2),
        ("serve:\n  listn: []\n", 2),
    ] {
        let cfg = write(dir.path(), "c.yaml", text);
        let err = format!("{:#}", ConfigFile::read(Path::new(&cfg)).unwrap_err());
        assert!(err.ends_with(&format!(" at line {line}")), "{text}: {err}");
    }
}

#[test]
fn datums_operator_config_is_read_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "nso.yaml",
        "apiVersion: apiserver.config.datumapis.com/v1alpha1
kind: NetworkServicesOperator
webhookServer: {port: 9443}
connector:
  iroh:
    dnsZoneRef: {namespace: dns, name: z}
",
    );
    let Command::Render(RenderTarget::Iroh(cmd)) =
        parse(&["render", "iroh", "-c", &cfg, "-f", "x"])
    else {
        panic!()
    };
    let iroh = cmd.resolve().unwrap();
    assert_eq!(iroh.dns_enabled, Some(false), "datum's default");
    assert_eq!(iroh.settings().unwrap().zone_name, "z");
    let none = write(dir.path(), "serve-only.yaml", "serve: {}\n");
    let Command::Render(RenderTarget::Iroh(cmd)) =
        parse(&["render", "iroh", "-c", &none, "-f", "x"])
    else {
        panic!()
    };
    assert!(format!("{:#}", cmd.resolve().unwrap_err()).contains("no `iroh:` block"));
}

#[test]
fn tls_settings_come_from_flags_or_the_file_and_are_checked_together() {
    use crate::config::serve::TlsSource;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "c.yaml",
        "serve:\n  https: 127.0.0.1:8443\n  dot: ['127.0.0.1:8853']\n  tlsCert: certs/tls.crt\n  tlsKey: certs/tls.key\n",
    );
    let s = resolved(&["serve", "-c", &cfg]).unwrap();
    assert_eq!(s.https, Some("127.0.0.1:8443".parse().unwrap()));
    let Some(TlsSource::Files(files)) = s.tls().unwrap() else {
        panic!("files expected")
    };
    assert_eq!(files.cert, dir.path().join("certs/tls.crt"));
    assert_eq!(files.key, dir.path().join("certs/tls.key"));

    let cfg = write(
        dir.path(),
        "acme.yaml",
        "serve:\n  http: 0.0.0.0:80\n  dot: ['[::]:853']\n  acmeDomains: [dns.example.org]\n  acmeContacts: [ops@example.org]\n  acmeDirectory: https://ca.example/dir\n  acmeChallenge: http-01\n  acmeCa: ca.pem\n  tlsSelfSigned: true\n",
    );
    let s = resolved(&["serve", "-c", &cfg]).unwrap();
    assert!(matches!(
        s.tls().unwrap(),
        Some(TlsSource::Acme {
            challenge: values::AcmeChallenge::Http01,
            self_signed_first: true
        })
    ));
    assert_eq!(s.acme_ca, Some(dir.path().join("ca.pem")));
    assert_eq!(s.acme_domains[0].to_string(), "dns.example.org.");

    for (args, want) in [
        (&["--https", "127.0.0.1:1"][..], "need a certificate"),
        (
            &["--dot", "127.0.0.1:1", "--tls-cert", "a"],
            "--tls-cert needs --tls-key",
        ),
        (
            &["--dot", "127.0.0.1:1", "--tls-key", "a"],
            "--tls-key needs --tls-cert",
        ),
        (
            &[
                "--dot",
                "127.0.0.1:1",
                "--tls-cert",
                "a",
                "--tls-key",
                "b",
                "--tls-self-signed",
            ],
            "choose one",
        ),
        (&["--tls-self-signed"], "no TLS listener"),
        (
            &["--dot", "127.0.0.1:1", "--acme-domain", "a.example"],
            "answered on --https",
        ),
        (
            &[
                "--dot",
                "127.0.0.1:1",
                "--acme-domain",
                "a.example",
                "--acme-challenge",
                "http-01",
            ],
            "answered on --http",
        ),
        (
            &[
                "--dot",
                "127.0.0.1:1",
                "--https",
                "127.0.0.1:2",
                "--acme-domain",
                "*.a.example",
            ],
            "--acme-domain *.a.example.: a CA validates a wildcard name by DNS-01 only",
        ),
        (
            &[
                "--dot",
                "127.0.0.1:1",
                "--tls-self-signed",
                "--acme-contact",
                "x@y",
            ],
            "need --acme-domain",
        ),
    ] {
        let mut argv = vec!["serve"];
        argv.extend_from_slice(args);
        let err = format!("{:#}", resolved(&argv).unwrap_err());
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

fn resolved(args: &[&str]) -> anyhow::Result<ServeConfig> {
    let Command::Serve(cmd) = parse(args) else {
        panic!("serve expected")
    };
    // As `serve` does: the settings, then the rules between them (`serve::plan` applies the
    // same check, and reads the files it names).
    let settings = cmd.resolve()?;
    settings.tls().map_err(anyhow::Error::msg)?;
    Ok(settings)
}
