//! The parameters of each endpoint, declared once: one struct per endpoint's
//! query string and one per path shape.
//!
//! A server deserializes them (unknown names are denied), a client
//! serializes them, and with the `openapi` feature they describe themselves
//! as OpenAPI parameters (`IntoParams`), so the names, types, bounds and
//! defaults that routing, validation and the document use are these.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use time::format_description::well_known::Rfc3339;
use time::{Date, OffsetDateTime};

use crate::{
    Decimal, Direction, EventKind, HistoryInterval, Interval, MarketSort, SizeClass, WalletSort,
};

/// A caller-supplied value made safe to echo in an error: control
/// characters escaped, at most 64 characters.
pub fn printable(v: &str) -> String {
    let mut out: String = v.chars().take(64).flat_map(char::escape_default).collect();
    if v.chars().count() > 64 {
        out.push('…');
    }
    out
}

/// A page size: `DEFAULT` when absent, otherwise an integer from 1 to `MAX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limit<const DEFAULT: u32, const MAX: u32>(u32);

impl<const DEFAULT: u32, const MAX: u32> Limit<DEFAULT, MAX> {
    /// The value when the parameter is absent.
    pub const DEFAULT: u32 = DEFAULT;
    /// The largest accepted value.
    pub const MAX: u32 = MAX;

    /// Parses the decimal text of a limit (`1..=MAX`); the error says what is accepted.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "must be an integer from 1 to {MAX}; got `{}`",
                printable(&text.chars().take(40).collect::<String>())
            )
        };
        if text.is_empty() || text.len() > 10 || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        match text.parse::<u32>() {
            Ok(n) if (1..=MAX).contains(&n) => Ok(Limit(n)),
            _ => Err(bad()),
        }
    }

    /// A limit of `n`, if it is within bounds.
    pub fn new(n: u32) -> Option<Self> {
        (1..=MAX).contains(&n).then_some(Limit(n))
    }

    /// The number of items asked for.
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl<const DEFAULT: u32, const MAX: u32> Default for Limit<DEFAULT, MAX> {
    fn default() -> Self {
        Limit(DEFAULT)
    }
}

impl<const DEFAULT: u32, const MAX: u32> Serialize for Limit<DEFAULT, MAX> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.0)
    }
}

impl<'de, const DEFAULT: u32, const MAX: u32> Deserialize<'de> for Limit<DEFAULT, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<const DEFAULT: u32, const MAX: u32>;
        impl<const DEFAULT: u32, const MAX: u32> Visitor<'_> for V<DEFAULT, MAX> {
            type Value = Limit<DEFAULT, MAX>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "an integer from 1 to {MAX}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Limit::parse(v).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Limit::parse(&v.to_string()).map_err(E::custom)
            }
        }
        d.deserialize_any(V::<DEFAULT, MAX>)
    }
}

/// Earliest and latest instants accepted (0000-01-01 to 9999-12-31), epoch ms.
const MIN_MS: i64 = -62_167_219_200_000;
const MAX_MS: i64 = 253_402_300_799_999;

/// An instant given as an RFC 3339 time (`2026-11-22T00:00:00Z`) or as epoch
/// milliseconds from 0; held as epoch milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub i64);

impl Instant {
    /// Parses either spelling; the error says what is accepted.
    pub fn parse(v: &str) -> Result<Instant, String> {
        let bad = || {
            format!(
                "must be an RFC 3339 instant (e.g. 2026-11-22T00:00:00Z) or epoch milliseconds from 0 to {MAX_MS}; got `{}`",
                printable(v)
            )
        };
        if !v.is_empty() && v.len() <= 16 && v.bytes().all(|b| b.is_ascii_digit()) {
            return match v.parse::<i64>() {
                Ok(ms) if (0..=MAX_MS).contains(&ms) => Ok(Instant(ms)),
                _ => Err(bad()),
            };
        }
        let t = OffsetDateTime::parse(v, &Rfc3339).map_err(|_| bad())?;
        let ms = (t.unix_timestamp_nanos() / 1_000_000) as i64;
        if (MIN_MS..=MAX_MS).contains(&ms) {
            Ok(Instant(ms))
        } else {
            Err(bad())
        }
    }
}

