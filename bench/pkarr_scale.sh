#!/usr/bin/env bash
# pkarr at scale: meshdns and iroh-dns-server side by side on the same pre-signed packets.
#
#   bench/pkarr_scale.sh N [SERVERS]     # N stored endpoints (100000, 1000000); SERVERS
#                                        # default "meshdns iroh"
#
# For each server, on one core (taskset -c 0; the client on core 1):
#   1. fill:   PUT N pre-signed packets as fast as they are acknowledged (64 connections):
#              PUT/s achieved and server CPU µs per accepted PUT
#   2. restart: stop (SIGTERM), count the acknowledged publishes that are gone (GET), start
#              again over the same data, and time start → a stored key answered over DNS
#              (meshdns binds DNS only once every stored packet is loaded); RSS once answering
#   3. stream: 30,000 re-publishes of stored endpoints it has not seen (newer packets) offered
#              at 1,000 PUT/s; publish → answer latency (PUT sent → a DNS answer holding the new
#              packet's content), and server CPU µs per accepted PUT
#   4. queries: dnsperf at a fixed 20,000 q/s on published names (pkarr) for 10 s; server CPU
#              µs per query. Server `meshdns-zonefile` serves the same names and records from a
#              zone file instead (steps 2 and 4 only): the baseline for pkarr names' CPU per query.
# REUSE=1 keeps a data directory filled by an earlier run and skips step 1. EXTRA adds flags
# to `meshdns serve` (say EXTRA="--pkarr-commit-window 2ms").
# Results: $OUT/pkarr_scale_N.txt (default OUT=/tmp/meshdns-bench-out).
#
# Needs: a release build (cargo build --release --bin meshdns --example pkarr_load -p
# meshdns-sources ... see docs/BENCHMARKS.md), iroh-dns-server (cargo install
# iroh-dns-server --locked), dnsperf (apt). Loopback only.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
N=${1:?N stored endpoints}
SERVERS=${2:-meshdns iroh}
STREAM=${STREAM:-30000}
RATE=${RATE:-1000}
MESHDNS=${MESHDNS:-$ROOT/target/release/meshdns}
LOAD=${LOAD:-$ROOT/target/release/examples/pkarr_load}
IROH=${IROH:-$(command -v iroh-dns-server || echo "$HOME/.cargo/bin/iroh-dns-server")}
DATA=${DATA:-/tmp/meshdns-bench-data/pkarr}
RUN=${RUN:-/tmp/meshdns-bench-run/pkarr}
OUT=${OUT:-/tmp/meshdns-bench-out}
mkdir -p "$DATA" "$OUT"
RESULT="$OUT/pkarr_scale_$N.txt"
: > "$RESULT"
say() { echo "$*" | tee -a "$RESULT"; }

# Pre-signed packets: N endpoints (version 1), and the stream's re-publishes (version 2).
[ -s "$DATA/v1_$N.bin" ] || "$LOAD" sign "$N" 1 "$DATA/v1_$N.bin"
# Signed now, so they are newer than anything stored (a relay refuses older packets with 409).
# The version (the addr port) differs from every earlier run's, so an answer tells it apart.
"$LOAD" sign "$STREAM" $(( $(date +%s) % 60000 + 2 )) "$DATA/v2_$STREAM.bin"
# Queries on published names: 90% the TXT of a stored endpoint, 10% unknown keys (NXDOMAIN).
python3 - "$DATA/v1_$N.bin" "$DATA/queries_$N.txt" <<'EOF'
import random, struct, sys
data = open(sys.argv[1], 'rb').read()[2:]
keys, pos = [], 0
while pos < len(data) and len(keys) < 200000:
    keys.append(data[pos:pos+52].decode()); n = struct.unpack('!H', data[pos+52:pos+54])[0]; pos += 54 + n
random.seed(1)
with open(sys.argv[2], 'w') as f:
    for _ in range(200000):
        if random.random() < 0.9: f.write(f"_iroh.{random.choice(keys)}.bench.test. TXT\n")
        else: f.write("_iroh.%s.bench.test. TXT\n" % ''.join(random.choice('ybndrfg8ejkmcpqxot1uwisza345h769') for _ in range(52)))
EOF

if [[ " $SERVERS " == *" meshdns-zonefile "* ]] && [ ! -s "$DATA/zone_$N.zone" ]; then
  python3 - "$DATA/v1_$N.bin" "$DATA/zone_$N.zone" <<'EOF2'
