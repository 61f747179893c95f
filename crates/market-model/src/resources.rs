//! The resources of the API (spec §2), exactly as they appear on the wire.

use serde::{Deserialize, Serialize};
use time::{Date, OffsetDateTime};

use crate::decimal::{Decimal, PlainDecimal};
use crate::query::{Coverage, Direction, Interval, Side, SizeClass, Strategy, WalletDirection};
use crate::timestamp::rfc3339_utc;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// A source network the service serves data for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct NetworkItem {
    /// Network id, lowercase; used as the `{network}` path segment.
    #[cfg_attr(feature = "openapi", schema(example = "perpnet"))]
    pub network: String,
    /// Human-readable name of the network.
    #[cfg_attr(
        feature = "openapi",
        schema(example = "Perpnet (Hyperliquid-style perpetuals)")
    )]
    pub display_name: String,
    /// Number of assets the scanner tracks on this network (main dex plus HIP-3 dexs).
    #[cfg_attr(feature = "openapi", schema(minimum = 0, example = 183))]
    pub scan_asset_count: u32,
}

/// Response of `GET /networks`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct NetworkList {
    /// All networks (one page).
    pub items: Vec<NetworkItem>,
    /// Always null: the network list is never paged.
    pub next_cursor: Option<String>,
}

/// Snapshot of one asset: the exchange's quote context plus aggregates over
/// the scanned wallets' open positions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Market {
    /// Asset symbol as on the exchange, case-sensitive (`BTC`, `kPEPE`, or `xyz:TSLA` for an asset of the HIP-3 dex `xyz`).
    #[cfg_attr(feature = "openapi", schema(example = "BTC"))]
    pub symbol: String,
    /// Current mark price, USD per asset unit.
    pub price: Decimal,
    /// Change of the mark price against the price 24 hours ago, in percent
    /// (`(price − prevDayPrice) / prevDayPrice × 100`, 4 decimals; `-2.5` means −2.5 %).
    pub change24h_pct: Decimal,
    /// Traded notional volume of the last 24 hours, USD.
    pub volume24h: Decimal,
    /// Current open interest, USD (open interest in asset units × mark price).
    pub open_interest: Decimal,
    /// Current hourly funding rate as a fraction (`0.0000125` = 0.00125 % per hour);
    /// positive means longs pay shorts.
    pub funding: Decimal,
    /// Number of scanned wallets with an open long position in this asset.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, example = 412))]
    pub long_count: u64,
    /// Number of scanned wallets with an open short position in this asset.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, example = 377))]
    pub short_count: u64,
    /// `longCount / shortCount`, rounded half-up to 4 decimals. When `shortCount`
    /// is 0 it is `0` if `longCount` is 0 too, and otherwise equals `longCount`
    /// (as if there were one short wallet); it is never NaN or infinite.
    pub long_short_ratio: Decimal,
    /// `longLiquidationValue + shortLiquidationValue`, USD.
    pub total_liquidation_value: Decimal,
    /// Sum of `positionValue` (USD) over the scanned long positions in this asset
    /// that have a liquidation price.
    pub long_liquidation_value: Decimal,
    /// Sum of `positionValue` (USD) over the scanned short positions in this asset
    /// that have a liquidation price.
    pub short_liquidation_value: Decimal,
}

/// Response of `GET /networks/{network}/markets`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MarketList {
    /// Every tracked asset, in the requested order (one page, never paged).
    pub items: Vec<Market>,
    /// Always `scanned_wallets`: the aggregates cover the scanned wallets only.
    pub coverage: Coverage,
}

