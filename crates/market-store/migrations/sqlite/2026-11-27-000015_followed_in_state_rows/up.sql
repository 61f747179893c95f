-- A wallet's followed positions move into its scan state's row
-- (`scanned_wallets.followed`, one JSON array; its format is in the
-- store's `followed.rs`): `track` replaces a wallet's state and its
-- followed positions together with every read, so one row a wallet is
-- written instead of one plus one a position, each with its index entry.
ALTER TABLE scanned_wallets ADD COLUMN followed TEXT NOT NULL DEFAULT '[]';
-- Followed positions of a wallet without a state (only a row edited by
-- hand) keep a state of their own, empty as a missing one reads.
INSERT INTO scanned_wallets (address, missed_scans, realized_pnl, closed_count,
    win_count, held_scalper, held_day, held_swing, held_position)
SELECT DISTINCT address, 0, '0', 0, 0, 0, 0, 0, 0
FROM tracked_positions
WHERE address NOT IN (SELECT address FROM scanned_wallets);
CREATE TEMP TABLE followed (
    address  TEXT NOT NULL PRIMARY KEY,
    followed TEXT NOT NULL
);
INSERT INTO followed
SELECT address, json_group_array(json_array(
    symbol, direction, opened_at, open_time_known, last_upnl) ORDER BY symbol)
FROM tracked_positions
GROUP BY address;
UPDATE scanned_wallets SET followed = followed.followed
FROM followed
WHERE followed.address = scanned_wallets.address;
DROP TABLE followed;
DROP TABLE tracked_positions;
