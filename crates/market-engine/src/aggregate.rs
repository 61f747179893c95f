//! Materialization of the aggregates of one scan: markets, wallets and the
//! current day's liquidation levels, from quotes, wallets and positions.

use std::collections::{BTreeMap, HashMap, HashSet};

use bigdecimal::{BigDecimal, RoundingMode, Zero};
use market_model::{
    Coverage, Decimal, Direction, Kol, KolProfile, Level, LiquidityDay, LiquidityTotals, Market,
    MarketPosition, SizeClass, Strategy, Wallet, WalletDirection,
};
use time::{Date, OffsetDateTime};

use crate::buckets::{bucket_index, bucket_of_index, bucket_price, bucket_size_for_price};
use crate::compact::CompactDecimal;
use crate::fixed::{Fixed, Sum};
use crate::version::DataVersion;

/// Exchange quote context of one asset, as read from the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quote {
    /// Network symbol (`BTC`, `xyz:TSLA`).
    pub symbol: String,
    /// Mark price, USD.
    pub price: Decimal,
    /// Price 24 hours ago, USD (used for `change24hPct`).
    pub prev_day_price: Decimal,
    /// 24-hour notional volume, USD.
    pub volume24h: Decimal,
    /// Open interest in USD.
    pub open_interest: Decimal,
    /// Hourly funding rate.
    pub funding: Decimal,
}

/// Wallet analytics computed from its history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Analytics {
    /// Net PnL, USD.
    pub net_pnl: Decimal,
    /// ROI, percent.
    pub roi: Decimal,
    /// Win rate, percent.
    pub win_rate: Decimal,
    /// Trading style.
    pub strategy: Strategy,
    /// Confidence in the style, 0..=1.
    pub strategy_confidence: Decimal,
}

/// One scanned wallet before aggregation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalletInput {
    /// Lowercase hex address.
    pub address: String,
    /// Public label.
    pub label: Option<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// Linked KOL identities.
    pub kols: Vec<Kol>,
    /// KOL profile.
    pub kol_profile: Option<KolProfile>,
    /// Account equity over every dex, USD.
    pub account_value: Decimal,
    /// When it was observed.
    pub observed_at: OffsetDateTime,
    /// Analytics, when there is enough history.
    pub analytics: Option<Analytics>,
}

/// Everything one scan observed.
#[derive(Clone, Debug)]
pub struct ScanInput {
    /// When the scan was taken; its UTC date is the `current` liquidity day.
    pub observed_at: OffsetDateTime,
    /// Quote context of every tracked asset.
    pub quotes: Vec<Quote>,
    /// Every scanned wallet.
    pub wallets: Vec<WalletInput>,
    /// Every open position (label and tags are filled from the wallet).
    pub positions: Vec<MarketPosition>,
}

/// Input that violates the aggregation contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AggregateError {
    /// A position refers to an asset without a quote.
    #[error("position of {address} refers to unknown asset {symbol}")]
    UnknownAsset {
        /// Wallet.
        address: String,
        /// Asset.
        symbol: String,
    },
    /// A position refers to a wallet that was not scanned.
    #[error("position in {symbol} refers to unknown wallet {address}")]
    UnknownWallet {
        /// Wallet.
        address: String,
        /// Asset.
        symbol: String,
    },
    /// A wallet holds two positions in one asset.
    #[error("wallet {address} holds more than one position in {symbol}")]
    DuplicatePosition {
        /// Wallet.
        address: String,
        /// Asset.
        symbol: String,
    },
    /// Two quotes or two wallets share a key.
    #[error("duplicate key {0}")]
    DuplicateKey(String),
}

fn zero() -> BigDecimal {
    BigDecimal::zero()
}

/// `numerator / denominator` rounded half-up to 4 decimals; see [`Market::long_short_ratio`]
/// for the rule when there are no shorts.
pub fn long_short_ratio(long_count: u64, short_count: u64) -> Decimal {
    let value = if short_count == 0 {
        BigDecimal::from(long_count)
    } else {
        BigDecimal::from(long_count) / BigDecimal::from(short_count)
    };
    Decimal(value.with_scale_round(4, RoundingMode::HalfUp))
}

/// Percentage change from `prev` to `now`, 4 decimals half-up; 0 when `prev` is not positive.
pub fn change_pct(now: &BigDecimal, prev: &BigDecimal) -> Decimal {
    if prev <= &zero() {
        return Decimal(zero().with_scale(4));
    }
    let pct = (now - prev) * BigDecimal::from(100) / prev;
    Decimal(pct.with_scale_round(4, RoundingMode::HalfUp))
}

/// Size class of an account value.
pub fn size_class(account_value: &BigDecimal) -> SizeClass {
    if let Some(class) = Fixed::from_big(account_value).and_then(class_of_fixed) {
        return class;
    }
    if account_value >= &BigDecimal::from(SizeClass::WHALE_MIN_USD) {
        SizeClass::Whale
    } else if account_value >= &BigDecimal::from(SizeClass::SHARK_MIN_USD) {
        SizeClass::Shark
    } else {
        SizeClass::Shrimp
    }
}

/// [`size_class`] of a compact value, without a `BigDecimal` when it fits
/// (the tracker classes every registry entry at each publish).
pub fn compact_size_class(account_value: &CompactDecimal) -> SizeClass {
    account_value
        .fixed()
        .and_then(class_of_fixed)
        .unwrap_or_else(|| size_class(&account_value.to_big()))
}

/// The size class of a fixed-point value, when the comparisons fit.
fn class_of_fixed(account: Fixed) -> Option<SizeClass> {
    let at_least = |min: i64| {
        account
            .try_cmp(Fixed {
                mantissa: min.into(),
                scale: 0,
            })
            .map(|o| o.is_ge())
    };
    let (whale, shark) = (
        at_least(SizeClass::WHALE_MIN_USD)?,
        at_least(SizeClass::SHARK_MIN_USD)?,
    );
    Some(if whale {
        SizeClass::Whale
    } else if shark {
        SizeClass::Shark
    } else {
        SizeClass::Shrimp
    })
}

/// Effective leverage `total / account`, 2 decimals half-up; 0 when account ≤ 0.
pub fn account_leverage(total: &BigDecimal, account: &BigDecimal) -> Decimal {
    if let (Some(t), Some(a)) = (Fixed::from_big(total), Fixed::from_big(account)) {
        if a.mantissa <= 0 {
            return Decimal(zero().with_scale(2));
        }
        if let Some(mantissa) = t.div_round_half_up(a, 2) {
            return Decimal(Fixed { mantissa, scale: 2 }.to_big());
        }
    }
    if account <= &zero() {
        return Decimal(zero().with_scale(2));
    }
    Decimal((total / account).with_scale_round(2, RoundingMode::HalfUp))
}

