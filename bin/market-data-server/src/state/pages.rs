//! Rendered bodies of the database-backed endpoints (liquidity-levels,
//! candles, history, events, wallet detail) for the served data version,
//! keyed by their normalized query.
//!
//! A bounded cache (`quick_cache`) weighed in body bytes, with single-flight
//! loading: concurrent requests for a page that is being rendered wait for
//! that render instead of running the same queries once each. Every entry
//! belongs to one data version, so an entry is never stale; serving a newer
//! version drops the older version's pages.
//!
//! Not moka: a hit is on the request path, and moka's read bookkeeping cost
//! wallet detail about 2.5 µs of CPU per request (`docs/performance.md`),
//! as it did the token cache (`tokens.rs`).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use bytes::Bytes;
use quick_cache::sync::Cache;
use quick_cache::{OptionsBuilder, Weighter};

use crate::metrics::CacheStats;

/// Default bound of the rendered-page cache.
pub const PAGE_CACHE_BYTES: usize = 64 << 20;

/// The cache is split in this many independently locked shards, each
/// holding a quarter of the bound: a page larger than that is served but
/// not cached.
const SHARDS: usize = 4;

type Key = (i64, String);

/// A render's outcome. Errors pass through the cache only to reach the
/// requests waiting for that render, and are removed at once.
type Rendered<E> = Result<Bytes, E>;

/// Weighs an entry by its key and body bytes.
#[derive(Clone, Copy)]
struct BodyBytes;

impl<E> Weighter<Key, Rendered<E>> for BodyBytes {
    fn weight(&self, (_, key): &Key, page: &Rendered<E>) -> u64 {
        (key.len() + page.as_ref().map_or(0, Bytes::len)).max(1) as u64
    }
}

/// The page cache; `E` is the error a render can fail with.
pub struct PageCache<E> {
    /// `None` when disabled (a bound of 0).
    cache: Option<Cache<Key, Rendered<E>, BodyBytes>>,
    /// The newest version whose pages are kept.
    version: AtomicI64,
    /// Pages served without rendering (a cached page, or another request's render).
    hits: AtomicU64,
    /// Pages rendered.
    misses: AtomicU64,
}

