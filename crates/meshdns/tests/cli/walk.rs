//! Every listener, walked by every hostile behaviour: while a crowd of clients behaves one way
//! against one listener, a fresh client of every listener is still served, and the server is
//! still running afterwards. The listeners and the behaviours are enumerations matched
//! exhaustively, so a listener added later must say what each behaviour means for it.
//!
//! Connection caps are low (32) and idle timeouts an hour: shedding, bounded handshakes and
//! bounded writes are what let the fresh clients in, not timeouts.

use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;

use crate::tls::Ca;
use crate::*;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Listener {
    Udp,
    Tcp,
    Dot,
    Http,
    Https,
    /// Zone transfers, on the TCP listener.
    Xfr,
    /// Dynamic UPDATE signed with a granted key, in datagrams on the UDP listener.
    UpdateUdp,
    /// Dynamic UPDATE signed with a granted key, on the TCP listener.
    UpdateTcp,
}

const LISTENERS: [Listener; 8] = [
    Listener::Udp,
    Listener::Tcp,
    Listener::Dot,
    Listener::Http,
    Listener::Https,
    Listener::Xfr,
    Listener::UpdateUdp,
    Listener::UpdateTcp,
];

/// The key the crowds sign their UPDATEs with, and the fresh clients' (each key has its own
/// rate budget; the crowd's is spent).
const CROWD_KEY: (&str, &str) = ("crowd.", "Y3Jvd2Qta2V5LWZvci10aGUtaG9zdGlsZS13YWxrISE=");
const PROBE_KEY: (&str, &str) = ("upd.", "cHJvYmUta2V5LWZvci10aGUtaG9zdGlsZS13YWxrISE=");

/// An UPDATE of dyn.example signed with the crowd's key: the same record added each time (one
/// change, then none), so the journal does not grow with the flood.
fn update() -> Vec<u8> {
    crate::update::signed_update(CROWD_KEY)
}

fn key_file(keys: &[(&str, &str)]) -> String {
    keys.iter()
        .map(|(name, secret)| {
            format!("key \"{name}\" {{ algorithm hmac-sha256; secret \"{secret}\"; }};\n")
        })
        .collect()
}

#[derive(Debug, Clone, Copy)]
enum Behaviour {
    /// Connect and say nothing (no TLS ClientHello either).
    Silent,
    /// Send a request one byte at a time, slowly, forever.
    Trickling,
    /// Send requests back to back and never read a reply.
    NonReading,
    /// Open, send a request and close, as fast as possible, from several threads.
    Flooding,
    /// Send a request larger than anything the listener accepts, then wait.
    Oversized,
}

const BEHAVIOURS: [Behaviour; 5] = [
    Behaviour::Silent,
    Behaviour::Trickling,
    Behaviour::NonReading,
    Behaviour::Flooding,
    Behaviour::Oversized,
];

/// Connections per crowd: over the caps of 32.
const CROWD: usize = 64;

struct Server {
    m: Meshdns,
    tls: Arc<rustls::ClientConfig>,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::new();
        let leaf = ca.leaf("meshdns", (2090, 1));
        let cert = write(dir.path(), "tls.crt", &leaf.cert);
        let key = write(dir.path(), "tls.key", &leaf.key);
        let big = format!(
            "big TXT {}\n",
            "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\" ".repeat(12)
        );
        let zone = write(
            dir.path(),
            "example.org.zone",
            &format!("{SMALL_ZONE}{big}"),
        );
        let keys = write(dir.path(), "tsig.conf", &key_file(&[CROWD_KEY, PROBE_KEY]));
        let data = dir.path().join("data");
        let m = Meshdns::serve(&[
            "--update-zone",
            "dyn.example",
            "--allow-update",
            &format!("{}=dyn.example", CROWD_KEY.0),
            "--allow-update",
            &format!("{}=dyn.example", PROBE_KEY.0),
            "--tsig-keys",
            &keys,
            "--data-dir",
            data.to_str().unwrap(),
            "--zone-file",
            &zone,
            "--http",
            "127.0.0.1:0",
            "--https",
            "127.0.0.1:0",
            "--dot",
            "127.0.0.1:0",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--allow-transfer",
            "127.0.0.0/8",
            "--tcp-max-connections",
            "32",
            "--http-max-connections",
            "32",
            "--tcp-idle-timeout",
            "1h",
            "--http-idle-timeout",
            "1h",
        ]);
        Server {
            m,
            tls: ca.client(&[b"http/1.1"]),
            _dir: dir,
        }
    }

    fn addr(&self, l: Listener) -> SocketAddr {
        match l {
            Listener::Udp
            | Listener::Tcp
            | Listener::Xfr
            | Listener::UpdateUdp
            | Listener::UpdateTcp => self.m.dns,
            Listener::Dot => self.m.dot.unwrap(),
            Listener::Http => self.m.http.unwrap(),
            Listener::Https => self.m.https.unwrap(),
        }
    }
}

