//! A weight budget per window, shared by every request of a scan.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Admits requests so that no window of `window` length carries more than
/// `budget` weight: a bucket of `burst` tokens refilled at
/// `(budget − burst) / window`, so burst plus refill never exceeds the budget.
#[derive(Debug)]
pub struct WeightLimiter {
    budget: u32,
    burst: f64,
    rate_per_sec: f64,
    state: Mutex<(f64, Instant)>,
}

impl WeightLimiter {
    /// `budget` weight per `window` (the exchange: 1200 per minute per IP);
    /// `max_weight` is the heaviest single request.
    pub fn new(budget: u32, window: Duration, max_weight: u32) -> Self {
        let burst = f64::from(max_weight.min(budget)).max(1.0) * 2.0;
        let burst = burst.min(f64::from(budget));
        let refill = (f64::from(budget) - burst).max(1.0);
        WeightLimiter {
            budget,
            burst,
            rate_per_sec: refill / window.as_secs_f64(),
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// The configured budget per window.
    pub fn budget(&self) -> u32 {
        self.budget
    }

    /// Blocks until `weight` may be spent.
    pub fn acquire(&self, weight: u32) {
        let weight = f64::from(weight).min(self.burst);
        loop {
            let wait = {
                let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
                let now = Instant::now();
                s.0 = (s.0 + now.duration_since(s.1).as_secs_f64() * self.rate_per_sec)
                    .min(self.burst);
                s.1 = now;
                if s.0 >= weight {
                    s.0 -= weight;
                    return;
                }
                Duration::from_secs_f64((weight - s.0) / self.rate_per_sec)
            };
            std::thread::sleep(wait.min(Duration::from_millis(250)));
        }
    }

    /// Sustained weight per second.
    pub fn rate_per_sec(&self) -> f64 {
        self.rate_per_sec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_exceeds_the_budget_in_a_window() {
        // 100 weight per 0.5 s; spend 2 at a time from 4 threads for 1.6 s.
        let window = Duration::from_millis(500);
        let limiter = std::sync::Arc::new(WeightLimiter::new(100, window, 20));
        let start = Instant::now();
        let log = std::sync::Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|s| {
            for _ in 0..4 {
                let (limiter, log) = (limiter.clone(), log.clone());
                s.spawn(move || {
                    while start.elapsed() < Duration::from_millis(1600) {
                        limiter.acquire(2);
                        log.lock().unwrap().push(start.elapsed());
                    }
                });
            }
        });
        let log = log.lock().unwrap();
        for &t in log.iter() {
            let in_window = log.iter().filter(|&&u| u >= t && u < t + window).count() as u32 * 2;
            assert!(in_window <= 100, "{in_window} weight in one window");
        }
        // burst 40 + refill (100 - 40) per 0.5 s over 1.6 s: about 232 at most
        assert!(
            log.len() as u32 * 2 >= 200,
            "the budget is used: {}",
            log.len() * 2
        );
    }
}
