//! The TLS listeners as clients meet them: `dig +https`/`+tls`, `kdig +tls`/`+https`, curl over
//! HTTP/1.1 and HTTP/2, and rustls clients for what the tools cannot show (pipelining, padding,
//! idle close, which certificate a handshake presents). Certificates come from a test CA the
//! clients trust, written as cert-manager writes a Secret.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, ServerName};

use crate::*;

pub const ZONE: &str = r#"$ORIGIN example.org.
$TTL 300
@ 3600 IN SOA ns1 hostmaster ( 7 3600 600 86400 60 )
@ NS ns1
ns1 A 192.0.2.53
www A 192.0.2.1
www AAAA 2001:db8::1
txt TXT "hello over tls"
mail MX 10 mx.example.net.
"#;

/// A certificate authority the test clients trust.
pub struct Ca {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pub pem: String,
}

/// A leaf certificate and key, PEM.
pub struct Leaf {
    pub cert: String,
    pub key: String,
    pub der: CertificateDer<'static>,
}

impl Ca {
    pub fn new() -> Ca {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "meshdns test CA");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A leaf for localhost and 127.0.0.1, named `cn`, valid until `not_after` (year, month).
    pub fn leaf(&self, cn: &str, not_after: (i32, u8)) -> Leaf {
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }

    pub fn client(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        let der = rustls::pki_types::pem::PemObject::from_pem_slice(self.pem.as_bytes()).unwrap();
        client_config(der, alpn)
    }
}

/// A rustls client trusting `root`, offering `alpn`, that never resumes: every handshake is a
/// full one, so it shows the certificate presented now (a resumed session reports the one it
/// began with).
pub fn client_config(root: CertificateDer<'static>, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root).unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config.resumption = rustls::client::Resumption::disabled();
    Arc::new(config)
}

/// A kubelet-style Secret volume: `tls.crt` and `tls.key` are links through `..data`, which is
/// swapped to a new timestamped directory in one rename.
pub struct SecretVolume {
    pub dir: PathBuf,
    generation: u32,
}

impl SecretVolume {
    pub fn new(dir: &Path, leaf: &Leaf) -> SecretVolume {
        let mut v = SecretVolume {
            dir: dir.to_path_buf(),
            generation: 0,
        };
        v.put(&leaf.cert, &leaf.key);
        for f in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{f}"), dir.join(f)).unwrap();
        }
        v
    }

    /// Writes a new generation and swaps `..data` to it atomically.
    pub fn put(&mut self, cert: &str, key: &str) {
        self.generation += 1;
        let gen_dir = self.dir.join(format!("..gen_{}", self.generation));
        std::fs::create_dir(&gen_dir).unwrap();
        std::fs::write(gen_dir.join("tls.crt"), cert).unwrap();
        std::fs::write(gen_dir.join("tls.key"), key).unwrap();
        let tmp = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(gen_dir.file_name().unwrap(), &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.join("..data")).unwrap();
    }

    pub fn cert(&self) -> String {
        self.dir.join("tls.crt").display().to_string()
    }

    pub fn key(&self) -> String {
        self.dir.join("tls.key").display().to_string()
    }
}

/// `meshdns serve` with --https and --dot on loopback and the certificate in `vol`.
fn serve_tls(vol: &SecretVolume, zone: &str, extra: &[&str]) -> Meshdns {
    let mut args = vec![
        "--zone-file",
        zone,
        "--http",
        "127.0.0.1:0",
        "--https",
        "127.0.0.1:0",
        "--dot",
        "127.0.0.1:0",
    ];
    let (cert, key) = (vol.cert(), vol.key());
    args.extend_from_slice(&["--tls-cert", &cert, "--tls-key", &key]);
    args.extend_from_slice(extra);
    Meshdns::serve(&args)
}

