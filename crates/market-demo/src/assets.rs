//! The asset universe: main-dex perpetuals with real ticker names and HIP-3
//! assets on the dexs `xyz` and `flx`, with their exchange parameters and the
//! per-asset parameters of the price and volume model.

use rand_chacha::ChaCha8Rng;

use crate::num::{lognormal, normal, round_i64, uniform, unit};

/// Broad class of an asset; drives volatility, correlation and liquidity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Large-cap coins.
    Major,
    /// Layer-1/2 and infrastructure coins.
    Alt,
    /// DeFi tokens.
    Defi,
    /// AI and other young narratives.
    Ai,
    /// Meme coins.
    Meme,
    /// Single stocks (HIP-3).
    Stock,
    /// Equity indices (HIP-3).
    Index,
    /// Commodities (HIP-3, and gold-backed tokens).
    Commodity,
}

use Kind::*;

/// `(symbol, approximate USD price, maxLeverage, kind)`, roughly by popularity.
const MAIN: &[(&str, f64, u32, Kind)] = &[
    ("BTC", 92_000.0, 40, Major),
    ("ETH", 3_100.0, 25, Major),
    ("SOL", 186.0, 20, Major),
    ("HYPE", 38.0, 10, Major),
    ("XRP", 2.15, 20, Major),
    ("DOGE", 0.16, 10, Meme),
    ("kPEPE", 0.011, 10, Meme),
    ("SUI", 2.9, 10, Alt),
    ("BNB", 890.0, 10, Major),
    ("ENA", 0.42, 10, Defi),
    ("FARTCOIN", 0.35, 10, Meme),
    ("ZEC", 420.0, 10, Alt),
    ("LINK", 14.2, 10, Alt),
    ("AVAX", 21.5, 10, Alt),
    ("ADA", 0.62, 10, Alt),
    ("LTC", 88.0, 10, Alt),
    ("TRUMP", 6.8, 10, Meme),
    ("WLD", 0.78, 10, Ai),
    ("AAVE", 210.0, 10, Defi),
    ("PUMP", 0.0032, 5, Meme),
    ("BCH", 520.0, 10, Alt),
    ("ASTER", 1.05, 5, Defi),
    ("kBONK", 0.0125, 10, Meme),
    ("VIRTUAL", 1.05, 5, Ai),
    ("TAO", 320.0, 5, Ai),
    ("WIF", 0.45, 10, Meme),
    ("ARB", 0.32, 10, Alt),
    ("OP", 0.45, 10, Alt),
    ("NEAR", 2.6, 10, Alt),
    ("APT", 3.4, 10, Alt),
    ("DOT", 3.1, 10, Alt),
    ("TRX", 0.29, 10, Alt),
    ("TON", 2.1, 10, Alt),
    ("PENGU", 0.0125, 5, Meme),
    ("UNI", 7.4, 10, Defi),
    ("ONDO", 0.72, 10, Defi),
    ("XPL", 0.22, 5, Alt),
    ("kSHIB", 0.0095, 10, Meme),
    ("WLFI", 0.15, 5, Defi),
    ("TIA", 1.1, 10, Alt),
    ("SEI", 0.19, 10, Alt),
    ("INJ", 8.7, 10, Defi),
    ("JUP", 0.42, 10, Defi),
    ("ETC", 14.8, 10, Alt),
    ("XLM", 0.27, 10, Alt),
    ("HBAR", 0.16, 10, Alt),
    ("ATOM", 3.2, 10, Alt),
    ("FIL", 1.9, 10, Alt),
    ("ICP", 4.8, 10, Alt),
    ("RENDER", 2.4, 5, Ai),
    ("FET", 0.32, 5, Ai),
    ("PENDLE", 3.6, 5, Defi),
    ("LDO", 0.82, 5, Defi),
    ("CRV", 0.55, 10, Defi),
    ("POPCAT", 0.14, 5, Meme),
    ("MKR", 1_650.0, 5, Defi),
    ("ENS", 14.0, 5, Defi),
    ("EIGEN", 1.1, 5, Defi),
    ("ETHFI", 1.05, 5, Defi),
    ("ZRO", 1.7, 5, Alt),
    ("BERA", 1.6, 5, Alt),
    ("IP", 3.2, 5, Ai),
    ("KAITO", 0.95, 5, Ai),
    ("S", 0.14, 5, Alt),
    ("POL", 0.2, 10, Alt),
    ("MNT", 1.4, 5, Alt),
    ("STX", 0.45, 5, Alt),
    ("IMX", 0.5, 5, Alt),
    ("ALGO", 0.17, 5, Alt),
    ("MORPHO", 1.8, 5, Defi),
    ("AI16Z", 0.09, 5, Ai),
    ("AIXBT", 0.07, 5, Ai),
    ("MOODENG", 0.1, 5, Meme),
    ("PNUT", 0.12, 5, Meme),
    ("kFLOKI", 0.065, 5, Meme),
    ("kNEIRO", 0.18, 5, Meme),
    ("ORDI", 6.2, 5, Meme),
    ("JTO", 1.4, 5, Defi),
    ("PYTH", 0.11, 5, Defi),
    ("STRK", 0.13, 5, Alt),
    ("ZK", 0.06, 5, Alt),
    ("W", 0.08, 5, Alt),
    ("KAS", 0.06, 5, Alt),
    ("PAXG", 4_100.0, 5, Commodity),
    ("DYDX", 0.28, 5, Defi),
    ("GMX", 9.5, 5, Defi),
    ("SNX", 0.75, 5, Defi),
    ("COMP", 32.0, 5, Defi),
    ("RUNE", 0.85, 5, Defi),
    ("CAKE", 2.3, 5, Defi),
    ("SUSHI", 0.5, 5, Defi),
    ("YFI", 4_300.0, 5, Defi),
    ("GRT", 0.06, 5, Ai),
    ("AR", 4.8, 5, Alt),
    ("VET", 0.016, 5, Alt),
    ("APE", 0.4, 5, Meme),
    ("GALA", 0.0095, 5, Alt),
    ("SAND", 0.17, 5, Alt),
    ("MANA", 0.19, 5, Alt),
    ("AXS", 1.6, 5, Alt),
    ("CHZ", 0.035, 5, Alt),
    ("XMR", 380.0, 5, Alt),
    ("ZEN", 12.0, 5, Alt),
    ("DASH", 45.0, 5, Alt),
    ("MOVE", 0.07, 5, Alt),
    ("MEW", 0.0018, 5, Meme),
    ("BRETT", 0.025, 5, Meme),
    ("TURBO", 0.0022, 5, Meme),
    ("BOME", 0.0011, 5, Meme),
    ("CHILLGUY", 0.03, 5, Meme),
    ("GOAT", 0.06, 5, Ai),
    ("kDOGS", 0.06, 3, Meme),
    ("MEME", 0.0021, 3, Meme),
    ("NOT", 0.0008, 3, Meme),
    ("HMSTR", 0.0003, 3, Meme),
    ("NEIROETH", 0.04, 3, Meme),
    ("MYRO", 0.02, 3, Meme),
    ("TST", 0.03, 3, Meme),
    ("ANIME", 0.012, 3, Meme),
    ("VINE", 0.03, 3, Meme),
    ("kLUNC", 0.045, 3, Alt),
    ("USTC", 0.009, 3, Alt),
    ("LAYER", 0.3, 3, Alt),
    ("NIL", 0.25, 3, Alt),
    ("ME", 0.45, 3, Alt),
    ("USUAL", 0.03, 3, Defi),
    ("BIO", 0.08, 3, Ai),
    ("ZORA", 0.06, 3, Alt),
    ("LINEA", 0.011, 3, Alt),
    ("SYRUP", 0.4, 3, Defi),
    ("PROMPT", 0.1, 3, Ai),
    ("BABY", 0.03, 3, Alt),
    ("INIT", 0.15, 3, Alt),
    ("WCT", 0.12, 3, Alt),
    ("GRASS", 0.45, 3, Ai),
    ("ARKM", 0.3, 3, Ai),
    ("SAGA", 0.08, 3, Alt),
    ("TNSR", 0.14, 3, Defi),
    ("REZ", 0.007, 3, Defi),
    ("IO", 0.35, 3, Ai),
    ("LISTA", 0.2, 3, Defi),
    ("ZETA", 0.1, 3, Alt),
    ("OMNI", 2.2, 3, Alt),
    ("BANANA", 8.5, 3, Defi),
    ("ALT", 0.02, 3, Alt),
    ("DYM", 0.12, 3, Alt),
    ("PIXEL", 0.012, 3, Alt),
    ("PORTAL", 0.03, 3, Alt),
    ("AEVO", 0.06, 3, Defi),
    ("MANTA", 0.12, 3, Alt),
    ("BLAST", 0.0018, 3, Alt),
    ("MAVIA", 0.15, 3, Alt),
    ("XAI", 0.025, 3, Alt),
    ("ACE", 0.35, 3, Alt),
    ("NTRN", 0.05, 3, Alt),
    ("MINA", 0.15, 3, Alt),
    ("RSR", 0.006, 3, Defi),
    ("CFX", 0.09, 3, Alt),
    ("BSV", 22.0, 3, Alt),
    ("BIGTIME", 0.04, 3, Alt),
    ("POLYX", 0.08, 3, Alt),
    ("GAS", 2.4, 3, Alt),
    ("NEO", 4.8, 3, Alt),
    ("IOTA", 0.14, 3, Alt),
    ("EGLD", 9.5, 3, Alt),
    ("THETA", 0.42, 3, Alt),
    ("FLOW", 0.3, 3, Alt),
    ("KSM", 10.5, 3, Alt),
    ("ENJ", 0.05, 3, Alt),
    ("CELO", 0.2, 3, Alt),
];

