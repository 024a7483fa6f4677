#!/usr/bin/env bash
# Dynamic UPDATE (issue 30): `meshdns serve --update-zone` on loopback, written by
# bench/update_client.py (TSIG hmac-sha256, one A record per UPDATE, over UDP), one client and
# then THREADS clients, each sending its next UPDATE when the last is answered. The reply
# comes once the update is synced to the journal and served, so update -> reply is also
# update -> answer.
#
# Then, with an NSD secondary NOTIFYd by meshdns (nsd.conf's xfrd-reload-timeout: 0; NSD's
# default of 1 s throttles its reloads to one a second), FOLLOW UPDATEs one at a time, each
# timed until NSD answers the new record: update -> secondary answering.
#
#   bench/update.sh [COUNT] [THREADS] [FOLLOW]     # default 2000 8 200
#
# Needs: cargo build --release -p meshdns --bin meshdns; python3; nsd.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
COUNT=${1:-2000}
THREADS=${2:-8}
FOLLOW=${3:-200}
NSD_PORT=${NSD_PORT:-5498}
MESHDNS=${MESHDNS:-${CARGO_TARGET_DIR:-$ROOT/target}/release/meshdns}
PORT=${PORT:-5499}
SECRET=c2VjcmV0LWtleS1mb3ItbWVzaGRucy11cGRhdGVzISE=
RUN=$(mktemp -d)
NSD_PID=
trap 'kill $PID $NSD_PID 2>/dev/null || true; rm -rf "$RUN"' EXIT
printf 'key "upd." { algorithm hmac-sha256; secret "%s"; };\n' "$SECRET" > "$RUN/tsig.conf"
"$MESHDNS" serve --listen 127.0.0.1:$PORT --update-zone dyn.example --allow-update upd. --update-rate 1000000 \
  --allow-transfer 127.0.0.1 --notify 127.0.0.1:$NSD_PORT \
  --tsig-keys "$RUN/tsig.conf" --data-dir "$RUN/data" > "$RUN/log" 2>&1 &
PID=$!
for _ in $(seq 50); do dig @127.0.0.1 -p $PORT dyn.example SOA +short +time=1 >/dev/null 2>&1 && break; sleep 0.1; done
echo "== $COUNT UPDATEs, 1 client then $THREADS ($(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown))"
python3 "$HERE/update_client.py" 127.0.0.1 $PORT dyn.example upd. "$SECRET" "$COUNT" 1
python3 "$HERE/update_client.py" 127.0.0.1 $PORT dyn.example upd. "$SECRET" "$COUNT" "$THREADS"
mkdir -p "$RUN/nsd"
cat > "$RUN/nsd/nsd.conf" <<EOF
server:
  ip-address: 127.0.0.1@$NSD_PORT
  username: ""
  chroot: ""
  zonesdir: "$RUN/nsd"
  database: ""
  zonelistfile: "$RUN/nsd/zone.list"
  xfrdfile: "$RUN/nsd/xfrd.state"
  xfrdir: "$RUN/nsd"
  pidfile: "$RUN/nsd/nsd.pid"
  logfile: "$RUN/nsd/nsd.log"
  server-count: 1
  xfrd-reload-timeout: 0
remote-control:
  control-enable: no
zone:
  name: dyn.example
  zonefile: "dyn.example.zone"
  allow-notify: 127.0.0.1 NOKEY
  request-xfr: 127.0.0.1@$PORT NOKEY
EOF
nsd -d -c "$RUN/nsd/nsd.conf" >/dev/null 2>&1 &
NSD_PID=$!
for _ in $(seq 100); do dig @127.0.0.1 -p $NSD_PORT dyn.example SOA +short +time=1 2>/dev/null | grep -q . && break; sleep 0.1; done
python3 "$HERE/update_client.py" 127.0.0.1 $PORT dyn.example upd. "$SECRET" "$FOLLOW" 1 127.0.0.1:$NSD_PORT
echo "records now: $(dig @127.0.0.1 -p $PORT dyn.example AXFR +noall +answer 2>/dev/null | grep -c . || true) (AXFR refused without a grant: 0)"
