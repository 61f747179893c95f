-- Keyed by series and key first again, with an index on the time for
-- retention; every hour the points hold gets its row in the hourly tier
-- (the last observation in it, a later one winning over a stored one), as
-- the publishes wrote them before.
CREATE TABLE history_hourly_by_key (
    series TEXT   NOT NULL,
    key    TEXT   NOT NULL,
    hour   BIGINT NOT NULL,
    at     BIGINT NOT NULL,
    body   TEXT   NOT NULL,
    PRIMARY KEY (series, key, hour)
) WITHOUT ROWID;
INSERT INTO history_hourly_by_key (series, key, hour, at, body)
SELECT series, key, hour, at, body FROM history_hourly;
-- SQLite takes the other columns of an aggregate's row from the row max() chose.
INSERT INTO history_hourly_by_key (series, key, hour, at, body)
SELECT series, key, hour, max(at), body
FROM history_points
GROUP BY hour, series, key
ON CONFLICT (series, key, hour) DO UPDATE SET at = excluded.at, body = excluded.body
WHERE history_hourly_by_key.at <= excluded.at;
DROP TABLE history_hourly;
ALTER TABLE history_hourly_by_key RENAME TO history_hourly;
CREATE INDEX history_hourly_hour ON history_hourly (hour);

CREATE TABLE history_points_by_key (
    series TEXT   NOT NULL,
    key    TEXT   NOT NULL,
    at     BIGINT NOT NULL,
    body   TEXT   NOT NULL,
    PRIMARY KEY (series, key, at)
) WITHOUT ROWID;
INSERT INTO history_points_by_key (series, key, at, body)
SELECT series, key, at, body FROM history_points;
DROP TABLE history_points;
ALTER TABLE history_points_by_key RENAME TO history_points;
CREATE INDEX history_points_at ON history_points (at);
