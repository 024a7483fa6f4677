//! The pkarr relay as a fleet: three `serve --pkarr` replicas on loopback, each with its own
//! data directory, pushing publishes to each other and catching up; kills, a partition, a
//! peer without the token, a forged push, conflicting publishes, acknowledged replication.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use iroh_base::SecretKey;
use iroh_dns::dns::DnsResolver;
use iroh_dns::endpoint_info::EndpointInfo;

use crate::pkarr::{resigned, signed};
use crate::secondaries::free_port;
use crate::*;

const ORIGIN: &str = "dns.example.org";
/// The fleet's fixed HTTP ports and shared token, with a data directory per replica.
struct Fleet {
    ports: Vec<u16>,
    dirs: Vec<tempfile::TempDir>,
    token: PathBuf,
    /// The token's text: each fleet's own, so that a replica of another test that happens to
    /// take a stopped replica's port (tests run side by side) is not a peer of this fleet.
    secret: String,
    _token_dir: tempfile::TempDir,
}

impl Fleet {
    fn new(n: usize) -> Fleet {
        let token_dir = tempfile::tempdir().unwrap();
        let token = token_dir.path().join("token");
        let secret = format!(
            "fleet-test-token-{}",
            SecretKey::generate().public().to_z32()
        );
        std::fs::write(&token, format!("{secret}\n")).unwrap();
        Fleet {
            ports: (0..n).map(|_| free_port()).collect(),
            dirs: (0..n).map(|_| tempfile::tempdir().unwrap()).collect(),
            token,
            secret,
            _token_dir: token_dir,
        }
    }

    fn addr(&self, i: usize) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.ports[i]))
    }

    /// Replica `i`, its peers every other replica, with `extra` flags.
    fn start(&self, i: usize, extra: &[&str]) -> Meshdns {
        self.start_in(i, self.dirs[i].path(), extra)
    }

    fn start_in(&self, i: usize, dir: &Path, extra: &[&str]) -> Meshdns {
        let http = self.addr(i).to_string();
        let peers: Vec<String> = (0..self.ports.len())
            .filter(|j| *j != i)
            .map(|j| format!("http://{}", self.addr(j)))
            .collect();
        let mut args = vec![
            "--pkarr",
            ORIGIN,
            "--data-dir",
            dir.to_str().unwrap(),
            "--http",
            &http,
            "--pkarr-peer-token-file",
            self.token.to_str().unwrap(),
            "--pkarr-catchup-interval",
            "1s",
        ];
        for p in &peers {
            args.extend(["--pkarr-peer", p.as_str()]);
        }
        args.extend_from_slice(extra);
        Meshdns::serve(&args)
    }
}

fn put(addr: SocketAddr, secret: &SecretKey, payload: &[u8]) -> u16 {
    put_answer(addr, secret, payload).0
}

/// A publish's status and the body it was answered with.
fn put_answer(addr: SocketAddr, secret: &SecretKey, payload: &[u8]) -> (u16, String) {
    let path = format!("/pkarr/{}", secret.public().to_z32());
    let (status, _, body) = http(addr, "PUT", &path, None, payload);
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn stored(addr: SocketAddr, secret: &SecretKey) -> Option<Vec<u8>> {
    let path = format!("/pkarr/{}", secret.public().to_z32());
    match http(addr, "GET", &path, None, &[]) {
        (200, _, body) => Some(body),
        _ => None,
    }
}

/// Waits (15 s at most: the bound only keeps a broken build from hanging) until `check`.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !check() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `meshdns_pkarr_catchup_packets_total` per peer URL.
fn catchup_packets(metrics: &str) -> Vec<(String, u64)> {
    metrics
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("meshdns_pkarr_catchup_packets_total{peer=\"")?;
            let (url, n) = rest.split_once("\"} ")?;
            Some((url.to_string(), n.parse().ok()?))
        })
        .collect()
}

