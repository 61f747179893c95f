//! Liquidation-price bucketing.
//!
//! `bucketSize` follows the asset's price: for a price in [10^k, 10^(k+1)) the
//! size is 1, 2 or 5 × 10^(k−2) when the price's leading digit is 1, 2–4 or
//! 5–9, so a bucket always spans 0.4 % to 1 % of the price. A liquidation
//! price goes to the nearest multiple of the size (method `nearest`; exact
//! halves round up).

use bigdecimal::{BigDecimal, RoundingMode, Signed};
use market_model::Decimal;

use crate::fixed::Fixed;

/// The bucket size for an asset priced at `price`.
pub fn bucket_size_for_price(price: &BigDecimal) -> Decimal {
    if !price.is_positive() {
        return Decimal(BigDecimal::new(1.into(), 8));
    }
    // digits() - scale gives the position of the leading digit: k + 1.
    let (int, scale) = price.normalized().as_bigint_and_exponent();
    let digits = int.abs().to_string();
    let k = digits.len() as i64 - scale - 1;
    let lead = digits.as_bytes()[0] - b'0';
    let mult = match lead {
        1 => 1,
        2..=4 => 2,
        _ => 5,
    };
    // value = mult × 10^(k−2)  ⇔  BigDecimal::new(mult, scale = 2 − k)
    Decimal(BigDecimal::new(mult.into(), 2 - k))
}

/// The multiple of `size` nearest to `liq` (halves round up, away from zero).
pub fn bucket_price(liq: &BigDecimal, size: &BigDecimal) -> BigDecimal {
    if let (Some(liq), Some(size)) = (Fixed::from_big(liq), Fixed::from_big(size)) {
        if let Some(price) = bucket_index(liq, size).and_then(|n| bucket_of_index(n, size)) {
            return price;
        }
    }
    let n = (liq / size).with_scale_round(0, RoundingMode::HalfUp);
    let (_, size_scale) = size.as_bigint_and_exponent();
    (n * size).with_scale(size_scale.max(0))
}

/// The `n` of the bucket `n × size` that [`bucket_price`] puts `liq` in, on
/// integers; `None` when `size` is zero or a value does not fit (use
/// [`bucket_price`] then).
pub(crate) fn bucket_index(liq: Fixed, size: Fixed) -> Option<i128> {
    liq.div_round_half_up(size, 0)
}

/// The bucket price `n × size` exactly as [`bucket_price`] returns it (scale
/// `max(size's scale, 0)`); `None` when it does not fit an `i128`.
pub(crate) fn bucket_of_index(n: i128, size: Fixed) -> Option<BigDecimal> {
    let product = Fixed {
        mantissa: n.checked_mul(size.mantissa)?,
        scale: size.scale,
    };
    let scale = size.scale.max(0);
    Some(
        Fixed {
            mantissa: product.mantissa_at(scale)?,
            scale,
        }
        .to_big(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn d(s: &str) -> BigDecimal {
        BigDecimal::from_str(s).unwrap()
    }

    #[test]
    fn sizes_follow_price() {
        for (price, size) in [
            ("92391.338", "500"),
            ("3000", "20"),
            ("186.966", "1"),
            ("1000", "10"),
            ("4999.99", "20"),
            ("5000", "50"),
            ("0.15", "0.001"),
            ("0.0123", "0.0001"),
            ("1", "0.01"),
        ] {
            assert_eq!(
                bucket_size_for_price(&d(price)).to_string(),
                size,
                "price {price}"
            );
        }
    }

    #[test]
    fn size_is_between_point4_and_one_percent() {
        for p in [
            "1", "1.999", "2", "4.99", "5", "9.99", "10", "123.45", "0.000567", "87000",
        ] {
            let price = d(p);
            let ratio = bucket_size_for_price(&price).0 / &price;
            assert!(ratio > d("0.004") && ratio <= d("0.01"), "{p}: {ratio}");
        }
    }

    /// The original, `BigDecimal`-only computation.
    fn bucket_price_slow(liq: &BigDecimal, size: &BigDecimal) -> BigDecimal {
        let n = (liq / size).with_scale_round(0, RoundingMode::HalfUp);
        let (_, size_scale) = size.as_bigint_and_exponent();
        (n * size).with_scale(size_scale.max(0))
    }

    #[test]
    fn integer_path_matches_bigdecimal_path() {
        let liqs = [
            "0",
            "0.00",
            "30.5334",
            "30.55",
            "30.45",
            "-30.55",
            "-30.45",
            "91249.99",
            "91250",
            "-91250",
            "0.15234",
            "0.0005",
            "-0.0005",
            "1E+3",
            "7E+5",
            "123456.789012345",
            "0.000000001",
            "99999999999999999999999999999.99999999",
            "-2.5",
            "2.5",
            "451",
        ];
        let sizes = [
            "500",
            "5E+2",
            "20",
            "2",
            "1",
            "1.0",
            "0.1",
            "0.001",
            "0.0001",
            "0.00000001",
            "5E+4",
            "0.02",
            "0.05",
            "3",
            "-2",
            "0.7",
        ];
        for l in liqs {
            for s in sizes {
                let (liq, size) = (d(l), d(s));
                let fast = bucket_price(&liq, &size);
                let slow = bucket_price_slow(&liq, &size);
                assert_eq!(
                    fast.as_bigint_and_scale(),
                    slow.as_bigint_and_scale(),
                    "{l} in {s}"
                );
                let (lf, sf) = (
                    Fixed::from_big(&liq).unwrap(),
                    Fixed::from_big(&size).unwrap(),
                );
                let n = bucket_index(lf, sf).unwrap();
                let price = bucket_of_index(n, sf).unwrap();
                assert_eq!(price.as_bigint_and_scale(), slow.as_bigint_and_scale());
            }
        }
        // too large for i128: the BigDecimal path answers
        let huge = d("123456789012345678901234567890123456789012345.5");
        assert!(Fixed::from_big(&huge).is_none());
        assert_eq!(
            bucket_price(&huge, &d("1")).as_bigint_and_scale(),
            bucket_price_slow(&huge, &d("1")).as_bigint_and_scale()
        );
        let big = d("1E+37");
        let (bf, sf) = (
            Fixed::from_big(&big).unwrap(),
            Fixed::from_big(&d("0.001")).unwrap(),
        );
        assert!(bucket_index(bf, sf).is_none(), "10^40 does not fit");
        assert_eq!(
            bucket_price(&big, &d("0.001")).as_bigint_and_scale(),
            bucket_price_slow(&big, &d("0.001")).as_bigint_and_scale()
        );
        assert!(bucket_index(bf, Fixed::ZERO).is_none(), "zero size");
    }

    #[test]
    fn nearest_multiple_rounds_half_up() {
        assert_eq!(bucket_price(&d("30.5334"), &d("0.1")).to_string(), "30.5");
        assert_eq!(bucket_price(&d("30.55"), &d("0.1")).to_string(), "30.6");
        assert_eq!(bucket_price(&d("91249.99"), &d("500")).to_string(), "91000");
        assert_eq!(bucket_price(&d("91250"), &d("500")).to_string(), "91500");
        assert_eq!(
            bucket_price(&d("0.15234"), &d("0.001")).to_string(),
            "0.152"
        );
    }
}
