//! iroh endpoints in the Mainline DHT, through meshdns (`serve --pkarr-dht`), with clients
//! meshdns did not write: the `pkarr` crate's client with its relays off (it publishes to and
//! resolves from the DHT only), iroh's DNS resolver and iroh's `PkarrPublisher`.
//!
//! - An endpoint whose packet (built by iroh) was put into the DHT by the pkarr client alone is
//!   found by iroh's DNS resolver asking meshdns, which looked it up in the DHT.
//! - An endpoint iroh's publisher published to meshdns over HTTP alone is found in the DHT by
//!   the pkarr client, which meshdns put it into.
//!
//! On a testnet of ten `mainline` nodes bound to 127.0.0.1, each bootstrapped from the others;
//! every DHT socket here, meshdns's and the pkarr client's included, is bound to loopback and
//! told its bootstrap nodes (never the public DHT). iroh's own DHT address lookup
//! (`iroh-mainline-address-lookup`) is not used: its DHT crate binds every address, with no
//! way to bind loopback only.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use iroh::address_lookup::{AddrFilter, EndpointData, PkarrPublisher};
use iroh::dns::DnsResolver;
use iroh::endpoint_info::EndpointInfo;
use iroh::tls::{CaTlsConfig, default_provider};
use iroh::{EndpointId, RelayUrl, SecretKey, TransportAddr};
use meshdns_interop_iroh::Meshdns;

const ORIGIN: &str = "dns.example.org";

/// Ten server-mode `mainline` nodes on loopback, each knowing every other as a bootstrap node.
struct Testnet {
    _nodes: Vec<mainline::async_dht::AsyncDht>,
    bootstrap: Vec<String>,
}

impl Testnet {
    async fn new(n: usize) -> Testnet {
        // Ports picked first, so that every node starts with the others as its bootstrap list
        // (a node without one adds whoever asks it, departed clients included, and later
        // lookups wait on them).
        let ports: Vec<u16> = (0..n)
            .map(|_| {
                let s = UdpSocket::bind("127.0.0.1:0").unwrap();
                s.local_addr().unwrap().port()
            })
            .collect();
        let bootstrap: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let nodes: Vec<mainline::async_dht::AsyncDht> = ports
            .iter()
            .map(|p| {
                let others: Vec<&String> = bootstrap
                    .iter()
                    .filter(|b| !b.ends_with(&format!(":{p}")))
                    .collect();
                mainline::Dht::builder()
                    .server_mode()
                    .bind_address(Ipv4Addr::LOCALHOST)
                    .port(*p)
                    .bootstrap(&others)
                    .request_timeout(Duration::from_millis(500))
                    .build()
                    .expect("a testnet node binds its port")
                    .as_async()
            })
            .collect();
        for node in &nodes {
            node.bootstrapped().await;
        }
        Testnet {
            _nodes: nodes,
            bootstrap,
        }
    }

    /// `serve --pkarr ORIGIN --pkarr-dht`, bootstrapped from the testnet.
    fn meshdns(&self, dir: &std::path::Path) -> Meshdns {
        let mut args = vec![
            "--pkarr".to_string(),
            ORIGIN.to_string(),
            "--data-dir".to_string(),
            dir.display().to_string(),
            "--listen".to_string(),
            "127.0.0.1:0".to_string(),
            "--http".to_string(),
            "127.0.0.1:0".to_string(),
            "--pkarr-dht".to_string(),
            "--pkarr-dht-bind".to_string(),
            "127.0.0.1:0".to_string(),
        ];
        for b in &self.bootstrap {
            args.extend(["--pkarr-dht-bootstrap".to_string(), b.clone()]);
        }
        Meshdns::start(args)
    }

