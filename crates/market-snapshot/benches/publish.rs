//! One publish of `track` at the scale of an own node, written and served:
//! `cargo bench -p market-snapshot --bench publish` (figures in
//! docs/performance.md).
//!
//! A version of 300,000 wallets (about 1.2M positions, the demo generator's
//! data) is written to an SQLite file, then a publish that changes 7,000 of
//! them (each with every position, 1 USD more valuable), as `track` writes
//! it. Measured:
//! - what a running server does with it: reading the changes
//!   (`Store::load_changes_for_serving`, positions rendered from their
//!   text), applying them to the served snapshot (`Snapshot::apply_rendered`),
//!   and both, also after a pause before each cycle, as a server that
//!   applies a publish a minute does it, timed by the wall clock and by
//!   the process's CPU (with freeing the version replaced: the server's
//!   logged figure); and a starting server's read of
//!   the changes since the version it saved, told which wallets it served
//!   (`Store::load_changes_since_served`: the saved version is most often
//!   pruned by then);
//! - the store's part of writing it (`Store::publish`: the version's rows,
//!   closing the changed wallets' rows, history and events, pruning the
//!   version before the previous one, and what `track` writes beside them
//!   for each wallet it read: its scan state, its followed positions and
//!   its registry entry, appended to the journals of a registry of a
//!   million entries and of the scan states of every served wallet, as an
//!   own node's), the same
//!   changes published again and again on the latest version, and other
//!   wallets' changes in turn; the last of them also as `track` writes them
//!   (its checkpoints on another thread) and timed by the publishing
//!   thread's CPU, the figure of `track`'s log.

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use market_engine::{DataVersion, VersionChanges};
use market_model::{Decimal, MarketPosition};
use market_snapshot::{RenderedPosition, Snapshot};
use market_store::{
    Checkpoint, DiscoverySource, PoolOptions, Previous, PublishWrite, RegistryEntry, SnapshotWrite,
    Store, TrackedPosition, WalletScanState,
};

/// Changed wallets per publish: the own-node figure of the issue, or
/// `BENCH_CHANGED` (a small figure shows the part that does not follow the
/// changes).
fn changed() -> usize {
    std::env::var("BENCH_CHANGED")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(7_000)
}

