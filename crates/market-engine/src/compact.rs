//! A decimal held in 16 bytes: its integer and scale inline when they fit
//! (nearly always: a price or a value of up to 18 digits), a boxed
//! `BigDecimal` otherwise. For what is kept in memory per position (the
//! tracker's book, the tally's level members), where a `BigDecimal` costs
//! 32 bytes plus a heap allocation.

use std::cmp::Ordering;

use bigdecimal::BigDecimal;
use market_model::Decimal;

use crate::fixed::Fixed;

/// A decimal with its scale, exactly as it was given (the same text comes
/// back out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactDecimal(Repr);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Repr {
    Small { mantissa: i64, scale: i16 },
    Big(Box<BigDecimal>),
}

impl CompactDecimal {
    /// `v`, same integer and scale.
    pub fn of(v: &BigDecimal) -> CompactDecimal {
        let small = Fixed::from_big(v).and_then(|f| {
            Some(Repr::Small {
                mantissa: i64::try_from(f.mantissa).ok()?,
                scale: i16::try_from(f.scale).ok()?,
            })
        });
        CompactDecimal(small.unwrap_or_else(|| Repr::Big(Box::new(v.clone()))))
    }

    pub(crate) fn fixed(&self) -> Option<Fixed> {
        match &self.0 {
            Repr::Small { mantissa, scale } => Some(Fixed {
                mantissa: (*mantissa).into(),
                scale: (*scale).into(),
            }),
            Repr::Big(_) => None,
        }
    }

    /// The `BigDecimal` it holds (same integer, same scale).
    pub fn to_big(&self) -> BigDecimal {
        match &self.0 {
            Repr::Small { .. } => self.fixed().expect("small").to_big(),
            Repr::Big(b) => (**b).clone(),
        }
    }

    /// The model's decimal (same text).
    pub fn to_decimal(&self) -> Decimal {
        Decimal(self.to_big())
    }

    /// Its value as a float, for estimates that are never stored or served
    /// (the tracker's scheduling by size).
    pub fn to_f64(&self) -> f64 {
        use bigdecimal::ToPrimitive;
        match &self.0 {
            Repr::Small { mantissa, scale } => *mantissa as f64 / 10f64.powi((*scale).into()),
            Repr::Big(b) => b.to_f64().unwrap_or(0.0),
        }
    }

    /// Its sign, as its comparison with zero (`-0.0` is zero).
    pub fn cmp_zero(&self) -> Ordering {
        match &self.0 {
            Repr::Small { mantissa, .. } => mantissa.cmp(&0),
            Repr::Big(b) => b.sign().cmp(&bigdecimal::num_bigint::Sign::NoSign),
        }
    }

    /// Numeric comparison (`1.0` equals `1`).
    pub fn cmp_value(&self, other: &CompactDecimal) -> Ordering {
        match (self.fixed(), other.fixed()) {
            (Some(a), Some(b)) => a.cmp_value(b),
            _ => self.to_big().cmp(&other.to_big()),
        }
    }
}

impl From<&Decimal> for CompactDecimal {
    fn from(d: &Decimal) -> CompactDecimal {
        CompactDecimal::of(&d.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_decimal_comes_back_with_its_text() {
        for text in [
            "0",
            "0.00",
            "-1.5",
            "100",
            "92391.3380",
            "0.000000012",
            "-0.0",
            "123456789012345678",
            "1234567890123456789012345.6789",
        ] {
            let d: Decimal = text.parse().unwrap();
            let c = CompactDecimal::from(&d);
            assert_eq!(c.to_decimal().to_string(), d.to_string(), "{text}");
        }
        assert_eq!(std::mem::size_of::<CompactDecimal>(), 16);
    }

    #[test]
    fn comparison_is_numeric() {
        let c = |s: &str| CompactDecimal::of(&s.parse().unwrap());
        assert!(c("1.0").cmp_value(&c("1")).is_eq());
        assert!(c("0.99").cmp_value(&c("1")).is_lt());
        assert!(c("1234567890123456789012345").cmp_value(&c("2")).is_gt());
        assert!(c("-0.0").cmp_zero().is_eq());
        assert!(c("0.0001").cmp_zero().is_gt());
        assert!(c("-1234567890123456789012345.5").cmp_zero().is_lt());
        assert!(c("1234567890123456789012345.5").cmp_zero().is_gt());
    }
}