/// One open position of a scanned wallet in one asset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MarketPosition {
    /// Wallet address, `0x` followed by 40 lowercase hex digits.
    #[cfg_attr(
        feature = "openapi",
        schema(example = "0x3f5ce5fbfe3e9af3971dd833d26ba9b5c936f0be")
    )]
    pub address: String,
    /// Public label of the wallet, or null when it has none.
    pub label: Option<String>,
    /// Tag names attached to the wallet (possibly empty).
    pub tags: Vec<String>,
    /// Asset symbol of the position.
    #[cfg_attr(feature = "openapi", schema(example = "BTC"))]
    pub symbol: String,
    /// `long` or `short`.
    pub direction: Direction,
    /// Notional value of the position at the mark price, USD (`size × markPrice`), always positive.
    pub position_value: Decimal,
    /// Liquidation price, USD per asset unit; null when the position has none
    /// (cross-margin positions backed by enough account equity cannot be liquidated).
    pub liq_price: Option<Decimal>,
    /// When the position was last observed by the scanner.
    #[serde(with = "rfc3339_utc")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime, example = "2026-11-22T02:00:00Z"))]
    pub observed_at: OffsetDateTime,
    /// Leverage of the position (notional / margin), e.g. `10`.
    pub leverage: Decimal,
    /// Absolute position size in asset units (see `sizeUnit`).
    pub size: Decimal,
    /// Unit of `size`: the asset symbol.
    #[cfg_attr(feature = "openapi", schema(example = "BTC"))]
    pub size_unit: String,
    /// Unrealized profit (positive) or loss (negative), USD.
    pub u_pnl: Decimal,
    /// Unrealized PnL as a percentage of the margin (return on equity × 100);
    /// `36.15` means +36.15 %.
    pub u_pnl_pct: Decimal,
    /// Average entry price, USD per asset unit.
    pub entry_price: Decimal,
    /// Mark price of the asset at `observedAt`, USD per asset unit.
    pub mark_price: Decimal,
    /// Margin allocated to the position, USD.
    pub margin: Decimal,
    /// Funding paid since the position was opened, USD. Positive means the
    /// wallet paid funding (a cost), negative means it received funding.
    pub funding_cost: Decimal,
}

/// A [`MarketPosition`] whose decimals are borrowed plain text: it
/// serializes to exactly the JSON of the position it denotes, without
/// parsing a decimal. A server that loads a million positions from the
/// database renders them from the stored text this way.
#[derive(Clone, Copy, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MarketPositionText<'a> {
    /// See [`MarketPosition::address`].
    pub address: &'a str,
    /// See [`MarketPosition::label`].
    pub label: Option<&'a str>,
    /// See [`MarketPosition::tags`].
    pub tags: &'a [String],
    /// See [`MarketPosition::symbol`].
    pub symbol: &'a str,
    /// See [`MarketPosition::direction`].
    pub direction: Direction,
    /// See [`MarketPosition::position_value`].
    pub position_value: PlainDecimal<'a>,
    /// See [`MarketPosition::liq_price`].
    pub liq_price: Option<PlainDecimal<'a>>,
    /// See [`MarketPosition::observed_at`].
    #[serde(with = "rfc3339_utc")]
    pub observed_at: OffsetDateTime,
    /// See [`MarketPosition::leverage`].
    pub leverage: PlainDecimal<'a>,
    /// See [`MarketPosition::size`].
    pub size: PlainDecimal<'a>,
    /// See [`MarketPosition::size_unit`].
    pub size_unit: &'a str,
    /// See [`MarketPosition::u_pnl`].
    pub u_pnl: PlainDecimal<'a>,
    /// See [`MarketPosition::u_pnl_pct`].
    pub u_pnl_pct: PlainDecimal<'a>,
    /// See [`MarketPosition::entry_price`].
    pub entry_price: PlainDecimal<'a>,
    /// See [`MarketPosition::mark_price`].
    pub mark_price: PlainDecimal<'a>,
    /// See [`MarketPosition::margin`].
    pub margin: PlainDecimal<'a>,
    /// See [`MarketPosition::funding_cost`].
    pub funding_cost: PlainDecimal<'a>,
}

impl MarketPosition {
    /// Hands `f` this position's text form, its decimals printed once (as
    /// the database stores them): what a server reads back.
    pub fn with_text<R>(&self, f: impl FnOnce(&MarketPositionText<'_>) -> R) -> R {
        let text = [
            &self.position_value,
            &self.leverage,
            &self.size,
            &self.u_pnl,
            &self.u_pnl_pct,
            &self.entry_price,
            &self.mark_price,
            &self.margin,
            &self.funding_cost,
        ]
        .map(|d| d.to_string());
        let liq = self.liq_price.as_ref().map(Decimal::to_string);
        // A decimal prints in plain notation (see `Decimal`'s Display).
        fn plain(s: &str) -> PlainDecimal<'_> {
            PlainDecimal::new(s).expect("decimals print plain")
        }
        f(&MarketPositionText {
            address: &self.address,
            label: self.label.as_deref(),
            tags: &self.tags,
            symbol: &self.symbol,
            direction: self.direction,
            position_value: plain(&text[0]),
            liq_price: liq.as_deref().map(plain),
            observed_at: self.observed_at,
            leverage: plain(&text[1]),
            size: plain(&text[2]),
            size_unit: &self.size_unit,
            u_pnl: plain(&text[3]),
            u_pnl_pct: plain(&text[4]),
            entry_price: plain(&text[5]),
            mark_price: plain(&text[6]),
            margin: plain(&text[7]),
            funding_cost: plain(&text[8]),
        })
    }
}

