//! The NOTIFY sender against a secondary on loopback.

use std::net::SocketAddr;
use std::sync::Arc;

use meshdns_server::xfr::{NotifyTarget, Transfers, notify_loop_with};
use meshdns_xfr::message::{OPCODE_NOTIFY, parse};
use meshdns_xfr::{Policy, Primary};
use meshdns_zone::{BuildDefaults, CatalogBuilder, Name, RData, Record};
use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;

use crate::support::WAIT;

/// Transfers of one zone, `example.org.`, with its serial announced.
fn transfers() -> Arc<Transfers> {
    let origin: Name = "example.org.".parse().unwrap();
    let mut b = CatalogBuilder::new(BuildDefaults {
        default_ttl: 60,
        serial: 1,
    });
    let record = Record {
        name: "www.example.org.".parse().unwrap(),
        ttl: 60,
        data: RData::A([192, 0, 2, 1].into()),
    };
    b.add(&origin, record, 0).unwrap();
    let (mut catalog, _) = b.build();
    let primary = Primary::new(None, 1000, true);
    primary.update(&mut catalog, 1_800_000_000);
    primary.announce();
    Arc::new(Transfers::new(
        Arc::new(primary),
        Policy::default(),
        Vec::new(),
        16,
    ))
}

/// On a kernel booted with `ipv6.disable=1`, opening an IPv6 socket fails. Before, the sender
/// then stopped at once and no secondary was ever notified; now IPv4 works alone.
#[tokio::test]
async fn notify_reaches_an_ipv4_secondary_when_no_ipv6_socket_opens() {
    let secondary = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let target = NotifyTarget {
        address: secondary.local_addr().unwrap().to_string(),
        key: None,
    };
    let t = transfers();
    let shutdown = CancellationToken::new();
    let no_ipv6 = |bind: SocketAddr| {
        if bind.is_ipv6() {
            // What socket(2) returns for AF_INET6 when the kernel has no IPv6.
            Err(std::io::Error::from_raw_os_error(libc::EAFNOSUPPORT))
        } else {
            std::net::UdpSocket::bind(bind)
        }
    };
    let sender = notify_loop_with(t.clone(), target, shutdown.clone(), &no_ipv6);
    fn spawnable(f: &impl Send) {
        let _ = f;
    }
    spawnable(&sender);
    tokio::pin!(sender);
    let mut buf = [0u8; 512];
    let (n, _) = tokio::select! {
        r = secondary.recv_from(&mut buf) => r.unwrap(),
        () = &mut sender => panic!("the NOTIFY sender stopped without notifying"),
        () = tokio::time::sleep(WAIT) => panic!("no NOTIFY within {WAIT:?}"),
    };
    let notify = parse(&buf[..n]).unwrap();
    assert_eq!(notify.opcode(), OPCODE_NOTIFY);
    assert!(!notify.is_response());
    assert_eq!(notify.qname_lower, b"\x07example\x03org\x00");
    shutdown.cancel();
    sender.await;
    let mut text = String::new();
    t.render(&mut text);
    assert!(
        !text.contains("meshdns_notify_total{result=\"sent\"} 0"),
        "{text}"
    );
}
