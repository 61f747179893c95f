//! The request path's way to the database: a circuit breaker and bounded
//! concurrency, so that a database that is down or busy costs requests
//! that need it a fast 503, and costs the requests served from memory
//! nothing.
//!
//! - **Breaker.** A request whose database work fails because the database
//!   cannot be reached (a lost connection, a refused one, no pooled
//!   connection in time) marks the database down. From then on, database
//!   work is refused at once with a 503 and `Retry-After: 1`, instead of
//!   each request waiting for the pool's connection timeout. A probe
//!   thread pings the database every [`PROBE_INTERVAL`] and marks it up
//!   again on the first success.
//! - **Bounded concurrency.** Page renders (the database-backed endpoints'
//!   cache misses) run at most `concurrency` at a time; up to `queue` more
//!   wait at most [`QUEUE_WAIT`] for a turn, and any further one is refused
//!   at once with a 503. Token lookups and the health check bypass the
//!   limit, and the pool keeps connections for them, so a burst of cold
//!   pages never makes a valid key wait.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use actix_web::http::header::{self, HeaderValue};
use actix_web::web;
use market_store::Store;
use time::OffsetDateTime;

use crate::error::{ApiError, ProblemKind};

/// How often the probe pings a database that is down.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(250);
/// How long a probe waits for a connection.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// Longest wait of a queued page render for its turn.
pub const QUEUE_WAIT: Duration = Duration::from_secs(1);
/// Connections of the pool that page renders leave to token lookups, the
/// health check, the usage flusher and the reloader.
pub const RESERVED_CONNECTIONS: u32 = 2;

/// How database work from requests is limited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DbOptions {
    /// Page renders running at once (at least 1).
    pub concurrency: usize,
    /// Page renders waiting for a turn; past them, a 503 at once.
    pub queue: usize,
    /// How long a token verified by the database keeps working from
    /// memory while the database cannot be reached.
    pub token_grace: Duration,
}

impl Default for DbOptions {
    /// One render per CPU, a queue twice that, 10 minutes of grace.
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        DbOptions {
            concurrency: cpus,
            queue: 2 * cpus,
            token_grace: Duration::from_secs(600),
        }
    }
}

/// What the request needs the database for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// Rendering a page of a database-backed endpoint: limited.
    Page,
    /// Verifying an API key, or the health check: not limited.
    Control,
    /// A page that the served snapshot renders without the database (a
    /// liquidity window of the current day): neither limited nor refused
    /// while the database is down.
    Memory,
}

/// Why database work was refused without being tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The database is down.
    Down = 0,
    /// Every render slot and queue place is taken.
    Busy = 1,
}

/// The guard of the request path's database work.
pub struct DbGuard {
    store: Store,
    options: DbOptions,
    up: AtomicBool,
    /// Since when the database has been down (monotonic, and for display).
    down_since: Mutex<Option<(Instant, OffsetDateTime)>>,
    probing: AtomicBool,
    renders: tokio::sync::Semaphore,
    queued: AtomicUsize,
    refused: [AtomicU64; 2],
    outages: AtomicU64,
}

impl DbGuard {
    /// A guard over `store`, which starts out up.
    pub fn new(store: Store, options: DbOptions) -> Arc<DbGuard> {
        let concurrency = options.concurrency.max(1);
        Arc::new(DbGuard {
            store,
            options: DbOptions {
                concurrency,
                ..options
            },
            up: AtomicBool::new(true),
            down_since: Mutex::new(None),
            probing: AtomicBool::new(false),
            renders: tokio::sync::Semaphore::new(concurrency),
            queued: AtomicUsize::new(0),
            refused: Default::default(),
            outages: AtomicU64::new(0),
        })
    }

    /// The options in force.
    pub fn options(&self) -> &DbOptions {
        &self.options
    }

    /// Whether the database is taken to be reachable.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Since when the database has been down, if it is.
    pub fn down_since(&self) -> Option<OffsetDateTime> {
        self.lock_down_since().map(|(_, at)| at)
    }

    /// Requests refused without trying the database, by [`Refusal`].
    pub fn refused(&self, why: Refusal) -> u64 {
        self.refused[why as usize].load(Ordering::Relaxed)
    }

    /// Times the database was found down since start.
    pub fn outages(&self) -> u64 {
        self.outages.load(Ordering::Relaxed)
    }

