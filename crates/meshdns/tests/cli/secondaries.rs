//! NSD and Knot (Debian packages; `.ci/run` installs them) run as secondaries on loopback.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::*;

/// A port free for both UDP and TCP on 127.0.0.1 (for a server we start and tell the port).
pub fn free_port() -> u16 {
    loop {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A secondary server process.
pub struct Secondary {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: PathBuf,
    pub name: &'static str,
}

impl Secondary {
    /// NSD serving `zones` from the primary at `primary`, listening on `port`; its transfers
    /// leave from `source` (so the primary's log tells the secondaries apart).
    pub fn nsd(
        dir: &Path,
        port: u16,
        primary: SocketAddr,
        zones: &[&str],
        source: &str,
    ) -> Secondary {
        let d = dir.display();
        let mut conf = format!(
            "server:\n  ip-address: 127.0.0.1@{port}\n  username: \"\"\n  chroot: \"\"\n  zonesdir: \"{d}\"\n  database: \"\"\n  zonelistfile: \"{d}/zone.list\"\n  xfrdfile: \"{d}/xfrd.state\"\n  xfrdir: \"{d}\"\n  pidfile: \"{d}/nsd.pid\"\n  logfile: \"{d}/nsd.log\"\n  verbosity: 2\n  server-count: 1\n  xfrd-reload-timeout: 0\nremote-control:\n  control-enable: no\n"
        );
        for zone in zones {
            conf.push_str(&format!(
                "zone:\n  name: {zone}\n  zonefile: \"{zone}zone\"\n  allow-notify: {ip} NOKEY\n  request-xfr: {ip}@{pp} NOKEY\n  outgoing-interface: {source}\n",
                ip = primary.ip(),
                pp = primary.port()
            ));
        }
        std::fs::write(dir.join("nsd.conf"), conf).unwrap();
        let child = Command::new("nsd")
            .args(["-d", "-c"])
            .arg(dir.join("nsd.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nsd is installed (apt-get install nsd)");
        Secondary {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            log: dir.join("nsd.log"),
            name: "nsd",
        }
    }

    /// Knot serving `zones` from the primary at `primary`, listening on `port`.
    pub fn knot(
        dir: &Path,
        port: u16,
        primary: SocketAddr,
        zones: &[&str],
        source: &str,
    ) -> Secondary {
        let d = dir.display();
        std::fs::create_dir_all(dir.join("db")).unwrap();
        let mut conf = format!(
            "server:\n  listen: 127.0.0.1@{port}\n  rundir: {d}\n  user: root\nlog:\n  - target: {d}/knot.log\n    any: info\ndatabase:\n  storage: {d}/db\nremote:\n  - id: primary\n    address: {ip}@{pp}\n    via: {source}\nacl:\n  - id: notify_from_primary\n    address: {ip}\n    action: notify\ntemplate:\n  - id: default\n    storage: {d}\n    zonefile-sync: -1\n    zonefile-load: none\n    journal-content: all\n    semantic-checks: off\nzone:\n",
            ip = primary.ip(),
            pp = primary.port()
        );
        for zone in zones {
            conf.push_str(&format!(
                "  - domain: {zone}\n    master: primary\n    acl: notify_from_primary\n"
            ));
        }
        std::fs::write(dir.join("knot.conf"), conf).unwrap();
        let child = Command::new("knotd")
            .arg("-c")
            .arg(dir.join("knot.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("knotd is installed (apt-get install knot)");
        Secondary {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            log: dir.join("knot.log"),
            name: "knot",
        }
    }

    /// The secondary's log.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (up to `seconds`) until `dig ARGS +short` at the secondary prints `want`; returns
    /// how long it took. The bound keeps a broken build from hanging; it is not a timing
    /// assertion (latency is measured in bench/).
    pub fn wait_answer(&self, args: &[&str], want: &str, seconds: u64) -> Duration {
        let start = Instant::now();
        loop {
            let mut a = args.to_vec();
            a.push("+short");
            let out = dig(self.addr, &a);
            if out.trim() == want {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < Duration::from_secs(seconds),
                "{} never answered {args:?} with {want:?} (last: {out:?}); its log:\n{}",
                self.name,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Secondary {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a pid we own and a valid signal number has no memory effects.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        for _ in 0..100 {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
