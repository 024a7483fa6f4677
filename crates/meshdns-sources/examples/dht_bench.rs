//! `--pkarr-dht` measured on a loopback DHT testnet (never the public DHT).
//!
//! ```text
//! dht_bench lookups MESHDNS FILE K     ten mainline nodes on 127.0.0.1; the first K packets of
//!                                      FILE (pkarr_load's format) put to them by a client;
//!                                      `MESHDNS serve --pkarr bench.test. --pkarr-dht` joined to
//!                                      them; each key asked once over UDP (a cold miss: a DHT
//!                                      lookup), then again (a cached hit): latency p50/p99 of
//!                                      each, and meshdns's CPU per query of each (from /proc)
//! dht_bench iroh-lookups IROH FILE K   the same with iroh-dns-server (its `[mainline]` section
//!                                      pointed at the testnet) in place of meshdns
//! dht_bench republish MESHDNS FILE N   the same testnet; meshdns filled with the first N packets
//!                                      (--pkarr-dht off; by pkarr_load, $PKARR_LOAD or beside
//!                                      MESHDNS), then restarted with --pkarr-dht-republish 10s:
//!                                      the time of its first round over the N keys (each read,
//!                                      then put), keys per second, its CPU per key, and the
//!                                      bytes its DHT socket sent and received (iptables
//!                                      counters on its port, when run as root with iptables)
//! ```
//!
//! All print lines of `name: value`. Queries go one at a time (latency, not throughput).

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mainline::async_dht::AsyncDht;
use mainline::{Dht, MutableItem};

const ORIGIN: &str = "bench.test.";

fn read(file: &str, n: usize) -> Vec<(String, Vec<u8>)> {
    let bytes = std::fs::read(file).unwrap();
    let mut rest = &bytes[2..];
    let mut out = Vec::new();
    while !rest.is_empty() && out.len() < n {
        let z32 = String::from_utf8(rest[..52].to_vec()).unwrap();
        let len = usize::from(u16::from_be_bytes([rest[52], rest[53]]));
        out.push((z32, rest[54..54 + len].to_vec()));
        rest = &rest[54 + len..];
    }
    out
}

fn item(z32: &str, payload: &[u8]) -> MutableItem {
    let key = meshdns_iroh::parse_endpoint_id(z32).unwrap();
    MutableItem::new_signed_unchecked(
        *key.as_bytes(),
        payload[..64].try_into().unwrap(),
        &payload[72..],
        i64::from_be_bytes(payload[64..72].try_into().unwrap()),
        None,
    )
}

fn testnet(rt: &tokio::runtime::Runtime, n: usize) -> (Vec<AsyncDht>, Vec<String>) {
    let ports: Vec<u16> = (0..n)
        .map(|_| {
            UdpSocket::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        })
        .collect();
    let all: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let nodes: Vec<AsyncDht> = ports
        .iter()
        .map(|p| {
            let others: Vec<&String> = all
                .iter()
                .filter(|b| !b.ends_with(&format!(":{p}")))
                .collect();
            Dht::builder()
                .server_mode()
                .bind_address(Ipv4Addr::LOCALHOST)
                .port(*p)
                .bootstrap(&others)
                .request_timeout(Duration::from_millis(500))
                .build()
                .unwrap()
                .as_async()
        })
        .collect();
    for node in &nodes {
        rt.block_on(node.bootstrapped());
    }
    (nodes, all)
}

