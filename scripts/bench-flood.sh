#!/usr/bin/env bash
# The failed-authentication throttle under a flood of random keys. A valid
# client (wrk -t1 -c16, from 127.0.0.1) loads market detail: alone, during a
# flood of random well-formed keys (keyflood, 64 connections bound to
# 127.0.0.2) with the throttle on (the default --auth-failure-limit), and
# during the same flood with --auth-failure-limit off; the three phases
# alternate, and the medians are printed. Not run by CI.
#
#   scripts/bench-flood.sh [ROUNDS] [WALLETS]     (defaults: 3 rounds, 20000 wallets; DURATION=10)
#
# Needs wrk and curl. The default configuration otherwise (rate limit on;
# the valid key has its own quota so that the limiter admits its load).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
WALLETS=${2:-20000}
DURATION=${DURATION:-10}
ADDR=127.0.0.1:18811
TARGET_PATH=/v1/networks/perpnet/markets/BTC
# shellcheck source=scripts/common.sh
source scripts/common.sh
require wrk curl
cargo build --release -q -p market-data-server -p bench-baseline
RELEASE=${CARGO_TARGET_DIR:-target}/release
BIN=$RELEASE/market-data-server
FLOOD=$RELEASE/keyflood
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; wait; rm -rf "$WORK"' EXIT
"$BIN" seed-demo --wallets "$WALLETS" --database-url "$WORK/db" > /dev/null 2>&1
TOKEN=$("$BIN" token create --name valid --rate-limit 2000000000/min --database-url "$WORK/db" | tail -n 1)

# phase NAME [serve args…]: prints "NAME valid-req/s flood-summary"
phase() {
  local name=$1
  shift
  "$BIN" serve --bind "$ADDR" --database-url "$WORK/db" "$@" 2> "$WORK/serve.log" &
  local server=$!
  until curl -sf "http://$ADDR/healthz" > /dev/null; do sleep 0.05; done
  local flood_pid="" summary="-"
  if [ "$name" != alone ]; then
    "$FLOOD" "$ADDR" 127.0.0.2 64 $((DURATION + 2)) "$TARGET_PATH" > "$WORK/flood.txt" &
    flood_pid=$!
    sleep 1
  fi
  local rps
  rps=$(wrk -t1 -c16 -d"${DURATION}s" -H "X-API-Key: $TOKEN" "http://$ADDR$TARGET_PATH" | awk '/Requests\/sec/ {print $2}')
  if [ -n "$flood_pid" ]; then
    wait "$flood_pid"
    summary=$(cat "$WORK/flood.txt")
  fi
  kill "$server"
  wait "$server" 2> /dev/null || true
  echo "$name $rps $summary"
}


: > "$WORK/results"
for round in $(seq 1 "$ROUNDS"); do
  for p in alone throttled unthrottled; do
    case $p in
      alone | throttled) line=$(phase "$p") ;;
      unthrottled) line=$(phase "$p" --auth-failure-limit off) ;;
    esac
    echo "round $round: $line" >&2
    echo "$line" >> "$WORK/results"
  done
done
alone=$(awk '$1=="alone" {print $2}' "$WORK/results" | median)
throttled=$(awk '$1=="throttled" {print $2}' "$WORK/results" | median)
unthrottled=$(awk '$1=="unthrottled" {print $2}' "$WORK/results" | median)
echo
echo "| valid client, market detail, wrk -t1 -c16 -d${DURATION}s | req/s (median of $ROUNDS) |"
echo "|---|---|"
echo "| alone | $alone |"
echo "| during a 64-connection random-key flood, throttle on (default) | $throttled |"
echo "| during the same flood, --auth-failure-limit off | $unthrottled |"
echo
echo "throttled / unthrottled: $(awk -v a="$throttled" -v b="$unthrottled" 'BEGIN {printf "%.1f", a / b}')x; throttled / alone: $(awk -v a="$throttled" -v b="$alone" 'BEGIN {printf "%.2f", a / b}')"
