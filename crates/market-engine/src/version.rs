//! The two shapes of the data the service serves: a data version whole
//! ([`DataVersion`]: what `materialize` makes, the store writes and reads
//! back, and a server builds its snapshot from) and the changes between
//! two versions ([`VersionChanges`]: what a publish computes, the store
//! writes and reads back, and a running server applies).

use market_model::{
    LiquidityDay, Market, MarketCohorts, MarketPosition, NetworkCoverage, Wallet, WalletFreshness,
};
use time::OffsetDateTime;

/// One data version whole: the aggregates of every market and wallet and
/// their positions.
#[derive(Clone, Debug)]
pub struct DataVersion<P = MarketPosition, D = LiquidityDay> {
    /// When the scan was taken.
    pub observed_at: OffsetDateTime,
    /// One market per quote, with its aggregates, ordered by symbol.
    pub markets: Vec<Market>,
    /// One wallet per input, with its aggregates, ordered by address.
    pub wallets: Vec<Wallet>,
    /// Positions, label and tags filled in (`materialize` orders them by
    /// (symbol, address); `market_snapshot::Snapshot::build` takes any order): model
    /// structs, or `market_snapshot::RenderedPosition`s of a version read back.
    pub positions: Vec<P>,
    /// The `current` liquidity day of every asset, ordered by symbol: model
    /// days, or `market_model::LiquidityDayText`s of a version read back.
    pub current_days: Vec<D>,
    /// The size-class cohorts of every asset, in `markets` order.
    pub cohorts: Vec<MarketCohorts>,
    /// Freshness of the writer's tracked wallets, when it tracks more than it
    /// serves (`track`); `None` derives it from the served wallets.
    pub freshness: Option<WalletFreshness>,
}

/// What changed from one data version to the next. The per-market figures
/// and the coverage report come whole (they are per asset and small); the
/// wallets come only when they changed, each whole with every position.
///
/// Positions are model structs, or (as a server reads them back) any form
/// its snapshot takes in, as with [`DataVersion`].
#[derive(Clone, Debug)]
pub struct VersionChanges<P = MarketPosition, D = LiquidityDay> {
    /// When the new version was observed.
    pub observed_at: OffsetDateTime,
    /// Every market of the new version, by symbol.
    pub markets: Vec<Market>,
    /// The `current` liquidity day of every market of the new version, by
    /// symbol (model days, or as a server reads them back, any form its
    /// snapshot takes in).
    pub current_days: Vec<D>,
    /// The size-class cohorts of every market of the new version, by symbol.
    pub cohorts: Vec<MarketCohorts>,
    /// The new version's coverage report, as its writer computed it.
    pub coverage: NetworkCoverage,
    /// Wallets that are new or changed, whole, by address.
    pub wallets: Vec<Wallet>,
    /// Every position of those wallets (a model's label and tags filled in).
    pub positions: Vec<P>,
    /// Addresses of wallets that are no longer served.
    pub removed: Vec<String>,
}

/// What both shapes carry whole for every market: a version's row, its
/// markets (with their cohorts) and its current levels are written from it,
/// whichever shape a writer has.
pub trait MarketFigures {
    /// When the version was observed.
    fn observed_at(&self) -> OffsetDateTime;
    /// Every market, by symbol.
    fn markets(&self) -> &[Market];
    /// The size-class cohorts of every market.
    fn cohorts(&self) -> &[MarketCohorts];
    /// The `current` liquidity day of every market.
    fn current_days(&self) -> &[LiquidityDay];
}

impl<P> MarketFigures for DataVersion<P> {
    fn observed_at(&self) -> OffsetDateTime {
        self.observed_at
    }
    fn markets(&self) -> &[Market] {
        &self.markets
    }
    fn cohorts(&self) -> &[MarketCohorts] {
        &self.cohorts
    }
    fn current_days(&self) -> &[LiquidityDay] {
        &self.current_days
    }
}

impl<P> MarketFigures for VersionChanges<P> {
    fn observed_at(&self) -> OffsetDateTime {
        self.observed_at
    }
    fn markets(&self) -> &[Market] {
        &self.markets
    }
    fn cohorts(&self) -> &[MarketCohorts] {
        &self.cohorts
    }
    fn current_days(&self) -> &[LiquidityDay] {
        &self.current_days
    }
}
