#!/usr/bin/env bash
# History reads at a year of data on PostgreSQL: seeds the demo data (90 days
# of history for every market) into a database of its own, extends every
# market's hourly history back to 365 days and fills 7 days of per-minute
# points (a year at the default retention of a writer that publishes every
# minute), then times the first request (page cache empty) of 90 days of
# hourly history for 20 assets, and shows the plan of the query behind it.
# Not run by CI.
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres scripts/history-scale.sh
#
# The database `mds_scale` is created and dropped.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL to an admin URL of a PostgreSQL server}"
for tool in curl python3 psql; do
  command -v "$tool" > /dev/null || { echo "$tool is missing" >&2; exit 1; }
done
cargo build --release -q -p market-data-server
BIN=${CARGO_TARGET_DIR:-target}/release/market-data-server
SERVE=127.0.0.1:18921
DB="${DATABASE_URL%/*}/mds_scale"
psql -q "$DATABASE_URL" -c 'DROP DATABASE IF EXISTS mds_scale' -c 'CREATE DATABASE mds_scale'
trap 'kill $(jobs -p) 2> /dev/null || true; psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS mds_scale WITH (FORCE)"' EXIT

"$BIN" seed-demo --wallets 2000 --database-url "$DB" 2>&1 | tail -n 1
psql -q "$DB" <<'SQL'
-- Every market's hourly history back to 365 days (the demo holds 90), and
-- a point a minute for the last 7 days, each a copy of its latest body.
INSERT INTO history_hourly (series, key, hour, at, body)
SELECT h.series, h.key, t.hour, t.hour + 3300000, h.body
FROM (SELECT DISTINCT ON (key) series, key, hour, body FROM history_hourly
      WHERE series = 'market' ORDER BY key, hour DESC) h
CROSS JOIN LATERAL generate_series(h.hour - 364 * 86400000::bigint, h.hour - 1, 3600000) AS t(hour)
ON CONFLICT DO NOTHING;
INSERT INTO history_points (hour, series, key, at, body)
SELECT t.at - t.at % 3600000, h.series, h.key, t.at, h.body
FROM (SELECT DISTINCT ON (key) series, key, at, body FROM history_points
      WHERE series = 'market' ORDER BY key, at DESC) h
CROSS JOIN LATERAL generate_series(h.at - 7 * 86400000::bigint, h.at - 1, 60000) AS t(at)
ON CONFLICT DO NOTHING;
ANALYZE history_hourly;
ANALYZE history_points;
SQL
psql -qAt "$DB" -c "SELECT 'history_hourly: ' || COUNT(*) || ' rows, ' || pg_size_pretty(pg_total_relation_size('history_hourly')) FROM history_hourly" \
  -c "SELECT 'history_points: ' || COUNT(*) || ' rows, ' || pg_size_pretty(pg_total_relation_size('history_points')) FROM history_points"
TOKEN=$("$BIN" token create --name scale --rate-limit 2000000000/min --database-url "$DB" | tail -n 1)
"$BIN" serve --bind "$SERVE" --database-url "$DB" --access-log false 2> /dev/null &
until curl -sf "http://$SERVE/readyz" > /dev/null; do sleep 0.2; done
curl -s -H "X-API-Key: $TOKEN" "http://$SERVE/v1/networks/perpnet/markets?sort=openInterest" |
  python3 -c 'import json, sys; [print(m["symbol"]) for m in json.load(sys.stdin)["items"][:20]]' > /tmp/mds-scale-assets
for interval in 1h 5m; do
  while read -r asset; do
    curl -s -o /dev/null -w '%{time_total} %{size_download}\n' -H "X-API-Key: $TOKEN" \
      "http://$SERVE/v1/networks/perpnet/markets/$asset/history?interval=$interval&limit=2160"
  done < /tmp/mds-scale-assets | sort -g | awk -v i="$interval" '{ a[NR] = $1 * 1000; b = $2 } END {
    printf "first request of %s history (limit 2160), 20 assets: p50 %.1f ms, max %.1f ms (%d bytes)\n", i, a[int((NR + 1) / 2)], a[NR], b }'
done
rm -f /tmp/mds-scale-assets
echo "plan of one statement of the hourly read of one asset (a week of hours, as the store reads them):"
psql -qAt "$DB" -c "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
  SELECT at, body FROM history_hourly
  WHERE hour = ANY (ARRAY(SELECT generate_series((SELECT MAX(hour) FROM history_hourly) - 167 * 3600000::bigint,
                                                 (SELECT MAX(hour) FROM history_hourly), 3600000)))
    AND series = 'market' AND key = 'BTC'
  ORDER BY hour"
