//! Building a version from scratch ([`Snapshot::build`],
//! [`Snapshot::build_rendered`]): positions taken in as model structs or
//! as already rendered text ([`IntoItem`]), grouped and sorted per market
//! on several threads, while the wallet table and its orders are built.
//! The position helpers here are shared with [`Snapshot::apply`].

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use market_model::{MarketPosition, SortOrder, Wallet, WalletSort};
use time::OffsetDateTime;

use market_engine::{DataVersion, PositionKeys, SortKey};

use super::markets::{assemble, Assembled, MarketPositions, MarketsPart, PositionItem};
use super::pages::render;
use super::wallets::{filter_flags, sorted_by_value, AddressIndex, WalletItem, Wallets};
use super::{Snapshot, WalletPositions};
use crate::rendered::RenderedPosition;

/// A position the snapshot can take in: a model struct (rendered here) or a
/// [`RenderedPosition`] (moved in).
pub(super) trait IntoItem: PositionKeys {
    /// The item of `owner`'s position (its wallet is in slot `wallet`).
    fn into_item(self, wallet: u32, owner: &Wallet) -> PositionItem;
}

impl IntoItem for &MarketPosition {
    /// (A model carries its wallet's label and tags already.)
    fn into_item(self, wallet: u32, _owner: &Wallet) -> PositionItem {
        PositionItem {
            json: render(self),
            value: SortKey::new(&self.position_value.0),
            wallet,
            direction: self.direction,
        }
    }
}

impl IntoItem for MarketPosition {
    fn into_item(self, wallet: u32, owner: &Wallet) -> PositionItem {
        (&self).into_item(wallet, owner)
    }
}

impl IntoItem for RenderedPosition {
    fn into_item(self, wallet: u32, owner: &Wallet) -> PositionItem {
        let direction = self.direction();
        let RenderedPosition { value, json, .. } =
            self.labelled(owner.label.as_deref(), &owner.tags);
        PositionItem {
            json,
            value,
            wallet,
            direction,
        }
    }
}

/// Position items of `positions`, grouped by market index and sorted in page
/// order (`same_value` orders the wallet slots of equal values by address);
/// positions of unknown markets or wallets are left out. `wallet_of` finds
/// a position's wallet: its slot and the wallet.
pub(super) fn position_items<'w, P: IntoItem>(
    positions: impl IntoIterator<Item = P>,
    by_symbol: &HashMap<String, usize, foldhash::fast::RandomState>,
    markets: usize,
    wallet_of: impl Fn(&str) -> Option<(u32, &'w Wallet)>,
    same_value: impl Fn(u32, u32) -> Ordering,
) -> Vec<Vec<PositionItem>> {
    let mut grouped: Vec<Vec<PositionItem>> = (0..markets).map(|_| Vec::new()).collect();
    for p in positions {
        let (Some(&m), Some((wallet, owner))) = (by_symbol.get(p.symbol()), wallet_of(p.address()))
        else {
            continue;
        };
        grouped[m].push(p.into_item(wallet, owner));
    }
    for g in &mut grouped {
        g.sort_unstable_by(|a, b| page_order(a, b, &same_value));
    }
    grouped
}

/// Page order: value descending, then (`same_value`) the wallets by address.
pub(super) fn page_order(
    a: &PositionItem,
    b: &PositionItem,
    same_value: impl Fn(u32, u32) -> Ordering,
) -> Ordering {
    b.value
        .cmp(&a.value)
        .then_with(|| same_value(a.wallet, b.wallet))
}

/// One market's items from the sorted groups of several parts, merged.
fn merge_groups(
    groups: Vec<Vec<PositionItem>>,
    same_value: impl Fn(u32, u32) -> Ordering,
) -> Vec<PositionItem> {
    let mut merged: Vec<PositionItem> = Vec::new();
    for g in groups {
        if merged.is_empty() {
            merged = g;
        } else if !g.is_empty() {
            merged.extend(g);
            // Two sorted runs: the sort merges them.
            merged.sort_by(|a, b| page_order(a, b, &same_value));
        }
    }
    merged
}

/// The version's markets and wallet lists from each market's items in page
/// order (`slots` wallet slots).
pub(super) fn assembled(
    by_market: Vec<Vec<PositionItem>>,
    slots: usize,
) -> (Vec<Arc<MarketPositions>>, Vec<WalletPositions>) {
    let Assembled { wallets, markets } = assemble(by_market, slots);
    let mut by_wallet: Vec<WalletPositions> = vec![empty(); slots];
    for (slot, list) in wallets {
        by_wallet[slot as usize] = list;
    }
    let markets = markets
        .into_iter()
        .map(|(refs, codes)| Arc::new(MarketPositions::new(refs, codes)))
        .collect();
    (markets, by_wallet)
}

/// The list of a wallet that holds no position.
pub(super) fn empty() -> WalletPositions {
    Arc::from(Vec::new())
}

impl Snapshot {
    /// Indexes and renders a materialized version (positions and wallets on
    /// two threads).
    pub fn build(version: i64, data: DataVersion) -> Snapshot {
        let coverage = market_engine::coverage::coverage_of(&data);
        let DataVersion {
            observed_at,
            markets,
            wallets,
            positions,
            current_days,
            cohorts,
            freshness: _,
        } = data;
        let part = MarketsPart::new(markets, current_days, cohorts, &coverage, observed_at);
        // Two parts of references (moving a million model structs cost more
        // than indexing them).
        let parts = positions.chunks(positions.len().div_ceil(2).max(1));
        Snapshot::build_from(version, observed_at, part, wallets, parts.collect())
    }

