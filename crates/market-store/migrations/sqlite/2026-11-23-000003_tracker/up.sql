-- Incremental publishing (`track`): a wallet or position row is valid from
-- its `version` up to, not including, `valid_to` (NULL: still valid). A
-- publish closes the rows of the wallets it changes and inserts their new
-- rows, so unchanged wallets are not rewritten. Version V is
-- `version <= V AND (valid_to IS NULL OR valid_to > V)`. Rows now outlive
-- the version that wrote them, so they no longer cascade from `snapshots`:
-- pruning deletes rows whose `valid_to` is at or below the oldest kept version.
CREATE TABLE wallets_v3 (
    version             BIGINT  NOT NULL,
    address             TEXT    NOT NULL,
    label               TEXT,
    tags                TEXT    NOT NULL,
    kols                TEXT    NOT NULL,
    kol_profile         TEXT,
    size_class          TEXT    NOT NULL,
    direction           TEXT    NOT NULL,
    account_value       TEXT    NOT NULL,
    total_value         TEXT    NOT NULL,
    long_value          TEXT    NOT NULL,
    short_value         TEXT    NOT NULL,
    leverage            TEXT    NOT NULL,
    position_count      INTEGER NOT NULL,
    observed_at         TIMESTAMP NOT NULL,
    net_pnl             TEXT,
    roi                 TEXT,
    win_rate            TEXT,
    strategy            TEXT,
    strategy_confidence TEXT,
    valid_to            BIGINT,
    PRIMARY KEY (version, address)
);
-- Rows written before this migration belong to their version alone.
INSERT INTO wallets_v3
SELECT w.*, CASE WHEN w.version = (SELECT max(version) FROM snapshots) THEN NULL ELSE w.version + 1 END
FROM wallets w;
DROP TABLE wallets;
ALTER TABLE wallets_v3 RENAME TO wallets;

CREATE TABLE positions_v3 (
    version        BIGINT NOT NULL,
    symbol         TEXT   NOT NULL,
    address        TEXT   NOT NULL,
    direction      TEXT   NOT NULL,
    size           TEXT   NOT NULL,
    entry_price    TEXT   NOT NULL,
    mark_price     TEXT   NOT NULL,
    position_value TEXT   NOT NULL,
    liq_price      TEXT,
    leverage       TEXT   NOT NULL,
    margin         TEXT   NOT NULL,
    upnl           TEXT   NOT NULL,
    upnl_pct       TEXT   NOT NULL,
    funding_cost   TEXT   NOT NULL,
    observed_at    TIMESTAMP NOT NULL,
    valid_to       BIGINT,
    PRIMARY KEY (version, symbol, address)
);
INSERT INTO positions_v3
SELECT p.*, CASE WHEN p.version = (SELECT max(version) FROM snapshots) THEN NULL ELSE p.version + 1 END
FROM positions p;
DROP TABLE positions;
ALTER TABLE positions_v3 RENAME TO positions;

-- A publish closes the open rows of the wallets it changes.
CREATE INDEX wallets_open_address ON wallets (address) WHERE valid_to IS NULL;
CREATE INDEX positions_open_address ON positions (address) WHERE valid_to IS NULL;
-- Pruning deletes closed rows.
CREATE INDEX wallets_valid_to ON wallets (valid_to) WHERE valid_to IS NOT NULL;
CREATE INDEX positions_valid_to ON positions (valid_to) WHERE valid_to IS NOT NULL;

-- Every wallet `track` knows of, and what it knows: where it was found,
-- its size, its trading, and when it was read. It is written as wallets are
-- discovered and read, so a restart (or kill -9) rediscovers nothing.
CREATE TABLE wallet_registry (
    address           TEXT    NOT NULL PRIMARY KEY,
    sources           INTEGER NOT NULL, -- bit set: 1 wallet list, 2 leaderboard, 4 trades stream, 8 node trades
    first_seen_at     TIMESTAMP NOT NULL,
    leaderboard_value TEXT,             -- decimal USD: the leaderboard's accountValue
    account_value     TEXT,             -- decimal USD, at the last read (all dexes read)
    position_value    TEXT,             -- decimal USD, at the last read
    last_trade_at     TIMESTAMP,
    traded_notional   TEXT    NOT NULL, -- decimal USD, decayed with a half-life (docs/ingest.md)
    dexes             TEXT    NOT NULL, -- JSON array: HIP-3 dexes it traded or held equity on
    last_read_at      TIMESTAMP,
    last_sweep_at     TIMESTAMP,        -- last read of every dex
    empty_reads       INTEGER NOT NULL, -- consecutive reads with no equity and no position
    failed_reads      INTEGER NOT NULL  -- consecutive failed reads
);
