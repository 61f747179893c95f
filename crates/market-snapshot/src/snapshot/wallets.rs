//! The wallet table of a version: rendered wallet items in stable slots,
//! the address index (sorted and hashed), every documented listing order
//! with its keys' codes and its filtered lists (derived when a page first
//! asks for one), and how those orders are sorted at a build. Kept apart
//! from the positions: the lists name wallets by slot.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use market_model::{Direction, SizeClass, SortOrder, Wallet, WalletDirection, WalletSort};

use market_engine::SortKey;

use super::codes::{ascending, code, in_order};
use super::pages::{cmp_values, render, WalletOrder};

/// A rendered wallet and its keys.
#[derive(Debug)]
pub(super) struct WalletItem {
    pub(super) json: Box<[u8]>,
    pub(super) address: Box<str>,
    /// The address's first 16 bytes, big-endian: comparing two wallets'
    /// addresses rarely needs more (and then not the string's memory).
    prefix: u128,
    /// The value of every sort key, in [`WalletSort::ALL`] order (`None`: null).
    keys: [Option<SortKey>; 5],
}

// `WalletItem::keys` holds one entry per sort key.
const _: () = assert!(WalletSort::ALL.len() == 5);

impl WalletItem {
    pub(super) fn new(w: &Wallet) -> WalletItem {
        WalletItem::from_parts(
            render(w),
            w.address.as_str().into(),
            std::array::from_fn(|s| {
                wallet_value(w, WalletSort::ALL[s]).map(|d| SortKey::new(&d.0))
            }),
        )
    }

    /// The item of a wallet rendered as `json`, with its address and the
    /// value of every sort key in [`WalletSort::ALL`] order.
    pub(super) fn from_parts(
        json: Box<[u8]>,
        address: Box<str>,
        keys: [Option<SortKey>; 5],
    ) -> WalletItem {
        WalletItem {
            json,
            prefix: address_prefix(&address),
            address,
            keys,
        }
    }

    /// The value of every sort key, in [`WalletSort::ALL`] order.
    pub(super) fn keys(&self) -> &[Option<SortKey>; 5] {
        &self.keys
    }

    pub(super) fn key(&self, sort: WalletSort) -> Option<&SortKey> {
        self.keys[sort_index(sort)].as_ref()
    }

    /// Address order, the same as comparing the strings.
    pub(super) fn cmp_address(&self, other: &WalletItem) -> Ordering {
        self.prefix
            .cmp(&other.prefix)
            .then_with(|| self.address.cmp(&other.address))
    }

    /// Its address's code in [`Wallets::address_codes`]: the first 8 bytes
    /// of the address, big-endian, so codes never decrease along address
    /// order (equal codes are compared on the items).
    pub(super) fn address_code(&self) -> u64 {
        (self.prefix >> 64) as u64
    }
}

impl Wallets {
    /// Derives what a build and a start from a saved version derive alike
    /// from the slots, the address order, the flags and each order's
    /// unfiltered list (`lists`): the address codes, the filters' sizes and
    /// every order's codes (its filtered lists are derived when first asked
    /// for).
    pub(super) fn derive_orders(&mut self, lists: Vec<((WalletSort, SortOrder), Vec<u32>)>) {
        self.address_codes = self
            .by_address
            .iter()
            .map(|&s| self.item(s).address_code())
            .collect();
        self.filter_sizes = filter_sizes(&self.flags, &self.by_address);
        let codes = self.ascending_codes();
        for ((sort, order), list) in lists {
            let listed = Order::new(list, &codes[sort_index(sort)], order);
            self.orders.insert((sort, order), listed);
        }
    }
}

/// The first 16 bytes of `address`, big-endian, zero-padded: ordered like
/// the strings whenever two prefixes differ.
fn address_prefix(address: &str) -> u128 {
    let mut bytes = [0u8; 16];
    let n = address.len().min(16);
    bytes[..n].copy_from_slice(&address.as_bytes()[..n]);
    u128::from_be_bytes(bytes)
}

