//! The metrics of `serve`: answers by route, the served data version,
//! caches, the database pool, streams and webhook deliveries.

use std::sync::Mutex;
use std::time::Duration;

use prometheus::{
    Gauge, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry,
};

use super::registry::{
    counter, counter_vec, encode, gauge, gauge_vec, int_gauge, sync_counter, unix_now,
    LATENCY_BUCKETS,
};

/// What a cache holds and how well it serves, for the metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that had to load (render, or ask the database).
    pub misses: u64,
    /// Entries held now.
    pub entries: u64,
    /// Bytes held now (keys and values).
    pub bytes: u64,
}

/// The server's figures at one scrape, read from its state (which keeps
/// them in plain atomics; the metrics never read the state themselves).
#[derive(Clone, Copy, Debug)]
pub struct ServingSample {
    /// The data version being served.
    pub version: i64,
    /// Unix time (s) at which it was observed.
    pub observed_at: f64,
    /// How long the last new data version took to be ready, in ms.
    pub last_load_ms: u64,
    /// Data versions applied as changes, and loaded whole, since start.
    pub reloads: (u64, u64),
    /// The page cache.
    pub pages: CacheStats,
    /// The token cache.
    pub tokens: CacheStats,
    /// The pool's connections: open, idle, most it opens.
    pub pool: (u32, u32, u32),
    /// Whether the database is taken to be reachable.
    pub db_up: bool,
    /// Times the database was found unreachable.
    pub db_outages: u64,
    /// Database work refused because the database was down.
    pub refused_down: u64,
    /// Database work refused because every slot was taken.
    pub refused_busy: u64,
    /// Uncached renders running and queued.
    pub renders: (usize, usize),
    /// Failed Redis rate-limit calls, when a shared quota is configured.
    pub redis_errors: Option<u64>,
    /// Event streams open now.
    pub streams: usize,
    /// Event streams closed for lagging.
    pub streams_lagged: u64,
}

/// The metrics of `serve`: one registry per server state.
pub struct ServerMetrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    version: IntGauge,
    observed_at: Gauge,
    age: Gauge,
    load_seconds: Gauge,
    loads: IntCounterVec,
    cache_hits: IntCounterVec,
    cache_misses: IntCounterVec,
    cache_entries: IntGaugeVec,
    cache_bytes: IntGaugeVec,
    pool: IntGaugeVec,
    pool_max: IntGauge,
    db_up: IntGauge,
    db_outages: IntCounter,
    db_refused: IntCounterVec,
    db_renders: IntGaugeVec,
    redis_errors: IntCounter,
    streams: IntGauge,
    streams_lagged: IntCounter,
    webhooks: IntCounterVec,
    /// The webhook deliverer's counters, when this server delivers.
    webhook_stats: std::sync::OnceLock<std::sync::Arc<market_webhooks::Stats>>,
    /// Scrapes bring the sampled counters up one at a time.
    scrape: Mutex<()>,
}

impl Default for ServerMetrics {
    fn default() -> Self {
        ServerMetrics::new()
    }
}

