-- The dexes a wallet's observation covers (a JSON array of names, "" the
-- main dex); NULL: not recorded (written before this column).
ALTER TABLE scanned_wallets ADD COLUMN read_dexes TEXT;