/// Builds the liquidation levels of one asset from its positions.
pub fn liquidity_levels<'a>(
    bucket_size: &BigDecimal,
    positions: impl IntoIterator<Item = &'a MarketPosition>,
) -> (Vec<Level>, LiquidityTotals) {
    let positions: Vec<&MarketPosition> = positions.into_iter().collect();
    let levels = levels_of(bucket_size, &positions);
    let totals = totals_of(&levels);
    (levels, totals)
}

fn side_key(direction: Direction) -> u8 {
    match direction {
        Direction::Long => 0,
        Direction::Short => 1,
    }
}

/// The levels of [`liquidity_levels`].
fn levels_of(bucket_size: &BigDecimal, positions: &[&MarketPosition]) -> Vec<Level> {
    levels_on_integers(bucket_size, positions)
        .unwrap_or_else(|| levels_on_bigdecimals(bucket_size, positions.iter().copied()))
}

/// [`levels_on_bigdecimals`] on integers, or `None` when a value does not
/// fit (see [`LevelEntry`]) or the size is not positive.
fn levels_on_integers(
    bucket_size: &BigDecimal,
    positions: &[&MarketPosition],
) -> Option<Vec<Level>> {
    let size = positive_size(bucket_size)?;
    let mut entries = Vec::with_capacity(positions.len());
    for (order, p) in positions.iter().enumerate() {
        let Some(liq) = &p.liq_price else { continue };
        entries.push(LevelEntry::new(
            p.direction,
            Fixed::from_big(&p.position_value.0)?,
            Fixed::from_big(liq)?,
            size,
            u32::try_from(order).ok()?,
        )?);
    }
    levels_from_entries(size, &mut entries)
}

/// `size` as a [`Fixed`] when it is one and positive (buckets then order like
/// their indices).
fn positive_size(size: &BigDecimal) -> Option<Fixed> {
    Fixed::from_big(size).filter(|s| s.mantissa > 0)
}

/// A position with a liquidation price, for the level pass on integers
/// (32 bytes: value and price kept as `i64` mantissas with `i16` scales).
#[derive(Clone, Copy, Debug)]
struct LevelEntry {
    /// Side (bit 32) and bucket index (bits 0..32, biased): with a positive
    /// size, sorting puts longs first and buckets by ascending price.
    bucket: u64,
    /// The position's order within the asset: the order in which
    /// `BigDecimal` sums a bucket's members and equal min/max prices tie.
    order: u32,
    value: i64,
    liq: i64,
    value_scale: i16,
    liq_scale: i16,
}

impl LevelEntry {
    /// `None` when the value, the price or the bucket index does not fit.
    fn new(
        side: Direction,
        value: Fixed,
        liq: Fixed,
        size: Fixed,
        order: u32,
    ) -> Option<LevelEntry> {
        let n = i32::try_from(bucket_index(liq, size)?).ok()?;
        let biased = (n as u32) ^ (1 << 31);
        Some(LevelEntry {
            bucket: (u64::from(side_key(side)) << 32) | u64::from(biased),
            order,
            value: value.mantissa.try_into().ok()?,
            liq: liq.mantissa.try_into().ok()?,
            value_scale: value.scale.try_into().ok()?,
            liq_scale: liq.scale.try_into().ok()?,
        })
    }

    fn side(&self) -> Direction {
        if self.bucket >> 32 == 0 {
            Direction::Long
        } else {
            Direction::Short
        }
    }

    /// The bucket index (`bucket price = index × size`).
    fn index(&self) -> i128 {
        (((self.bucket as u32) ^ (1 << 31)) as i32).into()
    }

    fn value(&self) -> Fixed {
        Fixed {
            mantissa: self.value.into(),
            scale: self.value_scale.into(),
        }
    }

    fn liq(&self) -> Fixed {
        Fixed {
            mantissa: self.liq.into(),
            scale: self.liq_scale.into(),
        }
    }
}

/// The levels of `entries` (one asset's positions with a liquidation price),
/// exactly as [`levels_on_bigdecimals`] builds them; `None` when a bucket
/// price does not fit an `i128`.
fn levels_from_entries(size: Fixed, entries: &mut [LevelEntry]) -> Option<Vec<Level>> {
    entries.sort_unstable_by_key(|e| (e.bucket, e.order));
    let mut levels = Vec::new();
    for group in entries.chunk_by(|a, b| a.bucket == b.bucket) {
        let first = &group[0];
        let mut total = Sum::Fast(first.value());
        let (mut min, mut max) = (first.liq(), first.liq());
        for e in &group[1..] {
            total.add_refs(e.value());
            let liq = e.liq();
            if liq.cmp_value(min).is_lt() {
                min = liq;
            }
            if liq.cmp_value(max).is_gt() {
                max = liq;
            }
        }
        levels.push(Level {
            side: first.side(),
            bucket_price: Decimal(bucket_of_index(first.index(), size)?),
            position_count: group.len() as u64,
            total_amount_usd: Decimal(total.into_big()),
            min_liquidation_price: Decimal(min.to_big()),
            max_liquidation_price: Decimal(max.to_big()),
        });
    }
    Some(levels)
}

/// The levels on `BigDecimal` arithmetic (any size, any magnitude).
fn levels_on_bigdecimals<'a>(
    bucket_size: &BigDecimal,
    positions: impl IntoIterator<Item = &'a MarketPosition>,
) -> Vec<Level> {
    // (side, bucket) -> level; BTreeMap keeps the documented order (long first, price ascending).
    let mut levels: BTreeMap<(u8, BigDecimal), Level> = BTreeMap::new();
    for p in positions {
        let Some(liq) = &p.liq_price else { continue };
        let bucket = bucket_price(liq, bucket_size);
        let side_key = match p.direction {
            Direction::Long => 0u8,
            Direction::Short => 1u8,
        };
        levels
            .entry((side_key, bucket.clone()))
            .and_modify(|l| {
                l.position_count += 1;
                l.total_amount_usd = Decimal(&l.total_amount_usd.0 + &p.position_value.0);
                if liq.0 < l.min_liquidation_price.0 {
                    l.min_liquidation_price = liq.clone();
                }
                if liq.0 > l.max_liquidation_price.0 {
                    l.max_liquidation_price = liq.clone();
                }
            })
            .or_insert_with(|| Level {
                side: p.direction,
                bucket_price: Decimal(bucket),
                position_count: 1,
                total_amount_usd: p.position_value.clone(),
                min_liquidation_price: liq.clone(),
                max_liquidation_price: liq.clone(),
            });
    }
    levels.into_values().collect()
}

/// Sums levels per side (see [`LiquidityTotals::of`]).
pub fn totals_of(levels: &[Level]) -> LiquidityTotals {
    LiquidityTotals::of(levels)
}

/// Builds a liquidity day from levels.
pub fn liquidity_day(
    date: Date,
    network: &str,
    symbol: &str,
    coverage: Coverage,
    bucket_size: Decimal,
    updated_at: OffsetDateTime,
    levels: Vec<Level>,
) -> LiquidityDay {
    LiquidityDay::new(
        date,
        network,
        symbol,
        coverage,
        bucket_size,
        updated_at,
        totals_of(&levels),
        levels,
    )
}

