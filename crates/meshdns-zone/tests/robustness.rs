//! `answer()` never panics, whatever bytes arrive, and every reply it writes is a well-formed
//! DNS message that hickory can parse, with the query's ID.

use hickory_proto::op::Message;
use meshdns_zone::{
    AnswerConfig, BuildDefaults, CatalogBuilder, Name, RData, RType, Record, Transport, answer,
};

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn catalog() -> meshdns_zone::Catalog {
    let origin: Name = "example.org.".parse().unwrap();
    let mut b = CatalogBuilder::new(BuildDefaults {
        default_ttl: 5,
        serial: 1,
    });
    let mut add = |name: &str, t: RType, v: &str| {
        let data = RData::parse(t, v, &origin).unwrap();
        b.add(
            &origin,
            Record {
                name: Name::parse(name, Some(&origin)).unwrap(),
                ttl: 60,
                data,
            },
            0,
        )
        .unwrap();
    };
    add("www", RType::A, "192.0.2.1");
    add("www", RType::AAAA, "2001:db8::1");
    add("alias", RType::CNAME, "www");
    add("loop1", RType::CNAME, "loop2");
    add("loop2", RType::CNAME, "loop1");
    add("*.wild", RType::TXT, "\"x\"");
    add("sub", RType::NS, "ns.sub");
    add("ns.sub", RType::A, "192.0.2.9");
    for i in 0..200 {
        add("many", RType::A, &format!("10.0.{}.{}", i / 250, i % 250));
    }
    b.build().0
}

/// Valid queries (with EDNS) to mutate.
fn seeds() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for (name, t) in [
        ("www", 1u16),
        ("alias", 1),
        ("loop1", 1),
        ("x.wild", 16),
        ("a.sub", 1),
        ("many", 1),
        ("nope", 255),
    ] {
        let mut p = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1];
        for label in name.split('.').chain(["example", "org"]) {
            p.push(label.len() as u8);
            p.extend_from_slice(label.as_bytes());
        }
        p.push(0);
        p.extend_from_slice(&t.to_be_bytes());
        p.extend_from_slice(&[0, 1]);
        p.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0]);
        v.push(p);
    }
    v
}

#[test]
fn random_and_mutated_packets_never_panic_and_replies_parse() {
    let catalog = catalog();
    let config = AnswerConfig::default();
    let seeds = seeds();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::new();
    let mut replies = 0;
    for i in 0..100_000 {
        let mut packet: Vec<u8> = if i % 10 == 0 {
            (0..rng.below(80)).map(|_| rng.next() as u8).collect()
        } else {
            seeds[rng.below(seeds.len())].clone()
        };
        for _ in 0..rng.below(4) {
            if packet.is_empty() {
                break;
            }
            match rng.below(4) {
                0 => {
                    let at = rng.below(packet.len());
                    packet[at] = rng.next() as u8;
                }
                1 => packet.truncate(rng.below(packet.len())),
                2 => packet.push(rng.next() as u8),
                _ => {
                    let at = rng.below(packet.len());
                    packet[at] ^= 1 << rng.below(8);
                }
            }
        }
        let transport = if i % 2 == 0 {
            Transport::Udp
        } else {
            Transport::Stream
        };
        let outcome = answer(&catalog, &packet, transport, &config, &mut out);
        if outcome.reply {
            replies += 1;
            let m = Message::from_vec(&out)
                .unwrap_or_else(|e| panic!("unparseable reply to {packet:02x?}: {e}"));
            assert_eq!(m.metadata.id, u16::from_be_bytes([packet[0], packet[1]]));
            if transport == Transport::Udp {
                assert!(out.len() <= 1232, "UDP reply of {} bytes", out.len());
            }
        }
    }
    assert!(
        replies > 50_000,
        "most mutated queries still get a reply ({replies})"
    );
}

#[test]
fn a_cname_loop_ends_and_an_oversized_rrset_truncates_over_tcp() {
    let origin: Name = "example.org.".parse().unwrap();
    let mut b = CatalogBuilder::new(BuildDefaults {
        default_ttl: 5,
        serial: 1,
    });
    for i in 0..5000u32 {
        let data = RData::A(std::net::Ipv4Addr::from(0x0A00_0000 + i));
        b.add(
            &origin,
            Record {
                name: Name::parse("huge", Some(&origin)).unwrap(),
                ttl: 60,
                data,
            },
            0,
        )
        .unwrap();
    }
    let catalog = b.build().0;
    let mut q = vec![0, 7, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 4];
    q.extend_from_slice(b"huge\x07example\x03org\x00\x00\x01\x00\x01");
    let mut out = Vec::new();
    let outcome = answer(
        &catalog,
        &q,
        Transport::Stream,
        &AnswerConfig::default(),
        &mut out,
    );
    assert!(
        outcome.truncated,
        "5000 A records (80 kB) cannot fit one TCP message"
    );
    let m = Message::from_vec(&out).unwrap();
    assert!(m.metadata.truncation && m.answers.is_empty());
}

#[test]
fn additional_addresses_that_do_not_fit_are_dropped_without_tc() {
    let origin: Name = "example.org.".parse().unwrap();
    let mut b = CatalogBuilder::new(BuildDefaults {
        default_ttl: 5,
        serial: 1,
    });
    let ns = RData::Ns(Name::parse("ns1", Some(&origin)).unwrap());
    b.add(
        &origin,
        Record {
            name: origin.clone(),
            ttl: 60,
            data: ns,
        },
        0,
    )
    .unwrap();
    for i in 0..60u32 {
        let data = RData::A(std::net::Ipv4Addr::from(0x0A00_0000 + i));
        b.add(
            &origin,
            Record {
                name: Name::parse("ns1", Some(&origin)).unwrap(),
                ttl: 60,
                data,
            },
            0,
        )
        .unwrap();
    }
    let catalog = b.build().0;
    let mut q = vec![0, 9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    q.extend_from_slice(b"\x07example\x03org\x00\x00\x02\x00\x01");
    let mut out = Vec::new();
    let outcome = answer(
        &catalog,
        &q,
        Transport::Udp,
        &AnswerConfig::default(),
        &mut out,
    );
    let m = Message::from_vec(&out).unwrap();
    assert!(
        !outcome.truncated && !m.metadata.truncation,
        "optional data never causes TC"
    );
    assert_eq!(m.answers.len(), 1);
    assert!(
        m.additionals.is_empty(),
        "60 addresses do not fit in 512 bytes"
    );
    let outcome = answer(
        &catalog,
        &q,
        Transport::Stream,
        &AnswerConfig::default(),
        &mut out,
    );
    assert!(!outcome.truncated);
    assert_eq!(
        Message::from_vec(&out).unwrap().additionals.len(),
        60,
        "over TCP they fit"
    );
}
