//! Shared state, by concern: the served snapshot and its reloader
//! (`reload`), the event stream's hub (`stream`) and its gzip segments
//! (`gzip`), the rendered-page cache (`pages`), the token cache
//! (`tokens`) and token usage (`usage`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use bytes::Bytes;
use market_engine::DataVersion;
use market_snapshot::Snapshot;
use market_store::{Store, StoreError, TokenRecord};
use time::OffsetDateTime;

use crate::error::ApiError;
use crate::metrics::{ServerMetrics, ServingSample};

pub mod db;
mod gzip;
mod pages;
pub mod reload;
mod saved;
pub mod stream;
mod tokens;
mod usage;

pub use db::{DbGuard, DbOptions, Lane};
pub use pages::{PageCache, PAGE_CACHE_BYTES};
pub use reload::{Served, RELOAD_INTERVAL};
pub use saved::SavedServing;
pub use tokens::{TokenCache, TOKEN_CACHE_TTL};
pub use usage::{UsageBuffer, UsageEndpoint, USAGE_FLUSH_INTERVAL};

/// State shared by all workers.
pub struct AppState {
    /// The repository.
    pub store: Store,
    snapshot: ArcSwap<Served>,
    reaper: reload::Reaper,
    tokens: TokenCache,
    usage: Mutex<UsageBuffer>,
    pages: PageCache<ApiError>,
    /// Data versions served by applying their changes, and by loading them whole.
    reloads: [AtomicU64; 2],
    /// Set when a graceful stop began.
    stopping: AtomicBool,
    /// How long the last new data version took to be ready, in ms.
    last_load_ms: AtomicU64,
    /// The HTTP metrics every answer is recorded in.
    pub metrics: ServerMetrics,
    /// Request quotas per token and the failed-authentication throttle.
    pub limits: crate::ratelimit::RateLimits,
    /// The request path's way to the database.
    pub db: Arc<DbGuard>,
    /// What the reloader pushes to open event streams.
    pub stream: Arc<stream::EventHub>,
    /// Where the served version is saved for the next start, if anywhere.
    pub saved: Option<Arc<SavedServing>>,
}

/// How a server state is set up.
#[derive(Clone, Debug)]
pub struct StateOptions {
    /// Bytes of the rendered-page cache (0 disables it).
    pub page_cache_bytes: usize,
    /// Request quotas and the failed-authentication throttle.
    pub limits: crate::ratelimit::LimitOptions,
    /// Database concurrency and the tokens' grace while it is down.
    pub db: DbOptions,
    /// Event streams each API key may hold open.
    pub max_streams_per_key: usize,
    /// Messages of the event streams' shared buffer: a stream further
    /// behind is closed ([`stream::BUFFER`]; tests make it small).
    pub stream_buffer: usize,
    /// Where to save the served version and start from it
    /// ([`SavedServing`]); `None`: always load from the database.
    pub saved: Option<std::path::PathBuf>,
}

impl Default for StateOptions {
    fn default() -> Self {
        StateOptions {
            page_cache_bytes: PAGE_CACHE_BYTES,
            limits: Default::default(),
            db: Default::default(),
            max_streams_per_key: stream::MAX_STREAMS_PER_KEY,
            stream_buffer: stream::BUFFER,
            saved: None,
        }
    }
}

/// An empty data version 0 (no markets, no wallets): what a server serves
/// before its database holds data.
pub fn empty_snapshot() -> Snapshot {
    Snapshot::build(
        0,
        DataVersion {
            observed_at: OffsetDateTime::UNIX_EPOCH,
            markets: Vec::new(),
            wallets: Vec::new(),
            positions: Vec::new(),
            current_days: Vec::new(),
            cohorts: Vec::new(),
            freshness: None,
        },
    )
}

impl AppState {
    /// State over `store`, with the newest data version loaded and the
    /// default page cache.
    pub fn new(store: Store) -> Result<Arc<AppState>, StoreError> {
        AppState::with_page_cache(store, PAGE_CACHE_BYTES)
    }

    /// State over `store` with a page cache of `page_cache_bytes` (0
    /// disables it), with the newest data version loaded.
    pub fn with_page_cache(
        store: Store,
        page_cache_bytes: usize,
    ) -> Result<Arc<AppState>, StoreError> {
        AppState::with_options(
            store,
            StateOptions {
                page_cache_bytes,
                ..Default::default()
            },
        )
    }

    /// State over `store` set up by `options`, with the newest data
    /// version loaded.
    pub fn with_options(store: Store, options: StateOptions) -> Result<Arc<AppState>, StoreError> {
        let StateOptions {
            page_cache_bytes,
            limits,
            db,
            max_streams_per_key,
            stream_buffer,
            saved,
        } = options;
        let saved = match saved {
            Some(path) => Some(Arc::new(SavedServing::new(path, &store)?)),
            None => None,
        };
        let reaper = reload::Reaper::start();
        let state = Arc::new(AppState {
            db: DbGuard::new(store.clone(), db),
            store,
            snapshot: ArcSwap::from_pointee(reaper.serve(empty_snapshot())),
            reaper,
            tokens: TokenCache::default(),
            usage: Mutex::new(UsageBuffer::default()),
            pages: PageCache::new(page_cache_bytes),
            reloads: Default::default(),
            stopping: AtomicBool::new(false),
            last_load_ms: AtomicU64::new(0),
            metrics: ServerMetrics::new(),
            limits: crate::ratelimit::RateLimits::new(limits),
            stream: Arc::new(stream::EventHub::new(max_streams_per_key, stream_buffer)),
            saved,
        });
        // (A start from the saved version reads changes, which a prune
        // turns into a whole load, never into `Pruned`.)
        state.start_from_saved()?;
        again_if_pruned(|| state.reload())?;
        Ok(state)
    }

