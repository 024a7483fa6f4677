//! iroh's own code against a meshdns fleet: iroh's `PkarrPublisher` publishes an endpoint to
//! one replica, and iroh's DNS resolver and `PkarrResolver` find it at another, then find its
//! next address after the publisher publishes the change. Two real `meshdns serve --pkarr`
//! processes on loopback, each with its own data directory, peers of each other.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use iroh::address_lookup::{
    AddrFilter, AddressLookup, EndpointData, PkarrPublisher, PkarrResolver,
};
use iroh::dns::DnsResolver;
use iroh::tls::{CaTlsConfig, default_provider};
use iroh::{EndpointId, SecretKey, TransportAddr};
use n0_future::StreamExt;

const ORIGIN: &str = "dns.example.org";

/// The meshdns binary the workspace's tests built (or `MESHDNS_BIN`).
fn meshdns_bin() -> PathBuf {
    std::env::var_os("MESHDNS_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/meshdns"),
        PathBuf::from,
    )
}

/// Two ports below the kernel's ephemeral range, free when picked (bound a moment later).
fn free_ports() -> [u16; 2] {
    let offset = (std::process::id() % 4_000) as u16;
    let mut free = (0..4_000u16)
        .map(|i| 12_000 + (offset + i * 7) % 4_000)
        .filter(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok());
    [free.next(), free.next()].map(|p| p.expect("free ports in 12000-15999"))
}

struct Replica {
    child: Child,
    dns: SocketAddr,
    http: SocketAddr,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Replica {
    fn start(dir: &std::path::Path, http: SocketAddr, peer: SocketAddr, token: &str) -> Replica {
        let token_file = dir.join("token");
        std::fs::write(&token_file, token).unwrap();
        let mut child = Command::new(meshdns_bin())
            .arg("serve")
            .args(["--pkarr", ORIGIN, "--data-dir"])
            .arg(dir.join("data"))
            .args(["--http", &http.to_string(), "--listen", "127.0.0.1:0"])
            .arg("--pkarr-peer-token-file")
            .arg(&token_file)
            .args(["--pkarr-peer", &format!("http://{peer}")])
            .args(["--log-level", "info"])
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", meshdns_bin().display()));
        let stderr = child.stderr.take().unwrap();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("meshdns ready") {
                    let _ = tx.send(line.clone());
                }
                sink.lock().unwrap().push(line);
            }
        });
        let Ok(ready) = rx.recv_timeout(Duration::from_secs(30)) else {
            let _ = child.kill();
            panic!(
                "meshdns never became ready:\n{}",
                log.lock().unwrap().join("\n")
            );
        };
        let dns = ready
            .split_whitespace()
            .find_map(|w| w.strip_prefix("dns="))
            .and_then(|v| v.trim_matches('"').split(',').next()?.parse().ok())
            .expect("the ready line names the DNS address");
        Replica {
            child,
            dns,
            http,
            log,
        }
    }

    fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
    let http = free_ports().map(|p| SocketAddr::from(([127, 0, 0, 1], p)));
    let token = "interop-fleet-token-0123456789abcdef";
    let a = Replica::start(dirs[0].path(), http[0], http[1], token);
    let b = Replica::start(dirs[1].path(), http[1], http[0], token);

    let tls = CaTlsConfig::embedded()
        .client_config(default_provider())
        .unwrap();
    let secret = SecretKey::generate();
    let id = secret.public();
    let publisher = PkarrPublisher::builder(format!("http://{}/pkarr", a.http).parse().unwrap())
        // Every address, as on a relay of one's own (iroh's default publishes the relay URL
        // only, not to leak addresses to a public server).
        .addr_filter(AddrFilter::unfiltered())
        .build(secret, tls.clone());
    let relay_b =
        PkarrResolver::builder(format!("http://{}/pkarr", b.http).parse().unwrap()).build(tls);

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
