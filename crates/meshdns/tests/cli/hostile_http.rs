//! Hostile clients of the HTTP and HTTPS listeners (issue 26): connections that never say a
//! word, and pkarr packets dated far into the future.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use iroh_base::SecretKey;
use iroh_dns::endpoint_info::EndpointInfo;

use crate::*;

/// `curl -sk URL`, bounded at 20 s only so that a broken build fails instead of hanging:
/// (HTTP status, response headers, body).
fn curl(url: &str, extra: &[&str]) -> (u16, String, String) {
    let headers = tempfile::NamedTempFile::new().unwrap();
    let out = std::process::Command::new("curl")
        .args(["-sk", "--max-time", "20", "-w", "\n%{http_code}", "-D"])
        .arg(headers.path())
        .args(extra)
        .arg(url)
        .output()
        .expect("curl is installed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    let head = std::fs::read_to_string(headers.path()).unwrap_or_default();
    (code.trim().parse().unwrap_or(0), head, body.to_string())
}

/// 300 connections to each listener that send nothing, with an idle timeout of an hour: the
/// idle timeout cannot be what lets a fresh client in. Before, the 257th HTTPS connection
/// waited for one of 256 handshake slots, that is for a silent client's timeout (30 s by
/// default); now the oldest stalled handshake is shed, as on DoT.
#[test]
fn silent_connections_hold_up_neither_https_nor_http() {
    let dir = tempfile::tempdir().unwrap();
    let zone = write(dir.path(), "example.org.zone", SMALL_ZONE);
    let data = tempfile::tempdir().unwrap();
    let m = Meshdns::serve(&[
        "--zone-file",
        &zone,
        "--http",
        "127.0.0.1:0",
        "--https",
        "127.0.0.1:0",
        "--tls-self-signed",
        "--http-idle-timeout",
        "1h",
        "--pkarr",
        "dns.example.org",
        "--data-dir",
        data.path().to_str().unwrap(),
    ]);
    let (http, https) = (m.http.unwrap(), m.https.unwrap());
    let mut silent: Vec<TcpStream> = Vec::new();
    for _ in 0..300 {
        silent.push(TcpStream::connect(https).unwrap());
        silent.push(TcpStream::connect(http).unwrap());
    }
    let started = Instant::now();
    let (code, _, body) = curl(&format!("https://{https}/healthz"), &["--http1.1"]);
    let healthz = started.elapsed();
    assert_eq!((code, body.as_str()), (200, "ok\n"), "/healthz over HTTPS");
    let doh = "/dns-query?dns=q80BAAABAAAAAAAAA3d3dwdleGFtcGxlA29yZwAAAQAB";
    let (code, _, _) = curl(&format!("https://{https}{doh}"), &["--http2"]);
    assert_eq!(code, 200, "DoH over HTTPS/2");
    let key = SecretKey::generate().public().to_z32();
    let (code, _, _) = curl(&format!("https://{https}/pkarr/{key}"), &[]);
    assert_eq!(code, 404, "pkarr over HTTPS: an unknown key");
    assert_eq!(m.get("/healthz"), (200, "ok\n".to_string()), "plain HTTP");
    let (code, _, _) = curl(&format!("http://{http}{doh}"), &[]);
    assert_eq!(code, 200, "DoH over plain HTTP");
    eprintln!("/healthz over HTTPS behind 300 silent connections: {healthz:?}");

    // Every silent connection is still held by this client, and none could have timed out:
    // the oldest handshakes were shed to make room.
    assert_eq!(silent.len(), 600);
    let (_, metrics) = m.get("/metrics");
    let shed = "meshdns_http_connections_closed_total{listener=\"https\",reason=\"shed\"} ";
    assert!(metric(&metrics, shed) >= 300 - 256, "{metrics}");

    // A stalled handshake has a timeout of its own, far below the idle timeout: a new silent
    // connection is closed without a byte (the bound only keeps a broken build from hanging).
    let mut probe = TcpStream::connect(https).unwrap();
    probe
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    let read = probe.read_to_end(&mut got);
    assert!(
        read.is_ok() && got.is_empty(),
        "closed by the server: {read:?} {got:?}"
    );
    eprintln!(
        "a silent HTTPS connection closed after {:?}",
        started.elapsed()
    );
    drop(silent);
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// A relay payload for `secret` holding 192.0.2.1:`port`, signed at `stamp` µs.
fn signed_at(secret: &SecretKey, port: u16, stamp: u64) -> Vec<u8> {
    let now = EndpointInfo::new(secret.public())
        .with_ip_addrs(vec![SocketAddr::from(([192, 0, 2, 1], port))])
        .to_pkarr_signed_packet(secret, 30)
        .unwrap()
        .to_relay_payload();
    let message = &now[72..];
    let mut signable = format!("3:seqi{stamp}e1:v{}:", message.len()).into_bytes();
    signable.extend_from_slice(message);
    let mut out = secret.sign(&signable).to_bytes().to_vec();
    out.extend_from_slice(&stamp.to_be_bytes());
    out.extend_from_slice(message);
    out
}

fn relay(data: &std::path::Path, extra: &[&str]) -> Meshdns {
    let mut args = vec![
        "--pkarr",
        "dns.example.org",
        "--data-dir",
        data.to_str().unwrap(),
        "--http",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    Meshdns::serve(&args)
}

/// A correctly signed packet dated 2^63 µs used to be stored (204), pin its key (a publish at
/// today's time got 409, and it never expired) and close every later `GET` without a response
/// (a panic formatting `Last-Modified`). Now it is refused with 400 naming the rule; one stored
/// by a relay that accepted it (an older version; here a huge `--pkarr-max-future`) is served
/// without `Last-Modified` and is dropped when the relay starts with the bound.
#[test]
fn a_far_future_pkarr_timestamp_is_refused_and_never_crashes_a_get() {
    let data = tempfile::tempdir().unwrap();
    let m = relay(data.path(), &[]);
    let http_addr = m.http.unwrap();
    let secret = SecretKey::generate();
    let path = format!("/pkarr/{}", secret.public().to_z32());
    for (stamp, what) in [
        (1u64 << 63, "2^63 µs"),
        (u64::MAX, "u64::MAX µs"),
        (now_us() + 3_600_000_000, "an hour ahead"),
    ] {
        let (status, _, body) = http(http_addr, "PUT", &path, None, &signed_at(&secret, 1, stamp));
        let body = String::from_utf8_lossy(&body);
        assert_eq!(status, 400, "{what}: {body}");
        assert!(body.contains("--pkarr-max-future"), "{what}: {body}");
    }
    let (status, _, _) = http(http_addr, "GET", &path, None, &[]);
    assert_eq!(status, 404, "nothing was stored");
    // A clock a minute ahead is within the default skew; today's time is taken after it.
    let (status, _, _) = http(
        http_addr,
        "PUT",
        &path,
        None,
        &signed_at(&secret, 2, now_us() + 60_000_000),
    );
    assert_eq!(status, 204);
    let (status, head, _) = http(http_addr, "GET", &path, None, &[]);
    assert_eq!(status, 200);
    assert!(
        head.to_ascii_lowercase().contains("last-modified:"),
        "{head}"
    );
    let (_, metrics) = m.get("/metrics");
    assert!(
        metrics.contains("meshdns_pkarr_publishes_total{result=\"future\"} 3"),
        "{metrics}"
    );
    drop(m);

    // A relay that takes any timestamp (as before) stores one at 2^63 µs; its GET is answered.
    let m = relay(data.path(), &["--pkarr-max-future", "10000000000000000ms"]);
    let http_addr = m.http.unwrap();
    let pinned = SecretKey::generate();
    let pinned_path = format!("/pkarr/{}", pinned.public().to_z32());
    let far = signed_at(&pinned, 3, 1 << 63);
    let (status, _, _) = http(http_addr, "PUT", &pinned_path, None, &far);
    assert_eq!(status, 204);
    for headers in [
        &[][..],
        &[("If-Modified-Since", "Fri, 31 Dec 9999 23:59:59 GMT")][..],
    ] {
        let (status, head, body) = http_with(http_addr, "GET", &pinned_path, headers, &[]);
        assert_eq!((status, &body), (200, &far), "{head}");
        assert!(
            !head.to_ascii_lowercase().contains("last-modified:"),
            "no date can be written for it: {head}"
        );
    }
    drop(m);

    // Started with the bound again, the relay does not serve it: the key is free, the other is
    // kept.
    let m = relay(data.path(), &[]);
    let http_addr = m.http.unwrap();
    m.wait_log("pkarr packets dated beyond --pkarr-max-future are not served");
    let (status, _, _) = http(http_addr, "GET", &pinned_path, None, &[]);
    assert_eq!(status, 404);
    let (status, _, _) = http(
        http_addr,
        "PUT",
        &pinned_path,
        None,
        &signed_at(&pinned, 4, now_us()),
    );
    assert_eq!(status, 204, "republished at today's time");
    let (status, _, _) = http(http_addr, "GET", &path, None, &[]);
    assert_eq!(status, 200, "the other key is kept");
}
