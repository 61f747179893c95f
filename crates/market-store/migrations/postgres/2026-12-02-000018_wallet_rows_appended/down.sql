ALTER TABLE wallets ADD COLUMN valid_to BIGINT;
UPDATE wallets SET valid_to = (
    SELECT min(v) FROM (
        SELECT n.version AS v FROM wallets n
        WHERE n.address = wallets.address AND n.version > wallets.version
        UNION ALL
        SELECT r.version FROM wallet_removals r
        WHERE r.address = wallets.address AND r.version > wallets.version
    ) later
);
DELETE FROM wallets WHERE valid_to <= (SELECT min(version) FROM snapshots);
CREATE INDEX wallets_open_address ON wallets (address) WHERE valid_to IS NULL;
CREATE INDEX wallets_valid_to ON wallets (valid_to, address) WHERE valid_to IS NOT NULL;
DROP TABLE wallet_rows_compacted;
DROP TABLE wallet_removals;
