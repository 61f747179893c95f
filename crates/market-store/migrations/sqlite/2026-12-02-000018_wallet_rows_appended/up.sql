-- Wallet rows are appended and never changed in place (market_store's
-- `validity.rs` has the rules). A publish used to close the open row of
-- every wallet it changed (`valid_to` set on a row at a random page of the
-- table) and delete it a publish later: two random pages of a table of
-- 300,000 wide rows per changed wallet, plus the open rows' index. Now a
-- row is valid in version V when it is its wallet's latest row or removal
-- at or before V: a publish appends its rows and its removals, and a
-- compaction, every so many publishes, deletes in bulk what no kept version
-- can see.

-- A version that stops serving a wallet appends its removal.
CREATE TABLE wallet_removals (
    version BIGINT NOT NULL,
    address TEXT   NOT NULL,
    PRIMARY KEY (version, address)
) WITHOUT ROWID;

-- Rows up to `through` are one a wallet and none of them is superseded or
-- removed by a row or a removal up to `through`: a read takes them
-- without looking for a later one among themselves.
CREATE TABLE wallet_rows_compacted (
    id      INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    through BIGINT  NOT NULL
);
-- Closed rows are still stored (a version's worth): nothing is compacted yet.
INSERT INTO wallet_rows_compacted (id, through) VALUES (1, 0);

-- A row closed by a version that wrote no row of its wallet was removed by it.
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
