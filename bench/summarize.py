#!/usr/bin/env python3
"""Summarize run_anchors.sh output (runs.csv, load.csv) as markdown tables.

Usage: summarize.py RESULTS_DIR [RESULTS_DIR...]   (load.csv rows are merged)
Median / min / max over reps; RSS/PSS in MiB (KiB/1024).
"""
import csv
import statistics
import sys
from collections import defaultdict

ORDER = ["meshdns", "meshdns-base", "meshdns-pkarr", "reflector", "nsd", "knot", "bind", "hickory", "iroh", "seed"]


def fmt3(vals, f="{:.0f}"):
    vals = sorted(vals)
    return f"{f.format(statistics.median(vals))} ({f.format(vals[0])}–{f.format(vals[-1])})"


def key_order(k):
    return (ORDER.index(k[0]) if k[0] in ORDER else 99,) + tuple(str(x) for x in k[1:])


def main() -> int:
    runs = defaultdict(list)
    loads = defaultdict(list)
    publish = []
    for d in sys.argv[1:]:
        try:
            with open(f"{d}/runs.csv") as f:
                for r in csv.reader(f):
                    name, rep, mix, qlim, sent, qps, avg, mx, lost, cpu, rss, pss, nproc = r
                    runs[(name, mix, int(qlim))].append(dict(
                        qps=float(qps), avg=float(avg) * 1e3, max=float(mx) * 1e3,
                        lost=int(lost), sent=int(sent), cpu=float(cpu),
                        rss=int(rss) / 1024, pss=int(pss) / 1024))
        except FileNotFoundError:
            pass
        try:
            with open(f"{d}/load.csv") as f:
                for r in csv.reader(f):
                    if r[1] == "publish":
                        publish.append(r)
                        continue
                    name, rep, ds, lt, rss, pss, nproc = r
                    if lt == "timeout":
                        continue
                    loads[(name, ds)].append(dict(t=float(lt), rss=int(rss) / 1024,
                                                  pss=int(pss) / 1024, n=int(nproc)))
        except FileNotFoundError:
            pass

    best = {}
    for (name, mix, q), v in runs.items():
        if q == 0:
            m = statistics.median(x["qps"] for x in v)
            best[mix] = max(best.get(mix, 0), m)

    refl = {mix: statistics.median(x["qps"] for x in v) for (name, mix, q), v in runs.items() if name == "reflector" and q == 0}
    print("### Throughput (unthrottled, dnsperf -c 8)\n")
    print("| server | mix | reps | QPS median (min–max) | × reflector | avg latency ms | max latency ms | lost (sum) | server CPU % | RSS after traffic MiB | PSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k in sorted(runs, key=key_order):
        name, mix, q = k
        if q != 0:
            continue
        v = runs[k]
        med = statistics.median(x["qps"] for x in v)
        ratio = f"{med / refl[mix]:.3f}" if refl.get(mix) else "—"
        print(f"| {name} | {mix} | {len(v)} | {fmt3([x['qps'] for x in v])} | {ratio} | "
              f"{fmt3([x['avg'] for x in v], '{:.3f}')} | {fmt3([x['max'] for x in v], '{:.2f}')} | "
              f"{sum(x['lost'] for x in v)} | {fmt3([x['cpu'] for x in v], '{:.0f}')} | "
              f"{fmt3([x['rss'] for x in v], '{:.1f}')} | {fmt3([x['pss'] for x in v], '{:.1f}')} |")

    print("\n### Latency at a fixed offered load (dnsperf -Q)\n")
    print("| server | mix | offered QPS | reps | achieved QPS | avg latency ms | max latency ms | lost (sum) | server CPU % | CPU µs per query |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k in sorted(runs, key=key_order):
        name, mix, q = k
        if q == 0:
            continue
        v = runs[k]
        print(f"| {name} | {mix} | {q} | {len(v)} | {fmt3([x['qps'] for x in v])} | "
              f"{fmt3([x['avg'] for x in v], '{:.3f}')} | {fmt3([x['max'] for x in v], '{:.2f}')} | "
              f"{sum(x['lost'] for x in v)} | {fmt3([x['cpu'] for x in v], '{:.0f}')} | "
              f"{fmt3([x['cpu'] * 1e4 / x['qps'] for x in v if x['qps']] or [0], '{:.2f}')} |")

    print("\n### Zone load (process start → last record answerable)\n")
    print("| server | zone | reps | load time s | RSS after load MiB | PSS MiB | processes |")
    print("|---|---|---|---|---|---|---|")
    for k in sorted(loads, key=key_order):
        v = loads[k]
        zone = k[1]
        if zone.startswith("pkarr"):
            zone = f"{zone[5:]} pkarr packets, first PUT → last answerable (Python client signing)"
        print(f"| {k[0]} | {zone} | {len(v)} | {fmt3([x['t'] for x in v], '{:.2f}')} | "
              f"{fmt3([x['rss'] for x in v], '{:.1f}')} | {fmt3([x['pss'] for x in v], '{:.1f}')} | {v[0]['n']} |")
    for r in publish:
        print(f"\niroh-dns-server pkarr publish: {r[2]} packets in {r[3]} s over HTTP "
              f"(8 client threads, includes Python signing); RSS after publish {int(r[4]) / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