/// Response of `GET /networks/{network}/markets/{asset}/whale-positions`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PositionList {
    /// Positions ordered by `positionValue` descending, ties by address ascending.
    pub items: Vec<MarketPosition>,
    /// Cursor of the next page, or null on the last page.
    pub next_cursor: Option<String>,
    /// Always `scanned_wallets`.
    pub coverage: Coverage,
}

/// Key-opinion-leader identity linked to a wallet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Kol {
    /// Display name of the person or organisation.
    #[cfg_attr(feature = "openapi", schema(example = "Ansem"))]
    pub name: String,
    /// Platform of the account (`x`, `telegram`, `youtube`).
    #[cfg_attr(feature = "openapi", schema(example = "x"))]
    pub platform: String,
    /// Handle on that platform.
    #[cfg_attr(feature = "openapi", schema(example = "@blknoiz06"))]
    pub handle: String,
}

/// Public profile of a key opinion leader (KOL) who owns a wallet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct KolProfile {
    /// Display name.
    pub name: String,
    /// Short public biography, or null.
    pub bio: Option<String>,
    /// Follower count summed over the linked accounts.
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub followers: u64,
}

/// A scanned wallet: live account state plus analytics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Wallet {
    /// Wallet address, `0x` followed by 40 lowercase hex digits.
    #[cfg_attr(
        feature = "openapi",
        schema(example = "0x3f5ce5fbfe3e9af3971dd833d26ba9b5c936f0be")
    )]
    pub address: String,
    /// Public label, or null.
    pub label: Option<String>,
    /// Tag names (possibly empty).
    pub tags: Vec<String>,
    /// KOL identities linked to the wallet; empty when none.
    pub kols: Vec<Kol>,
    /// Profile of the KOL owning the wallet, or null.
    pub kol_profile: Option<KolProfile>,
    /// Size class by `accountTotalValue`: `shrimp` below 100,000 USD,
    /// `shark` from 100,000 up to 1,000,000 USD, `whale` from 1,000,000 USD.
    pub size_class: SizeClass,
    /// Net direction: `long` when `longValue > shortValue`, `short` when
    /// `shortValue > longValue`, `neutral` when equal (including no positions).
    pub direction: WalletDirection,
    /// Account equity summed over the main dex and every HIP-3 dex, USD.
    pub account_total_value: Decimal,
    /// `longValue + shortValue`, USD.
    pub total_position_value: Decimal,
    /// Sum of `positionValue` over the wallet's long positions, USD.
    pub long_value: Decimal,
    /// Sum of `positionValue` over the wallet's short positions, USD.
    pub short_value: Decimal,
    /// Effective account leverage: `totalPositionValue / accountTotalValue`,
    /// 2 decimals, half-up; `0` when `accountTotalValue` is not positive.
    pub leverage: Decimal,
    /// Number of open positions.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, example = 3))]
    pub positions: u32,
    /// When the wallet was last observed by the scanner.
    #[serde(with = "rfc3339_utc")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime, example = "2026-11-22T02:00:00Z"))]
    pub observed_at: OffsetDateTime,
    /// Realized plus unrealized profit since tracking began, USD; null without enough history.
    pub net_pnl: Option<Decimal>,
    /// Return on investment in percent (`netPnl / capital deployed × 100`); null without enough history.
    pub roi: Option<Decimal>,
    /// Share of closed positions that were profitable, in percent (0–100); null without enough history.
    pub win_rate: Option<Decimal>,
    /// Trading style by typical holding time; null without enough history.
    pub strategy: Option<Strategy>,
    /// Confidence in `strategy`, from 0 to 1; null when `strategy` is null.
    pub strategy_confidence: Option<Decimal>,
}