/// Replica `i` (`down`) killed once ready (`kill -9`), `n` publishes made while it is down
/// (the `k`th to `to(k)`), then `i` started again on its disk: it says ready only holding
/// every one of them. Returns it and the publishers' keys.
fn missed_while_down<'a>(
    fleet: &Fleet,
    mut down: Meshdns,
    i: usize,
    n: usize,
    to: impl Fn(usize) -> &'a Meshdns,
) -> (Meshdns, Vec<SecretKey>) {
    eventually("ready before the kill", || ready(down.http.unwrap()));
    down.child.kill().unwrap();
    down.child.wait().unwrap();
    let secrets: Vec<SecretKey> = (0..n).map(|_| SecretKey::generate()).collect();
    for (k, s) in secrets.iter().enumerate() {
        assert_eq!(put(to(k).http.unwrap(), s, &signed(s, k as u16 + 1)), 204);
    }
    let back = fleet.start(i, &["--pkarr-catchup-wait", "60s"]);
    let addr = back.http.unwrap();
    eventually("ready again", || ready(addr));
    for (k, s) in secrets.iter().enumerate() {
        assert!(
            stored(addr, s).is_some(),
            "publish {k} missing when it said ready"
        );
    }
    (back, secrets)
}

fn ready(addr: SocketAddr) -> bool {
    http_get(addr, "/readyz").0 == 200
}