import struct, sys
data = open(sys.argv[1], 'rb').read()[2:]
with open(sys.argv[2], 'w') as f:
    f.write("$ORIGIN bench.test.\n$TTL 300\n@ SOA ns1 hostmaster 1 7200 3600 1209600 300\n@ NS ns1\nns1 A 127.0.0.1\n")
    pos = 0
    while pos < len(data):
        k = data[pos:pos+52].decode(); n = struct.unpack('!H', data[pos+52:pos+54])[0]; pos += 54 + n
        f.write(f'_iroh.{k} 30 TXT "relay=https://relay.example.net./"\n_iroh.{k} 30 TXT "addr=192.0.2.7:1001"\n_iroh.{k} 30 TXT "addr=[2001:db8::7]:4433"\n')
EOF2
fi

rss_kib() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }

start() { # start NAME DIR -> PID
  case $1 in
    meshdns-zonefile) taskset -c 0 "$MESHDNS" serve --zone-file "bench.test.=$DATA/zone_$N.zone" \
               --listen 127.0.0.1:5307 --udp-sockets 1 --workers 1 --log-level warn > "$2.log" 2>&1 & ;;
    # shellcheck disable=SC2086
    meshdns) taskset -c 0 "$MESHDNS" serve --pkarr bench.test. --http 127.0.0.1:5381 --data-dir "$2" \
               --listen 127.0.0.1:5306 --udp-sockets 1 --workers 1 --log-level warn ${EXTRA:-} > "$2.log" 2>&1 & ;;
    iroh) sed -e "s#@RUN@#$2#g" "$HERE/conf/iroh-dns-server.toml" > "$2.toml"
          TOKIO_WORKER_THREADS=1 RUST_LOG=warn taskset -c 0 "$IROH" -c "$2.toml" > "$2.log" 2>&1 & ;;
  esac
  echo $!
}
ports() { case $1 in meshdns-zonefile) echo "- 127.0.0.1:5307";; meshdns) echo "127.0.0.1:5381 127.0.0.1:5306";; iroh) echo "127.0.0.1:5380 127.0.0.1:5305";; esac; }
stop() { kill "$1" 2>/dev/null || true; for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done; kill -9 "$1" 2>/dev/null || true; }

for s in $SERVERS; do
  dir="$RUN/$s-$N"
  fill=1
  if [ "${REUSE:-0}" = 1 ] && [ -d "$dir" ]; then fill=0; else rm -rf "$dir" "$dir.log" "$dir.toml"; mkdir -p "$dir"; fi
  read -r http dns <<< "$(ports "$s")"
  say "== $s, $N endpoints"
  if [ "$s" != meshdns-zonefile ] && [ "$fill" = 1 ]; then
  pid=$(start "$s" "$dir")
  until curl -s -o /dev/null "http://$http/healthz"; do sleep 0.1; done
  say "fill:    $(taskset -c 1 "$LOAD" put "$DATA/v1_$N.bin" "$http" "$dns" bench.test. --conns 64 --pid "$pid")"
  stop "$pid"
  fi
  t0=$(date +%s%N)
  pid=$(start "$s" "$dir")
  ms=$(taskset -c 1 "$LOAD" ready "$dns" bench.test. "$DATA/v1_$N.bin")
  t1=$(date +%s%N)
  [ "$s" != meshdns-zonefile ] && say "lost:    $(taskset -c 1 "$LOAD" missing "$DATA/v1_$N.bin" "$http") of $N acknowledged publishes missing after the restart"
  say "restart: start_to_answer_ms=$(( (t1 - t0) / 1000000 )) (ready probe ${ms} ms) rss_mib=$(( $(rss_kib "$pid") / 1024 ))"
  [ "$s" != meshdns-zonefile ] && say "stream:  $(taskset -c 1 "$LOAD" put "$DATA/v2_$STREAM.bin" "$http" "$dns" bench.test. --rate "$RATE" --conns 64 --check --pid "$pid")"
  c0=$(cpu_ticks "$pid")
  taskset -c 1 dnsperf -s 127.0.0.1 -p "${dns##*:}" -d "$DATA/queries_$N.txt" -l 10 -c 16 -Q 20000 > "$dir.dnsperf" 2>&1
  c1=$(cpu_ticks "$pid")
  done_q=$(awk '/Queries completed:/{print $3}' "$dir.dnsperf")
  say "queries: completed=$done_q $(grep -E 'Queries lost' "$dir.dnsperf" | xargs) server_cpu_us_per_query=$(python3 -c "print(round(($c1-$c0)/100*1e6/max($done_q,1),2))") rss_mib=$(( $(rss_kib "$pid") / 1024 ))"
  say "disk:    $(du -sh "$dir" | cut -f1)"
  stop "$pid"
done
