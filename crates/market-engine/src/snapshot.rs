//! One materialized data version, indexed for serving.
//!
//! Every documented order is precomputed once per version, so a page request
//! is a binary search for the cursor plus a slice: no request sorts, filters
//! or aggregates over all positions.

use std::cmp::Ordering;
use std::collections::HashMap;

use bigdecimal::BigDecimal;
use market_model::{
    Direction, LiquidityDay, Market, MarketPosition, MarketSort, SizeClass, SortOrder, Wallet,
    WalletDirection, WalletSort,
};
use time::OffsetDateTime;

use crate::aggregate::Materialized;

/// The keyset position of a whale-positions page: the last item's
/// `positionValue` and address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PositionKey {
    /// `positionValue` of the last item served.
    pub value: BigDecimal,
    /// Address of the last item served (the tie-breaker).
    pub address: String,
}

/// The keyset position of a wallets page: the last item's sort value
/// (null for wallets without analytics) and address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalletKey {
    /// Sort value of the last item served.
    pub value: Option<BigDecimal>,
    /// Address of the last item served (the tie-breaker).
    pub address: String,
}

/// Filters and order of a wallet listing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WalletOrder {
    /// Sort key.
    pub sort: WalletSort,
    /// Sort order.
    pub order: SortOrder,
    /// Size-class filter.
    pub size: Option<SizeClass>,
    /// Direction filter (wallets whose net direction is this).
    pub direction: Option<Direction>,
}

/// A page of borrowed items.
#[derive(Debug)]
pub struct Page<'a, T> {
    /// Items of the page, in order.
    pub items: Vec<&'a T>,
    /// Whether more items follow the last one.
    pub has_more: bool,
}

/// How an asset path segment resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssetLookup {
    /// The index of the market.
    Found(usize),
    /// No market has this symbol.
    Unknown,
    /// A canonical symbol that several HIP-3 dexs list; the candidates' symbols.
    Ambiguous(Vec<String>),
}

/// One immutable, indexed data version.
#[derive(Debug)]
pub struct Snapshot {
    /// Data version (monotonic).
    pub version: i64,
    /// When the scan behind this version was observed.
    pub observed_at: OffsetDateTime,
    markets: Vec<Market>,
    by_symbol: HashMap<String, usize>,
    by_canonical: HashMap<String, Vec<usize>>,
    market_orders: HashMap<(MarketSort, SortOrder), Vec<u32>>,
    positions: Vec<MarketPosition>,
    /// Per market: all, long, short position indices, by value desc then address.
    asset_positions: Vec<[Vec<u32>; 3]>,
    wallets: Vec<Wallet>,
    wallet_orders: HashMap<WalletOrder, Vec<u32>>,
    current_days: Vec<LiquidityDay>,
}

fn market_value(m: &Market, sort: MarketSort) -> &BigDecimal {
    match sort {
        MarketSort::Volume24h => &m.volume24h.0,
        MarketSort::OpenInterest => &m.open_interest.0,
        MarketSort::Change24hPct => &m.change24h_pct.0,
        MarketSort::TotalLiquidationValue => &m.total_liquidation_value.0,
    }
}

/// The value a wallet is sorted by under `sort`.
pub fn wallet_value(w: &Wallet, sort: WalletSort) -> Option<&BigDecimal> {
    match sort {
        WalletSort::AccountTotalValue => Some(&w.account_total_value.0),
        WalletSort::TotalPositionValue => Some(&w.total_position_value.0),
        WalletSort::NetPnl => w.net_pnl.as_ref().map(|d| &d.0),
        WalletSort::Roi => w.roi.as_ref().map(|d| &d.0),
        WalletSort::WinRate => w.win_rate.as_ref().map(|d| &d.0),
    }
}

/// Compares (value, address) keys in wallet-listing order: nulls last in
/// both orders, then the value in `order`, then address ascending.
fn cmp_wallet_keys(
    a: (Option<&BigDecimal>, &str),
    b: (Option<&BigDecimal>, &str),
    order: SortOrder,
) -> Ordering {
    let by_value = match (a.0, b.0) {
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
        (Some(x), Some(y)) => match order {
            SortOrder::Asc => x.cmp(y),
            SortOrder::Desc => y.cmp(x),
        },
    };
    by_value.then_with(|| a.1.cmp(b.1))
}

