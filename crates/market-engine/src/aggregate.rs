//! Materialization of the aggregates of one scan: markets, wallets and the
//! current day's liquidation levels, from quotes, wallets and positions.

use std::collections::{BTreeMap, HashMap, HashSet};

use bigdecimal::{BigDecimal, RoundingMode, Zero};
use market_model::{
    Coverage, Decimal, Direction, Kol, KolProfile, Level, LiquidityDay, LiquidityTotals, Market,
    MarketPosition, SizeClass, Strategy, Wallet, WalletDirection,
};
use time::{Date, OffsetDateTime};

use crate::buckets::{bucket_price, bucket_size_for_price};
use crate::symbols::{alias_of, canonical_of};

/// Exchange quote context of one asset, as read from the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quote {
    /// Network symbol (`BTC`, `xyz:TSLA`).
    pub symbol: String,
    /// Mark price, USD.
    pub price: Decimal,
    /// Price 24 hours ago, USD (used for `change24hPct`).
    pub prev_day_price: Decimal,
    /// 24-hour notional volume, USD.
    pub volume24h: Decimal,
    /// Open interest in USD.
    pub open_interest: Decimal,
    /// Hourly funding rate.
    pub funding: Decimal,
}

/// Wallet analytics computed from its history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Analytics {
    /// Net PnL, USD.
    pub net_pnl: Decimal,
    /// ROI, percent.
    pub roi: Decimal,
    /// Win rate, percent.
    pub win_rate: Decimal,
    /// Trading style.
    pub strategy: Strategy,
    /// Confidence in the style, 0..=1.
    pub strategy_confidence: Decimal,
}

/// One scanned wallet before aggregation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalletInput {
    /// Lowercase hex address.
    pub address: String,
    /// Public label.
    pub label: Option<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// Linked KOL identities.
    pub kols: Vec<Kol>,
    /// KOL profile.
    pub kol_profile: Option<KolProfile>,
    /// Account equity over every dex, USD.
    pub account_value: Decimal,
    /// When it was observed.
    pub observed_at: OffsetDateTime,
    /// Analytics, when there is enough history.
    pub analytics: Option<Analytics>,
}

/// Everything one scan observed.
#[derive(Clone, Debug)]
pub struct ScanInput {
    /// When the scan was taken; its UTC date is the `current` liquidity day.
    pub observed_at: OffsetDateTime,
    /// Quote context of every tracked asset.
    pub quotes: Vec<Quote>,
    /// Every scanned wallet.
    pub wallets: Vec<WalletInput>,
    /// Every open position (label and tags are filled from the wallet).
    pub positions: Vec<MarketPosition>,
}

/// The materialized aggregates of one scan.
#[derive(Clone, Debug)]
pub struct Materialized {
    /// When the scan was taken.
    pub observed_at: OffsetDateTime,
    /// One market per quote, with its aggregates, ordered by symbol.
    pub markets: Vec<Market>,
    /// One wallet per input, with its aggregates, ordered by address.
    pub wallets: Vec<Wallet>,
    /// Positions ordered by (symbol, address), label and tags filled in.
    pub positions: Vec<MarketPosition>,
    /// The `current` liquidity day of every asset, ordered by symbol.
    pub current_days: Vec<LiquidityDay>,
}

/// Input that violates the aggregation contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AggregateError {
    /// A position refers to an asset without a quote.
    #[error("position of {address} refers to unknown asset {symbol}")]
    UnknownAsset {
        /// Wallet.
        address: String,
        /// Asset.
        symbol: String,
    },
    /// A position refers to a wallet that was not scanned.
    #[error("position in {symbol} refers to unknown wallet {address}")]
    UnknownWallet {
        /// Wallet.
        address: String,
        /// Asset.
        symbol: String,
    },
    /// A wallet holds two positions in one asset.
    #[error("wallet {address} holds more than one position in {symbol}")]
    DuplicatePosition {
        /// Wallet.
        address: String,
        /// Asset.
        symbol: String,
    },
    /// Two quotes or two wallets share a key.
    #[error("duplicate key {0}")]
    DuplicateKey(String),
}

