//! Upserts that SQLite runs a row at a time on a statement prepared once per
//! connection.
//!
//! Diesel never caches an `ON CONFLICT … DO UPDATE` statement (nor an
//! `sql_query`): SQLite parsed and planned every row of a publish's history
//! again, about a fifth of the store's write. Each statement here is a type
//! of its own with a static [`QueryId`], so Diesel's statement cache keeps
//! it by that type. Its text never depends on the values bound, which is
//! what makes caching it by type sound.

use std::marker::PhantomData;

use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{BigInt, Text};
use diesel::sqlite::Sqlite;
use diesel::{QueryResult, RunQueryDsl, SqliteConnection};

/// A one-row insert Diesel built, made an upsert by `on_conflict` (a
/// clause with no binds: the columns' `excluded` values), and cached under
/// `Key`, a type declared for the one place that builds it (see
/// `crate::upsert_chunked`): there its text depends on nothing but types
/// (the rows' `None`s bind NULL).
///
/// Diesel's own `on_conflict(..).do_update()` marks the statement unsafe
/// to cache, since its set could be any changeset with binds of their own.
pub(crate) struct Upsert<Key, I> {
    insert: I,
    on_conflict: &'static str,
    key: PhantomData<Key>,
}

impl<Key, I> Upsert<Key, I> {
    /// `insert` followed by `on_conflict`, cached under `Key`.
    pub(crate) fn new(insert: I, on_conflict: &'static str) -> Self {
        Upsert {
            insert,
            on_conflict,
            key: PhantomData,
        }
    }
}

impl<Key: 'static, I> QueryId for Upsert<Key, I> {
    type QueryId = Key;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl<Key, I: QueryFragment<Sqlite>> QueryFragment<Sqlite> for Upsert<Key, I> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        self.insert.walk_ast(out.reborrow())?;
        out.push_sql(self.on_conflict);
        Ok(())
    }
}

impl<Key, I> RunQueryDsl<SqliteConnection> for Upsert<Key, I> {}

/// Makes a statement's type its cache key, and lets it run on SQLite.
macro_rules! cached_by_type {
    ($name:ident) => {
        impl QueryId for $name<'_> {
            type QueryId = $name<'static>;
            const HAS_STATIC_QUERY_ID: bool = true;
        }

        impl RunQueryDsl<SqliteConnection> for $name<'_> {}
    };
}

/// A point of `history_points`, replacing the point of its key at its
/// instant.
pub(crate) struct UpsertPoint<'a> {
    pub series: &'a str,
    pub key: &'a str,
    pub at: i64,
    pub body: &'a str,
}

impl QueryFragment<Sqlite> for UpsertPoint<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        out.push_sql("INSERT INTO history_points (series, key, at, body) VALUES (");
        out.push_bind_param::<Text, _>(&self.series)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(&self.key)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&self.at)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(&self.body)?;
        out.push_sql(") ON CONFLICT (series, key, at) DO UPDATE SET body = excluded.body");
        Ok(())
    }
}

cached_by_type!(UpsertPoint);

/// A point as its hour's row of `history_hourly`: it replaces the row of
/// an earlier or equal observation, never a later one.
pub(crate) struct UpsertHourly<'a> {
    pub series: &'a str,
    pub key: &'a str,
    pub hour: i64,
    pub at: i64,
    pub body: &'a str,
}

impl QueryFragment<Sqlite> for UpsertHourly<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        out.push_sql("INSERT INTO history_hourly (series, key, hour, at, body) VALUES (");
        out.push_bind_param::<Text, _>(&self.series)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(&self.key)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&self.hour)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&self.at)?;
        out.push_sql(", ");
        out.push_bind_param::<Text, _>(&self.body)?;
        out.push_sql(
            ") ON CONFLICT (series, key, hour) DO UPDATE SET at = excluded.at, body = excluded.body \
             WHERE history_hourly.at <= excluded.at",
        );
        Ok(())
    }
}

cached_by_type!(UpsertHourly);