/// Compares (value, address) keys in position order: value descending, then address.
fn cmp_position_keys(a: (&BigDecimal, &str), b: (&BigDecimal, &str)) -> Ordering {
    b.0.cmp(a.0).then_with(|| a.1.cmp(b.1))
}

fn direction_matches(w: WalletDirection, d: Option<Direction>) -> bool {
    match d {
        None => true,
        Some(Direction::Long) => w == WalletDirection::Long,
        Some(Direction::Short) => w == WalletDirection::Short,
    }
}

impl Snapshot {
    /// Indexes a materialized version.
    pub fn build(version: i64, data: Materialized) -> Snapshot {
        let Materialized {
            observed_at,
            mut markets,
            wallets,
            mut positions,
            mut current_days,
        } = data;
        markets.sort_by(|a, b| a.symbol.cmp(&b.symbol));
        current_days.sort_by(|a, b| a.network_asset_symbol.cmp(&b.network_asset_symbol));

        let by_symbol: HashMap<String, usize> = markets
            .iter()
            .enumerate()
            .map(|(i, m)| (m.symbol.clone(), i))
            .collect();
        let mut by_canonical: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, m) in markets.iter().enumerate() {
            if let Some((_, coin)) = m.symbol.split_once(':') {
                by_canonical.entry(coin.to_owned()).or_default().push(i);
            }
        }

        let mut market_orders = HashMap::new();
        for &sort in MarketSort::ALL {
            for order in [SortOrder::Asc, SortOrder::Desc] {
                let mut idx: Vec<u32> = (0..markets.len() as u32).collect();
                idx.sort_by(|&a, &b| {
                    let (ma, mb) = (&markets[a as usize], &markets[b as usize]);
                    let by_value = market_value(ma, sort).cmp(market_value(mb, sort));
                    let by_value = if order == SortOrder::Desc {
                        by_value.reverse()
                    } else {
                        by_value
                    };
                    by_value.then_with(|| ma.symbol.cmp(&mb.symbol))
                });
                market_orders.insert((sort, order), idx);
            }
        }

        positions.sort_by(|a, b| {
            a.symbol.cmp(&b.symbol).then_with(|| {
                cmp_position_keys(
                    (&a.position_value.0, &a.address),
                    (&b.position_value.0, &b.address),
                )
            })
        });
        let mut asset_positions: Vec<[Vec<u32>; 3]> =
            markets.iter().map(|_| Default::default()).collect();
        for (i, p) in positions.iter().enumerate() {
            if let Some(&mi) = by_symbol.get(&p.symbol) {
                let lists = &mut asset_positions[mi];
                lists[0].push(i as u32);
                lists[if p.direction == Direction::Long { 1 } else { 2 }].push(i as u32);
            }
        }

        let mut wallet_orders = HashMap::new();
        for &sort in WalletSort::ALL {
            for order in [SortOrder::Asc, SortOrder::Desc] {
                let mut all: Vec<u32> = (0..wallets.len() as u32).collect();
                all.sort_by(|&a, &b| {
                    let (wa, wb) = (&wallets[a as usize], &wallets[b as usize]);
                    cmp_wallet_keys(
                        (wallet_value(wa, sort), &wa.address),
                        (wallet_value(wb, sort), &wb.address),
                        order,
                    )
                });
                for size in [
                    None,
                    Some(SizeClass::Shrimp),
                    Some(SizeClass::Shark),
                    Some(SizeClass::Whale),
                ] {
                    for direction in [None, Some(Direction::Long), Some(Direction::Short)] {
                        let filtered: Vec<u32> = all
                            .iter()
                            .copied()
                            .filter(|&i| {
                                let w = &wallets[i as usize];
                                size.is_none_or(|s| w.size_class == s)
                                    && direction_matches(w.direction, direction)
                            })
                            .collect();
                        wallet_orders.insert(
                            WalletOrder {
                                sort,
                                order,
                                size,
                                direction,
                            },
                            filtered,
                        );
                    }
                }
            }
        }

