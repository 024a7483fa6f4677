//! Starting and talking to the real binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// A running `meshdns serve`.
pub struct Meshdns {
    pub child: Child,
    pub dns: SocketAddr,
    pub http: Option<SocketAddr>,
    pub https: Option<SocketAddr>,
    pub dot: Option<SocketAddr>,
    pub log: Arc<Mutex<Vec<String>>>,
}

pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_meshdns"))
}

/// Runs `meshdns ARGS`, asserts it succeeded, and returns what it printed on stdout.
pub fn stdout_of(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "meshdns {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

impl Meshdns {
    /// Runs `meshdns serve ARGS --listen 127.0.0.1:PORT` and waits for its ready line. PORT
    /// is below the kernel's ephemeral range ([`free_port`]), not `:0`: a port the kernel
    /// picks for the server is one it may also pick for a client's socket, and dig's UDP
    /// socket sets `SO_REUSEPORT` as the server's do, so dig could be bound to the server's
    /// own port and read its own query back as the answer (";; Warning: query response not
    /// set", which failed a CI run). Another test's server may take the port first: then
    /// this one cannot bind its TCP listener, exits, and is started again on another port.
    pub fn serve(args: &[&str]) -> Meshdns {
        let mut last = String::new();
        for _ in 0..8 {
            let port = free_port();
            match Meshdns::serve_on(args, port) {
                Ok(m) => return m,
                // Taken by another test's server meanwhile (not a port the test gave).
                Err(log)
                    if log.contains(&format!("cannot bind TCP 127.0.0.1:{port}"))
                        || log.contains(&format!("cannot bind UDP 127.0.0.1:{port}")) =>
                {
                    last = log;
                }
                Err(log) => panic!("meshdns never became ready; log:\n{log}"),
            }
        }
        panic!("meshdns could not bind a free port in 8 tries; the last log:\n{last}");
    }

    fn serve_on(args: &[&str], port: u16) -> Result<Meshdns, String> {
        let listen = format!("127.0.0.1:{port}");
        let mut child = bin()
            .arg("serve")
            .args(args)
            .args(["--listen", &listen, "--log-level", "info"])
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("meshdns starts");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let sink = log.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("meshdns ready") {
                    let _ = tx.send(line.clone());
                }
                sink.lock().unwrap().push(line);
            }
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let ready = loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => break line,
                Err(_) if std::time::Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(log.lock().unwrap().join("\n"));
                }
                Err(_) => {
                    if child.try_wait().unwrap().is_some() {
                        // Exited: its whole log, once the pipe is read to its end (and ready
                        // if it said so before it exited; the test then sees the exit).
                        let _ = reader.join();
                        match rx.try_recv() {
                            Ok(line) => break line,
                            Err(_) => return Err(log.lock().unwrap().join("\n")),
                        }
                    }
                }
            }
        };
        let field = |key: &str| -> Option<String> {
            ready
                .split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .map(|v| v.trim_matches('"').to_string())
        };
        let dns = field("dns=")
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let http = field("http=").and_then(|h| h.parse().ok());
        let https = field("https=").and_then(|h| h.parse().ok());
        let dot = field("dot=").and_then(|h| h.split(',').next()?.parse().ok());
        Ok(Meshdns {
            child,
            dns,
            http,
            https,
            dot,
            log,
        })
    }

    /// Sends SIGTERM and returns the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) with a pid we own and a valid signal number has no memory effects.
        let rc = unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        assert_eq!(rc, 0);
        for _ in 0..200 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        let _ = self.child.kill();
        panic!("meshdns did not exit on SIGTERM");
    }

    /// Whether the process is still running.
    pub fn child_alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// The log lines so far.
    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// `GET path` on the HTTP listener: (status, body).
    /// Waits (5 s at most) until the log holds `text`: a line is written before the effect a
    /// test observes, but reaches the test through the pipe reader.
    pub fn wait_log(&self, text: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !self.log_text().contains(text) {
            assert!(
                std::time::Instant::now() < deadline,
                "never logged {text:?}:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        http_get(self.http.expect("started with --http"), path)
    }
}

impl Drop for Meshdns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal HTTP/1.0 GET: (status, body as text).
pub fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let (status, _, body) = http(addr, "GET", path, None, &[]);
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A minimal HTTP/1.0 request: (status, header block, body bytes).
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> (u16, String, Vec<u8>) {
    let headers: Vec<(&str, &str)> = content_type
        .map(|ct| ("Content-Type", ct))
        .into_iter()
        .collect();
    http_with(addr, method, path, &headers, body)
}

/// [`http`] with any request headers.
pub fn http_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.0\r\nHost: meshdns\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header block");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head, raw[split + 4..].to_vec())
}