/// The wallets of a version: a slot table (slots are stable while a wallet
/// is served, so lists can name wallets by slot), the address order and
/// every documented listing order.
#[derive(Debug, Default)]
pub(super) struct Wallets {
    pub(super) slots: Vec<Option<Arc<WalletItem>>>,
    /// Empty slots, reused by the next wallets added.
    pub(super) free: Vec<u32>,
    /// Slots by address.
    pub(super) by_address: Vec<u32>,
    /// [`WalletItem::address_code`] of each slot of `by_address`, in its
    /// order: a changed wallet is placed in address order on these (8
    /// bytes an entry, no item read but among equal codes) instead of on
    /// the wallet items, a likely cache miss each.
    pub(super) address_codes: Vec<u64>,
    /// Slots hashed by address: wallet detail looks one address up per
    /// request, and a binary search over `by_address` reads a wallet item
    /// (a likely cache miss) per step.
    pub(super) by_hash: AddressIndex,
    /// Every listing order, by (sort, order).
    pub(super) orders: HashMap<(WalletSort, SortOrder), Order>,
    /// Per slot, what the filters test ([`filter_flags`]), kept dense so
    /// that deriving the filtered lists touches no wallet item.
    pub(super) flags: Vec<u8>,
    /// How many wallets each filter lists ([`filter_sizes`]): the same in
    /// every order, so a filtered list is allocated once at its size.
    pub(super) filter_sizes: [usize; FILTERS],
}

/// One listing order: its slots, the codes of their keys, and its eleven
/// filtered lists, derived together from the unfiltered list the first
/// time a page asks for any of them in this version. A version lives
/// until the next publish (seconds, at an own node's pace), and the ten
/// orders' filtered lists were derived at every version whether or not
/// one was asked for (a fifth of the apply's thread that patches the
/// orders). Deriving an order's eleven in one pass cost about what
/// deriving one alone cost when it was measured (each slot's flags byte is
/// a random read in value order), so they are derived by order, never by
/// list: a version then does at most the work it did before, and none for
/// the orders no filtered page asks for.
#[derive(Debug, Default)]
pub(super) struct Order {
    /// Every wallet, in this order.
    all: Vec<u32>,
    /// The [`code`] of each entry of `all`, in list order (so never
    /// decreasing): what placing a wallet in the order searches.
    pub(super) codes: Vec<u64>,
    /// The list of filter `i` ([`filter_index`]) at `i - 1` (filter 0 is
    /// `all`), once derived.
    filtered: OnceLock<Vec<Vec<u32>>>,
}

impl Order {
    /// The order of `all` (every occupied slot, sorted in `order`), whose
    /// slots' keys have the ascending codes `ascending` (by slot).
    pub(super) fn new(all: Vec<u32>, ascending: &[u64], order: SortOrder) -> Order {
        let codes = all
            .iter()
            .map(|&s| in_order(ascending[s as usize], order))
            .collect();
        Order::with_codes(all, codes)
    }

    /// The order of `all` with its codes.
    pub(super) fn with_codes(all: Vec<u32>, codes: Vec<u64>) -> Order {
        Order {
            all,
            codes,
            filtered: OnceLock::new(),
        }
    }

    /// The unfiltered list.
    pub(super) fn all(&self) -> &[u32] {
        &self.all
    }

    /// Its unfiltered list and codes, for a later version to write over.
    pub(super) fn into_lists(self) -> (Vec<u32>, Vec<u64>) {
        (self.all, self.codes)
    }

    /// The filtered lists, once derived (for counting their memory).
    pub(super) fn derived(&self) -> Option<&[Vec<u32>]> {
        self.filtered.get().map(Vec::as_slice)
    }
}

/// Wallet slots in a hash table keyed by their address, which the table
/// does not store: it is read from the slot's item.
#[derive(Clone, Debug, Default)]
pub(super) struct AddressIndex {
    pub(super) table: hashbrown::HashTable<u32>,
    hasher: foldhash::fast::RandomState,
}

