//! History and drill-down resources: size-class cohorts, market and wallet
//! history series, position events and wallet detail.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::decimal::Decimal;
use crate::query::{Coverage, Direction, EventKind, HistoryInterval, SizeClass};
use crate::resources::{Market, MarketPosition, Wallet};
use crate::timestamp::rfc3339_utc;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// The open positions of one size class on one side of a market.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Cohort {
    /// Size class of the wallets (by their `accountTotalValue`).
    pub size_class: SizeClass,
    /// Direction of the positions.
    pub side: Direction,
    /// Number of positions (one per wallet).
    #[cfg_attr(feature = "openapi", schema(minimum = 0, example = 41))]
    pub count: u64,
    /// Sum of `positionValue`, USD.
    pub position_value: Decimal,
    /// Sum of `positionValue` over the positions that have a liquidation price, USD.
    pub liquidation_value: Decimal,
    /// Value-weighted average leverage (`Σ positionValue × leverage / Σ positionValue`),
    /// rounded half-up to 4 decimals; null when `count` is 0.
    pub average_leverage: Option<Decimal>,
    /// Value-weighted average entry price (`Σ positionValue × entryPrice / Σ positionValue`),
    /// USD per asset unit, rounded half-up to 8 decimals; null when `count` is 0.
    pub average_entry_price: Option<Decimal>,
    /// Sum of unrealized PnL, USD.
    pub u_pnl: Decimal,
}

/// Response of `GET /networks/{network}/markets/{asset}/cohorts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MarketCohorts {
    /// Network symbol of the asset.
    #[cfg_attr(feature = "openapi", schema(example = "BTC"))]
    pub symbol: String,
    /// When the data version was observed.
    #[serde(with = "rfc3339_utc")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime, example = "2026-11-22T02:00:00Z"))]
    pub observed_at: OffsetDateTime,
    /// Six cohorts: `shrimp`, `shark`, `whale`, each `long` then `short`.
    /// Their counts sum to the market's `longCount`/`shortCount` and their
    /// liquidation values to its `longLiquidationValue`/`shortLiquidationValue`.
    pub items: Vec<Cohort>,
    /// Always `scanned_wallets`.
    pub coverage: Coverage,
}

/// Counts and values of one size class in a market history point.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClassSplit {
    /// Long positions.
    pub long_count: u64,
    /// Short positions.
    pub short_count: u64,
    /// Sum of long `positionValue`, USD.
    pub long_value: Decimal,
    /// Sum of short `positionValue`, USD.
    pub short_value: Decimal,
    /// Sum of long `positionValue` with a liquidation price, USD.
    pub long_liquidation_value: Decimal,
    /// Sum of short `positionValue` with a liquidation price, USD.
    pub short_liquidation_value: Decimal,
}

/// [`ClassSplit`] per size class.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct BySizeClass {
    /// Wallets below 100,000 USD.
    pub shrimp: ClassSplit,
    /// Wallets from 100,000 to below 1,000,000 USD.
    pub shark: ClassSplit,
    /// Wallets of 1,000,000 USD or more.
    pub whale: ClassSplit,
}

/// One bucket of a market's history: the last observation in the bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MarketHistoryPoint {
    /// Bucket start, epoch milliseconds (UTC).
    #[cfg_attr(feature = "openapi", schema(example = 1795305600000i64))]
    pub time: i64,
    /// When the observation this bucket shows was made (the last one in the bucket).
    #[serde(with = "rfc3339_utc")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime, example = "2026-11-22T00:59:00Z"))]
    pub observed_at: OffsetDateTime,
    /// Mark price, USD per asset unit.
    pub price: Decimal,
    /// Open interest, USD.
    pub open_interest: Decimal,
    /// Hourly funding rate as a fraction.
    pub funding: Decimal,
    /// Traded notional of the 24 hours before the observation, USD.
    pub volume24h: Decimal,
    /// Scanned wallets with a long position.
    pub long_count: u64,
    /// Scanned wallets with a short position.
    pub short_count: u64,
    /// `longCount / shortCount` by the rule of `Market.longShortRatio`.
    pub long_short_ratio: Decimal,
    /// Sum of long `positionValue`, USD.
    pub long_value: Decimal,
    /// Sum of short `positionValue`, USD.
    pub short_value: Decimal,
    /// Sum of long `positionValue` with a liquidation price, USD.
    pub long_liquidation_value: Decimal,
    /// Sum of short `positionValue` with a liquidation price, USD.
    pub short_liquidation_value: Decimal,
    /// The counts and values split by the wallets' size class; each field sums to the total above.
    pub by_size_class: BySizeClass,
}

