//! Demo history: position events that lead to the generated positions, and
//! the market and wallet series they imply over the demo's price history.
//!
//! Every current position gets a life: opened at a random completed hour of
//! the window (or at its start, as a first observation), with up to two size
//! changes (positions of 50,000 USD or more), sometimes a flip; some wallets
//! also get a position opened and closed in the window (sometimes near its
//! liquidation price). Events are the transitions between a life's states,
//! classified by the rule the store uses (`market_model::history::classify`),
//! so replaying a wallet's events gives its current positions. The series
//! are computed from the lives at each instant: positions are valued at the
//! asset's candle close, and each wallet keeps its current size class.

use std::collections::{BTreeSet, HashMap};

use bigdecimal::{BigDecimal, RoundingMode, Zero};
use market_engine::aggregate::long_short_ratio;
use market_engine::DataVersion;
use market_model::history::{classify, Holding};
use market_model::{
    BySizeClass, ClassSplit, Decimal, Direction, Market, MarketHistoryPoint, PositionEvent,
    SizeClass, Wallet, WalletHistoryPoint,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use time::OffsetDateTime;

use market_model::Interval;

use crate::CandleSet;

/// Random stream of wallet `i`'s timeline: `TIMELINE + i`.
const TIMELINE: u64 = 1 << 40;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
/// Observations of an hour are made 55 minutes into it.
const OBSERVED: i64 = 55 * MINUTE;
/// Hours before now with an observation every 5 minutes.
const FINE_HOURS: i64 = 6;
/// Positions from this value (USD) change size in the window.
const ACTIVE_USD: i64 = 50_000;

/// Generated history, ready for `market_store::HistoryWrite`.
#[derive(Clone, Debug, Default)]
pub struct DemoHistory {
    /// Market points by symbol: one per completed hour of the window, and
    /// one every 5 minutes over the last 6 hours.
    pub markets: Vec<(String, MarketHistoryPoint)>,
    /// Wallet points by address: at each of the wallet's events, and daily for whales.
    pub wallets: Vec<(String, WalletHistoryPoint)>,
    /// Position events, oldest first.
    pub events: Vec<PositionEvent>,
}

/// One position's states over the window: `(instant, holding)` in time order,
/// the first one the opening; `None` is closed.
struct Life<'a> {
    wallet: &'a Wallet,
    symbol: &'a str,
    market: usize,
    entry: BigDecimal,
    has_liq: bool,
    near_liq_close: bool,
    states: Vec<(i64, Option<Holding>)>,
    first_observation: bool,
}

/// An asset's prices: hourly closes of the window and the minute closes.
struct Prices<'a> {
    hours: &'a [market_model::Candle],
    all_hours: &'a [market_model::Candle],
    minutes: HashMap<i64, &'a BigDecimal>,
}

impl Prices<'_> {
    /// The close of the hour holding `t` (or of the minute, when known).
    fn at(&self, t: i64) -> &BigDecimal {
        if let Some(p) = self.minutes.get(&(t - t.rem_euclid(MINUTE))) {
            return p;
        }
        let i = self
            .hours
            .partition_point(|c| c.time <= t)
            .saturating_sub(1);
        &self.hours[i].close.0
    }
}

/// Cents, as the engine's sums of cent values come out; a sum of nothing is
/// `0` there (not `0.00`), and so it is here.
fn round2(v: BigDecimal) -> Decimal {
    if v.is_zero() {
        return Decimal::zero();
    }
    Decimal(v.with_scale_round(2, RoundingMode::HalfUp))
}

fn dt(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).expect("in range")
}

