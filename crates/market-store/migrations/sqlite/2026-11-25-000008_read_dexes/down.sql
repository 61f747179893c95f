ALTER TABLE scanned_wallets DROP COLUMN read_dexes;
