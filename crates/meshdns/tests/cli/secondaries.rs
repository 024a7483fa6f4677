//! NSD and Knot (Debian packages; `.ci/run` installs them) run as secondaries on loopback.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::*;

pub use crate::process::free_port;

/// NSD's `server:` section for a server in `dir` on `port` (no privileges dropped, no chroot,
/// every file in `dir`, reloads as soon as a transfer lands).
fn nsd_server(dir: &Path, port: u16) -> String {
    let d = dir.display();
    format!(
        "server:\n  ip-address: 127.0.0.1@{port}\n  username: \"\"\n  chroot: \"\"\n  zonesdir: \"{d}\"\n  database: \"\"\n  zonelistfile: \"{d}/zone.list\"\n  xfrdfile: \"{d}/xfrd.state\"\n  xfrdir: \"{d}\"\n  pidfile: \"{d}/nsd.pid\"\n  logfile: \"{d}/nsd.log\"\n  verbosity: 2\n  server-count: 1\n  xfrd-reload-timeout: 0\nremote-control:\n  control-enable: no\n"
    )
}

/// Starts `program ARGS CONFIG` (a Debian package `.ci/run` installs).
fn spawn(program: &str, args: &[&str], config: &Path) -> Child {
    Command::new(program)
        .args(args)
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{program} is installed (.ci/run installs nsd and knot): {e}"))
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
        let mut conf = nsd_server(dir, port);
        for zone in zones {
            conf.push_str(&format!(
                "zone:\n  name: {zone}\n  zonefile: \"{zone}zone\"\n  allow-notify: {ip} NOKEY\n  request-xfr: {ip}@{pp} NOKEY\n  outgoing-interface: {source}\n",
                ip = primary.ip(),
                pp = primary.port()
            ));
        }
        std::fs::write(dir.join("nsd.conf"), conf).unwrap();
        let child = spawn("nsd", &["-d", "-c"], &dir.join("nsd.conf"));
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
        Secondary::knot_keyed(dir, port, primary, zones, source, None)
    }

    /// [`Secondary::knot`] signing its SOA queries and transfers with `key` (name, base64
    /// hmac-sha256 secret), and taking NOTIFY signed with it alone.
    pub fn knot_keyed(
        dir: &Path,
        port: u16,
        primary: SocketAddr,
        zones: &[&str],
        source: &str,
        key: Option<(&str, &str)>,
    ) -> Secondary {
        let d = dir.display();
        std::fs::create_dir_all(dir.join("db")).unwrap();
        let (keys, use_key) = match key {
            None => (String::new(), String::new()),
            Some((name, secret)) => (
                format!("key:\n  - id: {name}\n    algorithm: hmac-sha256\n    secret: {secret}\n"),
                format!("    key: {name}\n"),
            ),
        };
        let mut conf = format!(
            "server:\n  listen: 127.0.0.1@{port}\n  rundir: {d}\n  user: root\nlog:\n  - target: {d}/knot.log\n    any: info\ndatabase:\n  storage: {d}/db\n{keys}remote:\n  - id: primary\n    address: {ip}@{pp}\n    via: {source}\n{use_key}acl:\n  - id: notify_from_primary\n    address: {ip}\n    action: notify\n{use_key}template:\n  - id: default\n    storage: {d}\n    zonefile-sync: -1\n    zonefile-load: none\n    journal-content: all\n    semantic-checks: off\nzone:\n",
            ip = primary.ip(),
            pp = primary.port()
        );
        for zone in zones {
            conf.push_str(&format!(
                "  - domain: {zone}\n    master: primary\n    acl: notify_from_primary\n"
            ));
        }
        std::fs::write(dir.join("knot.conf"), conf).unwrap();
        let child = spawn("knotd", &["-c"], &dir.join("knot.conf"));
        Secondary {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            log: dir.join("knot.log"),
            name: "knot",
        }
    }

    /// Knot configured with one zone only, the catalog `catalog` from the primary at
    /// `primary` (`catalog-role: interpret`): every member it lists is a zone Knot transfers
    /// from that primary, as members come and go.
    pub fn knot_catalog(
        dir: &Path,
        port: u16,
        primary: SocketAddr,
        catalog: &str,
        source: &str,
    ) -> Secondary {
        let d = dir.display();
        std::fs::create_dir_all(dir.join("db")).unwrap();
        let secondary = "    master: primary\n    acl: notify_from_primary\n    storage: {d}\n    zonefile-sync: -1\n    zonefile-load: none\n    journal-content: all\n    semantic-checks: off\n";
        let conf = format!(
            "server:\n  listen: 127.0.0.1@{port}\n  rundir: {d}\n  user: root\nlog:\n  - target: {d}/knot.log\n    any: info\ndatabase:\n  storage: {d}/db\nremote:\n  - id: primary\n    address: {ip}@{pp}\n    via: {source}\nacl:\n  - id: notify_from_primary\n    address: {ip}\n    action: notify\ntemplate:\n  - id: default\n{t}  - id: member\n{t}zone:\n  - domain: {catalog}\n    catalog-role: interpret\n    catalog-template: member\n",
            ip = primary.ip(),
            pp = primary.port(),
            t = secondary.replace("{d}", &d.to_string()),
        );
        std::fs::write(dir.join("knot.conf"), conf).unwrap();
        let child = spawn("knotd", &["-c"], &dir.join("knot.conf"));
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

/// A primary server (NSD or Knot) serving zone files, notifying `notify` on changes.
pub struct Primary {
    pub server: Secondary,
    pub dir: PathBuf,
}

impl Primary {
    /// NSD serving `zones` (name, zone file text) on `port`, allowing transfers to loopback and
    /// notifying `notify`.
    pub fn nsd(dir: &Path, port: u16, zones: &[(&str, &str)], notify: SocketAddr) -> Primary {
        let mut conf = nsd_server(dir, port);
        for (zone, text) in zones {
            std::fs::write(dir.join(format!("{zone}.zone")), text).unwrap();
            conf.push_str(&format!(
                "zone:\n  name: {zone}\n  zonefile: \"{zone}.zone\"\n  provide-xfr: 127.0.0.0/8 NOKEY\n  notify: {}@{} NOKEY\n",
                notify.ip(),
                notify.port()
            ));
        }
        std::fs::write(dir.join("nsd.conf"), conf).unwrap();
        let child = spawn("nsd", &["-d", "-c"], &dir.join("nsd.conf"));
        Primary {
            server: Secondary {
                child,
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                log: dir.join("nsd.log"),
                name: "nsd",
            },
            dir: dir.to_path_buf(),
        }
    }

    /// Knot serving `zones` on `port`, allowing transfers to loopback and notifying `notify`.
    pub fn knot(dir: &Path, port: u16, zones: &[(&str, &str)], notify: SocketAddr) -> Primary {
        let d = dir.display();
        std::fs::create_dir_all(dir.join("db")).unwrap();
        let mut conf = format!(
            "server:\n  listen: 127.0.0.1@{port}\n  rundir: {d}\n  user: root\nlog:\n  - target: {d}/knot.log\n    any: info\ndatabase:\n  storage: {d}/db\nremote:\n  - id: secondary\n    address: {}@{}\nacl:\n  - id: transfer\n    address: 127.0.0.0/8\n    action: transfer\ntemplate:\n  - id: default\n    storage: {d}\n    zonefile-sync: -1\n    zonefile-load: difference\n    journal-content: changes\n    semantic-checks: off\nzone:\n",
            notify.ip(),
            notify.port()
        );
        for (zone, text) in zones {
            std::fs::write(dir.join(format!("{zone}.zone")), text).unwrap();
            conf.push_str(&format!(
                "  - domain: {zone}\n    file: {zone}.zone\n    notify: secondary\n    acl: transfer\n"
            ));
        }
        std::fs::write(dir.join("knot.conf"), conf).unwrap();
        let child = spawn("knotd", &["-c"], &dir.join("knot.conf"));
        Primary {
            server: Secondary {
                child,
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                log: dir.join("knot.log"),
                name: "knot",
            },
            dir: dir.to_path_buf(),
        }
    }

    /// Rewrites a zone file and has the server load it (NSD: SIGHUP; Knot: `knotc zone-reload`).
    pub fn change(&self, zone: &str, text: &str) {
        std::fs::write(self.dir.join(format!("{zone}.zone")), text).unwrap();
        if self.server.name == "nsd" {
            // SAFETY: kill(2) with a pid we own and a valid signal number.
            unsafe {
                libc::kill(self.server.child.id() as i32, libc::SIGHUP);
            }
        } else {
            let out = Command::new("knotc")
                .arg("-c")
                .arg(self.dir.join("knot.conf"))
                .args(["zone-reload", zone])
                .output()
                .expect("knotc");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
