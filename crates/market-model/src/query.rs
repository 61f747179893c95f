//! Enumerations and typed query parameters of the endpoints (spec §4).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// A value that is not one of an enumeration's allowed spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not allowed; use one of: {}", allowed.join(", "))]
pub struct UnknownValue {
    /// The rejected text.
    pub value: String,
    /// Every accepted spelling.
    pub allowed: &'static [&'static str],
}

macro_rules! wire_enum {
    ($(#[doc = $doc:expr])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        wire_enum!(@impl [None] $(#[doc = $doc])* $name { $($(#[$vmeta])* $variant = $text),+ });
    };
    // `default` is the value used when the parameter is absent, stated in the schema.
    ($(#[doc = $doc:expr])* $name:ident default $default:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        wire_enum!(@impl [Some($name::$default)] $(#[doc = $doc])* $name { $($(#[$vmeta])* $variant = $text),+ });
    };
    (@impl [$default:expr] $(#[doc = $doc:expr])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[doc = $doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        // Written by hand: the derive does not see serde renames made inside a macro.
        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                let doc: &[&str] = &[$($doc),*];
                let description = doc.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some(Self::NAMES.iter().copied()))
                    .default($default.map(|d: $name| d.as_str().into()))
                    .description(Some(description))
                    .into()
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {}

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// Every wire spelling, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The wire spelling.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownValue;
            fn from_str(s: &str) -> Result<Self, UnknownValue> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(UnknownValue { value: s.to_owned(), allowed: Self::NAMES }),
                }
            }
        }
    };
}

wire_enum! {
    /// Side of a position (and of a liquidation level).
    Direction {
        /// Profits when the price rises.
        Long = "long",
        /// Profits when the price falls.
        Short = "short",
    }
}

/// Side of a liquidation level: the direction of the positions in it.
pub type Side = Direction;

wire_enum! {
    /// Net direction of a wallet: `long` when `longValue > shortValue`,
    /// `short` when `shortValue > longValue`, `neutral` when they are equal
    /// (including a wallet with no open position).
    WalletDirection {
        /// More long than short notional.
        Long = "long",
        /// More short than long notional.
        Short = "short",
        /// Equal long and short notional, or no positions.
        Neutral = "neutral",
    }
}

wire_enum! {
    /// Size class of a wallet by `accountTotalValue` (USD):
    /// `shrimp` below 100,000; `shark` from 100,000 to below 1,000,000; `whale` from 1,000,000.
    SizeClass {
        /// Account value below 100,000 USD.
        Shrimp = "shrimp",
        /// Account value from 100,000 USD to below 1,000,000 USD.
        Shark = "shark",
        /// Account value of 1,000,000 USD or more.
        Whale = "whale",
    }
}

impl SizeClass {
    /// Lower bound (inclusive, USD) of `shark`.
    pub const SHARK_MIN_USD: i64 = 100_000;
    /// Lower bound (inclusive, USD) of `whale`.
    pub const WHALE_MIN_USD: i64 = 1_000_000;
}

wire_enum! {
    /// Trading style of a wallet, by the median holding time of its positions:
    /// `scalper` under 1 hour, `day_trader` under 1 day, `swing_trader` under
    /// 7 days, `position_trader` 7 days or more.
    Strategy {
        /// Median holding time under 1 hour.
        Scalper = "scalper",
        /// Median holding time from 1 hour to under 1 day.
        DayTrader = "day_trader",
        /// Median holding time from 1 day to under 7 days.
        SwingTrader = "swing_trader",
        /// Median holding time of 7 days or more.
        PositionTrader = "position_trader",
    }
}

wire_enum! {
    /// What the data of a response covers. `scanned_wallets`: aggregates over the
    /// wallets the service scans (list responses). `current`: a liquidity day
    /// computed from the latest scan, updated with every scan. `end_of_day`: a
    /// past liquidity day, frozen from the last scan of that UTC day.
    Coverage {
        /// Aggregates over the scanned wallets.
        ScannedWallets = "scanned_wallets",
        /// The latest day, recomputed at every scan.
        Current = "current",
        /// A past day, frozen at its end.
        EndOfDay = "end_of_day",
    }
}

wire_enum! {
    /// Sort keys of the wallet list. Nulls (wallets without analytics) come
    /// last in both orders; ties are broken by address ascending.
    WalletSort default AccountTotalValue {
        /// Account equity (the default).
        AccountTotalValue = "accountTotalValue",
        /// Long plus short notional.
        TotalPositionValue = "totalPositionValue",
        /// Net PnL (nullable).
        NetPnl = "netPnl",
        /// ROI in percent (nullable).
        Roi = "roi",
        /// Win rate in percent (nullable).
        WinRate = "winRate",
    }
}

wire_enum! {
    /// Sort keys of the market list; ties are broken by symbol ascending.
    MarketSort default Volume24h {
        /// 24-hour volume (the default).
        Volume24h = "volume24h",
        /// Open interest in USD.
        OpenInterest = "openInterest",
        /// 24-hour change in percent.
        Change24hPct = "change24hPct",
        /// Long plus short liquidation value.
        TotalLiquidationValue = "totalLiquidationValue",
    }
}