/// `MESHDNS serve …` started; returns it with its DNS and HTTP addresses once ready.
fn serve(bin: &str, args: &[String]) -> (Child, SocketAddr, SocketAddr) {
    let mut child = Command::new(bin)
        .arg("serve")
        .args(args)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--udp-sockets",
            "1",
            "--workers",
            "1",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let ready = loop {
        let line = lines.next().expect("meshdns exited").unwrap();
        if line.contains("meshdns ready") {
            break line;
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let field = |key: &str| -> SocketAddr {
        ready
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .unwrap()
            .trim_matches('"')
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (dns, http) = (field("dns="), field("http="));
    (child, dns, http)
}

fn query(name: &str, id: u16) -> Vec<u8> {
    let mut q = Vec::with_capacity(64);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.trim_end_matches('.').split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 16, 0, 1]);
    q
}

/// Asks every key once, one at a time; returns each latency (ms) and the rcodes seen.
fn ask_all(dns: SocketAddr, keys: &[(String, Vec<u8>)]) -> (Vec<f64>, [usize; 16]) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut ms = Vec::with_capacity(keys.len());
    let mut rcodes = [0usize; 16];
    let mut buf = [0u8; 2048];
    for (i, (z32, _)) in keys.iter().enumerate() {
        let id = i as u16;
        let t = Instant::now();
        sock.send_to(&query(&format!("_iroh.{z32}.{ORIGIN}"), id), dns)
            .unwrap();
        loop {
            match sock.recv_from(&mut buf) {
                Ok((n, _)) if n >= 12 && u16::from_be_bytes([buf[0], buf[1]]) == id => {
                    rcodes[usize::from(buf[3] & 0xF)] += 1;
                    break;
                }
                Ok(_) => continue,
                Err(_) => {
                    rcodes[15] += 1;
                    break;
                }
            }
        }
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    (ms, rcodes)
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn pct(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
}

fn metric(http: SocketAddr, name: &str) -> u64 {
    let mut s = std::net::TcpStream::connect(http).unwrap();
    use std::io::{Read, Write};
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut page = String::new();
    s.read_to_string(&mut page).unwrap();
    page.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// A UDP port of 127.0.0.1 that was free a moment ago.
fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn dht_args(bootstrap: &[String], port: u16) -> Vec<String> {
    let mut args: Vec<String> = [
        "--pkarr-dht",
        "--pkarr-dht-bind",
        &format!("127.0.0.1:{port}"),
        "--pkarr-dht-lookups",
        "1024",
        "--pkarr-dht-client-lookups",
        "100000",
    ]
    .map(String::from)
    .to_vec();
    for b in bootstrap {
        args.extend(["--pkarr-dht-bootstrap".to_string(), b.clone()]);
    }
    args
}

/// K packets put to the testnet by an independent client (16 at a time).
fn put_all(rt: &tokio::runtime::Runtime, bootstrap: &[String], keys: &[(String, Vec<u8>)]) {
    let client = {
        let _g = rt.enter();
        Dht::builder()
            .bind_address(Ipv4Addr::LOCALHOST)
            .port(0)
            .bootstrap(bootstrap)
            .build()
            .unwrap()
            .as_async()
    };
    let t = Instant::now();
    rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for (z32, payload) in keys {
            let (c, i) = (client.clone(), item(z32, payload));
            set.spawn(async move { c.put_mutable(i, None).await.is_ok() });
            if set.len() >= 16 {
                set.join_next().await;
            }
        }
        while set.join_next().await.is_some() {}
    });
    println!(
        "put {} packets by a client: {:.1} s",
        keys.len(),
        t.elapsed().as_secs_f64()
    );
}

/// Each chunk of 100 keys asked cold (a DHT lookup), then at once again (cached: a found
/// packet is cached for 30 s at least, well beyond a chunk's time): latency and the server's
/// CPU per query of each.
fn ask_cold_then_cached(server: &str, pid: u32, dns: SocketAddr, keys: &[(String, Vec<u8>)]) {
    let (mut cold, mut cached) = (Vec::new(), Vec::new());
    let (mut cold_rc, mut cached_rc) = ([0usize; 16], [0usize; 16]);
    let (mut cold_cpu, mut cached_cpu) = (0u64, 0u64);
    for chunk in keys.chunks(100) {
        for (ms, rc, cpu) in [
            (&mut cold, &mut cold_rc, &mut cold_cpu),
            (&mut cached, &mut cached_rc, &mut cached_cpu),
        ] {
            let c0 = cpu_ticks(pid);
            let (m, r) = ask_all(dns, chunk);
            *cpu += cpu_ticks(pid) - c0;
            ms.extend(m);
            for (a, b) in rc.iter_mut().zip(r) {
                *a += b;
            }
        }
    }
    for (name, ms, rcodes, cpu) in [
        ("cold miss (a DHT lookup)", &cold, cold_rc, cold_cpu),
        ("cached hit", &cached, cached_rc, cached_cpu),
    ] {
        println!(
            "{server} {name}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; NOERROR {} SERVFAIL {} NXDOMAIN {} no answer {}; CPU {:.0} µs per query",
            pct(ms, 0.5),
            pct(ms, 0.99),
            pct(ms, 1.0),
            rcodes[0],
            rcodes[2],
            rcodes[3],
            rcodes[15],
            cpu as f64 * 10_000.0 / keys.len() as f64,
        );
    }
}

/// iroh-dns-server 1.4.1 with its DHT fallback pointed at the testnet (its DHT crate binds
/// every address, on a port of its choosing; it is told only the testnet's nodes), one
/// worker thread; returns it with its DNS address once it answers.
fn iroh_serve(bin: &str, dir: &std::path::Path, bootstrap: &[String]) -> (Child, SocketAddr) {
    std::fs::create_dir_all(dir).unwrap();
    let dns_port = free_udp_port();
    let http_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nodes: Vec<String> = bootstrap.iter().map(|b| format!("\"{b}\"")).collect();
    let config = format!(
        "pkarr_put_rate_limit = \"disabled\"\ndata_dir = \"{}\"\n\n[http]\nport = {http_port}\nbind_addr = \"127.0.0.1\"\n\n[dns]\nport = {dns_port}\nbind_addr = \"127.0.0.1\"\ndefault_soa = \"ns1.bench.test. hostmaster.bench.test. 1 7200 3600 1209600 300\"\ndefault_ttl = 300\norigins = [\"{ORIGIN}\", \".\"]\nrr_a = \"127.0.0.1\"\nrr_ns = \"ns1.bench.test.\"\n\n[metrics]\ndisabled = true\n\n[mainline]\nenabled = true\nbootstrap = [{}]\n",
        dir.join("data").display(),
        nodes.join(", ")
    );
    let file = dir.join("iroh.toml");
    std::fs::write(&file, config).unwrap();
    let child = Command::new(bin)
        .arg("-c")
        .arg(&file)
        .env("TOKIO_WORKER_THREADS", "1")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let dns = SocketAddr::from(([127, 0, 0, 1], dns_port));
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buf = [0u8; 512];
    loop {
        assert!(Instant::now() < deadline, "iroh-dns-server never answered");
        let _ = sock.send_to(&query(ORIGIN, 1), dns);
        if sock.recv_from(&mut buf).is_ok() {
            break;
        }
    }
    (child, dns)
}

/// IP bytes counted by iptables rules on UDP port `port` of loopback, sent (from the port)
/// and received (to it); not installed without root or iptables.
struct PortCounter(u16);

impl PortCounter {
    fn rules(port: u16) -> [[String; 2]; 2] {
        [
            ["OUTPUT".into(), format!("--sport={port}")],
            ["INPUT".into(), format!("--dport={port}")],
        ]
    }

    fn install(port: u16) -> Option<PortCounter> {
        for [chain, spec] in Self::rules(port) {
            let ok = Command::new("iptables")
                .args(["-w", "-I", &chain, "-p", "udp", &spec, "-j", "ACCEPT"])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                return None;
            }
        }
        Some(PortCounter(port))
    }

    /// (bytes sent, bytes received).
    fn read(&self) -> (u64, u64) {
        let count = |chain: &str, what: &str| -> u64 {
            let out = Command::new("iptables")
                .args(["-w", "-L", chain, "-v", "-x", "-n"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .find(|l| l.contains(&format!("{what}:{}", self.0)))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
                .unwrap_or(0)
        };
        (count("OUTPUT", "spt"), count("INPUT", "dpt"))
    }
}

impl Drop for PortCounter {
    fn drop(&mut self) {
        for [chain, spec] in Self::rules(self.0) {
            let _ = Command::new("iptables")
                .args(["-w", "-D", &chain, "-p", "udp", &spec, "-j", "ACCEPT"])
                .status();
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = std::env::temp_dir().join(format!("meshdns-dht-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let base: Vec<String> = [
        "--pkarr",
        ORIGIN,
        "--data-dir",
        dir.to_str().unwrap(),
        // The ready line is logged at info.
        "--log-level",
        "info",
    ]
    .map(String::from)
    .to_vec();
    match args.get(1).map(String::as_str) {
        Some("lookups") => {
            let (bin, file, k) = (&args[2], &args[3], args[4].parse().unwrap());
            let keys = read(file, k);
            let (_nodes, bootstrap) = testnet(&rt, 10);
            put_all(&rt, &bootstrap, &keys);
            let mut a = base.clone();
            a.extend(dht_args(&bootstrap, 0));
            let (mut child, dns, http) = serve(bin, &a);
            ask_cold_then_cached("meshdns", child.id(), dns, &keys);
            println!(
                "lookups: started {} found {} not_found {} timeout {}; cache answers {}",
                metric(http, "meshdns_pkarr_dht_lookups_started_total"),
                metric(http, "meshdns_pkarr_dht_lookups_total{outcome=\"found\"}"),
                metric(
                    http,
                    "meshdns_pkarr_dht_lookups_total{outcome=\"not_found\"}"
                ),
                metric(http, "meshdns_pkarr_dht_lookups_total{outcome=\"timeout\"}"),
                metric(http, "meshdns_pkarr_dht_cache_answers_total"),
            );
            let _ = child.kill();
        }
        Some("iroh-lookups") => {
            let (bin, file, k) = (&args[2], &args[3], args[4].parse().unwrap());
            let keys = read(file, k);
            let (_nodes, bootstrap) = testnet(&rt, 10);
            put_all(&rt, &bootstrap, &keys);
            let (mut child, dns) = iroh_serve(bin, &dir, &bootstrap);
            ask_cold_then_cached("iroh-dns-server", child.id(), dns, &keys);
            let _ = child.kill();
        }
        Some("republish") => {
            let (bin, file, n): (&String, &String, u64) =
                (&args[2], &args[3], args[4].parse().unwrap());
            let (_nodes, bootstrap) = testnet(&rt, 10);
            // Filled without the DHT, by pkarr_load (it signs and PUTs as the other benches).
            let (mut child, _, http) = serve(bin, &base);
            let load = std::env::var("PKARR_LOAD").unwrap_or_else(|_| {
                let dir = std::path::Path::new(bin).parent().unwrap();
                dir.join("examples/pkarr_load").display().to_string()
            });
            let status = Command::new(load)
                .args([
                    "put",
                    file,
                    &http.to_string(),
                    "127.0.0.1:1",
                    ORIGIN,
                    "--conns",
                    "32",
                ])
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
            let _ = child.kill();
            let _ = child.wait();
            let port = free_udp_port();
            let counter = PortCounter::install(port);
            let mut a = base.clone();
            a.extend(dht_args(&bootstrap, port));
            a.extend(["--pkarr-dht-republish".into(), "10s".into()]);
            let (mut child, _, http) = serve(bin, &a);
            let t = Instant::now();
            // The first round over every stored key (10 s rounds: the rate is bounded by the
            // keys a second it may start, 1,000, and by the 64 in flight times each key's read
            // and put).
            let c0 = cpu_ticks(child.id());
            while metric(http, "meshdns_pkarr_dht_republish_rounds_total") == 0 {
                std::thread::sleep(Duration::from_millis(200));
            }
            let secs = t.elapsed().as_secs_f64();
            let done = metric(http, "meshdns_pkarr_dht_republished_total");
            let cpu = (cpu_ticks(child.id()) - c0) as f64 / 100.0;
            println!(
                "republish, {n} stored: the first round read and put {done} keys in {secs:.1} s ({:.0} keys/s); meshdns CPU {cpu:.1} s ({:.0} µs per key); puts ok {} failed {}; newer found {}",
                done as f64 / secs,
                cpu * 1e6 / done.max(1) as f64,
                metric(http, "meshdns_pkarr_dht_puts_total{outcome=\"ok\"}"),
                metric(http, "meshdns_pkarr_dht_puts_total{outcome=\"failed\"}"),
                metric(http, "meshdns_pkarr_dht_republish_newer_total"),
            );
            match &counter {
                Some(c) => {
                    let (sent, received) = c.read();
                    println!(
                        "republish bytes on the DHT socket: sent {:.1} MB ({:.0} per key), received {:.1} MB ({:.0} per key)",
                        sent as f64 / 1e6,
                        sent as f64 / done.max(1) as f64,
                        received as f64 / 1e6,
                        received as f64 / done.max(1) as f64,
                    );
                }
                None => println!("republish bytes: not counted (needs root and iptables)"),
            }
            let _ = child.kill();
        }
        _ => {
            eprintln!("usage: see the top of crates/meshdns-sources/examples/dht_bench.rs");
            std::process::exit(2);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
