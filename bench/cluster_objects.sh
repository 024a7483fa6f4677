#!/usr/bin/env bash
# The cluster's own objects (issue 29): N Services and their EndpointSlices in the in-memory
# API server (9 in 10 LoadBalancers, 1 in 10 headless with three endpoints), meshdns serve
# --kubernetes --kube-source service against it:
#   1. start → /readyz 200, and → every name answered; CPU and RSS then;
#   2. churn: 1% of the Services' load balancer addresses changed every second (in ten steps a
#      second) for SECONDS; each change polled over UDP until meshdns answers the new address:
#      change → answer p50/p99/max; meshdns's CPU per change (the pollers' queries included).
#
#   bench/cluster_objects.sh [N] [SECONDS]     # default 10000 30
#
# Needs: cargo build --release -p meshdns --bin meshdns -p meshdns-fakekube --example cluster_load.
# Loopback only; no cluster (the in-memory API server speaks the API kube-rs uses).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
N=${1:-10000}
SECONDS_=${2:-30}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
MESHDNS=${MESHDNS:-$TARGET/release/meshdns}
LOAD=${LOAD:-$TARGET/release/examples/cluster_load}
OUT=${OUT:-/tmp/meshdns-bench-out}
mkdir -p "$OUT"
echo "== $N Services, $SECONDS_ s of churn ($(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown))" | tee "$OUT/cluster_objects_$N.txt"
"$LOAD" "$MESHDNS" "$N" "$SECONDS_" | tee -a "$OUT/cluster_objects_$N.txt"