impl Serialize for Instant {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Instant {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Instant::parse(&text).map_err(de::Error::custom)
    }
}

/// The id of a streamed position event (its `id:` field, and what
/// `Last-Event-ID` and `since` take): a non-negative decimal integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId(pub i64);

impl EventId {
    /// Parses the text of an id; the error says what is accepted.
    pub fn parse(v: &str) -> Result<EventId, String> {
        let v = v.trim();
        if !v.is_empty() && v.len() <= 18 && v.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(id) = v.parse::<i64>() {
                return Ok(EventId(id));
            }
        }
        Err(format!(
            "must be the `id` of a streamed event: a decimal integer from 0 (0: every stored event); got `{}`",
            printable(v)
        ))
    }
}

impl Serialize for EventId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for EventId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        EventId::parse(&text).map_err(de::Error::custom)
    }
}

/// A calendar date given as `YYYY-MM-DD`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Day(pub Date);

impl Serialize for Day {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::timestamp_date::serialize(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for Day {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        crate::timestamp_date::parse(&text).map(Day).map_err(|_| {
            de::Error::custom(format!(
                "must be a calendar date YYYY-MM-DD; got `{}`",
                printable(&text)
            ))
        })
    }
}

/// A non-negative amount in plain decimal notation (`1000000`, `2500.5`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Amount(pub Decimal);

impl Amount {
    /// Parses the text of an amount; the error says what is accepted.
    pub fn parse(v: &str) -> Result<Amount, String> {
        match crate::decimal::parse_plain(v) {
            Some(d) if d.sign() != bigdecimal::num_bigint::Sign::Minus => Ok(Amount(Decimal(d))),
            _ => Err(format!(
                "must be a non-negative decimal number in plain notation (e.g. 1000000 or 2500.5); got `{}`",
                printable(v)
            )),
        }
    }
}

impl Serialize for Amount {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Amount::parse(&text).map_err(de::Error::custom)
    }
}

/// A wallet address: `0x` and 40 hex digits, in any case; held in lowercase,
/// the spelling every response uses.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WalletAddress(String);

impl WalletAddress {
    /// Parses an address; the error says what is accepted.
    pub fn parse(v: &str) -> Result<WalletAddress, String> {
        let ok = v.len() == 42
            && (v.starts_with("0x") || v.starts_with("0X"))
            && v[2..].bytes().all(|b| b.is_ascii_hexdigit());
        if ok {
            // `0X` lowercases to `0x` too; one allocation (wallet detail parses one per request).
            Ok(WalletAddress(v.to_ascii_lowercase()))
        } else {
            Err(format!(
                "must be a wallet address: 0x followed by 40 hexadecimal digits; got `{}`",
                printable(v)
            ))
        }
    }

    /// The lowercase address.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for WalletAddress {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Serialize for WalletAddress {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for WalletAddress {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        WalletAddress::parse(&text).map_err(de::Error::custom)
    }
}

macro_rules! text_param {
    ($(#[doc = $doc:expr])* $name:ident) => {
        $(#[doc = $doc])*
        #[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// The text as given.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name(s.to_owned())
            }
        }
    };
}

text_param! {
    /// A network id (path segment).
    NetworkId
}
text_param! {
    /// An asset symbol as given: a network symbol (`BTC`, `xyz:TSLA`) or the
    /// canonical symbol of an asset listed by one dex.
    AssetSymbol
}
text_param! {
    /// A sort order as given: `asc` sorts ascending, and any other value
    /// sorts descending (lenient on purpose, spec §4.3).
    OrderParam
}
text_param! {
    /// An opaque keyset cursor: the `nextCursor` of the previous page.
    Cursor
}

