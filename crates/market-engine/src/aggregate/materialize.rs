//! The materialization of the aggregates: every market, wallet and current
//! liquidity day of one scan ([`materialize`]), and one wallet on its own
//! ([`materialize_wallet`]).

use std::collections::HashSet;

use bigdecimal::BigDecimal;
use market_model::{Coverage, Decimal, Direction, Market, MarketPosition, Wallet, WalletDirection};

use super::index::{address_index, index_u32, permute_in_place, sorted_order, FastMap};
use super::levels::{
    levels_from_entries, levels_on_bigdecimals, liquidity_day, positive_size, side_key, LevelEntry,
};
use super::rules::{account_leverage, change_pct, long_short_ratio, size_class};
use super::{AggregateError, Quote, ScanInput, WalletInput};
use crate::buckets::bucket_size_for_price;
use crate::fixed::{Fixed, Sum};
use crate::version::DataVersion;

/// The error the checks in (symbol, address) order meet first: an unknown
/// asset, an unknown wallet, or the second position of a wallet in an asset.
fn first_position_error(
    positions: &[MarketPosition],
    markets: &FastMap<&str, u32>,
    wallets: &FastMap<&str, u32>,
) -> Option<AggregateError> {
    let mut sorted: Vec<&MarketPosition> = positions.iter().collect();
    sorted.sort_by(|a, b| (&a.symbol, &a.address).cmp(&(&b.symbol, &b.address)));
    let mut seen: HashSet<(&str, &str)> = HashSet::with_capacity(sorted.len());
    for p in sorted {
        if !markets.contains_key(p.symbol.as_str()) {
            return Some(AggregateError::UnknownAsset {
                address: p.address.clone(),
                symbol: p.symbol.clone(),
            });
        }
        if !wallets.contains_key(p.address.as_str()) {
            return Some(AggregateError::UnknownWallet {
                address: p.address.clone(),
                symbol: p.symbol.clone(),
            });
        }
        if !seen.insert((p.address.as_str(), p.symbol.as_str())) {
            return Some(AggregateError::DuplicatePosition {
                address: p.address.clone(),
                symbol: p.symbol.clone(),
            });
        }
    }
    None
}

/// Per-market, per-side position count and liquidation value.
#[derive(Default)]
struct SideAcc {
    count: u64,
    liq_value: Sum,
}

