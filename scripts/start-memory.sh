#!/usr/bin/env bash
# A new server's start on an existing database, for one or two builds
# started alternately: seconds until /healthz answers, peak and final
# resident memory (VmHWM, VmRSS) and the process CPU of the start. Not run
# by CI.
#
#   scripts/start-memory.sh DATABASE ROUNDS BIN [BIN2]
#
# e.g. target/release/market-data-server seed-demo --wallets 300000 --database-url demo300k.db
#      scripts/start-memory.sh demo300k.db 3 BEFORE_BIN AFTER_BIN
# A BIN may carry `serve` flags after it, in one argument:
#      scripts/start-memory.sh demo300k.db 3 "BIN --saved-version none" BIN
# Prints one line per start: build, ready_s, peak_MB, rss_MB, cpu_s.
set -euo pipefail
DB=$1 ROUNDS=$2
shift 2
PORT=18941
trap 'kill $(jobs -p) 2> /dev/null || true' EXIT
echo "build ready_s peak_MB rss_MB cpu_s"
for _ in $(seq 1 "$ROUNDS"); do
  for BIN in "$@"; do
    start=$(date +%s.%N)
    read -r -a CMD <<< "$BIN"
    RUST_LOG=warn "${CMD[0]}" serve "${CMD[@]:1}" --database-url "$DB" --bind "127.0.0.1:$PORT" --access-log false > /dev/null 2>&1 &
    PID=$!
    until curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz"; do
      kill -0 "$PID" 2> /dev/null || { echo "$BIN exited before it was ready" >&2; exit 1; }
      sleep 0.05
    done
    end=$(date +%s.%N)
    sleep 1
    hwm=$(awk '/VmHWM/ {print $2}' "/proc/$PID/status")
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$PID/status")
    ticks=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    kill "$PID"
    wait "$PID" 2> /dev/null || true
    printf '%s %.2f %d %d %.2f\n' "${BIN// /_}" "$(echo "$end - $start" | bc)" $((hwm / 1024)) $((rss / 1024)) \
      "$(echo "scale=2; $ticks / $(getconf CLK_TCK)" | bc)"
  done
done
