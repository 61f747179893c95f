//! Shared state: the store, the served snapshot and the token cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use market_engine::{Materialized, Snapshot};
use market_store::{Store, StoreError, TokenRecord};
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
