//! Exact decimal quantities that travel as plain-notation JSON strings.

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

use bigdecimal::num_bigint::BigInt;
use bigdecimal::num_traits::ToPrimitive;
use bigdecimal::{BigDecimal, RoundingMode};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An exact decimal quantity (price, USD value, ratio, percentage).
///
/// It wraps [`BigDecimal`] and serializes as a JSON string in plain notation
/// (`"0.0000001"`, never `"1E-7"` and never a JSON number), so no client
/// ever parses it through a binary float. Deserialization accepts the same
/// strings (exponent notation is accepted on input and normalised on output).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Decimal(pub BigDecimal);

impl Decimal {
    /// Zero with no fractional digits.
    pub fn zero() -> Self {
        Decimal(BigDecimal::from(0))
    }

    /// Rounds half away from zero to `digits` fractional digits.
    pub fn round_dp(&self, digits: i64) -> Self {
        Decimal(self.0.with_scale_round(digits, RoundingMode::HalfUp))
    }

    /// The wrapped [`BigDecimal`].
    pub fn into_inner(self) -> BigDecimal {
        self.0
    }

    /// The plain-notation text form used on the wire.
    pub fn to_plain_string(&self) -> String {
        Plain(&self.0).to_string()
    }
}

impl Deref for Decimal {
    type Target = BigDecimal;
    fn deref(&self) -> &BigDecimal {
        &self.0
    }
}

impl From<BigDecimal> for Decimal {
    fn from(value: BigDecimal) -> Self {
        Decimal(value)
    }
}

impl From<i64> for Decimal {
    fn from(value: i64) -> Self {
        Decimal(BigDecimal::from(value))
    }
}

impl From<Decimal> for BigDecimal {
    fn from(value: Decimal) -> Self {
        value.0
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Plain(&self.0).fmt(f)
    }
}

/// A borrowed [`BigDecimal`] displayed in plain notation: the text of
/// [`Decimal`] on the wire, for writers that hold a `BigDecimal` (the
/// store's SQLite columns) and should not clone it to print it.
#[derive(Clone, Copy, Debug)]
pub struct Plain<'a>(pub &'a BigDecimal);

impl Plain<'_> {
    /// Appends the text of [`Display`](fmt::Display) to `out`, without a
    /// formatter in between: for writers of many decimals into one text
    /// (the store's JSON columns).
    pub fn push_to(&self, out: &mut String) {
        self.write_to(out)
            .expect("writing to a String does not fail");
    }

    fn write_to(&self, w: &mut impl fmt::Write) -> fmt::Result {
        let (digits, scale) = self.0.as_bigint_and_scale();
        match digits.to_i128() {
            // Fast path (no allocation) for the usual sizes; the same text as
            // `write_plain_string`, which handles everything else.
            Some(int) if (-64..=64).contains(&scale) => write_plain(w, int, scale),
            _ => self.0.write_plain_string(w),
        }
    }
}

impl fmt::Display for Plain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_to(f)
    }
}

/// Writes `int × 10^-scale` in plain notation.
fn write_plain(f: &mut impl fmt::Write, int: i128, scale: i64) -> fmt::Result {
    let mut buf = [0u8; 40];
    let mut at = buf.len();
    let mut mag = int.unsigned_abs();
    // 128-bit division is slow; peel off 19-digit chunks, then use u64.
    while mag > u128::from(u64::MAX) {
        let mut chunk = (mag % 10_000_000_000_000_000_000) as u64;
        mag /= 10_000_000_000_000_000_000;
        for _ in 0..19 {
            at -= 1;
            buf[at] = b'0' + (chunk % 10) as u8;
            chunk /= 10;
        }
    }
    let mut small = mag as u64;
    loop {
        at -= 1;
        buf[at] = b'0' + (small % 10) as u8;
        small /= 10;
        if small == 0 {
            break;
        }
    }
    let digits = std::str::from_utf8(&buf[at..]).expect("ASCII digits");
    if int < 0 {
        f.write_str("-")?;
    }
    const ZEROS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
    if scale <= 0 {
        f.write_str(digits)?;
        return f.write_str(&ZEROS[..(-scale) as usize]);
    }
    let scale = scale as usize;
    if digits.len() > scale {
        let (whole, frac) = digits.split_at(digits.len() - scale);
        f.write_str(whole)?;
        f.write_str(".")?;
        f.write_str(frac)
    } else {
        f.write_str("0.")?;
        f.write_str(&ZEROS[..scale - digits.len()])?;
        f.write_str(digits)
    }
}