fn zero() -> BigDecimal {
    BigDecimal::zero()
}

/// `numerator / denominator` rounded half-up to 4 decimals; see [`Market::long_short_ratio`]
/// for the rule when there are no shorts.
pub fn long_short_ratio(long_count: u64, short_count: u64) -> Decimal {
    let value = if short_count == 0 {
        BigDecimal::from(long_count)
    } else {
        BigDecimal::from(long_count) / BigDecimal::from(short_count)
    };
    Decimal(value.with_scale_round(4, RoundingMode::HalfUp))
}

/// Percentage change from `prev` to `now`, 4 decimals half-up; 0 when `prev` is not positive.
pub fn change_pct(now: &BigDecimal, prev: &BigDecimal) -> Decimal {
    if prev <= &zero() {
        return Decimal(zero().with_scale(4));
    }
    let pct = (now - prev) * BigDecimal::from(100) / prev;
    Decimal(pct.with_scale_round(4, RoundingMode::HalfUp))
}

/// Size class of an account value.
pub fn size_class(account_value: &BigDecimal) -> SizeClass {
    if account_value >= &BigDecimal::from(SizeClass::WHALE_MIN_USD) {
        SizeClass::Whale
    } else if account_value >= &BigDecimal::from(SizeClass::SHARK_MIN_USD) {
        SizeClass::Shark
    } else {
        SizeClass::Shrimp
    }
}

/// Effective leverage `total / account`, 2 decimals half-up; 0 when account ≤ 0.
pub fn account_leverage(total: &BigDecimal, account: &BigDecimal) -> Decimal {
    if account <= &zero() {
        return Decimal(zero().with_scale(2));
    }
    Decimal((total / account).with_scale_round(2, RoundingMode::HalfUp))
}

#[derive(Default)]
struct SideAcc {
    count: u64,
    liq_count: u64,
    liq_value: BigDecimal,
}

/// Builds the liquidation levels of one asset from its positions.
pub fn liquidity_levels<'a>(
    bucket_size: &BigDecimal,
    positions: impl IntoIterator<Item = &'a MarketPosition>,
) -> (Vec<Level>, LiquidityTotals) {
    // (side, bucket) -> level; BTreeMap keeps the documented order (long first, price ascending).
    let mut levels: BTreeMap<(u8, BigDecimal), Level> = BTreeMap::new();
    for p in positions {
        let Some(liq) = &p.liq_price else { continue };
        let bucket = bucket_price(liq, bucket_size);
        let side_key = match p.direction {
            Direction::Long => 0u8,
            Direction::Short => 1u8,
        };
        levels
            .entry((side_key, bucket.clone()))
            .and_modify(|l| {
                l.position_count += 1;
                l.total_amount_usd = Decimal(&l.total_amount_usd.0 + &p.position_value.0);
                if liq.0 < l.min_liquidation_price.0 {
                    l.min_liquidation_price = liq.clone();
                }
                if liq.0 > l.max_liquidation_price.0 {
                    l.max_liquidation_price = liq.clone();
                }
            })
            .or_insert_with(|| Level {
                side: p.direction,
                bucket_price: Decimal(bucket),
                position_count: 1,
                total_amount_usd: p.position_value.clone(),
                min_liquidation_price: liq.clone(),
                max_liquidation_price: liq.clone(),
            });
    }
    let levels: Vec<Level> = levels.into_values().collect();
    let totals = totals_of(&levels);
    (levels, totals)
}

/// Sums levels per side (see [`LiquidityTotals::of`]).
pub fn totals_of(levels: &[Level]) -> LiquidityTotals {
    LiquidityTotals::of(levels)
}

/// Builds a liquidity day from levels.
pub fn liquidity_day(
    date: Date,
    network: &str,
    symbol: &str,
    coverage: Coverage,
    bucket_size: Decimal,
    updated_at: OffsetDateTime,
    levels: Vec<Level>,
) -> LiquidityDay {
    LiquidityDay {
        date,
        network: network.to_owned(),
        canonical_asset: canonical_of(symbol).to_owned(),
        network_asset_symbol: symbol.to_owned(),
        asset_alias: alias_of(symbol),
        coverage,
        bucket_size,
        bucket_method: "nearest".to_owned(),
        updated_at,
        totals: totals_of(&levels),
        levels,
    }
}

