CREATE TABLE positions (
    version        BIGINT NOT NULL,
    symbol         TEXT COLLATE "C"   NOT NULL,
    address        TEXT COLLATE "C"   NOT NULL,
    direction      TEXT   NOT NULL,
    size           NUMERIC   NOT NULL,
    entry_price    NUMERIC   NOT NULL,
    mark_price     NUMERIC   NOT NULL,
    position_value NUMERIC   NOT NULL,
    liq_price      NUMERIC,
    leverage       NUMERIC   NOT NULL,
    margin         NUMERIC   NOT NULL,
    upnl           NUMERIC   NOT NULL,
    upnl_pct       NUMERIC   NOT NULL,
    funding_cost   NUMERIC   NOT NULL,
    observed_at    TIMESTAMP NOT NULL,
    valid_to       BIGINT,
    PRIMARY KEY (version, symbol, address)
);
INSERT INTO positions
SELECT w.version, p ->> 0, w.address, p ->> 1, (p ->> 2)::numeric,
       (p ->> 3)::numeric, (p ->> 4)::numeric, (p ->> 5)::numeric,
       (p ->> 6)::numeric, (p ->> 7)::numeric, (p ->> 8)::numeric,
       (p ->> 9)::numeric, (p ->> 10)::numeric, (p ->> 11)::numeric,
       (p ->> 12)::timestamp, w.valid_to
FROM wallets w, json_array_elements(w.positions::json) p;
CREATE INDEX positions_open_address ON positions (address) WHERE valid_to IS NULL;
CREATE INDEX positions_valid_to ON positions (valid_to, address) WHERE valid_to IS NOT NULL;
ALTER TABLE wallets DROP COLUMN positions;
