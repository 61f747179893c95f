//! Exact integer fast paths for the few [`BigDecimal`] operations the
//! aggregation repeats per position and per wallet.
//!
//! A [`Fixed`] is a decimal `mantissa × 10^−scale` whose mantissa fits an
//! `i128`; it is the same pair a [`BigDecimal`] holds, without the heap. Every
//! operation here reproduces what the corresponding `BigDecimal` operation
//! returns, including the scale of the result (which decides the serialized
//! text), and answers `None` where an intermediate would not fit, so callers
//! fall back to `BigDecimal` and the result is the same either way. No
//! floating point is involved.

use std::cmp::Ordering;

use bigdecimal::num_bigint::BigInt;
use bigdecimal::{BigDecimal, ToPrimitive};

/// `mantissa × 10^−scale`, the representation of a [`BigDecimal`] whose
/// integer fits an `i128`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fixed {
    /// The unscaled integer.
    pub(crate) mantissa: i128,
    /// Digits after the decimal point (negative: trailing zeros).
    pub(crate) scale: i64,
}

/// `10^0 ..= 10^38`, every power of ten a `u128` holds.
const POW10: [u128; 39] = {
    let mut table = [1u128; 39];
    let mut i = 1;
    while i < table.len() {
        table[i] = table[i - 1] * 10;
        i += 1;
    }
    table
};

/// `10^exp` as a `u128`, when it fits (`exp ≤ 38`).
pub fn pow10(exp: u64) -> Option<u128> {
    POW10.get(usize::try_from(exp).ok()?).copied()
}

impl Fixed {
    /// Zero with scale 0, like `BigDecimal::zero()`.
    pub(crate) const ZERO: Fixed = Fixed {
        mantissa: 0,
        scale: 0,
    };

    /// The same number and scale as `value`, when its integer fits an `i128`.
    pub(crate) fn from_big(value: &BigDecimal) -> Option<Fixed> {
        let (int, scale) = value.as_bigint_and_scale();
        Some(Fixed {
            mantissa: int.to_i128()?,
            scale,
        })
    }

    /// The equivalent `BigDecimal` (same integer, same scale).
    pub(crate) fn to_big(self) -> BigDecimal {
        BigDecimal::new(BigInt::from(self.mantissa), self.scale)
    }

    /// The mantissa at `scale ≥ self.scale` (exact: multiplies by a power of ten).
    pub(crate) fn mantissa_at(self, scale: i64) -> Option<i128> {
        let shift = u64::try_from(scale.checked_sub(self.scale)?).ok()?;
        if self.mantissa == 0 {
            return Some(0);
        }
        self.mantissa
            .checked_mul(i128::try_from(pow10(shift)?).ok()?)
    }

    /// `self += rhs` as `BigDecimal`'s `AddAssign<&BigDecimal>` computes it:
    /// the exact sum at the larger of the two scales (zeros included).
    pub(crate) fn add_assign(self, rhs: Fixed) -> Option<Fixed> {
        if self.scale == rhs.scale {
            return Some(Fixed {
                mantissa: self.mantissa.checked_add(rhs.mantissa)?,
                scale: self.scale,
            });
        }
        let scale = self.scale.max(rhs.scale);
        let mantissa = self
            .mantissa_at(scale)?
            .checked_add(rhs.mantissa_at(scale)?)?;
        Some(Fixed { mantissa, scale })
    }

    /// `&self + &rhs` as `BigDecimal`'s `Add` on references computes it: like
    /// [`Fixed::add_assign`], except that a zero operand raises the other
    /// operand's scale towards its own by at most 15.
    pub(crate) fn add_refs(self, rhs: Fixed) -> Option<Fixed> {
        let zero_plus = |nonzero: Fixed, zero: Fixed| {
            let raise = zero.scale.saturating_sub(nonzero.scale).clamp(0, 15);
            let scale = nonzero.scale.checked_add(raise)?;
            Some(Fixed {
                mantissa: nonzero.mantissa_at(scale)?,
                scale,
            })
        };
        if rhs.mantissa == 0 {
            return zero_plus(self, rhs);
        }
        if self.mantissa == 0 {
            return zero_plus(rhs, self);
        }
        self.add_assign(rhs)
    }

