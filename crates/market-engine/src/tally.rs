//! Running aggregates: the figures a data version carries per market (long
//! and short counts, liquidation values, the current day's liquidation
//! levels, the size-class cohorts and the units the coverage report sums),
//! kept up to date from the wallets that change instead of recomputed over
//! every position.
//!
//! [`Tally::remove`] takes out what a wallet served, [`Tally::add`] puts in
//! what it serves now, and [`Tally::render`] answers exactly what
//! [`materialize`](crate::materialize) answers over the same wallets (a
//! property test holds the two equal). Every sum is exact, and it counts
//! the scales of its members: a `BigDecimal` sum has the largest scale of
//! what was added, which decides its text, and taking a member out must
//! give the text the sum without it has.
//!
//! A publish changes its base's tally in place and undoes the changes when
//! its version is not committed ([`TallyEdit`](crate::tally_edit::TallyEdit)):
//! a copy of every level a publish touches cost more than the changes. A
//! clone is still cheap (markets and level buckets are shared, `Arc`, and a
//! changed clone copies only what it touches).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, LazyLock, OnceLock};

use bigdecimal::BigDecimal;
use market_model::{
    Coverage, Decimal, Direction, Level, LiquidityDay, Market, MarketCohorts, MarketPosition,
    NetworkCoverage, SizeClass, WalletFreshness,
};
use time::OffsetDateTime;

use crate::aggregate::{liquidity_day, market_of, size_class, Quote};
use crate::buckets::{bucket_index, bucket_of_index, bucket_price, bucket_size_for_price};
use crate::cohorts::{slot, Acc, COHORT_ORDER};
use crate::compact::CompactDecimal;
use crate::coverage::coverage_of_units;
use crate::fixed::{Fixed, Sum};
use crate::version::DataVersion;

/// The aggregates of the served wallets, by market.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Quote and running sums of every market, by symbol.
    markets: BTreeMap<String, Arc<MarketTally>>,
    /// The markets' symbols in order: a position's market by index.
    symbols: Vec<String>,
    wallets: usize,
    positions: usize,
}

/// The figures of a version that are per market or per network, rendered.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    /// Every market, ordered by symbol.
    pub markets: Vec<Market>,
    /// The `current` liquidity day of every market, ordered by symbol.
    pub current_days: Vec<LiquidityDay>,
    /// The size-class cohorts of every market, ordered by symbol.
    pub cohorts: Vec<MarketCohorts>,
    /// The coverage report.
    pub coverage: NetworkCoverage,
}

/// The figures of one position that the tally counts, borrowed.
pub(crate) struct Figures<'a> {
    pub(crate) direction: Direction,
    pub(crate) value: &'a BigDecimal,
    pub(crate) size: &'a BigDecimal,
    pub(crate) leverage: &'a BigDecimal,
    pub(crate) entry: &'a BigDecimal,
    pub(crate) upnl: &'a BigDecimal,
    pub(crate) liq: Option<&'a BigDecimal>,
}

impl<'a> Figures<'a> {
    pub(crate) fn of(p: &'a MarketPosition) -> Figures<'a> {
        Figures {
            direction: p.direction,
            value: &p.position_value.0,
            size: &p.size.0,
            leverage: &p.leverage.0,
            entry: &p.entry_price.0,
            upnl: &p.u_pnl.0,
            liq: p.liq_price.as_ref().map(|l| &l.0),
        }
    }
}

/// Positions by symbol, with their figures.
fn figures<'a>(
    positions: impl IntoIterator<Item = &'a MarketPosition>,
) -> impl Iterator<Item = (&'a str, Figures<'a>)> {
    positions
        .into_iter()
        .map(|p| (p.symbol.as_str(), Figures::of(p)))
}

/// A position in an asset the tally has no quote for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("position of {address} refers to unknown asset {symbol}")]
pub struct Unquoted {
    /// Wallet.
    pub address: String,
    /// Asset.
    pub symbol: String,
}

/// A wallet taken out of a tally it was not added to, or not as it was
/// added: the tally is no longer exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a wallet was taken out of the tally other than it was added")]
pub struct NotAdded;

#[derive(Clone, Debug)]
struct MarketTally {
    quote: Quote,
    /// The bucket size of `levels` (the size the quote's price gives).
    bucket_size: BigDecimal,
    /// Positions per side (long, short).
    count: [u64; 2],
    /// Liquidation value per side: positions with a liquidation price.
    liq_value: [Exact; 2],
    /// Size in units per side.
    units: [BigDecimal; 2],
    cohorts: [CohortTally; 6],
    /// Liquidation levels by (side, bucket price).
    levels: BTreeMap<(u8, BigDecimal), Arc<Bucket>>,
}

#[derive(Clone, Debug, Default)]
struct CohortTally {
    count: u64,
    value: Exact,
    liq_value: Exact,
    value_x_leverage: Exact,
    value_x_entry: Exact,
    upnl: Exact,
}