/// Materializes every aggregate of a scan. Runs once per data change, never per request.
pub fn materialize(network: &str, input: ScanInput) -> Result<DataVersion, AggregateError> {
    let ScanInput {
        observed_at,
        mut quotes,
        wallets,
        mut positions,
    } = input;
    quotes.sort_by(|a, b| a.symbol.cmp(&b.symbol));
    for w in quotes.windows(2) {
        if w[0].symbol == w[1].symbol {
            return Err(AggregateError::DuplicateKey(w[0].symbol.clone()));
        }
    }
    // Wallets stay where they are: `wallet_order[rank]` is the input index of
    // the wallet at `rank` in address order, `rank_of[input index]` its rank.
    let wallet_order = sorted_order(&wallets, |w| w.address.as_str());
    for w in wallet_order.windows(2) {
        let (a, b) = (
            &wallets[w[0] as usize].address,
            &wallets[w[1] as usize].address,
        );
        if a == b {
            return Err(AggregateError::DuplicateKey(a.clone()));
        }
    }
    let mut rank_of = vec![0u32; wallets.len()];
    for (rank, &i) in wallet_order.iter().enumerate() {
        rank_of[i as usize] = index_u32(rank);
    }
    let market_index: FastMap<&str, u32> = quotes
        .iter()
        .enumerate()
        .map(|(i, q)| (q.symbol.as_str(), index_u32(i)))
        .collect();
    let bucket_sizes: Vec<Decimal> = quotes
        .iter()
        .map(|q| bucket_size_for_price(&q.price))
        .collect();

    // One pass over the positions in input order: resolve market and wallet,
    // add up the market and wallet sums, fill in label and tags, and collect
    // each market's level entries (`None`: the market needs `BigDecimal`).
    let mut market_sides: Vec<[SideAcc; 2]> = quotes.iter().map(|_| Default::default()).collect();
    let mut wallet_sides: Vec<(Sum, Sum, u32)> =
        wallets.iter().map(|_| Default::default()).collect();
    let sizes: Vec<Option<Fixed>> = bucket_sizes.iter().map(|s| positive_size(s)).collect();
    let mut level_entries: Vec<Option<Vec<LevelEntry>>> =
        sizes.iter().map(|s| s.map(|_| Vec::new())).collect();
    // (market, wallet rank) of every position
    let mut placed: Vec<(u32, u32)> = Vec::with_capacity(positions.len());
    // Scans list a wallet's positions together and usually in wallet order:
    // try the current and the next wallet before hashing.
    let mut wallet_index: Option<FastMap<&str, u32>> = None;
    let mut current: Option<usize> = None;
    for p in positions.iter_mut() {
        let Some(&market) = market_index.get(p.symbol.as_str()) else {
            break; // reported below, in (symbol, address) order
        };
        let address = p.address.as_str();
        let next = current.map_or(0, |w| w + 1);
        let wallet = match current {
            Some(w) if wallets[w].address == address => Some(w),
            _ if next < wallets.len() && wallets[next].address == address => Some(next),
            _ => wallet_index
                .get_or_insert_with(|| address_index(&wallets))
                .get(address)
                .map(|&w| w as usize),
        };
        let Some(wallet) = wallet else {
            break; // reported below
        };
        current = Some(wallet);
        let rank = rank_of[wallet];
        placed.push((market, rank));

        let value = &p.position_value.0;
        let fast_value = Fixed::from_big(value);
        let m = market as usize;
        let acc = &mut market_sides[m][usize::from(side_key(p.direction))];
        acc.count += 1;
        if let Some(liq) = &p.liq_price {
            acc.liq_value.add_assign(value, fast_value);
            if let (Some(entries), Some(size)) = (&mut level_entries[m], sizes[m]) {
                let entry = fast_value
                    .zip(Fixed::from_big(liq))
                    .and_then(|(value, liq)| LevelEntry::new(p.direction, value, liq, size, rank));
                match entry {
                    Some(entry) => entries.push(entry),
                    None => level_entries[m] = None,
                }
            }
        }
        let sums = &mut wallet_sides[wallet];
        match p.direction {
            Direction::Long => sums.0.add_assign(value, fast_value),
            Direction::Short => sums.1.add_assign(value, fast_value),
        }
        sums.2 += 1;

        // Positions carry the wallet's label and tags so pages need no join.
        let w = &wallets[wallet];
        p.label = w.label.clone();
        p.tags = w.tags.clone();
    }
    if placed.len() < positions.len() {
        let wallet_index = wallet_index.unwrap_or_else(|| address_index(&wallets));
        return Err(
            first_position_error(&positions, &market_index, &wallet_index)
                .expect("a position refers to an unknown asset or wallet"),
        );
    }
    drop(market_index);
    drop(wallet_index);

    // Each market's positions form one run of the sorted positions.
    let mut run_start: Vec<usize> = Vec::with_capacity(market_sides.len() + 1);
    let mut next = 0;
    for [long, short] in &market_sides {
        run_start.push(next);
        next += (long.count + short.count) as usize;
    }
    run_start.push(next);
    sort_positions(&mut positions, &placed, &run_start)?;
    drop(placed);

    let markets: Vec<Market> = quotes
        .iter()
        .zip(market_sides)
        .map(|(q, [long, short])| {
            market_of(
                q,
                (long.count, long.liq_value.into_big()),
                (short.count, short.liq_value.into_big()),
            )
        })
        .collect();

    // Wallets in input order (sequential reads), then moved into address order.
    let mut wallets: Vec<Wallet> = wallets
        .into_iter()
        .zip(wallet_sides)
        .map(|(w, (long, short, count))| wallet_of(w, long, short, count))
        .collect();
    let mut wallet_order = wallet_order;
    permute_in_place(&mut wallets, &mut wallet_order);

    let date = observed_at.date();
    let mut current_days = Vec::with_capacity(markets.len());
    for (((m, size), (fixed_size, entries)), run) in markets
        .iter()
        .zip(bucket_sizes)
        .zip(sizes.into_iter().zip(level_entries))
        .zip(run_start.windows(2))
    {
        let levels = fixed_size
            .zip(entries)
            .and_then(|(fixed_size, mut entries)| levels_from_entries(fixed_size, &mut entries))
            .unwrap_or_else(|| levels_on_bigdecimals(&size, &positions[run[0]..run[1]]));
        current_days.push(liquidity_day(
            date,
            network,
            &m.symbol,
            Coverage::Current,
            size,
            observed_at,
            levels,
        ));
    }

    let cohorts = crate::cohorts::cohorts(observed_at, &markets, &wallets, &positions);
    Ok(DataVersion {
        observed_at,
        markets,
        wallets,
        positions,
        current_days,
        cohorts,
        freshness: None,
    })
}

