#!/bin/bash
# meshdns beside the reference authoritative servers, on loopback, one core each.
#
#   bench/run.sh setup                   # install dnsperf/NSD/Knot/BIND, build meshdns + reflector, generate zones
#   bench/run.sh perf [REPS] [SERVERS]   # 100k-host zone: unthrottled full/A mixes, CPU/query at 20k and 100k QPS
#   bench/run.sh load1m [REPS] [SERVERS] # 1M-host zone: load time and memory
#   bench/run.sh pkarr [REPS] [SERVERS]  # pkarr-published names: iroh-dns-server and meshdns
#                                        # (servers iroh, meshdns-pkarr), each fed the same
#                                        # IROH_M (50000) signed packets over HTTP first
#   bench/run.sh negscale [SERVERS]      # negatives-only QPS at 1k / 100k / 1M hosts (cost must not grow)
#   bench/run.sh reload                  # meshdns: 10 reloads of the 1M-host zone under 100k QPS
#   bench/run.sh summary DIR             # markdown tables from a results directory
#
# Servers: meshdns reflector nsd knot bind hickory (zone file); iroh meshdns-pkarr (pkarr);
# meshdns-base: a second meshdns binary ($MESHDNS_BASE, say the last release), run exactly as
# meshdns is, to compare two builds interleaved (`perf 3 meshdns meshdns-base`).
# hickory-dns and iroh-dns-server are built from crates.io by `setup` into $RUN_ROOT/bin.
# Each server runs under `taskset -c 0` with one
# worker; dnsperf runs under `taskset -c 1`. Servers are interleaved per repetition
# (A B C A B C) so drift hits all alike. Results: $OUT/runs.csv, $OUT/load.csv.
# Env: DATA_ROOT (/tmp/meshdns-bench-data), RUN_ROOT (/tmp/meshdns-bench-run),
#      OUT (/tmp/meshdns-bench-results/<time>), DURATION (10 s), CLIENTS (8), MESHDNS (binary),
#      MESHDNS_BASE (the binary of meshdns-base).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
DATA_ROOT=${DATA_ROOT:-/tmp/meshdns-bench-data}
RUN_ROOT=${RUN_ROOT:-/tmp/meshdns-bench-run}
OUT=${OUT:-/tmp/meshdns-bench-results/$(date +%Y%m%d-%H%M%S)}
DURATION=${DURATION:-10}
CLIENTS=${CLIENTS:-8}
MESHDNS=${MESHDNS:-$ROOT/target/release/meshdns}
REFLECTOR=${REFLECTOR:-$RUN_ROOT/bin/reflector}
PROBE="python3 $HERE/dnsprobe.py"
SERVER_PID=""

port_of() {
  case $1 in nsd) echo 5301;; knot) echo 5302;; bind) echo 5303;; hickory) echo 5304;;
             iroh) echo 5305;; meshdns-pkarr) echo 5306;; meshdns) echo 5307;; reflector) echo 5308;;
             meshdns-base) echo 5309;; esac
}

http_port_of() { # the pkarr relay's HTTP port
  case $1 in iroh) echo 5380;; meshdns-pkarr) echo 5381;; esac
}

render() { sed -e "s#@DATA@#$2#g" -e "s#@RUN@#$3#g" "$HERE/conf/$1"; }

