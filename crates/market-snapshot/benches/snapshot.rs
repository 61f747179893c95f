//! Benchmarks of the served snapshot on the demo generator's data:
//! `cargo bench -p market-snapshot` (figures in docs/performance.md).

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use market_snapshot::Snapshot;

fn index(c: &mut Criterion) {
    // The reference dataset: 100,000 wallets, about 400,000 positions.
    let materialized = common::demo_version(100_000);
    let mut g = c.benchmark_group("engine");
    g.sample_size(10);
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
    let m = common::demo_version(300_000);
    eprintln!(
        "dataset: {} wallets, {} positions",
        m.wallets.len(),
        m.positions.len()
    );
    let changes = common::one_usd_more(&m, 100, usize::MAX);
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

/// A server's start from the version it saved, at the live-tracking
/// target's scale: reading the file back and deriving the lookups, the
/// filtered lists and the orders' codes (the version read is dropped
/// outside the measurement: a server keeps it).
fn load_saved(c: &mut Criterion) {
    let served = Snapshot::build(1, common::demo_version(300_000));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.served");
    served.save(&path, "bench").unwrap();
    drop(served);
    let mut g = c.benchmark_group("engine");
    g.sample_size(10);
    g.bench_function("snapshot_load_saved_300k_wallets", |b| {
        b.iter_with_large_drop(|| Snapshot::load_saved(&path).unwrap())
    });
    g.finish();
}

criterion_group!(benches, index, apply, load_saved);
criterion_main!(benches);
