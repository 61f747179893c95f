//! Strict query strings: a request's query string becomes its endpoint's
//! query type (`market_model::params`), and every name the type does not
//! declare, every repeated name, every value that does not parse and every
//! query string over [`MAX_QUERY_LEN`] is a [`QueryError`] that says what to
//! change.
//!
//! The names a type accepts are read from its own `Deserialize` impl, and
//! the hint for a missing required parameter from its `IntoParams`
//! description, so neither is written twice.

use std::fmt;

use market_model::params::printable;
use serde::de::value::StrDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use utoipa::openapi::path::ParameterIn;
use utoipa::openapi::schema::Schema;
use utoipa::openapi::RefOr;
use utoipa::IntoParams;

use crate::QueryError;

/// Longest accepted query string, in bytes.
pub const MAX_QUERY_LEN: usize = 4096;

/// Parses `query` (the raw query string, without `?`) into `T`.
pub fn parse_query<T: DeserializeOwned + IntoParams>(query: &str) -> Result<T, QueryError> {
    if query.len() > MAX_QUERY_LEN {
        return Err(QueryError::QueryTooLong(query.len()));
    }
    let allowed = field_names::<T>();
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (name, value) in form_urlencoded(query) {
        if name.is_empty() && value.is_empty() {
            continue; // `?&` or a trailing `&`
        }
        if name.contains('\u{FFFD}') || value.contains('\u{FFFD}') {
            return Err(QueryError::param(
                &printable(&name),
                "is not valid UTF-8 after percent-decoding",
            ));
        }
        if !allowed.contains(&name.as_str()) {
            let allowed_list = if allowed.is_empty() {
                "this endpoint takes no query parameters".to_owned()
            } else {
                format!("allowed: {}", allowed.join(", "))
            };
            return Err(QueryError::param(
                &printable(&name),
                format!("is not a parameter of this endpoint ({allowed_list})"),
            ));
        }
        if pairs.iter().any(|(n, _)| *n == name) {
            return Err(QueryError::param(
                &name,
                "is given more than once; give it at most once",
            ));
        }
        pairs.push((name, value));
    }
    T::deserialize(PairsDeserializer {
        pairs: pairs.iter(),
        current: None,
    })
    .map_err(|e| match e {
        DeError::Missing(name) => QueryError::param(name, missing_reason::<T>(name)),
        DeError::Param { name, reason } => QueryError::param(&name, reason),
        DeError::Probed => unreachable!("only the field probe stops this way"),
    })
}

fn form_urlencoded(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    ::form_urlencoded::parse(query.as_bytes()).map(|(n, v)| (n.into_owned(), v.into_owned()))
}

/// Why a required parameter is missing, from its declared description and schema.
fn missing_reason<T: IntoParams>(name: &str) -> String {
    let params = T::into_params(|| Some(ParameterIn::Query));
    let Some(p) = params.iter().find(|p| p.name == name) else {
        return "is required".to_owned();
    };
    match &p.schema {
        Some(RefOr::T(Schema::Object(o))) => {
            if let Some(values) = &o.enum_values {
                let values: Vec<String> = values
                    .iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                    .collect();
                return format!("is required; use one of {}", values.join(", "));
            }
        }
        // An enumeration is a named component the parameter refers to.
        Some(RefOr::Ref(r)) => {
            let name = r.ref_location.rsplit('/').next().unwrap_or_default();
            if let Some(values) = market_model::query::enum_names(name) {
                return format!("is required; use one of {}", values.join(", "));
            }
        }
        _ => {}
    }
    match p.description.as_deref() {
        Some(d) => format!("is required ({})", d.trim_end_matches('.')),
        None => "is required".to_owned(),
    }
}

/// The field names `T`'s derived `Deserialize` accepts.
pub fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldsProbe(&mut names));
    names
}

#[derive(Debug)]
enum DeError {
    /// A required parameter is absent.
    Missing(&'static str),
    /// The field probe stopped (no allocation: it runs on every request).
    Probed,
    /// A value was rejected (`name` is empty until the map access names it).
    Param { name: String, reason: String },
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            DeError::Probed => f.write_str("field names read"),
            DeError::Missing(n) => write!(f, "`{n}` is required"),
            DeError::Param { name, reason } => write!(f, "`{name}` {reason}"),
        }
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<M: fmt::Display>(msg: M) -> Self {
        DeError::Param {
            name: String::new(),
            reason: msg.to_string(),
        }
    }
    fn missing_field(field: &'static str) -> Self {
        DeError::Missing(field)
    }
}

/// Records the field list of a struct's `Deserialize` and stops.
struct FieldsProbe<'a>(&'a mut &'static [&'static str]);

