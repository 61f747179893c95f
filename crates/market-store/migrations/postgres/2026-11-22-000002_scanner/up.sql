-- Scanner state per wallet: how many consecutive scans failed to observe it.
-- A wallet unseen for more than the staleness limit drops out of the data.
CREATE TABLE scanned_wallets (
    address      TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    missed_scans INTEGER NOT NULL,
    last_seen_at TIMESTAMP
);
