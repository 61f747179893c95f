//! Small hand-made inputs for tests, here and in the crates above
//! (feature `fixtures`): three quotes, four wallets and seven positions
//! whose aggregates the tests know by heart.

use market_model::{Decimal, Direction, MarketPosition, Strategy};
use time::macros::datetime;

use crate::{Analytics, Quote, ScanInput, WalletInput};

/// A decimal from its text.
pub fn d(s: &str) -> Decimal {
    s.parse().unwrap()
}

/// A quote of `symbol` at `price`.
pub fn quote(symbol: &str, price: &str) -> Quote {
    Quote {
        symbol: symbol.into(),
        price: d(price),
        prev_day_price: d("100"),
        volume24h: d("1000"),
        open_interest: d("5000"),
        funding: d("0.0000125"),
    }
}

/// A wallet with a label, a tag and, if `analytics`, analytics.
pub fn wallet(address: &str, account: &str, analytics: bool) -> WalletInput {
    WalletInput {
        address: address.into(),
        label: Some(format!("label {address}")),
        tags: vec!["fund".into()],
        kols: vec![],
        kol_profile: None,
        account_value: d(account),
        observed_at: datetime!(2026-11-22 01:00 UTC),
        analytics: analytics.then(|| Analytics {
            net_pnl: d("10.5"),
            roi: d("1.25"),
            win_rate: d("55"),
            strategy: Strategy::SwingTrader,
            strategy_confidence: d("0.8"),
        }),
    }
}

/// A position of 1 unit observed at 2026-11-22 01:00 UTC.
pub fn position(
    address: &str,
    symbol: &str,
    direction: Direction,
    value: &str,
    liq: Option<&str>,
) -> MarketPosition {
    MarketPosition {
        address: address.into(),
        label: None,
        tags: vec![],
        symbol: symbol.into(),
        direction,
        position_value: d(value),
        liq_price: liq.map(d),
        observed_at: datetime!(2026-11-22 01:00 UTC),
        leverage: d("5"),
        size: d("1"),
        size_unit: symbol.into(),
        u_pnl: d("0"),
        u_pnl_pct: d("0"),
        entry_price: d("100"),
        mark_price: d("100"),
        margin: d("20"),
        funding_cost: d("-1.5"),
    }
}

/// The sample scan.
pub fn sample() -> ScanInput {
    use Direction::*;
    ScanInput {
        observed_at: datetime!(2026-11-22 01:00 UTC),
        quotes: vec![
            quote("BTC", "105"),
            quote("xyz:TSLA", "400"),
            quote("ETH", "3000"),
        ],
        wallets: vec![
            wallet("0xa", "2000000", true),
            wallet("0xb", "50000", false),
            wallet("0xc", "100000", true),
            wallet("0xd", "0", false),
        ],
        positions: vec![
            position("0xa", "BTC", Long, "1000.50", Some("90.1")),
            position("0xb", "BTC", Long, "200", None),
            position("0xc", "BTC", Short, "300.25", Some("120.4")),
            position("0xa", "xyz:TSLA", Short, "50", Some("450")),
            position("0xb", "xyz:TSLA", Short, "70", Some("451")),
            position("0xc", "ETH", Long, "100", Some("2500")),
            position("0xc", "xyz:TSLA", Long, "100", Some("350")),
        ],
    }
}
