#!/usr/bin/env bash
# History growth: runs `track` (release) against the simulated exchange of
# tests/fake-exchange for MINUTES minutes with a publish every PUBLISH
# seconds, then reports what the history tables gained in the second half of
# the run (the first half discovers and first reads the wallets, a burst of
# first observations): rows and bytes (table plus indexes) per table and per
# series, and the figures they give for a day at 200 markets with a publish
# every 60 s. Market rows grow with
# markets × publishes; wallet rows and events grow with reads and trades,
# which the weight budget bounds, not the publish cadence. Not run by CI.
#
#   scripts/history-growth.sh [MINUTES] [PUBLISH]      (defaults: 10, 10)
#
# DATABASE_URL=postgres://… measures on PostgreSQL (a database of its own:
# the script creates and drops `mds_growth`); the default is an SQLite file.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-10}
PUBLISH=${2:-10}
FAKE=127.0.0.1:18911
FAKE_WS=127.0.0.1:18912
for tool in curl python3 sqlite3; do
  command -v "$tool" > /dev/null || { echo "$tool is missing" >&2; exit 1; }
done
cargo build --release -q -p market-data-server -p fake-exchange
RELEASE=${CARGO_TARGET_DIR:-target}/release
BIN=$RELEASE/market-data-server
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2> /dev/null || true; wait; rm -rf "$WORK"' EXIT

"$RELEASE/fake-exchange" --wallets 50000 --bind "$FAKE" --ws-bind "$FAKE_WS" > "$WORK/fake.log" 2>&1 &
until curl -sf "http://$FAKE/truth" > /dev/null; do sleep 0.5; done
if [ -n "${DATABASE_URL:-}" ]; then
  ADMIN=$DATABASE_URL
  psql -q "$ADMIN" -c 'DROP DATABASE IF EXISTS mds_growth' -c 'CREATE DATABASE mds_growth'
  DB="${ADMIN%/*}/mds_growth"
else
  DB=$WORK/growth.db
fi
"$BIN" migrate --database-url "$DB" > /dev/null
RUST_LOG=info "$BIN" track --database-url "$DB" --info-url "http://$FAKE/info" \
  --ws-url "ws://$FAKE_WS/ws" --leaderboard-url "http://$FAKE/leaderboard" \
  --publish-every "$PUBLISH" 2> "$WORK/track.log" &
TRACK=$!

# → "series rows body_bytes" per series and tier, then "table bytes" per table.
if [ -n "${DATABASE_URL:-}" ]; then
  q() { psql -qAt -F ' ' "$DB" -c "$1"; }
  size() { q "SELECT pg_total_relation_size('$1')"; }
else
  q() { sqlite3 -separator ' ' "$DB" "$1"; }
  size() { q "SELECT SUM(pgsize) FROM dbstat WHERE name = '$1' OR name IN (SELECT name FROM sqlite_master WHERE tbl_name = '$1' AND type = 'index')"; }
fi
figures() {
  echo "publishes $(q 'SELECT COUNT(*) FROM snapshots') $(q 'SELECT MAX(version) FROM snapshots')"
  echo "markets $(q 'SELECT COUNT(DISTINCT key) FROM history_points WHERE series = '"'market'"'')"
  for t in history_points history_hourly; do
    q "SELECT '$t', series, COUNT(*), SUM(LENGTH(body) + LENGTH(key) + 16) FROM $t GROUP BY series"
    echo "size $t $(size "$t")"
  done
  echo "history_events events $(q 'SELECT COUNT(*), SUM(LENGTH(body) + LENGTH(address) + LENGTH(symbol) + 40) FROM position_events')"
  echo "size position_events $(size position_events)"
}
sleep $((MINUTES * 30))
figures > "$WORK/half"
sleep $((MINUTES * 30))
figures > "$WORK/end"
kill "$TRACK"; wait "$TRACK" 2> /dev/null || true
python3 - "$MINUTES" "$PUBLISH" "$WORK/half" "$WORK/end" <<'PY'
import sys
minutes, publish = float(sys.argv[1]) / 2, float(sys.argv[2])
def read(path):
    rows, raw, size, versions, markets = {}, {}, {}, 0, 0
    for line in open(path):
        f = line.split()
        if f[0] == "publishes":
            versions = int(f[2])
        elif f[0] == "markets":
            markets = int(f[1])
        elif f[0] == "size":
            size[f[1]] = int(f[2] or 0)
        elif len(f) == 4:
            rows[(f[0], f[1])] = int(f[2])
            raw[(f[0], f[1])] = int(f[3] or 0)
    return rows, raw, size, versions, markets
