-- Keyed by the hour first again, as migration 19 left it.
CREATE TABLE history_hourly_by_hour (
    series TEXT   NOT NULL,
    key    TEXT   NOT NULL,
    hour   BIGINT NOT NULL,
    at     BIGINT NOT NULL,
    body   TEXT   NOT NULL,
    PRIMARY KEY (hour, series, key)
) WITHOUT ROWID;
INSERT INTO history_hourly_by_hour (series, key, hour, at, body)
SELECT series, key, hour, at, body
FROM history_hourly
ORDER BY hour, series, key;
DROP TABLE history_hourly;
ALTER TABLE history_hourly_by_hour RENAME TO history_hourly;
