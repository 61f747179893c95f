#!/usr/bin/env bash
# Answer formats, all in one run on one dataset:
# - compression: for the 30-day liquidity answer of one asset (the largest
#   answer of the API), the bytes on the wire and the server's CPU time per
#   request with each encoding it negotiates (none, gzip, br, zstd);
# - CSV: bytes and CPU per request of the CSV answer against the JSON one,
#   for that liquidity answer and a page of 200 whale positions.
# Whether a change costs the uncompressed answers anything is measured
# against the build before it with scripts/cpu-per-request.sh (a fresh
# server for every measurement, alternating builds). Not run by CI.
#
#   scripts/bench-formats.sh [WALLETS] [ROUNDS]   (defaults: 100000, 3)
#
# Each measurement reads the server's user+system CPU ticks
# (/proc/PID/stat) around a 5 s `wrk -t1 -c4` run, after a 1 s warm-up.
# Prints one line per round and measurement, then medians. Needs wrk, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
WALLETS=${1:-100000}
ROUNDS=${2:-3}
OURS=127.0.0.1:18941
source scripts/common.sh
require wrk curl

cargo build --release -q -p market-data-server
RELEASE=${CARGO_TARGET_DIR:-target}/release
BIN=$RELEASE/market-data-server
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; wait; rm -rf "$WORK"' EXIT

echo "seeding $WALLETS wallets" >&2
"$BIN" seed-demo --wallets "$WALLETS" --database-url "$WORK/bench.db" > /dev/null 2>&1
TOKEN=$("$BIN" token create --name bench --rate-limit 2000000000/min --database-url "$WORK/bench.db" | tail -n 1)
"$BIN" serve --bind "$OURS" --database-url "$WORK/bench.db" --access-log false 2> /dev/null &
OURS_PID=$!
until curl -sf "http://$OURS/healthz" > /dev/null; do sleep 0.05; done

TODAY=$(date -u +%F)
FROM=$(date -u -d '-29 days' +%F)
LIQUIDITY="/v1/networks/perpnet/liquidity-levels?fromDate=$FROM&toDate=$TODAY&asset=ETH&limit=30"
POSITIONS="/v1/networks/perpnet/markets/BTC/whale-positions?limit=200"

# headers FORMAT: the request headers of a format (none, gzip, br, zstd, csv)
headers() {
  case $1 in
    none) ;;
    csv) echo "Accept: text/csv" ;;
    *) echo "Accept-Encoding: $1" ;;
  esac
}

# measure PID ADDR PATH FORMAT → "req/s cpu_us_per_request"
measure() {
  local pid=$1 addr=$2 path=$3 h extra=()
  h=$(headers "$4")
  [ -z "$h" ] || extra=(-H "$h")
  wrk -t1 -c4 -d1s -H "X-API-Key: $TOKEN" "${extra[@]}" "http://$addr$path" > /dev/null
  local t0 t1 out n rps
  t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  out=$(wrk -t1 -c4 -d5s -H "X-API-Key: $TOKEN" "${extra[@]}" "http://$addr$path")
  t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  n=$(awk '/requests in/ {print $1}' <<< "$out")
  rps=$(awk '/Requests\/sec/ {print $2}' <<< "$out")
  # clock ticks are 1/100 s
  echo "$rps $(((t1 - t0) * 10000 / n))"
}

bytes() { # PATH FORMAT
  local h extra=()
  h=$(headers "$2")
  [ -z "$h" ] || extra=(-H "$h")
  curl -s -H "X-API-Key: $TOKEN" "${extra[@]}" "http://$OURS$1" | wc -c
}

echo "bytes on the wire:"
for f in none gzip br zstd csv; do echo "  liquidity $f: $(bytes "$LIQUIDITY" "$f")"; done
for f in none csv; do echo "  positions $f: $(bytes "$POSITIONS" "$f")"; done

for round in $(seq 1 "$ROUNDS"); do
  for f in none gzip br zstd csv; do
    echo "round $round liquidity $f: $(measure "$OURS_PID" "$OURS" "$LIQUIDITY" "$f")" | tee -a "$WORK/results"
  done
  for f in none csv; do
    echo "round $round positions $f: $(measure "$OURS_PID" "$OURS" "$POSITIONS" "$f")" | tee -a "$WORK/results"
  done
done

echo "medians (req/s; CPU µs per request):"
for m in "liquidity none" "liquidity gzip" "liquidity br" "liquidity zstd" "liquidity csv" "positions none" "positions csv"; do
  rps=$(grep -F "$m:" "$WORK/results" | awk '{print $(NF-1)}' | median)
  cpu=$(grep -F "$m:" "$WORK/results" | awk '{print $NF}' | median)
  echo "  $m: $rps req/s; $cpu µs"
done