/// Map for the string-keyed lookups of [`materialize`]: the keys are the
/// scan's own symbols and addresses, so SipHash's resistance to chosen keys
/// buys nothing there and foldhash is several times faster.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// Reorders `items` in place so that position `k` holds the item that was at
/// `order[k]`; `order` is left as the identity. No second buffer of (large)
/// items is allocated: fresh memory costs more in page faults than the moves.
///
/// Each cycle of the permutation is rotated: its first item is held aside,
/// every other item is moved once into its slot, and the held item goes
/// last. Swapping along the cycle instead moves every byte about twice as
/// often, and these moves were nearly half of [`materialize`].
///
/// # Panics
///
/// When `order` is not a permutation of the indices of `items` (checked
/// before anything moves).
#[allow(unsafe_code)] // the one unsafe block of the engine; SAFETY below
fn permute_in_place<T>(items: &mut [T], order: &mut [u32]) {
    assert_eq!(items.len(), order.len(), "one index per item");
    let mut seen = vec![false; order.len()];
    for &i in order.iter() {
        let slot = seen.get_mut(i as usize);
        assert!(
            slot.as_deref() == Some(&false),
            "order is not a permutation"
        );
        *slot.expect("checked above") = true;
    }
    drop(seen);
    let base = items.as_mut_ptr();
    for start in 0..order.len() {
        if order[start] as usize == start {
            continue;
        }
        // SAFETY: `order` is a permutation of `0..items.len()` (checked
        // above), so every index below is in bounds and the cycle through
        // `start` visits each of its slots once. The item at `start` is read
        // out, each later item of the cycle is copied into the slot vacated
        // before it, and the held item is written into the last vacated
        // slot: every item ends up in exactly one slot, none is dropped or
        // duplicated. Nothing in the loop can panic (no allocation, no
        // user code), so no slot is observed vacated.
        unsafe {
            let held = std::ptr::read(base.add(start));
            let mut k = start;
            loop {
                let from = order[k] as usize;
                order[k] = k as u32;
                if from == start {
                    std::ptr::write(base.add(k), held);
                    break;
                }
                std::ptr::copy_nonoverlapping(base.add(from), base.add(k), 1);
                k = from;
            }
        }
    }
}

/// The first 16 bytes of `s`, big-endian, zero-padded: ordering these orders
/// the strings, except that equal prefixes need the full comparison.
fn prefix_key(s: &str) -> u128 {
    let mut word = [0u8; 16];
    let n = s.len().min(16);
    word[..n].copy_from_slice(&s.as_bytes()[..n]);
    u128::from_be_bytes(word)
}

/// The indices of `items` in the stable order of their string keys.
fn sorted_order<T>(items: &[T], key: impl Fn(&T) -> &str) -> Vec<u32> {
    let mut keyed: Vec<(u128, u32)> = items
        .iter()
        .enumerate()
        .map(|(i, t)| (prefix_key(key(t)), index_u32(i)))
        .collect();
    keyed.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| key(&items[a.1 as usize]).cmp(key(&items[b.1 as usize])))
            .then(a.1.cmp(&b.1))
    });
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// `i` as a `u32`: the aggregation indexes markets, wallets and positions with
/// 32 bits (four billion positions would need terabytes first).
fn index_u32(i: usize) -> u32 {
    u32::try_from(i).expect("fewer than 2^32 markets, wallets and positions")
}

/// The error the checks in (symbol, address) order meet first: an unknown
/// asset, an unknown wallet, or the second position of a wallet in an asset.
fn first_position_error(
    positions: &[MarketPosition],
    markets: &FastMap<&str, u32>,
    wallets: &FastMap<&str, u32>,
) -> Option<AggregateError> {
    let mut sorted: Vec<&MarketPosition> = positions.iter().collect();
    sorted.sort_by(|a, b| (&a.symbol, &a.address).cmp(&(&b.symbol, &b.address)));
    let mut seen: HashSet<(&str, &str)> = HashSet::with_capacity(sorted.len());
    for p in sorted {
        if !markets.contains_key(p.symbol.as_str()) {
            return Some(AggregateError::UnknownAsset {
                address: p.address.clone(),
                symbol: p.symbol.clone(),
            });
        }
        if !wallets.contains_key(p.address.as_str()) {
            return Some(AggregateError::UnknownWallet {
                address: p.address.clone(),
                symbol: p.symbol.clone(),
            });
        }
        if !seen.insert((p.address.as_str(), p.symbol.as_str())) {
            return Some(AggregateError::DuplicatePosition {
                address: p.address.clone(),
                symbol: p.symbol.clone(),
            });
        }
    }
    None
}

/// Per-market, per-side position count and liquidation value.
#[derive(Default)]
struct SideAcc {
    count: u64,
    liq_value: Sum,
}

