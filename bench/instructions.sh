#!/bin/bash
# Instructions per answered query, counted by valgrind (cachegrind), for meshdns builds and NSD
# on the same 100,000-host zone and the same query mix (hits, NXDOMAIN, NODATA).
#
#   bench/instructions.sh [N] NAME=BINARY... [nsd] [reflector=BINARY]
#   bench/instructions.sh 20000 head=target/release/meshdns base=/tmp/base/release/meshdns nsd
# (names and extra arguments as in bench/lib.sh)
#
# Why valgrind and not `perf stat`: this machine is a VM whose PMU is not exposed (`perf stat
# -e instructions` says <not supported>), and CPU time on a shared VM varies by ±12% from run
# to run. Cachegrind counts the instructions the server executes exactly: the same build on
# the same queries gives the same count to within a fraction of a percent.
#
# Each server runs twice, once answering the first N queries of the mix and once the first
# 2N, and the figure is (instructions of the 2N run - those of the N run) / (answers of the
# 2N run - those of the N run): start-up, the zone load and shutdown cancel out. dnsperf keeps
# 32 queries outstanding so the server is never idle (an idle runtime would add instructions
# per second, not per query). With CACHE=1 cachegrind also simulates the caches and the
# first-level and last-level data misses per query are printed.
#
# Needs: valgrind, dnsperf, dig (and nsd for `nsd`); the zone from bench/gen_zone.py
# ($DATA_ROOT/n100k, made when missing). Output: one CSV line per server on stdout, and the
# cachegrind files in $OUT.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
DATA_ROOT=${DATA_ROOT:-/tmp/meshdns-bench-data}
OUT=${OUT:-/tmp/meshdns-bench-instructions/$(date +%Y%m%d-%H%M%S)}
PORT=${PORT:-5399}
CACHE=${CACHE:-0}
N=20000
if [[ ${1:-} =~ ^[0-9]+$ ]]; then N=$1; shift; fi
[ $# -gt 0 ] || { sed -n 2,7p "$0"; exit 2; }
DATA=$DATA_ROOT/n100k
[ -f "$DATA/queries.txt" ] || python3 "$HERE/gen_zone.py" 100000 "$DATA" >&2
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
mkdir -p "$OUT"
head -n "$N" "$DATA/queries.txt" > "$OUT/q1.txt"
head -n $((2 * N)) "$DATA/queries.txt" > "$OUT/q2.txt"
[ "$(wc -l < "$OUT/q2.txt")" -eq $((2 * N)) ] || { echo "the mix has fewer than $((2 * N)) queries" >&2; exit 1; }

sim="--cache-sim=no"
[ "$CACHE" = 1 ] && sim="--cache-sim=yes"

# run NAME BINARY QUERYFILE TAG: prints "instructions answered [D1 misses LL misses]"
run() {
  local name=$1 bin=$2 qf=$3 tag=$4 dir="$OUT/$1-$4"
  rm -rf "$dir"
  # --trace-children: NSD forks its server process.
  start_server "$name" "$bin" "$dir" valgrind --tool=cachegrind $sim --trace-children=yes \
    --cachegrind-out-file="$dir/cg.%p" || return 1
  dnsperf -s 127.0.0.1 -p "$PORT" -d "$qf" -n 1 -c 1 -q 32 -t 10 > "$dir/dnsperf.txt" 2>&1 || true
  stop_server "$dir"
  local answered ir
  answered=$(awk '/Queries completed:/ {print $3}' "$dir/dnsperf.txt")
  ir=$(cat "$dir"/cg.* | awk '/^summary:/ {s += $2} END {printf "%.0f", s}')
  if [ "$CACHE" = 1 ]; then
    # events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
    local misses
    misses=$(cat "$dir"/cg.* | awk '/^summary:/ {d1 += $6 + $9; ll += $7 + $10} END {printf "%.0f %.0f", d1, ll}')
    echo "$ir $answered $misses"
  else
    echo "$ir $answered"
  fi
}

header="server,n,instructions_n,answered_n,instructions_2n,answered_2n,instructions_per_query"
[ "$CACHE" = 1 ] && header="$header,d1_misses_per_query,ll_misses_per_query"
echo "$header"
for spec in "$@"; do
  name=${spec%%=*}
  bin=${spec#*=}
  [ "$name" = nsd ] && bin=nsd
  read -r i1 a1 d1a l1a <<< "$(run "$name" "$bin" "$OUT/q1.txt" n)"
  read -r i2 a2 d1b l1b <<< "$(run "$name" "$bin" "$OUT/q2.txt" 2n)"
  per=$(awk -v i1="$i1" -v i2="$i2" -v a1="$a1" -v a2="$a2" 'BEGIN {printf "%.0f", (i2 - i1) / (a2 - a1)}')
  line="$name,$N,$i1,$a1,$i2,$a2,$per"
  if [ "$CACHE" = 1 ]; then
    line="$line,$(awk -v x="$d1a" -v y="$d1b" -v a1="$a1" -v a2="$a2" 'BEGIN {printf "%.2f", (y - x) / (a2 - a1)}')"
    line="$line,$(awk -v x="$l1a" -v y="$l1b" -v a1="$a1" -v a2="$a2" 'BEGIN {printf "%.2f", (y - x) / (a2 - a1)}')"
  fi
  echo "$line"
done
