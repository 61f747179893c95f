#!/usr/bin/env bash
# Webhook delivery, end to end, in the default configuration (SQLite, one
# `serve`): `track` publishes every 5 s what it reads from the simulated
# exchange (WALLETS wallets, TRADES trades a second, an own node's budget);
# one endpoint takes every position event; the receiver
# (tests/webhooks/receiver.py) verifies each message with the
# `standardwebhooks` package and logs it. Three phases:
# 1. steady: STEADY seconds of deliveries (the rate a minute, and how long
#    after the observation each message arrived);
# 2. the receiver is down for DOWN seconds, then back: everything arrives,
#    in order, and how long the backlog took;
# 3. halfway through that backlog, `kill -9` of the delivering server and a
#    restart: nothing lost, and repeats by webhook-id (at most the message
#    in flight).
# scripts/webhook-report.py checks the receiver's log against the outbox.
# Not run by CI.
#
#   scripts/bench-webhooks.sh [STEADY] [DOWN] [WALLETS] [TRADES]   (defaults: 300, 600, 20000, 10)
set -euo pipefail
cd "$(dirname "$0")/.."
STEADY=${1:-300}
DOWN=${2:-600}
WALLETS=${3:-20000}
TRADES=${4:-10}
PORT=${PORT:-18981}
FAKE=127.0.0.1:$PORT
FAKE_WS=127.0.0.1:$((PORT + 1))
SERVE=127.0.0.1:$((PORT + 2))
RECEIVER_PORT=$((PORT + 3))
source scripts/common.sh
require curl python3

release_workdir
if [ -z "${STANDARD_WEBHOOKS_PYTHON:-}" ]; then
  python3 -m venv "$WORK/venv"
  "$WORK/venv/bin/pip" install -q standardwebhooks==1.1.0
  STANDARD_WEBHOOKS_PYTHON=$WORK/venv/bin/python
fi
start_fake "$FAKE" "$FAKE_WS" --wallets "$WALLETS" --weight-per-minute 0 --trades-per-second "$TRADES"
track_db
RX_LOG=$WORK/received.jsonl
start_receiver() {
  "$STANDARD_WEBHOOKS_PYTHON" tests/webhooks/receiver.py --port "$RECEIVER_PORT" \
    --secret "$SECRET" --log "$RX_LOG" 2>> "$WORK/receiver.log" &
  RECEIVER=$!
  until timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$RECEIVER_PORT" 2> /dev/null; do sleep 0.2; done
}
start_serve() {
  RUST_LOG=info "$BIN" serve --bind "$SERVE" --database-url "$DB" --access-log false \
    --allow-private-webhook-targets 2>> "$WORK/serve.log" &
  SERVER=$!
  until curl -sf "http://$SERVE/readyz" > /dev/null; do sleep 0.5; done
}
received() { [ -f "$RX_LOG" ] && wc -l < "$RX_LOG" || echo 0; }
pending() { "$BIN" webhook list --json --database-url "$DB" | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["pending"])'; }
stamp() { date +%s.%N; }

start_serve
start_track "$FAKE" "$FAKE_WS" --weight-per-minute 1000000 --publish-every 5
# Until the wallets are read (their first observations are events too) and
# publishes are steady; the endpoint takes what comes after.
sleep 90
SECRET=$("$BIN" webhook create --url "http://127.0.0.1:$RECEIVER_PORT/hook" \
  --allow-private-webhook-targets --database-url "$DB" | tail -n 1)
start_receiver
MARKS=$WORK/marks.txt

echo "steady_from $(stamp)" >> "$MARKS"
sleep "$STEADY"
echo "steady_to $(stamp)" >> "$MARKS"

kill "$RECEIVER"; wait "$RECEIVER" 2> /dev/null || true
echo "down_from $(stamp)" >> "$MARKS"
sleep "$DOWN"
echo "down_to $(stamp)" >> "$MARKS"
BACKLOG=$(pending)
echo "pending when the receiver came back: $BACKLOG"
start_receiver
# kill -9 of the delivering server halfway through the backlog, while
# messages flow; it is restarted at once.
while [ "$(pending)" -gt $((BACKLOG / 2)) ]; do sleep 0.2; done
kill -9 "$SERVER"; wait "$SERVER" 2> /dev/null || true
sleep 0.5
echo "kill $(stamp) received_before $(received)" >> "$MARKS"
start_serve
echo "restarted $(stamp)" >> "$MARKS"
while [ "$(pending)" -gt 200 ]; do sleep 1; done
echo "caught_up $(stamp)" >> "$MARKS"
sleep 60
# Stop the source, then let the outbox drain.
kill "$TRACK"; wait "$TRACK" 2> /dev/null || true
while [ "$(pending)" -gt 0 ]; do sleep 1; done
sleep 2
"$BIN" webhook deliveries 1 --json --limit 1000000 --database-url "$DB" > "$WORK/deliveries.json"
python3 scripts/webhook-report.py "$RX_LOG" "$WORK/deliveries.json" "$MARKS"
grep -c "published data version" "$WORK/track.log" | sed 's/^/publishes by track: /'
