-- The points of `track`'s publishes appended to a journal and merged into
-- `history_points` in bulk: see the SQLite migration of the same name.
CREATE TABLE history_points_journal (
    seq    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    hour   BIGINT NOT NULL,
    series TEXT   NOT NULL,
    key    TEXT   NOT NULL,
    at     BIGINT NOT NULL,
    body   TEXT   NOT NULL,
    UNIQUE (hour, series, key, at)
);