/// One liquidation level: its positions ordered by (liquidation price,
/// address), so that the first is the minimum and ties go to the lower
/// address, as [`materialize`](crate::materialize) meets them. A tree, not
/// a sorted vector: an own node's levels hold tens of thousands of
/// positions, and moving half of them at each insert was most of a
/// publish's time in the tally.
#[derive(Clone, Debug, Default)]
struct Bucket {
    members: BTreeSet<Member>,
    total: Exact,
    /// What its level's render found in its tree, until a member comes or
    /// goes: a publish moves a few thousand wallets' positions among tens
    /// of thousands of levels, and seeking each level's first, last and
    /// highest-run members anew (cache misses, most of it) was most of a
    /// render. Three words, where the rendered `Level` took about 240
    /// bytes.
    rendered: OnceLock<LevelFigures>,
}

/// A level's figures that its render reads from its members.
#[derive(Clone, Debug)]
struct LevelFigures {
    total: CompactDecimal,
    min_liq: CompactDecimal,
    max_liq: CompactDecimal,
}

/// Members of one new level while a market's levels are bucketed again.
struct Run {
    side: u8,
    /// The bucket's index at the new size, when it was computed on integers.
    index: Option<i128>,
    price: BigDecimal,
    /// In order.
    members: Vec<Member>,
}

/// A position in a level. Ordered (and equal) by liquidation price as a
/// number, then by wallet: a wallet holds one position per market, so no
/// two members of a market's level are equal.
#[derive(Clone, Debug)]
struct Member {
    liq: CompactDecimal,
    value: CompactDecimal,
    wallet: Arc<str>,
}

/// Of the members at the highest liquidation price, the first (the lowest
/// address): equal prices keep the first met. A few steps back from the
/// end find it in most levels; a longer run is sought in the tree, since
/// a level of thousands of positions at one price (an exchange's
/// positions alike in leverage and entry) was walked whole at every
/// render.
fn first_of_last_run<'a>(members: &'a BTreeSet<Member>, last: &'a Member) -> &'a Member {
    const STEPS: usize = 8;
    let mut first = last;
    for m in members.iter().rev().skip(1).take(STEPS) {
        if !m.liq.cmp_value(&last.liq).is_eq() {
            return first;
        }
        first = m;
    }
    members
        .range(Member::first_at(&last.liq)..)
        .next()
        .unwrap_or(first)
}

impl Member {
    /// A probe that orders before every member at liquidation price `liq`
    /// (and after every member below it): its wallet is the empty text.
    fn first_at(liq: &CompactDecimal) -> Member {
        static NOBODY: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(""));
        Member {
            liq: liq.clone(),
            value: liq.clone(),
            wallet: NOBODY.clone(),
        }
    }
}

impl Ord for Member {
    fn cmp(&self, other: &Self) -> Ordering {
        self.liq
            .cmp_value(&other.liq)
            .then_with(|| self.wallet.cmp(&other.wallet))
    }
}

impl PartialOrd for Member {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Member {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Member {}

/// An exact sum with the scales of its members counted: its text is the
/// one the sum of the members present has, whatever was added and taken
/// out before. The sum runs on integers while it fits an `i128` (a
/// publish adds and takes out seven of these a position, and a
/// `BigDecimal` sum allocated at each), at whatever scale: its text comes
/// from the scales counted.
#[derive(Clone, Debug, Default)]
struct Exact {
    sum: Sum,
    /// (scale, members with that scale), by scale.
    scales: Vec<(i64, u32)>,
}

impl Exact {
    fn add(&mut self, v: &BigDecimal) {
        self.sum.add_assign(v, Fixed::from_big(v));
        self.count(v.as_bigint_and_scale().1);
    }

    /// [`Exact::add`] of a compact decimal, without a `BigDecimal` made
    /// while the sum fits.
    fn add_compact(&mut self, v: &CompactDecimal) {
        match v.fixed() {
            Some(f) if self.sum.add_fast(f) => self.count(f.scale),
            _ => self.add(&v.to_big()),
        }
    }

    /// Counts a member of scale `scale`.
    fn count(&mut self, scale: i64) {
        match self.scales.binary_search_by_key(&scale, |s| s.0) {
            Ok(i) => self.scales[i].1 += 1,
            Err(i) => self.scales.insert(i, (scale, 1)),
        }
    }

    fn sub(&mut self, v: &BigDecimal) -> Result<(), NotAdded> {
        self.sum.sub_assign(v, Fixed::from_big(v));
        let scale = v.as_bigint_and_scale().1;
        let i = self
            .scales
            .binary_search_by_key(&scale, |s| s.0)
            .map_err(|_| NotAdded)?;
        self.scales[i].1 -= 1;
        if self.scales[i].1 == 0 {
            self.scales.remove(i);
        }
        Ok(())
    }