type Slots = [Option<Arc<WalletItem>>];

fn slot_address(slots: &Slots, slot: u32) -> &str {
    &slots[slot as usize]
        .as_deref()
        .expect("the index names only occupied slots")
        .address
}

impl AddressIndex {
    /// The index of every occupied slot.
    pub(super) fn new(slots: &Slots) -> AddressIndex {
        let mut index = AddressIndex::default();
        index.table.reserve(slots.len(), |_| 0);
        for (slot, item) in slots.iter().enumerate() {
            if let Some(item) = item {
                index.insert(slots, slot as u32, &item.address);
            }
        }
        index
    }

    fn hash(&self, address: &str) -> u64 {
        std::hash::BuildHasher::hash_one(&self.hasher, address)
    }

    fn find(&self, slots: &Slots, address: &str) -> Option<u32> {
        self.table
            .find(self.hash(address), |&s| slot_address(slots, s) == address)
            .copied()
    }

    /// Adds `slot`, whose item has `address`; `slots` holds every slot
    /// already in the index (for rehashing when the table grows).
    pub(super) fn insert(&mut self, slots: &Slots, slot: u32, address: &str) {
        let hasher = &self.hasher;
        self.table.insert_unique(
            std::hash::BuildHasher::hash_one(hasher, address),
            slot,
            |&s| std::hash::BuildHasher::hash_one(hasher, slot_address(slots, s)),
        );
    }

    /// Drops `slot`, whose item had `address`.
    pub(super) fn remove(&mut self, slot: u32, address: &str) {
        if let Ok(entry) = self.table.find_entry(self.hash(address), |&s| s == slot) {
            entry.remove();
        }
    }
}

impl Wallets {
    pub(super) fn item(&self, slot: u32) -> &WalletItem {
        self.slots[slot as usize]
            .as_deref()
            .expect("lists name only occupied slots")
    }

    pub(super) fn address(&self, slot: u32) -> &str {
        &self.item(slot).address
    }

    /// The slot of `address`.
    pub(super) fn find(&self, address: &str) -> Option<u32> {
        self.by_hash.find(&self.slots, address)
    }

    pub(super) fn cmp_in(&self, a: u32, b: u32, sort: WalletSort, order: SortOrder) -> Ordering {
        let (x, y) = (self.item(a), self.item(b));
        cmp_values(x.key(sort), y.key(sort), order).then_with(|| x.cmp_address(y))
    }

    /// The list of `q`. A filtered one is derived here, with the other
    /// filtered lists of its order, the first time this version is asked
    /// for any of them (one pass over the order's slots and their flags;
    /// other requests for them wait for that pass instead of repeating it).
    pub(super) fn list(&self, q: &WalletOrder) -> &[u32] {
        let order = &self.orders[&(q.sort, q.order)];
        match filter_index(q.size, q.direction) {
            0 => order.all(),
            f => &order
                .filtered
                .get_or_init(|| filtered_lists(order.all(), &self.flags, &self.filter_sizes))
                [f - 1],
        }
    }

    /// Per sort key (in [`WalletSort::ALL`] order), the ascending code of
    /// every slot's value (0 for empty slots): one pass over the items.
    pub(super) fn ascending_codes(&self) -> [Vec<u64>; 5] {
        let mut codes: [Vec<u64>; 5] =
            std::array::from_fn(|_| Vec::with_capacity(self.slots.len()));
        for slot in &self.slots {
            for (sort, codes) in codes.iter_mut().enumerate() {
                codes.push(
                    slot.as_deref()
                        .map_or(0, |w| ascending(w.keys[sort].as_ref())),
                );
            }
        }
        codes
    }

    /// The code of `slot`'s key in the order (`sort`, `order`).
    pub(super) fn code(&self, slot: u32, sort: WalletSort, order: SortOrder) -> u64 {
        code(self.item(slot).key(sort), order)
    }
}

