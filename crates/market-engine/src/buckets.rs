//! Liquidation-price bucketing.
//!
//! `bucketSize` follows the asset's price: for a price in [10^k, 10^(k+1)) the
//! size is 1, 2 or 5 × 10^(k−2) when the price's leading digit is 1, 2–4 or
//! 5–9, so a bucket always spans 0.4 % to 1 % of the price. A liquidation
//! price goes to the nearest multiple of the size (method `nearest`; exact
//! halves round up).

use bigdecimal::{BigDecimal, RoundingMode, Signed};
use market_model::Decimal;

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
    let n = (liq / size).with_scale_round(0, RoundingMode::HalfUp);
    let (_, size_scale) = size.as_bigint_and_exponent();
    (n * size).with_scale(size_scale.max(0))
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
