//! Prometheus metrics, served in the text exposition format at `/metrics`
//! on a separate address (`--metrics-bind`) by `serve`, `scan` and `track`.
//!
//! A separate address, not the API's port: the metrics tell how busy the
//! service is and which routes it serves, which is for the operator's
//! network, not for API users; a scraper needs no API key; and `scan` and
//! `track`, which have no API port, expose theirs the same way.
//!
//! Request counts and latencies are recorded per answer by
//! `request_context`. Everything else (the data version, caches, the pool,
//! the scanner's counters) is kept by the parts themselves in plain atomics
//! and read when Prometheus scrapes, so recording them costs the request
//! path nothing.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus::{
    Encoder, Gauge, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

use crate::state::db::Refusal;
use crate::state::{AppState, CacheStats};

/// Media type of the text exposition format.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Request latency buckets, in seconds: a snapshot answer takes well under
/// a millisecond, a cold history page tens of milliseconds, a pool wait 2 s.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once");
    c
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("a valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once");
    c
}

fn gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("a valid metric");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

fn int_gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("a valid metric");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

fn gauge(registry: &Registry, name: &str, help: &str) -> Gauge {
    let g = Gauge::new(name, help).expect("a valid metric");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

/// Brings a Prometheus counter up to a total kept elsewhere (totals only grow).
fn sync_counter(counter: &IntCounter, total: u64) {
    let current = counter.get();
    if total > current {
        counter.inc_by(total - current);
    }
}

fn encode(registry: &Registry) -> String {
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut out)
        .expect("encoding into memory does not fail");
    String::from_utf8(out).expect("the text format is UTF-8")
}

