#!/usr/bin/env bash
# Instructions per re-publish on the replica that takes it (A, under valgrind's cachegrind),
# with two peers (B and C, run normally) it pushes to: the user-space work of a publish,
# counted exactly where CPU time on this VM varies by ±10% from run to run.
#
#   bench/pkarr_instructions.sh NAME=BINARY... [N]      # N re-publishes (default 1000)
#   bench/pkarr_instructions.sh base=/tmp/base/release/meshdns head=target/release/meshdns
#
# Each build runs twice: a fill of 2N new keys, then N (or 2N) re-publishes of the first keys
# at RATE a second (default 200; a publish costs about 50 times its time under valgrind), and
# the figure is the difference of the two runs' instructions divided by N: start-up, the
# fill and shutdown cancel out. Signature checks are most of it, and valgrind runs the AVX2
# code where the CPU would run AVX-512 IFMA: compare builds with it, not servers.
#
# Needs: valgrind, curl; cargo build --release -p meshdns --bin meshdns -p meshdns-sources
# --example pkarr_load. Output: one line per build on stdout, the cachegrind files in $OUT.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
LOAD=${LOAD:-${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/pkarr_load}
N=1000
builds=()
for a in "$@"; do if [[ $a =~ ^[0-9]+$ ]]; then N=$a; else builds+=("$a"); fi; done
[ ${#builds[@]} -gt 0 ] || { sed -n 2,6p "$0"; exit 2; }
OUT=${OUT:-/tmp/meshdns-bench-instructions/pkarr-$(date +%Y%m%d-%H%M%S)}
RUN=${RUN:-/tmp/meshdns-bench-run/pkarr-instructions}
mkdir -p "$OUT"
"$LOAD" sign $((2 * N)) 1 "$OUT/fill.bin" > /dev/null
"$LOAD" sign "$N" 2 "$OUT/s1.bin" > /dev/null
"$LOAD" sign $((2 * N)) 2 "$OUT/s2.bin" > /dev/null
HTTP=(5491 5492 5493); DNS=(5494 5495 5496); NAMES=(a b c)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done' EXIT
run() { # run BINARY STREAM CACHEGRIND_OUT
  rm -rf "$RUN"; mkdir -p "$RUN"
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$RUN/token"
  PIDS=()
  for i in 1 2 0; do
    local peers=() pre=()
    for j in 0 1 2; do [ "$j" = "$i" ] || peers+=(--pkarr-peer "http://127.0.0.1:${HTTP[$j]}"); done
    [ "$i" = 0 ] && pre=(valgrind --tool=cachegrind --cache-sim=no "--cachegrind-out-file=$3")
    taskset -c 0 "${pre[@]}" "$1" serve --pkarr bench.test. --data-dir "$RUN/${NAMES[$i]}" \
      --http "127.0.0.1:${HTTP[$i]}" --listen "127.0.0.1:${DNS[$i]}" --udp-sockets 1 --workers 1 \
      --pkarr-peer-token-file "$RUN/token" "${peers[@]}" --log-level warn > "$RUN/${NAMES[$i]}.log" 2>&1 &
    PIDS[$i]=$!
  done
  for i in 0 1 2; do
    until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${HTTP[$i]}/readyz")" = 200 ]; do sleep 0.2; done
  done
  taskset -c 1 "$LOAD" put "$OUT/fill.bin" "127.0.0.1:${HTTP[0]}" "127.0.0.1:${DNS[0]}" bench.test. --conns 64 > /dev/null
  sleep 3
  taskset -c 1 "$LOAD" put "$2" "127.0.0.1:${HTTP[0]}" "127.0.0.1:${DNS[0]}" bench.test. --conns 64 --rate "${RATE:-200}" > /dev/null
  sleep 3
  for p in "${PIDS[@]}"; do kill "$p"; done
  wait
  PIDS=()
}
total() { awk '/^summary:/ {print $2}' "$1"; }
for b in "${builds[@]}"; do
  name=${b%%=*}; bin=${b#*=}
  run "$bin" "$OUT/s1.bin" "$OUT/$name.1.cg"
  run "$bin" "$OUT/s2.bin" "$OUT/$name.2.cg"
  i1=$(total "$OUT/$name.1.cg"); i2=$(total "$OUT/$name.2.cg")
  echo "$name: $(( (i2 - i1) / N )) instructions per re-publish on A (N=$N; runs $i1 and $i2; fill and first run $i1)"
done
