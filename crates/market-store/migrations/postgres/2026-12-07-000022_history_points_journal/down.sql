-- The journal's points go into the table before it is dropped.
INSERT INTO history_points (hour, series, key, at, body)
SELECT hour, series, key, at, body FROM history_points_journal
ORDER BY hour, series, key, at
ON CONFLICT (hour, series, key, at) DO UPDATE SET body = excluded.body;
DROP TABLE history_points_journal;