r0, w0, s0, v0, _ = read(sys.argv[3])
r1, w1, s1, v1, markets = read(sys.argv[4])
# What the second half added.
rows = {k: v - r0.get(k, 0) for k, v in r1.items()}
raw = {k: v - w0.get(k, 0) for k, v in w1.items()}
size = {k: v - s0.get(k, 0) for k, v in s1.items()}
versions = v1 - v0
# A table's bytes are split between its series by their raw row bytes.
def bytes_of(table, series):
    total = sum(v for (t, _), v in raw.items() if t == table)
    return size.get(table, 0) * raw.get((table, series), 0) / total if total else 0
day = 24 * 60 / minutes
print(f"second half of the run: {versions} publishes in {minutes:.0f} min, {markets} markets\n")
print("| table, series | rows | bytes (table + indexes) | bytes per row |")
print("|---|---|---|---|")
for (table, series), n in sorted(rows.items()):
    b = size["position_events"] if table == "history_events" else bytes_of(table, series)
    print(f"| {table}, {series} | {n} | {b:,.0f} | {b / n if n else 0:,.0f} |")
per_market_point = bytes_of("history_points", "market") / rows[("history_points", "market")]
# (An hour's rows may not have started in the second half: whole-run figures.)
rows, raw, size = r1, w1, s1
# Hours are copied into the hourly tier only when they leave the points'
# retention (a week): in a shorter run a point's bytes stand for an hour's.
hourly_rows = rows.get(("history_hourly", "market"), 0)
per_market_hour = bytes_of("history_hourly", "market") / hourly_rows if hourly_rows else per_market_point
rows = {k: v - r0.get(k, 0) for k, v in r1.items()}
raw = {k: v - w0.get(k, 0) for k, v in w1.items()}
size = {k: v - s0.get(k, 0) for k, v in s1.items()}
wallet_rows = rows.get(("history_points", "wallet"), 0)
wallet_bytes = bytes_of("history_points", "wallet")
event_rows = rows.get(("history_events", "events"), 0)
event_bytes = size.get("position_events", 0)
print()
print("A day at 200 markets, a publish every 60 s (market rows scale with markets × publishes; wallet rows and events with tracking time):\n")
print("| what | rows per day | MB per day | kept | MB when full |")
print("|---|---|---|---|---|")
r = 200 * 1440
print(f"| market points | {r:,} | {r * per_market_point / 1e6:,.0f} | 7 days | {7 * r * per_market_point / 1e6:,.0f} |")
r = 200 * 24
print(f"| market hourly | {r:,} | {r * per_market_hour / 1e6:,.1f} | 365 days | {365 * r * per_market_hour / 1e6:,.0f} |")
r = wallet_rows * day
print(f"| wallet points | {r:,.0f} | {wallet_bytes * day / 1e6:,.0f} | 7 days | {7 * wallet_bytes * day / 1e6:,.0f} |")
r = event_rows * day
print(f"| position events | {r:,.0f} | {event_bytes * day / 1e6:,.0f} | 365 days | {365 * event_bytes * day / 1e6:,.0f} |")
PY
[ -z "${DATABASE_URL:-}" ] || psql -q "$ADMIN" -c 'DROP DATABASE IF EXISTS mds_growth'
