//! What a request reads from a version: counts and memory, the rendered
//! market lists, markets and cohorts, asset lookup, and the keyset pages
//! of positions and wallets, each a binary search for the cursor plus
//! slices of items rendered at build.

use std::cmp::Ordering;

use bigdecimal::BigDecimal;
use market_model::{Direction, Market, MarketSort, SortOrder};

use market_engine::SortKey;

use super::markets::{PositionItem, PositionRef};
use super::pages::{
    cmp_position_keys, cmp_wallet_keys, partition, AssetLookup, ItemKey, KeyedPage, Page,
    PositionKey, WalletKey, WalletOrder, WalletView,
};
use super::wallets::WalletItem;
use super::Snapshot;

impl Snapshot {
    /// The rendered coverage report of this version.
    pub fn coverage_json(&self) -> &[u8] {
        &self.part.coverage_json
    }

    /// Approximate heap bytes of the rendered items and indexes (items
    /// shared with another version are counted in both), and of the lists
    /// kept from the version before for the next apply.
    pub fn heap_bytes(&self) -> usize {
        let items: usize = self
            .by_wallet
            .iter()
            .map(|l| {
                l.iter()
                    .map(|p| p.json.len() + std::mem::size_of::<PositionItem>())
                    .sum::<usize>()
                    + 16
            })
            .sum();
        let lists: usize = self
            .positions
            .iter()
            .map(|m| {
                m.refs.capacity() * std::mem::size_of::<PositionRef>()
                    + m.codes.capacity() * 8
                    + (m.long.capacity() + m.short.capacity()) * 4
            })
            .sum();
        let positions = items + lists + self.by_wallet.capacity() * 16;
        let wallets: usize = self
            .wallets
            .slots
            .iter()
            .flatten()
            .map(|w| w.json.len() + w.address.len() + std::mem::size_of::<WalletItem>() + 16)
            .sum::<usize>()
            + self.wallets.slots.capacity() * 8
            + self.wallets.by_address.capacity() * 4
            + self.wallets.address_codes.capacity() * 8
            + self.wallets.by_hash.table.capacity() * 5
            + self.wallets.flags.capacity()
            + self
                .wallets
                .orders
                .values()
                .map(|o| {
                    (o.all().len() + o.derived().map_or(0, |l| l.iter().map(Vec::capacity).sum()))
                        * 4
                        + o.codes.capacity() * 8
                })
                .sum::<usize>();
        self.part.heap_bytes() + positions + wallets + self.spare.heap_bytes()
    }

    /// The item `r` refers to.
    pub(super) fn position(&self, r: PositionRef) -> &PositionItem {
        &self.by_wallet[r.slot as usize][r.index()]
    }

    /// Number of tracked assets.
    pub fn asset_count(&self) -> usize {
        self.part.markets.len()
    }

    /// Number of served positions and wallets.
    pub fn counts(&self) -> (usize, usize) {
        (
            self.positions.iter().map(|m| m.len()).sum(),
            self.wallets.by_address.len(),
        )
    }

    /// The whole `MarketList` response body in the requested order (ties by
    /// symbol ascending), rendered once per version.
    pub fn market_list_json(&self, sort: MarketSort, order: SortOrder) -> &[u8] {
        &self.part.market_lists[&(sort, order)]
    }

    /// Market by index.
    pub fn market(&self, index: usize) -> &Market {
        &self.part.markets[index]
    }

    /// The rendered JSON of a market.
    pub fn market_json(&self, index: usize) -> &[u8] {
        self.part.market_json.item(index)
    }

    /// Resolves an asset path segment: an exact network symbol first, then a
    /// canonical symbol listed by exactly one HIP-3 dex.
    pub fn lookup_asset(&self, segment: &str) -> AssetLookup {
        if let Some(&i) = self.part.by_symbol.get(segment) {
            return AssetLookup::Found(i);
        }
        match self.part.by_canonical.get(segment).map(Vec::as_slice) {
            Some([i]) => AssetLookup::Found(*i),
            Some(many) if !many.is_empty() => AssetLookup::Ambiguous(
                many.iter()
                    .map(|&i| self.part.markets[i].symbol.clone())
                    .collect(),
            ),
            _ => AssetLookup::Unknown,
        }
    }

    /// The `current` liquidity days, by symbol: (symbol, rendered day).
    pub fn current_days(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.part
            .current_day_symbols
            .iter()
            .enumerate()
            .map(|(i, s)| (s.as_str(), self.part.current_days.item(i)))
    }