impl MarketHistoryPoint {
    /// The point of bucket `time` that shows `market` and its `cohorts`
    /// (any order) as observed at `observed_at`.
    pub fn observe(
        time: i64,
        observed_at: OffsetDateTime,
        market: &Market,
        cohorts: &[Cohort],
    ) -> MarketHistoryPoint {
        let mut by_size_class = BySizeClass::default();
        let (mut long_value, mut short_value) = (Decimal::zero(), Decimal::zero());
        for c in cohorts {
            let split = match c.size_class {
                SizeClass::Shrimp => &mut by_size_class.shrimp,
                SizeClass::Shark => &mut by_size_class.shark,
                SizeClass::Whale => &mut by_size_class.whale,
            };
            let (count, value, liq, total) = match c.side {
                Direction::Long => (
                    &mut split.long_count,
                    &mut split.long_value,
                    &mut split.long_liquidation_value,
                    &mut long_value,
                ),
                Direction::Short => (
                    &mut split.short_count,
                    &mut split.short_value,
                    &mut split.short_liquidation_value,
                    &mut short_value,
                ),
            };
            *count += c.count;
            value.0 += &c.position_value.0;
            liq.0 += &c.liquidation_value.0;
            total.0 += &c.position_value.0;
        }
        MarketHistoryPoint {
            time,
            observed_at,
            price: market.price.clone(),
            open_interest: market.open_interest.clone(),
            funding: market.funding.clone(),
            volume24h: market.volume24h.clone(),
            long_count: market.long_count,
            short_count: market.short_count,
            long_short_ratio: market.long_short_ratio.clone(),
            long_value,
            short_value,
            long_liquidation_value: market.long_liquidation_value.clone(),
            short_liquidation_value: market.short_liquidation_value.clone(),
            by_size_class,
        }
    }
}

/// Response of `GET /networks/{network}/markets/{asset}/history`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MarketHistory {
    /// Network symbol of the asset.
    #[cfg_attr(feature = "openapi", schema(example = "BTC"))]
    pub symbol: String,
    /// Bucket width.
    pub interval: HistoryInterval,
    /// Buckets with at least one observation, oldest first.
    pub items: Vec<MarketHistoryPoint>,
    /// Cursor of the next page, or null on the last page.
    pub next_cursor: Option<String>,
    /// Always `scanned_wallets`.
    pub coverage: Coverage,
}

/// One bucket of a wallet's history: the last observation in the bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WalletHistoryPoint {
    /// Bucket start, epoch milliseconds (UTC).
    #[cfg_attr(feature = "openapi", schema(example = 1795305600000i64))]
    pub time: i64,
    /// When the observation this bucket shows was made.
    #[serde(with = "rfc3339_utc")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime, example = "2026-11-22T00:59:00Z"))]
    pub observed_at: OffsetDateTime,
    /// Account equity, USD.
    pub account_total_value: Decimal,
    /// Long plus short notional, USD.
    pub total_position_value: Decimal,
    /// Long notional, USD.
    pub long_value: Decimal,
    /// Short notional, USD.
    pub short_value: Decimal,
    /// Unrealized PnL over the open positions, USD.
    pub u_pnl: Decimal,
}

impl WalletHistoryPoint {
    /// The point of bucket `time` that shows `wallet` as observed at
    /// `observed_at`, with `u_pnl` summed over its open positions.
    pub fn observe(
        time: i64,
        observed_at: OffsetDateTime,
        wallet: &Wallet,
        u_pnl: Decimal,
    ) -> WalletHistoryPoint {
        WalletHistoryPoint {
            time,
            observed_at,
            account_total_value: wallet.account_total_value.clone(),
            total_position_value: wallet.total_position_value.clone(),
            long_value: wallet.long_value.clone(),
            short_value: wallet.short_value.clone(),
            u_pnl,
        }
    }
}

/// Response of `GET /networks/{network}/wallets/{address}/history`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WalletHistory {
    /// Wallet address, lowercase.
    #[cfg_attr(
        feature = "openapi",
        schema(example = "0x3f5ce5fbfe3e9af3971dd833d26ba9b5c936f0be")
    )]
    pub address: String,
    /// Bucket width.
    pub interval: HistoryInterval,
    /// Buckets with at least one observation, oldest first.
    pub items: Vec<WalletHistoryPoint>,
    /// Cursor of the next page, or null on the last page.
    pub next_cursor: Option<String>,
}

