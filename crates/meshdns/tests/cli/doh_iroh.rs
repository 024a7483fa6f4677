//! iroh's own resolver over DoH. iroh only speaks `https://`, and meshdns serves plain HTTP
//! (TLS is left to a proxy in front of it), so this test puts a TLS proxy in front, as a
//! deployment would, with a self-signed certificate the resolver is told to trust.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use iroh_base::SecretKey;
use iroh_dns::dns::{DnsResolver, NameserverConfig};
use iroh_dns::endpoint_info::EndpointInfo;
use tokio::net::{TcpListener, TcpStream};

use crate::*;

const ORIGIN: &str = "dns.example.org";

/// A TLS terminator on 127.0.0.1 that relays to `upstream`; returns its address and the
/// certificate to trust.
async fn tls_proxy(
    upstream: SocketAddr,
) -> (SocketAddr, rustls::pki_types::CertificateDer<'static>) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.subject_alt_names = vec![rcgen::SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST))];
    let cert = params.self_signed(&key).unwrap();
    let cert_der = cert.der().clone();
    let key_der = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert_der.clone()], key_der)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(conn).await else {
                    return;
                };
                let Ok(mut plain) = TcpStream::connect(upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    (addr, cert_der)
}

#[tokio::test]
async fn iroh_resolves_a_published_endpoint_over_doh() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let data = tempfile::tempdir().unwrap();
    let m = Meshdns::serve(&[
        "--pkarr",
        ORIGIN,
        "--data-dir",
        data.path().to_str().unwrap(),
        "--http",
        "127.0.0.1:0",
    ]);
    let http_addr = m.http.unwrap();
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
    assert_eq!(
        http(
            http_addr,
            "PUT",
            &format!("/pkarr/{}", id.to_z32()),
            None,
            &payload
        )
        .0,
        204
    );

    let (proxy, cert) = tls_proxy(http_addr).await;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let tls = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let resolver = DnsResolver::builder()
        .add_nameserver_config(NameserverConfig::https(proxy.ip()).with_port(proxy.port()))
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
}