/// Response of `GET /networks/{network}/wallets`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WalletList {
    /// One page of wallets in the requested order.
    pub items: Vec<Wallet>,
    /// Cursor of the next page, or null on the last page.
    pub next_cursor: Option<String>,
    /// Number of wallets matching the filters (over all pages).
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub total: u64,
    /// Always `scanned_wallets`.
    pub coverage: Coverage,
}

/// Position count and notional of one side.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SideTotal {
    /// Number of positions.
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub position_count: u64,
    /// Sum of their `positionValue`, USD.
    pub total_amount_usd: Decimal,
}

/// Totals of a liquidity day: the sums over its levels, per side.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct LiquidityTotals {
    /// Sum over the long levels.
    pub long: SideTotal,
    /// Sum over the short levels.
    pub short: SideTotal,
}

/// Positions of one side whose liquidation price falls in one price bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Level {
    /// `long` or `short`.
    pub side: Side,
    /// Centre of the bucket: the multiple of `bucketSize` nearest to each
    /// member's liquidation price (exact halves round up).
    pub bucket_price: Decimal,
    /// Number of positions in the bucket.
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub position_count: u64,
    /// Sum of the positions' `positionValue`, USD.
    pub total_amount_usd: Decimal,
    /// Lowest liquidation price in the bucket.
    pub min_liquidation_price: Decimal,
    /// Highest liquidation price in the bucket.
    pub max_liquidation_price: Decimal,
}

/// Liquidation levels of one asset on one UTC day.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LiquidityDay {
    /// UTC calendar day, `YYYY-MM-DD`.
    #[serde(with = "crate::timestamp_date")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = Date, example = "2026-11-22"))]
    pub date: Date,
    /// Network id.
    #[cfg_attr(feature = "openapi", schema(example = "perpnet"))]
    pub network: String,
    /// Canonical asset symbol: the symbol without any dex prefix (`TSLA` for `xyz:TSLA`).
    #[cfg_attr(feature = "openapi", schema(example = "BTC"))]
    pub canonical_asset: String,
    /// Symbol of the asset on the network, with its dex prefix if any.
    #[cfg_attr(feature = "openapi", schema(example = "BTC"))]
    pub network_asset_symbol: String,
    /// Display alias: the canonical symbol for main-dex assets, `COIN (dex)` for HIP-3 assets.
    #[cfg_attr(feature = "openapi", schema(example = "BTC"))]
    pub asset_alias: String,
    /// `current` for the latest day (computed from the positions of the latest scan,
    /// updated with every scan), `end_of_day` for earlier days (frozen at the
    /// day's last scan).
    pub coverage: Coverage,
    /// Price width of a bucket, USD: 1, 2 or 5 × 10^(k−2) for a mark price
    /// in [10^k, 10^(k+1)) with leading digit 1, 2–4 or 5–9 (0.4 % to 1 % of the price).
    pub bucket_size: Decimal,
    /// Always `nearest`: each position goes to the bucket whose price is nearest to its liquidation price.
    #[cfg_attr(feature = "openapi", schema(example = "nearest"))]
    pub bucket_method: String,
    /// When the levels were computed.
    #[serde(with = "rfc3339_utc")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime, example = "2026-11-22T02:00:00Z"))]
    pub updated_at: OffsetDateTime,
    /// Sums over `levels` per side.
    pub totals: LiquidityTotals,
    /// Levels ordered by side (`long` first), then by `bucketPrice` ascending.
    /// Only positions with a liquidation price are included.
    pub levels: Vec<Level>,
}

impl LiquidityDay {
    /// How positions are assigned to buckets: to the bucket whose price is
    /// nearest to their liquidation price.
    pub const BUCKET_METHOD: &'static str = "nearest";

    /// A day of `symbol` on `network`: the canonical symbol and the alias
    /// follow from the symbol, and the bucket method is [`Self::BUCKET_METHOD`].
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        date: Date,
        network: &str,
        symbol: &str,
        coverage: Coverage,
        bucket_size: Decimal,
        updated_at: OffsetDateTime,
        totals: LiquidityTotals,
        levels: Vec<Level>,
    ) -> LiquidityDay {
        LiquidityDay {
            date,
            network: network.to_owned(),
            canonical_asset: crate::symbol::canonical_of(symbol).to_owned(),
            network_asset_symbol: symbol.to_owned(),
            asset_alias: crate::symbol::alias_of(symbol),
            coverage,
            bucket_size,
            bucket_method: Self::BUCKET_METHOD.to_owned(),
            updated_at,
            totals,
            levels,
        }
    }
}

