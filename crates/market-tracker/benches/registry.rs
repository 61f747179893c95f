//! What a publish of `track` pays for its registry at an own node's scale,
//! whatever changed: the freshness of every entry, the coverage report's
//! `wallets` (`cargo bench -p market-tracker --bench registry`; figures in
//! docs/ingest.md).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use market_model::Decimal;
use market_store::{DiscoverySource, RegistryEntry};
use market_tracker::tracker::registry_freshness;
use market_tracker::{Intervals, Schedule};
use time::macros::datetime;
use time::Duration;

/// Entries in the registry: a whole exchange.
const ENTRIES: u64 = 1_000_000;

fn registry(c: &mut Criterion) {
    let now = datetime!(2026-11-28 12:00:00 UTC);
    // Read from a second to two hours ago (one in ten never), account values
    // from 1 USD to 10M USD: every size class and every freshness window.
    let entries = (0..ENTRIES).map(|i| {
        let address = format!("0x{:040x}", 0x5eed_0000 + i);
        let mut e = RegistryEntry::new(address, DiscoverySource::List, now - Duration::days(1));
        if i % 10 != 0 {
            let ago = Duration::nanoseconds(((i * 7_919) % 7_200_000_000_000) as i64 + 1);
            e.last_read_at = Some(now - ago);
            e.account_value = Some(Decimal(((i * 104_729) % 10_000_000).into()));
        }
        e
    });
    let schedule = Schedule::new(Intervals::default(), entries, now);
    let mut g = c.benchmark_group("registry");
    g.sample_size(20);
    g.bench_function("freshness_of_1m_entries", |b| {
        b.iter(|| black_box(registry_freshness(&schedule, black_box(now))))
    });
    g.finish();
}

criterion_group!(benches, registry);
criterion_main!(benches);
