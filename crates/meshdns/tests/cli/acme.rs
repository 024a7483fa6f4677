//! ACME against Debian's `pebble` (Let's Encrypt's test CA) on loopback: a certificate obtained
//! by TLS-ALPN-01, served on DoT and HTTPS, renewed before it expires, loaded from the cache
//! after a restart without a new order; one obtained by HTTP-01; and one for a plain and a
//! wildcard name obtained by DNS-01, its TXT records put into meshdns's own answers.
//!
//! pebble resolves the name through meshdns itself (`-dnsserver`), which serves its A record.
//! Its own HTTPS uses a certificate from the test CA that meshdns is told to trust
//! (`--acme-ca`). Certificates are valid for 20 seconds, so renewal comes quickly.
//! `pebble` must be installed (`apt-get install pebble`; `.ci/run` does it).

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, ServerName};

use crate::secondaries::free_port;
use crate::tls::Ca;
use crate::*;

const DOMAIN: &str = "dot.meshdns.test";

struct Pebble {
    child: Child,
    directory: String,
    management: u16,
    log: std::path::PathBuf,
}

impl Drop for Pebble {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Pebble {
    /// pebble validating against `http_port`/`tls_port` on the addresses `dns` gives.
    fn start(dir: &Path, ca: &Ca, dns: SocketAddr, http_port: u16, tls_port: u16) -> Pebble {
        let leaf = ca.leaf("pebble", (2099, 1));
        let cert = write(dir, "pebble.crt", &leaf.cert);
        let key = write(dir, "pebble.key", &leaf.key);
        let (listen, management) = (free_port(), free_port());
        let config = serde_json::json!({"pebble": {
            "listenAddress": format!("127.0.0.1:{listen}"),
            "managementListenAddress": format!("127.0.0.1:{management}"),
            "certificate": cert,
            "privateKey": key,
            "httpPort": http_port,
            "tlsPort": tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false,
            "certificateValidityPeriod": 20,
        }});
        let config_file = write(dir, "pebble.json", &config.to_string());
        let log = dir.join("pebble.log");
        let child = Command::new("pebble")
            .args(["-config", &config_file, "-dnsserver", &dns.to_string()])
            // No artificial validation delays; pebble still rejects 5% of good nonces, which
            // meshdns must retry.
            .env("PEBBLE_VA_NOSLEEP", "1")
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("pebble is installed (apt-get install pebble)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", listen)).is_err() {
            assert!(Instant::now() < deadline, "pebble never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        Pebble {
            child,
            directory: format!("https://localhost:{listen}/dir"),
            management,
            log,
        }
    }

    /// The root pebble issues under (made fresh at each start), from its management API.
    fn root(&self, ca_file: &str) -> CertificateDer<'static> {
        let out = Command::new("curl")
            .args(["-s", "--cacert", ca_file])
            .arg(format!("https://localhost:{}/roots/0", self.management))
            .output()
            .expect("curl is installed");
        rustls::pki_types::pem::PemObject::from_pem_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("pebble's root: {e}: {:?}", out))
    }
}

/// The certificate the TLS listener at `addr` presents for DOMAIN, verified against `root`.
fn presented(
    addr: SocketAddr,
    root: &CertificateDer<'static>,
    alpn: &[u8],
) -> CertificateDer<'static> {
    presented_for(addr, root, alpn, DOMAIN)
}

/// The certificate the TLS listener at `addr` presents for `name`, verified against `root`.
fn presented_for(
    addr: SocketAddr,
    root: &CertificateDer<'static>,
    alpn: &[u8],
    name: &str,
) -> CertificateDer<'static> {
    let config = crate::tls::client_config(root.clone(), &[alpn]);
    let server_name = ServerName::try_from(name.to_string()).unwrap();
    let mut conn = rustls::ClientConnection::new(config, server_name).unwrap();
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp)
            .unwrap_or_else(|e| panic!("handshake with {addr} for {name}: {e}"));
    }
    conn.peer_certificates().unwrap()[0].clone()
}

fn count(m: &Meshdns, text: &str) -> usize {
    m.log_text().matches(text).count()
}

