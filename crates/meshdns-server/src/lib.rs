//! The DNS transports of meshdns: UDP and TCP on the same port, IPv4 and IPv6.
//!
//! The server knows nothing about zones: it reads the current [`Catalog`] snapshot (one atomic
//! load, never a lock) and calls [`meshdns_zone::answer`]. [`Server::bind`] returns once every
//! socket is bound, with a [`ServerHandle`] that exposes the real addresses (port 0 in tests),
//! and `shutdown`/`join`.
//!
//! UDP: `udp_sockets` sockets per address share the port with `SO_REUSEPORT`, so the kernel
//! spreads datagrams across them; each is served by its own OS thread, blocked in `recvmmsg`
//! and answering with `sendmmsg` (see `udp`). TCP (RFC 7766): 2-byte
//! length framing, several queries per connection answered in order, an idle timeout, and a
//! connection cap shared with DoT: at the cap the connection idle the longest is closed for the
//! new one (`conns`), so idle or trickling clients cannot keep a fresh one out, and when every
//! connection is busy answering (or has just arrived with its query), new ones wait in the
//! kernel backlog instead of costing memory.

pub mod acme;
mod conns;
pub mod http;
pub mod lookups;
pub mod metrics;
mod padding;
pub mod relay;
pub mod replicate;
pub mod rrl;
pub mod tls;
mod udp;
pub mod views;
pub mod xfr;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use meshdns_zone::{AnswerConfig, Catalog, Transport, answer};
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

pub use metrics::{DnsMetrics, Proto};

/// The snapshot every query reads; sources swap whole catalogs into it.
pub type SharedCatalog = Arc<ArcSwap<Catalog>>;

/// The HTTP response header that names the replica answering `/dns-query` and `/pkarr`: the
/// server's NSID (RFC 5001), the text DNS replies carry to queries that ask for it.
pub const NSID_HEADER: &str = "meshdns-nsid";

/// How the DNS listeners behave.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Addresses to serve on, UDP and TCP each (port 0 picks one free port for both).
    pub listen: Vec<SocketAddr>,
    /// UDP sockets per address, sharing the port with `SO_REUSEPORT`.
    pub udp_sockets: usize,
    /// Receive buffer requested for each UDP socket (the kernel may grant less; logged).
    pub udp_recv_buffer: usize,
    /// A TCP connection with no complete query for this long is closed.
    pub tcp_idle_timeout: Duration,
    /// At most this many TCP connections at once.
    pub tcp_max_connections: usize,
    /// Answer settings (EDNS payload size).
    pub answer: AnswerConfig,
    /// Zone transfers out (AXFR/IXFR answered instead of REFUSED).
    pub transfers: Option<Arc<xfr::Transfers>>,
    /// Who answers NOTIFY (the secondary zones); without one NOTIFY gets NOTIMP.
    pub notify: Option<NotifyHandler>,
    /// Who answers dynamic UPDATE (RFC 2136; the update zones); without one UPDATE gets
    /// NOTIMP.
    pub update: Option<UpdateHandler>,
    /// DNS over TLS (RFC 7858) on these addresses, sharing the TCP connection cap.
    pub dot: Vec<SocketAddr>,
    /// The certificates the DoT listeners present (required when `dot` is not empty).
    pub tls: Option<Arc<tls::Certificates>>,
    /// Response rate limiting of UDP answers (`None`: off).
    pub rrl: Option<Arc<rrl::Rrl>>,
    /// Where keys a cache lacks are looked up before answering (`--pkarr-dht`).
    pub lookups: Option<Arc<dyn lookups::Lookups>>,
    /// Split horizon: the catalog answering each client by its address (`--view`).
    pub views: Option<Arc<views::Views>>,
}

/// Answers a NOTIFY request from a peer (`None`: not one it answers).
#[derive(Clone)]
pub struct NotifyHandler(pub Arc<NotifyFn>);

/// The function behind a [`NotifyHandler`]: (request, peer) to reply.
pub type NotifyFn = dyn Fn(&[u8], std::net::IpAddr) -> Option<Vec<u8>> + Send + Sync;

impl std::fmt::Debug for NotifyHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NotifyHandler")
    }
}

