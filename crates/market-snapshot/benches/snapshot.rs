//! Benchmarks of the served snapshot on the demo generator's data:
//! `cargo bench -p market-snapshot` (figures in docs/performance.md).

use std::collections::HashSet;
use std::hint::black_box;

use bigdecimal::BigDecimal;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use market_demo::{generate, DemoConfig};
use market_engine::coverage::coverage_of;
use market_engine::materialize;
use market_engine::VersionChanges;
use market_model::{Decimal, MarketPosition, Wallet};
use market_snapshot::Snapshot;

fn index(c: &mut Criterion) {
    // The reference dataset: 100,000 wallets, about 400,000 positions.
    let now = time::macros::datetime!(2026-11-22 12:00 UTC);
    let data = generate(&DemoConfig::new(100_000, 42, now), &mut |_, _, _| {});
    let mut g = c.benchmark_group("engine");
    g.sample_size(10);
    let materialized = materialize("perpnet", data.scan.clone()).unwrap();
    g.bench_function("snapshot_index_400k_positions", |b| {
        b.iter_batched(
            || materialized.clone(),
            |m| black_box(Snapshot::build(1, m)),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

/// Applying a publish to a served version at the scale of the live-tracking
/// target (300,000 wallets, about 1.2M positions): 3,000 wallets changed
/// (one in a hundred, each with every position), as `track` publishes them.
fn apply(c: &mut Criterion) {
    let now = time::macros::datetime!(2026-11-22 12:00 UTC);
    let data = generate(&DemoConfig::new(300_000, 42, now), &mut |_, _, _| {});
    let m = materialize("perpnet", data.scan).unwrap();
    eprintln!(
        "dataset: {} wallets, {} positions",
        m.wallets.len(),
        m.positions.len()
    );
    let one = BigDecimal::from(1);
    let changed: HashSet<&str> = m
        .wallets
        .iter()
        .step_by(100)
        .map(|w| w.address.as_str())
        .collect();
    let changes = VersionChanges {
        observed_at: m.observed_at,
        markets: m.markets.clone(),
        current_days: m.current_days.clone(),
        cohorts: m.cohorts.clone(),
        coverage: coverage_of(&m),
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
    };
    let served = Snapshot::build(1, m.clone());
    let mut g = c.benchmark_group("engine");
    g.sample_size(10);
    g.bench_function(
        format!("snapshot_apply_{}_of_300k_wallets", changes.wallets.len()),
        |b| {
            b.iter_batched(
                || changes.clone(),
                |c| black_box(served.apply(2, c)),
                BatchSize::LargeInput,
            )
        },
    );
    g.finish();
}

criterion_group!(benches, index, apply);
criterion_main!(benches);