    /// The sum as adding its members to `BigDecimal::zero()` gives it.
    fn added_to_zero(&self) -> BigDecimal {
        let scale = self.scales.last().map_or(0, |s| s.0.max(0));
        self.sum.to_big().with_scale(scale)
    }

    /// The sum as adding its members to the first one gives it.
    fn of_members(&self) -> BigDecimal {
        let scale = self.scales.last().map_or(0, |s| s.0);
        self.sum.to_big().with_scale(scale)
    }
}

fn side_index(d: Direction) -> usize {
    match d {
        Direction::Long => 0,
        Direction::Short => 1,
    }
}

fn side_of(i: u8) -> Direction {
    if i == 0 {
        Direction::Long
    } else {
        Direction::Short
    }
}

impl MarketTally {
    fn new(quote: Quote) -> MarketTally {
        MarketTally {
            bucket_size: bucket_size_for_price(&quote.price).0,
            quote,
            count: [0; 2],
            liq_value: Default::default(),
            units: Default::default(),
            cohorts: Default::default(),
            levels: BTreeMap::new(),
        }
    }

    /// Adds (`add`) or takes out one position of a wallet of size class `class`.
    fn change(
        &mut self,
        p: &Figures<'_>,
        class: SizeClass,
        wallet: &Arc<str>,
        add: bool,
    ) -> Result<(), NotAdded> {
        let side = side_index(p.direction);
        let value = p.value;
        let cohort = &mut self.cohorts[slot(class, p.direction)];
        let products = [value * p.leverage, value * p.entry];
        if add {
            self.count[side] += 1;
            self.units[side] += p.size;
            cohort.count += 1;
            cohort.value.add(value);
            cohort.value_x_leverage.add(&products[0]);
            cohort.value_x_entry.add(&products[1]);
            cohort.upnl.add(p.upnl);
        } else {
            self.count[side] = self.count[side].checked_sub(1).ok_or(NotAdded)?;
            self.units[side] -= p.size;
            cohort.count = cohort.count.checked_sub(1).ok_or(NotAdded)?;
            cohort.value.sub(value)?;
            cohort.value_x_leverage.sub(&products[0])?;
            cohort.value_x_entry.sub(&products[1])?;
            cohort.upnl.sub(p.upnl)?;
        }
        let Some(liq) = p.liq else {
            return Ok(());
        };
        if add {
            self.liq_value[side].add(value);
            cohort.liq_value.add(value);
        } else {
            self.liq_value[side].sub(value)?;
            cohort.liq_value.sub(value)?;
        }
        let key = (side as u8, bucket_price(liq, &self.bucket_size));
        let member = Member {
            liq: CompactDecimal::of(liq),
            value: CompactDecimal::of(value),
            wallet: wallet.clone(),
        };
        if add {
            let bucket = Arc::make_mut(self.levels.entry(key).or_default());
            bucket.rendered.take();
            // One position per wallet and market (`materialize_wallet`
            // refuses a second), so a member is never there already.
            let new = bucket.members.insert(member);
            debug_assert!(new, "a wallet's second position in a market");
            bucket.total.add(value);
        } else {
            let bucket = Arc::make_mut(self.levels.get_mut(&key).ok_or(NotAdded)?);
            bucket.rendered.take();
            if !bucket.members.remove(&member) {
                return Err(NotAdded);
            }
            bucket.total.sub(value)?;
            if bucket.members.is_empty() {
                self.levels.remove(&key);
            }
        }
        Ok(())
    }

    /// Takes a new quote; the levels are bucketed again when its price
    /// gives another bucket size.
    fn requote(&mut self, quote: &Quote) {
        self.quote = quote.clone();
        let size = bucket_size_for_price(&quote.price).0;
        // Equal sizes have equal scales (see `bucket_size_for_price`).
        if size == self.bucket_size {
            return;
        }
        self.bucket_size = size;
        // The levels in key order and each level's members in theirs are
        // the members ordered by (side, liquidation price, wallet), and a
        // member's new bucket price never decreases with its liquidation
        // price: the new levels are runs of that order, each built from
        // sorted members (no search a member), the members moved, not
        // copied, out of the old levels.
        let size = Fixed::from_big(&self.bucket_size);
        let mut runs: Vec<Run> = Vec::new();
        for ((side, _), bucket) in std::mem::take(&mut self.levels) {
            for m in Arc::unwrap_or_clone(bucket).members {
                let index = size
                    .zip(m.liq.fixed())
                    .and_then(|(size, liq)| bucket_index(liq, size));
                let last = runs.last_mut().filter(|r| r.side == side);
                // Most members fall in the run before: compared on the
                // index, without a decimal made.
                if let Some(run) = last {
                    if index.is_some() && run.index == index {
                        run.members.push(m);
                        continue;
                    }
                }
                let price = index
                    .zip(size)
                    .and_then(|(n, size)| bucket_of_index(n, size))
                    .unwrap_or_else(|| bucket_price(&m.liq.to_big(), &self.bucket_size));
                match runs.last_mut() {
                    Some(run) if run.side == side && run.price == price => run.members.push(m),
                    _ => {
                        debug_assert!(runs
                            .last()
                            .is_none_or(|r| (r.side, &r.price) < (side, &price)));
                        runs.push(Run {
                            side,
                            index,
                            price,
                            members: vec![m],
                        })
                    }
                }
            }
        }
        self.levels = runs
            .into_iter()
            .map(|run| {
                let mut total = Exact::default();
                for m in &run.members {
                    total.add_compact(&m.value);
                }
                let members: BTreeSet<Member> = run.members.into_iter().collect();
                let bucket = Bucket {
                    members,
                    total,
                    rendered: OnceLock::new(),
                };
                ((run.side, run.price), Arc::new(bucket))
            })
            .collect();
    }

