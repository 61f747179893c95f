//! Verified API tokens, cached for a short time so a request does not
//! query the database for its key.
//!
//! A bounded `quick_cache` map whose entries carry the time they were
//! verified. It is on every authenticated request's path: moka's
//! time-to-live cache did the same job for about 2.5 µs more CPU per
//! request (market detail: 1.13-1.26x the CPU per request of the
//! hand-written map it replaced, `scripts/cpu-per-request.sh`), while this
//! one is a hash lookup and a clock read.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use market_store::TokenRecord;
use quick_cache::sync::Cache;

/// How long a verified token stays cached; bounds how long a revoked token keeps working.
pub const TOKEN_CACHE_TTL: Duration = Duration::from_secs(2);
/// Most tokens cached at once (the least recently used go first).
const TOKEN_CACHE_ENTRIES: usize = 10_000;

/// Token records by the SHA-256 hex of their key, with when they were verified.
pub struct TokenCache(
    Cache<String, (Arc<TokenRecord>, Instant)>,
    /// Fresh records found, and lookups that found none.
    [AtomicU64; 2],
);

impl Default for TokenCache {
    fn default() -> Self {
        TokenCache(Cache::new(TOKEN_CACHE_ENTRIES), Default::default())
    }
}

impl TokenCache {
    /// A record verified less than [`TOKEN_CACHE_TTL`] ago.
    pub fn get(&self, hash: &str) -> Option<Arc<TokenRecord>> {
        let found = self.within(hash, TOKEN_CACHE_TTL);
        self.1[usize::from(found.is_none())].fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Whether a record for `hash` is held, however long ago it was
    /// verified: the key was valid not long ago.
    pub fn known(&self, hash: &str) -> bool {
        self.within(hash, Duration::MAX).is_some()
    }

    /// A record verified less than `age` ago (not counted as a hit or miss).
    pub fn within(&self, hash: &str, age: Duration) -> Option<Arc<TokenRecord>> {
        self.0
            .get(hash)
            .filter(|(_, at)| at.elapsed() < age)
            .map(|(record, _)| record)
    }

    /// Hits, misses and what is held now (bytes: keys, names, hints and
    /// the fixed size of an entry).
    pub fn stats(&self) -> crate::metrics::CacheStats {
        let fixed = std::mem::size_of::<(String, (Arc<TokenRecord>, Instant))>()
            + std::mem::size_of::<TokenRecord>();
        let bytes = self
            .0
            .iter()
            .map(|(key, (r, _))| (key.len() + r.name.len() + r.hint.len() + fixed) as u64)
            .sum();
        crate::metrics::CacheStats {
            hits: self.1[0].load(Ordering::Relaxed),
            misses: self.1[1].load(Ordering::Relaxed),
            entries: self.0.len() as u64,
            bytes,
        }
    }

    /// Caches a verified record.
    pub fn insert(&self, hash: String, record: Arc<TokenRecord>) {
        self.0.insert(hash, (record, Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_stay_bounded() {
        let cache = TokenCache::default();
        let record = |id| {
            Arc::new(TokenRecord {
                id,
                name: "t".into(),
                hint: "mds_…abcd".into(),
                created_at: time::OffsetDateTime::UNIX_EPOCH,
                expires_at: None,
                last_used_at: None,
                revoked_at: None,
                rate_limit_per_minute: None,
            })
        };
        cache.insert("a".into(), record(1));
        assert_eq!(cache.get("a").map(|r| r.id), Some(1));
        assert!(cache.get("b").is_none());
        // An entry verified longer ago than the TTL is not served.
        cache
            .0
            .insert("old".into(), (record(2), Instant::now() - TOKEN_CACHE_TTL));
        assert!(cache.get("old").is_none());
        // It is still there for the grace while the database is down.
        assert_eq!(
            cache.within("old", 2 * TOKEN_CACHE_TTL).map(|r| r.id),
            Some(2)
        );
        assert!(cache.within("old", TOKEN_CACHE_TTL).is_none());
        for i in 0..3 * TOKEN_CACHE_ENTRIES {
            cache.insert(format!("k{i}"), record(i as i64));
        }
        assert!(cache.0.len() <= TOKEN_CACHE_ENTRIES, "{}", cache.0.len());
    }
}
