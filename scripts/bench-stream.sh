#!/usr/bin/env bash
# The event stream's fan-out: CLIENTS clients of
# /position-events/stream on one `serve` (the default configuration: SQLite,
# one worker per CPU), while `track` publishes every 5 s what it reads from
# the simulated exchange (WALLETS wallets, an own node's budget) into the
# same file. It prints:
# - the market-detail throughput (wrk -t1 -c16, 10 s) without the clients,
#   with them, and without them again, and the ratio of the middle one to
#   the mean of the other two;
# - the server's resident memory before the clients connect, with them,
#   and just before they close;
# - from streamfan: how long each data version took to reach each client,
#   from its commit (streamfan reads the newest version every 2 ms) and from
#   the first client that got it (the fan-out alone).
# Not run by CI.
#
#   scripts/bench-stream.sh [CLIENTS] [SECONDS] [WALLETS]   (defaults: 10000, 60, 20000)
#
# QUERY='?minValue=1000000' gives every client that filter (default: none,
# every event to every client). STREAMFAN_GZIP=1 makes every client ask for
# gzip (as browsers do); the clients inflate what they read after the run
# (see streamfan). SERVE_BIN names another build's server
# binary for `serve` (to compare builds; `track` stays this build's).
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${1:-10000}
OPEN_SECONDS=${2:-60}
WALLETS=${3:-20000}
PORT=${PORT:-18971}
FAKE=127.0.0.1:$PORT
FAKE_WS=127.0.0.1:$((PORT + 1))
SERVE=127.0.0.1:$((PORT + 2))
source scripts/common.sh
require curl wrk
# Every client is a socket on both sides: raise the soft limit to the hard one.
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -gt $((CLIENTS + 1000)) ] || { echo "open files limited to $(ulimit -n): too few for $CLIENTS clients" >&2; exit 1; }

release_workdir
cargo build --release -q -p bench-baseline
start_fake "$FAKE" "$FAKE_WS" --wallets "$WALLETS" --weight-per-minute 0
track_db
start_track "$FAKE" "$FAKE_WS" --weight-per-minute 1000000 --publish-every 5
TOKEN=$("$BIN" token create --name bench --rate-limit 2000000000/min --database-url "$DB" | tail -n 1)
RUST_LOG=info "${SERVE_BIN:-$BIN}" serve --bind "$SERVE" --database-url "$DB" --access-log false \
  --max-streams-per-key "$CLIENTS" 2> "$WORK/serve.log" &
SERVER=$!
DETAIL=http://$SERVE/v1/networks/perpnet/markets/BTC
until curl -sf -H "X-API-Key: $TOKEN" "$DETAIL" > /dev/null; do sleep 1; done
# Until most wallets are read and publishes are steady.
sleep 60

detail() { wrk -t1 -c16 -d10s -H "X-API-Key: $TOKEN" "$DETAIL" | awk '/Requests\/sec/ {print $2}'; }
rss() { awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$SERVER/status"; }
without=$(detail)
rss_before=$(rss)
"$RELEASE/streamfan" "$SERVE" "$TOKEN" "$CLIENTS" "$OPEN_SECONDS" "$DB" "${QUERY:-}" > "$WORK/fan.txt" &
FAN=$!
sleep 20
with=$(detail)
rss_with=$(rss)
# Again just before the clients close: a write the socket takes only in
# part can move a stream's later writes further into its buffer.
sleep $((OPEN_SECONDS > 35 ? OPEN_SECONDS - 35 : 0))
rss_end=$(rss)
wait "$FAN"
again=$(detail)
echo "market detail req/s: without $without, with $CLIENTS streams $with, without again $again"
python3 -c "import sys; a, b, c = map(float, sys.argv[1:]); print(f'ratio with/without: {b / ((a + c) / 2):.3f}')" "$without" "$with" "$again"
echo "serve RSS: $rss_before MB before, $rss_with MB with the streams (+$((rss_with - rss_before)) MB), $rss_end MB as they close (+$((rss_end - rss_before)) MB)"
cat "$WORK/fan.txt"
grep -c "published data version" "$WORK/track.log" | sed 's/^/publishes by track: /'
