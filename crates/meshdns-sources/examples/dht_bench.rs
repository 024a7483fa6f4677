//! `--pkarr-dht` measured on a loopback DHT testnet (never the public DHT).
//!
//! ```text
//! dht_bench lookups MESHDNS FILE K     ten mainline nodes on 127.0.0.1; the first K packets of
//!                                      FILE (pkarr_load's format) put to them by a client;
//!                                      `MESHDNS serve --pkarr bench.test. --pkarr-dht` joined to
//!                                      them; each key asked once over UDP (a cold miss: a DHT
//!                                      lookup), then again (a cached hit): latency p50/p99 of
//!                                      each, and meshdns's CPU per query of each (from /proc)
//! dht_bench republish MESHDNS FILE N   the same testnet; meshdns filled with the first N packets
//!                                      (--pkarr-dht off; by pkarr_load, $PKARR_LOAD or beside
//!                                      MESHDNS), then restarted with
//!                                      --pkarr-dht-republish 10s: keys read and put in a
//!                                      minute, per second, and its CPU per key
//! ```
//!
//! Both print lines of `name: value`. Queries go one at a time (latency, not throughput).

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

fn dht_args(bootstrap: &[String]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--pkarr-dht",
        "--pkarr-dht-bind",
        "127.0.0.1:0",
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
            let client = {
                let _g = rt.enter();
                Dht::builder()
                    .bind_address(Ipv4Addr::LOCALHOST)
                    .port(0)
                    .bootstrap(&bootstrap)
                    .build()
                    .unwrap()
                    .as_async()
            };
            let t = Instant::now();
            rt.block_on(async {
                let mut set = tokio::task::JoinSet::new();
                for (z32, payload) in &keys {
                    let (c, i) = (client.clone(), item(z32, payload));
                    set.spawn(async move { c.put_mutable(i, None).await.is_ok() });
                    if set.len() >= 16 {
                        set.join_next().await;
                    }
                }
                while set.join_next().await.is_some() {}
            });
            println!(
                "put {k} packets by a client: {:.1} s",
                t.elapsed().as_secs_f64()
            );
            let mut a = base.clone();
            a.extend(dht_args(&bootstrap));
            let (mut child, dns, http) = serve(bin, &a);
            // A found packet is cached for its TTL (30 s here, the floor): each chunk of keys is
            // asked cold, then at once again (cached), well within it.
            let (mut cold, mut cached) = (Vec::new(), Vec::new());
            let (mut cold_rc, mut cached_rc) = ([0usize; 16], [0usize; 16]);
            let (mut cold_cpu, mut cached_cpu) = (0u64, 0u64);
            for chunk in keys.chunks(100) {
                for (ms, rc, cpu) in [
                    (&mut cold, &mut cold_rc, &mut cold_cpu),
                    (&mut cached, &mut cached_rc, &mut cached_cpu),
                ] {
                    let c0 = cpu_ticks(child.id());
                    let (m, r) = ask_all(dns, chunk);
                    *cpu += cpu_ticks(child.id()) - c0;
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
                    "{name}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; NOERROR {} SERVFAIL {} NXDOMAIN {} no answer {}; meshdns CPU {:.0} µs per query",
                    pct(ms, 0.5),
                    pct(ms, 0.99),
                    pct(ms, 1.0),
                    rcodes[0],
                    rcodes[2],
                    rcodes[3],
                    rcodes[15],
                    cpu as f64 * 10_000.0 / k as f64,
                );
            }
            println!(
                "lookups: found {} not_found {} timeout {}; cache answers {}",
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
            let mut a = base.clone();
            a.extend(dht_args(&bootstrap));
            a.extend(["--pkarr-dht-republish".into(), "10s".into()]);
            let (mut child, _, http) = serve(bin, &a);
            // A minute of republishing (10 s rounds: the rate is bounded by the keys a second
            // it may start, 1,000, and by the 64 in flight times each key's read and put).
            let c0 = cpu_ticks(child.id());
            let r0 = metric(http, "meshdns_pkarr_dht_republished_total");
            std::thread::sleep(Duration::from_secs(60));
            let done = metric(http, "meshdns_pkarr_dht_republished_total") - r0;
            let cpu = (cpu_ticks(child.id()) - c0) as f64 / 100.0;
            println!(
                "republish, {n} stored: {done} keys read and put in 60 s ({:.0} keys/s); meshdns CPU {cpu:.1} s ({:.0} µs per key); puts ok {} failed {}",
                done as f64 / 60.0,
                cpu * 1e6 / done.max(1) as f64,
                metric(http, "meshdns_pkarr_dht_puts_total{outcome=\"ok\"}"),
                metric(http, "meshdns_pkarr_dht_puts_total{outcome=\"failed\"}"),
            );
            let _ = child.kill();
        }
        _ => {
            eprintln!("usage: see the top of crates/meshdns-sources/examples/dht_bench.rs");
            std::process::exit(2);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
