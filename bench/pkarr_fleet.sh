#!/usr/bin/env bash
# The pkarr relay as a fleet: three meshdns replicas (A, B, C), each with its own data
# directory, peers of each other with the shared token; replicas on core 0, the client on core 1.
#
#   bench/pkarr_fleet.sh N          # N stored endpoints (100000, 1000000)
#
#   1. fill:     N pre-signed packets PUT to A as fast as acknowledged (64 connections); then
#                the time until B and C hold all N (pushed by A)
#   2. stream:   ROUNDS (default 5) rounds of 30,000 re-publishes offered to A at 1,000 PUT/s,
#                each round newer than the last; replication latency over all rounds, A's commit
#                → each peer's acknowledgement (the peer committed it and serves it), p50/p99
#                from A's histogram (the stream's share of it); CPU per publish of A (took it,
#                pushed it to two peers) and of B and C (received it), each round and the
#                median of the rounds (a VM's CPU time varies from run to run by more than the
#                differences measured). CHECK=1 also polls B over DNS after each 204 until it
#                answers the new packet (pkarr_load --answer-dns); the polling then costs B more
#                than the replication
#   3. catch-up: C stopped (SIGTERM), 100,000 re-publishes PUT to A as fast as acknowledged,
#                C started again (on core CATCHUP_CPU, default 1: its own): time from start to
#                /readyz 200 (caught up with A and B) and C's CPU time meanwhile; the last of
#                them on C; and how many of them are not on C. Twice: C's database still in
#                the page cache (a restart in place), then, with 100,000 newer re-publishes,
#                dropped from it first (a replica rescheduled to another node starts cold)
#   4. RSS of each replica, and the data directories' sizes
#   iroh-dns-server (one instance, no replication; IROH=path, found on PATH or in ~/.cargo/bin,
#   skipped when absent), on core 0 beside the replicas: filled with the same packets after
#   step 1, then in step 2 each round of the stream goes to A and then the same packets to it,
#   so that each pair of rounds meets the VM at the same speed (it drifts by more than 5% over
#   minutes); its CPU per publish each round, A's ÷ its each round, and the medians
# REPLICA_CPUS sets the cores of A, B and C for steps 1 and 2 (default "0 0 0": all three on
# core 0, the load client on core 1; "0 1 1" gives A a core of its own, as iroh-dns-server has,
# with B, C and the client sharing the other).
# EXTRA adds flags to every replica (say EXTRA="--pkarr-commit-window 3ms"). SPREAD=1 takes the
# stream's and the missed publishes' keys spread evenly over the N stored (default: the first
# ones, which the fill stored first: republishes in the order keys last published, as iroh's
# periodic republishing makes them; spread, each replaces a packet at a random place in the log).
# Results: $OUT/pkarr_fleet_N.txt (default OUT=/tmp/meshdns-bench-out).
#
# Needs: cargo build --release -p meshdns --bin meshdns --example pkarr_load -p meshdns-sources;
# curl. Loopback only.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
N=${1:?N stored endpoints}
STREAM=${STREAM:-30000}
MISSED=${MISSED:-100000}
RATE=${RATE:-1000}
ROUNDS=${ROUNDS:-5}
# The restarted replica's core in step 3: 1, its own, as a replica on its own node (the load
# client is idle then); 0 shares the core of A and B.
CATCHUP_CPU=${CATCHUP_CPU:-1}
read -r -a REPLICA_CPU <<< "${REPLICA_CPUS:-0 0 0}"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
MESHDNS=${MESHDNS:-$TARGET/release/meshdns}
LOAD=${LOAD:-$TARGET/release/examples/pkarr_load}
DATA=${DATA:-/tmp/meshdns-bench-data/pkarr}
RUN=${RUN:-/tmp/meshdns-bench-run/fleet}
OUT=${OUT:-/tmp/meshdns-bench-out}
IROH=${IROH:-$(command -v iroh-dns-server || echo "$HOME/.cargo/bin/iroh-dns-server")}
mkdir -p "$DATA" "$OUT"
RESULT="$OUT/pkarr_fleet_$N.txt"
: > "$RESULT"
say() { echo "$*" | tee -a "$RESULT"; }

