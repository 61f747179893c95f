DROP INDEX wallets_valid_to;
DROP INDEX positions_valid_to;
CREATE INDEX wallets_valid_to ON wallets (valid_to) WHERE valid_to IS NOT NULL;
CREATE INDEX positions_valid_to ON positions (valid_to) WHERE valid_to IS NOT NULL;
