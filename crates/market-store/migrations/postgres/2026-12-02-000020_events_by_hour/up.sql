-- A wallet's events found by their UTC hour first: see the SQLite
-- migration of the same name.
ALTER TABLE position_events ADD COLUMN hour BIGINT NOT NULL DEFAULT 0;
UPDATE position_events SET hour = at - (((at % 3600000) + 3600000) % 3600000);
DROP INDEX position_events_address;
CREATE INDEX position_events_address ON position_events (hour, address, at);
