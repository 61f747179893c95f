-- The rows closed in a range of versions are read by a running server at
-- each publish it applies (which wallets were closed, and whether every
-- closed position was closed with its wallet): with the address in the
-- index, those reads never visit the table's rows.
DROP INDEX wallets_valid_to;
DROP INDEX positions_valid_to;
CREATE INDEX wallets_valid_to ON wallets (valid_to, address) WHERE valid_to IS NOT NULL;
CREATE INDEX positions_valid_to ON positions (valid_to, address) WHERE valid_to IS NOT NULL;