fn query(qtype: u16) -> Vec<u8> {
    meshdns_xfr::message::MessageWriter::new(
        0x4444,
        0x0100,
        Some((b"\x03www\x07example\x03org\x00", qtype, 1)),
    )
    .finish()
}

fn framed(m: &[u8]) -> Vec<u8> {
    let mut f = (m.len() as u16).to_be_bytes().to_vec();
    f.extend_from_slice(m);
    f
}

/// One well-formed request, as the listener's clients send it.
fn request(l: Listener) -> Vec<u8> {
    match l {
        Listener::Udp => query(1),
        Listener::Tcp | Listener::Dot => framed(&query(1)),
        Listener::Xfr => framed(
            &meshdns_xfr::message::MessageWriter::new(
                0x4545,
                0,
                Some((b"\x07example\x03org\x00", 252, 1)),
            )
            .finish(),
        ),
        Listener::UpdateUdp => update(),
        Listener::UpdateTcp => framed(&update()),
        Listener::Http | Listener::Https => {
            b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec()
        }
    }
}

/// A request with a large reply (about 1 KB or more), for clients that do not read.
fn request_large_reply(l: Listener) -> Vec<u8> {
    match l {
        Listener::Udp | Listener::Xfr | Listener::UpdateUdp | Listener::UpdateTcp => request(l),
        Listener::Tcp | Listener::Dot => framed(
            &meshdns_xfr::message::MessageWriter::new(
                0x4646,
                0x0100,
                Some((b"\x03big\x07example\x03org\x00", 16, 1)),
            )
            .finish(),
        ),
        Listener::Http | Listener::Https => {
            b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec()
        }
    }
}

/// More than the listener accepts: a datagram of 60,000 bytes; a DNS message of 65,535 bytes
/// of garbage; an HTTP request with 100 KB of headers.
fn oversized(l: Listener) -> Vec<u8> {
    match l {
        Listener::Udp => vec![0xAB; 60_000],
        // A signed UPDATE padded to the most a datagram carries or a TCP message holds.
        Listener::UpdateUdp => {
            let mut u = update();
            u.resize(60_000, 0);
            u
        }
        Listener::UpdateTcp => {
            let mut u = update();
            u.resize(65_535, 0);
            framed(&u)
        }
        Listener::Tcp | Listener::Dot | Listener::Xfr => framed(&[0xAB; 65_535]),
        Listener::Http | Listener::Https => {
            let mut r = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ".to_vec();
            r.extend(std::iter::repeat_n(b'a', 100_000));
            r.extend_from_slice(b"\r\n\r\n");
            r
        }
    }
}

fn is_tls(l: Listener) -> bool {
    matches!(l, Listener::Dot | Listener::Https)
}

/// A byte stream to a listener: plain TCP, or TLS over it (handshake done), with a handle on
/// the socket to shut it down from another thread.
struct Conn {
    io: Box<dyn Write + Send>,
    socket: TcpStream,
}

fn connect(s: &Server, l: Listener) -> std::io::Result<Conn> {
    let tcp = TcpStream::connect(s.addr(l))?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
    let socket = tcp.try_clone()?;
    if !is_tls(l) {
        return Ok(Conn {
            io: Box::new(tcp),
            socket,
        });
    }
    let conn =
        rustls::ClientConnection::new(s.tls.clone(), ServerName::try_from("localhost").unwrap())
            .map_err(std::io::Error::other)?;
    let mut stream = rustls::StreamOwned::new(conn, tcp);
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    Ok(Conn {
        io: Box::new(stream),
        socket,
    })
}

/// A crowd behaving one way, until dropped.
struct Crowd {
    held: Vec<TcpStream>,
    threads: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    /// Bytes the crowd's writers got out (clients that do not read: until both sides' buffers
    /// are full).
    written: Arc<AtomicU64>,
}

