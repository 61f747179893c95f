CREATE TABLE current_levels (
    version        BIGINT NOT NULL REFERENCES snapshots(version) ON DELETE CASCADE,
    symbol         TEXT   NOT NULL,
    side           TEXT   NOT NULL,
    bucket_price   TEXT   NOT NULL,
    position_count BIGINT NOT NULL,
    total_usd      TEXT   NOT NULL,
    min_liq_price  TEXT   NOT NULL,
    max_liq_price  TEXT   NOT NULL,
    PRIMARY KEY (version, symbol, side, bucket_price)
);
INSERT INTO current_levels
SELECT m.version, m.symbol,
       json_extract(j.value, '$.side'),
       json_extract(j.value, '$.bucketPrice'),
       json_extract(j.value, '$.positionCount'),
       json_extract(j.value, '$.totalAmountUsd'),
       json_extract(j.value, '$.minLiquidationPrice'),
       json_extract(j.value, '$.maxLiquidationPrice')
FROM markets m, json_each(m.current_levels) j;
ALTER TABLE markets DROP COLUMN current_levels;
