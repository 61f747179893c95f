//! The time each step of a version's write took, logged at `debug` under
//! this module's target (`RUST_LOG=market_store::steps=debug`): where a
//! publish's time goes, read off a running `track` without a profiler.

use std::time::{Duration, Instant};

/// Steps of one write, each timed from the end of the one before.
pub(crate) struct Steps {
    started: Instant,
    last: Instant,
    done: Vec<(&'static str, Duration)>,
}

impl Steps {
    /// Starts timing.
    pub(crate) fn start() -> Steps {
        let now = Instant::now();
        Steps {
            started: now,
            last: now,
            done: Vec::new(),
        }
    }

    /// The step `name` ended now.
    pub(crate) fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        self.done.push((name, now - self.last));
        self.last = now;
    }

    /// Logs every step of the write `what` (with its total) at `debug`.
    pub(crate) fn log(&self, what: &str) {
        if !log::log_enabled!(log::Level::Debug) {
            return;
        }
        let steps: Vec<String> = self
            .done
            .iter()
            .map(|(name, took)| format!("{name} {:.1}", took.as_secs_f64() * 1e3))
            .collect();
        log::debug!(
            "{what}: {:.1} ms ({}; in ms)",
            self.started.elapsed().as_secs_f64() * 1e3,
            steps.join(", ")
        );
    }
}
