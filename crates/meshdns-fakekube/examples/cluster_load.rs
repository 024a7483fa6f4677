//! The cluster-objects benchmark's cluster: the in-memory API server holding N Services with
//! their EndpointSlices, a `meshdns serve --kubernetes --kube-source service` started against
//! it, then 1% of the Services' load balancer addresses changed every second, each change
//! timed until meshdns answers it over DNS. Prints start → ready, RSS, change → answer
//! p50/p99 and meshdns's CPU per change (`bench/cluster_objects.sh` runs it).
//!
//!   cargo run --release -p meshdns-fakekube --example cluster_load -- MESHDNS N SECONDS
//!
//! Of the N Services, nine in ten are LoadBalancers (with a slice each, unlabelled as headless,
//! so not watched) and one in ten headless with a slice of three ready endpoints. Loopback only.

use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use meshdns_fakekube::FakeKube;
use serde_json::{Value, json};

fn service(i: usize) -> Value {
    let name = format!("svc-{i}");
    let mut s = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": format!("ns-{}", i % 50),
            "annotations": {"external-dns.kubernetes.io/hostname": format!("{name}.bench.example.org")}},
        "spec": {"type": "LoadBalancer", "clusterIP": ip(10, i), "ports": [{"port": 443}]},
        "status": {"loadBalancer": {"ingress": [{"ip": ip(172, i)}]}}});
    if i.is_multiple_of(10) {
        s["spec"] = json!({"clusterIP": "None", "ports": [{"port": 443}]});
        s["status"] = json!({});
    }
    s
}

fn slice(i: usize) -> Value {
    let headless = i.is_multiple_of(10);
    let mut labels = json!({"kubernetes.io/service-name": format!("svc-{i}")});
    if headless {
        labels["service.kubernetes.io/headless"] = json!("");
    }
    let endpoints: Vec<Value> = (0..3)
        .map(|e| {
            json!({"addresses": [ip(100, i * 3 + e)], "hostname": format!("pod-{e}"),
            "conditions": {"ready": true}})
        })
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("svc-{i}-abcde"), "namespace": format!("ns-{}", i % 50), "labels": labels},
        "addressType": "IPv4", "endpoints": endpoints})
}

fn ip(first: u8, i: usize) -> String {
    Ipv4Addr::new(first, (i >> 16) as u8, (i >> 8) as u8, i as u8).to_string()
}