impl<E: Clone> PageCache<E> {
    /// An empty cache holding at most `capacity` body bytes (0 disables it).
    pub fn new(capacity: usize) -> PageCache<E> {
        let cache = (capacity > 0).then(|| {
            let options = OptionsBuilder::new()
                .shards(SHARDS)
                // Pages are a few KB to a few MB; the estimate only sizes
                // the bookkeeping of recently evicted keys.
                .estimated_items_capacity((capacity / 16_384).max(64))
                .weight_capacity(capacity as u64)
                .build()
                .expect("every option is set");
            Cache::with_options(options, BodyBytes, Default::default(), Default::default())
        });
        PageCache {
            cache,
            version: AtomicI64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The page `key` of `version`: from the cache, or rendered by `render`
    /// (once, however many requests ask for it meanwhile) and cached. A
    /// failed render is not cached; the requests waiting for it get its
    /// error.
    pub async fn get_or_render<F>(&self, version: i64, key: String, render: F) -> Result<Bytes, E>
    where
        F: std::future::Future<Output = Result<Bytes, E>>,
    {
        let Some(cache) = &self.cache else {
            self.misses.fetch_add(1, Ordering::Relaxed);
            return render.await;
        };
        if version < self.version.load(Ordering::Relaxed) {
            // A request still on an older version: not worth keeping.
            self.misses.fetch_add(1, Ordering::Relaxed);
            return render.await;
        }
        let key = (version, key);
        let guard = match cache.get_value_or_guard_async(&key).await {
            Ok(page) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return page;
            }
            Err(guard) => guard,
        };
        self.misses.fetch_add(1, Ordering::Relaxed);
        let page = render.await;
        // Hands the outcome to the waiters (and caches it).
        let _ = guard.insert(page.clone());
        if page.is_err() {
            cache.remove_if(&key, |page| page.is_err());
        }
        page
    }

    /// Drops the pages of versions older than `version`.
    pub fn evict_before(&self, version: i64) {
        let previous = self.version.fetch_max(version, Ordering::Relaxed);
        if let (Some(cache), true) = (&self.cache, previous < version) {
            cache.retain(|(v, _), _| *v >= version);
        }
    }

    /// Hits, misses and what is held now.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.cache.as_ref().map_or(0, |c| c.len() as u64),
            bytes: self.cache.as_ref().map_or(0, Cache::weight),
        }
    }

    /// Pages cached now.
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.cache.as_ref().map_or(0, Cache::len)
    }

    /// Bytes cached now (keys and bodies).
    #[cfg(test)]
    fn weight(&self) -> u64 {
        self.cache.as_ref().map_or(0, Cache::weight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_misses_of_one_page_render_it_once() {
        let pages = PageCache::<()>::new(1 << 20);
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
            pages.get_or_render(1, "k".into(), render(b"one")),
            pages.get_or_render(1, "k".into(), render(b"two")),
            pages.get_or_render(1, "other".into(), render(b"three")),
        );
        assert_eq!(renders.load(Ordering::SeqCst), 2, "one render per page");
        assert_eq!(a.unwrap(), b.unwrap(), "the waiter got the first render");
        assert_eq!(c.unwrap(), Bytes::from_static(b"three"));
        // Cached afterwards; a failed render is not cached.
        assert_eq!(
            pages
                .get_or_render(1, "k".into(), async { Err(()) })
                .await
                .unwrap()
                .len(),
            3
        );
        assert_eq!(
            pages
                .get_or_render(2, "k".into(), async { Err::<Bytes, _>(()) })
                .await,
            Err(())
        );
        assert_eq!(pages.entries(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_waiters_of_a_failed_render_get_its_error_and_nothing_is_cached() {
        let pages = PageCache::<&'static str>::new(1 << 20);
        let renders = AtomicUsize::new(0);
        let render = |outcome: Result<&'static [u8], &'static str>| {
            let renders = &renders;
            async move {
                renders.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                outcome.map(Bytes::from_static)
            }
        };
        let (a, b) = tokio::join!(
            pages.get_or_render(1, "k".into(), render(Err("database down"))),
            pages.get_or_render(1, "k".into(), render(Ok(b"late"))),
        );
        assert_eq!(
            renders.load(Ordering::SeqCst),
            1,
            "the waiter did not render"
        );
        assert_eq!((a, b), (Err("database down"), Err("database down")));
        assert_eq!(pages.entries(), 0);
        let next = pages
            .get_or_render(1, "k".into(), render(Ok(b"back")))
            .await;
        assert_eq!(next.unwrap(), Bytes::from_static(b"back"));
    }

    #[tokio::test]
    async fn a_newer_version_drops_the_older_pages_and_the_bound_holds() {
        let pages = PageCache::<()>::new(4000);
        let body = |n: usize| async move { Ok::<_, ()>(Bytes::from(vec![0u8; n])) };
        pages.get_or_render(1, "a".into(), body(100)).await.unwrap();
        pages.get_or_render(1, "b".into(), body(100)).await.unwrap();
        assert_eq!(pages.entries(), 2);
        pages.evict_before(2);
        assert_eq!(pages.entries(), 0, "version 1's pages are gone");
        // A request still on version 1 renders but does not cache.
        pages.get_or_render(1, "a".into(), body(100)).await.unwrap();
        assert_eq!(pages.entries(), 0);
        for k in 0..60 {
            pages
                .get_or_render(2, k.to_string(), body(100))
                .await
                .unwrap();
        }
        assert!(pages.weight() <= 4000, "{}", pages.weight());
        assert!(pages.entries() >= 30, "{}", pages.entries());
        // Larger than a shard (a quarter of the bound): served, not cached.
        let big = pages.get_or_render(2, "big".into(), body(1500)).await;
        assert_eq!(big.unwrap().len(), 1500);
        assert!(pages
            .get_or_render(2, "big".into(), async { Err(()) })
            .await
            .is_err());
        let off = PageCache::<()>::new(0);
        let renders = AtomicUsize::new(0);
        for _ in 0..2 {
            off.get_or_render(1, "a".into(), async {
                renders.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ()>(Bytes::from_static(b"x"))
            })
            .await
            .unwrap();
        }
        assert_eq!(
            renders.load(Ordering::SeqCst),
            2,
            "a bound of 0 disables it"
        );
    }
}