/// Materializes every aggregate of a scan. Runs once per data change, never per request.
pub fn materialize(network: &str, input: ScanInput) -> Result<DataVersion, AggregateError> {
    let ScanInput {
        observed_at,
        mut quotes,
        wallets,
        mut positions,
    } = input;
    quotes.sort_by(|a, b| a.symbol.cmp(&b.symbol));
    for w in quotes.windows(2) {
        if w[0].symbol == w[1].symbol {
            return Err(AggregateError::DuplicateKey(w[0].symbol.clone()));
        }
    }
    // Wallets stay where they are: `wallet_order[rank]` is the input index of
    // the wallet at `rank` in address order, `rank_of[input index]` its rank.
    let wallet_order = sorted_order(&wallets, |w| w.address.as_str());
    for w in wallet_order.windows(2) {
        let (a, b) = (
            &wallets[w[0] as usize].address,
            &wallets[w[1] as usize].address,
        );
        if a == b {
            return Err(AggregateError::DuplicateKey(a.clone()));
        }
    }
    let mut rank_of = vec![0u32; wallets.len()];
    for (rank, &i) in wallet_order.iter().enumerate() {
        rank_of[i as usize] = index_u32(rank);
    }
    let market_index: FastMap<&str, u32> = quotes
        .iter()
        .enumerate()
        .map(|(i, q)| (q.symbol.as_str(), index_u32(i)))
        .collect();
    let bucket_sizes: Vec<Decimal> = quotes
        .iter()
        .map(|q| bucket_size_for_price(&q.price))
        .collect();

    // One pass over the positions in input order: resolve market and wallet,
    // add up the market and wallet sums, fill in label and tags, and collect
    // each market's level entries (`None`: the market needs `BigDecimal`).
    let mut market_sides: Vec<[SideAcc; 2]> = quotes.iter().map(|_| Default::default()).collect();
    let mut wallet_sides: Vec<(Sum, Sum, u32)> =
        wallets.iter().map(|_| Default::default()).collect();
    let sizes: Vec<Option<Fixed>> = bucket_sizes.iter().map(|s| positive_size(s)).collect();
    let mut level_entries: Vec<Option<Vec<LevelEntry>>> =
        sizes.iter().map(|s| s.map(|_| Vec::new())).collect();
    // (market, wallet rank) of every position
    let mut placed: Vec<(u32, u32)> = Vec::with_capacity(positions.len());
    // Scans list a wallet's positions together and usually in wallet order:
    // try the current and the next wallet before hashing.
    let mut wallet_index: Option<FastMap<&str, u32>> = None;
    let mut current: Option<usize> = None;
    for p in positions.iter_mut() {
        let Some(&market) = market_index.get(p.symbol.as_str()) else {
            break; // reported below, in (symbol, address) order
        };
        let address = p.address.as_str();
        let next = current.map_or(0, |w| w + 1);
        let wallet = match current {
            Some(w) if wallets[w].address == address => Some(w),
            _ if next < wallets.len() && wallets[next].address == address => Some(next),
            _ => wallet_index
                .get_or_insert_with(|| address_index(&wallets))
                .get(address)
                .map(|&w| w as usize),
        };
        let Some(wallet) = wallet else {
            break; // reported below
        };
        current = Some(wallet);
        let rank = rank_of[wallet];
        placed.push((market, rank));

        let value = &p.position_value.0;
        let fast_value = Fixed::from_big(value);
        let m = market as usize;
        let acc = &mut market_sides[m][usize::from(side_key(p.direction))];
        acc.count += 1;
        if let Some(liq) = &p.liq_price {
            acc.liq_value.add_assign(value, fast_value);
            if let (Some(entries), Some(size)) = (&mut level_entries[m], sizes[m]) {
                let entry = fast_value
                    .zip(Fixed::from_big(liq))
                    .and_then(|(value, liq)| LevelEntry::new(p.direction, value, liq, size, rank));
                match entry {
                    Some(entry) => entries.push(entry),
                    None => level_entries[m] = None,
                }
            }
        }
        let sums = &mut wallet_sides[wallet];
        match p.direction {
            Direction::Long => sums.0.add_assign(value, fast_value),
            Direction::Short => sums.1.add_assign(value, fast_value),
        }
        sums.2 += 1;

        // Positions carry the wallet's label and tags so pages need no join.
        let w = &wallets[wallet];
        p.label = w.label.clone();
        p.tags = w.tags.clone();
    }
    if placed.len() < positions.len() {
        let wallet_index = wallet_index.unwrap_or_else(|| address_index(&wallets));
        return Err(
            first_position_error(&positions, &market_index, &wallet_index)
                .expect("a position refers to an unknown asset or wallet"),
        );
    }
    drop(market_index);
    drop(wallet_index);

    // Each market's positions form one run of the sorted positions.
    let mut run_start: Vec<usize> = Vec::with_capacity(market_sides.len() + 1);
    let mut next = 0;
    for [long, short] in &market_sides {
        run_start.push(next);
        next += (long.count + short.count) as usize;
    }
    run_start.push(next);
    sort_positions(&mut positions, &placed, &run_start)?;
    drop(placed);

    let markets: Vec<Market> = quotes
        .iter()
        .zip(market_sides)
        .map(|(q, [long, short])| {
            market_of(
                q,
                (long.count, long.liq_value.into_big()),
                (short.count, short.liq_value.into_big()),
            )
        })
        .collect();

    // Wallets in input order (sequential reads), then moved into address order.
    let mut wallets: Vec<Wallet> = wallets
        .into_iter()
        .zip(wallet_sides)
        .map(|(w, (long, short, count))| wallet_of(w, long, short, count))
        .collect();
    let mut wallet_order = wallet_order;
    permute_in_place(&mut wallets, &mut wallet_order);

    let date = observed_at.date();
    let mut current_days = Vec::with_capacity(markets.len());
    for (((m, size), (fixed_size, entries)), run) in markets
        .iter()
        .zip(bucket_sizes)
        .zip(sizes.into_iter().zip(level_entries))
        .zip(run_start.windows(2))
    {
        let levels = fixed_size
            .zip(entries)
            .and_then(|(fixed_size, mut entries)| levels_from_entries(fixed_size, &mut entries))
            .unwrap_or_else(|| levels_on_bigdecimals(&size, &positions[run[0]..run[1]]));
        current_days.push(liquidity_day(
            date,
            network,
            &m.symbol,
            Coverage::Current,
            size,
            observed_at,
            levels,
        ));
    }

    let cohorts = crate::cohorts::cohorts(observed_at, &markets, &wallets, &positions);
    Ok(DataVersion {
        observed_at,
        markets,
        wallets,
        positions,
        current_days,
        cohorts,
        freshness: None,
    })
}

/// A market from its quote and its (position count, liquidation value) per side.
pub(crate) fn market_of(q: &Quote, long: (u64, BigDecimal), short: (u64, BigDecimal)) -> Market {
    let ((long_count, long_liq), (short_count, short_liq)) = (long, short);
    Market {
        symbol: q.symbol.clone(),
        price: q.price.clone(),
        change24h_pct: change_pct(&q.price, &q.prev_day_price),
        volume24h: q.volume24h.clone(),
        open_interest: q.open_interest.clone(),
        funding: q.funding.clone(),
        long_count,
        short_count,
        long_short_ratio: long_short_ratio(long_count, short_count),
        total_liquidation_value: Decimal(&long_liq + &short_liq),
        long_liquidation_value: Decimal(long_liq),
        short_liquidation_value: Decimal(short_liq),
    }
}

/// Sorts `positions` by (market, wallet rank), that is by (symbol, address),
/// given each position's (market, wallet rank) in `placed` and where each
/// market's run starts: a counting sort on the market, a sort of each run's
/// (rank, input index) pairs, then one move per position. Fails on the first
/// wallet holding two positions in one market, in that order.
fn sort_positions(
    positions: &mut [MarketPosition],
    placed: &[(u32, u32)],
    run_start: &[usize],
) -> Result<(), AggregateError> {
    let mut sorted: Vec<u64> = vec![0; placed.len()];
    let mut fill = run_start.to_vec();
    for (i, &(market, rank)) in placed.iter().enumerate() {
        let slot = &mut fill[market as usize];
        sorted[*slot] = (u64::from(rank) << 32) | u64::from(index_u32(i));
        *slot += 1;
    }
    let input_index = |k: u64| (k & 0xffff_ffff) as u32;
    for run in run_start.windows(2) {
        let run = &mut sorted[run[0]..run[1]];
        run.sort_unstable();
        if let Some(w) = run.windows(2).find(|w| w[0] >> 32 == w[1] >> 32) {
            let p = &positions[input_index(w[1]) as usize];
            return Err(AggregateError::DuplicatePosition {
                address: p.address.clone(),
                symbol: p.symbol.clone(),
            });
        }
    }
    let mut order: Vec<u32> = sorted.iter().map(|&k| input_index(k)).collect();
    drop(sorted);
    permute_in_place(positions, &mut order);
    Ok(())
}

