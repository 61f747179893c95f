//! One data version, indexed and rendered for serving, and patched instead
//! of rebuilt when a writer changed a few wallets.
//!
//! Every item (market, position, wallet, current liquidity day) is rendered
//! to JSON once, when it enters the served data, and every documented order
//! is kept as a sorted list. A page request is then a binary search for the
//! cursor plus copying bytes that are already rendered: no request sorts,
//! filters, aggregates or formats a decimal.
//!
//! Positions and wallets are shared between versions (`Arc`): applying a
//! publish ([`Snapshot::apply`]) renders only the wallets it changed and
//! their positions, and merges them into the sorted lists of the served
//! version. Sort keys are kept typed beside each rendered item
//! ([`SortKey`]); nothing is parsed back out of JSON.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use bigdecimal::BigDecimal;
use market_model::{
    Coverage, Direction, LiquidityDay, Market, MarketCohorts, MarketList, MarketPosition,
    MarketSort, NetworkCoverage, SizeClass, SortOrder, Wallet, WalletDirection, WalletSort,
};
use serde::Serialize;
use time::OffsetDateTime;

use market_engine::{DataVersion, PositionKeys, SortKey, VersionChanges};

use crate::rendered::RenderedPosition;

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

/// JSON items rendered back to back, each followed by a comma.
#[derive(Debug, Default)]
pub struct JsonItems {
    bytes: Vec<u8>,
    /// `starts[i]` is where item `i` begins; one entry more than items.
    starts: Vec<usize>,
}

impl JsonItems {
    /// Renders `item` after the last one and returns its index.
    fn push<T: Serialize>(&mut self, item: &T) -> usize {
        if self.starts.is_empty() {
            self.starts.push(0);
        }
        serde_json::to_writer(&mut self.bytes, item).expect("model types serialize");
        self.bytes.push(b',');
        self.starts.push(self.bytes.len());
        self.starts.len() - 2
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// Whether there are no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity() + self.starts.capacity() * std::mem::size_of::<usize>()
    }

    /// The JSON of item `i`.
    pub fn item(&self, i: usize) -> &[u8] {
        &self.bytes[self.starts[i]..self.starts[i + 1] - 1]
    }
}

/// A page of rendered items.
#[derive(Debug)]
pub struct Page<'a> {
    /// Rendered items, in order; joined with commas they are the page's items.
    pub parts: Vec<&'a [u8]>,
    /// Number of items.
    pub len: usize,
    /// Whether more items follow the last one.
    pub has_more: bool,
}

impl Page<'_> {
    /// Total bytes of the items joined with commas.
    pub fn json_len(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum::<usize>() + self.parts.len().saturating_sub(1)
    }

    /// Appends the items joined with commas to `out`.
    pub fn write_items(&self, out: &mut Vec<u8>) {
        for (i, part) in self.parts.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(part);
        }
    }
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

/// The keys of a page's last item, for the next cursor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemKey<'a> {
    /// The sort value in plain notation, exactly as rendered (`None` when null).
    pub value: Option<String>,
    /// The address.
    pub address: &'a str,
}

/// A served wallet: its rendered item and its positions.
#[derive(Debug)]
pub struct WalletView<'a> {
    /// The wallet's JSON object.
    pub wallet: &'a [u8],
    /// Its positions' JSON objects.
    pub positions: Page<'a>,
}

/// A page of rendered items with the keys of its last item.
#[derive(Debug)]
pub struct KeyedPage<'a> {
    /// The items.
    pub page: Page<'a>,
    /// Keys of the last item, when the page is not empty.
    pub last: Option<ItemKey<'a>>,
}

/// A rendered position and its keys.
#[derive(Debug)]
struct PositionItem {
    json: Box<[u8]>,
    /// `positionValue`.
    value: SortKey,
    /// The wallet's slot in the version's wallet table (the address is there).
    wallet: u32,
    direction: Direction,
}

/// The positions of one market in page order (value descending, then
/// address), and the long and short subsets as indexes into it.
#[derive(Debug, Default)]
struct MarketPositions {
    all: Vec<Arc<PositionItem>>,
    long: Vec<u32>,
    short: Vec<u32>,
}

