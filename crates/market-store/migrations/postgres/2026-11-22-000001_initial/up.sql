-- PostgreSQL schema: the same tables and meaning as the SQLite migration,
-- with natural types: NUMERIC for decimals (exact, scale preserved),
-- TIMESTAMP for UTC instants, DATE for days. Text keys use COLLATE "C"
-- (byte order) so every SQL order equals SQLite's and the in-memory one.
--
-- Indexes: wallet and position listings are ordered and filtered in memory
-- (market-engine's snapshot), so their tables only need their primary keys,
-- which lead with `version` for loading one data version. The per-request
-- keyset reads are liquidity days (primary key = listing order (date,
-- symbol); liquidity_days_symbol_date for the asset filter), their levels
-- (primary key prefix (date, symbol)) and candles (primary key (symbol,
-- resolution, open_time) = filter plus order).

-- One row per materialized data version; the highest version is served.
CREATE TABLE snapshots (
    version        BIGINT  NOT NULL PRIMARY KEY,
    source         TEXT COLLATE "C"    NOT NULL,
    observed_at    TIMESTAMP NOT NULL,
    created_at     TIMESTAMP NOT NULL,
    asset_count    BIGINT  NOT NULL,
    wallet_count   BIGINT  NOT NULL,
    position_count BIGINT  NOT NULL
);

CREATE TABLE markets (
    version                 BIGINT NOT NULL REFERENCES snapshots(version) ON DELETE CASCADE,
    symbol                  TEXT COLLATE "C"   NOT NULL,
    price                   NUMERIC   NOT NULL,
    change24h_pct           NUMERIC   NOT NULL,
    volume24h               NUMERIC   NOT NULL,
    open_interest           NUMERIC   NOT NULL,
    funding                 NUMERIC   NOT NULL,
    long_count              BIGINT NOT NULL,
    short_count             BIGINT NOT NULL,
    long_short_ratio        NUMERIC   NOT NULL,
    long_liquidation_value  NUMERIC   NOT NULL,
    short_liquidation_value NUMERIC   NOT NULL,
    total_liquidation_value NUMERIC   NOT NULL,
    bucket_size             NUMERIC   NOT NULL,
    PRIMARY KEY (version, symbol)
);

CREATE TABLE wallets (
    version             BIGINT  NOT NULL REFERENCES snapshots(version) ON DELETE CASCADE,
    address             TEXT COLLATE "C"    NOT NULL,
    label               TEXT,
    tags                TEXT    NOT NULL, -- JSON array of strings
    kols                TEXT    NOT NULL, -- JSON array of {name, platform, handle}
    kol_profile         TEXT,             -- JSON object or NULL
    size_class          TEXT    NOT NULL,
    direction           TEXT    NOT NULL,
    account_value       NUMERIC    NOT NULL,
    total_value         NUMERIC    NOT NULL,
    long_value          NUMERIC    NOT NULL,
    short_value         NUMERIC    NOT NULL,
    leverage            NUMERIC    NOT NULL,
    position_count      INTEGER NOT NULL,
    observed_at         TIMESTAMP NOT NULL,
    net_pnl             NUMERIC,
    roi                 NUMERIC,
    win_rate            NUMERIC,
    strategy            TEXT,
    strategy_confidence NUMERIC,
    PRIMARY KEY (version, address)
);

CREATE TABLE positions (
    version        BIGINT NOT NULL REFERENCES snapshots(version) ON DELETE CASCADE,
    symbol         TEXT COLLATE "C"   NOT NULL,
    address        TEXT COLLATE "C"   NOT NULL,
    direction      TEXT   NOT NULL,
    size           NUMERIC   NOT NULL,
    entry_price    NUMERIC   NOT NULL,
    mark_price     NUMERIC   NOT NULL,
    position_value NUMERIC   NOT NULL,
    liq_price      NUMERIC,
    leverage       NUMERIC   NOT NULL,
    margin         NUMERIC   NOT NULL,
    upnl           NUMERIC   NOT NULL,
    upnl_pct       NUMERIC   NOT NULL,
    funding_cost   NUMERIC   NOT NULL,
    observed_at    TIMESTAMP NOT NULL,
    PRIMARY KEY (version, symbol, address)
);

-- Levels of the `current` liquidity day of each version.
CREATE TABLE current_levels (
    version        BIGINT NOT NULL REFERENCES snapshots(version) ON DELETE CASCADE,
    symbol         TEXT COLLATE "C"   NOT NULL,
    side           TEXT COLLATE "C"   NOT NULL,
    bucket_price   NUMERIC   NOT NULL,
    position_count BIGINT NOT NULL,
    total_usd      NUMERIC   NOT NULL,
    min_liq_price  NUMERIC   NOT NULL,
    max_liq_price  NUMERIC   NOT NULL,
    PRIMARY KEY (version, symbol, side, bucket_price)
);

-- Frozen end-of-day liquidity days; the primary key is the listing order.
CREATE TABLE liquidity_days (
    date        DATE   NOT NULL,
    symbol      TEXT COLLATE "C"   NOT NULL,
    coverage    TEXT   NOT NULL,
    bucket_size NUMERIC   NOT NULL,
    updated_at  TIMESTAMP NOT NULL,
    long_count  BIGINT NOT NULL,
    long_usd    NUMERIC   NOT NULL,
    short_count BIGINT NOT NULL,
    short_usd   NUMERIC   NOT NULL,
    PRIMARY KEY (date, symbol)
);
-- The asset filter pages one symbol by date.
CREATE INDEX liquidity_days_symbol_date ON liquidity_days (symbol, date);

CREATE TABLE liquidity_levels (
    date           DATE   NOT NULL,
    symbol         TEXT COLLATE "C"   NOT NULL,
    side           TEXT COLLATE "C"   NOT NULL,
    bucket_price   NUMERIC   NOT NULL,
    position_count BIGINT NOT NULL,
    total_usd      NUMERIC   NOT NULL,
    min_liq_price  NUMERIC   NOT NULL,
    max_liq_price  NUMERIC   NOT NULL,
    PRIMARY KEY (date, symbol, side, bucket_price),
    FOREIGN KEY (date, symbol) REFERENCES liquidity_days (date, symbol) ON DELETE CASCADE
);

-- Stored candles; the primary key serves every time-range read.
CREATE TABLE candles (
    symbol    TEXT COLLATE "C"   NOT NULL,
    resolution TEXT COLLATE "C"  NOT NULL, -- candle interval (1m, 1h, ...)
    open_time BIGINT NOT NULL, -- epoch milliseconds
    open      NUMERIC   NOT NULL,
    high      NUMERIC   NOT NULL,
    low       NUMERIC   NOT NULL,
    close     NUMERIC   NOT NULL,
    volume    NUMERIC   NOT NULL,
    trades    BIGINT NOT NULL,
    PRIMARY KEY (symbol, resolution, open_time)
);

CREATE TABLE api_tokens (
    id           BIGSERIAL PRIMARY KEY,
    name         TEXT NOT NULL,
    token_hash   TEXT NOT NULL UNIQUE, -- hex SHA-256 of the whole token; the token itself is never stored
    hint         TEXT NOT NULL,        -- prefix + last 4 characters, for listings
    created_at   TIMESTAMP NOT NULL,
    expires_at   TIMESTAMP,
    last_used_at TIMESTAMP,
    revoked_at   TIMESTAMP
);

CREATE TABLE token_usage (
    token_id     BIGINT NOT NULL REFERENCES api_tokens(id) ON DELETE CASCADE,
    day          DATE   NOT NULL,
    endpoint     TEXT COLLATE "C"   NOT NULL,
    status_class TEXT COLLATE "C"   NOT NULL,
    count        BIGINT NOT NULL,
    PRIMARY KEY (token_id, day, endpoint, status_class)
);
