DROP TABLE version_freshness;