/// Response of `GET /networks/{network}/liquidity-levels`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LiquidityLevelsList {
    /// First day of the window, as requested.
    #[serde(with = "crate::timestamp_date")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = Date, example = "2026-11-01"))]
    pub from_date: Date,
    /// Last day of the window (inclusive), as requested.
    #[serde(with = "crate::timestamp_date")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = Date, example = "2026-11-22"))]
    pub to_date: Date,
    /// Always `day`.
    #[cfg_attr(feature = "openapi", schema(example = "day"))]
    pub granularity: String,
    /// One item per (date, asset), ordered by date, then asset symbol.
    pub items: Vec<LiquidityDay>,
    /// Cursor of the next page, or null on the last page.
    pub next_cursor: Option<String>,
}

/// One OHLCV candle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Candle {
    /// Open time, epoch milliseconds (UTC).
    #[cfg_attr(feature = "openapi", schema(example = 1794999600000_i64))]
    pub time: i64,
    /// Open time as an RFC 3339 UTC instant.
    #[serde(with = "rfc3339_utc")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime, example = "2026-11-17T11:00:00Z"))]
    pub open_time: OffsetDateTime,
    /// First trade price of the period, USD.
    pub open: Decimal,
    /// Highest trade price of the period, USD.
    pub high: Decimal,
    /// Lowest trade price of the period, USD.
    pub low: Decimal,
    /// Last trade price of the period, USD.
    pub close: Decimal,
    /// Traded volume of the period, in asset units.
    pub volume: Decimal,
    /// Number of trades in the period.
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub trades: u64,
}

impl Candle {
    /// A candle opening at `time` (epoch ms); `openTime` is derived from it.
    pub fn at(
        time: i64,
        open: Decimal,
        high: Decimal,
        low: Decimal,
        close: Decimal,
        volume: Decimal,
        trades: u64,
    ) -> Candle {
        let open_time = OffsetDateTime::from_unix_timestamp_nanos(i128::from(time) * 1_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        Candle {
            time,
            open_time,
            open,
            high,
            low,
            close,
            volume,
            trades,
        }
    }
}

/// Response of `GET /networks/{network}/markets/{asset}/candles`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CandleSeries {
    /// Network id.
    pub network: String,
    /// Symbol of the asset on the network.
    pub coin: String,
    /// Canonical asset symbol (without dex prefix).
    pub canonical_asset: String,
    /// Candle interval.
    pub interval: Interval,
    /// Candles in ascending time order.
    pub candles: Vec<Candle>,
    /// Epoch-millisecond open time of the next candle as a string (pass it as
    /// `cursor`), or null when the window is exhausted.
    #[cfg_attr(feature = "openapi", schema(example = "1795003200000"))]
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn position(label: Option<&str>, tags: &[&str], liq_price: Option<&str>) -> MarketPosition {
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        MarketPosition {
            address: "0x3f5ce5fbfe3e9af3971dd833d26ba9b5c936f0be".into(),
            label: label.map(str::to_owned),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            symbol: "xyz:GOLD".into(),
            direction: Direction::Short,
            position_value: d("1234567.80"),
            liq_price: liq_price.map(d),
            observed_at: time::macros::datetime!(2026-11-22 04:30:00.250 +02:00),
            leverage: d("10"),
            size: d("0.0000001"),
            size_unit: "xyz:GOLD".into(),
            u_pnl: d("-49.804021"),
            u_pnl_pct: d("0"),
            entry_price: d("1E+3"),
            mark_price: d("92391.3380"),
            margin: d("0.00"),
            funding_cost: d("-0.5"),
        }
    }

    #[test]
    fn position_text_renders_the_position_json() {
        for p in [
            position(None, &[], None),
            position(
                Some("Whale \"7\" \u{1F40B}\\"),
                &["fund", "kol"],
                Some("1.5"),
            ),
        ] {
            assert_eq!(
                p.with_text(|view| String::from_utf8(serde_json::to_vec(view).unwrap()).unwrap()),
                serde_json::to_string(&p).unwrap()
            );
        }
    }
}