/// A market from its quote and its (position count, liquidation value) per side.
pub(crate) fn market_of(q: &Quote, long: (u64, BigDecimal), short: (u64, BigDecimal)) -> Market {
    let ((long_count, long_liq), (short_count, short_liq)) = (long, short);
    Market {
        symbol: q.symbol.clone(),
        price: q.price.clone(),
        change24h_pct: change_pct(&q.price, &q.prev_day_price),
        volume24h: q.volume24h.clone(),
        open_interest: q.open_interest.clone(),
        funding: q.funding.clone(),
        long_count,
        short_count,
        long_short_ratio: long_short_ratio(long_count, short_count),
        total_liquidation_value: Decimal(&long_liq + &short_liq),
        long_liquidation_value: Decimal(long_liq),
        short_liquidation_value: Decimal(short_liq),
    }
}

/// Sorts `positions` by (market, wallet rank), that is by (symbol, address),
/// given each position's (market, wallet rank) in `placed` and where each
/// market's run starts: a counting sort on the market, a sort of each run's
/// (rank, input index) pairs, then one move per position. Fails on the first
/// wallet holding two positions in one market, in that order.
fn sort_positions(
    positions: &mut [MarketPosition],
    placed: &[(u32, u32)],
    run_start: &[usize],
) -> Result<(), AggregateError> {
    let mut sorted: Vec<u64> = vec![0; placed.len()];
    let mut fill = run_start.to_vec();
    for (i, &(market, rank)) in placed.iter().enumerate() {
        let slot = &mut fill[market as usize];
        sorted[*slot] = (u64::from(rank) << 32) | u64::from(index_u32(i));
        *slot += 1;
    }
    let input_index = |k: u64| (k & 0xffff_ffff) as u32;
    for run in run_start.windows(2) {
        let run = &mut sorted[run[0]..run[1]];
        run.sort_unstable();
        if let Some(w) = run.windows(2).find(|w| w[0] >> 32 == w[1] >> 32) {
            let p = &positions[input_index(w[1]) as usize];
            return Err(AggregateError::DuplicatePosition {
                address: p.address.clone(),
                symbol: p.symbol.clone(),
            });
        }
    }
    let mut order: Vec<u32> = sorted.iter().map(|&k| input_index(k)).collect();
    drop(sorted);
    permute_in_place(positions, &mut order);
    Ok(())
}