/// A change of one wallet's position in one asset, derived from two
/// consecutive observations of the wallet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PositionEvent {
    /// When the change was observed (the later observation).
    #[serde(with = "rfc3339_utc")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime, example = "2026-11-22T01:59:00Z"))]
    pub observed_at: OffsetDateTime,
    /// Wallet address.
    #[cfg_attr(
        feature = "openapi",
        schema(example = "0x3f5ce5fbfe3e9af3971dd833d26ba9b5c936f0be")
    )]
    pub address: String,
    /// Public label of the wallet when the event was recorded, or null.
    pub label: Option<String>,
    /// Tags of the wallet when the event was recorded.
    pub tags: Vec<String>,
    /// Network symbol of the asset.
    #[cfg_attr(feature = "openapi", schema(example = "BTC"))]
    pub symbol: String,
    /// What changed.
    pub kind: EventKind,
    /// True when the earlier observation is the wallet's first one ever
    /// recorded, or there is none, or it did not read the position's dex
    /// (`opened` at the first observation: the position may be older than
    /// the service's view of it).
    pub first_observation: bool,
    /// Direction before; null when there was no position.
    pub previous_direction: Option<Direction>,
    /// Direction after; null when the position is gone.
    pub direction: Option<Direction>,
    /// Absolute size before, asset units (`0` when there was no position).
    pub previous_size: Decimal,
    /// Absolute size after, asset units (`0` when the position is gone).
    pub size: Decimal,
    /// `positionValue` before, USD (`0` when there was no position).
    pub previous_value: Decimal,
    /// `positionValue` after, USD (`0` when the position is gone).
    pub value: Decimal,
    /// Mark price of the asset at `observedAt`, USD per asset unit.
    pub price: Decimal,
    /// Liquidation price at the earlier observation, or null (none, or no position).
    pub previous_liq_price: Option<Decimal>,
}

impl PositionEvent {
    /// Whether its larger value (before or after) is at least `min`: the
    /// `minValue` rule of the event list and of webhooks (the stream keeps
    /// that larger value per event and compares it the same way).
    pub fn reaches(&self, min: &Decimal) -> bool {
        std::cmp::max(&self.previous_value.0, &self.value.0) >= &min.0
    }
}

/// The body of a webhook message carrying a position event (the Standard
/// Webhooks shape: `type`, `timestamp`, `data`; docs/webhooks.md), for
/// receivers written in Rust.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PositionEventMessage {
    /// Always `position-event`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The event's `observedAt`.
    #[serde(with = "rfc3339_utc")]
    pub timestamp: OffsetDateTime,
    /// The event's id in the event stream (its `id:`; `since=` resumes
    /// after it).
    pub event_id: i64,
    /// The event as the list renders it.
    pub data: PositionEvent,
}

impl PositionEventMessage {
    /// The `type` of these messages.
    pub const TYPE: &'static str = "position-event";
}

/// Response of `GET /networks/{network}/position-events`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PositionEventList {
    /// Events, newest first (ties by address, then symbol, ascending).
    pub items: Vec<PositionEvent>,
    /// Cursor of the next page, or null on the last page.
    pub next_cursor: Option<String>,
}

/// The `data-version` event of the position-event stream: sent when a
/// client connects (every market, as served then) and at each new data
/// version (the markets whose figures changed), so that a dashboard never
/// polls the market list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DataVersionEvent {
    /// The data version now served (the `X-Data-Version` of answers from now on).
    #[cfg_attr(feature = "openapi", schema(example = 1842))]
    pub version: i64,
    /// When the data version was observed.
    #[serde(with = "rfc3339_utc")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime, example = "2026-11-22T01:59:00Z"))]
    pub observed_at: OffsetDateTime,
    /// The markets' live figures: all of them (or the `asset` filter's) on
    /// connect, then those whose figures changed.
    pub markets: Vec<MarketFigures>,
}

/// A market's live figures in a `data-version` event: the fields of the
/// market-list item that the scanned wallets and the quote move.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MarketFigures {
    /// Network symbol.
    #[cfg_attr(feature = "openapi", schema(example = "BTC"))]
    pub symbol: String,
    /// Current mark price, USD per asset unit.
    pub price: Decimal,
    /// Current open interest, USD.
    pub open_interest: Decimal,
    /// Scanned wallets with an open long position.
    pub long_count: u64,
    /// Scanned wallets with an open short position.
    pub short_count: u64,
    /// Sum of `positionValue` of the scanned long positions with a liquidation price, USD.
    pub long_liquidation_value: Decimal,
    /// Sum of `positionValue` of the scanned short positions with a liquidation price, USD.
    pub short_liquidation_value: Decimal,
}

impl MarketFigures {
    /// The figures of `m`.
    pub fn of(m: &crate::Market) -> MarketFigures {
        MarketFigures {
            symbol: m.symbol.clone(),
            price: m.price.clone(),
            open_interest: m.open_interest.clone(),
            long_count: m.long_count,
            short_count: m.short_count,
            long_liquidation_value: m.long_liquidation_value.clone(),
            short_liquidation_value: m.short_liquidation_value.clone(),
        }
    }
}