/// Generates the history of `m` (materialized from the demo scan, whose
/// candles are `candles`) over the last `days` days, from `seed`.
pub fn history(seed: u64, days: u32, m: &DataVersion, candles: &[CandleSet]) -> DemoHistory {
    let now = (m.observed_at.unix_timestamp_nanos() / 1_000_000) as i64;
    let base = ChaCha8Rng::seed_from_u64(seed);
    let mut prices: Vec<Prices<'_>> = Vec::with_capacity(m.markets.len());
    for market in &m.markets {
        let set = |interval| {
            candles
                .iter()
                .find(|c| c.symbol == market.symbol && c.interval == interval)
                .map_or(&[][..], |c| c.candles.as_slice())
        };
        let all_hours = set(Interval::H1);
        let from = all_hours.len().saturating_sub(days as usize * 24);
        prices.push(Prices {
            hours: &all_hours[from..],
            all_hours,
            minutes: set(Interval::M1)
                .iter()
                .map(|c| (c.time, &c.close.0))
                .collect(),
        });
    }
    let market_of: HashMap<&str, usize> = m
        .markets
        .iter()
        .enumerate()
        .map(|(i, mk)| (mk.symbol.as_str(), i))
        .collect();
    // Completed hours of the window: events happen in them.
    let hours: Vec<i64> = prices
        .first()
        .map(|p| {
            p.hours
                .iter()
                .map(|c| c.time)
                .filter(|&t| t + HOUR <= now)
                .collect()
        })
        .unwrap_or_default();
    if hours.len() < 2 {
        return DemoHistory::default();
    }
    let lives = lives(&base, m, &market_of, &prices, &hours);
    let events = events(&lives, &prices);
    DemoHistory {
        markets: market_points(m, &lives, &prices, &hours, now),
        wallets: wallet_points(m, &lives, &prices, &hours),
        events,
    }
}

fn lives<'a>(
    base: &ChaCha8Rng,
    m: &'a DataVersion,
    market_of: &HashMap<&str, usize>,
    prices: &[Prices<'_>],
    hours: &[i64],
) -> Vec<Life<'a>> {
    let mut by_wallet: HashMap<&str, Vec<&market_model::MarketPosition>> = HashMap::new();
    for p in &m.positions {
        by_wallet.entry(p.address.as_str()).or_default().push(p);
    }
    let n = hours.len();
    let at = |i: usize| hours[i] + OBSERVED;
    let mut out = Vec::new();
    for (rank, w) in m.wallets.iter().enumerate() {
        let mut rng = base.clone();
        rng.set_stream(TIMELINE + rank as u64);
        let held = by_wallet.remove(w.address.as_str()).unwrap_or_default();
        for p in &held {
            let Some(&market) = market_of.get(p.symbol.as_str()) else {
                continue;
            };
            let first = rng.random_bool(0.25);
            let open = if first { 0 } else { rng.random_range(0..n - 1) };
            let active = p.position_value.0 >= ACTIVE_USD;
            let changes: BTreeSet<usize> = if active && open + 1 < n {
                (0..rng.random_range(0..=2))
                    .map(|_| rng.random_range(open + 1..n))
                    .collect()
            } else {
                BTreeSet::new()
            };
            let flip = !changes.is_empty() && rng.random_bool(0.08);
            let scale = p.size.0.fractional_digit_count().max(0);
            // Sizes from the last state back: each a multiple of the current size.
            let mut sizes = vec![p.size.0.clone()];
            for _ in 0..changes.len() {
                let next = sizes.last().expect("one size").clone();
                let factor = loop {
                    let f = rng.random_range(5..=35_i64) * 5; // 25 % … 175 %
                    if f != 100 {
                        break f;
                    }
                };
                let size = (&next * BigDecimal::from(factor) / BigDecimal::from(100))
                    .with_scale_round(scale, RoundingMode::HalfUp);
                sizes.push(if size.is_zero() {
                    next.clone() * 2
                } else {
                    size
                });
            }
            sizes.reverse();
            let mut states = Vec::with_capacity(sizes.len());
            for (k, (hour, size)) in std::iter::once(open)
                .chain(changes.iter().copied())
                .zip(sizes)
                .enumerate()
            {
                let direction = if flip && k == 0 {
                    opposite(p.direction)
                } else {
                    p.direction
                };
                states.push((
                    at(hour),
                    Some(Holding {
                        direction,
                        size: Decimal(size),
                    }),
                ));
            }
            out.push(Life {
                wallet: w,
                symbol: &p.symbol,
                market,
                entry: p.entry_price.0.clone(),
                has_liq: p.liq_price.is_some(),
                near_liq_close: false,
                states,
                first_observation: first,
            });
        }
        // A position opened and closed in the window, in an asset not held now.
        if rng.random_bool(0.3) && n >= 3 {
            let market = rng.random_range(0..m.markets.len());
            let symbol = m.markets[market].symbol.as_str();
            if held.iter().all(|p| p.symbol != symbol) {
                let open = rng.random_range(0..n - 2);
                let close = rng.random_range(open + 1..n);
                let price = prices[market].at(at(open)).clone();
                let usd = (&w.account_total_value.0
                    * BigDecimal::from(rng.random_range(1..=5_i64)))
                .max(BigDecimal::from(100));
                let size = if price.is_zero() {
                    BigDecimal::from(1)
                } else {
                    (usd / &price).with_scale_round(4, RoundingMode::HalfUp)
                };
                let direction = if rng.random_bool(0.5) {
                    Direction::Long
                } else {
                    Direction::Short
                };
                out.push(Life {
                    wallet: w,
                    symbol,
                    market,
                    entry: price,
                    has_liq: true,
                    near_liq_close: rng.random_bool(0.15),
                    states: vec![
                        (
                            at(open),
                            Some(Holding {
                                direction,
                                size: Decimal(size),
                            }),
                        ),
                        (at(close), None),
                    ],
                    first_observation: open == 0,
                });
            }
        }
    }
    out
}

