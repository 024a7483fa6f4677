//! A pkarr publish load generator: measures a relay (meshdns or iroh-dns-server), not itself.
//!
//! ```text
//! pkarr_load sign N VERSION FILE [--spread M]
//!                                     pre-sign N packets (keys 0..N, TXT as iroh publishes; the
//!                                     addr port is 1000+VERSION so each version is told apart);
//!                                     with --spread, N keys evenly spread over 0..M instead
//!                                     (republishes scattered over a store filled with 0..M)
//! pkarr_load put FILE HTTP DNS ORIGIN [--rate R] [--conns C] [--pid PID] [--check]
//!                  [--answer-dns ADDR]
//!                                     PUT every packet of FILE over C keep-alive connections, at
//!                                     R PUT/s (open loop; 0 = as fast as acknowledged); with
//!                                     --check, poll DNS (or ADDR: another replica) after each 204
//!                                     until the new version is answered (publish → answer
//!                                     latency). With --pid, report the server's CPU time per
//!                                     accepted PUT (from /proc; PIDs separated by commas: each).
//! pkarr_load ready DNS ORIGIN FILE    wait until the first key of FILE is answered over DNS
//!                                     (any version of it) and print the milliseconds it took
//! pkarr_load missing FILE HTTP        GET every key of FILE and print how many the relay does
//!                                     not have (acknowledged publishes lost)
//! pkarr_load verify FILE [--rounds R] check every signature of FILE on this thread, as a
//!                                     replica checks a pushed or caught-up batch, R times (3);
//!                                     print the best round's microseconds per packet
//! ```
//!
//! Signing happens in `sign`, before any measurement (signing in the loop measured the
//! client last time). Only loopback addresses are used in the benchmarks.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use iroh_base::SecretKey;

fn secret(i: u64) -> SecretKey {
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&i.to_be_bytes());
    seed[8..16].copy_from_slice(b"meshdns!");
    SecretKey::from_bytes(&seed)
}

struct Packet {
    z32: String,
    payload: Vec<u8>,
    marker: Vec<u8>,
}

fn marker(version: u16) -> Vec<u8> {
    format!("addr=192.0.2.7:{}", 1000 + version).into_bytes()
}

