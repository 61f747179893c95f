//! Token usage, counted in memory per request and written in batches.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use market_store::{StoreError, UsageRow};
use time::OffsetDateTime;

use super::AppState;

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
                // Same cadence, unrelated chore: drop the failed-auth state
                // of addresses that stopped failing.
                state.limits.forget_idle();
            })
            .expect("spawning a thread");
    }
}
