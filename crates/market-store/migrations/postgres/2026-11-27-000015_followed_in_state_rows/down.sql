CREATE TABLE tracked_positions (
    address         TEXT COLLATE "C" NOT NULL,
    symbol          TEXT COLLATE "C" NOT NULL,
    direction       TEXT    NOT NULL,
    opened_at       TIMESTAMP NOT NULL, -- the scan that first saw it
    open_time_known INTEGER NOT NULL,   -- 1 when the wallet was already tracked then
    last_upnl       NUMERIC NOT NULL,   -- decimal, USD
    PRIMARY KEY (address, symbol)
);
INSERT INTO tracked_positions
SELECT s.address, f ->> 0, f ->> 1, (f ->> 2)::timestamp, (f ->> 3)::integer,
       (f ->> 4)::numeric
FROM scanned_wallets s, json_array_elements(s.followed::json) f;
ALTER TABLE scanned_wallets DROP COLUMN followed;
