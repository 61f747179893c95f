//! Shared state: the store, the served snapshot and the token cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use market_engine::{Materialized, Snapshot};
use market_store::{Store, StoreError, TokenRecord, UsageRow};
use time::OffsetDateTime;

/// How often a server checks the database for a new data version.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(1);
/// How long a verified token stays cached; bounds how long a revoked token keeps working.
pub const TOKEN_CACHE_TTL: Duration = Duration::from_secs(2);

/// State shared by all workers.
pub struct AppState {
    /// The repository.
    pub store: Store,
    snapshot: ArcSwap<Snapshot>,
    tokens: Mutex<HashMap<String, (TokenRecord, Instant)>>,
    usage: Mutex<UsageBuffer>,
}

fn empty_snapshot() -> Snapshot {
    Snapshot::build(
        0,
        Materialized {
            observed_at: OffsetDateTime::UNIX_EPOCH,
            markets: Vec::new(),
            wallets: Vec::new(),
            positions: Vec::new(),
            current_days: Vec::new(),
        },
    )
}

impl AppState {
    /// State over `store`, with the newest data version loaded.
    pub fn new(store: Store) -> Result<Arc<AppState>, StoreError> {
        let state = Arc::new(AppState {
            store,
            snapshot: ArcSwap::from_pointee(empty_snapshot()),
            tokens: Mutex::new(HashMap::new()),
            usage: Mutex::new(UsageBuffer::default()),
        });
        state.reload()?;
        Ok(state)
    }

    /// The snapshot being served. Handlers take it once per request, so one
    /// response never mixes two versions.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// Loads the newest data version if it differs from the served one.
    /// Returns whether the snapshot changed.
    pub fn reload(&self) -> Result<bool, StoreError> {
        let Some(meta) = self.store.latest_snapshot()? else {
            return Ok(false);
        };
        if meta.version == self.snapshot.load().version {
            return Ok(false);
        }
        let started = Instant::now();
        let loaded = self.store.load_snapshot(&meta)?;
        let snapshot = Snapshot::build(
            meta.version,
            Materialized {
                observed_at: meta.observed_at,
                markets: loaded.markets,
                wallets: loaded.wallets,
                positions: loaded.positions,
                current_days: loaded.current_days,
            },
        );
        self.snapshot.store(Arc::new(snapshot));
        log::info!(
            "serving data version {} (loaded in {} ms)",
            meta.version,
            started.elapsed().as_millis()
        );
        Ok(true)
    }

    /// Polls for new data versions forever (runs on its own thread).
    pub fn spawn_reloader(self: &Arc<Self>) {
        let state = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("snapshot-reloader".into())
            .spawn(move || loop {
                std::thread::sleep(RELOAD_INTERVAL);
                let Some(state) = state.upgrade() else { return };
                if let Err(e) = state.reload() {
                    log::warn!("could not reload the data version: {e}");
                }
            })
            .expect("spawning a thread");
    }

    /// A cached token record, if verified less than [`TOKEN_CACHE_TTL`] ago.
    pub fn cached_token(&self, hash: &str) -> Option<TokenRecord> {
        let cache = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(hash)
            .filter(|(_, at)| at.elapsed() < TOKEN_CACHE_TTL)
            .map(|(t, _)| t.clone())
    }

    /// Caches a verified token record.
    pub fn cache_token(&self, hash: String, record: TokenRecord) {
        let mut cache = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() > 10_000 {
            cache.retain(|_, (_, at)| at.elapsed() < TOKEN_CACHE_TTL);
        }
        cache.insert(hash, (record, Instant::now()));
    }
}

/// How often batched token usage is written to the database.
pub const USAGE_FLUSH_INTERVAL: Duration = Duration::from_secs(5);

/// Usage counted in memory between flushes: (token, day, endpoint, status class) → requests.
#[derive(Default)]
pub struct UsageBuffer {
    counts: HashMap<(i64, time::Date, String, &'static str), i64>,
    last_used: HashMap<i64, OffsetDateTime>,
}

impl AppState {
    /// Counts one authenticated request (no database write).
    pub fn record_usage(&self, token_id: i64, endpoint: String, status: u16) {
        let class = match status {
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        let now = market_model::timestamp::now_seconds();
        let mut buf = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        *buf.counts
            .entry((token_id, now.date(), endpoint, class))
            .or_default() += 1;
        buf.last_used.insert(token_id, now);
    }

    /// Writes the buffered usage in one transaction. On failure the counts are
    /// kept and retried at the next flush.
    pub fn flush_usage(&self) -> Result<(), StoreError> {
        let taken = std::mem::take(&mut *self.usage.lock().unwrap_or_else(|p| p.into_inner()));
        if taken.counts.is_empty() && taken.last_used.is_empty() {
            return Ok(());
        }
        let rows: Vec<UsageRow> = taken
            .counts
            .iter()
            .map(|((token_id, day, endpoint, class), count)| UsageRow {
                token_id: *token_id,
                day: *day,
                endpoint: endpoint.clone(),
                status_class: (*class).to_owned(),
                count: *count,
            })
            .collect();
        let last: Vec<(i64, OffsetDateTime)> =
            taken.last_used.iter().map(|(k, v)| (*k, *v)).collect();
        if let Err(e) = self.store.record_usage(&rows, &last) {
            // Put the counts back so nothing is lost.
            let mut buf = self.usage.lock().unwrap_or_else(|p| p.into_inner());
            for (k, v) in taken.counts {
                *buf.counts.entry(k).or_default() += v;
            }
            for (k, v) in taken.last_used {
                buf.last_used.entry(k).or_insert(v);
            }
            return Err(e);
        }
        Ok(())
    }

    /// Flushes usage every [`USAGE_FLUSH_INTERVAL`] on its own thread.
    pub fn spawn_usage_flusher(self: &Arc<Self>) {
        let state = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("usage-flusher".into())
            .spawn(move || loop {
                std::thread::sleep(USAGE_FLUSH_INTERVAL);
                let Some(state) = state.upgrade() else { return };
                if let Err(e) = state.flush_usage() {
                    log::warn!("could not record token usage (will retry): {e}");
                }
            })
            .expect("spawning a thread");
    }
}
