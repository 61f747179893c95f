#!/usr/bin/env bash
# Start-up time and resident memory of one or more server builds on the same
# dataset, started alternately (the machine's speed drifts, so builds are
# compared round by round, never across windows). Not run by CI.
#
#   scripts/memory.sh [ROUNDS] [WALLETS] BIN...   (defaults: 2 rounds, 100000 wallets)
#
# For each round and build: start `serve` on a fresh copy of the seeded
# database, then report
#   ready     seconds from start until /healthz answers,
#   rss       resident memory when ready,
#   load rss  resident memory after 10 s of wrk -c64 on the largest page (the
#             30-day liquidity map) and 10 s on whale-positions,
#   reload    seconds from the end of a re-seed (a whole new version) until it
#             is served, and the resident memory 5 s after,
#   peak      the process's peak resident memory (VmHWM).
#
# Needs wrk, bc and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
WALLETS=${2:-100000}
shift 2 || { echo "usage: $0 ROUNDS WALLETS BIN..." >&2; exit 2; }
[ "$#" -gt 0 ] || { echo "usage: $0 ROUNDS WALLETS BIN..." >&2; exit 2; }
ADDR=127.0.0.1:18811
for tool in wrk bc curl; do
  command -v "$tool" > /dev/null || { echo "$tool is missing: apt-get install $tool" >&2; exit 1; }
done
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; wait; rm -rf "$WORK"' EXIT

"$1" seed-demo --wallets "$WALLETS" --database-url "$WORK/seed.db" > /dev/null 2>&1
TODAY=$(date -u +%F)
FROM=$(date -u -d '-29 days' +%F)
rss() { awk '/^VmRSS/ { printf "%d", $2 / 1024 }' "/proc/$1/status"; }
hwm() { awk '/^VmHWM/ { printf "%d", $2 / 1024 }' "/proc/$1/status"; }
version() { curl -s -D - -o /dev/null -H "X-API-Key: $2" "http://$ADDR/v1/networks/perpnet/markets/BTC" | awk 'tolower($1) == "x-data-version:" { print $2 + 0 }'; }

echo "| round | build | ready s | rss MB | load rss MB | reload s | rss after reload MB | peak MB |"
echo "|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
  for bin in "$@"; do
    rm -f "$WORK"/db*
    cp "$WORK/seed.db" "$WORK/db"
    token=$("$bin" token create --name memory --database-url "$WORK/db" | tail -n 1)
    start=$(date +%s.%N)
    # Builds with request limits would answer this load with 429s.
    limits=(); if "$bin" serve --help | grep -q -- --rate-limit; then limits=(--rate-limit off); fi
    "$bin" serve --bind "$ADDR" --database-url "$WORK/db" --access-log false "${limits[@]}" 2> "$WORK/serve.log" &
    pid=$!
    until curl -sf "http://$ADDR/healthz" > /dev/null; do sleep 0.02; done
    ready=$(echo "$(date +%s.%N) - $start" | bc)
    rss_ready=$(rss $pid)
    for path in "liquidity-levels?fromDate=$FROM&toDate=$TODAY&asset=ETH&limit=30" "markets/BTC/whale-positions?limit=200"; do
      wrk -t2 -c64 -d10s -H "X-API-Key: $token" "http://$ADDR/v1/networks/perpnet/$path" > /dev/null
    done
    sleep 2
    rss_load=$(rss $pid)
    before=$(version $pid "$token")
    "$bin" seed-demo --wallets "$WALLETS" --database-url "$WORK/db" > /dev/null 2>&1
    seeded=$(date +%s.%N)
    until [ "$(version $pid "$token")" -gt "$before" ]; do sleep 0.05; done
    reload=$(echo "$(date +%s.%N) - $seeded" | bc)
    sleep 5
    printf "| %s | %s | %.2f | %s | %s | %.2f | %s | %s |\n" "$round" "$(basename "$bin")" "$ready" "$rss_ready" "$rss_load" "$reload" "$(rss $pid)" "$(hwm $pid)"
    kill $pid
    wait $pid 2> /dev/null || true
  done
done