/// The last event of a stream the server ends: `event: lagged` (the client
/// fell too far behind), `event: closing` (the server is stopping) or
/// `event: unavailable` (a replay found the database unreachable). Its
/// `id:` is `resumeFrom`, so an `EventSource` resumes there by itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct StreamEnd {
    /// Why the stream ends.
    #[cfg_attr(feature = "openapi", schema(example = "lagged"))]
    pub reason: String,
    /// Reconnect with this as `Last-Event-ID` (or `since`) to lose nothing:
    /// every event up to it was sent or did not pass the filters.
    #[cfg_attr(feature = "openapi", schema(example = "1200"))]
    pub resume_from: String,
}

/// Response of `GET /networks/{network}/wallets/{address}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WalletDetail {
    /// The wallet, the same object as a wallet-list item.
    pub wallet: Wallet,
    /// Its open positions on every dex, each the same object as a
    /// whale-positions item, by `positionValue` descending then symbol.
    /// Their number equals `wallet.positions`.
    pub positions: Vec<MarketPosition>,
    /// Its latest position events (at most 20), newest first.
    pub recent_events: Vec<PositionEvent>,
}

/// A wallet's holding in one asset at one observation: what events compare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holding {
    /// Long or short.
    pub direction: Direction,
    /// Absolute size, asset units (positive).
    pub size: Decimal,
}

/// The event between two consecutive observations of one wallet's holding
/// in one asset (`None`: no position), or `None` when nothing changed.
/// `near_liquidation` tells whether the earlier observation's mark price was
/// within [`EventKind::NEAR_LIQUIDATION_PCT`] of its liquidation price (see
/// [`near_liquidation`]); it only matters for a close.
pub fn classify(
    before: Option<&Holding>,
    after: Option<&Holding>,
    near_liquidation: bool,
) -> Option<EventKind> {
    match (before, after) {
        (None, None) => None,
        (None, Some(_)) => Some(EventKind::Opened),
        (Some(_), None) if near_liquidation => Some(EventKind::ClosedNearLiquidation),
        (Some(_), None) => Some(EventKind::Closed),
        (Some(b), Some(a)) if b.direction != a.direction => Some(EventKind::Flipped),
        (Some(b), Some(a)) => match a.size.0.cmp(&b.size.0) {
            std::cmp::Ordering::Greater => Some(EventKind::Increased),
            std::cmp::Ordering::Less => Some(EventKind::Reduced),
            std::cmp::Ordering::Equal => None,
        },
    }
}

/// Whether `mark` is within [`EventKind::NEAR_LIQUIDATION_PCT`] percent of
/// `liq` (`|mark − liq| × 100 ≤ pct × mark`); false without a liquidation price.
pub fn near_liquidation(mark: &Decimal, liq: Option<&Decimal>) -> bool {
    let Some(liq) = liq else { return false };
    let distance = (&mark.0 - &liq.0).abs() * bigdecimal::BigDecimal::from(100);
    distance <= &mark.0 * bigdecimal::BigDecimal::from(EventKind::NEAR_LIQUIDATION_PCT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(direction: Direction, size: i64) -> Holding {
        Holding {
            direction,
            size: Decimal::from(size),
        }
    }

    #[test]
    fn classifies_every_transition() {
        use Direction::*;
        let l2 = h(Long, 2);
        assert_eq!(classify(None, None, false), None);
        assert_eq!(classify(None, Some(&l2), false), Some(EventKind::Opened));
        assert_eq!(classify(Some(&l2), None, false), Some(EventKind::Closed));
        assert_eq!(
            classify(Some(&l2), None, true),
            Some(EventKind::ClosedNearLiquidation)
        );
        assert_eq!(
            classify(Some(&l2), Some(&h(Long, 3)), true),
            Some(EventKind::Increased)
        );
        assert_eq!(
            classify(Some(&l2), Some(&h(Long, 1)), false),
            Some(EventKind::Reduced)
        );
        assert_eq!(classify(Some(&l2), Some(&h(Long, 2)), false), None);
        assert_eq!(
            classify(Some(&l2), Some(&h(Short, 2)), false),
            Some(EventKind::Flipped)
        );
    }

    #[test]
    fn near_liquidation_is_a_percentage_of_the_mark() {
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        assert!(near_liquidation(&d("100"), Some(&d("98"))));
        assert!(near_liquidation(&d("100"), Some(&d("102"))));
        assert!(!near_liquidation(&d("100"), Some(&d("97.99"))));
        assert!(!near_liquidation(&d("100"), None));
    }

    #[test]
    fn buckets_align_to_utc() {
        assert_eq!(
            HistoryInterval::D1.bucket_of(1_795_305_600_000 + 5),
            1_795_305_600_000
        );
        assert_eq!(HistoryInterval::M5.bucket_of(299_999), 0);
        assert_eq!(HistoryInterval::M5.bucket_of(300_000), 300_000);
    }
}