start_server() { # start_server NAME DATADIR ; sets SERVER_PID, START_NS
  local name=$1 data=$2 r="$RUN_ROOT/$1"
  if ss -Hlun "sport = :$(port_of "$name")" | grep -q .; then
    echo "port $(port_of "$name") already in use; refusing to start $name" >&2; exit 1
  fi
  rm -rf "$r"; mkdir -p "$r/db" "$r/data"
  START_NS=$(date +%s%N)
  case $name in
    meshdns|meshdns-base)
          local bin=$MESHDNS; [ "$name" = meshdns-base ] && bin=${MESHDNS_BASE:?set MESHDNS_BASE}
          taskset -c 0 "$bin" serve --zone-file "bench.test.=$data/bench.test.zone" \
                --listen "127.0.0.1:$(port_of "$name")" --udp-sockets 1 --workers 1 --log-level warn > "$r/out.log" 2>&1 & ;;
    reflector) taskset -c 0 "$REFLECTOR" 5308 > "$r/out.log" 2>&1 & ;;
    nsd)  render nsd.conf "$data" "$r" > "$r/nsd.conf"; taskset -c 0 nsd -d -c "$r/nsd.conf" > "$r/out.log" 2>&1 & ;;
    knot) render knot.conf "$data" "$r" > "$r/knot.conf"; taskset -c 0 knotd -c "$r/knot.conf" > "$r/out.log" 2>&1 & ;;
    bind) render named.conf "$data" "$r" > "$r/named.conf"; taskset -c 0 named -g -4 -n 1 -c "$r/named.conf" > "$r/out.log" 2>&1 & ;;
    hickory) render hickory.toml "$data" "$r" > "$r/hickory.toml"
          taskset -c 0 "$RUN_ROOT/bin/hickory-dns" --workers 1 -q -c "$r/hickory.toml" > "$r/out.log" 2>&1 & ;;
    iroh) render iroh-dns-server.toml "$data" "$r" > "$r/iroh.toml"
          TOKIO_WORKER_THREADS=1 RUST_LOG=warn taskset -c 0 "$RUN_ROOT/bin/iroh-dns-server" -c "$r/iroh.toml" > "$r/out.log" 2>&1 & ;;
    meshdns-pkarr) taskset -c 0 "$MESHDNS" serve --pkarr bench.test. --http 127.0.0.1:5381 --data-dir "$r/data" \
                --listen 127.0.0.1:5306 --udp-sockets 1 --workers 1 --log-level warn > "$r/out.log" 2>&1 & ;;
  esac
  SERVER_PID=$!
}

stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill "$SERVER_PID" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null
  SERVER_PID=""; sleep 0.5
}

wait_ready() { # wait_ready NAME DATADIR TIMEOUT -> seconds from start to first answer
  if [ "$1" = reflector ]; then sleep 0.3; echo 0; return; fi
  case $1 in iroh|meshdns-pkarr)
    START_NS=$START_NS $PROBE wait "$(port_of "$1")" bench.test. SOA "$3"; return;; esac
  START_NS=$START_NS $PROBE wait "$(port_of "$1")" "$(awk '/last_iroh/{print $2}' "$2/names.txt")" TXT "$3"
}

dnsperf_run() { # dnsperf_run NAME REP MIX QUERYFILE QPS(0=max)
  local name=$1 rep=$2 mix=$3 qf=$4 qps=$5 port; port=$(port_of "$1")
  local qarg=""; [ "$qps" != 0 ] && qarg="-Q $qps"
  local tag="${name}_${mix}_q${qps}_r${rep}" f c0 c1 t0 t1
  f="$OUT/dnsperf_$tag.txt"
  c0=$($PROBE cpu "$SERVER_PID"); t0=$(date +%s%N)
  # shellcheck disable=SC2086
  taskset -c 1 dnsperf -s 127.0.0.1 -p "$port" -d "$qf" -l "$DURATION" -c "$CLIENTS" $qarg > "$f" 2>&1
  c1=$($PROBE cpu "$SERVER_PID"); t1=$(date +%s%N)
  local cpu_pct; cpu_pct=$(python3 -c "print(round(($c1-$c0)/100/(($t1-$t0)/1e9)*100,1))")
  local sent lost qpsv avg max rss
  sent=$(awk '/Queries sent:/{print $3}' "$f"); lost=$(awk '/Queries lost:/{print $3}' "$f")
  qpsv=$(awk '/Queries per second:/{print $4}' "$f"); avg=$(awk '/Average Latency/{print $4}' "$f")
  max=$(sed -n 's/.*Average Latency.*max \([0-9.]*\)).*/\1/p' "$f"); rss=$($PROBE mem "$SERVER_PID")
  echo "$name,$rep,$mix,$qps,$sent,$qpsv,$avg,$max,$lost,$cpu_pct,${rss// /,}" >> "$OUT/runs.csv"
  echo "  $tag qps=$qpsv avg=$avg max=$max lost=$lost server_cpu=$cpu_pct% rss/pss/nproc=$rss"
  sleep 1
}

