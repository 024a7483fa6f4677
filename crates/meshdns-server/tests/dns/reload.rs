//! Hot reload: every way a file changes shows up in answers; bad files keep the last good
//! records; queries during reloads never see a mix.
//!
//! The watcher's poll interval is an hour in these tests, so a change can only be picked up
//! through a change notification. Waits are bounded (`eventually`), never asserted as timings.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use meshdns_sources::{FileKind, FileSource};

use crate::support::*;

fn records(ips: &[&str]) -> String {
    let list: Vec<String> = ips.iter().map(|i| format!("\"{i}\"")).collect();
    format!(
        r#"{{"version":"v1alpha1","ip4":{{"host.ts.net":[{}]}}}}"#,
        list.join(",")
    )
}

async fn host_answers(s: &TestServer) -> Vec<String> {
    let r = udp(s.udp, &query("host.ts.net.", RecordType::A)).await;
    r.answers.iter().map(|a| a.data.to_string()).collect()
}

async fn wait_for(s: &TestServer, want: &[&str]) {
    let ok = eventually(Duration::from_secs(5), || async {
        host_answers(s).await == want
    })
    .await;
    assert!(
        ok,
        "answers never became {want:?}; now {:?}",
        host_answers(s).await
    );
}

fn watched(name: &str, content: &str) -> Setup {
    let mut setup = Setup::file(name, content);
    setup.watch = true;
    setup
}

