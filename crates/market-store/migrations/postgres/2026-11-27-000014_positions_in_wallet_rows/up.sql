-- A wallet's open positions move into its row: see the SQLite migration of
-- the same name. Decimals keep their stored text (NUMERIC prints plain),
-- instants to the microsecond (what TIMESTAMP kept).
ALTER TABLE wallets ADD COLUMN positions TEXT NOT NULL DEFAULT '[]';
UPDATE wallets w SET positions = p.held
FROM (
    SELECT version, address, json_agg(json_build_array(
        symbol, direction, size::text, entry_price::text, mark_price::text,
        position_value::text, liq_price::text, leverage::text, margin::text,
        upnl::text, upnl_pct::text, funding_cost::text,
        to_char(observed_at, 'YYYY-MM-DD HH24:MI:SS.US')) ORDER BY symbol)::text AS held
    FROM positions
    GROUP BY version, address
) p
WHERE w.version = p.version AND w.address = p.address;
DROP TABLE positions;