    /// Numeric comparison, exact at any size.
    pub(crate) fn cmp_value(self, other: Fixed) -> Ordering {
        self.try_cmp(other)
            .unwrap_or_else(|| self.to_big().cmp(&other.to_big()))
    }

    /// Numeric comparison (scales aligned), when the aligned mantissas fit.
    pub(crate) fn try_cmp(self, other: Fixed) -> Option<Ordering> {
        if self.scale == other.scale {
            return Some(self.mantissa.cmp(&other.mantissa));
        }
        let scale = self.scale.max(other.scale);
        Some(self.mantissa_at(scale)?.cmp(&other.mantissa_at(scale)?))
    }

    /// `(self / divisor)` rounded half away from zero to `digits` decimals, as
    /// `(self / divisor).with_scale_round(digits, RoundingMode::HalfUp)`
    /// computes it; `None` when `divisor` is zero, `digits` is outside
    /// `-20..=20` or an intermediate does not fit a `u128`. The answer is the
    /// mantissa at scale `digits`.
    ///
    /// `BigDecimal` division first rounds the quotient to 100 significant
    /// digits, and `with_scale_round` then rounds again. That double rounding
    /// can only differ from the single exact rounding done here when every
    /// digit of the quotient from just past the rounding boundary's `5` up to
    /// the 100th significant digit is a nine: with the bounds here (quotient
    /// below 2^128 × 10^20, `|digits| ≤ 20`) a run of at least 40 nines, which
    /// a fraction only has when its denominator exceeds 10^40 — more than any
    /// `u128` denominator accepted here.
    pub(crate) fn div_round_half_up(self, divisor: Fixed, digits: i64) -> Option<i128> {
        if divisor.mantissa == 0 || !(-20..=20).contains(&digits) {
            return None;
        }
        // self / divisor × 10^digits = num × 10^exp / den
        let exp = divisor.scale.checked_sub(self.scale)?.checked_add(digits)?;
        let mut num = self.mantissa.unsigned_abs();
        let mut den = divisor.mantissa.unsigned_abs();
        if num != 0 {
            if exp >= 0 {
                num = num.checked_mul(pow10(exp.unsigned_abs())?)?;
            } else {
                den = den.checked_mul(pow10(exp.unsigned_abs())?)?;
            }
        }
        // (u64 division is a single instruction; u128 division a library call)
        let (quotient, remainder) = match (u64::try_from(num), u64::try_from(den)) {
            (Ok(n), Ok(d)) => ((n / d).into(), (n % d).into()),
            _ => (num / den, num % den),
        };
        // Half away from zero: up when remainder ≥ den − remainder.
        let magnitude = if remainder >= den - remainder {
            quotient.checked_add(1)?
        } else {
            quotient
        };
        let magnitude = i128::try_from(magnitude).ok()?;
        Some(if (self.mantissa < 0) != (divisor.mantissa < 0) {
            -magnitude
        } else {
            magnitude
        })
    }
}

/// A running sum that stays on [`Fixed`] while it fits and continues on
/// `BigDecimal` after that; both give the `BigDecimal` result.
#[derive(Clone, Debug)]
pub(crate) enum Sum {
    /// Fits an `i128`.
    Fast(Fixed),
    /// Overflowed (or started from a value that did not fit).
    Big(BigDecimal),
}

impl Default for Sum {
    fn default() -> Self {
        Sum::Fast(Fixed::ZERO)
    }
}

