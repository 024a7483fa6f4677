//! A records file that does not exist is empty, as Tailscale's nameserver reads a missing
//! `records.json` (its users start with an empty `dnsrecords` ConfigMap): ready, NXDOMAIN with
//! the SOA for names of its zones, and records unset when the file goes away for good; but an
//! editor's delete-and-recreate never blinks.

use std::time::{Duration, Instant};

use crate::*;

const RECORDS: &str = r#"{"version":"v1alpha1","ip4":{"a.ts.net":["100.64.0.1"]}}"#;

fn absent_gauge(m: &Meshdns) -> String {
    let (_, metrics) = m.get("/metrics");
    metrics
        .lines()
        .find(|l| l.starts_with("meshdns_source_absent{"))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn an_absent_records_file_is_ready_and_empty_until_it_exists_and_after_it_goes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.json");
    let file = path.display().to_string();
    let m = Meshdns::serve(&["--records", &file, "--http", "127.0.0.1:0"]);
    let (status, body) = m.get("/readyz");
    assert_eq!(status, 200, "{body}");
    let out = dig(m.dns, &["a.ts.net", "A"]);
    assert!(out.contains("status: NXDOMAIN"), "{out}");
    assert!(
        out.contains("IN\tSOA"),
        "the zone's SOA in authority:\n{out}"
    );
    assert!(absent_gauge(&m).ends_with(" 1"), "{}", absent_gauge(&m));
    assert!(m.log_text().contains("records file absent"));

    // The operator writes the ConfigMap: served.
    write(dir.path(), "records.json", RECORDS);
    until(&m, &["a.ts.net", "A"], "100.64.0.1");
    assert!(absent_gauge(&m).ends_with(" 0"), "{}", absent_gauge(&m));

    // The key is removed and stays removed: the records go, the zone stays, still ready.
    std::fs::remove_file(&path).unwrap();
    let out = until(&m, &["a.ts.net", "A"], "status: NXDOMAIN");
    assert!(out.contains("IN\tSOA"), "{out}");
    assert_eq!(m.get("/readyz").0, 200);
    assert!(absent_gauge(&m).ends_with(" 1"), "{}", absent_gauge(&m));

    // `check` still calls an absent file unusable.
    let out = bin().args(["check", &file]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn delete_and_recreate_within_the_debounce_never_blinks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.json");
    let file = write(dir.path(), "records.json", RECORDS);
    let m = Meshdns::serve(&["--records", &file]);
    until(&m, &["a.ts.net", "A"], "100.64.0.1");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let editor = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut rounds = 0;
            let next = path.with_extension("new");
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Delete, then create anew (the new content is written beside it first, so a
                // reader never sees it half-written: that would be an emptied file, not an
                // absent one).
                std::fs::write(&next, RECORDS).unwrap();
                std::fs::remove_file(&path).unwrap();
                std::fs::rename(&next, &path).unwrap();
                rounds += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            rounds
        })
    };
    let mut answers = 0;
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        let out = dig(m.dns, &["a.ts.net", "A"]);
        assert!(
            out.contains("100.64.0.1"),
            "blinked:\n{out}\nlog:\n{}",
            m.log_text()
        );
        answers += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = editor.join().unwrap();
    assert!(
        rounds > 50 && answers > 10,
        "{rounds} rewrites, {answers} answers"
    );
    assert!(
        !m.log_text().contains("records file absent"),
        "{}",
        m.log_text()
    );
}