/// Answers dynamic UPDATE: `answer` as a [`NotifyHandler`] is, and `drops` decides, before
/// an UPDATE is queued for `answer`, that it is dropped (a datagram; over TCP, its connection
/// closed): the key it names has sent more than it may have checked (its rate limit).
/// Checking the signature only to refuse it would cost a place in the queue every other key
/// waits in, and a thread. The key is not verified by then.
#[derive(Clone)]
pub struct UpdateHandler {
    /// (request, peer) to reply, on a blocking thread.
    pub answer: NotifyHandler,
    /// Whether an UPDATE is dropped unread (over TCP, its connection closed).
    pub drops: Arc<ScreenFn>,
}

impl std::fmt::Debug for UpdateHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UpdateHandler")
    }
}

/// The function behind [`UpdateHandler::drops`]: a request to whether it is dropped.
pub type ScreenFn = dyn Fn(&[u8]) -> bool + Send + Sync;

/// Whether `packet` is a request with opcode NOTIFY (RFC 1996).
pub(crate) fn is_notify(packet: &[u8]) -> bool {
    packet.len() > 3 && packet[2] & 0x80 == 0 && (packet[2] >> 3) & 0xF == 4
}

/// Whether `packet` is a request with opcode UPDATE (RFC 2136).
pub(crate) fn is_update(packet: &[u8]) -> bool {
    packet.len() > 3 && packet[2] & 0x80 == 0 && (packet[2] >> 3) & 0xF == 5
}

/// The handler for a request that `answer()` declined as NOTIMP: NOTIFY's or UPDATE's, when
/// configured.
pub(crate) fn opcode_handler<'a>(
    config: &'a ServerConfig,
    packet: &[u8],
) -> Option<&'a NotifyHandler> {
    if is_notify(packet) {
        config.notify.as_ref()
    } else if is_update(packet) {
        config.update.as_ref().map(|u| &u.answer)
    } else {
        None
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 1053))],
            udp_sockets: 1,
            udp_recv_buffer: 4 << 20,
            tcp_idle_timeout: Duration::from_secs(10),
            tcp_max_connections: 1024,
            answer: AnswerConfig::default(),
            transfers: None,
            notify: None,
            update: None,
            dot: Vec::new(),
            tls: None,
            rrl: None,
            lookups: None,
            views: None,
        }
    }
}

/// Namespace for [`Server::bind`].
pub struct Server;

/// A running server.
pub struct ServerHandle {
    udp: Vec<SocketAddr>,
    tcp: Vec<SocketAddr>,
    dot: Vec<SocketAddr>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    udp_threads: Vec<std::thread::JoinHandle<()>>,
    udp_sockets: Vec<Arc<std::net::UdpSocket>>,
}

impl ServerHandle {
    /// The bound UDP addresses (one per listen address).
    pub fn udp_addrs(&self) -> &[SocketAddr] {
        &self.udp
    }

    /// The bound TCP addresses (one per listen address).
    pub fn tcp_addrs(&self) -> &[SocketAddr] {
        &self.tcp
    }

    /// The bound DNS-over-TLS addresses.
    pub fn dot_addrs(&self) -> &[SocketAddr] {
        &self.dot
    }

    /// Stops accepting queries; open TCP connections finish the query in hand and close.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
        for sock in &self.udp_sockets {
            // Wakes a thread blocked in receive at once (Linux returns from recv on a shut-down
            // UDP socket); elsewhere the receive timeout does it.
            let _ = SockRef::from(&**sock).shutdown(std::net::Shutdown::Read);
        }
    }

    /// Waits until every listener, connection task and UDP thread has ended.
    pub async fn join(self) {
        self.tasks.close();
        self.tasks.wait().await;
        let threads = self.udp_threads;
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
    }
}

struct Shared {
    catalog: SharedCatalog,
    metrics: Arc<DnsMetrics>,
    config: ServerConfig,
    shutdown: CancellationToken,
    conns: Arc<conns::Registry>,
    /// Where UDP threads start the tasks of answers that wait for a lookup.
    runtime: Option<tokio::runtime::Handle>,
    /// UDP answers waiting for a lookup now.
    deferred: std::sync::atomic::AtomicUsize,
}

impl Shared {
    /// The catalog that answers `client`: its view's, or the one every client shares;
    /// `count` counts the query for its view (see [`views::Views::pick`]).
    #[inline]
    fn catalog_for(&self, client: std::net::IpAddr, count: bool) -> &SharedCatalog {
        views::Views::pick_in(self.config.views.as_deref(), client, &self.catalog, count)
    }
}