perf_one() {
  local name=$1 rep=$2 data="$DATA_ROOT/n100k"
  start_server "$name" "$data"
  local lt; lt=$(wait_ready "$name" "$data" 300); local mem; mem=$($PROBE mem "$SERVER_PID")
  echo "$name,$rep,n100k,$lt,${mem// /,}" >> "$OUT/load.csv"
  echo "[$name rep $rep] ready after ${lt}s rss/pss/nproc=$mem"
  dnsperf_run "$name" "$rep" full "$data/queries.txt" 0
  dnsperf_run "$name" "$rep" a "$data/queries_a.txt" 0
  # hickory-dns answers the full mix at a few hundred queries a second (it scans the zone for
  # every negative answer), under either fixed rate: those runs would only measure its backlog.
  if [ "$name" != hickory ]; then
    dnsperf_run "$name" "$rep" full "$data/queries.txt" 20000
    dnsperf_run "$name" "$rep" full "$data/queries.txt" 100000
  fi
  stop_server
}

pkarr_one() { # pkarr_one NAME REP: publish IROH_M packets over HTTP, then query them
  local name=$1 rep=$2 m=${IROH_M:-50000}
  start_server "$name" "$DATA_ROOT/n100k"
  local lt; lt=$(wait_ready "$name" "" 60)
  local t0; t0=$(date +%s%N)
  python3 "$HERE/iroh_publish.py" "$m" "$(http_port_of "$name")" "$DATA_ROOT/iroh" --threads 8 \
      > "$OUT/publish_${name}_r$rep.txt" 2>&1
  # Published names become answerable once the store's write (iroh) or snapshot (meshdns) lands.
  START_NS=$t0 $PROBE wait "$(port_of "$name")" "$(awk '/last_iroh/{print $2}' "$DATA_ROOT/iroh/names_iroh.txt")" TXT 120 \
      > "$OUT/publish_${name}_r$rep.ready"
  local pub; pub=$(cat "$OUT/publish_${name}_r$rep.ready"); local mem; mem=$($PROBE mem "$SERVER_PID")
  echo "$name,$rep,pkarr$m,$pub,${mem// /,}" >> "$OUT/load.csv"
  echo "[$name rep $rep] ready after ${lt}s; $m packets published and answerable after ${pub}s rss/pss/nproc=$mem"
  dnsperf_run "$name" "$rep" pkarr "$DATA_ROOT/iroh/queries_iroh_pkarr.txt" 0
  dnsperf_run "$name" "$rep" pkarr "$DATA_ROOT/iroh/queries_iroh_pkarr.txt" 20000
  stop_server
}

load1m_one() {
  local name=$1 rep=$2 data="$DATA_ROOT/n1m"
  start_server "$name" "$data"
  local lt; lt=$(wait_ready "$name" "$data" 590); local mem; mem=$($PROBE mem "$SERVER_PID")
  echo "$name,$rep,n1m,$lt,${mem// /,}" >> "$OUT/load.csv"
  echo "[$name rep $rep n1m] ready after ${lt}s rss/pss/nproc=$mem"
  stop_server
}

negscale_one() { # negatives-only at three zone sizes, same query file shape per size
  local name=$1
  for size in n1k n100k n1m; do
    local data="$DATA_ROOT/$size"
    start_server "$name" "$data"; wait_ready "$name" "$data" 590 >/dev/null
    dnsperf_run "$name" 1 "neg_$size" "$data/queries_neg.txt" 0
    stop_server
  done
}

