//! Published keys served beside a zone answer exactly as one merged zone would: the zone's
//! own data first (as a records file listed before the pkarr store), each key's records after.
//! Every query below is answered twice — from the zone with an overlay, and from one zone built
//! from all records by `CatalogBuilder` — and the response bytes must be equal. Replacing or
//! removing one key changes the answers for that key only.

use std::sync::Arc;

use meshdns_zone::{
    AnswerConfig, BuildDefaults, Catalog, CatalogBuilder, Name, Overlay, Published, RData, RType,
    Record, Touch, Transport, answer, key_of_label,
};

mod common;

const DEFAULTS: BuildDefaults = BuildDefaults {
    default_ttl: 5,
    serial: 1,
};

fn origin() -> Name {
    "example.org.".parse().unwrap()
}

/// z-base-32 of a 32-byte key (52 characters), as pkarr spells keys.
fn z32(key: &[u8; 32]) -> String {
    const ALPHABET: &[u8; 32] = b"ybndrfg8ejkmcpqxot1uwisza345h769";
    let mut out = String::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in key {
        acc = acc << 8 | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[(acc >> bits) as usize & 31] as char);
        }
    }
    out.push(ALPHABET[(acc << (5 - bits)) as usize & 31] as char);
    out
}

fn key(i: u8) -> [u8; 32] {
    std::array::from_fn(|j| i.wrapping_mul(31).wrapping_add(j as u8 * 7))
}

