DROP TABLE position_events;
DROP TABLE history_hourly;
DROP TABLE history_points;
ALTER TABLE markets DROP COLUMN cohorts;
