//! The per-market part of a version: the markets with their rendered
//! lists, current liquidity days and cohorts (rebuilt whole by every
//! version), each market's positions in page order as references into the
//! wallets' lists (shared between versions when unchanged), and how those
//! lists are assembled from positions in page order.

use std::cmp::Ordering;
use std::collections::HashMap;

use bigdecimal::BigDecimal;
use market_model::{
    Coverage, Direction, LiquidityDay, LiquidityDayText, Market, MarketCohorts, MarketList,
    MarketSort, NetworkCoverage, SortOrder,
};
use time::OffsetDateTime;

use market_engine::SortKey;

use super::codes;
use super::pages::JsonItems;
use super::WalletPositions;

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

/// Where a market's position is held: item `index` of its wallet's list
/// (the version's `by_wallet[slot]`), and its direction. A market's list
/// holds these, not the items, so that patching it copies 8 bytes an entry
/// and reads no item (an item is read where its wallet's list is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PositionRef {
    pub(super) slot: u32,
    /// The index in the wallet's list, and the direction in the top bit
    /// (set for long).
    index_long: u32,
}

impl PositionRef {
    const LONG: u32 = 1 << 31;

    pub(super) fn new(slot: u32, index: usize, direction: Direction) -> PositionRef {
        let index = u32::try_from(index)
            .ok()
            .filter(|&i| i < Self::LONG)
            .expect("a wallet holds at most one position a market");
        let long = match direction {
            Direction::Long => Self::LONG,
            Direction::Short => 0,
        };
        PositionRef {
            slot,
            index_long: index | long,
        }
    }

    pub(super) fn index(self) -> usize {
        (self.index_long & !Self::LONG) as usize
    }

    pub(super) fn is_long(self) -> bool {
        self.index_long & Self::LONG != 0
    }
}

/// The positions of one market in page order (value descending, then
/// address), each with its value's code in that order (never decreasing
/// along the list; see `codes`), and the long and short subsets as indexes
/// into it.
#[derive(Debug, Default)]
pub(super) struct MarketPositions {
    pub(super) refs: Vec<PositionRef>,
    pub(super) codes: Vec<u64>,
    pub(super) long: Vec<u32>,
    pub(super) short: Vec<u32>,
}

impl MarketPositions {
    pub(super) fn new(refs: Vec<PositionRef>, codes: Vec<u64>) -> MarketPositions {
        MarketPositions::split(refs, codes, Vec::with_capacity)
    }

