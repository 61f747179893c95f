-- A wallet's events found by their UTC hour first (market_store's
-- `history.rs`). The index of the events by address put each event of a
-- publish at a random page of an index that grows for 90 days: about nine
-- tenths of a publish's cost of its events. Keyed by the hour first, a
-- publish's events land in the current hour's part of it; a read of one
-- wallet's events seeks it in each hour, newest first, until its page is
-- full.
ALTER TABLE position_events ADD COLUMN hour BIGINT NOT NULL DEFAULT 0;
UPDATE position_events SET hour = at - (((at % 3600000) + 3600000) % 3600000);
DROP INDEX position_events_address;
CREATE INDEX position_events_address ON position_events (hour, address, at);
