#!/usr/bin/env python3
"""Change-to-answer latency of meshdns serve: write a records file, time until a query sees it.

Usage: bench/reload_latency.py [PATH_TO_MESHDNS] [ROUNDS]
Starts `meshdns serve` on a free loopback port with one Tailscale records.json, then for each
round changes the file (alternating rename-over and in-place write) and polls with UDP queries
every 0.5 ms until the new address is answered. Prints p50/p99/max in milliseconds.
"""
import os, socket, struct, subprocess, sys, tempfile, time

binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/meshdns"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 200

def records(k):
    return '{"version":"v1alpha1","ip4":{"host.ts.net":["10.%d.%d.1"]}}' % (k // 256, k % 256)

def query(sock, addr, qid):
    q = struct.pack(">HHHHHH", qid, 0, 1, 0, 0, 0) + b"\x04host\x02ts\x03net\x00\x00\x01\x00\x01"
    sock.sendto(q, addr)
    data, _ = sock.recvfrom(2048)
    return data[-4:] if struct.unpack(">H", data[6:8])[0] else b""

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "records.json")
    open(path, "w").write(records(0))
    proc = subprocess.Popen([binary, "serve", "--records", path, "--listen", "127.0.0.1:0", "--log-level", "warn,meshdns=info"],
                            stderr=subprocess.PIPE, text=True)
    port = None
    for line in proc.stderr:
        if "meshdns ready" in line:
            port = int(line.split("dns=")[1].split()[0].split(":")[1])
            break
    addr = ("127.0.0.1", port)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(1)
    lat = []
    for k in range(1, rounds + 1):
        want = socket.inet_aton("10.%d.%d.1" % (k // 256, k % 256))
        if k % 2:
            tmp = path + ".tmp"
            open(tmp, "w").write(records(k))
            start = time.perf_counter()
            os.rename(tmp, path)
        else:
            with open(path, "w") as f:
                f.write(records(k))
            start = time.perf_counter()
        while query(sock, addr, k & 0xFFFF) != want:
            time.sleep(0.0005)
        lat.append((time.perf_counter() - start) * 1000)
    proc.terminate()
    proc.wait()
    lat.sort()
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    print("rounds=%d p50=%.1fms p99=%.1fms max=%.1fms" % (len(lat), pick(0.5), pick(0.99), lat[-1]))