/// (status, answer lines) as dig or kdig print them, whitespace normalised.
fn status_and_answers(out: &str) -> (String, Vec<String>) {
    let status = out
        .lines()
        .find(|l| l.contains("opcode:"))
        .and_then(|l| l.split("status: ").nth(1))
        .map(|s| {
            s.chars()
                .take_while(char::is_ascii_alphabetic)
                .collect::<String>()
        })
        .unwrap_or_else(|| "(none)".into());
    let mut answers: Vec<String> = out
        .lines()
        .skip_while(|l| {
            !(l.starts_with(";; ANSWER SECTION:") || l.starts_with(";; ANSWER SECTION"))
        })
        .skip(1)
        .take_while(|l| !l.trim().is_empty() && !l.starts_with(";;"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    answers.sort();
    (status, answers)
}

fn tool(program: &str, args: &[String]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} is installed (dnsutils, knot-dnsutils): {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn dig_kdig_and_curl_get_the_udp_answers_over_https_and_tls() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    let ca_file = write(dir.path(), "ca.pem", &ca.pem);
    let secret = dir.path().join("secret");
    std::fs::create_dir(&secret).unwrap();
    let vol = SecretVolume::new(&secret, &ca.leaf("meshdns", (2099, 1)));
    let zone = write(dir.path(), "example.org.zone", ZONE);
    let m = serve_tls(&vol, &zone, &["--allow-transfer", "127.0.0.1"]);
    let (https, dot) = (m.https.unwrap(), m.dot.unwrap());

    // A zone transfer over TLS (XoT, RFC 9103) is the one over TCP.
    let tls_args = |port: u16| {
        vec![
            "@127.0.0.1".to_string(),
            "-p".into(),
            port.to_string(),
            format!("+tls-ca={ca_file}"),
            "+tls-hostname=localhost".into(),
        ]
    };
    let mut axfr = tls_args(dot.port());
    axfr.extend(["+tls".into(), "example.org".into(), "AXFR".into()]);
    let over_tls = tool("dig", &axfr);
    let over_tcp = dig(m.dns, &["example.org", "AXFR"]);
    let records = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    };
    assert_eq!(records(&over_tls), records(&over_tcp), "{over_tls}");
    assert_eq!(
        records(&over_tls).len(),
        8,
        "SOA, 6 records, SOA: {over_tls}"
    );

    let questions = [
        ("www.example.org", "A"),
        ("www.example.org", "AAAA"),
        ("txt.example.org", "TXT"),
        ("mail.example.org", "MX"),
        ("example.org", "SOA"),
        ("nope.example.org", "A"),
        ("www.example.org", "TXT"),
    ];
    for (name, qtype) in questions {
        let udp = status_and_answers(&dig(m.dns, &[name, qtype]));
        assert!(!udp.0.contains("none"), "{name} {qtype} over UDP: {udp:?}");
        let common = |extra: &[&str]| -> Vec<String> {
            let mut a: Vec<String> = vec![name.into(), qtype.into(), "+norec".into()];
            a.extend(extra.iter().map(|s| s.to_string()));
            a
        };
        let runs = [
            ("dig +https (HTTP/2 POST)", "dig", https, "+https"),
            ("dig +https-get (HTTP/2 GET)", "dig", https, "+https-get"),
            ("dig +tls", "dig", dot, "+tls"),
            ("kdig +tls", "kdig", dot, "+tls"),
            ("kdig +https", "kdig", https, "+https"),
        ]
        .map(|(how, program, addr, transport)| {
            let mut args = common(&[transport]);
            args.extend(tls_args(addr.port()));
            (how, tool(program, &args))
        });
        for (how, out) in runs {
            assert_eq!(
                status_and_answers(&out),
                udp,
                "{name} {qtype} by {how}:\n{out}"
            );
        }
    }

    // curl over HTTP/1.1 and HTTP/2, GET and POST: the exact bytes UDP gets for the same query.
    let query = query_packet("www.example.org", 1);
    let udp = udp_exchange(m.dns, &query);
    let body = dir.path().join("query.bin");
    std::fs::write(&body, &query).unwrap();
    let b64 = data_encoding::BASE64URL_NOPAD.encode(&query);
    for version in ["--http1.1", "--http2"] {
        for post in [false, true] {
            let out_file = dir.path().join("reply.bin");
            let mut args: Vec<String> = vec![
                "-s".into(),
                version.into(),
                "--cacert".into(),
                ca_file.clone(),
                "-o".into(),
                out_file.display().to_string(),
                "-w".into(),
                "%{http_code} %{http_version} %{content_type}".into(),
            ];
            let url = if post {
                args.extend([
                    "-H".into(),
                    "Content-Type: application/dns-message".into(),
                    "--data-binary".into(),
                    format!("@{}", body.display()),
                ]);
                format!("https://localhost:{}/dns-query", https.port())
            } else {
                format!("https://localhost:{}/dns-query?dns={b64}", https.port())
            };
            args.push(url);
            let out = tool("curl", &args);
            let want_version = if version == "--http2" { "2" } else { "1.1" };
            assert_eq!(
                out,
                format!("200 {want_version} application/dns-message"),
                "curl {version} post={post}"
            );
            assert_eq!(
                std::fs::read(&out_file).unwrap(),
                udp,
                "curl {version} post={post}"
            );
        }
    }
    // The operational endpoints, but not /metrics, on the HTTPS listener.
    let get = |path: &str| {
        tool(
            "curl",
            &[
                "-s".into(),
                "-o".into(),
                "/dev/null".into(),
                "-w".into(),
                "%{http_code}".into(),
                "--cacert".into(),
                ca_file.clone(),
                format!("https://localhost:{}{path}", https.port()),
            ],
        )
    };
    assert_eq!(get("/healthz"), "200");
    assert_eq!(get("/readyz"), "200");
    assert_eq!(get("/metrics"), "404");
    let (_, metrics) = m.get("/metrics");
    for line in [
        r#"meshdns_dns_queries_total{transport="dot",qtype="A",rcode="NOERROR"} 2"#,
        r#"meshdns_dns_queries_total{transport="dot",qtype="A",rcode="NXDOMAIN"} 2"#,
        r#"meshdns_dns_queries_total{transport="doh",qtype="MX",rcode="NOERROR"} 3"#,
        r#"meshdns_tls_certificate_expiry_timestamp_seconds 4070908800"#,
        r#"meshdns_tls_certificate_loads_total{result="ok"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    assert!(
        !metrics.contains(r#"meshdns_tls_handshakes_total{listener="dot",result="ok"} 0"#),
        "{metrics}"
    );
}

/// A query for `name` `qtype` with ID 0 (as DoH asks), EDNS with `options`.
fn query_with(id: u16, name: &str, qtype: u16, options: Option<&[u8]>) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, u8::from(options.is_some())]);
    for label in name.split('.').filter(|l| !l.is_empty()) {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&[0, 1]);
    if let Some(options) = options {
        q.extend_from_slice(&[0, 0, 41, 4, 0xd0, 0, 0, 0, 0]);
        q.extend_from_slice(&(options.len() as u16).to_be_bytes());
        q.extend_from_slice(options);
    }
    q
}