[ -s "$DATA/v1_$N.bin" ] || "$LOAD" sign "$N" 1 "$DATA/v1_$N.bin"
# Signed now, newer than anything stored; versions apart from earlier runs'.
v=$(( $(date +%s) % 30000 + 2 ))
spread=(); [ "${SPREAD:-0}" = 1 ] && spread=(--spread "$N")
for r in $(seq "$ROUNDS"); do
  "$LOAD" sign "$STREAM" $((v + r - 1)) "$DATA/fleet_stream_$r.bin" "${spread[@]}"
done
"$LOAD" sign "$MISSED" $((v + 30000)) "$DATA/fleet_missed.bin" "${spread[@]}"
"$LOAD" sign "$MISSED" $((v + 30001)) "$DATA/fleet_missed_cold.bin" "${spread[@]}"

rm -rf "$RUN"; mkdir -p "$RUN"
openssl rand -hex 32 > "$RUN/token" 2> /dev/null || head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$RUN/token"
HTTP=(5391 5392 5393); DNS=(5394 5395 5396); NAMES=(a b c)
PIDS=()
start() { # start I [extra flags...]: sets PIDS[I]
  local i=$1; shift
  local peers=()
  for j in 0 1 2; do [ "$j" = "$i" ] || peers+=(--pkarr-peer "http://127.0.0.1:${HTTP[$j]}"); done
  taskset -c "${CPU:-${REPLICA_CPU[$i]}}" "$MESHDNS" serve --pkarr bench.test. --data-dir "$RUN/${NAMES[$i]}" \
    --http "127.0.0.1:${HTTP[$i]}" --listen "127.0.0.1:${DNS[$i]}" --udp-sockets 1 --workers 1 \
    --pkarr-peer-token-file "$RUN/token" "${peers[@]}" --log-level info ${EXTRA:-} "$@" \
    >> "$RUN/${NAMES[$i]}.log" 2>&1 &
  PIDS[$i]=$!
  until curl -s -o /dev/null "http://127.0.0.1:${HTTP[$i]}/healthz"; do sleep 0.05; done
}
stop() { kill "${PIDS[$1]}" 2> /dev/null || true; wait "${PIDS[$1]}" 2> /dev/null || true; }
metric() { curl -s "http://127.0.0.1:${HTTP[$1]}/metrics" | awk -v m="$2" '$1 == m {print $2}'; }
rss_mib() { echo $(( $(awk '/VmRSS/{print $2}' "/proc/${PIDS[$1]}/status") / 1024 )); }
cpu_ticks() { awk '{print $14+$15}' "/proc/${PIDS[$1]}/stat"; }
median() { python3 -c 'import statistics, sys; print(round(statistics.median(float(x) for x in sys.argv[1:])))' "$@"; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }
trap 'for i in 0 1 2; do stop $i; done' EXIT

for i in 0 1 2; do start "$i"; done
say "== 3 replicas, $N endpoints ($(git -C "$ROOT" describe --always --dirty)), A, B, C on cores ${REPLICA_CPU[*]}$([ "${SPREAD:-0}" = 1 ] && echo ", republishes spread")"

# 1. fill
t0=$(ms)
say "fill A:    $(taskset -c 1 "$LOAD" put "$DATA/v1_$N.bin" "127.0.0.1:${HTTP[0]}" "127.0.0.1:${DNS[0]}" bench.test. --conns 64 --pid "${PIDS[0]},${PIDS[1]},${PIDS[2]}")"
for i in 1 2; do
  until [ "$(metric "$i" meshdns_pkarr_packets)" = "$N" ]; do sleep 0.2; done
done
say "fill:      B and C hold all $N $(( $(ms) - t0 )) ms after the fill began"

# iroh-dns-server beside them, filled with the same packets
ipid=
if [ -x "$IROH" ]; then
  mkdir -p "$RUN/iroh"
  sed -e "s#@RUN@#$RUN/iroh#g" "$HERE/conf/iroh-dns-server.toml" > "$RUN/iroh.toml"
  TOKIO_WORKER_THREADS=1 RUST_LOG=warn taskset -c 0 "$IROH" -c "$RUN/iroh.toml" > "$RUN/iroh.log" 2>&1 &
  ipid=$!
  trap 'for i in 0 1 2; do stop $i; done; kill "$ipid" 2> /dev/null || true' EXIT
  until curl -s -o /dev/null "http://127.0.0.1:5380/healthz"; do sleep 0.05; done
  say "iroh-dns-server $("$IROH" --version 2> /dev/null | head -1), alone, on core 0 beside the replicas:"
  say "iroh fill:   $(taskset -c 1 "$LOAD" put "$DATA/v1_$N.bin" 127.0.0.1:5380 127.0.0.1:5305 bench.test. --conns 64 --pid "$ipid")"
