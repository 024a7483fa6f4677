#!/usr/bin/env bash
# CPU time per answered query, interleaved: each server in turn answers the `full` mix at a
# fixed offered rate for DUR seconds, REPS times (A B C A B C), server on core 0, dnsperf on
# core 1, CPU read from /proc (bench/dnsprobe.py). Noisy on a shared VM (±12% per run): use
# bench/instructions.sh to tell small differences apart.
#
#   bench/cpu_per_query.sh NAME=BINARY... [nsd]
#   REPS=3 QPS=50000 DUR=8 bench/cpu_per_query.sh head=target/release/meshdns base=/tmp/base/meshdns nsd
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=${DATA_ROOT:-/tmp/meshdns-bench-data}/n100k
REPS=${REPS:-3}; QPS=${QPS:-50000}; DUR=${DUR:-8}; PORT=${PORT:-5399}
RUN=${RUN:-/tmp/meshdns-bench-cpq}
[ $# -gt 0 ] || { sed -n 2,9p "$0"; exit 2; }
[ -f "$DATA/queries.txt" ] || python3 "$HERE/gen_zone.py" 100000 "$DATA" >&2
mkdir -p "$RUN"
cpu() { python3 "$HERE/dnsprobe.py" cpu "$1"; }
start() { # start NAME BINARY: sets PID
  case $1 in
    nsd) sed -e "s#@DATA@#$DATA#g" -e "s#@RUN@#$RUN/nsd#g" -e "s#@5301#@$PORT#" "$HERE/conf/nsd.conf" > "$RUN/nsd.conf"
         rm -rf "$RUN/nsd"; mkdir -p "$RUN/nsd"
         taskset -c 0 nsd -d -c "$RUN/nsd.conf" > "$RUN/nsd.log" 2>&1 & PID=$! ;;
    *) taskset -c 0 "$2" serve --zone-file "bench.test.=$DATA/bench.test.zone" --listen "127.0.0.1:$PORT" \
         --udp-sockets 1 --workers 1 --log-level warn > "$RUN/$1.log" 2>&1 & PID=$! ;;
  esac
  for _ in $(seq 100); do dig +short +time=1 +tries=1 @127.0.0.1 -p "$PORT" bench.test SOA > /dev/null 2>&1 && break; sleep 0.2; done
}
echo "server,rep,completed,cpu_ticks,us_per_query"
for rep in $(seq "$REPS"); do
  for spec in "$@"; do
    name=${spec%%=*}; bin=${spec#*=}
    start "$name" "$bin"
    c0=$(cpu "$PID")
    out=$(taskset -c 1 dnsperf -s 127.0.0.1 -p "$PORT" -d "$DATA/queries.txt" -l "$DUR" -c 8 -Q "$QPS" 2>&1)
    c1=$(cpu "$PID"); kill "$PID"; wait "$PID" 2> /dev/null
    done_q=$(echo "$out" | awk '/Queries completed:/{print $3}')
    echo "$name,$rep,$done_q,$((c1 - c0)),$(python3 -c "print(round(($c1 - $c0) * 10000 / $done_q, 3))")"
  done
done
