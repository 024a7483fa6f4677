//! `answer()` per query, by kind, at 1k, 100k and 1M names: `cargo bench -p meshdns-zone`.
//!
//! The zone has the shape of `bench/gen_zone.py`: hosts with A and AAAA, and an iroh TXT
//! RRset (three records) under every other host. Negative answers must cost the same at every
//! size: nothing on the query path may grow with the zone.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use meshdns_zone::{
    AnswerConfig, BuildDefaults, Catalog, CatalogBuilder, Name, RData, RType, Record, Transport,
    answer,
};

fn catalog(hosts: u32) -> Catalog {
    let origin: Name = "bench.test.".parse().unwrap();
    let mut b = CatalogBuilder::new(BuildDefaults {
        default_ttl: 300,
        serial: 1,
    });
    b.reserve(&origin, hosts as usize * 4);
    for i in 0..hosts {
        let host = Name::parse(&format!("host{i:07}"), Some(&origin)).unwrap();
        b.add(
            &origin,
            Record {
                name: host.clone(),
                ttl: 300,
                data: RData::A((0x0A00_0000 + i).into()),
            },
            0,
        )
        .unwrap();
        b.add(
            &origin,
            Record {
                name: host,
                ttl: 300,
                data: RData::Aaaa((0xfd00_u128 << 112 | u128::from(i)).into()),
            },
            0,
        )
        .unwrap();
        if i % 2 == 0 {
            let name = Name::parse(&format!("_iroh.node{i:07}"), Some(&origin)).unwrap();
            for v in [
                "relay=https://relay.example./",
                "addr=192.0.2.1:4433",
                "addr=[2001:db8::1]:4433",
            ] {
                b.add(
                    &origin,
                    Record {
                        name: name.clone(),
                        ttl: 30,
                        data: RData::txt_from_text(v.as_bytes()).unwrap(),
                    },
                    0,
                )
                .unwrap();
            }
        }
    }
    let alias = Name::parse("alias", Some(&origin)).unwrap();
    b.add(
        &origin,
        Record {
            name: alias,
            ttl: 300,
            data: RData::Cname(Name::parse("host0000001", Some(&origin)).unwrap()),
        },
        0,
    )
    .unwrap();
    b.build().0
}

fn query(name: &str, qtype: RType) -> Vec<u8> {
    let mut p = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
    for label in name.trim_end_matches('.').split('.') {
        p.push(label.len() as u8);
        p.extend_from_slice(label.as_bytes());
    }
    p.push(0);
    p.extend_from_slice(&qtype.0.to_be_bytes());
    p.extend_from_slice(&[0, 1]);
    p.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0]); // EDNS, 1232
    p
}

fn bench(c: &mut Criterion) {
    let config = AnswerConfig::default();
    let mut group = c.benchmark_group("answer");
    for hosts in [1_000u32, 100_000, 1_000_000] {
        let cat = catalog(hosts);
        let last = hosts - 2;
        let cases = [
            (
                "hit_a",
                query(&format!("Host{last:07}.bench.test"), RType::A),
            ),
            (
                "iroh_txt",
                query(&format!("_iroh.node{last:07}.bench.test"), RType::TXT),
            ),
            ("nxdomain", query("nope123.bench.test", RType::A)),
            (
                "nodata",
                query(&format!("host{last:07}.bench.test"), RType::MX),
            ),
            (
                "empty_non_terminal",
                query(&format!("node{last:07}.bench.test"), RType::TXT),
            ),
            ("cname_chase", query("alias.bench.test", RType::A)),
        ];
        let mut out = Vec::with_capacity(1232);
        for (kind, packet) in &cases {
            group.bench_with_input(BenchmarkId::new(*kind, hosts), packet, |b, p| {
                b.iter(|| {
                    answer(
                        black_box(&cat),
                        black_box(p),
                        Transport::Udp,
                        &config,
                        &mut out,
                    )
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
