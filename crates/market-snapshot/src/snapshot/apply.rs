//! Turning a version into the next one from a writer's changes
//! ([`Snapshot::apply`], [`Snapshot::apply_rendered`]): only the changed
//! wallets and their positions are rendered, and merged into copies of
//! this version's sorted lists ([`patch_coded`]); everything else is
//! shared with this version.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use market_model::{LiquidityDayText, Wallet};

use market_engine::VersionChanges;

use super::build::{empty, position_items, IntoItem};
use super::codes::exact;
use super::markets::{assemble, Assembled, CurrentDay, MarketPositions, MarketsPart, PositionRef};
use super::spare::{Element, Spare};
use super::wallets::{filter_flags, filter_sizes, sort_orders, Order, WalletItem, Wallets};
use super::Snapshot;
use crate::rendered::RenderedPosition;

/// `old` without the entries `gone` marks, with `added` (sorted by `cmp`,
/// which must order `old` too) merged in, for a list whose entries have
/// codes (the address order, an order's unfiltered list, a market's
/// positions), kept as two arrays, written into lists taken from `spare`.
///
/// The kept entries between two added ones are copied as runs: the end of
/// a run is found on the codes (a search that doubles its step from the
/// run's start: runs average the list's length over the entries added),
/// its gone entries by one read-only pass, and what is left between them
/// is copied whole. Only where codes tie are the entries compared (`cmp`,
/// on (code, entry) pairs), one at a time. Copying entry by entry, with a
/// comparison and two pushes for each, took most of the apply's thread.
fn patch_coded<T: Element>(
    spare: &Spare,
    old: &[T],
    old_codes: &[u64],
    gone: impl Fn(&T) -> bool,
    added: &[(u64, T)],
    cmp: impl Fn(&(u64, T), &(u64, T)) -> Ordering,
) -> (Vec<T>, Vec<u64>) {
    let n = old.len() + added.len();
    let (mut out, mut out_codes) = (spare.take(n), spare.take(n));
    let mut at = 0;
    for &(ac, a) in added {
        let end = at + count_below(&old_codes[at..], ac);
        copy_kept(
            &old[at..end],
            &old_codes[at..end],
            &gone,
            &mut out,
            &mut out_codes,
        );
        at = end;
        // Among equal codes, the kept entries that precede it go first.
        while at < old.len() && old_codes[at] == ac {
            let s = old[at];
            if !gone(&s) {
                if cmp(&(ac, s), &(ac, a)) != Ordering::Less {
                    break;
                }
                out.push(s);
                out_codes.push(ac);
            }
            at += 1;
        }
        out.push(a);
        out_codes.push(ac);
    }
    copy_kept(
        &old[at..],
        &old_codes[at..],
        &gone,
        &mut out,
        &mut out_codes,
    );
    (out, out_codes)
}

/// Appends the entries of `run` that are not `gone` (and their codes):
/// one read-only pass that finds the gone ones, and copies of what lies
/// between them.
fn copy_kept<T: Copy>(
    run: &[T],
    codes: &[u64],
    gone: &impl Fn(&T) -> bool,
    out: &mut Vec<T>,
    out_codes: &mut Vec<u64>,
) {
    let mut start = 0;
    for (i, s) in run.iter().enumerate() {
        if gone(s) {
            out.extend_from_slice(&run[start..i]);
            out_codes.extend_from_slice(&codes[start..i]);
            start = i + 1;
        }
    }
    out.extend_from_slice(&run[start..]);
    out_codes.extend_from_slice(&codes[start..]);
}

/// How many of `codes` (never decreasing) are below `code`: a search whose
/// step doubles from the start, then halves.
fn count_below(codes: &[u64], code: u64) -> usize {
    let (mut below, mut step) = (0, 1);
    // `codes[..below]` are all below `code`.
    while below + step <= codes.len() && codes[below + step - 1] < code {
        below += step;
        step *= 2;
    }
    let end = (below + step).min(codes.len());
    below + codes[below..end].partition_point(|&c| c < code)
}

impl Snapshot {
    /// The next version: this one with `changes` applied. Only the changed
    /// wallets and their positions are rendered; everything else is shared
    /// with this version. Positions of wallets not in `changes.wallets`, or
    /// of markets the new version does not have, are left out.
    pub fn apply(&self, version: i64, changes: VersionChanges) -> Snapshot {
        self.apply_items(version, changes)
    }

