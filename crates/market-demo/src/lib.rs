#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod assets;
mod history;
mod names;
mod num;
mod series;
mod timeline;
mod wallets;

use bigdecimal::{BigDecimal, RoundingMode};
use market_engine::aggregate::liquidity_levels;
use market_engine::{bucket_size_for_price, Quote, ScanInput};
use market_model::{Candle, Decimal, Interval, LiquidityDay};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use time::{OffsetDateTime, UtcOffset};

use crate::num::{dec_fixed, dec_norm, div_round, pow10};
use crate::series::{Factor, TimeGrid};
pub use crate::timeline::{history, DemoHistory};

/// The network id every generated record belongs to (`market_model::NETWORK_ID`).
pub const NETWORK: &str = market_model::NETWORK_ID;

/// Random streams of the seed; each part of the data draws from its own
/// stream so that parts do not shift when another part changes size.
mod streams {
    pub const ASSETS: u64 = 1;
    pub const MARKET_FACTOR: u64 = 2;
    pub const CANDLES: u64 = 1 << 20;
    pub const HISTORY: u64 = 2 << 20;
    pub const WALLETS: u64 = 1 << 32;
}

/// What to generate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DemoConfig {
    /// Number of scanned wallets (the CLI's default is 20,000).
    pub wallets: usize,
    /// Seed of every random choice: the same seed and `now` give the same data.
    pub seed: u64,
    /// The instant of the scan; candles end with the minute and hour containing it.
    pub now: OffsetDateTime,
    /// Days of hourly candles and of liquidity history (today included); default 90.
    /// The liquidity history covers the `history_days − 1` days before today;
    /// hourly candles cover at least 2 days whatever the value (the quotes
    /// need the 24 hours before the last day).
    pub history_days: u32,
}

impl DemoConfig {
    /// A configuration with the default 90 days of history.
    pub fn new(wallets: usize, seed: u64, now: OffsetDateTime) -> Self {
        DemoConfig {
            wallets,
            seed,
            now,
            history_days: 90,
        }
    }
}

/// The candles of one asset at one interval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandleSet {
    /// Network symbol of the asset (`BTC`, `xyz:TSLA`).
    pub symbol: String,
    /// Interval of every candle in the set.
    pub interval: Interval,
    /// Candles in ascending time order, without gaps.
    pub candles: Vec<Candle>,
}

/// A complete demo dataset.
#[derive(Clone, Debug)]
pub struct DemoData {
    /// The scan: quotes of every asset (ordered by symbol), wallets and their
    /// positions. `observed_at` is `now` truncated to whole seconds (UTC).
    pub scan: ScanInput,
    /// `end_of_day` liquidity days for each asset and each of the
    /// `history_days − 1` days before today, ordered by date, then symbol.
    pub history_days: Vec<LiquidityDay>,
    /// Per asset (ordered by symbol): 1h candles for the last `history_days`
    /// days, then 1m candles for the last 24 hours (from the start of the hour
    /// 23 hours before the current one up to the minute containing `now`).
    pub candles: Vec<CandleSet>,
}

impl PartialEq for DemoData {
    fn eq(&self, other: &Self) -> bool {
        self.scan.observed_at == other.scan.observed_at
            && self.scan.quotes == other.scan.quotes
            && self.scan.wallets == other.scan.wallets
            && self.scan.positions == other.scan.positions
            && self.history_days == other.history_days
            && self.candles == other.candles
    }
}

