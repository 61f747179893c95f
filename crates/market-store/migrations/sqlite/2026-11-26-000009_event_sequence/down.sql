DROP TABLE event_sequence;
DROP INDEX position_events_seq;
ALTER TABLE position_events DROP COLUMN seq;
