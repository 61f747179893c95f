//! `seed-demo`: generate, materialize and store the demo dataset.

use std::time::Instant;

use market_demo::{DemoConfig, DemoData};
use market_model::NETWORK_ID;
use market_store::{CandleBatch, DatasetWrite, HistoryWrite, SnapshotWrite, Store};

/// Prints counted progress lines to stderr at most every 10 % of a stage.
pub struct ProgressPrinter {
    stage: String,
    last_pct: usize,
}

impl ProgressPrinter {
    /// A printer with no stage yet.
    pub fn new() -> Self {
        ProgressPrinter {
            stage: String::new(),
            last_pct: usize::MAX,
        }
    }

    /// Reports `done` of `total` in `stage`.
    pub fn report(&mut self, stage: &str, done: usize, total: usize) {
        let pct = (done * 100).checked_div(total).unwrap_or(100);
        if stage != self.stage {
            self.stage = stage.to_owned();
            self.last_pct = usize::MAX;
        }
        if self.last_pct == usize::MAX || pct / 10 > self.last_pct / 10 || done == total {
            if self.last_pct != pct {
                eprintln!("  {stage}: {done}/{total} ({pct}%)");
            }
            self.last_pct = pct;
        }
    }
}

impl Default for ProgressPrinter {
    fn default() -> Self {
        Self::new()
    }
}

/// Replaces the data with the deterministic demo dataset as of now; returns the new data version.
pub fn seed_demo(store: &Store, wallets: usize, seed: u64) -> anyhow::Result<i64> {
    seed_demo_at(store, wallets, seed, time::OffsetDateTime::now_utc())
}

/// Days of market and wallet history and position events the demo data has.
pub const HISTORY_DAYS: u32 = 90;

/// Replaces the data with the demo dataset as of `now` (the same `now`, seed
/// and wallet count give the same data on every backend).
pub fn seed_demo_at(
    store: &Store,
    wallets: usize,
    seed: u64,
    now: time::OffsetDateTime,
) -> anyhow::Result<i64> {
    seed_demo_with_history(store, wallets, seed, now, HISTORY_DAYS)
}

/// [`seed_demo_at`] with `series_days` days of market and wallet history
/// and position events (candles and liquidity days keep their 90 days).
pub fn seed_demo_with_history(
    store: &Store,
    wallets: usize,
    seed: u64,
    now: time::OffsetDateTime,
    series_days: u32,
) -> anyhow::Result<i64> {
    let started = Instant::now();
    let mut printer = ProgressPrinter::new();
    eprintln!("generating demo data: {wallets} wallets, seed {seed}");
    let DemoData {
        scan,
        history_days,
        candles,
    } = market_demo::generate(&DemoConfig::new(wallets, seed, now), &mut |s, d, t| {
        printer.report(s, d, t)
    });
    eprintln!("aggregating {} positions", scan.positions.len());
    let materialized = market_engine::materialize(NETWORK_ID, scan)?;
    eprintln!("generating {series_days} days of history");
    let history = market_demo::history(seed, series_days, &materialized, &candles);
    eprintln!("writing to the database");
    let batches: Vec<CandleBatch<'_>> = candles
        .iter()
        .map(|c| CandleBatch {
            symbol: &c.symbol,
            interval: c.interval,
            candles: &c.candles,
        })
        .collect();
    let version = store.replace_dataset(
        &DatasetWrite {
            snapshot: SnapshotWrite {
                source: "demo",
                version: &materialized,
            },
            history_days: &history_days,
            candles: &batches,
            history: HistoryWrite {
                markets: &history.markets,
                wallets: &history.wallets,
                events: &history.events,
            },
        },
        &mut |s, d, t| printer.report(s, d, t),
    )?;
    eprintln!(
        "seeded data version {version}: {} assets, {} wallets, {} positions, {} liquidity days, {} candle series, {} market and {} wallet history points, {} position events in {:.1} s",
        materialized.markets.len(),
        materialized.wallets.len(),
        materialized.positions.len(),
        history_days.len() + materialized.current_days.len(),
        batches.len(),
        history.markets.len(),
        history.wallets.len(),
        history.events.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(version)
}
