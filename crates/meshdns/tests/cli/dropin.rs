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

const HEX: &str = "f120d52e42bfcee750508baf28900acac85ad3f397ab4bb653b32be505c32d39";

fn connectors(id_yaml: &str, addresses: &str) -> String {
    format!(
        "apiVersion: networking.datumapis.com/v1alpha1
kind: ConnectorClass
metadata: {{name: datum-connect}}
spec: {{controllerName: networking.datumapis.com/datum-connect}}
---
apiVersion: networking.datumapis.com/v1alpha1
kind: Connector
metadata: {{name: laptop, namespace: default, uid: u1}}
spec: {{connectorClassName: datum-connect}}
status:
  connectionDetails:
    type: PublicKey
    publicKey:
      id: {id_yaml}
      addresses: {addresses}
"
    )
}

fn render(manifests: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "connectors.yaml", manifests);
    stdout_of(&[
        "render",
        "iroh",
        "--dns-zone-namespace",
        "dns",
        "--dns-zone-name",
        "zone",
        "-f",
        &file,
    ])
}

/// datum's controller writes each address as the Connector gives it; so does meshdns, byte for
/// byte, so both can run side by side without rewriting each other's records.
#[test]
fn upper_case_ipv6_addresses_are_published_as_datum_writes_them() {
    let out = render(&connectors(
        HEX,
        "[{address: '2001:DB8::1', port: 443}, {address: 192.0.2.1, port: 8080}, {address: '2001:DB8::1', port: 443}]",
    ));
    let contents: Vec<&str> = out
        .lines()
        .filter_map(|l| l.trim().strip_prefix("content: "))
        .collect();
    assert_eq!(
        contents,
        [
            "addr=192.0.2.1:8080",
            "addr=[2001:DB8::1]:443",
            "addr=[2001:DB8::1]:443"
        ],
        "{out}"
    );
}

/// An id with a stray newline or space is not trimmed into a valid one: the Connector is
/// Invalid, even with no address yet (datum's controller refuses it too).
#[test]
fn an_id_with_whitespace_is_invalid_even_without_addresses() {
    for id in [format!("\"{HEX}\\n\""), format!("\" {HEX}\"")] {
        let out = render(&connectors(&id, "[]"));
        assert!(!out.contains("kind: DNSRecordSet"), "{out}");
        assert!(out.contains("reason: Invalid"), "{id}: {out}");
        assert!(out.contains("is not an endpoint id"), "{out}");
    }
}
