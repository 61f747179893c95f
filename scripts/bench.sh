#!/usr/bin/env bash
# Load benchmark: our release server on the reference dataset against a
# baseline actix-web server returning the same number of bytes, under the same
# wrk load, alternating, with medians of several runs. Not run by CI.
#
#   scripts/bench.sh [RUNS] [WALLETS]       (defaults: 3 runs, 100000 wallets)
#
# `serve` runs with its defaults except the access log, which is off
# (ACCESS_LOG=true to measure with it); a later phase measures market
# detail with the access log on (the default) against off. After the load table, a last phase
# applies a new data version (a full re-seed, heavier than a scan) while a
# light load runs, and prints the slowest request seen in each phase of it.
# RUNS=0 skips the table (only start-up, memory and that last phase).
#
# PREVIOUS=path/to/market-data-server also serves the same database with
# another build and measures it in the same alternation (ours, previous,
# baseline), adding its req/s and ratio: the way to compare a change with
# the build before it in one window, since the machine's speed drifts.
#
# Needs wrk, bc, curl and python3 (Debian: apt-get install wrk bc curl). Prints a
# markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
WALLETS=${2:-100000}
DURATION=${DURATION:-10s}
OURS=127.0.0.1:18801
BASE=127.0.0.1:18802
PREV=127.0.0.1:18803
PREVIOUS=${PREVIOUS:-}
# shellcheck source=scripts/common.sh
source scripts/common.sh
require wrk bc curl

cargo build --release -q -p market-data-server -p bench-baseline
# Honors CARGO_TARGET_DIR like cargo does.
RELEASE=${CARGO_TARGET_DIR:-target}/release
BIN=$RELEASE/market-data-server
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; wait; rm -rf "$WORK"' EXIT

echo "seeding $WALLETS wallets" >&2
/usr/bin/time -f "seed: %e s, peak RSS %M KB" "$BIN" seed-demo --wallets "$WALLETS" --database-url "$WORK/bench.db" 2> "$WORK/seed.log" || { cat "$WORK/seed.log"; exit 1; }
tail -n 1 "$WORK/seed.log" >&2
TOKEN=$("$BIN" token create --name bench --rate-limit 2000000000/min --database-url "$WORK/bench.db" | tail -n 1)

start=$(date +%s.%N)
"$BIN" serve --bind "$OURS" --database-url "$WORK/bench.db" --access-log "${ACCESS_LOG:-false}" 2> "$WORK/serve.log" &
SERVER=$!
until curl -sf "http://$OURS/healthz" > /dev/null; do sleep 0.05; done
ready=$(echo "$(date +%s.%N) - $start" | bc)
echo "serve ready after ${ready} s; RSS $(grep VmRSS /proc/$SERVER/status | awk '{print $2, $3}')" >&2
grep "serving data version" "$WORK/serve.log" >&2

