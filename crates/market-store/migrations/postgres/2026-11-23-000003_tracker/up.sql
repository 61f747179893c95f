-- Incremental publishing (`track`): see the SQLite migration of the same
-- name. A row is valid from `version` up to, not including, `valid_to`.
ALTER TABLE wallets DROP CONSTRAINT wallets_version_fkey;
ALTER TABLE positions DROP CONSTRAINT positions_version_fkey;
ALTER TABLE wallets ADD COLUMN valid_to BIGINT;
ALTER TABLE positions ADD COLUMN valid_to BIGINT;
UPDATE wallets SET valid_to = version + 1 WHERE version <> (SELECT max(version) FROM snapshots);
UPDATE positions SET valid_to = version + 1 WHERE version <> (SELECT max(version) FROM snapshots);

CREATE INDEX wallets_open_address ON wallets (address) WHERE valid_to IS NULL;
CREATE INDEX positions_open_address ON positions (address) WHERE valid_to IS NULL;
CREATE INDEX wallets_valid_to ON wallets (valid_to) WHERE valid_to IS NOT NULL;
CREATE INDEX positions_valid_to ON positions (valid_to) WHERE valid_to IS NOT NULL;

CREATE TABLE wallet_registry (
    address           TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    sources           INTEGER   NOT NULL,
    first_seen_at     TIMESTAMP NOT NULL,
    leaderboard_value NUMERIC,
    account_value     NUMERIC,
    position_value    NUMERIC,
    last_trade_at     TIMESTAMP,
    traded_notional   NUMERIC   NOT NULL,
    dexes             TEXT      NOT NULL,
    last_read_at      TIMESTAMP,
    last_sweep_at     TIMESTAMP,
    empty_reads       INTEGER   NOT NULL,
    failed_reads      INTEGER   NOT NULL
);
