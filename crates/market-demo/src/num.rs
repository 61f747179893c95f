//! Exact integer arithmetic on fixed-point values, the Hyperliquid price grid,
//! and the few random distributions the generator needs.
//!
//! Every decimal the generator emits is built from an integer mantissa and a
//! scale ([`dec_fixed`], [`dec_norm`]); floating point is only used to *choose*
//! values, which are then rounded to an integer grid.

use bigdecimal::num_bigint::BigInt;
use bigdecimal::{BigDecimal, ToPrimitive};
use market_model::Decimal;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// `10^n` as `i64` (`n <= 18`).
pub(crate) const fn pow10(n: u32) -> i64 {
    10i64.pow(n)
}

/// The decimal `mantissa × 10^-scale`, keeping the scale (`1.50` stays `1.50`).
pub(crate) fn dec_fixed(mantissa: i64, scale: u32) -> Decimal {
    Decimal(BigDecimal::new(BigInt::from(mantissa), i64::from(scale)))
}

/// The decimal `mantissa × 10^-scale` without trailing fractional zeros (`1.50` → `1.5`).
pub(crate) fn dec_norm(mut mantissa: i64, mut scale: u32) -> Decimal {
    while scale > 0 && mantissa % 10 == 0 {
        mantissa /= 10;
        scale -= 1;
    }
    dec_fixed(mantissa, scale)
}

/// `a / b` rounded half away from zero (`b > 0`).
pub(crate) fn div_round(a: i128, b: i128) -> i128 {
    debug_assert!(b > 0);
    let q = a / b;
    let r = a % b;
    if 2 * r.abs() >= b {
        q + a.signum()
    } else {
        q
    }
}

/// `x` rounded half away from zero to an integer, saturating.
pub(crate) fn round_i64(x: f64) -> i64 {
    x.round() as i64
}

/// `value` as cents (2 dp), rounded half away from zero.
pub(crate) fn cents(value: f64) -> i64 {
    round_i64(value * 100.0)
}

/// The value of a decimal as `f64` (for choosing, never for output).
pub(crate) fn to_f64(d: &Decimal) -> f64 {
    d.0.to_f64().unwrap_or(0.0)
}

/// Number of decimal digits of `|v|` (1 for 0).
fn digits(v: i64) -> u32 {
    let mut v = v.unsigned_abs();
    let mut n = 1;
    while v >= 10 {
        v /= 10;
        n += 1;
    }
    n
}

/// Step of the price grid near `v`, where `v` counts units of `10^-scale`:
/// at most 5 significant figures (whole numbers are always allowed) and at
/// most `max_dec` decimals.
pub(crate) fn grid_step(v: i64, scale: u32, max_dec: u32) -> i64 {
    let n = digits(v);
    let sig = if n > 5 { pow10(n - 5) } else { 1 };
    let finest = if scale > max_dec {
        pow10(scale - max_dec)
    } else {
        1
    };
    sig.min(pow10(scale)).max(finest)
}

/// `v` rounded to the nearest grid point (see [`grid_step`]).
pub(crate) fn snap_round(v: i64, scale: u32, max_dec: u32) -> i64 {
    let s = grid_step(v, scale, max_dec);
    (div_round(i128::from(v), i128::from(s)) as i64) * s
}

/// The largest grid point `<= v`.
pub(crate) fn snap_floor(v: i64, scale: u32, max_dec: u32) -> i64 {
    let s = grid_step(v, scale, max_dec);
    v.div_euclid(s) * s
}

/// The smallest grid point `>= v`.
pub(crate) fn snap_ceil(v: i64, scale: u32, max_dec: u32) -> i64 {
    let s = grid_step(v, scale, max_dec);
    -(-v).div_euclid(s) * s
}

/// A price in units of `10^-max_dec`: `x` rounded to 5 significant figures
/// and at most `max_dec` decimals (Hyperliquid's rule for perpetuals, where
/// `max_dec = 6 − szDecimals`). Returns 0 for prices that round to nothing.
pub(crate) fn price_units(x: f64, max_dec: u32) -> i64 {
    if x.is_nan() || x <= 0.0 {
        return 0;
    }
    let v = round_i64(x * pow10(max_dec) as f64);
    snap_round(v, max_dec, max_dec)
}

/// A uniform draw in `[0, 1)`.
pub(crate) fn unit(rng: &mut ChaCha8Rng) -> f64 {
    rng.random::<f64>()
}

