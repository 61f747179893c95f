-- Size-class cohorts of each market of a version: a JSON array of six
-- `Cohort` objects (decimals as plain strings), written with the market.
ALTER TABLE markets ADD COLUMN cohorts TEXT NOT NULL DEFAULT '[]';

-- History series, one row per observation (every data version a writer
-- publishes). `series` is `market` (key: symbol) or `wallet` (key: address);
-- `at` is the observation time in epoch ms; `body` is the rendered JSON
-- point without its leading `{"time":…,` (the bucket start is added when
-- served). The primary key serves every range read of one key; the `at`
-- index serves retention.
CREATE TABLE history_points (
    series TEXT NOT NULL,
    key TEXT NOT NULL,
    at BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (series, key, at)
);
CREATE INDEX history_points_at ON history_points (at);

-- The last observation of each UTC hour, kept longer than the points.
CREATE TABLE history_hourly (
    series TEXT NOT NULL,
    key TEXT NOT NULL,
    hour BIGINT NOT NULL,
    at BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (series, key, hour)
);
CREATE INDEX history_hourly_hour ON history_hourly (hour);

-- Position events derived from consecutive observations of a wallet.
-- `value_micro` is floor(max(previousValue, value) × 10^6), for the
-- `minValue` filter (the exact check is made on the body); `body` is the
-- rendered `PositionEvent`.
CREATE TABLE position_events (
    at BIGINT NOT NULL,
    address TEXT NOT NULL,
    symbol TEXT NOT NULL,
    kind TEXT NOT NULL,
    value_micro BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (at, address, symbol)
);
CREATE INDEX position_events_address ON position_events (address, at);
CREATE INDEX position_events_symbol ON position_events (symbol, at);