/// HIP-3 assets: `dex:COIN`, with canonical names distinct from every main-dex symbol.
const HIP3: &[(&str, f64, u32, Kind)] = &[
    ("xyz:TSLA", 420.0, 10, Stock),
    ("xyz:NVDA", 182.0, 10, Stock),
    ("xyz:XYZ100", 24_500.0, 20, Index),
    ("xyz:GOLD", 4_080.0, 20, Commodity),
    ("xyz:AAPL", 268.0, 10, Stock),
    ("xyz:MSFT", 505.0, 10, Stock),
    ("xyz:SPX", 6_650.0, 20, Index),
    ("xyz:PLTR", 170.0, 10, Stock),
    ("xyz:COIN", 265.0, 10, Stock),
    ("xyz:HOOD", 120.0, 10, Stock),
    ("xyz:META", 610.0, 10, Stock),
    ("xyz:AMZN", 228.0, 10, Stock),
    ("xyz:GOOGL", 285.0, 10, Stock),
    ("xyz:MSTR", 190.0, 10, Stock),
    ("xyz:AMD", 220.0, 10, Stock),
    ("xyz:NFLX", 110.0, 10, Stock),
    ("flx:OIL", 62.0, 10, Commodity),
    ("flx:SILVER", 51.0, 15, Commodity),
    ("flx:COPPER", 5.1, 10, Commodity),
    ("flx:NATGAS", 4.3, 10, Commodity),
];