impl OrderParam {
    /// The order it selects.
    pub fn order(this: Option<&OrderParam>) -> crate::SortOrder {
        crate::SortOrder::parse_lenient(this.map(OrderParam::as_str))
    }
}

/// Each parameter type's exact OpenAPI schema.
#[cfg(feature = "openapi")]
macro_rules! param_schema {
    ($ty:ty => $f:expr) => {
        impl utoipa::PartialSchema for $ty {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $f.into()
            }
        }
        impl utoipa::ToSchema for $ty {}
    };
}

#[cfg(feature = "openapi")]
param_schema!(NetworkId => schema::network());
#[cfg(feature = "openapi")]
param_schema!(AssetSymbol => schema::asset());
#[cfg(feature = "openapi")]
param_schema!(OrderParam => schema::order());
#[cfg(feature = "openapi")]
param_schema!(Cursor => schema::cursor());
#[cfg(feature = "openapi")]
param_schema!(Instant => schema::instant());
#[cfg(feature = "openapi")]
param_schema!(Day => schema::date());
#[cfg(feature = "openapi")]
param_schema!(EventId => schema::event_id());
#[cfg(feature = "openapi")]
param_schema!(Amount => schema::amount());
#[cfg(feature = "openapi")]
param_schema!(WalletAddress => schema::address());

#[cfg(feature = "openapi")]
impl<const DEFAULT: u32, const MAX: u32> utoipa::PartialSchema for Limit<DEFAULT, MAX> {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        schema::limit::<DEFAULT, MAX>().into()
    }
}
#[cfg(feature = "openapi")]
impl<const DEFAULT: u32, const MAX: u32> utoipa::ToSchema for Limit<DEFAULT, MAX> {}

/// Path of the endpoints under one network.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Path))]
pub struct NetworkPath {
    /// Network id; only `perpnet`.
    #[cfg_attr(feature = "openapi", param(example = "perpnet"))]
    pub network: NetworkId,
}

/// Path of the endpoints under one market.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Path))]
pub struct MarketPath {
    /// Network id; only `perpnet`.
    #[cfg_attr(feature = "openapi", param(example = "perpnet"))]
    pub network: NetworkId,
    /// Network or canonical asset symbol, case-sensitive.
    #[cfg_attr(feature = "openapi", param(example = "BTC"))]
    pub asset: AssetSymbol,
}

/// Path of the endpoints under one wallet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Path))]
pub struct WalletPath {
    /// Network id; only `perpnet`.
    #[cfg_attr(feature = "openapi", param(example = "perpnet"))]
    pub network: NetworkId,
    /// Wallet address, `0x` and 40 hex digits (any case).
    #[cfg_attr(
        feature = "openapi",
        param(example = "0x3f5ce5fbfe3e9af3971dd833d26ba9b5c936f0be")
    )]
    pub address: WalletAddress,
}

/// An endpoint that takes no query parameter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct NoQuery {}

/// Query of `GET /v1/networks/{network}/markets`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MarketsQuery {
    /// Sort key (default `volume24h`). An unknown key is a 400.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<MarketSort>,
    /// `asc` sorts ascending; any other value, or none, sorts descending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "desc"))]
    pub order: Option<OrderParam>,
}

/// Page size of whale-positions.
pub type PositionsLimit = Limit<25, 200>;
/// Page size of wallets.
pub type WalletsLimit = Limit<25, 200>;
/// Page size of liquidity-levels.
pub type LiquidityLimit = Limit<30, 500>;
/// Most candles of one answer.
pub type CandlesLimit = Limit<500, 5000>;
/// Most buckets of one history answer.
pub type HistoryLimit = Limit<500, 5000>;
/// Page size of position-events.
pub type EventsLimit = Limit<50, 500>;