impl ServerMetrics {
    /// A fresh registry with every metric of `serve`.
    pub fn new() -> ServerMetrics {
        let r = Registry::new();
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "market_data_http_request_duration_seconds",
                "Time from a request's arrival to its answer being ready, by API prefix and route pattern.",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["prefix", "route"],
        )
        .expect("a valid metric");
        r.register(Box::new(latency.clone()))
            .expect("registered once");
        ServerMetrics {
            requests: counter_vec(
                &r,
                "market_data_http_requests_total",
                "Requests answered, by API prefix (`/v1`, `/api/developer/v1`, empty outside the API), route pattern under it (`unmatched` when none matched) and status class.",
                &["prefix", "route", "status"],
            ),
            latency,
            version: int_gauge(&r, "market_data_version", "The data version being served."),
            observed_at: gauge(
                &r,
                "market_data_observed_at_seconds",
                "Unix time at which the served data version was observed.",
            ),
            age: gauge(
                &r,
                "market_data_age_seconds",
                "Age of the served data version: now minus its observation time.",
            ),
            load_seconds: gauge(
                &r,
                "market_data_snapshot_load_seconds",
                "How long the last new data version took to read and get ready to serve.",
            ),
            loads: counter_vec(
                &r,
                "market_data_snapshot_loads_total",
                "New data versions served since start, by how: `applied` as changes or loaded `whole`.",
                &["how"],
            ),
            cache_hits: counter_vec(
                &r,
                "market_data_cache_hits_total",
                "Lookups answered from a cache: `page` (rendered pages of the database-backed endpoints) or `token` (verified API keys).",
                &["cache"],
            ),
            cache_misses: counter_vec(
                &r,
                "market_data_cache_misses_total",
                "Lookups a cache could not answer: a page rendered, or a key verified in the database.",
                &["cache"],
            ),
            cache_entries: gauge_vec(
                &r,
                "market_data_cache_entries",
                "Entries a cache holds.",
                &["cache"],
            ),
            cache_bytes: gauge_vec(
                &r,
                "market_data_cache_bytes",
                "Bytes a cache holds (keys and values).",
                &["cache"],
            ),
            pool: gauge_vec(
                &r,
                "market_data_db_pool_connections",
                "Database connections of the pool, `in_use` or `idle`.",
                &["state"],
            ),
            pool_max: int_gauge(
                &r,
                "market_data_db_pool_max_connections",
                "Most connections the pool opens.",
            ),
            db_up: int_gauge(
                &r,
                "market_data_database_up",
                "1 while the database is taken to be reachable, 0 while it is down (database-backed pages not cached get 503 at once; a probe pings it every 250 ms).",
            ),
            db_outages: counter(
                &r,
                "market_data_database_outages_total",
                "Times the database was found unreachable since start.",
            ),
            db_refused: counter_vec(
                &r,
                "market_data_database_refused_total",
                "Database work refused at once with a 503, by reason: `down` (the database is unreachable) or `busy` (every render slot and queue place taken).",
                &["reason"],
            ),
            db_renders: gauge_vec(
                &r,
                "market_data_database_renders",
                "Uncached pages being rendered from the database (`running`) and waiting for a slot (`queued`).",
                &["state"],
            ),
            redis_errors: counter(
                &r,
                "market_data_ratelimit_redis_errors_total",
                "Rate-limit calls to Redis that failed (the server then limited on its own); 0 without --redis-url.",
            ),
            streams: int_gauge(
                &r,
                "market_data_event_streams",
                "Position-event streams open now.",
            ),
            streams_lagged: counter(
                &r,
                "market_data_event_streams_lagged_total",
                "Event streams closed because their client fell too far behind (it resumes with the id of the last event).",
            ),
            webhooks: counter_vec(
                &r,
                "market_data_webhook_attempts_total",
                "Webhook delivery attempts by this server: `delivered` (2xx), `failed` (retried later), `disabled` (endpoints disabled: 410, or failing for a day).",
                &["result"],
            ),
            webhook_stats: std::sync::OnceLock::new(),
            registry: r,
            scrape: Mutex::new(()),
        }
    }

    /// Exposes the counters of this server's webhook deliverer.
    pub fn watch_webhooks(&self, stats: std::sync::Arc<market_webhooks::Stats>) {
        let _ = self.webhook_stats.set(stats);
    }

    /// Records one answer.
    pub fn observe(&self, prefix: &str, route: &str, status: u16, elapsed: Duration) {
        let class = match status {
            100..=199 => "1xx",
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        self.requests
            .with_label_values(&[prefix, route, class])
            .inc();
        self.latency
            .with_label_values(&[prefix, route])
            .observe(elapsed.as_secs_f64());
    }

    /// The text exposition of every metric, with the state's figures as
    /// `sample` reads them now (one scrape at a time, so the counters kept
    /// elsewhere are brought up in order).
    pub fn render(&self, sample: impl FnOnce() -> ServingSample) -> String {
        let _one_at_a_time = self.scrape.lock().unwrap_or_else(|p| p.into_inner());
        let s = sample();
        self.version.set(s.version);
        self.observed_at.set(s.observed_at);
        self.age.set((unix_now() - s.observed_at).max(0.0));
        self.load_seconds.set(s.last_load_ms as f64 / 1000.0);
        let (applied, whole) = s.reloads;
        sync_counter(&self.loads.with_label_values(&["applied"]), applied);
        sync_counter(&self.loads.with_label_values(&["whole"]), whole);
        for (name, stats) in [("page", s.pages), ("token", s.tokens)] {
            self.set_cache(name, stats);
        }
        let (open, idle, max) = s.pool;
        self.pool
            .with_label_values(&["in_use"])
            .set(i64::from(open.saturating_sub(idle)));
        self.pool.with_label_values(&["idle"]).set(i64::from(idle));
        self.pool_max.set(i64::from(max));
        self.db_up.set(i64::from(s.db_up));
        sync_counter(&self.db_outages, s.db_outages);
        for (label, n) in [("down", s.refused_down), ("busy", s.refused_busy)] {
            sync_counter(&self.db_refused.with_label_values(&[label]), n);
        }
        let (running, queued) = s.renders;
        self.db_renders
            .with_label_values(&["running"])
            .set(running as i64);
        self.db_renders
            .with_label_values(&["queued"])
            .set(queued as i64);
        if let Some(errors) = s.redis_errors {
            sync_counter(&self.redis_errors, errors);
        }
        self.streams.set(s.streams as i64);
        sync_counter(&self.streams_lagged, s.streams_lagged);
        if let Some(w) = self.webhook_stats.get() {
            use std::sync::atomic::Ordering::Relaxed;
            for (label, n) in [
                ("delivered", w.delivered.load(Relaxed)),
                ("failed", w.failed.load(Relaxed)),
                ("disabled", w.disabled.load(Relaxed)),
            ] {
                sync_counter(&self.webhooks.with_label_values(&[label]), n);
            }
        }
        encode(&self.registry)
    }

    fn set_cache(&self, name: &str, stats: CacheStats) {
        sync_counter(&self.cache_hits.with_label_values(&[name]), stats.hits);
        sync_counter(&self.cache_misses.with_label_values(&[name]), stats.misses);
        self.cache_entries
            .with_label_values(&[name])
            .set(stats.entries as i64);
        self.cache_bytes
            .with_label_values(&[name])
            .set(stats.bytes as i64);
    }
}
