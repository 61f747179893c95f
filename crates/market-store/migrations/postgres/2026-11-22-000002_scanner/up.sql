-- Scanner state per wallet: consecutive missed scans (a wallet unseen for more
-- than the staleness limit drops out) and the history behind its analytics.
CREATE TABLE scanned_wallets (
    address             TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    missed_scans        INTEGER NOT NULL,
    last_seen_at        TIMESTAMP,
    first_seen_at       TIMESTAMP,
    first_account_value NUMERIC,            -- decimal, USD
    realized_pnl        NUMERIC NOT NULL, -- decimal, USD, sum over closed positions
    closed_count        INTEGER NOT NULL,
    win_count           INTEGER NOT NULL,
    held_scalper        INTEGER NOT NULL, -- timed closes by holding class
    held_day            INTEGER NOT NULL,
    held_swing          INTEGER NOT NULL,
    held_position       INTEGER NOT NULL
);

-- Open positions followed from scan to scan (to detect closes and holding times).
CREATE TABLE tracked_positions (
    address         TEXT COLLATE "C" NOT NULL,
    symbol          TEXT COLLATE "C" NOT NULL,
    direction       TEXT    NOT NULL,
    opened_at       TIMESTAMP NOT NULL, -- the scan that first saw it
    open_time_known INTEGER NOT NULL,   -- 1 when the wallet was already tracked then
    last_upnl       NUMERIC NOT NULL,   -- decimal, USD
    PRIMARY KEY (address, symbol)
);
