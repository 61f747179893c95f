//! The info API's wire format (`POST {info_url}` with `{"type": ...}`), as the
//! exchange documents it. All decimals arrive as strings.

use market_model::Decimal;
use serde::Deserialize;

/// `meta` of `metaAndAssetCtxs`.
#[derive(Clone, Debug, Deserialize)]
pub struct Meta {
    /// Assets of the dex; `ctxs[i]` belongs to `universe[i]`.
    pub universe: Vec<AssetMeta>,
}

/// One asset of a dex's universe.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssetMeta {
    /// Coin name; `dex:COIN` on a HIP-3 dex.
    pub name: String,
    /// Size decimals.
    pub sz_decimals: u32,
    /// Maximum leverage.
    pub max_leverage: u32,
    /// Delisted assets are not scanned.
    #[serde(default)]
    pub is_delisted: Option<bool>,
}

/// Context of one asset (aligned with the universe).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssetCtx {
    /// Mark price.
    pub mark_px: Decimal,
    /// Price 24 hours ago.
    pub prev_day_px: Decimal,
    /// 24-hour notional volume, USD.
    pub day_ntl_vlm: Decimal,
    /// Open interest in base units.
    pub open_interest: Decimal,
    /// Hourly funding rate.
    pub funding: Decimal,
    /// Oracle price.
    #[serde(default)]
    pub oracle_px: Option<Decimal>,
}

/// `[meta, ctxs]`.
pub type MetaAndAssetCtxs = (Meta, Vec<AssetCtx>);

/// One entry of `perpDexs` (entry 0 is null: the main dex).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PerpDex {
    /// Dex name, the prefix of its coins.
    pub name: String,
    /// Display name.
    #[serde(default)]
    pub full_name: Option<String>,
}

/// `clearinghouseState` of one user on one dex.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClearinghouseState {
    /// Margin summary (account value).
    pub margin_summary: MarginSummary,
    /// Open positions.
    #[serde(default)]
    pub asset_positions: Vec<AssetPosition>,
    /// Server time, epoch ms.
    #[serde(default)]
    pub time: Option<i64>,
}

/// Margin summary.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarginSummary {
    /// Account equity on this dex, USD.
    pub account_value: Decimal,
}

/// Wrapper of a position.
#[derive(Clone, Debug, Deserialize)]
pub struct AssetPosition {
    /// The position.
    pub position: Position,
}

/// One open position.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Position {
    /// Coin (`dex:COIN` on a HIP-3 dex).
    pub coin: String,
    /// Signed size: negative is short.
    pub szi: Decimal,
    /// Entry price.
    pub entry_px: Decimal,
    /// Notional at the mark price, USD.
    pub position_value: Decimal,
    /// Unrealized PnL, USD.
    pub unrealized_pnl: Decimal,
    /// Return on equity, a fraction.
    pub return_on_equity: Decimal,
    /// Liquidation price; null when the position cannot be liquidated.
    pub liquidation_px: Option<Decimal>,
    /// Margin used, USD.
    pub margin_used: Decimal,
    /// Leverage.
    pub leverage: Leverage,
    /// Cumulative funding.
    pub cum_funding: CumFunding,
}

/// Leverage of a position.
#[derive(Clone, Debug, Deserialize)]
pub struct Leverage {
    /// `cross` or `isolated`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Leverage value.
    pub value: u32,
}

/// Cumulative funding of a position, USD; positive means the user paid.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CumFunding {
    /// Since the position was opened.
    pub since_open: Decimal,
}

/// One candle of `candleSnapshot`.
#[derive(Clone, Debug, Deserialize)]
pub struct SourceCandle {
    /// Open time, epoch ms.
    pub t: i64,
    /// Close time, epoch ms.
    #[serde(rename = "T")]
    pub close_time: i64,
    /// Coin.
    pub s: String,
    /// Interval.
    pub i: String,
    /// Open.
    pub o: Decimal,
    /// Close.
    pub c: Decimal,
    /// High.
    pub h: Decimal,
    /// Low.
    pub l: Decimal,
    /// Volume, base units.
    pub v: Decimal,
    /// Trades.
    pub n: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!(
            "{}/fixtures/hyperliquid-info/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn parses_the_reference_responses() {
        let (meta, ctxs): MetaAndAssetCtxs =
            serde_json::from_str(&fixture("metaAndAssetCtxs.main.json")).unwrap();
        assert_eq!(meta.universe.len(), ctxs.len());
        assert_eq!(meta.universe[0].name, "BTC");
        let (meta, _): MetaAndAssetCtxs =
            serde_json::from_str(&fixture("metaAndAssetCtxs.xyz.json")).unwrap();
        assert!(meta.universe.iter().all(|a| a.name.starts_with("xyz:")));
        let dexs: Vec<Option<PerpDex>> = serde_json::from_str(&fixture("perpDexs.json")).unwrap();
        assert!(dexs[0].is_none());
        assert_eq!(dexs[1].as_ref().unwrap().name, "xyz");
        let state: ClearinghouseState =
            serde_json::from_str(&fixture("clearinghouseState.main.json")).unwrap();
        assert!(!state.asset_positions.is_empty());
        let candles: Vec<SourceCandle> =
            serde_json::from_str(&fixture("candleSnapshot.json")).unwrap();
        assert_eq!(candles[0].o.to_string(), "92391.3380");
    }
}
