#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod coverage;
pub mod decimal;
pub mod history;
pub mod levels_text;
pub mod params;
pub mod problem;
pub mod query;
pub mod resources;
pub mod timestamp;

pub use coverage::{ClassStaleness, MarketCoverage, NetworkCoverage, WalletFreshness};
pub use decimal::{Decimal, ParseDecimalError, PlainDecimal};
pub use history::{
    BySizeClass, ClassSplit, Cohort, DataVersionEvent, Holding, MarketCohorts, MarketFigures,
    MarketHistory, MarketHistoryPoint, PositionEvent, PositionEventList, PositionEventMessage,
    StreamEnd, WalletDetail, WalletHistory, WalletHistoryPoint,
};
pub use levels_text::LiquidityDayText;
pub use problem::{InvalidParam, Problem, ProblemKind, PROBLEM_JSON};
pub use query::{
    Coverage, Direction, EventKind, HistoryInterval, Interval, MarketSort, Side, SizeClass,
    SortOrder, Strategy, UnknownValue, WalletDirection, WalletSort,
};
pub use resources::*;

/// The one supported network id.
pub const NETWORK_ID: &str = "perpnet";

/// serde helper for `YYYY-MM-DD` dates.
pub mod timestamp_date {
    use serde::{Deserialize, Deserializer, Serializer};
    use time::macros::format_description;
    use time::Date;

    /// Serializes as `YYYY-MM-DD`.
    pub fn serialize<S: Serializer>(d: &Date, s: S) -> Result<S::Ok, S::Error> {
        let text = d
            .format(format_description!("[year]-[month]-[day]"))
            .map_err(serde::ser::Error::custom)?;
        s.serialize_str(&text)
    }

    /// Parses `YYYY-MM-DD`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Date, D::Error> {
        let s = String::deserialize(d)?;
        parse(&s).map_err(serde::de::Error::custom)
    }

    /// Parses a strict `YYYY-MM-DD` calendar date.
    pub fn parse(s: &str) -> Result<Date, time::error::Parse> {
        Date::parse(s, format_description!("[year]-[month]-[day]"))
    }
}

/// Network symbols: `COIN` on the main dex, `dex:COIN` on a HIP-3 dex.
pub mod symbol {
    /// The dex prefix of a symbol, if any (`xyz` for `xyz:TSLA`).
    pub fn dex_of(symbol: &str) -> Option<&str> {
        symbol.split_once(':').map(|(dex, _)| dex)
    }

    /// The canonical symbol: the symbol without its dex prefix (`TSLA` for `xyz:TSLA`).
    pub fn canonical_of(symbol: &str) -> &str {
        symbol.split_once(':').map_or(symbol, |(_, coin)| coin)
    }

    /// The display alias: the canonical symbol, with ` (dex)` appended on a HIP-3 dex.
    pub fn alias_of(symbol: &str) -> String {
        match symbol.split_once(':') {
            Some((dex, coin)) => format!("{coin} ({dex})"),
            None => symbol.to_owned(),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn splits_prefix() {
            assert_eq!(canonical_of("xyz:TSLA"), "TSLA");
            assert_eq!(dex_of("xyz:TSLA"), Some("xyz"));
            assert_eq!(alias_of("xyz:TSLA"), "TSLA (xyz)");
            assert_eq!(canonical_of("kPEPE"), "kPEPE");
            assert_eq!(dex_of("BTC"), None);
            assert_eq!(alias_of("BTC"), "BTC");
        }
    }
}

impl LiquidityTotals {
    /// The per-side sums over `levels`.
    pub fn of(levels: &[Level]) -> LiquidityTotals {
        let mut long = SideTotal {
            position_count: 0,
            total_amount_usd: Decimal::zero(),
        };
        let mut short = SideTotal {
            position_count: 0,
            total_amount_usd: Decimal::zero(),
        };
        for l in levels {
            let t = match l.side {
                Direction::Long => &mut long,
                Direction::Short => &mut short,
            };
            t.position_count += l.position_count;
            t.total_amount_usd = Decimal(&t.total_amount_usd.0 + &l.total_amount_usd.0);
        }
        LiquidityTotals { long, short }
    }
}