    fn market(&self) -> Market {
        let liq = |i: usize| (self.count[i], self.liq_value[i].added_to_zero());
        market_of(&self.quote, liq(0), liq(1))
    }

    fn levels(&self) -> Vec<Level> {
        self.levels
            .iter()
            .map(|((side, price), b)| {
                let figures = b.rendered.get_or_init(|| {
                    let first = b.members.first().expect("a level has members");
                    let last = b.members.last().expect("a level has members");
                    LevelFigures {
                        total: CompactDecimal::of(&b.total.of_members()),
                        min_liq: first.liq.clone(),
                        max_liq: first_of_last_run(&b.members, last).liq.clone(),
                    }
                });
                Level {
                    side: side_of(*side),
                    bucket_price: Decimal(price.clone()),
                    position_count: b.members.len() as u64,
                    total_amount_usd: Decimal(figures.total.to_big()),
                    min_liquidation_price: Decimal(figures.min_liq.to_big()),
                    max_liquidation_price: Decimal(figures.max_liq.to_big()),
                }
            })
            .collect()
    }

    fn cohorts(&self, observed_at: OffsetDateTime) -> MarketCohorts {
        MarketCohorts {
            symbol: self.quote.symbol.clone(),
            observed_at,
            items: self
                .cohorts
                .iter()
                .zip(COHORT_ORDER)
                .map(|(c, (class, side))| {
                    Acc {
                        count: c.count,
                        value: c.value.added_to_zero(),
                        liq_value: c.liq_value.added_to_zero(),
                        value_x_leverage: c.value_x_leverage.added_to_zero(),
                        value_x_entry: c.value_x_entry.added_to_zero(),
                        upnl: c.upnl.added_to_zero(),
                    }
                    .finish(class, side)
                })
                .collect(),
            coverage: Coverage::ScannedWallets,
        }
    }
}

impl Tally {
    /// An empty tally with a market per quote.
    pub fn new(quotes: &[Quote]) -> Tally {
        Tally {
            markets: quotes
                .iter()
                .map(|q| (q.symbol.clone(), Arc::new(MarketTally::new(q.clone()))))
                .collect(),
            symbols: {
                let mut symbols: Vec<String> = quotes.iter().map(|q| q.symbol.clone()).collect();
                symbols.sort_unstable();
                symbols.dedup();
                symbols
            },
            wallets: 0,
            positions: 0,
        }
    }

    /// An empty tally of the markets of a stored version. Their quotes lack
    /// the previous day's price (the market keeps only the change it gave),
    /// so a tally made so takes new quotes ([`Tally::requote`]) before it
    /// renders, as every publish does.
    pub fn of_markets(markets: &[Market]) -> Tally {
        let quotes: Vec<Quote> = markets
            .iter()
            .map(|m| Quote {
                symbol: m.symbol.clone(),
                price: m.price.clone(),
                prev_day_price: m.price.clone(),
                volume24h: m.volume24h.clone(),
                open_interest: m.open_interest.clone(),
                funding: m.funding.clone(),
            })
            .collect();
        Tally::new(&quotes)
    }

    /// The tally of a materialized version and the quotes it was
    /// materialized from.
    pub fn of(quotes: &[Quote], version: &DataVersion) -> Tally {
        let mut tally = Tally::new(quotes);
        let mut by_wallet: HashMap<&str, Vec<&MarketPosition>> = HashMap::new();
        for p in &version.positions {
            by_wallet.entry(p.address.as_str()).or_default().push(p);
        }
        for w in &version.wallets {
            let positions = by_wallet.remove(w.address.as_str()).unwrap_or_default();
            tally
                .add(&w.address, &w.account_total_value.0, positions)
                .expect("a version's positions are in its markets");
        }
        tally
    }

    /// Wallets served.
    pub fn wallets(&self) -> usize {
        self.wallets
    }

    /// Positions served.
    pub fn positions(&self) -> usize {
        self.positions
    }

    /// Whether the tally has a market for exactly these symbols.
    pub fn has_symbols<'a>(&self, symbols: impl IntoIterator<Item = &'a str>) -> bool {
        let mut n = 0;
        for s in symbols {
            if !self.markets.contains_key(s) {
                return false;
            }
            n += 1;
        }
        n == self.markets.len()
    }