TODAY=$(date -u +%F)
FROM=$(date -u -d '-29 days' +%F)
# The biggest wallet (the first of the default order).
WHALE=$(curl -s -H "X-API-Key: $TOKEN" "http://$OURS/v1/networks/perpnet/wallets?limit=1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["items"][0]["address"])')
declare -a NAMES=(
  "markets list"
  "market detail"
  "whale-positions (limit=200)"
  "wallets (limit=200, size=whale)"
  "liquidity-levels (30 days, one asset)"
  "candles (1h, 500)"
  "market history (90 days of 1h, one asset)"
  "wallet detail (the biggest wallet)"
  "position-events (limit=50)"
)
declare -a PATHS=(
  "/v1/networks/perpnet/markets"
  "/v1/networks/perpnet/markets/BTC"
  "/v1/networks/perpnet/markets/BTC/whale-positions?limit=200"
  "/v1/networks/perpnet/wallets?limit=200&size=whale"
  "/v1/networks/perpnet/liquidity-levels?fromDate=$FROM&toDate=$TODAY&asset=ETH&limit=30"
  "/v1/networks/perpnet/markets/BTC/candles?interval=1h&limit=500"
  "/v1/networks/perpnet/markets/BTC/history?interval=1h&limit=2160"
  "/v1/networks/perpnet/wallets/$WHALE"
  "/v1/networks/perpnet/position-events?limit=50"
)
SIZES=()
for p in "${PATHS[@]}"; do
  SIZES+=("$(curl -s -H "X-API-Key: $TOKEN" "http://$OURS$p" | wc -c)")
done
"$RELEASE/bench-baseline" "$BASE" "${SIZES[@]}" 2> /dev/null &
if [ -n "$PREVIOUS" ]; then
  "$PREVIOUS" serve --bind "$PREV" --database-url "$WORK/bench.db" --access-log "${ACCESS_LOG:-false}" 2> "$WORK/previous.log" &
  PREVIOUS_PID=$!
  until curl -sf "http://$PREV/healthz" > /dev/null; do sleep 0.05; done
fi
until curl -sf "http://$BASE/bytes/${SIZES[0]}" > /dev/null; do sleep 0.05; done

# wrk → "req/s p50_ms p99_ms"
measure() {
  wrk -t2 -c64 -d"$DURATION" --latency -H "X-API-Key: $TOKEN" "$1" | awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /Requests\/sec/ { rps = $2 }
    $1 == "50%" { p50 = ms($2) }
    $1 == "99%" { p99 = ms($2) }
    END { printf "%s %s %s\n", rps, p50, p99 }'
}

if [ "$RUNS" -gt 0 ]; then
echo
if [ -n "$PREVIOUS" ]; then
  echo "| endpoint | body bytes | ours req/s | baseline req/s | throughput ratio | ours p50 / p99 ms | baseline p50 / p99 ms | p99 ratio | previous req/s | previous ratio | previous p99 ratio |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
else
  echo "| endpoint | body bytes | ours req/s | baseline req/s | throughput ratio | ours p50 / p99 ms | baseline p50 / p99 ms | p99 ratio |"
  echo "|---|---|---|---|---|---|---|---|"
fi
for i in "${!PATHS[@]}"; do
  : > "$WORK/ours"; : > "$WORK/base"; : > "$WORK/prev"
  for _ in $(seq 1 "$RUNS"); do
    measure "http://$OURS${PATHS[$i]}" >> "$WORK/ours"
    [ -z "$PREVIOUS" ] || measure "http://$PREV${PATHS[$i]}" >> "$WORK/prev"
    measure "http://$BASE/bytes/${SIZES[$i]}" >> "$WORK/base"
  done
  o_rps=$(cut -d' ' -f1 "$WORK/ours" | median); b_rps=$(cut -d' ' -f1 "$WORK/base" | median)
  o_p50=$(cut -d' ' -f2 "$WORK/ours" | median); b_p50=$(cut -d' ' -f2 "$WORK/base" | median)
  o_p99=$(cut -d' ' -f3 "$WORK/ours" | median); b_p99=$(cut -d' ' -f3 "$WORK/base" | median)
  row=$(printf "| %s | %s | %.0f | %.0f | %.2f | %.2f / %.2f | %.2f / %.2f | %.2f |" "${NAMES[$i]}" "${SIZES[$i]}" \
    "$o_rps" "$b_rps" "$(echo "$o_rps / $b_rps" | bc -l)" "$o_p50" "$o_p99" "$b_p50" "$b_p99" "$(echo "$o_p99 / $b_p99" | bc -l)")
  if [ -n "$PREVIOUS" ]; then
    p_rps=$(cut -d' ' -f1 "$WORK/prev" | median); p_p99=$(cut -d' ' -f3 "$WORK/prev" | median)
    row="$row$(printf " %.0f | %.2f | %.2f |" "$p_rps" "$(echo "$p_rps / $b_rps" | bc -l)" "$(echo "$p_p99 / $b_p99" | bc -l)")"
  fi
  echo "$row"
done
echo
echo "median of $RUNS alternating runs, wrk -t2 -c64 -d$DURATION, $(nproc) cores; serve RSS now: $(grep VmRSS /proc/$SERVER/status | awk '{print $2, $3}')"
fi

# The access log's cost: the same binary with its default configuration
# (access log on, text, stderr to a file) against the table's server (log
# off), alternating on market detail, the smallest and most frequent answer.
if [ "$RUNS" -gt 0 ]; then
  LOGGED=127.0.0.1:18804
  "$BIN" serve --bind "$LOGGED" --database-url "$WORK/bench.db" 2> "$WORK/logged.log" &
  LOGGED_PID=$!
  until curl -sf "http://$LOGGED/healthz" > /dev/null; do sleep 0.05; done
  : > "$WORK/on"; : > "$WORK/off"; : > "$WORK/base"
  for _ in $(seq 1 "$RUNS"); do
    measure "http://$LOGGED${PATHS[1]}" >> "$WORK/on"
    measure "http://$OURS${PATHS[1]}" >> "$WORK/off"
    measure "http://$BASE/bytes/${SIZES[1]}" >> "$WORK/base"
  done
  on=$(cut -d' ' -f1 "$WORK/on" | median); off=$(cut -d' ' -f1 "$WORK/off" | median); base=$(cut -d' ' -f1 "$WORK/base" | median)
  echo
  echo "| market detail | access log on (default) req/s | off req/s | on / off | on / baseline | off / baseline | on p99 ms | off p99 ms |"
  echo "|---|---|---|---|---|---|---|---|"
  printf "| %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f |\n" "${SIZES[1]} bytes" "$on" "$off" \
    "$(echo "$on / $off" | bc -l)" "$(echo "$on / $base" | bc -l)" "$(echo "$off / $base" | bc -l)" \
    "$(cut -d' ' -f3 "$WORK/on" | median)" "$(cut -d' ' -f3 "$WORK/off" | median)"
  kill "$LOGGED_PID"; wait "$LOGGED_PID" 2> /dev/null || true
  echo "access-log lines written: $(grep -c ' INFO  access\]' "$WORK/logged.log"), dropped: $(grep ' lines dropped' "$WORK/logged.log" | awk '{ n += $4 } END { print n + 0 }')"
fi

# Cold reads: the first request for each of 20 assets' 90 days of hourly
# history (nothing in the page cache for it yet), one at a time.
if [ "$RUNS" -gt 0 ]; then
  echo
  curl -s -H "X-API-Key: $TOKEN" "http://$OURS/v1/networks/perpnet/markets?sort=openInterest" |
    python3 -c 'import json, sys; [print(m["symbol"]) for m in json.load(sys.stdin)["items"][1:21]]' > "$WORK/assets"
  while read -r asset; do
    curl -s -o /dev/null -w '%{time_total}\n' -H "X-API-Key: $TOKEN" \
      "http://$OURS/v1/networks/perpnet/markets/$asset/history?interval=1h&limit=2160"
  done < "$WORK/assets" | sort -g | awk '{ a[NR] = $1 * 1000 } END { printf "cold market history (90 days of 1h, 20 assets, first request each): p50 %.1f ms, max %.1f ms\n", a[int((NR + 1) / 2)], a[NR] }'
fi

# The previous build would load the next version too: it stops here.
[ -z "$PREVIOUS" ] || kill "$PREVIOUS_PID"

# Applying a new data version while serving: a light load (wrk -t1 -c4) on
# two snapshot endpoints while a full re-seed writes a new version (another
# process on the same two cores, as a co-located scanner would be) and while
# the server then loads and swaps it. The load runs in 3 s chunks, so each
# chunk's slowest request can be placed in one of the two phases.
echo
echo "applying a new data version under load:"
version() { curl -s -D - -o /dev/null -H "X-API-Key: $TOKEN" "http://$OURS${PATHS[1]}" | awk 'tolower($1) == "x-data-version:" { print $2 + 0 }'; }
VERSION_BEFORE=$(version)
# → one line per chunk: "start end max_ms p99_ms requests" (epoch seconds)
loader() {
  while [ ! -f "$WORK/stop" ]; do
    local s; s=$(date +%s.%N)
    wrk -t1 -c4 -d3s --latency -H "X-API-Key: $TOKEN" "$1" | awk -v s="$s" -v e="$(date +%s.%N)" '
      function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
      /Latency/ && !seen { max = ms($4); seen = 1 }
      $1 == "99%" { p99 = ms($2) }
      /requests in/ { n = $1 }
      END { printf "%s %s %s %s %s\n", s, e, max, p99, n }' >> "$2"
  done
}
LOADERS=()
for i in 1 2; do
  loader "http://$OURS${PATHS[$i]}" "$WORK/chunks-$i" &
  LOADERS+=($!)
done
sleep 4
SEED_START=$(date +%s.%N)
"$BIN" seed-demo --wallets "$WALLETS" --database-url "$WORK/bench.db" > /dev/null 2>&1
SEED_END=$(date +%s.%N)
until [ "$(version)" -gt "$VERSION_BEFORE" ]; do sleep 0.1; done
SERVED=$(date +%s.%N)
sleep 4
touch "$WORK/stop"
wait "${LOADERS[@]}"
echo "  re-seed (writing the new version): $(echo "$SEED_END - $SEED_START" | bc | xargs printf '%.1f') s; loading and swapping it: $(echo "$SERVED - $SEED_END" | bc | xargs printf '%.1f') s"
# A chunk belongs to every phase it overlaps.
cat "$WORK"/chunks-* | awk -v s0="$SEED_START" -v s1="$SEED_END" -v s2="$SERVED" '
  function upd(k) { if ($3 > max[k]) max[k] = $3; if ($4 > p99[k]) p99[k] = $4; n[k] += $5 }
  $2 > s0 && $1 < s1 { upd("while the new version was written") }
  $2 > s1 && $1 < s2 + 1 { upd("while the server loaded and swapped it") }
  $2 <= s0 || $1 >= s2 + 1 { upd("before and after") }
  END { for (k in max) printf "  %s: max %.1f ms, worst chunk p99 %.2f ms, %d requests\n", k, max[k], p99[k], n[k] }'
grep "serving data version" "$WORK/serve.log" | tail -n 1
echo "serve RSS after the reload: $(grep VmRSS /proc/$SERVER/status | awk '{print $2, $3}'), peak $(grep VmHWM /proc/$SERVER/status | awk '{print $2, $3}')"