    /// [`MarketPositions::new`], its long and short lists from `list`
    /// (an empty list with room for the count it is given).
    pub(super) fn split(
        refs: Vec<PositionRef>,
        codes: Vec<u64>,
        list: impl Fn(usize) -> Vec<u32>,
    ) -> MarketPositions {
        debug_assert_eq!(refs.len(), codes.len());
        // Each subset allocated once, at its size.
        let longs = refs.iter().filter(|r| r.is_long()).count();
        let (mut long, mut short) = (list(longs), list(refs.len() - longs));
        for (i, r) in refs.iter().enumerate() {
            match r.is_long() {
                true => long.push(i as u32),
                false => short.push(i as u32),
            }
        }
        MarketPositions {
            refs,
            codes,
            long,
            short,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.refs.len()
    }
}

/// The code of a position's value in page order (descending).
pub(super) fn value_code(value: &SortKey) -> u64 {
    codes::code(Some(value), SortOrder::Desc)
}

/// The lists of some wallets' positions: each wallet's items (by value
/// descending, then symbol), and each market's references to them in page
/// order with their codes.
pub(super) struct Assembled {
    /// (slot, its items), by slot; only slots that hold a position.
    pub(super) wallets: Vec<(u32, WalletPositions)>,
    /// By market index: references in page order, and their codes.
    pub(super) markets: Vec<(Vec<PositionRef>, Vec<u64>)>,
}

/// Moves `by_market` (each market's items in page order, by market index,
/// so in symbol order) into their wallets' lists (`slots` is one more than
/// the largest slot) and refers to them from each market's list in the same
/// order.
///
/// Each wallet's list is allocated once, at its size: the places are
/// grouped by wallet in one flat array first (a vector a wallet, grown
/// item by item, left the heap full of holes at a start).
pub(super) fn assemble(by_market: Vec<Vec<PositionItem>>, slots: usize) -> Assembled {
    // Each wallet's places (market, place in the market's list), in market
    // order, back to back: `starts[slot]..starts[slot + 1]`.
    let mut starts = vec![0u32; slots + 1];
    for item in by_market.iter().flatten() {
        starts[item.wallet as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut filled = starts.clone();
    // Each place with its item's value code: a wallet's places are sorted
    // on the codes, side by side, and an item (elsewhere in memory) is read
    // only where two codes tie inexactly.
    let mut places = vec![(0u64, 0u32, 0u32); starts[slots] as usize];
    let mut markets: Vec<(Vec<PositionRef>, Vec<u64>)> = Vec::with_capacity(by_market.len());
    for (m, items) in by_market.iter().enumerate() {
        let codes: Vec<u64> = items.iter().map(|p| value_code(&p.value)).collect();
        for (at, (item, &code)) in items.iter().zip(&codes).enumerate() {
            let next = &mut filled[item.wallet as usize];
            places[*next as usize] = (code, m as u32, at as u32);
            *next += 1;
        }
        // Placeholders, each overwritten below: every place has one item.
        let unset = PositionRef {
            slot: 0,
            index_long: 0,
        };
        markets.push((vec![unset; items.len()], codes));
    }
    // (`Option` costs no space here: the items are moved out one by one.)
    let mut by_market: Vec<Vec<Option<PositionItem>>> = by_market
        .into_iter()
        .map(|items| items.into_iter().map(Some).collect())
        .collect();
    let mut wallets = Vec::new();
    for slot in 0..slots {
        let list = &mut places[starts[slot] as usize..starts[slot + 1] as usize];
        if list.is_empty() {
            continue;
        }
        // By value descending (codes ascending); stable, so equal values
        // stay in symbol order.
        list.sort_by(|&(ca, ma, a), &(cb, mb, b)| {
            let value = |m: u32, at: u32| {
                &by_market[m as usize][at as usize]
                    .as_ref()
                    .expect("placed once")
                    .value
            };
            ca.cmp(&cb).then_with(|| match codes::exact(ca) {
                true => Ordering::Equal,
                false => value(mb, b).cmp(value(ma, a)),
            })
        });
        let items: WalletPositions = list
            .iter()
            .enumerate()
            .map(|(k, &(_, m, at))| {
                let item = by_market[m as usize][at as usize]
                    .take()
                    .expect("placed once");
                markets[m as usize].0[at as usize] =
                    PositionRef::new(slot as u32, k, item.direction);
                item
            })
            .collect();
        wallets.push((slot as u32, items));
    }
    Assembled { wallets, markets }
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

/// Room for a day's fields besides its levels when rendered (about 300
/// bytes): the rest, about 700 bytes a market, stays spare for the
/// version's life, nothing beside megabytes of levels.
const DAY_HEAD: usize = 1024;

/// A market's `current` liquidity day in a form a version renders: the
/// model's, or its stored text (levels not parsed).
pub(crate) trait CurrentDay {
    /// Its market's symbol.
    fn symbol(&self) -> &str;
    /// Renders it after the last of `items`.
    fn render(&self, items: &mut JsonItems);
    /// The bytes it renders to, when known without rendering it (0: not
    /// known).
    fn rendered_len(&self) -> usize;
    /// Its symbol, taken.
    fn into_symbol(self) -> String;
}

impl CurrentDay for LiquidityDay {
    fn symbol(&self) -> &str {
        &self.network_asset_symbol
    }
    fn render(&self, items: &mut JsonItems) {
        items.push(self);
    }
    fn rendered_len(&self) -> usize {
        0
    }
    fn into_symbol(self) -> String {
        self.network_asset_symbol
    }
}

impl CurrentDay for LiquidityDayText {
    fn symbol(&self) -> &str {
        &self.head().network_asset_symbol
    }
    fn render(&self, items: &mut JsonItems) {
        items.push_day_text(self);
    }
    fn rendered_len(&self) -> usize {
        // The levels as stored, and the day's head (under a kilobyte).
        self.levels_json().len() + DAY_HEAD
    }
    fn into_symbol(self) -> String {
        self.into_head().network_asset_symbol
    }
}

impl MarketsPart {
    pub(super) fn new<D: CurrentDay>(
        mut markets: Vec<Market>,
        mut current_days: Vec<D>,
        cohorts: Vec<MarketCohorts>,
        coverage: &NetworkCoverage,
        observed_at: OffsetDateTime,
    ) -> MarketsPart {
        markets.sort_by(|a, b| a.symbol.cmp(&b.symbol));
        current_days.sort_by(|a, b| a.symbol().cmp(b.symbol()));
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
        let mut current_json =
            JsonItems::with_capacity(current_days.iter().map(D::rendered_len).sum());
        for d in &current_days {
            d.render(&mut current_json);
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
                .map(CurrentDay::into_symbol)
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
    fn assemble_lists_each_wallets_positions_by_value_then_market() {
        // Values drawn from a few that tie exactly, a few whose codes tie
        // without being equal (they differ past a code's precision), and
        // others: each wallet's list is by value descending, equal values
        // in market order, as a plain stable sort of its items gives; each
        // market's references name its items.
        use std::str::FromStr;
        let values: Vec<BigDecimal> = [
            "5",
            "5.00",
            "-3",
            "0",
            "123456789.123456789012345678901",
            "123456789.123456789012345678902",
            "123456789.123456789012345678900",
            "0.000000000000000000001",
            "0.000000000000000000002",
            "77.5",
            "1e30",
            "1.0000000000000000000001e30",
            "-123456789.1234567890123456789012",
            "-123456789.1234567890123456789011",
        ]
        .iter()
        .map(|v| BigDecimal::from_str(v).unwrap())
        .collect();
        for seed in 0u64..40 {
            let mut x = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let mut next = |n: u64| {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                (x >> 33) % n
            };
            let (markets, slots) = (1 + next(6) as usize, 1 + next(30) as usize);
            let mut by_market: Vec<Vec<PositionItem>> = Vec::new();
            let mut want: Vec<Vec<(BigDecimal, String)>> = vec![Vec::new(); slots];
            for m in 0..markets {
                let mut items = Vec::new();
                for at in 0..next(25) {
                    let (wallet, v) = (next(slots as u64) as u32, next(14) as usize);
                    let value = &values[v];
                    let json = format!("{m}/{at}/{v}");
                    want[wallet as usize].push((value.clone(), json.clone()));
                    items.push(PositionItem {
                        json: json.into_bytes().into_boxed_slice(),
                        value: SortKey::new(value),
                        wallet,
                        direction: if at % 2 == 0 {
                            Direction::Long
                        } else {
                            Direction::Short
                        },
                    });
                }
                // A market's items come in page order: codes ascending.
                items.sort_by_key(|p| value_code(&p.value));
                by_market.push(items);
            }
            let Assembled {
                wallets,
                markets: lists,
            } = assemble(by_market, slots);
            for list in &mut want {
                list.sort_by(|a, b| b.0.cmp(&a.0));
            }
            let mut got: Vec<Vec<String>> = vec![Vec::new(); slots];
            for (slot, items) in &wallets {
                got[*slot as usize] = items
                    .iter()
                    .map(|p| String::from_utf8(p.json.to_vec()).unwrap())
                    .collect();
            }
            let want: Vec<Vec<String>> = want
                .into_iter()
                .map(|l| l.into_iter().map(|(_, j)| j).collect())
                .collect();
            // Equal values keep market order, and within a market the page
            // order: compare the values' order, then each tie's markets.
            assert_eq!(
                got.iter().map(Vec::len).collect::<Vec<_>>(),
                want.iter().map(Vec::len).collect::<Vec<_>>(),
                "seed {seed}"
            );
            let market = |j: &str| j.split('/').next().unwrap().parse::<usize>().unwrap();
            let value = |j: &str| &values[j.rsplit('/').next().unwrap().parse::<usize>().unwrap()];
            for (g, w) in got.iter().zip(&want) {
                let order = |l: &[String]| -> Vec<(BigDecimal, usize)> {
                    l.iter().map(|j| (value(j).clone(), market(j))).collect()
                };
                assert_eq!(order(g), order(w), "seed {seed}: a wallet's order");
            }
            for (m, (refs, _)) in lists.iter().enumerate() {
                for r in refs {
                    let (_, items) = wallets.iter().find(|(s, _)| *s == r.slot).unwrap();
                    let j = String::from_utf8(items[r.index()].json.to_vec()).unwrap();
                    assert_eq!(
                        market(&j),
                        m,
                        "seed {seed}: a reference names its market's item"
                    );
                }
            }
        }
    }

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
