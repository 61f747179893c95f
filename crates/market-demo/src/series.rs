//! Price and volume series: hourly candles for the whole window and minute
//! candles for the last 24 hours, from a random walk with a common market
//! factor, volatility clustering, fat tails and intraday seasonality.
//!
//! The walk is anchored at its end: the last close is the asset's target
//! price, and every earlier close is derived backwards from the returns, so
//! prices stay near the plausible current levels whatever the seed.

use market_engine::candles::rollup;
use market_model::{Candle, Interval};
use rand_chacha::ChaCha8Rng;

use crate::assets::Asset;
use crate::num::{
    dec_fixed, dec_norm, fat_shock, lognormal, normal, poisson, pow10, price_units, round_i64,
};

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 86_400_000;

/// The shared time grid of every asset's candles.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TimeGrid {
    /// Open time (epoch ms) of the first hourly candle.
    pub first_hour: i64,
    /// Number of hourly candles; the last one contains `now`.
    pub n_hours: usize,
    /// Open time of the first minute candle: 23 hours before the last hour.
    pub first_minute: i64,
    /// Number of minute candles; the last one contains `now`.
    pub n_minutes: usize,
}

impl TimeGrid {
    /// The grid for `now_ms` with `days` days of hourly candles (at least 2).
    pub fn new(now_ms: i64, days: u32) -> TimeGrid {
        let n_hours = days.max(2) as usize * 24;
        let last_hour = now_ms.div_euclid(HOUR_MS) * HOUR_MS;
        let first_minute = last_hour - 23 * HOUR_MS;
        let last_minute = now_ms.div_euclid(MINUTE_MS) * MINUTE_MS;
        TimeGrid {
            first_hour: last_hour - (n_hours as i64 - 1) * HOUR_MS,
            n_hours,
            first_minute,
            n_minutes: ((last_minute - first_minute) / MINUTE_MS) as usize + 1,
        }
    }

    /// Hourly candles that are not built from minute candles.
    pub fn n_hourly_only(&self) -> usize {
        self.n_hours - 24
    }

    /// Open time of hourly candle `i`.
    pub fn hour_time(&self, i: usize) -> i64 {
        self.first_hour + i as i64 * HOUR_MS
    }
}

/// Trading activity by time of day and weekday (1.0 on average-ish).
fn activity(ms: i64) -> f64 {
    let hour = ms.rem_euclid(DAY_MS) as f64 / HOUR_MS as f64;
    // 1970-01-01 was a Thursday: day 2 and 3 of the week (mod 7) are Sat and Sun.
    let weekday = ms.div_euclid(DAY_MS).rem_euclid(7);
    let weekend = if weekday == 2 || weekday == 3 {
        0.7
    } else {
        1.0
    };
    (0.65 + 0.35 * (1.0 + (std::f64::consts::TAU * (hour - 15.0) / 24.0).cos())) * weekend
}

/// A log-volatility process with slow mean reversion (volatility clustering).
struct VolState(f64);

impl VolState {
    fn step(&mut self, rng: &mut ChaCha8Rng, persistence: f64, noise: f64) -> f64 {
        self.0 = persistence * self.0 + noise * normal(rng);
        (self.0 - noise * noise / (2.0 * (1.0 - persistence * persistence))).exp()
    }
}

/// The common market factor: standardized shocks and volatility multipliers.
pub(crate) struct Factor {
    hour_z: Vec<f64>,
    hour_vol: Vec<f64>,
    minute_z: Vec<f64>,
}

impl Factor {
    /// Draws the factor for the whole grid.
    pub fn new(grid: &TimeGrid, rng: &mut ChaCha8Rng) -> Factor {
        let mut vol = VolState(0.0);
        let hour_vol: Vec<f64> = (0..grid.n_hours)
            .map(|_| vol.step(rng, 0.97, 0.12))
            .collect();
        let hour_z = (0..grid.n_hours).map(|_| fat_shock(rng)).collect();
        let minute_z = (0..grid.n_minutes).map(|_| fat_shock(rng)).collect();
        Factor {
            hour_z,
            hour_vol,
            minute_z,
        }
    }
}

/// The candles of one asset.
pub(crate) struct Series {
    /// Hourly candles, ascending; the last 24 are roll-ups of `m1`.
    pub h1: Vec<Candle>,
    /// Minute candles of the last 24 hours (up to `now`), ascending.
    pub m1: Vec<Candle>,
    /// Close of every hourly candle in price units (`10^-price_decimals`).
    pub h1_close: Vec<i64>,
}

struct Bar {
    ret: f64,
    trades: u64,
    range: f64,
}

