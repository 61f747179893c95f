//! The exact decimal column type shared by both backends, and a timestamp
//! read without Diesel's general parser.
//!
//! PostgreSQL stores decimals as `NUMERIC` (exact, scale preserved). SQLite
//! has no exact decimal type and Diesel's SQLite `Numeric` goes through
//! `f64`, so there the column is `TEXT` holding the plain-notation string.

use std::str::FromStr;

use bigdecimal::{BigDecimal, Zero};
use diesel::backend::Backend;
use diesel::deserialize::{self, FromSql, FromSqlRow};
use diesel::expression::AsExpression;
use diesel::pg::data_types::PgNumeric;
use diesel::pg::Pg;
use diesel::serialize::{self, IsNull, Output, ToSql};
use diesel::sql_types::{HasSqlType, Numeric, SqlType, Timestamp};
use diesel::sqlite::Sqlite;
use market_model::Decimal;
use time::PrimitiveDateTime;

use crate::connection::MultiBackend;

/// SQL type of decimal columns: `NUMERIC` on PostgreSQL, `TEXT` on SQLite.
#[derive(Clone, Copy, Debug, Default, SqlType, diesel::query_builder::QueryId)]
#[diesel(postgres_type(oid = 1700, array_oid = 1231))]
#[diesel(sqlite_type(name = "Text"))]
pub struct Dec;

/// A decimal as stored in a [`Dec`] column.
#[derive(Clone, Debug, PartialEq, Eq, AsExpression, FromSqlRow)]
#[diesel(sql_type = Dec)]
pub struct DbDecimal(pub BigDecimal);

impl From<&Decimal> for DbDecimal {
    fn from(d: &Decimal) -> Self {
        DbDecimal(d.0.clone())
    }
}

impl From<DbDecimal> for Decimal {
    fn from(d: DbDecimal) -> Self {
        Decimal(d.0)
    }
}

impl ToSql<Dec, Pg> for DbDecimal {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        if self.0.is_zero() {
            // Diesel sends every zero with scale 0; keep "0.0000" as written.
            let (_, scale) = self.0.as_bigint_and_exponent();
            let scale = u16::try_from(scale.max(0)).map_err(|_| "decimal scale exceeds 16 bits")?;
            let zero = PgNumeric::Positive {
                weight: 0,
                scale,
                digits: Vec::new(),
            };
            return ToSql::<Numeric, Pg>::to_sql(&zero, &mut out.reborrow());
        }
        <BigDecimal as ToSql<Numeric, Pg>>::to_sql(&self.0, out)
    }
}

impl FromSql<Dec, Pg> for DbDecimal {
    fn from_sql(bytes: <Pg as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        let numeric = PgNumeric::from_sql(bytes)?;
        let scale = match &numeric {
            PgNumeric::Positive { scale, .. } | PgNumeric::Negative { scale, .. } => {
                i64::from(*scale)
            }
            PgNumeric::NaN => return Err("NaN is not a decimal quantity".into()),
        };
        // Diesel drops the display scale of zero ("0.0000" would read back as
        // "0"); restore it so both backends return the stored text exactly.
        BigDecimal::try_from(&numeric)
            .map(|d| DbDecimal(if d.is_zero() { d.with_scale(scale) } else { d }))
    }
}

impl ToSql<Dec, Sqlite> for DbDecimal {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        // The model's printer: the same text as bigdecimal's, without its
        // big-integer formatting and its allocations for the usual sizes.
        out.set_value(market_model::decimal::Plain(&self.0).to_string());
        Ok(IsNull::No)
    }
}

impl FromSql<Dec, Sqlite> for DbDecimal {
    fn from_sql(mut value: <Sqlite as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        // Borrowed: no copy of the text for the common plain case.
        let text = value.read_text();
        if let Some(d) = market_model::decimal::parse_plain(text) {
            return Ok(DbDecimal(d));
        }
        BigDecimal::from_str(text)
            .map(DbDecimal)
            .map_err(|e| format!("stored decimal {text:?} does not parse: {e}").into())
    }
}

impl HasSqlType<Dec> for MultiBackend {
    fn metadata(lookup: &mut Self::MetadataLookup) -> Self::TypeMetadata {
        MultiBackend::lookup_sql_type::<Dec>(lookup)
    }
}

