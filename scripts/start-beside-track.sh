#!/usr/bin/env bash
# Servers started while `track` catches up: `track` at an own node's budget
# against the simulated exchange (a million wallets, 300,000 holding
# positions), and after START_AFTER seconds (default 110: its first full
# publishes come one after another) a new `serve` on the same file every
# few seconds, each with no saved version (so it loads whole). BEFORE_BIN
# and AFTER_BIN (two builds, to compare; both default to this build's) take
# turns, ROUNDS times (default 3). For each start it prints whether the
# server became ready (or exited, and why), how long it took, how many
# wallets `track` served then, and how many "unreachable" warnings the
# server logged.
#
#   scripts/start-beside-track.sh
#   BEFORE_BIN=/tmp/old/market-data-server scripts/start-beside-track.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-18981}
FAKE=127.0.0.1:$PORT
FAKE_WS=127.0.0.1:$((PORT + 1))
source scripts/common.sh
require curl python3 bc

release_workdir
start_fake "$FAKE" "$FAKE_WS" --wallets 1000000 --holders 300000 --max-positions 7 \
  --weight-per-minute 0
python3 -c "
for i in range(1000000): print(f'0x{0x5eed0000 + i:040x}')" > "$WORK/wallets.txt"
track_db
start_track "$FAKE" "$FAKE_WS" --weight-per-minute 1000000 --concurrency 16 --wallets "$WORK/wallets.txt"
BEFORE_BIN=${BEFORE_BIN:-$BIN}
AFTER_BIN=${AFTER_BIN:-$BIN}
sleep "${START_AFTER:-110}"
n=0
for round in $(seq 1 "${ROUNDS:-3}"); do
  for which in BEFORE AFTER; do
    n=$((n + 1))
    bin=${which}_BIN
    port=$((PORT + 10 + n))
    t0=$(date +%s.%N)
    RUST_LOG=info "${!bin}" serve --bind "127.0.0.1:$port" --database-url "$DB" --access-log false \
      --saved-version "$WORK/none-$n.bin" 2> "$WORK/serve-$n.log" &
    pid=$!
    result=timeout
    for _ in $(seq 1 600); do
      if ! kill -0 "$pid" 2> /dev/null; then
        result="exited: $(grep -iE 'error|pruned' "$WORK/serve-$n.log" | tail -n 2 | tr '\n' ' ')"
        break
      fi
      if curl -sf "http://127.0.0.1:$port/healthz" > /dev/null; then result=ready; break; fi
      sleep 0.1
    done
    t1=$(date +%s.%N)
    served=$(grep "published data version" "$WORK/track.log" | tail -n 1 | grep -oE "[0-9]+ wallets" | head -n 1 || true)
    downs=$(grep -c "unreachable" "$WORK/serve-$n.log" || true)
    printf "%s round %s: %s after %.1f s (track: %s; 'unreachable' warnings: %s)\n" \
      "$which" "$round" "$result" "$(echo "$t1 - $t0" | bc)" "$served" "$downs"
    grep -E "serving data version" "$WORK/serve-$n.log" | head -n 1 || true
    kill "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
  done
done
echo "publishes of track: $(grep -c "published data version" "$WORK/track.log")"
