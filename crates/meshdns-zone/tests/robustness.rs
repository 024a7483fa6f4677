//! `answer()` never panics, whatever bytes arrive, and every reply it writes is a well-formed
//! DNS message that hickory can parse, with the query's ID.

use hickory_proto::op::Message;
use meshdns_zone::{
    AnswerConfig, BuildDefaults, CatalogBuilder, Name, RData, RType, Record, Transport, answer,
};

mod common;

use common::{Rng, query};

fn catalog() -> meshdns_zone::Catalog {
    let mut records: Vec<(&str, RType, String)> = vec![
        ("www", RType::A, "192.0.2.1".into()),
        ("www", RType::AAAA, "2001:db8::1".into()),
        ("alias", RType::CNAME, "www".into()),
        ("loop1", RType::CNAME, "loop2".into()),
        ("loop2", RType::CNAME, "loop1".into()),
        ("*.wild", RType::TXT, "\"x\"".into()),
        ("sub", RType::NS, "ns.sub".into()),
        ("ns.sub", RType::A, "192.0.2.9".into()),
    ];
    records.extend((0..200).map(|i| ("many", RType::A, format!("10.0.{}.{}", i / 250, i % 250))));
    common::catalog(&records)
}

/// Valid queries (with EDNS) to mutate.
fn seeds() -> Vec<Vec<u8>> {
    [
        ("www", 1u16),
        ("alias", 1),
        ("loop1", 1),
        ("x.wild", 16),
        ("a.sub", 1),
        ("many", 1),
        ("nope", 255),
    ]
    .iter()
    .map(|(name, t)| query(&format!("{name}.example.org"), *t, true))
    .collect()
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

/// The compact zone answers exactly what a plain model of the records says, for every name and
/// type of generated zones and for random names that do not exist: positive answers carry the
/// model's RRset, existing names without the type and empty non-terminals are NODATA, and
/// everything else is NXDOMAIN.
#[test]
fn answers_match_a_model_of_generated_zones() {
    use std::collections::{BTreeSet, HashMap, HashSet};
    let origin: Name = "model.test.".parse().unwrap();
    let mut rng = Rng(0xDEAD_BEEF_CAFE_F00D);
    let types = [
        RType::A,
        RType::AAAA,
        RType::TXT,
        RType::MX,
        RType::SRV,
        RType::CAA,
    ];
    for round in 0..4 {
        let mut b = CatalogBuilder::new(BuildDefaults {
            default_ttl: 5,
            serial: 1,
        });
        let mut model: HashMap<(Name, RType), BTreeSet<String>> = HashMap::new();
        let labels = ["a", "b", "c", "_iroh", "host", "x1", "Zz"];
        for _ in 0..(200 + round * 300) {
            let depth = 1 + rng.below(3);
            let text: Vec<&str> = (0..depth)
                .map(|_| labels[rng.below(labels.len())])
                .collect();
            let name = Name::parse(&text.join("."), Some(&origin)).unwrap();
            let t = types[rng.below(types.len())];
            let value = match t {
                RType::A => format!("10.0.{}.{}", rng.below(4), rng.below(250)),
                RType::AAAA => format!("fd00::{:x}", rng.below(900)),
                RType::TXT => format!("\"v{}\"", rng.below(50)),
                RType::MX => format!("{} mx{}.other.", rng.below(20), rng.below(5)),
                RType::SRV => format!(
                    "{} {} {} t{}.other.",
                    rng.below(3),
                    rng.below(3),
                    1 + rng.below(999),
                    rng.below(4)
                ),
                _ => format!("0 issue \"ca{}.example\"", rng.below(3)),
            };
            let data = RData::parse(t, &value, &origin).unwrap();
            model
                .entry((name.clone(), t))
                .or_default()
                .insert(data.to_string());
            b.add(
                &origin,
                Record {
                    name,
                    ttl: 60,
                    data,
                },
                0,
            )
            .unwrap();
        }
        let (catalog, refused) = b.build();
        assert!(refused.is_empty());
        let owners: HashSet<Name> = model.keys().map(|(n, _)| n.clone()).collect();
        let mut existing: HashSet<Name> = owners.clone();
        for o in &owners {
            let mut cur = o.parent();
            while let Some(p) = cur {
                if !p.is_subdomain_of(&origin) {
                    break;
                }
                cur = p.parent();
                existing.insert(p);
            }
        }
        let mut names: Vec<Name> = existing.iter().cloned().collect();
        for i in 0..200 {
            names.push(
                Name::parse(
                    &format!("nope{i}.{}", labels[i % labels.len()]),
                    Some(&origin),
                )
                .unwrap(),
            );
        }
        let mut out = Vec::new();
        for name in &names {
            for &t in &types {
                let mut q = vec![0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0];
                q.extend_from_slice(name.wire());
                q.extend_from_slice(&t.0.to_be_bytes());
                q.extend_from_slice(&[0, 1]);
                let outcome = answer(
                    &catalog,
                    &q,
                    Transport::Stream,
                    &AnswerConfig::default(),
                    &mut out,
                );
                let m = Message::from_vec(&out).unwrap();
                let got: BTreeSet<String> = m.answers.iter().map(|r| r.data.to_string()).collect();
                match model.get(&(name.clone(), t)) {
                    Some(want) => {
                        let want: BTreeSet<String> =
                            want.iter().map(|v| v.replace('"', "")).collect();
                        let got: BTreeSet<String> =
                            got.iter().map(|v| v.replace('"', "")).collect();
                        assert_eq!(got, want, "{name} {t}");
                        assert_eq!(outcome.rcode, meshdns_zone::rcode::NOERROR);
                    }
                    None if existing.contains(name) || name == &origin => {
                        assert!(m.answers.is_empty(), "{name} {t}: NODATA expected");
                        assert_eq!(outcome.rcode, meshdns_zone::rcode::NOERROR, "{name} {t}");
                        assert_eq!(m.authorities.len(), 1);
                    }
                    None => {
                        assert_eq!(outcome.rcode, meshdns_zone::rcode::NXDOMAIN, "{name} {t}");
                        assert_eq!(m.authorities.len(), 1);
                    }
                }
            }
        }
    }
}
