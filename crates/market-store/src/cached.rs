//! Upserts that SQLite runs a row at a time on a statement prepared once per
//! connection.
//!
//! Diesel never caches an `ON CONFLICT … DO UPDATE` statement (nor an
//! `sql_query`): SQLite parsed and planned every row of a publish's history,
//! states and registry entries again. [`Upsert`] gives each place that
//! builds one a type of its own as a static [`QueryId`], so Diesel's
//! statement cache keeps it by that type. Its text never depends on the
//! values bound, which is what makes caching it by type sound.

use std::marker::PhantomData;

use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sqlite::Sqlite;
use diesel::{QueryResult, RunQueryDsl, SqliteConnection};

/// A one-row insert Diesel built, made an upsert by `on_conflict` (a
/// clause with no binds: the columns' `excluded` values), and cached under
/// `Key`, a type declared for the one place that builds it (see
/// `crate::history`): there its text depends on nothing but types
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
