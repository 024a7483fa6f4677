#!/usr/bin/env python3
"""Soak: meshdns under mixed load for a while, with every answer it gives checked.

Usage: bench/soak.py [SECONDS] [QPS]        defaults: 600 s, 5000 queries a second

One meshdns (target/release, core 0) serves a records file and pkarr publishes, with NSD as
its secondary (NOTIFY + IXFR). At the same time, for SECONDS:
  - dnsperf (core 1) sends QPS queries a second of a fixed mix (A, AAAA, TXT, MX, NXDOMAIN)
    over the file's static names: every query must be answered (lost = sent - completed);
  - the records file is replaced whole every second, its `gen` TXT record counting up, and
    `host-<i>` addresses moving with it;
  - a pkarr publisher PUTs 20 signed packets a second over 200 keys, each packet carrying its
    sequence number in a TXT record;
  - a checker asks meshdns about 300 times a second and compares each answer with what it
    must be at that moment: a static name's exact records; `gen` never older than the last
    file written before the previous reload and never newer than the last written (and never
    going back); a published key never older than its last acknowledged publish before the
    query, never newer than the last one sent; it also records how long each file takes to be
    served (reload latency) and how far NSD's serial lags meshdns's.
RSS is sampled every second and written with a plot (rss.svg).

Writes into $WORK (/tmp/meshdns-soak): summary.txt, rss.csv, rss.svg, logs.
"""
import hashlib
import http.client
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from xfr import nsd_conf, query, wait_for  # noqa: E402
from gen_zone import z32_encode  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402
from cryptography.hazmat.primitives import serialization  # noqa: E402

ROOT = os.path.dirname(HERE)
MESHDNS = os.environ.get("MESHDNS", os.path.join(ROOT, "target/release/meshdns"))
WORK = os.environ.get("WORK", "/tmp/meshdns-soak")
DNS, HTTP, NSD = 5511, 5512, 5513
HOSTS = 200
KEYS = 200


def records_text(gen):
    lines = ["zones:", "  - origin: soak.test", "    ttl: 60", "    records:",
             f'      - {{name: gen, type: TXT, value: "{gen}"}}',
             "      - {name: www, type: A, values: [192.0.2.1, 192.0.2.2]}",
             '      - {name: www, type: AAAA, value: "2001:db8::1"}',
             '      - {name: "@", type: MX, value: "10 mail.soak.test."}',
             "      - {name: mail, type: A, value: 192.0.2.25}",
             '      - {name: txt, type: TXT, values: ["static one", "static two"]}']
    for i in range(HOSTS):
        lines.append(f"      - {{name: host-{i}, type: A, value: 10.{gen >> 16 & 255}.{gen >> 8 & 255}.{gen & 255}}}")
    return "\n".join(lines) + "\n"


STATIC = {  # name, qtype -> sorted rdata
    ("www.soak.test", 1): sorted([bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2])]),
    ("www.soak.test", 28): [bytes.fromhex("20010db8000000000000000000000001")],
    ("mail.soak.test", 1): [bytes([192, 0, 2, 25])],
    ("txt.soak.test", 16): sorted([b"\x0astatic one", b"\x0astatic two"]),
}


def keypair(i):
    sk = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(f"soak-{i}".encode()).digest())
    pk = sk.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return sk, z32_encode(pk)


def signed(sk, z32, seq):
    value = f"seq={seq}".encode()
    name = b"\x05_iroh" + bytes([len(z32)]) + z32.encode() + b"\0"
    rdata = bytes([len(value)]) + value
    pkt = struct.pack("!HHHHHH", 0, 0x8400, 0, 1, 0, 0) + name + struct.pack("!HHIH", 16, 1, 30, len(rdata)) + rdata
    ts = time.time_ns() // 1000
    return sk.sign(b"3:seqi%de1:v%d:" % (ts, len(pkt)) + pkt) + struct.pack("!Q", ts) + pkt


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.written = []          # (time, gen) of every file written
        self.served_at = {}        # gen -> first time seen served
        self.highest_seen = 0
        self.sent = {}             # key index -> highest seq sent
        self.acked = {}            # key index -> (time acknowledged, seq)
        self.checks = 0
        self.wrong = []
        self.unanswered = 0
        self.put_failed = 0
        self.puts = 0
        self.nsd_lag = []
        self.stop = False


def writer(st, path, seconds):
    gen = 1
    t_end = time.time() + seconds
    while time.time() < t_end and not st.stop:
        gen += 1
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(records_text(gen))
        with st.lock:
            st.written.append((time.time(), gen))
        os.rename(tmp, path)
        time.sleep(1.0)


