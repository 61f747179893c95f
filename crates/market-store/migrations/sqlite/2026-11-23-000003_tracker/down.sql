DROP TABLE wallet_registry;
DROP INDEX wallets_open_address;
DROP INDEX positions_open_address;
DROP INDEX wallets_valid_to;
DROP INDEX positions_valid_to;
-- Keep the rows valid at the newest version, as that version's own rows.
DELETE FROM wallets WHERE valid_to IS NOT NULL;
DELETE FROM positions WHERE valid_to IS NOT NULL;
UPDATE wallets SET version = (SELECT max(version) FROM snapshots);
UPDATE positions SET version = (SELECT max(version) FROM snapshots);
ALTER TABLE wallets DROP COLUMN valid_to;
ALTER TABLE positions DROP COLUMN valid_to;
