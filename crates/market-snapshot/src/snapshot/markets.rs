//! The per-market part of a version: the markets with their rendered
//! lists, current liquidity days and cohorts (rebuilt whole by every
//! version), and each market's position items in page order (shared
//! between versions when unchanged).

use std::collections::HashMap;
use std::sync::Arc;

use bigdecimal::BigDecimal;
use market_model::{
    Coverage, Direction, LiquidityDay, Market, MarketCohorts, MarketList, MarketSort,
    NetworkCoverage, SortOrder,
};
use time::OffsetDateTime;

use market_engine::SortKey;

use super::pages::JsonItems;

/// A rendered position and its keys.
#[derive(Debug)]
pub(super) struct PositionItem {
    pub(super) json: Box<[u8]>,
    /// `positionValue`.
    pub(super) value: SortKey,
    /// The wallet's slot in the version's wallet table (the address is there).
    pub(super) wallet: u32,
    pub(super) direction: Direction,
}

/// The positions of one market in page order (value descending, then
/// address), and the long and short subsets as indexes into it.
#[derive(Debug, Default)]
pub(super) struct MarketPositions {
    pub(super) all: Vec<Arc<PositionItem>>,
    pub(super) long: Vec<u32>,
    pub(super) short: Vec<u32>,
}

impl MarketPositions {
    pub(super) fn new(all: Vec<Arc<PositionItem>>) -> MarketPositions {
        let (mut long, mut short) = (Vec::new(), Vec::new());
        for (i, p) in all.iter().enumerate() {
            match p.direction {
                Direction::Long => long.push(i as u32),
                Direction::Short => short.push(i as u32),
            }
        }
        MarketPositions { all, long, short }
    }
}

/// The per-asset part of a version, rebuilt whole by every version (a few
/// hundred markets).
#[derive(Debug)]
pub(super) struct MarketsPart {
    pub(super) markets: Vec<Market>,
    pub(super) market_json: JsonItems,
    /// (foldhash: looked up once per position when a version is built.)
    pub(super) by_symbol: HashMap<String, usize, foldhash::fast::RandomState>,
    pub(super) by_canonical: HashMap<String, Vec<usize>>,
    /// The whole `MarketList` body per order.
    pub(super) market_lists: HashMap<(MarketSort, SortOrder), Vec<u8>>,
    /// By market index (every market has its current day).
    pub(super) current_days: JsonItems,
    pub(super) current_day_symbols: Vec<String>,
    /// The rendered `NetworkCoverage`.
    pub(super) coverage_json: Vec<u8>,
    /// The rendered `MarketCohorts` by market index.
    pub(super) cohorts_json: JsonItems,
}

/// A [`MarketsPart`] without its lookups (which are derived): what a saved
/// snapshot holds of it.
#[derive(Debug)]
pub(super) struct Rendered {
    pub(super) markets: Vec<Market>,
    pub(super) market_json: JsonItems,
    pub(super) market_lists: HashMap<(MarketSort, SortOrder), Vec<u8>>,
    pub(super) current_days: JsonItems,
    pub(super) current_day_symbols: Vec<String>,
    pub(super) coverage_json: Vec<u8>,
    pub(super) cohorts_json: JsonItems,
}

