CREATE TABLE history_hourly_by_key (
    series TEXT   NOT NULL,
    key    TEXT   NOT NULL,
    hour   BIGINT NOT NULL,
    at     BIGINT NOT NULL,
    body   TEXT   NOT NULL,
    PRIMARY KEY (series, key, hour)
);
INSERT INTO history_hourly_by_key (series, key, hour, at, body)
SELECT series, key, hour, at, body FROM history_hourly;
INSERT INTO history_hourly_by_key (series, key, hour, at, body)
SELECT DISTINCT ON (hour, series, key) series, key, hour, at, body
FROM history_points
ORDER BY hour, series, key, at DESC
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
);
INSERT INTO history_points_by_key (series, key, at, body)
SELECT series, key, at, body FROM history_points;
DROP TABLE history_points;
ALTER TABLE history_points_by_key RENAME TO history_points;
CREATE INDEX history_points_at ON history_points (at);
