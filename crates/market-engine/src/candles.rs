//! Candle periods and roll-ups of finer candles into coarser intervals.

use market_model::{Candle, Decimal, Interval};
use time::{Date, Month, OffsetDateTime, Time};

const DAY_MS: i64 = 86_400_000;
/// 1970-01-05, the first Monday after the epoch.
const FIRST_MONDAY_MS: i64 = 4 * DAY_MS;

fn month_start(ms: i64) -> i64 {
    let t = OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let d = Date::from_calendar_date(t.year(), t.month(), 1).expect("day 1 exists");
    d.with_time(Time::MIDNIGHT).assume_utc().unix_timestamp() * 1000
}

/// The open time (epoch ms) of the `interval` period containing `ms`.
pub fn period_start(interval: Interval, ms: i64) -> i64 {
    match interval {
        Interval::Mo1 => month_start(ms),
        Interval::W1 => {
            let len = Interval::W1.nominal_ms();
            (ms - FIRST_MONDAY_MS).div_euclid(len) * len + FIRST_MONDAY_MS
        }
        other => {
            let len = other.nominal_ms();
            ms.div_euclid(len) * len
        }
    }
}

/// The open time of the period after the one starting at `start`.
pub fn next_period(interval: Interval, start: i64) -> i64 {
    match interval {
        Interval::Mo1 => {
            let t = OffsetDateTime::from_unix_timestamp_nanos(start as i128 * 1_000_000)
                .unwrap_or(OffsetDateTime::UNIX_EPOCH);
            let (y, m) = if t.month() == Month::December {
                (t.year() + 1, Month::January)
            } else {
                (t.year(), t.month().next())
            };
            Date::from_calendar_date(y, m, 1)
                .expect("day 1 exists")
                .with_time(Time::MIDNIGHT)
                .assume_utc()
                .unix_timestamp()
                * 1000
        }
        other => start + other.nominal_ms(),
    }
}

/// The open time `n` periods before the period starting at `start` (for default windows).
pub fn periods_back(interval: Interval, start: i64, n: u32) -> i64 {
    match interval {
        Interval::Mo1 => {
            let t = OffsetDateTime::from_unix_timestamp_nanos(start as i128 * 1_000_000)
                .unwrap_or(OffsetDateTime::UNIX_EPOCH);
            let months = t.year() as i64 * 12 + (t.month() as i64 - 1) - n as i64;
            let (y, m) = (
                months.div_euclid(12) as i32,
                months.rem_euclid(12) as u8 + 1,
            );
            match Date::from_calendar_date(y, Month::try_from(m).expect("1..=12"), 1) {
                Ok(d) => d.with_time(Time::MIDNIGHT).assume_utc().unix_timestamp() * 1000,
                Err(_) => i64::MIN / 2,
            }
        }
        other => start.saturating_sub(other.nominal_ms().saturating_mul(n as i64)),
    }
}

/// The finest stored interval that `target` can be rolled up from, among `stored`.
/// A target is built from a source whose periods nest in it exactly.
pub fn rollup_source(target: Interval, stored: &[Interval]) -> Option<Interval> {
    if stored.contains(&target) {
        return Some(target);
    }
    let nests = |src: Interval| -> bool {
        let s = src.nominal_ms();
        s < target.nominal_ms()
            && match target {
                // months and Monday-aligned weeks are whole days, and days are whole hours
                Interval::Mo1 | Interval::W1 => DAY_MS % s == 0,
                t => t.nominal_ms() % s == 0,
            }
    };
    stored
        .iter()
        .copied()
        .filter(|s| nests(*s))
        .max_by_key(|s| s.nominal_ms())
}