fn unix_now() -> f64 {
    time::OffsetDateTime::now_utc().unix_timestamp_nanos() as f64 / 1e9
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

    /// The text exposition of every metric, sampled from `state` now.
    pub fn render(&self, state: &AppState) -> String {
        let _one_at_a_time = self.scrape.lock().unwrap_or_else(|p| p.into_inner());
        let snapshot = state.snapshot();
        self.version.set(snapshot.version);
        let observed = snapshot.observed_at.unix_timestamp() as f64;
        drop(snapshot);
        self.observed_at.set(observed);
        self.age.set((unix_now() - observed).max(0.0));
        self.load_seconds.set(state.last_load_ms() as f64 / 1000.0);
        let (applied, whole) = state.reloads();
        sync_counter(&self.loads.with_label_values(&["applied"]), applied);
        sync_counter(&self.loads.with_label_values(&["whole"]), whole);
        let (pages, tokens) = state.cache_stats();
        for (name, stats) in [("page", pages), ("token", tokens)] {
            self.set_cache(name, stats);
        }
        let (open, idle, max) = state.store.pool_state();
        self.pool
            .with_label_values(&["in_use"])
            .set(i64::from(open.saturating_sub(idle)));
        self.pool.with_label_values(&["idle"]).set(i64::from(idle));
        self.pool_max.set(i64::from(max));
        let db = &state.db;
        self.db_up.set(i64::from(db.is_up()));
        sync_counter(&self.db_outages, db.outages());
        for (label, why) in [("down", Refusal::Down), ("busy", Refusal::Busy)] {
            sync_counter(
                &self.db_refused.with_label_values(&[label]),
                db.refused(why),
            );
        }
        let (running, queued) = db.renders_in_progress();
        self.db_renders
            .with_label_values(&["running"])
            .set(running as i64);
        self.db_renders
            .with_label_values(&["queued"])
            .set(queued as i64);
        if let Some(shared) = &state.limits.options().shared {
            sync_counter(&self.redis_errors, shared.errors());
        }
        let (streams, lagged) = state.stream.stats();
        self.streams.set(streams as i64);
        sync_counter(&self.streams_lagged, lagged);
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

/// The metrics of `scan` and `track`: requests to the exchange and the
/// freshness of what they read.
pub struct IngestMetrics {
    registry: Registry,
    counters: Arc<market_ingest::IngestCounters>,
    tracker: Option<Arc<market_tracker::Tracker>>,
    requests: IntCounter,
    weight: IntCounter,
    failures: IntCounter,
    wallets: IntCounterVec,
    last_version: Gauge,
    since_version: Gauge,
    tier_wallets: IntGaugeVec,
    tier_unread: IntGaugeVec,
    tier_oldest: IntGaugeVec,
    discovered: IntCounter,
    publishes: IntCounterVec,
    publishes_failed: IntCounter,
    publish_age: Gauge,
    held_back: IntGauge,
    incomplete_reads: IntCounter,
    unchanged_reads: IntCounter,
    candle_requests: IntCounter,
    spot_trades: IntCounter,
    members: IntCounterVec,
    scrape: Mutex<()>,
}

impl IngestMetrics {
    /// Metrics over the counters of `cfg` (a `scan`), and over `tracker`'s
    /// registry when it is a `track` run.
    pub fn new(
        cfg: &market_ingest::ScanConfig,
        tracker: Option<Arc<market_tracker::Tracker>>,
    ) -> IngestMetrics {
        let r = Registry::new();
        let budget = int_gauge(
            &r,
            "market_data_ingest_weight_budget_per_minute",
            "Request weight allowed per minute (the exchange allows 1200 per IP).",
        );
        budget.set(
            (f64::from(cfg.weight_budget) * 60.0 / cfg.window.as_secs_f64().max(1e-3)).round()
                as i64,
        );
        IngestMetrics {
            counters: cfg.counters.clone(),
            tracker,
            requests: counter(
                &r,
                "market_data_ingest_requests_total",
                "Requests sent to the exchange's info API (attempts, retries included).",
            ),
            weight: counter(
                &r,
                "market_data_ingest_weight_total",
                "Request weight spent; its rate over a minute is the weight used of the budget.",
            ),
            failures: counter(
                &r,
                "market_data_ingest_request_failures_total",
                "Requests that failed (429, 5xx, timeouts, transport errors), each attempt counted.",
            ),
            wallets: counter_vec(
                &r,
                "market_data_ingest_wallet_reads_total",
                "Wallet reads, by result: `ok` (refreshed) or `failed` (after retries).",
                &["result"],
            ),
            last_version: gauge(
                &r,
                "market_data_ingest_last_version_seconds",
                "Unix time at which the last data version was written (0 before the first).",
            ),
            since_version: gauge(
                &r,
                "market_data_ingest_staleness_seconds",
                "Seconds since the last data version was written (since start before the first).",
            ),
            tier_wallets: gauge_vec(
                &r,
                "market_data_tracker_wallets",
                "Wallets in the tracker's registry, by tier.",
                &["tier"],
            ),
            tier_unread: gauge_vec(
                &r,
                "market_data_tracker_unread_wallets",
                "Wallets of a tier not read yet.",
                &["tier"],
            ),
            tier_oldest: gauge_vec(
                &r,
                "market_data_tracker_oldest_read_age_seconds",
                "Age of the oldest last read among a tier's wallets read at least once: the tier's worst staleness.",
                &["tier"],
            ),
            discovered: counter(
                &r,
                "market_data_tracker_discovered_wallets_total",
                "Wallets discovered (leaderboard, trades, node trades, the wallet list).",
            ),
            publishes: counter_vec(
                &r,
                "market_data_tracker_publishes_total",
                "Data versions published by the tracker, by result: `ok` or `failed`.",
                &["result"],
            ),
            publishes_failed: counter(
                &r,
                "market_data_tracker_publishes_failed_total",
                "Publishes that wrote nothing (database unreachable, market context missing, another writer first); the served data stays on the last version.",
            ),
            publish_age: gauge(
                &r,
                "market_data_tracker_last_publish_age_seconds",
                "Seconds since the last publish that was applied (since start before the first): alert when it exceeds a few publish intervals.",
            ),
            held_back: int_gauge(
                &r,
                "market_data_tracker_held_back_wallets",
                "Wallets whose last read the database refused: served as last published and tried again later (the log says why).",
            ),
            incomplete_reads: counter(
                &r,
                "market_data_tracker_incomplete_reads_total",
                "Wallet reads not used because a position was in an asset without a mark (the wallet is read again after the dexes).",
            ),
            unchanged_reads: counter(
                &r,
                "market_data_tracker_unchanged_reads_total",
                "Wallet reads that changed nothing to publish: the wallet held nothing before and after (recorded in the registry only).",
            ),
            candle_requests: counter(
                &r,
                "market_data_tracker_candle_requests_total",
                "candleSnapshot requests of the tracker (one every 10 s at most).",
            ),
            spot_trades: counter(
                &r,
                "market_data_tracker_spot_trades_total",
                "Spot trades in the node's trade files, skipped (they find no perp wallet).",
            ),
            members: counter_vec(
                &r,
                "market_data_ingest_account_state_members_total",
                "Account-state members that differ from the documented format without refusing the state: `unknown` (ignored) or `missing` (an optional member; its documented fallback is used), by member path.",
                &["case", "member"],
            ),
            registry: r,
            scrape: Mutex::new(()),
        }
    }

    /// The text exposition of every metric, sampled now.
    pub fn render(&self, started: std::time::Instant) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        let _one_at_a_time = self.scrape.lock().unwrap_or_else(|p| p.into_inner());
        let c = &self.counters;
        sync_counter(&self.requests, c.requests.load(Relaxed));
        sync_counter(&self.weight, c.weight.load(Relaxed));
        sync_counter(&self.failures, c.failures.load(Relaxed));
        let now = unix_now();
        let mut ok = c.wallets_ok.load(Relaxed);
        let mut failed = c.wallets_failed.load(Relaxed);
        let mut last = c.last_version_at.load(Relaxed) as f64;
        for ((case, member), n) in c
            .field_cases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            sync_counter(
                &self
                    .members
                    .with_label_values(&[case.as_str(), member.as_str()]),
                *n,
            );
        }
        if let Some(tracker) = &self.tracker {
            let s = &tracker.stats;
            ok += s.reads_ok.load(Relaxed);
            failed += s.reads_failed.load(Relaxed);
            sync_counter(&self.discovered, s.discovered.load(Relaxed));
            sync_counter(
                &self.publishes.with_label_values(&["ok"]),
                s.publishes.load(Relaxed),
            );
            sync_counter(
                &self.publishes.with_label_values(&["failed"]),
                s.publish_failures.load(Relaxed),
            );
            sync_counter(&self.publishes_failed, s.publish_failures.load(Relaxed));
            self.held_back.set(s.held_back.load(Relaxed) as i64);
            sync_counter(&self.incomplete_reads, s.reads_incomplete.load(Relaxed));
            sync_counter(&self.unchanged_reads, s.reads_unchanged.load(Relaxed));
            sync_counter(&self.candle_requests, s.candle_requests.load(Relaxed));
            sync_counter(&self.spot_trades, s.spot_trades.load(Relaxed));
            let published = s.last_publish_at.load(Relaxed) as f64;
            self.publish_age.set(if published > 0.0 {
                (now - published).max(0.0)
            } else {
                started.elapsed().as_secs_f64()
            });
            last = last.max(published);
            for (tier, f) in market_tracker::Tier::ALL.iter().zip(tracker.freshness()) {
                let name = [tier.name()];
                self.tier_wallets
                    .with_label_values(&name)
                    .set(f.wallets as i64);
                self.tier_unread
                    .with_label_values(&name)
                    .set(f.unread as i64);
                let oldest = f
                    .oldest_read
                    .map_or(0.0, |at| (now - at.unix_timestamp() as f64).max(0.0));
                self.tier_oldest.with_label_values(&name).set(oldest as i64);
            }
        }
        sync_counter(&self.wallets.with_label_values(&["ok"]), ok);
        sync_counter(&self.wallets.with_label_values(&["failed"]), failed);
        self.last_version.set(last);
        self.since_version.set(if last > 0.0 {
            (now - last).max(0.0)
        } else {
            started.elapsed().as_secs_f64()
        });
        encode(&self.registry)
    }
}