/// A uniform draw in `[lo, hi)`.
pub(crate) fn uniform(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * unit(rng)
}

/// A standard normal draw (Box–Muller).
pub(crate) fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1 = 1.0 - unit(rng); // (0, 1]
    let u2 = unit(rng);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A fat-tailed, roughly unit-variance shock: normal, occasionally scaled up.
pub(crate) fn fat_shock(rng: &mut ChaCha8Rng) -> f64 {
    let z = normal(rng);
    if unit(rng) < 0.03 {
        z * 3.0
    } else {
        z * 0.95
    }
}

/// A log-normal draw with the given median and log-space sigma.
pub(crate) fn lognormal(rng: &mut ChaCha8Rng, median: f64, sigma: f64) -> f64 {
    median * (sigma * normal(rng)).exp()
}

/// A Pareto draw with minimum `min` and tail index `alpha`.
pub(crate) fn pareto(rng: &mut ChaCha8Rng, min: f64, alpha: f64) -> f64 {
    let u = 1.0 - unit(rng); // (0, 1]
    min / u.powf(1.0 / alpha)
}

/// A Poisson-like count with mean `lambda` (exact for small means, a
/// rounded normal approximation for large ones).
pub(crate) fn poisson(rng: &mut ChaCha8Rng, lambda: f64) -> u64 {
    if lambda.is_nan() || lambda <= 0.0 {
        return 0;
    }
    if lambda < 30.0 {
        let limit = (-lambda).exp();
        let mut k = 0u64;
        let mut p = unit(rng);
        while p > limit {
            k += 1;
            p *= unit(rng);
        }
        k
    } else {
        round_i64(lambda + lambda.sqrt() * normal(rng)).max(0) as u64
    }
}

/// An index drawn with the given weights (cumulative, ascending, last = total).
pub(crate) fn pick_cumulative(rng: &mut ChaCha8Rng, cumulative: &[f64]) -> usize {
    let total = *cumulative.last().expect("non-empty weights");
    let x = unit(rng) * total;
    cumulative
        .partition_point(|&c| c <= x)
        .min(cumulative.len() - 1)
}

/// An index drawn with the given (non-cumulative) weights.
pub(crate) fn pick_weighted(rng: &mut ChaCha8Rng, weights: &[f64]) -> usize {
    let total: f64 = weights.iter().sum();
    let mut x = unit(rng) * total;
    for (i, w) in weights.iter().enumerate() {
        if x < *w {
            return i;
        }
        x -= w;
    }
    weights.len() - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn price_grid_has_five_significant_figures() {
        // BTC: szDecimals 5 → 1 decimal allowed, 5 significant figures.
        assert_eq!(price_units(92_345.67, 1), 923_460);
        assert_eq!(dec_norm(923_460, 1).to_string(), "92346");
        // whole numbers are always allowed
        assert_eq!(dec_norm(price_units(123_456.7, 1), 1).to_string(), "123457");
        // kPEPE: szDecimals 0 → 6 decimals
        assert_eq!(
            dec_norm(price_units(0.0112346, 6), 6).to_string(),
            "0.011235"
        );
        // tiny prices are capped at 6 decimals
        assert_eq!(
            dec_norm(price_units(0.000123456, 6), 6).to_string(),
            "0.000123"
        );
        assert_eq!(dec_norm(price_units(3.456789, 4), 4).to_string(), "3.4568");
        assert_eq!(price_units(0.0000001, 6), 0);
    }

    #[test]
    fn snapping_stays_on_grid() {
        let v = 902_499; // 90249.9 at scale 1
        assert_eq!(snap_floor(v, 1, 1), 902_490);
        assert_eq!(snap_ceil(v, 1, 1), 902_500);
        assert_eq!(snap_ceil(999_999, 1, 1), 1_000_000);
        // a finer working scale still honours the decimal cap
        assert_eq!(grid_step(123, 7, 6), 10);
    }

    #[test]
    fn rounding_is_half_away_from_zero() {
        assert_eq!(div_round(5, 2), 3);
        assert_eq!(div_round(-5, 2), -3);
        assert_eq!(div_round(4, 3), 1);
        assert_eq!(div_round(-4, 3), -1);
        assert_eq!(dec_fixed(-791, 2).to_string(), "-7.91");
        assert_eq!(dec_fixed(0, 2).to_string(), "0.00");
        assert_eq!(dec_norm(0, 6).to_string(), "0");
    }
}