/// A record `(name relative to the origin, type, value)`.
type Rec = (String, RType, &'static str);

fn record(r: &Rec) -> Record {
    Record {
        name: Name::parse(&r.0, Some(&origin())).unwrap(),
        ttl: if r.1 == RType::TXT { 30 } else { 60 },
        data: RData::parse(r.1, r.2, &origin()).unwrap(),
    }
}

/// The zone's own records: some at published names, to test precedence.
fn base(k: &[String]) -> Vec<Rec> {
    vec![
        ("www".into(), RType::A, "192.0.2.1"),
        ("mx".into(), RType::MX, &*format!("10 {}", k[3]).leak()),
        // The file gives a TXT where key 1 publishes one: the file's wins.
        (format!("_iroh.{}", k[1]), RType::TXT, "\"from-the-file\""),
        // A CNAME where key 2 publishes: it hides the published TXT.
        (format!("_iroh.{}", k[2]), RType::CNAME, "www"),
        // A zone cut at key 4's name: its published records are below it.
        (k[4].clone(), RType::NS, "ns.elsewhere.net."),
        ("*".into(), RType::A, "192.0.2.99"),
        (
            "alias".into(),
            RType::CNAME,
            &*format!("_iroh.{}", k[0]).leak(),
        ),
    ]
}

/// What key `i` publishes (names relative to the origin).
fn published(i: usize, k: &[String], version: u8) -> Vec<Rec> {
    let text: &'static str = format!("\"addr=192.0.2.{version}:4433\"").leak();
    let mut v = vec![
        (format!("_iroh.{}", k[i]), RType::TXT, text),
        (
            format!("_iroh.{}", k[i]),
            RType::TXT,
            "\"relay=https://r.example./\"",
        ),
    ];
    if i == 3 {
        v.push((k[i].clone(), RType::A, "192.0.2.33"));
        v.push((k[i].clone(), RType::AAAA, "2001:db8::33"));
    }
    if i == 5 {
        v.push((format!("deep.er._iroh.{}", k[i]), RType::TXT, "\"x\""));
    }
    v
}

fn compile(i: usize, k: &[String], version: u8, stamp: u64) -> Published {
    let records: Vec<Record> = published(i, k, version).iter().map(record).collect();
    let origin_len = origin().wire().len();
    let owned: Vec<(Vec<u8>, RType, u32, Vec<u8>)> = records
        .iter()
        .map(|r| {
            let w = r.name.wire();
            // Labels above the key label: the name minus `<key>.<origin>`.
            let prefix = &w[..w.len() - origin_len - 53];
            let mut rd = Vec::new();
            r.data.to_wire(&mut rd);
            (prefix.to_vec(), r.data.rtype(), r.ttl, rd)
        })
        .collect();
    Published::build(
        stamp,
        owned
            .iter()
            .map(|(p, t, ttl, rd)| (p.as_slice(), *t, *ttl, rd.as_slice())),
    )
}

/// One zone from the base records (source 0) and every key's (source 1).
fn merged(k: &[String], versions: &[Option<u8>]) -> Catalog {
    let mut b = CatalogBuilder::new(DEFAULTS);
    b.declare(&origin());
    for r in base(k) {
        b.add(&origin(), record(&r), 0).unwrap();
    }
    for (i, v) in versions.iter().enumerate() {
        if let Some(v) = v {
            for r in published(i, k, *v) {
                // Refusals (a CNAME there already, say) are what precedence decides.
                let _ = b.add(&origin(), record(&r), 1);
            }
        }
    }
    b.build().0
}

fn with_overlay(k: &[String], versions: &[Option<u8>]) -> (Catalog, Arc<Overlay>) {
    let mut b = CatalogBuilder::new(DEFAULTS);
    b.declare(&origin());
    for r in base(k) {
        b.add(&origin(), record(&r), 0).unwrap();
    }
    let mut catalog = b.build().0;
    let overlay = Arc::new(Overlay::new());
    for (i, v) in versions.iter().enumerate() {
        if let Some(v) = v {
            overlay.insert(key(i as u8), compile(i, k, *v, u64::from(*v)));
        }
    }
    catalog.attach(&origin(), overlay.clone());
    (catalog, overlay)
}

fn queries(k: &[String]) -> Vec<Vec<u8>> {
    let mut names = vec![
        "example.org".to_string(),
        "www.example.org".into(),
        "alias.example.org".into(),
        "mx.example.org".into(),
        "nope.example.org".into(),
        format!("_iroh.{}.example.org", z32(&key(200))),
        format!("{}.example.org", z32(&key(200))),
        format!("_iroh.{}x.example.org", &k[0][..51]),
    ];
    for key in k {
        for prefix in [
            "",
            "_iroh.",
            "other.",
            "er._iroh.",
            "deep.er._iroh.",
            "x.deep.er._iroh.",
        ] {
            names.push(format!("{prefix}{key}.example.org"));
            names.push(format!("{prefix}{}.example.org", key.to_uppercase()));
        }
    }
    let mut out = Vec::new();
    for name in names {
        for qtype in [1u16, 16, 28, 5, 255, 15, 2, 6] {
            out.push(common::query(&name, qtype, true));
        }
    }
    out
}

fn answers(catalog: &Catalog, queries: &[Vec<u8>]) -> Vec<Vec<u8>> {
    queries
        .iter()
        .map(|q| {
            let mut out = Vec::new();
            answer(
                catalog,
                q,
                Transport::Udp,
                &AnswerConfig::default(),
                &mut out,
            );
            out
        })
        .collect()
}

fn keys() -> Vec<String> {
    (0..6).map(|i| z32(&key(i))).collect()
}

#[test]
fn labels_decode_to_their_keys() {
    for i in [0u8, 1, 7, 255] {
        assert_eq!(key_of_label(z32(&key(i)).as_bytes()), Some(key(i)));
        assert_eq!(
            &meshdns_zone::label_of_key(&key(i)),
            z32(&key(i)).as_bytes()
        );
    }
    let k = z32(&key(1));
    assert_eq!(key_of_label(&k.as_bytes()[..51]), None, "too short");
    assert_eq!(
        key_of_label(k.to_uppercase().as_bytes()),
        None,
        "query names are lower-cased first"
    );
    // The last character carries 4 bits that must be zero.
    let mut bad = k.clone().into_bytes();
    bad[51] = b'9';
    assert_eq!(key_of_label(&bad), None);
    // A character outside the alphabet anywhere (each group of eight and the tail) refuses it.
    for at in 0..52 {
        for c in [b'0', b'l', b'v', b'2', b'.', 0xFF] {
            let mut bad = k.clone().into_bytes();
            bad[at] = c;
            assert_eq!(key_of_label(&bad), None, "{} at {at}", c as char);
        }
    }
    // Keys with every byte value in every position round-trip (xorshift, fixed seed).
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..500 {
        let mut key = [0u8; 32];
        for b in &mut key {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        let label = meshdns_zone::label_of_key(&key);
        assert_eq!(
            key_of_label(&label),
            Some(key),
            "{}",
            String::from_utf8_lossy(&label)
        );
    }
}

#[test]
fn published_keys_answer_as_one_merged_zone() {
    let k = keys();
    let versions = [Some(1), Some(1), Some(1), Some(1), Some(1), Some(1)];
    let qs = queries(&k);
    let (with, _) = with_overlay(&k, &versions);
    let expected = answers(&merged(&k, &versions), &qs);
    let got = answers(&with, &qs);
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g, e, "query {i}: {:?}", &qs[i]);
    }
    // The checks above are not vacuous: a published TXT is answered, a sibling is NXDOMAIN.
    let txt = common::query(&format!("_iroh.{}.example.org", k[0]), 16, false);
    let a = &answers(&with, &[txt])[0];
    assert_eq!((a[3] & 0xF, u16::from_be_bytes([a[6], a[7]])), (0, 2));
    let sibling = common::query(&format!("other.{}.example.org", k[0]), 16, false);
    assert_eq!(answers(&with, &[sibling])[0][3] & 0xF, 3);
}

