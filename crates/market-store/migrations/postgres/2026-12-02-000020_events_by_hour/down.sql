DROP INDEX position_events_address;
ALTER TABLE position_events DROP COLUMN hour;
CREATE INDEX position_events_address ON position_events (address, at);
