-- The scan states and the registry become tables clustered on their
-- address (`WITHOUT ROWID`). As tables with a rowid, each was two B-trees:
-- the rows by rowid and an index from address to rowid. `track` upserts a
-- state and a registry entry by address for every wallet it reads, so each
-- upsert read a page of the index and then a page of the table, at random
-- places of two trees of a million entries. Clustered, it reads and writes
-- one page of one tree. Their rows are small: about 150 bytes a registry
-- entry and 220 a state on average (SQLite advises under a twentieth of a
-- page, 200 bytes). A state's followed positions take about 80 bytes each:
-- the state of a wallet with more than about ten positions passes the
-- 1,002 bytes of a 4 KB page past which SQLite moves the rest of a row to
-- an overflow page, one page more for that wallet.
-- PostgreSQL has no such layout: its migration of this name only comments
-- the tables.
CREATE TABLE scanned_wallets_by_address (
    address             TEXT    NOT NULL PRIMARY KEY,
    missed_scans        INTEGER NOT NULL,
    last_seen_at        TIMESTAMP,
    first_seen_at       TIMESTAMP,
    first_account_value TEXT,             -- decimal, USD
    realized_pnl        TEXT    NOT NULL, -- decimal, USD, sum over closed positions
    closed_count        INTEGER NOT NULL,
    win_count           INTEGER NOT NULL,
    held_scalper        INTEGER NOT NULL, -- timed closes by holding class
    held_day            INTEGER NOT NULL,
    held_swing          INTEGER NOT NULL,
    held_position       INTEGER NOT NULL,
    read_dexes          TEXT,             -- JSON array of the dexes the last observation covered ("" the main dex)
    followed            TEXT    NOT NULL DEFAULT '[]' -- see the store's `followed.rs`
) WITHOUT ROWID;
INSERT INTO scanned_wallets_by_address
SELECT address, missed_scans, last_seen_at, first_seen_at, first_account_value,
       realized_pnl, closed_count, win_count, held_scalper, held_day, held_swing,
       held_position, read_dexes, followed
FROM scanned_wallets;
DROP TABLE scanned_wallets;
ALTER TABLE scanned_wallets_by_address RENAME TO scanned_wallets;

CREATE TABLE wallet_registry_by_address (
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
) WITHOUT ROWID;
INSERT INTO wallet_registry_by_address
SELECT address, sources, first_seen_at, leaderboard_value, account_value,
       position_value, last_trade_at, traded_notional, dexes, last_read_at,
       last_sweep_at, empty_reads, failed_reads
FROM wallet_registry;
DROP TABLE wallet_registry;
ALTER TABLE wallet_registry_by_address RENAME TO wallet_registry;
