-- A wallet's followed positions move into its scan state's row: see the
-- SQLite migration of the same name. Decimals keep their stored text
-- (NUMERIC prints plain), instants to the microsecond (what TIMESTAMP kept).
ALTER TABLE scanned_wallets ADD COLUMN followed TEXT NOT NULL DEFAULT '[]';
INSERT INTO scanned_wallets (address, missed_scans, realized_pnl, closed_count,
    win_count, held_scalper, held_day, held_swing, held_position)
SELECT DISTINCT address, 0, 0, 0, 0, 0, 0, 0, 0
FROM tracked_positions t
WHERE NOT EXISTS (SELECT 1 FROM scanned_wallets s WHERE s.address = t.address);
UPDATE scanned_wallets s SET followed = t.followed
FROM (
    SELECT address, json_agg(json_build_array(
        symbol, direction, to_char(opened_at, 'YYYY-MM-DD HH24:MI:SS.US'),
        open_time_known, last_upnl::text) ORDER BY symbol)::text AS followed
    FROM tracked_positions
    GROUP BY address
) t
WHERE s.address = t.address;
DROP TABLE tracked_positions;