    /// Page renders running and waiting now.
    pub fn renders_in_progress(&self) -> (usize, usize) {
        (
            self.options.concurrency - self.renders.available_permits(),
            self.queued.load(Ordering::Relaxed),
        )
    }

    fn lock_down_since(&self) -> Option<(Instant, OffsetDateTime)> {
        *self.down_since.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `work` on the blocking thread pool, unless the database is down
    /// or (for [`Lane::Page`]) too busy; an error that says the database
    /// cannot be reached marks it down.
    pub async fn run<T, F>(self: &Arc<Self>, lane: Lane, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T, ApiError> + Send + 'static,
    {
        if lane == Lane::Memory {
            let store = self.store.clone();
            return web::block(move || work(&store)).await?;
        }
        if !self.is_up() {
            return Err(self.refuse(Refusal::Down));
        }
        let _turn = match lane {
            Lane::Page => Some(self.turn().await?),
            Lane::Control | Lane::Memory => None,
        };
        // It may have gone down while this request waited for its turn.
        if !self.is_up() {
            return Err(self.refuse(Refusal::Down));
        }
        let store = self.store.clone();
        let result = web::block(move || work(&store)).await?;
        if let Err(e) = &result {
            if e.kind == ProblemKind::Unavailable {
                self.mark_down(e.cause.as_deref().unwrap_or(&e.detail));
            }
        }
        result
    }

    /// A render slot: at once, after a short wait in the queue, or a 503.
    async fn turn(&self) -> Result<tokio::sync::SemaphorePermit<'_>, ApiError> {
        if let Ok(permit) = self.renders.try_acquire() {
            return Ok(permit);
        }
        if self.queued.fetch_add(1, Ordering::Relaxed) >= self.options.queue {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            return Err(self.refuse(Refusal::Busy));
        }
        let waited = tokio::time::timeout(QUEUE_WAIT, self.renders.acquire()).await;
        self.queued.fetch_sub(1, Ordering::Relaxed);
        match waited {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(self.refuse(Refusal::Busy)),
        }
    }

    /// Counts a refusal and makes its 503.
    fn refuse(&self, why: Refusal) -> ApiError {
        self.refused[why as usize].fetch_add(1, Ordering::Relaxed);
        let detail = match why {
            Refusal::Down => format!(
                "The database has been unreachable since {}; this endpoint needs it for pages not cached. Endpoints served from memory keep working. Retry after the number of seconds in Retry-After.",
                self.down_since()
                    .map_or_else(|| "just now".to_owned(), market_model::timestamp::format_utc)
            ),
            Refusal::Busy => "The server is rendering as many uncached pages as it allows at once. Retry after the number of seconds in Retry-After.".to_owned(),
        };
        let mut error = ApiError::new(ProblemKind::Unavailable, detail);
        error
            .headers
            .push((header::RETRY_AFTER, HeaderValue::from_static("1")));
        error
    }

    /// Marks the database down (once) and starts the probe (once).
    pub fn mark_down(self: &Arc<Self>, cause: &str) {
        if self.up.swap(false, Ordering::AcqRel) {
            *self.down_since.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((Instant::now(), whole_seconds(OffsetDateTime::now_utc())));
            self.outages.fetch_add(1, Ordering::Relaxed);
            log::warn!("the database is unreachable ({cause}): pages that need it get 503 until it answers again; endpoints served from memory keep working");
        }
        if !self.probing.swap(true, Ordering::AcqRel) {
            let guard = Arc::downgrade(self);
            let store = self.store.clone();
            std::thread::Builder::new()
                .name("db-probe".into())
                .spawn(move || probe(guard, store))
                .expect("spawning a thread");
        }
    }

    /// Marks the database up.
    fn mark_up(&self) {
        let since = self
            .down_since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if !self.up.swap(true, Ordering::AcqRel) {
            log::info!(
                "the database answers again after {:.1} s",
                since.map_or(0.0, |(at, _)| at.elapsed().as_secs_f64())
            );
        }
    }
}

/// `t` without its fraction of a second, as the API's other times are.
fn whole_seconds(t: OffsetDateTime) -> OffsetDateTime {
    t.replace_nanosecond(0).expect("0 is a valid nanosecond")
}

/// Pings until the database answers, then marks it up and ends.
fn probe(guard: Weak<DbGuard>, store: Store) {
    loop {
        std::thread::sleep(PROBE_INTERVAL);
        let Some(guard) = guard.upgrade() else { return };
        if store.ping_within(PROBE_TIMEOUT).is_ok() {
            // Probing ends before the database is marked up: a failure
            // seen after this point starts a new probe.
            guard.probing.store(false, Ordering::Release);
            guard.mark_up();
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use market_store::{PoolOptions, StoreError};

    fn guard(concurrency: usize, queue: usize) -> (tempfile::TempDir, Arc<DbGuard>) {
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().join("db").to_str().unwrap().to_owned();
        let store = Store::open(&url, PoolOptions::default()).unwrap();
        let options = DbOptions {
            concurrency,
            queue,
            ..DbOptions::default()
        };
        (dir, DbGuard::new(store, options))
    }

    async fn until(what: impl Fn() -> bool) {
        let started = Instant::now();
        while !what() {
            assert!(started.elapsed() < Duration::from_secs(5), "timed out");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn renders_past_the_slots_and_the_queue_are_refused_at_once() {
        let (_dir, g) = guard(1, 1);
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let first = tokio::spawn({
            let g = g.clone();
            async move {
                g.run(Lane::Page, move |_| {
                    wait.recv().unwrap();
                    Ok(1)
                })
                .await
            }
        });
        until(|| g.renders_in_progress() == (1, 0)).await;
        let second = tokio::spawn({
            let g = g.clone();
            async move { g.run(Lane::Page, |_| Ok(2)).await }
        });
        until(|| g.renders_in_progress() == (1, 1)).await;
        let started = Instant::now();
        let third = g.run(Lane::Page, |_| Ok(3)).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_millis(100));
        assert_eq!(third.kind, ProblemKind::Unavailable);
        assert!(third.detail.contains("uncached pages"), "{}", third.detail);
        // Key checks are not held up by renders.
        assert_eq!(g.run(Lane::Control, |_| Ok(4)).await.unwrap(), 4);
        release.send(()).unwrap();
        assert_eq!(first.await.unwrap().unwrap(), 1);
        assert_eq!(second.await.unwrap().unwrap(), 2);
        assert_eq!((g.refused(Refusal::Busy), g.refused(Refusal::Down)), (1, 0));
        assert_eq!(g.renders_in_progress(), (0, 0));
    }

    #[tokio::test]
    async fn a_queued_render_waits_at_most_the_queue_wait() {
        let (_dir, g) = guard(1, 1);
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let first = tokio::spawn({
            let g = g.clone();
            async move {
                g.run(Lane::Page, move |_| {
                    wait.recv().unwrap();
                    Ok(())
                })
                .await
            }
        });
        until(|| g.renders_in_progress() == (1, 0)).await;
        let started = Instant::now();
        assert!(g.run(Lane::Page, |_| Ok(())).await.is_err());
        let waited = started.elapsed();
        assert!(
            waited >= QUEUE_WAIT && waited < QUEUE_WAIT + Duration::from_millis(500),
            "{waited:?}"
        );
        release.send(()).unwrap();
        first.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn an_unreachable_database_is_refused_at_once_until_the_probe_finds_it() {
        let (_dir, g) = guard(2, 2);
        let failed = g
            .run(Lane::Control, |_| -> Result<(), ApiError> {
                Err(StoreError::Unavailable("connection refused".into()).into())
            })
            .await
            .unwrap_err();
        assert_eq!(failed.kind, ProblemKind::Unavailable);
        assert!(!g.is_up());
        let since = g.down_since().unwrap();
        assert_eq!(since.nanosecond(), 0, "{since}");
        let started = Instant::now();
        let refused = g.run(Lane::Page, |_| Ok(())).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_millis(50));
        assert!(
            refused.detail.contains("unreachable since"),
            "{}",
            refused.detail
        );
        assert!(refused
            .headers
            .iter()
            .any(|(n, v)| n == header::RETRY_AFTER && v == "1"));
        // The database (a fine SQLite file) answers the probe.
        until(|| g.is_up()).await;
        assert!(
            started.elapsed() < PROBE_INTERVAL * 3,
            "{:?}",
            started.elapsed()
        );
        assert!(g.down_since().is_none());
        g.run(Lane::Page, |_| Ok(())).await.unwrap();
        assert_eq!((g.outages(), g.refused(Refusal::Down)), (1, 1));
        // A query error that is not about reaching the database does not
        // count as an outage.
        let _ = g
            .run(Lane::Page, |_| -> Result<(), ApiError> {
                Err(ApiError::not_found("nothing here"))
            })
            .await;
        assert!(g.is_up());
    }
}
