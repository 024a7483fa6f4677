#!/usr/bin/env bash
# --pkarr-dht on a loopback DHT testnet of ten mainline nodes (never the public DHT):
#   1. lookups: K packets put to the testnet by a client, then each key asked of meshdns once
#      over UDP (a cold miss: a DHT lookup) and once more (a cached hit): latency p50/p99 and
#      meshdns's CPU per query of each;
#   2. the same lookups with iroh-dns-server 1.4.1 in meshdns's place (its [mainline] section
#      pointed at the testnet; IROH_K keys, default 200: each of its lookups waits for the
#      whole DHT query; IROH=path, found on PATH or in /opt/iroh-dns-server/bin; skipped
#      when absent: `cargo install iroh-dns-server --version 1.4.1 --locked`);
#   3. republish: meshdns filled with N packets, restarted with --pkarr-dht-republish 10s:
#      the first round over the N keys (each read from the DHT, then put): time, keys per
#      second, CPU per key, and the bytes its DHT socket sent and received (iptables counters,
#      as root).
# The server runs on core 0 with one worker, the testnet and the client on core 1.
#
# Needs: cargo build --release -p meshdns --bin meshdns -p meshdns-sources --example pkarr_load
#        --example dht_bench. Loopback only.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
K=${1:-1000}
N=${2:-100000}
IROH_K=${IROH_K:-200}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
MESHDNS=${MESHDNS:-$TARGET/release/meshdns}
LOAD=${LOAD:-$TARGET/release/examples/pkarr_load}
BENCH=${BENCH:-$TARGET/release/examples/dht_bench}
IROH=${IROH:-$(command -v iroh-dns-server || echo /opt/iroh-dns-server/bin/iroh-dns-server)}
DATA=${DATA:-/tmp/meshdns-bench-data/pkarr}
OUT=${OUT:-/tmp/meshdns-bench-out}
mkdir -p "$DATA" "$OUT"
RESULT="$OUT/pkarr_dht_${K}_${N}.txt"
[ -s "$DATA/v1_$N.bin" ] || "$LOAD" sign "$N" 1 "$DATA/v1_$N.bin"
# meshdns on core 0 (the wrapper pins it), everything else on core 1.
WRAP="$OUT/meshdns-core0"
printf '#!/bin/sh\nexec taskset -c 0 %s "$@"\n' "$MESHDNS" > "$WRAP"
chmod +x "$WRAP"
{
  echo "== --pkarr-dht on a 10-node loopback testnet ($(git -C "$ROOT" rev-parse --short HEAD))"
  taskset -c 1 "$BENCH" lookups "$WRAP" "$DATA/v1_$N.bin" "$K"
  if [ -x "$IROH" ]; then
    IWRAP="$OUT/iroh-core0"
    printf '#!/bin/sh\nexec taskset -c 0 %s "$@"\n' "$IROH" > "$IWRAP"
    chmod +x "$IWRAP"
    echo "iroh-dns-server: $("$IROH" --version 2> /dev/null | head -1)"
    taskset -c 1 "$BENCH" iroh-lookups "$IWRAP" "$DATA/v1_$N.bin" "$IROH_K"
  else
    echo "iroh-dns-server: not found (IROH=$IROH); its lookups skipped"
  fi
  PKARR_LOAD="$LOAD" taskset -c 1 "$BENCH" republish "$WRAP" "$DATA/v1_$N.bin" "$N"
} 2>&1 | tee "$RESULT"