def publisher(st, keys, seconds):
    conn = http.client.HTTPConnection("127.0.0.1", HTTP, timeout=5)
    t_end = time.time() + seconds
    seq = 0
    while time.time() < t_end and not st.stop:
        seq += 1
        i = seq % KEYS
        sk, z32 = keys[i]
        body = signed(sk, z32, seq)
        with st.lock:
            st.sent[i] = seq
        try:
            conn.request("PUT", f"/pkarr/{z32}", body=body, headers={"Content-Type": "application/pkarr.org.relays.v1+octet-stream"})
            resp = conn.getresponse()
            resp.read()
            ok = resp.status in (200, 204)
        except OSError:
            conn = http.client.HTTPConnection("127.0.0.1", HTTP, timeout=5)
            ok = False
        with st.lock:
            st.puts += 1
            if ok:
                st.acked[i] = (time.time(), seq)
            else:
                st.put_failed += 1
        time.sleep(0.05)


def checker(st, keys, seconds):
    t_end = time.time() + seconds
    n = 0
    while time.time() < t_end and not st.stop:
        n += 1
        t0 = time.time()
        with st.lock:
            floor_gen = max([g for (t, g) in st.written if t < t0 - 1.5] or [0])
            top_gen = st.written[-1][1] if st.written else 0
        # gen: within what was written, and never going back.
        rc, ans = query(DNS, "gen.soak.test", 16, timeout=1.0)
        t1 = time.time()
        if rc is None:
            st.unanswered += 1
            continue
        got = int(ans[0][1][1:]) if ans else -1
        with st.lock:
            st.checks += 1
            if got not in st.served_at:
                st.served_at[got] = t1
            if got < floor_gen or got > top_gen or got < st.highest_seen - 0:
                st.wrong.append(f"gen {got} at {t1:.3f}: floor {floor_gen}, top {top_gen}, seen {st.highest_seen}")
            st.highest_seen = max(st.highest_seen, got)
        # a host follows gen within the same window
        h = n % HOSTS
        rc, ans = query(DNS, f"host-{h}.soak.test", 1, timeout=1.0)
        if rc is None:
            st.unanswered += 1
        else:
            g = int.from_bytes(b"\0" + ans[0][1][1:], "big") if ans else -1
            with st.lock:
                st.checks += 1
                if g < floor_gen or g > st.written[-1][1]:
                    st.wrong.append(f"host-{h} gen {g}: floor {floor_gen}")
        # a static name
        (name, qtype), want = list(STATIC.items())[n % len(STATIC)]
        rc, ans = query(DNS, name, qtype, timeout=1.0)
        if rc is None:
            st.unanswered += 1
        else:
            with st.lock:
                st.checks += 1
                if sorted(a[1] for a in ans) != want:
                    st.wrong.append(f"{name}/{qtype}: {ans}")
        # a published key: never older than its last acknowledged publish, never newer than sent
        i = n % KEYS
        with st.lock:
            acked = st.acked.get(i)
        if acked:
            t_ack, seq_ack = acked
            rc, ans = query(DNS, f"_iroh.{keys[i][1]}.soak.test", 16, timeout=1.0)
            if rc is None:
                st.unanswered += 1
            else:
                got = int(ans[0][1][5:]) if ans else -1
                with st.lock:
                    st.checks += 1
                    if got < seq_ack or got > st.sent[i]:
                        st.wrong.append(f"key {i}: seq {got}, acked {seq_ack}, sent {st.sent[i]}")
        # NSD's serial against meshdns's, every 50th round
        if n % 50 == 0:
            _, a = query(DNS, "soak.test", 6, timeout=1.0)
            _, b = query(NSD, "soak.test", 6, timeout=1.0)
            if a and b:
                serial = lambda rd: struct.unpack(">I", rd[-20:-16])[0]
                with st.lock:
                    st.nsd_lag.append((time.time(), serial(a[0][1]), serial(b[0][1])))
        time.sleep(max(0, 0.013 - (time.time() - t0)))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def svg(samples, path):
    w, h, pad = 800, 300, 40
    t0 = samples[0][0]
    xs = [s[0] - t0 for s in samples]
    ys = [s[1] / 1024 for s in samples]
    xmax, ymax = max(xs) or 1, max(ys) * 1.2 or 1
    pts = " ".join(f"{pad + x / xmax * (w - 2 * pad):.1f},{h - pad - y / ymax * (h - 2 * pad):.1f}" for x, y in zip(xs, ys))
    with open(path, "w") as f:
        f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">\n'
                f'<rect width="{w}" height="{h}" fill="white"/>\n'
                f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>\n'
                f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>\n'
                f'<text x="{w / 2}" y="{h - 8}" text-anchor="middle">seconds (0 to {xmax:.0f})</text>\n'
                f'<text x="4" y="{pad - 10}">RSS MiB (0 to {ymax:.0f})</text>\n'
                f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{pts}"/>\n</svg>\n')


