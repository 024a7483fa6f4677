use super::*;
use crate::name::Name;
use crate::rdata::{RData, RType};
use crate::records::{Record, Records};

fn n(s: &str) -> Name {
    s.parse().unwrap()
}

fn rec(name: &str, t: RType, data: &str) -> Record {
    Record {
        name: n(name),
        ttl: 60,
        data: RData::parse(t, data, &n("example.org.")).unwrap(),
    }
}

fn defaults() -> BuildDefaults {
    BuildDefaults {
        default_ttl: 5,
        serial: 7,
    }
}

/// Every node's RRsets, decoded, in node order.
fn dump(zone: &Zone) -> Vec<String> {
    (0..zone.nodes.len() as u32)
        .flat_map(|id| {
            let node = zone.node_at(id);
            let name = Name::from_wire(node.name).unwrap();
            node.rrsets()
                .map(|set| format!("{name} {} {} {:?}", set.rtype, set.ttl, set.decoded()))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn an_rrset_too_large_to_count_is_refused_not_wrapped() {
    let origin = n("example.org.");
    let mut b = CatalogBuilder::new(defaults());
    let big: Records = (0..=u32::from(u16::MAX))
        .map(|i| {
            let [_, _, hi, lo] = i.to_be_bytes();
            rec("big.example.org.", RType::A, &format!("10.0.{hi}.{lo}"))
        })
        .chain([rec("small.example.org.", RType::A, "192.0.2.1")])
        .collect();
    assert!(b.add_records(&origin, big, 0).is_empty());
    let (zones, refused) = b.build_zones();
    assert_eq!(
        refused,
        vec![(
            n("big.example.org."),
            RType::A,
            Rejection::TooManyRecords {
                name: n("big.example.org."),
                rtype: RType::A,
                count: 65536
            }
        )]
    );
    assert_eq!(
        refused[0].2.to_string(),
        "big.example.org. A has 65536 records; an RRset holds at most 65535"
    );
    let zone = &zones[0];
    assert!(
        zone.node(n("big.example.org.").wire())
            .is_none_or(|node| node.get(RType::A).is_none())
    );
    assert_eq!(
        zone.node(n("small.example.org.").wire())
            .and_then(|node| node.get(RType::A))
            .map(|set| set.rdatas().count()),
        Some(1)
    );
}

#[test]
fn adding_a_record_list_builds_what_adding_one_by_one_builds() {
    let origin = n("example.org.");
    let list = [
        rec("www.example.org.", RType::A, "192.0.2.1"),
        rec("www.example.org.", RType::A, "192.0.2.2"),
        rec("www.example.org.", RType::A, "192.0.2.1"),
        rec("other.net.", RType::A, "192.0.2.9"),
        rec("example.org.", RType::CNAME, "www"),
        rec("alias.example.org.", RType::CNAME, "www"),
        rec("alias.example.org.", RType::TXT, "\"beside a CNAME\""),
        rec(
            "_iroh.k.example.org.",
            RType::TXT,
            "\"addr=192.0.2.7:4433\"",
        ),
        rec("www.example.org.", RType::AAAA, "2001:db8::1"),
    ];
    let first = [rec("www.example.org.", RType::MX, "10 mail")];

    let mut one_by_one = CatalogBuilder::new(defaults());
    let mut refused_one = Vec::new();
    for r in first.iter().chain(&list).chain(&list[..2]) {
        if let Err(why) = one_by_one.add(&origin, r.clone(), 0) {
            refused_one.push((r.name.clone(), r.data.rtype(), why));
        }
    }
    let (zones_one, built_refused_one) = one_by_one.build_zones();

    // Once into a fresh zone (the buffer is taken over), then appended to a filled one.
    let mut listed = CatalogBuilder::new(defaults());
    let mut refused_list = listed.add_records(&origin, first.iter().cloned().collect(), 0);
    refused_list.extend(listed.add_records(&origin, list.iter().cloned().collect(), 0));
    refused_list.extend(listed.add_records(&origin, list[..2].iter().cloned().collect(), 0));
    let (zones_list, built_refused_list) = listed.build_zones();

    assert_eq!(refused_list, refused_one);
    assert_eq!(refused_list.len(), 2, "outside the zone, CNAME at the apex");
    assert_eq!(built_refused_list, built_refused_one);
    assert_eq!(dump(&zones_list[0]), dump(&zones_one[0]));
    assert!(
        dump(&zones_one[0])
            .contains(&"www.example.org. A 60 [A(192.0.2.1), A(192.0.2.2)]".to_string())
    );
}

#[test]
fn a_record_list_keeps_order_and_round_trips_each_record() {
    let mut records = Records::new();
    let all = [
        rec("a.example.org.", RType::A, "192.0.2.1"),
        rec("a.example.org.", RType::TXT, "x \"y z\""),
        rec("b.example.org.", RType::SRV, "0 5 443 svc"),
        rec("a.example.org.", RType::NS, "ns.other.net."),
    ];
    records.extend(all.iter().cloned());
    assert_eq!(records.len(), 4);
    assert_eq!(records.to_vec(), all);
    assert_eq!(records.get(2).unwrap().to_record(), all[2]);
    assert_eq!(records.get(3).unwrap().owner, n("a.example.org.").wire());
    let refused: Result<(), &str> =
        records.push_with(n("c.example.org.").wire(), RType::A, 1, |out| {
            out.extend_from_slice(b"partial");
            Err("bad")
        });
    assert_eq!(refused, Err("bad"));
    assert_eq!(records.to_vec(), all, "a failed write adds nothing");
    records.retain(|i, r| i != 1 && r.rtype != RType::SRV);
    assert_eq!(records.to_vec(), [all[0].clone(), all[3].clone()]);
}

#[test]
fn builds_empty_non_terminals_and_synthesises_apex() {
    let origin = n("example.org.");
    let mut b = CatalogBuilder::new(defaults());
    b.add(&origin, rec("_iroh.abc.example.org.", RType::TXT, "x=y"), 0)
        .unwrap();
    let (cat, _) = b.build();
    let zone = cat.find_zone(n("foo.bar.example.org.").wire()).unwrap();
    assert!(matches!(
        zone.lookup(n("abc.example.org.").wire()),
        Lookup::EmptyNonTerminal
    ));
    assert!(matches!(
        zone.lookup(n("_iroh.abc.example.org.").wire()),
        Lookup::Found(_)
    ));
    assert!(matches!(
        zone.lookup(n("zzz.example.org.").wire()),
        Lookup::NxDomain
    ));
    assert_eq!(zone.soa().serial, 7);
    assert_eq!(zone.soa().mname, n("ns.example.org."));
    assert_eq!(zone.negative_ttl(), 5);
    assert_eq!(zone.record_count(), 3);
    assert!(cat.find_zone(n("example.com.").wire()).is_none());
}

/// Records added in zone-file order (runs the build's sort merges) and in any other order
/// build the same zone.
#[test]
fn records_in_order_and_out_of_order_build_the_same_zone() {
    let origin = n("example.org.");
    let records = [
        ("example.org.", RType::NS, "ns1.example.org."),
        ("a.example.org.", RType::A, "192.0.2.1"),
        ("a.example.org.", RType::A, "192.0.2.2"),
        ("a.example.org.", RType::TXT, "t"),
        ("a.example.org.", RType::AAAA, "2001:db8::1"),
        ("b.c.example.org.", RType::A, "192.0.2.3"),
    ];
    let build = |order: &[usize]| {
        let mut b = CatalogBuilder::new(defaults());
        for &i in order {
            let (name, t, data) = records[i];
            b.add(&origin, rec(name, t, data), 0).unwrap();
        }
        b.build().0
    };
    let sorted = build(&[0, 1, 2, 3, 4, 5]);
    let shuffled = build(&[5, 4, 1, 3, 0, 2]);
    for name in [
        "example.org.",
        "a.example.org.",
        "c.example.org.",
        "b.c.example.org.",
    ] {
        let dump = |cat: &Catalog| {
            let zone = cat.find_zone(n(name).wire()).unwrap();
            zone.node(n(name).wire())
                .map(|node| {
                    node.rrsets()
                        .map(|set| (set.rtype, set.ttl, set.decoded()))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        };
        let (a, b) = (dump(&sorted), dump(&shuffled));
        assert_eq!(a.len(), b.len(), "{name}");
        for (x, y) in a.iter().zip(&b) {
            assert_eq!((x.0, x.1), (y.0, y.1), "{name}");
            let mut xs = x.2.clone();
            let mut ys = y.2.clone();
            xs.sort_by_key(|d| d.to_string());
            ys.sort_by_key(|d| d.to_string());
            assert_eq!(xs, ys, "{name}");
        }
    }
    let apex = sorted.find_zone(origin.wire()).unwrap();
    assert_eq!(
        apex.soa().mname,
        n("ns1.example.org."),
        "synthesised SOA placed at the apex"
    );
}

#[test]
fn longest_suffix_zone_wins() {
    let mut b = CatalogBuilder::new(defaults());
    b.declare(&n("example.org."));
    b.declare(&n("sub.example.org."));
    let (cat, _) = b.build();
    assert_eq!(
        cat.find_zone(n("a.sub.example.org.").wire())
            .unwrap()
            .origin(),
        &n("sub.example.org.")
    );
    assert_eq!(
        cat.find_zone(n("a.example.org.").wire()).unwrap().origin(),
        &n("example.org.")
    );
}

#[test]
fn rejects_cname_conflicts_and_second_sources() {
    let origin = n("example.org.");
    let mut b = CatalogBuilder::new(defaults());
    b.add(&origin, rec("a.example.org.", RType::A, "192.0.2.1"), 0)
        .unwrap();
    b.add(&origin, rec("a.example.org.", RType::CNAME, "b"), 0)
        .unwrap();
    b.add(&origin, rec("a.example.org.", RType::A, "192.0.2.2"), 1)
        .unwrap();
    b.add(&origin, rec("c.example.org.", RType::CNAME, "x"), 0)
        .unwrap();
    b.add(&origin, rec("c.example.org.", RType::CNAME, "y"), 0)
        .unwrap();
    b.add(&origin, rec("c.example.org.", RType::TXT, "t"), 0)
        .unwrap();
    assert!(matches!(
        b.add(&origin, rec("example.org.", RType::CNAME, "b"), 0),
        Err(Rejection::CnameAtApex { .. })
    ));
    assert!(matches!(
        b.add(&origin, rec("a.example.com.", RType::A, "192.0.2.1"), 0),
        Err(Rejection::OutsideZone { .. })
    ));
    // Same source, same set: merged, duplicates dropped, lowest TTL kept.
    let mut r = rec("a.example.org.", RType::A, "192.0.2.1");
    r.ttl = 30;
    b.add(&origin, r, 0).unwrap();
    let (cat, refused) = b.build();
    let shown: Vec<String> = refused
        .iter()
        .map(|(n, t, why)| format!("{n} {t}: {why}"))
        .collect();
    assert_eq!(
        shown,
        [
            "a.example.org. A: a.example.org. A is already provided by another source (#0), which takes precedence",
            "a.example.org. CNAME: a.example.org. cannot have a CNAME and other records (RFC 1034 §3.6.2)",
            "c.example.org. CNAME: c.example.org. cannot have a CNAME and other records (RFC 1034 §3.6.2)",
            "c.example.org. TXT: c.example.org. cannot have a CNAME and other records (RFC 1034 §3.6.2)",
        ]
    );
    let Lookup::Found(node) = cat
        .zone(&origin)
        .unwrap()
        .lookup(n("a.example.org.").wire())
    else {
        panic!()
    };
    assert_eq!(node.get(RType::A).unwrap().ttl, 30);
    assert_eq!(node.get(RType::A).unwrap().len(), 1);
    let Lookup::Found(c) = cat
        .zone(&origin)
        .unwrap()
        .lookup(n("c.example.org.").wire())
    else {
        panic!()
    };
    assert_eq!(
        c.get(RType::CNAME).unwrap().decoded(),
        [RData::Cname(n("x.example.org."))]
    );
}

#[test]
fn a_dname_redirects_below_it_and_nothing_is_kept_there() {
    use crate::rdata_other::DNAME;
    let origin = n("example.org.");
    let mut b = CatalogBuilder::new(defaults());
    for r in [
        rec("d.example.org.", DNAME, "target.example.net."),
        rec("d.example.org.", RType::TXT, "at the owner itself"),
        rec("x.d.example.org.", RType::A, "192.0.2.1"),
        rec("y.x.d.example.org.", RType::TXT, "deeper"),
        rec("two.example.org.", DNAME, "a.example.net."),
        rec("two.example.org.", DNAME, "b.example.net."),
        rec("cut.example.org.", RType::NS, "ns.example.net."),
        rec("cut.example.org.", DNAME, "c.example.net."),
        rec("c.example.org.", RType::CNAME, "d"),
        rec("c.example.org.", DNAME, "e.example.net."),
    ] {
        b.add(&origin, r, 0).unwrap();
    }
    let (cat, refused) = b.build();
    let shown: Vec<String> = refused
        .iter()
        .map(|(n, t, why)| format!("{n} {t}: {why}"))
        .collect();
    let mut shown = shown;
    shown.sort();
    assert_eq!(
        shown,
        [
            "c.example.org. DNAME: c.example.org. cannot have a CNAME and other records (RFC 1034 §3.6.2)",
            "cut.example.org. DNAME: cut.example.org. cannot have a DNAME and NS below the zone apex (RFC 6672 §2.3)",
            "two.example.org. DNAME: two.example.org. can have one DNAME (RFC 6672 §2.4)",
            "x.d.example.org. A: x.d.example.org. is below the DNAME at d.example.org., which redirects every name below it (RFC 6672 §2.3)",
            "y.x.d.example.org. TXT: y.x.d.example.org. is below the DNAME at d.example.org., which redirects every name below it (RFC 6672 §2.3)",
        ]
    );
    let zone = cat.zone(&origin).unwrap();
    // The owner answers for itself; every name below it, whatever was given there, is
    // redirected.
    let Lookup::Found(owner) = zone.lookup(n("d.example.org.").wire()) else {
        panic!()
    };
    assert!(owner.get(RType::TXT).is_some());
    for below in [
        "x.d.example.org.",
        "y.x.d.example.org.",
        "new.d.example.org.",
    ] {
        let Lookup::Dname { owner, dname } = zone.lookup(n(below).wire()) else {
            panic!("{below}")
        };
        assert_eq!(owner, n("d.example.org.").wire());
        assert_eq!(
            dname.decoded(),
            [RData::parse(DNAME, "target.example.net.", &origin).unwrap()]
        );
    }
    // The cut stays a delegation; the CNAME that came first stays a CNAME.
    assert!(matches!(
        zone.lookup(n("a.cut.example.org.").wire()),
        Lookup::Delegation { .. }
    ));
    assert!(matches!(
        zone.lookup(n("a.c.example.org.").wire()),
        Lookup::NxDomain
    ));
}

#[test]
fn finds_wildcards_and_delegations() {
    let origin = n("example.org.");
    let mut b = CatalogBuilder::new(defaults());
    b.add(&origin, rec("*.w.example.org.", RType::A, "192.0.2.9"), 0)
        .unwrap();
    b.add(&origin, rec("child.example.org.", RType::NS, "ns.child"), 0)
        .unwrap();
    let (cat, _) = b.build();
    let zone = cat.zone(&origin).unwrap();
    assert!(matches!(
        zone.lookup(n("x.w.example.org.").wire()),
        Lookup::Wildcard(_)
    ));
    assert!(matches!(
        zone.lookup(n("w.example.org.").wire()),
        Lookup::EmptyNonTerminal
    ));
    assert!(matches!(
        zone.lookup(n("a.b.child.example.org.").wire()),
        Lookup::Delegation { .. }
    ));
    assert!(matches!(
        zone.lookup(n("child.example.org.").wire()),
        Lookup::Delegation { .. }
    ));
}

#[test]
fn merging_built_zones_keeps_the_first_source_and_given_soa() {
    let origin = n("example.org.");
    let mut a = CatalogBuilder::new(defaults());
    a.add(&origin, rec("x.example.org.", RType::A, "192.0.2.1"), 0)
        .unwrap();
    let za = a.build_zones().0.remove(0);
    let mut b = CatalogBuilder::new(BuildDefaults {
        default_ttl: 5,
        serial: 9,
    });
    b.add(&origin, rec("x.example.org.", RType::A, "192.0.2.2"), 0)
        .unwrap();
    b.add(&origin, rec("y.example.org.", RType::A, "192.0.2.3"), 0)
        .unwrap();
    b.add(
        &origin,
        rec("example.org.", RType::SOA, "ns h 42 1 2 3 4"),
        0,
    )
    .unwrap();
    let zb = b.build_zones().0.remove(0);
    let mut m = CatalogBuilder::new(defaults());
    m.add_zone(&za, 0);
    m.add_zone(&zb, 1);
    let (mut merged, refused) = m.build_zones();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].1, RType::A);
    let merged = merged.remove(0);
    assert_eq!(
        merged.soa().serial,
        42,
        "a given SOA beats a synthesised one"
    );
    let Lookup::Found(x) = merged.lookup(n("x.example.org.").wire()) else {
        panic!()
    };
    assert_eq!(
        x.get(RType::A).unwrap().decoded(),
        [RData::A("192.0.2.1".parse().unwrap())]
    );
    assert!(matches!(
        merged.lookup(n("y.example.org.").wire()),
        Lookup::Found(_)
    ));
}

#[test]
fn storage_is_compact() {
    let origin = n("example.org.");
    let mut b = CatalogBuilder::new(defaults());
    for i in 0..1000u32 {
        let name = n(&format!("host{i:07}.example.org."));
        b.add(
            &origin,
            Record {
                name: name.clone(),
                ttl: 300,
                data: RData::A(i.into()),
            },
            0,
        )
        .unwrap();
        b.add(
            &origin,
            Record {
                name,
                ttl: 300,
                data: RData::Aaaa(u128::from(i).into()),
            },
            0,
        )
        .unwrap();
    }
    let zone = b.build_zones().0.remove(0);
    let per_host = zone.data_bytes() / 1000;
    assert!(
        per_host < 100,
        "{per_host} bytes of names and records per A+AAAA host"
    );
}

#[test]
fn canonical_order_sorts_from_the_right() {
    let mut names = [
        n("b.example."),
        n("example."),
        n("a.b.example."),
        n("z.a.example."),
    ];
    names.sort_by(canonical_cmp);
    let shown: Vec<String> = names.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        ["example.", "z.a.example.", "b.example.", "a.b.example."]
    );
}
