-- Registry entries and scan states are appended to a journal and merged
-- into their tables in bulk (the store's `journal.rs`). `track` saves a
-- registry entry and a scan state for every wallet it reads: upserted by
-- address, each one landed on a page of its own at a random place of a
-- tree of a million entries, which SQLite read from the operating system
-- and wrote to the write-ahead log whole (32 KB). Appended, a publish's
-- thousands of rows fill a few pages at the end of the journal; a merge
-- then takes tens of thousands of them into the table in address order,
-- touching each of its pages once.
--
-- A journal's rows are numbered in the order they were written (`seq`, the
-- rowid); of one address the highest number holds its latest state, and it
-- replaces the table's row at the merge.
CREATE TABLE wallet_registry_journal (
    seq               INTEGER NOT NULL PRIMARY KEY,
    address           TEXT    NOT NULL,
    sources           INTEGER NOT NULL,
    first_seen_at     TIMESTAMP NOT NULL,
    leaderboard_value TEXT,
    account_value     TEXT,
    position_value    TEXT,
    last_trade_at     TIMESTAMP,
    traded_notional   TEXT    NOT NULL,
    dexes             TEXT    NOT NULL,
    last_read_at      TIMESTAMP,
    last_sweep_at     TIMESTAMP,
    empty_reads       INTEGER NOT NULL,
    failed_reads      INTEGER NOT NULL
);

CREATE TABLE scanned_wallets_journal (
    seq                 INTEGER NOT NULL PRIMARY KEY,
    address             TEXT    NOT NULL,
    missed_scans        INTEGER NOT NULL,
    last_seen_at        TIMESTAMP,
    first_seen_at       TIMESTAMP,
    first_account_value TEXT,
    realized_pnl        TEXT    NOT NULL,
    closed_count        INTEGER NOT NULL,
    win_count           INTEGER NOT NULL,
    held_scalper        INTEGER NOT NULL,
    held_day            INTEGER NOT NULL,
    held_swing          INTEGER NOT NULL,
    held_position       INTEGER NOT NULL,
    read_dexes          TEXT,
    followed            TEXT    NOT NULL
);
-- A wallet's latest state is looked up by address when it is read again
-- (the tracker keeps in memory only the states of the wallets it holds).
-- This index is as small as the journal, so its pages stay in the cache.
CREATE INDEX scanned_wallets_journal_by_address ON scanned_wallets_journal (address, seq);
