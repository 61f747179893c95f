//! RFC 3339 UTC timestamps (always ending in `Z`).

use serde::{Deserialize, Deserializer, Serializer};
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, UtcOffset};

/// Formats an instant as RFC 3339 in UTC with a `Z` suffix, whatever its offset.
pub fn format_utc(t: OffsetDateTime) -> String {
    t.to_offset(UtcOffset::UTC)
        .format(&Rfc3339)
        .expect("an OffsetDateTime in years 0..=9999 always formats as RFC 3339")
}

/// The current UTC time truncated to whole seconds (for stored audit times).
pub fn now_seconds() -> OffsetDateTime {
    OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .expect("0 is a valid nanosecond")
}

/// serde helper: `#[serde(with = "market_model::timestamp::rfc3339_utc")]`.
pub mod rfc3339_utc {
    use super::*;

    /// Serializes as an RFC 3339 UTC string ending in `Z`.
    pub fn serialize<S: Serializer>(t: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_utc(*t))
    }

    /// Parses any RFC 3339 string and converts it to UTC.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OffsetDateTime, D::Error> {
        let s = String::deserialize(d)?;
        OffsetDateTime::parse(&s, &Rfc3339)
            .map(|t| t.to_offset(UtcOffset::UTC))
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn always_z() {
        assert_eq!(
            format_utc(datetime!(2026-11-22 02:30:00 UTC)),
            "2026-11-22T02:30:00Z"
        );
        assert_eq!(
            format_utc(datetime!(2026-11-22 04:30:00.250 +02:00)),
            "2026-11-22T02:30:00.25Z"
        );
    }
}
