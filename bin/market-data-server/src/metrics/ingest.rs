//! The metrics of `scan` and `track`: requests to the exchange, the
//! tracker's tiers and publishes, and the freshness of what they read.

use std::sync::{Arc, Mutex};

use prometheus::{Gauge, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};

use super::registry::{
    counter, counter_vec, encode, gauge, gauge_vec, int_gauge, sync_counter, unix_now,
};

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
