//! Order-preserving 64-bit codes of the wallet orders' sort keys, kept in
//! list order beside each order's list ([`Order`](super::wallets::Order)).
//!
//! Applying a publish places each changed wallet in every listing order
//! (7,000 wallets in 10 orders of 300,000 at an own node's scale).
//! Comparing against the wallet items costs a cache miss each (the items
//! are spread over the heap). On the codes, the changed wallets are merged
//! into each list as it is copied, reading one array in order. Entries of
//! equal code are of equal value when the code says it is exact
//! ([`exact`]), and then ordered by address; only values that share an
//! inexact code are compared on the items.

use bigdecimal::{BigDecimal, RoundingMode, ToPrimitive};
use market_engine::{pow10, SortKey};
use market_model::SortOrder;

/// The code of a null value: after every value, in both orders.
const NULL: u64 = u64::MAX;
/// Values are coded in millionths, within ±2^60.
const LIMIT: i128 = 1 << 60;
/// Values below the range (inexact: odd).
const BELOW: u64 = 1;
/// Values above the range: the code of an inexact value whose floor is
/// the range's top (sharing it is sound: equal inexact codes are compared
/// on the values).
const ABOVE: u64 = (4 * LIMIT + 3) as u64;
/// Mirrors a code for a descending order, keeping its parity.
const MIRROR: u64 = ABOVE + BELOW;

/// The code of `key` in `order`: codes never decrease along the order
/// (`2 × (floor(value × 10^6) + 2^60) + 2`, plus one when the value lies
/// above that floor; clamped; mirrored for a descending order; null last
/// in both). Two equal codes are equal values when [`exact`], and say
/// nothing otherwise.
pub(super) fn code(key: Option<&SortKey>, order: SortOrder) -> u64 {
    in_order(ascending(key), order)
}

/// The code in `order` of a key whose ascending code is `ascending`.
pub(super) fn in_order(ascending: u64, order: SortOrder) -> u64 {
    match order {
        SortOrder::Asc => ascending,
        SortOrder::Desc if ascending == NULL => NULL,
        SortOrder::Desc => MIRROR - ascending,
    }
}

/// The code of `key` in ascending order.
pub(super) fn ascending(key: Option<&SortKey>) -> u64 {
    let Some(key) = key else { return NULL };
    let millionths = match key {
        SortKey::Small { mantissa, scale } => small_millionths(*mantissa, *scale),
        SortKey::Big(value) => big_millionths(value),
    };
    match millionths {
        Some((f, _)) if f < -LIMIT => BELOW,
        Some((f, _)) if f > LIMIT => ABOVE,
        Some((f, exact)) => (2 * (f + LIMIT) + 2 + i128::from(!exact)) as u64,
        None if is_negative(key) => BELOW,
        None => ABOVE,
    }
}

/// Whether two entries with this code have equal values (both null, or
/// both exactly the value the code names).
pub(super) fn exact(code: u64) -> bool {
    code == NULL || code.is_multiple_of(2)
}

fn is_negative(key: &SortKey) -> bool {
    match key {
        SortKey::Small { mantissa, .. } => *mantissa < 0,
        SortKey::Big(value) => value.sign() == bigdecimal::num_bigint::Sign::Minus,
    }
}

/// `floor(mantissa × 10^(6 − scale))` and whether it is the value
/// exactly; `None` when it does not fit an i128. (Divides in 64 bits: a
/// start derives a code for every wallet and sort.)
fn small_millionths(mantissa: i64, scale: i16) -> Option<(i128, bool)> {
    if mantissa == 0 {
        return Some((0, true));
    }
    let shift = 6 - i32::from(scale);
    if shift >= 0 {
        // 10^38, the largest power a u128 holds, fits an i128 too.
        let power = i128::try_from(pow10(u64::from(shift.unsigned_abs()))?).ok()?;
        return i128::from(mantissa).checked_mul(power).map(|v| (v, true));
    }
    match 10i64.checked_pow(shift.unsigned_abs()) {
        Some(d) => Some((
            i128::from(mantissa.div_euclid(d)),
            mantissa.rem_euclid(d) == 0,
        )),
        // |mantissa| < 10^19 ≤ the divisor: 0 < |value × 10^6| < 1.
        None => Some((if mantissa < 0 { -1 } else { 0 }, false)),
    }
}

/// `floor(value × 10^6)` and whether it is the value exactly; `None` when
/// it does not fit an i128.
fn big_millionths(value: &BigDecimal) -> Option<(i128, bool)> {
    let scaled = value * BigDecimal::from(1_000_000);
    let floor = scaled.with_scale_round(0, RoundingMode::Floor);
    floor.to_i128().map(|f| (f, floor == scaled))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::pages::cmp_values;
    use std::cmp::Ordering;

    /// Every pair of values, small and big, both orders: a smaller code is
    /// an earlier value.
    #[test]
    fn codes_never_contradict_the_order() {
        let big = format!("1{}", "0".repeat(40));
        let tiny = format!("0.{}1", "0".repeat(40));
        let texts = [
            "0",
            "-0.0000001",
            "0.0000001",
            "0.000001",
            "0.0000011",
            "-0.000001",
            "-0.0000011",
            "1",
            "1.0",
            "1.00000000001",
            "0.99999999999",
            "-1",
            "123456.789",
            "123456.7890001",
            "1152921504606.846975",
            "1152921504606.846976",
            "1152921504606.846977",
            "1152921504607",
            "-1152921504606.846976",
            "-1152921504606.846977",
            "-1152921504607",
            "9223372036854775807",
            "-9223372036854775808",
            "1e30",
            "-1e30",
            "1e-30",
            "-1e-30",
            "1e33",
            "-1e33",
            "0.0000000000000000001",
            "-0.0000000000000000001",
            &big,
            &format!("-{big}"),
            &format!("{big}.5"),
            &tiny,
            &format!("-{tiny}"),
        ];
        let mut keys: Vec<Option<SortKey>> = texts
            .iter()
            .map(|t| Some(SortKey::new(&t.parse().unwrap())))
            .collect();
        keys.push(None);
        let mut distinct = 0;
        for a in &keys {
            for b in &keys {
                for order in [SortOrder::Asc, SortOrder::Desc] {
                    let (ca, cb) = (code(a.as_ref(), order), code(b.as_ref(), order));
                    let want = cmp_values(a.as_ref(), b.as_ref(), order);
                    if ca != cb {
                        assert_eq!(ca.cmp(&cb), want, "{a:?} vs {b:?} {order:?}");
                        distinct += 1;
                    } else if exact(ca) {
                        assert_eq!(want, Ordering::Equal, "{a:?} vs {b:?} {order:?}");
                    }
                }
            }
        }
        // Most pairs are told apart by their codes alone.
        assert!(distinct > keys.len() * keys.len(), "{distinct}");
        assert_eq!(
            code(
                Some(&SortKey::new(&"0.0000011".parse().unwrap())),
                SortOrder::Asc
            )
            .cmp(&code(
                Some(&SortKey::new(&"0.0000019".parse().unwrap())),
                SortOrder::Asc
            )),
            Ordering::Equal,
            "values within a millionth share a code"
        );
        assert!(!exact(code(
            Some(&SortKey::new(&"0.0000011".parse().unwrap())),
            SortOrder::Desc
        )));
        for t in ["1", "1.000000", "-2.5", "0"] {
            let key = SortKey::new(&t.parse().unwrap());
            for order in [SortOrder::Asc, SortOrder::Desc] {
                assert!(exact(code(Some(&key), order)), "{t} {order:?}");
            }
        }
        assert!(exact(code(None, SortOrder::Desc)));
    }
}
