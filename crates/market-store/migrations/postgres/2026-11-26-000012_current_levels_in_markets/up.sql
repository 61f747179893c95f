-- The current day's liquidation levels of each market of a version: a JSON
-- array of `Level` objects (decimals as plain strings), written with the
-- market. Every version stores them whole, so one row a market (190) rather
-- than one a level (about 48,000 at 300,000 wallets) is what a publish
-- writes and prunes, and what a server reads at each publish.
ALTER TABLE markets ADD COLUMN current_levels TEXT NOT NULL DEFAULT '[]';
UPDATE markets m SET current_levels = COALESCE((
    SELECT json_agg(json_build_object(
        'side', l.side,
        'bucketPrice', l.bucket_price::text,
        'positionCount', l.position_count,
        'totalAmountUsd', l.total_usd::text,
        'minLiquidationPrice', l.min_liq_price::text,
        'maxLiquidationPrice', l.max_liq_price::text))::text
    FROM current_levels l
    WHERE l.version = m.version AND l.symbol = m.symbol
), '[]');
DROP TABLE current_levels;