#[test]
fn a_publish_or_a_removal_changes_that_key_alone() {
    let k = keys();
    let qs = queries(&k);
    let before = [Some(1), Some(1), Some(1), Some(1), Some(1), None];
    let (catalog, overlay) = with_overlay(&k, &before);
    let old = answers(&catalog, &qs);

    // Key 0 publishes a new packet, key 5 its first, key 3 is removed (expired).
    overlay.insert(key(0), compile(0, &k, 2, 2));
    overlay.insert(key(5), compile(5, &k, 1, 1));
    overlay.remove(&key(3));
    assert_eq!(overlay.stamp(&key(0)), Some(2));
    let after = [Some(2), Some(1), Some(1), None, Some(1), Some(1)];
    let new = answers(&catalog, &qs);
    assert_eq!(
        new,
        answers(&merged(&k, &after), &qs),
        "the same catalog, changed in place"
    );
    let touches = |q: &[u8], i: usize| {
        let label = k[i].as_bytes();
        q.windows(label.len()).any(|w| w.eq_ignore_ascii_case(label))
            // `mx` names key 3 and `alias` points at key 0: their answers follow those keys.
            || (i == 3 && q.windows(3).any(|w| w == b"\x02mx"))
            || (i == 0 && q.windows(6).any(|w| w == b"\x05alias"))
    };
    let mut changed = 0;
    for (i, q) in qs.iter().enumerate() {
        if ![0, 3, 5].iter().any(|&key| touches(q, key)) {
            assert_eq!(old[i], new[i], "query {i} of an untouched key changed");
        } else if old[i] != new[i] {
            changed += 1;
        }
    }
    assert!(
        changed > 10,
        "the touched keys' answers changed ({changed})"
    );
}

/// Keys found elsewhere (the DHT) answer from the overlay's cache exactly as published keys
/// do, published keys win over them, transfers (`entries`) never see them, and each answer
/// names the cached key it used or lacked.
#[test]
fn cached_keys_answer_as_published_ones_and_name_what_they_lack() {
    let k = keys();
    let versions = [Some(1), Some(1), Some(1), Some(1), Some(1), None];
    let mut b = CatalogBuilder::new(DEFAULTS);
    b.declare(&origin());
    for r in base(&k) {
        b.add(&origin(), record(&r), 0).unwrap();
    }
    let mut catalog = b.build().0;
    let overlay = Arc::new(Overlay::with_cache());
    for (i, v) in versions.iter().enumerate() {
        if let Some(v) = v {
            overlay.cache_insert(key(i as u8), compile(i, &k, *v, 1));
        }
    }
    catalog.attach(&origin(), overlay.clone());
    let qs = queries(&k);
    assert_eq!(answers(&catalog, &qs), answers(&merged(&k, &versions), &qs));
    assert_eq!(overlay.len(), 0);
    assert!(overlay.entries().is_empty());
    assert_eq!(overlay.cache_len(), 5);

    let touched = |name: &str| {
        let mut out = Vec::new();
        answer(
            &catalog,
            &common::query(name, 16, true),
            Transport::Udp,
            &AnswerConfig::default(),
            &mut out,
        )
        .touched
    };
    let cached = format!("_iroh.{}.example.org", k[0]);
    assert_eq!(touched(&cached), Some(Touch::Hit(key(0))));
    let lacking = format!("_iroh.{}.example.org", k[5]);
    assert_eq!(touched(&lacking), Some(Touch::Miss(key(5))));
    // Not a key's name: nothing to look up.
    assert_eq!(touched("www.example.org"), None);
    // An MX whose target is under a key the cache lacks: the answer is whole without the
    // target's addresses (optional), so it never waits for that key.
    overlay.cache_remove(&key(3));
    let mut out = Vec::new();
    let mx = answer(
        &catalog,
        &common::query("mx.example.org", 15, true),
        Transport::Udp,
        &AnswerConfig::default(),
        &mut out,
    );
    assert_eq!(mx.touched, None);
    // Cached as absent: NXDOMAIN, and a hit (no lookup).
    overlay.cache_insert(key(5), Published::build(0, std::iter::empty()));
    assert_eq!(touched(&lacking), Some(Touch::Hit(key(5))));
    // Published here: the cache is not read.
    overlay.insert(key(0), compile(0, &k, 2, 2));
    assert_eq!(touched(&cached), None);
    // Without a cache, nothing is ever touched.
    let (plain, _) = with_overlay(&k, &[None; 6]);
    let mut out = Vec::new();
    let o = answer(
        &plain,
        &common::query(&cached, 16, true),
        Transport::Udp,
        &AnswerConfig::default(),
        &mut out,
    );
    assert_eq!(o.touched, None);
}
