//! The coverage report: wallet freshness (from the writer's registry or from
//! the served wallets) and the share of each market's open interest that the
//! scanned positions hold. Computed once per data version, never per request.

use std::collections::HashMap;

use bigdecimal::{BigDecimal, RoundingMode, Zero};
use market_model::{
    ClassStaleness, Decimal, Direction, Market, MarketCoverage, NetworkCoverage, SizeClass,
    WalletFreshness,
};
use time::OffsetDateTime;

use crate::fixed::{Fixed, Sum};
use crate::position::{PositionKeys, Size};
use crate::sort_key::SortKey;

/// The size classes in report order.
const CLASSES: [SizeClass; 3] = [SizeClass::Whale, SizeClass::Shark, SizeClass::Shrimp];

/// Freshness of tracked wallets as of `as_of`: one `(size class, last read)`
/// per wallet, `None` for a wallet never read. A read after `as_of` (a clock
/// step) counts as zero seconds old.
pub fn wallet_freshness(
    as_of: OffsetDateTime,
    wallets: impl IntoIterator<Item = (SizeClass, Option<OffsetDateTime>)>,
) -> WalletFreshness {
    freshness_of_ages(wallets.into_iter().map(|(class, read)| {
        (
            class,
            read.map(|at| (as_of - at).whole_seconds().max(0) as u64),
        )
    }))
}

/// [`wallet_freshness`] from each wallet's age: the whole seconds since its
/// last read (`None`: never read). A writer that keeps its registry's
/// instants as integers (`track`, a million wallets at each publish) counts
/// the ages without a calendar instant each.
pub fn freshness_of_ages(
    wallets: impl IntoIterator<Item = (SizeClass, Option<u64>)>,
) -> WalletFreshness {
    let mut ages: [Vec<u64>; 3] = Default::default();
    let mut counts = [0u64; 3];
    let mut never = [0u64; 3];
    // Read within a minute, five minutes, an hour.
    let mut within = [0u64; 3];
    for (class, age) in wallets {
        let i = CLASSES
            .iter()
            .position(|c| *c == class)
            .expect("CLASSES lists every size class");
        counts[i] += 1;
        match age {
            Some(a) => {
                for (n, limit) in within.iter_mut().zip([60, 300, 3600]) {
                    *n += u64::from(a <= limit);
                }
                ages[i].push(a);
            }
            None => never[i] += 1,
        }
    }
    let by_size_class = CLASSES
        .iter()
        .zip(ages.iter_mut())
        .enumerate()
        .map(|(i, (&size_class, ages))| ClassStaleness {
            size_class,
            wallets: counts[i],
            never_read: never[i],
            p50_seconds: nearest_rank(ages, 50),
            p99_seconds: nearest_rank(ages, 99),
        })
        .collect();
    WalletFreshness {
        tracked: counts.iter().sum(),
        never_read: never.iter().sum(),
        refreshed_within1m: within[0],
        refreshed_within5m: within[1],
        refreshed_within1h: within[2],
        by_size_class,
    }
}

/// The `pct`th percentile of `values` by the nearest-rank method: the
/// smallest value with at least `pct` % of the values at or below it.
/// Selected, not sorted (a million ages at each publish); `values` is left
/// reordered.
fn nearest_rank(values: &mut [u64], pct: u64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let rank = (values.len() as u64 * pct).div_ceil(100).max(1);
    Some(*values.select_nth_unstable(rank as usize - 1).1)
}

/// `covered / total` rounded half-up to 4 decimals; `None` when `total` is not positive.
fn share(covered: &BigDecimal, total: &BigDecimal) -> Option<Decimal> {
    (total > &BigDecimal::zero())
        .then(|| Decimal((covered / total).with_scale_round(4, RoundingMode::HalfUp)))
}

/// The coverage report of a materialized version: with the writer's
/// freshness of its tracked wallets when it has one, else the freshness of
/// the served wallets.
pub fn coverage_of<P: PositionKeys>(m: &crate::version::DataVersion<P>) -> NetworkCoverage {
    report(m, &m.positions)
}

/// [`coverage_of`] with the version's positions given apart (they may be
/// held in parts).
pub fn report<Q, P: PositionKeys>(
    m: &crate::version::DataVersion<Q>,
    positions: impl IntoIterator<Item = P>,
) -> NetworkCoverage {
    let freshness = m.freshness.clone().unwrap_or_else(|| {
        wallet_freshness(
            m.observed_at,
            m.wallets
                .iter()
                .map(|w| (w.size_class, Some(w.observed_at))),
        )
    });
    network_coverage(m.observed_at, &m.markets, positions, freshness)
}