impl Sum {
    /// `sum += value` (`AddAssign<&BigDecimal>`); `fast` is `Fixed::from_big(value)`.
    pub(crate) fn add_assign(&mut self, value: &BigDecimal, fast: Option<Fixed>) {
        if fast.is_some_and(|v| self.add_fast(v)) {
            return;
        }
        let mut big = self.take_big();
        big += value;
        *self = Sum::Big(big);
    }

    /// `sum -= value` (`SubAssign<&BigDecimal>`, the exact difference at
    /// the larger scale); `fast` is `Fixed::from_big(value)`.
    pub(crate) fn sub_assign(&mut self, value: &BigDecimal, fast: Option<Fixed>) {
        let negated = fast.and_then(|v| {
            Some(Fixed {
                mantissa: v.mantissa.checked_neg()?,
                scale: v.scale,
            })
        });
        if negated.is_some_and(|v| self.add_fast(v)) {
            return;
        }
        let mut big = self.take_big();
        big -= value;
        *self = Sum::Big(big);
    }

    /// `sum += value` on integers (as [`Fixed::add_assign`]); `false`,
    /// and the sum unchanged, when the sum is not on integers or the
    /// result would not fit.
    pub(crate) fn add_fast(&mut self, value: Fixed) -> bool {
        let Sum::Fast(acc) = self else {
            return false;
        };
        match acc.add_assign(value) {
            Some(next) => {
                *acc = next;
                true
            }
            None => false,
        }
    }

    /// `sum = &sum + &value` (`Add` on references).
    pub(crate) fn add_refs(&mut self, value: Fixed) {
        if let Sum::Fast(acc) = self {
            if let Some(next) = acc.add_refs(value) {
                *acc = next;
                return;
            }
        }
        let big = self.take_big();
        *self = Sum::Big(&big + &value.to_big());
    }

    /// The fast form, when the sum fits.
    pub(crate) fn fast(&self) -> Option<Fixed> {
        match self {
            Sum::Fast(f) => Some(*f),
            Sum::Big(_) => None,
        }
    }

    fn take_big(&mut self) -> BigDecimal {
        match std::mem::take(self) {
            Sum::Fast(f) => f.to_big(),
            Sum::Big(b) => b,
        }
    }

    /// The sum as a `BigDecimal`, the sum kept.
    pub(crate) fn to_big(&self) -> BigDecimal {
        match self {
            Sum::Fast(f) => f.to_big(),
            Sum::Big(b) => b.clone(),
        }
    }

