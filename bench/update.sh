#!/usr/bin/env bash
# Dynamic UPDATE (issue 30): `meshdns serve --update-zone` on loopback, written by
# bench/update_client.py (TSIG hmac-sha256, one A record per UPDATE, over UDP), one client and
# then THREADS clients, each sending its next UPDATE when the last is answered. The reply
# comes once the update is synced to the journal and served, so update -> reply is also
# update -> answer.
#
#   bench/update.sh [COUNT] [THREADS]     # default 2000 8
#
# Needs: cargo build --release -p meshdns --bin meshdns; python3.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
COUNT=${1:-2000}
THREADS=${2:-8}
MESHDNS=${MESHDNS:-${CARGO_TARGET_DIR:-$ROOT/target}/release/meshdns}
PORT=${PORT:-5499}
SECRET=c2VjcmV0LWtleS1mb3ItbWVzaGRucy11cGRhdGVzISE=
RUN=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; rm -rf "$RUN"' EXIT
printf 'key "upd." { algorithm hmac-sha256; secret "%s"; };\n' "$SECRET" > "$RUN/tsig.conf"
"$MESHDNS" serve --listen 127.0.0.1:$PORT --update-zone dyn.example --allow-update upd. --update-rate 1000000 \
  --tsig-keys "$RUN/tsig.conf" --data-dir "$RUN/data" > "$RUN/log" 2>&1 &
PID=$!
for _ in $(seq 50); do dig @127.0.0.1 -p $PORT dyn.example SOA +short +time=1 >/dev/null 2>&1 && break; sleep 0.1; done
echo "== $COUNT UPDATEs, 1 client then $THREADS ($(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown))"
python3 "$HERE/update_client.py" 127.0.0.1 $PORT dyn.example upd. "$SECRET" "$COUNT" 1
python3 "$HERE/update_client.py" 127.0.0.1 $PORT dyn.example upd. "$SECRET" "$COUNT" "$THREADS"
echo "records now: $(dig @127.0.0.1 -p $PORT dyn.example AXFR +noall +answer 2>/dev/null | grep -c . || true) (AXFR refused without a grant: 0)"
