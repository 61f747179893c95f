//! Shared state: the store, the served snapshot and the token cache.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bytes::Bytes;
use market_engine::Materialized;
use market_snapshot::{Changes, RenderedPosition, Snapshot};
use market_store::{Store, StoreError, TokenRecord, UsageRow};
use time::OffsetDateTime;

/// How often a server checks the database for a new data version.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(1);
/// How long a reload waits for in-flight requests to release the previous
/// data version, so that it is freed on the reloader thread; a response
/// still being written to a slow client after that frees it itself.
const RETIRE_WAIT: Duration = Duration::from_secs(10);
/// Nice value of the reloader thread (and the threads it starts): loading
/// and rendering a new version yields the CPU to the HTTP workers.
const RELOADER_NICE: i32 = 10;
/// How long a verified token stays cached; bounds how long a revoked token keeps working.
pub const TOKEN_CACHE_TTL: Duration = Duration::from_secs(2);

/// Default bound of the rendered-page cache.
pub const PAGE_CACHE_BYTES: usize = 64 << 20;

/// State shared by all workers.
pub struct AppState {
    /// The repository.
    pub store: Store,
    snapshot: ArcSwap<Snapshot>,
    tokens: Mutex<HashMap<String, (Arc<TokenRecord>, Instant)>>,
    usage: Mutex<UsageBuffer>,
    pages: Mutex<PageCache>,
    rendering: Mutex<HashMap<(i64, String), RenderSlot>>,
    /// Data versions served by applying their changes, and by loading them whole.
    reloads: [AtomicU64; 2],
}

/// A page being rendered: the first request fills it, the others wait on it.
type RenderSlot = Arc<tokio::sync::OnceCell<Bytes>>;

/// Rendered bodies of the database-backed endpoints (liquidity-levels,
/// candles) for the served data version, keyed by their normalized query.
///
/// Every entry belongs to one data version, so an entry is never stale: the
/// cache empties when a newer version is first cached. It is bounded in
/// bytes; when full it is emptied (the working set of a version refills it).
#[derive(Debug)]
pub struct PageCache {
    version: i64,
    pages: HashMap<String, Bytes>,
    bytes: usize,
    capacity: usize,
}

impl PageCache {
    /// An empty cache holding at most `capacity` body bytes (0 disables it).
    pub fn new(capacity: usize) -> PageCache {
        PageCache {
            version: 0,
            pages: HashMap::new(),
            bytes: 0,
            capacity,
        }
    }

    /// The cached body of `key` at `version`.
    pub fn get(&self, version: i64, key: &str) -> Option<Bytes> {
        (self.version == version)
            .then(|| self.pages.get(key).cloned())
            .flatten()
    }

    /// Caches `body` of `key` at `version` (ignored for an older version or a
    /// body larger than a quarter of the capacity). Returns the pages it
    /// evicted, for the caller to free after releasing the cache's lock.
    #[must_use = "evicted pages are returned to be dropped outside the lock"]
    pub fn put(&mut self, version: i64, key: String, body: Bytes) -> HashMap<String, Bytes> {
        if version < self.version || body.len() > self.capacity / 4 {
            return HashMap::new();
        }
        let evicted = if version > self.version || self.bytes + body.len() > self.capacity {
            self.evict(version)
        } else {
            HashMap::new()
        };
        self.bytes += body.len();
        if let Some(old) = self.pages.insert(key, body) {
            self.bytes -= old.len();
        }
        evicted
    }

    /// Empties the cache if it holds pages older than `version`, returning them.
    pub fn evict_before(&mut self, version: i64) -> HashMap<String, Bytes> {
        if self.version < version {
            self.evict(version)
        } else {
            HashMap::new()
        }
    }

    fn evict(&mut self, version: i64) -> HashMap<String, Bytes> {
        self.bytes = 0;
        self.version = version;
        std::mem::take(&mut self.pages)
    }
}

/// Removes a finished render from [`AppState::page`]'s table.
struct RenderingGuard<'a> {
    state: &'a AppState,
    slot: (i64, String),
    cell: &'a RenderSlot,
}