fn query_packet(name: &str, qtype: u16) -> Vec<u8> {
    query_with(0, name, qtype, None)
}

fn udp_exchange(server: SocketAddr, query: &[u8]) -> Vec<u8> {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    sock.send_to(query, server).unwrap();
    let mut buf = [0u8; 4096];
    let n = sock.recv(&mut buf).unwrap();
    buf[..n].to_vec()
}

/// A blocking TLS client connection (rustls) to `addr` verified against the CA, as localhost.
fn tls_connect(
    addr: SocketAddr,
    config: &Arc<rustls::ClientConfig>,
) -> std::io::Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
    let tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
    let conn =
        rustls::ClientConnection::new(config.clone(), ServerName::try_from("localhost").unwrap())
            .map_err(std::io::Error::other)?;
    let mut stream = rustls::StreamOwned::new(conn, tcp);
    // Drive the handshake to completion so a refused certificate shows here.
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    Ok(stream)
}

fn read_frame(s: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 2];
    s.read_exact(&mut len)?;
    let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut msg)?;
    Ok(msg)
}

fn framed(q: &[u8]) -> Vec<u8> {
    let mut f = (q.len() as u16).to_be_bytes().to_vec();
    f.extend_from_slice(q);
    f
}

#[test]
fn dot_pipelines_pads_on_request_and_closes_idle_connections() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    std::fs::create_dir(dir.path().join("s")).unwrap();
    let vol = SecretVolume::new(&dir.path().join("s"), &ca.leaf("meshdns", (2099, 1)));
    let zone = write(dir.path(), "example.org.zone", ZONE);
    let m = serve_tls(&vol, &zone, &["--tcp-idle-timeout", "1s"]);
    let config = ca.client(&[b"dot"]);
    let mut s = tls_connect(m.dot.unwrap(), &config).unwrap();
    assert_eq!(s.conn.alpn_protocol(), Some(&b"dot"[..]));

    // 40 queries in one write; every one answered, each with its own ID.
    let names = [
        "www.example.org",
        "nope.example.org",
        "txt.example.org",
        "mail.example.org",
    ];
    let mut batch = Vec::new();
    for id in 0..40u16 {
        batch.extend(framed(&query_with(
            id + 1,
            names[usize::from(id) % 4],
            1,
            Some(&[]),
        )));
    }
    s.write_all(&batch).unwrap();
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..40 {
        let r = read_frame(&mut s).unwrap();
        let id = u16::from_be_bytes([r[0], r[1]]);
        seen.insert(id, r[3] & 0xF);
    }
    assert_eq!(seen.len(), 40);
    for (id, rcode) in seen {
        let want = if (id - 1) % 4 == 1 { 3 } else { 0 };
        assert_eq!(rcode, want, "query {id}");
    }

    // Padding (RFC 8467): a padded query gets a response padded to 468 bytes; others none.
    s.write_all(&framed(&query_with(
        100,
        "www.example.org",
        1,
        Some(&[0, 12, 0, 4, 0, 0, 0, 0]),
    )))
    .unwrap();
    let padded = read_frame(&mut s).unwrap();
    assert_eq!(
        padded.len() % 468,
        0,
        "padded response of {} bytes",
        padded.len()
    );
    s.write_all(&framed(&query_with(101, "www.example.org", 1, Some(&[]))))
        .unwrap();
    let plain = read_frame(&mut s).unwrap();
    assert!(
        plain.len() < 100,
        "unpadded response of {} bytes",
        plain.len()
    );
    assert_eq!(
        &padded[..12],
        &{
            let mut h = plain[..12].to_vec();
            h[0..2].copy_from_slice(&100u16.to_be_bytes());
            h
        }[..]
    );

    // Idle for longer than --tcp-idle-timeout: the server closes the connection.
    let started = Instant::now();
    let mut rest = Vec::new();
    let closed = s.read_to_end(&mut rest);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the idle connection was not closed: {closed:?}"
    );
    assert!(closed.is_ok(), "closed with close_notify: {closed:?}");
    assert!(rest.is_empty());
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "closed before it was idle"
    );
}

