#!/usr/bin/env bash
# CPU time per answered query, interleaved: each server in turn answers the `full` mix at a
# fixed offered rate for DUR seconds, REPS times (A B C A B C), server on core 0, dnsperf on
# core 1, CPU read from /proc (bench/dnsprobe.py). Noisy on a shared VM (±12% per run): use
# bench/instructions.sh to tell small differences apart. QPS=0 offers no rate (dnsperf as
# fast as it goes): the qps column is then the server's unthrottled rate.
#
#   bench/cpu_per_query.sh NAME=BINARY... [nsd] [reflector=BINARY]   (names as in bench/lib.sh)
#   REPS=5 QPS=100000 DUR=8 bench/cpu_per_query.sh head=target/release/meshdns base=/tmp/base/meshdns nsd
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=${DATA_ROOT:-/tmp/meshdns-bench-data}/n100k
REPS=${REPS:-3}; QPS=${QPS:-50000}; DUR=${DUR:-8}; PORT=${PORT:-5399}
RUN=${RUN:-/tmp/meshdns-bench-cpq}
[ $# -gt 0 ] || { sed -n 2,10p "$0"; exit 2; }
[ -f "$DATA/queries.txt" ] || python3 "$HERE/gen_zone.py" 100000 "$DATA" >&2
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
rate=()
[ "$QPS" = 0 ] || rate=(-Q "$QPS")
echo "server,rep,completed,cpu_ticks,us_per_query,qps"
for rep in $(seq "$REPS"); do
  for spec in "$@"; do
    name=${spec%%=*}; bin=${spec#*=}
    dir=$RUN/$name
    rm -rf "$dir"
    start_server "$name" "$bin" "$dir" taskset -c 0 || exit 1
    c0=$(python3 "$HERE/dnsprobe.py" cpu "$PID")
    out=$(taskset -c 1 dnsperf -s 127.0.0.1 -p "$PORT" -d "$DATA/queries.txt" -l "$DUR" -c 8 "${rate[@]}" 2>&1)
    c1=$(python3 "$HERE/dnsprobe.py" cpu "$PID")
    stop_server "$dir"
    done_q=$(echo "$out" | awk '/Queries completed:/{print $3}')
    qps=$(echo "$out" | awk '/Queries per second:/{print $4}')
    echo "$name,$rep,$done_q,$((c1 - c0)),$(python3 -c "print(round(($c1 - $c0) * 10000 / $done_q, 3))"),$qps"
  done
done
