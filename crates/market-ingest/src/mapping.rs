//! The mapping from the info API onto the service's model (documented field by
//! field in `docs/ingest.md`).

use bigdecimal::{BigDecimal, RoundingMode, Signed, Zero};
use market_engine::Quote;
use market_model::{Decimal, Direction, MarketPosition};
use time::OffsetDateTime;

use crate::source::{AssetCtx, AssetMeta, Position};

/// USD amounts derived by multiplication are rounded half-up to cents.
const USD_SCALE: i64 = 2;

/// Quote of one asset: price = markPx, funding = funding, volume24h = dayNtlVlm,
/// openInterest = openInterest × markPx (USD, to the cent). The engine derives
/// change24hPct = (markPx − prevDayPx) / prevDayPx × 100.
pub fn quote(meta: &AssetMeta, ctx: &AssetCtx) -> Quote {
    let oi_usd =
        (&ctx.open_interest.0 * &ctx.mark_px.0).with_scale_round(USD_SCALE, RoundingMode::HalfUp);
    Quote {
        symbol: meta.name.clone(),
        price: ctx.mark_px.clone(),
        prev_day_price: ctx.prev_day_px.clone(),
        volume24h: ctx.day_ntl_vlm.clone(),
        open_interest: Decimal(oi_usd),
        funding: ctx.funding.clone(),
    }
}

/// One open position; `None` for a zero size (a closed slot the exchange still lists).
///
/// direction from the sign of szi, size = |szi|, entryPrice = entryPx,
/// positionValue = positionValue, liqPrice = liquidationPx (null stays null),
/// uPnl = unrealizedPnl, uPnlPct = returnOnEquity × 100, margin = marginUsed,
/// leverage = leverage.value, fundingCost = cumFunding.sinceOpen (positive:
/// the wallet paid funding), markPrice = the asset's markPx in the same scan.
///
/// Two members the exchange has not always sent have fallbacks: without
/// `returnOnEquity`, uPnlPct = unrealizedPnl / marginUsed × 100 (the same
/// ratio, to 4 decimals; 0 without margin); without `cumFunding`,
/// fundingCost is 0 (none known).
pub fn position(
    p: &Position,
    address: &str,
    mark_price: &Decimal,
    observed_at: OffsetDateTime,
) -> Option<MarketPosition> {
    if p.szi.0.is_zero() {
        return None;
    }
    let direction = if p.szi.0.is_positive() {
        Direction::Long
    } else {
        Direction::Short
    };
    let u_pnl_pct = match &p.return_on_equity {
        Some(roe) => normalize_scale(&roe.0 * BigDecimal::from(100)),
        None if p.margin_used.0.is_zero() => BigDecimal::zero(),
        None => (&p.unrealized_pnl.0 * BigDecimal::from(100) / &p.margin_used.0)
            .with_scale_round(4, RoundingMode::HalfUp),
    };
    Some(MarketPosition {
        address: address.to_owned(),
        label: None,
        tags: Vec::new(),
        symbol: p.coin.clone(),
        direction,
        position_value: p.position_value.clone(),
        liq_price: p.liquidation_px.clone(),
        observed_at,
        leverage: Decimal(BigDecimal::from(p.leverage.value)),
        size: Decimal(p.szi.0.abs()),
        size_unit: p.coin.clone(),
        u_pnl: p.unrealized_pnl.clone(),
        u_pnl_pct: Decimal(u_pnl_pct),
        entry_price: p.entry_px.clone(),
        mark_price: mark_price.clone(),
        margin: p.margin_used.clone(),
        funding_cost: p
            .cum_funding
            .as_ref()
            .map_or_else(Decimal::zero, |f| f.since_open.clone()),
    })
}

/// Multiplying by 100 keeps the fraction's scale ("0.361542" × 100 = "36.154200");
/// drop the two trailing zeros that the multiplication itself added.
fn normalize_scale(v: BigDecimal) -> BigDecimal {
    let (_, scale) = v.as_bigint_and_exponent();
    v.with_scale((scale - 2).max(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{ClearinghouseState, MetaAndAssetCtxs};

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!(
            "{}/fixtures/hyperliquid-info/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    #[test]
    fn maps_quotes() {
        let (meta, ctxs): MetaAndAssetCtxs =
            serde_json::from_str(&fixture("metaAndAssetCtxs.main.json")).unwrap();
        let q = quote(&meta.universe[0], &ctxs[0]);
        assert_eq!(q.symbol, "BTC");
        assert_eq!(q.price.to_string(), "97385.1");
        // 467448.85561 × 97385.1 = 45522541270.9... to the cent
        let exact = &ctxs[0].open_interest.0 * &ctxs[0].mark_px.0;
        assert_eq!(
            q.open_interest.0,
            exact.with_scale_round(2, RoundingMode::HalfUp)
        );
        assert_eq!(q.volume24h.to_string(), "57961591.20");
    }

    #[test]
    fn maps_positions() {
        let state: ClearinghouseState =
            serde_json::from_str(&fixture("clearinghouseState.main.json")).unwrap();
        let t = OffsetDateTime::UNIX_EPOCH;
        let mark: Decimal = "34.81".parse().unwrap();
        let long = position(&state.asset_positions[0].position, "0xabc", &mark, t).unwrap();
        assert_eq!(long.direction, Direction::Long);
        assert_eq!(long.size.to_string(), "413.68");
        assert_eq!(long.u_pnl_pct.to_string(), "36.1542");
        assert_eq!(long.leverage.to_string(), "10");
        assert_eq!(long.liq_price.as_ref().unwrap().to_string(), "30.5334");
        assert_eq!(long.funding_cost.to_string(), "12.485712");
        let short = position(&state.asset_positions[1].position, "0xabc", &mark, t).unwrap();
        assert_eq!(short.direction, Direction::Short);
        assert_eq!(short.size.to_string(), "243.45");
        let nulls = state
            .asset_positions
            .iter()
            .filter(|a| a.position.liquidation_px.is_none())
            .count();
        let mapped_nulls = state
            .asset_positions
            .iter()
            .filter_map(|a| position(&a.position, "0xabc", &mark, t))
            .filter(|p| p.liq_price.is_none())
            .count();
        assert_eq!(nulls, mapped_nulls, "null liquidation prices stay null");
    }

    #[test]
    fn members_the_exchange_may_omit_have_fallbacks() {
        let mut state: serde_json::Value =
            serde_json::from_str(&fixture("clearinghouseState.main.json")).unwrap();
        let p = state["assetPositions"][0]["position"]
            .as_object_mut()
            .unwrap();
        p.remove("cumFunding");
        p.remove("returnOnEquity");
        let state: ClearinghouseState = serde_json::from_value(state).unwrap();
        let mark: Decimal = "34.81".parse().unwrap();
        let t = OffsetDateTime::UNIX_EPOCH;
        let long = position(&state.asset_positions[0].position, "0xabc", &mark, t).unwrap();
        assert_eq!(long.funding_cost.to_string(), "0");
        // 520.65 / 1440.09 × 100, to 4 decimals (the exchange said 0.361542).
        assert_eq!(long.u_pnl_pct.to_string(), "36.1540");
        assert_eq!(long.size.to_string(), "413.68", "the rest is as sent");
    }
}
