-- The event stream's order: every position event gets a sequence number
-- when it is written, in commit order (version writers are serialized), and
-- the stream's `id:` is that number. Events written before this migration
-- are numbered in (at, address, symbol) order.
ALTER TABLE position_events ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
UPDATE position_events SET seq = numbered.n
FROM (
    SELECT at, address, symbol,
           ROW_NUMBER() OVER (ORDER BY at, address, symbol) AS n
    FROM position_events
) AS numbered
WHERE position_events.at = numbered.at
  AND position_events.address = numbered.address
  AND position_events.symbol = numbered.symbol;
CREATE UNIQUE INDEX position_events_seq ON position_events (seq);

-- One row: the last number given (numbers are never reused, even when the
-- events are deleted) and the highest number deleted by retention or a
-- re-seed (a stream resuming from below it has missed events: 410).
CREATE TABLE event_sequence (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    last_seq BIGINT NOT NULL,
    pruned_through BIGINT NOT NULL
);
INSERT INTO event_sequence (id, last_seq, pruned_through)
SELECT 1, COALESCE(MAX(seq), 0), 0 FROM position_events;