/// An A query for `name`, and the first A record of the answer, if any.
fn query_a(sock: &UdpSocket, server: SocketAddr, name: &str, id: u16) -> Option<Ipv4Addr> {
    let mut q = vec![(id >> 8) as u8, id as u8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.trim_end_matches('.').split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    sock.send_to(&q, server).ok()?;
    let mut buf = [0u8; 1500];
    let n = sock.recv(&mut buf).ok()?;
    let r = &buf[..n];
    if r.len() < 12 || r[..2] != q[..2] || u16::from_be_bytes([r[6], r[7]]) == 0 {
        return None;
    }
    // Skip the question, then read answers until an A.
    let mut at = q.len();
    for _ in 0..u16::from_be_bytes([r[6], r[7]]) {
        // The owner: a pointer (2 bytes) or labels.
        while at < r.len() {
            let l = r[at] as usize;
            if l & 0xc0 == 0xc0 {
                at += 2;
                break;
            }
            at += 1 + l;
            if l == 0 {
                break;
            }
        }
        let (rtype, len) = (
            u16::from_be_bytes([*r.get(at)?, *r.get(at + 1)?]),
            u16::from_be_bytes([*r.get(at + 8)?, *r.get(at + 9)?]) as usize,
        );
        at += 10;
        if rtype == 1 && len == 4 {
            return Some(Ipv4Addr::new(r[at], r[at + 1], r[at + 2], r[at + 3]));
        }
        at += len;
    }
    None
}

fn get(addr: SocketAddr, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.get(9..12)?.parse().ok()
}

/// (RSS in KiB, CPU seconds) of a process.
fn usage(pid: u32) -> (u64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(") ").next().unwrap_or("").split(' ').collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<f64>().ok())
        .sum();
    (rss, ticks / 100.0)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let meshdns = args.get(1).expect("MESHDNS N SECONDS").clone();
    let n: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let seconds: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(30);
    let fake = FakeKube::start().await;
    let mut services: Vec<Value> = (0..n).map(service).collect();
    for (i, s) in services.iter().enumerate() {
        fake.insert(s.clone());
        fake.insert(slice(i));
    }
    let dir = std::env::temp_dir().join(format!("meshdns-cluster-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig("bench")).unwrap();
    let (dns_port, http_port) = (free_port(), free_port());
    let dns: SocketAddr = ([127, 0, 0, 1], dns_port).into();
    let http: SocketAddr = ([127, 0, 0, 1], http_port).into();
    // CLUSTER_LOAD_DEBUG: meshdns's log (info) on stderr, and each change never answered.
    let debug = std::env::var_os("CLUSTER_LOAD_DEBUG").is_some();
    let started = Instant::now();
    let mut child = Command::new(&meshdns)
        .args(["serve", "--kubernetes", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(["--kube-source", "service", "--zone", "bench.example.org"])
        .args(["--listen", &dns.to_string(), "--http", &http.to_string()])
        .args(["--udp-sockets", "1"])
        .args(["--log-level", if debug { "info" } else { "warn" }])
        .stdout(Stdio::null())
        .stderr(if debug {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn()
        .expect("meshdns");
    let pid = child.id();
    let ready = tokio::task::spawn_blocking(move || {
        while get(http, "/readyz") != Some(200) {
            assert!(started.elapsed() < Duration::from_secs(120), "never ready");
            std::thread::sleep(Duration::from_millis(10));
        }
        started.elapsed()
    })
    .await
    .unwrap();
    // Ready means loaded; the names are answered from the first snapshot with the objects.
    let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
    probe
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let last = format!("svc-{}.bench.example.org", n - 1);
    while query_a(&probe, dns, &last, 1).is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "never answered"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let answered = started.elapsed();
    let (rss_ready, cpu_ready) = usage(pid);
    println!(
        "ready:     {n} Services and their EndpointSlices: /readyz 200 after {:.2} s, every name answered after {:.2} s, {:.2} s of CPU, RSS {} MiB",
        ready.as_secs_f64(),
        answered.as_secs_f64(),
        cpu_ready,
        rss_ready / 1024
    );

    // 1% of the Services a second, in ten steps a second; each change polled until answered.
    let per_step = (n / 1000).max(1);
    let mut waits = Vec::new();
    let churn_start = Instant::now();
    let (_, cpu_before) = usage(pid);
    let mut version = 1usize;
    let mut next = 1usize;
    while churn_start.elapsed() < Duration::from_secs(seconds) {
        let step = Instant::now();
        for _ in 0..per_step {
            let i = next % n;
            next += 7;
            if i.is_multiple_of(10) {
                continue; // headless: no load balancer address
            }
            version += 1;
            let new = Ipv4Addr::new(
                198,
                18 + (version >> 16) as u8 % 2,
                (version >> 8) as u8,
                version as u8,
            );
            services[i]["status"]["loadBalancer"]["ingress"][0]["ip"] = json!(new.to_string());
            let name = format!("svc-{i}.bench.example.org");
            let t0 = Instant::now();
            fake.replace(services[i].clone());
            waits.push(tokio::task::spawn_blocking(move || {
                let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
                sock.set_read_timeout(Some(Duration::from_millis(200)))
                    .unwrap();
                let mut id = 0u16;
                loop {
                    id = id.wrapping_add(1);
                    if query_a(&sock, dns, &name, id) == Some(new) {
                        return Some(t0.elapsed().as_secs_f64() * 1000.0);
                    }
                    if t0.elapsed() > Duration::from_secs(10) {
                        if debug {
                            let now = query_a(&sock, dns, &name, id.wrapping_add(1));
                            eprintln!("never answered: {name} want {new} have {now:?}");
                        }
                        return None;
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            }));
        }
        let left = Duration::from_millis(100).saturating_sub(step.elapsed());
        tokio::time::sleep(left).await;
    }
    let mut ms = Vec::new();
    let mut lost = 0;
    let changes = waits.len();
    for w in waits {
        match w.await.unwrap() {
            Some(v) => ms.push(v),
            None => lost += 1,
        }
    }
    let (rss_after, cpu_after) = usage(pid);
    ms.sort_by(f64::total_cmp);
    println!(
        "churn:     {changes} load balancer addresses changed in {seconds} s ({} a second): change → answer p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; {lost} never answered in 10 s",
        changes as u64 / seconds.max(1),
        percentile(&ms, 0.5),
        percentile(&ms, 0.99),
        ms.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "cpu:       meshdns {:.2} s of CPU during the churn ({:.1} ms per change, the pollers' queries included); RSS {} MiB after",
        cpu_after - cpu_before,
        (cpu_after - cpu_before) * 1000.0 / changes.max(1) as f64,
        rss_after / 1024
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