/// The aggregates of one wallet over its positions, exactly as
/// [`materialize`] computes them among others; its label and tags are
/// filled into the positions, which end up ordered by symbol. Fails like
/// [`materialize`] on a position of another wallet, on one in an asset
/// `quoted` refuses, or on two positions in one asset.
pub fn materialize_wallet(
    input: WalletInput,
    positions: &mut [MarketPosition],
    quoted: impl Fn(&str) -> bool,
) -> Result<Wallet, AggregateError> {
    positions.sort_by(|a, b| a.symbol.cmp(&b.symbol));
    for (i, p) in positions.iter().enumerate() {
        let (address, symbol) = (p.address.clone(), p.symbol.clone());
        if !quoted(&p.symbol) {
            return Err(AggregateError::UnknownAsset { address, symbol });
        }
        if p.address != input.address {
            return Err(AggregateError::UnknownWallet { address, symbol });
        }
        if i > 0 && positions[i - 1].symbol == p.symbol {
            return Err(AggregateError::DuplicatePosition { address, symbol });
        }
    }
    let (mut long, mut short) = (Sum::default(), Sum::default());
    for p in positions.iter_mut() {
        let value = &p.position_value.0;
        match p.direction {
            Direction::Long => long.add_assign(value, Fixed::from_big(value)),
            Direction::Short => short.add_assign(value, Fixed::from_big(value)),
        }
        p.label = input.label.clone();
        p.tags = input.tags.clone();
    }
    Ok(wallet_of(input, long, short, index_u32(positions.len())))
}

/// Address → input index of every wallet.
fn address_index(wallets: &[WalletInput]) -> FastMap<&str, u32> {
    wallets
        .iter()
        .enumerate()
        .map(|(i, w)| (w.address.as_str(), index_u32(i)))
        .collect()
}

