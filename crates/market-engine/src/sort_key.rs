//! Exact decimal sort keys: the integer and scale of a decimal, compared
//! as integers whenever they fit.

use std::cmp::Ordering;

use bigdecimal::num_bigint::BigInt;
use bigdecimal::num_traits::ToPrimitive;
use bigdecimal::BigDecimal;
use market_model::PlainDecimal;

/// An exact decimal sort key: the decimal's own integer and scale, inline
/// when the integer fits an `i64` (nearly every price and value), so that
/// comparing two keys is integer arithmetic.
#[derive(Clone, Debug)]
pub enum SortKey {
    /// `mantissa × 10^−scale`.
    Small {
        /// The unscaled integer.
        mantissa: i64,
        /// Digits after the decimal point.
        scale: i16,
    },
    /// Anything larger.
    Big(Box<BigDecimal>),
}

impl SortKey {
    /// The key of `value` (same integer, same scale).
    pub fn new(value: &BigDecimal) -> SortKey {
        let (int, scale) = value.as_bigint_and_scale();
        match (int.to_i64(), i16::try_from(scale)) {
            (Some(mantissa), Ok(scale)) => SortKey::Small { mantissa, scale },
            _ => SortKey::Big(Box::new(value.clone())),
        }
    }

    /// The decimal, with the scale it was made from.
    pub fn to_big(&self) -> BigDecimal {
        match self {
            SortKey::Small { mantissa, scale } => {
                BigDecimal::new(BigInt::from(*mantissa), i64::from(*scale))
            }
            SortKey::Big(big) => (**big).clone(),
        }
    }

    /// The plain-notation text, as the item's JSON renders it.
    pub fn text(&self) -> String {
        self.to_big().to_plain_string()
    }
}

impl Ord for SortKey {
    fn cmp(&self, other: &SortKey) -> Ordering {
        if let (
            SortKey::Small {
                mantissa: a,
                scale: sa,
            },
            SortKey::Small {
                mantissa: b,
                scale: sb,
            },
        ) = (self, other)
        {
            if sa == sb {
                return a.cmp(b);
            }
            // At the larger scale both fit an i128 while the shift is at most
            // 19 digits (|mantissa| < 2^63, 10^19 × 2^63 < 2^127).
            let shift = (i32::from(*sa) - i32::from(*sb)).unsigned_abs();
            if shift <= 19 {
                let pow = 10i128.pow(shift);
                let (a, b) = (i128::from(*a), i128::from(*b));
                return if sa > sb {
                    a.cmp(&(b * pow))
                } else {
                    (a * pow).cmp(&b)
                };
            }
        }
        self.to_big().cmp(&other.to_big())
    }
}

impl PartialOrd for SortKey {
    fn partial_cmp(&self, other: &SortKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for SortKey {
    fn eq(&self, other: &SortKey) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for SortKey {}

impl SortKey {
    /// The key of the number `text` denotes: the same key as
    /// [`SortKey::new`] of its parsed value, without parsing when the digits
    /// fit an `i64`.
    pub fn of_plain(text: PlainDecimal<'_>) -> SortKey {
        let s = text.as_str();
        let (negative, body) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let (whole, frac) = body.split_once('.').unwrap_or((body, ""));
        if whole.len() + frac.len() <= 18 {
            let mantissa = whole
                .bytes()
                .chain(frac.bytes())
                .fold(0i64, |n, b| n * 10 + i64::from(b - b'0'));
            if let Ok(scale) = i16::try_from(frac.len()) {
                let mantissa = if negative { -mantissa } else { mantissa };
                return SortKey::Small { mantissa, scale };
            }
        }
        SortKey::new(&text.to_decimal())
    }
}
