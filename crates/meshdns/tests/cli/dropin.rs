//! The originals' own inputs, answered as the originals answer them.

use crate::*;

/// Tailscale's nameserver unmaps an IPv4-mapped IPv6 address given in `ip4` and serves it as
/// A; given in `ip6`, it is refused.
#[test]
fn an_ipv4_mapped_address_in_ip4_is_served_as_a() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "records.json",
        r#"{"version":"v1alpha1","ip4":{"m.ts.net":["::ffff:192.0.2.13"]},"ip6":{"m.ts.net":["::ffff:192.0.2.14"]}}"#,
    );
    let m = Meshdns::serve(&["--records", &file]);
    let a = dig(m.dns, &["+short", "m.ts.net", "A"]);
    assert_eq!(a.trim(), "192.0.2.13");
    let aaaa = dig(m.dns, &["m.ts.net", "AAAA"]);
    assert!(
        aaaa.contains("status: NOERROR") && aaaa.contains("ANSWER: 0"),
        "{aaaa}"
    );
    assert!(
        m.log_text()
            .contains("IPv4-mapped address where IPv6 is expected")
    );
}
