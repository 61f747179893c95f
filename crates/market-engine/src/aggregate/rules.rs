//! The scalar rules of the aggregates: the long/short ratio, the 24-hour
//! change, the size class of an account value and the account leverage.

use bigdecimal::{BigDecimal, RoundingMode, Zero};
use market_model::{Decimal, SizeClass};

use crate::compact::CompactDecimal;
use crate::fixed::Fixed;

pub(super) fn zero() -> BigDecimal {
    BigDecimal::zero()
}

/// `numerator / denominator` rounded half-up to 4 decimals; see [`Market::long_short_ratio`]
/// for the rule when there are no shorts.
///
/// [`Market::long_short_ratio`]: market_model::Market::long_short_ratio
pub fn long_short_ratio(long_count: u64, short_count: u64) -> Decimal {
    let value = if short_count == 0 {
        BigDecimal::from(long_count)
    } else {
        BigDecimal::from(long_count) / BigDecimal::from(short_count)
    };
    Decimal(value.with_scale_round(4, RoundingMode::HalfUp))
}

/// Percentage change from `prev` to `now`, 4 decimals half-up; 0 when `prev` is not positive.
pub fn change_pct(now: &BigDecimal, prev: &BigDecimal) -> Decimal {
    if prev <= &zero() {
        return Decimal(zero().with_scale(4));
    }
    let pct = (now - prev) * BigDecimal::from(100) / prev;
    Decimal(pct.with_scale_round(4, RoundingMode::HalfUp))
}

/// Size class of an account value.
pub fn size_class(account_value: &BigDecimal) -> SizeClass {
    if let Some(class) = Fixed::from_big(account_value).and_then(class_of_fixed) {
        return class;
    }
    if account_value >= &BigDecimal::from(SizeClass::WHALE_MIN_USD) {
        SizeClass::Whale
    } else if account_value >= &BigDecimal::from(SizeClass::SHARK_MIN_USD) {
        SizeClass::Shark
    } else {
        SizeClass::Shrimp
    }
}

/// [`size_class`] of a compact value, without a `BigDecimal` when it fits
/// (the tracker classes every registry entry at each publish).
pub fn compact_size_class(account_value: &CompactDecimal) -> SizeClass {
    account_value
        .fixed()
        .and_then(class_of_fixed)
        .unwrap_or_else(|| size_class(&account_value.to_big()))
}

/// The size class of a fixed-point value, when the comparisons fit.
fn class_of_fixed(account: Fixed) -> Option<SizeClass> {
    let at_least = |min: i64| {
        account
            .try_cmp(Fixed {
                mantissa: min.into(),
                scale: 0,
            })
            .map(|o| o.is_ge())
    };
    let (whale, shark) = (
        at_least(SizeClass::WHALE_MIN_USD)?,
        at_least(SizeClass::SHARK_MIN_USD)?,
    );
    Some(if whale {
        SizeClass::Whale
    } else if shark {
        SizeClass::Shark
    } else {
        SizeClass::Shrimp
    })
}

/// Effective leverage `total / account`, 2 decimals half-up; 0 when account ≤ 0.
pub fn account_leverage(total: &BigDecimal, account: &BigDecimal) -> Decimal {
    if let (Some(t), Some(a)) = (Fixed::from_big(total), Fixed::from_big(account)) {
        if a.mantissa <= 0 {
            return Decimal(zero().with_scale(2));
        }
        if let Some(mantissa) = t.div_round_half_up(a, 2) {
            return Decimal(Fixed { mantissa, scale: 2 }.to_big());
        }
    }
    if account <= &zero() {
        return Decimal(zero().with_scale(2));
    }
    Decimal((total / account).with_scale_round(2, RoundingMode::HalfUp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::test_support::reference;
    use crate::fixtures::*;

    #[test]
    fn ratio_edge_cases() {
        assert_eq!(long_short_ratio(0, 0).to_string(), "0.0000");
        assert_eq!(long_short_ratio(7, 0).to_string(), "7.0000");
        assert_eq!(long_short_ratio(2, 3).to_string(), "0.6667");
        assert_eq!(long_short_ratio(1, 8).to_string(), "0.1250");
    }

    #[test]
    fn size_class_and_leverage_match_bigdecimal() {
        for account in [
            "1000000",
            "999999.999",
            "1000000.000",
            "100000",
            "99999.99",
            "0",
            "-1",
            "1E+6",
            "1E+40",
            "0.5",
        ] {
            let a = d(account).0;
            assert_eq!(size_class(&a), reference::size_class(&a), "{account}");
            for total in ["0", "0.00", "1050.50", "-3", "2000000", "1E+45", "0.005"] {
                let t = d(total).0;
                assert_eq!(
                    format!("{:?}", account_leverage(&t, &a).0),
                    format!("{:?}", reference::account_leverage(&t, &a).0),
                    "{total} / {account}"
                );
            }
        }
    }
}
