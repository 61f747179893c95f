#!/usr/bin/env bash
# Serving at scale: what a running `serve` spends to apply `track`'s
# publishes when the data holds about 300,000 wallets and 1.2M positions,
# how much memory it keeps, and how soon a new `serve` is ready.
#
# It starts the simulated exchange of tests/fake-exchange (WALLETS wallets
# with 0 to 9 positions each, every one on the leaderboard, no weight
# limit), `track` with a budget that reads every wallet in a minute or two
# (`--weight-per-minute 1000000`: an operator's own node), and `serve`
# beside it. Once every wallet has been read and published, it measures,
# without requests, the CPU time of the running `serve` per publish applied
# (from /proc, so it includes the server's 1 s polls, and from the server's
# log): 3 minutes as they are, then MINUTES minutes after restarting `track`
# with its defaults (the public limit of 1200 weight a minute). Then it
# starts a second `serve` and times it until /healthz answers. Not run by CI.
#
#   scripts/bench-serve-scale.sh [MINUTES] [WALLETS]      (defaults: 10, 300000)
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-10}
WALLETS=${2:-300000}
FAKE=127.0.0.1:18911
FAKE_WS=127.0.0.1:18912
SERVE=127.0.0.1:18913
SERVE2=127.0.0.1:18914
for tool in curl python3; do
  command -v "$tool" > /dev/null || { echo "$tool is missing" >&2; exit 1; }
done

cargo build --release -q -p market-data-server -p fake-exchange
RELEASE=${CARGO_TARGET_DIR:-target}/release
BIN=${BIN:-$RELEASE/market-data-server}
WORK=${WORK:-$(mktemp -d)}
trap 'kill $(jobs -p) 2> /dev/null || true' EXIT
echo "work directory (logs, database): $WORK" >&2

"$RELEASE/fake-exchange" --wallets "$WALLETS" --leaderboard-rows "$WALLETS" --max-positions 9 \
  --weight-per-minute 0 --bind "$FAKE" --ws-bind "$FAKE_WS" > "$WORK/fake.log" 2>&1 &
until curl -sf "http://$FAKE/truth" > /dev/null; do sleep 0.5; done
head -n 1 "$WORK/fake.log" >&2
DB=$WORK/scale.db
"$BIN" migrate --database-url "$DB" > /dev/null
TOKEN=$("$BIN" token create --name bench --rate-limit 2000000000/min --database-url "$DB" | tail -n 1)
RUST_LOG=info "$BIN" track --database-url "$DB" --info-url "http://$FAKE/info" \
  --ws-url "ws://$FAKE_WS/ws" --leaderboard-url "http://$FAKE/leaderboard" \
  --weight-per-minute 1000000 --concurrency 16 --no-candles 2> "$WORK/track.log" &
TRACK=$!
RUST_LOG=info "$BIN" serve --bind "$SERVE" --database-url "$DB" --access-log false 2> "$WORK/serve.log" &
SERVER=$!

TICKS=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss() { awk "/$2/ {print int(\$2 / 1024)}" "/proc/$1/status"; }
applied() { grep -c "serving data version" "$WORK/serve.log" || true; }
coverage() { curl -s -H "X-API-Key: $TOKEN" "http://$SERVE/v1/networks/perpnet/coverage"; }

# Warm-up: until at most 1 % of the tracked wallets was never read, and two
# more publishes have been applied since.
start=$(date +%s)
while :; do
  sleep 15
  left=$(coverage | python3 -c 'import json,sys
try:
    w = json.load(sys.stdin)["wallets"]
    print(w["neverRead"] * 100 // w["tracked"] if w["tracked"] > 1000 else 100, w["tracked"], w["neverRead"])
except Exception: print(100, 0, "?")')
  read -r pct tracked never <<< "$left"
  echo "warm-up $(( $(date +%s) - start )) s: $never of $tracked tracked wallets never read, serve RSS $(rss $SERVER VmRSS) MB" >&2
  [ "$pct" -lt 1 ] && break
done
# CPU per publish applied over the next $2 minutes: from /proc (all of the
# server's CPU, its 1 s polls included) and from its own log lines.
measure() {
  local label=$1 minutes=$2
  local n; n=$(applied); until [ "$(applied)" -ge $((n + 2)) ]; do sleep 2; done
  local before_cpu before_n; before_cpu=$(cpu $SERVER); before_n=$(applied)
  sleep $((minutes * 60))
  local versions=$(( $(applied) - before_n ))
  local cpu_ms=$(( ($(cpu $SERVER) - before_cpu) * 1000 / TICKS ))
  local logged
  logged=$(grep "serving data version" "$WORK/serve.log" | tail -n +"$((before_n + 1))" \
    | sed -n 's/.*applied \([0-9]*\) changed.*process CPU \([0-9]*\) ms.*/\1 \2/p' | sort -n -k2 \
    | awk '{w += $1; c[NR] = $2} END {if (NR) printf "%d / %d / %d ms, %d wallets changed a publish on average", c[1], c[int((NR + 1) / 2)], c[NR], w / NR}')
  ROWS+="| $label: publishes applied in $minutes min | $versions |"$'\n'
  ROWS+="| $label: serve CPU per publish, from /proc | $(( cpu_ms / (versions > 0 ? versions : 1) )) ms |"$'\n'
  ROWS+="| $label: serve's log, CPU per publish min / median / max | ${logged:-none logged} |"$'\n'
}
ROWS=""
measure "own node (no weight limit)" 3
# Then track as users run it against the public API: its defaults.
kill $TRACK; wait $TRACK 2> /dev/null || true
RUST_LOG=info "$BIN" track --database-url "$DB" --info-url "http://$FAKE/info" \
  --ws-url "ws://$FAKE_WS/ws" --leaderboard-url "http://$FAKE/leaderboard" 2>> "$WORK/track.log" &
TRACK=$!
measure "track defaults (1200 weight a minute)" "$MINUTES"
last=$(grep "serving data version" "$WORK/serve.log" | tail -n 1)
publish=$(grep "published data version" "$WORK/track.log" | tail -n 1)

start2=$(date +%s%N)
RUST_LOG=info "$BIN" serve --bind "$SERVE2" --database-url "$DB" --access-log false 2> "$WORK/serve2.log" &
SERVER2=$!
until curl -sf "http://$SERVE2/healthz" > /dev/null; do sleep 0.05; done
ready_ms=$(( ($(date +%s%N) - start2) / 1000000 ))
sleep 2

echo
echo "| measure | figure |"
echo "|---|---|"
printf "%s" "$ROWS"
echo "| running serve: resident now / peak since start (incl. warm-up) | $(rss $SERVER VmRSS) / $(rss $SERVER VmHWM) MB |"
echo "| new serve: ready after start | $ready_ms ms |"
echo "| new serve: resident after ready / peak | $(rss $SERVER2 VmRSS) / $(rss $SERVER2 VmHWM) MB |"
echo
echo "last apply: ${last#*] }"
echo "last publish: ${publish#*] }"
echo "track: resident $(rss $TRACK VmRSS) MB, CPU $(( $(cpu $TRACK) / TICKS )) s since start"
