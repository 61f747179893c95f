//! When to try again: exponential backoff with jitter, `Retry-After`, and
//! when an endpoint has failed long enough to be disabled. Pure functions of
//! their inputs, so the deliverer's model test can check every decision.

use std::time::Duration;

use time::OffsetDateTime;

/// The first retry's delay (before jitter).
pub const FIRST_RETRY: Duration = Duration::from_secs(5);
/// The longest delay between two attempts of one delivery (before jitter).
/// Short enough that a receiver back from an outage gets its backlog within
/// minutes; a failing endpoint costs at most one request per this much.
pub const MAX_RETRY: Duration = Duration::from_secs(300);
/// An endpoint whose oldest pending delivery has failed for this long is
/// disabled (its deliveries wait; `webhook enable` resumes them).
pub const DISABLE_AFTER: Duration = Duration::from_secs(24 * 3600);
/// The longest `Retry-After` honoured as given; longer ones wait this long.
pub const MAX_RETRY_AFTER: Duration = DISABLE_AFTER;

/// The delay before the next attempt after the `attempts`-th failed one
/// (1 for the first): `FIRST_RETRY · 2^(attempts-1)`, at most `MAX_RETRY`,
/// scaled by `0.5 + jitter/2` (`jitter` in `[0, 1)`), so that endpoints
/// that failed together do not all retry together.
pub fn backoff(attempts: u32, jitter: f64) -> Duration {
    let doublings = attempts.saturating_sub(1).min(20);
    let base = FIRST_RETRY.saturating_mul(1u32 << doublings).min(MAX_RETRY);
    base.mul_f64(0.5 + jitter.clamp(0.0, 1.0) / 2.0)
}

/// A `Retry-After` header's delay: seconds, or an HTTP date (RFC 9110),
/// at most [`MAX_RETRY_AFTER`]; `None` when it is neither.
pub fn retry_after(value: &str, now: OffsetDateTime) -> Option<Duration> {
    let value = value.trim();
    let delay = if let Ok(secs) = value.parse::<u64>() {
        Duration::from_secs(secs)
    } else {
        let at =
            OffsetDateTime::parse(value, &time::format_description::well_known::Rfc2822).ok()?;
        let ahead = at - now;
        if ahead.is_negative() {
            Duration::ZERO
        } else {
            ahead.unsigned_abs()
        }
    };
    Some(delay.min(MAX_RETRY_AFTER))
}

/// Whether an endpoint failing since `since` has failed long enough to be
/// disabled at `now`.
pub fn failed_too_long(since: OffsetDateTime, now: OffsetDateTime) -> bool {
    now - since >= DISABLE_AFTER
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn backoff_doubles_up_to_the_cap_with_bounded_jitter() {
        assert_eq!(backoff(1, 1.0), FIRST_RETRY);
        assert_eq!(backoff(1, 0.0), FIRST_RETRY / 2);
        assert_eq!(backoff(2, 1.0), FIRST_RETRY * 2);
        assert_eq!(backoff(4, 1.0), FIRST_RETRY * 8);
        assert_eq!(backoff(7, 1.0), MAX_RETRY);
        assert_eq!(backoff(10_000, 1.0), MAX_RETRY);
        assert_eq!(backoff(10_000, 0.0), MAX_RETRY / 2);
        for attempts in 1..40 {
            assert!(backoff(attempts, 0.3) <= backoff(attempts + 1, 0.3));
        }
    }

    #[test]
    fn retries_span_the_day_before_disabling() {
        // Even with the shortest jitter, a day holds many attempts: the
        // endpoint is disabled by time failing, not by a count.
        let mut t = Duration::ZERO;
        let mut n = 0;
        while t < DISABLE_AFTER {
            n += 1;
            t += backoff(n, 0.0);
        }
        assert!(n > 500, "{n} attempts in a day");
    }

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        let now = datetime!(2026-11-26 12:00:00 UTC);
        assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(
            retry_after("Thu, 26 Nov 2026 12:01:30 GMT", now),
            Some(Duration::from_secs(90))
        );
        assert_eq!(
            retry_after("Thu, 26 Nov 2026 11:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("9999999999", now), Some(MAX_RETRY_AFTER));
        assert_eq!(retry_after("soon", now), None);
        assert_eq!(retry_after("-5", now), None);
    }

    #[test]
    fn a_day_failing_disables() {
        let since = datetime!(2026-11-25 12:00:00 UTC);
        assert!(!failed_too_long(since, datetime!(2026-11-26 11:59:59 UTC)));
        assert!(failed_too_long(since, datetime!(2026-11-26 12:00:00 UTC)));
    }
}
