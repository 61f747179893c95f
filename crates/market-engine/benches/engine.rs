//! Engine micro-benchmarks on the demo generator's data:
//! `cargo bench -p market-engine` (figures in docs/performance.md; the
//! served snapshot's are in `market-snapshot`).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use market_demo::{generate, DemoConfig};
use market_engine::buckets::bucket_size_for_price;
use market_engine::candles::rollup;
use market_engine::materialize;
use market_model::Interval;

fn engine(c: &mut Criterion) {
    // The reference dataset: 100,000 wallets, about 400,000 positions.
    let now = time::macros::datetime!(2026-11-22 12:00 UTC);
    let data = generate(&DemoConfig::new(100_000, 42, now), &mut |_, _, _| {});
    eprintln!(
        "dataset: {} wallets, {} positions",
        data.scan.wallets.len(),
        data.scan.positions.len()
    );

    let mut g = c.benchmark_group("engine");
    g.sample_size(10);
    g.bench_function("materialize_400k_positions", |b| {
        b.iter_batched(
            || data.scan.clone(),
            |scan| black_box(materialize("perpnet", scan).unwrap()),
            BatchSize::LargeInput,
        )
    });
    let materialized = materialize("perpnet", data.scan.clone()).unwrap();
    let btc_price = &materialized
        .markets
        .iter()
        .find(|m| m.symbol == "BTC")
        .unwrap()
        .price
        .0;
    let btc: Vec<_> = materialized
        .positions
        .iter()
        .filter(|p| p.symbol == "BTC")
        .cloned()
        .collect();
    let size = bucket_size_for_price(btc_price);
    g.bench_function(
        format!("liquidity_levels_btc_{}_positions", btc.len()),
        |b| b.iter(|| black_box(market_engine::aggregate::liquidity_levels(&size, &btc))),
    );
    let hours = &data
        .candles
        .iter()
        .find(|c| c.symbol == "BTC" && c.interval == Interval::H1)
        .unwrap()
        .candles;
    g.bench_function(format!("rollup_{}_1h_candles_to_1d", hours.len()), |b| {
        b.iter(|| black_box(rollup(hours, Interval::D1)))
    });
    g.bench_function(format!("rollup_{}_1h_candles_to_4h", hours.len()), |b| {
        b.iter(|| black_box(rollup(hours, Interval::H4)))
    });
    g.finish();
}

criterion_group!(benches, engine);
criterion_main!(benches);
