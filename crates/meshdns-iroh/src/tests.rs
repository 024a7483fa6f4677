use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use iroh_base::SecretKey;

use super::*;

fn origin() -> Name {
    "mesh.example.org.".parse().unwrap()
}

fn info(id: EndpointId) -> EndpointInfo {
    EndpointInfo {
        id,
        relay: None,
        addrs: Vec::new(),
        user_data: None,
        suffix: None,
        ttl: DEFAULT_TTL,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn ids_parse_from_hex_in_either_case_and_from_z32() {
    let id = SecretKey::generate().public();
    let h = hex(id.as_bytes());
    assert_eq!(parse_endpoint_id(&h), Ok(id));
    assert_eq!(parse_endpoint_id(&h.to_uppercase()), Ok(id));
    assert!(matches!(
        parse_endpoint_id(&format!("  {h}\n")),
        Err(IdError::Form(_))
    ));
    assert!(matches!(
        parse_endpoint_id(&format!("{h}\n")),
        Err(IdError::Form(_))
    ));
    assert_eq!(parse_endpoint_id(&id.to_z32()), Ok(id));
    assert_eq!(parse_endpoint_id(&id.to_z32().to_uppercase()), Ok(id));
}

#[test]
fn ids_are_refused_with_the_expected_forms_named() {
    let e = parse_endpoint_id("abc").unwrap_err();
    assert!(
        e.to_string().contains("expected 64 hexadecimal characters"),
        "{e}"
    );
    assert!(matches!(
        parse_endpoint_id(&"g".repeat(64)),
        Err(IdError::Hex(_))
    ));
    assert!(matches!(
        parse_endpoint_id(&"0".repeat(52)),
        Err(IdError::Z32(_))
    ));
    // 32 bytes that do not decompress to a curve point.
    let not_a_point = (0u8..=255)
        .map(|b| [b; 32])
        .find(|bytes| EndpointId::from_bytes(bytes).is_err())
        .expect("some constant byte string is not a point");
    let e = parse_endpoint_id(&hex(&not_a_point)).unwrap_err();
    assert!(matches!(e, IdError::NotAKey(_)), "{e}");
    assert!(e.to_string().contains("not a valid ed25519 public key"));
}

#[test]
fn records_have_the_documented_name_order_and_bytes() {
    let id = SecretKey::generate().public();
    let i = EndpointInfo {
        relay: Some("https://relay.example.org".into()),
        addrs: vec![
            "[2001:db8::1]:4433".parse().unwrap(),
            "192.0.2.10:4433".parse().unwrap(),
            "192.0.2.9:4433".parse().unwrap(),
            "192.0.2.10:1".parse().unwrap(),
            "192.0.2.9:4433".parse().unwrap(),
        ],
        user_data: Some("rack-7".into()),
        suffix: Some("nodes".into()),
        ..info(id)
    };
    let records = endpoint_txt(&i, &origin()).unwrap();
    let name = format!("_iroh.{}.nodes.mesh.example.org.", id.to_z32());
    assert!(
        records
            .iter()
            .all(|r| r.name.to_string() == name && r.ttl == 5)
    );
    let strings: Vec<String> = records.iter().map(|r| r.data.to_string()).collect();
    assert_eq!(
        strings,
        [
            "\"relay=https://relay.example.org\"",
            "\"addr=192.0.2.10:1\"",
            "\"addr=192.0.2.10:4433\"",
            "\"addr=192.0.2.9:4433\"",
            "\"addr=[2001:db8::1]:4433\"",
            "\"user-data=rack-7\"",
        ]
    );
}

#[test]
fn input_iroh_would_mangle_is_refused() {
    let id = SecretKey::generate().public();
    let with = |f: &dyn Fn(&mut EndpointInfo)| {
        let mut i = EndpointInfo {
            relay: Some("https://r.example/".into()),
            ..info(id)
        };
        f(&mut i);
        txt_strings(&i)
    };
    assert!(matches!(
        with(&|i| i.relay = Some("https://r.example/?a=b".into())),
        Err(InfoError::RelayHasEquals(_))
    ));
    assert!(matches!(
        with(&|i| i.relay = Some("not a url".into())),
        Err(InfoError::RelayNotUrl(_))
    ));
    let long = format!("https://{}.example/", "a".repeat(250));
    assert!(matches!(
        with(&|i| i.relay = Some(long.clone())),
        Err(InfoError::RelayTooLong(_))
    ));
    assert!(matches!(
        with(&|i| i.user_data = Some("x".repeat(246))),
        Err(InfoError::UserDataTooLong(246))
    ));
    assert!(with(&|i| i.user_data = Some("x".repeat(245))).is_ok());
    assert!(matches!(
        with(&|i| i.user_data = Some("a=b".into())),
        Err(InfoError::UserDataHasEquals)
    ));
    assert!(matches!(
        with(&|i| i.addrs = vec!["192.0.2.1:0".parse().unwrap()]),
        Err(InfoError::PortZero(_))
    ));
    assert!(matches!(with(&|i| i.relay = None), Err(InfoError::Empty)));
    let bad_suffix = EndpointInfo {
        suffix: Some("a..b".into()),
        ..info(id)
    };
    assert!(matches!(
        record_name(&bad_suffix.id, bad_suffix.suffix.as_deref(), &origin()),
        Err(InfoError::Suffix(..))
    ));
}

/// xorshift64*, so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Whatever we publish, iroh's own parser reads back exactly: the relay, every distinct
/// address (IPv4 and IPv6), and the user data.
#[test]
fn iroh_parses_back_what_we_publish_for_generated_inputs() {
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    let relays = [
        "https://relay.example.org/",
        "https://euw1-1.relay.iroh.network./",
        "http://10.0.0.1:3340/",
    ];
    for round in 0..500 {
        let id = SecretKey::generate().public();
        let n = (rng.next() % 6) as usize;
        let addrs: Vec<SocketAddr> = (0..n)
            .map(|_| {
                let ip = if rng.next().is_multiple_of(2) {
                    IpAddr::V4(Ipv4Addr::from(rng.next() as u32))
                } else {
                    IpAddr::V6(Ipv6Addr::from(
                        u128::from(rng.next()) << 64 | u128::from(rng.next()),
                    ))
                };
                SocketAddr::new(ip, 1 + (rng.next() % 65_535) as u16)
            })
            .collect();
        let relay = (round % 4 != 0 || addrs.is_empty())
            .then(|| relays[(rng.next() % 3) as usize].to_string());
        let user_data = rng
            .next()
            .is_multiple_of(3)
            .then(|| format!("u{}", rng.next()));
        let i = EndpointInfo {
            relay: relay.clone(),
            addrs: addrs.clone(),
            user_data: user_data.clone(),
            ..info(id)
        };
        let records = endpoint_txt(&i, &origin()).unwrap();
        let name = records[0].name.to_string();
        let strings: Vec<String> = records
            .iter()
            .map(|r| match &r.data {
                RData::Txt(parts) => String::from_utf8(parts.concat()).unwrap(),
                other => panic!("not TXT: {other:?}"),
            })
            .collect();
        let parsed = iroh_dns::endpoint_info::EndpointInfo::from_txt_lookup(name, strings.iter())
            .expect("iroh accepts it");
        assert_eq!(parsed.endpoint_id, id);
        let got_relays: Vec<String> = parsed.relay_urls().map(ToString::to_string).collect();
        assert_eq!(got_relays, relay.into_iter().collect::<Vec<_>>());
        let got_addrs: BTreeSet<SocketAddr> = parsed.ip_addrs().copied().collect();
        assert_eq!(got_addrs, addrs.iter().copied().collect());
        assert_eq!(parsed.user_data().map(|u| u.to_string()), user_data);
        // Same input, same bytes, whatever the order given.
        let mut shuffled = i.clone();
        shuffled.addrs.reverse();
        assert_eq!(endpoint_txt(&shuffled, &origin()).unwrap(), records);
    }
}
