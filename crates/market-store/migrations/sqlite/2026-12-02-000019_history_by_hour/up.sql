-- History stored hour first (market_store's `history.rs`). Both tiers were
-- keyed by series and key first: each publish wrote a point of every
-- changed wallet at a random page of a table that grows all week (and
-- another in the hourly tier), and retention deleted old points at random
-- pages again. Keyed by the UTC hour first, a publish's points land in
-- the current hour's part of the table, retention deletes whole hours at
-- its start, and the hourly tier is no longer written by every publish:
-- an hour's last observations are copied into it when the hour leaves the
-- points' retention (until then a read takes them from the points). A
-- read of one key seeks it in each hour of its window.
CREATE TABLE history_points_by_hour (
    hour   BIGINT NOT NULL,
    series TEXT   NOT NULL,
    key    TEXT   NOT NULL,
    at     BIGINT NOT NULL,
    body   TEXT   NOT NULL,
    PRIMARY KEY (hour, series, key, at)
) WITHOUT ROWID;
INSERT INTO history_points_by_hour (hour, series, key, at, body)
SELECT at - (((at % 3600000) + 3600000) % 3600000), series, key, at, body
FROM history_points
ORDER BY 1, 2, 3, 4;
DROP TABLE history_points;
ALTER TABLE history_points_by_hour RENAME TO history_points;

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