/// Query of `GET /v1/networks/{network}/markets/{asset}/whale-positions`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PositionsQuery {
    /// Only long or only short positions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// Only positions whose `positionValue` is at least this many USD
    /// (plain decimal, e.g. `1000000`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "1000000"))]
    pub min_value: Option<Amount>,
    /// Page size, 1 to 200.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(inline, example = 25))]
    pub limit: PositionsLimit,
    /// `nextCursor` of the previous page (same asset, direction and minValue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
}

/// Query of `GET /v1/networks/{network}/wallets`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WalletsQuery {
    /// Size class by account value: `shrimp` < 100,000 USD ≤ `shark` < 1,000,000 USD ≤ `whale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<SizeClass>,
    /// Net direction: `long` (longValue > shortValue) or `short` (shortValue > longValue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// Sort key (default `accountTotalValue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<WalletSort>,
    /// `asc` sorts ascending; any other value, or none, sorts descending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "desc"))]
    pub order: Option<OrderParam>,
    /// Page size, 1 to 200.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(inline, example = 25))]
    pub limit: WalletsLimit,
    /// `nextCursor` of the previous page (same filters and order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
}

/// Query of `GET /v1/networks/{network}/liquidity-levels`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LiquidityQuery {
    /// First day, YYYY-MM-DD (UTC).
    #[cfg_attr(feature = "openapi", param(example = "2026-11-01"))]
    pub from_date: Day,
    /// Last day, YYYY-MM-DD, ≥ fromDate and at most 89 days after it.
    #[cfg_attr(feature = "openapi", param(example = "2026-11-22"))]
    pub to_date: Day,
    /// Only this asset (network or canonical symbol).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "BTC"))]
    pub asset: Option<AssetSymbol>,
    /// Page size, 1 to 500.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(inline, example = 30))]
    pub limit: LiquidityLimit,
    /// `nextCursor` of the previous page (same dates and asset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
}

/// Query of `GET /v1/networks/{network}/markets/{asset}/candles`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CandlesQuery {
    /// Candle interval (required).
    pub interval: Interval,
    /// Start, RFC 3339 instant or epoch milliseconds (default: `to` minus `limit` intervals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "2026-11-20T00:00:00Z"))]
    pub from: Option<Instant>,
    /// End (inclusive), RFC 3339 instant or epoch milliseconds (default: now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "1795305600000"))]
    pub to: Option<Instant>,
    /// Most candles returned, 1 to 5000.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(inline, example = 500))]
    pub limit: CandlesLimit,
    /// `nextCursor` of the previous page: an epoch-ms time or RFC 3339 instant; replaces `from`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "1795003200000"))]
    pub cursor: Option<Instant>,
}

/// Query of the history endpoints (`…/markets/{asset}/history`, `…/wallets/{address}/history`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HistoryQuery {
    /// Bucket width (default `1h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<HistoryInterval>,
    /// Start, RFC 3339 instant or epoch milliseconds (default: `to` minus `limit` intervals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "2026-11-20T00:00:00Z"))]
    pub from: Option<Instant>,
    /// End (inclusive), RFC 3339 instant or epoch milliseconds (default: now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "1795305600000"))]
    pub to: Option<Instant>,
    /// Most buckets returned, 1 to 5000.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(inline, example = 500))]
    pub limit: HistoryLimit,
    /// `nextCursor` of the previous page (same interval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
}

/// Query of `GET /v1/networks/{network}/position-events`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventsQuery {
    /// Only this asset (network or canonical symbol).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "BTC"))]
    pub asset: Option<AssetSymbol>,
    /// Only this wallet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<WalletAddress>,
    /// Only this kind of event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<EventKind>,
    /// Only events whose larger side (`max(previousValue, value)`) is at least this many USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "1000000"))]
    pub min_value: Option<Amount>,
    /// Earliest `observedAt` (inclusive), RFC 3339 instant or epoch milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "2026-11-20T00:00:00Z"))]
    pub from: Option<Instant>,
    /// Latest `observedAt` (inclusive), RFC 3339 instant or epoch milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "1795305600000"))]
    pub to: Option<Instant>,
    /// Page size, 1 to 500.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(inline, example = 50))]
    pub limit: EventsLimit,
    /// `nextCursor` of the previous page (same filters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
}

