-- The points of `track`'s publishes appended to a journal and merged into
-- `history_points` in bulk (market_store's `history.rs` and `journal.rs`).
-- A publish wrote a point of every changed wallet into the current hour's
-- part of `history_points`: thousands of rows at random places of a part
-- that the first reads of an own node fill with hundreds of thousands,
-- each row logging a whole 32 KB page. Here a publish's points go into a
-- journal of at most a few tens of thousands of rows (its index by key a
-- few hundred pages), and a merge takes them into the table in key order,
-- touching each page of the hour's part once for many publishes.
--
-- The rows are numbered in the order they were written (`seq`, the rowid,
-- which tells how many the journal holds); a point's keys are those of
-- `history_points`, unique here too, so that a read lays the journal over
-- the table by the same seek.
CREATE TABLE history_points_journal (
    seq    INTEGER NOT NULL PRIMARY KEY,
    hour   BIGINT  NOT NULL,
    series TEXT    NOT NULL,
    key    TEXT    NOT NULL,
    at     BIGINT  NOT NULL,
    body   TEXT    NOT NULL
);
CREATE UNIQUE INDEX history_points_journal_key ON history_points_journal (hour, series, key, at);
