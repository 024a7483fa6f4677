#!/usr/bin/env bash
# Encrypted transports: server CPU per answered query over UDP, DoT and DoH (HTTP/2 over TLS),
# meshdns beside iroh-dns-server (whose DoH is its only encrypted transport), on the same
# published names.
#
#   bench/tls.sh [REPS] [QPS]      # defaults: 3 repetitions, 5000 queries a second offered
#
# Both servers get the same M (IROH_M, 10000) pkarr packets signed by iroh_publish.py over
# HTTP, then dnsperf (-m udp|dot|doh, 8 connections) sends queries_iroh_pkarr.txt (85% TXT hits,
# 10% NXDOMAIN, 5% NODATA) at a fixed rate for DURATION (10) seconds. The figure is the
# server's utime+stime over the run divided by the queries answered: at a fixed offered rate
# it ranks servers by what they spend, not by how fast one dnsperf process can push. Each server
# is pinned to core 0 with one worker, dnsperf to core 1; runs interleave servers (A B A B).
# Certificates: both self-signed P-256 (meshdns --tls-self-signed, iroh-dns-server
# cert_mode = "self_signed"); dnsperf does not verify them. Connections are opened once per
# run, so handshakes are amortised: this measures the transport's per-query cost.
# Needs: target/release/meshdns, iroh-dns-server (cargo install iroh-dns-server --locked),
# dnsperf (apt). Loopback only.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
REPS=${1:-3}
QPS=${2:-5000}
M=${IROH_M:-10000}
DURATION=${DURATION:-10}
CLIENTS=${CLIENTS:-8}
MESHDNS=${MESHDNS:-$ROOT/target/release/meshdns}
IROH=${IROH:-$(command -v iroh-dns-server || echo "$HOME/.cargo/bin/iroh-dns-server")}
RUN=${RUN:-/tmp/meshdns-bench-tls}
OUT=${OUT:-$RUN/results}
PROBE="python3 $HERE/dnsprobe.py"

rm -rf "$RUN"; mkdir -p "$RUN/iroh" "$RUN/meshdns" "$OUT"
cat > "$RUN/iroh.toml" <<EOF
pkarr_put_rate_limit = "disabled"
data_dir = "$RUN/iroh/data"
[http]
port = 5380
bind_addr = "127.0.0.1"
[https]
port = 5443
bind_addr = "127.0.0.1"
domains = ["localhost"]
cert_mode = "self_signed"
[dns]
port = 5305
bind_addr = "127.0.0.1"
default_soa = "ns1.bench.test. hostmaster.bench.test. 1 7200 3600 1209600 300"
default_ttl = 300
origins = ["bench.test.", "."]
rr_a = "127.0.0.1"
rr_ns = "ns1.bench.test."
[metrics]
disabled = true
[mainline]
enabled = false
EOF

(cd "$RUN/iroh" && TOKIO_WORKER_THREADS=1 RUST_LOG=warn taskset -c 0 "$IROH" -c "$RUN/iroh.toml" > "$RUN/iroh/out.log" 2>&1) &
IROH_PID=$!
taskset -c 0 "$MESHDNS" serve --pkarr bench.test. --data-dir "$RUN/meshdns/data" \
  --listen 127.0.0.1:5306 --http 127.0.0.1:5381 --https 127.0.0.1:5444 --dot 127.0.0.1:5853 \
  --tls-self-signed --udp-sockets 1 --workers 1 --log-level warn > "$RUN/meshdns/out.log" 2>&1 &
MESHDNS_PID=$!
trap 'kill $IROH_PID $MESHDNS_PID 2>/dev/null || true' EXIT
$PROBE wait 5305 bench.test. SOA 30 > /dev/null
$PROBE wait 5306 bench.test. SOA 30 > /dev/null
# iroh-dns-server's process is the child of the subshell.
IROH_SERVER=$(pgrep -P "$IROH_PID" -f iroh-dns-server || echo "$IROH_PID")

python3 "$HERE/iroh_publish.py" "$M" 5380 "$RUN/q" > "$RUN/publish-iroh.log"
python3 "$HERE/iroh_publish.py" "$M" 5381 "$RUN/q" > "$RUN/publish-meshdns.log"
QUERIES=$RUN/q/queries_iroh_pkarr.txt

run() { # run SERVER PID MODE PORT REP
  local name=$1 pid=$2 mode=$3 port=$4 rep=$5 extra=() f
  case $mode in
    doh) extra=(-O "doh-uri=https://127.0.0.1:$port/dns-query" -O doh-method=POST) ;;
  esac
  f="$OUT/${name}_${mode}_$rep.txt"
  local c0 c1
  c0=$($PROBE cpu "$pid")
  taskset -c 1 dnsperf -m "$mode" -s 127.0.0.1 -p "$port" -d "$QUERIES" -l "$DURATION" \
    -c "$CLIENTS" -Q "$QPS" "${extra[@]}" > "$f" 2>&1
  c1=$($PROBE cpu "$pid")
  local done qps
  done=$(awk '/Queries completed:/{print $3}' "$f")
  qps=$(awk '/Queries per second:/{print $4}' "$f")
  # cpu() reports clock ticks (1/100 s).
  python3 -c "
c=($c1-$c0)/100; d=int('$done' or 0)
print(f'$name,$mode,$rep,{d},$qps,{c:.2f},{(c/d*1e6 if d else 0):.1f}')" | tee -a "$OUT/tls.csv"
}

echo "server,transport,rep,answered,qps,cpu_s,cpu_us_per_query" | tee "$OUT/tls.csv"
for rep in $(seq 1 "$REPS"); do
  run meshdns "$MESHDNS_PID" udp 5306 "$rep"
  run iroh "$IROH_SERVER" udp 5305 "$rep"
  run meshdns "$MESHDNS_PID" dot 5853 "$rep"
  run meshdns "$MESHDNS_PID" doh 5444 "$rep"
  run iroh "$IROH_SERVER" doh 5443 "$rep"
done
python3 - "$OUT/tls.csv" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
groups = {}
for r in rows:
    groups.setdefault((r["server"], r["transport"]), []).append(r)
print("\n| server | transport | answered/s | CPU per query (median) | runs |")
print("| --- | --- | --- | --- | --- |")
for (server, transport), rs in groups.items():
    qps = statistics.median(float(r["qps"] or 0) for r in rs)
    us = statistics.median(float(r["cpu_us_per_query"]) for r in rs)
    print(f"| {server} | {transport} | {qps:,.0f} | {us:.1f} µs | {len(rs)} |")
EOF