/// Query of `GET /v1/networks/{network}/position-events/stream`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventStreamQuery {
    /// Only this asset (network or canonical symbol); `data-version` events then carry only its market.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "BTC"))]
    pub asset: Option<AssetSymbol>,
    /// Only this wallet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<WalletAddress>,
    /// Only this kind of event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<EventKind>,
    /// Only events whose larger side (`max(previousValue, value)`) is at least this many USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "1000000"))]
    pub min_value: Option<Amount>,
    /// Replay the stored events after this event id first (`0`: every stored event, from the
    /// oldest one retention kept; another id older than that is a 410), as
    /// `Last-Event-ID` does; the header wins when both are given. Without either, the stream
    /// starts with the events published after it connects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(example = "1200"))]
    pub since: Option<EventId>,
}

/// The exact OpenAPI schema of each parameter: types, enums, defaults and bounds.
#[cfg(feature = "openapi")]
pub mod schema {
    use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, OneOfBuilder, SchemaFormat, Type};
    use utoipa::openapi::Schema;

    use crate::{Direction, Interval, MarketSort, SizeClass, WalletSort};

    /// Longest cursor accepted, in characters.
    pub const MAX_CURSOR_LEN: usize = 512;

    fn string(format: Option<KnownFormat>, pattern: Option<&str>, max: Option<usize>) -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(format.map(SchemaFormat::KnownFormat))
            .pattern(pattern)
            .max_length(max)
            .into()
    }

    fn string_enum(values: &[&str], default: Option<&str>) -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(values.iter().copied()))
            .default(default.map(|d| serde_json::Value::String(d.to_owned())))
            .into()
    }

    /// `network`: the one network id.
    pub fn network() -> Schema {
        string_enum(&[crate::NETWORK_ID], None)
    }
    /// `asset`: a symbol.
    pub fn asset() -> Schema {
        string(None, None, Some(200))
    }
    /// `sort` of the market list.
    pub fn market_sort() -> Schema {
        string_enum(MarketSort::NAMES, Some(MarketSort::Volume24h.as_str()))
    }
    /// `sort` of the wallet list.
    pub fn wallet_sort() -> Schema {
        string_enum(
            WalletSort::NAMES,
            Some(WalletSort::AccountTotalValue.as_str()),
        )
    }
    /// `order`: any value is accepted (only `asc` means ascending), so no bound is stated.
    pub fn order() -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .default(Some(serde_json::Value::String("desc".into())))
            .into()
    }
    /// `size`.
    pub fn size() -> Schema {
        string_enum(SizeClass::NAMES, None)
    }
    /// `direction`.
    pub fn direction() -> Schema {
        string_enum(Direction::NAMES, None)
    }
    /// `interval` of candles.
    pub fn interval() -> Schema {
        string_enum(Interval::NAMES, None)
    }
    /// A non-negative plain decimal amount.
    pub fn amount() -> Schema {
        string(None, Some(r"^[0-9]+(\.[0-9]+)?$"), Some(60))
    }
    /// A wallet address.
    pub fn address() -> Schema {
        string(None, Some("^0[xX][0-9a-fA-F]{40}$"), None)
    }
    /// `limit`: an integer from 1 to `MAX`, `DEFAULT` when absent.
    pub fn limit<const DEFAULT: u32, const MAX: u32>() -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int32)))
            .minimum(Some(1))
            .maximum(Some(MAX))
            .default(Some(DEFAULT.into()))
            .into()
    }
    /// An opaque keyset cursor.
    pub fn cursor() -> Schema {
        string(None, Some("^[A-Za-z0-9_-]+$"), Some(MAX_CURSOR_LEN))
    }
    /// An RFC 3339 instant or epoch milliseconds.
    pub fn instant() -> Schema {
        OneOfBuilder::new()
            .item(string(Some(KnownFormat::DateTime), None, None))
            .item(string(None, Some("^(0|[1-9][0-9]{0,13})$"), None))
            .into()
    }
    /// A streamed event's id: a decimal integer.
    pub fn event_id() -> Schema {
        string(None, Some("^[0-9]{1,18}$"), None)
    }
    /// A `YYYY-MM-DD` date.
    pub fn date() -> Schema {
        string(
            Some(KnownFormat::Date),
            Some(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"),
            None,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_are_decimal_integers() {
        assert_eq!(EventId::parse("0"), Ok(EventId(0)));
        assert_eq!(EventId::parse("1200"), Ok(EventId(1200)));
        assert_eq!(EventId::parse(" 7 "), Ok(EventId(7)));
        for bad in ["", "-1", "1.5", "abc", "9999999999999999999", "1e3"] {
            let err = EventId::parse(bad).unwrap_err();
            assert!(err.contains("decimal integer"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn limits() {
        assert_eq!(PositionsLimit::default().get(), 25);
        assert_eq!(PositionsLimit::parse("200").unwrap().get(), 200);
        for bad in [
            "0",
            "201",
            "",
            "-1",
            "+5",
            "1.5",
            "1e2",
            "abc",
            "99999999999999999999",
            " 5",
        ] {
            let e = PositionsLimit::parse(bad).unwrap_err();
            assert!(e.starts_with("must be an integer from 1 to 200"), "{e}");
        }
        for n in 0..1000u32 {
            let ok = PositionsLimit::parse(&n.to_string()).is_ok();
            assert_eq!(ok, (1..=200).contains(&n), "{n}");
        }
    }

    #[test]
    fn wallet_addresses_are_held_in_lowercase() {
        let lower = "0x00000000000000000000000000000000000abcde";
        for spelling in [
            lower,
            "0X00000000000000000000000000000000000ABCDE",
            "0x00000000000000000000000000000000000AbCdE",
        ] {
            assert_eq!(WalletAddress::parse(spelling).unwrap().as_str(), lower);
        }
        for bad in [
            "",
            "0x",
            &lower[..41],
            &format!("{lower}0"),
            "1x00000000000000000000000000000000000abcde",
            "0x00000000000000000000000000000000000abcdg",
        ] {
            let e = WalletAddress::parse(bad).unwrap_err();
            assert!(e.starts_with("must be a wallet address"), "{e}");
        }
    }

    #[test]
    fn instants() {
        assert_eq!(Instant::parse("0"), Ok(Instant(0)));
        assert_eq!(
            Instant::parse("1795003200000"),
            Ok(Instant(1_795_003_200_000))
        );
        assert_eq!(
            Instant::parse("2026-11-22T00:00:00Z"),
            Ok(Instant(1_795_305_600_000))
        );
        assert_eq!(
            Instant::parse("2026-11-22T01:00:00+01:00"),
            Ok(Instant(1_795_305_600_000))
        );
        for bad in [
            "",
            "-1",
            "abc",
            "2026-13-01T00:00:00Z",
            "99999999999999999",
            "1e3",
            "2026-11-22",
        ] {
            assert!(Instant::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn printable_escapes() {
        assert_eq!(printable("a\u{0}b"), "a\\u{0}b");
        assert_eq!(printable(&"x".repeat(100)).chars().count(), 65);
    }

    #[test]
    fn queries_serialize_as_a_client_sends_them() {
        let q = CandlesQuery {
            interval: Interval::H1,
            from: Some(Instant(5)),
            to: None,
            limit: CandlesLimit::new(10).unwrap(),
            cursor: None,
        };
        assert_eq!(
            serde_json::to_string(&q).unwrap(),
            r#"{"interval":"1h","from":"5","limit":10}"#
        );
    }
}