impl Drop for RenderingGuard<'_> {
    fn drop(&mut self) {
        let mut rendering = self
            .state
            .rendering
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if rendering
            .get(&self.slot)
            .is_some_and(|c| Arc::ptr_eq(c, self.cell))
        {
            rendering.remove(&self.slot);
        }
    }
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
            freshness: None,
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
            pages: Mutex::new(PageCache::new(PAGE_CACHE_BYTES)),
            rendering: Mutex::new(HashMap::new()),
            reloads: Default::default(),
        });
        state.reload()?;
        Ok(state)
    }

    /// The snapshot being served. Handlers take it once per request, so one
    /// response never mixes two versions.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// How many data versions this server applied as changes, and how many
    /// it loaded whole, since it started.
    pub fn reloads(&self) -> (u64, u64) {
        let [applied, whole] = &self.reloads;
        (
            applied.load(Ordering::Relaxed),
            whole.load(Ordering::Relaxed),
        )
    }

    /// Sets the bound of the rendered-page cache (0 disables it).
    pub fn set_page_cache_capacity(&self, bytes: usize) {
        *self.pages.lock().unwrap_or_else(|p| p.into_inner()) = PageCache::new(bytes);
    }

    /// A cached rendered page.
    fn cached_page(&self, version: i64, key: &str) -> Option<Bytes> {
        self.pages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(version, key)
    }

    /// The page `key` of `version`: from the cache, or rendered by `render`
    /// and cached. Concurrent requests for a page that is being rendered
    /// wait for that render instead of starting their own (a burst of misses
    /// on a slow page would otherwise run the same queries once per request).
    pub async fn page<E, F>(&self, version: i64, key: &str, render: F) -> Result<Bytes, E>
    where
        F: std::future::Future<Output = Result<Bytes, E>>,
    {
        if let Some(body) = self.cached_page(version, key) {
            return Ok(body);
        }
        let slot = (version, key.to_owned());
        let cell = self
            .rendering
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(slot.clone())
            .or_default()
            .clone();
        // Whoever finishes first removes the entry: later requests find the
        // page in the cache (or, if it was not cacheable, render it anew).
        let _done = RenderingGuard {
            state: self,
            slot,
            cell: &cell,
        };
        let mut rendered_here = false;
        let body = cell
            .get_or_try_init(|| {
                rendered_here = true;
                render
            })
            .await?
            .clone();
        // Only the request that rendered the page caches it; the waiters
        // share its result.
        if rendered_here {
            self.cache_page(version, key.to_owned(), body.clone());
        }
        Ok(body)
    }

    /// Caches a rendered page.
    fn cache_page(&self, version: i64, key: String, body: Bytes) {
        let evicted = self
            .pages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .put(version, key, body);
        // Freed after the lock is released: other workers keep reading pages.
        drop(evicted);
    }

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
        let stale_pages = self
            .pages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .evict_before(meta.version);
        drop(stale_pages);
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

    /// A cached token record, if verified less than [`TOKEN_CACHE_TTL`] ago.
    pub fn cached_token(&self, hash: &str) -> Option<Arc<TokenRecord>> {
        let cache = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(hash)
            .filter(|(_, at)| at.elapsed() < TOKEN_CACHE_TTL)
            .map(|(t, _)| t.clone())
    }

    /// Caches a verified token record.
    pub fn cache_token(&self, hash: String, record: Arc<TokenRecord>) {
        let mut cache = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() > 10_000 {
            cache.retain(|_, (_, at)| at.elapsed() < TOKEN_CACHE_TTL);
        }
        cache.insert(hash, (record, Instant::now()));
    }
}

