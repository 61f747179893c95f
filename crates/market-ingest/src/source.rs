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

/// One open position. Everything that values it is required: size, entry,
/// value, unrealized PnL, margin, leverage and the liquidation price (present,
/// null when it cannot be liquidated); a state that lacks one is refused.
/// `returnOnEquity` and `cumFunding` are not needed to value it and the
/// exchange has not always sent them: see [`crate::mapping::position`].
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
    #[serde(default)]
    pub return_on_equity: Option<Decimal>,
    /// Liquidation price; null when the position cannot be liquidated (the
    /// member itself is required).
    #[serde(deserialize_with = "present")]
    pub liquidation_px: Option<Decimal>,
    /// Margin used, USD.
    pub margin_used: Decimal,
    /// Leverage.
    pub leverage: Leverage,
    /// Cumulative funding.
    #[serde(default)]
    pub cum_funding: Option<CumFunding>,
}

/// A nullable member that must be present: serde takes a missing `Option`
/// member for `None`, which for a liquidation price would mean "cannot be
/// liquidated".
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Decimal>, D::Error> {
    Option::<Decimal>::deserialize(d)
}

/// Leverage of a position.
#[derive(Clone, Debug, Deserialize)]
pub struct Leverage {
    /// `cross` or `isolated`.
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
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

/// How an account state differs from the documented format without being
/// refused: a member we do not know (ignored), or an optional member
/// missing (its documented fallback is used).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FieldCase {
    /// A member the format does not document.
    Unknown,
    /// An optional member that is missing.
    Missing,
}

impl FieldCase {
    /// Its name in logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldCase::Unknown => "unknown",
            FieldCase::Missing => "missing",
        }
    }
}

/// The documented members of a `clearinghouseState` object, by path, and
/// which of them may be missing.
const STATE_MEMBERS: &[(&str, &[&str], &[&str])] = &[
    (
        "",
        &[
            "marginSummary",
            "crossMarginSummary",
            "crossMaintenanceMarginUsed",
            "withdrawable",
            "assetPositions",
            "time",
        ],
        &[],
    ),
    (
        "marginSummary",
        &[
            "accountValue",
            "totalNtlPos",
            "totalRawUsd",
            "totalMarginUsed",
        ],
        &[],
    ),
    ("assetPositions[]", &["type", "position"], &[]),
    (
        "position",
        &[
            "coin",
            "szi",
            "entryPx",
            "positionValue",
            "unrealizedPnl",
            "returnOnEquity",
            "liquidationPx",
            "marginUsed",
            "maxLeverage",
            "leverage",
            "cumFunding",
        ],
        &["returnOnEquity", "cumFunding"],
    ),
    ("position.leverage", &["type", "value", "rawUsd"], &["type"]),
    (
        "position.cumFunding",
        &["allTime", "sinceOpen", "sinceChange"],
        &[],
    ),
];

/// Reports each member of a `clearinghouseState` answer that is not in the
/// documented format, and each optional member that is missing, as
/// `(case, path)` (`position.cumFunding`). What decides whether the answer
/// is taken is its typed decoding; this only tells what varied.
pub fn audit_state(state: &serde_json::Value, report: &mut dyn FnMut(FieldCase, String)) {
    fn object<'a>(
        value: Option<&'a serde_json::Value>,
        path: &str,
        report: &mut dyn FnMut(FieldCase, String),
    ) -> Option<&'a serde_json::Map<String, serde_json::Value>> {
        let map = value?.as_object()?;
        let (_, known, optional) = STATE_MEMBERS.iter().find(|(p, _, _)| *p == path)?;
        let prefix = if path.is_empty() {
            String::new()
        } else {
            format!("{path}.")
        };
        for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
            report(FieldCase::Unknown, format!("{prefix}{key}"));
        }
        for key in optional.iter().filter(|k| !map.contains_key(**k)) {
            report(FieldCase::Missing, format!("{prefix}{key}"));
        }
        Some(map)
    }
    let Some(top) = object(Some(state), "", report) else {
        return;
    };
    object(top.get("marginSummary"), "marginSummary", report);
    let positions = top.get("assetPositions").and_then(|a| a.as_array());
    for entry in positions.into_iter().flatten() {
        let Some(entry) = object(Some(entry), "assetPositions[]", report) else {
            continue;
        };
        if let Some(p) = object(entry.get("position"), "position", report) {
            object(p.get("leverage"), "position.leverage", report);
            object(p.get("cumFunding"), "position.cumFunding", report);
        }
    }
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

    fn audit(state: &serde_json::Value) -> Vec<(FieldCase, String)> {
        let mut seen = Vec::new();
        audit_state(state, &mut |case, path| seen.push((case, path)));
        seen
    }

    #[test]
    fn the_reference_states_are_the_documented_format() {
        for name in [
            "clearinghouseState.main.json",
            "clearinghouseState.xyz.json",
        ] {
            let state: serde_json::Value = serde_json::from_str(&fixture(name)).unwrap();
            assert_eq!(audit(&state), [], "{name}");
        }
    }

    #[test]
    fn optional_members_may_be_missing_and_valuing_ones_may_not() {
        let mut state: serde_json::Value =
            serde_json::from_str(&fixture("clearinghouseState.main.json")).unwrap();
        let p = &mut state["assetPositions"][0]["position"];
        let p = p.as_object_mut().unwrap();
        p.remove("cumFunding");
        p.remove("returnOnEquity");
        p.insert("newThing".into(), serde_json::json!(1));
        state["isNew"] = serde_json::json!(true);
        let parsed: ClearinghouseState = serde_json::from_value(state.clone()).unwrap();
        let first = &parsed.asset_positions[0].position;
        assert!(first.cum_funding.is_none() && first.return_on_equity.is_none());
        assert_eq!(
            audit(&state),
            [
                (FieldCase::Unknown, "isNew".to_owned()),
                (FieldCase::Unknown, "position.newThing".to_owned()),
                (FieldCase::Missing, "position.returnOnEquity".to_owned()),
                (FieldCase::Missing, "position.cumFunding".to_owned()),
            ]
        );
        for required in [
            "szi",
            "entryPx",
            "positionValue",
            "unrealizedPnl",
            "marginUsed",
            "leverage",
            "liquidationPx",
        ] {
            let mut state = state.clone();
            state["assetPositions"][1]["position"]
                .as_object_mut()
                .unwrap()
                .remove(required);
            let err = serde_json::from_value::<ClearinghouseState>(state).unwrap_err();
            assert!(err.to_string().contains(required), "{required}: {err}");
        }
        // A null liquidation price is a position that cannot be liquidated.
        let mut state = state.clone();
        state["assetPositions"][1]["position"]["liquidationPx"] = serde_json::Value::Null;
        let parsed: ClearinghouseState = serde_json::from_value(state).unwrap();
        assert!(parsed.asset_positions[1].position.liquidation_px.is_none());
    }
}
