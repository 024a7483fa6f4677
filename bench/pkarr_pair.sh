#!/usr/bin/env bash
# Two pkarr replicas (A, B), peers of each other, on a stored copy of N endpoints: a quick
# comparison of builds on the replicated path, without the fill of bench/pkarr_fleet.sh each
# time. Both replicas on core 0 (one worker each), the load client on core 1.
#
#   bench/pkarr_pair.sh fill N                      # once: A filled with N, B by A's pushes;
#                                                   # both data directories kept in $BASE
#   MESHDNS=… bench/pkarr_pair.sh stream LABEL      # a fresh copy of $BASE, then S (20,000)
#                                                   # re-publishes to A at 1,000 PUT/s
#
# The stream prints, for LABEL: the CPU per publish of A (took it, pushed it to B) and of B
# (received it); B's bytes handed to write() per publish (/proc/PID/io wchar: mostly the
# pages its commits wrote, and its replies); the commits of A and B; and A's commit → B
# acknowledged (the stream's share of meshdns_pkarr_replication_seconds, at bucket bounds).
# EXTRA adds flags to both replicas (say EXTRA="--pkarr-push-window 40ms"). SPREAD=N takes
# the stream's keys spread evenly over the N stored (default: the first S, which the fill
# stored first). PERF=1 records B with perf (cpu-clock, DWARF call graphs) into
# $OUT/pair_LABEL.perf.
#
# Needs: cargo build --release -p meshdns --bin meshdns -p meshdns-sources --example pkarr_load;
# curl. Loopback only.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
MESHDNS=${MESHDNS:-$TARGET/release/meshdns}
LOAD=${LOAD:-$TARGET/release/examples/pkarr_load}
DATA=${DATA:-/tmp/meshdns-bench-data/pkarr}
BASE=${BASE:-/tmp/meshdns-bench-data/pair}
RUN=${RUN:-/tmp/meshdns-bench-run/pair}
OUT=${OUT:-/tmp/meshdns-bench-out}
S=${S:-20000}
HTTP=(5491 5492); DNS=(5494 5495); NAMES=(a b)
PIDS=()
mkdir -p "$DATA" "$OUT"

start() { # start I: replica I on $RUN, the other its peer
  local i=$1 j=$((1 - $1))
  taskset -c 0 "$MESHDNS" serve --pkarr bench.test. --data-dir "$RUN/${NAMES[$i]}" \
    --http "127.0.0.1:${HTTP[$i]}" --listen "127.0.0.1:${DNS[$i]}" --udp-sockets 1 --workers 1 \
    --pkarr-peer-token-file "$RUN/token" --pkarr-peer "http://127.0.0.1:${HTTP[$j]}" \
    --log-level info ${EXTRA:-} >> "$RUN/${NAMES[$i]}.log" 2>&1 &
  PIDS[$i]=$!
  until curl -s -o /dev/null "http://127.0.0.1:${HTTP[$i]}/healthz"; do sleep 0.05; done
}
stop() { kill "${PIDS[$1]}" 2> /dev/null || true; wait "${PIDS[$1]}" 2> /dev/null || true; }
metric() { curl -s "http://127.0.0.1:${HTTP[$1]}/metrics" | awk -v m="$2" '$1 == m {print $2}'; }
cpu_ticks() { awk '{print $14+$15}' "/proc/${PIDS[$1]}/stat"; }
wchar() { awk '/^wchar/{print $2}' "/proc/${PIDS[$1]}/io"; }
trap 'for i in 0 1; do [ -n "${PIDS[$i]:-}" ] && stop $i; done' EXIT

case "${1:?fill N | stream LABEL}" in
fill)
  N=${2:?N stored endpoints}
  [ -s "$DATA/v1_$N.bin" ] || "$LOAD" sign "$N" 1 "$DATA/v1_$N.bin"
  rm -rf "$RUN" "$BASE"; mkdir -p "$RUN"
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$RUN/token"
  for i in 0 1; do start "$i"; done
  taskset -c 1 "$LOAD" put "$DATA/v1_$N.bin" "127.0.0.1:${HTTP[0]}" "127.0.0.1:${DNS[0]}" bench.test. --conns 64
  until [ "$(metric 1 meshdns_pkarr_packets)" = "$N" ]; do sleep 1; done
  for i in 0 1; do stop "$i"; done
  rm -f "$RUN"/*.log
  cp -a "$RUN" "$BASE"
  echo "A and B hold $N; kept in $BASE"
  ;;
stream)
  LABEL=${2:?LABEL}
  rm -rf "$RUN"; cp -a "$BASE" "$RUN"
  for i in 0 1; do start "$i"; done
  sleep 3
  v=$(( $(date +%s) % 20000 + 40000 ))   # pkarr_load versions are u16 (port 1000 + v)
  spread=(); [ -n "${SPREAD:-}" ] && spread=(--spread "$SPREAD")
  "$LOAD" sign "$S" "$v" "$RUN/stream.bin" "${spread[@]}" > /dev/null
  c0=$(cpu_ticks 0); c1=$(cpu_ticks 1); w1=$(wchar 1)
  k0=$(metric 0 meshdns_pkarr_commits_total); k1=$(metric 1 meshdns_pkarr_commits_total)
  if [ "${PERF:-0}" = 1 ]; then
    perf record -e cpu-clock -F 499 -g --call-graph dwarf,16384 -p "${PIDS[1]}" \
      -o "$OUT/pair_$LABEL.perf" > /dev/null 2>&1 &
    pp=$!
  fi
  out=$(taskset -c 1 "$LOAD" put "$RUN/stream.bin" "127.0.0.1:${HTTP[0]}" "127.0.0.1:${DNS[0]}" bench.test. --rate 1000 --conns 64)
  sleep 1
  if [ "${PERF:-0}" = 1 ]; then kill -INT "$pp"; wait "$pp" || true; fi
  a=$(( ($(cpu_ticks 0) - c0) * 10000 / S ))
  b=$(( ($(cpu_ticks 1) - c1) * 10000 / S ))
  lag=$(curl -s "http://127.0.0.1:${HTTP[0]}/metrics" | python3 -c '
import re, sys
rows = [(float("inf") if m[0] == "+Inf" else float(m[0]), int(m[1]))
        for m in re.findall(r"^meshdns_pkarr_replication_seconds_bucket\{[^}]*le=\"([^\"]+)\"\} (\d+)", sys.stdin.read(), re.M)]
total = rows[-1][1] if rows else 0
q = lambda f: next(le for le, c in rows if c >= f * total) * 1000
print(f"p50 <= {q(0.5):g} ms, p99 <= {q(0.99):g} ms" if total else "none")')
  echo "$LABEL ($S${SPREAD:+ spread over $SPREAD}${EXTRA:+; $EXTRA}): CPU per publish A $a µs, B $b µs; B wrote $(( ($(wchar 1) - w1) / S )) bytes per publish; commits A $(( $(metric 0 meshdns_pkarr_commits_total) - k0 )), B $(( $(metric 1 meshdns_pkarr_commits_total) - k1 )); lag $lag; $out" | tee -a "$OUT/pkarr_pair.txt"
  ;;
*) echo "usage: $0 fill N | stream LABEL" >&2; exit 2 ;;
esac
