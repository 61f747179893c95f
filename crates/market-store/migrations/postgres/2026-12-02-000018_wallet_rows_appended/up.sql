-- Wallet rows are appended and never changed in place: see the SQLite
-- migration of the same name.
CREATE TABLE wallet_removals (
    version BIGINT NOT NULL,
    address TEXT   NOT NULL,
    PRIMARY KEY (version, address)
);

CREATE TABLE wallet_rows_compacted (
    id      INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    through BIGINT  NOT NULL
);
INSERT INTO wallet_rows_compacted (id, through) VALUES (1, 0);

INSERT INTO wallet_removals (version, address)
SELECT w.valid_to, w.address
FROM wallets w
WHERE w.valid_to IS NOT NULL
  AND NOT EXISTS (
      SELECT 1 FROM wallets n WHERE n.version = w.valid_to AND n.address = w.address
  );

DROP INDEX wallets_open_address;
DROP INDEX wallets_valid_to;
ALTER TABLE wallets DROP COLUMN valid_to;