/// The coverage report of one data version. `markets` and `positions` are the
/// version's; positions of unknown markets are ignored.
pub fn network_coverage<P: PositionKeys>(
    as_of: OffsetDateTime,
    markets: &[Market],
    positions: impl IntoIterator<Item = P>,
    wallets: WalletFreshness,
) -> NetworkCoverage {
    let index: HashMap<&str, usize, foldhash::fast::RandomState> = markets
        .iter()
        .enumerate()
        .map(|(i, m)| (m.symbol.as_str(), i))
        .collect();
    // Long and short sizes are summed apart: on the exchange both sides add
    // up to the open interest, so each side covers its own half.
    let mut sizes: Vec<[Sum; 2]> = (0..markets.len()).map(|_| Default::default()).collect();
    for p in positions {
        if let Some(&i) = index.get(p.symbol()) {
            let side = usize::from(p.direction() == Direction::Short);
            let sum = &mut sizes[i][side];
            match p.size() {
                Size::Decimal(d) => sum.add_assign(d, Fixed::from_big(d)),
                Size::Key(SortKey::Small { mantissa, scale }) => sum.add_refs(Fixed {
                    mantissa: i128::from(*mantissa),
                    scale: i64::from(*scale),
                }),
                Size::Key(SortKey::Big(d)) => sum.add_assign(d, Fixed::from_big(d)),
            }
        }
    }
    let units = sizes
        .into_iter()
        .map(|[long, short]| long.into_big() + short.into_big());
    coverage_of_units(as_of, markets, units, wallets)
}

