COMMENT ON TABLE scanned_wallets IS NULL;
COMMENT ON TABLE wallet_registry IS NULL;