/// Rolls ascending candles of a finer interval up into `target` periods
/// (UTC-aligned): open of the first, close of the last, extreme high and low,
/// summed volume and trades. A period with no source candle produces no candle.
pub fn rollup(source: &[Candle], target: Interval) -> Vec<Candle> {
    let mut out: Vec<Candle> = Vec::new();
    for c in source {
        let start = period_start(target, c.time);
        match out.last_mut() {
            Some(last) if last.time == start => {
                if c.high.0 > last.high.0 {
                    last.high = c.high.clone();
                }
                if c.low.0 < last.low.0 {
                    last.low = c.low.clone();
                }
                last.close = c.close.clone();
                last.volume = Decimal(&last.volume.0 + &c.volume.0);
                last.trades += c.trades;
            }
            _ => out.push(Candle::at(
                start,
                c.open.clone(),
                c.high.clone(),
                c.low.clone(),
                c.close.clone(),
                c.volume.clone(),
                c.trades,
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn ms(t: OffsetDateTime) -> i64 {
        (t.unix_timestamp_nanos() / 1_000_000) as i64
    }

    fn c(t: i64, o: &str, h: &str, l: &str, cl: &str, v: &str, n: u64) -> Candle {
        Candle::at(
            t,
            o.parse().unwrap(),
            h.parse().unwrap(),
            l.parse().unwrap(),
            cl.parse().unwrap(),
            v.parse().unwrap(),
            n,
        )
    }

    #[test]
    fn periods_align_to_utc() {
        let t = ms(datetime!(2026-11-19 13:47:12 UTC)); // a Thursday
        assert_eq!(
            period_start(Interval::H4, t),
            ms(datetime!(2026-11-19 12:00 UTC))
        );
        assert_eq!(
            period_start(Interval::D1, t),
            ms(datetime!(2026-11-19 00:00 UTC))
        );
        assert_eq!(
            period_start(Interval::W1, t),
            ms(datetime!(2026-11-16 00:00 UTC))
        );
        assert_eq!(
            period_start(Interval::Mo1, t),
            ms(datetime!(2026-11-01 00:00 UTC))
        );
        assert_eq!(
            period_start(Interval::M15, t),
            ms(datetime!(2026-11-19 13:45 UTC))
        );
        assert_eq!(
            next_period(Interval::Mo1, ms(datetime!(2026-12-01 00:00 UTC))),
            ms(datetime!(2027-01-01 00:00 UTC))
        );
        assert_eq!(
            periods_back(Interval::Mo1, ms(datetime!(2026-02-01 00:00 UTC)), 3),
            ms(datetime!(2025-11-01 00:00 UTC))
        );
    }

    #[test]
    fn rolls_up_ohlcv() {
        let h = 3_600_000;
        let base = ms(datetime!(2026-11-19 00:00 UTC));
        let src = vec![
            c(base, "10", "12", "9", "11", "1.5", 3),
            c(base + h, "11", "15", "10", "14", "2", 4),
            c(base + 2 * h, "14", "14", "8", "9", "0.5", 1),
            c(base + 4 * h, "9", "10", "9", "10", "1", 1),
        ];
        let out = rollup(&src, Interval::H4);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].time, base);
        assert_eq!(
            (
                out[0].open.to_string(),
                out[0].high.to_string(),
                out[0].low.to_string(),
                out[0].close.to_string()
            ),
            ("10".into(), "15".into(), "8".into(), "9".into())
        );
        assert_eq!(out[0].volume.to_string(), "4.0");
        assert_eq!(out[0].trades, 8);
        assert_eq!(out[1].time, base + 4 * h);
    }

    #[test]
    fn picks_nesting_source() {
        let stored = [Interval::M1, Interval::H1];
        assert_eq!(rollup_source(Interval::H4, &stored), Some(Interval::H1));
        assert_eq!(rollup_source(Interval::M15, &stored), Some(Interval::M1));
        assert_eq!(rollup_source(Interval::Mo1, &stored), Some(Interval::H1));
        assert_eq!(rollup_source(Interval::H1, &stored), Some(Interval::H1));
        assert_eq!(rollup_source(Interval::M3, &[Interval::H1]), None);
    }
}
