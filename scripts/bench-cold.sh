#!/usr/bin/env bash
# A client of small snapshot pages while 256 connections ask for
# database-backed pages that are never in the page cache (liquidity-levels
# and candles, scripts/cold-misses.lua). The small-page client is
# `wrk -t1 -c1 --latency` on the wallets list (limit 10): alone, then
# during the cold load; the phases alternate, and the worst p99 and max of
# the rounds are printed with the cold load's answers. Not run by CI.
#
#   scripts/bench-cold.sh [ROUNDS] [WALLETS]    (defaults: 3 rounds, 100000 wallets; DURATION=15)
#
# Extra `serve` arguments for the cold phase come from COLD_ARGS (for
# example COLD_ARGS="--db-concurrency 4 --db-queue 1024"). Needs wrk and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
WALLETS=${2:-100000}
DURATION=${DURATION:-15}
ADDR=127.0.0.1:18812
SMALL=/v1/networks/perpnet/wallets?limit=10
# shellcheck source=scripts/common.sh
source scripts/common.sh
require wrk curl
cargo build --release -q -p market-data-server
BIN=${CARGO_TARGET_DIR:-target}/release/market-data-server
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; wait; rm -rf "$WORK"' EXIT
echo "seeding $WALLETS wallets" >&2
"$BIN" seed-demo --wallets "$WALLETS" --database-url "$WORK/db" > /dev/null 2>&1
TOKEN=$("$BIN" token create --name bench --rate-limit 2000000000/min --database-url "$WORK/db" | tail -n 1)
export TOKEN
TODAY=$(date -u +%F)
export TODAY

# to_ms "1.23ms" -> 1.23
to_ms() { awk '{v=$1; if (v ~ /us$/) {sub(/us$/, "", v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/, "", v)} else if (v ~ /s$/) {sub(/s$/, "", v); v*=1000} printf "%.2f", v}' <<< "$1"; }

# phase NAME [serve args…]: prints "NAME p99-ms max-ms requests cold-summary"
phase() {
  local name=$1
  shift
  "$BIN" serve --bind "$ADDR" --database-url "$WORK/db" --access-log false "$@" 2> "$WORK/serve.log" &
  local server=$!
  until curl -sf "http://$ADDR/healthz" > /dev/null; do sleep 0.05; done
  # The key is verified and the page cached before measuring.
  curl -sf -H "X-API-Key: $TOKEN" "http://$ADDR$SMALL" > /dev/null
  local cold_pid="" cold="-"
  if [ "$name" != alone ]; then
    wrk -t2 -c256 -d"$((DURATION + 2))s" -s scripts/cold-misses.lua "http://$ADDR" > "$WORK/cold.txt" &
    cold_pid=$!
    sleep 1
  fi
  wrk -t1 -c1 -d"${DURATION}s" --latency -H "X-API-Key: $TOKEN" "http://$ADDR$SMALL" > "$WORK/small.txt"
  if [ -n "$cold_pid" ]; then
    wait "$cold_pid"
    local total non2xx
    total=$(awk '/requests in/ {print $1}' "$WORK/cold.txt")
    non2xx=$(awk '/Non-2xx/ {print $5}' "$WORK/cold.txt")
    cold="${total}:${non2xx:-0}"
  fi
  kill "$server"
  wait "$server" 2> /dev/null || true
  local p99 max requests
  p99=$(to_ms "$(awk '$1=="99%" {print $2}' "$WORK/small.txt")")
  max=$(to_ms "$(awk '$1=="Latency" && NF==5 {print $4}' "$WORK/small.txt")")
  requests=$(awk '/requests in/ {print $1}' "$WORK/small.txt")
  echo "$name $p99 $max $requests $cold"
}

: > "$WORK/results"
for round in $(seq 1 "$ROUNDS"); do
  for p in alone cold; do
    if [ "$p" = cold ]; then
      # shellcheck disable=SC2086
      line=$(phase cold ${COLD_ARGS:-})
    else
      line=$(phase alone)
    fi
    echo "round $round: $line" >&2
    echo "$line" >> "$WORK/results"
  done
done
worst() { awk -v n="$1" -v col="$2" '$1==n {if ($col > m) m = $col} END {printf "%.2f", m}' "$WORK/results"; }
echo
echo "| small-page client (wrk -t1 -c1 -d${DURATION}s, wallets?limit=10) | worst p99 (ms) | worst max (ms) |"
echo "|---|---|---|"
echo "| alone | $(worst alone 2) | $(worst alone 3) |"
echo "| during 256 connections of cold misses${COLD_ARGS:+ ($COLD_ARGS)} | $(worst cold 2) | $(worst cold 3) |"
echo
echo "cold load per round (requests:answers other than 2xx):" $(awk '$1=="cold" {print $5}' "$WORK/results")
