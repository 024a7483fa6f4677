//! What the tests in `tests/` share: a real `meshdns serve` process on loopback, started from
//! the binary the workspace's tests built, and told apart by the addresses its ready line names.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// The meshdns binary the workspace's tests built (or `MESHDNS_BIN`).
pub fn meshdns_bin() -> PathBuf {
    std::env::var_os("MESHDNS_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/meshdns"),
        PathBuf::from,
    )
}

/// Ports below the kernel's ephemeral range, free when picked (bound a moment later), for
/// processes that must know each other's address before either starts.
pub fn free_ports<const N: usize>() -> [u16; N] {
    let offset = (std::process::id() % 4_000) as u16;
    let mut free = (0..4_000u16)
        .map(|i| 12_000 + (offset + i * 7) % 4_000)
        .filter(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok());
    [(); N].map(|()| free.next().expect("free ports in 12000-15999"))
}

/// A running `meshdns serve`, killed when dropped.
pub struct Meshdns {
    child: Child,
    /// Its first DNS (UDP and TCP) address.
    pub dns: SocketAddr,
    /// Its HTTP address, when it serves HTTP.
    pub http: Option<SocketAddr>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Meshdns {
    /// `meshdns serve ARGS --log-level info`, once its ready line is logged (30 s at most).
    pub fn start<I, S>(args: I) -> Meshdns
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut child = Command::new(meshdns_bin())
            .arg("serve")
            .args(args)
            .args(["--log-level", "info"])
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", meshdns_bin().display()));
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("meshdns ready") {
                    let _ = tx.send(line.clone());
                }
                sink.lock().unwrap().push(line);
            }
        });
        let Ok(ready) = rx.recv_timeout(Duration::from_secs(30)) else {
            let _ = child.kill();
            panic!(
                "meshdns never became ready:\n{}",
                log.lock().unwrap().join("\n")
            );
        };
        let field = |name: &str| {
            ready
                .split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .and_then(|v| v.trim_matches('"').split(',').next()?.parse().ok())
        };
        Meshdns {
            child,
            dns: field("dns=").expect("the ready line names the DNS address"),
            http: field("http="),
            log,
        }
    }

    /// Everything it logged so far, for a failure's message.
    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

impl Drop for Meshdns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