/// The pause before each cycle of `read_and_apply_after_a_pause`:
/// `BENCH_PAUSE_MS`, 1,500 ms by default (jemalloc's purge, as the server
/// binary configures it, follows a free by a second).
fn pause() -> Duration {
    let ms = std::env::var("BENCH_PAUSE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_500);
    Duration::from_millis(ms)
}

/// What `track` writes beside the changed wallets' rows, one of each per
/// wallet read: its scan state, its followed positions (one per position)
/// and its registry entry.
fn beside(
    changes: &VersionChanges,
) -> (
    Vec<WalletScanState>,
    Vec<TrackedPosition>,
    Vec<RegistryEntry>,
) {
    let at = changes.observed_at;
    let states = changes
        .wallets
        .iter()
        .map(|w| WalletScanState {
            address: w.address.clone(),
            last_seen_at: Some(at),
            first_seen_at: Some(at - time::Duration::days(3)),
            first_account_value: Some(w.account_total_value.clone()),
            realized_pnl: Decimal::zero(),
            read_dexes: Some(vec![String::new()]),
            ..WalletScanState::default()
        })
        .collect();
    let tracked = changes
        .positions
        .iter()
        .map(|p| TrackedPosition {
            address: p.address.clone(),
            symbol: p.symbol.clone(),
            direction: p.direction,
            opened_at: at - time::Duration::hours(5),
            open_time_known: true,
            last_upnl: p.u_pnl.clone(),
        })
        .collect();
    let registry = changes
        .wallets
        .iter()
        .map(|w| RegistryEntry {
            account_value: Some(w.account_total_value.clone()),
            position_value: Some(w.total_position_value.clone()),
            last_read_at: Some(at),
            last_sweep_at: Some(at),
            ..RegistryEntry::new(w.address.clone(), DiscoverySource::List, at)
        })
        .collect();
    (states, tracked, registry)
}

/// A publish's changes, what `track` writes beside them, and what the
/// base served of the wallets they write (the previous observation
/// `track` gives a publish: the bench's changes move values, not sizes, so
/// the generated version's positions stand for any base's).
type Publish = (
    VersionChanges,
    (
        Vec<WalletScanState>,
        Vec<TrackedPosition>,
        Vec<RegistryEntry>,
    ),
    (Vec<String>, Vec<MarketPosition>),
);

/// The sets of changed wallets the rotating write cycles through.
const ROTATIONS: usize = 8;

/// Registry entries stored before the publishes: an own node's million.
const REGISTRY: usize = 1_000_000;

fn publish(c: &mut Criterion) {
    let changed = changed();
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

    let step = m.wallets.len() / changed;
    let changes = common::one_usd_more(&m, step, changed);
    let beside_of = beside(&changes);
    let previous = previous_of(&m, &changes);
    // For the rotating write, as `track`'s publishes: each one changes
    // other wallets than the one before (the next of ROTATIONS sets, every `step`-th wallet from
    // another offset), so the rows it replaces lie where earlier versions
    // left them, not where the previous iteration wrote them.
    let rotations: Vec<Publish> = (1..=ROTATIONS)
        .map(|offset| {
            let c = common::one_usd_more_from(&m, offset, step, changed);
            let b = beside(&c);
            let p = previous_of(&m, &c);
            (c, b, p)
        })
        .collect();
    let (wallet_count, position_count) = (m.wallets.len(), m.positions.len());
    let publish_on = |store: &Store, base_version: i64, p: &Publish| {
        let (changes, (states, tracked, registry), (previous_wallets, previous_positions)) = p;
        store
            .publish(
                &PublishWrite {
                    source: "track",
                    base_version,
                    changes,
                    wallet_count,
                    position_count,
                    frozen_days: &[],
                    candles: &[],
                    wallet_states: states,
                    tracked,
                    newly_read: &[],
                    previous: Some(Previous {
                        wallets: previous_wallets,
                        positions: previous_positions,
                    }),
                    registry,
                    freshness: &changes.coverage.wallets,
                },
                &mut |_, _, _| {},
            )
            .unwrap()
    };
    let publish_of = |base_version: i64, p: &Publish| publish_on(&store, base_version, p);
    // The own node's tables beside the rows, at their size: a registry of
    // a million wallets (the 300,000 served and 700,000 unserved), and a
    // scan state with its followed positions (about 1.2M) for every served
    // wallet, so that each publish's upserts land at random places of
    // tables as large as `track`'s. They are written by a publish that
    // changes no wallet; the publishes measured start from it.
    let mut all = common::one_usd_more(&m, 1, m.wallets.len());
    let (states, tracked, mut registry) = beside(&all);
    registry.extend((0..REGISTRY.saturating_sub(registry.len())).map(|i| {
        RegistryEntry::new(
            format!("0x{:040x}", 0xfeed_0000 + i),
            DiscoverySource::List,
            all.observed_at,
        )
    }));
    store.save_registry(&registry).unwrap();
    all.wallets = Vec::new();
    all.positions = Vec::new();
    let base = publish_of(
        first,
        &(all, (states, tracked, Vec::new()), (Vec::new(), Vec::new())),
    );
    // In the tables, as a running `track`'s are between two merges of
    // their journals; the publishes measured append to the journals.
    store.merge_journals().unwrap();
    let fixed = (changes, beside_of, previous);
    let publish = |base_version: i64| publish_of(base_version, &fixed);
    let changes = &fixed.0;
    publish(base);
    let meta = store.latest_snapshot().unwrap().unwrap();
    eprintln!(
        "dataset: {wallet_count} wallets, {position_count} positions, {} current levels; {} changed with {} positions",
        m.current_days.iter().map(|d| d.levels.len()).sum::<usize>(),
        changes.wallets.len(),
        changes.positions.len()
    );
    let served = Snapshot::build(base, m);
    let read = || {
        store
            .load_changes_for_serving(base, &meta, usize::MAX, RenderedPosition::from_text)
            .unwrap()
            .expect("the publish reads as changes")
    };

    let mut g = c.benchmark_group("publish");
    g.sample_size(10);
    g.bench_function(format!("read_changes_{changed}_of_300k_wallets"), |b| {
        b.iter(|| black_box(read()))
    });
    g.bench_function(format!("apply_changes_{changed}_of_300k_wallets"), |b| {
        b.iter_batched(
            read,
            |c| black_box(served.apply_rendered(meta.version, c)),
            BatchSize::LargeInput,
        )
    });
    let served_addresses: Vec<&str> = served.wallet_addresses().collect();
    g.bench_function(
        format!("read_changes_since_served_{changed}_of_300k_wallets"),
        |b| {
            b.iter(|| {
                let read = store.load_changes_since_served::<_, market_model::LiquidityDayText>(
                    base,
                    &served_addresses,
                    &meta,
                    usize::MAX,
                    RenderedPosition::from_text,
                );
                black_box(read.unwrap().expect("the publish reads as changes"))
            })
        },
    );
    drop(served_addresses);
    g.bench_function(
        format!("read_and_apply_changes_{changed}_of_300k_wallets"),
        |b| b.iter(|| black_box(served.apply_rendered(meta.version, read()))),
    );
    // A server applies a publish a minute, and by then its allocator has
    // handed the pages the previous cycle freed back to the system (the
    // binary's jemalloc after a second): each cycle after a pause (not
    // timed) faults its memory in afresh, as a running server's does. The
    // cycle frees the version it made, as a server frees the one replaced.
    // Timed by `clock`, read around each cycle.
    let after_a_pause = |b: &mut criterion::Bencher, clock: &dyn Fn() -> Duration| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                std::thread::sleep(pause());
                let started = clock();
                drop(black_box(served.apply_rendered(meta.version, read())));
                timed += clock() - started;
            }
            timed
        })
    };
    let origin = Instant::now();
    g.bench_function(
        format!("read_and_apply_after_a_pause_{changed}_of_300k_wallets"),
        |b| after_a_pause(b, &|| origin.elapsed()),
    );
    // What a running server logs for a publish: its process's CPU (all
    // threads, the apply's second one included). The clock is the
    // server's (`/proc/self/stat`, ticks of 10 ms): its rounding errors
    // cancel out over the cycles summed.
    g.bench_function(
        format!("read_and_apply_cpu_after_a_pause_{changed}_of_300k_wallets"),
        |b| after_a_pause(b, &common::process_cpu),
    );
    // Last: each publish prunes the versions the reads above start from.
    g.bench_function(format!("write_{changed}_of_300k_wallets"), |b| {
        b.iter(|| publish(store.latest_snapshot().unwrap().unwrap().version))
    });
    let mut turn = 0;
    g.bench_function(format!("write_rotating_{changed}_of_300k_wallets"), |b| {
        b.iter(|| {
            turn += 1;
            let p = &rotations[turn % ROTATIONS];
            publish_of(store.latest_snapshot().unwrap().unwrap().version, p)
        })
    });
    // As `track` writes: its pool leaves the checkpoints to a thread of
    // its own (here: between the iterations, not timed), and its log gives
    // the publishing thread's CPU, the figure measured here.
    let apart = Store::open(
        dir.path().join("bench.db").to_str().unwrap(),
        PoolOptions {
            checkpoint: Checkpoint::Separate,
            ..PoolOptions::default()
        },
    )
    .unwrap();
    g.bench_function(
        format!("write_rotating_thread_cpu_{changed}_of_300k_wallets"),
        |b| {
            b.iter_custom(|iters| {
                let mut cpu = Duration::ZERO;
                for _ in 0..iters {
                    turn += 1;
                    let p = &rotations[turn % ROTATIONS];
                    apart.checkpoint().unwrap();
                    let base = apart.latest_snapshot().unwrap().unwrap().version;
                    let before = thread_cpu();
                    publish_on(&apart, base, p);
                    cpu += thread_cpu() - before;
                }
                cpu
            })
        },
    );
    g.finish();
}

/// The calling thread's CPU time so far (`/proc/thread-self/schedstat`, as
/// `track` reads it for its log).
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    Duration::from_nanos(stat.split_whitespace().next().unwrap().parse().unwrap())
}

criterion_group!(benches, publish);
criterion_main!(benches);

/// What `m` serves of the wallets `changes` writes (each of them it
/// serves, and their positions): the previous observation `track` gives a
/// publish.
fn previous_of(m: &DataVersion, changes: &VersionChanges) -> (Vec<String>, Vec<MarketPosition>) {
    let written: std::collections::HashSet<&str> =
        changes.wallets.iter().map(|w| w.address.as_str()).collect();
    let wallets = m
        .wallets
        .iter()
        .filter(|w| written.contains(w.address.as_str()))
        .map(|w| w.address.clone())
        .collect();
    let positions = m
        .positions
        .iter()
        .filter(|p| written.contains(p.address.as_str()))
        .cloned()
        .collect();
    (wallets, positions)
}
