-- The position events of `track`'s publishes appended to a journal and
-- merged into `position_events` in bulk (market_store's `history.rs` and
-- `journal.rs`), as the history points are (migration 22). The index of
-- one wallet's events, keyed by the hour first, took each event of a
-- publish at a random page of the current hour's part, which an own
-- node's first reads fill with a million first observations: a 32 KB page
-- read and logged per event. The journal has the table's columns and
-- indexes, at most a merge's worth of rows; a merge appends its rows to
-- the table in key order, touching each page of the hour's part once for
-- many publishes.
--
-- Reads go through `position_events_all`, the two laid side by side: an
-- event is in one of them only (a write of an event again deletes it from
-- both first), and SQLite reads such a view as a compound query, each
-- side on its own indexes, merged in the order asked.
CREATE TABLE position_events_journal (
    at          BIGINT NOT NULL,
    address     TEXT   NOT NULL,
    symbol      TEXT   NOT NULL,
    kind        TEXT   NOT NULL,
    value_micro BIGINT NOT NULL,
    body        TEXT   NOT NULL,
    seq         BIGINT NOT NULL,
    hour        BIGINT NOT NULL,
    PRIMARY KEY (at, address, symbol)
);
CREATE UNIQUE INDEX position_events_journal_seq ON position_events_journal (seq);
CREATE INDEX position_events_journal_address ON position_events_journal (hour, address, at);
CREATE INDEX position_events_journal_symbol ON position_events_journal (symbol, at);

CREATE VIEW position_events_all AS
SELECT at, address, symbol, kind, value_micro, body, seq, hour FROM position_events
UNION ALL
SELECT at, address, symbol, kind, value_micro, body, seq, hour FROM position_events_journal;
