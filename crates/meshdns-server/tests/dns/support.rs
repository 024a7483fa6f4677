//! Test harness: the real server on loopback port 0, fed by real records files, queried with
//! hickory's wire types over real sockets.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RecordType};
use meshdns_server::{DnsMetrics, Server, ServerConfig, ServerHandle};
use meshdns_sources::{
    FileKind, FileSource, FileSources, ParseSettings, SourceConfig, SourceStatus, WatchHandle,
    spawn_watcher,
};
use meshdns_zone::Catalog;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// How long any single network wait may take before the test fails instead of hanging.
pub const WAIT: Duration = Duration::from_secs(3);

/// What a test server serves.
pub struct Setup {
    /// (file name, content, kind) written into a fresh directory.
    pub files: Vec<(String, String, FileKind)>,
    /// Zones declared with `--zone`.
    pub zones: Vec<String>,
    /// Server settings (listen addresses are set to loopback port 0 unless given).
    pub config: ServerConfig,
    /// Watch files for changes (with a long poll, so only notifications trigger reloads).
    pub watch: bool,
}

impl Setup {
    /// One file of automatic kind.
    pub fn file(name: &str, content: &str) -> Setup {
        Setup::files(vec![(
            name.to_string(),
            content.to_string(),
            FileKind::Auto,
        )])
    }

    /// Several files.
    pub fn files(files: Vec<(String, String, FileKind)>) -> Setup {
        Setup {
            files,
            zones: Vec::new(),
            config: ServerConfig {
                listen: vec!["127.0.0.1:0".parse().unwrap()],
                ..ServerConfig::default()
            },
            watch: false,
        }
    }
}

/// A running server and the directory its files live in.
pub struct TestServer {
    pub udp: SocketAddr,
    pub tcp: SocketAddr,
    pub handle: ServerHandle,
    pub dir: tempfile::TempDir,
    pub metrics: Arc<DnsMetrics>,
    pub status: Arc<SourceStatus>,
    pub paths: Vec<PathBuf>,
    watch: Option<WatchHandle>,
}

impl TestServer {
    pub async fn start(setup: Setup) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for (name, content, kind) in &setup.files {
            let path = dir.path().join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).unwrap();
            }
            std::fs::write(&path, content).unwrap();
            files.push(FileSource {
                path,
                kind: kind.clone(),
            });
        }
        Self::start_on(dir, files, setup).await
    }

    /// Starts with files the test already laid out in `dir`.
    pub async fn start_on(
        dir: tempfile::TempDir,
        files: Vec<FileSource>,
        setup: Setup,
    ) -> TestServer {
        let zones: Vec<meshdns_zone::Name> =
            setup.zones.iter().map(|z| z.parse().unwrap()).collect();
        let catalog = Arc::new(ArcSwap::from_pointee(Catalog::empty()));
        let status = Arc::new(SourceStatus::default());
        let paths = files.iter().map(|f| f.path.clone()).collect();
        let mut sources = FileSources::new(
            SourceConfig {
                files,
                settings: ParseSettings {
                    default_ttl: 5,
                    tailscale_zones: if zones.is_empty() {
                        ParseSettings::default().tailscale_zones
                    } else {
                        zones.clone()
                    },
                    ..ParseSettings::default()
                },
                zones,
                generated: Default::default(),
                poll_interval: Duration::from_secs(3600),
                debounce: Duration::from_millis(20),
            },
            catalog.clone(),
            status.clone(),
        );
        sources.refresh();
        let watch = setup.watch.then(|| spawn_watcher(sources).unwrap());
        let metrics = Arc::new(DnsMetrics::default());
        let handle = Server::bind(setup.config, catalog, metrics.clone())
            .await
            .unwrap();
        TestServer {
            udp: handle.udp_addrs()[0],
            tcp: handle.tcp_addrs()[0],
            handle,
            dir,
            metrics,
            status,
            paths,
            watch,
        }
    }

    pub async fn stop(self) {
        self.handle.shutdown();
        tokio::time::timeout(WAIT, self.handle.join())
            .await
            .expect("server stops");
        if let Some(w) = self.watch {
            tokio::task::spawn_blocking(move || w.stop()).await.unwrap();
        }
    }
}