/// Materializes every aggregate of a scan. Runs once per data change, never per request.
pub fn materialize(network: &str, input: ScanInput) -> Result<Materialized, AggregateError> {
    let ScanInput {
        observed_at,
        mut quotes,
        mut wallets,
        mut positions,
    } = input;
    quotes.sort_by(|a, b| a.symbol.cmp(&b.symbol));
    wallets.sort_by(|a, b| a.address.cmp(&b.address));
    positions.sort_by(|a, b| (&a.symbol, &a.address).cmp(&(&b.symbol, &b.address)));
    for w in quotes.windows(2) {
        if w[0].symbol == w[1].symbol {
            return Err(AggregateError::DuplicateKey(w[0].symbol.clone()));
        }
    }
    for w in wallets.windows(2) {
        if w[0].address == w[1].address {
            return Err(AggregateError::DuplicateKey(w[0].address.clone()));
        }
    }
    let market_index: HashMap<&str, usize> = quotes
        .iter()
        .enumerate()
        .map(|(i, q)| (q.symbol.as_str(), i))
        .collect();
    let wallet_index: HashMap<&str, usize> = wallets
        .iter()
        .enumerate()
        .map(|(i, w)| (w.address.as_str(), i))
        .collect();

    let mut market_sides: Vec<[SideAcc; 2]> = quotes.iter().map(|_| Default::default()).collect();
    let mut wallet_sides: Vec<(BigDecimal, BigDecimal, u32)> =
        wallets.iter().map(|_| (zero(), zero(), 0)).collect();
    let mut seen: HashSet<(&str, &str)> = HashSet::with_capacity(positions.len());

    for p in &positions {
        let Some(&mi) = market_index.get(p.symbol.as_str()) else {
            return Err(AggregateError::UnknownAsset {
                address: p.address.clone(),
                symbol: p.symbol.clone(),
            });
        };
        let Some(&wi) = wallet_index.get(p.address.as_str()) else {
            return Err(AggregateError::UnknownWallet {
                address: p.address.clone(),
                symbol: p.symbol.clone(),
            });
        };
        if !seen.insert((p.address.as_str(), p.symbol.as_str())) {
            return Err(AggregateError::DuplicatePosition {
                address: p.address.clone(),
                symbol: p.symbol.clone(),
            });
        }
        let side = match p.direction {
            Direction::Long => 0,
            Direction::Short => 1,
        };
        let acc = &mut market_sides[mi][side];
        acc.count += 1;
        if p.liq_price.is_some() {
            acc.liq_count += 1;
            acc.liq_value += &p.position_value.0;
        }
        let w = &mut wallet_sides[wi];
        match p.direction {
            Direction::Long => w.0 += &p.position_value.0,
            Direction::Short => w.1 += &p.position_value.0,
        }
        w.2 += 1;
    }
    drop(seen);

    // Positions carry the wallet's label and tags so pages need no join.
    for p in &mut positions {
        let w = &wallets[wallet_index[p.address.as_str()]];
        p.label = w.label.clone();
        p.tags = w.tags.clone();
    }

    let markets: Vec<Market> = quotes
        .iter()
        .zip(&market_sides)
        .map(|(q, [long, short])| Market {
            symbol: q.symbol.clone(),
            price: q.price.clone(),
            change24h_pct: change_pct(&q.price, &q.prev_day_price),
            volume24h: q.volume24h.clone(),
            open_interest: q.open_interest.clone(),
            funding: q.funding.clone(),
            long_count: long.count,
            short_count: short.count,
            long_short_ratio: long_short_ratio(long.count, short.count),
            total_liquidation_value: Decimal(&long.liq_value + &short.liq_value),
            long_liquidation_value: Decimal(long.liq_value.clone()),
            short_liquidation_value: Decimal(short.liq_value.clone()),
        })
        .collect();

    let wallets: Vec<Wallet> = wallets
        .into_iter()
        .zip(wallet_sides)
        .map(|(w, (long, short, count))| {
            let total = &long + &short;
            let direction = match long.cmp(&short) {
                std::cmp::Ordering::Greater => WalletDirection::Long,
                std::cmp::Ordering::Less => WalletDirection::Short,
                std::cmp::Ordering::Equal => WalletDirection::Neutral,
            };
            let (net_pnl, roi, win_rate, strategy, strategy_confidence) = match w.analytics {
                Some(a) => (
                    Some(a.net_pnl),
                    Some(a.roi),
                    Some(a.win_rate),
                    Some(a.strategy),
                    Some(a.strategy_confidence),
                ),
                None => (None, None, None, None, None),
            };
            Wallet {
                size_class: size_class(&w.account_value),
                leverage: account_leverage(&total, &w.account_value),
                address: w.address,
                label: w.label,
                tags: w.tags,
                kols: w.kols,
                kol_profile: w.kol_profile,
                direction,
                account_total_value: w.account_value,
                total_position_value: Decimal(total),
                long_value: Decimal(long),
                short_value: Decimal(short),
                positions: count,
                observed_at: w.observed_at,
                net_pnl,
                roi,
                win_rate,
                strategy,
                strategy_confidence,
            }
        })
        .collect();

    let date = observed_at.date();
    let mut current_days = Vec::with_capacity(markets.len());
    let mut start = 0;
    for m in &markets {
        // positions are sorted by symbol: take this market's run
        let end = start + positions[start..].partition_point(|p| p.symbol == m.symbol);
        let size = bucket_size_for_price(&m.price);
        let (levels, _) = liquidity_levels(&size, &positions[start..end]);
        current_days.push(liquidity_day(
            date,
            network,
            &m.symbol,
            Coverage::Current,
            size,
            observed_at,
            levels,
        ));
        start = end;
    }

    Ok(Materialized {
        observed_at,
        markets,
        wallets,
        positions,
        current_days,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use time::macros::datetime;

    pub(crate) fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn quote(symbol: &str, price: &str) -> Quote {
        Quote {
            symbol: symbol.into(),
            price: d(price),
            prev_day_price: d("100"),
            volume24h: d("1000"),
            open_interest: d("5000"),
            funding: d("0.0000125"),
        }
    }

    pub(crate) fn wallet(address: &str, account: &str, analytics: bool) -> WalletInput {
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

    pub(crate) fn position(
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

    pub(crate) fn sample() -> ScanInput {
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

    #[test]
    fn market_aggregates() {
        let m = materialize("perpnet", sample()).unwrap();
        let btc = m.markets.iter().find(|m| m.symbol == "BTC").unwrap();
        assert_eq!((btc.long_count, btc.short_count), (2, 1));
        assert_eq!(btc.long_short_ratio.to_string(), "2.0000");
        assert_eq!(
            btc.long_liquidation_value.to_string(),
            "1000.50",
            "the position without liq price is excluded"
        );
        assert_eq!(btc.short_liquidation_value.to_string(), "300.25");
        assert_eq!(btc.total_liquidation_value.to_string(), "1300.75");
        assert_eq!(btc.change24h_pct.to_string(), "5.0000");
        let tsla = m.markets.iter().find(|m| m.symbol == "xyz:TSLA").unwrap();
        assert_eq!(tsla.long_short_ratio.to_string(), "0.5000");
        let eth = m.markets.iter().find(|m| m.symbol == "ETH").unwrap();
        assert_eq!((eth.long_count, eth.short_count), (1, 0));
        assert_eq!(
            eth.long_short_ratio.to_string(),
            "1.0000",
            "no shorts: equals longCount"
        );
    }

    #[test]
    fn ratio_edge_cases() {
        assert_eq!(long_short_ratio(0, 0).to_string(), "0.0000");
        assert_eq!(long_short_ratio(7, 0).to_string(), "7.0000");
        assert_eq!(long_short_ratio(2, 3).to_string(), "0.6667");
        assert_eq!(long_short_ratio(1, 8).to_string(), "0.1250");
    }

    #[test]
    fn wallet_aggregates() {
        let m = materialize("perpnet", sample()).unwrap();
        let w = |a: &str| m.wallets.iter().find(|w| w.address == a).unwrap().clone();
        let a = w("0xa");
        assert_eq!(
            (
                a.long_value.to_string(),
                a.short_value.to_string(),
                a.total_position_value.to_string()
            ),
            ("1000.50".into(), "50".into(), "1050.50".into())
        );
        assert_eq!(a.positions, 2);
        assert_eq!(a.direction, WalletDirection::Long);
        assert_eq!(a.size_class, SizeClass::Whale);
        assert_eq!(
            a.leverage.to_string(),
            "0.00",
            "1050.5 / 2,000,000 rounds to 0.00"
        );
        assert!(a.net_pnl.is_some());
        let b = w("0xb");
        assert_eq!(b.direction, WalletDirection::Long);
        assert_eq!(b.size_class, SizeClass::Shrimp);
        assert!(b.net_pnl.is_none() && b.strategy.is_none());
        let c = w("0xc");
        assert_eq!(
            c.size_class,
            SizeClass::Shark,
            "100,000 is the shark threshold"
        );
        assert_eq!(
            c.direction,
            WalletDirection::Short,
            "200 long against 300.25 short"
        );
        let d0 = w("0xd");
        assert_eq!((d0.positions, d0.direction), (0, WalletDirection::Neutral));
        assert_eq!(d0.leverage.to_string(), "0.00");
        // positions carry the wallet's label and tags
        assert!(m
            .positions
            .iter()
            .all(|p| p.label.as_deref() == Some(&*format!("label {}", p.address))));
    }

    #[test]
    fn current_day_totals_equal_market_liquidation_values() {
        let m = materialize("perpnet", sample()).unwrap();
        for (market, day) in m.markets.iter().zip(&m.current_days) {
            assert_eq!(market.symbol, day.network_asset_symbol);
            assert_eq!(day.coverage, Coverage::Current);
            assert_eq!(
                day.totals.long.total_amount_usd,
                market.long_liquidation_value
            );
            assert_eq!(
                day.totals.short.total_amount_usd,
                market.short_liquidation_value
            );
        }
        let tsla = m
            .current_days
            .iter()
            .find(|d| d.network_asset_symbol == "xyz:TSLA")
            .unwrap();
        assert_eq!(tsla.canonical_asset, "TSLA");
        assert_eq!(tsla.bucket_size.to_string(), "2");
        // size 2: 450 is a multiple; 451 is exactly halfway between 450 and 452 and rounds up
        let shorts: Vec<String> = tsla
            .levels
            .iter()
            .filter(|l| l.side == Direction::Short)
            .map(|l| l.bucket_price.to_string())
            .collect();
        assert_eq!(shorts, ["450", "452"]);
        assert!(tsla.levels.windows(2).all(|w| (
            w[0].side != Direction::Long,
            &w[0].bucket_price.0
        ) < (
            w[1].side != Direction::Long,
            &w[1].bucket_price.0
        )));
    }

    #[test]
    fn rejects_inconsistent_input() {
        let mut s = sample();
        s.positions
            .push(position("0xa", "BTC", Direction::Short, "1", None));
        assert!(matches!(
            materialize("perpnet", s),
            Err(AggregateError::DuplicatePosition { .. })
        ));
        let mut s = sample();
        s.positions
            .push(position("0xzz", "BTC", Direction::Short, "1", None));
        assert!(matches!(
            materialize("perpnet", s),
            Err(AggregateError::UnknownWallet { .. })
        ));
        let mut s = sample();
        s.positions
            .push(position("0xa", "DOGE", Direction::Short, "1", None));
        assert!(matches!(
            materialize("perpnet", s),
            Err(AggregateError::UnknownAsset { .. })
        ));
    }
}