/// The filters of a wallet listing, in list order: no filter, then each
/// size class; within each, no direction, long, then short.
const FILTERS: usize = 12;

fn filter_index(size: Option<SizeClass>, direction: Option<Direction>) -> usize {
    let size = match size {
        None => 0,
        Some(SizeClass::Shrimp) => 1,
        Some(SizeClass::Shark) => 2,
        Some(SizeClass::Whale) => 3,
    };
    let direction = match direction {
        None => 0,
        Some(Direction::Long) => 1,
        Some(Direction::Short) => 2,
    };
    size * 3 + direction
}

/// What the filters test of a wallet: its size class (1–3) and its net
/// direction (1 long, 2 short, 0 neither), packed in a byte.
pub(super) fn filter_flags(w: &Wallet) -> u8 {
    let size = filter_index(Some(w.size_class), None) / 3;
    let direction = match w.direction {
        WalletDirection::Long => 1,
        WalletDirection::Short => 2,
        _ => 0,
    };
    (size as u8) | (direction << 2)
}

/// How many of the wallets in `slots` (every occupied slot once, with
/// their `flags`) each filter lists (indexed by [`filter_index`]): the
/// same in every order, as every order lists every wallet, so that each
/// filtered list is allocated once at its size. Grown entry by entry and
/// then shrunk, the lists were moved by the allocator several times at each
/// version (`realloc` was a third of deriving them in a profile of the
/// publish benchmark).
pub(super) fn filter_sizes(flags: &[u8], slots: &[u32]) -> [usize; FILTERS] {
    let mut sizes = [0; FILTERS];
    for &s in slots {
        let (size, direction) = size_and_direction(flags[s as usize]);
        sizes[size * 3] += 1;
        if direction != 0 {
            sizes[direction] += 1;
            sizes[size * 3 + direction] += 1;
        }
    }
    sizes[0] = slots.len();
    sizes
}

/// A flags byte's size class (1–3) and direction (0–2).
fn size_and_direction(f: u8) -> (usize, usize) {
    (usize::from(f & 3), usize::from(f >> 2))
}

/// Whether `f` is a flags byte [`filter_flags`] can give (one read from a
/// file is checked before lists are derived with it).
pub(super) fn valid_flags(f: u8) -> bool {
    let (size, direction) = size_and_direction(f);
    (1..=3).contains(&size) && direction <= 2
}

/// The lists of every filter but the first (the unfiltered one, `all`),
/// from `all` in one pass: filter `i`'s ([`filter_index`]) at `i - 1`, each
/// allocated at its size (`sizes`, from [`filter_sizes`]).
fn filtered_lists(all: &[u32], flags: &[u8], sizes: &[usize; FILTERS]) -> Vec<Vec<u32>> {
    debug_assert_eq!(all.len(), sizes[0], "the sizes are of this list's wallets");
    let mut lists: Vec<Vec<u32>> = sizes[1..].iter().map(|&n| Vec::with_capacity(n)).collect();
    for &s in all {
        let (size, direction) = size_and_direction(flags[s as usize]);
        lists[size * 3 - 1].push(s);
        if direction != 0 {
            lists[direction - 1].push(s);
            lists[size * 3 + direction - 1].push(s);
        }
    }
    lists
}

pub(super) fn sort_orders() -> impl Iterator<Item = (WalletSort, SortOrder)> {
    WalletSort::ALL
        .iter()
        .flat_map(|&sort| [SortOrder::Asc, SortOrder::Desc].map(|order| (sort, order)))
}

#[cfg(test)]
pub(super) fn wallet_filters() -> impl Iterator<Item = (Option<SizeClass>, Option<Direction>)> {
    [
        None,
        Some(SizeClass::Shrimp),
        Some(SizeClass::Shark),
        Some(SizeClass::Whale),
    ]
    .into_iter()
    .flat_map(|size| [None, Some(Direction::Long), Some(Direction::Short)].map(|d| (size, d)))
}