/// Parses plain notation (`-?[0-9]+(\.[0-9]+)?`) of at most 38 digits
/// without going through a big-integer conversion; `None` for anything else
/// (which the general parser handles).
pub fn parse_plain(s: &str) -> Option<BigDecimal> {
    let (negative, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (whole, frac) = match body.split_once('.') {
        Some((w, f)) => (w, f),
        None => (body, ""),
    };
    if whole.is_empty()
        || (body.contains('.') && frac.is_empty())
        || whole.len() + frac.len() > 38
        || !whole
            .bytes()
            .chain(frac.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut int: i128 = 0;
    for b in whole.bytes().chain(frac.bytes()) {
        int = int * 10 + i128::from(b - b'0');
    }
    if negative {
        int = -int;
    }
    Some(BigDecimal::new(BigInt::from(int), frac.len() as i64))
}

/// Decimal text exactly as [`Decimal`] serializes the number it denotes,
/// borrowed: `-?(0|[1-9][0-9]*)(\.[0-9]+)?`, and no sign on zero. A version
/// read back from the database holds its decimals as such text already, so
/// they can be served without parsing them (see
/// [`MarketPositionText`](crate::MarketPositionText)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlainDecimal<'a>(&'a str);

impl<'a> PlainDecimal<'a> {
    /// The number the text denotes.
    pub fn to_decimal(&self) -> BigDecimal {
        parse_plain(self.0)
            .or_else(|| BigDecimal::from_str(self.0).ok())
            .expect("plain decimal text parses")
    }

    /// `Some` when `text` is the text [`Decimal`] writes for its number
    /// (`"0.50"`, `"-12"`, `"1000"`); `None` for any other spelling of a
    /// number (`"1e3"`, `"+1"`, `"01"`, `".5"`, `"-0"`) and for non-numbers.
    pub fn new(text: &'a str) -> Option<PlainDecimal<'a>> {
        // One pass: it runs for every decimal of every position a server loads.
        let b = text.as_bytes();
        let body = b.strip_prefix(b"-").unwrap_or(b);
        let (mut dot, mut nonzero) = (None, false);
        for (i, &c) in body.iter().enumerate() {
            match c {
                b'0' => {}
                b'1'..=b'9' => nonzero = true,
                b'.' if dot.is_none() => dot = Some(i),
                _ => return None,
            }
        }
        let whole = dot.unwrap_or(body.len());
        let canonical = whole > 0
            && (whole == 1 || body[0] != b'0')
            && dot.is_none_or(|d| d + 1 < body.len())
            // BigDecimal has no negative zero: "-0.00" prints as "0.00".
            && (body.len() == b.len() || nonzero);
        canonical.then_some(PlainDecimal(text))
    }

    /// The text.
    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

impl Serialize for PlainDecimal<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0)
    }
}

/// Error for text that is not a finite decimal number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a decimal number")]
pub struct ParseDecimalError(pub String);

impl FromStr for Decimal {
    type Err = ParseDecimalError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // BigDecimal accepts a few spellings we do not want on the wire
        // (surrounding whitespace, a leading '+', huge exponents); keep input strict.
        let t = s.trim();
        if t.is_empty() || t != s || t.len() > 100 {
            return Err(ParseDecimalError(s.to_owned()));
        }
        let ok = t
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'.' | b'e' | b'E' | b'+'));
        if !ok || !t.bytes().any(|b| b.is_ascii_digit()) {
            return Err(ParseDecimalError(s.to_owned()));
        }
        if let Some(value) = parse_plain(t) {
            return Ok(Decimal(value));
        }
        let value = BigDecimal::from_str(t).map_err(|_| ParseDecimalError(s.to_owned()))?;
        // Reject exponents that would expand into absurdly long plain strings.
        let (_, scale) = value.as_bigint_and_exponent();
        if !(-64..=64).contains(&scale) {
            return Err(ParseDecimalError(s.to_owned()));
        }
        Ok(Decimal(value))
    }
}