#[test]
fn garbage_and_refused_handshakes_fail_cleanly_while_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    std::fs::create_dir(dir.path().join("s")).unwrap();
    // An expired certificate: every verifying client refuses it.
    let vol = SecretVolume::new(&dir.path().join("s"), &ca.leaf("expired", (2021, 1)));
    let zone = write(dir.path(), "example.org.zone", ZONE);
    let m = serve_tls(&vol, &zone, &[]);
    let (https, dot) = (m.https.unwrap(), m.dot.unwrap());

    // A client that opens a connection and says nothing holds up no one.
    let _silent = TcpStream::connect(dot).unwrap();
    let _silent_https = TcpStream::connect(https).unwrap();
    for target in [dot, https] {
        // Garbage instead of a ClientHello, then a DNS frame in the clear: closed, not answered.
        for junk in [
            vec![0x5a; 1024],
            framed(&query_packet("www.example.org", 1)),
        ] {
            let mut s = TcpStream::connect(target).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let _ = s.write_all(&junk);
            let mut reply = Vec::new();
            let _ = s.read_to_end(&mut reply);
            assert!(
                reply.is_empty() || reply[0] == 0x15,
                "{target}: expected a close or a TLS alert, got {reply:?}"
            );
        }
        let alpn: &[u8] = if target == dot { b"dot" } else { b"h2" };
        let Err(e) = tls_connect(target, &ca.client(&[alpn])) else {
            panic!("{target}: an expired certificate was accepted");
        };
        assert!(e.to_string().to_lowercase().contains("expired"), "{e}");
        let answer = dig(m.dns, &["www.example.org", "A"]);
        assert!(answer.contains("status: NOERROR"), "{answer}");
    }
    let (_, metrics) = m.get("/metrics");
    for listener in ["dot", "https"] {
        let failed = metric(
            &metrics,
            &format!(r#"meshdns_tls_handshakes_total{{listener="{listener}",result="failed"}}"#),
        );
        assert!(
            failed >= 3,
            "{listener}: {failed} failed handshakes\n{metrics}"
        );
    }
    let mut m = m;
    assert!(m.child_alive());
}