/// The aggregates of one wallet over its positions, exactly as
/// [`materialize`] computes them among others; its label and tags are
/// filled into the positions, which end up ordered by symbol. Fails like
/// [`materialize`] on a position of another wallet, on one in an asset
/// `quoted` refuses, or on two positions in one asset.
pub fn materialize_wallet(
    input: WalletInput,
    positions: &mut [MarketPosition],
    quoted: impl Fn(&str) -> bool,
) -> Result<Wallet, AggregateError> {
    positions.sort_by(|a, b| a.symbol.cmp(&b.symbol));
    for (i, p) in positions.iter().enumerate() {
        let (address, symbol) = (p.address.clone(), p.symbol.clone());
        if !quoted(&p.symbol) {
            return Err(AggregateError::UnknownAsset { address, symbol });
        }
        if p.address != input.address {
            return Err(AggregateError::UnknownWallet { address, symbol });
        }
        if i > 0 && positions[i - 1].symbol == p.symbol {
            return Err(AggregateError::DuplicatePosition { address, symbol });
        }
    }
    let (mut long, mut short) = (Sum::default(), Sum::default());
    for p in positions.iter_mut() {
        let value = &p.position_value.0;
        match p.direction {
            Direction::Long => long.add_assign(value, Fixed::from_big(value)),
            Direction::Short => short.add_assign(value, Fixed::from_big(value)),
        }
        p.label = input.label.clone();
        p.tags = input.tags.clone();
    }
    Ok(wallet_of(input, long, short, index_u32(positions.len())))
}