/// The value a wallet is sorted by under `sort`.
pub fn wallet_value(w: &Wallet, sort: WalletSort) -> Option<&market_model::Decimal> {
    match sort {
        WalletSort::AccountTotalValue => Some(&w.account_total_value),
        WalletSort::TotalPositionValue => Some(&w.total_position_value),
        WalletSort::NetPnl => w.net_pnl.as_ref(),
        WalletSort::Roi => w.roi.as_ref(),
        WalletSort::WinRate => w.win_rate.as_ref(),
    }
}

pub(super) fn sort_index(sort: WalletSort) -> usize {
    WalletSort::ALL
        .iter()
        .position(|&s| s == sort)
        .expect("every sort is listed")
}

/// `slots` in `sort`'s ascending and descending orders, when slot order is
/// address order (a build): sorted once, ascending, on keys copied out of the
/// items; the descending order is derived from it (nulls stay last, and equal
/// values keep address order in both).
pub(super) fn sorted_by_value(wallets: &Wallets, sort: WalletSort) -> (Vec<u32>, Vec<u32>) {
    let mut nulls = Vec::new();
    let mut keyed: Vec<(&SortKey, u32)> = Vec::with_capacity(wallets.by_address.len());
    for &s in &wallets.by_address {
        match wallets.item(s).key(sort) {
            Some(k) => keyed.push((k, s)),
            None => nulls.push(s),
        }
    }
    // Values that share a scale once widened to i128 sort as integers, several
    // times faster than decimal comparisons; anything else as decimals.
    let ascending: Vec<(u32, bool)> = match widened(&keyed) {
        Some(mut ints) => {
            ints.sort_unstable();
            with_ties(&ints)
        }
        None => {
            keyed.sort_unstable_by(|a, b| a.0.cmp(b.0).then_with(|| a.1.cmp(&b.1)));
            with_ties(&keyed)
        }
    };
    // Runs of equal values, from the largest, each in address order.
    let mut desc: Vec<u32> = Vec::with_capacity(wallets.by_address.len());
    let mut end = ascending.len();
    while end > 0 {
        let mut start = end - 1;
        while ascending[start].1 {
            start -= 1;
        }
        desc.extend(ascending[start..end].iter().map(|a| a.0));
        end = start;
    }
    desc.extend(&nulls);
    let mut asc: Vec<u32> = ascending.into_iter().map(|a| a.0).collect();
    asc.extend(nulls);
    (asc, desc)
}

/// Sorted (key, slot) pairs as (slot, whether its key equals the previous one's).
fn with_ties<K: PartialEq>(sorted: &[(K, u32)]) -> Vec<(u32, bool)> {
    sorted
        .iter()
        .enumerate()
        .map(|(i, (k, slot))| (*slot, i > 0 && sorted[i - 1].0 == *k))
        .collect()
}

