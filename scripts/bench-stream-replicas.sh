#!/usr/bin/env bash
# The event stream across replicas: three `serve` processes on one
# PostgreSQL database, CLIENTS stream clients on each (streamfan), while
# `track` publishes every 5 s into the same database what it reads from the
# simulated exchange (WALLETS wallets, an own node's budget). For each
# replica it prints how long each data version took from its commit (each
# streamfan reads the newest version every 2 ms) to each of its clients.
# Not run by CI.
#
#   scripts/bench-stream-replicas.sh [CLIENTS] [SECONDS] [WALLETS]   (defaults: 1000, 60, 20000)
#
# PG_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres) is where
# a scratch database is created and dropped.
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${1:-1000}
OPEN_SECONDS=${2:-60}
WALLETS=${3:-20000}
PORT=${PORT:-18975}
FAKE=127.0.0.1:$PORT
FAKE_WS=127.0.0.1:$((PORT + 1))
ADMIN=${PG_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}
source scripts/common.sh
require curl psql
ulimit -n "$(ulimit -Hn)"

release_workdir
cargo build --release -q -p bench-baseline
NAME=mds_bench_replicas_$$
psql -q "$ADMIN" -c "CREATE DATABASE $NAME"
trap 'kill $(jobs -p) 2> /dev/null || true; sleep 1; psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS $NAME WITH (FORCE)"; rm -rf "$WORK"' EXIT
DB=${ADMIN%/*}/$NAME
TRACK_BIN=$BIN
"$BIN" migrate --database-url "$DB" > /dev/null
start_fake "$FAKE" "$FAKE_WS" --wallets "$WALLETS" --weight-per-minute 0
start_track "$FAKE" "$FAKE_WS" --weight-per-minute 1000000 --publish-every 5
TOKEN=$("$BIN" token create --name bench --rate-limit 2000000000/min --database-url "$DB" | tail -n 1)
for i in 1 2 3; do
  RUST_LOG=info "$BIN" serve --bind "127.0.0.1:$((PORT + 1 + i))" --database-url "$DB" --access-log false \
    --workers 1 --max-streams-per-key "$((3 * CLIENTS))" 2> "$WORK/serve$i.log" &
done
for i in 1 2 3; do
  until curl -sf -H "X-API-Key: $TOKEN" "http://127.0.0.1:$((PORT + 1 + i))/v1/networks/perpnet/markets/BTC" > /dev/null; do sleep 1; done
done
sleep 60
for i in 1 2 3; do
  "$RELEASE/streamfan" "127.0.0.1:$((PORT + 1 + i))" "$TOKEN" "$CLIENTS" "$OPEN_SECONDS" "$DB" "${QUERY:-}" > "$WORK/fan$i.txt" &
done
wait $(jobs -p | tail -n 3)
for i in 1 2 3; do
  echo "replica $i:"
  sed 's/^/  /' "$WORK/fan$i.txt"
done
