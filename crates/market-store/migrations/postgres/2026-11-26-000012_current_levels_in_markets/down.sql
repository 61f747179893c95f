CREATE TABLE current_levels (
    version        BIGINT NOT NULL REFERENCES snapshots(version) ON DELETE CASCADE,
    symbol         TEXT COLLATE "C"   NOT NULL,
    side           TEXT COLLATE "C"   NOT NULL,
    bucket_price   NUMERIC   NOT NULL,
    position_count BIGINT NOT NULL,
    total_usd      NUMERIC   NOT NULL,
    min_liq_price  NUMERIC   NOT NULL,
    max_liq_price  NUMERIC   NOT NULL,
    PRIMARY KEY (version, symbol, side, bucket_price)
);
INSERT INTO current_levels
SELECT m.version, m.symbol,
       j ->> 'side',
       (j ->> 'bucketPrice')::numeric,
       (j ->> 'positionCount')::bigint,
       (j ->> 'totalAmountUsd')::numeric,
       (j ->> 'minLiquidationPrice')::numeric,
       (j ->> 'maxLiquidationPrice')::numeric
FROM markets m, json_array_elements(m.current_levels::json) j;
ALTER TABLE markets DROP COLUMN current_levels;