/// Serves `GET /metrics` with `render`'s text on `listener`, from a thread
/// of its own (one worker), until the process exits.
pub fn spawn_endpoint(
    listener: TcpListener,
    render: Arc<dyn Fn() -> String + Send + Sync>,
) -> std::io::Result<()> {
    use actix_web::{web, App, HttpResponse, HttpServer};
    let addr = listener.local_addr()?;
    std::thread::Builder::new()
        .name("metrics-http".into())
        .spawn(move || {
            let served = actix_web::rt::System::new().block_on(async move {
                HttpServer::new(move || {
                    let render = render.clone();
                    App::new().route(
                        "/metrics",
                        web::get().to(move || {
                            let render = render.clone();
                            async move {
                                // Sampling takes locks (the tracker's registry): off the worker.
                                match web::block(move || render()).await {
                                    Ok(text) => {
                                        HttpResponse::Ok().content_type(TEXT_FORMAT).body(text)
                                    }
                                    Err(_) => HttpResponse::InternalServerError().finish(),
                                }
                            }
                        }),
                    )
                })
                .workers(1)
                .disable_signals()
                .listen(listener)?
                .run()
                .await
            });
            if let Err(e) = served {
                log::error!("the metrics endpoint stopped: {e}");
            }
        })?;
    log::info!("metrics at http://{addr}/metrics");
    Ok(())
}
