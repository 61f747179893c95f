-- A wallet's open positions move into its row (`wallets.positions`, one
-- JSON array; its format is in the store's `held.rs`): a data version
-- rewrites a wallet with all of its positions, so one row a wallet is
-- written, closed, pruned and read instead of one a position besides.
--
-- The arrays are built in one pass over the positions (grouped by their
-- wallet row) and then joined to the wallet rows on their key: a lookup
-- of each wallet's positions in the old table (keyed by version, symbol,
-- address) would scan a version's positions once a wallet.
ALTER TABLE wallets ADD COLUMN positions TEXT NOT NULL DEFAULT '[]';
CREATE TEMP TABLE held (
    version   BIGINT NOT NULL,
    address   TEXT   NOT NULL,
    positions TEXT   NOT NULL,
    PRIMARY KEY (version, address)
);
INSERT INTO held
SELECT version, address, json_group_array(json_array(
    symbol, direction, size, entry_price, mark_price, position_value,
    liq_price, leverage, margin, upnl, upnl_pct, funding_cost, observed_at))
FROM positions
GROUP BY version, address;
UPDATE wallets SET positions = held.positions
FROM held
WHERE held.version = wallets.version AND held.address = wallets.address;
DROP TABLE held;
DROP TABLE positions;
