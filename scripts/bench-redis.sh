#!/usr/bin/env bash
# The cost of sharing the rate limits through Redis: market detail with the
# default in-process limiter, then with --redis-url (a Redis on this
# machine), alternating; medians of the rounds. Not run by CI.
#
#   scripts/bench-redis.sh [ROUNDS] [WALLETS]   (defaults: 3 rounds, 20000 wallets; DURATION=8)
#
# REDIS_URL (default redis://127.0.0.1:6379) names the Redis. The token has
# the default quota of 1200 a minute raised to 2,000,000,000, so every
# request is charged and none is refused. Needs wrk and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
WALLETS=${2:-20000}
DURATION=${DURATION:-8}
REDIS=${REDIS_URL:-redis://127.0.0.1:6379}
ADDR=127.0.0.1:18814
TARGET_PATH=/v1/networks/perpnet/markets/BTC
# shellcheck source=scripts/common.sh
source scripts/common.sh
require wrk curl
cargo build --release -q -p market-data-server
BIN=${CARGO_TARGET_DIR:-target}/release/market-data-server
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; wait; rm -rf "$WORK"' EXIT
"$BIN" seed-demo --wallets "$WALLETS" --database-url "$WORK/db" > /dev/null 2>&1
TOKEN=$("$BIN" token create --name bench --rate-limit 2000000000/min --database-url "$WORK/db" | tail -n 1)
PREFIX="bench-redis:$$:"

# phase NAME [serve args…]: prints "NAME req/s p99"
phase() {
  local name=$1
  shift
  "$BIN" serve --bind "$ADDR" --database-url "$WORK/db" --access-log false "$@" 2> "$WORK/serve.log" &
  local server=$!
  until curl -sf "http://$ADDR/healthz" > /dev/null; do sleep 0.05; done
  curl -sf -H "X-API-Key: $TOKEN" "http://$ADDR$TARGET_PATH" > /dev/null
  wrk -t2 -c64 -d"${DURATION}s" --latency -H "X-API-Key: $TOKEN" "http://$ADDR$TARGET_PATH" > "$WORK/wrk.txt"
  kill "$server"
  wait "$server" 2> /dev/null || true
  if grep -q "limits its API keys on its own" "$WORK/serve.log"; then
    echo "Redis failed during the $name phase:" >&2
    cat "$WORK/serve.log" >&2
    exit 1
  fi
  echo "$name $(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt") $(awk '$1=="99%" {print $2}' "$WORK/wrk.txt")"
}


: > "$WORK/results"
for round in $(seq 1 "$ROUNDS"); do
  for p in local redis; do
    if [ "$p" = redis ]; then
      line=$(phase redis --redis-url "$REDIS" --redis-key-prefix "$PREFIX")
    else
      line=$(phase local)
    fi
    echo "round $round: $line" >&2
    echo "$line" >> "$WORK/results"
  done
done
local_rps=$(awk '$1=="local" {print $2}' "$WORK/results" | median)
redis_rps=$(awk '$1=="redis" {print $2}' "$WORK/results" | median)
echo
echo "| market detail, wrk -t2 -c64 -d${DURATION}s | req/s (median of $ROUNDS) |"
echo "|---|---|"
echo "| in-process limiter (default) | $local_rps |"
echo "| --redis-url (shared limiter) | $redis_rps |"
echo
echo "redis / in-process: $(awk -v a="$redis_rps" -v b="$local_rps" 'BEGIN {printf "%.2f", a / b}')"