    /// [`Snapshot::apply`] with positions and current days read back as
    /// text (`Store::load_changes_for_serving`): each position is moved in
    /// as rendered, labelled with its wallet's label and tags, and each
    /// day's levels are copied as they were stored.
    pub fn apply_rendered(
        &self,
        version: i64,
        changes: VersionChanges<RenderedPosition, LiquidityDayText>,
    ) -> Snapshot {
        self.apply_items(version, changes)
    }

    fn apply_items<P: IntoItem + Send, D: CurrentDay>(
        &self,
        version: i64,
        changes: VersionChanges<P, D>,
    ) -> Snapshot {
        let VersionChanges {
            observed_at,
            markets,
            current_days,
            cohorts,
            coverage,
            mut wallets,
            positions,
            removed,
        } = changes;
        let part = MarketsPart::new(markets, current_days, cohorts, &coverage, observed_at);

        // Free the slots of changed and removed wallets, then fill slots
        // (reusing freed ones) with the new items.
        let old = &self.wallets;
        let mut gone = vec![false; old.slots.len()];
        let mut slots = old.slots.clone();
        let mut free = old.free.clone();
        let mut flags = old.flags.clone();
        let mut by_hash = old.by_hash.clone();
        for address in wallets
            .iter()
            .map(|w| w.address.as_str())
            .chain(removed.iter().map(String::as_str))
        {
            if let Some(slot) = old.find(address) {
                if !gone[slot as usize] {
                    gone[slot as usize] = true;
                    slots[slot as usize] = None;
                    free.push(slot);
                    by_hash.remove(slot, address);
                }
            }
        }
        wallets.sort_unstable_by(|a, b| a.address.cmp(&b.address));
        wallets.dedup_by(|a, b| a.address == b.address);
        let mut added: Vec<u32> = Vec::with_capacity(wallets.len());
        for w in &wallets {
            let slot = free.pop().unwrap_or_else(|| {
                slots.push(None);
                (slots.len() - 1) as u32
            });
            slots[slot as usize] = Some(Arc::new(WalletItem::new(w)));
            if flags.len() <= slot as usize {
                flags.resize(slot as usize + 1, 0);
            }
            flags[slot as usize] = filter_flags(w);
            added.push(slot);
        }
        for (&slot, w) in added.iter().zip(&wallets) {
            by_hash.insert(&slots, slot, &w.address);
        }
        let mut index = Wallets {
            slots,
            free,
            by_address: Vec::new(),
            address_codes: Vec::new(),
            by_hash,
            orders: HashMap::new(),
            flags,
            filter_sizes: Default::default(),
        };
        let is_gone = |&s: &u32| gone.get(s as usize).copied().unwrap_or(false);
        // The changed wallets are in address order (sorted above).
        let placed: Vec<(u64, u32)> = added
            .iter()
            .map(|&s| (index.item(s).address_code(), s))
            .collect();
        let (by_address, address_codes) = patch_coded(
            &self.spare,
            &old.by_address,
            &old.address_codes,
            is_gone,
            &placed,
            |&(x, a), &(y, b)| {
                x.cmp(&y)
                    .then_with(|| index.item(a).cmp_address(index.item(b)))
            },
        );
        (index.by_address, index.address_codes) = (by_address, address_codes);
        // Each slot's place in address order: ties in every order are
        // broken by address, compared here without the wallet items.
        let mut rank = vec![0u32; index.slots.len()];
        for (i, &slot) in index.by_address.iter().enumerate() {
            rank[slot as usize] = i as u32;
        }
        let by_address = |a: u32, b: u32| rank[a as usize].cmp(&rank[b as usize]);

        let (positions, orders, sizes) = std::thread::scope(|s| {
            let index = &index;
            let positions = s.spawn(|| {
                let wallet_of = |address: &str| -> Option<(u32, &Wallet)> {
                    wallets
                        .binary_search_by(|w| w.address.as_str().cmp(address))
                        .ok()
                        .map(|i| (added[i], &wallets[i]))
                };
                let grouped = position_items(
                    positions,
                    &part.by_symbol,
                    part.markets.len(),
                    wallet_of,
                    by_address,
                );
                // The changed wallets' lists replace theirs; every other
                // wallet's list is shared with this version.
                let Assembled {
                    wallets: lists,
                    markets: new,
                } = assemble(grouped, index.slots.len());
                let mut by_wallet = self.by_wallet.clone();
                by_wallet.resize_with(index.slots.len(), empty);
                for (slot, g) in gone.iter().enumerate() {
                    if *g {
                        by_wallet[slot] = empty();
                    }
                }
                for (slot, list) in lists {
                    by_wallet[slot as usize] = list;
                }
                // Each changed market's references are patched on their
                // codes; the items are read only for values that share an
                // inexact code.
                let item = |r: PositionRef| &by_wallet[r.slot as usize][r.index()];
                let cmp = |&(x, a): &(u64, PositionRef), &(y, b): &(u64, PositionRef)| {
                    x.cmp(&y).then_with(|| {
                        let by_value = match exact(x) {
                            true => Ordering::Equal,
                            false => item(b).value.cmp(&item(a).value),
                        };
                        by_value.then_with(|| by_address(a.slot, b.slot))
                    })
                };
                let is_gone = |r: &PositionRef| gone[r.slot as usize];
                let positions = part
                    .markets
                    .iter()
                    .zip(new)
                    .map(|(m, (refs, codes))| {
                        let previous = self
                            .part
                            .by_symbol
                            .get(&m.symbol)
                            .map(|&i| &self.positions[i]);
                        let drops = previous.is_some_and(|p| p.refs.iter().any(is_gone));
                        match previous {
                            Some(p) if !drops && refs.is_empty() => p.clone(),
                            _ => {
                                let added: Vec<(u64, PositionRef)> =
                                    codes.into_iter().zip(refs).collect();
                                let (old, old_codes) =
                                    previous.map_or((&[][..], &[][..]), |p| (&p.refs, &p.codes));
                                let (refs, codes) =
                                    patch_coded(&self.spare, old, old_codes, is_gone, &added, cmp);
                                let list = |n| self.spare.take(n);
                                Arc::new(MarketPositions::split(refs, codes, list))
                            }
                        }
                    })
                    .collect::<Vec<_>>();
                (positions, by_wallet)
            });
            // Each order's unfiltered list is patched with its codes (the
            // changed wallets merged in on their codes as it is copied, the
            // items compared only among equal codes); its filtered lists are
            // derived from it when first asked for, at sizes counted here
            // (beside the positions' thread, not before it starts).
            let sizes = filter_sizes(&index.flags, &index.by_address);
            let mut orders = HashMap::new();
            for (sort, order) in sort_orders() {
                let cmp = |&(x, a): &(u64, u32), &(y, b): &(u64, u32)| {
                    x.cmp(&y).then_with(|| match exact(x) {
                        true => by_address(a, b),
                        false => index.cmp_in(a, b, sort, order),
                    })
                };
                let mut sorted: Vec<(u64, u32)> = added
                    .iter()
                    .map(|&a| (index.code(a, sort, order), a))
                    .collect();
                sorted.sort_by(cmp);
                let previous = &old.orders[&(sort, order)];
                let (all, codes) = patch_coded(
                    &self.spare,
                    previous.all(),
                    &previous.codes,
                    is_gone,
                    &sorted,
                    cmp,
                );
                orders.insert((sort, order), Order::with_codes(all, codes));
            }
            (positions.join().expect("patching positions"), orders, sizes)
        });
        let (positions, by_wallet) = positions;
        (index.orders, index.filter_sizes) = (orders, sizes);
        Snapshot {
            version,
            observed_at,
            part,
            positions,
            wallets: index,
            by_wallet,
            spare: self.spare.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bigdecimal::BigDecimal;
    use market_engine::fixtures::{position, sample, wallet};
    use market_engine::{materialize, DataVersion};
    use market_model::{Direction, MarketPosition, MarketSort, SortOrder};

    use crate::snapshot::spare::Lists;
    use crate::snapshot::wallets::wallet_filters;
    use crate::snapshot::{PositionKey, WalletKey, WalletOrder};

    #[test]
    fn patch_coded_places_entries_by_code_then_pairs() {
        // Slots 0..len; a slot's code is the slot divided by `tie` (so
        // codes tie by `tie`s), and pairs order by code, then by slot
        // descending (an order the codes alone cannot tell). Splits into
        // old, gone and added (one in `every` added: from runs of three
        // to runs of hundreds between two added entries), against
        // filtering and sorting. The lists are written into the lists of
        // the merge before, as a running server's are.
        let cmp = |a: &(u64, u32), b: &(u64, u32)| a.0.cmp(&b.0).then_with(|| b.1.cmp(&a.1));
        let spare = Spare::default();
        // The kept lists' addresses, and how many merges wrote into one.
        let (mut kept, mut reused) = (Vec::new(), 0);
        for (len, tie, every, seeds) in [
            (40, 4, 3, 500),
            (3_000, 1, 50, 40),
            (3_000, 7, 9, 40),
            (8_000, 300, 20, 20),
            (8_000, 1, 4_000, 20),
        ] {
            let pair = |s: u32| (u64::from(s / tie), s);
            for seed in 0u32..seeds {
                let part = |x: u32| {
                    ((x.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)) >> 3) % every
                };
                let mut old: Vec<(u64, u32)> =
                    (0..len).filter(|&x| part(x) != 0).map(pair).collect();
                old.sort_by(cmp);
                let mut added: Vec<(u64, u32)> =
                    (0..len).filter(|&x| part(x) == 0).map(pair).collect();
                added.sort_by(cmp);
                let gone = |x: &u32| part(*x) == 1 && x.is_multiple_of(3);
                let (old_slots, old_codes): (Vec<u32>, Vec<u64>) =
                    old.iter().map(|&(c, s)| (s, c)).unzip();
                let mut want: Vec<(u64, u32)> =
                    old.iter().copied().filter(|p| !gone(&p.1)).collect();
                want.extend(&added);
                want.sort_by(cmp);
                let (slots, codes) = patch_coded(&spare, &old_slots, &old_codes, gone, &added, cmp);
                let case = format!("{len} slots, ties of {tie}, one in {every} added, seed {seed}");
                assert_eq!(
                    slots,
                    want.iter().map(|p| p.1).collect::<Vec<_>>(),
                    "{case}"
                );
                assert_eq!(
                    codes,
                    want.iter().map(|p| p.0).collect::<Vec<_>>(),
                    "{case}"
                );
                if kept.contains(&(slots.as_ptr() as usize)) {
                    reused += 1;
                }
                kept = vec![slots.as_ptr() as usize, codes.as_ptr() as usize];
                let mut lists = Lists::default();
                lists.keep(slots);
                lists.keep(codes);
                spare.replace(lists);
            }
        }
        // Lists of similar lengths follow each other: most merges wrote
        // into the list of the merge before (a kept list is alive, so a
        // new one is never at its address).
        assert!(reused > 400, "{reused} merges wrote into a kept list");
    }

    #[test]
    fn count_below_is_a_partition_point() {
        let codes: Vec<u64> = (0..300u64).map(|i| i / 3 * 2).collect();
        for code in 0..210 {
            for from in [0, 1, 5, 150, 299, 300] {
                assert_eq!(
                    count_below(&codes[from..], code),
                    codes[from..].partition_point(|&c| c < code),
                    "code {code} from {from}"
                );
            }
        }
    }

    /// Every page the snapshot can serve, in a form two snapshots can be compared by.
    fn everything(s: &Snapshot) -> Vec<String> {
        let mut out = vec![
            format!("{:?}", s.counts()),
            String::from_utf8(s.coverage_json().to_vec()).unwrap(),
        ];
        for &sort in MarketSort::ALL {
            for order in [SortOrder::Asc, SortOrder::Desc] {
                out.push(String::from_utf8(s.market_list_json(sort, order).to_vec()).unwrap());
            }
        }
        for (symbol, day) in s.current_days() {
            out.push(format!(
                "{symbol} {}",
                String::from_utf8(day.to_vec()).unwrap()
            ));
        }
        for m in 0..s.asset_count() {
            out.push(String::from_utf8(s.cohorts_json(m).to_vec()).unwrap());
            let min = BigDecimal::from(5000);
            for (direction, min) in [
                (None, None),
                (Some(Direction::Long), None),
                (Some(Direction::Short), None),
                (None, Some(&min)),
            ] {
                let mut after = None;
                for pages in 0.. {
                    assert!(pages <= s.counts().0, "paging does not end");
                    let page = s.positions_page(m, direction, min, after.as_ref(), 3);
                    let mut json = Vec::new();
                    page.page.write_items(&mut json);
                    out.push(String::from_utf8(json).unwrap());
                    let Some(last) = page.last.filter(|_| page.page.has_more) else {
                        break;
                    };
                    after = Some(PositionKey {
                        value: last.value.unwrap().parse().unwrap(),
                        address: last.address.to_owned(),
                    });
                }
            }
        }
        for &slot in &s.wallets.by_address {
            let view = s.wallet_view(s.wallets.address(slot)).unwrap();
            let mut json = view.wallet.to_vec();
            view.positions.write_items(&mut json);
            out.push(String::from_utf8(json).unwrap());
        }
        for (sort, order) in sort_orders() {
            for (size, direction) in wallet_filters() {
                let q = WalletOrder {
                    sort,
                    order,
                    size,
                    direction,
                };
                let mut after = None;
                // Bounded, so that a broken order fails instead of paging forever.
                for pages in 0.. {
                    assert!(pages <= s.counts().1, "paging does not end");
                    let (page, total) = s.wallets_page(q, after.as_ref(), 4);
                    let mut json = Vec::new();
                    page.page.write_items(&mut json);
                    out.push(format!("{total} {}", String::from_utf8(json).unwrap()));
                    let Some(last) = page.last.filter(|_| page.page.has_more) else {
                        break;
                    };
                    after = Some(WalletKey {
                        value: last.value.map(|v| v.parse().unwrap()),
                        address: last.address.to_owned(),
                    });
                }
            }
        }
        out
    }

    /// `m` as a server reads it back: each position rendered from its text
    /// without label and tags, spread over `parts` parts (so a market spans
    /// parts).
    fn as_read(m: &DataVersion, parts: usize) -> DataVersion<Vec<RenderedPosition>> {
        let mut out: Vec<Vec<RenderedPosition>> = (0..parts).map(|_| Vec::new()).collect();
        for (i, p) in m.positions.iter().enumerate() {
            out[i % parts].push(read_back(p));
        }
        DataVersion {
            observed_at: m.observed_at,
            markets: m.markets.clone(),
            wallets: m.wallets.clone(),
            positions: out,
            current_days: m.current_days.clone(),
            cohorts: m.cohorts.clone(),
            freshness: m.freshness.clone(),
        }
    }

    /// `p` as a server reads it back: rendered from its text, without its
    /// wallet's label and tags.
    fn read_back(p: &MarketPosition) -> RenderedPosition {
        p.with_text(|t| {
            RenderedPosition::from_text(&market_model::MarketPositionText {
                label: None,
                tags: &[],
                ..*t
            })
        })
    }

    /// What a writer that rewrites whole wallets stores between `a` and `b`.
    fn changes(a: &DataVersion, b: &DataVersion) -> VersionChanges {
        let before: HashMap<&str, &Wallet> =
            a.wallets.iter().map(|w| (w.address.as_str(), w)).collect();
        let positions_of = |m: &DataVersion, address: &str| -> Vec<MarketPosition> {
            m.positions
                .iter()
                .filter(|p| p.address == address)
                .cloned()
                .collect()
        };
        let changed: Vec<Wallet> = b
            .wallets
            .iter()
            .filter(|w| {
                before.get(w.address.as_str()) != Some(w)
                    || positions_of(a, &w.address) != positions_of(b, &w.address)
            })
            .cloned()
            .collect();
        let kept: std::collections::HashSet<&str> =
            b.wallets.iter().map(|w| w.address.as_str()).collect();
        VersionChanges {
            observed_at: b.observed_at,
            markets: b.markets.clone(),
            current_days: b.current_days.clone(),
            cohorts: b.cohorts.clone(),
            coverage: market_engine::coverage::coverage_of(b),
            positions: changed
                .iter()
                .flat_map(|w| positions_of(b, &w.address))
                .collect(),
            wallets: changed,
            removed: a
                .wallets
                .iter()
                .filter(|w| !kept.contains(w.address.as_str()))
                .map(|w| w.address.clone())
                .collect(),
        }
    }

    #[test]
    fn applying_changes_serves_what_a_rebuild_serves() {
        use market_engine::fixtures::quote;
        // A small deterministic generator: wallets come, go and change, and
        // their positions open, change value (ties included) and close;
        // markets appear and disappear.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let symbols = ["BTC", "ETH", "xyz:TSLA", "SOL", "abc:TSLA"];
        let mut input = sample();
        let mut served = Snapshot::build(1, materialize("perpnet", input.clone()).unwrap());
        let mut served_rendered =
            Snapshot::build(1, materialize("perpnet", input.clone()).unwrap());
        let mut previous = materialize("perpnet", input.clone()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let saved = dir.path().join("served");
        for round in 2..40 {
            input.observed_at += time::Duration::minutes(1);
            if round % 7 == 0 {
                // A market appears or disappears (its positions go with it).
                let s = symbols[3 + next(2) as usize];
                if input.quotes.iter().any(|q| q.symbol == s) {
                    input.quotes.retain(|q| q.symbol != s);
                    input.positions.retain(|p| p.symbol != s);
                } else {
                    input.quotes.push(quote(s, "77"));
                }
            }
            for _ in 0..next(6) {
                // Full-length addresses whose first 8 bytes (their code
                // in the address order) are shared by groups of six.
                let n = next(30);
                let address = format!("0x{:06x}{:034x}", n % 5, n);
                let exists = input.wallets.iter().any(|w| w.address == address);
                match next(3) {
                    0 if exists => {
                        input.wallets.retain(|w| w.address != address);
                        input.positions.retain(|p| p.address != address);
                    }
                    _ => {
                        input.wallets.retain(|w| w.address != address);
                        input.positions.retain(|p| p.address != address);
                        // Some values share their millionths (one code), so
                        // that orders compare them on the wallet items.
                        let account = [
                            "0",
                            "5000",
                            "150000",
                            "2000000",
                            "5000.0000001",
                            "5000.0000003",
                        ][next(6) as usize];
                        let mut w = wallet(&address, account, next(2) == 0);
                        if next(3) == 0 {
                            (w.label, w.tags) = (None, Vec::new());
                        }
                        input.wallets.push(w);
                        for symbol in symbols {
                            if next(2) == 0 && input.quotes.iter().any(|q| q.symbol == symbol) {
                                let direction = if next(2) == 0 {
                                    Direction::Long
                                } else {
                                    Direction::Short
                                };
                                // Ties, and values that share their
                                // millionths (one inexact code).
                                let fraction = ["0", "5", "10", "0000001", "0000003"];
                                let value = format!(
                                    "{}.{}",
                                    100 + next(5) * 50,
                                    fraction[next(5) as usize]
                                );
                                input.positions.push(position(
                                    &address,
                                    symbol,
                                    direction,
                                    &value,
                                    Some("90"),
                                ));
                            }
                        }
                    }
                }
            }
            let now = materialize("perpnet", input.clone()).unwrap();
            let changed = changes(&previous, &now);
            let read_back = VersionChanges {
                positions: changed.positions.iter().map(read_back).collect(),
                observed_at: changed.observed_at,
                markets: changed.markets.clone(),
                // As stored: the levels' JSON.
                current_days: changed
                    .current_days
                    .iter()
                    .map(|d| {
                        let levels = serde_json::to_string(&d.levels).unwrap();
                        LiquidityDayText::checked(d.clone(), levels).expect("in order")
                    })
                    .collect(),
                cohorts: changed.cohorts.clone(),
                coverage: changed.coverage.clone(),
                wallets: changed.wallets.clone(),
                removed: changed.removed.clone(),
            };
            served = served.apply(round, changed);
            // The version it was applied over handed its lists on.
            assert!(served.spare.heap_bytes() > 0, "round {round}");
            // A server restarted from the version it saved serves the same,
            // and applies the next changes alike.
            if round % 2 == 0 {
                served.save(&saved, "test").unwrap();
                let restored = Snapshot::load_saved(&saved).unwrap();
                assert_eq!(restored.part.markets, served.part.markets);
                served = restored;
            }
            served_rendered = served_rendered.apply_rendered(round, read_back);
            let rebuilt = Snapshot::build(round, now.clone());
            assert_eq!(everything(&served), everything(&rebuilt), "round {round}");
            assert_eq!(
                everything(&served_rendered),
                everything(&rebuilt),
                "round {round}, changes read back as text"
            );
            let loaded = Snapshot::build_rendered(round, as_read(&now, 1 + round as usize % 3));
            assert_eq!(
                everything(&loaded),
                everything(&rebuilt),
                "round {round}, rendered"
            );
            previous = now;
        }
        assert!(served.counts().1 > 10, "the rounds left wallets to serve");
    }
}