fn opposite(d: Direction) -> Direction {
    match d {
        Direction::Long => Direction::Short,
        Direction::Short => Direction::Long,
    }
}

fn events(lives: &[Life<'_>], prices: &[Prices<'_>]) -> Vec<PositionEvent> {
    let mut out = Vec::new();
    for life in lives {
        let mut before: Option<&Holding> = None;
        for (k, (t, after)) in life.states.iter().enumerate() {
            let price = prices[life.market].at(*t);
            let near = life.near_liq_close && after.is_none();
            let Some(kind) = classify(before, after.as_ref(), near) else {
                before = after.as_ref();
                continue;
            };
            let value =
                |h: Option<&Holding>| h.map_or_else(Decimal::zero, |h| round2(&h.size.0 * price));
            let liq = before.filter(|_| near).map(|h| {
                // Within 1 % of the mark, on the losing side.
                let pct = match h.direction {
                    Direction::Long => 99,
                    Direction::Short => 101,
                };
                // Without trailing zeros, as the exchange writes prices.
                let liq = (price * BigDecimal::from(pct) / BigDecimal::from(100))
                    .with_scale_round(8, RoundingMode::HalfUp)
                    .normalized();
                let scale = liq.fractional_digit_count().max(0);
                Decimal(liq.with_scale(scale))
            });
            out.push(PositionEvent {
                observed_at: dt(*t),
                address: life.wallet.address.clone(),
                label: life.wallet.label.clone(),
                tags: life.wallet.tags.clone(),
                symbol: life.symbol.to_owned(),
                kind,
                first_observation: k == 0 && life.first_observation,
                previous_direction: before.map(|h| h.direction),
                direction: after.as_ref().map(|h| h.direction),
                previous_size: before.map_or_else(Decimal::zero, |h| h.size.clone()),
                size: after
                    .as_ref()
                    .map_or_else(Decimal::zero, |h| h.size.clone()),
                previous_value: value(before),
                value: value(after.as_ref()),
                price: Decimal(price.clone()),
                previous_liq_price: liq,
            });
            before = after.as_ref();
        }
    }
    out.sort_by(|a, b| {
        (a.observed_at, &a.address, &a.symbol).cmp(&(b.observed_at, &b.address, &b.symbol))
    });
    out
}

/// The holding of `life` at `t`: its last state at or before `t`.
fn holding_at<'l>(life: &'l Life<'_>, t: i64) -> Option<&'l Holding> {
    let i = life.states.partition_point(|(s, _)| *s <= t);
    i.checked_sub(1).and_then(|i| life.states[i].1.as_ref())
}