/// One tradable asset with its exchange parameters and model parameters.
#[derive(Clone, Debug)]
pub(crate) struct Asset {
    /// Network symbol (`BTC`, `xyz:TSLA`).
    pub symbol: &'static str,
    /// Decimals of a size.
    pub sz_decimals: u32,
    /// Maximum decimals of a price: `6 − szDecimals`.
    pub price_decimals: u32,
    /// Maximum leverage.
    pub max_leverage: u32,
    /// On a HIP-3 dex (isolated margin only).
    pub hip3: bool,
    /// Price the walk ends at (before rounding), USD.
    pub target_price: f64,
    /// Typical hourly log-return volatility.
    pub hourly_vol: f64,
    /// Correlation with the common market factor.
    pub correlation: f64,
    /// Total log drift over the generated window.
    pub drift: f64,
    /// Typical daily notional volume, USD.
    pub daily_volume_usd: f64,
    /// Typical notional of one trade, USD.
    pub avg_trade_usd: f64,
    /// Typical open interest, USD.
    pub open_interest_usd: f64,
    /// Hourly funding rate in units of 1e-8.
    pub funding_e8: i64,
    /// Relative popularity among the scanned wallets' positions (by rank, so
    /// BTC, ETH, SOL and HYPE always lead).
    pub popularity: f64,
}

fn sz_decimals(symbol: &str, price: f64) -> u32 {
    match symbol {
        "BTC" => 5,
        "ETH" => 4,
        "SOL" | "HYPE" | "AVAX" => 2,
        "LINK" | "ARB" | "SUI" => 1,
        "DOGE" | "kPEPE" => 0,
        _ => (price.log10().floor() as i64 + 1).clamp(0, 5) as u32,
    }
}

/// Builds the universe; `rng` only perturbs prices and model parameters.
pub(crate) fn universe(rng: &mut ChaCha8Rng) -> Vec<Asset> {
    let mut out = Vec::with_capacity(MAIN.len() + HIP3.len());
    for (rank, &(symbol, price, max_lev, kind)) in MAIN.iter().enumerate() {
        let typical = 2.6e9 * ((rank + 1) as f64).powf(-1.25);
        let volume = typical * lognormal(rng, 1.0, 0.25);
        out.push(build(
            rng,
            symbol,
            price,
            max_lev,
            kind,
            volume,
            typical.powf(0.8),
        ));
    }
    for (rank, &(symbol, price, max_lev, kind)) in HIP3.iter().enumerate() {
        let base = if symbol.starts_with("xyz:") {
            2.5e8
        } else {
            6.0e7
        };
        let typical = base * ((rank % 16 + 1) as f64).powf(-0.9);
        let volume = typical * lognormal(rng, 1.0, 0.25);
        out.push(build(
            rng,
            symbol,
            price,
            max_lev,
            kind,
            volume,
            1.5 * typical.powf(0.8),
        ));
    }
    out
}

