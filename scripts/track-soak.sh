#!/usr/bin/env bash
# Soak test of `track` (release, default settings: 1200 weight a minute, a
# publish every 60 s, hourly candles on) against the simulated exchange of
# tests/fake-exchange with the cases real data has: flat traders (wallets
# that trade round trips and hold nothing, so every read of them is empty and
# each trade makes them due again), account states without cumFunding and
# returnOnEquity and with an undocumented member (every 7th wallet), and
# markets with no new candle (the fake has none). Once a minute it prints a
# markdown row from track's /metrics and the fake's /truth: publishes
# applied and failed, the age of the last applied publish, wallets held back,
# reads of the flat traders, candle requests (total, most in one minute,
# shortest gap), and the account-state members counted. Not run by CI.
#
#   scripts/track-soak.sh [MINUTES] [WALLETS]      (defaults: 30, 20000)
#
# PORT=N moves its three ports (default 18911-18913), to run two at once.
# TRACK_BIN=PATH runs another build's server binary as `track` (an earlier
# commit's, to compare) against this build's fake exchange.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
MINUTES=${1:-30}
WALLETS=${2:-20000}
PORT=${PORT:-18911}
FAKE=127.0.0.1:$PORT
FAKE_WS=127.0.0.1:$((PORT + 1))
METRICS=127.0.0.1:$((PORT + 2))
require curl python3

release_workdir
start_fake "$FAKE" "$FAKE_WS" --wallets "$WALLETS"
track_db
start_track "$FAKE" "$FAKE_WS" --metrics-bind "$METRICS"

echo "| minute | publishes applied / failed | last publish age (s) | held back | flat-trader reads (wallets read again) | candle requests (most in a minute, shortest gap s) | members missing / unknown |"
echo "|---|---|---|---|---|---|---|"
for minute in $(seq 1 "$MINUTES"); do
  sleep 60
  metrics=$(curl -s "http://$METRICS/metrics" || true)
  truth=$(curl -s "http://$FAKE/truth" || echo '{}')
  python3 - "$minute" "$metrics" "$truth" <<'PY'
import json, sys
minute, metrics, truth = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
def m(name, label=""):
    total = 0.0
    for line in metrics.splitlines():
        if line.startswith(name) and label in line and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)
gap = truth.get("minCandleGapMs")
print(f"| {minute} | {m('market_data_tracker_publishes_total', 'ok')} / {m('market_data_tracker_publishes_total', 'failed')} "
      f"| {m('market_data_tracker_last_publish_age_seconds')} | {m('market_data_tracker_held_back_wallets')} "
      f"| {truth.get('flatReads')} ({truth.get('flatWalletsReadAgain')}) | {truth.get('requestsByType', {}).get('candleSnapshot', 0)} "
      f"({truth.get('maxCandleRequestsPerMinute')}, {'-' if gap is None else round(gap / 1000, 1)}) "
      f"| {m('market_data_ingest_account_state_members_total', 'missing')} / {m('market_data_ingest_account_state_members_total', 'unknown')} |")
PY
done
echo "publish log lines: $(grep -c 'published data version' "$WORK/track.log" || true) applied, $(grep -c 'publish not applied' "$WORK/track.log" || true) not applied, $(grep -c 'held back from publishing' "$WORK/track.log" || true) wallets held back" >&2
grep -m 3 -E "WARN|ERROR" "$WORK/track.log" >&2 || true