impl MarketsPart {
    pub(super) fn new(
        mut markets: Vec<Market>,
        mut current_days: Vec<LiquidityDay>,
        cohorts: Vec<MarketCohorts>,
        coverage: &NetworkCoverage,
        observed_at: OffsetDateTime,
    ) -> MarketsPart {
        markets.sort_by(|a, b| a.symbol.cmp(&b.symbol));
        current_days.sort_by(|a, b| a.network_asset_symbol.cmp(&b.network_asset_symbol));
        let mut market_json = JsonItems::default();
        for m in &markets {
            market_json.push(m);
        }
        let mut market_lists = HashMap::new();
        for &sort in MarketSort::ALL {
            for order in [SortOrder::Asc, SortOrder::Desc] {
                let mut idx: Vec<usize> = (0..markets.len()).collect();
                idx.sort_by(|&a, &b| {
                    let (ma, mb) = (&markets[a], &markets[b]);
                    let by_value = market_value(ma, sort).cmp(market_value(mb, sort));
                    let by_value = if order == SortOrder::Desc {
                        by_value.reverse()
                    } else {
                        by_value
                    };
                    by_value.then_with(|| ma.symbol.cmp(&mb.symbol))
                });
                let body = MarketList {
                    items: idx.iter().map(|&i| markets[i].clone()).collect(),
                    coverage: Coverage::ScannedWallets,
                };
                market_lists.insert(
                    (sort, order),
                    serde_json::to_vec(&body).expect("model types serialize"),
                );
            }
        }
        let mut current_json = JsonItems::default();
        for d in &current_days {
            current_json.push(d);
        }
        // A version written before cohorts were stored has none: its
        // markets answer with no cohort rather than with made-up zeros.
        let mut cohorts_by_symbol: HashMap<String, MarketCohorts> =
            cohorts.into_iter().map(|c| (c.symbol.clone(), c)).collect();
        let mut cohorts_json = JsonItems::default();
        for m in &markets {
            let c = cohorts_by_symbol
                .remove(&m.symbol)
                .unwrap_or_else(|| MarketCohorts {
                    symbol: m.symbol.clone(),
                    observed_at,
                    items: Vec::new(),
                    coverage: Coverage::ScannedWallets,
                });
            cohorts_json.push(&c);
        }
        MarketsPart::indexed(Rendered {
            markets,
            market_json,
            market_lists,
            current_days: current_json,
            current_day_symbols: current_days
                .into_iter()
                .map(|d| d.network_asset_symbol)
                .collect(),
            coverage_json: serde_json::to_vec(coverage).expect("model types serialize"),
            cohorts_json,
        })
    }

    /// The part of `rendered`, with its symbol lookups.
    pub(super) fn indexed(rendered: Rendered) -> MarketsPart {
        let Rendered {
            markets,
            market_json,
            market_lists,
            current_days,
            current_day_symbols,
            coverage_json,
            cohorts_json,
        } = rendered;
        let by_symbol: HashMap<String, usize, foldhash::fast::RandomState> = markets
            .iter()
            .enumerate()
            .map(|(i, m)| (m.symbol.clone(), i))
            .collect();
        let mut by_canonical: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, m) in markets.iter().enumerate() {
            if market_model::symbol::dex_of(&m.symbol).is_some() {
                let coin = market_model::symbol::canonical_of(&m.symbol);
                by_canonical.entry(coin.to_owned()).or_default().push(i);
            }
        }
        MarketsPart {
            markets,
            market_json,
            by_symbol,
            by_canonical,
            market_lists,
            current_days,
            current_day_symbols,
            coverage_json,
            cohorts_json,
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.market_json.heap_bytes()
            + self.current_days.heap_bytes()
            + self.cohorts_json.heap_bytes()
            + self.market_lists.values().map(Vec::capacity).sum::<usize>()
            + self.coverage_json.capacity()
    }
}

fn market_value(m: &Market, sort: MarketSort) -> &BigDecimal {
    match sort {
        MarketSort::Volume24h => &m.volume24h.0,
        MarketSort::OpenInterest => &m.open_interest.0,
        MarketSort::Change24hPct => &m.change24h_pct.0,
        MarketSort::TotalLiquidationValue => &m.total_liquidation_value.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::testing::snapshot;

    #[test]
    fn market_orders_break_ties_by_symbol() {
        let (s, _) = snapshot();
        let symbols = |sort, order| -> Vec<String> {
            let list: MarketList = serde_json::from_slice(s.market_list_json(sort, order)).unwrap();
            list.items.into_iter().map(|m| m.symbol).collect()
        };
        assert_eq!(
            symbols(MarketSort::Volume24h, SortOrder::Desc),
            ["BTC", "ETH", "xyz:TSLA"],
            "equal volumes: by symbol"
        );
        assert_eq!(
            symbols(MarketSort::OpenInterest, SortOrder::Asc),
            ["BTC", "ETH", "xyz:TSLA"]
        );
    }
}