/// The aggregates of one wallet from its sums.
fn wallet_of(w: WalletInput, long: Sum, short: Sum, count: u32) -> Wallet {
    let fast = long.fast().zip(short.fast());
    let (long, short) = (long.into_big(), short.into_big());
    let total = fast
        .and_then(|(l, s)| l.add_refs(s))
        .map(Fixed::to_big)
        .unwrap_or_else(|| &long + &short);
    let order = fast
        .and_then(|(l, s)| l.try_cmp(s))
        .unwrap_or_else(|| long.cmp(&short));
    let direction = match order {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::liquidity_levels;
    use crate::aggregate::test_support::{reference, Lcg};
    use crate::fixtures::*;
    use market_model::SizeClass;
    use time::macros::datetime;

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

    // ---- the integer fast paths against the `BigDecimal` computation they replace ----

    /// Debug output shows every decimal's sign, scale and digits.
    fn exact(m: &DataVersion) -> String {
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}",
            m.markets, m.wallets, m.positions, m.current_days
        )
    }

    /// Values chosen to hit every fallback: zeros with scales, mixed scales,
    /// negatives, mantissas beyond `i64` (levels fall back) and beyond `i128`
    /// (sums fall back), liquidation prices equal in value but not in scale.
    fn tricky_scan(seed: u64, grouped: bool) -> ScanInput {
        const VALUES: &[&str] = &[
            "0",
            "0.00",
            "1000.50",
            "300.25",
            "200",
            "-5.5",
            "12.345678",
            "7.0",
            "2.50",
            "1E+3",
            "0.0000001",
            "99999999999999999999.5",
            "123456789012345678901234567890123456789012.5",
        ];
        const LIQS: &[&str] = &[
            "90.1", "90.10", "90.100", "89.95", "450", "451", "452.0", "0.15234", "0", "-3",
            "3000", "2999.99", "91249.99", "91250", "1E+30", "7E+2",
        ];
        const ACCOUNTS: &[&str] = &[
            "2000000",
            "1000000",
            "999999.99",
            "100000",
            "50000",
            "0",
            "-10",
            "0.001",
            "1E+40",
            "123.456",
        ];
        let mut rng = Lcg(seed);
        let quotes: Vec<Quote> = [
            ("BTC", "92391.338"),
            ("ETH", "3000"),
            ("xyz:TSLA", "400"),
            ("SOL", "0.15"),
            ("ZERO", "0"),
            ("DOGE", "1E-7"),
            ("EMPTY", "12"),
        ]
        .into_iter()
        .map(|(symbol, price)| quote(symbol, price))
        .collect();
        let mut wallets: Vec<WalletInput> = (0..40)
            .map(|i| {
                let mut w = wallet(
                    &format!("0x{:02x}{}", (i * 37) % 256, "ab".repeat(i % 3)),
                    rng.pick(ACCOUNTS),
                    i % 2 == 0,
                );
                w.tags = (0..i % 3).map(|t| format!("tag{t}")).collect();
                w.label = (i % 4 != 0).then(|| format!("wallet {i}"));
                w
            })
            .collect();
        let mut positions = Vec::new();
        for w in &wallets {
            for q in &quotes[..6] {
                if rng.below(3) == 0 {
                    continue;
                }
                let direction = if rng.below(2) == 0 {
                    Direction::Long
                } else {
                    Direction::Short
                };
                let liq = (rng.below(5) != 0).then(|| rng.pick(LIQS));
                positions.push(position(
                    &w.address,
                    &q.symbol,
                    direction,
                    rng.pick(VALUES),
                    liq,
                ));
            }
        }
        if !grouped {
            rng.shuffle(&mut positions);
        }
        rng.shuffle(&mut wallets);
        ScanInput {
            observed_at: datetime!(2026-11-22 01:00 UTC),
            quotes,
            wallets,
            positions,
        }
    }

    #[test]
    fn matches_the_bigdecimal_reference_exactly() {
        for seed in 0..12 {
            for grouped in [true, false] {
                let scan = tricky_scan(seed, grouped);
                let fast = materialize("perpnet", scan.clone()).unwrap();
                let slow = reference::materialize("perpnet", scan).unwrap();
                assert_eq!(exact(&fast), exact(&slow), "seed {seed}, grouped {grouped}");
            }
        }
        // the sample too, and the levels function on its own
        let fast = materialize("perpnet", sample()).unwrap();
        let slow = reference::materialize("perpnet", sample()).unwrap();
        assert_eq!(exact(&fast), exact(&slow));
        let scan = tricky_scan(99, false);
        for size in ["500", "1", "0.001", "1E-8", "5E+4", "0.7", "-2"] {
            let size = d(size).0;
            for symbol in ["BTC", "ETH", "SOL"] {
                let of_asset = scan.positions.iter().filter(|p| p.symbol == symbol);
                let (levels, _) = liquidity_levels(&size, of_asset.clone());
                let expected = reference::liquidity_levels(&size, of_asset);
                assert_eq!(
                    format!("{levels:?}"),
                    format!("{expected:?}"),
                    "{symbol} {size}"
                );
            }
        }
    }

    #[test]
    fn reports_the_same_error_as_the_reference() {
        use Direction::*;
        let broken: &[fn(&mut ScanInput)] = &[
            |s| s.positions.push(position("0xa", "BTC", Short, "1", None)),
            |s| s.positions.push(position("0xzz", "BTC", Short, "1", None)),
            |s| s.positions.push(position("0xa", "DOGE", Short, "1", None)),
            |s| {
                // the duplicate in BTC sorts before the unknown wallet in xyz:TSLA
                s.positions
                    .push(position("0xzz", "xyz:TSLA", Short, "1", None));
                s.positions.push(position("0xc", "BTC", Long, "1", None));
            },
            |s| {
                s.positions.push(position("0xb", "ETH", Long, "1", None));
                s.positions.push(position("0xb", "ETH", Short, "2", None));
                s.positions
                    .push(position("0xa", "xyz:TSLA", Long, "1", None));
            },
            |s| {
                s.positions.push(position("0xa", "AAA", Long, "1", None));
                s.positions.push(position("0x0", "BTC", Long, "1", None));
            },
            |s| {
                s.wallets.push(wallet("0xb", "1", false));
                s.positions.push(position("0xa", "DOGE", Short, "1", None));
            },
            |s| {
                s.quotes.push(quote("ETH", "1"));
                s.wallets.push(wallet("0xb", "1", false));
            },
        ];
        for (i, breaks) in broken.iter().enumerate() {
            let mut scan = sample();
            breaks(&mut scan);
            let fast = materialize("perpnet", scan.clone()).err();
            let slow = reference::materialize("perpnet", scan).err();
            assert!(fast.is_some(), "case {i}");
            assert_eq!(fast, slow, "case {i}");
        }
    }
}