/// The aggregates of one wallet from its sums.
fn wallet_of(w: WalletInput, long: Sum, short: Sum, count: u32) -> Wallet {
    let fast = long.fast().zip(short.fast());
    let (long, short) = (long.into_big(), short.into_big());
    let total = fast
        .and_then(|(l, s)| l.add_refs(s))
        .map(Fixed::to_big)
        .unwrap_or_else(|| &long + &short);
    let order = fast
        .and_then(|(l, s)| l.try_cmp(s))
        .unwrap_or_else(|| long.cmp(&short));
    let direction = match order {
        std::cmp::Ordering::Greater => WalletDirection::Long,
        std::cmp::Ordering::Less => WalletDirection::Short,
        std::cmp::Ordering::Equal => WalletDirection::Neutral,
    };
    let (net_pnl, roi, win_rate, strategy, strategy_confidence) = match w.analytics {
        Some(a) => (
            Some(a.net_pnl),
            Some(a.roi),
            Some(a.win_rate),
            Some(a.strategy),
            Some(a.strategy_confidence),
        ),
        None => (None, None, None, None, None),
    };
    Wallet {
        size_class: size_class(&w.account_value),
        leverage: account_leverage(&total, &w.account_value),
        address: w.address,
        label: w.label,
        tags: w.tags,
        kols: w.kols,
        kol_profile: w.kol_profile,
        direction,
        account_total_value: w.account_value,
        total_position_value: Decimal(total),
        long_value: Decimal(long),
        short_value: Decimal(short),
        positions: count,
        observed_at: w.observed_at,
        net_pnl,
        roi,
        win_rate,
        strategy,
        strategy_confidence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use time::macros::datetime;

    #[test]
    fn market_aggregates() {
        let m = materialize("perpnet", sample()).unwrap();
        let btc = m.markets.iter().find(|m| m.symbol == "BTC").unwrap();
        assert_eq!((btc.long_count, btc.short_count), (2, 1));
        assert_eq!(btc.long_short_ratio.to_string(), "2.0000");
        assert_eq!(
            btc.long_liquidation_value.to_string(),
            "1000.50",
            "the position without liq price is excluded"
        );
        assert_eq!(btc.short_liquidation_value.to_string(), "300.25");
        assert_eq!(btc.total_liquidation_value.to_string(), "1300.75");
        assert_eq!(btc.change24h_pct.to_string(), "5.0000");
        let tsla = m.markets.iter().find(|m| m.symbol == "xyz:TSLA").unwrap();
        assert_eq!(tsla.long_short_ratio.to_string(), "0.5000");
        let eth = m.markets.iter().find(|m| m.symbol == "ETH").unwrap();
        assert_eq!((eth.long_count, eth.short_count), (1, 0));
        assert_eq!(
            eth.long_short_ratio.to_string(),
            "1.0000",
            "no shorts: equals longCount"
        );
    }

    #[test]
    fn ratio_edge_cases() {
        assert_eq!(long_short_ratio(0, 0).to_string(), "0.0000");
        assert_eq!(long_short_ratio(7, 0).to_string(), "7.0000");
        assert_eq!(long_short_ratio(2, 3).to_string(), "0.6667");
        assert_eq!(long_short_ratio(1, 8).to_string(), "0.1250");
    }

    #[test]
    fn wallet_aggregates() {
        let m = materialize("perpnet", sample()).unwrap();
        let w = |a: &str| m.wallets.iter().find(|w| w.address == a).unwrap().clone();
        let a = w("0xa");
        assert_eq!(
            (
                a.long_value.to_string(),
                a.short_value.to_string(),
                a.total_position_value.to_string()
            ),
            ("1000.50".into(), "50".into(), "1050.50".into())
        );
        assert_eq!(a.positions, 2);
        assert_eq!(a.direction, WalletDirection::Long);
        assert_eq!(a.size_class, SizeClass::Whale);
        assert_eq!(
            a.leverage.to_string(),
            "0.00",
            "1050.5 / 2,000,000 rounds to 0.00"
        );
        assert!(a.net_pnl.is_some());
        let b = w("0xb");
        assert_eq!(b.direction, WalletDirection::Long);
        assert_eq!(b.size_class, SizeClass::Shrimp);
        assert!(b.net_pnl.is_none() && b.strategy.is_none());
        let c = w("0xc");
        assert_eq!(
            c.size_class,
            SizeClass::Shark,
            "100,000 is the shark threshold"
        );
        assert_eq!(
            c.direction,
            WalletDirection::Short,
            "200 long against 300.25 short"
        );
        let d0 = w("0xd");
        assert_eq!((d0.positions, d0.direction), (0, WalletDirection::Neutral));
        assert_eq!(d0.leverage.to_string(), "0.00");
        // positions carry the wallet's label and tags
        assert!(m
            .positions
            .iter()
            .all(|p| p.label.as_deref() == Some(&*format!("label {}", p.address))));
    }

    #[test]
    fn current_day_totals_equal_market_liquidation_values() {
        let m = materialize("perpnet", sample()).unwrap();
        for (market, day) in m.markets.iter().zip(&m.current_days) {
            assert_eq!(market.symbol, day.network_asset_symbol);
            assert_eq!(day.coverage, Coverage::Current);
            assert_eq!(
                day.totals.long.total_amount_usd,
                market.long_liquidation_value
            );
            assert_eq!(
                day.totals.short.total_amount_usd,
                market.short_liquidation_value
            );
        }
        let tsla = m
            .current_days
            .iter()
            .find(|d| d.network_asset_symbol == "xyz:TSLA")
            .unwrap();
        assert_eq!(tsla.canonical_asset, "TSLA");
        assert_eq!(tsla.bucket_size.to_string(), "2");
        // size 2: 450 is a multiple; 451 is exactly halfway between 450 and 452 and rounds up
        let shorts: Vec<String> = tsla
            .levels
            .iter()
            .filter(|l| l.side == Direction::Short)
            .map(|l| l.bucket_price.to_string())
            .collect();
        assert_eq!(shorts, ["450", "452"]);
        assert!(tsla.levels.windows(2).all(|w| (
            w[0].side != Direction::Long,
            &w[0].bucket_price.0
        ) < (
            w[1].side != Direction::Long,
            &w[1].bucket_price.0
        )));
    }

    #[test]
    fn rejects_inconsistent_input() {
        let mut s = sample();
        s.positions
            .push(position("0xa", "BTC", Direction::Short, "1", None));
        assert!(matches!(
            materialize("perpnet", s),
            Err(AggregateError::DuplicatePosition { .. })
        ));
        let mut s = sample();
        s.positions
            .push(position("0xzz", "BTC", Direction::Short, "1", None));
        assert!(matches!(
            materialize("perpnet", s),
            Err(AggregateError::UnknownWallet { .. })
        ));
        let mut s = sample();
        s.positions
            .push(position("0xa", "DOGE", Direction::Short, "1", None));
        assert!(matches!(
            materialize("perpnet", s),
            Err(AggregateError::UnknownAsset { .. })
        ));
    }

    // ---- the integer fast paths against the `BigDecimal` computation they replace ----

    /// The `BigDecimal`-only aggregation these fast paths must reproduce
    /// exactly (the implementation before the integer paths), for comparison.
    mod reference {
        use super::super::*;

        fn bucket_price(liq: &BigDecimal, size: &BigDecimal) -> BigDecimal {
            let n = (liq / size).with_scale_round(0, RoundingMode::HalfUp);
            let (_, size_scale) = size.as_bigint_and_exponent();
            (n * size).with_scale(size_scale.max(0))
        }

        pub(super) fn size_class(account_value: &BigDecimal) -> SizeClass {
            if account_value >= &BigDecimal::from(SizeClass::WHALE_MIN_USD) {
                SizeClass::Whale
            } else if account_value >= &BigDecimal::from(SizeClass::SHARK_MIN_USD) {
                SizeClass::Shark
            } else {
                SizeClass::Shrimp
            }
        }

        pub(super) fn account_leverage(total: &BigDecimal, account: &BigDecimal) -> Decimal {
            if account <= &zero() {
                return Decimal(zero().with_scale(2));
            }
            Decimal((total / account).with_scale_round(2, RoundingMode::HalfUp))
        }

        pub(super) fn liquidity_levels<'a>(
            bucket_size: &BigDecimal,
            positions: impl IntoIterator<Item = &'a MarketPosition>,
        ) -> Vec<Level> {
            let mut levels: BTreeMap<(u8, BigDecimal), Level> = BTreeMap::new();
            for p in positions {
                let Some(liq) = &p.liq_price else { continue };
                let bucket = bucket_price(liq, bucket_size);
                levels
                    .entry((side_key(p.direction), bucket.clone()))
                    .and_modify(|l| {
                        l.position_count += 1;
                        l.total_amount_usd = Decimal(&l.total_amount_usd.0 + &p.position_value.0);
                        if liq.0 < l.min_liquidation_price.0 {
                            l.min_liquidation_price = liq.clone();
                        }
                        if liq.0 > l.max_liquidation_price.0 {
                            l.max_liquidation_price = liq.clone();
                        }
                    })
                    .or_insert_with(|| Level {
                        side: p.direction,
                        bucket_price: Decimal(bucket),
                        position_count: 1,
                        total_amount_usd: p.position_value.clone(),
                        min_liquidation_price: liq.clone(),
                        max_liquidation_price: liq.clone(),
                    });
            }
            levels.into_values().collect()
        }

        pub(super) fn materialize(
            network: &str,
            input: ScanInput,
        ) -> Result<DataVersion, AggregateError> {
            let ScanInput {
                observed_at,
                mut quotes,
                mut wallets,
                mut positions,
            } = input;
            quotes.sort_by(|a, b| a.symbol.cmp(&b.symbol));
            wallets.sort_by(|a, b| a.address.cmp(&b.address));
            positions.sort_by(|a, b| (&a.symbol, &a.address).cmp(&(&b.symbol, &b.address)));
            for w in quotes.windows(2) {
                if w[0].symbol == w[1].symbol {
                    return Err(AggregateError::DuplicateKey(w[0].symbol.clone()));
                }
            }
            for w in wallets.windows(2) {
                if w[0].address == w[1].address {
                    return Err(AggregateError::DuplicateKey(w[0].address.clone()));
                }
            }
            let market_index: HashMap<&str, usize> = quotes
                .iter()
                .enumerate()
                .map(|(i, q)| (q.symbol.as_str(), i))
                .collect();
            let wallet_index: HashMap<&str, usize> = wallets
                .iter()
                .enumerate()
                .map(|(i, w)| (w.address.as_str(), i))
                .collect();
            let mut market_sides: Vec<[(u64, BigDecimal); 2]> =
                quotes.iter().map(|_| Default::default()).collect();
            let mut wallet_sides: Vec<(BigDecimal, BigDecimal, u32)> =
                wallets.iter().map(|_| (zero(), zero(), 0)).collect();
            let mut seen: HashSet<(&str, &str)> = HashSet::new();
            for p in &positions {
                let Some(&mi) = market_index.get(p.symbol.as_str()) else {
                    return Err(AggregateError::UnknownAsset {
                        address: p.address.clone(),
                        symbol: p.symbol.clone(),
                    });
                };
                let Some(&wi) = wallet_index.get(p.address.as_str()) else {
                    return Err(AggregateError::UnknownWallet {
                        address: p.address.clone(),
                        symbol: p.symbol.clone(),
                    });
                };
                if !seen.insert((p.address.as_str(), p.symbol.as_str())) {
                    return Err(AggregateError::DuplicatePosition {
                        address: p.address.clone(),
                        symbol: p.symbol.clone(),
                    });
                }
                let acc = &mut market_sides[mi][usize::from(side_key(p.direction))];
                acc.0 += 1;
                if p.liq_price.is_some() {
                    acc.1 += &p.position_value.0;
                }
                let w = &mut wallet_sides[wi];
                match p.direction {
                    Direction::Long => w.0 += &p.position_value.0,
                    Direction::Short => w.1 += &p.position_value.0,
                }
                w.2 += 1;
            }
            drop(seen);
            for p in &mut positions {
                let w = &wallets[wallet_index[p.address.as_str()]];
                p.label = w.label.clone();
                p.tags = w.tags.clone();
            }
            let markets: Vec<Market> = quotes
                .iter()
                .zip(&market_sides)
                .map(|(q, [long, short])| Market {
                    symbol: q.symbol.clone(),
                    price: q.price.clone(),
                    change24h_pct: change_pct(&q.price, &q.prev_day_price),
                    volume24h: q.volume24h.clone(),
                    open_interest: q.open_interest.clone(),
                    funding: q.funding.clone(),
                    long_count: long.0,
                    short_count: short.0,
                    long_short_ratio: long_short_ratio(long.0, short.0),
                    total_liquidation_value: Decimal(&long.1 + &short.1),
                    long_liquidation_value: Decimal(long.1.clone()),
                    short_liquidation_value: Decimal(short.1.clone()),
                })
                .collect();
            let wallets: Vec<Wallet> = wallets
                .into_iter()
                .zip(wallet_sides)
                .map(|(w, (long, short, count))| {
                    let total = &long + &short;
                    let direction = match long.cmp(&short) {
                        std::cmp::Ordering::Greater => WalletDirection::Long,
                        std::cmp::Ordering::Less => WalletDirection::Short,
                        std::cmp::Ordering::Equal => WalletDirection::Neutral,
                    };
                    let a = w.analytics;
                    Wallet {
                        size_class: size_class(&w.account_value),
                        leverage: account_leverage(&total, &w.account_value),
                        address: w.address,
                        label: w.label,
                        tags: w.tags,
                        kols: w.kols,
                        kol_profile: w.kol_profile,
                        direction,
                        account_total_value: w.account_value,
                        total_position_value: Decimal(total),
                        long_value: Decimal(long),
                        short_value: Decimal(short),
                        positions: count,
                        observed_at: w.observed_at,
                        net_pnl: a.as_ref().map(|a| a.net_pnl.clone()),
                        roi: a.as_ref().map(|a| a.roi.clone()),
                        win_rate: a.as_ref().map(|a| a.win_rate.clone()),
                        strategy: a.as_ref().map(|a| a.strategy),
                        strategy_confidence: a.map(|a| a.strategy_confidence),
                    }
                })
                .collect();
            let mut current_days = Vec::new();
            let mut start = 0;
            for m in &markets {
                let end = start + positions[start..].partition_point(|p| p.symbol == m.symbol);
                let size = bucket_size_for_price(&m.price);
                let levels = liquidity_levels(&size, &positions[start..end]);
                current_days.push(liquidity_day(
                    observed_at.date(),
                    network,
                    &m.symbol,
                    Coverage::Current,
                    size,
                    observed_at,
                    levels,
                ));
                start = end;
            }
            let cohorts = crate::cohorts::cohorts(observed_at, &markets, &wallets, &positions);
            Ok(DataVersion {
                observed_at,
                markets,
                wallets,
                positions,
                current_days,
                cohorts,
                freshness: None,
            })
        }
    }

    /// Debug output shows every decimal's sign, scale and digits.
    fn exact(m: &DataVersion) -> String {
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}",
            m.markets, m.wallets, m.positions, m.current_days
        )
    }

    /// A small deterministic generator (no dependency on a random crate).
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((self.0 >> 33) % n as u64) as usize
        }

        fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
            from[self.below(from.len())]
        }

        fn shuffle<T>(&mut self, items: &mut [T]) {
            for i in (1..items.len()).rev() {
                items.swap(i, self.below(i + 1));
            }
        }
    }

    /// Values chosen to hit every fallback: zeros with scales, mixed scales,
    /// negatives, mantissas beyond `i64` (levels fall back) and beyond `i128`
    /// (sums fall back), liquidation prices equal in value but not in scale.
    fn tricky_scan(seed: u64, grouped: bool) -> ScanInput {
        const VALUES: &[&str] = &[
            "0",
            "0.00",
            "1000.50",
            "300.25",
            "200",
            "-5.5",
            "12.345678",
            "7.0",
            "2.50",
            "1E+3",
            "0.0000001",
            "99999999999999999999.5",
            "123456789012345678901234567890123456789012.5",
        ];
        const LIQS: &[&str] = &[
            "90.1", "90.10", "90.100", "89.95", "450", "451", "452.0", "0.15234", "0", "-3",
            "3000", "2999.99", "91249.99", "91250", "1E+30", "7E+2",
        ];
        const ACCOUNTS: &[&str] = &[
            "2000000",
            "1000000",
            "999999.99",
            "100000",
            "50000",
            "0",
            "-10",
            "0.001",
            "1E+40",
            "123.456",
        ];
        let mut rng = Lcg(seed);
        let quotes: Vec<Quote> = [
            ("BTC", "92391.338"),
            ("ETH", "3000"),
            ("xyz:TSLA", "400"),
            ("SOL", "0.15"),
            ("ZERO", "0"),
            ("DOGE", "1E-7"),
            ("EMPTY", "12"),
        ]
        .into_iter()
        .map(|(symbol, price)| quote(symbol, price))
        .collect();
        let mut wallets: Vec<WalletInput> = (0..40)
            .map(|i| {
                let mut w = wallet(
                    &format!("0x{:02x}{}", (i * 37) % 256, "ab".repeat(i % 3)),
                    rng.pick(ACCOUNTS),
                    i % 2 == 0,
                );
                w.tags = (0..i % 3).map(|t| format!("tag{t}")).collect();
                w.label = (i % 4 != 0).then(|| format!("wallet {i}"));
                w
            })
            .collect();
        let mut positions = Vec::new();
        for w in &wallets {
            for q in &quotes[..6] {
                if rng.below(3) == 0 {
                    continue;
                }
                let direction = if rng.below(2) == 0 {
                    Direction::Long
                } else {
                    Direction::Short
                };
                let liq = (rng.below(5) != 0).then(|| rng.pick(LIQS));
                positions.push(position(
                    &w.address,
                    &q.symbol,
                    direction,
                    rng.pick(VALUES),
                    liq,
                ));
            }
        }
        if !grouped {
            rng.shuffle(&mut positions);
        }
        rng.shuffle(&mut wallets);
        ScanInput {
            observed_at: datetime!(2026-11-22 01:00 UTC),
            quotes,
            wallets,
            positions,
        }
    }

    #[test]
    fn matches_the_bigdecimal_reference_exactly() {
        for seed in 0..12 {
            for grouped in [true, false] {
                let scan = tricky_scan(seed, grouped);
                let fast = materialize("perpnet", scan.clone()).unwrap();
                let slow = reference::materialize("perpnet", scan).unwrap();
                assert_eq!(exact(&fast), exact(&slow), "seed {seed}, grouped {grouped}");
            }
        }
        // the sample too, and the levels function on its own
        let fast = materialize("perpnet", sample()).unwrap();
        let slow = reference::materialize("perpnet", sample()).unwrap();
        assert_eq!(exact(&fast), exact(&slow));
        let scan = tricky_scan(99, false);
        for size in ["500", "1", "0.001", "1E-8", "5E+4", "0.7", "-2"] {
            let size = d(size).0;
            for symbol in ["BTC", "ETH", "SOL"] {
                let of_asset = scan.positions.iter().filter(|p| p.symbol == symbol);
                let (levels, _) = liquidity_levels(&size, of_asset.clone());
                let expected = reference::liquidity_levels(&size, of_asset);
                assert_eq!(
                    format!("{levels:?}"),
                    format!("{expected:?}"),
                    "{symbol} {size}"
                );
            }
        }
    }

    #[test]
    fn reports_the_same_error_as_the_reference() {
        use Direction::*;
        let broken: &[fn(&mut ScanInput)] = &[
            |s| s.positions.push(position("0xa", "BTC", Short, "1", None)),
            |s| s.positions.push(position("0xzz", "BTC", Short, "1", None)),
            |s| s.positions.push(position("0xa", "DOGE", Short, "1", None)),
            |s| {
                // the duplicate in BTC sorts before the unknown wallet in xyz:TSLA
                s.positions
                    .push(position("0xzz", "xyz:TSLA", Short, "1", None));
                s.positions.push(position("0xc", "BTC", Long, "1", None));
            },
            |s| {
                s.positions.push(position("0xb", "ETH", Long, "1", None));
                s.positions.push(position("0xb", "ETH", Short, "2", None));
                s.positions
                    .push(position("0xa", "xyz:TSLA", Long, "1", None));
            },
            |s| {
                s.positions.push(position("0xa", "AAA", Long, "1", None));
                s.positions.push(position("0x0", "BTC", Long, "1", None));
            },
            |s| {
                s.wallets.push(wallet("0xb", "1", false));
                s.positions.push(position("0xa", "DOGE", Short, "1", None));
            },
            |s| {
                s.quotes.push(quote("ETH", "1"));
                s.wallets.push(wallet("0xb", "1", false));
            },
        ];
        for (i, breaks) in broken.iter().enumerate() {
            let mut scan = sample();
            breaks(&mut scan);
            let fast = materialize("perpnet", scan.clone()).err();
            let slow = reference::materialize("perpnet", scan).err();
            assert!(fast.is_some(), "case {i}");
            assert_eq!(fast, slow, "case {i}");
        }
    }

    #[test]
    fn permutes_in_place() {
        let mut rng = Lcg(7);
        for n in [0usize, 1, 2, 3, 10, 257] {
            let mut order: Vec<u32> = (0..n as u32).collect();
            rng.shuffle(&mut order);
            let items: Vec<String> = (0..n).map(|i| format!("item {i}")).collect();
            let expected: Vec<String> = order.iter().map(|&i| items[i as usize].clone()).collect();
            let mut permuted = items.clone();
            let mut scratch = order.clone();
            permute_in_place(&mut permuted, &mut scratch);
            assert_eq!(permuted, expected, "n = {n}");
            assert!(scratch.iter().enumerate().all(|(k, &i)| i as usize == k));
        }
    }

    #[test]
    #[should_panic(expected = "not a permutation")]
    fn permute_rejects_a_non_permutation() {
        let mut items = vec!['a', 'b', 'c'];
        permute_in_place(&mut items, &mut [1, 1, 0]);
    }

    #[test]
    fn sorted_order_is_the_stable_string_order() {
        let keys = [
            "0xffff",
            "0x00",
            "",
            "0x0000000000000000000000000000000000000001",
            "0x0000000000000000000000000000000000000000",
            "0x00",
            "0x0000000000000000",
            "0x000000000000000",
            "é",
            "0x00000000000000000",
            "Z",
            "0x00\u{0}",
        ];
        let order = sorted_order(&keys, |k| k);
        let mut expected: Vec<u32> = (0..keys.len() as u32).collect();
        expected.sort_by_key(|&i| keys[i as usize]); // stable
        assert_eq!(order, expected);
        assert!(prefix_key("0x00") < prefix_key("0x01"));
        assert_eq!(
            prefix_key("0x00"),
            prefix_key("0x00\u{0}"),
            "ties need the full comparison"
        );
    }

    #[test]
    fn level_entries_keep_side_and_bucket_order() {
        let f = |s: &str| Fixed::from_big(&d(s).0).unwrap();
        let size = f("0.5");
        let entry = |side, liq: &str| LevelEntry::new(side, f("1.25"), f(liq), size, 3).unwrap();
        let long_low = entry(Direction::Long, "-1000.25");
        let long_high = entry(Direction::Long, "1000.25");
        let short_low = entry(Direction::Short, "-7");
        assert!(long_low.bucket < long_high.bucket && long_high.bucket < short_low.bucket);
        assert_eq!(long_low.index(), -2001, "-2000.5 rounds away from zero");
        assert_eq!(long_high.index(), 2001);
        assert_eq!(short_low.index(), -14);
        assert_eq!(
            (long_low.side(), short_low.side()),
            (Direction::Long, Direction::Short)
        );
        assert_eq!(long_low.value(), f("1.25"));
        assert_eq!(long_low.liq(), f("-1000.25"));
        // a bucket index beyond i32 or a value beyond i64 needs BigDecimal
        assert!(LevelEntry::new(Direction::Long, f("1"), f("1E+10"), size, 0).is_none());
        assert!(
            LevelEntry::new(Direction::Long, f("10000000000000000000"), f("1"), size, 0).is_none()
        );
        assert!(
            LevelEntry::new(Direction::Long, f("1E+19"), f("1"), size, 0).is_some(),
            "mantissa 1"
        );
    }

    #[test]
    fn size_class_and_leverage_match_bigdecimal() {
        for account in [
            "1000000",
            "999999.999",
            "1000000.000",
            "100000",
            "99999.99",
            "0",
            "-1",
            "1E+6",
            "1E+40",
            "0.5",
        ] {
            let a = d(account).0;
            assert_eq!(size_class(&a), reference::size_class(&a), "{account}");
            for total in ["0", "0.00", "1050.50", "-3", "2000000", "1E+45", "0.005"] {
                let t = d(total).0;
                assert_eq!(
                    format!("{:?}", account_leverage(&t, &a).0),
                    format!("{:?}", reference::account_leverage(&t, &a).0),
                    "{total} / {account}"
                );
            }
        }
    }
}
