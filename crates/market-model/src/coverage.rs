//! The coverage report (`GET /networks/{network}/coverage`): how fresh the
//! tracked wallets are and how much of the exchange's open interest the
//! scanned positions account for. Not part of the original spec; it follows
//! the spec's conventions (decimal strings, RFC 3339 UTC).

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::decimal::Decimal;
use crate::query::SizeClass;
use crate::timestamp::rfc3339_utc;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// Response of `GET /networks/{network}/coverage`: how complete and how fresh
/// the served data version is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct NetworkCoverage {
    /// The instant every age in this report is measured from: when the
    /// served data version was published. Add `now − asOf` for ages as of now.
    #[serde(with = "rfc3339_utc")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime, example = "2026-11-23T10:00:00Z"))]
    pub as_of: OffsetDateTime,
    /// Freshness of the wallets behind this version.
    pub wallets: WalletFreshness,
    /// Exchange open interest over every market, USD (sum of the markets' `openInterest`).
    pub open_interest: Decimal,
    /// Open interest accounted for by scanned positions over every market, USD
    /// (sum of the markets' `coveredOpenInterest`).
    pub covered_open_interest: Decimal,
    /// `coveredOpenInterest / openInterest`, a fraction rounded half-up to 4
    /// decimals; null when `openInterest` is 0.
    pub covered_share: Option<Decimal>,
    /// One entry per market, ordered by symbol.
    pub markets: Vec<MarketCoverage>,
}

/// How many of the tracked wallets were read how recently.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WalletFreshness {
    /// Wallets the writer keeps track of. For `track` this is its whole
    /// registry, including wallets found but not read yet and wallets with no
    /// equity (which are not served); for `scan`, `import` and the demo data
    /// it is the served wallets.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, example = 31250))]
    pub tracked: u64,
    /// Tracked wallets never read yet.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, example = 120))]
    pub never_read: u64,
    /// Tracked wallets last read at most 60 seconds before `asOf`.
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub refreshed_within1m: u64,
    /// Tracked wallets last read at most 5 minutes before `asOf`.
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub refreshed_within5m: u64,
    /// Tracked wallets last read at most 1 hour before `asOf`.
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub refreshed_within1h: u64,
    /// Staleness by size class, always the three classes in the order
    /// `whale`, `shark`, `shrimp`.
    pub by_size_class: Vec<ClassStaleness>,
}

/// Staleness (`asOf` − last read) of the read wallets of one size class.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClassStaleness {
    /// Size class, by the account value of the last read (for a wallet never
    /// read: the leaderboard's account value, else `shrimp`).
    pub size_class: SizeClass,
    /// Tracked wallets of this class.
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub wallets: u64,
    /// Wallets of this class never read yet (not in the percentiles).
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub never_read: u64,
    /// Median staleness of the read wallets, whole seconds (nearest-rank);
    /// null when none was read.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, example = 48))]
    pub p50_seconds: Option<u64>,
    /// 99th-percentile staleness of the read wallets, whole seconds
    /// (nearest-rank); null when none was read.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, example = 170))]
    pub p99_seconds: Option<u64>,
}

/// How much of one market's open interest the scanned positions account for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MarketCoverage {
    /// Asset symbol, as in the market list.
    #[cfg_attr(feature = "openapi", schema(example = "BTC"))]
    pub symbol: String,
    /// The exchange's open interest, USD (the market's `openInterest`).
    pub open_interest: Decimal,
    /// Open interest held by scanned positions, USD: every open position has
    /// a long and a short side, so this is (sum of long sizes + sum of short
    /// sizes) / 2 × the market's price, rounded half-up to 2 decimals.
    /// Positions are valued as read, so a stale reading can put it above
    /// `openInterest` for a while.
    pub covered_open_interest: Decimal,
    /// `coveredOpenInterest / openInterest`, a fraction rounded half-up to 4
    /// decimals; null when `openInterest` is 0.
    pub covered_share: Option<Decimal>,
}