/// Sort order. Parsing is lenient on purpose (spec §4.3): `asc` sorts
/// ascending, and any other value, or none, sorts descending.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum SortOrder {
    /// Smallest first.
    Asc,
    /// Largest first (the default).
    #[default]
    Desc,
}

impl SortOrder {
    /// `asc` → ascending; anything else → descending.
    pub fn parse_lenient(s: Option<&str>) -> SortOrder {
        match s {
            Some("asc") => SortOrder::Asc,
            _ => SortOrder::Desc,
        }
    }

    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            SortOrder::Asc => "asc",
            SortOrder::Desc => "desc",
        }
    }
}

wire_enum! {
    /// Candle interval. `1M` is a calendar month; `1w` starts on Monday 00:00 UTC;
    /// `3d` periods are aligned to 1970-01-01; all others to multiples of their
    /// length since the epoch (UTC).
    Interval {
        /// 1 minute.
        M1 = "1m",
        /// 3 minutes.
        M3 = "3m",
        /// 5 minutes.
        M5 = "5m",
        /// 15 minutes.
        M15 = "15m",
        /// 30 minutes.
        M30 = "30m",
        /// 1 hour.
        H1 = "1h",
        /// 2 hours.
        H2 = "2h",
        /// 4 hours.
        H4 = "4h",
        /// 8 hours.
        H8 = "8h",
        /// 12 hours.
        H12 = "12h",
        /// 1 day.
        D1 = "1d",
        /// 3 days.
        D3 = "3d",
        /// 1 week.
        W1 = "1w",
        /// 1 calendar month.
        Mo1 = "1M",
    }
}

wire_enum! {
    /// Bucket width of a history series (market or wallet). Buckets are
    /// aligned to multiples of their length since the epoch (UTC), so `1d`
    /// buckets start at 00:00 UTC.
    HistoryInterval default H1 {
        /// 5 minutes.
        M5 = "5m",
        /// 15 minutes.
        M15 = "15m",
        /// 1 hour (the default).
        H1 = "1h",
        /// 4 hours.
        H4 = "4h",
        /// 1 day.
        D1 = "1d",
    }
}

impl HistoryInterval {
    /// Length in milliseconds.
    pub const fn ms(self) -> i64 {
        const MIN: i64 = 60_000;
        match self {
            HistoryInterval::M5 => 5 * MIN,
            HistoryInterval::M15 => 15 * MIN,
            HistoryInterval::H1 => 60 * MIN,
            HistoryInterval::H4 => 240 * MIN,
            HistoryInterval::D1 => 1440 * MIN,
        }
    }

    /// The start of the bucket holding `ms` (epoch milliseconds).
    pub const fn bucket_of(self, ms: i64) -> i64 {
        ms - ms.rem_euclid(self.ms())
    }
}

wire_enum! {
    /// What changed in a wallet's position in one asset between two
    /// consecutive observations of the wallet.
    EventKind {
        /// A position appeared (size 0 before).
        Opened = "opened",
        /// Same direction, larger size.
        Increased = "increased",
        /// Same direction, smaller size (not zero).
        Reduced = "reduced",
        /// The position is gone.
        Closed = "closed",
        /// The position is gone and its last observed mark price was within
        /// `EventKind::NEAR_LIQUIDATION_PCT` percent of its liquidation price.
        ClosedNearLiquidation = "closed_near_liquidation",
        /// The direction changed (long to short or short to long).
        Flipped = "flipped",
    }
}

impl EventKind {
    /// The distance (percent of the mark price) from the liquidation price
    /// within which a close counts as `closed_near_liquidation`.
    pub const NEAR_LIQUIDATION_PCT: i64 = 2;
}

impl Interval {
    /// Nominal length in milliseconds (30 days for `1M`).
    pub const fn nominal_ms(self) -> i64 {
        const MIN: i64 = 60_000;
        match self {
            Interval::M1 => MIN,
            Interval::M3 => 3 * MIN,
            Interval::M5 => 5 * MIN,
            Interval::M15 => 15 * MIN,
            Interval::M30 => 30 * MIN,
            Interval::H1 => 60 * MIN,
            Interval::H2 => 120 * MIN,
            Interval::H4 => 240 * MIN,
            Interval::H8 => 480 * MIN,
            Interval::H12 => 720 * MIN,
            Interval::D1 => 1440 * MIN,
            Interval::D3 => 3 * 1440 * MIN,
            Interval::W1 => 7 * 1440 * MIN,
            Interval::Mo1 => 30 * 1440 * MIN,
        }
    }
}

/// The wire spellings of the enumeration whose OpenAPI schema is named
/// `schema` (the parameters reference them by name), for messages that
/// list the allowed values.
pub fn enum_names(schema: &str) -> Option<&'static [&'static str]> {
    Some(match schema {
        "Direction" => Direction::NAMES,
        "WalletDirection" => WalletDirection::NAMES,
        "SizeClass" => SizeClass::NAMES,
        "Strategy" => Strategy::NAMES,
        "Coverage" => Coverage::NAMES,
        "WalletSort" => WalletSort::NAMES,
        "MarketSort" => MarketSort::NAMES,
        "Interval" => Interval::NAMES,
        "HistoryInterval" => HistoryInterval::NAMES,
        "EventKind" => EventKind::NAMES,
        _ => return None,
    })
}