/// Lowers the calling thread's scheduling priority to `nice` (Linux: the
/// nice value is per thread and inherited by threads it starts). Best effort.
fn lower_thread_priority(nice: i32) {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on the calling thread's id changes only its
    // scheduling weight.
    unsafe {
        let tid = libc::gettid();
        if libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) != 0 {
            log::warn!(
                "could not lower the reloader's priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

/// Keeps the resident size near the served data under load (glibc only).
///
/// - A fixed mmap threshold of 128 KiB: large response buffers (a
///   liquidity page is over 1 MB, and actix-web copies bodies into each
///   connection's write buffer) are mapped and unmapped instead of staying
///   in the heap. glibc's default threshold rises to the largest block
///   freed, after which such blocks stay resident: about 70 MB more at
///   100k wallets after a load test.
///
/// Called after the first load: with this threshold the load's growing
/// buffers are mapped afresh at each growth, which made start-up about
/// 1 s slower. Measured in docs/performance.md ("Memory").
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters (under glibc's own
    // lock); it touches no allocation.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// CPU time of the whole process so far (user and system, from
/// `/proc/self/stat`, in clock ticks of 10 ms), where the system has it.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Hands the heap pages freed by a reload back to the OS. The loaded rows
/// and the model structs (several hundred MB at 100k wallets) are freed by
/// then, but glibc keeps freed small-object pages in its arenas, which would
/// leave the resident size at the loading peak.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it has
    // no preconditions and touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How often batched token usage is written to the database.
pub const USAGE_FLUSH_INTERVAL: Duration = Duration::from_secs(5);

/// What a request is counted under: its method and route pattern, kept as
/// static parts so that counting a request allocates nothing; the label
/// (`GET /v1/networks/{network}/markets`) is built when usage is flushed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UsageEndpoint {
    /// The request method (GET and HEAD, or the method a 405 answered).
    pub method: actix_web::http::Method,
    /// The API prefix (`/v1` or its alias).
    pub prefix: &'static str,
    /// The route pattern under the prefix; `None` when no route matched (a 404).
    pub pattern: Option<&'static str>,
}

impl UsageEndpoint {
    /// The label stored in `token_usage.endpoint`.
    pub fn label(&self) -> String {
        match self.pattern {
            Some(pattern) => format!("{} {}{pattern}", self.method, self.prefix),
            None => format!("{} {} (unknown path)", self.method, self.prefix),
        }
    }
}

/// Usage counted in memory between flushes: (token, day, endpoint, status class) → requests.
#[derive(Default)]
pub struct UsageBuffer {
    counts: HashMap<(i64, time::Date, UsageEndpoint, &'static str), i64>,
    last_used: HashMap<i64, OffsetDateTime>,
}

impl AppState {
    /// Counts one authenticated request, made at `at` (no database write).
    pub fn record_usage(
        &self,
        token_id: i64,
        at: OffsetDateTime,
        endpoint: UsageEndpoint,
        status: u16,
    ) {
        let class = match status {
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        let at = at.replace_nanosecond(0).expect("0 is a valid nanosecond");
        let mut buf = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        *buf.counts
            .entry((token_id, at.date(), endpoint, class))
            .or_default() += 1;
        buf.last_used.insert(token_id, at);
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
                endpoint: endpoint.label(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_misses_of_one_page_render_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            dir.path().join("t.db").to_str().unwrap(),
            market_store::PoolOptions::default(),
        )
        .unwrap();
        store.migrate().unwrap();
        let state = AppState::new(store).unwrap();
        let renders = AtomicUsize::new(0);
        let render = |body: &'static [u8]| {
            let renders = &renders;
            async move {
                renders.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok::<_, ()>(Bytes::from_static(body))
            }
        };
        let (a, b, c) = tokio::join!(
            state.page(1, "k", render(b"one")),
            state.page(1, "k", render(b"two")),
            state.page(1, "other", render(b"three")),
        );
        assert_eq!(renders.load(Ordering::SeqCst), 2, "one render per page");
        assert_eq!(a.unwrap(), b.unwrap(), "the waiter got the first render");
        assert_eq!(c.unwrap(), Bytes::from_static(b"three"));
        // Cached afterwards; a failed render is not cached and not shared.
        assert_eq!(
            state.page(1, "k", async { Err(()) }).await.unwrap().len(),
            3
        );
        assert_eq!(
            state.page(2, "k", async { Err::<Bytes, _>(()) }).await,
            Err(())
        );
        assert!(state.rendering.lock().unwrap().is_empty());
    }

    #[test]
    fn page_cache_keeps_one_version_within_its_bound() {
        let mut c = PageCache::new(100);
        assert!(c
            .put(1, "a".into(), Bytes::from_static(&[0; 20]))
            .is_empty());
        assert_eq!(c.get(1, "a").map(|b| b.len()), Some(20));
        assert_eq!(c.get(2, "a"), None, "another version never sees it");
        assert!(c
            .put(1, "big".into(), Bytes::from_static(&[0; 26]))
            .is_empty());
        assert_eq!(c.get(1, "big"), None, "over a quarter of the bound");
        let mut evicted = 0;
        for k in ["b", "c", "d", "e", "f"] {
            evicted += c.put(1, k.into(), Bytes::from_static(&[0; 20])).len();
        }
        assert_eq!(
            evicted, 5,
            "the sixth page overflowed it: the five before went"
        );
        assert!(c.bytes <= 100, "{}", c.bytes);
        assert!(c.get(1, "f").is_some());
        let evicted = c.put(2, "a".into(), Bytes::from_static(&[1; 5]));
        assert_eq!(evicted.len(), 1, "{evicted:?}");
        assert_eq!(c.get(1, "f"), None, "a newer version empties the cache");
        assert!(c
            .put(1, "old".into(), Bytes::from_static(&[0; 5]))
            .is_empty());
        assert_eq!(c.get(1, "old"), None, "an older version is not cached");
        assert_eq!(c.get(2, "a").unwrap()[0], 1);
        assert!(c.evict_before(2).is_empty(), "nothing older than 2");
        assert_eq!(c.evict_before(3).len(), 1);
        assert_eq!(c.get(2, "a"), None);
        let mut off = PageCache::new(0);
        assert!(off.put(1, "a".into(), Bytes::from_static(b"x")).is_empty());
        assert_eq!(off.get(1, "a"), None);
    }
}
