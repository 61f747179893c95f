DROP TABLE tracked_positions;
DROP TABLE scanned_wallets;
