//! The pkarr relay, as iroh endpoints use iroh-dns-server: iroh's own code builds and signs the
//! packet, it is published over HTTP, iroh's resolver finds it over DNS, DoH answers it too,
//! bad publishes are refused with the documented status, and a restart keeps it.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use iroh_base::{RelayUrl, SecretKey};
use iroh_dns::dns::DnsResolver;
use iroh_dns::endpoint_info::EndpointInfo;

use crate::*;

const ORIGIN: &str = "dns.example.org";

fn serve(data_dir: &std::path::Path) -> Meshdns {
    serve_with(data_dir, &[])
}

/// A relay for ORIGIN keeping its packets in `data_dir`, with `extra` flags.
fn serve_with(data_dir: &std::path::Path, extra: &[&str]) -> Meshdns {
    let mut args = vec![
        "--pkarr",
        ORIGIN,
        "--data-dir",
        data_dir.to_str().unwrap(),
        "--http",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    Meshdns::serve(&args)
}

#[tokio::test]
async fn iroh_publishes_and_resolves_through_meshdns() {
    let data = tempfile::tempdir().unwrap();
    let m = serve(data.path());
    let http_addr = m.http.unwrap();
    let secret = SecretKey::generate();
    let id = secret.public();
    let relay: RelayUrl = "https://relay.example.org".parse().unwrap();
    let addrs: Vec<SocketAddr> = vec![
        "192.0.2.1:4433".parse().unwrap(),
        "[2001:db8::1]:4433".parse().unwrap(),
    ];
    let info = EndpointInfo::new(id)
        .with_relay_url(relay.clone())
        .with_ip_addrs(addrs.clone());
    let payload = info
        .to_pkarr_signed_packet(&secret, 30)
        .unwrap()
        .to_relay_payload();
    let path = format!("/pkarr/{}", id.to_z32());

    let (status, _, _) = http(http_addr, "PUT", &path, None, &payload);
    assert_eq!(status, 204, "publish accepted");
    let (status, head, body) = http(http_addr, "GET", &path, None, &[]);
    assert_eq!(status, 200);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/x-pkarr-signed-packet"),
        "{head}"
    );
    assert_eq!(body, payload);

    let want: BTreeSet<SocketAddr> = addrs.iter().copied().collect();
    let resolver = DnsResolver::with_nameserver(m.dns);
    // The snapshot is rebuilt right after the publish (one debounce later): wait for it,
    // within a bound that only keeps a broken build from hanging.
    let Some(found) = resolve_within(&resolver, &id, ORIGIN, 5).await else {
        panic!(
            "iroh never resolved the published endpoint; log:\n{}",
            m.log_text()
        );
    };
    let relays: Vec<String> = found.relay_urls().map(ToString::to_string).collect();
    assert_eq!(relays, [relay.to_string()]);
    assert_eq!(found.ip_addrs().copied().collect::<BTreeSet<_>>(), want);

    // The key's own name is an empty non-terminal: NODATA, not NXDOMAIN (unlike iroh-dns-server).
    let out = dig(m.dns, &[&format!("{}.{ORIGIN}", id.to_z32()), "TXT"]);
    assert!(
        out.contains("status: NOERROR") && out.contains("ANSWER: 0,"),
        "{out}"
    );

    // DoH answers the same records.
    let q = {
        let mut p = vec![0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        for l in format!("_iroh.{}.{ORIGIN}", id.to_z32()).split('.') {
            p.push(l.len() as u8);
            p.extend_from_slice(l.as_bytes());
        }
        p.extend_from_slice(&[0, 0, 16, 0, 1]);
        p
    };
    let (status, _, body) = http(
        http_addr,
        "GET",
        &format!(
            "/dns-query?dns={}",
            data_encoding::BASE64URL_NOPAD.encode(&q)
        ),
        None,
        &[],
    );
    assert_eq!(status, 200);
    assert!(
        body.windows(19).any(|w| w == b"addr=192.0.2.1:4433"),
        "the TXT record is in the DoH answer"
    );

    // Bad publishes change nothing.
    let (status, _, text) = http(http_addr, "PUT", &path, None, &payload);
    assert_eq!(status, 409, "not newer: {}", String::from_utf8_lossy(&text));
    let other = SecretKey::generate().public();
    let (status, _, text) = http(
        http_addr,
        "PUT",
        &format!("/pkarr/{}", other.to_z32()),
        None,
        &payload,
    );
    assert_eq!(status, 400, "wrong key in the path");
    assert!(
        String::from_utf8_lossy(&text).contains("invalid body payload: signature"),
        "{}",
        String::from_utf8_lossy(&text)
    );
    let (status, _, text) = http(http_addr, "PUT", &path, None, &payload[..60]);
    assert_eq!(status, 400, "truncated");
    assert!(String::from_utf8_lossy(&text).contains("too short"));
    let (status, _, text) = http(http_addr, "PUT", "/pkarr/not-a-key", None, &payload);
    assert_eq!(status, 400);
    assert!(String::from_utf8_lossy(&text).starts_with("invalid key:"));
    assert_eq!(
        http(
            http_addr,
            "GET",
            &format!("/pkarr/{}", other.to_z32()),
            None,
            &[]
        )
        .0,
        404
    );
    assert_eq!(
        http(http_addr, "GET", &path, None, &[]).2,
        payload,
        "still the first packet"
    );

    let (_, metrics) = m.get("/metrics");
    assert!(
        metrics.contains(r#"meshdns_pkarr_publishes_total{result="accepted"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"meshdns_pkarr_publishes_total{result="same"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains("meshdns_pkarr_packets 1"), "{metrics}");

    // A restart keeps the packet.
    assert!(m.terminate().success());
    let m = serve(data.path());
    let resolver = DnsResolver::with_nameserver(m.dns);
    let found = resolver
        .lookup_endpoint_by_id(&id, ORIGIN)
        .await
        .expect("resolves after a restart, from the stored packet");
    assert_eq!(found.ip_addrs().copied().collect::<BTreeSet<_>>(), want);
}

#[test]
fn publishes_over_the_configured_rate_get_429() {
    let data = tempfile::tempdir().unwrap();
    let m = serve_with(
        data.path(),
        &["--pkarr-put-limit", "1", "--pkarr-put-burst", "1"],
    );
    let secret = SecretKey::generate();
    let path = format!("/pkarr/{}", secret.public().to_z32());
    let packet = |port: u16| signed(&secret, port);
    assert_eq!(http(m.http.unwrap(), "PUT", &path, None, &packet(1)).0, 204);
    let (status, _, text) = http(m.http.unwrap(), "PUT", &path, None, &packet(2));
    assert_eq!(status, 429, "{}", String::from_utf8_lossy(&text));
    let (_, metrics) = m.get("/metrics");
    assert!(
        metrics.contains(r#"meshdns_pkarr_publishes_total{result="rate_limited"} 1"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_records_file_takes_precedence_over_a_pkarr_publish_for_the_same_name() {
    let data = tempfile::tempdir().unwrap();
    let secret = SecretKey::generate();
    let id = secret.public();
    let file = write(
        data.path(),
        "pinned.yaml",
        &format!(
            "zones:\n  - origin: {ORIGIN}\n    iroh:\n      - {{ endpoint: {}, addrs: [\"198.51.100.1:1\"] }}\n",
            id.to_z32()
        ),
    );
    let m = serve_with(data.path(), &["--records", &file]);
    let payload = EndpointInfo::new(id)
        .with_ip_addrs(vec!["192.0.2.1:2".parse().unwrap()])
        .to_pkarr_signed_packet(&secret, 30)
        .unwrap()
        .to_relay_payload();
    assert_eq!(
        http(
            m.http.unwrap(),
            "PUT",
            &format!("/pkarr/{}", id.to_z32()),
            None,
            &payload
        )
        .0,
        204
    );
    // The publish is stored and served (GET has it) — under the file's records.
    let (status, _, stored) = http(
        m.http.unwrap(),
        "GET",
        &format!("/pkarr/{}", id.to_z32()),
        None,
        &[],
    );
    assert_eq!((status, stored), (200, payload.clone()));
    let found = DnsResolver::with_nameserver(m.dns)
        .lookup_endpoint_by_id(&id, ORIGIN)
        .await
        .unwrap();
    let addrs: Vec<SocketAddr> = found.ip_addrs().copied().collect();
    assert_eq!(
        addrs,
        ["198.51.100.1:1".parse::<SocketAddr>().unwrap()],
        "the file's records, never mixed"
    );
}

/// A relay payload signed by `secret` now, holding the address 192.0.2.1:`port`.
pub(crate) fn signed(secret: &SecretKey, port: u16) -> Vec<u8> {
    EndpointInfo::new(secret.public())
        .with_ip_addrs(vec![SocketAddr::from(([192, 0, 2, 1], port))])
        .to_pkarr_signed_packet(secret, 30)
        .unwrap()
        .to_relay_payload()
}

/// A signed relay payload for a fresh key, and the key's z32.
fn fresh_publish(port: u16) -> (String, Vec<u8>) {
    let secret = SecretKey::generate();
    (secret.public().to_z32(), signed(&secret, port))
}

#[test]
fn the_rate_limit_keys_on_the_address_a_trusted_proxy_names() {
    let data = tempfile::tempdir().unwrap();
    let limited = |extra: &[&str]| {
        let mut args = vec!["--pkarr-put-limit", "1", "--pkarr-put-burst", "1"];
        args.extend_from_slice(extra);
        serve_with(&data.path().join(extra.len().to_string()), &args)
    };
    let put_from = |m: &Meshdns, client: &str| {
        let (key, payload) = fresh_publish(1);
        let headers = [("X-Forwarded-For", client)];
        http_with(
            m.http.unwrap(),
            "PUT",
            &format!("/pkarr/{key}"),
            &headers,
            &payload,
        )
        .0
    };
    // Behind a trusted proxy (loopback here): each forwarded client has its own bucket.
    let m = limited(&["--trusted-proxy", "127.0.0.0/8"]);
    assert_eq!(put_from(&m, "203.0.113.1"), 204);
    assert_eq!(
        put_from(&m, "203.0.113.1"),
        429,
        "the same client, over its rate"
    );
    assert_eq!(
        put_from(&m, "203.0.113.2"),
        204,
        "another client behind the same proxy"
    );
    let (key, payload) = fresh_publish(2);
    let forwarded = [("Forwarded", "for=\"[2001:db8::9]:4711\"")];
    let status = http_with(
        m.http.unwrap(),
        "PUT",
        &format!("/pkarr/{key}"),
        &forwarded,
        &payload,
    )
    .0;
    assert_eq!(status, 204, "Forwarded names a third client");
    // From a peer that is not trusted the headers are ignored: one bucket for the peer.
    let m = limited(&[]);
    assert_eq!(put_from(&m, "203.0.113.1"), 204);
    assert_eq!(
        put_from(&m, "203.0.113.2"),
        429,
        "a forged header buys no new bucket"
    );
}

#[test]
fn conditional_publishes_and_caching_headers() {
    let data = tempfile::tempdir().unwrap();
    let m = serve(data.path());
    let addr = m.http.unwrap();
    let secret = SecretKey::generate();
    let path = format!("/pkarr/{}", secret.public().to_z32());
    let packet = |port: u16| signed(&secret, port);
    let stamp = |p: &[u8]| u64::from_be_bytes(p[64..72].try_into().unwrap());
    let first = packet(1);
    assert_eq!(http(addr, "PUT", &path, None, &first).0, 204);
    let second = packet(2);
    let wrong = (stamp(&first) - 1).to_string();
    let (status, _, body) = http_with(addr, "PUT", &path, &[("If-Match", &wrong)], &second);
    assert_eq!(status, 412, "{}", String::from_utf8_lossy(&body));
    let right = stamp(&first).to_string();
    assert_eq!(
        http_with(addr, "PUT", &path, &[("If-Match", &right)], &second).0,
        204
    );
    assert_eq!(
        http_with(addr, "PUT", &path, &[("If-Match", "soon")], &packet(3)).0,
        400
    );

    let (status, head, body) = http(addr, "GET", &path, None, &[]);
    assert_eq!((status, body), (200, second.clone()));
    let header = |head: &str, name: &str| {
        head.lines()
            .find_map(|l| {
                l.split_once(':')
                    .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            })
            .map(|(_, v)| v.trim().to_string())
    };
    assert_eq!(
        header(&head, "cache-control").as_deref(),
        Some("public, max-age=30")
    );
    assert_eq!(
        header(&head, "access-control-allow-origin").as_deref(),
        Some("*")
    );
    let modified = header(&head, "last-modified").expect("Last-Modified");
    assert!(modified.ends_with(" GMT"), "{modified}");
    let (status, _, body) = http_with(addr, "GET", &path, &[("If-Modified-Since", &modified)], &[]);
    assert_eq!((status, body.len()), (304, 0));
    let (status, _, _) = http_with(
        addr,
        "GET",
        &path,
        &[("If-Modified-Since", "Thu, 01 Jan 1970 00:00:00 GMT")],
        &[],
    );
    assert_eq!(status, 200, "modified since then");

    let (status, head, _) = http_with(
        addr,
        "OPTIONS",
        &path,
        &[
            ("Origin", "https://app.example"),
            ("Access-Control-Request-Method", "PUT"),
        ],
        &[],
    );
    assert_eq!(status, 204);
    assert!(header(&head, "access-control-allow-methods").is_some_and(|m| m.contains("PUT")));
    assert!(header(&head, "access-control-allow-headers").is_some_and(|h| h.contains("If-Match")));
}

/// Publishes are answered ahead of the router when their key needs no decoding; those whose
/// key does, or whose path is not the route's, get the router's answers.
#[test]
fn publishes_with_a_percent_encoded_key_or_another_path_get_the_routers_answers() {
    let data = tempfile::tempdir().unwrap();
    let m = serve(data.path());
    let addr = m.http.unwrap();
    let secret = SecretKey::generate();
    let z32 = secret.public().to_z32();
    let encoded = format!("/pkarr/%{:02X}{}", z32.as_bytes()[0], &z32[1..]);
    let packet = signed(&secret, 1);
    let (status, _, body) = http(addr, "PUT", &encoded, None, &packet);
    assert_eq!(status, 204, "{}", String::from_utf8_lossy(&body));
    let (status, _, body) = http(addr, "GET", &format!("/pkarr/{z32}"), None, &[]);
    assert_eq!((status, body), (200, packet.clone()));
    let (status, _, _) = http(addr, "PUT", &format!("/pkarr/{z32}/"), None, &packet);
    assert_eq!(status, 404, "a path the route does not match");
    let (status, _, body) = http(addr, "PUT", "/pkarr/not-a-key", None, &packet);
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
}

/// Every publish that got its 204 is there after `kill -9` and a restart.
#[test]
fn acknowledged_publishes_survive_kill_9() {
    let data = tempfile::tempdir().unwrap();
    let mut m = serve(data.path());
    let addr = m.http.unwrap();
    let publishes: Vec<(String, Vec<u8>)> = (0..200).map(|i| fresh_publish(i as u16 + 1)).collect();
    let acknowledged = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for chunk in publishes.chunks(25) {
            let acknowledged = &acknowledged;
            scope.spawn(move || {
                for (key, payload) in chunk {
                    if http(addr, "PUT", &format!("/pkarr/{key}"), None, payload).0 == 204 {
                        acknowledged
                            .lock()
                            .unwrap()
                            .push((key.clone(), payload.clone()));
                    }
                }
            });
        }
    });
    // No goodbye: SIGKILL straight after the last acknowledgement.
    m.child.kill().unwrap();
    m.child.wait().unwrap();
    let acknowledged = acknowledged.into_inner().unwrap();
    assert_eq!(
        acknowledged.len(),
        publishes.len(),
        "every publish was acknowledged"
    );
    let m = serve(data.path());
    for (key, payload) in &acknowledged {
        let (status, _, stored) = http(m.http.unwrap(), "GET", &format!("/pkarr/{key}"), None, &[]);
        assert_eq!((status, &stored), (200, payload), "{key} lost");
    }
    let (_, metrics) = m.get("/metrics");
    assert!(metrics.contains("meshdns_pkarr_packets 200"), "{metrics}");
}

/// A replaced packet's change-log row is left stale and removed later: a SIGTERM keeps their
/// numbers for the next start, which then takes them without walking the log; after
/// `kill -9` the start finds them by the walk.
#[test]
fn a_clean_stop_keeps_the_stale_log_rows_for_the_next_start() {
    const WALKED: &str = "stale rows found after an unclean stop";
    let gauge = |m: &Meshdns, name: &str| {
        let (_, metrics) = m.get("/metrics");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {name} in {metrics}"))
    };
    let stale_rows = |m: &Meshdns| gauge(m, "meshdns_pkarr_stale_log_rows");
    let commits = |m: &Meshdns| -> u64 { gauge(m, "meshdns_pkarr_commits_total").parse().unwrap() };
    let data = tempfile::tempdir().unwrap();
    let m = serve(data.path());
    let secret = SecretKey::generate();
    let key = secret.public().to_z32();
    let first = signed(&secret, 1);
    let stamp = u64::from_be_bytes(first[64..72].try_into().unwrap());
    // The first publish, and three newer ones: three rows go stale. Each is answered from the
    // journal and written by a later commit (within a second); two commits after it (the first may
    // have begun before it came) wrote it, and the next one replaces a row in the log (one still
    // waiting would be replaced before it was written: no stale row).
    for n in 0..4u64 {
        let before = commits(&m);
        let payload = resigned(&secret, &first, stamp + n);
        let (status, ..) = http(
            m.http.unwrap(),
            "PUT",
            &format!("/pkarr/{key}"),
            None,
            &payload,
        );
        assert_eq!(status, 204, "publish {n}");
        // 15 s at most: the bound only keeps a broken build from hanging.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        while commits(&m) < before + 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "publish {n} never committed"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    assert_eq!(stale_rows(&m), "3");

    let log = m.log.clone();
    assert!(m.terminate().success());
    assert!(!log.lock().unwrap().join("\n").contains(WALKED));
    let m = serve(data.path());
    assert_eq!(stale_rows(&m), "3", "kept across the clean stop");
    let log = m.log.lock().unwrap().join("\n");
    assert!(!log.contains(WALKED), "a clean stop needs no walk:\n{log}");

    // Without a goodbye, the walk finds the same rows.
    let mut m = m;
    m.child.kill().unwrap();
    m.child.wait().unwrap();
    let m = serve(data.path());
    assert_eq!(stale_rows(&m), "3", "found by the walk");
    let log = m.log.lock().unwrap().join("\n");
    assert!(log.contains(WALKED), "{log}");
    let (status, _, stored) = http(m.http.unwrap(), "GET", &format!("/pkarr/{key}"), None, &[]);
    assert_eq!(
        (status, stored),
        (200, resigned(&secret, &first, stamp + 3)),
        "the newest packet"
    );
}

/// `signed`, re-signed as if published `age` ago.
fn signed_ago(secret: &SecretKey, port: u16, age: std::time::Duration) -> Vec<u8> {
    let now = signed(secret, port);
    let stamp = u64::from_be_bytes(now[64..72].try_into().unwrap()) - age.as_micros() as u64;
    resigned(secret, &now, stamp)
}

/// `payload`'s DNS message signed by `secret` at `stamp`.
pub(crate) fn resigned(secret: &SecretKey, payload: &[u8], stamp: u64) -> Vec<u8> {
    let message = &payload[72..];
    let mut signable = format!("3:seqi{stamp}e1:v{}:", message.len()).into_bytes();
    signable.extend_from_slice(message);
    let mut out = secret.sign(&signable).to_bytes().to_vec();
    out.extend_from_slice(&stamp.to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// A publish, a re-publish and an expiry each change the answers of their own key and leave
/// every other key's answer byte for byte as it was.
#[test]
fn publishes_and_expiry_change_only_their_own_key() {
    let data = tempfile::tempdir().unwrap();
    let m = serve_with(data.path(), &["--pkarr-max-age", "60s"]);
    let addr = m.http.unwrap();
    let keys: Vec<SecretKey> = (0..3).map(|_| SecretKey::generate()).collect();
    let put = |k: &SecretKey, payload: &[u8]| {
        http(
            addr,
            "PUT",
            &format!("/pkarr/{}", k.public().to_z32()),
            None,
            payload,
        )
        .0
    };
    let answer = |k: &SecretKey| {
        // The status and the answer records (the query ID and timings vary).
        let out = dig(
            m.dns,
            &[
                &format!("_iroh.{}.{ORIGIN}", k.public().to_z32()),
                "TXT",
                "+noall",
                "+answer",
                "+comments",
            ],
        );
        let status = out
            .split("status: ")
            .nth(1)
            .and_then(|s| s.split(',').next())
            .unwrap_or("no reply")
            .to_string();
        let records = out
            .lines()
            .filter(|l| !l.starts_with(';') && !l.trim().is_empty());
        std::iter::once(status)
            .chain(records.map(str::to_string))
            .collect::<Vec<_>>()
            .join("\n")
    };
    // Key 0 publishes 58 s in the past: it expires within seconds of a 60 s maximum age.
    assert_eq!(
        put(
            &keys[0],
            &signed_ago(&keys[0], 1, std::time::Duration::from_secs(58))
        ),
        204
    );
    assert_eq!(put(&keys[1], &signed(&keys[1], 1)), 204);
    let before: Vec<String> = keys.iter().map(answer).collect();
    assert!(before[0].contains("192.0.2.1:1") && before[1].contains("192.0.2.1:1"));
    assert!(before[2].contains("NXDOMAIN"), "{}", before[2]);

    // Key 2 publishes, key 1 re-publishes: key 0's answer is unchanged.
    assert_eq!(put(&keys[2], &signed(&keys[2], 2)), 204);
    assert_eq!(put(&keys[1], &signed(&keys[1], 3)), 204);
    assert_eq!(answer(&keys[0]), before[0]);
    assert!(answer(&keys[1]).contains("192.0.2.1:3"));
    assert!(answer(&keys[2]).contains("192.0.2.1:2"));
    let after_publishes: Vec<String> = keys.iter().map(answer).collect();

    // Key 0 expires (the store checks every second); keys 1 and 2 answer as before.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !answer(&keys[0]).contains("NXDOMAIN") {
        assert!(std::time::Instant::now() < deadline, "key 0 never expired");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(answer(&keys[1]), after_publishes[1]);
    assert_eq!(answer(&keys[2]), after_publishes[2]);
    let (_, metrics) = m.get("/metrics");
    assert!(
        metrics.contains("meshdns_pkarr_expired_total 1"),
        "{metrics}"
    );
    assert!(metrics.contains("meshdns_pkarr_packets 2"), "{metrics}");
}

/// The server's resident memory, from /proc.
fn rss_kib(m: &Meshdns) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", m.child.id())).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A publish flood (one client putting fresh keys as fast as it can, far past its rate limit)
/// does not starve DNS: UDP and TCP queries asked meanwhile are all answered. What is accepted
/// is the burst plus the rate; memory grows with the keys accepted (each is served) and not
/// with the publishes refused.
#[test]
fn a_publish_flood_does_not_starve_dns_answers() {
    let data = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let zone = write(dir.path(), "z.zone", SMALL_ZONE);
    let m = serve_with(
        data.path(),
        &[
            "--zone-file",
            &zone,
            "--pkarr-put-limit",
            "600",
            "--pkarr-put-burst",
            "100",
        ],
    );
    let http_addr = m.http.unwrap();
    let keys: Vec<(String, Vec<u8>)> = (0..2000).map(|i| fresh_publish(i as u16)).collect();
    let flooding = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flood = {
        let keys = keys.clone();
        let flooding = flooding.clone();
        std::thread::spawn(move || {
            let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
            let mut sent = 0;
            let began = std::time::Instant::now();
            while flooding.load(std::sync::atomic::Ordering::Relaxed) && sent < 8000 {
                let (z32, body) = &keys[sent % keys.len()];
                let (status, _, _) = http(http_addr, "PUT", &format!("/pkarr/{z32}"), None, body);
                *statuses.entry(status).or_default() += 1;
                sent += 1;
            }
            (statuses, began.elapsed())
        })
    };
    let mut asked = 0;
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(4) {
        let udp = dig(m.dns, &["www.example.org", "A", "+short"]);
        assert_eq!(
            udp.trim(),
            "192.0.2.1",
            "UDP answer {asked} during the flood"
        );
        let tcp = dig(m.dns, &["www.example.org", "A", "+short", "+tcp"]);
        assert_eq!(
            tcp.trim(),
            "192.0.2.1",
            "TCP answer {asked} during the flood"
        );
        asked += 2;
    }
    flooding.store(false, std::sync::atomic::Ordering::Relaxed);
    let (statuses, lasted) = flood.join().unwrap();
    let accepted = statuses.get(&204).copied().unwrap_or(0);
    let limited = statuses.get(&429).copied().unwrap_or(0);
    assert!(limited > accepted, "{statuses:?}");
    // The burst plus 10 a second for as long as the flood ran.
    let allowed = 101 + (10.0 * lasted.as_secs_f64()) as usize;
    assert!(accepted <= allowed, "{statuses:?}, {allowed} allowed");
    let before = rss_kib(&m);
    // More refused publishes do not grow memory: another 3000 from the limited address, of
    // which only the refill (10 a second) is accepted.
    let again = std::time::Instant::now();
    let mut refill = 0;
    for (z32, body) in keys.iter().cycle().take(3000) {
        let (status, _, _) = http(http_addr, "PUT", &format!("/pkarr/{z32}"), None, body);
        refill += usize::from(status == 204);
    }
    let allowed = 2 + (10.0 * again.elapsed().as_secs_f64()) as usize;
    assert!(refill <= allowed, "{refill} accepted, {allowed} allowed");
    let after = rss_kib(&m);
    assert!(
        after < before + 8 * 1024,
        "RSS grew from {before} KiB to {after} KiB over 3000 refused publishes"
    );
    eprintln!(
        "{asked} DNS answers during the flood; publishes {statuses:?}; RSS {before} -> {after} KiB"
    );
}