/// Lays out a directory the way kubelet mounts a ConfigMap: `..<ts>/records.json`, the
/// `..data` symlink to it, and `records.json -> ..data/records.json`.
fn kubelet_write(dir: &Path, generation: u32, content: &str) {
    let data_dir = dir.join(format!("..2026_11_22_10_00_{generation:02}.000000001"));
    std::fs::create_dir(&data_dir).unwrap();
    std::fs::write(data_dir.join("records.json"), content).unwrap();
    let tmp = dir.join("..data_tmp");
    symlink(data_dir.file_name().unwrap(), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    if !dir.join("records.json").exists() {
        symlink("..data/records.json", dir.join("records.json")).unwrap();
    }
}

#[tokio::test]
async fn reloads_on_a_kubelet_configmap_swap() {
    let dir = tempfile::tempdir().unwrap();
    kubelet_write(dir.path(), 1, &records(&["100.64.0.1"]));
    let file = FileSource {
        path: dir.path().join("records.json"),
        kind: FileKind::Auto,
    };
    let mut setup = Setup::files(vec![]);
    setup.watch = true;
    let s = TestServer::start_on(dir, vec![file], setup).await;
    assert_eq!(host_answers(&s).await, ["100.64.0.1"]);
    kubelet_write(s.dir.path(), 2, &records(&["100.64.0.2"]));
    wait_for(&s, &["100.64.0.2"]).await;
    kubelet_write(s.dir.path(), 3, &records(&["100.64.0.3", "100.64.0.4"]));
    wait_for(&s, &["100.64.0.3", "100.64.0.4"]).await;
    s.stop().await;
}

#[tokio::test]
async fn reloads_on_an_editor_rename() {
    let s = TestServer::start(watched("records.json", &records(&["100.64.0.1"]))).await;
    let tmp = s.dir.path().join(".records.json.swp");
    std::fs::write(&tmp, records(&["100.64.0.9"])).unwrap();
    std::fs::rename(&tmp, &s.paths[0]).unwrap();
    wait_for(&s, &["100.64.0.9"]).await;
    s.stop().await;
}

#[tokio::test]
async fn reloads_on_an_in_place_write() {
    let s = TestServer::start(watched("records.json", &records(&["100.64.0.1"]))).await;
    // Same length, so only the content differs.
    std::fs::write(&s.paths[0], records(&["100.64.0.2"])).unwrap();
    wait_for(&s, &["100.64.0.2"]).await;
    s.stop().await;
}

/// A deleted file is an absent one: its records go (as Tailscale's nameserver reads a missing
/// records.json), readiness stays, and a new file loads.
#[tokio::test]
async fn deletion_unsets_the_records_and_recreation_loads() {
    let s = TestServer::start(watched("records.json", &records(&["100.64.0.1"]))).await;
    std::fs::remove_file(&s.paths[0]).unwrap();
    let absent = eventually(Duration::from_secs(5), || async {
        s.status.counters()[0].1.absent
    })
    .await;
    assert!(absent, "the deletion was noticed");
    assert!(
        host_answers(&s).await.is_empty(),
        "no records from an absent file"
    );
    assert!(s.status.readiness().is_ok(), "readiness stays");
    assert_eq!(
        s.status.counters()[0].1.reloads_error,
        0,
        "absent is not an error"
    );
    std::fs::write(&s.paths[0], records(&["100.64.0.7"])).unwrap();
    wait_for(&s, &["100.64.0.7"]).await;
    assert!(!s.status.counters()[0].1.absent);
    s.stop().await;
}

#[tokio::test]
async fn unusable_files_keep_the_last_good_records() {
    let s = TestServer::start(watched("records.json", &records(&["100.64.0.1"]))).await;
    let bad = [
        "{ this is not json",
        r#"{"version":"v2","ip4":{"host.ts.net":["1.1.1.1"]}}"#,
        "[1, 2, 3]",
    ];
    for (i, content) in bad.iter().enumerate() {
        std::fs::write(&s.paths[0], content).unwrap();
        let seen = eventually(Duration::from_secs(5), || async {
            s.status.counters()[0].1.reloads_error as usize > i
        })
        .await;
        assert!(seen, "error {i} noticed");
        assert_eq!(host_answers(&s).await, ["100.64.0.1"], "after {content:?}");
    }
    assert!(
        s.status.counters()[0]
            .1
            .last_error
            .as_deref()
            .unwrap()
            .contains("records.json: file:")
    );
    std::fs::write(&s.paths[0], records(&["100.64.0.2"])).unwrap();
    wait_for(&s, &["100.64.0.2"]).await;
    s.stop().await;
}

#[tokio::test]
async fn an_empty_file_clears_the_records() {
    let s = TestServer::start(watched("records.json", &records(&["100.64.0.1"]))).await;
    std::fs::write(&s.paths[0], "").unwrap();
    let cleared = eventually(Duration::from_secs(5), || async {
        udp(s.udp, &query("host.ts.net.", RecordType::A))
            .await
            .metadata
            .response_code
            == ResponseCode::NXDomain
    })
    .await;
    assert!(cleared);
    // The zone itself is still served (SOA), just empty.
    let r = udp(s.udp, &query("ts.net.", RecordType::SOA)).await;
    assert_eq!(r.answers.len(), 1);
    s.stop().await;
}

#[tokio::test]
async fn a_file_that_starts_unusable_is_not_ready_until_fixed() {
    let s = TestServer::start(watched("records.json", "{ broken")).await;
    let reason = s.status.readiness().unwrap_err();
    assert!(
        reason.contains("records.json: file: not valid JSON"),
        "{reason}"
    );
    let r = udp(s.udp, &query("host.ts.net.", RecordType::A)).await;
    assert_eq!(
        r.metadata.response_code,
        ResponseCode::Refused,
        "nothing loaded, nothing served"
    );
    std::fs::write(&s.paths[0], records(&["100.64.0.1"])).unwrap();
    wait_for(&s, &["100.64.0.1"]).await;
    assert!(s.status.readiness().is_ok());
    s.stop().await;
}

#[tokio::test]
async fn zone_files_and_yaml_reload_too() {
    let zone = "$ORIGIN example.org.\nwww A 192.0.2.1\n";
    let mut setup = Setup::files(vec![
        (
            "example.org.zone".into(),
            zone.into(),
            FileKind::ZoneFile {
                origin: None,
                views: Vec::new(),
            },
        ),
        (
            "more.yaml".into(),
            "zones: [{origin: example.net, records: [{name: a, type: A, value: 192.0.2.5}]}]\n"
                .into(),
            FileKind::Auto,
        ),
    ]);
    setup.watch = true;
    let s = TestServer::start(setup).await;
    std::fs::write(&s.paths[0], "$ORIGIN example.org.\nwww A 192.0.2.2\n").unwrap();
    std::fs::write(
        &s.paths[1],
        "zones: [{origin: example.net, records: [{name: a, type: A, value: 192.0.2.6}]}]\n",
    )
    .unwrap();
    let ok = eventually(Duration::from_secs(5), || async {
        let a = udp(s.udp, &query("www.example.org.", RecordType::A)).await;
        let b = udp(s.udp, &query("a.example.net.", RecordType::A)).await;
        answers(&a) == ["www.example.org. 5 A 192.0.2.2"]
            && answers(&b) == ["a.example.net. 5 A 192.0.2.6"]
    })
    .await;
    assert!(ok);
    // A syntax error in the zone file keeps the last good zone.
    std::fs::write(&s.paths[0], "$ORIGIN example.org.\nwww A ( 192.0.2.3\n").unwrap();
    let failed = eventually(Duration::from_secs(5), || async {
        s.status.counters()[0].1.reloads_error > 0
    })
    .await;
    assert!(failed);
    let a = udp(s.udp, &query("www.example.org.", RecordType::A)).await;
    assert_eq!(answers(&a), ["www.example.org. 5 A 192.0.2.2"]);
    s.stop().await;
}

/// Version `k` of the file: two names, each with two addresses that both carry `k`.
fn versioned(k: u32) -> String {
    let a = format!("10.{}.{}.1", k / 256, k % 256);
    let b = format!("10.{}.{}.2", k / 256, k % 256);
    format!(
        r#"{{"version":"v1alpha1","ip4":{{"host.ts.net":["{a}","{b}"],"other.ts.net":["{a}"]}}}}"#
    )
}

#[tokio::test]
async fn queries_during_fifty_reloads_never_fail_or_mix_versions() {
    let s = TestServer::start(watched("records.json", &versioned(0))).await;
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let addr = s.udp;
    let querier = {
        let (stop, answered) = (stop.clone(), answered.clone());
        tokio::spawn(async move {
            let mut versions_seen = std::collections::BTreeSet::new();
            while !stop.load(Ordering::Relaxed) {
                let r = udp(addr, &query("host.ts.net.", RecordType::A)).await;
                assert_eq!(r.metadata.response_code, ResponseCode::NoError);
                let ips: Vec<String> = r.answers.iter().map(|a| a.data.to_string()).collect();
                assert_eq!(ips.len(), 2, "a whole RRset: {ips:?}");
                let k0 = ips[0].rsplit_once('.').unwrap().0.to_string();
                let k1 = ips[1].rsplit_once('.').unwrap().0.to_string();
                assert_eq!(k0, k1, "both addresses from one version: {ips:?}");
                versions_seen.insert(k0);
                answered.fetch_add(1, Ordering::Relaxed);
            }
            versions_seen.len()
        })
    };
    for k in 1..=50u32 {
        let tmp = s.dir.path().join("records.json.tmp");
        std::fs::write(&tmp, versioned(k)).unwrap();
        std::fs::rename(&tmp, &s.paths[0]).unwrap();
        let want = format!("10.0.{k}.1");
        let ok = eventually(Duration::from_secs(5), || async {
            let r = udp(addr, &query("other.ts.net.", RecordType::A)).await;
            r.answers.first().map(|a| a.data.to_string()) == Some(want.clone())
        })
        .await;
        assert!(ok, "reload {k} served");
    }
    stop.store(true, Ordering::Relaxed);
    let versions = querier.await.expect("the querying task saw no failure");
    assert!(answered.load(Ordering::Relaxed) > 50);
    assert!(
        versions > 1,
        "the querier saw the data change ({versions} versions)"
    );
    // The counters are shared just after the snapshot is swapped in: wait for the last one.
    let counted = eventually(Duration::from_secs(5), || async {
        s.status.counters()[0].1.reloads_ok == 51
    })
    .await;
    assert!(counted, "{:?}", s.status.counters());
    s.stop().await;
}
