-- Wallet freshness of a data version, when its writer tracks more wallets
-- than it serves (`track`: its whole registry, as of the publish). A JSON
-- `WalletFreshness` (counts and whole seconds only, no decimals). Versions
-- without a row derive it from their served wallets.
CREATE TABLE version_freshness (
    version BIGINT NOT NULL PRIMARY KEY REFERENCES snapshots(version) ON DELETE CASCADE,
    body    TEXT   NOT NULL
);
