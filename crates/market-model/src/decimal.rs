//! Exact decimal quantities that travel as plain-notation JSON strings.

use std::fmt;
use std::ops::Deref;
use std::str::FromStr;

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
        self.0.to_plain_string()
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
        self.0.write_plain_string(f)
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
        let s = String::deserialize(deserializer)?;
        Decimal::from_str(&s).map_err(serde::de::Error::custom)
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
        assert!(
            serde_json::from_str::<Decimal>("1.5").is_err(),
            "JSON numbers are not accepted"
        );
    }

    #[test]
    fn rounds_half_up() {
        let d: Decimal = "2.00005".parse().unwrap();
        assert_eq!(d.round_dp(4).to_string(), "2.0001");
        let d: Decimal = "-2.00005".parse().unwrap();
        assert_eq!(d.round_dp(4).to_string(), "-2.0001");
    }
}