impl Serialize for Decimal {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Decimal {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(DecimalVisitor)
    }
}

/// Parses a decimal from the string as the deserializer has it, with no
/// `String` allocated for it (a server reads a version's tens of thousands
/// of stored liquidation levels this way at each publish). It takes what
/// `String` takes, with the same "a string" in type errors.
struct DecimalVisitor;

impl serde::de::Visitor<'_> for DecimalVisitor {
    type Value = Decimal;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Decimal, E> {
        Decimal::from_str(s).map_err(E::custom)
    }

    fn visit_bytes<E: serde::de::Error>(self, b: &[u8]) -> Result<Decimal, E> {
        match std::str::from_utf8(b) {
            Ok(s) => self.visit_str(s),
            Err(_) => Err(E::invalid_value(serde::de::Unexpected::Bytes(b), &self)),
        }
    }
}

#[cfg(feature = "openapi")]
mod schema {
    use super::Decimal;
    use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaFormat, Type};
    use utoipa::openapi::{KnownFormat, RefOr};
    use utoipa::{PartialSchema, ToSchema};

    /// The regular expression every decimal string matches.
    pub const DECIMAL_PATTERN: &str = r"^-?[0-9]+(\.[0-9]+)?$";

    impl PartialSchema for Decimal {
        fn schema() -> RefOr<Schema> {
            let _ = KnownFormat::Double; // formats are custom strings for decimals
            ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(SchemaFormat::Custom("decimal".into())))
                .pattern(Some(DECIMAL_PATTERN))
                .description(Some(
                    "Exact decimal number in plain notation, as a string (never exponent notation, never a JSON number).",
                ))
                .examples(["12345.67"])
                .into()
        }
    }

    impl ToSchema for Decimal {}
}

