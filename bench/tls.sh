#!/usr/bin/env bash
# Encrypted transports: server CPU per answered query over UDP, DoT and DoH (HTTP/2 over TLS),
# meshdns beside iroh-dns-server (whose DoH is its only encrypted transport), on the same
# published names.
#
#   bench/tls.sh [REPS] [QPS]      # defaults: 3 repetitions, 5000 queries a second offered
#
# Both servers get the same M (IROH_M, 10000) pkarr packets signed by iroh_publish.py over
# HTTP, then dnsperf (-m udp|dot, 8 connections) sends queries_iroh_pkarr.txt (85% TXT hits,
# 10% NXDOMAIN, 5% NODATA) at a fixed rate for DURATION (10) seconds, and curl sends DOH_N
# (20000) DoH queries of the same mix as fast as 32 streams go (see below). The figure is the
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

# taskset execs the server, so $! is the server's own pid (its CPU is what is read).
cd "$RUN/iroh"
TOKIO_WORKER_THREADS=1 RUST_LOG=warn taskset -c 0 "$IROH" -c "$RUN/iroh.toml" > "$RUN/iroh/out.log" 2>&1 &
IROH_PID=$!
cd "$ROOT"
taskset -c 0 "$MESHDNS" serve --pkarr bench.test. --data-dir "$RUN/meshdns/data" \
  --listen 127.0.0.1:5306 --http 127.0.0.1:5381 --https 127.0.0.1:5444 --dot 127.0.0.1:5853 \
  --tls-self-signed --udp-sockets 1 --workers 1 --log-level warn > "$RUN/meshdns/out.log" 2>&1 &
MESHDNS_PID=$!
trap 'kill $IROH_PID $MESHDNS_PID 2>/dev/null || true' EXIT
$PROBE wait 5305 bench.test. SOA 30 > /dev/null
$PROBE wait 5306 bench.test. SOA 30 > /dev/null

python3 "$HERE/iroh_publish.py" "$M" 5380 "$RUN/q" > "$RUN/publish-iroh.log"
python3 "$HERE/iroh_publish.py" "$M" 5381 "$RUN/q" > "$RUN/publish-meshdns.log"
QUERIES=$RUN/q/queries_iroh_pkarr.txt

# DoH load: dnsperf 2.10's DoH client loses most queries once more than one is outstanding on
# a connection, against meshdns and iroh-dns-server alike (both hyper; curl multiplexes
# against them without a loss), so DoH is driven by curl: DOH_N GETs of the same query mix
# (?dns=, RFC 8484), HTTP/2, multiplexed over one connection, 32 in flight.
DOH_N=${DOH_N:-20000}
python3 - "$QUERIES" "$DOH_N" "$RUN/doh-paths.txt" <<'EOF2'
import base64, struct, sys
types = {"A": 1, "NS": 2, "SOA": 6, "TXT": 16, "AAAA": 28}
lines = [l.split() for l in open(sys.argv[1]) if l.strip()]
n = int(sys.argv[2])
with open(sys.argv[3], "w") as out:
    for i in range(n):
        name, qtype = lines[i % len(lines)]
        q = struct.pack(">HHHHHH", 0, 0, 1, 0, 0, 0)
        for label in name.rstrip(".").split("."):
            q += bytes([len(label)]) + label.encode()
        q += b"\0" + struct.pack(">HH", types[qtype], 1)
        out.write("/dns-query?dns=" + base64.urlsafe_b64encode(q).decode().rstrip("=") + "\n")
EOF2

run() { # run SERVER PID MODE PORT REP
  local name=$1 pid=$2 mode=$3 port=$4 rep=$5 f
  f="$OUT/${name}_${mode}_$rep.txt"
  local c0 c1 t0 t1
  c0=$($PROBE cpu "$pid"); t0=$(date +%s%N)
  if [ "$mode" = doh ]; then
    sed "s#^#url = \"https://127.0.0.1:$port#; s#\$#\"\noutput = \"/dev/null\"#" "$RUN/doh-paths.txt" > "$RUN/curl.cfg"
    # iroh-dns-server answers 406 without the Accept header RFC 8484 §4.1 says clients send.
    taskset -c 1 curl -sk --http2 --parallel --parallel-max 32 -K "$RUN/curl.cfg" \
      -H 'Accept: application/dns-message' -w '%{http_code}\n' > "$f" 2>/dev/null
  else
    taskset -c 1 dnsperf -m "$mode" -s 127.0.0.1 -p "$port" -d "$QUERIES" -l "$DURATION" \
      -c "$CLIENTS" -Q "$QPS" > "$f" 2>&1
  fi
  c1=$($PROBE cpu "$pid"); t1=$(date +%s%N)
  local done qps
  if [ "$mode" = doh ]; then
    done=$(grep -c '^200$' "$f" || true)
    qps=$(python3 -c "print(round($done/(($t1-$t0)/1e9)))")
  else
    done=$(awk '/Queries completed:/{print $3}' "$f")
    qps=$(awk '/Queries per second:/{print $4}' "$f")
  fi
  # cpu() reports clock ticks (1/100 s).
  python3 -c "
c=($c1-$c0)/100; d=int('$done' or 0)
print(f'$name,$mode,$rep,{d},$qps,{c:.2f},{(c/d*1e6 if d else 0):.1f}')" | tee -a "$OUT/tls.csv"
}

echo "server,transport,rep,answered,qps,cpu_s,cpu_us_per_query" | tee "$OUT/tls.csv"
for rep in $(seq 1 "$REPS"); do
  run meshdns "$MESHDNS_PID" udp 5306 "$rep"
  run iroh "$IROH_PID" udp 5305 "$rep"
  run meshdns "$MESHDNS_PID" dot 5853 "$rep"
  run meshdns "$MESHDNS_PID" doh 5444 "$rep"
  run iroh "$IROH_PID" doh 5443 "$rep"
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