/// Generates the candles of one asset.
pub(crate) fn generate(
    asset: &Asset,
    grid: &TimeGrid,
    factor: &Factor,
    rng: &mut ChaCha8Rng,
) -> Series {
    let rho = asset.correlation;
    let idio = (1.0 - rho * rho).sqrt();
    let sigma_h = asset.hourly_vol;
    let sigma_m = sigma_h / 60f64.sqrt();
    let mu_h = asset.drift / grid.n_hours as f64;
    let trades_per_hour = asset.daily_volume_usd / asset.avg_trade_usd / 24.0;
    let hourly_only = grid.n_hourly_only();
    let mut own_vol = VolState(0.0);

    // Returns, trade counts and intrabar ranges, oldest first.
    let mut hours: Vec<Bar> = Vec::with_capacity(hourly_only);
    let mut minutes: Vec<Bar> = Vec::with_capacity(grid.n_minutes);
    for i in 0..grid.n_hours {
        let fv = factor.hour_vol[i];
        let iv = own_vol.step(rng, 0.96, 0.15);
        let vol_mult = (rho * rho * fv * fv + idio * idio * iv * iv).sqrt();
        let t = grid.hour_time(i);
        if i < hourly_only {
            let z = rho * factor.hour_z[i] * fv + idio * fat_shock(rng) * iv;
            let ret = sigma_h * z + mu_h;
            let lambda = trades_per_hour * activity(t) * vol_mult * (0.6 + 0.4 * z.abs());
            let noise = (0.3 * normal(rng)).exp();
            let trades = poisson(rng, lambda * noise);
            let ret = if trades == 0 { 0.0 } else { ret };
            hours.push(Bar {
                ret,
                trades,
                range: sigma_h * vol_mult,
            });
        } else {
            let first = (i - hourly_only) * 60;
            let last = (first + 60).min(grid.n_minutes);
            for j in first..last {
                let tm = grid.first_minute + j as i64 * MINUTE_MS;
                let z = rho * factor.minute_z[j] * fv + idio * fat_shock(rng) * iv;
                let ret = sigma_m * z + mu_h / 60.0;
                let lambda =
                    trades_per_hour / 60.0 * activity(tm) * vol_mult * (0.6 + 0.4 * z.abs());
                let noise = (0.3 * normal(rng)).exp();
                let trades = poisson(rng, lambda * noise);
                let ret = if trades == 0 { 0.0 } else { ret };
                minutes.push(Bar {
                    ret,
                    trades,
                    range: sigma_m * vol_mult,
                });
            }
        }
    }

    // Anchor at the end: log closes backwards from the target price.
    let mut log_close = asset.target_price.ln();
    let mut minute_close = vec![0.0; minutes.len()];
    for (j, bar) in minutes.iter().enumerate().rev() {
        minute_close[j] = log_close;
        log_close -= bar.ret;
    }
    let mut hour_close = vec![0.0; hours.len()];
    for (i, bar) in hours.iter().enumerate().rev() {
        hour_close[i] = log_close;
        log_close -= bar.ret;
    }

    let dec = asset.price_decimals;
    let mut prev = price_units(log_close.exp(), dec).max(1);
    let mut builder = CandleBuilder { asset, rng };
    let mut h1 = Vec::with_capacity(grid.n_hours);
    let mut h1_close = Vec::with_capacity(grid.n_hours);
    for (i, bar) in hours.iter().enumerate() {
        let close = price_units(hour_close[i].exp(), dec).max(1);
        h1.push(builder.candle(grid.hour_time(i), prev, close, bar, 0.6));
        h1_close.push(close);
        prev = close;
    }
    let mut m1 = Vec::with_capacity(minutes.len());
    for (j, bar) in minutes.iter().enumerate() {
        let close = price_units(minute_close[j].exp(), dec).max(1);
        m1.push(builder.candle(
            grid.first_minute + j as i64 * MINUTE_MS,
            prev,
            close,
            bar,
            0.5,
        ));
        prev = close;
        // The rolled-up hours close where their last minute closes.
        if j % 60 == 59 || j + 1 == minutes.len() {
            h1_close.push(close);
        }
    }
    h1.extend(rollup(&m1, Interval::H1));
    debug_assert_eq!(h1.len(), grid.n_hours);
    debug_assert_eq!(h1_close.len(), grid.n_hours);
    Series { h1, m1, h1_close }
}

struct CandleBuilder<'a> {
    asset: &'a Asset,
    rng: &'a mut ChaCha8Rng,
}

impl CandleBuilder<'_> {
    fn candle(&mut self, time: i64, open: i64, close: i64, bar: &Bar, excursion: f64) -> Candle {
        let dec = self.asset.price_decimals;
        let sz = self.asset.sz_decimals;
        let scale = pow10(dec) as f64;
        let (mut high, mut low) = (open.max(close), open.min(close));
        let mut volume = 0;
        if bar.trades > 0 {
            let up = (bar.range * excursion * normal(self.rng).abs()).exp();
            let down = (-bar.range * excursion * normal(self.rng).abs()).exp();
            high = high.max(price_units(high as f64 / scale * up, dec));
            low = low.min(price_units(low as f64 / scale * down, dec)).max(1);
            let usd = bar.trades as f64 * self.asset.avg_trade_usd * lognormal(self.rng, 1.0, 0.5);
            let mid = (high + low) as f64 / 2.0 / scale;
            volume = round_i64(usd / mid * pow10(sz) as f64).max(1);
        }
        Candle::at(
            time,
            dec_norm(open, dec),
            dec_norm(high, dec),
            dec_norm(low, dec),
            dec_norm(close, dec),
            dec_fixed(volume, sz),
            bar.trades,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_ends_with_the_hour_and_minute_of_now() {
        let now = (time::macros::datetime!(2026-11-22 02:30:15.250 UTC).unix_timestamp_nanos()
            / 1_000_000) as i64;
        let g = TimeGrid::new(now, 90);
        assert_eq!(g.n_hours, 2160);
        let last_hour = g.hour_time(g.n_hours - 1);
        assert!(last_hour <= now && now < last_hour + HOUR_MS);
        assert_eq!(g.first_minute, last_hour - 23 * HOUR_MS);
        let last_minute = g.first_minute + (g.n_minutes as i64 - 1) * MINUTE_MS;
        assert!(last_minute <= now && now < last_minute + MINUTE_MS);
        assert_eq!(g.n_minutes, 23 * 60 + 31);
    }
}