    /// Serves the saved version brought up to the newest, when there is one
    /// and it can be without a whole load ([`SavedServing::start`]); else
    /// leaves the whole load to the reloader, without holding the saved
    /// version meanwhile.
    fn start_from_saved(&self) -> Result<(), StoreError> {
        let Some(saved) = &self.saved else {
            return Ok(());
        };
        let Some(snapshot) = saved.start(&self.store)? else {
            return Ok(());
        };
        let previous = self.snapshot.swap(Arc::new(self.reaper.serve(snapshot)));
        // As after any version served: the event streams start after the
        // events stored so far.
        self.stream
            .publish(&self.store, &previous, &self.snapshot.load())?;
        Ok(())
    }

    /// The snapshot being served. Handlers take it once per request, so one
    /// response never mixes two versions.
    pub fn snapshot(&self) -> Arc<Served> {
        self.snapshot.load_full()
    }

    /// The server's figures for a metrics scrape.
    pub fn sample(&self) -> ServingSample {
        // Not held while the rest is read: a retired version is freed
        // once its last holder lets go, and the reloader waits for that.
        let (version, observed_at) = {
            let snapshot = self.snapshot();
            (
                snapshot.version,
                snapshot.observed_at.unix_timestamp() as f64,
            )
        };
        let [applied, whole] = &self.reloads;
        let (streams, streams_lagged) = self.stream.stats();
        ServingSample {
            version,
            observed_at,
            last_load_ms: self.last_load_ms.load(Ordering::Relaxed),
            reloads: (
                applied.load(Ordering::Relaxed),
                whole.load(Ordering::Relaxed),
            ),
            pages: self.pages.stats(),
            tokens: self.tokens.stats(),
            pool: self.store.pool_state(),
            db_up: self.db.is_up(),
            db_outages: self.db.outages(),
            refused_down: self.db.refused(db::Refusal::Down),
            refused_busy: self.db.refused(db::Refusal::Busy),
            renders: self.db.renders_in_progress(),
            redis_errors: self.limits.options().shared.as_ref().map(|s| s.errors()),
            streams,
            streams_lagged,
        }
    }

    /// The text exposition of the server's metrics, sampled now.
    pub fn render_metrics(&self) -> String {
        self.metrics.render(|| self.sample())
    }

    /// The page `key` of `version`: from the cache, or rendered by `render`
    /// (once for concurrent requests) and cached.
    pub async fn page<F>(&self, version: i64, key: String, render: F) -> Result<Bytes, ApiError>
    where
        F: std::future::Future<Output = Result<Bytes, ApiError>>,
    {
        self.pages.get_or_render(version, key, render).await
    }

    /// Marks the server as stopping: responses from now on close their
    /// connection, and `/readyz` answers 503, so clients and load balancers
    /// move on while the requests in flight finish.
    pub fn begin_shutdown(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        // Open event streams end with the id to resume from (elsewhere).
        self.stream.close();
    }

    /// Whether a graceful stop began.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// A cached token record, if verified less than [`TOKEN_CACHE_TTL`] ago.
    pub fn cached_token(&self, hash: &str) -> Option<Arc<TokenRecord>> {
        self.tokens.get(hash)
    }

    /// Whether the key of `hash` was verified at some point and is still
    /// held in the token cache, however long ago.
    pub fn token_known(&self, hash: &str) -> bool {
        self.tokens.known(hash)
    }

    /// The record of `hash` if it was verified less than `age` ago,
    /// whatever the cache's time to live: for the grace while the database
    /// is down.
    pub fn token_within(&self, hash: &str, age: std::time::Duration) -> Option<Arc<TokenRecord>> {
        self.tokens.within(hash, age)
    }

    /// Caches a verified token record.
    pub fn cache_token(&self, hash: String, record: Arc<TokenRecord>) {
        self.tokens.insert(hash, record);
    }
}

/// Runs `read` again while the version it reads is pruned before the read
/// begins ([`StoreError::Pruned`]: two publishes committed after it looked
/// for the newest version); each turn reads the newest. A writer that
/// publishes faster than that could hold a start back forever, so it gives
/// up after [`PRUNED_TURNS`] turns.
fn again_if_pruned<T>(mut read: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
    let mut turns = 1;
    loop {
        match read() {
            Err(e @ StoreError::Pruned(_)) if turns < PRUNED_TURNS => {
                log::debug!("{e}");
                turns += 1;
            }
            other => return other,
        }
    }
}

/// How many times a start reads a version pruned meanwhile before it fails.
const PRUNED_TURNS: usize = 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_pruned_meanwhile_is_tried_again_a_bounded_number_of_times() {
        let mut calls = 0;
        let read = again_if_pruned(|| {
            calls += 1;
            if calls < 4 {
                Err(StoreError::Pruned(calls))
            } else {
                Ok(calls)
            }
        });
        assert_eq!(read.unwrap(), 4, "the fourth turn reads");
        let mut calls = 0;
        let read: Result<(), _> = again_if_pruned(|| {
            calls += 1;
            Err(StoreError::Pruned(calls as i64))
        });
        assert!(matches!(read, Err(StoreError::Pruned(_))));
        assert_eq!(calls, PRUNED_TURNS, "then it gives up");
        let mut calls = 0;
        let read: Result<(), _> = again_if_pruned(|| {
            calls += 1;
            Err(StoreError::Corrupt("bad".into()))
        });
        assert!(matches!(read, Err(StoreError::Corrupt(_))));
        assert_eq!(calls, 1, "other errors are not tried again");
    }
}
