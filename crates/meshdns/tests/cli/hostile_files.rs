//! Records files that are hostile rather than merely broken (issue 26): a named pipe where a
//! records file should be, and a file nested a hundred thousand levels deep. Each is refused
//! with a problem naming the file and what would be accepted, its last good records keep
//! serving, the other files keep reloading, and SIGTERM still stops the server.

use std::ffi::CString;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::*;

fn zone(origin: &str, ip: &str) -> String {
    format!("zones:\n- origin: {origin}\n  records:\n  - {{name: www, type: A, value: {ip}}}\n")
}

/// `meshdns_source_up` of `file`, if the page has it.
fn source_up(m: &Meshdns, file: &str) -> Option<u64> {
    let (_, page) = m.get("/metrics");
    let name = format!("meshdns_source_up{{source=\"{file}\"}}");
    page.lines()
        .find_map(|l| l.strip_prefix(&name))
        .and_then(|v| v.trim().parse().ok())
}

/// Polls `/metrics` until `file`'s `meshdns_source_up` is `want` (15 s at most).
fn until_up(m: &Meshdns, file: &str, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while source_up(m, file) != Some(want) {
        assert!(
            Instant::now() < deadline,
            "meshdns_source_up of {file} never {want}; log:\n{}",
            m.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Replaces `path` with a named pipe that nobody writes to.
fn make_fifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let c = CString::new(path.display().to_string()).unwrap();
    // SAFETY: mkfifo(3) with a NUL-terminated path; it touches no memory of ours.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o644) };
    assert_eq!(rc, 0, "mkfifo {}", path.display());
}

#[test]
fn a_fifo_as_a_records_file_is_refused_and_the_other_files_keep_reloading() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.yaml", &zone("a.test", "192.0.2.1"));
    let b = write(dir.path(), "b.yaml", &zone("b.test", "192.0.2.2"));
    let m = Meshdns::serve(&["--records", &a, "--records", &b, "--http", "127.0.0.1:0"]);
    until(&m, &["www.a.test", "A"], "192.0.2.1");

    // a.yaml becomes a named pipe: refused, its last good records keep serving.
    make_fifo(&dir.path().join("a.yaml"));
    until_up(&m, &a, 0);
    m.wait_log("not a regular file");
    let log = m.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("not a regular file"))
        .unwrap();
    assert!(line.contains(&a), "names the file: {line}");
    assert!(line.contains("FIFO"), "says what it is: {line}");
    assert!(
        line.contains("a regular file or a symlink to one"),
        "says what would be accepted: {line}"
    );
    assert_eq!(source_up(&m, &b), Some(1));

    // Another file's change is served meanwhile.
    write(dir.path(), "b.yaml", &zone("b.test", "192.0.2.22"));
    until(&m, &["www.b.test", "A"], "192.0.2.22");
    let out = dig(m.dns, &["www.a.test", "A"]);
    assert!(out.contains("192.0.2.1"), "last good kept:\n{out}");

    // a.yaml is a regular file again: read, and up.
    std::fs::remove_file(dir.path().join("a.yaml")).unwrap();
    write(dir.path(), "a.yaml", &zone("a.test", "192.0.2.11"));
    until(&m, &["www.a.test", "A"], "192.0.2.11");
    until_up(&m, &a, 1);
    // And the reloads still work after it.
    write(dir.path(), "b.yaml", &zone("b.test", "192.0.2.23"));
    until(&m, &["www.b.test", "A"], "192.0.2.23");
}

#[test]
fn serve_starts_with_a_fifo_as_a_records_file_and_exits_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let b = write(dir.path(), "b.yaml", &zone("b.test", "192.0.2.2"));
    let a_path = dir.path().join("a.yaml");
    make_fifo(&a_path);
    let a = a_path.display().to_string();
    let m = Meshdns::serve(&["--records", &a, "--records", &b, "--http", "127.0.0.1:0"]);
    until(&m, &["www.b.test", "A"], "192.0.2.2");
    assert_eq!(source_up(&m, &a), Some(0));
    let (status, body) = m.get("/readyz");
    assert_ne!(status, 200, "a records file never loaded holds readiness");
    assert!(body.contains("not a regular file"), "{body}");
    let status = m.terminate();
    assert!(status.success(), "{status}");
}

#[test]
fn serve_exits_on_sigterm_while_a_records_file_is_a_fifo() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.yaml", &zone("a.test", "192.0.2.1"));
    let m = Meshdns::serve(&["--records", &a, "--http", "127.0.0.1:0"]);
    until(&m, &["www.a.test", "A"], "192.0.2.1");
    make_fifo(&dir.path().join("a.yaml"));
    // Give the watcher time to reach the pipe (it is refused at once; before the fix, the
    // watcher thread blocked in open(2) here, and so did shutdown).
    let deadline = Instant::now() + Duration::from_secs(5);
    while source_up(&m, &a) != Some(0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = m.terminate();
    assert!(status.success(), "{status}");
}

#[test]
fn a_deeply_nested_records_file_is_refused_at_once_and_the_other_files_keep_reloading() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.yaml", &zone("a.test", "192.0.2.1"));
    let b = write(dir.path(), "b.yaml", &zone("b.test", "192.0.2.2"));
    let m = Meshdns::serve(&["--records", &a, "--records", &b, "--http", "127.0.0.1:0"]);
    until(&m, &["www.a.test", "A"], "192.0.2.1");

    // 100,000 `[` then as many `]`: 200 KB. Then a good change to b.yaml.
    let deep = format!("zones: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    write(dir.path(), "a.yaml", &deep);
    write(dir.path(), "b.yaml", &zone("b.test", "192.0.2.22"));
    until(&m, &["www.b.test", "A"], "192.0.2.22");
    until_up(&m, &a, 0);
    m.wait_log("nested deeper than");
    let log = m.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("nested deeper than"))
        .unwrap();
    assert!(line.contains(&a), "names the file: {line}");
    assert!(line.contains("64"), "names the limit: {line}");
    let out = dig(m.dns, &["www.a.test", "A"]);
    assert!(out.contains("192.0.2.1"), "last good kept:\n{out}");
    assert_eq!(m.terminate().code(), Some(0));
}