impl Server {
    /// Binds every listener, then starts serving. Returns only when all sockets are bound.
    pub async fn bind(
        config: ServerConfig,
        catalog: SharedCatalog,
        metrics: Arc<DnsMetrics>,
    ) -> io::Result<ServerHandle> {
        let shutdown = CancellationToken::new();
        let tasks = TaskTracker::new();
        metrics.set_tcp_max(config.tcp_max_connections.max(1));
        let shared = Arc::new(Shared {
            catalog,
            metrics,
            config: config.clone(),
            shutdown: shutdown.clone(),
            conns: conns::Registry::new(),
            runtime: tokio::runtime::Handle::try_current().ok(),
            deferred: std::sync::atomic::AtomicUsize::new(0),
        });
        // DoT first: a port in use fails here, before any thread or task has started.
        let mut dot = None;
        let mut dot_listeners = Vec::new();
        if !config.dot.is_empty() {
            let certs = config.tls.as_ref().ok_or_else(|| {
                io::Error::other("DNS over TLS needs a certificate (--tls-cert/--tls-key, --tls-self-signed or --acme-domain)")
            })?;
            let acceptor =
                tokio_rustls::TlsAcceptor::from(Arc::new(certs.server_config(&[tls::DOT_ALPN])?));
            dot = Some((acceptor, certs.clone()));
            for addr in &config.dot {
                dot_listeners.push(tcp_listener(*addr)?);
            }
        }
        let mut dot_addrs = Vec::new();
        let mut udp_addrs = Vec::new();
        let mut tcp_addrs = Vec::new();
        let mut udp_threads = Vec::new();
        let mut udp_sockets = Vec::new();
        for addr in &config.listen {
            let (udp, tcp) = bind_pair(*addr, &config)?;
            let local = udp[0].local_addr()?;
            info!(%local, udp_sockets = udp.len(), "DNS listening on UDP and TCP");
            for (i, sock) in udp.into_iter().enumerate() {
                let sock = Arc::new(sock);
                udp_sockets.push(sock.clone());
                let shared = shared.clone();
                let thread = std::thread::Builder::new()
                    .name(format!("meshdns-udp-{i}"))
                    .spawn(move || udp::serve(sock, shared))?;
                udp_threads.push(thread);
            }
            tasks.spawn(serve_tcp(tcp, None, shared.clone(), tasks.clone()));
            udp_addrs.push(local);
            tcp_addrs.push(local);
        }
        for listener in dot_listeners {
            let local = listener.local_addr()?;
            info!(%local, "DNS over TLS listening");
            tasks.spawn(serve_tcp(
                listener,
                dot.clone(),
                shared.clone(),
                tasks.clone(),
            ));
            dot_addrs.push(local);
        }
        Ok(ServerHandle {
            udp: udp_addrs,
            tcp: tcp_addrs,
            dot: dot_addrs,
            shutdown,
            tasks,
            udp_threads,
            udp_sockets,
        })
    }
}

/// Sends the reply to a transfer request as it is written: the messages are built on a
/// blocking thread and handed over a small bounded channel, so a large zone is on the wire while
/// the rest is still being written, and a slow client holds back the writing (not memory).
/// Each write is bounded ([`Bounded`]): a client that stops reading ends its transfer after the
/// idle timeout, and is sheddable meanwhile. At most `--xfr-max-concurrent` run at once (each
/// holds a slot until its builder thread is done); past it the request waits up to
/// [`xfr::SLOT_WAIT`] for one, then is REFUSED. Returns the
/// first message's header (for the rcode counted), or `None` when the request was not a
/// transfer after all.
async fn transfer<W: AsyncWrite + Unpin>(
    t: &Arc<xfr::Transfers>,
    request: &[u8],
    peer: std::net::IpAddr,
    writer: &mut BufWriter<W>,
    bounded: &Bounded<'_>,
) -> io::Result<Option<Vec<u8>>> {
    let Some(slot) = t.slot().await else {
        let Some(reply) = t.refuse_busy(request, peer) else {
            return Ok(None);
        };
        bounded.write_message(writer, &reply).await?;
        bounded.run(writer.flush()).await?;
        return Ok(Some(reply[..HEADER.min(reply.len())].to_vec()));
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(8);
    let (t, request) = (t.clone(), request.to_vec());
    let build = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        t.respond(&request, peer, false, &mut |m| {
            let _ = tx.blocking_send(m);
        })
    });
    let mut first: Option<Vec<u8>> = None;
    while let Some(m) = rx.recv().await {
        bounded.write_message(writer, &m).await?;
        // Waiting for the next message is the server's doing: not sheddable as idle.
        bounded.conn.busy();
        if first.is_none() {
            first = Some(m[..HEADER.min(m.len())].to_vec());
        }
    }
    bounded.run(writer.flush()).await?;
    let sent = build.await.ok().flatten();
    Ok(sent.and(first))
}