    /// The quotes of the markets of `symbols` the tally has.
    pub(crate) fn quotes_of<'a>(&self, symbols: impl IntoIterator<Item = &'a str>) -> Vec<Quote> {
        symbols
            .into_iter()
            .filter_map(|s| self.markets.get(s))
            .map(|m| m.quote.clone())
            .collect()
    }

    /// Takes new quotes of the same markets (see [`Tally::has_symbols`]);
    /// quotes of other markets are ignored.
    pub fn requote(&mut self, quotes: &[Quote]) {
        for q in quotes {
            if let Some(m) = self.markets.get_mut(&q.symbol) {
                Arc::make_mut(m).requote(q);
            }
        }
    }

    /// Adds a served wallet: its address, account value (which gives its
    /// size class) and positions. Nothing changes when a position is in a
    /// market the tally has no quote for.
    pub fn add<'a>(
        &mut self,
        address: &str,
        account_value: &BigDecimal,
        positions: impl IntoIterator<Item = &'a MarketPosition> + Clone,
    ) -> Result<(), Unquoted> {
        if let Some(p) = self.unquoted(positions.clone()) {
            return Err(Unquoted {
                address: address.to_owned(),
                symbol: p.symbol.clone(),
            });
        }
        self.change(address, account_value, figures(positions), true)
            .expect("adding to quoted markets cannot fail");
        Ok(())
    }

    /// Takes out a wallet exactly as it was added. When it was not (a
    /// caller's bug), the tally is no longer exact: discard it.
    pub fn remove<'a>(
        &mut self,
        address: &str,
        account_value: &BigDecimal,
        positions: impl IntoIterator<Item = &'a MarketPosition> + Clone,
    ) -> Result<(), NotAdded> {
        if self.unquoted(positions.clone()).is_some() || self.wallets == 0 {
            return Err(NotAdded);
        }
        self.change(address, account_value, figures(positions), false)
    }

    fn unquoted<'a>(
        &self,
        positions: impl IntoIterator<Item = &'a MarketPosition>,
    ) -> Option<&'a MarketPosition> {
        positions
            .into_iter()
            .find(|p| !self.markets.contains_key(&p.symbol))
    }

    /// The index of a market among [`Tally::symbol`]s.
    pub(crate) fn symbol_index(&self, symbol: &str) -> Option<usize> {
        self.symbols
            .binary_search_by(|s| s.as_str().cmp(symbol))
            .ok()
    }

    /// The symbol of the market at `index` (see [`Tally::symbol_index`]).
    pub(crate) fn symbol(&self, index: usize) -> &str {
        &self.symbols[index]
    }

    /// Adds (`add`) or takes out a wallet's positions, each given by its
    /// market's symbol and the figures the tally counts.
    pub(crate) fn change<'a>(
        &mut self,
        address: &str,
        account_value: &BigDecimal,
        positions: impl IntoIterator<Item = (&'a str, Figures<'a>)>,
        add: bool,
    ) -> Result<(), NotAdded> {
        let class = size_class(account_value);
        let wallet: Arc<str> = Arc::from(address);
        let mut n = 0;
        for (symbol, p) in positions {
            let m = self.markets.get_mut(symbol).ok_or(NotAdded)?;
            Arc::make_mut(m).change(&p, class, &wallet, add)?;
            n += 1;
        }
        if add {
            self.wallets += 1;
            self.positions += n;
        } else {
            self.wallets -= 1;
            self.positions = self.positions.checked_sub(n).ok_or(NotAdded)?;
        }
        Ok(())
    }

    /// The version's per-market figures and coverage report, as
    /// [`materialize`](crate::materialize) and
    /// [`network_coverage`](crate::coverage::network_coverage) give them
    /// for the same wallets and quotes.
    pub fn render(
        &self,
        network: &str,
        observed_at: OffsetDateTime,
        freshness: WalletFreshness,
    ) -> Rendered {
        let markets: Vec<Market> = self.markets.values().map(|m| m.market()).collect();
        let current_days = self
            .markets
            .values()
            .map(|m| {
                liquidity_day(
                    observed_at.date(),
                    network,
                    &m.quote.symbol,
                    Coverage::Current,
                    Decimal(m.bucket_size.clone()),
                    observed_at,
                    m.levels(),
                )
            })
            .collect();
        let cohorts = self
            .markets
            .values()
            .map(|m| m.cohorts(observed_at))
            .collect();
        let units = self.markets.values().map(|m| &m.units[0] + &m.units[1]);
        let coverage = coverage_of_units(observed_at, &markets, units, freshness);
        Rendered {
            markets,
            current_days,
            cohorts,
            coverage,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use time::macros::datetime;

    use super::*;
    use crate::coverage::network_coverage;
    use crate::fixtures::d;
    use crate::{materialize, ScanInput, WalletInput};

    const SYMBOLS: [&str; 3] = ["BTC", "ETH", "xyz:TSLA"];
    // Prices on both sides of bucket-size boundaries (1, 2, 5 × 10^k).
    const PRICES: [&str; 8] = [
        "0.95", "1.05", "99.5", "100", "250", "199.9", "5000", "4999",
    ];
    const ACCOUNTS: [&str; 6] = ["0", "500", "100000", "150000.5", "1000000", "2000000.00"];
    // Numerically equal values with other scales make the texts differ.
    const VALUES: [&str; 6] = ["100", "100.5", "100.50", "2500.25", "7", "0.125"];
    const LIQS: [&str; 10] = [
        "99", "99.0", "100.5", "101", "250", "251", "4990.1", "4990.10", "1.0", "0.99",
    ];
    const OTHER: [&str; 5] = ["0", "-1.5", "2.25", "0.00", "10.5"];

    #[derive(Clone, Debug)]
    struct Pos {
        symbol: usize,
        long: bool,
        value: usize,
        liq: Option<usize>,
        size: usize,
        leverage: usize,
        entry: usize,
        upnl: usize,
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// A wallet served with (account, positions), or no longer served.
        Set(usize, Option<(usize, Vec<Pos>)>),
        /// New prices.
        Requote([usize; 3]),
    }

    fn pos() -> impl Strategy<Value = Pos> {
        (
            0..SYMBOLS.len(),
            any::<bool>(),
            0..VALUES.len(),
            proptest::option::of(0..LIQS.len()),
            (
                0..OTHER.len(),
                0..OTHER.len(),
                0..OTHER.len(),
                0..OTHER.len(),
            ),
        )
            .prop_map(
                |(symbol, long, value, liq, (size, leverage, entry, upnl))| Pos {
                    symbol,
                    long,
                    value,
                    liq,
                    size,
                    leverage,
                    entry,
                    upnl,
                },
            )
    }

    fn op() -> impl Strategy<Value = Op> {
        op_of(8)
    }

    /// Changes of `wallets` wallets, and new prices.
    fn op_of(wallets: usize) -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (
                0..wallets,
                proptest::option::of((0..ACCOUNTS.len(), proptest::collection::vec(pos(), 0..4)))
            )
                .prop_map(|(w, s)| Op::Set(w, s)),
            1 => [0..PRICES.len(), 0..PRICES.len(), 0..PRICES.len()].prop_map(Op::Requote),
        ]
    }

    fn quotes(prices: [usize; 3]) -> Vec<Quote> {
        SYMBOLS
            .iter()
            .zip(prices)
            .map(|(s, p)| Quote {
                symbol: s.to_string(),
                price: d(PRICES[p]),
                prev_day_price: d("100"),
                volume24h: d("1000"),
                open_interest: d("50000"),
                funding: d("0.0001"),
            })
            .collect()
    }

    fn positions(address: &str, ps: &[Pos]) -> Vec<MarketPosition> {
        let mut seen = std::collections::HashSet::new();
        ps.iter()
            .filter(|p| seen.insert(p.symbol))
            .map(|p| {
                let mut m = crate::fixtures::position(
                    address,
                    SYMBOLS[p.symbol],
                    if p.long {
                        Direction::Long
                    } else {
                        Direction::Short
                    },
                    VALUES[p.value],
                    p.liq.map(|l| LIQS[l]),
                );
                m.size = d(OTHER[p.size].trim_start_matches('-'));
                m.leverage = d(OTHER[p.leverage]);
                m.entry_price = d(OTHER[p.entry]);
                m.u_pnl = d(OTHER[p.upnl]);
                m
            })
            .collect()
    }

    type Wallets = BTreeMap<String, (Decimal, Vec<MarketPosition>)>;

    /// A tally, or an edit of one, as the property tests change it.
    trait Changed {
        fn add(&mut self, address: &str, account: &BigDecimal, ps: &[MarketPosition]);
        fn remove(&mut self, address: &str, account: &BigDecimal, ps: &[MarketPosition]);
        fn requote(&mut self, quotes: &[Quote]);
    }

    impl Changed for Tally {
        fn add(&mut self, address: &str, account: &BigDecimal, ps: &[MarketPosition]) {
            Tally::add(self, address, account, ps).unwrap();
        }
        fn remove(&mut self, address: &str, account: &BigDecimal, ps: &[MarketPosition]) {
            Tally::remove(self, address, account, ps).unwrap();
        }
        fn requote(&mut self, quotes: &[Quote]) {
            Tally::requote(self, quotes);
        }
    }

    impl Changed for crate::TallyEdit {
        fn add(&mut self, address: &str, account: &BigDecimal, ps: &[MarketPosition]) {
            crate::TallyEdit::add(self, address, account, ps).unwrap();
        }
        fn remove(&mut self, address: &str, account: &BigDecimal, ps: &[MarketPosition]) {
            crate::TallyEdit::remove(self, address, account, ps).unwrap();
        }
        fn requote(&mut self, quotes: &[Quote]) {
            crate::TallyEdit::requote(self, quotes);
        }
    }

    /// Applies `op` to `tally` and to the oracle's wallets and prices.
    fn apply(tally: &mut impl Changed, wallets: &mut Wallets, prices: &mut [usize; 3], op: Op) {
        match op {
            Op::Set(w, state) => {
                let address = format!("0x{w:02x}");
                if let Some((account, ps)) = wallets.remove(&address) {
                    tally.remove(&address, &account.0, &ps);
                }
                if let Some((account, ps)) = state {
                    let account = d(ACCOUNTS[account]);
                    let ps = positions(&address, &ps);
                    tally.add(&address, &account.0, &ps);
                    wallets.insert(address, (account, ps));
                }
            }
            Op::Requote(p) => {
                *prices = p;
                tally.requote(&quotes(p));
            }
        }
    }

    /// What `materialize` and `network_coverage` give for these wallets.
    fn oracle(quotes: &[Quote], wallets: &Wallets, at: OffsetDateTime) -> Rendered {
        let input = ScanInput {
            observed_at: at,
            quotes: quotes.to_vec(),
            wallets: wallets
                .iter()
                .map(|(a, (account, _))| WalletInput {
                    address: a.clone(),
                    label: None,
                    tags: vec![],
                    kols: vec![],
                    kol_profile: None,
                    account_value: account.clone(),
                    observed_at: at,
                    analytics: None,
                })
                .collect(),
            positions: wallets.values().flat_map(|w| w.1.clone()).collect(),
        };
        let m = materialize("perpnet", input).unwrap();
        let coverage = network_coverage(at, &m.markets, &m.positions, freshness());
        Rendered {
            markets: m.markets,
            current_days: m.current_days,
            cohorts: m.cohorts,
            coverage,
        }
    }

    /// Every field with its scale: `Decimal`s compare by value, and the
    /// text they serve is what must be equal.
    fn text(r: &Rendered) -> String {
        format!("{r:#?}")
    }

    fn freshness() -> WalletFreshness {
        crate::coverage::wallet_freshness(datetime!(2026-11-25 12:00 UTC), [])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Any sequence of wallet changes and new prices: the tally renders
        /// what materializing every wallet renders, and a clone changed
        /// after it leaves it as it was.
        #[test]
        fn a_tally_renders_what_materializing_everything_renders(
            ops in proptest::collection::vec(op(), 1..40)
        ) {
            let at = datetime!(2026-11-25 12:00 UTC);
            let mut prices = [3, 4, 6];
            let mut wallets = Wallets::new();
            let mut tally = Tally::new(&quotes(prices));
            for op in ops {
                let before = tally.clone();
                let expected_before = oracle(&quotes(prices), &wallets, at);
                apply(&mut tally, &mut wallets, &mut prices, op);
                prop_assert_eq!(
                    text(&tally.render("perpnet", at, freshness())),
                    text(&oracle(&quotes(prices), &wallets, at))
                );
                prop_assert_eq!(tally.wallets(), wallets.len());
                prop_assert_eq!(tally.positions(), wallets.values().map(|w| w.1.len()).sum::<usize>());
                prop_assert_eq!(
                    text(&before.render("perpnet", at, freshness())),
                    text(&expected_before)
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Batches of changes made through an edit, each kept or undone:
        /// during an edit the tally renders what materializing the batch's
        /// wallets renders, and after it what the wallets of the batches
        /// kept render (an undone batch leaves no trace, requotes included).
        #[test]
        fn an_edit_kept_or_undone_renders_what_its_wallets_render(
            batches in proptest::collection::vec(
                (proptest::collection::vec(op(), 1..12), any::<bool>()),
                1..8,
            )
        ) {
            let at = datetime!(2026-11-25 12:00 UTC);
            let mut prices = [3, 4, 6];
            let mut wallets = Wallets::new();
            let mut tally = Tally::new(&quotes(prices));
            for (ops, keep) in batches {
                let mut edit = tally.edit();
                let mut new_prices = prices;
                let mut new_wallets = wallets.clone();
                for op in ops {
                    apply(&mut edit, &mut new_wallets, &mut new_prices, op);
                }
                prop_assert_eq!(
                    text(&edit.tally().render("perpnet", at, freshness())),
                    text(&oracle(&quotes(new_prices), &new_wallets, at))
                );
                if keep {
                    tally = edit.keep();
                    prices = new_prices;
                    wallets = new_wallets;
                } else {
                    tally = edit.undo().expect("no change broke the tally");
                }
                prop_assert_eq!(
                    text(&tally.render("perpnet", at, freshness())),
                    text(&oracle(&quotes(prices), &wallets, at))
                );
                prop_assert_eq!(tally.wallets(), wallets.len());
                prop_assert_eq!(
                    tally.positions(),
                    wallets.values().map(|w| w.1.len()).sum::<usize>()
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Dozens of wallets, so that a level holds many members when the
        /// levels are bucketed again at a new price: the tally still
        /// renders what materializing every wallet renders.
        #[test]
        fn crowded_levels_bucketed_again_render_what_materializing_renders(
            wallets in proptest::collection::vec(
                (0..ACCOUNTS.len(), proptest::collection::vec(pos(), 1..4)),
                20..60,
            ),
            requotes in proptest::collection::vec(
                [0..PRICES.len(), 0..PRICES.len(), 0..PRICES.len()],
                1..8,
            )
        ) {
            let at = datetime!(2026-11-25 12:00 UTC);
            let mut prices = [3, 4, 6];
            let mut held = Wallets::new();
            let mut tally = Tally::new(&quotes(prices));
            for (w, (account, ps)) in wallets.into_iter().enumerate() {
                apply(&mut tally, &mut held, &mut prices, Op::Set(w, Some((account, ps))));
            }
            for p in requotes {
                apply(&mut tally, &mut held, &mut prices, Op::Requote(p));
                prop_assert_eq!(
                    text(&tally.render("perpnet", at, freshness())),
                    text(&oracle(&quotes(prices), &held, at))
                );
            }
        }
    }

    #[test]
    fn an_edit_broken_by_a_wrong_removal_gives_nothing_back() {
        let p = crate::fixtures::position("0xa", "BTC", Direction::Long, "1", Some("0.9"));
        let mut tally = Tally::new(&quotes([0, 0, 0]));
        tally.add("0xa", &d("1").0, [&p]).unwrap();
        let mut edit = tally.edit();
        let other = crate::fixtures::position("0xa", "BTC", Direction::Long, "1", Some("0.5"));
        assert_eq!(edit.remove("0xa", &d("1").0, &[other]), Err(NotAdded));
        assert!(edit.undo().is_none());
    }

    #[test]
    fn a_tally_of_a_version_renders_it() {
        let input = crate::fixtures::sample();
        let quotes = input.quotes.clone();
        let at = input.observed_at;
        let m = materialize("perpnet", input).unwrap();
        let tally = Tally::of(&quotes, &m);
        let rendered = tally.render("perpnet", at, freshness());
        assert_eq!(
            format!("{:?}", rendered.markets),
            format!("{:?}", m.markets)
        );
        assert_eq!(
            format!("{:?}", rendered.current_days),
            format!("{:?}", m.current_days)
        );
        assert_eq!(
            format!("{:?}", rendered.cohorts),
            format!("{:?}", m.cohorts)
        );
        assert_eq!(tally.wallets(), m.wallets.len());
        assert_eq!(tally.positions(), m.positions.len());
    }

    #[test]
    fn a_position_in_an_unquoted_asset_is_refused_and_changes_nothing() {
        let mut tally = Tally::new(&quotes([0, 0, 0]));
        let p = crate::fixtures::position("0xa", "SOL", Direction::Long, "1", None);
        let err = tally.add("0xa", &d("1").0, [&p]).unwrap_err();
        assert_eq!(err.symbol, "SOL");
        assert_eq!(tally.wallets(), 0);
    }

    #[test]
    fn a_levels_highest_price_is_the_lowest_address_at_it_however_long_the_run() {
        let member = |liq: &str, wallet: &str| Member {
            liq: CompactDecimal::of(&liq.parse().unwrap()),
            value: CompactDecimal::of(&"1".parse().unwrap()),
            wallet: Arc::from(wallet),
        };
        for run in [1, 2, 8, 9, 10, 500] {
            let mut members: BTreeSet<Member> = (0..5)
                .map(|i| member("4.5", &format!("0xb{i:03}")))
                .collect();
            // The run's lowest address has the text `5.00`; the others `5`
            // or `5.0`, inserted in no particular order.
            members.insert(member("5.00", "0xa000"));
            for i in (1..run).rev() {
                let text = if i % 2 == 0 { "5" } else { "5.0" };
                members.insert(member(text, &format!("0xa{i:03}")));
            }
            let last = members.last().unwrap();
            let first = first_of_last_run(&members, last);
            assert_eq!(&*first.wallet, "0xa000", "a run of {run}");
            assert_eq!(first.liq.to_big().to_string(), "5.00", "a run of {run}");
        }
    }

    #[test]
    fn taking_out_what_was_not_added_is_an_error() {
        let mut tally = Tally::new(&quotes([0, 0, 0]));
        let p = crate::fixtures::position("0xa", "BTC", Direction::Long, "1", Some("0.9"));
        assert_eq!(tally.remove("0xa", &d("1").0, [&p]), Err(NotAdded));
        tally.add("0xa", &d("1").0, [&p]).unwrap();
        let other = crate::fixtures::position("0xa", "BTC", Direction::Long, "1", Some("0.5"));
        assert_eq!(tally.remove("0xa", &d("1").0, [&other]), Err(NotAdded));
    }
}
