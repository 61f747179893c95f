//! A decimal held in 8 bytes: its integer and scale packed into one word
//! when they fit (nearly always: a price or a value of up to 16 digits),
//! a pointer to a boxed `BigDecimal` otherwise. For what is kept in memory
//! per position and per wallet (the tracker's book and registry, the
//! tally's level members), where a `BigDecimal` costs 32 bytes plus a heap
//! allocation, and an enum of the two forms 16.

use std::cmp::Ordering;
use std::fmt;
use std::ptr::NonNull;

use bigdecimal::BigDecimal;
use market_model::Decimal;

use crate::fixed::Fixed;

/// Bits of a packed word below the mantissa: the tag bit and the scale.
const LOW_BITS: u32 = 8;
/// The scale's bits (signed), above the tag bit.
const SCALE_BITS: u32 = LOW_BITS - 1;
/// The smallest and largest scale packed.
const SCALE_MIN: i64 = -(1 << (SCALE_BITS - 1));
const SCALE_MAX: i64 = (1 << (SCALE_BITS - 1)) - 1;
/// The smallest and largest mantissa packed: what is left of a word
/// (56 bits on a 64-bit target, about 16 digits).
const MANTISSA_MIN: i128 = -(1 << (usize::BITS - LOW_BITS - 1));
const MANTISSA_MAX: i128 = (1 << (usize::BITS - LOW_BITS - 1)) - 1;

/// A decimal with its scale, exactly as it was given (the same text comes
/// back out).
///
/// One word, never null (so `Option<CompactDecimal>` is one word too):
/// - low bit 1: packed, the mantissa in the bits above [`LOW_BITS`] and
///   the scale in the seven bits above the tag, both signed;
/// - low bit 0: a pointer, from `Box::into_raw`, to the `BigDecimal` (its
///   alignment keeps the low bit clear), owned by this value.
///
/// Packed words are pointers without provenance, so no packed word is
/// ever read as a pointer, and a boxed one keeps its provenance.
pub struct CompactDecimal(NonNull<BigDecimal>);

// SAFETY: a `CompactDecimal` owns its boxed `BigDecimal` alone (it is
// cloned, never shared), as a `Box<BigDecimal>` would, and `BigDecimal` is
// `Send` and `Sync`.
#[allow(unsafe_code)]
unsafe impl Send for CompactDecimal {}
// SAFETY: as for `Send`; `&CompactDecimal` only reads the `BigDecimal`.
#[allow(unsafe_code)]
unsafe impl Sync for CompactDecimal {}

impl CompactDecimal {
    /// `v`, same integer and scale.
    pub fn of(v: &BigDecimal) -> CompactDecimal {
        match Fixed::from_big(v).and_then(pack) {
            Some(word) => CompactDecimal(
                NonNull::new(std::ptr::without_provenance_mut(word))
                    .expect("a packed word has its low bit set"),
            ),
            None => CompactDecimal(NonNull::from(Box::leak(Box::new(v.clone())))),
        }
    }

    /// The packed word, when it is one.
    fn word(&self) -> Option<usize> {
        let word = self.0.as_ptr().addr();
        (word & 1 == 1).then_some(word)
    }

    /// The boxed decimal, when it is one.
    #[allow(unsafe_code)]
    fn big(&self) -> Option<&BigDecimal> {
        match self.word() {
            Some(_) => None,
            // SAFETY: a word with its low bit clear is the pointer
            // `Box::into_raw` gave (see `of`), owned by `self` and freed
            // only by its `Drop`, so it is valid for as long as `self` is
            // borrowed.
            None => Some(unsafe { self.0.as_ref() }),
        }
    }

    pub(crate) fn fixed(&self) -> Option<Fixed> {
        self.word().map(unpack)
    }

