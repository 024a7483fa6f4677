//! iroh's own code against a meshdns fleet: iroh's `PkarrPublisher` publishes an endpoint to
//! one replica, and iroh's DNS resolver and `PkarrResolver` find it at another, then find its
//! next address after the publisher publishes the change. Two real `meshdns serve --pkarr`
//! processes on loopback, each with its own data directory, peers of each other.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iroh::address_lookup::{
    AddrFilter, AddressLookup, EndpointData, PkarrPublisher, PkarrResolver,
};
use iroh::dns::DnsResolver;
use iroh::tls::{CaTlsConfig, default_provider};
use iroh::{EndpointId, SecretKey, TransportAddr};
use meshdns_interop_iroh::{Meshdns, free_ports};
use n0_future::StreamExt;

const ORIGIN: &str = "dns.example.org";

/// One replica: `serve --pkarr` on its HTTP port, the other replica its peer.
fn replica(dir: &std::path::Path, http: SocketAddr, peer: SocketAddr, token: &str) -> Meshdns {
    let token_file = dir.join("token");
    std::fs::write(&token_file, token).unwrap();
    let data = dir.join("data");
    Meshdns::start([
        "--pkarr".to_string(),
        ORIGIN.to_string(),
        "--data-dir".to_string(),
        data.display().to_string(),
        "--http".to_string(),
        http.to_string(),
        "--listen".to_string(),
        "127.0.0.1:0".to_string(),
        "--pkarr-peer-token-file".to_string(),
        token_file.display().to_string(),
        "--pkarr-peer".to_string(),
        format!("http://{peer}"),
    ])
}

/// The IP addresses iroh's DNS resolver finds for `id` at `dns`, once they are `want` (the
/// bound only keeps a broken build from hanging; it is not a timing assertion).
async fn dns_finds(dns: SocketAddr, id: EndpointId, want: &BTreeSet<SocketAddr>) -> bool {
    let resolver = DnsResolver::with_nameserver(dns);
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        resolver.clear_cache();
        if let Ok(info) = resolver.lookup_endpoint_by_id(&id, ORIGIN).await
            && info.ip_addrs().copied().collect::<BTreeSet<_>>() == *want
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// The same through iroh's pkarr HTTP resolver (`GET /pkarr/<z32>`).
async fn relay_finds(relay: &PkarrResolver, id: EndpointId, want: &BTreeSet<SocketAddr>) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some(mut found) = relay.resolve(id)
            && let Some(Ok(item)) = found.next().await
            && item
                .endpoint_info()
                .ip_addrs()
                .copied()
                .collect::<BTreeSet<_>>()
                == *want
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn data(addrs: &[SocketAddr]) -> EndpointData {
    addrs
        .iter()
        .map(|a| TransportAddr::Ip(*a))
        .chain([TransportAddr::Relay(
            "https://relay.example.org".parse().unwrap(),
        )])
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn iroh_publishes_to_one_replica_and_resolves_at_the_other() {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let http = free_ports::<2>().map(|p| SocketAddr::from(([127, 0, 0, 1], p)));
    let token = "interop-fleet-token-0123456789abcdef";
    let a = replica(dirs[0].path(), http[0], http[1], token);
    let b = replica(dirs[1].path(), http[1], http[0], token);

    let tls = CaTlsConfig::embedded()
        .client_config(default_provider())
        .unwrap();
    let secret = SecretKey::generate();
    let id = secret.public();
    let publisher = PkarrPublisher::builder(format!("http://{}/pkarr", http[0]).parse().unwrap())
        // Every address, as on a relay of one's own (iroh's default publishes the relay URL
        // only, not to leak addresses to a public server).
        .addr_filter(AddrFilter::unfiltered())
        .build(secret, tls.clone());
    let relay_b =
        PkarrResolver::builder(format!("http://{}/pkarr", http[1]).parse().unwrap()).build(tls);

    let first: Vec<SocketAddr> = vec![
        "192.0.2.7:4433".parse().unwrap(),
        "[2001:db8::7]:4433".parse().unwrap(),
    ];
    publisher.update_endpoint_data(&data(&first));
    let want: BTreeSet<SocketAddr> = first.iter().copied().collect();
    assert!(
        dns_finds(b.dns, id, &want).await,
        "iroh's DNS resolver never found at b what iroh published to a; a:\n{}\nb:\n{}",
        a.log_text(),
        b.log_text()
    );
    assert!(
        relay_finds(&relay_b, id, &want).await,
        "iroh's pkarr resolver never found it at b's /pkarr; b:\n{}",
        b.log_text()
    );
    // And at a itself, over DNS.
    assert!(dns_finds(a.dns, id, &want).await, "a never answered it");

    // The endpoint moves: iroh's publisher publishes the change, b follows.
    let moved: Vec<SocketAddr> = vec!["198.51.100.9:4433".parse().unwrap()];
    publisher.update_endpoint_data(&data(&moved));
    let want: BTreeSet<SocketAddr> = moved.iter().copied().collect();
    assert!(
        dns_finds(b.dns, id, &want).await,
        "b never answered the endpoint's new address; b:\n{}",
        b.log_text()
    );
    assert!(
        relay_finds(&relay_b, id, &want).await,
        "b's /pkarr kept the old packet"
    );
}
