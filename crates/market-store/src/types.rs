//! The exact decimal column type shared by both backends.
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
use diesel::sql_types::{HasSqlType, Numeric, SqlType, Text};
use diesel::sqlite::Sqlite;
use market_model::Decimal;

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
        out.set_value(self.0.to_plain_string());
        Ok(IsNull::No)
    }
}

impl FromSql<Dec, Sqlite> for DbDecimal {
    fn from_sql(value: <Sqlite as Backend>::RawValue<'_>) -> deserialize::Result<Self> {
        let text = <String as FromSql<Text, Sqlite>>::from_sql(value)?;
        if let Some(d) = market_model::decimal::parse_plain(&text) {
            return Ok(DbDecimal(d));
        }
        BigDecimal::from_str(&text)
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