fn sign(n: u64, version: u16, file: &str, spread: u64) {
    let step = (spread / n.max(1)).max(1);
    let started = Instant::now();
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    let chunks: Vec<Vec<u8>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut out = Vec::new();
                    for i in (t..n).step_by(threads as usize) {
                        let secret = secret(i * step);
                        let addr = String::from_utf8(marker(version)).unwrap();
                        let strings = [
                            "relay=https://relay.example.net./".to_string(),
                            addr,
                            "addr=[2001:db8::7]:4433".to_string(),
                        ];
                        let packet = iroh_dns::pkarr::SignedPacket::from_txt_strings(
                            &secret, "_iroh", strings, 30,
                        )
                        .unwrap()
                        .to_relay_payload();
                        out.extend_from_slice(secret.public().to_z32().as_bytes());
                        out.extend_from_slice(&(packet.len() as u16).to_be_bytes());
                        out.extend_from_slice(&packet);
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut f = std::io::BufWriter::new(std::fs::File::create(file).unwrap());
    f.write_all(&version.to_be_bytes()).unwrap();
    for c in chunks {
        f.write_all(&c).unwrap();
    }
    f.flush().unwrap();
    eprintln!(
        "signed {n} packets in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The signature checks of a replica's batch path, on one thread, without the store.
fn verify(file: &str, rounds: u32) {
    let packets = read(file);
    let keys: Vec<[u8; 32]> = packets
        .iter()
        .map(|p| meshdns_iroh::endpoint_id_bytes(&p.z32).expect("a z-base-32 key"))
        .collect();
    let items: Vec<([u8; 32], &[u8])> = keys
        .iter()
        .zip(&packets)
        .map(|(k, p)| (*k, p.payload.as_slice()))
        .collect();
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let started = Instant::now();
        // In pages of 4,096, as a catch-up page brings them.
        for page in items.chunks(4096) {
            let verdicts = meshdns_iroh::pkarr::SignedPacket::verify_relay_batch(page);
            assert!(verdicts.iter().all(Result::is_ok), "every packet verifies");
        }
        best = best.min(started.elapsed().as_secs_f64());
    }
    println!(
        "{:.2} µs per packet ({} packets, best of {rounds})",
        best * 1e6 / items.len() as f64,
        items.len()
    );
}

fn read(file: &str) -> Vec<Packet> {
    let bytes = std::fs::read(file).unwrap();
    let version = u16::from_be_bytes([bytes[0], bytes[1]]);
    let mut rest = &bytes[2..];
    let mut out = Vec::new();
    while !rest.is_empty() {
        let z32 = String::from_utf8(rest[..52].to_vec()).unwrap();
        let len = usize::from(u16::from_be_bytes([rest[52], rest[53]]));
        out.push(Packet {
            z32,
            payload: rest[54..54 + len].to_vec(),
            marker: marker(version),
        });
        rest = &rest[54 + len..];
    }
    out
}

/// One keep-alive HTTP/1.1 PUT; returns the status.
fn put(conn: &mut BufReader<TcpStream>, p: &Packet) -> std::io::Result<u16> {
    let head = format!(
        "PUT /pkarr/{} HTTP/1.1\r\nHost: relay\r\nContent-Type: application/x-pkarr-signed-packet\r\nContent-Length: {}\r\n\r\n",
        p.z32,
        p.payload.len()
    );
    let s = conn.get_mut();
    s.write_all(head.as_bytes())?;
    s.write_all(&p.payload)?;
    read_response(conn)
}

/// Reads one HTTP/1.1 response (status line, headers, a Content-Length body); returns the status.
fn read_response(conn: &mut BufReader<TcpStream>) -> std::io::Result<u16> {
    let mut line = String::new();
    conn.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut length = 0usize;
    loop {
        line.clear();
        conn.read_line(&mut line)?;
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    conn.read_exact(&mut body)?;
    Ok(status)
}

fn query(name: &str, id: u16) -> Vec<u8> {
    let mut q = vec![(id >> 8) as u8, id as u8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.trim_end_matches('.').split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 16, 0, 1]);
    q
}

/// Polls DNS until the answer holds `marker` (or 5 s pass); returns whether it did.
fn answered(sock: &UdpSocket, dns: SocketAddr, name: &str, marker: &[u8]) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = [0u8; 1500];
    let mut id = 0u16;
    while Instant::now() < deadline {
        id = id.wrapping_add(1);
        let _ = sock.send_to(&query(name, id), dns);
        let until = Instant::now() + Duration::from_millis(50);
        while let Ok(n) = sock.recv(&mut buf) {
            if n >= 2 && u16::from_be_bytes([buf[0], buf[1]]) == id {
                if buf[..n].windows(marker.len()).any(|w| w == marker) {
                    return true;
                }
                break;
            }
            if Instant::now() > until {
                break;
            }
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    false
}

fn cpu_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    match args.get(1).map(String::as_str) {
        Some("sign") => {
            let n = args[2].parse().unwrap();
            let spread = flag("--spread").map_or(n, |m| m.parse().unwrap());
            sign(n, args[3].parse().unwrap(), &args[4], spread)
        }
        Some("ready") => {
            let dns: SocketAddr = args[2].parse().unwrap();
            let packets = read(&args[4]);
            let last = packets.first().unwrap();
            let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
            sock.set_read_timeout(Some(Duration::from_millis(20)))
                .unwrap();
            let started = Instant::now();
            let name = format!("_iroh.{}.{}", last.z32, args[3]);
            // Any version: the stream may have re-published the key since FILE was signed.
            while !answered(&sock, dns, &name, b"addr=192.0.2.7:") {}
            println!("{}", started.elapsed().as_millis());
        }
        Some("put") => run_put(&args, &flag),
        Some("verify") => {
            let rounds = flag("--rounds").map_or(3, |r| r.parse().unwrap());
            verify(&args[2], rounds)
        }
        Some("missing") => {
            let http: SocketAddr = args[3].parse().unwrap();
            let mut conn = BufReader::new(TcpStream::connect(http).unwrap());
            let mut missing = 0;
            for p in read(&args[2]) {
                let req = format!("GET /pkarr/{} HTTP/1.1\r\nHost: relay\r\n\r\n", p.z32);
                conn.get_mut().write_all(req.as_bytes()).unwrap();
                if read_response(&mut conn).unwrap() != 200 {
                    missing += 1;
                }
            }
            println!("{missing}");
        }
        _ => {
            eprintln!("usage: see the top of crates/meshdns-sources/examples/pkarr_load.rs");
            std::process::exit(2);
        }
    }
}

fn run_put(args: &[String], flag: &dyn Fn(&str) -> Option<String>) {
    let packets = read(&args[2]);
    let http: SocketAddr = args[3].parse().unwrap();
    let dns: SocketAddr = args[4].parse().unwrap();
    let origin = args[5].clone();
    let rate: f64 = flag("--rate").map_or(0.0, |r| r.parse().unwrap());
    let conns: usize = flag("--conns").map_or(32, |c| c.parse().unwrap());
    let pids: Vec<String> =
        flag("--pid").map_or(Vec::new(), |p| p.split(',').map(str::to_string).collect());
    let check = args.iter().any(|a| a == "--check");
    let answer_dns: SocketAddr = flag("--answer-dns").map_or(dns, |a| a.parse().unwrap());
    let next = AtomicUsize::new(0);
    let statuses = Mutex::new(std::collections::BTreeMap::<u16, usize>::new());
    let put_ms = Mutex::new(Vec::new());
    let answer_ms = Mutex::new(Vec::new());
    let unanswered = AtomicUsize::new(0);
    let ticks0: Vec<Option<u64>> = pids.iter().map(|p| cpu_ticks(p)).collect();
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..conns {
            s.spawn(|| {
                let mut conn = BufReader::new(TcpStream::connect(http).unwrap());
                conn.get_ref().set_nodelay(true).unwrap();
                let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
                sock.set_read_timeout(Some(Duration::from_millis(20)))
                    .unwrap();
                let (mut mine_put, mut mine_answer, mut mine_status) =
                    (Vec::new(), Vec::new(), Vec::new());
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(p) = packets.get(i) else { break };
                    if rate > 0.0 {
                        let due = started + Duration::from_secs_f64(i as f64 / rate);
                        if let Some(wait) = due.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                    }
                    let t0 = Instant::now();
                    let status = match put(&mut conn, p) {
                        Ok(s) => s,
                        Err(_) => {
                            conn = BufReader::new(TcpStream::connect(http).unwrap());
                            0
                        }
                    };
                    mine_put.push(t0.elapsed().as_secs_f64() * 1000.0);
                    mine_status.push(status);
                    if check && status == 204 {
                        let name = format!("_iroh.{}.{origin}", p.z32);
                        if answered(&sock, answer_dns, &name, &p.marker) {
                            mine_answer.push(t0.elapsed().as_secs_f64() * 1000.0);
                        } else {
                            unanswered.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                put_ms.lock().unwrap().extend(mine_put);
                answer_ms.lock().unwrap().extend(mine_answer);
                let mut st = statuses.lock().unwrap();
                for s in mine_status {
                    *st.entry(s).or_default() += 1;
                }
            });
        }
    });
    let elapsed = started.elapsed().as_secs_f64();
    let ticks1: Vec<Option<u64>> = pids.iter().map(|p| cpu_ticks(p)).collect();
    let statuses = statuses.into_inner().unwrap();
    let accepted = *statuses.get(&204).unwrap_or(&0);
    let mut put_ms = put_ms.into_inner().unwrap();
    let mut answer_ms = answer_ms.into_inner().unwrap();
    put_ms.sort_by(f64::total_cmp);
    answer_ms.sort_by(f64::total_cmp);
    let cpu_us = ticks0
        .iter()
        .zip(&ticks1)
        .map(|t| match t {
            (Some(a), Some(b)) if accepted > 0 => {
                let hz = 100.0; // USER_HZ on Linux
                format!("{:.0}", (b - a) as f64 / hz * 1e6 / accepted as f64)
            }
            _ => "-".into(),
        })
        .collect::<Vec<String>>()
        .join(",");
    println!(
        "offered={} achieved={:.0} statuses={:?} put_p50_ms={:.2} put_p99_ms={:.2} answer_p50_ms={:.2} answer_p99_ms={:.2} unanswered={} server_cpu_us_per_put={}",
        if rate > 0.0 {
            format!("{rate:.0}")
        } else {
            "max".into()
        },
        accepted as f64 / elapsed,
        statuses,
        percentile(&put_ms, 0.5),
        percentile(&put_ms, 0.99),
        percentile(&answer_ms, 0.5),
        percentile(&answer_ms, 0.99),
        unanswered.load(Ordering::Relaxed),
        cpu_us,
    );
}
