//! The liquidation levels of one asset (positions bucketed by liquidation
//! price, per side), on integers when the values fit and on `BigDecimal`
//! otherwise, their totals, and the liquidity day built from them.

use std::collections::BTreeMap;

use bigdecimal::BigDecimal;
use market_model::{
    Coverage, Decimal, Direction, Level, LiquidityDay, LiquidityTotals, MarketPosition,
};
use time::{Date, OffsetDateTime};

use crate::buckets::{bucket_index, bucket_of_index, bucket_price};
use crate::fixed::{Fixed, Sum};

/// Builds the liquidation levels of one asset from its positions.
pub fn liquidity_levels<'a>(
    bucket_size: &BigDecimal,
    positions: impl IntoIterator<Item = &'a MarketPosition>,
) -> (Vec<Level>, LiquidityTotals) {
    let positions: Vec<&MarketPosition> = positions.into_iter().collect();
    let levels = levels_of(bucket_size, &positions);
    let totals = totals_of(&levels);
    (levels, totals)
}

pub(super) fn side_key(direction: Direction) -> u8 {
    match direction {
        Direction::Long => 0,
        Direction::Short => 1,
    }
}

/// The levels of [`liquidity_levels`].
fn levels_of(bucket_size: &BigDecimal, positions: &[&MarketPosition]) -> Vec<Level> {
    levels_on_integers(bucket_size, positions)
        .unwrap_or_else(|| levels_on_bigdecimals(bucket_size, positions.iter().copied()))
}

/// [`levels_on_bigdecimals`] on integers, or `None` when a value does not
/// fit (see [`LevelEntry`]) or the size is not positive.
fn levels_on_integers(
    bucket_size: &BigDecimal,
    positions: &[&MarketPosition],
) -> Option<Vec<Level>> {
    let size = positive_size(bucket_size)?;
    let mut entries = Vec::with_capacity(positions.len());
    for (order, p) in positions.iter().enumerate() {
        let Some(liq) = &p.liq_price else { continue };
        entries.push(LevelEntry::new(
            p.direction,
            Fixed::from_big(&p.position_value.0)?,
            Fixed::from_big(liq)?,
            size,
            u32::try_from(order).ok()?,
        )?);
    }
    levels_from_entries(size, &mut entries)
}

/// `size` as a [`Fixed`] when it is one and positive (buckets then order like
/// their indices).
pub(super) fn positive_size(size: &BigDecimal) -> Option<Fixed> {
    Fixed::from_big(size).filter(|s| s.mantissa > 0)
}

/// A position with a liquidation price, for the level pass on integers
/// (32 bytes: value and price kept as `i64` mantissas with `i16` scales).
#[derive(Clone, Copy, Debug)]
pub(super) struct LevelEntry {
    /// Side (bit 32) and bucket index (bits 0..32, biased): with a positive
    /// size, sorting puts longs first and buckets by ascending price.
    bucket: u64,
    /// The position's order within the asset: the order in which
    /// `BigDecimal` sums a bucket's members and equal min/max prices tie.
    order: u32,
    value: i64,
    liq: i64,
    value_scale: i16,
    liq_scale: i16,
}

impl LevelEntry {
    /// `None` when the value, the price or the bucket index does not fit.
    pub(super) fn new(
        side: Direction,
        value: Fixed,
        liq: Fixed,
        size: Fixed,
        order: u32,
    ) -> Option<LevelEntry> {
        let n = i32::try_from(bucket_index(liq, size)?).ok()?;
        let biased = (n as u32) ^ (1 << 31);
        Some(LevelEntry {
            bucket: (u64::from(side_key(side)) << 32) | u64::from(biased),
            order,
            value: value.mantissa.try_into().ok()?,
            liq: liq.mantissa.try_into().ok()?,
            value_scale: value.scale.try_into().ok()?,
            liq_scale: liq.scale.try_into().ok()?,
        })
    }

    fn side(&self) -> Direction {
        if self.bucket >> 32 == 0 {
            Direction::Long
        } else {
            Direction::Short
        }
    }

    /// The bucket index (`bucket price = index × size`).
    fn index(&self) -> i128 {
        (((self.bucket as u32) ^ (1 << 31)) as i32).into()
    }

    fn value(&self) -> Fixed {
        Fixed {
            mantissa: self.value.into(),
            scale: self.value_scale.into(),
        }
    }

    fn liq(&self) -> Fixed {
        Fixed {
            mantissa: self.liq.into(),
            scale: self.liq_scale.into(),
        }
    }
}

