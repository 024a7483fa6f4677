#!/usr/bin/env python3
"""Zone transfer benchmarks: meshdns beside NSD and Knot.

Usage:
  bench/xfr.py axfr [N] [REPS]    AXFR of the N-host bench.test. zone (gen_zone.py; default
                                  1000000) from meshdns, NSD and Knot, each serving the same
                                  zone file on one core: wall time at the client (kdig) and
                                  server CPU per transfer.
  bench/xfr.py latency [CHANGES]  a meshdns primary fed a records file; NSD, Knot and another
                                  meshdns as its secondaries (NOTIFY + IXFR). Each change is a
                                  file replaced whole; the time until each secondary answers
                                  the new address over UDP is recorded.

Env: MESHDNS (target/release/meshdns), WORK (/tmp/meshdns-xfr-bench).
"""
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MESHDNS = os.environ.get("MESHDNS", os.path.join(ROOT, "target/release/meshdns"))
WORK = os.environ.get("WORK", "/tmp/meshdns-xfr-bench")


def query(port, name, qtype=1, timeout=0.2):
    """One UDP query to 127.0.0.1:port; returns (rcode, [rdata bytes of answers])."""
    qid = int(time.time() * 1e6) & 0xFFFF
    q = struct.pack(">HHHHHH", qid, 0, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack(">HH", qtype, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    try:
        s.sendto(q, ("127.0.0.1", port))
        r, _ = s.recvfrom(4096)
    except OSError:
        return None, []
    finally:
        s.close()
    rcode = r[3] & 0xF
    an = struct.unpack(">H", r[6:8])[0]
    at = len(q)
    out = []
    for _ in range(an):
        while r[at] != 0 and r[at] & 0xC0 != 0xC0:
            at += 1 + r[at]
        at += 2 if r[at] & 0xC0 == 0xC0 else 1
        rtype, _, _, rdlen = struct.unpack(">HHIH", r[at:at + 10])
        out.append((rtype, r[at + 10:at + 10 + rdlen]))
        at += 10 + rdlen
    return rcode, out


def tree(pid):
    """pid and every process below it (NSD serves and transfers from child processes)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
            except OSError:
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cpu_seconds(pid):
    """CPU (user + system) of the process tree."""
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    """Resident memory of the process tree (MiB)."""
    total = 0
    for p in tree(pid):
        try:
            total += int(open(f"/proc/{p}/status").read().split("VmRSS:")[1].split()[0])
        except (OSError, IndexError):
            pass
    return total // 1024


def axfr_client(port, zone="bench.test"):
    """One AXFR over TCP, read as fast as frames arrive (no record parsing): returns (seconds,
    messages, bytes). The end is the message whose last 20 bytes are the first SOA's numbers."""
    q = struct.pack(">HHHHHH", 7, 0, 1, 0, 0, 0)
    for label in zone.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack(">HH", 252, 1)
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(60)
    t0 = time.time()
    s.sendall(struct.pack(">H", len(q)) + q)
    buf, messages, total, soa_tail = b"", 0, 0, None
    while True:
        while len(buf) < 2:
            buf += s.recv(1 << 20)
        n = struct.unpack(">H", buf[:2])[0]
        while len(buf) < 2 + n:
            buf += s.recv(1 << 20)
        msg, buf = buf[2:2 + n], buf[2 + n:]
        messages += 1
        total += n
        if soa_tail is None:
            # The first record is the SOA: its RDATA ends with the 20 bytes of numbers.
            at = 12 + len(q) - 12
            while msg[at] != 0 and msg[at] & 0xC0 != 0xC0:
                at += 1 + msg[at]
            at += 2 if msg[at] & 0xC0 == 0xC0 else 1
            rdlen = struct.unpack(">H", msg[at + 8:at + 10])[0]
            soa_tail = msg[at + 10 + rdlen - 20:at + 10 + rdlen]
            if msg[-20:] == soa_tail and messages > 1:
                break
        elif msg[-20:] == soa_tail:
            break
    elapsed = time.time() - t0
    s.close()
    return elapsed, messages, total


def wait_for(port, name, want=None, limit=600, qtype=1):
    start = time.time()
    while time.time() - start < limit:
        rc, ans = query(port, name, qtype)
        if rc == 0 and ans and (want is None or any(a[1] == want for a in ans)):
            return time.time() - start
        time.sleep(0.05)
    raise SystemExit(f"port {port} never answered {name}")


def start(cmd, log):
    return subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT)


def nsd_conf(d, port, zones, extra=""):
    c = f"""server:
  ip-address: 127.0.0.1@{port}
  username: ""
  chroot: ""
  zonesdir: "{d}"
  database: ""
  zonelistfile: "{d}/zone.list"
  xfrdfile: "{d}/xfrd.state"
  xfrdir: "{d}"
  pidfile: "{d}/nsd.pid"
  logfile: "{d}/nsd.log"
  verbosity: 1
  server-count: 1
  rrl-ratelimit: 0
  xfrd-reload-timeout: 0
remote-control:
  control-enable: no
"""
    for z in zones:
        c += z
    with open(f"{d}/nsd.conf", "w") as f:
        f.write(c + extra)
    return f"{d}/nsd.conf"


def knot_conf(d, port, body):
    os.makedirs(f"{d}/db", exist_ok=True)
    c = f"""server:
  listen: 127.0.0.1@{port}
  rundir: {d}
  user: root
  udp-workers: 1
  tcp-workers: 1
  background-workers: 1
log:
  - target: {d}/knot.log
    any: info
database:
  storage: {d}/db
{body}"""
    with open(f"{d}/knot.conf", "w") as f:
        f.write(c)
    return f"{d}/knot.conf"


def fresh(d):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def axfr(n, reps):
    data = f"{WORK}/n{n}"
    if not os.path.exists(f"{data}/bench.test.zone"):
        os.makedirs(data, exist_ok=True)
        subprocess.run([sys.executable, f"{HERE}/gen_zone.py", str(n), data], check=True)
    zone = f"{data}/bench.test.zone"
    records = sum(1 for line in open(zone) if line.strip() and not line.startswith(("$", ";")))
    print(f"zone: {zone} ({records} record lines)")
    servers = {
        "meshdns": (5411, lambda d: [MESHDNS, "serve", "--zone-file", f"bench.test.={zone}",
                                     "--listen", "127.0.0.1:5411", "--udp-sockets", "1", "--workers", "1",
                                     "--allow-transfer", "127.0.0.1", "--data-dir", d]),
        "nsd": (5412, lambda d: ["nsd", "-d", "-c", nsd_conf(
            d, 5412, [f'zone:\n  name: bench.test\n  zonefile: "{zone}"\n  provide-xfr: 127.0.0.1 NOKEY\n'])]),
        "knot": (5413, lambda d: ["knotd", "-c", knot_conf(d, 5413, f"""acl:
  - id: t
    address: 127.0.0.1
    action: transfer
template:
  - id: default
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
    semantic-checks: off
zone:
  - domain: bench.test
    file: {zone}
    acl: t
""")]),
    }
    rows = []
    for rep in range(reps):
        for name, (port, cmd) in servers.items():
            d = fresh(f"{WORK}/run-{name}")
            p = start(["taskset", "-c", "0"] + cmd(d), f"{d}/out.log")
            wait_for(port, "bench.test", None, qtype=6)
            time.sleep(1)
            before = cpu_seconds(p.pid)
            wall, messages, size = axfr_client(port)
            cpu = cpu_seconds(p.pid) - before
            rss = rss_mib(p.pid)
            stats = [f"{size} B in {messages} messages"]
            p.terminate()
            p.wait()
            row = (name, rep, wall, cpu, rss, stats[0])
            rows.append(row)
            print(f"{name:8} rep {rep}: AXFR {wall:.2f} s, server CPU {cpu:.2f} s, RSS {rss} MiB; {row[5]}", flush=True)
    print("\n| server | AXFR time (s), median | server CPU (s), median | RSS after (MiB) | reply |")
    print("| --- | --- | --- | --- | --- |")
    for name in servers:
        mine = [r for r in rows if r[0] == name]
        print(f"| {name} | {statistics.median(r[2] for r in mine):.2f} | "
              f"{statistics.median(r[3] for r in mine):.2f} | {mine[-1][4]} | {mine[0][5]} |")


def latency(changes):
    d = fresh(f"{WORK}/latency")
    records = f"{d}/records.yaml"

    def write(k):
        tmp = records + ".tmp"
        with open(tmp, "w") as f:
            f.write("zones:\n  - origin: example.org\n    records:\n"
                    f"      - {{name: www, type: A, value: 10.0.{k >> 8 & 255}.{k & 255}}}\n"
                    "      - {name: ns, type: A, value: 192.0.2.53}\n")
        os.rename(tmp, records)

    write(0)
    ports = {"nsd": 5422, "knot": 5423, "meshdns": 5424}
    notify = []
    for p in ports.values():
        notify += ["--notify", f"127.0.0.1:{p}"]
    procs = [start(["taskset", "-c", "0", MESHDNS, "serve", "--records", records, "--listen", "127.0.0.1:5421",
                    "--allow-transfer", "127.0.0.1", "--data-dir", f"{d}/primary"] + notify, f"{d}/primary.log")]
    wait_for(5421, "www.example.org")
    nd = fresh(f"{d}/nsd")
    procs.append(start(["taskset", "-c", "1", "nsd", "-d", "-c", nsd_conf(nd, 5422, [
        'zone:\n  name: example.org\n  zonefile: "example.org.zone"\n  allow-notify: 127.0.0.1 NOKEY\n'
        '  request-xfr: 127.0.0.1@5421 NOKEY\n'])], f"{nd}/out.log"))
    kd = fresh(f"{d}/knot")
    procs.append(start(["taskset", "-c", "1", "knotd", "-c", knot_conf(kd, 5423, """remote:
  - id: primary
    address: 127.0.0.1@5421
acl:
  - id: n
    address: 127.0.0.1
    action: notify
template:
  - id: default
    storage: %s
    zonefile-sync: -1
    zonefile-load: none
    journal-content: all
    semantic-checks: off
zone:
  - domain: example.org
    master: primary
    acl: n
""" % kd)], f"{kd}/out.log"))
    procs.append(start(["taskset", "-c", "1", MESHDNS, "serve", "--secondary", "example.org=127.0.0.1:5421",
                        "--listen", "127.0.0.1:5424", "--data-dir", f"{d}/secondary"], f"{d}/secondary.log"))
    for p in ports.values():
        wait_for(p, "www.example.org", bytes([10, 0, 0, 0]), 60)
    took = {name: [] for name in ports}
    try:
        for k in range(1, changes + 1):
            want = bytes([10, 0, k >> 8 & 255, k & 255])
            write(k)
            t0 = time.time()
            left = dict(ports)
            while left and time.time() - t0 < 30:
                for name, port in list(left.items()):
                    rc, ans = query(port, "www.example.org", timeout=0.05)
                    if any(a[1] == want for a in ans):
                        took[name].append(time.time() - t0)
                        del left[name]
            for name in left:
                took[name].append(float("inf"))
            if os.environ.get("VERBOSE"):
                print(k, {n: round(1000 * t[-1]) for n, t in took.items()}, flush=True)
            time.sleep(0.3)
    finally:
        for p in procs:
            p.terminate()
    print(f"\n{changes} changes, each a records file replaced whole at the primary:")
    print("| secondary | p50 (ms) | p90 (ms) | max (ms) |")
    print("| --- | --- | --- | --- |")
    for name, t in took.items():
        t = sorted(t)
        print(f"| {name} | {1000 * t[len(t) // 2]:.0f} | {1000 * t[int(len(t) * 0.9)]:.0f} | {1000 * t[-1]:.0f} |")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "latency"
    if mode == "axfr":
        axfr(int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000, int(sys.argv[3]) if len(sys.argv) > 3 else 2)
    elif mode == "latency":
        latency(int(sys.argv[2]) if len(sys.argv) > 2 else 50)
    else:
        raise SystemExit(__doc__)