impl MarketPositions {
    fn new(all: Vec<Arc<PositionItem>>) -> MarketPositions {
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

/// A rendered wallet and its keys.
#[derive(Debug)]
struct WalletItem {
    json: Box<[u8]>,
    address: Box<str>,
    /// The address's first 16 bytes, big-endian: comparing two wallets'
    /// addresses rarely needs more (and then not the string's memory).
    prefix: u128,
    /// The value of every sort key, in [`WalletSort::ALL`] order (`None`: null).
    keys: [Option<SortKey>; 5],
}

// `WalletItem::keys` holds one entry per sort key.
const _: () = assert!(WalletSort::ALL.len() == 5);

impl WalletItem {
    fn new(w: &Wallet) -> WalletItem {
        WalletItem {
            json: render(w),
            address: w.address.as_str().into(),
            prefix: address_prefix(&w.address),
            keys: std::array::from_fn(|s| {
                wallet_value(w, WalletSort::ALL[s]).map(|d| SortKey::new(&d.0))
            }),
        }
    }

    fn key(&self, sort: WalletSort) -> Option<&SortKey> {
        self.keys[sort_index(sort)].as_ref()
    }

    /// Address order, the same as comparing the strings.
    fn cmp_address(&self, other: &WalletItem) -> Ordering {
        self.prefix
            .cmp(&other.prefix)
            .then_with(|| self.address.cmp(&other.address))
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
struct Wallets {
    slots: Vec<Option<Arc<WalletItem>>>,
    /// Empty slots, reused by the next wallets added.
    free: Vec<u32>,
    /// Slots by address.
    by_address: Vec<u32>,
    /// Slots hashed by address: wallet detail looks one address up per
    /// request, and a binary search over `by_address` reads a wallet item
    /// (a likely cache miss) per step.
    by_hash: AddressIndex,
    /// Slots in every listing order: per (sort, order), one list per filter
    /// (indexed by [`filter_index`]).
    orders: HashMap<(WalletSort, SortOrder), Vec<Vec<u32>>>,
    /// Per slot, what the filters test ([`filter_flags`]), kept dense so
    /// that deriving the filtered lists touches no wallet item.
    flags: Vec<u8>,
}

/// Wallet slots in a hash table keyed by their address, which the table
/// does not store: it is read from the slot's item.
#[derive(Clone, Debug, Default)]
struct AddressIndex {
    table: hashbrown::HashTable<u32>,
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
    fn new(slots: &Slots) -> AddressIndex {
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
    fn insert(&mut self, slots: &Slots, slot: u32, address: &str) {
        let hasher = &self.hasher;
        self.table.insert_unique(
            std::hash::BuildHasher::hash_one(hasher, address),
            slot,
            |&s| std::hash::BuildHasher::hash_one(hasher, slot_address(slots, s)),
        );
    }

    /// Drops `slot`, whose item had `address`.
    fn remove(&mut self, slot: u32, address: &str) {
        if let Ok(entry) = self.table.find_entry(self.hash(address), |&s| s == slot) {
            entry.remove();
        }
    }
}

impl Wallets {
    fn item(&self, slot: u32) -> &WalletItem {
        self.slots[slot as usize]
            .as_deref()
            .expect("lists name only occupied slots")
    }

    fn address(&self, slot: u32) -> &str {
        &self.item(slot).address
    }

    /// The slot of `address`.
    fn find(&self, address: &str) -> Option<u32> {
        self.by_hash.find(&self.slots, address)
    }

    fn cmp_in(&self, a: u32, b: u32, sort: WalletSort, order: SortOrder) -> Ordering {
        let (x, y) = (self.item(a), self.item(b));
        cmp_values(x.key(sort), y.key(sort), order).then_with(|| x.cmp_address(y))
    }

    /// The list of `q`.
    fn list(&self, q: &WalletOrder) -> &[u32] {
        &self.orders[&(q.sort, q.order)][filter_index(q.size, q.direction)]
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
fn filter_flags(w: &Wallet) -> u8 {
    let size = filter_index(Some(w.size_class), None) / 3;
    let direction = match w.direction {
        WalletDirection::Long => 1,
        WalletDirection::Short => 2,
        _ => 0,
    };
    (size as u8) | (direction << 2)
}

/// The lists of every filter, from the unfiltered list, in one pass.
fn filtered_lists(all: Vec<u32>, flags: &[u8]) -> Vec<Vec<u32>> {
    let mut lists: Vec<Vec<u32>> = (0..FILTERS).map(|_| Vec::new()).collect();
    for &s in &all {
        let f = flags[s as usize];
        let (size, direction) = (usize::from(f & 3), usize::from(f >> 2));
        lists[size * 3].push(s);
        if direction != 0 {
            lists[direction].push(s);
            lists[size * 3 + direction].push(s);
        }
    }
    lists[0] = all;
    for l in &mut lists {
        l.shrink_to_fit();
    }
    lists
}

fn sort_orders() -> impl Iterator<Item = (WalletSort, SortOrder)> {
    WalletSort::ALL
        .iter()
        .flat_map(|&sort| [SortOrder::Asc, SortOrder::Desc].map(|order| (sort, order)))
}

#[cfg(test)]
fn wallet_filters() -> impl Iterator<Item = (Option<SizeClass>, Option<Direction>)> {
    [
        None,
        Some(SizeClass::Shrimp),
        Some(SizeClass::Shark),
        Some(SizeClass::Whale),
    ]
    .into_iter()
    .flat_map(|size| [None, Some(Direction::Long), Some(Direction::Short)].map(|d| (size, d)))
}

/// The per-asset part of a version, rebuilt whole by every version (a few
/// hundred markets).
#[derive(Debug)]
struct MarketsPart {
    markets: Vec<Market>,
    market_json: JsonItems,
    /// (foldhash: looked up once per position when a version is built.)
    by_symbol: HashMap<String, usize, foldhash::fast::RandomState>,
    by_canonical: HashMap<String, Vec<usize>>,
    /// The whole `MarketList` body per order.
    market_lists: HashMap<(MarketSort, SortOrder), Vec<u8>>,
    /// By market index (every market has its current day).
    current_days: JsonItems,
    current_day_symbols: Vec<String>,
    /// The rendered `NetworkCoverage`.
    coverage_json: Vec<u8>,
    /// The rendered `MarketCohorts` by market index.
    cohorts_json: JsonItems,
}

impl MarketsPart {
    fn new(
        mut markets: Vec<Market>,
        mut current_days: Vec<LiquidityDay>,
        cohorts: Vec<MarketCohorts>,
        coverage: &NetworkCoverage,
        observed_at: OffsetDateTime,
    ) -> MarketsPart {
        markets.sort_by(|a, b| a.symbol.cmp(&b.symbol));
        current_days.sort_by(|a, b| a.network_asset_symbol.cmp(&b.network_asset_symbol));
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
        MarketsPart {
            markets,
            market_json,
            by_symbol,
            by_canonical,
            market_lists,
            current_days: current_json,
            current_day_symbols: current_days
                .into_iter()
                .map(|d| d.network_asset_symbol)
                .collect(),
            coverage_json: serde_json::to_vec(coverage).expect("model types serialize"),
            cohorts_json,
        }
    }

    fn heap_bytes(&self) -> usize {
        self.market_json.heap_bytes()
            + self.current_days.heap_bytes()
            + self.cohorts_json.heap_bytes()
            + self.market_lists.values().map(Vec::capacity).sum::<usize>()
            + self.coverage_json.capacity()
    }
}

/// One immutable, indexed data version.
#[derive(Debug)]
pub struct Snapshot {
    /// Data version (monotonic).
    pub version: i64,
    /// When the scan behind this version was observed.
    pub observed_at: OffsetDateTime,
    part: MarketsPart,
    /// By market index.
    positions: Vec<Arc<MarketPositions>>,
    wallets: Wallets,
    /// Each wallet slot's positions on every market, by value descending
    /// then symbol (the items of `positions`, shared).
    by_wallet: Vec<WalletPositions>,
}

/// One wallet's position items.
type WalletPositions = Arc<[Arc<PositionItem>]>;

/// Each slot's positions from `lists` (per slot, in market order), sorted by
/// value descending; the sort is stable, so equal values stay in symbol order.
fn wallet_positions(lists: Vec<Vec<Arc<PositionItem>>>) -> Vec<WalletPositions> {
    lists
        .into_iter()
        .map(|mut l| {
            l.sort_by(|a, b| b.value.cmp(&a.value));
            l.into()
        })
        .collect()
}

fn render<T: Serialize>(item: &T) -> Box<[u8]> {
    serde_json::to_vec(item)
        .expect("model types serialize")
        .into_boxed_slice()
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
pub fn wallet_value(w: &Wallet, sort: WalletSort) -> Option<&market_model::Decimal> {
    match sort {
        WalletSort::AccountTotalValue => Some(&w.account_total_value),
        WalletSort::TotalPositionValue => Some(&w.total_position_value),
        WalletSort::NetPnl => w.net_pnl.as_ref(),
        WalletSort::Roi => w.roi.as_ref(),
        WalletSort::WinRate => w.win_rate.as_ref(),
    }
}

fn sort_index(sort: WalletSort) -> usize {
    WalletSort::ALL
        .iter()
        .position(|&s| s == sort)
        .expect("every sort is listed")
}

/// Compares (value, address) keys in wallet-listing order: nulls last in
/// both orders, then the value in `order`, then address ascending.
fn cmp_wallet_keys<K: Ord>(
    a: (Option<K>, &str),
    b: (Option<K>, &str),
    order: SortOrder,
) -> Ordering {
    cmp_values(a.0, b.0, order).then_with(|| a.1.cmp(b.1))
}

/// The value part of [`cmp_wallet_keys`].
fn cmp_values<K: Ord>(a: Option<K>, b: Option<K>, order: SortOrder) -> Ordering {
    match (a, b) {
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
        (Some(x), Some(y)) => match order {
            SortOrder::Asc => x.cmp(&y),
            SortOrder::Desc => y.cmp(&x),
        },
    }
}

/// Compares (value, address) keys in position order: value descending, then address.
fn cmp_position_keys<K: Ord>(a: (K, &str), b: (K, &str)) -> Ordering {
    b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1))
}

/// `old` without the entries `gone` marks, with `added` (sorted by `cmp`,
/// which must order `old` too) merged in. Costs a copy of `old` plus a binary
/// search per added entry, not a comparison per entry of `old`.
fn patch_sorted<T: Clone>(
    old: &[T],
    gone: impl Fn(&T) -> bool,
    added: &[T],
    cmp: impl Fn(&T, &T) -> Ordering,
) -> Vec<T> {
    let kept: Vec<T> = old.iter().filter(|x| !gone(x)).cloned().collect();
    if added.is_empty() {
        return kept;
    }
    let mut at = Vec::with_capacity(added.len());
    let mut from = 0;
    for a in added {
        from += kept[from..].partition_point(|x| cmp(x, a) == Ordering::Less);
        at.push(from);
    }
    let mut out = Vec::with_capacity(kept.len() + added.len());
    let mut next = added.iter().zip(at).peekable();
    for (i, x) in kept.into_iter().enumerate() {
        while let Some((a, _)) = next.next_if(|&(_, p)| p == i) {
            out.push(a.clone());
        }
        out.push(x);
    }
    out.extend(next.map(|(a, _)| a.clone()));
    out
}

/// A position the snapshot can take in: a model struct (rendered here) or a
/// [`RenderedPosition`] (moved in).
trait IntoItem: PositionKeys {
    /// The item of `owner`'s position (its wallet is in slot `wallet`), and
    /// its value key.
    fn into_item(self, wallet: u32, owner: &Wallet) -> (SortKey, PositionItem);
}

impl IntoItem for &MarketPosition {
    /// (A model carries its wallet's label and tags already.)
    fn into_item(self, wallet: u32, _owner: &Wallet) -> (SortKey, PositionItem) {
        let value = SortKey::new(&self.position_value.0);
        let item = PositionItem {
            json: render(self),
            value: value.clone(),
            wallet,
            direction: self.direction,
        };
        (value, item)
    }
}

impl IntoItem for MarketPosition {
    fn into_item(self, wallet: u32, owner: &Wallet) -> (SortKey, PositionItem) {
        (&self).into_item(wallet, owner)
    }
}

impl IntoItem for RenderedPosition {
    fn into_item(self, wallet: u32, owner: &Wallet) -> (SortKey, PositionItem) {
        let direction = self.direction();
        let RenderedPosition { value, json, .. } =
            self.labelled(owner.label.as_deref(), &owner.tags);
        let item = PositionItem {
            json,
            value: value.clone(),
            wallet,
            direction,
        };
        (value, item)
    }
}

/// Position items of `positions`, grouped by market index and sorted in page
/// order (`same_value` orders the wallet slots of equal values by address);
/// positions of unknown markets or wallets are left out. `wallet_of` finds
/// a position's wallet: its slot and the wallet.
fn position_items<'w, P: IntoItem>(
    positions: impl IntoIterator<Item = P>,
    by_symbol: &HashMap<String, usize, foldhash::fast::RandomState>,
    markets: usize,
    wallet_of: impl Fn(&str) -> Option<(u32, &'w Wallet)>,
    same_value: impl Fn(u32, u32) -> Ordering,
) -> Vec<Vec<(SortKey, u32, Arc<PositionItem>)>> {
    let mut grouped: Vec<Vec<(SortKey, u32, Arc<PositionItem>)>> =
        (0..markets).map(|_| Vec::new()).collect();
    for p in positions {
        let (Some(&m), Some((wallet, owner))) = (by_symbol.get(p.symbol()), wallet_of(p.address()))
        else {
            continue;
        };
        let (value, item) = p.into_item(wallet, owner);
        grouped[m].push((value, wallet, Arc::new(item)));
    }
    // Sorted on keys held inline, not through the items.
    for g in &mut grouped {
        g.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| same_value(a.1, b.1)));
    }
    grouped
}

/// One market's items from the sorted groups of several parts, merged.
fn merge_groups(
    groups: Vec<Vec<(SortKey, u32, Arc<PositionItem>)>>,
    same_value: impl Fn(u32, u32) -> Ordering,
) -> Vec<Arc<PositionItem>> {
    let mut merged: Vec<(SortKey, u32, Arc<PositionItem>)> = Vec::new();
    for g in groups {
        if merged.is_empty() {
            merged = g;
        } else if !g.is_empty() {
            merged.extend(g);
            // Two sorted runs: the sort merges them.
            merged.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| same_value(a.1, b.1)));
        }
    }
    without_keys(merged)
}

/// The items of one market's sorted group.
fn without_keys(group: Vec<(SortKey, u32, Arc<PositionItem>)>) -> Vec<Arc<PositionItem>> {
    group.into_iter().map(|(_, _, p)| p).collect()
}

/// `slots` in `sort`'s ascending and descending orders, when slot order is
/// address order (a build): sorted once, ascending, on keys copied out of the
/// items; the descending order is derived from it (nulls stay last, and equal
/// values keep address order in both).
fn sorted_by_value(wallets: &Wallets, sort: WalletSort) -> (Vec<u32>, Vec<u32>) {
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
                by_market
                    .into_iter()
                    .map(|groups| {
                        Arc::new(MarketPositions::new(merge_groups(groups, |a, b| a.cmp(&b))))
                    })
                    .collect::<Vec<_>>()
            });
            let slots: Vec<_> = wallets
                .iter()
                .map(|w| Some(Arc::new(WalletItem::new(w))))
                .collect();
            let mut index = Wallets {
                by_address: (0..wallets.len() as u32).collect(),
                by_hash: AddressIndex::new(&slots),
                slots,
                free: Vec::new(),
                orders: HashMap::new(),
                flags,
            };
            for &sort in WalletSort::ALL {
                let (asc, desc) = sorted_by_value(&index, sort);
                for (order, list) in [(SortOrder::Asc, asc), (SortOrder::Desc, desc)] {
                    let lists = filtered_lists(list, &index.flags);
                    index.orders.insert((sort, order), lists);
                }
            }
            (positions.join().expect("building positions"), index)
        });
        let mut lists: Vec<Vec<Arc<PositionItem>>> = vec![Vec::new(); index.slots.len()];
        for m in &positions {
            for p in &m.all {
                lists[p.wallet as usize].push(p.clone());
            }
        }
        Snapshot {
            version,
            observed_at,
            part,
            positions,
            wallets: index,
            by_wallet: wallet_positions(lists),
        }
    }

    /// The next version: this one with `changes` applied. Only the changed
    /// wallets and their positions are rendered; everything else is shared
    /// with this version. Positions of wallets not in `changes.wallets`, or
    /// of markets the new version does not have, are left out.
    pub fn apply(&self, version: i64, changes: VersionChanges) -> Snapshot {
        self.apply_items(version, changes)
    }

    /// [`Snapshot::apply`] with positions read back as text
    /// (`Store::load_changes_for_serving`): each is moved in as rendered,
    /// labelled with its wallet's label and tags.
    pub fn apply_rendered(
        &self,
        version: i64,
        changes: VersionChanges<RenderedPosition>,
    ) -> Snapshot {
        self.apply_items(version, changes)
    }

    fn apply_items<P: IntoItem + Send>(
        &self,
        version: i64,
        changes: VersionChanges<P>,
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
            by_hash,
            orders: HashMap::new(),
            flags,
        };
        let is_gone = |&s: &u32| gone.get(s as usize).copied().unwrap_or(false);
        index.by_address = patch_sorted(&old.by_address, is_gone, &added, |&a, &b| {
            index.item(a).cmp_address(index.item(b))
        });

        let (positions, orders) = std::thread::scope(|s| {
            let index = &index;
            let positions = s.spawn(|| {
                let wallet_of = |address: &str| -> Option<(u32, &Wallet)> {
                    wallets
                        .binary_search_by(|w| w.address.as_str().cmp(address))
                        .ok()
                        .map(|i| (added[i], &wallets[i]))
                };
                let grouped: Vec<Vec<Arc<PositionItem>>> = position_items(
                    positions,
                    &part.by_symbol,
                    part.markets.len(),
                    wallet_of,
                    |a, b| index.item(a).cmp_address(index.item(b)),
                )
                .into_iter()
                .map(without_keys)
                .collect();
                // The changed wallets' lists, in market order.
                let mut lists: HashMap<u32, Vec<Arc<PositionItem>>> = HashMap::new();
                for p in grouped.iter().flatten() {
                    lists.entry(p.wallet).or_default().push(p.clone());
                }
                let positions = part
                    .markets
                    .iter()
                    .zip(grouped)
                    .map(|(m, new)| {
                        let previous = self
                            .part
                            .by_symbol
                            .get(&m.symbol)
                            .map(|&i| &self.positions[i]);
                        let empty = MarketPositions::default();
                        let previous = previous.map_or(&empty, |p| p.as_ref());
                        let drops = previous.all.iter().any(|p| gone[p.wallet as usize]);
                        match self.part.by_symbol.get(&m.symbol) {
                            Some(&i) if !drops && new.is_empty() => self.positions[i].clone(),
                            _ => Arc::new(MarketPositions::new(patch_sorted(
                                &previous.all,
                                |p| gone[p.wallet as usize],
                                &new,
                                |a, b| {
                                    b.value.cmp(&a.value).then_with(|| {
                                        index.item(a.wallet).cmp_address(index.item(b.wallet))
                                    })
                                },
                            ))),
                        }
                    })
                    .collect::<Vec<_>>();
                (positions, lists)
            });
            // Each order's unfiltered list is patched (a binary search per
            // added wallet); its filtered lists are derived from it.
            let mut orders = HashMap::new();
            for (sort, order) in sort_orders() {
                let mut sorted = added.clone();
                sorted.sort_by(|&a, &b| index.cmp_in(a, b, sort, order));
                let all = patch_sorted(
                    &old.orders[&(sort, order)][0],
                    is_gone,
                    &sorted,
                    |&a, &b| index.cmp_in(a, b, sort, order),
                );
                orders.insert((sort, order), filtered_lists(all, &index.flags));
            }
            (positions.join().expect("patching positions"), orders)
        });
        let (positions, mut lists) = positions;
        index.orders = orders;
        let mut by_wallet = self.by_wallet.clone();
        by_wallet.resize_with(index.slots.len(), || Arc::from(Vec::new()));
        for (slot, g) in gone.iter().enumerate() {
            if *g {
                by_wallet[slot] = Arc::from(Vec::new());
            }
        }
        for slot in &added {
            let list = lists.remove(slot).unwrap_or_default();
            by_wallet[*slot as usize] = wallet_positions(vec![list]).remove(0);
        }
        Snapshot {
            version,
            observed_at,
            part,
            positions,
            wallets: index,
            by_wallet,
        }
    }

    /// The rendered coverage report of this version.
    pub fn coverage_json(&self) -> &[u8] {
        &self.part.coverage_json
    }

    /// Approximate heap bytes of the rendered items and indexes (items
    /// shared with another version are counted in both).
    pub fn heap_bytes(&self) -> usize {
        let positions: usize = self
            .positions
            .iter()
            .map(|m| {
                m.all
                    .iter()
                    .map(|p| p.json.len() + std::mem::size_of::<PositionItem>() + 16)
                    .sum::<usize>()
                    + m.all.capacity() * 8
                    + (m.long.capacity() + m.short.capacity()) * 4
            })
            .sum();
        let wallets: usize = self
            .wallets
            .slots
            .iter()
            .flatten()
            .map(|w| w.json.len() + w.address.len() + std::mem::size_of::<WalletItem>() + 16)
            .sum::<usize>()
            + self.wallets.slots.capacity() * 8
            + self.wallets.by_address.capacity() * 4
            + self.wallets.by_hash.table.capacity() * 5
            + self
                .wallets
                .orders
                .values()
                .map(|v| v.capacity() * 4)
                .sum::<usize>();
        self.part.heap_bytes() + positions + wallets
    }

    /// Number of tracked assets.
    pub fn asset_count(&self) -> usize {
        self.part.markets.len()
    }

    /// Number of served positions and wallets.
    pub fn counts(&self) -> (usize, usize) {
        (
            self.positions.iter().map(|m| m.all.len()).sum(),
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
        let at = |k: usize| -> &PositionItem { &a.all[subset.map_or(k, |s| s[k] as usize)] };
        let len = subset.map_or(a.all.len(), <[u32]>::len);
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
}

/// Binary search over `len` sorted items: the first index whose item is not
/// `<=` the key (`le(i)` tells whether item `i` sorts at or before the key).
fn partition(len: usize, le: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if le(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use market_engine::fixtures::{position, sample, wallet};
    use market_engine::materialize;

    fn input() -> market_engine::ScanInput {
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
        input
    }

    fn snapshot() -> (Snapshot, DataVersion) {
        let m = materialize("perpnet", input()).unwrap();
        (Snapshot::build(3, m.clone()), m)
    }

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
    fn sort_keys_order_like_big_decimals() {
        let texts = [
            "0",
            "-0.000",
            "1",
            "-1",
            "0.000000000000000001",
            "0.0000000000000000001",
            "-0.0000000000000000001",
            "1e20",
            "1.5e19",
            "170141183460469231731",
            "-1e30",
            "123456.789",
            "123456.7890",
            "99999999999999999999.999999999999999999",
            "9223372036854775807",
            "9223372036854775808",
            "922337203685477580.7",
            "1e-40",
            "5e5",
        ];
        let values: Vec<BigDecimal> = texts.iter().map(|t| t.parse().unwrap()).collect();
        for a in &values {
            let key = SortKey::new(a);
            assert_eq!(
                key.text(),
                a.to_plain_string(),
                "the text is the rendered one"
            );
            for b in &values {
                assert_eq!(key.cmp(&SortKey::new(b)), a.cmp(b), "{a} vs {b}");
            }
        }
        assert!(matches!(SortKey::new(&values[11]), SortKey::Small { .. }));
        assert!(
            matches!(SortKey::new(&values[15]), SortKey::Big(_)),
            "beyond i64"
        );
    }

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
    fn patch_sorted_drops_and_merges() {
        let old = [1, 3, 5, 7, 9];
        let got = patch_sorted(&old, |&x| x == 5 || x == 9, &[0, 4, 6, 10], |a, b| a.cmp(b));
        assert_eq!(got, [0, 1, 3, 4, 6, 7, 10]);
        assert_eq!(patch_sorted(&old, |_| true, &[2], |a, b| a.cmp(b)), [2]);
        assert_eq!(
            patch_sorted(&[], |_: &i32| false, &[2, 3], |a, b| a.cmp(b)),
            [2, 3]
        );
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
                let address = format!("0x{:02}", next(30));
                let exists = input.wallets.iter().any(|w| w.address == address);
                match next(3) {
                    0 if exists => {
                        input.wallets.retain(|w| w.address != address);
                        input.positions.retain(|p| p.address != address);
                    }
                    _ => {
                        input.wallets.retain(|w| w.address != address);
                        input.positions.retain(|p| p.address != address);
                        let account = ["0", "5000", "150000", "2000000"][next(4) as usize];
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
                                let value = format!("{}.{}", 100 + next(5) * 50, next(3) * 5);
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
                current_days: changed.current_days.clone(),
                cohorts: changed.cohorts.clone(),
                coverage: changed.coverage.clone(),
                wallets: changed.wallets.clone(),
                removed: changed.removed.clone(),
            };
            served = served.apply(round, changed);
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