/// The levels of `entries` (one asset's positions with a liquidation price),
/// exactly as [`levels_on_bigdecimals`] builds them; `None` when a bucket
/// price does not fit an `i128`.
pub(super) fn levels_from_entries(size: Fixed, entries: &mut [LevelEntry]) -> Option<Vec<Level>> {
    entries.sort_unstable_by_key(|e| (e.bucket, e.order));
    let mut levels = Vec::new();
    for group in entries.chunk_by(|a, b| a.bucket == b.bucket) {
        let first = &group[0];
        let mut total = Sum::Fast(first.value());
        let (mut min, mut max) = (first.liq(), first.liq());
        for e in &group[1..] {
            total.add_refs(e.value());
            let liq = e.liq();
            if liq.cmp_value(min).is_lt() {
                min = liq;
            }
            if liq.cmp_value(max).is_gt() {
                max = liq;
            }
        }
        levels.push(Level {
            side: first.side(),
            bucket_price: Decimal(bucket_of_index(first.index(), size)?),
            position_count: group.len() as u64,
            total_amount_usd: Decimal(total.into_big()),
            min_liquidation_price: Decimal(min.to_big()),
            max_liquidation_price: Decimal(max.to_big()),
        });
    }
    Some(levels)
}

/// The levels on `BigDecimal` arithmetic (any size, any magnitude).
pub(super) fn levels_on_bigdecimals<'a>(
    bucket_size: &BigDecimal,
    positions: impl IntoIterator<Item = &'a MarketPosition>,
) -> Vec<Level> {
    // (side, bucket) -> level; BTreeMap keeps the documented order (long first, price ascending).
    let mut levels: BTreeMap<(u8, BigDecimal), Level> = BTreeMap::new();
    for p in positions {
        let Some(liq) = &p.liq_price else { continue };
        let bucket = bucket_price(liq, bucket_size);
        let side_key = match p.direction {
            Direction::Long => 0u8,
            Direction::Short => 1u8,
        };
        levels
            .entry((side_key, bucket.clone()))
            .and_modify(|l| {
                l.position_count += 1;
                l.total_amount_usd = Decimal(&l.total_amount_usd.0 + &p.position_value.0);
                if liq.0 < l.min_liquidation_price.0 {
                    l.min_liquidation_price = liq.clone();
                }
                if liq.0 > l.max_liquidation_price.0 {
                    l.max_liquidation_price = liq.clone();
                }
            })
            .or_insert_with(|| Level {
                side: p.direction,
                bucket_price: Decimal(bucket),
                position_count: 1,
                total_amount_usd: p.position_value.clone(),
                min_liquidation_price: liq.clone(),
                max_liquidation_price: liq.clone(),
            });
    }
    levels.into_values().collect()
}

/// Sums levels per side (see [`LiquidityTotals::of`]).
pub fn totals_of(levels: &[Level]) -> LiquidityTotals {
    LiquidityTotals::of(levels)
}

/// Builds a liquidity day from levels.
pub fn liquidity_day(
    date: Date,
    network: &str,
    symbol: &str,
    coverage: Coverage,
    bucket_size: Decimal,
    updated_at: OffsetDateTime,
    levels: Vec<Level>,
) -> LiquidityDay {
    LiquidityDay::new(
        date,
        network,
        symbol,
        coverage,
        bucket_size,
        updated_at,
        totals_of(&levels),
        levels,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    #[test]
    fn level_entries_keep_side_and_bucket_order() {
        let f = |s: &str| Fixed::from_big(&d(s).0).unwrap();
        let size = f("0.5");
        let entry = |side, liq: &str| LevelEntry::new(side, f("1.25"), f(liq), size, 3).unwrap();
        let long_low = entry(Direction::Long, "-1000.25");
        let long_high = entry(Direction::Long, "1000.25");
        let short_low = entry(Direction::Short, "-7");
        assert!(long_low.bucket < long_high.bucket && long_high.bucket < short_low.bucket);
        assert_eq!(long_low.index(), -2001, "-2000.5 rounds away from zero");
        assert_eq!(long_high.index(), 2001);
        assert_eq!(short_low.index(), -14);
        assert_eq!(
            (long_low.side(), short_low.side()),
            (Direction::Long, Direction::Short)
        );
        assert_eq!(long_low.value(), f("1.25"));
        assert_eq!(long_low.liq(), f("-1000.25"));
        // a bucket index beyond i32 or a value beyond i64 needs BigDecimal
        assert!(LevelEntry::new(Direction::Long, f("1"), f("1E+10"), size, 0).is_none());
        assert!(
            LevelEntry::new(Direction::Long, f("10000000000000000000"), f("1"), size, 0).is_none()
        );
        assert!(
            LevelEntry::new(Direction::Long, f("1E+19"), f("1"), size, 0).is_some(),
            "mantissa 1"
        );
    }
}