impl Drop for Crowd {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for s in &self.held {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Crowd {
    fn new() -> Crowd {
        Crowd {
            held: Vec::new(),
            threads: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            written: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Waits (20 s at most) until the crowd's writers have got nothing out for half a second:
    /// every one of them is blocked on a full buffer.
    fn wait_stalled(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = (self.written.load(Ordering::Relaxed), Instant::now());
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            let now = self.written.load(Ordering::Relaxed);
            if now != last.0 {
                last = (now, Instant::now());
            } else if last.1.elapsed() > Duration::from_millis(500) {
                return;
            }
        }
    }

    /// Runs `work` on its own thread until the crowd is dropped (`work` sees the stop flag).
    fn spawn(&mut self, work: impl FnOnce(Arc<AtomicBool>) + Send + 'static) {
        let stop = self.stop.clone();
        self.threads.push(std::thread::spawn(move || work(stop)));
    }

    /// Runs `work` on a connection of its own; the connection is shut down when the crowd goes.
    fn on_connection(
        &mut self,
        s: &Server,
        l: Listener,
        work: impl FnOnce(Conn, Arc<AtomicBool>) + Send + 'static,
    ) {
        if let Ok(c) = connect(s, l) {
            if let Ok(handle) = c.socket.try_clone() {
                self.held.push(handle);
            }
            self.spawn(move |stop| work(c, stop));
        }
    }
}

/// Starts a crowd behaving `b` against `l`.
fn crowd(s: &Server, l: Listener, b: Behaviour) -> Crowd {
    let mut c = Crowd::new();
    let addr = s.addr(l);
    if matches!(l, Listener::Udp | Listener::UpdateUdp) {
        // No connections: silent and trickling clients do not exist; the others send datagrams.
        let payload = match b {
            Behaviour::Silent | Behaviour::Trickling => return c,
            Behaviour::NonReading | Behaviour::Flooding => request(l),
            Behaviour::Oversized => oversized(l),
        };
        let threads = if matches!(b, Behaviour::Flooding) {
            4
        } else {
            1
        };
        for _ in 0..threads {
            let payload = payload.clone();
            c.spawn(move |stop| {
                let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..64 {
                        let _ = socket.send_to(&payload, addr);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
        }
        return c;
    }
    match b {
        Behaviour::Silent => {
            for _ in 0..CROWD {
                // Plain TCP even for TLS listeners: no ClientHello.
                if let Ok(t) = TcpStream::connect(addr) {
                    c.held.push(t);
                }
            }
        }
        Behaviour::Trickling => {
            for _ in 0..CROWD {
                let r = request(l);
                c.on_connection(s, l, move |mut conn, stop| {
                    for byte in r.iter().cycle() {
                        if stop.load(Ordering::Relaxed)
                            || conn.io.write_all(&[*byte]).is_err()
                            || conn.io.flush().is_err()
                        {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                });
            }
        }
        Behaviour::NonReading => {
            for _ in 0..CROWD {
                let batch = request_large_reply(l).repeat(64);
                let written = c.written.clone();
                c.on_connection(s, l, move |mut conn, stop| {
                    // Blocks once both sides' buffers are full; the crowd's drop shuts the
                    // socket down, which ends the write.
                    while !stop.load(Ordering::Relaxed) {
                        if conn.io.write_all(&batch).is_err() || conn.io.flush().is_err() {
                            return;
                        }
                        written.fetch_add(batch.len() as u64, Ordering::Relaxed);
                    }
                });
            }
            c.wait_stalled();
        }
        Behaviour::Flooding => {
            for _ in 0..4 {
                let (tls, r) = (s.tls.clone(), request(l));
                c.spawn(move |stop| {
                    while !stop.load(Ordering::Relaxed) {
                        let Ok(mut tcp) = TcpStream::connect(addr) else {
                            continue;
                        };
                        if is_tls(l) {
                            let Ok(conn) = rustls::ClientConnection::new(
                                tls.clone(),
                                ServerName::try_from("localhost").unwrap(),
                            ) else {
                                continue;
                            };
                            let mut stream = rustls::StreamOwned::new(conn, tcp);
                            let _ = stream.write_all(&r);
                        } else {
                            let _ = tcp.write_all(&r);
                        }
                    }
                });
            }
        }
        Behaviour::Oversized => {
            for _ in 0..CROWD {
                let big = oversized(l);
                c.on_connection(s, l, move |mut conn, _| {
                    let _ = conn.io.write_all(&big);
                    let _ = conn.io.flush();
                });
            }
        }
    }
    c
}

/// A fresh client of `l`, as a user would be one: `Err` with what went wrong.
fn probe(s: &Server, l: Listener) -> Result<(), String> {
    let addr = s.addr(l);
    let tool = |program: &str, args: &[String]| -> String {
        let out = std::process::Command::new(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let server = [
        format!("@{}", addr.ip()),
        "-p".into(),
        addr.port().to_string(),
    ];
    let answered = |out: String| {
        if out.contains("status: NOERROR") && out.contains("192.0.2.1") {
            Ok(())
        } else {
            Err(out)
        }
    };
    match l {
        Listener::Udp => answered(tool(
            "dig",
            &[
                &server[..],
                &[
                    "+time=2".into(),
                    "+tries=3".into(),
                    "www.example.org".into(),
                ],
            ]
            .concat(),
        )),
        Listener::Tcp => answered(tool(
            "dig",
            &[
                &server[..],
                &[
                    "+tcp".into(),
                    "+time=5".into(),
                    "+tries=1".into(),
                    "www.example.org".into(),
                ],
            ]
            .concat(),
        )),
        // kdig +tls without a CA: the handshake is done but the certificate not checked.
        Listener::Dot => answered(tool(
            "kdig",
            &[
                &server[..],
                &[
                    "+tls".into(),
                    "+time=5".into(),
                    "+retry=0".into(),
                    "www.example.org".into(),
                ],
            ]
            .concat(),
        )),
        Listener::Http | Listener::Https => {
            let scheme = if l == Listener::Https {
                "https"
            } else {
                "http"
            };
            let out = tool(
                "curl",
                &[
                    "-sk".into(),
                    "--max-time".into(),
                    "10".into(),
                    "-o".into(),
                    "/dev/null".into(),
                    "-w".into(),
                    "%{http_code}".into(),
                    format!("{scheme}://127.0.0.1:{}/healthz", addr.port()),
                ],
            );
            if out.trim() == "200" {
                Ok(())
            } else {
                Err(format!("GET /healthz: {out:?}"))
            }
        }
        Listener::UpdateUdp | Listener::UpdateTcp => {
            let mut args = vec![
                "-y".to_string(),
                format!("hmac-sha256:{}:{}", PROBE_KEY.0, PROBE_KEY.1),
            ];
            if l == Listener::UpdateTcp {
                args.push("-v".into());
            }
            let mut child = std::process::Command::new("nsupdate")
                .args(&args)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("nsupdate (apt-get install dnsutils)");
            let script = format!(
                "server {} {}\nzone dyn.example\nupdate add probe.dyn.example 60 A 192.0.2.1\nsend\n",
                addr.ip(),
                addr.port()
            );
            let _ = child.stdin.take().unwrap().write_all(script.as_bytes());
            let out = child.wait_with_output().unwrap();
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "nsupdate {args:?}: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ))
            }
        }
        Listener::Xfr => {
            let out = tool(
                "dig",
                &[
                    &server[..],
                    &[
                        "+time=5".into(),
                        "+tries=1".into(),
                        "example.org".into(),
                        "AXFR".into(),
                    ],
                ]
                .concat(),
            );
            if out.contains("XFR size") {
                Ok(())
            } else {
                Err(out)
            }
        }
    }
}

#[test]
fn every_listener_serves_fresh_clients_under_every_hostile_behaviour() {
    let s = Server::start();
    let mut failures = Vec::new();
    for l in LISTENERS {
        for b in BEHAVIOURS {
            let started = Instant::now();
            let crowd = crowd(&s, l, b);
            // Let the crowd reach the server before the fresh clients come.
            std::thread::sleep(Duration::from_millis(300));
            for fresh in LISTENERS {
                if let Err(e) = probe(&s, fresh) {
                    failures.push(format!(
                        "{b:?} against {l:?}: a fresh {fresh:?} client: {e}"
                    ));
                }
            }
            drop(crowd);
            eprintln!("{b:?} against {l:?}: {:?}", started.elapsed());
        }
    }
    let mut m = s.m;
    assert!(m.child_alive(), "the server is still running");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