impl FromSql<Dec, MultiBackend> for DbDecimal {
    fn from_sql(bytes: <MultiBackend as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        bytes.from_sql::<DbDecimal, Dec>()
    }
}

impl ToSql<Dec, MultiBackend> for DbDecimal {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, MultiBackend>) -> serialize::Result {
        out.set_value((Dec, self));
        Ok(IsNull::No)
    }
}

/// A `TIMESTAMP` column's value, read from SQLite's text by
/// [`parse_sqlite_time`] (Diesel's parser, which tries format descriptions
/// one after another, was about 4 % of a server's read of a publish's
/// changed wallet rows); written, and read on PostgreSQL, as Diesel does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, AsExpression, FromSqlRow)]
#[diesel(sql_type = Timestamp)]
pub struct DbTime(pub PrimitiveDateTime);

impl FromSql<Timestamp, Sqlite> for DbTime {
    fn from_sql(mut value: <Sqlite as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        if let Some(t) = parse_sqlite_time(value.read_text()) {
            return Ok(DbTime(t));
        }
        // Any other form Diesel's parser takes (a row edited by hand).
        <PrimitiveDateTime as FromSql<Timestamp, Sqlite>>::from_sql(value).map(DbTime)
    }
}

impl FromSql<Timestamp, Pg> for DbTime {
    fn from_sql(bytes: <Pg as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        <PrimitiveDateTime as FromSql<Timestamp, Pg>>::from_sql(bytes).map(DbTime)
    }
}

impl FromSql<Timestamp, MultiBackend> for DbTime {
    fn from_sql(bytes: <MultiBackend as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        bytes.from_sql::<DbTime, Timestamp>()
    }
}

impl ToSql<Timestamp, Sqlite> for DbTime {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        <PrimitiveDateTime as ToSql<Timestamp, Sqlite>>::to_sql(&self.0, out)
    }
}

impl ToSql<Timestamp, Pg> for DbTime {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        <PrimitiveDateTime as ToSql<Timestamp, Pg>>::to_sql(&self.0, out)
    }
}

impl ToSql<Timestamp, MultiBackend> for DbTime {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, MultiBackend>) -> serialize::Result {
        out.set_value((Timestamp, self));
        Ok(IsNull::No)
    }
}

/// `YYYY-MM-DD HH:MM:SS[.f{1,9}]` (the text Diesel writes to SQLite for a
/// `TIMESTAMP`, and the instants of a wallet row's positions), validated by
/// `time`'s constructors. Diesel's own parser tries format descriptions one
/// after another, which cost as much as a position's ten decimals.
pub(crate) fn parse_sqlite_time(text: &str) -> Option<PrimitiveDateTime> {
    let b = text.as_bytes();
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b' '
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<u32> {
        b[range].iter().try_fold(0u32, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    };
    let nanos = match &b[19..] {
        [] => 0,
        [b'.', frac @ ..] if (1..=9).contains(&frac.len()) => {
            let digits = num(20..b.len())?;
            digits * 10u32.pow(9 - frac.len() as u32)
        }
        _ => return None,
    };
    let month = time::Month::try_from(u8::try_from(num(5..7)?).ok()?).ok()?;
    let date = time::Date::from_calendar_date(num(0..4)? as i32, month, num(8..10)? as u8).ok()?;
    let time = time::Time::from_hms_nano(
        num(11..13)? as u8,
        num(14..16)? as u8,
        num(17..19)? as u8,
        nanos,
    )
    .ok()?;
    Some(PrimitiveDateTime::new(date, time))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_times_parse_like_diesel_writes_them() {
        use time::macros::datetime;
        let cases = [
            ("2026-11-23 15:55:18", Some(datetime!(2026-11-23 15:55:18))),
            (
                "2026-11-23 15:55:18.25",
                Some(datetime!(2026-11-23 15:55:18.25)),
            ),
            (
                "2024-02-29 00:00:00.000000001",
                Some(datetime!(2024-02-29 00:00:00.000000001)),
            ),
            ("2026-02-29 00:00:00", None),
            ("2026-11-23 24:00:00", None),
            ("2026-11-23T15:55:18", None),
            ("2026-11-23 15:55:18.", None),
            ("2026-11-23 15:55:18.1234567890", None),
            ("2026-11-23 15:55:1x", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_sqlite_time(text), expected, "{text}");
        }
    }
}
