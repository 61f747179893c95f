//! What a running server spends on one publish of `track`, at the scale of
//! an own node: `cargo bench -p market-snapshot --bench serve_apply`
//! (figures in docs/performance.md).
//!
//! A version of 300,000 wallets (about 1.2M positions, the demo generator's
//! data) is written to an SQLite file, then a publish that changes 7,000 of
//! them (each with every position, 1 USD more valuable), as `track` writes
//! it. Measured: reading those changes as a server does
//! (`Store::load_changes_for_serving`, positions rendered from their text),
//! and reading and applying them to the served snapshot
//! (`Snapshot::apply_rendered`), which is the whole of a server's work per
//! publish.

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use market_snapshot::{RenderedPosition, Snapshot};
use market_store::{PoolOptions, PublishWrite, SnapshotWrite, Store};

/// Changed wallets per publish: the own-node figure of the issue.
const CHANGED: usize = 7_000;

fn serve_apply(c: &mut Criterion) {
    let m = common::demo_version(300_000);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path().join("bench.db").to_str().unwrap(),
        PoolOptions::default(),
    )
    .unwrap();
    store.migrate().unwrap();
    let first = store
        .write_snapshot(
            &SnapshotWrite {
                source: "demo",
                version: &m,
            },
            &mut |_, _, _| {},
        )
        .unwrap();

    let step = m.wallets.len() / CHANGED;
    let changes = common::one_usd_more(&m, step, CHANGED);
    store
        .publish(
            &PublishWrite {
                source: "track",
                base_version: first,
                changes: &changes,
                wallet_count: m.wallets.len(),
                position_count: m.positions.len(),
                frozen_days: &[],
                candles: &[],
                wallet_states: &[],
                tracked: &[],
                newly_read: &[],
                registry: &[],
                freshness: &changes.coverage.wallets,
            },
            &mut |_, _, _| {},
        )
        .unwrap();
    let meta = store.latest_snapshot().unwrap().unwrap();
    eprintln!(
        "dataset: {} wallets, {} positions, {} current levels; {} changed with {} positions",
        m.wallets.len(),
        m.positions.len(),
        m.current_days.iter().map(|d| d.levels.len()).sum::<usize>(),
        changes.wallets.len(),
        changes.positions.len()
    );
    let served = Snapshot::build(first, m);
    let read = || {
        store
            .load_changes_for_serving(first, &meta, usize::MAX, RenderedPosition::from_text)
            .unwrap()
            .expect("the publish reads as changes")
    };

    let mut g = c.benchmark_group("serve");
    g.sample_size(10);
    g.bench_function(format!("read_changes_{CHANGED}_of_300k_wallets"), |b| {
        b.iter(|| black_box(read()))
    });
    g.bench_function(format!("apply_changes_{CHANGED}_of_300k_wallets"), |b| {
        b.iter_batched(
            read,
            |c| black_box(served.apply_rendered(meta.version, c)),
            BatchSize::LargeInput,
        )
    });
    g.bench_function(
        format!("read_and_apply_changes_{CHANGED}_of_300k_wallets"),
        |b| b.iter(|| black_box(served.apply_rendered(meta.version, read()))),
    );
    g.finish();
}

criterion_group!(benches, serve_apply);
criterion_main!(benches);
