-- On SQLite this migration clusters the scan states and the registry on
-- their address (`WITHOUT ROWID`), so that an upsert by address touches
-- one B-tree instead of an index and a table. PostgreSQL stores every
-- table as a heap with its indexes beside it and has no such layout: its
-- tables stay as they are, and the tables' comments record why.
COMMENT ON TABLE scanned_wallets IS
    'Scan state of each wallet read, upserted by address (on SQLite: clustered on address, migration 000016).';
COMMENT ON TABLE wallet_registry IS
    'Every wallet track discovered, upserted by address (on SQLite: clustered on address, migration 000016).';
