#!/usr/bin/env bash
# Response rate limiting, measured (not in CI):
#   1. a "spoofed" flood from 127.0.0.1 (one /24) at FLOOD_QPS while a client in another /24
#      (127.0.1.1) asks at 100 a second: responses and bytes the flood gets back per second,
#      against --rrl-rate, and the other client's answers;
#   2. CPU per query at a fixed 20,000 queries a second with RRL off, and on with a rate so
#      high nothing is limited (the bookkeeping alone), interleaved, REPS times.
#
#   bench/rrl.sh [REPS] [RATE] [FLOOD_QPS]      # defaults: 3, 100, 50000
#
# meshdns (target/release) on core 0 with one UDP socket, dnsperf on core 1. Loopback only.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
REPS=${1:-3}
RATE=${2:-100}
FLOOD_QPS=${3:-50000}
MESHDNS=${MESHDNS:-$ROOT/target/release/meshdns}
RUN=${RUN:-/tmp/meshdns-bench-rrl}
PROBE="python3 $HERE/dnsprobe.py"
rm -rf "$RUN"; mkdir -p "$RUN"
cat > "$RUN/zone" <<'Z'
$ORIGIN bench.test.
$TTL 300
@ SOA ns1 hostmaster 1 3600 600 86400 60
@ NS ns1
ns1 A 192.0.2.53
www A 192.0.2.1
www AAAA 2001:db8::1
Z
printf 'www.bench.test A\nwww.bench.test AAAA\nnope.bench.test A\n' > "$RUN/queries"

serve() { # serve EXTRA_ARGS... ; sets PID
  taskset -c 0 "$MESHDNS" serve --zone-file "bench.test.=$RUN/zone" --listen 127.0.0.1:5310 \
    --http 127.0.0.1:5311 --udp-sockets 1 --workers 1 --log-level warn "$@" > "$RUN/out.log" 2>&1 &
  PID=$!
  $PROBE wait 5310 bench.test. SOA 10 > /dev/null
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; }

for SLIP in 2 0; do
echo "## Flood from one /24 at $FLOOD_QPS q/s for 10 s, --rrl-rate $RATE --rrl-slip $SLIP; another /24 at 100 q/s"
serve --rrl-rate "$RATE" --rrl-slip "$SLIP"
taskset -c 1 dnsperf -a 127.0.1.1 -s 127.0.0.1 -p 5310 -d "$RUN/queries" -l 10 -Q 100 -t 1 \
  > "$RUN/other.txt" 2>&1 &
OTHER=$!
taskset -c 1 dnsperf -a 127.0.0.1 -s 127.0.0.1 -p 5310 -d "$RUN/queries" -l 10 -c 4 -q 50000 -Q "$FLOOD_QPS" -t 1 \
  > "$RUN/flood.txt" 2>&1
wait $OTHER
curl -s 127.0.0.1:5311/metrics > "$RUN/metrics.txt"
stop
python3 - "$RUN/flood.txt" "$RUN/other.txt" "$RUN/metrics.txt" "$RATE" <<'PY'
import re, sys
def read(path):
    t = open(path).read()
    g = lambda pat: float(re.search(pat, t).group(1))
    return dict(sent=g(r"Queries sent:\s+(\d+)"), done=g(r"Queries completed:\s+(\d+)"),
                lost=g(r"Queries lost:\s+(\d+)"), req=g(r"Average packet size:\s+request (\d+)"),
                resp=g(r"Average packet size:.*response (\d+)"))
f, o = read(sys.argv[1]), read(sys.argv[2])
m = open(sys.argv[3]).read()
metric = lambda pat: sum(float(x) for x in re.findall(pat + r" (\d+)", m))
slipped = metric(r'meshdns_rrl_responses_total\{action="slipped"\}')
full = f["done"] - slipped
q = f["req"]
print(f"flood: {f['sent']:.0f} queries sent ({f['sent']*q/10/1024:.0f} KiB/s in); "
      f"{full:.0f} full answers ({full/10:.0f}/s; the limit: {sys.argv[4]}/s per bucket, "
      f"2 buckets here, plus one second's burst each); {slipped:.0f} truncated replies "
      f"({slipped/10:.0f}/s, each the size of its query: the question only)")
print(f"bytes out to the flooding /24: {f['done']*f['resp']/10/1024:.1f} KiB/s (dnsperf's mean "
      f"response size {f['resp']:.0f} B), against {f['sent']*q/10/1024:.0f} KiB/s of queries in")
print(f"other /24: {o['sent']:.0f} sent, {o['done']:.0f} answered, {o['lost']:.0f} lost")
PY
done

[ "${SKIP_CPU:-0}" = 1 ] && exit 0
echo "## CPU per query at 20,000 q/s: RRL off vs on (rate 10^6, nothing limited)"
for rep in $(seq 1 "$REPS"); do
  for mode in off on; do
    if [ $mode = on ]; then serve --rrl-rate 1000000; else serve; fi
    c0=$($PROBE cpu "$PID")
    taskset -c 1 dnsperf -s 127.0.0.1 -p 5310 -d "$RUN/queries" -l 10 -c 8 -Q 20000 > "$RUN/cpu_$mode.txt" 2>&1
    c1=$($PROBE cpu "$PID")
    done=$(awk '/Queries completed:/{print $3}' "$RUN/cpu_$mode.txt")
    python3 -c "print(f'rrl $mode rep $rep: {($c1-$c0)/100/$done*1e6:.2f} us per query ({$done} answered)')"
    stop
  done
done