fn wait_count(m: &Meshdns, text: &str, n: usize, seconds: u64, pebble: &Pebble) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while count(m, text) < n {
        assert!(
            Instant::now() < deadline,
            "{text:?} never logged {n} times; meshdns:\n{}\npebble:\n{}",
            m.log_text(),
            std::fs::read_to_string(&pebble.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn acme_obtains_serves_renews_and_caches_certificates_from_pebble() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    let ca_file = write(dir.path(), "ca.pem", &ca.pem);
    let zone = write(
        dir.path(),
        "meshdns.test.zone",
        "$ORIGIN meshdns.test.\n$TTL 60\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n@ NS ns1\n\
         ns1 A 127.0.0.1\ndot A 127.0.0.1\n",
    );
    let (dns_port, http_port, https_port) = (free_port(), free_port(), free_port());
    let dns: SocketAddr = ([127, 0, 0, 1], dns_port).into();
    let pebble = Pebble::start(dir.path(), &ca, dns, http_port, https_port);
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let listen = dns.to_string();
    let http = format!("127.0.0.1:{http_port}");
    let https = format!("127.0.0.1:{https_port}");
    let serve = |data: &str, extra: &[&str]| {
        let mut args = vec![
            "--zone-file",
            &zone,
            "--listen",
            &listen,
            "--http",
            &http,
            "--dot",
            "127.0.0.1:0",
            "--acme-domain",
            DOMAIN,
            "--acme-directory",
            &pebble.directory,
            "--acme-ca",
            &ca_file,
            "--acme-contact",
            "ops@example.org",
            "--data-dir",
            data,
        ];
        args.extend_from_slice(extra);
        Meshdns::serve(&args)
    };

    // TLS-ALPN-01 on the HTTPS listener, self-signed until the first certificate.
    let m = serve(data, &["--https", &https, "--tls-self-signed"]);
    wait_count(&m, "ACME certificate issued and in service", 1, 30, &pebble);
    assert!(m.log_text().contains("ACME account registered"));
    let root = pebble.root(&ca_file);
    let first = presented(m.dot.unwrap(), &root, b"dot");
    assert_eq!(
        presented(m.https.unwrap(), &root, b"h2"),
        first,
        "HTTPS presents it too"
    );
    // Renewed with a third of its 20 s left.
    wait_count(&m, "ACME certificate issued and in service", 2, 40, &pebble);
    let renewed = presented(m.dot.unwrap(), &root, b"dot");
    assert_ne!(renewed, first, "a renewed certificate is served");
    let (_, metrics) = m.get("/metrics");
    assert!(
        metrics.contains(r#"meshdns_acme_orders_total{result="issued"} 2"#),
        "{metrics}"
    );
    let key_mode = {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(Path::new(data).join("acme").join(format!("{DOMAIN}.key")))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(key_mode, 0o600, "the cached key is private");
    drop(m);

    // A restart serves the cached certificate at once and orders nothing while it is fresh.
    let m = serve(data, &["--https", &https]);
    assert!(
        m.log_text()
            .contains("ACME certificate loaded from the cache"),
        "{}",
        m.log_text()
    );
    assert_eq!(presented(m.dot.unwrap(), &root, b"dot"), renewed);
    let (_, metrics) = m.get("/metrics");
    assert!(
        metrics.contains(r#"meshdns_acme_orders_total{result="issued"} 0"#),
        "{metrics}"
    );
    drop(m);

    // HTTP-01 on the HTTP listener, with a new account (another data directory) and no HTTPS.
    let data2 = dir.path().join("data2");
    let m = serve(data2.to_str().unwrap(), &["--acme-challenge", "http-01"]);
    wait_count(&m, "ACME certificate issued and in service", 1, 30, &pebble);
    let cert = presented(m.dot.unwrap(), &root, b"dot");
    assert_ne!(cert, renewed);
    let answer = dig(m.dns, &["dot.meshdns.test", "A"]);
    assert!(answer.contains("127.0.0.1"), "{answer}");
}

/// DNS-01: no HTTP or HTTPS listener at all (so no other challenge could be answered), a plain
/// name and a wildcard in one order, their `_acme-challenge` TXT records put into the zone of
/// a records file, answered while pebble validates and gone after; the wildcard certificate
/// served for any name under it, and loaded from the cache after a restart.
#[test]
fn acme_dns01_obtains_a_wildcard_certificate_through_its_own_answers() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    let ca_file = write(dir.path(), "ca.pem", &ca.pem);
    let records = write(
        dir.path(),
        "meshdns.yaml",
        "zones:\n  - origin: meshdns.test.\n    records:\n      - { name: dot, type: A, values: [127.0.0.1] }\n",
    );
    let dns: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    // pebble would validate HTTP-01 and TLS-ALPN-01 on these ports: nothing listens there.
    let pebble = Pebble::start(dir.path(), &ca, dns, free_port(), free_port());
    let data = dir.path().join("data");
    let listen = dns.to_string();
    let serve = || {
        Meshdns::serve(&[
            "--records",
            &records,
            "--listen",
            &listen,
            "--dot",
            "127.0.0.1:0",
            "--acme-challenge",
            "dns-01",
            "--acme-domain",
            DOMAIN,
            "--acme-domain",
            "*.meshdns.test",
            "--acme-directory",
            &pebble.directory,
            "--acme-ca",
            &ca_file,
            "--data-dir",
            data.to_str().unwrap(),
        ])
    };
    let m = serve();
    wait_count(&m, "ACME certificate issued and in service", 1, 40, &pebble);
    let root = pebble.root(&ca_file);
    let cert = presented(m.dot.unwrap(), &root, b"dot");
    assert_eq!(
        presented_for(m.dot.unwrap(), &root, b"dot", "anything.meshdns.test"),
        cert,
        "the wildcard name is on the certificate"
    );
    for domain in [DOMAIN, "meshdns.test"] {
        let line = format!("ACME authorization valid domain={domain} challenge=\"dns-01\"");
        assert!(m.log_text().contains(&line), "{line}: {}", m.log_text());
    }
    // Validated, the challenge records are gone from the answers; the zone's own are there.
    for name in [
        "_acme-challenge.dot.meshdns.test",
        "_acme-challenge.meshdns.test",
    ] {
        let answer = dig(m.dns, &[name, "TXT"]);
        assert!(answer.contains("NXDOMAIN"), "{name}: {answer}");
    }
    assert!(dig(m.dns, &["dot.meshdns.test", "A"]).contains("127.0.0.1"));
    drop(m);

    // The cached certificate covers the wildcard: a restart orders nothing.
    let m = serve();
    assert!(
        m.log_text()
            .contains("ACME certificate loaded from the cache"),
        "{}",
        m.log_text()
    );
    assert_eq!(presented(m.dot.unwrap(), &root, b"dot"), cert);
}

/// DNS-01 behind a hidden primary: pebble asks only the NSD secondary, which meshdns NOTIFYs
/// (`--notify`), and which starts two seconds after meshdns has begun its order. The CA is
/// told to look only once NSD answers the challenge record too, so the first order succeeds
/// (told at once, pebble would have found no server and failed it).
#[test]
fn acme_dns01_waits_for_the_notified_secondary_the_ca_asks() {
    use crate::secondaries::Secondary;
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    let ca_file = write(dir.path(), "ca.pem", &ca.pem);
    let records = write(
        dir.path(),
        "meshdns.yaml",
        "zones:\n  - origin: meshdns.test.\n    records:\n      - { name: dot, type: A, values: [127.0.0.1] }\n",
    );
    let dns: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let nsd_port = free_port();
    let pebble = Pebble::start(
        dir.path(),
        &ca,
        ([127, 0, 0, 1], nsd_port).into(),
        free_port(),
        free_port(),
    );
    let m = Meshdns::serve(&[
        "--records",
        &records,
        "--listen",
        &dns.to_string(),
        "--allow-transfer",
        "127.0.0.2",
        "--notify",
        &format!("127.0.0.1:{nsd_port}"),
        "--dot",
        "127.0.0.1:0",
        "--acme-challenge",
        "dns-01",
        "--acme-domain",
        DOMAIN,
        "--acme-directory",
        &pebble.directory,
        "--acme-ca",
        &ca_file,
        "--data-dir",
        dir.path().join("data").to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_secs(2));
    let nsd_dir = dir.path().join("nsd");
    std::fs::create_dir(&nsd_dir).unwrap();
    let nsd = Secondary::nsd(&nsd_dir, nsd_port, dns, &["meshdns.test"], "127.0.0.2");
    wait_count(&m, "ACME certificate issued and in service", 1, 60, &pebble);
    let root = pebble.root(&ca_file);
    presented(m.dot.unwrap(), &root, b"dot");
    // Taken out again, on the secondary too.
    nsd.wait_answer(&["_acme-challenge.dot.meshdns.test", "TXT"], "", 20);
    let failed = count(&m, "ACME order failed");
    assert_eq!(failed, 0, "{}", m.log_text());
}