    /// The UTC date of the `current` liquidity day.
    pub fn current_date(&self) -> time::Date {
        self.observed_at.date()
    }

    /// A page of a market's positions after `after`, by value descending
    /// then address; with `min_value`, only positions worth at least that.
    pub fn positions_page(
        &self,
        market: usize,
        direction: Option<Direction>,
        min_value: Option<&BigDecimal>,
        after: Option<&PositionKey>,
        limit: usize,
    ) -> KeyedPage<'_> {
        let a = &self.positions[market];
        let subset = match direction {
            None => None,
            Some(Direction::Long) => Some(a.long.as_slice()),
            Some(Direction::Short) => Some(a.short.as_slice()),
        };
        let at = |k: usize| -> &PositionItem {
            self.position(a.refs[subset.map_or(k, |s| s[k] as usize)])
        };
        let len = subset.map_or(a.len(), <[u32]>::len);
        // Sorted by value descending: the positions worth at least the
        // minimum are a prefix.
        let len = min_value.map_or(len, |min| {
            let min = SortKey::new(min);
            partition(len, |k| at(k).value >= min)
        });
        let start = after.map_or(0, |key| {
            let value = SortKey::new(&key.value);
            partition(len, |k| {
                let p = at(k);
                cmp_position_keys(
                    (&p.value, self.wallets.address(p.wallet)),
                    (&value, &key.address),
                ) != Ordering::Greater
            })
        });
        let end = (start + limit).min(len);
        KeyedPage {
            page: Page {
                parts: (start..end).map(|k| &*at(k).json).collect(),
                len: end - start,
                has_more: end < len,
            },
            last: (end > start).then(|| {
                let p = at(end - 1);
                ItemKey {
                    value: Some(p.value.text()),
                    address: self.wallets.address(p.wallet),
                }
            }),
        }
    }

    /// A page of wallets after `after` and the number of wallets matching the filters.
    pub fn wallets_page(
        &self,
        q: WalletOrder,
        after: Option<&WalletKey>,
        limit: usize,
    ) -> (KeyedPage<'_>, usize) {
        let list = self.wallets.list(&q);
        let start = after.map_or(0, |key| {
            let value = key.value.as_ref().map(SortKey::new);
            partition(list.len(), |k| {
                let w = self.wallets.item(list[k]);
                cmp_wallet_keys(
                    (w.key(q.sort), &w.address),
                    (value.as_ref(), &key.address),
                    q.order,
                ) != Ordering::Greater
            })
        });
        let end = (start + limit).min(list.len());
        let page = KeyedPage {
            page: Page {
                parts: list[start..end]
                    .iter()
                    .map(|&s| &*self.wallets.item(s).json)
                    .collect(),
                len: end - start,
                has_more: end < list.len(),
            },
            last: (end > start).then(|| {
                let w = self.wallets.item(list[end - 1]);
                ItemKey {
                    value: w.key(q.sort).map(SortKey::text),
                    address: &w.address,
                }
            }),
        };
        (page, list.len())
    }

    /// The rendered cohorts of market `index`.
    pub fn cohorts_json(&self, index: usize) -> &[u8] {
        self.part.cohorts_json.item(index)
    }

    /// A wallet's rendered item and its positions' rendered items (by value
    /// descending, then symbol), or `None` when it is not served.
    pub fn wallet_view(&self, address: &str) -> Option<WalletView<'_>> {
        let slot = self.wallets.find(address)?;
        let positions = &self.by_wallet[slot as usize];
        Some(WalletView {
            wallet: &self.wallets.item(slot).json,
            positions: Page {
                parts: positions.iter().map(|p| &*p.json).collect(),
                len: positions.len(),
                has_more: false,
            },
        })
    }

    /// Whether `address` (lowercase) is served.
    pub fn serves_wallet(&self, address: &str) -> bool {
        self.wallets.find(address).is_some()
    }

    /// Number of wallets.
    pub fn wallet_count(&self) -> usize {
        self.wallets.by_address.len()
    }

    /// The addresses of the wallets served, in address order.
    pub fn wallet_addresses(&self) -> impl Iterator<Item = &str> {
        self.wallets
            .by_address
            .iter()
            .map(|&slot| self.wallets.address(slot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use market_engine::fixtures::sample;
    use market_engine::materialize;
    use market_model::{MarketPosition, SizeClass, Wallet, WalletSort};

    use crate::snapshot::testing::snapshot;
    use crate::snapshot::wallets::wallet_value;

    fn items<T: serde::de::DeserializeOwned>(page: &Page<'_>) -> Vec<T> {
        let mut json = b"[".to_vec();
        page.write_items(&mut json);
        json.push(b']');
        assert_eq!(json.len(), page.json_len() + 2);
        let items: Vec<T> = serde_json::from_slice(&json).unwrap();
        assert_eq!(items.len(), page.len);
        items
    }

    #[test]
    fn positions_pages_cover_everything_once_in_order() {
        let (s, m) = snapshot();
        let AssetLookup::Found(btc) = s.lookup_asset("BTC") else {
            panic!()
        };
        for direction in [None, Some(Direction::Long), Some(Direction::Short)] {
            let mut seen: Vec<MarketPosition> = Vec::new();
            let mut after: Option<PositionKey> = None;
            loop {
                let page = s.positions_page(btc, direction, None, after.as_ref(), 7);
                let got: Vec<MarketPosition> = items(&page.page);
                assert!(seen.len() <= m.positions.len(), "paging does not end");
                let last = page.last.unwrap();
                let tail = got.last().unwrap();
                assert_eq!(last.value, Some(tail.position_value.to_string()));
                assert_eq!(last.address, tail.address);
                seen.extend(got);
                if !page.page.has_more {
                    break;
                }
                after = Some(PositionKey {
                    value: last.value.unwrap().parse().unwrap(),
                    address: last.address.to_owned(),
                });
            }
            let mut expected: Vec<MarketPosition> = m
                .positions
                .iter()
                .filter(|p| p.symbol == "BTC" && direction.is_none_or(|d| p.direction == d))
                .cloned()
                .collect();
            expected.sort_by(|a, b| {
                cmp_position_keys(
                    (&a.position_value.0, &a.address),
                    (&b.position_value.0, &b.address),
                )
            });
            assert_eq!(seen, expected);
        }
    }

    #[test]
    fn wallet_pages_put_nulls_last_and_count_matches() {
        let (s, m) = snapshot();
        for &sort in WalletSort::ALL {
            for order in [SortOrder::Asc, SortOrder::Desc] {
                let q = WalletOrder {
                    sort,
                    order,
                    size: None,
                    direction: None,
                };
                let mut seen: Vec<Wallet> = Vec::new();
                let mut after: Option<WalletKey> = None;
                loop {
                    let (page, total) = s.wallets_page(q, after.as_ref(), 5);
                    assert_eq!(total, m.wallets.len());
                    assert!(seen.len() <= m.wallets.len(), "paging does not end");
                    seen.extend(items::<Wallet>(&page.page));
                    if !page.page.has_more {
                        break;
                    }
                    let last = page.last.unwrap();
                    after = Some(WalletKey {
                        value: last.value.map(|v| v.parse().unwrap()),
                        address: last.address.to_owned(),
                    });
                }
                let mut expected = m.wallets.clone();
                expected.sort_by(|a, b| {
                    cmp_wallet_keys(
                        (wallet_value(a, sort).map(|d| &d.0), &a.address),
                        (wallet_value(b, sort).map(|d| &d.0), &b.address),
                        order,
                    )
                });
                let addresses = |ws: &[Wallet]| -> Vec<String> {
                    ws.iter().map(|w| w.address.clone()).collect()
                };
                assert_eq!(addresses(&seen), addresses(&expected), "{sort:?} {order:?}");
                assert_eq!(seen, expected, "{sort:?} {order:?}");
            }
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
            m.wallets
                .iter()
                .filter(|w| w.size_class == SizeClass::Whale)
                .count()
        );
        assert!(items::<Wallet>(&page.page)
            .iter()
            .all(|w| w.size_class == SizeClass::Whale));
    }

    #[test]
    fn asset_lookup() {
        let (s, _) = snapshot();
        assert!(matches!(s.lookup_asset("xyz:TSLA"), AssetLookup::Found(_)));
        assert_eq!(s.lookup_asset("TSLA"), s.lookup_asset("xyz:TSLA"));
        assert_eq!(s.lookup_asset("btc"), AssetLookup::Unknown);
        assert_eq!(s.lookup_asset("xyz:"), AssetLookup::Unknown);
        let mut input = sample();
        input.quotes.push(market_engine::Quote {
            symbol: "abc:TSLA".into(),
            ..input.quotes[1].clone()
        });
        let s = Snapshot::build(1, materialize("perpnet", input).unwrap());
        assert_eq!(
            s.lookup_asset("TSLA"),
            AssetLookup::Ambiguous(vec!["abc:TSLA".into(), "xyz:TSLA".into()])
        );
    }
}
