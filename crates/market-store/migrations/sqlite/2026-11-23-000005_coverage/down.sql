ALTER TABLE version_freshness DROP COLUMN coverage;