    /// The pkarr crate's client on the DHT only: relays off, its node on loopback.
    fn pkarr_client(&self) -> pkarr::Client {
        pkarr::Client::builder()
            .no_relays()
            .bootstrap(&self.bootstrap)
            .dht(|config| {
                config.bind_address = Some(Ipv4Addr::LOCALHOST);
                config.port = Some(0);
                config.request_timeout = Duration::from_millis(500);
                config
            })
            .build()
            .expect("a DHT-only pkarr client")
    }
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

fn addrs(list: &[&str]) -> (Vec<SocketAddr>, BTreeSet<SocketAddr>) {
    let v: Vec<SocketAddr> = list.iter().map(|a| a.parse().unwrap()).collect();
    let set = v.iter().copied().collect();
    (v, set)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endpoint_put_into_the_dht_only_is_found_by_irohs_dns_resolver_at_meshdns() {
    let net = Testnet::new(10).await;
    let dir = tempfile::tempdir().unwrap();
    let m = tokio::task::block_in_place(|| net.meshdns(dir.path()));

    let secret = SecretKey::generate();
    let id: EndpointId = secret.public();
    let (list, want) = addrs(&["192.0.2.41:4433", "[2001:db8::41]:4433"]);
    let info = EndpointInfo::from_parts(id, data(&list));
    let signed = info.to_pkarr_signed_packet(&secret, 30).unwrap();
    // iroh's packet, as the pkarr crate reads it (`signature ‖ timestamp ‖ message`, verified
    // again on the way in).
    let key = pkarr::PublicKey::try_from(id.as_bytes()).unwrap();
    let payload = bytes::Bytes::from(signed.to_relay_payload());
    let packet = pkarr::SignedPacket::from_relay_payload(&key, &payload)
        .expect("the pkarr crate reads iroh's signed packet");
    let client = net.pkarr_client();
    let stored = client
        .publish(&packet)
        .await
        .expect("the pkarr client puts the packet into the testnet");
    assert!(stored > 0, "no testnet node stored the packet");

    // One lookup: the packet is in the DHT before meshdns is first asked (a first miss would
    // be cached as NXDOMAIN for a minute).
    let resolver = DnsResolver::with_nameserver(m.dns);
    let found = resolver
        .lookup_endpoint_by_id(&id, ORIGIN)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "iroh's DNS resolver did not find at meshdns an endpoint in the DHT: {e}\n{}",
                m.log_text()
            )
        });
    assert_eq!(found.ip_addrs().copied().collect::<BTreeSet<_>>(), want);
    let relay: RelayUrl = "https://relay.example.org".parse().unwrap();
    assert_eq!(found.relay_urls().collect::<Vec<_>>(), vec![&relay]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endpoint_iroh_published_to_meshdns_is_found_in_the_dht_by_the_pkarr_client() {
    let net = Testnet::new(10).await;
    let dir = tempfile::tempdir().unwrap();
    let m = tokio::task::block_in_place(|| net.meshdns(dir.path()));

    let tls = CaTlsConfig::embedded()
        .client_config(default_provider())
        .unwrap();
    let secret = SecretKey::generate();
    let id = secret.public();
    let http = m.http.expect("meshdns serves HTTP");
    let publisher = PkarrPublisher::builder(format!("http://{http}/pkarr").parse().unwrap())
        .addr_filter(AddrFilter::unfiltered())
        .build(secret, tls);
    let (list, want) = addrs(&["198.51.100.42:4433"]);
    publisher.update_endpoint_data(&data(&list));

    // meshdns puts an accepted publish into the DHT after its 204, so the pkarr client asks
    // until it is there (the bound only keeps a broken build from hanging).
    let client = net.pkarr_client();
    let key = pkarr::PublicKey::try_from(id.as_bytes()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    while Instant::now() < deadline {
        match client
            .resolve(&key, pkarr::ResolvePolicy::NetworkOnly)
            .await
        {
            Ok(packet) => {
                let signed = iroh_dns::pkarr::SignedPacket::from_bytes(packet.as_bytes())
                    .expect("iroh reads the packet the DHT returned");
                let info = EndpointInfo::from_pkarr_signed_packet(&signed).unwrap();
                let found: BTreeSet<SocketAddr> = info.ip_addrs().copied().collect();
                if found == want {
                    return;
                }
                last = format!("found {found:?}");
            }
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!(
        "the DHT-only pkarr client never found what iroh published to meshdns ({last}):\n{}",
        m.log_text()
    );
}
