-- History stored hour first: see the SQLite migration of the same name.
CREATE TABLE history_points_by_hour (
    hour   BIGINT NOT NULL,
    series TEXT   NOT NULL,
    key    TEXT   NOT NULL,
    at     BIGINT NOT NULL,
    body   TEXT   NOT NULL,
    PRIMARY KEY (hour, series, key, at)
);
INSERT INTO history_points_by_hour (hour, series, key, at, body)
SELECT at - (((at % 3600000) + 3600000) % 3600000), series, key, at, body
FROM history_points;
DROP TABLE history_points;
ALTER TABLE history_points_by_hour RENAME TO history_points;

CREATE TABLE history_hourly_by_hour (
    series TEXT   NOT NULL,
    key    TEXT   NOT NULL,
    hour   BIGINT NOT NULL,
    at     BIGINT NOT NULL,
    body   TEXT   NOT NULL,
    PRIMARY KEY (hour, series, key)
);
INSERT INTO history_hourly_by_hour (series, key, hour, at, body)
SELECT series, key, hour, at, body FROM history_hourly;
DROP TABLE history_hourly;
ALTER TABLE history_hourly_by_hour RENAME TO history_hourly;
