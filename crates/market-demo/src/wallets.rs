//! Scanned wallets and their open positions.

use std::collections::{BTreeSet, HashSet};

use market_engine::{Analytics, WalletInput};
use market_model::{Decimal, Direction, Kol, KolProfile, MarketPosition, SizeClass, Strategy};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use time::{Duration, OffsetDateTime};

use crate::assets::Asset;
use crate::names::{generic_label, kol_identity, random_tags, ENTITIES};
use crate::num::{
    cents, dec_fixed, dec_norm, div_round, lognormal, normal, pareto, pick_cumulative,
    pick_weighted, pow10, price_units, snap_ceil, snap_floor, uniform, unit,
};

/// Leverage settings traders pick, with their relative frequency.
const LEVERAGES: &[(u32, f64)] = &[
    (1, 3.0),
    (2, 4.0),
    (3, 14.0),
    (4, 2.0),
    (5, 16.0),
    (6, 2.0),
    (8, 3.0),
    (10, 18.0),
    (12, 1.5),
    (15, 4.0),
    (20, 11.0),
    (25, 3.5),
    (30, 1.0),
    (40, 3.0),
    (50, 2.0),
];

/// Relative frequency of holding 1, 2, … 12 positions (mean about 3.9, so
/// 100,000 wallets hold about 400,000 positions, the reference dataset).
const POSITION_COUNTS: &[f64] = &[
    20.0, 18.0, 15.0, 12.0, 10.0, 8.0, 6.0, 4.0, 3.0, 2.0, 1.0, 1.0,
];

/// What the wallet stage needs to know about one asset.
pub(crate) struct Market<'a> {
    /// The asset.
    pub asset: &'a Asset,
    /// Mark price in units of `10^-price_decimals`.
    pub mark: i64,
    /// Mark price as a decimal (the quote price).
    pub mark_dec: Decimal,
}

/// Wallets, positions and per-asset open sizes.
pub(crate) struct Book {
    /// Every wallet, in generation order.
    pub wallets: Vec<WalletInput>,
    /// Every position, wallet by wallet.
    pub positions: Vec<MarketPosition>,
    /// Asset index of each position.
    pub position_asset: Vec<usize>,
    /// Open long and short size per asset, in size units.
    pub open_size: Vec<[i128; 2]>,
}

