//! The changes between two data versions: the one shape a publish is
//! computed into, written from, read back as and applied to a served
//! version.

use market_model::{LiquidityDay, Market, MarketCohorts, MarketPosition, NetworkCoverage, Wallet};
use time::OffsetDateTime;

/// What changed from one data version to the next. The per-market figures
/// and the coverage report come whole (they are per asset and small); the
/// wallets come only when they changed, each whole with every position.
#[derive(Clone, Debug)]
pub struct VersionChanges {
    /// When the new version was observed.
    pub observed_at: OffsetDateTime,
    /// Every market of the new version, by symbol.
    pub markets: Vec<Market>,
    /// The `current` liquidity day of every market of the new version, by symbol.
    pub current_days: Vec<LiquidityDay>,
    /// The size-class cohorts of every market of the new version, by symbol.
    pub cohorts: Vec<MarketCohorts>,
    /// The new version's coverage report, as its writer computed it.
    pub coverage: NetworkCoverage,
    /// Wallets that are new or changed, whole, by address.
    pub wallets: Vec<Wallet>,
    /// Every position of those wallets (label and tags filled in).
    pub positions: Vec<MarketPosition>,
    /// Addresses of wallets that are no longer served.
    pub removed: Vec<String>,
}
