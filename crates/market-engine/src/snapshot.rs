//! One materialized data version, indexed and rendered for serving.
//!
//! Every item (market, position, wallet, current liquidity day) is rendered
//! to JSON once per version, and every documented order is precomputed. A page
//! request is then a binary search for the cursor plus copying bytes that are
//! already rendered: no request sorts, filters, aggregates or formats a decimal.
//! The model structs of positions and wallets are dropped after rendering (the
//! rendered bytes are about a third of their size); keyset keys are read back
//! from the rendered bytes.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::ops::Range;

use bigdecimal::num_traits::ToPrimitive;
use bigdecimal::BigDecimal;
use market_model::{
    Coverage, Direction, Market, MarketList, MarketPosition, MarketSort, SizeClass, SortOrder,
    Wallet, WalletDirection, WalletSort,
};
use serde::Serialize;
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

/// JSON items rendered back to back, each followed by a comma, so that a run
/// of consecutive items is one slice.
#[derive(Debug, Default)]
pub struct JsonItems {
    bytes: Vec<u8>,
    /// `starts[i]` is where item `i` begins; one entry more than items.
    starts: Vec<usize>,
}

impl JsonItems {
    fn with_capacity(items: usize, bytes: usize) -> JsonItems {
        let mut starts = Vec::with_capacity(items + 1);
        starts.push(0);
        JsonItems {
            bytes: Vec::with_capacity(bytes),
            starts,
        }
    }

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

    fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
        self.starts.shrink_to_fit();
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

    /// Items `range`, joined by commas (empty for an empty range).
    pub fn run(&self, range: Range<usize>) -> &[u8] {
        if range.is_empty() {
            return &[];
        }
        &self.bytes[self.starts[range.start]..self.starts[range.end] - 1]
    }

    /// Where `text` (a JSON string literal, quotes included) is the value of
    /// `field` in item `i`: the span of the text without its quotes.
    fn span(&self, i: usize, field: &FieldFinder, text: &str) -> Span {
        let item = self.item(i);
        let mut from = 0;
        loop {
            let at = from
                + field
                    .0
                    .find(&item[from..])
                    .expect("a rendered item contains its own fields");
            let value = at + field.0.needle().len();
            if item[value..].starts_with(text.as_bytes()) {
                return Span {
                    at: (value + 1) as u32,
                    len: (text.len() - 2) as u32,
                };
            }
            from = at + 1;
        }
    }

    /// The text of `span` in item `i`.
    fn text(&self, i: usize, span: Span) -> &str {
        let start = self.starts[i] + span.at as usize;
        std::str::from_utf8(&self.bytes[start..start + span.len as usize])
            .expect("spans cover ASCII")
    }
}

/// Finds `"field":` in rendered items (built once per field, not per item).
struct FieldFinder(memchr::memmem::Finder<'static>);

impl FieldFinder {
    fn new(field: &str) -> FieldFinder {
        FieldFinder(memchr::memmem::Finder::new(format!("\"{field}\":").as_bytes()).into_owned())
    }
}

/// Where a key's text sits inside one rendered item.
#[derive(Clone, Copy, Debug)]
struct Span {
    at: u32,
    len: u32,
}

/// The JSON string literal of a value that serializes as a string.
fn json_string<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("model types serialize")
}

/// A page of rendered items.
#[derive(Debug)]
pub struct Page<'a> {
    /// Rendered fragments; joined with commas they are the page's items, in order.
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

/// The positions of one market: a contiguous run in position order, plus the
/// long and short subsets.
#[derive(Debug, Default)]
struct AssetPositions {
    all: Range<usize>,
    long: Vec<u32>,
    short: Vec<u32>,
}

/// Keys of one rendered wallet: its address and the value of every sort key
/// (in [`WalletSort::ALL`] order; `None` for null).
#[derive(Debug)]
struct WalletKeys {
    address: Span,
    values: [Option<Span>; 5],
}

