#!/usr/bin/env python3
"""Dynamic UPDATE load (bench/update.sh): THREADS clients, each sending UPDATEs one at a time
over UDP, each adding one A record signed with TSIG hmac-sha256, timing send -> reply. Prints
the rcodes, the throughput and the latency percentiles.

  update_client.py HOST PORT ZONE KEYNAME SECRET_B64 COUNT THREADS [FOLLOW_HOST:PORT]

With FOLLOW (a secondary of ZONE), one UPDATE at a time, each followed by queries to the
secondary every millisecond until it answers the new record: update -> secondary answering.
"""
import base64, hmac, hashlib, random, socket, struct, sys, threading, time
import os

# The first record's number: runs against the same zone add new names, not the same again.
START = int(os.environ.get("START", "0"))


def wire(name):
    out = b""
    for label in name.rstrip(".").split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def update(zone, owner, ip, key, secret):
    mid = random.randrange(65536)
    head = struct.pack(">HHHHHH", mid, 5 << 11, 1, 0, 1, 0)
    body = wire(zone) + struct.pack(">HH", 6, 1)
    body += wire(owner) + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton(ip)
    now = int(time.time())
    alg = wire("hmac-sha256")
    variables = wire(key) + struct.pack(">HI", 255, 0) + alg
    variables += struct.pack(">Q", now)[2:] + struct.pack(">HHH", 300, 0, 0)
    mac = hmac.new(secret, head + body + variables, hashlib.sha256).digest()
    rdata = alg + struct.pack(">Q", now)[2:] + struct.pack(">HH", 300, len(mac)) + mac
    rdata += struct.pack(">HHH", mid, 0, 0)
    tsig = wire(key) + struct.pack(">HHIH", 250, 255, 0, len(rdata)) + rdata
    head = struct.pack(">HHHHHH", mid, 5 << 11, 1, 0, 1, 1)
    return mid, head + body + tsig


def query(name):
    mid = random.randrange(65536)
    return mid, struct.pack(">HHHHHH", mid, 0, 1, 0, 0, 0) + wire(name) + struct.pack(">HH", 1, 1)


def follow(host, port, zone, key, secret, count, secondary):
    shost, sport = secondary.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    q = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    q.settimeout(0.05)
    lat, failed = [], 0
    for n in range(count):
        owner = f"f{n}.{zone}"
        mid, msg = update(zone, owner, f"10.200.{n >> 8 & 255}.{n & 255}", key, secret)
        start = time.perf_counter()
        s.sendto(msg, (host, port))
        reply = s.recv(65535)
        if reply[3] & 15 != 0:
            failed += 1
            continue
        deadline = start + 10
        while time.perf_counter() < deadline:
            qid, qmsg = query(owner)
            q.sendto(qmsg, (shost, int(sport)))
            try:
                r = q.recv(65535)
            except socket.timeout:
                continue
            if struct.unpack(">H", r[:2])[0] == qid and r[3] & 15 == 0 and struct.unpack(">H", r[6:8])[0] > 0:
                lat.append(time.perf_counter() - start)
                break
            time.sleep(0.001)
        else:
            failed += 1
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(len(lat) * p))] * 1000 if lat else float("nan")
    print(f"update -> secondary {secondary} answering: {len(lat)} of {count} followed ({failed} not), "
          f"p50 {pct(0.5):.1f} ms, p99 {pct(0.99):.1f} ms, max {pct(1.0):.1f} ms")


def main():
    host, port, zone, key, secret, count, threads = sys.argv[1:8]
    if len(sys.argv) > 8:
        follow(host, int(port), zone, key, base64.b64decode(secret), int(count), sys.argv[8])
        return
    port, count, threads = int(port), int(count), int(threads)
    secret = base64.b64decode(secret)
    lat, rcodes, lock = [], {}, threading.Lock()

    def run(t):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(5)
        mine, codes = [], {}
        for i in range(count // threads):
            n = START + t * (count // threads) + i
            mid, msg = update(zone, f"u{n}.{zone}", f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}", key, secret)
            start = time.perf_counter()
            s.sendto(msg, (host, port))
            while True:
                try:
                    reply = s.recv(65535)
                except socket.timeout:
                    codes["timeout"] = codes.get("timeout", 0) + 1
                    break
                if struct.unpack(">H", reply[:2])[0] == mid:
                    mine.append(time.perf_counter() - start)
                    rc = reply[3] & 15
                    codes[rc] = codes.get(rc, 0) + 1
                    break
        with lock:
            lat.extend(mine)
            for k, v in codes.items():
                rcodes[k] = rcodes.get(k, 0) + v

    start = time.perf_counter()
    ts = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.perf_counter() - start
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(len(lat) * p))] * 1000 if lat else float("nan")
    print(f"updates: {len(lat)} answered of {count} in {elapsed:.2f} s ({len(lat) / elapsed:.0f} a second), "
          f"{threads} clients; rcodes {rcodes}; update -> reply (answer served) "
          f"p50 {pct(0.5):.2f} ms, p99 {pct(0.99):.2f} ms, max {pct(1.0):.2f} ms")


main()
