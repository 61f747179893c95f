//! End-of-day liquidation levels of past days, derived from the current
//! levels of each asset: prices follow the asset's price path, counts and
//! amounts are jittered, and some levels are missing (more on older days).

use std::collections::BTreeMap;

use bigdecimal::ToPrimitive;
use market_engine::aggregate::liquidity_day;
use market_engine::bucket_size_for_price;
use market_model::{Coverage, Direction, Level, LiquidityDay};
use rand_chacha::ChaCha8Rng;
use time::{Date, Duration, Time};

use crate::assets::Asset;
use crate::num::{
    dec_fixed, dec_norm, pow10, round_i64, snap_ceil, snap_floor, snap_round, to_f64, uniform, unit,
};
use crate::series::{Series, TimeGrid};
use crate::NETWORK;

const HOUR_MS: i64 = 3_600_000;

/// A current level in floating point, the raw material of past days.
struct Seed {
    side: Direction,
    count: u64,
    usd: f64,
    min: f64,
    max: f64,
}

#[derive(Clone, Copy)]
struct Agg {
    count: u64,
    cents: i64,
    min: i64,
    max: i64,
}

/// The `end_of_day` liquidity days of `asset` for the `days − 1` days before `today`, oldest first.
pub(crate) fn past_days(
    asset: &Asset,
    series: &Series,
    grid: &TimeGrid,
    current: &[Level],
    today: Date,
    days: u32,
    rng: &mut ChaCha8Rng,
) -> Vec<LiquidityDay> {
    let dec = asset.price_decimals;
    let mark = *series.h1_close.last().expect("at least one candle") as f64;
    let seeds: Vec<Seed> = current
        .iter()
        .map(|l| Seed {
            side: l.side,
            count: l.position_count,
            usd: to_f64(&l.total_amount_usd),
            min: to_f64(&l.min_liquidation_price),
            max: to_f64(&l.max_liquidation_price),
        })
        .collect();

    let mut out = Vec::with_capacity(days.saturating_sub(1) as usize);
    for age in (1..days).rev() {
        let date = today - Duration::days(i64::from(age));
        let midnight_ms = date.midnight().assume_utc().unix_timestamp() * 1000;
        let last_hour = midnight_ms + 23 * HOUR_MS;
        let idx =
            ((last_hour - grid.first_hour) / HOUR_MS).clamp(0, grid.n_hours as i64 - 1) as usize;
        let close = series.h1_close[idx];
        let factor = close as f64 / mark;
        let size = bucket_size_for_price(&dec_norm(close, dec).0);

        // Work in units of 10^-scale, fine enough for both the price grid and the bucket size.
        let (mantissa, exponent) = size.0.as_bigint_and_exponent();
        let mantissa = mantissa.to_i64().expect("bucket sizes are small");
        let scale = (dec as i64).max(exponent) as u32;
        let step = mantissa * pow10((i64::from(scale) - exponent) as u32);
        let per_unit = pow10(scale) as f64;
        let bucket_scale = exponent.max(0) as u32;

        let drop = 0.04 + 0.3 * f64::from(age) / f64::from(days);
        let mut merged: BTreeMap<(u8, i64), Agg> = BTreeMap::new();
        for s in &seeds {
            if unit(rng) < drop {
                continue;
            }
            let count = round_i64(s.count as f64 * uniform(rng, 0.7, 1.3)).max(1) as u64;
            let cents =
                round_i64(s.usd * factor * uniform(rng, 0.7, 1.3) * 100.0).max(count as i64 * 1000);
            let (lo_f, hi_f) = (s.min * factor, s.max * factor);
            let mid = round_i64((lo_f + hi_f) / 2.0 * per_unit);
            let bucket = (2 * mid + step).div_euclid(2 * step) * step;
            if bucket <= 0 {
                continue;
            }
            // Members of a bucket b: b − step/2 ≤ price < b + step/2.
            let lo = (bucket - step / 2).max(1);
            let hi = bucket + (step + 1) / 2 - 1;
            let fit = |x: f64| {
                let mut v = snap_round(round_i64(x * per_unit), scale, dec);
                if v < lo {
                    v = snap_ceil(lo, scale, dec);
                }
                if v > hi {
                    v = snap_floor(hi, scale, dec);
                }
                if v < lo || v > hi {
                    bucket
                } else {
                    v
                }
            };
            let (a, b) = (fit(lo_f), fit(hi_f));
            let side = u8::from(s.side == Direction::Short);
            merged
                .entry((side, bucket))
                .and_modify(|g| {
                    g.count += count;
                    g.cents += cents;
                    g.min = g.min.min(a.min(b));
                    g.max = g.max.max(a.max(b));
                })
                .or_insert(Agg {
                    count,
                    cents,
                    min: a.min(b),
                    max: a.max(b),
                });
        }
        let levels: Vec<Level> = merged
            .into_iter()
            .map(|((side, bucket), g)| Level {
                side: if side == 0 {
                    Direction::Long
                } else {
                    Direction::Short
                },
                bucket_price: dec_fixed(bucket / pow10(scale - bucket_scale), bucket_scale),
                position_count: g.count,
                total_amount_usd: dec_fixed(g.cents, 2),
                min_liquidation_price: dec_norm(g.min, scale),
                max_liquidation_price: dec_norm(g.max, scale),
            })
            .collect();
        let updated_at = date
            .with_time(Time::from_hms(23, 59, 59).expect("valid time"))
            .assume_utc();
        out.push(liquidity_day(
            date,
            NETWORK,
            asset.symbol,
            Coverage::EndOfDay,
            size,
            updated_at,
            levels,
        ));
    }
    out
}
