//! iroh's own resolver and packets against meshdns over `https://`, with nothing in between:
//! a packet signed by iroh-dns is published to the pkarr relay over HTTPS, and iroh's
//! `DnsResolver`, pointed at meshdns's DoH URL, resolves it. The certificate comes from a test
//! CA the resolver is told to trust, as a private deployment would configure it.

use std::net::SocketAddr;

use iroh_base::SecretKey;
use iroh_dns::dns::{DnsResolver, NameserverConfig};
use iroh_dns::endpoint_info::EndpointInfo;

use crate::tls::{Ca, SecretVolume};
use crate::*;

const ORIGIN: &str = "dns.example.org";

/// `curl` over HTTPS: `-w` (status) for a request with `args`.
fn curl(ca: &str, args: &[&str]) -> String {
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--cacert",
            ca,
        ])
        .args(args)
        .output()
        .expect("curl is installed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn iroh_publishes_and_resolves_over_https_with_no_proxy() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    let ca_file = write(dir.path(), "ca.pem", &ca.pem);
    std::fs::create_dir(dir.path().join("s")).unwrap();
    let vol = SecretVolume::new(&dir.path().join("s"), &ca.leaf("meshdns", (2099, 1)));
    let (cert, key) = (vol.cert(), vol.key());
    let data = dir.path().join("data");
    let m = Meshdns::serve(&[
        "--pkarr",
        ORIGIN,
        "--data-dir",
        data.to_str().unwrap(),
        "--https",
        "127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
    ]);
    let https = m.https.unwrap();

    // Published over HTTPS: the relay payload iroh-dns signs, PUT as iroh's publisher does.
    let secret = SecretKey::generate();
    let id = secret.public();
    let addrs: Vec<SocketAddr> = vec![
        "192.0.2.7:7".parse().unwrap(),
        "[2001:db8::7]:7".parse().unwrap(),
    ];
    let payload = EndpointInfo::new(id)
        .with_ip_addrs(addrs.clone())
        .to_pkarr_signed_packet(&secret, 30)
        .unwrap()
        .to_relay_payload();
    let body = dir.path().join("payload.bin");
    std::fs::write(&body, &payload).unwrap();
    let url = format!("https://localhost:{}/pkarr/{}", https.port(), id.to_z32());
    let data_arg = format!("@{}", body.display());
    assert_eq!(
        curl(&ca_file, &["-X", "PUT", "--data-binary", &data_arg, &url]),
        "204"
    );
    assert_eq!(curl(&ca_file, &[&url]), "200", "the packet is served back");

    // iroh's resolver, DoH over HTTPS straight at meshdns.
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::pem::PemObject::from_pem_slice(ca.pem.as_bytes()).unwrap())
        .unwrap();
    let tls = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let resolver = DnsResolver::builder()
        .add_nameserver_config(NameserverConfig::https(https.ip()).with_port(https.port()))
        .tls_client_config(tls)
        .build();
    let found = resolve_within(&resolver, &id, ORIGIN, 5)
        .await
        .unwrap_or_else(|| panic!("iroh never resolved over DoH; log:\n{}", m.log_text()));
    let got: std::collections::BTreeSet<SocketAddr> = found.ip_addrs().copied().collect();
    assert_eq!(got, addrs.into_iter().collect());
    let (_, metrics) = m.get("/metrics");
    assert!(
        metrics
            .contains(r#"meshdns_dns_queries_total{transport="doh",qtype="TXT",rcode="NOERROR"}"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"meshdns_tls_handshakes_total{listener="https",result="ok"}"#),
        "{metrics}"
    );
}

#[test]
fn forwarded_clients_are_trusted_over_https_only_from_trusted_proxies() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    let ca_file = write(dir.path(), "ca.pem", &ca.pem);
    std::fs::create_dir(dir.path().join("s")).unwrap();
    let vol = SecretVolume::new(&dir.path().join("s"), &ca.leaf("meshdns", (2099, 1)));
    let (cert, key) = (vol.cert(), vol.key());
    let serve = |data: &str, extra: &[&str]| {
        let mut args = vec![
            "--pkarr",
            ORIGIN,
            "--data-dir",
            data,
            "--https",
            "127.0.0.1:0",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--pkarr-put-limit",
            "1",
            "--pkarr-put-burst",
            "1",
        ];
        args.extend_from_slice(extra);
        Meshdns::serve(&args)
    };
    let put_from = |m: &Meshdns, client: &str| {
        let secret = SecretKey::generate();
        let payload = EndpointInfo::new(secret.public())
            .with_ip_addrs(vec!["192.0.2.1:1".parse().unwrap()])
            .to_pkarr_signed_packet(&secret, 30)
            .unwrap()
            .to_relay_payload();
        let body = dir.path().join(format!("{}.bin", secret.public().to_z32()));
        std::fs::write(&body, &payload).unwrap();
        let url = format!(
            "https://localhost:{}/pkarr/{}",
            m.https.unwrap().port(),
            secret.public().to_z32()
        );
        let header = format!("X-Forwarded-For: {client}");
        let data_arg = format!("@{}", body.display());
        curl(
            &ca_file,
            &["-X", "PUT", "-H", &header, "--data-binary", &data_arg, &url],
        )
    };
    let trusted_dir = dir.path().join("trusted");
    let m = serve(
        trusted_dir.to_str().unwrap(),
        &["--trusted-proxy", "127.0.0.0/8"],
    );
    assert_eq!(put_from(&m, "203.0.113.1"), "204");
    assert_eq!(
        put_from(&m, "203.0.113.1"),
        "429",
        "the same client over its rate"
    );
    assert_eq!(
        put_from(&m, "203.0.113.2"),
        "204",
        "another client behind the proxy"
    );
    let untrusted_dir = dir.path().join("untrusted");
    let m = serve(untrusted_dir.to_str().unwrap(), &[]);
    assert_eq!(put_from(&m, "203.0.113.1"), "204");
    assert_eq!(
        put_from(&m, "203.0.113.2"),
        "429",
        "from a peer not trusted, the header buys no new bucket"
    );
}