#[cfg(feature = "openapi")]
pub use schema::DECIMAL_PATTERN;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_plain_notation() {
        let d: Decimal = "1E-7".parse().unwrap();
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"0.0000001\"");
        let d: Decimal = "1.5e3".parse().unwrap();
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"1500\"");
        let d: Decimal = "-0.000123400".parse().unwrap();
        assert_eq!(d.to_string(), "-0.000123400");
    }

    #[test]
    fn plain_text_is_what_decimals_print() {
        // Every text a decimal prints is accepted as such...
        for s in [
            "0",
            "0.00",
            "-1",
            "1000",
            "12.340",
            "0.0000001",
            "-0.5",
            "1E+3",
            "-4.2E-7",
            "123456789012345678901234567890123456789012.5",
            "9E+30",
            "-0E-5",
        ] {
            let printed = s.parse::<Decimal>().unwrap().to_string();
            assert_eq!(
                PlainDecimal::new(&printed).map(|p| p.as_str()),
                Some(printed.as_str())
            );
        }
        // ...and whatever else is accepted prints as itself.
        for s in [
            "7",
            "10.0",
            "-0.01",
            "99999999999999999999999999999999999999999.9",
        ] {
            assert!(PlainDecimal::new(s).is_some());
            assert_eq!(s.parse::<Decimal>().unwrap().to_string(), s);
        }
        for s in [
            "", "-", ".5", "5.", "01", "00.1", "-0", "-0.00", "+1", "1e3", " 1", "1 ", "1.2.3",
            "1,5", "NaN", "-.5",
        ] {
            assert_eq!(PlainDecimal::new(s), None, "{s:?}");
        }
        assert_eq!(
            serde_json::to_string(&PlainDecimal::new("-2.50")).unwrap(),
            "\"-2.50\""
        );
    }

    #[test]
    fn pushed_text_is_the_displayed_text() {
        // Both paths: the small fast one and `BigDecimal`'s own for large
        // digits or scales.
        for s in [
            "0",
            "-0.5",
            "1E+3",
            "12.340",
            "-4.2E-7",
            "1E-70",
            "5E+80",
            "123456789012345678901234567890123456789012.5",
        ] {
            let d: BigDecimal = s.parse().unwrap();
            let mut out = String::from("[");
            Plain(&d).push_to(&mut out);
            assert_eq!(out, format!("[{}", Plain(&d)), "{s}");
        }
    }

    #[test]
    fn round_trips_exactly() {
        for s in [
            "12.34",
            "92391.3380",
            "0.00009116",
            "-49.804021",
            "123456789012345678901234567890.123456789",
        ] {
            let d: Decimal = serde_json::from_str(&format!("\"{s}\"")).unwrap();
            assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{s}\""));
        }
    }

    #[test]
    fn rejects_non_numbers() {
        for s in [
            "", " 1", "1 ", "abc", "NaN", "inf", "1e999", "--1", "0x10", ".",
        ] {
            assert!(s.parse::<Decimal>().is_err(), "{s:?} parsed");
        }
        let number = serde_json::from_str::<Decimal>("1.5").expect_err("a JSON number");
        assert_eq!(
            number.to_string(),
            "invalid type: floating point `1.5`, expected a string at line 1 column 3"
        );
        let text = serde_json::from_str::<Decimal>("\"1.5x\"").expect_err("not a decimal");
        assert!(
            text.to_string()
                .starts_with("`1.5x` is not a decimal number"),
            "{text}"
        );
    }

    #[test]
    fn deserializes_from_borrowed_escaped_and_owned_strings() {
        let want = Decimal::from_str("-12.50").unwrap();
        // Borrowed from the input, unescaped into a buffer, and owned.
        assert_eq!(serde_json::from_str::<Decimal>("\"-12.50\"").unwrap(), want);
        assert_eq!(
            serde_json::from_str::<Decimal>("\"-12\\u002e50\"").unwrap(),
            want
        );
        let value = serde_json::Value::String("-12.50".to_owned());
        assert_eq!(serde_json::from_value::<Decimal>(value).unwrap(), want);
        assert_eq!(want.to_string(), "-12.50");
    }

    #[test]
    fn fast_paths_agree_with_bigdecimal() {
        let mut texts: Vec<String> = [
            "0",
            "-0",
            "0.00",
            "-0.000",
            "1",
            "-1",
            "10",
            "0.5",
            "-0.5",
            "007.50",
            "1e3",
            "1.5E-7",
            "-12.5e2",
            "1e-64",
            "1e64",
            "1e65",
            "99999999999999999999999999999999999999",
            "-99999999999999999999999999999999999999",
            "999999999999999999999999999999999999999",
            "170141183460469231731687303715884105727",
            "0.00000000000000000000000000000000000001",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // a deterministic spread of magnitudes, scales and signs
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = (x % 30) as usize + 1;
            let mantissa = format!("{:030}", x % 10u64.pow(19)).repeat(2);
            let scale = (x >> 40) % 40;
            let sign = if x & 1 == 1 { "-" } else { "" };
            texts.push(format!("{sign}{}e-{scale}", &mantissa[..digits]));
        }
        for t in &texts {
            let big = BigDecimal::from_str(t).unwrap();
            let ours = Decimal(big.clone());
            assert_eq!(ours.to_string(), big.to_plain_string(), "{t}");
            assert_eq!(ours.to_plain_string(), big.to_plain_string(), "{t}");
            let plain = big.to_plain_string();
            if let Some(fast) = parse_plain(&plain) {
                let general = BigDecimal::from_str(&plain).unwrap();
                assert_eq!(
                    fast.as_bigint_and_exponent(),
                    general.as_bigint_and_exponent(),
                    "{plain}"
                );
            } else {
                let digits = plain.bytes().filter(u8::is_ascii_digit).count();
                assert!(digits > 38, "{plain} should take the fast path");
            }
        }
        for bad in ["", "-", ".", "1.", ".5", "+1", "1e5", "1..2", "--1", "١"] {
            assert!(parse_plain(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn rounds_half_up() {
        let d: Decimal = "2.00005".parse().unwrap();
        assert_eq!(d.round_dp(4).to_string(), "2.0001");
        let d: Decimal = "-2.00005".parse().unwrap();
        assert_eq!(d.round_dp(4).to_string(), "-2.0001");
    }
}
