//! Strict query-string parsing: unknown, repeated and malformed parameters are 400s.

use std::str::FromStr;

use market_model::UnknownValue;
use time::format_description::well_known::Rfc3339;
use time::{Date, OffsetDateTime};

use crate::error::ApiError;

/// Longest accepted query string, in bytes.
pub const MAX_QUERY_LEN: usize = 4096;

/// The decoded query parameters of one request, checked against the allowed names.
#[derive(Debug, Default)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Decodes `query` and rejects names outside `allowed`, repeated names,
    /// invalid UTF-8 and query strings over [`MAX_QUERY_LEN`].
    pub fn parse(query: &str, allowed: &[&str]) -> Result<Params, ApiError> {
        if query.len() > MAX_QUERY_LEN {
            return Err(ApiError::new(
                crate::error::ProblemKind::InvalidParameter,
                format!("The query string is {} bytes long; at most {MAX_QUERY_LEN} bytes are accepted.", query.len()),
            ));
        }
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            if name.is_empty() && value.is_empty() {
                continue; // `?&` or a trailing `&`
            }
            if name.contains('\u{FFFD}') || value.contains('\u{FFFD}') {
                return Err(ApiError::param(
                    &printable(&name),
                    "is not valid UTF-8 after percent-decoding",
                ));
            }
            if !allowed.contains(&name.as_ref()) {
                let allowed_list = if allowed.is_empty() {
                    "this endpoint takes no query parameters".to_owned()
                } else {
                    format!("allowed: {}", allowed.join(", "))
                };
                return Err(ApiError::param(
                    &printable(&name),
                    format!("is not a parameter of this endpoint ({allowed_list})"),
                ));
            }
            if pairs.iter().any(|(n, _)| n == &name) {
                return Err(ApiError::param(
                    &name,
                    "is given more than once; give it at most once",
                ));
            }
            pairs.push((name.into_owned(), value.into_owned()));
        }
        Ok(Params { pairs })
    }

    /// The raw value of `name`, if given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Parses an optional enumeration value.
    pub fn enum_opt<T: FromStr<Err = UnknownValue>>(
        &self,
        name: &str,
    ) -> Result<Option<T>, ApiError> {
        self.get(name)
            .map(|v| {
                v.parse::<T>().map_err(|e| {
                    ApiError::param(
                        name,
                        format!(
                            "must be one of {}; got `{}`",
                            e.allowed.join(", "),
                            printable(v)
                        ),
                    )
                })
            })
            .transpose()
    }

    /// Parses a required `YYYY-MM-DD` date.
    pub fn date(&self, name: &str) -> Result<Date, ApiError> {
        let v = self
            .get(name)
            .ok_or_else(|| ApiError::param(name, "is required (a date, YYYY-MM-DD)"))?;
        market_model::timestamp_date::parse(v).map_err(|_| {
            ApiError::param(
                name,
                format!("must be a calendar date YYYY-MM-DD; got `{}`", printable(v)),
            )
        })
    }

    /// Parses an optional instant (RFC 3339 or epoch milliseconds) into epoch ms.
    pub fn instant_ms(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.get(name)
            .map(|v| parse_instant_ms(v).map_err(|reason| ApiError::param(name, reason)))
            .transpose()
    }
}

/// Earliest and latest instants accepted (0000-01-01 to 9999-12-31), epoch ms.
/// Epoch-millisecond input is non-negative; RFC 3339 input may predate 1970.
const MIN_MS: i64 = -62_167_219_200_000;
const MAX_MS: i64 = 253_402_300_799_999;

/// Parses an RFC 3339 instant (`2026-11-22T00:00:00Z`) or epoch milliseconds.
pub fn parse_instant_ms(v: &str) -> Result<i64, String> {
    let bad = || {
        format!(
            "must be an RFC 3339 instant (e.g. 2026-11-22T00:00:00Z) or epoch milliseconds from 0 to {MAX_MS}; got `{}`",
            printable(v)
        )
    };
    if !v.is_empty() && v.len() <= 16 && v.bytes().all(|b| b.is_ascii_digit()) {
        return match v.parse::<i64>() {
            Ok(ms) if (0..=MAX_MS).contains(&ms) => Ok(ms),
            _ => Err(bad()),
        };
    }
    let t = OffsetDateTime::parse(v, &Rfc3339).map_err(|_| bad())?;
    let ms = (t.unix_timestamp_nanos() / 1_000_000) as i64;
    if (MIN_MS..=MAX_MS).contains(&ms) {
        Ok(ms)
    } else {
        Err(bad())
    }
}

/// A caller-supplied value made safe to echo: control characters escaped, at most 64 characters.
pub fn printable(v: &str) -> String {
    let mut out: String = v.chars().take(64).flat_map(char::escape_default).collect();
    if v.chars().count() > 64 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rejects_unknown_and_repeated() {
        assert!(Params::parse("limit=5&limit=6", &["limit"]).is_err());
        let e = Params::parse("foo=1", &["limit", "cursor"]).unwrap_err();
        assert!(e.detail.contains("allowed: limit, cursor"), "{}", e.detail);
        assert!(Params::parse("limit=%FF", &["limit"]).is_err());
        assert!(Params::parse(&"a".repeat(5000), &["a"]).is_err());
        let p = Params::parse("limit=5&&", &["limit"]).unwrap();
        assert_eq!(p.get("limit"), Some("5"));
    }

    #[test]
    fn instants() {
        assert_eq!(parse_instant_ms("0"), Ok(0));
        assert_eq!(parse_instant_ms("1795003200000"), Ok(1_795_003_200_000));
        assert_eq!(
            parse_instant_ms("2026-11-22T00:00:00Z"),
            Ok(1_795_305_600_000)
        );
        assert_eq!(
            parse_instant_ms("2026-11-22T01:00:00+01:00"),
            Ok(1_795_305_600_000)
        );
        for bad in [
            "",
            "-1",
            "abc",
            "2026-13-01T00:00:00Z",
            "99999999999999999",
            "1e3",
            "2026-11-22",
        ] {
            assert!(parse_instant_ms(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn printable_escapes() {
        assert_eq!(printable("a\u{0}b"), "a\\u{0}b");
        assert_eq!(printable(&"x".repeat(100)).chars().count(), 65);
    }

    proptest! {
        #[test]
        fn parsers_never_panic(q in ".*", v in ".*") {
            if let Ok(p) = Params::parse(&q, &["limit", "fromDate", "from", "sort"]) {
                let _ = p.date("fromDate");
                let _ = p.instant_ms("from");
                let _ = p.enum_opt::<market_model::WalletSort>("sort");
            }
            let _ = parse_instant_ms(&v);
        }
    }
}