/// Generates a demo dataset.
///
/// `progress(stage, done, total)` is called now and then — every 25 assets of
/// the `candles` and `history` stages, every 1000 wallets of the `wallets`
/// stage, and at the end of each stage (with `done == total`) — so a CLI can
/// print counted progress lines.
pub fn generate(cfg: &DemoConfig, progress: &mut dyn FnMut(&str, usize, usize)) -> DemoData {
    let now = cfg.now.to_offset(UtcOffset::UTC);
    let observed_at = now.replace_nanosecond(0).expect("0 is a valid nanosecond");
    let now_ms = observed_at.unix_timestamp() * 1000;
    let base = ChaCha8Rng::seed_from_u64(cfg.seed);
    let stream = |id: u64| {
        let mut rng = base.clone();
        rng.set_stream(id);
        rng
    };

    let assets = assets::universe(&mut stream(streams::ASSETS));
    let n = assets.len();
    let grid = TimeGrid::new(now_ms, cfg.history_days);
    let factor = Factor::new(&grid, &mut stream(streams::MARKET_FACTOR));

    let mut all_series = Vec::with_capacity(n);
    for (i, asset) in assets.iter().enumerate() {
        all_series.push(series::generate(
            asset,
            &grid,
            &factor,
            &mut stream(streams::CANDLES + i as u64),
        ));
        if (i + 1) % 25 == 0 && i + 1 < n {
            progress("candles", i + 1, n);
        }
    }
    progress("candles", n, n);

    let markets: Vec<wallets::Market<'_>> = assets
        .iter()
        .zip(&all_series)
        .map(|(asset, s)| wallets::Market {
            asset,
            mark: *s.h1_close.last().expect("candles"),
            mark_dec: s.h1.last().expect("candles").close.clone(),
        })
        .collect();
    let book = wallets::generate(
        &markets,
        cfg.wallets,
        &base,
        streams::WALLETS,
        observed_at,
        progress,
    );

    let quotes: Vec<Quote> = markets
        .iter()
        .zip(&all_series)
        .zip(&book.open_size)
        .map(|((m, s), open)| quote(m, &s.h1, open))
        .collect();

    // Current levels per asset, the raw material of the past days.
    let mut by_asset: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (p, &a) in book.position_asset.iter().enumerate() {
        by_asset[a].push(p);
    }
    let today = observed_at.date();
    let mut history_days = Vec::with_capacity(n * cfg.history_days.saturating_sub(1) as usize);
    for (i, asset) in assets.iter().enumerate() {
        let size = bucket_size_for_price(&markets[i].mark_dec.0);
        let (current, _) =
            liquidity_levels(&size.0, by_asset[i].iter().map(|&p| &book.positions[p]));
        let mut rng = stream(streams::HISTORY + i as u64);
        history_days.extend(history::past_days(
            asset,
            &all_series[i],
            &grid,
            &current,
            today,
            cfg.history_days,
            &mut rng,
        ));
        if (i + 1) % 25 == 0 && i + 1 < n {
            progress("history", i + 1, n);
        }
    }
    progress("history", n, n);
    history_days
        .sort_by(|a, b| (a.date, &a.network_asset_symbol).cmp(&(b.date, &b.network_asset_symbol)));

    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| assets[i].symbol);
    let mut quotes_sorted = Vec::with_capacity(n);
    let mut quotes: Vec<Option<Quote>> = quotes.into_iter().map(Some).collect();
    let mut series: Vec<Option<series::Series>> = all_series.into_iter().map(Some).collect();
    let mut candles = Vec::with_capacity(2 * n);
    for &i in &order {
        quotes_sorted.push(quotes[i].take().expect("each asset once"));
        let s = series[i].take().expect("each asset once");
        let symbol = assets[i].symbol.to_owned();
        candles.push(CandleSet {
            symbol: symbol.clone(),
            interval: Interval::H1,
            candles: s.h1,
        });
        candles.push(CandleSet {
            symbol,
            interval: Interval::M1,
            candles: s.m1,
        });
    }

    DemoData {
        scan: ScanInput {
            observed_at,
            quotes: quotes_sorted,
            wallets: book.wallets,
            positions: book.positions,
        },
        history_days,
        candles,
    }
}

/// The quote of one asset from its hourly candles and the scanned open size.
fn quote(m: &wallets::Market<'_>, h1: &[Candle], open: &[i128; 2]) -> Quote {
    let asset = m.asset;
    let last = h1.last().expect("candles");
    let prev = &h1[h1.len().saturating_sub(25)];
    let mut volume = BigDecimal::from(0);
    for c in &h1[h1.len().saturating_sub(24)..] {
        volume += &c.volume.0 * &c.close.0;
    }
    // Open interest: the exchange-wide figure, at least what the scanned wallets hold.
    let price = m.mark as f64 / pow10(asset.price_decimals) as f64;
    let typical =
        (asset.open_interest_usd / price * pow10(asset.sz_decimals) as f64).round() as i128;
    let scanned = open[0].max(open[1]) * 115 / 100;
    let oi_units = typical.max(scanned).max(1);
    let oi_cents = div_round(oi_units * i128::from(m.mark), 10_000);
    Quote {
        symbol: asset.symbol.to_owned(),
        price: last.close.clone(),
        prev_day_price: prev.close.clone(),
        volume24h: Decimal(volume.with_scale_round(2, RoundingMode::HalfUp)),
        open_interest: dec_fixed(i64::try_from(oi_cents).unwrap_or(i64::MAX), 2),
        funding: dec_norm(asset.funding_e8, 8),
    }
}

#[cfg(test)]
mod tests;
