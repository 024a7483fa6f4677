//! iroh's own resolver (`iroh_dns::dns::DnsResolver`) finds endpoints that a records file
//! publishes: exactly the relay and addresses configured, IPv6 and several addresses included.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use iroh_base::SecretKey;
use iroh_dns::dns::DnsResolver;

use crate::support::*;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn iroh_resolver_finds_endpoints_from_a_records_file() {
    let a = SecretKey::generate().public();
    let b = SecretKey::generate().public();
    let yaml = format!(
        r#"
zones:
  - origin: mesh.example.org
    iroh:
      - endpoint: {a_hex}
        relay: https://relay.example.org
        addrs: ["192.0.2.1:4433", "[2001:db8::7]:4433", "198.51.100.2:9000"]
      - endpoint: {b_z32}
        addrs: ["[2001:db8::1]:1", "192.0.2.99:65535"]
        suffix: nodes
        userData: rack-7
"#,
        a_hex = hex(a.as_bytes()).to_uppercase(),
        b_z32 = b.to_z32()
    );
    let s = TestServer::start(Setup::file("iroh.yaml", &yaml)).await;
    let resolver = DnsResolver::with_nameserver(s.udp);

    let info = resolver
        .lookup_endpoint_by_id(&a, "mesh.example.org")
        .await
        .expect("iroh resolves a");
    assert_eq!(info.endpoint_id, a);
    let relays: Vec<String> = info.relay_urls().map(ToString::to_string).collect();
    assert_eq!(relays, ["https://relay.example.org/"]);
    let addrs: BTreeSet<SocketAddr> = info.ip_addrs().copied().collect();
    let want: BTreeSet<SocketAddr> = ["192.0.2.1:4433", "[2001:db8::7]:4433", "198.51.100.2:9000"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    assert_eq!(addrs, want);

    let info = resolver
        .lookup_endpoint_by_id(&b, "nodes.mesh.example.org")
        .await
        .expect("iroh resolves b under its suffix");
    assert_eq!(info.relay_urls().count(), 0);
    let addrs: BTreeSet<SocketAddr> = info.ip_addrs().copied().collect();
    let want: BTreeSet<SocketAddr> = ["[2001:db8::1]:1", "192.0.2.99:65535"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    assert_eq!(addrs, want);
    assert_eq!(
        info.user_data().map(ToString::to_string).as_deref(),
        Some("rack-7")
    );

    // An endpoint nobody published is not found.
    let unknown = SecretKey::generate().public();
    assert!(
        resolver
            .lookup_endpoint_by_id(&unknown, "mesh.example.org")
            .await
            .is_err()
    );
    s.stop().await;
}