/// One immutable, indexed data version.
#[derive(Debug)]
pub struct Snapshot {
    /// Data version (monotonic).
    pub version: i64,
    /// When the scan behind this version was observed.
    pub observed_at: OffsetDateTime,
    markets: Vec<Market>,
    market_json: JsonItems,
    by_symbol: HashMap<String, usize>,
    by_canonical: HashMap<String, Vec<usize>>,
    /// The whole `MarketList` body per order.
    market_lists: HashMap<(MarketSort, SortOrder), Vec<u8>>,
    /// By market index, then value descending, then address.
    positions: JsonItems,
    /// (positionValue, address) of each position.
    position_keys: Vec<[Span; 2]>,
    asset_positions: Vec<AssetPositions>,
    /// By address.
    wallets: JsonItems,
    wallet_keys: Vec<WalletKeys>,
    wallet_orders: HashMap<WalletOrder, Vec<u32>>,
    /// By market index (every market has its current day).
    current_days: JsonItems,
    current_day_symbols: Vec<String>,
    /// The rendered `NetworkCoverage`.
    coverage_json: Vec<u8>,
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

fn wallet_field(sort: WalletSort) -> &'static str {
    match sort {
        WalletSort::AccountTotalValue => "accountTotalValue",
        WalletSort::TotalPositionValue => "totalPositionValue",
        WalletSort::NetPnl => "netPnl",
        WalletSort::Roi => "roi",
        WalletSort::WinRate => "winRate",
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

/// A decimal with an exact fixed-point image (value × 10^18 as `i128`) when
/// it has one, so sorting compares integers instead of big numbers.
#[derive(Clone, Copy)]
struct SortNum<'a> {
    fixed: Option<i128>,
    big: &'a BigDecimal,
}

impl<'a> SortNum<'a> {
    fn new(big: &'a BigDecimal) -> SortNum<'a> {
        let (int, scale) = big.as_bigint_and_scale();
        let fixed = u32::try_from(18 - scale)
            .ok()
            .filter(|&shift| shift <= 36)
            .and_then(|shift| int.to_i128()?.checked_mul(10i128.checked_pow(shift)?));
        SortNum { fixed, big }
    }

    /// Numeric order (the fixed images order exactly like the values).
    fn cmp(&self, other: &SortNum<'_>) -> Ordering {
        match (self.fixed, other.fixed) {
            (Some(a), Some(b)) => a.cmp(&b),
            _ => self.big.cmp(other.big),
        }
    }
}

/// Parses a key span back (it was rendered from a decimal).
fn parse_key(text: &str) -> BigDecimal {
    text.parse().expect("rendered decimals parse")
}

/// Dense ranks of `values` in ascending order (equal values share a rank);
/// `None` for null values.
fn dense_ranks<T>(values: &[Option<T>], cmp: impl Fn(&T, &T) -> Ordering) -> Vec<Option<u32>> {
    let mut idx: Vec<u32> = (0..values.len() as u32)
        .filter(|&i| values[i as usize].is_some())
        .collect();
    let get = |i: u32| values[i as usize].as_ref().expect("filtered to values");
    idx.sort_unstable_by(|&a, &b| cmp(get(a), get(b)));
    let mut ranks = vec![None; values.len()];
    let mut rank = 0u32;
    for (k, &i) in idx.iter().enumerate() {
        if k > 0 && cmp(get(idx[k - 1]), get(i)) != Ordering::Equal {
            rank += 1;
        }
        ranks[i as usize] = Some(rank);
    }
    ranks
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

/// The keys of a page's last item, for the next cursor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemKey<'a> {
    /// The sort value as rendered (`None` when it is null).
    pub value: Option<&'a str>,
    /// The address.
    pub address: &'a str,
}

/// A page of rendered items with the keys of its last item.
#[derive(Debug)]
pub struct KeyedPage<'a> {
    /// The items.
    pub page: Page<'a>,
    /// Keys of the last item, when the page is not empty.
    pub last: Option<ItemKey<'a>>,
}

struct PositionsPart {
    positions: JsonItems,
    position_keys: Vec<[Span; 2]>,
    asset_positions: Vec<AssetPositions>,
}

struct WalletsPart {
    wallets: JsonItems,
    wallet_keys: Vec<WalletKeys>,
    wallet_orders: HashMap<WalletOrder, Vec<u32>>,
}

fn build_positions(
    positions: Vec<MarketPosition>,
    by_symbol: &HashMap<String, usize>,
    markets: usize,
) -> PositionsPart {
    // Positions of unknown assets cannot be reached through any market; skip them.
    let market_of: Vec<Option<usize>> = positions
        .iter()
        .map(|p| by_symbol.get(&p.symbol).copied())
        .collect();
    let values: Vec<SortNum<'_>> = positions
        .iter()
        .map(|p| SortNum::new(&p.position_value.0))
        .collect();
    let mut order: Vec<u32> = (0..positions.len() as u32)
        .filter(|&i| market_of[i as usize].is_some())
        .collect();
    // By market, then value descending, then address (`cmp_position_keys`).
    order.sort_unstable_by(|&a, &b| {
        let (a, b) = (a as usize, b as usize);
        market_of[a]
            .cmp(&market_of[b])
            .then_with(|| values[b].cmp(&values[a]))
            .then_with(|| positions[a].address.cmp(&positions[b].address))
    });
    drop(values);
    let mut json = JsonItems::with_capacity(order.len(), order.len() * 400);
    let mut keys = Vec::with_capacity(order.len());
    let mut assets: Vec<AssetPositions> = (0..markets).map(|_| AssetPositions::default()).collect();
    let (value_field, address_field) = (
        FieldFinder::new("positionValue"),
        FieldFinder::new("address"),
    );
    for &i in &order {
        let p = &positions[i as usize];
        let k = json.push(p);
        keys.push([
            json.span(k, &value_field, &json_string(&p.position_value)),
            json.span(k, &address_field, &json_string(&p.address)),
        ]);
        let a = &mut assets[market_of[i as usize].expect("filtered to known markets")];
        if a.all.is_empty() {
            a.all = k..k;
        }
        a.all.end = k + 1;
        match p.direction {
            Direction::Long => a.long.push(k as u32),
            Direction::Short => a.short.push(k as u32),
        }
    }
    drop(positions);
    json.shrink_to_fit();
    for a in &mut assets {
        a.long.shrink_to_fit();
        a.short.shrink_to_fit();
    }
    PositionsPart {
        positions: json,
        position_keys: keys,
        asset_positions: assets,
    }
}

fn build_wallets(mut wallets: Vec<Wallet>) -> WalletsPart {
    if !wallets.is_sorted_by(|a, b| a.address <= b.address) {
        wallets.sort_unstable_by(|a, b| a.address.cmp(&b.address));
    }
    let mut json = JsonItems::with_capacity(wallets.len(), wallets.len() * 480);
    let mut keys = Vec::with_capacity(wallets.len());
    let address_field = FieldFinder::new("address");
    let sort_fields: Vec<FieldFinder> = WalletSort::ALL
        .iter()
        .map(|&sort| FieldFinder::new(wallet_field(sort)))
        .collect();
    for w in &wallets {
        let k = json.push(w);
        let address = json.span(k, &address_field, &json_string(&w.address));
        let values = std::array::from_fn(|s| {
            let sort = WalletSort::ALL[s];
            wallet_value(w, sort).map(|v| json.span(k, &sort_fields[s], &json_string(v)))
        });
        keys.push(WalletKeys { address, values });
    }
    json.shrink_to_fit();

    // Wallets are in address order, so "then address ascending" is "then index".
    let mut wallet_orders = HashMap::new();
    for &sort in WalletSort::ALL {
        let values: Vec<Option<SortNum<'_>>> = wallets
            .iter()
            .map(|w| wallet_value(w, sort).map(|d| SortNum::new(&d.0)))
            .collect();
        let ranks = dense_ranks(&values, SortNum::cmp);
        let top = ranks.iter().flatten().max().copied().unwrap_or(0);
        for order in [SortOrder::Asc, SortOrder::Desc] {
            let key = |i: u32| -> u64 {
                let rank = match (ranks[i as usize], order) {
                    (None, _) => u64::from(u32::MAX),
                    (Some(r), SortOrder::Asc) => u64::from(r),
                    (Some(r), SortOrder::Desc) => u64::from(top - r),
                };
                (rank << 32) | u64::from(i)
            };
            let mut all: Vec<u32> = (0..wallets.len() as u32).collect();
            all.sort_unstable_by_key(|&i| key(i));
            for size in [
                None,
                Some(SizeClass::Shrimp),
                Some(SizeClass::Shark),
                Some(SizeClass::Whale),
            ] {
                for direction in [None, Some(Direction::Long), Some(Direction::Short)] {
                    let mut filtered: Vec<u32> = all
                        .iter()
                        .copied()
                        .filter(|&i| {
                            let w = &wallets[i as usize];
                            size.is_none_or(|s| w.size_class == s)
                                && direction_matches(w.direction, direction)
                        })
                        .collect();
                    filtered.shrink_to_fit();
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
    WalletsPart {
        wallets: json,
        wallet_keys: keys,
        wallet_orders,
    }
}

// `WalletKeys::values` holds one entry per sort key.
const _: () = assert!(WalletSort::ALL.len() == 5);

impl Snapshot {
    /// Indexes and renders a materialized version (positions and wallets on
    /// two threads).
    pub fn build(version: i64, data: Materialized) -> Snapshot {
        let Materialized {
            observed_at,
            mut markets,
            wallets,
            positions,
            mut current_days,
            freshness,
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

        let freshness = freshness.unwrap_or_else(|| {
            crate::coverage::wallet_freshness(
                observed_at,
                wallets.iter().map(|w| (w.size_class, Some(w.observed_at))),
            )
        });
        let coverage =
            crate::coverage::network_coverage(observed_at, &markets, &positions, freshness);
        let coverage_json = serde_json::to_vec(&coverage).expect("model types serialize");

        let (positions, wallets) = std::thread::scope(|s| {
            let positions = s.spawn(|| build_positions(positions, &by_symbol, markets.len()));
            let wallets = build_wallets(wallets);
            (positions.join().expect("building positions"), wallets)
        });

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
        let current_day_symbols = current_days
            .into_iter()
            .map(|d| d.network_asset_symbol)
            .collect();

        Snapshot {
            version,
            observed_at,
            markets,
            market_json,
            by_symbol,
            by_canonical,
            market_lists,
            positions: positions.positions,
            position_keys: positions.position_keys,
            asset_positions: positions.asset_positions,
            wallets: wallets.wallets,
            wallet_keys: wallets.wallet_keys,
            wallet_orders: wallets.wallet_orders,
            current_days: current_json,
            current_day_symbols,
            coverage_json,
        }
    }

    /// The rendered coverage report of this version.
    pub fn coverage_json(&self) -> &[u8] {
        &self.coverage_json
    }

    /// Approximate heap bytes of the rendered items and indexes.
    pub fn heap_bytes(&self) -> usize {
        let orders: usize = self.wallet_orders.values().map(|v| v.capacity() * 4).sum();
        let asset_lists: usize = self
            .asset_positions
            .iter()
            .map(|a| (a.long.capacity() + a.short.capacity()) * 4)
            .sum();
        let lists: usize = self.market_lists.values().map(Vec::capacity).sum();
        self.positions.heap_bytes()
            + self.wallets.heap_bytes()
            + self.current_days.heap_bytes()
            + self.market_json.heap_bytes()
            + self.position_keys.capacity() * std::mem::size_of::<[Span; 2]>()
            + self.wallet_keys.capacity() * std::mem::size_of::<WalletKeys>()
            + orders
            + asset_lists
            + lists
    }

    /// Number of tracked assets.
    pub fn asset_count(&self) -> usize {
        self.markets.len()
    }

    /// Number of served positions and wallets.
    pub fn counts(&self) -> (usize, usize) {
        (self.positions.len(), self.wallets.len())
    }

    /// The whole `MarketList` response body in the requested order (ties by
    /// symbol ascending), rendered once per version.
    pub fn market_list_json(&self, sort: MarketSort, order: SortOrder) -> &[u8] {
        &self.market_lists[&(sort, order)]
    }

    /// Market by index.
    pub fn market(&self, index: usize) -> &Market {
        &self.markets[index]
    }

    /// The rendered JSON of a market.
    pub fn market_json(&self, index: usize) -> &[u8] {
        self.market_json.item(index)
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

    /// The `current` liquidity days, by symbol: (symbol, rendered day).
    pub fn current_days(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.current_day_symbols
            .iter()
            .enumerate()
            .map(|(i, s)| (s.as_str(), self.current_days.item(i)))
    }

    /// The UTC date of the `current` liquidity day.
    pub fn current_date(&self) -> time::Date {
        self.observed_at.date()
    }

    fn position_key(&self, i: usize) -> ItemKey<'_> {
        let [value, address] = self.position_keys[i];
        ItemKey {
            value: Some(self.positions.text(i, value)),
            address: self.positions.text(i, address),
        }
    }

    /// A page of a market's positions after `after`, by value descending then address.
    pub fn positions_page(
        &self,
        market: usize,
        direction: Option<Direction>,
        after: Option<&PositionKey>,
        limit: usize,
    ) -> KeyedPage<'_> {
        let a = &self.asset_positions[market];
        let subset = match direction {
            None => None,
            Some(Direction::Long) => Some(a.long.as_slice()),
            Some(Direction::Short) => Some(a.short.as_slice()),
        };
        let len = subset.map_or(a.all.len(), <[u32]>::len);
        let at = |k: usize| subset.map_or(a.all.start + k, |s| s[k] as usize);
        let start = after.map_or(0, |key| {
            partition(len, |k| {
                let item = self.position_key(at(k));
                let value = parse_key(item.value.expect("positions have a value"));
                cmp_position_keys((&value, item.address), (&key.value, &key.address))
                    != Ordering::Greater
            })
        });
        let end = (start + limit).min(len);
        let parts = match subset {
            None => vec![self.positions.run(a.all.start + start..a.all.start + end)]
                .into_iter()
                .filter(|p| !p.is_empty())
                .collect(),
            Some(s) => s[start..end]
                .iter()
                .map(|&i| self.positions.item(i as usize))
                .collect(),
        };
        KeyedPage {
            page: Page {
                parts,
                len: end - start,
                has_more: end < len,
            },
            last: (end > start).then(|| self.position_key(at(end - 1))),
        }
    }

    fn wallet_key(&self, i: usize, sort: WalletSort) -> ItemKey<'_> {
        let keys = &self.wallet_keys[i];
        ItemKey {
            value: keys.values[sort_index(sort)].map(|s| self.wallets.text(i, s)),
            address: self.wallets.text(i, keys.address),
        }
    }

    /// A page of wallets after `after` and the number of wallets matching the filters.
    pub fn wallets_page(
        &self,
        q: WalletOrder,
        after: Option<&WalletKey>,
        limit: usize,
    ) -> (KeyedPage<'_>, usize) {
        let list = &self.wallet_orders[&q];
        let start = after.map_or(0, |key| {
            partition(list.len(), |k| {
                let item = self.wallet_key(list[k] as usize, q.sort);
                let value = item.value.map(parse_key);
                cmp_wallet_keys(
                    (value.as_ref(), item.address),
                    (key.value.as_ref(), &key.address),
                    q.order,
                ) != Ordering::Greater
            })
        });
        let end = (start + limit).min(list.len());
        let page = KeyedPage {
            page: Page {
                parts: list[start..end]
                    .iter()
                    .map(|&i| self.wallets.item(i as usize))
                    .collect(),
                len: end - start,
                has_more: end < list.len(),
            },
            last: (end > start).then(|| self.wallet_key(list[end - 1] as usize, q.sort)),
        };
        (page, list.len())
    }

    /// Number of wallets.
    pub fn wallet_count(&self) -> usize {
        self.wallets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::materialize;
    use crate::aggregate::tests::{position, sample, wallet};

    fn input() -> crate::ScanInput {
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

    fn snapshot() -> (Snapshot, Materialized) {
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
                let page = s.positions_page(btc, direction, after.as_ref(), 7);
                let got: Vec<MarketPosition> = items(&page.page);
                let last = page.last.unwrap();
                let tail = got.last().unwrap();
                assert_eq!(last.value, Some(tail.position_value.to_string().as_str()));
                assert_eq!(last.address, tail.address);
                seen.extend(got);
                if !page.page.has_more {
                    break;
                }
                after = Some(PositionKey {
                    value: parse_key(last.value.unwrap()),
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
                    seen.extend(items::<Wallet>(&page.page));
                    if !page.page.has_more {
                        break;
                    }
                    let last = page.last.unwrap();
                    after = Some(WalletKey {
                        value: last.value.map(parse_key),
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
    fn sort_nums_order_like_big_decimals() {
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
            "1e-40",
            "5e5",
        ];
        let values: Vec<BigDecimal> = texts.iter().map(|t| t.parse().unwrap()).collect();
        for a in &values {
            for b in &values {
                assert_eq!(
                    SortNum::new(a).cmp(&SortNum::new(b)),
                    a.cmp(b),
                    "{a} vs {b}"
                );
            }
        }
        assert!(SortNum::new(&values[4]).fixed.is_some());
        assert!(
            SortNum::new(&values[5]).fixed.is_none(),
            "scale 19 has no image"
        );
    }

    #[test]
    fn dense_ranks_share_equal_values() {
        let values = [Some(3), None, Some(1), Some(3), Some(2)];
        assert_eq!(
            dense_ranks(&values, |a: &i32, b: &i32| a.cmp(b)),
            [Some(2), None, Some(0), Some(2), Some(1)]
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
