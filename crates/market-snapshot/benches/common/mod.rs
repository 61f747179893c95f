//! The data both benchmarks start from.

use bigdecimal::BigDecimal;
use market_demo::{generate, DemoConfig};
use market_engine::coverage::coverage_of;
use market_engine::{materialize, DataVersion, VersionChanges};
use market_model::{Decimal, MarketPosition, Wallet};

/// The demo generator's data for `wallets` wallets (seed 42), materialized.
pub fn demo_version(wallets: usize) -> DataVersion {
    let now = time::macros::datetime!(2026-11-22 12:00 UTC);
    let data = generate(&DemoConfig::new(wallets, 42, now), &mut |_, _, _| {});
    materialize("perpnet", data.scan).unwrap()
}

/// A publish as `track` writes it: every `step`-th wallet of `m` changed
/// (`count` of them), each with every position, 1 USD more valuable; the
/// markets and their figures as they are.
pub fn one_usd_more(m: &DataVersion, step: usize, count: usize) -> VersionChanges {
    one_usd_more_from(m, 0, step, count)
}

/// [`one_usd_more`] of the wallets from the `offset`-th on.
pub fn one_usd_more_from(
    m: &DataVersion,
    offset: usize,
    step: usize,
    count: usize,
) -> VersionChanges {
    let one = BigDecimal::from(1);
    let changed: std::collections::HashSet<&str> = m
        .wallets
        .iter()
        .skip(offset)
        .step_by(step)
        .take(count)
        .map(|w| w.address.as_str())
        .collect();
    VersionChanges {
        observed_at: m.observed_at + time::Duration::minutes(1),
        markets: m.markets.clone(),
        current_days: m.current_days.clone(),
        cohorts: m.cohorts.clone(),
        coverage: coverage_of(m),
        wallets: m
            .wallets
            .iter()
            .filter(|w| changed.contains(w.address.as_str()))
            .map(|w| Wallet {
                account_total_value: Decimal(&w.account_total_value.0 + &one),
                ..w.clone()
            })
            .collect(),
        positions: m
            .positions
            .iter()
            .filter(|p| changed.contains(p.address.as_str()))
            .map(|p| MarketPosition {
                position_value: Decimal(&p.position_value.0 + &one),
                ..p.clone()
            })
            .collect(),
        removed: Vec::new(),
    }
}

/// The process's CPU time so far, all threads (`/proc/self/stat`, as the
/// server reads it for its log: ticks of 10 ms, whose rounding cancels out
/// over the iterations a bench sums).
#[allow(dead_code)] // Not every bench of the crate uses it.
pub fn process_cpu() -> std::time::Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The fields after the command name (in parentheses).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    std::time::Duration::from_millis(ticks * 10)
}
