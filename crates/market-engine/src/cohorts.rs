//! Size-class cohorts: each market's open positions grouped by the size
//! class of their wallet and by side.

use std::collections::HashMap;

use bigdecimal::{BigDecimal, RoundingMode, Zero};
use market_model::{
    Cohort, Coverage, Decimal, Direction, Market, MarketCohorts, MarketPosition, SizeClass, Wallet,
};
use time::OffsetDateTime;

/// Running sums of one cohort.
#[derive(Default)]
pub(crate) struct Acc {
    pub(crate) count: u64,
    pub(crate) value: BigDecimal,
    pub(crate) liq_value: BigDecimal,
    pub(crate) value_x_leverage: BigDecimal,
    pub(crate) value_x_entry: BigDecimal,
    pub(crate) upnl: BigDecimal,
}

impl Acc {
    fn add(&mut self, p: &MarketPosition) {
        let value = &p.position_value.0;
        self.count += 1;
        self.value += value;
        if p.liq_price.is_some() {
            self.liq_value += value;
        }
        self.value_x_leverage += value * &p.leverage.0;
        self.value_x_entry += value * &p.entry_price.0;
        self.upnl += &p.u_pnl.0;
    }

    pub(crate) fn finish(self, size_class: SizeClass, side: Direction) -> Cohort {
        let average = |weighted: BigDecimal, digits: i64| {
            (!self.value.is_zero()).then(|| {
                Decimal((weighted / &self.value).with_scale_round(digits, RoundingMode::HalfUp))
            })
        };
        Cohort {
            size_class,
            side,
            count: self.count,
            average_leverage: average(self.value_x_leverage, 4),
            average_entry_price: average(self.value_x_entry, 8),
            position_value: Decimal(self.value),
            liquidation_value: Decimal(self.liq_value),
            u_pnl: Decimal(self.upnl),
        }
    }
}

/// The order of a market's cohorts: each size class, long then short.
pub const COHORT_ORDER: [(SizeClass, Direction); 6] = [
    (SizeClass::Shrimp, Direction::Long),
    (SizeClass::Shrimp, Direction::Short),
    (SizeClass::Shark, Direction::Long),
    (SizeClass::Shark, Direction::Short),
    (SizeClass::Whale, Direction::Long),
    (SizeClass::Whale, Direction::Short),
];

pub(crate) fn slot(size_class: SizeClass, side: Direction) -> usize {
    COHORT_ORDER
        .iter()
        .position(|&c| c == (size_class, side))
        .expect("every pair has a slot")
}

/// The cohorts of every market (in `markets` order) over `positions` (any
/// order), each position classed by its wallet's `sizeClass`. Positions of
/// markets or wallets not given are ignored; `materialize` has already
/// rejected them.
pub fn cohorts(
    observed_at: OffsetDateTime,
    markets: &[Market],
    wallets: &[Wallet],
    positions: &[MarketPosition],
) -> Vec<MarketCohorts> {
    // `materialize` orders wallets by address and markets by symbol; any
    // other order is looked up through a map.
    let class_by_address: Option<HashMap<&str, SizeClass>> =
        (!wallets.is_sorted_by(|a, b| a.address <= b.address)).then(|| {
            wallets
                .iter()
                .map(|w| (w.address.as_str(), w.size_class))
                .collect()
        });
    let class_of = |address: &str| -> Option<SizeClass> {
        match &class_by_address {
            Some(map) => map.get(address).copied(),
            None => wallets
                .binary_search_by(|w| w.address.as_str().cmp(address))
                .ok()
                .map(|i| wallets[i].size_class),
        }
    };
    let market_by_symbol: Option<HashMap<&str, usize>> =
        (!markets.is_sorted_by(|a, b| a.symbol <= b.symbol)).then(|| {
            markets
                .iter()
                .enumerate()
                .map(|(i, m)| (m.symbol.as_str(), i))
                .collect()
        });
    let market_of = |symbol: &str| match &market_by_symbol {
        Some(map) => map.get(symbol).copied(),
        None => markets
            .binary_search_by(|m| m.symbol.as_str().cmp(symbol))
            .ok(),
    };
    let mut accs: Vec<[Acc; 6]> = markets.iter().map(|_| Default::default()).collect();
    // Positions come grouped by market and wallet: remember the last lookups.
    let mut last_market: Option<(&str, Option<usize>)> = None;
    for p in positions {
        let market = match last_market {
            Some((symbol, m)) if symbol == p.symbol => m,
            _ => {
                let m = market_of(&p.symbol);
                last_market = Some((&p.symbol, m));
                m
            }
        };
        let (Some(m), Some(class)) = (market, class_of(&p.address)) else {
            continue;
        };
        accs[m][slot(class, p.direction)].add(p);
    }
    markets
        .iter()
        .zip(accs)
        .map(|(m, accs)| MarketCohorts {
            symbol: m.symbol.clone(),
            observed_at,
            items: accs
                .into_iter()
                .zip(COHORT_ORDER)
                .map(|(acc, (class, side))| acc.finish(class, side))
                .collect(),
            coverage: Coverage::ScannedWallets,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn cohorts_sum_to_the_market() {
        let m = crate::materialize("perpnet", fixtures::sample()).unwrap();
        assert!(!m.positions.is_empty());
        assert_eq!(m.cohorts.len(), m.markets.len());
        for (market, c) in m.markets.iter().zip(&m.cohorts) {
            assert_eq!(market.symbol, c.symbol);
            let side = |d: Direction| c.items.iter().filter(move |i| i.side == d);
            let count = |d| side(d).map(|i| i.count).sum::<u64>();
            let liq = |d| {
                side(d)
                    .map(|i| i.liquidation_value.0.clone())
                    .sum::<BigDecimal>()
            };
            assert_eq!(count(Direction::Long), market.long_count);
            assert_eq!(count(Direction::Short), market.short_count);
            assert_eq!(liq(Direction::Long), market.long_liquidation_value.0);
            assert_eq!(liq(Direction::Short), market.short_liquidation_value.0);
            for item in &c.items {
                assert_eq!(item.average_leverage.is_none(), item.count == 0);
            }
        }
    }
}