/// Runs `dig @server -p port ARGS +norec +time=2 +tries=1` and returns its output.
pub fn dig(server: SocketAddr, args: &[&str]) -> String {
    let out = Command::new("dig")
        .arg(format!("@{}", server.ip()))
        .args([
            "-p",
            &server.port().to_string(),
            "+norec",
            "+time=2",
            "+tries=1",
        ])
        .args(args)
        .output()
        .expect("dig is installed (apt-get install dnsutils)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Polls `dig` until its output contains `want` (15 s at most: the bound only keeps a broken
/// build from hanging).
pub fn until(m: &Meshdns, args: &[&str], want: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let out = dig(m.dns, args);
        if out.contains(want) {
            return out;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never {want}:\n{out}\nlog:\n{}",
            m.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes `content` to `dir/name` and returns the path as a string.
pub fn write(dir: &Path, name: &str, content: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p.display().to_string()
}

/// iroh's lookup of `id` under `origin`, retried (cache cleared) until it succeeds or
/// `seconds` pass: a publish is served one debounce after it is accepted. The bound only
/// keeps a broken build from hanging; it is not a timing assertion.
pub async fn resolve_within(
    resolver: &iroh_dns::dns::DnsResolver,
    id: &iroh_base::EndpointId,
    origin: &str,
    seconds: u64,
) -> Option<iroh_dns::endpoint_info::EndpointInfo> {
    let deadline = std::time::Instant::now() + Duration::from_secs(seconds);
    loop {
        resolver.clear_cache();
        if let Ok(info) = resolver.lookup_endpoint_by_id(id, origin).await {
            return Some(info);
        }
        if std::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The test servers' DNS ports are ones the kernel never hands a client socket: below its
/// ephemeral range. (On a port it picked, a dig whose socket drew the same port read its own
/// query back as the answer.)
#[test]
fn test_servers_listen_below_the_ephemeral_range() {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
    let low: u16 = range.split_whitespace().next().unwrap().parse().unwrap();
    let servers: Vec<Meshdns> = (0..3).map(|_| Meshdns::serve(&[])).collect();
    for m in &servers {
        assert!(m.dns.port() < low, "{} within {range}", m.dns);
    }
    let ports: std::collections::HashSet<u16> = servers.iter().map(|m| m.dns.port()).collect();
    assert_eq!(ports.len(), 3, "three servers, three ports");
    for m in servers {
        assert!(m.terminate().success());
    }
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let text = stdout_of(&["--version"]);
    let commit = text
        .strip_prefix(concat!("meshdns ", env!("CARGO_PKG_VERSION"), " (commit "))
        .and_then(|rest| rest.strip_suffix(")\n"))
        .unwrap_or_else(|| panic!("unexpected --version output: {text:?}"));
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string());
    match head {
        // Built in this checkout: the commit is HEAD's.
        Some(head) => assert_eq!(commit, head),
        None => assert_eq!(commit, "unknown"),
    }
}

/// The Dockerfile's runtime stage is distroless `cc-debian12`: glibc (libc, libm, libdl,
/// libpthread, librt, the loader), libgcc_s and libstdc++. The binary must load nothing else
/// (an OpenSSL or a libz pulled in by a dependency would fail at start in the image).
#[test]
fn the_binary_needs_only_the_libraries_of_the_runtime_image() {
    let out = Command::new("readelf")
        .args(["-d", env!("CARGO_BIN_EXE_meshdns")])
        .output()
        .expect("readelf (binutils) must be installed");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let needed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1)?.split(']').next())
        .collect();
    assert!(needed.contains(&"libc.so.6"), "{text}");
    let provided = [
        "libc.so.6",
        "libm.so.6",
        "libdl.so.2",
        "libpthread.so.0",
        "librt.so.1",
        "ld-linux-x86-64.so.2",
        "ld-linux-aarch64.so.1",
        "libgcc_s.so.1",
        "libstdc++.so.6",
    ];
    let extra: Vec<&&str> = needed.iter().filter(|l| !provided.contains(l)).collect();
    assert!(extra.is_empty(), "not in the runtime image: {extra:?}");
}

/// A small zone (SOA, NS, ns1 and www A) for tests of the transports rather than the data.
pub const SMALL_ZONE: &str = "$ORIGIN example.org.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 86400 60\n\
                              @ NS ns1\nns1 A 192.0.2.53\nwww A 192.0.2.1\n";

/// The value of the sample `name` (with its labels) on a `/metrics` page.
/// A DNSRecordSet manifest in namespace `dns` for the DNSZone `zone`; `records` are the
/// lines of `spec.records` (indented by two), `views` the `meshdns.io/views` annotation.
pub fn record_set(
    name: &str,
    zone: &str,
    rtype: &str,
    records: &str,
    views: Option<&str>,
) -> String {
    let annotations = views
        .map(|v| format!("\n  annotations: {{meshdns.io/views: '{v}'}}"))
        .unwrap_or_default();
    format!(
        "apiVersion: dns.networking.miloapis.com/v1alpha1
kind: DNSRecordSet
metadata:
  name: {name}
  namespace: dns{annotations}
spec:
  dnsZoneRef: {{name: {zone}}}
  recordType: {rtype}
  records:
{records}"
    )
}

pub fn metric(page: &str, name: &str) -> u64 {
    page.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{page}"))
}

/// A port free for both UDP and TCP on 127.0.0.1 (for a server we start and tell the port).
pub fn free_port() -> u16 {
    // Below the kernel's ephemeral range (32768 and up by default; read from the kernel): a
    // port the tests pick here and bind a moment later cannot meanwhile be handed to some
    // other test's `bind(..:0)` or to a client's socket, only to another pick, one chance in
    // 12,000.
    // A test picks several ports before it binds them: none is handed out twice in one
    // process (two picks of one test agreeing failed a CI run: DNS and HTTPS on one port).
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    use std::hash::{BuildHasher, Hasher};
    let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768);
    let start = low.saturating_sub(12_000).max(1_024);
    assert!(
        low > start + 1_000,
        "the ephemeral range starts at {low}: too few ports below it"
    );
    loop {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let port = start + (h.finish() % u64::from(low - start)) as u16;
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if given.contains(&port) {
            continue;
        }
        let Ok(_tcp) = std::net::TcpListener::bind(("127.0.0.1", port)) else {
            continue;
        };
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            given.push(port);
            return port;
        }
    }
}
