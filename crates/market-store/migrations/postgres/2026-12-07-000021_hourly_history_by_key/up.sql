-- The hourly tier keyed by series and key first again: see the SQLite
-- migration of the same name.
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
DROP TABLE history_hourly;
ALTER TABLE history_hourly_by_key RENAME TO history_hourly;
CREATE INDEX history_hourly_hour ON history_hourly (hour);
