//! The query path allocates nothing: with a reused output buffer, `answer()` makes no heap
//! allocation for hits, negatives, CNAME chains, wildcards, referrals, truncation or malformed
//! packets. Counted with a global allocator wrapper (this test binary only).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use meshdns_zone::{AnswerConfig, RType, Transport, answer};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Only the measuring thread counts: the test harness's own threads may allocate (printing
    /// progress, say) at any time.
    static COUNTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn count() {
    if COUNTING.with(std::cell::Cell::get) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards to the system allocator unchanged, only counting calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

mod common;

use common::query;

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn answering_allocates_nothing() {
    let mut records: Vec<(&str, RType, String)> = vec![
        ("www", RType::A, "192.0.2.1".into()),
        ("www", RType::AAAA, "2001:db8::1".into()),
        ("alias", RType::CNAME, "www".into()),
        (
            "_iroh.k.nodes",
            RType::TXT,
            "\"relay=https://r.example./\"".into(),
        ),
        ("*.wild", RType::A, "192.0.2.7".into()),
        ("sub", RType::NS, "ns.sub".into()),
        ("ns.sub", RType::A, "192.0.2.9".into()),
        ("mx", RType::MX, "10 www".into()),
    ];
    records.extend((0..100).map(|i| ("many", RType::A, format!("10.0.0.{i}"))));
    let mut catalog = common::catalog(&records);
    // A published key under the origin, read through the overlay (the pkarr path).
    let overlay = std::sync::Arc::new(meshdns_zone::Overlay::new());
    let key = [7u8; 32];
    let txt = b"\x1crelay=https://r.example.net/";
    overlay.insert(
        key,
        meshdns_zone::Published::build(1, [(&b"\x05_iroh"[..], RType::TXT, 30, &txt[..])]),
    );
    catalog.attach(&"example.org.".parse().unwrap(), overlay);
    let z32 = "yhdoqba8yhdoqba8yhdoqba8yhdoqba8yhdoqba8yhdoqba8yhdo";
    assert_eq!(meshdns_zone::key_of_label(z32.as_bytes()), Some(key));
    let published = [
        query(&format!("_iroh.{z32}.example.org"), 16, true),
        query(&format!("_IROH.{z32}.example.org"), 1, true),
        query(&format!("{z32}.example.org"), 16, false),
        query(&format!("other.{z32}.example.org"), 16, false),
    ];
    // A query asking for NSID (RFC 5001): its OPT carries the empty option.
    let mut nsid = query("many.example.org", 1, true);
    let rdlen = nsid.len() - 2;
    nsid[rdlen..].copy_from_slice(&[0, 4]);
    nsid.extend_from_slice(&[0, 3, 0, 0]);
    let packets = [
        nsid,
        query("WWW.example.org", 1, true),
        query("alias.example.org", 28, false),
        query("_iroh.k.nodes.example.org", 16, true),
        query("k.nodes.example.org", 16, true),
        query("nope.example.org", 1, true),
        query("x.wild.example.org", 1, true),
        query("a.sub.example.org", 1, true),
        query("mx.example.org", 15, true),
        query("many.example.org", 1, false),
        query("example.com", 1, true),
        query("www.example.org", 255, true),
        vec![0xAB, 0xCD, 0x28, 0, 0, 1, 0, 0, 0, 0, 0, 0],
        vec![1, 2, 3],
        published[0].clone(),
        published[1].clone(),
        published[2].clone(),
        published[3].clone(),
    ];
    let configs = [
        AnswerConfig::default(),
        AnswerConfig {
            nsid: Some(b"replica-a"),
            ..AnswerConfig::default()
        },
    ];
    let mut out = Vec::with_capacity(65_535);
    // Warm up once (the catalog's lazily initialised parts, if any).
    for p in &packets {
        answer(&catalog, p, Transport::Udp, &configs[0], &mut out);
    }
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    for _ in 0..50 {
        for p in &packets {
            for transport in [Transport::Udp, Transport::Stream] {
                for config in &configs {
                    answer(&catalog, p, transport, config, &mut out);
                }
            }
        }
    }
    COUNTING.with(|c| c.set(false));
    let after = ALLOCATIONS.load(Ordering::Relaxed);
    assert_eq!(
        after - before,
        0,
        "allocations while answering {} queries",
        100 * packets.len() * 2
    );
}