    /// The sum as a `BigDecimal`.
    pub(crate) fn into_big(self) -> BigDecimal {
        match self {
            Sum::Fast(f) => f.to_big(),
            Sum::Big(b) => b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bigdecimal::{RoundingMode, Zero};
    use std::str::FromStr;

    fn d(s: &str) -> BigDecimal {
        BigDecimal::from_str(s).unwrap()
    }

    fn f(s: &str) -> Fixed {
        Fixed::from_big(&d(s)).unwrap()
    }

    /// Same integer and same scale (what serialization sees), not just equal value.
    fn same(a: &BigDecimal, b: &BigDecimal) -> bool {
        a.as_bigint_and_scale() == b.as_bigint_and_scale()
    }

    const SAMPLES: &[&str] = &[
        "0",
        "0.00",
        "0E+3",
        "1",
        "-1",
        "1.5",
        "-1.5",
        "2.50",
        "-2.5",
        "1000.50",
        "300.25",
        "0.0000125",
        "-49.804021",
        "92391.3380",
        "1E+2",
        "-7E+3",
        "123456789012345678.123456789",
        "-0.000000000000000000000001",
        "0.0000000000000000000000000000000000001",
        "99999999999999999999999999999999999999",
        "-99999999999999999999999999999999999999",
        "170141183460469231731687303715884105727",
        "1.70141183460469231731687303715884105727",
        "3",
        "7",
        "0.3",
        "12.345",
        "0.005",
        "-0.005",
        "0.015",
        "1.1E-20",
    ];

    #[test]
    fn round_trips_and_rejects_what_does_not_fit() {
        for s in SAMPLES {
            let big = d(s);
            let fixed = Fixed::from_big(&big).unwrap();
            assert!(same(&fixed.to_big(), &big), "{s}");
        }
        assert!(Fixed::from_big(&d("170141183460469231731687303715884105728")).is_none());
        assert!(Fixed::from_big(&d("-1701411834604692317316873037158841057290.5")).is_none());
    }

    #[test]
    fn additions_match_bigdecimal_including_scale() {
        for a in SAMPLES {
            for b in SAMPLES {
                let (ba, bb) = (d(a), d(b));
                let mut assign = ba.clone();
                assign += &bb;
                match f(a).add_assign(f(b)) {
                    Some(r) => assert!(same(&r.to_big(), &assign), "{a} += {b}"),
                    // falls back only when an aligned operand or the sum does not fit
                    None => assert!(
                        assign.as_bigint_and_scale().0.to_i128().is_none()
                            || ba
                                .with_scale(assign.fractional_digit_count())
                                .as_bigint_and_scale()
                                .0
                                .to_i128()
                                .is_none()
                            || bb
                                .with_scale(assign.fractional_digit_count())
                                .as_bigint_and_scale()
                                .0
                                .to_i128()
                                .is_none(),
                        "{a} += {b}"
                    ),
                }
                let refs = &ba + &bb;
                if let Some(r) = f(a).add_refs(f(b)) {
                    assert!(same(&r.to_big(), &refs), "{a} + {b}: {r:?} vs {refs:?}");
                }
            }
        }
        // a zero raises the other operand's scale by at most 15 (BigDecimal's rule)
        let r = f("1").add_refs(f("0E-20")).unwrap();
        assert_eq!((r.mantissa, r.scale), (10i128.pow(15), 15));
        assert!(same(&r.to_big(), &(&d("1") + &d("0E-20"))));
        let r = f("0E-3").add_refs(f("2.5")).unwrap();
        assert!(same(&r.to_big(), &(&d("0E-3") + &d("2.5"))));
        assert_eq!(r.scale, 3);
    }

    #[test]
    fn overflow_falls_back() {
        let max = f("170141183460469231731687303715884105727");
        assert!(max.add_assign(f("1")).is_none());
        assert!(f("1")
            .add_assign(f("0.00000000000000000000000000000000000000001"))
            .is_none());
        let mut sum = Sum::default();
        for _ in 0..3 {
            sum.add_assign(&max.to_big(), Some(max));
        }
        assert!(sum.fast().is_none());
        let mut expected = BigDecimal::from(0);
        for _ in 0..3 {
            expected += &max.to_big();
        }
        assert!(same(&sum.into_big(), &expected));
        // a sum that starts big stays exact
        let mut sum = Sum::Fast(max);
        sum.add_refs(f("0.5"));
        assert!(sum.fast().is_none());
        sum.add_refs(f("-7E+3"));
        let expected = &(&max.to_big() + &d("0.5")) + &d("-7E+3");
        assert!(same(&sum.into_big(), &expected));
        // a sum that starts big stays big and exact
        let huge = d("1E+60");
        let mut sum = Sum::Big(huge.clone());
        sum.add_assign(&d("0.5"), Some(f("0.5")));
        let mut expected = huge.clone();
        expected += &d("0.5");
        assert!(same(&sum.into_big(), &expected));
    }

    #[test]
    fn a_difference_is_exact_on_both_paths() {
        // On integers, at the larger scale, as `SubAssign` gives it.
        let mut sum = Sum::default();
        for v in ["2.50", "-1.125", "7E+3"] {
            sum.add_assign(&d(v), Some(f(v)));
        }
        sum.sub_assign(&d("2.50"), Some(f("2.50")));
        assert!(sum.fast().is_some());
        assert!(same(
            &sum.to_big(),
            &(&d("-1.125") + &d("7E+3")).with_scale(3)
        ));
        // Past an `i128` (the most negative mantissa has no negation, the
        // difference from the largest does not fit): on `BigDecimal`.
        let min = Fixed {
            mantissa: i128::MIN,
            scale: 0,
        };
        let max = f("170141183460469231731687303715884105727");
        let mut sum = Sum::Fast(max);
        sum.sub_assign(&min.to_big(), Some(min));
        assert!(sum.fast().is_none());
        assert!(same(&sum.to_big(), &(&max.to_big() - &min.to_big())));
        sum.sub_assign(&max.to_big(), Some(max));
        assert!(same(&sum.into_big(), &(&d("0") - &min.to_big())));
    }

    #[test]
    fn comparisons_are_numeric() {
        for a in SAMPLES {
            for b in SAMPLES {
                if let Some(o) = f(a).try_cmp(f(b)) {
                    assert_eq!(o, d(a).cmp(&d(b)), "{a} vs {b}");
                }
            }
        }
        assert_eq!(f("2.50").try_cmp(f("2.5")), Some(Ordering::Equal));
        // too far apart in scale to align: still exact
        let (a, b) = (f("1E+30"), f("0.00000000000000000000000000001"));
        assert!(a.try_cmp(b).is_none());
        assert_eq!(a.cmp_value(b), Ordering::Greater);
        assert_eq!(b.cmp_value(a), Ordering::Less);
        assert_eq!(f("-1E+30").cmp_value(b), Ordering::Less);
        assert_eq!(f("-1E+2").try_cmp(f("-99.99")), Some(Ordering::Less));
    }

    #[test]
    fn rounded_division_matches_bigdecimal() {
        for a in SAMPLES {
            for b in SAMPLES {
                let (ba, bb) = (d(a), d(b));
                if bb.is_zero() {
                    assert!(f(a).div_round_half_up(f(b), 2).is_none());
                    continue;
                }
                for digits in [-2, 0, 2, 4] {
                    let expected = (&ba / &bb).with_scale_round(digits, RoundingMode::HalfUp);
                    if let Some(m) = f(a).div_round_half_up(f(b), digits) {
                        let got = Fixed {
                            mantissa: m,
                            scale: digits,
                        };
                        assert!(same(&got.to_big(), &expected), "{a} / {b} @ {digits}");
                    }
                }
            }
        }
        // many small quotients, exact halves among them, at several scales
        for a in -60i128..=60 {
            for b in (-24i128..=24).filter(|b| *b != 0) {
                for (sa, sb) in [(0, 0), (2, 1), (1, 3), (-1, 2)] {
                    let (x, y) = (
                        Fixed {
                            mantissa: a,
                            scale: sa,
                        },
                        Fixed {
                            mantissa: b,
                            scale: sb,
                        },
                    );
                    for digits in [0, 2] {
                        let expected = (&x.to_big() / &y.to_big())
                            .with_scale_round(digits, RoundingMode::HalfUp);
                        let got = Fixed {
                            mantissa: x.div_round_half_up(y, digits).unwrap(),
                            scale: digits,
                        };
                        assert!(same(&got.to_big(), &expected), "{x:?} / {y:?} @ {digits}");
                    }
                }
            }
        }
        // exact halves round away from zero
        assert_eq!(f("1").div_round_half_up(f("8"), 2), Some(13));
        assert_eq!(f("-1").div_round_half_up(f("8"), 2), Some(-13));
        assert_eq!(f("1").div_round_half_up(f("-8"), 2), Some(-13));
        assert_eq!(f("2").div_round_half_up(f("3"), 4), Some(6667));
        assert_eq!(f("1050.50").div_round_half_up(f("2000000"), 2), Some(0));
        // too large to scale, or too many digits: falls back
        assert!(f("1E+30").div_round_half_up(f("1E-20"), 2).is_none());
        assert!(f("1").div_round_half_up(f("3"), 21).is_none());
    }
}