fn class_slot(c: SizeClass) -> usize {
    match c {
        SizeClass::Shrimp => 0,
        SizeClass::Shark => 1,
        SizeClass::Whale => 2,
    }
}

fn side_slot(d: Direction) -> usize {
    match d {
        Direction::Long => 0,
        Direction::Short => 1,
    }
}

/// Running sums of one (size class, side) of a market.
#[derive(Clone, Default)]
struct Sums {
    count: u64,
    size: BigDecimal,
    liq_size: BigDecimal,
}

fn market_points(
    m: &DataVersion,
    lives: &[Life<'_>],
    prices: &[Prices<'_>],
    hours: &[i64],
    now: i64,
) -> Vec<(String, MarketHistoryPoint)> {
    // Every change of every life, in time order: (instant, life, state index).
    let mut changes: Vec<(i64, usize, usize)> = lives
        .iter()
        .enumerate()
        .flat_map(|(l, life)| {
            life.states
                .iter()
                .enumerate()
                .map(move |(k, s)| (s.0, l, k))
        })
        .collect();
    changes.sort_unstable();
    // Observations: each completed hour, and every 5 minutes of the last
    // `FINE_HOURS` hours (older 5-minute buckets show the hourly ones, as
    // retention leaves them in a real deployment).
    let mut instants: BTreeSet<i64> = hours.iter().map(|h| h + OBSERVED).collect();
    let fine_from = now - FINE_HOURS * HOUR;
    let mut t = fine_from - fine_from.rem_euclid(5 * MINUTE) + 5 * MINUTE;
    while t + MINUTE <= now {
        instants.insert(t);
        t += 5 * MINUTE;
    }
    let mut sums: Vec<[[Sums; 2]; 3]> = vec![Default::default(); m.markets.len()];
    let apply = |sums: &mut Vec<[[Sums; 2]; 3]>, life: &Life<'_>, h: &Holding, sign: i64| {
        let s = &mut sums[life.market][class_slot(life.wallet.size_class)][side_slot(h.direction)];
        let size = &h.size.0 * BigDecimal::from(sign);
        if sign > 0 {
            s.count += 1;
        } else {
            s.count -= 1;
        }
        if life.has_liq {
            s.liq_size += &size;
        }
        s.size += size;
    };
    let total_now: Vec<BigDecimal> = {
        let mut t = vec![BigDecimal::zero(); m.markets.len()];
        for life in lives {
            if let Some(Some(h)) = life.states.last().map(|s| &s.1) {
                t[life.market] += &h.size.0;
            }
        }
        t
    };
    let mut out = Vec::with_capacity(instants.len() * m.markets.len());
    let mut next = 0;
    for &t in &instants {
        while next < changes.len() && changes[next].0 <= t {
            let (_, l, k) = changes[next];
            let life = &lives[l];
            if let Some(prev) = k.checked_sub(1).and_then(|k| life.states[k].1.as_ref()) {
                apply(&mut sums, life, prev, -1);
            }
            if let Some(h) = &life.states[k].1 {
                apply(&mut sums, life, h, 1);
            }
            next += 1;
        }
        for (i, market) in m.markets.iter().enumerate() {
            out.push((
                market.symbol.clone(),
                point(market, &sums[i], &prices[i], &total_now[i], t),
            ));
        }
    }
    out
}

fn point(
    market: &Market,
    sums: &[[Sums; 2]; 3],
    prices: &Prices<'_>,
    total_now: &BigDecimal,
    t: i64,
) -> MarketHistoryPoint {
    let price = prices.at(t);
    let split = |c: &[Sums; 2]| ClassSplit {
        long_count: c[0].count,
        short_count: c[1].count,
        long_value: round2(&c[0].size * price),
        short_value: round2(&c[1].size * price),
        long_liquidation_value: round2(&c[0].liq_size * price),
        short_liquidation_value: round2(&c[1].liq_size * price),
    };
    let by_size_class = BySizeClass {
        shrimp: split(&sums[0]),
        shark: split(&sums[1]),
        whale: split(&sums[2]),
    };
    let classes = [
        &by_size_class.shrimp,
        &by_size_class.shark,
        &by_size_class.whale,
    ];
    let sum =
        |f: fn(&ClassSplit) -> &Decimal| Decimal(classes.iter().map(|c| f(c).0.clone()).sum());
    let (long_count, short_count) = (
        classes.iter().map(|c| c.long_count).sum(),
        classes.iter().map(|c| c.short_count).sum(),
    );
    // Open interest moves with the scanned size and the price.
    let size_now: BigDecimal = sums.iter().flatten().map(|s| s.size.clone()).sum();
    let mark = &market.price.0;
    let mut oi = &market.open_interest.0 * price;
    if !mark.is_zero() {
        oi = oi / mark;
    }
    if !total_now.is_zero() {
        oi = oi * size_now / total_now;
    }
    // Volume: the traded notional of the 24 hours before `t`.
    let end = prices.all_hours.partition_point(|c| c.time <= t);
    let volume: BigDecimal = prices.all_hours[end.saturating_sub(24)..end]
        .iter()
        .map(|c| &c.volume.0 * &c.close.0)
        .sum();
    MarketHistoryPoint {
        time: 0,
        observed_at: dt(t),
        price: Decimal(price.clone()),
        open_interest: round2(oi),
        funding: market.funding.clone(),
        volume24h: round2(volume),
        long_count,
        short_count,
        long_short_ratio: long_short_ratio(long_count, short_count),
        long_value: sum(|c| &c.long_value),
        short_value: sum(|c| &c.short_value),
        long_liquidation_value: sum(|c| &c.long_liquidation_value),
        short_liquidation_value: sum(|c| &c.short_liquidation_value),
        by_size_class,
    }
}

fn wallet_points(
    m: &DataVersion,
    lives: &[Life<'_>],
    prices: &[Prices<'_>],
    hours: &[i64],
) -> Vec<(String, WalletHistoryPoint)> {
    let mut by_wallet: HashMap<&str, Vec<&Life<'_>>> = HashMap::new();
    for life in lives {
        by_wallet
            .entry(life.wallet.address.as_str())
            .or_default()
            .push(life);
    }
    let mut upnl_now: HashMap<&str, BigDecimal> = HashMap::new();
    for p in &m.positions {
        *upnl_now.entry(p.address.as_str()).or_default() += &p.u_pnl.0;
    }
    let mut out = Vec::new();
    for w in &m.wallets {
        let Some(lives) = by_wallet.get(w.address.as_str()) else {
            continue;
        };
        let mut instants: BTreeSet<i64> = lives
            .iter()
            .flat_map(|l| l.states.iter().map(|s| s.0))
            .collect();
        if w.size_class == SizeClass::Whale {
            instants.extend(hours.iter().step_by(24).map(|h| h + OBSERVED));
        }
        let base = &w.account_total_value.0
            - upnl_now
                .get(w.address.as_str())
                .cloned()
                .unwrap_or_default();
        for t in instants {
            let (mut long, mut short, mut upnl) =
                (BigDecimal::zero(), BigDecimal::zero(), BigDecimal::zero());
            for life in lives {
                let Some(h) = holding_at(life, t) else {
                    continue;
                };
                let price = prices[life.market].at(t);
                let value = &h.size.0 * price;
                let gain = (price - &life.entry) * &h.size.0;
                match h.direction {
                    Direction::Long => {
                        long += value;
                        upnl += gain;
                    }
                    Direction::Short => {
                        short += value;
                        upnl -= gain;
                    }
                }
            }
            let account = (&base + &upnl).max(BigDecimal::zero());
            let (long, short) = (round2(long), round2(short));
            out.push((
                w.address.clone(),
                WalletHistoryPoint {
                    time: 0,
                    observed_at: dt(t),
                    account_total_value: round2(account),
                    total_position_value: Decimal(&long.0 + &short.0),
                    long_value: long,
                    short_value: short,
                    u_pnl: round2(upnl),
                },
            ));
        }
    }
    out
}
