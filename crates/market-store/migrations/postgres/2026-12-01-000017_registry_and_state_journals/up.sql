-- Registry entries and scan states are appended to a journal and merged
-- into their tables in bulk (the store's `journal.rs`; the SQLite
-- migration of this name says why). A journal's rows are numbered in the
-- order they were written (`seq`); of one address the highest number holds
-- its latest state, and it replaces the table's row at the merge.
CREATE TABLE wallet_registry_journal (
    seq               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    address           TEXT COLLATE "C" NOT NULL,
    sources           INTEGER   NOT NULL,
    first_seen_at     TIMESTAMP NOT NULL,
    leaderboard_value NUMERIC,
    account_value     NUMERIC,
    position_value    NUMERIC,
    last_trade_at     TIMESTAMP,
    traded_notional   NUMERIC   NOT NULL,
    dexes             TEXT      NOT NULL,
    last_read_at      TIMESTAMP,
    last_sweep_at     TIMESTAMP,
    empty_reads       INTEGER   NOT NULL,
    failed_reads      INTEGER   NOT NULL
);

CREATE TABLE scanned_wallets_journal (
    seq                 BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    address             TEXT COLLATE "C" NOT NULL,
    missed_scans        INTEGER NOT NULL,
    last_seen_at        TIMESTAMP,
    first_seen_at       TIMESTAMP,
    first_account_value NUMERIC,
    realized_pnl        NUMERIC NOT NULL,
    closed_count        INTEGER NOT NULL,
    win_count           INTEGER NOT NULL,
    held_scalper        INTEGER NOT NULL,
    held_day            INTEGER NOT NULL,
    held_swing          INTEGER NOT NULL,
    held_position       INTEGER NOT NULL,
    read_dexes          TEXT,
    followed            TEXT    NOT NULL
);
CREATE INDEX scanned_wallets_journal_by_address ON scanned_wallets_journal (address, seq);
