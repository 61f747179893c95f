#!/usr/bin/env bash
# CPU time per request of two builds, measured alternately on one dataset:
# the precise way to compare a change with the build before it, since the
# machine's speed drifts between minutes (throughput ratios from separate
# runs of scripts/bench.sh do not isolate a change). Not run by CI.
#
#   scripts/cpu-per-request.sh BEFORE_BIN AFTER_BIN [ROUNDS] [WALLETS]
#
# Each round starts each server in turn (access log off), warms it for 2 s,
# then reads the server's user+system CPU ticks (/proc/PID/stat) around a
# 5 s `wrk -t1 -c16` run, for each endpoint below. Prints one line per
# round, endpoint and build, then the median after/before ratio per
# endpoint. Needs wrk, bc and curl.
set -euo pipefail
BEFORE=$1 AFTER=$2 ROUNDS=${3:-3} WALLETS=${4:-20000}
PORT=18931
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; wait; rm -rf "$WORK"' EXIT
"$AFTER" seed-demo --wallets "$WALLETS" --database-url "$WORK/db" > /dev/null 2>&1
TOKEN=$("$AFTER" token create --name cpu --database-url "$WORK/db" | tail -n 1)
PATHS=(
  "/v1/networks/perpnet/markets"
  "/v1/networks/perpnet/markets/BTC"
  "/v1/networks/perpnet/markets/BTC/whale-positions?limit=200"
  "/v1/networks/perpnet/wallets?limit=200&size=whale"
  "/v1/networks/perpnet/markets/BTC/candles?interval=1h&limit=500"
)
# → microseconds of CPU per request
measure() {
  local bin=$1 path=$2
  # Builds with request limits would answer this load with 429s.
  limits=(); if "$bin" serve --help | grep -q -- --rate-limit; then limits=(--rate-limit off); fi
  "$bin" serve --bind "127.0.0.1:$PORT" --database-url "$WORK/db" --access-log false "${limits[@]}" 2> /dev/null &
  local pid=$!
  until curl -sf "http://127.0.0.1:$PORT/healthz" > /dev/null; do sleep 0.05; done
  wrk -t1 -c8 -d2s -H "X-API-Key: $TOKEN" "http://127.0.0.1:$PORT$path" > /dev/null
  local t0 t1 n
  t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  n=$(wrk -t1 -c16 -d5s -H "X-API-Key: $TOKEN" "http://127.0.0.1:$PORT$path" | awk '/requests in/ {print $1}')
  t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  kill "$pid"; wait "$pid" 2> /dev/null || true
  echo "($t1 - $t0) * 1000000 / $(getconf CLK_TCK) / $n" | bc -l
}
for r in $(seq 1 "$ROUNDS"); do
  for i in "${!PATHS[@]}"; do
    b=$(measure "$BEFORE" "${PATHS[$i]}")
    a=$(measure "$AFTER" "${PATHS[$i]}")
    printf "round %s  %-62s before %6.2f µs  after %6.2f µs  ratio %.3f\n" "$r" "${PATHS[$i]}" "$b" "$a" "$(echo "$a / $b" | bc -l)"
    echo "$i $(echo "$a / $b" | bc -l)" >> "$WORK/ratios"
  done
done
echo
for i in "${!PATHS[@]}"; do
  printf "%-62s median after/before %.3f\n" "${PATHS[$i]}" \
    "$(awk -v i="$i" '$1 == i { print $2 }' "$WORK/ratios" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')"
done