/// The keys as integers at their largest scale, when every one is inline and
/// the widening fits (at most 19 digits: |mantissa| < 2^63, 10^19 × 2^63 <
/// 2^127).
fn widened(keyed: &[(&SortKey, u32)]) -> Option<Vec<(i128, u32)>> {
    let inline: Vec<(i64, i16, u32)> = keyed
        .iter()
        .map(|(k, slot)| match k {
            SortKey::Small { mantissa, scale } => Some((*mantissa, *scale, *slot)),
            SortKey::Big(_) => None,
        })
        .collect::<Option<_>>()?;
    let low = inline.iter().map(|k| k.1).min().unwrap_or(0);
    let high = inline.iter().map(|k| k.1).max().unwrap_or(0);
    if i32::from(high) - i32::from(low) > 19 {
        return None;
    }
    Some(
        inline
            .into_iter()
            .map(|(mantissa, scale, slot)| {
                let pow = 10i128.pow(u32::from(high.abs_diff(scale)));
                (i128::from(mantissa) * pow, slot)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_prefixes_order_like_the_strings() {
        let addresses = [
            "",
            "0x",
            "0xab",
            "0xabcdef0123456789abcdef",
            "0xabcdef0123456789abcdee",
            "0xabcdef0123456",
            "0xabcdef01234567",
            "0xabcdef01234568",
            "0x0000000000000000000000000000000000000001",
            "0x0000000000000000000000000000000000000000",
        ];
        for a in addresses {
            for b in addresses {
                let by_prefix = address_prefix(a)
                    .cmp(&address_prefix(b))
                    .then_with(|| a.cmp(b));
                assert_eq!(by_prefix, a.cmp(b), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn filtered_lists_are_every_filters_wallets_at_their_exact_size() {
        // Slots 0..300 (a third of them free) with every valid flags byte.
        let valid: Vec<u8> = (0..=255).filter(|&f| valid_flags(f)).collect();
        assert_eq!(valid.len(), 9, "three sizes by three directions");
        let flags: Vec<u8> = (0..300).map(|s| valid[(s * 7) % valid.len()]).collect();
        let live: Vec<u32> = (0..300).filter(|s| s % 3 != 1).rev().collect();
        let sizes = filter_sizes(&flags, &live);
        assert_eq!(sizes[0], live.len());
        let lists = filtered_lists(&live, &flags, &sizes);
        assert_eq!(lists.len(), FILTERS - 1);
        let mut seen = 0;
        for (size, direction) in wallet_filters() {
            let filter = filter_index(size, direction);
            let (want_size, want_direction) = (
                size.map_or(0, |s| filter_index(Some(s), None) / 3),
                direction.map_or(0, |d| filter_index(None, Some(d))),
            );
            let want: Vec<u32> = live
                .iter()
                .copied()
                .filter(|&s| {
                    let (size, direction) = size_and_direction(flags[s as usize]);
                    (want_size == 0 || size == want_size)
                        && (want_direction == 0 || direction == want_direction)
                })
                .collect();
            assert_eq!(sizes[filter], want.len(), "{size:?} {direction:?}");
            if filter == 0 {
                continue;
            }
            seen += 1;
            let list = &lists[filter - 1];
            assert_eq!(list, &want, "{size:?} {direction:?}");
            assert_eq!(list.capacity(), want.len(), "allocated once at its size");
        }
        assert_eq!(seen, FILTERS - 1);
    }

    #[test]
    fn filtered_lists_are_derived_once_and_only_when_asked_for() {
        let flags = vec![1 | (1 << 2), 3 | (2 << 2), 2];
        let all = vec![2, 0, 1];
        let mut wallets = Wallets {
            filter_sizes: filter_sizes(&flags, &all),
            flags,
            ..Wallets::default()
        };
        let key = (WalletSort::ALL[0], SortOrder::Asc);
        wallets
            .orders
            .insert(key, Order::with_codes(all, vec![0; 3]));
        assert!(wallets.orders[&key].derived().is_none());
        let q = |size, direction| WalletOrder {
            sort: key.0,
            order: key.1,
            size,
            direction,
        };
        assert_eq!(wallets.list(&q(None, None)), &[2, 0, 1]);
        assert!(
            wallets.orders[&key].derived().is_none(),
            "the unfiltered list is kept"
        );
        let whales = wallets.list(&q(Some(SizeClass::Whale), None)).as_ptr();
        assert_eq!(
            wallets.orders[&key].derived().map(<[_]>::len),
            Some(11),
            "the order's filtered lists are derived together"
        );
        assert_eq!(wallets.list(&q(Some(SizeClass::Whale), None)), &[1]);
        assert_eq!(
            wallets.list(&q(Some(SizeClass::Whale), None)).as_ptr(),
            whales,
            "derived once"
        );
        assert_eq!(wallets.list(&q(None, Some(Direction::Long))), &[0]);
        assert_eq!(wallets.list(&q(Some(SizeClass::Shark), None)), &[2]);
        assert_eq!(
            wallets.list(&q(Some(SizeClass::Shark), Some(Direction::Short))),
            &[] as &[u32]
        );
    }
}
