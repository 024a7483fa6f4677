#!/usr/bin/env bash
# --pkarr-dht on a loopback DHT testnet of ten mainline nodes (never the public DHT):
#   1. lookups: K packets put to the testnet by a client, then each key asked of meshdns once
#      over UDP (a cold miss: a DHT lookup) and once more (a cached hit): latency p50/p99 and
#      meshdns's CPU per query of each;
#   2. republish: meshdns filled with N packets, restarted with --pkarr-dht-republish 10s:
#      keys read from the DHT and put again in a minute, per second, and CPU per key.
# meshdns runs on core 0 with one worker, the testnet and the client on core 1.
#
# Needs: cargo build --release -p meshdns --bin meshdns -p meshdns-sources --example pkarr_load
#        --example dht_bench. Loopback only.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
K=${1:-1000}
N=${2:-100000}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
MESHDNS=${MESHDNS:-$TARGET/release/meshdns}
LOAD=${LOAD:-$TARGET/release/examples/pkarr_load}
BENCH=${BENCH:-$TARGET/release/examples/dht_bench}
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
  PKARR_LOAD="$LOAD" taskset -c 1 "$BENCH" republish "$WRAP" "$DATA/v1_$N.bin" "$N"
} 2>&1 | tee "$RESULT"
