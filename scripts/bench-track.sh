#!/usr/bin/env bash
# Live-tracking benchmark: `track` (release, default settings: 1200 weight a
# minute, a publish every 60 s) from a cold start against the simulated
# exchange of tests/fake-exchange (200,000 wallets by default, a few thousand
# of 1M USD or more, 8 HIP-3 dexes, trades and new wallets every second),
# with `serve` beside it. Once a minute it prints, from the coverage
# endpoint and /proc, a markdown row: wallets tracked, whales tracked against
# the simulation's, whale and shark staleness, the share of the simulated
# open interest covered, and track's resident memory and CPU. Not run by CI.
#
#   scripts/bench-track.sh [MINUTES] [WALLETS]      (defaults: 35, 200000)
#
# WEIGHT=N sets the budget of both sides (the fake's limit and track's
# --weight-per-minute; default 1200, the public limit), as for an operator's
# own node or a provider without the public limit. PORT=N moves its three
# ports (default 18901-18903) and TRACK_BIN runs another build's `track`, to
# run two builds side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-35}
WALLETS=${2:-200000}
PORT=${PORT:-18901}
FAKE=127.0.0.1:$PORT
FAKE_WS=127.0.0.1:$((PORT + 1))
SERVE=127.0.0.1:$((PORT + 2))
source scripts/common.sh
require curl python3

release_workdir
WEIGHT=${WEIGHT:-1200}
start_fake "$FAKE" "$FAKE_WS" --wallets "$WALLETS" --weight-per-minute "$WEIGHT"
track_db
TOKEN=$("$BIN" token create --name bench --rate-limit 2000000000/min --database-url "$DB" | tail -n 1)
start_track "$FAKE" "$FAKE_WS" --weight-per-minute "$WEIGHT"
"$BIN" serve --bind "$SERVE" --database-url "$DB" --access-log false 2> "$WORK/serve.log" &

TICKS=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$TRACK/stat"; }
echo "| minute | tracked | never read | whales tracked / simulated | whale p50 / p99 (s) | shark p99 (s) | open interest covered | track RSS (MB) | track CPU, last minute |"
echo "|---|---|---|---|---|---|---|---|---|"
before=$(cpu)
for minute in $(seq 1 "$MINUTES"); do
  sleep 60
  now=$(cpu)
  rss=$(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$TRACK/status")
  load=$(( (now - before) * 100 / TICKS / 60 ))
  before=$now
  coverage=$(curl -s -H "X-API-Key: $TOKEN" "http://$SERVE/v1/networks/perpnet/coverage" || true)
  truth=$(curl -s "http://$FAKE/truth" || echo '{"whales": "?"}')
  python3 - "$minute" "$rss" "$load" "$coverage" "$truth" <<'PY'
import json, sys
minute, rss, load, coverage, truth = sys.argv[1:]
t = json.loads(truth)
try:
    c = json.loads(coverage)
    w = c["wallets"]
    whale, shark = w["bySizeClass"][0], w["bySizeClass"][1]
    share = c["coveredShare"] or "0"
    print(f"| {minute} | {w['tracked']} | {w['neverRead']} | {whale['wallets']} / {t['whales']} | "
          f"{whale['p50Seconds']} / {whale['p99Seconds']} | {shark['p99Seconds']} | "
          f"{float(share) * 100:.1f} % | {rss} | {load} % |")
except (ValueError, KeyError):
    print(f"| {minute} | no data version yet | | | | | | {rss} | {load} % |")
PY
done
grep -c "published data version" "$WORK/track.log" | sed 's/^/publishes: /' >&2 || true
echo "track peak RSS: $(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$TRACK/status") MB" >&2
curl -s "http://$FAKE/truth" | python3 -c 'import json,sys; t=json.load(sys.stdin); print("exchange: requests", t["requests"], "answered 429 by the weight limit", t["rateLimited"], "trades pushed", t["tradesSent"])' >&2
tail -n 3 "$WORK/track.log" >&2
