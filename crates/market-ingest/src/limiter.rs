//! A weight budget per window, shared by every request of a scan.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Admits requests so that no window of `window` length carries more than
/// `budget` weight: a bucket of at most `burst` tokens, starting empty and
/// refilled at `(budget − burst) / window`, so what is saved up plus what is
/// refilled within any window never exceeds the budget.
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
        let budget_f = f64::from(budget.max(2));
        // Room for two of the heaviest requests, but never more than half the budget.
        let burst = (f64::from(max_weight) * 2.0).min(budget_f / 2.0).max(1.0);
        WeightLimiter {
            budget,
            burst,
            rate_per_sec: (budget_f - burst) / window.as_secs_f64(),
            // Start empty: a new scan right after another one cannot add a
            // fresh burst to a window the previous scan already filled.
            state: Mutex::new((0.0, Instant::now())),
        }
    }

    /// The configured budget per window.
    pub fn budget(&self) -> u32 {
        self.budget
    }

    /// Blocks until `weight` may be spent. Callers are served in the order
    /// they ask: each reserves its weight at once (the bucket may go into
    /// debt) and sleeps until the refill has paid for it. A heavy request
    /// therefore waits behind the requests already queued, never behind
    /// every light request that arrives after it (a plain token bucket let
    /// eight readers of weight 2 starve a weight-20 request for good).
    pub fn acquire(&self, weight: u32) {
        std::thread::sleep(self.reserve(weight));
    }

    /// [`WeightLimiter::acquire`] that gives up its wait as soon as
    /// `stopped` says so (checked every 100 ms); returns whether the weight
    /// may be spent. The weight a given-up wait reserved stays spent.
    pub fn acquire_unless(&self, weight: u32, stopped: impl Fn() -> bool) -> bool {
        nap_unless(self.reserve(weight), stopped)
    }

    /// Reserves `weight` (the bucket may go into debt) and returns how
    /// long the caller must wait before spending it.
    fn reserve(&self, weight: u32) -> Duration {
        let weight = f64::from(weight).min(self.burst);
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        s.0 = (s.0 + now.duration_since(s.1).as_secs_f64() * self.rate_per_sec).min(self.burst);
        s.1 = now;
        s.0 -= weight;
        if s.0 >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-s.0 / self.rate_per_sec)
        }
    }

    /// Sustained weight per second.
    pub fn rate_per_sec(&self) -> f64 {
        self.rate_per_sec
    }
}

/// Sleeps `d`, in steps of at most 100 ms, until `stopped` says so;
/// returns whether it slept the whole time.
pub fn nap_unless(d: Duration, stopped: impl Fn() -> bool) -> bool {
    let until = Instant::now() + d;
    loop {
        if stopped() {
            return false;
        }
        let now = Instant::now();
        if now >= until {
            return true;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(100)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_for_the_budget_gives_up_when_stopped() {
        // 60 weight a minute, starting empty: 20 more takes about 40 s.
        let limiter = WeightLimiter::new(60, Duration::from_secs(60), 20);
        let started = Instant::now();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let spent = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(200));
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            });
            limiter.acquire_unless(20, || stop.load(std::sync::atomic::Ordering::Relaxed))
        });
        assert!(!spent, "not admitted");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(200) && took < Duration::from_secs(2),
            "{took:?}"
        );
    }

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
        // starts empty; refill (100 - 40) per 0.5 s over 1.6 s: about 192 at most
        assert!(
            log.len() as u32 * 2 >= 170,
            "the budget is used: {}",
            log.len() * 2
        );
    }

    #[test]
    fn heavy_requests_do_not_starve_behind_light_ones() {
        // 100 weight per 0.5 s (burst 40, 120 a second); four threads keep
        // asking for 2 while a request of 20 asks once.
        let limiter = std::sync::Arc::new(WeightLimiter::new(100, Duration::from_millis(500), 20));
        let stop = std::sync::atomic::AtomicBool::new(false);
        let took = std::thread::scope(|s| {
            for _ in 0..4 {
                let (limiter, stop) = (limiter.clone(), &stop);
                s.spawn(move || {
                    // Bounded, so a starving limiter fails the test instead of hanging it.
                    let started = Instant::now();
                    while !stop.load(std::sync::atomic::Ordering::Relaxed)
                        && started.elapsed() < Duration::from_secs(3)
                    {
                        limiter.acquire(2);
                    }
                });
            }
            std::thread::sleep(Duration::from_millis(200));
            let start = Instant::now();
            limiter.acquire(20);
            let took = start.elapsed();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            took
        });
        // Behind at most four queued requests of 2: (20 + 8) / 120 s ≈ 0.23 s.
        assert!(
            took < Duration::from_secs(2),
            "the heavy request waited {took:?}"
        );
    }
}
