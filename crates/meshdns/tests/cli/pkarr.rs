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
    Meshdns::serve(&[
        "--pkarr",
        ORIGIN,
        "--data-dir",
        data_dir.to_str().unwrap(),
        "--http",
        "127.0.0.1:0",
    ])
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
        metrics.contains(r#"meshdns_pkarr_publishes_total{result="stale"} 1"#),
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
    let m = Meshdns::serve(&[
        "--pkarr",
        ORIGIN,
        "--data-dir",
        data.path().to_str().unwrap(),
        "--http",
        "127.0.0.1:0",
        "--pkarr-put-limit",
        "1",
    ]);
    let secret = SecretKey::generate();
    let path = format!("/pkarr/{}", secret.public().to_z32());
    let packet = |port: u16| {
        EndpointInfo::new(secret.public())
            .with_ip_addrs(vec![SocketAddr::from(([192, 0, 2, 1], port))])
            .to_pkarr_signed_packet(&secret, 30)
            .unwrap()
            .to_relay_payload()
    };
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
    let m = Meshdns::serve(&[
        "--records",
        &file,
        "--pkarr",
        ORIGIN,
        "--data-dir",
        data.path().to_str().unwrap(),
        "--http",
        "127.0.0.1:0",
    ]);
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
    // Wait until the publish has been considered (the pkarr source was rebuilt).
    let mut considered = false;
    for _ in 0..250 {
        let (_, metrics) = m.get("/metrics");
        if metrics.contains(r#"meshdns_source_skipped_entries_total{source="pkarr"} 1"#) {
            considered = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        considered,
        "the refused pkarr record is counted; log:\n{}",
        m.log_text()
    );
    m.wait_log("already provided by");
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