/// A stream connection's writes: each bounded by the idle timeout and given up when the
/// connection is shed or the server stops. A write that waits (a client that does not read)
/// leaves the connection idle since the write began, so at the cap it is the one shed, and it
/// never outlasts the idle timeout. (Before, a connection was busy while writing, with no
/// bound: eight clients that pipelined queries and never read held every slot.)
struct Bounded<'a> {
    conn: &'a conns::Conn,
    idle: Duration,
    /// The server's shutdown: a connection closing because of it finishes the write in hand
    /// (within the idle timeout, and `--shutdown-grace` over all); one shed does not.
    shutdown: &'a CancellationToken,
}

impl Bounded<'_> {
    async fn run<T>(&self, io: impl std::future::Future<Output = io::Result<T>>) -> io::Result<T> {
        self.conn.idle();
        let timed_out = |_| Err(io::ErrorKind::TimedOut.into());
        let io = tokio::time::timeout(self.idle, io);
        tokio::pin!(io);
        tokio::select! {
            biased;
            r = &mut io => return r.unwrap_or_else(timed_out),
            () = self.conn.close.cancelled() => {}
        }
        if self.shutdown.is_cancelled() {
            return io.await.unwrap_or_else(timed_out);
        }
        Err(io::ErrorKind::ConnectionAborted.into())
    }

    /// One message with its length prefix (RFC 7766 framing).
    async fn write_message<W: AsyncWrite + Unpin>(
        &self,
        writer: &mut BufWriter<W>,
        m: &[u8],
    ) -> io::Result<()> {
        self.run(async {
            writer.write_all(&(m.len() as u16).to_be_bytes()).await?;
            writer.write_all(m).await
        })
        .await
    }
}

const HEADER: usize = 12;

/// `outcome` with the rcode of the reply sent instead of answer()'s.
pub(crate) fn replied(outcome: meshdns_zone::Outcome, reply: &[u8]) -> meshdns_zone::Outcome {
    meshdns_zone::Outcome {
        reply: true,
        rcode: reply.get(3).map_or(outcome.rcode, |b| u16::from(b & 0xF)),
        truncated: false,
        ..outcome
    }
}

/// Whether `answer()` saw an AXFR or IXFR (which it refuses; a transfer reply replaces it).
fn is_transfer(outcome: &meshdns_zone::Outcome) -> bool {
    matches!(
        outcome.qtype,
        Some(meshdns_zone::RType::AXFR | meshdns_zone::RType::IXFR)
    )
}

/// Binds the UDP sockets and the TCP listener of one address on one port. With port 0 the
/// first UDP socket picks the port; if TCP cannot have the same one, try another.
fn bind_pair(
    addr: SocketAddr,
    config: &ServerConfig,
) -> io::Result<(Vec<std::net::UdpSocket>, TcpListener)> {
    let attempts = if addr.port() == 0 { 8 } else { 1 };
    let mut last_err = None;
    for _ in 0..attempts {
        let first = udp_socket(addr, config)?;
        let port = first.local_addr()?.port();
        let bound = SocketAddr::new(addr.ip(), port);
        match tcp_listener(bound) {
            Ok(tcp) => {
                let mut udp = vec![first];
                for _ in 1..config.udp_sockets.max(1) {
                    udp.push(udp_socket(bound, config)?);
                }
                return Ok((udp, tcp));
            }
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.unwrap_or_else(|| io::Error::other("could not bind")))
}

fn udp_socket(addr: SocketAddr, config: &ServerConfig) -> io::Result<std::net::UdpSocket> {
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        // Keep [::] IPv6-only so 0.0.0.0 can be bound beside it on the same port.
        sock.set_only_v6(true)?;
    }
    sock.set_reuse_port(true)?;
    if let Err(e) = sock.set_recv_buffer_size(config.udp_recv_buffer) {
        debug!(error = %e, "could not set UDP receive buffer");
    }
    // Blocking, served by its own thread (see `udp`); the timeout lets it notice shutdown.
    sock.set_read_timeout(Some(udp::POLL))?;
    sock.bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("cannot bind UDP {addr}: {e}")))?;
    debug!(%addr, recv_buffer = sock.recv_buffer_size().unwrap_or(0), "UDP socket bound (kernel-granted buffer)");
    Ok(sock.into())
}

