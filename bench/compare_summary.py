#!/usr/bin/env python3
"""The table bench/compare.sh prints: compare_summary.py OUT QPS.

Reads OUT/instructions.csv, OUT/cpu.csv and (when present) OUT/unthrottled.csv. Ratios to NSD
and to the reflector are taken within each interleaved repetition, then averaged, so a slow
moment of the machine weighs on both sides of a ratio alike.
"""
import csv
import os
import statistics
import sys


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def per_rep(path, field):
    """{server: {rep: value}}"""
    out = {}
    for r in rows(path):
        out.setdefault(r["server"], {})[r["rep"]] = float(r[field])
    return out


def ratio(values, other):
    """Mean over repetitions of values[rep] / other[rep]."""
    reps = [k for k in values if k in other and other[k] > 0]
    return statistics.mean(values[k] / other[k] for k in reps) if reps else None


def fmt(x, spec):
    return "–" if x is None else format(x, spec)


def main():
    out, qps = sys.argv[1], sys.argv[2]
    instr = {r["server"]: float(r["instructions_per_query"]) for r in rows(f"{out}/instructions.csv")}
    cpu = per_rep(f"{out}/cpu.csv", "us_per_query")
    free = per_rep(f"{out}/unthrottled.csv", "qps")
    servers = list(instr) or list(cpu)
    print()
    print(f"| server | instructions per query | ÷ NSD | CPU µs per query at {qps} q/s, mean (runs) "
          "| ÷ NSD | ÷ reflector | unthrottled q/s, mean | ÷ NSD |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for s in servers:
        i = instr.get(s)
        i_nsd = i / instr["nsd"] if i is not None and instr.get("nsd") else None
        c = cpu.get(s, {})
        runs = ", ".join(f"{c[k]:.2f}" for k in sorted(c, key=int))
        c_mean = statistics.mean(c.values()) if c else None
        u = free.get(s, {})
        print(
            f"| {s} | {fmt(i, ',.0f')} | {fmt(i_nsd, '.2f')}× "
            f"| {fmt(c_mean, '.2f')} ({runs}) | {fmt(ratio(c, cpu.get('nsd', {})), '.3f')}× "
            f"| {fmt(ratio(c, cpu.get('reflector', {})), '.3f')}× "
            f"| {fmt(statistics.mean(u.values()) if u else None, ',.0f')} "
            f"| {fmt(ratio(u, free.get('nsd', {})), '.3f')}× |"
        )


if __name__ == "__main__":
    main()
