//! Times parsing and compiling one zone file: `cargo run --release --example loadtime FILE`.
use std::time::Instant;

use meshdns_sources::{FileKind, ParseSettings, compile, parse};
use meshdns_zone::BuildDefaults;

fn main() {
    let path = std::env::args().nth(1).expect("FILE");
    let t0 = Instant::now();
    let bytes = std::fs::read(&path).unwrap();
    let t1 = Instant::now();
    let parsed = parse(
        &path,
        &FileKind::ZoneFile {
            origin: None,
            views: Vec::new(),
        },
        &bytes,
        &ParseSettings::default(),
    )
    .unwrap();
    let t2 = Instant::now();
    let (compiled, problems) = compile(
        &path,
        parsed.zones,
        BuildDefaults {
            default_ttl: 5,
            serial: 1,
        },
    );
    let t3 = Instant::now();
    println!(
        "read {:?} parse {:?} compile {:?}; {} records, {} problems",
        t1 - t0,
        t2 - t1,
        t3 - t2,
        compiled.zones[0].record_count(),
        problems.len()
    );
}