fn tcp_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        sock.set_only_v6(true)?;
    }
    sock.set_reuse_address(true)?;
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("cannot bind TCP {addr}: {e}")))?;
    sock.listen(1024)?;
    TcpListener::from_std(sock.into())
}

/// DoT's acceptor and the certificates whose handshakes it counts (`None`: plain TCP).
type Dot = Option<(tokio_rustls::TlsAcceptor, Arc<tls::Certificates>)>;

async fn serve_tcp(listener: TcpListener, dot: Dot, shared: Arc<Shared>, tasks: TaskTracker) {
    // What a client sends first, for `conns::arriving`.
    let first = match dot {
        None => conns::First::Dns,
        Some(_) => conns::First::Tls,
    };
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = shared.shutdown.cancelled() => return,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // Usually out of file descriptors: back off instead of spinning.
                if let Some(suppressed) =
                    meshdns_xfr::throttle::PEER_WARNINGS.admit("accept", "tcp")
                {
                    warn!(error = %e, suppressed, "TCP accept failed");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let cap = shared.config.tcp_max_connections;
        if !shared
            .conns
            .admit(cap, &shared.shutdown, || shared.metrics.tcp_shed())
            .await
        {
            return;
        }
        let conn = shared
            .conns
            .open(&shared.shutdown, conns::arriving(&stream, first));
        let shared = shared.clone();
        let dot = dot.clone();
        tasks.spawn(async move {
            shared.metrics.tcp_opened();
            let _ = SockRef::from(&stream).set_tcp_nodelay(true);
            let served = match dot {
                None => {
                    let (r, w) = stream.into_split();
                    serve_connection(r, w, peer, Proto::Tcp, &shared, &conn).await
                }
                Some((acceptor, certs)) => {
                    serve_dot(stream, peer, &acceptor, &certs, &shared, &conn).await
                }
            };
            if let Err(e) = served {
                debug!(%peer, error = %e, "TCP connection ended with an error");
            }
            drop(conn);
            shared.metrics.tcp_closed();
        });
    }
}

/// A DoT connection: the handshake ([`tls::handshake`]: bounded, abandoned when shed, counted),
/// then the same framing and answers as TCP.
async fn serve_dot(
    stream: TcpStream,
    peer: SocketAddr,
    acceptor: &tokio_rustls::TlsAcceptor,
    certs: &tls::Certificates,
    shared: &Shared,
    conn: &conns::Conn,
) -> io::Result<()> {
    let idle = shared.config.tcp_idle_timeout;
    conns::first_message(&stream, conn, conns::First::Tls).await;
    let handshake = tls::handshake(
        acceptor,
        stream,
        idle,
        &conn.close,
        tls::Listener::Dot,
        &certs.metrics,
    );
    let Some(stream) = handshake.await? else {
        return Ok(());
    };
    let (r, w) = tokio::io::split(stream);
    serve_connection(r, w, peer, Proto::Dot, shared, conn).await
}