/// A query without recursion desired and without EDNS.
pub fn query(name: &str, rtype: RecordType) -> Message {
    let mut m = Message::new(rand_id(), MessageType::Query, OpCode::Query);
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), rtype));
    m
}

/// A query with an EDNS OPT advertising `payload`.
pub fn query_edns(name: &str, rtype: RecordType, payload: u16) -> Message {
    let mut m = query(name, rtype);
    let mut edns = Edns::new();
    edns.set_max_payload(payload);
    m.set_edns(edns);
    m
}

fn rand_id() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0x4242);
    NEXT.fetch_add(7919, Ordering::Relaxed)
}

/// Sends raw bytes over UDP; `None` when no reply arrives within a short wait.
pub async fn udp_raw_wait(addr: SocketAddr, bytes: &[u8], wait: Duration) -> Option<Vec<u8>> {
    let bind = if addr.is_ipv6() {
        "[::1]:0"
    } else {
        "127.0.0.1:0"
    };
    let sock = UdpSocket::bind(bind).await.unwrap();
    sock.send_to(bytes, addr).await.unwrap();
    let mut buf = vec![0u8; 65_535];
    match tokio::time::timeout(wait, sock.recv_from(&mut buf)).await {
        Ok(Ok((n, _))) => Some(buf[..n].to_vec()),
        _ => None,
    }
}

/// Sends a query over UDP and parses the reply (the ID must match).
pub async fn udp(addr: SocketAddr, msg: &Message) -> Message {
    let bytes = udp_raw_wait(addr, &msg.to_vec().unwrap(), WAIT)
        .await
        .expect("a UDP reply");
    let reply = Message::from_vec(&bytes).expect("a parseable reply");
    assert_eq!(
        reply.metadata.id, msg.metadata.id,
        "reply ID matches the query"
    );
    reply
}

/// Sends a query over a new TCP connection and parses the reply.
pub async fn tcp(addr: SocketAddr, msg: &Message) -> Message {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    tcp_on(&mut stream, msg).await
}

/// Sends a query on an open TCP connection and reads one reply.
pub async fn tcp_on(stream: &mut TcpStream, msg: &Message) -> Message {
    let bytes = msg.to_vec().unwrap();
    let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&bytes);
    stream.write_all(&framed).await.unwrap();
    let reply = tokio::time::timeout(WAIT, read_frame(stream))
        .await
        .expect("a TCP reply in time")
        .expect("a TCP reply");
    Message::from_vec(&reply).unwrap()
}

/// Reads one length-framed message; `None` on EOF.
pub async fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let len = stream.read_u16().await.ok()?;
    let mut buf = vec![0u8; len as usize];
    stream.read_exact(&mut buf).await.ok()?;
    Some(buf)
}

/// The answer section as `name ttl type rdata` lines.
pub fn answers(m: &Message) -> Vec<String> {
    m.answers
        .iter()
        .map(|r| format!("{} {} {} {}", r.name, r.ttl, r.record_type(), r.data))
        .collect()
}

/// The authority section as lines.
pub fn authority(m: &Message) -> Vec<String> {
    m.authorities
        .iter()
        .map(|r| format!("{} {} {} {}", r.name, r.ttl, r.record_type(), r.data))
        .collect()
}

/// The additional section as lines (OPT is not a record here).
pub fn additional(m: &Message) -> Vec<String> {
    m.additionals
        .iter()
        .map(|r| format!("{} {} {} {}", r.name, r.ttl, r.record_type(), r.data))
        .collect()
}

/// Polls `check` until it holds, for at most `limit`. Not a timing assertion: the limit only
/// keeps a broken build from hanging.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