        Snapshot {
            version,
            observed_at,
            markets,
            by_symbol,
            by_canonical,
            market_orders,
            positions,
            asset_positions,
            wallets,
            wallet_orders,
            current_days,
        }
    }

    /// Number of tracked assets.
    pub fn asset_count(&self) -> usize {
        self.markets.len()
    }

    /// Every market in the requested order (ties by symbol ascending).
    pub fn markets(&self, sort: MarketSort, order: SortOrder) -> impl Iterator<Item = &Market> {
        self.market_orders[&(sort, order)]
            .iter()
            .map(move |&i| &self.markets[i as usize])
    }

    /// Market by index.
    pub fn market(&self, index: usize) -> &Market {
        &self.markets[index]
    }

    /// Resolves an asset path segment: an exact network symbol first, then a
    /// canonical symbol listed by exactly one HIP-3 dex.
    pub fn lookup_asset(&self, segment: &str) -> AssetLookup {
        if let Some(&i) = self.by_symbol.get(segment) {
            return AssetLookup::Found(i);
        }
        match self.by_canonical.get(segment).map(Vec::as_slice) {
            Some([i]) => AssetLookup::Found(*i),
            Some(many) if !many.is_empty() => AssetLookup::Ambiguous(
                many.iter()
                    .map(|&i| self.markets[i].symbol.clone())
                    .collect(),
            ),
            _ => AssetLookup::Unknown,
        }
    }

    /// The `current` liquidity day of a market.
    pub fn current_day(&self, index: usize) -> &LiquidityDay {
        &self.current_days[index]
    }

    /// The `current` liquidity days of every market, by symbol.
    pub fn current_days(&self) -> &[LiquidityDay] {
        &self.current_days
    }

    /// The UTC date of the `current` liquidity day.
    pub fn current_date(&self) -> time::Date {
        self.observed_at.date()
    }

    /// Keyset key of a position.
    pub fn position_key(p: &MarketPosition) -> PositionKey {
        PositionKey {
            value: p.position_value.0.clone(),
            address: p.address.clone(),
        }
    }

    /// A page of a market's positions after `after`, by value descending then address.
    pub fn positions_page(
        &self,
        market: usize,
        direction: Option<Direction>,
        after: Option<&PositionKey>,
        limit: usize,
    ) -> Page<'_, MarketPosition> {
        let list = &self.asset_positions[market][match direction {
            None => 0,
            Some(Direction::Long) => 1,
            Some(Direction::Short) => 2,
        }];
        let start = after.map_or(0, |k| {
            list.partition_point(|&i| {
                let p = &self.positions[i as usize];
                cmp_position_keys((&p.position_value.0, &p.address), (&k.value, &k.address))
                    != Ordering::Greater
            })
        });
        let end = (start + limit).min(list.len());
        Page {
            items: list[start..end]
                .iter()
                .map(|&i| &self.positions[i as usize])
                .collect(),
            has_more: end < list.len(),
        }
    }

    /// Keyset key of a wallet under `sort`.
    pub fn wallet_key(w: &Wallet, sort: WalletSort) -> WalletKey {
        WalletKey {
            value: wallet_value(w, sort).cloned(),
            address: w.address.clone(),
        }
    }

    /// A page of wallets after `after` and the number of wallets matching the filters.
    pub fn wallets_page(
        &self,
        q: WalletOrder,
        after: Option<&WalletKey>,
        limit: usize,
    ) -> (Page<'_, Wallet>, usize) {
        let list = &self.wallet_orders[&q];
        let start = after.map_or(0, |k| {
            list.partition_point(|&i| {
                let w = &self.wallets[i as usize];
                cmp_wallet_keys(
                    (wallet_value(w, q.sort), &w.address),
                    (k.value.as_ref(), &k.address),
                    q.order,
                ) != Ordering::Greater
            })
        });
        let end = (start + limit).min(list.len());
        let page = Page {
            items: list[start..end]
                .iter()
                .map(|&i| &self.wallets[i as usize])
                .collect(),
            has_more: end < list.len(),
        };
        (page, list.len())
    }

    /// Every wallet, by address.
    pub fn wallets(&self) -> &[Wallet] {
        &self.wallets
    }

    /// Every position, by symbol then value descending.
    pub fn positions(&self) -> &[MarketPosition] {
        &self.positions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::materialize;
    use crate::aggregate::tests::{position, sample, wallet};

    fn snapshot() -> Snapshot {
        let mut input = sample();
        // many BTC positions with ties on value to exercise the tie-breaker
        for i in 0..40 {
            let addr = format!("0x1{i:02}");
            input.wallets.push(wallet(
                &addr,
                &format!("{}", 1000 + (i % 7) * 100_000),
                i % 3 == 0,
            ));
            let dir = if i % 2 == 0 {
                Direction::Long
            } else {
                Direction::Short
            };
            input.positions.push(position(
                &addr,
                "BTC",
                dir,
                &format!("{}", 100 + (i % 5)),
                None,
            ));
        }
        Snapshot::build(3, materialize("perpnet", input).unwrap())
    }

    #[test]
    fn positions_pages_cover_everything_once_in_order() {
        let s = snapshot();
        let AssetLookup::Found(btc) = s.lookup_asset("BTC") else {
            panic!()
        };
        for direction in [None, Some(Direction::Long), Some(Direction::Short)] {
            let mut seen = Vec::new();
            let mut after: Option<PositionKey> = None;
            loop {
                let page = s.positions_page(btc, direction, after.as_ref(), 7);
                seen.extend(
                    page.items
                        .iter()
                        .map(|p| (p.position_value.0.clone(), p.address.clone())),
                );
                if !page.has_more {
                    break;
                }
                after = Some(Snapshot::position_key(page.items.last().unwrap()));
            }
            let expected = s
                .positions()
                .iter()
                .filter(|p| p.symbol == "BTC" && direction.is_none_or(|d| p.direction == d))
                .count();
            assert_eq!(seen.len(), expected);
            assert!(seen
                .windows(2)
                .all(|w| w[0].0 > w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1)));
        }
    }

    #[test]
    fn wallet_pages_put_nulls_last_and_count_matches() {
        let s = snapshot();
        for order in [SortOrder::Asc, SortOrder::Desc] {
            let q = WalletOrder {
                sort: WalletSort::NetPnl,
                order,
                size: None,
                direction: None,
            };
            let mut seen = Vec::new();
            let mut after: Option<WalletKey> = None;
            loop {
                let (page, total) = s.wallets_page(q, after.as_ref(), 5);
                assert_eq!(total, s.wallets().len());
                seen.extend(
                    page.items
                        .iter()
                        .map(|w| (w.net_pnl.clone(), w.address.clone())),
                );
                if !page.has_more {
                    break;
                }
                after = Some(Snapshot::wallet_key(
                    page.items.last().unwrap(),
                    WalletSort::NetPnl,
                ));
            }
            assert_eq!(seen.len(), s.wallets().len());
            let first_null = seen.iter().position(|(v, _)| v.is_none()).unwrap();
            assert!(seen[first_null..].iter().all(|(v, _)| v.is_none()));
            assert!(seen[first_null..].windows(2).all(|w| w[0].1 < w[1].1));
        }
        let whales = WalletOrder {
            sort: WalletSort::AccountTotalValue,
            order: SortOrder::Desc,
            size: Some(SizeClass::Whale),
            direction: None,
        };
        let (page, total) = s.wallets_page(whales, None, 100);
        assert_eq!(
            total,
            s.wallets()
                .iter()
                .filter(|w| w.size_class == SizeClass::Whale)
                .count()
        );
        assert!(page.items.iter().all(|w| w.size_class == SizeClass::Whale));
    }

    #[test]
    fn asset_lookup() {
        let s = snapshot();
        assert!(matches!(s.lookup_asset("xyz:TSLA"), AssetLookup::Found(_)));
        assert_eq!(s.lookup_asset("TSLA"), s.lookup_asset("xyz:TSLA"));
        assert_eq!(s.lookup_asset("btc"), AssetLookup::Unknown);
        assert_eq!(s.lookup_asset("xyz:"), AssetLookup::Unknown);
        let mut input = sample();
        input.quotes.push(crate::aggregate::Quote {
            symbol: "abc:TSLA".into(),
            ..input.quotes[1].clone()
        });
        let s = Snapshot::build(1, materialize("perpnet", input).unwrap());
        assert_eq!(
            s.lookup_asset("TSLA"),
            AssetLookup::Ambiguous(vec!["abc:TSLA".into(), "xyz:TSLA".into()])
        );
    }

    #[test]
    fn market_orders_break_ties_by_symbol() {
        let s = snapshot();
        let syms: Vec<&str> = s
            .markets(MarketSort::Volume24h, SortOrder::Desc)
            .map(|m| m.symbol.as_str())
            .collect();
        assert_eq!(syms, ["BTC", "ETH", "xyz:TSLA"], "equal volumes: by symbol");
        let asc: Vec<&str> = s
            .markets(MarketSort::OpenInterest, SortOrder::Asc)
            .map(|m| m.symbol.as_str())
            .collect();
        assert_eq!(asc, ["BTC", "ETH", "xyz:TSLA"]);
    }
}