def main():
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    qps = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(f"{WORK}/nsd")
    records = f"{WORK}/records.yaml"
    with open(records, "w") as f:
        f.write(records_text(1))
    st = State()
    st.written.append((time.time(), 1))
    mesh = subprocess.Popen(
        ["taskset", "-c", "0", MESHDNS, "serve", "--records", records, "--listen", f"127.0.0.1:{DNS}",
         "--http", f"127.0.0.1:{HTTP}", "--pkarr", "soak.test.", "--data-dir", f"{WORK}/data",
         "--allow-transfer", "127.0.0.1", "--notify", f"127.0.0.1:{NSD}", "--workers", "1",
         "--pkarr-put-limit", "0", "--log-level", "warn"],
        stdout=open(f"{WORK}/meshdns.log", "w"), stderr=subprocess.STDOUT)
    wait_for(DNS, "www.soak.test", limit=30)
    nsd = subprocess.Popen(["taskset", "-c", "1", "nsd", "-d", "-c", nsd_conf(f"{WORK}/nsd", NSD, [
        'zone:\n  name: soak.test\n  zonefile: "soak.test.zone"\n  allow-notify: 127.0.0.1 NOKEY\n'
        f'  request-xfr: 127.0.0.1@{DNS} NOKEY\n'])], stdout=open(f"{WORK}/nsd.log", "w"), stderr=subprocess.STDOUT)
    wait_for(NSD, "www.soak.test", limit=60)
    with open(f"{WORK}/queries", "w") as f:
        for name, qtype in [("www.soak.test", "A"), ("www.soak.test", "AAAA"), ("soak.test", "MX"),
                            ("txt.soak.test", "TXT"), ("mail.soak.test", "A"), ("nope.soak.test", "A")]:
            f.write(f"{name} {qtype}\n")
    keys = [keypair(i) for i in range(KEYS)]
    perf = subprocess.Popen(["taskset", "-c", "1", "dnsperf", "-s", "127.0.0.1", "-p", str(DNS), "-d", f"{WORK}/queries",
                             "-l", str(seconds), "-Q", str(qps), "-c", "4", "-t", "2"],
                            stdout=open(f"{WORK}/dnsperf.txt", "w"), stderr=subprocess.STDOUT)
    threads = [threading.Thread(target=fn, args=args) for fn, args in
               [(writer, (st, records, seconds)), (publisher, (st, keys, seconds)), (checker, (st, keys, seconds))]]
    for t in threads:
        t.start()
    samples = []
    t_end = time.time() + seconds
    while time.time() < t_end:
        samples.append((time.time(), rss_kib(mesh.pid)))
        time.sleep(1)
    for t in threads:
        t.join()
    perf.wait()
    samples.append((time.time(), rss_kib(mesh.pid)))
    crashed = mesh.poll() is not None
    mesh.terminate()
    nsd.terminate()
    mesh.wait()
    nsd.wait()

    with open(f"{WORK}/rss.csv", "w") as f:
        f.write("seconds,rss_kib\n")
        for t, r in samples:
            f.write(f"{t - samples[0][0]:.0f},{r}\n")
    svg(samples, f"{WORK}/rss.svg")
    perf_text = open(f"{WORK}/dnsperf.txt").read()
    grab = lambda pat: int(re.search(pat, perf_text).group(1))
    sent, done, lost = grab(r"Queries sent:\s+(\d+)"), grab(r"Queries completed:\s+(\d+)"), grab(r"Queries lost:\s+(\d+)")
    written = dict((g, t) for t, g in st.written)
    lat = sorted(st.served_at[g] - written[g] for g in st.served_at if g in written and g > 1)
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")
    minute = [r for t, r in samples if t - samples[0][0] >= 60]
    last = [r for t, r in samples if t - samples[0][0] >= seconds - 60]
    in_sync = sum(1 for _, a, b in st.nsd_lag if a == b)
    lines = [
        f"soak: {seconds} s, dnsperf at {qps} q/s, a file every second ({len(st.written)} written), "
        f"{st.puts} pkarr publishes ({st.put_failed} failed)",
        f"dnsperf: sent {sent}, completed {done}, lost {lost}",
        f"checked answers: {st.checks}, wrong {len(st.wrong)}, unanswered {st.unanswered}",
        f"reload latency (file written -> served, first seen by the checker, {len(lat)} files): "
        f"p50 {pct(0.5):.0f} ms, p99 {pct(0.99):.0f} ms, max {pct(1.0):.0f} ms",
        f"NSD serial equal to meshdns's in {in_sync} of {len(st.nsd_lag)} samples",
        f"RSS: start {samples[0][1] / 1024:.1f} MiB, after 1 min {minute[0] / 1024 if minute else 0:.1f} MiB, "
        f"max {max(r for _, r in samples) / 1024:.1f} MiB, last minute {min(last) / 1024:.1f}-{max(last) / 1024:.1f} MiB",
        f"meshdns exited during the run: {crashed}",
    ] + [f"WRONG: {w}" for w in st.wrong[:20]]
    text = "\n".join(lines)
    print(text)
    with open(f"{WORK}/summary.txt", "w") as f:
        f.write(text + "\n")
    return 1 if (lost or st.wrong or st.unanswered or crashed) else 0


if __name__ == "__main__":
    sys.exit(main())
