DROP TABLE scanned_wallets;