/// Serves one stream connection (TCP or DoT): queries answered in order; responses flushed
/// once no further query is already buffered, so pipelined queries share a write. Over DoT a
/// padded query gets a padded response (RFC 8467).
async fn serve_connection<R, W>(
    r: R,
    w: W,
    peer: SocketAddr,
    proto: Proto,
    shared: &Shared,
    conn: &conns::Conn,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut reader = BufReader::new(r);
    let mut writer = BufWriter::new(w);
    let mut msg = Vec::with_capacity(512);
    let mut out = Vec::with_capacity(4096);
    let idle = shared.config.tcp_idle_timeout;
    let bounded = Bounded {
        conn,
        idle,
        shutdown: &shared.shutdown,
    };
    loop {
        let len = tokio::select! {
            r = tokio::time::timeout(idle, reader.read_u16()) => match r {
                Ok(Ok(len)) => usize::from(len),
                Ok(Err(_)) | Err(_) => break, // closed by the client, or idle
            },
            // Shutting down, or shed for a new connection at the cap.
            () = conn.close.cancelled() => break,
        };
        msg.resize(len, 0);
        // A client trickling its query in stays "idle" (sheddable) until the query is whole.
        tokio::select! {
            r = tokio::time::timeout(idle, reader.read_exact(&mut msg)) => match r {
                Ok(Ok(_)) => {}
                _ => break,
            },
            () = conn.close.cancelled() => break,
        }
        conn.busy();
        let started = Instant::now();
        let shared_catalog = shared.catalog_for(peer.ip(), true);
        let outcome = {
            let catalog = shared_catalog.load();
            answer(
                &catalog,
                &msg,
                Transport::Stream,
                &shared.config.answer,
                &mut out,
            )
        };
        let outcome = match lookups::needs_lookup(shared.config.lookups.as_ref(), &outcome) {
            Some(key) => {
                let lookups = shared.config.lookups.as_ref().expect("asked of it");
                // Waited for as a write is: bounded by the idle timeout, and shed at the cap.
                bounded
                    .run(async {
                        Ok(lookups::answer_after(
                            lookups,
                            key,
                            Some(peer.ip()),
                            crate::lookups::Asked {
                                catalog: shared_catalog,
                                packet: &msg,
                                transport: Transport::Stream,
                                config: &shared.config.answer,
                            },
                            &mut out,
                        )
                        .await)
                    })
                    .await?
            }
            None => outcome,
        };
        // NOTIFY and transfers (which answer() declines) are answered here, and counted with
        // the rcode they got.
        let special = match opcode_handler(&shared.config, &msg) {
            Some(handler) if outcome.rcode == meshdns_zone::rcode::NOTIMP => {
                if is_update(&msg) {
                    // Past twice its key's rate: the connection is closed, as a datagram would
                    // be dropped (the refusal could not be signed before the check it saves).
                    if shared
                        .config
                        .update
                        .as_ref()
                        .is_some_and(|u| (u.drops)(&msg))
                    {
                        shared.metrics.dropped(proto);
                        break;
                    }
                    // Synced to disk and answered once served: off the runtime's workers.
                    let (handler, packet, ip) = (handler.clone(), msg.to_vec(), peer.ip());
                    tokio::task::spawn_blocking(move || (handler.0)(&packet, ip))
                        .await
                        .ok()
                        .flatten()
                } else {
                    (handler.0)(&msg, peer.ip())
                }
            }
            _ => None,
        };
        if let Some(reply) = special {
            let counted = replied(outcome, &reply);
            shared.metrics.record(proto, &counted, started.elapsed());
            bounded.write_message(&mut writer, &reply).await?;
            bounded.run(writer.flush()).await?;
            conn.idle();
            continue;
        }
        if is_transfer(&outcome)
            && let Some(t) = &shared.config.transfers
            && let Some(first) = transfer(t, &msg, peer.ip(), &mut writer, &bounded).await?
        {
            let counted = replied(outcome, &first);
            shared.metrics.record(proto, &counted, started.elapsed());
            conn.idle();
            continue;
        }
        // A signed SOA query (a secondary with a key) gets a signed answer, not padded: the MAC
        // covers its bytes.
        let signed = match &shared.config.transfers {
            Some(t) if outcome.reply && outcome.qtype == Some(meshdns_zone::RType::SOA) => t
                .signed_answer(&msg, &out, peer.ip(), |catalog| {
                    let mut again = Vec::new();
                    answer(
                        catalog,
                        &msg,
                        Transport::Stream,
                        &shared.config.answer,
                        &mut again,
                    );
                    again
                }),
            _ => None,
        };
        let outcome = match signed {
            Some(reply) => {
                out = reply;
                replied(outcome, &out)
            }
            None => {
                if proto == Proto::Dot && outcome.reply && outcome.padding {
                    padding::pad(&mut out, padding::RESPONSE_BLOCK, shared.config.answer.nsid);
                }
                outcome
            }
        };
        shared.metrics.record(proto, &outcome, started.elapsed());
        if outcome.reply {
            bounded.write_message(&mut writer, &out).await?;
        }
        if reader.buffer().is_empty() {
            bounded.run(writer.flush()).await?;
        }
        conn.idle();
    }
    bounded.run(writer.flush()).await?;
    bounded.run(writer.shutdown()).await
}
