-- The journal's events go into the table before it is dropped.
DROP VIEW position_events_all;
INSERT INTO position_events (at, address, symbol, kind, value_micro, body, seq, hour)
SELECT at, address, symbol, kind, value_micro, body, seq, hour
FROM position_events_journal ORDER BY at, address, symbol;
DROP TABLE position_events_journal;