    /// The `BigDecimal` it holds (same integer, same scale).
    pub fn to_big(&self) -> BigDecimal {
        match self.big() {
            Some(b) => b.clone(),
            None => self.fixed().expect("packed").to_big(),
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
        match (self.fixed(), self.big()) {
            (Some(f), _) => f.mantissa as f64 / 10f64.powi(f.scale as i32),
            (None, Some(b)) => b.to_f64().unwrap_or(0.0),
            (None, None) => unreachable!("a word is packed or boxed"),
        }
    }

    /// Its sign, as its comparison with zero (`-0.0` is zero).
    pub fn cmp_zero(&self) -> Ordering {
        match (self.fixed(), self.big()) {
            (Some(f), _) => f.mantissa.cmp(&0),
            (None, Some(b)) => b.sign().cmp(&bigdecimal::num_bigint::Sign::NoSign),
            (None, None) => unreachable!("a word is packed or boxed"),
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

/// `f` packed into a word with its low bit set, when its mantissa and
/// scale fit.
fn pack(f: Fixed) -> Option<usize> {
    if !(MANTISSA_MIN..=MANTISSA_MAX).contains(&f.mantissa)
        || !(SCALE_MIN..=SCALE_MAX).contains(&f.scale)
    {
        return None;
    }
    let scale = (f.scale as usize) & ((1 << SCALE_BITS) - 1);
    Some(((f.mantissa as isize as usize) << LOW_BITS) | (scale << 1) | 1)
}

/// The mantissa and scale of a packed word (arithmetic shifts give back
/// their signs).
fn unpack(word: usize) -> Fixed {
    let scale = ((word as isize) << (usize::BITS - LOW_BITS)) >> (usize::BITS - SCALE_BITS);
    Fixed {
        mantissa: ((word as isize) >> LOW_BITS) as i128,
        scale: scale as i64,
    }
}

impl Drop for CompactDecimal {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        if self.word().is_none() {
            // SAFETY: the pointer came from `Box::into_raw` (`Box::leak`
            // in `of`), is owned by `self` alone and is freed only here.
            drop(unsafe { Box::from_raw(self.0.as_ptr()) });
        }
    }
}

impl Clone for CompactDecimal {
    fn clone(&self) -> CompactDecimal {
        match self.big() {
            Some(b) => CompactDecimal(NonNull::from(Box::leak(Box::new(b.clone())))),
            None => CompactDecimal(self.0),
        }
    }
}

/// Equal when the same integer and scale (as the two forms of an enum
/// would be: a value that packs is never boxed, so the forms never meet).
impl PartialEq for CompactDecimal {
    fn eq(&self, other: &CompactDecimal) -> bool {
        match (self.big(), other.big()) {
            (None, None) => self.0 == other.0,
            (Some(a), Some(b)) => a.as_bigint_and_scale() == b.as_bigint_and_scale(),
            _ => false,
        }
    }
}

impl Eq for CompactDecimal {}

impl fmt::Debug for CompactDecimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CompactDecimal({})", self.to_big())
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
        assert_eq!(std::mem::size_of::<CompactDecimal>(), 8);
        assert_eq!(std::mem::size_of::<Option<CompactDecimal>>(), 8);
    }

    #[test]
    fn the_packed_range_ends_where_a_word_does() {
        let packed = |s: &str| CompactDecimal::of(&s.parse().unwrap()).word().is_some();
        let top = MANTISSA_MAX.to_string();
        let bottom = MANTISSA_MIN.to_string();
        let over = (MANTISSA_MAX + 1).to_string();
        let under = (MANTISSA_MIN - 1).to_string();
        assert!(packed(&top) && packed(&bottom) && packed("1E+64") && packed("1E-63"));
        assert!(!packed(&over) && !packed(&under) && !packed("1E+65") && !packed("1E-64"));
        for text in [top, bottom, over, under, "1E+65".into(), "1E-64".into()] {
            let c = CompactDecimal::of(&text.parse().unwrap());
            assert_eq!(c.to_big(), text.parse::<BigDecimal>().unwrap(), "{text}");
            assert_eq!(c.clone(), c, "{text}");
        }
    }

    proptest::proptest! {
        /// Whatever its size and scale, a decimal comes back with its
        /// integer and scale, equality and order are the `BigDecimal`'s, and
        /// clones (boxed ones included) are equal and dropped apart.
        #[test]
        fn a_decimal_is_what_it_was_given(
            a in proptest::num::i128::ANY,
            b in -(1i64 << 40)..(1i64 << 40),
            a_scale in -70i64..70,
            b_scale in -70i64..70,
        ) {
            let x = BigDecimal::new(a.into(), a_scale);
            let y = BigDecimal::new(b.into(), b_scale);
            let (cx, cy) = (CompactDecimal::of(&x), CompactDecimal::of(&y));
            let copy = cx.clone();
            drop(cx);
            let (back_x, back_y) = (copy.to_big(), cy.to_big());
            proptest::prop_assert_eq!(back_x.as_bigint_and_scale(), x.as_bigint_and_scale());
            proptest::prop_assert_eq!(back_y.as_bigint_and_scale(), y.as_bigint_and_scale());
            proptest::prop_assert_eq!(copy.cmp_value(&cy), x.cmp(&y));
            proptest::prop_assert_eq!(cy.cmp_zero(), y.sign().cmp(&bigdecimal::num_bigint::Sign::NoSign));
            proptest::prop_assert_eq!(
                copy == cy,
                x.as_bigint_and_scale() == y.as_bigint_and_scale()
            );
            let f = cy.to_f64();
            let expected: f64 = y.to_string().parse().unwrap();
            proptest::prop_assert!((f - expected).abs() <= expected.abs() * 1e-12, "{} {}", f, expected);
        }
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