reload_test() { # 10 reloads of the 1M-host zone while dnsperf sends 100k QPS
  local data="$DATA_ROOT/n1m" r="$RUN_ROOT/reload" port=5309
  rm -rf "$r"; mkdir -p "$r"
  cp "$data/bench.test.zone" "$r/a.zone"
  sed '0,/ SOA /s/\( SOA [^ ]* [^ ]* \)1 /\12 /' "$data/bench.test.zone" > "$r/b.zone"
  cp "$r/a.zone" "$r/bench.test.zone"
  START_NS=$(date +%s%N)
  taskset -c 0 "$MESHDNS" serve --zone-file "bench.test.=$r/bench.test.zone" --listen 127.0.0.1:$port \
      --udp-sockets 1 --workers 1 --log-level info > "$r/out.log" 2>&1 &
  SERVER_PID=$!
  START_NS=$START_NS $PROBE wait $port "$(awk '/last_iroh/{print $2}' "$data/names.txt")" TXT 590 >/dev/null
  taskset -c 1 dnsperf -s 127.0.0.1 -p $port -d "$DATA_ROOT/n100k/queries.txt" -l 600 -c "$CLIENTS" -Q 100000 \
      > "$OUT/dnsperf_reload.txt" 2>&1 &
  local perf=$!
  sleep 5
  for k in $(seq 1 10); do
    local src=b; [ $((k % 2)) = 0 ] && src=a
    local t0; t0=$(date +%s%N)
    cp "$r/$src.zone" "$r/next.zone" && mv "$r/next.zone" "$r/bench.test.zone"
    until [ "$(grep -c 'snapshot published' "$r/out.log")" -gt "$k" ]; do sleep 0.05; done
    echo "  reload $k: published after $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$OUT/reload.txt"
  done
  sleep 5
  kill -INT $perf; wait $perf
  grep -E "Queries (sent|completed|lost)|Response codes|Queries per second" "$OUT/dnsperf_reload.txt" | tee -a "$OUT/reload.txt"
  stop_server
}

setup() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq dnsperf nsd knot bind9 dnsutils knot-dnsutils valgrind >/dev/null
  for svc in nsd knot named bind9; do systemctl stop "$svc" 2>/dev/null || service "$svc" stop 2>/dev/null || true; done
  (cd "$ROOT" && cargo build --release -p meshdns)
  mkdir -p "$RUN_ROOT/bin"; cc -O2 -o "$REFLECTOR" "$HERE/reflector.c"
  # The two Rust reference servers, at the versions the shared figures were measured with.
  [ -x "$RUN_ROOT/bin/hickory-dns" ] || cargo install --locked --root "$RUN_ROOT" hickory-dns
  [ -x "$RUN_ROOT/bin/iroh-dns-server" ] || cargo install --locked --root "$RUN_ROOT" iroh-dns-server
  python3 -c 'import cryptography' 2>/dev/null || apt-get install -y -qq python3-cryptography >/dev/null
  python3 "$HERE/iroh_publish.py" "${IROH_M:-50000}" 0 "$DATA_ROOT/iroh" --no-publish
  python3 "$HERE/gen_zone.py" 1000 "$DATA_ROOT/n1k"
  python3 "$HERE/gen_zone.py" 100000 "$DATA_ROOT/n100k"
  python3 "$HERE/gen_zone.py" 1000000 "$DATA_ROOT/n1m"
}

trap 'stop_server' EXIT
cmd=${1:-perf}; shift || true
case $cmd in
  setup) setup ;;
  summary) exec python3 "$HERE/summarize.py" "$@" ;;
  perf|load1m|pkarr)
    mkdir -p "$OUT" "$RUN_ROOT"
    reps=${1:-3}; shift || true
    default="meshdns reflector nsd knot bind hickory"; [ "$cmd" = pkarr ] && default="meshdns-pkarr iroh"
    servers=${*:-$default}
    for rep in $(seq 1 "$reps"); do
      for s in $servers; do
        case $cmd in perf) perf_one "$s" "$rep";; load1m) load1m_one "$s" "$rep";; pkarr) pkarr_one "$s" "$rep";; esac
      done
    done
    echo "results in $OUT" ;;
  reload)
    mkdir -p "$OUT" "$RUN_ROOT"; reload_test; echo "results in $OUT" ;;
  negscale)
    mkdir -p "$OUT" "$RUN_ROOT"
    for s in ${*:-meshdns nsd knot}; do negscale_one "$s"; done
    echo "results in $OUT" ;;
esac