/// The coverage report from the units each market's positions hold (long
/// and short summed), in `markets` order.
pub(crate) fn coverage_of_units(
    as_of: OffsetDateTime,
    markets: &[Market],
    units: impl IntoIterator<Item = BigDecimal>,
    wallets: WalletFreshness,
) -> NetworkCoverage {
    let two = BigDecimal::from(2);
    let mut total = BigDecimal::zero();
    let mut covered_total = BigDecimal::zero();
    let mut items: Vec<MarketCoverage> = markets
        .iter()
        .zip(units)
        .map(|(m, units)| {
            let covered = (units * &m.price.0 / &two).with_scale_round(2, RoundingMode::HalfUp);
            total += &m.open_interest.0;
            covered_total += &covered;
            MarketCoverage {
                symbol: m.symbol.clone(),
                open_interest: m.open_interest.clone(),
                covered_share: share(&covered, &m.open_interest.0),
                covered_open_interest: Decimal(covered),
            }
        })
        .collect();
    items.sort_by(|a, b| a.symbol.cmp(&b.symbol));
    NetworkCoverage {
        as_of,
        wallets,
        covered_share: share(&covered_total, &total),
        open_interest: Decimal(total),
        covered_open_interest: Decimal(covered_total),
        markets: items,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use market_model::MarketPosition;
    use std::str::FromStr;
    use time::macros::datetime;
    use time::Duration;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&mut v, 50), Some(50));
        assert_eq!(nearest_rank(&mut v, 99), Some(99));
        // In any order, and with ties.
        let mut v: Vec<u64> = (1..=100).rev().chain([50, 50]).collect();
        assert_eq!(nearest_rank(&mut v, 50), Some(50));
        assert_eq!(nearest_rank(&mut v, 99), Some(99));
        assert_eq!(nearest_rank(&mut [7], 99), Some(7));
        assert_eq!(nearest_rank(&mut [3, 1, 2], 50), Some(2));
        assert_eq!(nearest_rank(&mut [], 50), None);
    }

    #[test]
    fn freshness_counts_windows_and_classes() {
        let now = datetime!(2026-11-23 12:00:00 UTC);
        let ago = |s: i64| Some(now - Duration::seconds(s));
        let f = wallet_freshness(
            now,
            [
                (SizeClass::Whale, ago(30)),
                (SizeClass::Whale, ago(200)),
                (SizeClass::Whale, None),
                (SizeClass::Shark, ago(3000)),
                (SizeClass::Shrimp, ago(7200)),
                // A read stamped after `as_of` is zero seconds old.
                (SizeClass::Shrimp, Some(now + Duration::seconds(5))),
            ],
        );
        assert_eq!(f.tracked, 6);
        assert_eq!(f.never_read, 1);
        assert_eq!(
            (
                f.refreshed_within1m,
                f.refreshed_within5m,
                f.refreshed_within1h
            ),
            (2, 3, 4)
        );
        let whale = &f.by_size_class[0];
        assert_eq!(whale.size_class, SizeClass::Whale);
        assert_eq!((whale.wallets, whale.never_read), (3, 1));
        assert_eq!(
            (whale.p50_seconds, whale.p99_seconds),
            (Some(30), Some(200))
        );
        let shrimp = &f.by_size_class[2];
        assert_eq!(
            (shrimp.p50_seconds, shrimp.p99_seconds),
            (Some(0), Some(7200))
        );
        assert_eq!(f.by_size_class[1].p50_seconds, Some(3000));
    }

    proptest::proptest! {
        /// Counted in one pass and selected, the freshness is what sorting
        /// each class's ages and counting each window over them gives.
        #[test]
        fn freshness_of_ages_is_what_sorting_gives(
            wallets in proptest::collection::vec(
                (0..3usize, proptest::option::of(0u64..5_000)),
                0..300,
            )
        ) {
            let wallets: Vec<(SizeClass, Option<u64>)> =
                wallets.into_iter().map(|(c, a)| (CLASSES[c], a)).collect();
            let f = freshness_of_ages(wallets.iter().copied());
            let read: Vec<u64> = wallets.iter().filter_map(|w| w.1).collect();
            let within = |s: u64| read.iter().filter(|&&a| a <= s).count() as u64;
            proptest::prop_assert_eq!(f.tracked, wallets.len() as u64);
            proptest::prop_assert_eq!(
                (f.refreshed_within1m, f.refreshed_within5m, f.refreshed_within1h),
                (within(60), within(300), within(3600))
            );
            for (i, class) in CLASSES.iter().enumerate() {
                let mut ages: Vec<u64> = wallets
                    .iter()
                    .filter(|w| w.0 == *class)
                    .filter_map(|w| w.1)
                    .collect();
                ages.sort_unstable();
                let rank = |pct: usize| {
                    (!ages.is_empty()).then(|| ages[(ages.len() * pct).div_ceil(100).max(1) - 1])
                };
                let c = &f.by_size_class[i];
                proptest::prop_assert_eq!(c.size_class, *class);
                proptest::prop_assert_eq!(
                    c.never_read,
                    wallets.iter().filter(|w| w.0 == *class && w.1.is_none()).count() as u64
                );
                proptest::prop_assert_eq!((c.p50_seconds, c.p99_seconds), (rank(50), rank(99)));
            }
        }
    }

    fn market(symbol: &str, price: &str, oi: &str) -> Market {
        Market {
            symbol: symbol.into(),
            price: d(price),
            change24h_pct: d("0"),
            volume24h: d("0"),
            open_interest: d(oi),
            funding: d("0"),
            long_count: 0,
            short_count: 0,
            long_short_ratio: d("0"),
            total_liquidation_value: d("0"),
            long_liquidation_value: d("0"),
            short_liquidation_value: d("0"),
        }
    }

    fn position(symbol: &str, direction: Direction, size: &str) -> MarketPosition {
        MarketPosition {
            address: "0x0000000000000000000000000000000000000001".into(),
            label: None,
            tags: vec![],
            symbol: symbol.into(),
            direction,
            position_value: d("0"),
            liq_price: None,
            observed_at: datetime!(2026-11-23 12:00:00 UTC),
            leverage: d("1"),
            size: d(size),
            size_unit: symbol.into(),
            u_pnl: d("0"),
            u_pnl_pct: d("0"),
            entry_price: d("1"),
            mark_price: d("1"),
            margin: d("0"),
            funding_cost: d("0"),
        }
    }

    #[test]
    fn covered_open_interest_counts_each_side_as_half() {
        let markets = [
            market("ETH", "3000", "0"),
            market("BTC", "100000", "1000000"),
        ];
        let positions = [
            position("BTC", Direction::Long, "4"),
            position("BTC", Direction::Short, "2.5"),
            position("BTC", Direction::Long, "0.5"),
            position("ETH", Direction::Short, "1"),
            position("DOGE", Direction::Short, "1"),
        ];
        let c = network_coverage(
            datetime!(2026-11-23 12:00:00 UTC),
            &markets,
            &positions,
            wallet_freshness(datetime!(2026-11-23 12:00:00 UTC), []),
        );
        assert_eq!(c.markets[0].symbol, "BTC");
        // (4.5 + 2.5) / 2 × 100000
        assert_eq!(c.markets[0].covered_open_interest, d("350000.00"));
        assert_eq!(c.markets[0].covered_share, Some(d("0.3500")));
        // No open interest: no share, whatever was scanned.
        assert_eq!(c.markets[1].covered_open_interest, d("1500.00"));
        assert_eq!(c.markets[1].covered_share, None);
        assert_eq!(c.open_interest, d("1000000"));
        assert_eq!(c.covered_open_interest, d("351500.00"));
        assert_eq!(c.covered_share, Some(d("0.3515")));
        assert_eq!(c.wallets.by_size_class.len(), 3);
    }
}
