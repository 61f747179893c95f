//! Following the database: a thread that serves each new data version,
//! applied as changes or loaded whole.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use market_engine::Materialized;
use market_snapshot::{Changes, RenderedPosition, Snapshot};
use market_store::StoreError;

use super::AppState;
use crate::platform::{lower_thread_priority, process_cpu, release_free_memory};

/// How often a server checks the database for a new data version.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(1);
/// How long a reload waits for in-flight requests to release the previous
/// data version, so that it is freed on the reloader thread; a response
/// still being written to a slow client after that frees it itself.
const RETIRE_WAIT: Duration = Duration::from_secs(10);
/// Nice value of the reloader thread (and the threads it starts): loading
/// and rendering a new version yields the CPU to the HTTP workers.
const RELOADER_NICE: i32 = 10;

impl AppState {
    /// Serves the newest data version if it differs from the served one:
    /// applies its changes to the served snapshot when the store can read
    /// them as changes (a publish of `track`), else loads it whole.
    /// Returns whether the snapshot changed.
    pub fn reload(&self) -> Result<bool, StoreError> {
        let Some(meta) = self.store.latest_snapshot()? else {
            return Ok(false);
        };
        let current = self.snapshot.load_full();
        if meta.version == current.version {
            return Ok(false);
        }
        let started = Instant::now();
        let cpu = process_cpu();
        // A change of more than half the wallets (a scan, a re-seed) is
        // cheaper to load whole than to merge.
        let changes = if current.version > 0 {
            self.store
                .load_changes(current.version, &meta, current.wallet_count() / 2 + 1000)?
        } else {
            None
        };
        let read_ms = started.elapsed().as_millis();
        let whole = changes.is_none();
        self.reloads[usize::from(whole)].fetch_add(1, Ordering::Relaxed);
        let (snapshot, how) = match changes {
            Some(c) => {
                let how = format!(
                    "applied {} changed and {} removed wallets to version {}",
                    c.wallets.len(),
                    c.removed.len(),
                    current.version
                );
                let next = current.apply(
                    meta.version,
                    Changes {
                        observed_at: meta.observed_at,
                        markets: c.markets,
                        current_days: c.current_days,
                        coverage: c.coverage,
                        wallets: c.wallets,
                        positions: c.positions,
                        removed: c.removed,
                    },
                );
                (next, how)
            }
            None => {
                // Positions are rendered from their stored text as they
                // are read (no decimal is parsed and printed again).
                let loaded = self
                    .store
                    .load_for_serving(&meta, RenderedPosition::from_text)?;
                let next = Snapshot::build_rendered(
                    meta.version,
                    Materialized {
                        observed_at: meta.observed_at,
                        markets: loaded.markets,
                        wallets: loaded.wallets,
                        positions: loaded.positions,
                        current_days: loaded.current_days,
                        freshness: loaded.freshness,
                    },
                );
                (next, "loaded whole".to_owned())
            }
        };
        drop(current);
        let (positions, wallets) = snapshot.counts();
        let assets = snapshot.asset_count();
        let previous = self.snapshot.swap(Arc::new(snapshot));
        let ready_ms = started.elapsed().as_millis();
        // The previous version is freed here, not by whichever request
        // happens to hold the last reference: freeing a few hundred MB on a
        // worker thread would stall the requests queued behind it.
        self.pages.evict_before(meta.version);
        let waited = Instant::now();
        while Arc::strong_count(&previous) > 1 && waited.elapsed() < RETIRE_WAIT {
            // In-flight requests (and responses still being written) hold it.
            std::thread::sleep(Duration::from_millis(2));
        }
        let retire = Instant::now();
        drop(previous);
        let freed_ms = retire.elapsed().as_millis();
        if whole {
            // A whole load freed its rows and model structs (several hundred
            // MB); an applied change frees little, and mostly large blocks
            // that go back to the OS by themselves.
            release_free_memory();
        }
        // Everything the new version cost, freeing the old one included
        // (and whatever the workers served meanwhile).
        let cpu_ms = process_cpu().zip(cpu).map(|(b, a)| (b - a).as_millis());
        log::debug!(
            "retired the previous version after {} ms: freed in {freed_ms} ms, trimmed in {} ms",
            retire.duration_since(waited).as_millis(),
            retire.elapsed().as_millis() - freed_ms
        );
        log::info!(
            "serving data version {} ({assets} markets, {positions} positions, {wallets} wallets): {how}; read in {read_ms} ms, ready in {ready_ms} ms, process CPU {} ms",
            meta.version,
            cpu_ms.map_or("?".to_owned(), |ms| ms.to_string()),
        );
        Ok(true)
    }

    /// Polls for new data versions forever (runs on its own thread).
    pub fn spawn_reloader(self: &Arc<Self>) {
        let state = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("snapshot-reloader".into())
            .spawn(move || {
                lower_thread_priority(RELOADER_NICE);
                loop {
                    std::thread::sleep(RELOAD_INTERVAL);
                    let Some(state) = state.upgrade() else { return };
                    if let Err(e) = state.reload() {
                        log::warn!("could not reload the data version: {e}");
                    }
                }
            })
            .expect("spawning a thread");
    }
}
