//! Benchmarks of the served snapshot on the demo generator's data:
//! `cargo bench -p market-snapshot` (figures in docs/performance.md).

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use market_model::{SizeClass, SortOrder, WalletSort};
use market_snapshot::{Snapshot, WalletOrder};

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
    // The first page of a filtered wallet listing in a version just
    // applied (10 changed wallets), which derives that order's filtered
    // lists, and the same page once they are derived.
    let whales = WalletOrder {
        sort: WalletSort::AccountTotalValue,
        order: SortOrder::Desc,
        size: Some(SizeClass::Whale),
        direction: None,
    };
    let few = common::one_usd_more(&m, 30_000, 10);
    g.bench_function("snapshot_first_filtered_page_300k_wallets", |b| {
        b.iter_batched(
            || served.apply(3, few.clone()),
            // The version is handed back, to be dropped outside the measurement.
            |s| {
                black_box(s.wallets_page(whales, None, 50).1);
                s
            },
            BatchSize::PerIteration,
        )
    });
    g.bench_function("snapshot_filtered_page_300k_wallets", |b| {
        b.iter(|| black_box(served.wallets_page(whales, None, 50).1))
    });
    g.finish();
}

/// A server's start from the version it saved, at the live-tracking
/// target's scale: reading the file back and deriving the lookups and the
/// orders' codes (the version read is dropped
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

/// A running server's save of what it serves (`Snapshot::save`, the
/// version of `load_saved`), timed by the process's CPU: what the saver
/// thread takes from the server (its wall time waits on the disk).
fn save(c: &mut Criterion) {
    let served = Snapshot::build(1, common::demo_version(300_000));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.served");
    let mut g = c.benchmark_group("engine");
    g.sample_size(10);
    g.bench_function("snapshot_save_cpu_300k_wallets", |b| {
        b.iter_custom(|iters| {
            let mut cpu = std::time::Duration::ZERO;
            for _ in 0..iters {
                let before = common::process_cpu();
                served.save(&path, "bench").unwrap();
                cpu += common::process_cpu() - before;
            }
            cpu
        })
    });
    g.finish();
}

criterion_group!(benches, index, apply, load_saved, save);
criterion_main!(benches);
