//! What `track` pays to save the registry entries of the wallets it read,
//! at an own node's scale (`cargo bench -p market-store --bench upsert`;
//! figures in docs/performance.md):
//! - `registry_7000_of_1m`: 7,000 entries spread over a registry of a
//!   million, saved in one transaction. The saved entries are spread evenly
//!   over the addresses (a new offset each time), as the wallets a publish
//!   read are. Saved entries are appended to the registry's journal; a scan
//!   state is saved the same way, in the same publish.
//! - `merge_journal_into_1m`: the journal, once it holds a merge's worth of
//!   such entries (`JOURNAL_MERGE_AT`), merged into the million
//!   (`Store::merge_journals`): what the appends leave to be paid later.
//!   A save's whole cost is the first figure plus the second divided by
//!   the entries a merge carries.
//! - `merge_check_one_short`: `Store::merge_journals_if_due` with the
//!   registry's journal a row short of a merge, so nothing is merged:
//!   what `track` pays once a second to learn that.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use market_model::Decimal;
use market_store::{
    Checkpoint, DiscoverySource, PoolOptions, RegistryEntry, Store, JOURNAL_MERGE_AT,
};
use time::macros::datetime;

/// Entries in the registry: a whole exchange.
const ENTRIES: u64 = 1_000_000;
/// Entries saved at a time: the changed wallets of a publish at an own
/// node's budget, as docs/ingest.md's target states it (7,000).
const SAVED: u64 = 7_000;
/// Entries written at a time while the registry is filled (as `track`'s
/// saves do).
const FILL: u64 = 25_000;

fn entry(i: u64, value: u64) -> RegistryEntry {
    let at = datetime!(2026-11-28 12:00:00 UTC);
    let mut e = RegistryEntry::new(
        format!("0x{:040x}", 0x5eed_0000 + i),
        DiscoverySource::List,
        at,
    );
    e.account_value = Some(Decimal((value % 10_000_000).into()));
    e.position_value = Some(Decimal((value % 1_000_000).into()));
    e.last_read_at = Some(at + time::Duration::seconds(value as i64));
    e
}

fn upsert(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path().join("bench.db").to_str().unwrap(),
        PoolOptions {
            checkpoint: Checkpoint::Separate,
            ..PoolOptions::default()
        },
    )
    .unwrap();
    store.migrate().unwrap();
    // Filled in a shuffled order (a multiplier coprime with the count), as
    // discovery finds wallets in no address order.
    let order = |k: u64| (k * 387_420_489) % ENTRIES;
    for start in (0..ENTRIES).step_by(FILL as usize) {
        let batch: Vec<RegistryEntry> = (start..start + FILL).map(|k| entry(order(k), 0)).collect();
        store.save_registry(&batch).unwrap();
        store.checkpoint().unwrap();
    }
    // The million in the table, as a running `track`'s registry is between
    // two merges.
    store.merge_journals().unwrap();
    store.checkpoint().unwrap();
    let mut round = 0_u64;
    let mut g = c.benchmark_group("upsert");
    g.sample_size(20);
    g.bench_function("registry_7000_of_1m", |b| {
        b.iter_batched(
            || {
                // The log copied back outside the measurement, as `track`'s
                // checkpoint thread does; a new spread of wallets each time.
                store.checkpoint().unwrap();
                round += 1;
                (0..SAVED)
                    .map(|k| entry((k * (ENTRIES / SAVED) + round * 7_919) % ENTRIES, round))
                    .collect::<Vec<_>>()
            },
            |batch| store.save_registry(&batch).unwrap(),
            BatchSize::PerIteration,
        )
    });
    g.sample_size(10);
    g.bench_function("merge_journal_into_1m", |b| {
        b.iter_batched(
            || {
                // A merge's worth of entries spread over the million, saved
                // as `track` saves them (a few thousand at a time), and the
                // log copied back, outside the measurement.
                store.merge_journals().unwrap();
                round += 1;
                let spread = (ENTRIES / JOURNAL_MERGE_AT as u64).max(1);
                let entries: Vec<RegistryEntry> = (0..JOURNAL_MERGE_AT as u64)
                    .map(|k| entry((k * spread + round * 7_919) % ENTRIES, round))
                    .collect();
                for batch in entries.chunks(SAVED as usize) {
                    store.save_registry(batch).unwrap();
                }
                store.checkpoint().unwrap();
            },
            |()| store.merge_journals().unwrap(),
            BatchSize::PerIteration,
        )
    });
    store.merge_journals().unwrap();
    let spread = (ENTRIES / JOURNAL_MERGE_AT as u64).max(1);
    let short: Vec<RegistryEntry> = (0..JOURNAL_MERGE_AT as u64 - 1)
        .map(|k| entry((k * spread) % ENTRIES, round + 1))
        .collect();
    for batch in short.chunks(SAVED as usize) {
        store.save_registry(batch).unwrap();
    }
    store.checkpoint().unwrap();
    g.sample_size(20);
    g.bench_function("merge_check_one_short", |b| {
        b.iter(|| assert!(!store.merge_journals_if_due().unwrap()))
    });
    g.finish();
}

criterion_group!(benches, upsert);
criterion_main!(benches);