/// A push body: frames of key, the sender's sequence number, length and payload.
fn frames(items: &[(&SecretKey, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, (secret, payload)) in items.iter().enumerate() {
        out.extend_from_slice(secret.public().as_bytes());
        out.extend_from_slice(&(n as u64 + 1).to_be_bytes());
        out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        out.extend_from_slice(payload);
    }
    out
}

#[test]
fn a_publish_to_any_replica_is_answered_by_every_replica() {
    let fleet = Fleet::new(3);
    let replicas: Vec<Meshdns> = (0..3).map(|i| fleet.start(i, &[])).collect();
    for (i, m) in replicas.iter().enumerate() {
        eventually(&format!("replica {i} ready"), || ready(m.http.unwrap()));
    }
    let secrets: Vec<SecretKey> = (0..3).map(|_| SecretKey::generate()).collect();
    for (i, s) in secrets.iter().enumerate() {
        assert_eq!(put(fleet.addr(i), s, &signed(s, 1000 + i as u16)), 204);
    }
    for (i, s) in secrets.iter().enumerate() {
        let want = format!("192.0.2.1:{}", 1000 + i);
        for (j, m) in replicas.iter().enumerate() {
            eventually(&format!("key {i} served by replica {j}"), || {
                stored(fleet.addr(j), s).is_some()
            });
            let name = format!("_iroh.{}.{ORIGIN}", s.public().to_z32());
            until(m, &[&name, "TXT"], &want);
        }
    }
    let (_, metrics) = replicas[0].get("/metrics");
    assert!(
        metrics.contains("meshdns_pkarr_catchup_ready 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("meshdns_pkarr_replication_seconds_count{peer=\"http://127.0.0.1:"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn iroh_publishes_to_one_replica_and_resolves_at_another() {
    let fleet = Fleet::new(2);
    let a = fleet.start(0, &[]);
    let b = fleet.start(1, &[]);
    let secret = SecretKey::generate();
    let id = secret.public();
    let addrs: Vec<SocketAddr> = vec!["192.0.2.7:4433".parse().unwrap()];
    let payload = EndpointInfo::new(id)
        .with_ip_addrs(addrs.clone())
        .to_pkarr_signed_packet(&secret, 30)
        .unwrap()
        .to_relay_payload();
    assert_eq!(put(a.http.unwrap(), &secret, &payload), 204);
    let resolver = DnsResolver::with_nameserver(b.dns);
    let Some(found) = resolve_within(&resolver, &id, ORIGIN, 10).await else {
        panic!(
            "replica b never answered the publish to a; log:\n{}",
            b.log_text()
        );
    };
    assert_eq!(found.ip_addrs().copied().collect::<Vec<_>>(), addrs);
}

/// Peers found by resolving names (a headless Service's): each replica resolves every
/// address, recognises its own and replicates with the other. Two loopback addresses on one
/// port stand in for two pods.
#[test]
fn replicas_found_by_name_skip_themselves_and_replicate() {
    let fleet = Fleet::new(1);
    let port = free_port();
    let addrs = [format!("127.0.0.1:{port}"), format!("127.0.0.2:{port}")];
    let start = |i: usize, dir: &Path| {
        Meshdns::serve(&[
            "--pkarr",
            ORIGIN,
            "--data-dir",
            dir.to_str().unwrap(),
            "--http",
            &addrs[i],
            "--pkarr-peer-token-file",
            fleet.token.to_str().unwrap(),
            "--pkarr-peers-dns",
            &addrs[0],
            "--pkarr-peers-dns",
            &addrs[1],
        ])
    };
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let a = start(0, dirs[0].path());
    let b = start(1, dirs[1].path());
    for m in [&a, &b] {
        eventually("ready", || ready(m.http.unwrap()));
    }
    let secret = SecretKey::generate();
    assert_eq!(put(a.http.unwrap(), &secret, &signed(&secret, 5)), 204);
    eventually("b holds a's publish", || {
        stored(b.http.unwrap(), &secret).is_some()
    });
    a.wait_log("this pkarr peer is this replica");
    let (_, metrics) = a.get("/metrics");
    let other = format!("http://{}", addrs[1]);
    assert!(
        metrics.contains(&format!(
            "meshdns_pkarr_peer_queue_depth{{peer=\"{other}\"}}"
        )),
        "{metrics}"
    );
    assert!(
        !metrics.contains(&format!("peer=\"http://{}\"", addrs[0])),
        "a lists itself:\n{metrics}"
    );
}

/// A replica killed with `kill -9` misses publishes; restarted, it is not ready until it has
/// every one of them, and one that lost its disk gets everything back the same way.
#[test]
fn a_restarted_replica_is_ready_only_once_it_caught_up() {
    let fleet = Fleet::new(3);
    let a = fleet.start(0, &[]);
    let b = fleet.start(1, &[]);
    let c = fleet.start(2, &[]);
    // Back on the same disk: ready only with all 60.
    let (c, secrets) = missed_while_down(&fleet, c, 2, 60, |i| if i % 2 == 0 { &a } else { &b });
    drop(c);
    // On a new, empty disk: the same.
    let empty = tempfile::tempdir().unwrap();
    let c = fleet.start_in(2, empty.path(), &["--pkarr-catchup-wait", "60s"]);
    let addr = c.http.unwrap();
    eventually("c ready on a new disk", || ready(addr));
    for (i, s) in secrets.iter().enumerate() {
        assert!(
            stored(addr, s).is_some(),
            "publish {i} missing on the new disk"
        );
    }
    // Read one after the other, the second peer's log leaves out what the first one's
    // brought: at most the first's 60 and the 30 published to the second (never 120).
    let (_, metrics) = c.get("/metrics");
    let fetched: u64 = catchup_packets(&metrics).iter().map(|(_, n)| n).sum();
    assert!(
        (60..=90).contains(&fetched),
        "{fetched} fetched:\n{metrics}"
    );
    drop((a, b));
}

/// Pushes are answered once served, before they are written (within a second, by a commit
/// that is not synced; the synced one follows within a second): a replica killed after
/// answering them gets back what it lost from the pusher's log at its next start (it reads
/// it as holding only its durable head), and then keeps it.
#[test]
fn pushes_answered_before_they_are_written_survive_a_kill_9_of_the_receiver() {
    let fleet = Fleet::new(2);
    let a = fleet.start(0, &[]);
    let mut b = fleet.start(1, &[]);
    eventually("b ready", || ready(b.http.unwrap()));
    let secrets: Vec<SecretKey> = (0..40).map(|_| SecretKey::generate()).collect();
    for (i, s) in secrets.iter().enumerate() {
        assert_eq!(put(a.http.unwrap(), s, &signed(s, i as u16 + 1)), 204);
    }
    // Served on b (from memory, likely not written yet), then no goodbye.
    eventually("b serves every push", || {
        secrets.iter().all(|s| stored(b.http.unwrap(), s).is_some())
    });
    // Killed once a commit wrote them, most often before the synced one: that commit goes
    // with the process.
    let commits = |b: &Meshdns| metric(&b.get("/metrics").1, "meshdns_pkarr_commits_total");
    let written = commits(&b);
    eventually("b commits", || commits(&b) > written);
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    for round in 0..2 {
        let mut b = fleet.start(1, &["--pkarr-catchup-wait", "60s"]);
        let addr = b.http.unwrap();
        eventually("b ready again", || ready(addr));
        for (i, s) in secrets.iter().enumerate() {
            assert!(
                stored(addr, s).is_some(),
                "round {round}: publish {i} missing when b said ready"
            );
        }
        // The second round: what the first one read back was written.
        b.child.kill().unwrap();
        b.child.wait().unwrap();
    }
    drop(a);
}

/// A catch-up of many pages (the peer serves pages of 1 KiB: a few packets each) keeps every
/// packet and leaves the cursor at the end: later reads fetch none of them again.
#[test]
fn a_catch_up_of_many_pages_keeps_every_packet_and_its_cursor() {
    let fleet = Fleet::new(2);
    let a = fleet.start(0, &["--pkarr-page-bytes", "1024"]);
    let c = fleet.start(1, &[]);
    let (c, _) = missed_while_down(&fleet, c, 1, 120, |_| &a);
    let fetched = |c: &Meshdns| -> u64 {
        let (_, metrics) = c.get("/metrics");
        catchup_packets(&metrics).iter().map(|(_, n)| n).sum()
    };
    assert_eq!(fetched(&c), 120, "each missed packet read once");
    let (_, metrics) = c.get("/metrics");
    let runs = |m: &str| -> u64 {
        m.lines()
            .filter_map(|l| l.strip_prefix("meshdns_pkarr_catchup_runs_total{"))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum()
    };
    let before = runs(&metrics);
    // Two more periodic reads (every second here) start from the kept cursor.
    eventually("two more catch-up runs", || {
        let (_, m) = c.get("/metrics");
        runs(&m) >= before + 2
    });
    assert_eq!(fetched(&c), 120, "nothing read again");
    drop(a);
}

/// A new replica reads first the peer whose log holds the publishes it took itself, and then
/// nothing of the other's copies of them: each packet crosses the network once.
#[test]
fn a_new_replica_reads_the_publishes_once() {
    let fleet = Fleet::new(3);
    let a = fleet.start(0, &[]);
    let b = fleet.start(1, &[]);
    let secrets: Vec<SecretKey> = (0..40).map(|_| SecretKey::generate()).collect();
    for (i, s) in secrets.iter().enumerate() {
        assert_eq!(put(a.http.unwrap(), s, &signed(s, i as u16 + 1)), 204);
    }
    eventually("b holds a's publishes", || {
        secrets.iter().all(|s| stored(b.http.unwrap(), s).is_some())
    });
    let c = fleet.start(2, &["--pkarr-catchup-wait", "60s"]);
    let addr = c.http.unwrap();
    eventually("c ready", || ready(addr));
    for (i, s) in secrets.iter().enumerate() {
        assert!(
            stored(addr, s).is_some(),
            "publish {i} missing when c said ready"
        );
    }
    let (_, metrics) = c.get("/metrics");
    let read = catchup_packets(&metrics);
    let fetched = |peer: SocketAddr| {
        read.iter()
            .find(|(url, _)| *url == format!("http://{peer}"))
            .map(|(_, n)| *n)
    };
    assert_eq!(
        (fetched(fleet.addr(0)), fetched(fleet.addr(1))),
        (Some(40), Some(0)),
        "{metrics}"
    );
    drop((a, b));
}

/// A replica whose disk went back to an older copy (a restored backup, the same epoch) gets
/// back from its peer the publishes it took after that copy, and its peer reads it again
/// from the start.
#[test]
fn a_replica_restored_from_an_older_copy_gets_back_what_it_took_since() {
    let fleet = Fleet::new(2);
    let dir = fleet.dirs[0].path();
    let backup = tempfile::tempdir().unwrap();
    let b = fleet.start(1, &[]);
    let secrets: Vec<SecretKey> = (0..20).map(|_| SecretKey::generate()).collect();
    let publish = |range: std::ops::Range<usize>| {
        let a = fleet.start(0, &[]);
        for i in range.clone() {
            let s = &secrets[i];
            assert_eq!(put(a.http.unwrap(), s, &signed(s, i as u16 + 1)), 204);
        }
        eventually("b holds a's publishes", || {
            range
                .clone()
                .all(|i| stored(b.http.unwrap(), &secrets[i]).is_some())
        });
        assert!(a.terminate().success());
    };
    publish(0..10);
    let copy = std::process::Command::new("cp")
        .arg("-a")
        .arg(dir)
        .arg(backup.path().join("a"))
        .status()
        .unwrap();
    assert!(copy.success());
    publish(10..20);
    std::fs::remove_dir_all(dir).unwrap();
    let copy = std::process::Command::new("cp")
        .arg("-a")
        .arg(backup.path().join("a"))
        .arg(dir)
        .status()
        .unwrap();
    assert!(copy.success());
    let a = fleet.start(0, &["--pkarr-catchup-wait", "60s"]);
    let addr = a.http.unwrap();
    eventually("a ready", || ready(addr));
    // Back by the time it is ready: read from b before readiness (the logs say which reads
    // brought what, if not).
    for (i, s) in secrets.iter().enumerate() {
        assert!(
            stored(addr, s).is_some(),
            "publish {i} not back on a when ready; a's log:\n{}\nb's log:\n{}",
            a.log_text(),
            b.log_text()
        );
    }
    // It takes publishes again under the numbers it gave before; b reads them.
    let late = SecretKey::generate();
    assert_eq!(put(addr, &late, &signed(&late, 99)), 204);
    eventually("b holds a's publish after the restore", || {
        stored(b.http.unwrap(), &late).is_some()
    });
}

/// A replica leaves out of a peer's catch-up what that peer acknowledged holding from its
/// pushes; a peer whose disk went back to an older copy (a lower head than it acknowledged
/// at) no longer holds them, and reads them again.
#[test]
fn a_peer_restored_from_an_older_copy_reads_again_what_it_had_acknowledged() {
    let fleet = Fleet::new(2);
    let a = fleet.start(0, &[]);
    // b reads a only at start (no periodic read moves its cursor past the pushes).
    let start_b = || {
        let dir = fleet.dirs[1].path().to_str().unwrap().to_string();
        let http = fleet.addr(1).to_string();
        let peer = format!("http://{}", fleet.addr(0));
        Meshdns::serve(&[
            "--pkarr",
            ORIGIN,
            "--data-dir",
            &dir,
            "--http",
            &http,
            "--pkarr-peer-token-file",
            fleet.token.to_str().unwrap(),
            "--pkarr-catchup-interval",
            "600s",
            "--pkarr-peer",
            &peer,
        ])
    };
    let b = start_b();
    eventually("b ready", || ready(b.http.unwrap()));
    assert!(b.terminate().success());
    let backup = tempfile::tempdir().unwrap();
    let copy = |from: &Path, to: &Path| {
        let _ = std::fs::remove_dir_all(to);
        let ok = std::process::Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap();
        assert!(ok.success());
    };
    copy(fleet.dirs[1].path(), &backup.path().join("b"));
    let b = start_b();
    eventually("b ready", || ready(b.http.unwrap()));
    let secrets: Vec<SecretKey> = (0..10).map(|_| SecretKey::generate()).collect();
    for (i, s) in secrets.iter().enumerate() {
        assert_eq!(put(a.http.unwrap(), s, &signed(s, i as u16 + 1)), 204);
    }
    eventually("b acknowledged a's pushes", || {
        secrets.iter().all(|s| stored(b.http.unwrap(), s).is_some())
    });
    assert!(b.terminate().success());
    copy(&backup.path().join("b"), fleet.dirs[1].path());
    let b = start_b();
    eventually("b ready", || ready(b.http.unwrap()));
    for (i, s) in secrets.iter().enumerate() {
        assert!(
            stored(b.http.unwrap(), s).is_some(),
            "publish {i} not back on the restored b"
        );
    }
}

/// A peer that cannot be reached: the queue for it stays within its bound (the rest dropped
/// and counted), and once it is back it catches up on everything.
#[test]
fn a_partitioned_peer_catches_up_when_it_returns() {
    let fleet = Fleet::new(2);
    let a = fleet.start(0, &["--pkarr-peer-queue", "10"]);
    // b is not running: its port answers nothing.
    let secrets: Vec<SecretKey> = (0..40).map(|_| SecretKey::generate()).collect();
    for (i, s) in secrets.iter().enumerate() {
        assert_eq!(put(a.http.unwrap(), s, &signed(s, i as u16 + 1)), 204);
    }
    let (_, metrics) = a.get("/metrics");
    let peer = format!("http://{}", fleet.addr(1));
    let depth = metric(
        &metrics,
        &format!("meshdns_pkarr_peer_queue_depth{{peer=\"{peer}\"}}"),
    );
    assert!(depth <= 10, "queue depth {depth}:\n{metrics}");
    let dropped = metric(
        &metrics,
        &format!("meshdns_pkarr_peer_pushed_total{{peer=\"{peer}\",result=\"dropped\"}}"),
    );
    // 40 publishes, at most 10 queued and 10 in the request that failed.
    assert!(dropped >= 20, "dropped {dropped}:\n{metrics}");
    let b = fleet.start(1, &[]);
    for (i, s) in secrets.iter().enumerate() {
        eventually(&format!("publish {i} on b"), || {
            stored(b.http.unwrap(), s).is_some()
        });
    }
}

/// The same key published to two replicas at once converges on every replica: to the newer
/// packet, and for equal timestamps to the one the tie rule picks, whichever came first.
#[test]
fn conflicting_publishes_converge_on_every_replica() {
    let fleet = Fleet::new(3);
    let replicas: Vec<Meshdns> = (0..3).map(|i| fleet.start(i, &[])).collect();
    let secret = SecretKey::generate();
    let base = signed(&secret, 1);
    let stamp = u64::from_be_bytes(base[64..72].try_into().unwrap()) - 5_000_000;
    let older = resigned(&secret, &signed(&secret, 2), stamp);
    let newer = resigned(&secret, &signed(&secret, 3), stamp + 1);
    std::thread::scope(|s| {
        s.spawn(|| put(fleet.addr(0), &secret, &older));
        s.spawn(|| put(fleet.addr(1), &secret, &newer));
    });
    for j in 0..3 {
        eventually(&format!("replica {j} holds the newer packet"), || {
            stored(fleet.addr(j), &secret).as_deref() == Some(newer.as_slice())
        });
    }
    // Two different packets with one timestamp.
    let x = resigned(&secret, &signed(&secret, 4), stamp + 2);
    let y = resigned(&secret, &signed(&secret, 5), stamp + 2);
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| put(fleet.addr(1), &secret, &x));
        let b = s.spawn(|| put(fleet.addr(2), &secret, &y));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert!(a == 204 || b == 204, "{a} {b}");
    let mut held = Vec::new();
    eventually("one packet everywhere", || {
        held = (0..3).map(|j| stored(fleet.addr(j), &secret)).collect();
        held.iter().all(|h| h.is_some() && *h == held[0])
    });
    let winner = held[0].clone().unwrap();
    assert!(winner == x || winner == y);
    // The loser, published again anywhere, is refused as not newer.
    let loser = if winner == x { &y } else { &x };
    assert_eq!(put(fleet.addr(0), &secret, loser), 409);
    drop(replicas);
}

/// Replication with the token is exempt from the publish rate limit; without it each pushed
/// packet is a publish of the sender, and catch-up reads are refused. A forged packet is
/// refused whoever pushes it.
#[test]
fn pushes_without_the_token_are_publishes_and_forged_ones_are_refused() {
    // One replica running; its one peer is not (replication needs a peer named): it is ready
    // once --pkarr-catchup-wait is over.
    let fleet = Fleet::new(2);
    let m = fleet.start(
        0,
        &[
            "--pkarr-put-limit",
            "1",
            "--pkarr-put-burst",
            "2",
            "--pkarr-catchup-wait",
            "3s",
        ],
    );
    let addr = m.http.unwrap();
    let secrets: Vec<SecretKey> = (0..5).map(|_| SecretKey::generate()).collect();
    let payloads: Vec<Vec<u8>> = secrets.iter().map(|s| signed(s, 7)).collect();
    let items: Vec<(&SecretKey, &[u8])> = secrets
        .iter()
        .zip(&payloads)
        .map(|(s, p)| (s, p.as_slice()))
        .collect();
    let body = frames(&items);
    let push = |headers: &[(&str, &str)], body: &[u8]| {
        http_with(addr, "POST", "/pkarr-peer/v2/push", headers, body)
    };
    let (status, _, results) = push(&[], &body);
    assert_eq!(
        (status, results),
        (200, vec![0, 0, 4, 4, 4]),
        "a burst of 2, then limited"
    );
    // A wrong token is no token: the sender's bucket is empty now.
    let (status, _, results) = push(&[("Authorization", "Bearer not-the-token-at-all")], &body);
    assert_eq!((status, results), (200, vec![4, 4, 4, 4, 4]));
    let bearer = format!("Bearer {}", fleet.secret);
    // Until it is ready (catching up), a peer's pushes wait: the bulk comes from the logs.
    let (status, _, _) = push(&[("Authorization", &bearer)], &body);
    assert_eq!(status, 503, "a push with the token while catching up");
    eventually("ready after --pkarr-catchup-wait", || ready(addr));
    let (status, _, results) = push(&[("Authorization", &bearer)], &body);
    assert_eq!(
        (status, results),
        (200, vec![1, 1, 0, 0, 0]),
        "with the token: none limited"
    );
    // A packet for one key signed by another: refused, token or not.
    let forger = SecretKey::generate();
    let victim = SecretKey::generate();
    let forged = signed(&forger, 66);
    let (_, _, results) = push(
        &[("Authorization", &bearer)],
        &frames(&[(&victim, &forged)]),
    );
    assert_eq!(results, vec![2]);
    assert_eq!(stored(addr, &victim), None);
    // Malformed bodies and reads without the token.
    assert_eq!(push(&[("Authorization", &bearer)], &body[..50]).0, 400);
    assert_eq!(http_get(addr, "/pkarr-peer/v2/changes?after=0").0, 401);
    // Pushed packets are answered before they are written (within a second), and the log
    // shows them once they are.
    let read = || {
        http_with(
            addr,
            "GET",
            "/pkarr-peer/v2/changes?after=0",
            &[("Authorization", &bearer)],
            &[],
        )
    };
    eventually("the pushed packets written", || {
        read()
            .1
            .to_ascii_lowercase()
            .contains("meshdns-pkarr-head: 5")
    });
    let (status, _, page) = read();
    assert_eq!(status, 200);
    // Each entry: number, key, origin (epoch, number), length, payload.
    assert_eq!(
        page.len(),
        payloads.iter().map(|p| 66 + p.len()).sum::<usize>()
    );
    let (_, metrics) = m.get("/metrics");
    assert!(
        metrics
            .contains("meshdns_pkarr_peer_received_total{auth=\"none\",result=\"rate_limited\"} 8"),
        "{metrics}"
    );
    assert!(
        metrics.contains("meshdns_pkarr_peer_refused_total{reason=\"token\"} 1"),
        "{metrics}"
    );
}

/// With `--pkarr-ack-replicas 1`, a 204 means a peer holds the packet durably: killing the
/// replica that answered loses nothing. Without a peer to confirm, the answer is 503.
#[test]
fn acknowledged_by_a_peer_survives_the_loss_of_the_replica() {
    let fleet = Fleet::new(2);
    let b = fleet.start(1, &[]);
    let mut a = fleet.start(0, &["--pkarr-ack-replicas", "1"]);
    let secrets: Vec<SecretKey> = (0..20).map(|_| SecretKey::generate()).collect();
    for (i, s) in secrets.iter().enumerate() {
        assert_eq!(put(a.http.unwrap(), s, &signed(s, i as u16 + 1)), 204);
    }
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    for (i, s) in secrets.iter().enumerate() {
        assert!(
            stored(b.http.unwrap(), s).is_some(),
            "publish {i} lost with a"
        );
    }
    drop(b);
    // b is gone: a publish waits --pkarr-ack-timeout, then 503 (kept on a, still pushed).
    let a = fleet.start(
        0,
        &[
            "--pkarr-ack-replicas",
            "1",
            "--pkarr-ack-timeout",
            "500ms",
            "--pkarr-catchup-wait",
            "1s",
        ],
    );
    let s = SecretKey::generate();
    let (status, body) = put_answer(a.http.unwrap(), &s, &signed(&s, 9));
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("--pkarr-ack-replicas"), "{body}");
    assert!(stored(a.http.unwrap(), &s).is_some());
}

/// Peers that misbehave: one accepts connections and never answers, one answers every
/// connection with an endless stream of bytes. Publishes are still acknowledged at once, the
/// replica is ready once its wait runs out, and it keeps serving.
#[test]
fn silent_and_flooding_peers_stall_neither_publishes_nor_readiness() {
    use std::io::Write as _;
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let flood = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (silent_addr, flood_addr) = (silent.local_addr().unwrap(), flood.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in silent.incoming().flatten() {
            held.push(c);
        }
    });
    std::thread::spawn(move || {
        for mut c in flood.incoming().flatten() {
            std::thread::spawn(move || {
                let junk = vec![0x42u8; 64 * 1024];
                while c.write_all(&junk).is_ok() {}
            });
        }
    });
    let fleet = Fleet::new(1);
    let dir = tempfile::tempdir().unwrap();
    let m = Meshdns::serve(&[
        "--pkarr",
        ORIGIN,
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--http",
        "127.0.0.1:0",
        "--pkarr-peer-token-file",
        fleet.token.to_str().unwrap(),
        "--pkarr-peer",
        &format!("http://{silent_addr}"),
        "--pkarr-peer",
        &format!("http://{flood_addr}"),
        "--pkarr-catchup-wait",
        "6s",
    ]);
    let addr = m.http.unwrap();
    for i in 0..20u16 {
        let s = SecretKey::generate();
        let started = Instant::now();
        assert_eq!(put(addr, &s, &signed(&s, i + 1)), 204);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "a publish waited on the peers"
        );
    }
    assert!(
        !ready(addr),
        "ready before the catch-up wait with no peer read"
    );
    eventually("ready once the wait ran out", || ready(addr));
    m.wait_log("pkarr catch-up did not finish within --pkarr-catchup-wait");
    let (_, metrics) = m.get("/metrics");
    let errors = metric(
        &metrics,
        &format!(
            "meshdns_pkarr_catchup_runs_total{{peer=\"http://{flood_addr}\",result=\"error\"}}"
        ),
    );
    assert!(errors >= 1, "{metrics}");
    assert_eq!(http_get(addr, "/healthz").0, 200);
}

/// One replica named twice (an address and a name for it) is one acknowledgement: two are
/// asked for, so the publish is answered 503 after the timeout.
#[test]
fn one_replica_reached_twice_acknowledges_once() {
    let fleet = Fleet::new(2);
    let b = fleet.start(1, &[]);
    let twice = format!("http://localhost:{}", fleet.ports[1]);
    let a = fleet.start(
        0,
        &[
            "--pkarr-peer",
            &twice,
            "--pkarr-ack-replicas",
            "2",
            "--pkarr-ack-timeout",
            "1s",
        ],
    );
    let s = SecretKey::generate();
    let (status, body) = put_answer(a.http.unwrap(), &s, &signed(&s, 3));
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("1 of the 2"), "{body}");
    // It did reach b, through both names.
    eventually("b holds it", || stored(b.http.unwrap(), &s).is_some());
}
