//! Engine micro-benchmarks on the demo generator's data:
//! `cargo bench -p market-engine` (figures in docs/performance.md; the
//! served snapshot's are in `market-snapshot`).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use market_demo::{generate, DemoConfig};
use market_engine::buckets::bucket_size_for_price;
use market_engine::candles::rollup;
use market_engine::coverage::{network_coverage, wallet_freshness};
use market_engine::{materialize, materialize_wallet, Quote, Tally};
use market_model::{Decimal, Interval, MarketPosition};

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

/// One publish's aggregates at an own node's scale: 300,000 served wallets
/// (about 1.2M positions), 7,000 of them changed. `materialize_everything`
/// is what a publish cost before the tally (every served wallet
/// materialized, the coverage summed over every position);
/// `tally_clone_changed_wallets` is what it cost next (the base's tally
/// cloned, each changed wallet materialized, taken out as it was and put
/// in as it is, then rendered); `tally_edit_changed_wallets` is what it
/// costs now: the same on the base's tally changed in place
/// ([`Tally::edit`]), kept. Its iterations change the wallets back and
/// forth, so each does a publish's work on a tally that goes on.
fn publish(c: &mut Criterion) {
    let now = time::macros::datetime!(2026-11-22 12:00 UTC);
    let data = generate(&DemoConfig::new(300_000, 42, now), &mut |_, _, _| {});
    let quotes = data.scan.quotes.clone();
    let base = materialize("perpnet", data.scan.clone()).unwrap();
    let tally = Tally::of(&quotes, &base);
    eprintln!(
        "publish dataset: {} wallets, {} positions",
        tally.wallets(),
        tally.positions()
    );
    // Every 40th wallet changes (7,500): each position gains 1 USD of value.
    let mut by_wallet: std::collections::HashMap<&str, Vec<&MarketPosition>> =
        std::collections::HashMap::new();
    for p in &base.positions {
        by_wallet.entry(&p.address).or_default().push(p);
    }
    let changed: Vec<_> = data
        .scan
        .wallets
        .iter()
        .step_by(40)
        .map(|w| {
            let old: Vec<MarketPosition> = by_wallet
                .get(w.address.as_str())
                .map(|ps| ps.iter().map(|p| (*p).clone()).collect())
                .unwrap_or_default();
            let new: Vec<MarketPosition> = old
                .iter()
                .map(|p| MarketPosition {
                    position_value: Decimal(&p.position_value.0 + bigdecimal::BigDecimal::from(1)),
                    ..p.clone()
                })
                .collect();
            (w.clone(), old, new)
        })
        .collect();
    let mut next = data.scan.clone();
    let moved: std::collections::HashSet<&str> =
        changed.iter().map(|(w, _, _)| w.address.as_str()).collect();
    next.positions
        .retain(|p| !moved.contains(p.address.as_str()));
    next.positions
        .extend(changed.iter().flat_map(|(_, _, new)| new.iter().cloned()));
    let freshness = wallet_freshness(now, []);

    let mut g = c.benchmark_group("publish");
    g.sample_size(10);
    g.bench_function(
        format!("materialize_everything_{}_wallets", tally.wallets()),
        |b| {
            b.iter_batched(
                || next.clone(),
                |scan| {
                    let m = materialize("perpnet", scan).unwrap();
                    let coverage =
                        network_coverage(now, &m.markets, &m.positions, freshness.clone());
                    black_box((m, coverage))
                },
                BatchSize::LargeInput,
            )
        },
    );
    g.bench_function(
        format!("tally_clone_{}_changed_wallets", changed.len()),
        |b| {
            b.iter(|| {
                let mut t = tally.clone();
                t.requote(&quotes);
                let mut wallets = Vec::with_capacity(changed.len());
                for (input, old, new) in &changed {
                    t.remove(&input.address, &input.account_value.0, old)
                        .unwrap();
                    let mut served = new.clone();
                    let w = materialize_wallet(input.clone(), &mut served, |_| true).unwrap();
                    t.add(&input.address, &input.account_value.0, &served)
                        .unwrap();
                    wallets.push(w);
                }
                black_box((t.render("perpnet", now, freshness.clone()), wallets))
            })
        },
    );
    // The render alone: every market's figures, cohorts and levels.
    g.bench_function(format!("render_{}_positions", tally.positions()), |b| {
        b.iter(|| black_box(tally.render("perpnet", now, freshness.clone())))
    });
    // The same wallets with every position's liquidation price rounded to
    // its market's bucket size: each level's members at one price, as an
    // exchange's positions alike in entry and leverage are.
    let crowded = {
        let mut positions = base.positions.clone();
        for p in &mut positions {
            if let (Some(liq), Some(q)) = (
                p.liq_price.as_mut(),
                quotes.iter().find(|q| q.symbol == p.symbol),
            ) {
                let size = bucket_size_for_price(&q.price.0);
                liq.0 = market_engine::bucket_price(&liq.0, &size.0);
            }
        }
        Tally::of(
            &quotes,
            &market_engine::DataVersion {
                positions,
                ..base.clone()
            },
        )
    };
    g.bench_function(
        format!("render_crowded_levels_{}_positions", crowded.positions()),
        |b| b.iter(|| black_box(crowded.render("perpnet", now, freshness.clone()))),
    );
    // Every market's price ten times higher, then back: each requote gives
    // every market another bucket size, so all the levels are bucketed
    // again (a real market crosses such a price now and then).
    let tenfold: Vec<_> = quotes
        .iter()
        .map(|q| Quote {
            price: Decimal(&q.price.0 * bigdecimal::BigDecimal::from(10)),
            ..q.clone()
        })
        .collect();
    let mut requoted = Some(tally.clone());
    let mut up = true;
    g.bench_function(
        format!("requote_every_market_{}_positions", tally.positions()),
        |b| {
            b.iter(|| {
                let mut t = requoted.take().expect("kept");
                t.requote(if up { &tenfold } else { &quotes });
                up = !up;
                requoted = Some(black_box(t));
            })
        },
    );
    let mut kept = Some(tally.clone());
    let mut forth = true;
    g.bench_function(
        format!("tally_edit_{}_changed_wallets", changed.len()),
        |b| {
            b.iter(|| {
                let mut edit = kept.take().expect("kept").edit();
                edit.requote(&quotes);
                let mut wallets = Vec::with_capacity(changed.len());
                for (input, old, new) in &changed {
                    let (from, to) = if forth { (old, new) } else { (new, old) };
                    edit.remove(&input.address, &input.account_value.0, from)
                        .unwrap();
                    let mut served = to.clone();
                    let w = materialize_wallet(input.clone(), &mut served, |_| true).unwrap();
                    edit.add(&input.address, &input.account_value.0, &served)
                        .unwrap();
                    wallets.push(w);
                }
                forth = !forth;
                let rendered = edit.tally().render("perpnet", now, freshness.clone());
                kept = Some(edit.keep());
                black_box((rendered, wallets))
            })
        },
    );
    // The aggregates' part alone: each changed wallet's old positions
    // taken out and its new ones put in, back and forth, without the
    // requote, the wallets' materializing or the render.
    let served: Vec<_> = changed
        .iter()
        .map(|(input, old, new)| {
            let mut served = new.clone();
            materialize_wallet(input.clone(), &mut served, |_| true).unwrap();
            (input, old.clone(), served)
        })
        .collect();
    let mut kept = Some(tally.clone());
    let mut forth = true;
    g.bench_function(
        format!("tally_change_{}_changed_wallets", changed.len()),
        |b| {
            b.iter(|| {
                let mut t = kept.take().expect("kept");
                for (input, old, new) in &served {
                    let (from, to) = if forth { (old, new) } else { (new, old) };
                    t.remove(&input.address, &input.account_value.0, from)
                        .unwrap();
                    t.add(&input.address, &input.account_value.0, to).unwrap();
                }
                forth = !forth;
                kept = Some(black_box(t));
            })
        },
    );
    g.finish();
}

criterion_group!(benches, engine, publish);
criterion_main!(benches);
