CREATE TABLE tracked_positions (
    address         TEXT    NOT NULL,
    symbol          TEXT    NOT NULL,
    direction       TEXT    NOT NULL,
    opened_at       TIMESTAMP NOT NULL, -- the scan that first saw it
    open_time_known INTEGER NOT NULL,   -- 1 when the wallet was already tracked then
    last_upnl       TEXT    NOT NULL,   -- decimal, USD
    PRIMARY KEY (address, symbol)
);
INSERT INTO tracked_positions
SELECT s.address, json_extract(f.value, '$[0]'), json_extract(f.value, '$[1]'),
       json_extract(f.value, '$[2]'), json_extract(f.value, '$[3]'),
       json_extract(f.value, '$[4]')
FROM scanned_wallets s, json_each(s.followed) f;
ALTER TABLE scanned_wallets DROP COLUMN followed;