/// Generates `count` wallets; wallet `i` draws from stream `stream_base + i`.
pub(crate) fn generate(
    markets: &[Market<'_>],
    count: usize,
    base_rng: &ChaCha8Rng,
    stream_base: u64,
    observed_at: OffsetDateTime,
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Book {
    // Cumulative popularity for shrimps, sharks and whales: bigger wallets
    // concentrate on the most liquid assets.
    let tables: Vec<Vec<f64>> = [1.0, 1.1, 1.25]
        .iter()
        .map(|p| {
            let mut acc = 0.0;
            markets
                .iter()
                .map(|m| {
                    acc += m.asset.popularity.powf(*p);
                    acc
                })
                .collect()
        })
        .collect();
    let mut book = Book {
        wallets: Vec::with_capacity(count),
        positions: Vec::with_capacity(count * 3),
        position_asset: Vec::with_capacity(count * 3),
        open_size: vec![[0, 0]; markets.len()],
    };
    let mut addresses: HashSet<String> = HashSet::with_capacity(count);
    let mut kol_names = BTreeSet::new();
    let mut next_entity = 0;
    for i in 0..count {
        let mut rng = base_rng.clone();
        rng.set_stream(stream_base + i as u64);
        let address = loop {
            let a = format!(
                "0x{:016x}{:016x}{:08x}",
                rng.random::<u64>(),
                rng.random::<u64>(),
                rng.random::<u32>()
            );
            if addresses.insert(a.clone()) {
                break a;
            }
        };
        let wallet_observed = observed_at - Duration::seconds(rng.random_range(3..=240));

        // Account value: a log-normal body, a shark bump and a Pareto whale tail.
        let r = unit(&mut rng);
        let account = if r < 0.035 {
            pareto(&mut rng, 1.0e6, 1.1).min(9.0e8)
        } else if r < 0.16 {
            lognormal(&mut rng, 180_000.0, 0.7)
        } else {
            lognormal(&mut rng, 7_000.0, 1.25)
        }
        .max(25.0);
        let account_cents = cents(account);
        let class = if account_cents >= SizeClass::WHALE_MIN_USD * 100 {
            2
        } else if account_cents >= SizeClass::SHARK_MIN_USD * 100 {
            1
        } else {
            0
        };

        // Identity: KOLs, known entities, generic labels, tags.
        let mut label = None;
        let mut tags: Vec<String> = Vec::new();
        let mut kols = Vec::new();
        let mut kol_profile = None;
        if unit(&mut rng) < 0.01 {
            let k = kol_identity(&mut rng, &mut kol_names);
            label = Some(k.name.clone());
            tags.push("kol".to_owned());
            if unit(&mut rng) < 0.3 {
                for t in random_tags(&mut rng, false) {
                    if !tags.contains(&t) {
                        tags.push(t);
                    }
                }
            }
            kols = k
                .accounts
                .iter()
                .map(|(platform, handle)| Kol {
                    name: k.name.clone(),
                    platform: (*platform).to_owned(),
                    handle: handle.clone(),
                })
                .collect();
            kol_profile = Some(KolProfile {
                name: k.name,
                bio: k.bio,
                followers: k.followers,
            });
        } else {
            let p_label = [0.05, 0.15, 0.45][class];
            if unit(&mut rng) < p_label {
                if class == 2 && next_entity < ENTITIES.len() && unit(&mut rng) < 0.6 {
                    let (name, entity_tags) = ENTITIES[next_entity];
                    next_entity += 1;
                    label = Some(name.to_owned());
                    tags = entity_tags.iter().map(|t| (*t).to_owned()).collect();
                } else {
                    label = Some(generic_label(&mut rng, &address, class == 2));
                }
            }
            let p_tags = if label.is_some() { 0.5 } else { 0.11 };
            if tags.is_empty() && unit(&mut rng) < p_tags {
                tags = random_tags(&mut rng, class > 0);
            }
        }
        let has = |t: &str| tags.iter().any(|x| x == t);

        let analytics = analytics(&mut rng, account, label.is_some(), &has);

        // Exposure.
        let mut lev_factor = lognormal(&mut rng, [2.2, 1.8, 1.3][class], 0.75);
        if has("degen") {
            lev_factor *= 2.5;
        }
        if has("hedger") || has("fund") {
            lev_factor *= 0.6;
        }
        let lev_factor = lev_factor.clamp(0.05, 25.0);
        let notional = account * lev_factor;
        let n_positions = (1 + pick_weighted(&mut rng, POSITION_COUNTS) + usize::from(class == 2))
            .min(POSITION_COUNTS.len());
        let long_bias = (0.55 + 0.2 * normal(&mut rng)).clamp(0.05, 0.95);

        let mut chosen: Vec<usize> = Vec::with_capacity(n_positions);
        let mut tries = 0;
        while chosen.len() < n_positions && tries < 200 {
            let a = pick_cumulative(&mut rng, &tables[class]);
            if !chosen.contains(&a) {
                chosen.push(a);
            }
            tries += 1;
        }
        let mut shares: Vec<f64> = chosen
            .iter()
            .map(|_| -(1.0 - unit(&mut rng)).ln())
            .collect();
        shares[0] *= 1.5;
        let share_total: f64 = shares.iter().sum();

        for (k, &a) in chosen.iter().enumerate() {
            let m = &markets[a];
            let direction = if unit(&mut rng) < long_bias {
                Direction::Long
            } else {
                Direction::Short
            };
            let value = notional * shares[k] / share_total;
            let p = position(&mut rng, m, direction, value, lev_factor);
            let side = usize::from(direction == Direction::Short);
            book.open_size[a][side] += i128::from(p.size_units);
            book.positions.push(MarketPosition {
                address: address.clone(),
                label: None,
                tags: Vec::new(),
                symbol: m.asset.symbol.to_owned(),
                direction,
                position_value: dec_fixed(p.value_cents, 2),
                liq_price: p.liq.map(|u| dec_norm(u, m.asset.price_decimals)),
                observed_at: wallet_observed,
                leverage: Decimal::from(i64::from(p.leverage)),
                size: dec_fixed(p.size_units, m.asset.sz_decimals),
                size_unit: m.asset.symbol.to_owned(),
                u_pnl: dec_fixed(p.upnl_cents, 2),
                u_pnl_pct: dec_fixed(p.upnl_pct_e2, 2),
                entry_price: dec_norm(p.entry, m.asset.price_decimals),
                mark_price: m.mark_dec.clone(),
                margin: dec_fixed(p.margin_cents, 2),
                funding_cost: dec_fixed(p.funding_cents, 2),
            });
            book.position_asset.push(a);
        }

        book.wallets.push(WalletInput {
            address,
            label,
            tags,
            kols,
            kol_profile,
            account_value: dec_fixed(account_cents, 2),
            observed_at: wallet_observed,
            analytics,
        });
        if (i + 1) % 1000 == 0 && i + 1 < count {
            progress("wallets", i + 1, count);
        }
    }
    progress("wallets", count, count);
    book
}

fn analytics(
    rng: &mut ChaCha8Rng,
    account: f64,
    labelled: bool,
    has: &dyn Fn(&str) -> bool,
) -> Option<Analytics> {
    let p = if labelled { 0.95 } else { 0.84 };
    if unit(rng) >= p {
        return None;
    }
    let mut skill = normal(rng);
    if has("smart-money") {
        skill += 1.0;
    }
    if has("market-maker") {
        skill += 0.6;
    }
    if has("degen") {
        skill -= 0.6;
    }
    let roi = ((0.1 * skill - 0.05 + 0.55 * normal(rng)).exp() - 1.0).clamp(-0.99, 25.0);
    let capital = account * uniform(rng, 0.6, 1.6);
    let net_pnl = capital * roi;
    let win_rate = (50.0 + 6.0 * skill + 9.0 * normal(rng)).clamp(3.0, 97.0);
    let strategy = if has("bot") || has("market-maker") {
        [Strategy::Scalper, Strategy::DayTrader][pick_weighted(rng, &[0.65, 0.35])]
    } else {
        Strategy::ALL[pick_weighted(rng, &[0.14, 0.34, 0.36, 0.16])]
    };
    let confidence = uniform(rng, 0.35, 0.99);
    Some(Analytics {
        net_pnl: dec_fixed(cents(net_pnl), 2),
        roi: dec_fixed(cents(roi * 100.0), 2),
        win_rate: dec_fixed(cents(win_rate), 2),
        strategy,
        strategy_confidence: dec_fixed(cents(confidence), 2),
    })
}

/// The integer quantities of one position.
struct Position {
    size_units: i64,
    entry: i64,
    liq: Option<i64>,
    leverage: u32,
    value_cents: i64,
    margin_cents: i64,
    upnl_cents: i64,
    upnl_pct_e2: i64,
    funding_cents: i64,
}

fn position(
    rng: &mut ChaCha8Rng,
    m: &Market<'_>,
    direction: Direction,
    value: f64,
    lev_factor: f64,
) -> Position {
    let asset = m.asset;
    let dec = asset.price_decimals;
    let sz = asset.sz_decimals;
    let long = direction == Direction::Long;
    let max_lev = asset.max_leverage.min(50);

    // Leverage: a popular setting the asset allows, at least the wallet's exposure most of the time.
    let allowed: Vec<(u32, f64)> = LEVERAGES
        .iter()
        .copied()
        .filter(|(l, _)| *l <= max_lev)
        .collect();
    let weights: Vec<f64> = allowed.iter().map(|(_, w)| *w).collect();
    let mut leverage = allowed[pick_weighted(rng, &weights)].0;
    if f64::from(leverage) < lev_factor && unit(rng) < 0.7 {
        if let Some((l, _)) = allowed.iter().find(|(l, _)| f64::from(*l) >= lev_factor) {
            leverage = *l;
        }
    }

    // Size: at least 10 USD of notional, in whole size units.
    let value = value.max(10.5 * (1.0 + unit(rng)));
    let mark = m.mark;
    let price = mark as f64 / pow10(dec) as f64;
    let min_units = (10_000_000 + mark - 1) / mark; // size × mark ≥ 10 USD (in micro-USD)
    let size_units = ((value / price * pow10(sz) as f64).round() as i64)
        .max(min_units)
        .max(1);
    // size units × price units are micro-USD because szDecimals + priceDecimals = 6.
    let value_micro = i128::from(size_units) * i128::from(mark);
    let value_cents = div_round(value_micro, 10_000) as i64;
    let margin_cents = div_round(i128::from(value_cents), i128::from(leverage)) as i64;

    // Entry: within ±15 % of the mark, never so far against the position
    // that the mark would already be past its liquidation price.
    let maint = 1.0 / f64::from(leverage) - 1.0 / (2.0 * f64::from(asset.max_leverage));
    let favourable = unit(rng) < 0.5;
    let cap = if favourable {
        0.15
    } else {
        (0.7 * maint / (1.0 + maint)).min(0.15)
    };
    let d = cap * unit(rng).powf(1.8);
    let sign = match (long, favourable) {
        (true, true) | (false, false) => -1.0,
        _ => 1.0,
    };
    let entry = price_units(price * (1.0 + sign * d), dec).max(1);
    let dir = if long { 1 } else { -1 };
    let upnl_micro = i128::from(size_units) * i128::from(mark - entry) * dir;
    let upnl_cents = div_round(upnl_micro, 10_000) as i64;
    let upnl_pct_e2 = div_round(
        i128::from(upnl_cents) * 10_000,
        i128::from(margin_cents.max(1)),
    ) as i64;

    // Liquidation price.
    let isolated = asset.hip3 || unit(rng) < 0.58;
    let distance = if isolated {
        Some(maint)
    } else if leverage <= 3 && unit(rng) < 0.5 {
        None
    } else {
        Some(maint * uniform(rng, 1.15, 3.0))
    };
    let entry_price = entry as f64 / pow10(dec) as f64;
    let liq = distance.and_then(|dist| {
        let f = if long { 1.0 - dist } else { 1.0 + dist };
        if f <= 0.0 {
            return None;
        }
        let mut u = price_units(entry_price * f, dec);
        if long && u >= entry {
            u = snap_floor(entry - 1, dec, dec);
        }
        if !long && u <= entry {
            u = snap_ceil(entry + 1, dec, dec);
        }
        (u > 0).then_some(u)
    });

    // Funding since open: mostly paid by longs (positive rates), received by shorts.
    let hours = uniform(rng, 0.0, 1500f64.ln()).exp();
    let rate = asset.funding_e8 as f64 * 1e-8 * uniform(rng, 0.2, 1.8) + 0.000004 * normal(rng);
    let funding = value_cents as f64 / 100.0 * rate * hours * f64::from(dir as i8);
    Position {
        size_units,
        entry,
        liq,
        leverage,
        value_cents,
        margin_cents,
        upnl_cents,
        upnl_pct_e2,
        funding_cents: cents(funding),
    }
}