#[test]
fn certificates_rotate_under_load_with_no_failed_query() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    std::fs::create_dir(dir.path().join("s")).unwrap();
    let first = ca.leaf("first", (2099, 1));
    let mut vol = SecretVolume::new(&dir.path().join("s"), &first);
    let zone = write(dir.path(), "example.org.zone", ZONE);
    let m = serve_tls(&vol, &zone, &[]);
    let (dot, https) = (m.dot.unwrap(), m.https.unwrap());
    let config = ca.client(&[b"dot"]);
    let https_config = ca.client(&[b"h2"]);
    let presented = |addr| {
        let config = if addr == https {
            &https_config
        } else {
            &config
        };
        let s = tls_connect(addr, config).unwrap();
        s.conn.peer_certificates().unwrap()[0].clone()
    };
    assert_eq!(presented(dot), first.der);

    // Load: fresh DoT connections, each asking once, all through the rotation.
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let load: Vec<_> = (0..2)
        .map(|_| {
            let (stop, ok, failed, config) =
                (stop.clone(), ok.clone(), failed.clone(), config.clone());
            std::thread::spawn(move || {
                let query = framed(&query_with(7, "www.example.org", 1, None));
                while !stop.load(Ordering::Relaxed) {
                    let answered = tls_connect(dot, &config).and_then(|mut s| {
                        s.write_all(&query)?;
                        read_frame(&mut s)
                    });
                    match answered {
                        Ok(r) if r[3] & 0xF == 0 && r[7] == 1 => ok.fetch_add(1, Ordering::Relaxed),
                        _ => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));

    let second = ca.leaf("second", (2098, 1));
    vol.put(&second.cert, &second.key);
    let swapped = Instant::now();
    while presented(dot) != second.der {
        assert!(
            swapped.elapsed() < Duration::from_secs(10),
            "the new certificate was never presented; log:\n{}",
            m.log_text()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = swapped.elapsed();
    assert_eq!(presented(https), second.der, "HTTPS presents it too");
    std::thread::sleep(Duration::from_millis(300));

    // A bad new pair (a key from another certificate, then an expired certificate): the
    // current one keeps serving, the rejection logged and counted.
    let stranger = ca.leaf("stranger", (2099, 1));
    vol.put(&second.cert, &stranger.key);
    m.wait_log("does not belong to the certificate");
    let expired = ca.leaf("expired", (2021, 1));
    vol.put(&expired.cert, &expired.key);
    m.wait_log("the certificate expired");
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.join().unwrap();
    }
    assert_eq!(presented(dot), second.der);
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    eprintln!("rotation: new certificate presented after {took:?}; {ok} queries, {failed} failed");
    assert_eq!(failed, 0, "{ok} answered");
    assert!(ok > 20, "the load ran: {ok} queries");
    let (_, metrics) = m.get("/metrics");
    assert!(
        metrics.contains(r#"meshdns_tls_certificate_loads_total{result="failed"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"meshdns_tls_certificate_loads_total{result="ok"} 2"#),
        "{metrics}"
    );
}
