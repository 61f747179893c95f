//! Rendered bodies of the database-backed endpoints (liquidity-levels,
//! candles) for the served data version, keyed by their normalized query.
//!
//! A bounded cache (moka) weighed in body bytes, with single-flight loading:
//! concurrent requests for a page that is being rendered wait for that
//! render instead of running the same queries once each. Every entry
//! belongs to one data version, so an entry is never stale; serving a newer
//! version drops the older version's pages.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use moka::future::Cache;

/// Default bound of the rendered-page cache.
pub const PAGE_CACHE_BYTES: usize = 64 << 20;

/// The page cache.
pub struct PageCache {
    /// `None` when disabled (a bound of 0).
    cache: Option<Cache<(i64, String), Bytes>>,
    /// The newest version whose pages are kept.
    version: AtomicI64,
}

impl PageCache {
    /// An empty cache holding at most `capacity` body bytes (0 disables it).
    pub fn new(capacity: usize) -> PageCache {
        let cache = (capacity > 0).then(|| {
            Cache::builder()
                .max_capacity(capacity as u64)
                .weigher(|(_, key): &(i64, String), body: &Bytes| {
                    u32::try_from(key.len() + body.len()).unwrap_or(u32::MAX)
                })
                .support_invalidation_closures()
                .build()
        });
        PageCache {
            cache,
            version: AtomicI64::new(0),
        }
    }

    /// The page `key` of `version`: from the cache, or rendered by `render`
    /// (once, however many requests ask for it meanwhile) and cached. A
    /// failed render is not cached; its waiters get its error.
    pub async fn get_or_render<E, F>(&self, version: i64, key: &str, render: F) -> Result<Bytes, E>
    where
        E: Clone + Send + Sync + 'static,
        F: std::future::Future<Output = Result<Bytes, E>>,
    {
        let Some(cache) = &self.cache else {
            return render.await;
        };
        if version < self.version.load(Ordering::Relaxed) {
            // A request still on an older version: not worth keeping.
            return render.await;
        }
        cache
            .try_get_with((version, key.to_owned()), render)
            .await
            .map_err(|e: Arc<E>| (*e).clone())
    }

    /// Drops the pages of versions older than `version`.
    pub fn evict_before(&self, version: i64) {
        let previous = self.version.fetch_max(version, Ordering::Relaxed);
        if let (Some(cache), true) = (&self.cache, previous < version) {
            cache
                .invalidate_entries_if(move |(v, _), _| *v < version)
                .expect("invalidation closures are enabled");
        }
    }

    /// Pages cached now (after pending maintenance).
    #[cfg(test)]
    async fn entries(&self) -> u64 {
        match &self.cache {
            Some(c) => {
                c.run_pending_tasks().await;
                c.entry_count()
            }
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_misses_of_one_page_render_it_once() {
        let pages = PageCache::new(1 << 20);
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
            pages.get_or_render(1, "k", render(b"one")),
            pages.get_or_render(1, "k", render(b"two")),
            pages.get_or_render(1, "other", render(b"three")),
        );
        assert_eq!(renders.load(Ordering::SeqCst), 2, "one render per page");
        assert_eq!(a.unwrap(), b.unwrap(), "the waiter got the first render");
        assert_eq!(c.unwrap(), Bytes::from_static(b"three"));
        // Cached afterwards; a failed render is not cached.
        assert_eq!(
            pages
                .get_or_render(1, "k", async { Err(()) })
                .await
                .unwrap()
                .len(),
            3
        );
        assert_eq!(
            pages
                .get_or_render(2, "k", async { Err::<Bytes, _>(()) })
                .await,
            Err(())
        );
        assert_eq!(pages.entries().await, 2);
    }

    #[tokio::test]
    async fn a_newer_version_drops_the_older_pages_and_the_bound_holds() {
        let pages = PageCache::new(1000);
        let body = |n: usize| async move { Ok::<_, ()>(Bytes::from(vec![0u8; n])) };
        pages.get_or_render(1, "a", body(100)).await.unwrap();
        pages.get_or_render(1, "b", body(100)).await.unwrap();
        assert_eq!(pages.entries().await, 2);
        pages.evict_before(2);
        assert_eq!(pages.entries().await, 0, "version 1's pages are gone");
        // A request still on version 1 renders but does not cache.
        pages.get_or_render(1, "a", body(100)).await.unwrap();
        assert_eq!(pages.entries().await, 0);
        for k in 0..30 {
            pages
                .get_or_render(2, &k.to_string(), body(100))
                .await
                .unwrap();
        }
        let cache = pages.cache.as_ref().unwrap();
        cache.run_pending_tasks().await;
        assert!(cache.weighted_size() <= 1000, "{}", cache.weighted_size());
        let off = PageCache::new(0);
        let renders = AtomicUsize::new(0);
        for _ in 0..2 {
            off.get_or_render(1, "a", async {
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