fn build(
    rng: &mut ChaCha8Rng,
    symbol: &'static str,
    price: f64,
    max_leverage: u32,
    kind: Kind,
    daily_volume_usd: f64,
    popularity: f64,
) -> Asset {
    let hip3 = symbol.contains(':');
    let sz = sz_decimals(symbol, price);
    let (vol, correlation, drift_sd) = match (symbol, kind) {
        ("BTC", _) => (0.0045, 0.95, 0.15),
        ("ETH", _) => (0.006, 0.9, 0.2),
        (_, Major) => (0.0075, 0.82, 0.22),
        (_, Alt) => (0.0095, 0.75, 0.3),
        (_, Defi) => (0.0105, 0.7, 0.3),
        (_, Ai) => (0.013, 0.62, 0.4),
        (_, Meme) => (0.015, 0.58, 0.45),
        (_, Stock) => (0.0035, 0.2, 0.1),
        (_, Index) => (0.0018, 0.25, 0.05),
        (_, Commodity) => (0.0028, 0.05, 0.08),
    };
    let hourly_vol = vol * lognormal(rng, 1.0, 0.12);
    let target_price = price * (0.04 * normal(rng)).exp();
    let drift = drift_sd * normal(rng);
    let avg_trade_usd = 150.0 + 4_000.0 * (daily_volume_usd / 2.6e9).powf(0.3);
    let oi_ratio = if hip3 {
        uniform(rng, 0.25, 0.6)
    } else {
        uniform(rng, 0.5, 1.3)
    };
    let funding_sd = match kind {
        Meme | Ai => 0.00004,
        Major => 0.000008,
        Stock | Index | Commodity => 0.00001,
        _ => 0.00002,
    };
    // About a third of the assets sit at the baseline rate; the rest carry a premium.
    let funding = if unit(rng) < 0.3 {
        0.0000125
    } else {
        0.0000125 + funding_sd * normal(rng) + 0.000004
    };
    Asset {
        symbol,
        sz_decimals: sz,
        price_decimals: 6 - sz,
        max_leverage,
        hip3,
        target_price,
        hourly_vol,
        correlation,
        drift,
        daily_volume_usd,
        avg_trade_usd,
        open_interest_usd: daily_volume_usd * oi_ratio,
        funding_e8: round_i64(funding * 1e8),
        popularity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use market_engine::symbols::canonical_of;
    use rand::SeedableRng;
    use std::collections::BTreeSet;

    #[test]
    fn universe_is_consistent() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let assets = universe(&mut rng);
        assert!((180..=200).contains(&assets.len()), "{}", assets.len());
        let symbols: BTreeSet<&str> = assets.iter().map(|a| a.symbol).collect();
        assert_eq!(symbols.len(), assets.len(), "duplicate symbols");
        let main: BTreeSet<&str> = assets
            .iter()
            .filter(|a| !a.hip3)
            .map(|a| a.symbol)
            .collect();
        let mut canon = BTreeSet::new();
        for a in assets.iter().filter(|a| a.hip3) {
            assert!(a.symbol.contains(':'));
            let c = canonical_of(a.symbol);
            assert!(!main.contains(c), "{c} is also a main-dex symbol");
            assert!(canon.insert(c), "{c} twice among HIP-3 assets");
            assert!((10..=20).contains(&a.max_leverage));
        }
        let mut by_popularity: Vec<&Asset> = assets.iter().collect();
        by_popularity.sort_by(|a, b| b.popularity.total_cmp(&a.popularity));
        let top: Vec<&str> = by_popularity[..4].iter().map(|a| a.symbol).collect();
        assert_eq!(top, ["BTC", "ETH", "SOL", "HYPE"]);
        for a in &assets {
            assert!(a.sz_decimals <= 5);
            // the bucket size of the price must be representable in the price grid
            let k = a.target_price.log10().floor() as i64;
            assert!(i64::from(a.price_decimals) >= 2 - k, "{}", a.symbol);
            assert!(a.max_leverage >= 3 && a.max_leverage <= 50);
        }
    }
}
