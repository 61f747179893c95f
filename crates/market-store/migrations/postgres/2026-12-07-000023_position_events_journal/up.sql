-- The position events of `track`'s publishes appended to a journal and
-- merged into `position_events` in bulk: see the SQLite migration of the
-- same name. Reads go through `position_events_all`, the two side by side
-- (PostgreSQL reads each side of the view on its own indexes).
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
