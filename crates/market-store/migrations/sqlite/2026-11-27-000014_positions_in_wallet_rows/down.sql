CREATE TABLE positions (
    version        BIGINT NOT NULL,
    symbol         TEXT   NOT NULL,
    address        TEXT   NOT NULL,
    direction      TEXT   NOT NULL,
    size           TEXT   NOT NULL,
    entry_price    TEXT   NOT NULL,
    mark_price     TEXT   NOT NULL,
    position_value TEXT   NOT NULL,
    liq_price      TEXT,
    leverage       TEXT   NOT NULL,
    margin         TEXT   NOT NULL,
    upnl           TEXT   NOT NULL,
    upnl_pct       TEXT   NOT NULL,
    funding_cost   TEXT   NOT NULL,
    observed_at    TIMESTAMP NOT NULL,
    valid_to       BIGINT,
    PRIMARY KEY (version, symbol, address)
);
INSERT INTO positions
SELECT w.version, json_extract(p.value, '$[0]'), w.address, json_extract(p.value, '$[1]'), json_extract(p.value, '$[2]'),
       json_extract(p.value, '$[3]'), json_extract(p.value, '$[4]'), json_extract(p.value, '$[5]'), json_extract(p.value, '$[6]'),
       json_extract(p.value, '$[7]'), json_extract(p.value, '$[8]'), json_extract(p.value, '$[9]'), json_extract(p.value, '$[10]'),
       json_extract(p.value, '$[11]'), json_extract(p.value, '$[12]'), w.valid_to
FROM wallets w, json_each(w.positions) p;
CREATE INDEX positions_open_address ON positions (address) WHERE valid_to IS NULL;
CREATE INDEX positions_valid_to ON positions (valid_to, address) WHERE valid_to IS NOT NULL;
ALTER TABLE wallets DROP COLUMN positions;