else
  say "iroh-dns-server: not found (IROH=$IROH); its rounds skipped"
fi

# 2. stream at RATE to A, answered by B
lag() { curl -s "http://127.0.0.1:${HTTP[0]}/metrics" | grep '^meshdns_pkarr_replication_seconds_bucket' > "$1"; }
# The fill's pushes still queued would count in the stream's latencies: wait for them.
for i in 1 2; do
  until [ "$(metric 0 "meshdns_pkarr_peer_queue_depth{peer=\"http://127.0.0.1:${HTTP[$i]}\"}")" = 0 ]; do sleep 0.2; done
done
sleep 1
lag "$RUN/lag0.txt"
check=(); [ "${CHECK:-0}" = 1 ] && check=(--check --answer-dns "127.0.0.1:${DNS[1]}")
cpus=("" "" ""); icpu=""
for r in $(seq "$ROUNDS"); do
  c=(); for i in 0 1 2; do c[$i]=$(cpu_ticks "$i"); done
  out=$(taskset -c 1 "$LOAD" put "$DATA/fleet_stream_$r.bin" "127.0.0.1:${HTTP[0]}" "127.0.0.1:${DNS[0]}" bench.test. \
    --rate "$RATE" --conns 64 "${check[@]}")
  say "stream $r:  $out"
  # A writes a round's last packets within a second, and syncs them within another.
  sleep 2
  line="cpu $r:     µs per publish of the round:"
  for i in 0 1 2; do
    u=$(python3 -c "print(round(($(cpu_ticks "$i") - ${c[$i]}) / 100 * 1e6 / $STREAM))")
    cpus[$i]="${cpus[$i]} $u"; line="$line ${NAMES[$i]^^} $u"
  done
  say "$line"
  if [ -n "$ipid" ]; then
    i0=$(awk '{print $14+$15}' "/proc/$ipid/stat")
    out=$(taskset -c 1 "$LOAD" put "$DATA/fleet_stream_$r.bin" 127.0.0.1:5380 127.0.0.1:5305 bench.test. --rate "$RATE" --conns 64)
    say "iroh stream $r: $out"
    # The same two seconds after the round as A's (it writes its batches within a second).
    sleep 2
    u=$(python3 -c "print(round(($(awk '{print $14+$15}' "/proc/$ipid/stat") - $i0) / 100 * 1e6 / $STREAM))")
    say "iroh cpu $r: µs per publish of the round: $u"
    icpu="$icpu $u"
    say "A ÷ iroh $r:  $(python3 -c "print(round(${cpus[0]##* } / $u, 2))") (this round's pair)"
  fi
done
lag "$RUN/lag1.txt"
a_cpu=$(median ${cpus[0]})
for i in 0 1 2; do
  say "cpu ${NAMES[$i]}:     $(median ${cpus[$i]}) µs per publish of the stream (median of$(echo "${cpus[$i]}" | tr ' ' ','| sed 's/^,/ /'))"
done
say "B ÷ A:     $(python3 -c "print(round($(median ${cpus[1]}) / $a_cpu, 2))") (medians)"
if [ -n "$ipid" ]; then
  say "iroh cpu:    $(median $icpu) µs per publish of the stream (median of$(echo "$icpu" | tr ' ' ',' | sed 's/^,/ /'))"
  say "A ÷ iroh:    $(python3 -c "print(round($a_cpu / $(median $icpu), 2))") (medians: A's $a_cpu µs, taking a publish and pushing it to two peers)"
  say "iroh rss:    $(( $(awk '/VmRSS/{print $2}' "/proc/$ipid/status") / 1024 )) MiB, disk $(du -sh "$RUN/iroh" | cut -f1)"
  kill "$ipid"; wait "$ipid" 2> /dev/null || true
  ipid=
fi
python3 - "$RUN/lag0.txt" "$RUN/lag1.txt" <<'EOF' | tee -a "$RESULT"
import re, sys
def read(path):
    peers = {}
    for line in open(path):
        m = re.match(r'meshdns_pkarr_replication_seconds_bucket\{peer="([^"]+)",le="([^"]+)"\} (\d+)', line)
        if m:
            peers.setdefault(m[1], []).append((float('inf') if m[2] == '+Inf' else float(m[2]), int(m[3])))
    return peers
before, after = read(sys.argv[1]), read(sys.argv[2])
for peer, buckets in sorted(after.items()):
    old = dict(before.get(peer, []))
    delta = [(le, n - old.get(le, 0)) for le, n in buckets]
    total = delta[-1][1]
    def q(p):
        return next(le for le, n in delta if n >= p * total)
    print(f"lag {peer}: A's commit → peer acknowledged, the stream's {total}: p50 ≤ {q(0.5) * 1000:g} ms, p99 ≤ {q(0.99) * 1000:g} ms (histogram buckets)")
EOF

# 3. catch-up of MISSED publishes: warm, then cold
catchup() { # catchup warm|cold FILE
  stop 2
  local out; out=$(taskset -c 1 "$LOAD" put "$2" "127.0.0.1:${HTTP[0]}" "127.0.0.1:${DNS[0]}" bench.test. --conns 64)
  say "missed ($1): $MISSED published to A while C was down: $out"
  if [ "$1" = cold ]; then
    # Written back, then dropped from the page cache (GNU dd: nocache with count=0 drops the
    # whole file's cached pages).
    sync "$RUN/c/pkarr.redb"
    dd if="$RUN/c/pkarr.redb" iflag=nocache count=0 status=none
  fi
  local t0; t0=$(ms)
  CPU=$CATCHUP_CPU start 2 --pkarr-catchup-wait 600s
  local th; th=$(ms)
  local cc; cc=$(cpu_ticks 2)
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${HTTP[2]}/readyz")" = 200 ]; do sleep 0.05; done
  local t1; t1=$(ms)
  # The process's CPU from its start (the read of the store and its load included), and the
  # part of it after /healthz answered (the load done; the catch-up).
  local now_c; now_c=$(cpu_ticks 2)
  local cpu_c; cpu_c=$(python3 -c "print(f'{$now_c / 100:.1f} s in all, {($now_c - $cc) / 100:.1f} s after /healthz')")
  local last; last=$(python3 - "$2" <<'EOF'
import struct, sys
data = open(sys.argv[1], 'rb').read()[2:]
pos, key = 0, None
while pos < len(data):
    key = data[pos:pos+52].decode(); n = struct.unpack('!H', data[pos+52:pos+54])[0]; pos += 54 + n
print(key)
EOF
)
  local code; code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${HTTP[2]}/pkarr/$last")
  say "catch-up ($1): C (on core $CATCHUP_CPU) started → /readyz 200 in $(( t1 - t0 )) ms, /healthz after $(( th - t0 )) ms, using CPU ${cpu_c}; the last missed publish on C then: HTTP $code; C read $(metric 2 "meshdns_pkarr_catchup_packets_total{peer=\"http://127.0.0.1:${HTTP[0]}\"}") packets from A, $(metric 2 "meshdns_pkarr_catchup_packets_total{peer=\"http://127.0.0.1:${HTTP[1]}\"}") from B; $(grep -o 'store loaded.*' "$RUN/c.log" | tail -1)"
  say "missing ($1): $(taskset -c 1 "$LOAD" missing "$2" "127.0.0.1:${HTTP[2]}") of $MISSED missed publishes not on C after its catch-up"
}
catchup warm "$DATA/fleet_missed.bin"
catchup cold "$DATA/fleet_missed_cold.bin"

# 4. memory and disk, and the pushes that failed or were refused
for i in 0 1 2; do say "rss ${NAMES[$i]}:     $(rss_mib "$i") MiB, disk $(du -sh "$RUN/${NAMES[$i]}" | cut -f1)"; done
for i in 0 1 2; do
  say "pushes ${NAMES[$i]}:  $(curl -s "http://127.0.0.1:${HTTP[$i]}/metrics" | grep -E '^meshdns_pkarr_peer_(pushed_total\{[^}]*result="(error|dropped)"|refused_total)' | tr '\n' ' ')"
done