    /// Indexes a version whose positions were rendered as they were read
    /// ([`RenderedPosition::from_text`]): the start of a server. The
    /// positions come in parts (one per connection that read them), each
    /// indexed on its own thread; a market may span parts.
    pub fn build_rendered(version: i64, data: DataVersion<Vec<RenderedPosition>>) -> Snapshot {
        let coverage = market_engine::coverage::report(&data, data.positions.iter().flatten());
        let DataVersion {
            observed_at,
            markets,
            wallets,
            positions,
            current_days,
            cohorts,
            freshness: _,
        } = data;
        let part = MarketsPart::new(markets, current_days, cohorts, &coverage, observed_at);
        Snapshot::build_from(version, observed_at, part, wallets, positions)
    }

    fn build_from<P: IntoItem, I: IntoIterator<Item = P> + Send>(
        version: i64,
        observed_at: OffsetDateTime,
        part: MarketsPart,
        mut wallets: Vec<Wallet>,
        parts: Vec<I>,
    ) -> Snapshot {
        if !wallets.is_sorted_by(|a, b| a.address <= b.address) {
            wallets.sort_unstable_by(|a, b| a.address.cmp(&b.address));
        }
        wallets.dedup_by(|a, b| a.address == b.address);
        // A hash lookup per position, not a binary search over addresses.
        let slots: HashMap<&str, u32, foldhash::fast::RandomState> = wallets
            .iter()
            .enumerate()
            .map(|(i, w)| (w.address.as_str(), i as u32))
            .collect();
        let wallet_of = |address: &str| -> Option<(u32, &Wallet)> {
            slots
                .get(address)
                .map(|&slot| (slot, &wallets[slot as usize]))
        };
        let flags: Vec<u8> = wallets.iter().map(filter_flags).collect();
        // Slots are in address order here, so equal values order by slot.
        // Each part of the positions is indexed on its own thread, the
        // wallets on another.
        let (markets, by_symbol) = (part.markets.len(), &part.by_symbol);
        let served = wallets.len();
        let (positions, index) = std::thread::scope(|s| {
            let parts: Vec<_> = parts
                .into_iter()
                .map(|p| {
                    s.spawn(move || {
                        position_items(p, by_symbol, markets, wallet_of, |a, b| a.cmp(&b))
                    })
                })
                .collect();
            let positions = s.spawn(move || {
                let mut by_market: Vec<Vec<_>> = (0..markets).map(|_| Vec::new()).collect();
                for p in parts {
                    for (m, g) in p
                        .join()
                        .expect("building positions")
                        .into_iter()
                        .enumerate()
                    {
                        by_market[m].push(g);
                    }
                }
                // Slots are in address order here.
                let merged = by_market
                    .into_iter()
                    .map(|groups| merge_groups(groups, |a, b| a.cmp(&b)))
                    .collect();
                assembled(merged, served)
            });
            let slots: Vec<_> = wallets
                .iter()
                .map(|w| Some(Arc::new(WalletItem::new(w))))
                .collect();
            let mut index = Wallets {
                by_address: (0..wallets.len() as u32).collect(),
                address_codes: Vec::new(),
                by_hash: AddressIndex::new(&slots),
                slots,
                free: Vec::new(),
                orders: HashMap::new(),
                flags,
                filter_sizes: Default::default(),
            };
            let mut lists = Vec::with_capacity(2 * WalletSort::ALL.len());
            for &sort in WalletSort::ALL {
                let (asc, desc) = sorted_by_value(&index, sort);
                lists.push(((sort, SortOrder::Asc), asc));
                lists.push(((sort, SortOrder::Desc), desc));
            }
            index.derive_orders(lists);
            (positions.join().expect("building positions"), index)
        });
        let (positions, by_wallet) = positions;
        Snapshot {
            version,
            observed_at,
            by_wallet,
            part,
            positions,
            wallets: index,
            spare: Arc::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use market_model::{MarketList, MarketSort, SortOrder};

    use crate::snapshot::testing::snapshot;

    #[test]
    fn rendered_items_are_the_serialized_models() {
        let (s, m) = snapshot();
        for (i, market) in m.markets.iter().enumerate() {
            assert_eq!(s.market_json(i), serde_json::to_vec(market).unwrap());
        }
        let list: MarketList =
            serde_json::from_slice(s.market_list_json(MarketSort::Volume24h, SortOrder::Desc))
                .unwrap();
        assert_eq!(list.items.len(), m.markets.len());
        let days: Vec<(&str, &[u8])> = s.current_days().collect();
        assert_eq!(days.len(), m.current_days.len());
        for ((symbol, json), day) in days.iter().zip(&m.current_days) {
            assert_eq!(*symbol, day.network_asset_symbol);
            assert_eq!(*json, serde_json::to_vec(day).unwrap());
        }
        assert_eq!(s.counts(), (m.positions.len(), m.wallets.len()));
        assert!(s.heap_bytes() > 0);
    }
}
