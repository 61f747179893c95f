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
///
/// Each market's vector is allocated once, at its count, and `positions`
/// is taken from its end a block at a time, its memory handed back after
/// each block: at a whole load's 1.18M positions its two halves' vectors
/// (about 190 MB) were otherwise held until the last item was made, beside
/// the items (docs/performance.md, "A whole load's peak").
pub(super) fn position_items<'w, P: IntoItem>(
    mut positions: Vec<P>,
    by_symbol: &HashMap<String, usize, foldhash::fast::RandomState>,
    markets: usize,
    wallet_of: impl Fn(&str) -> Option<(u32, &'w Wallet)>,
    same_value: impl Fn(u32, u32) -> Ordering,
) -> Vec<Vec<PositionItem>> {
    /// Positions made into items between two shrinks of their vector.
    const BLOCK: usize = 1 << 16;
    let mut counts = vec![0usize; markets];
    for p in &positions {
        if let Some(&m) = by_symbol.get(p.symbol()) {
            counts[m] += 1;
        }
    }
    let mut grouped: Vec<Vec<PositionItem>> = counts.into_iter().map(Vec::with_capacity).collect();
    while !positions.is_empty() {
        let from = positions.len().saturating_sub(BLOCK);
        for p in positions.drain(from..) {
            let (Some(&m), Some((wallet, owner))) =
                (by_symbol.get(p.symbol()), wallet_of(p.address()))
            else {
                continue;
            };
            grouped[m].push(p.into_item(wallet, owner));
        }
        positions.shrink_to_fit();
    }
    // Items of one market never compare equal (one position per wallet
    // and market), so the order they were made in does not matter.
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
        let parts = parts.map(|p| p.iter().collect()).collect();
        Snapshot::build_from(version, observed_at, part, wallets, parts)
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

    fn build_from<P: IntoItem + Send>(
        version: i64,
        observed_at: OffsetDateTime,
        part: MarketsPart,
        mut wallets: Vec<Wallet>,
        parts: Vec<Vec<P>>,
    ) -> Snapshot {
        if !wallets.is_sorted_by(|a, b| a.address <= b.address) {
            wallets.sort_unstable_by(|a, b| a.address.cmp(&b.address));
        }
        wallets.dedup_by(|a, b| a.address == b.address);
        // A hash lookup per position, not a binary search over addresses.
        let slot_of: HashMap<&str, u32, foldhash::fast::RandomState> = wallets
            .iter()
            .enumerate()
            .map(|(i, w)| (w.address.as_str(), i as u32))
            .collect();
        let wallet_of = |address: &str| -> Option<(u32, &Wallet)> {
            slot_of
                .get(address)
                .map(|&slot| (slot, &wallets[slot as usize]))
        };
        let flags: Vec<u8> = wallets.iter().map(filter_flags).collect();
        // Slots are in address order here, so equal values order by slot.
        // Each part of the positions is indexed on its own thread while
        // the wallet items are rendered on this one; the model wallets are
        // then dropped (they are a sixth of a whole load's peak), and the
        // markets' lists are assembled on another thread while this one
        // sorts the wallet orders.
        let (markets, by_symbol) = (part.markets.len(), &part.by_symbol);
        let served = wallets.len();
        let (grouped, slots) = std::thread::scope(|s| {
            let parts: Vec<_> = parts
                .into_iter()
                .map(|p| {
                    s.spawn(move || {
                        position_items(p, by_symbol, markets, wallet_of, |a, b| a.cmp(&b))
                    })
                })
                .collect();
            let slots: Vec<_> = wallets
                .iter()
                .map(|w| Some(Arc::new(WalletItem::new(w))))
                .collect();
            let grouped: Vec<_> = parts
                .into_iter()
                .map(|p| p.join().expect("building positions"))
                .collect();
            (grouped, slots)
        });
        drop(slot_of);
        drop(wallets);
        let (positions, index) = std::thread::scope(|s| {
            let positions = s.spawn(move || {
                let mut by_market: Vec<Vec<_>> = (0..markets).map(|_| Vec::new()).collect();
                for p in grouped {
                    for (m, g) in p.into_iter().enumerate() {
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
            let mut index = Wallets {
                by_address: (0..served as u32).collect(),
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
    fn every_position_becomes_one_item_across_blocks() {
        use std::collections::HashMap;

        use market_model::MarketPosition;

        use super::{page_order, position_items};
        use crate::snapshot::pages::render;

        let (_, m) = snapshot();
        // Copies enough for several blocks and a part of one, each of
        // another wallet (a slot of its own), so that no two items tie.
        let copies = (2 << 16) / m.positions.len() + 3;
        let positions: Vec<MarketPosition> = (0..copies)
            .flat_map(|k| {
                m.positions.iter().map(move |p| MarketPosition {
                    address: format!("{}-{k}", p.address),
                    ..p.clone()
                })
            })
            .collect();
        let by_symbol: HashMap<String, usize, foldhash::fast::RandomState> = m
            .markets
            .iter()
            .enumerate()
            .map(|(i, market)| (market.symbol.clone(), i))
            .collect();
        let wallet_of = |address: &str| {
            let (address, k) = address.rsplit_once('-')?;
            let k: usize = k.parse().ok()?;
            let i = m.wallets.iter().position(|w| w.address == address)?;
            Some(((k * m.wallets.len() + i) as u32, &m.wallets[i]))
        };
        let grouped = position_items(
            positions.iter().collect(),
            &by_symbol,
            m.markets.len(),
            wallet_of,
            |a, b| a.cmp(&b),
        );
        for (i, market) in m.markets.iter().enumerate() {
            let mut expected: Vec<Vec<u8>> = positions
                .iter()
                .filter(|p| p.symbol == market.symbol)
                .map(|p| render(p).into())
                .collect();
            let mut got: Vec<Vec<u8>> = grouped[i].iter().map(|p| p.json.to_vec()).collect();
            assert!(grouped[i]
                .windows(2)
                .all(|w| page_order(&w[0], &w[1], |a, b| a.cmp(&b)).is_lt()));
            expected.sort();
            got.sort();
            assert_eq!(got, expected, "{}", market.symbol);
        }
    }

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
