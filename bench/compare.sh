#!/usr/bin/env bash
# Before and after a change to the query path, in one command: builds REV and the working tree
# (release, bench/build_rev.sh), then runs both beside NSD and the reflector and prints one
# table: instructions per answered query (bench/instructions.sh, cachegrind), CPU per answered
# query at a fixed rate and queries a second with no rate (bench/cpu_per_query.sh, interleaved
# A B C D A B C D), each with its ratio to NSD and to the reflector.
#
#   bench/compare.sh REV                 # e.g. bench/compare.sh cbd6b73, bench/compare.sh HEAD
#   FEATURES=1 bench/compare.sh cbd6b73  # adds the working tree with RRL on and a pkarr origin
#
# Env: N instructions.sh's N (10000); REPS interleaved runs (5); QPS the fixed rate (100000);
# DUR seconds per run (8); UNTHROTTLED=0 skips the runs with no rate; OUT (the results: the
# CSVs and summary.md). Needs what bench/run.sh setup installs, and valgrind.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 1 ] || { sed -n 2,14p "$0" >&2; exit 2; }
N=${N:-10000}; REPS=${REPS:-5}; QPS=${QPS:-100000}; DUR=${DUR:-8}
UNTHROTTLED=${UNTHROTTLED:-1}; FEATURES=${FEATURES:-0}
OUT=${OUT:-/tmp/meshdns-compare/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
base=$("$HERE/build_rev.sh" "$1")
head=$("$HERE/build_rev.sh" .)
cc -O2 -o "$OUT/reflector" "$HERE/reflector.c"
servers=("head=$head" "base=$base")
if [ "$FEATURES" = 1 ]; then
  # RRL at a rate nothing reaches (every reply goes through the check) and a pkarr origin
  # over the zone (every lookup under it goes through the overlay).
  export ARGS_features="--rrl-rate 1000000 --pkarr bench.test. --http 127.0.0.1:0 --data-dir @DIR@/pkarr"
  servers+=("features=$head")
fi
servers+=(nsd "reflector=$OUT/reflector")
{
  echo "# bench/compare.sh $1 ($(git -C "$HERE" rev-parse --short "$1^{commit}")) against the working tree"
  echo "# head: $(git -C "$HERE" describe --always --dirty), $(date -u +%FT%TZ)"
} > "$OUT/summary.md"
echo "== instructions per query ($OUT/instructions.csv)" >&2
OUT=$OUT/cachegrind "$HERE/instructions.sh" "$N" "${servers[@]}" | tee "$OUT/instructions.csv" >&2
echo "== CPU per query at $QPS q/s, $REPS runs ($OUT/cpu.csv)" >&2
QPS=$QPS REPS=$REPS DUR=$DUR RUN=$OUT/run "$HERE/cpu_per_query.sh" "${servers[@]}" | tee "$OUT/cpu.csv" >&2
if [ "$UNTHROTTLED" = 1 ]; then
  echo "== unthrottled, $REPS runs ($OUT/unthrottled.csv)" >&2
  QPS=0 REPS=$REPS DUR=$DUR RUN=$OUT/run "$HERE/cpu_per_query.sh" "${servers[@]}" | tee "$OUT/unthrottled.csv" >&2
fi
python3 "$HERE/compare_summary.py" "$OUT" "$QPS" | tee -a "$OUT/summary.md"