impl<'de> de::Deserializer<'de> for FieldsProbe<'_> {
    type Error = DeError;
    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, DeError> {
        Err(DeError::Probed)
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, DeError> {
        *self.0 = fields;
        Err(DeError::Probed)
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// The decoded pairs of a query string as a map.
struct PairsDeserializer<'a> {
    pairs: std::slice::Iter<'a, (String, String)>,
    current: Option<&'a (String, String)>,
}

impl<'de> de::Deserializer<'de> for PairsDeserializer<'_> {
    type Error = DeError;
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_map(self)
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

impl<'de> MapAccess<'de> for PairsDeserializer<'_> {
    type Error = DeError;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some(pair) = self.pairs.next() else {
            return Ok(None);
        };
        self.current = Some(pair);
        let key: StrDeserializer<'_, DeError> = pair.0.as_str().into_deserializer();
        seed.deserialize(key).map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let (name, value) = self.current.expect("a value follows its key");
        seed.deserialize(ValueDeserializer(value))
            .map_err(|e| match e {
                DeError::Param { name: n, reason } if n.is_empty() => DeError::Param {
                    name: name.clone(),
                    reason,
                },
                other => other,
            })
    }
}

/// One parameter's text: present means `Some`, enumerations must be one of
/// their spellings, everything else sees the text.
struct ValueDeserializer<'a>(&'a str);

impl<'de> de::Deserializer<'de> for ValueDeserializer<'_> {
    type Error = DeError;
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_str(self.0)
    }
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_some(self)
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        if !variants.contains(&self.0) {
            return Err(de::Error::custom(format!(
                "must be one of {}; got `{}`",
                variants.join(", "),
                printable(self.0)
            )));
        }
        let text: StrDeserializer<'_, DeError> = self.0.into_deserializer();
        visitor.visit_enum(text)
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use market_model::params::{CandlesQuery, LiquidityQuery, MarketsQuery, NoQuery, WalletsQuery};
    use market_model::{Interval, MarketSort, WalletSort};
    use proptest::prelude::*;

    fn reason<T: DeserializeOwned + IntoParams + fmt::Debug>(q: &str) -> (String, String) {
        match parse_query::<T>(q).unwrap_err() {
            QueryError::Param { name, reason } => (name, reason),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn typed_values() {
        let q: WalletsQuery = parse_query("sort=roi&limit=7&order=asc&&").unwrap();
        assert_eq!(q.sort, Some(WalletSort::Roi));
        assert_eq!(q.limit.get(), 7);
        assert_eq!(q.order.as_deref(), Some("asc"));
        let q: WalletsQuery = parse_query("").unwrap();
        assert_eq!(q.limit.get(), 25);
        let q: MarketsQuery = parse_query("sort=openInterest").unwrap();
        assert_eq!(q.sort, Some(MarketSort::OpenInterest));
        let q: CandlesQuery =
            parse_query("interval=1h&from=2026-11-22T00:00:00Z&cursor=5").unwrap();
        assert_eq!(q.interval, Interval::H1);
        assert_eq!(q.from.unwrap().0, 1_795_305_600_000);
        assert_eq!(q.cursor.unwrap().0, 5);
    }

    #[test]
    fn rejections_name_the_parameter_and_the_fix() {
        assert_eq!(
            reason::<WalletsQuery>("limit=5&limit=6"),
            (
                "limit".into(),
                "is given more than once; give it at most once".into()
            )
        );
        let (name, why) = reason::<WalletsQuery>("foo=1");
        assert_eq!(name, "foo");
        assert!(
            why.contains("allowed: size, direction, sort, order, limit, cursor"),
            "{why}"
        );
        let (_, why) = reason::<NoQuery>("limit=1");
        assert!(
            why.contains("this endpoint takes no query parameters"),
            "{why}"
        );
        assert_eq!(
            reason::<WalletsQuery>("limit=500"),
            (
                "limit".into(),
                "must be an integer from 1 to 200; got `500`".into()
            )
        );
        assert_eq!(
            reason::<WalletsQuery>("sort=pnl").1,
            "must be one of accountTotalValue, totalPositionValue, netPnl, roi, winRate; got `pnl`"
        );
        assert!(reason::<WalletsQuery>("limit=%FF").1.contains("UTF-8"));
        let (name, why) = reason::<CandlesQuery>("");
        assert_eq!(name, "interval");
        assert!(why.starts_with("is required; use one of 1m, 3m"), "{why}");
        let (name, why) = reason::<LiquidityQuery>("toDate=2026-11-01");
        assert_eq!(name, "fromDate");
        assert_eq!(why, "is required (First day, YYYY-MM-DD (UTC))");
        assert_eq!(
            reason::<LiquidityQuery>("fromDate=2026-02-30&toDate=2026-11-01").1,
            "must be a calendar date YYYY-MM-DD; got `2026-02-30`"
        );
        assert!(matches!(
            parse_query::<NoQuery>(&"a".repeat(5000)),
            Err(QueryError::QueryTooLong(5000))
        ));
    }

    #[test]
    fn field_names_follow_serde() {
        assert_eq!(
            field_names::<LiquidityQuery>(),
            ["fromDate", "toDate", "asset", "limit", "cursor"]
        );
        assert!(field_names::<NoQuery>().is_empty());
    }

    proptest! {
        #[test]
        fn never_panics(q in ".*") {
            let _ = parse_query::<WalletsQuery>(&q);
            let _ = parse_query::<CandlesQuery>(&q);
            let _ = parse_query::<LiquidityQuery>(&q);
        }
    }
}
