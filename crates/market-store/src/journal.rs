//! The registry's entries and the scan states, appended to a journal and
//! merged into their tables in bulk.
//!
//! `track` saves a registry entry and a scan state for every wallet it
//! reads, thousands a publish at an own node's budget. Upserted by address,
//! each landed on a page of its own at a random place of a tree of a
//! million entries: SQLite read the page from the operating system and
//! wrote it whole (32 KB) to the write-ahead log, for a row of about 200
//! bytes. Here a write appends its rows to the table's journal
//! (`wallet_registry_journal`, `scanned_wallets_journal`), numbered in the
//! order they were written (`seq`): a publish's rows fill a few pages at
//! its end. Once a journal holds [`MERGE_AT`] rows, a merge
//! ([`crate::Store::merge_journals_if_due`]) takes the latest row of each
//! address into the table, one statement that writes each of the table's
//! pages once, and empties the journal, in one transaction.
//!
//! Reads see the table with the journal laid over it: of one address, the
//! journal's latest row, else the table's ([`each_merged`]). A journal is
//! at most a merge's worth of rows, so its latest rows are read whole.
//!
//! The history's points and the position events of `track`'s publishes go
//! to journals of their own (`history_points_journal`,
//! `position_events_journal`), keyed and indexed as their tables are, so
//! that a read seeks in the journal as in the table (`crate::history`);
//! they are merged at [`POINTS_MERGE_AT`] and [`EVENTS_MERGE_AT`] rows.

use std::cmp::Ordering;

use diesel::prelude::*;

use crate::schema::{
    history_points_journal, position_events_journal, scanned_wallets, scanned_wallets_journal,
    wallet_registry, wallet_registry_journal,
};
use crate::{DbConnection, StoreError};

/// The rows a journal holds before [`crate::Store::merge_journals_if_due`]
/// merges it. A merge writes about every page of the table once (a
/// million registry entries are about 4,700 pages of 32 KB) whatever the
/// rows it carries, and then a row's upsert in it, so it is worth its cost
/// when it carries many: at 250,000 rows, a fiftieth of a page a row,
/// where an upsert wrote one page a row (docs/performance.md has the
/// figures). `track` merges both journals at its start; a read of a
/// journal not merged holds its latest rows whole, about 70 MB at this
/// size.
pub const MERGE_AT: i64 = 250_000;

/// The rows the history points' journal holds before
/// [`crate::Store::merge_journals_if_due`] merges it. A publish's points
/// go into the journal's index by key at random places, so a publish
/// touches about every page of it: kept to a few hundred pages (32 KB),
/// it is a fraction of the current hour's part of `history_points`,
/// which an own node's first reads fill with hundreds of thousands of
/// points. A merge writes each page of that part once, for about ten
/// publishes of an own node (docs/ingest.md has the figures).
pub const POINTS_MERGE_AT: i64 = 60_000;

/// The rows the position events' journal holds before a merge: as for
/// the points, a publish's events land at random places of its index of
/// one wallet's events (keyed by the hour, then the address), kept small.
pub const EVENTS_MERGE_AT: i64 = 30_000;

/// The statements that merge a journal into its table, SQLite's and
/// PostgreSQL's: every column of each address's latest row (the highest
/// `seq`) replaces the table's row of its address, or is inserted. SQLite
/// takes the journal's rows in the order they were written, a later one of
/// an address overwriting an earlier one (its rowid order: no sort; a
/// `GROUP BY` for the latest rows cost a quarter more). PostgreSQL refuses
/// to change a row twice in one statement, so it takes each address's
/// latest row only (`DISTINCT ON`). The columns are checked against the
/// table's when it compiles.
macro_rules! merge_statements {
    ($table:ident, $journal:ident, $key:ident, [$first:ident $(, $col:ident)* $(,)?]) => {{
        const _: () = assert!(
            2 + [$(stringify!($col)),*].len() == $crate::columns_of::<$table::table>(),
            "a merge sets every column of the table"
        );
        macro_rules! insert {
            ($select:expr, $order:expr) => {
                concat!(
                    "INSERT INTO ", stringify!($table), " (", stringify!($key), ", ", stringify!($first),
                    $(", ", stringify!($col),)*
                    ") SELECT ", $select, stringify!($key), ", ", stringify!($first), $(", ", stringify!($col),)*
                    " FROM ", stringify!($journal), " WHERE true ORDER BY ", $order,
                    " ON CONFLICT (", stringify!($key), ") DO UPDATE SET ",
                    stringify!($first), " = excluded.", stringify!($first),
                    $(", ", stringify!($col), " = excluded.", stringify!($col),)*
                )
            };
        }
        (
            insert!("", "seq"),
            insert!(concat!("DISTINCT ON (", stringify!($key), ") "), concat!(stringify!($key), ", seq DESC")),
        )
    }};
}

const MERGE_REGISTRY: (&str, &str) = merge_statements!(
    wallet_registry,
    wallet_registry_journal,
    address,
    [
        sources,
        first_seen_at,
        leaderboard_value,
        account_value,
        position_value,
        last_trade_at,
        traded_notional,
        dexes,
        last_read_at,
        last_sweep_at,
        empty_reads,
        failed_reads,
    ]
);

/// The merge of the history points' journal, both backends alike: its keys
/// are unique, so that no row is changed twice in one statement, and each
/// replaces the table's point of the same keys (written again).
const MERGE_POINTS: &str = "INSERT INTO history_points (hour, series, key, at, body) \
     SELECT hour, series, key, at, body FROM history_points_journal WHERE true \
     ORDER BY hour, series, key, at \
     ON CONFLICT (hour, series, key, at) DO UPDATE SET body = excluded.body";

/// The merge of the position events' journal, both backends alike: a
/// write of an event again deletes it from both first, so that no key is
/// in both, and the rows go in the table's key order.
const MERGE_EVENTS: &str = "INSERT INTO position_events \
     (at, address, symbol, kind, value_micro, body, seq, hour) \
     SELECT at, address, symbol, kind, value_micro, body, seq, hour \
     FROM position_events_journal ORDER BY at, address, symbol";

const MERGE_STATES: (&str, &str) = merge_statements!(
    scanned_wallets,
    scanned_wallets_journal,
    address,
    [
        missed_scans,
        last_seen_at,
        first_seen_at,
        first_account_value,
        realized_pnl,
        closed_count,
        win_count,
        held_scalper,
        held_day,
        held_swing,
        held_position,
        read_dexes,
        followed,
    ]
);

/// The two journals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Journal {
    /// `wallet_registry_journal`.
    Registry,
    /// `scanned_wallets_journal`.
    States,
    /// `history_points_journal`.
    Points,
    /// `position_events_journal`.
    Events,
}

impl Journal {
    /// The journals `track` reads back whole at its start.
    pub(crate) const BOTH: [Journal; 2] = [Journal::Registry, Journal::States];
    pub(crate) const ALL: [Journal; 4] = [
        Journal::Registry,
        Journal::States,
        Journal::Points,
        Journal::Events,
    ];

    /// The rows it holds before a merge is due.
    fn merge_at(self) -> i64 {
        match self {
            Journal::Registry | Journal::States => MERGE_AT,
            Journal::Points => POINTS_MERGE_AT,
            Journal::Events => EVENTS_MERGE_AT,
        }
    }

    /// The rows it holds, at most: its numbers' range (a journal is
    /// emptied whole, so its numbers run without gaps but for rolled-back
    /// appends), read from the ends of its primary key (see [`Journal::ends`]).
    pub(crate) fn len(self, conn: &mut DbConnection) -> Result<i64, StoreError> {
        let ends: Ends = diesel::sql_query(self.ends()).get_result(conn)?;
        Ok(match (ends.low, ends.high) {
            (Some(low), Some(high)) => high - low + 1,
            _ => 0,
        })
    }

    /// The statement of its lowest and highest numbers, as two scalar
    /// subqueries: each is answered from one end of the primary key. With
    /// `min(seq), max(seq)` in one `SELECT`, SQLite reads every row instead
    /// (its min/max shortcut takes a query of one aggregate), and `track`
    /// asks once a second: with a quarter of a million rows journaled,
    /// that was more of `track`'s CPU between publishes than the publishes
    /// themselves (docs/performance.md).
    fn ends(self) -> &'static str {
        match self {
            Journal::Registry => {
                "SELECT (SELECT min(seq) FROM wallet_registry_journal) AS low, \
                 (SELECT max(seq) FROM wallet_registry_journal) AS high"
            }
            Journal::States => {
                "SELECT (SELECT min(seq) FROM scanned_wallets_journal) AS low, \
                 (SELECT max(seq) FROM scanned_wallets_journal) AS high"
            }
            Journal::Points => {
                "SELECT (SELECT min(seq) FROM history_points_journal) AS low, \
                 (SELECT max(seq) FROM history_points_journal) AS high"
            }
            // The events' numbers, given in write order (a journal's run
            // without gaps but for whole writes' events, which go to the
            // table).
            Journal::Events => {
                "SELECT (SELECT min(seq) FROM position_events_journal) AS low, \
                 (SELECT max(seq) FROM position_events_journal) AS high"
            }
        }
    }

    /// Merges it into its table and empties it, in the caller's transaction.
    pub(crate) fn merge(self, conn: &mut DbConnection) -> Result<(), StoreError> {
        let (sqlite, postgres) = match self {
            Journal::Registry => MERGE_REGISTRY,
            Journal::States => MERGE_STATES,
            Journal::Points => (MERGE_POINTS, MERGE_POINTS),
            Journal::Events => (MERGE_EVENTS, MERGE_EVENTS),
        };
        match conn {
            DbConnection::Sqlite(c) => {
                diesel::sql_query(sqlite).execute(c)?;
            }
            DbConnection::Postgresql(c) => {
                // No append may commit between the merge's read and its
                // delete (only `track` appends, from one thread, but
                // nothing else would stop a second writer).
                let lock = match self {
                    Journal::Registry => "LOCK TABLE wallet_registry_journal IN EXCLUSIVE MODE",
                    Journal::States => "LOCK TABLE scanned_wallets_journal IN EXCLUSIVE MODE",
                    Journal::Points => "LOCK TABLE history_points_journal IN EXCLUSIVE MODE",
                    Journal::Events => "LOCK TABLE position_events_journal IN EXCLUSIVE MODE",
                };
                diesel::sql_query(lock).execute(c)?;
                diesel::sql_query(postgres).execute(c)?;
            }
        }
        self.clear(conn)
    }

    /// Deletes every row it holds.
    pub(crate) fn clear(self, conn: &mut DbConnection) -> Result<(), StoreError> {
        match self {
            Journal::Registry => diesel::delete(wallet_registry_journal::table).execute(conn)?,
            Journal::States => diesel::delete(scanned_wallets_journal::table).execute(conn)?,
            Journal::Points => diesel::delete(history_points_journal::table).execute(conn)?,
            Journal::Events => diesel::delete(position_events_journal::table).execute(conn)?,
        };
        Ok(())
    }
}

/// A row keyed by a wallet's address.
pub(crate) trait AsAddress {
    /// Its address.
    fn address(&self) -> &str;
}

/// Of `rows` (a journal's, latest first), the first of each address, by
/// address.
pub(crate) fn latest_of<R: AsAddress>(mut rows: Vec<R>) -> Vec<R> {
    // Stable: of one address, the latest stays first.
    rows.sort_by(|a, b| a.address().cmp(b.address()));
    rows.dedup_by(|later, first| later.address() == first.address());
    rows
}

/// Hands `f` every row of a table with a journal laid over it, by address:
/// the table's rows read `page` at a time in address order (`load` reads
/// the page after an address), and of an address the journal holds, the
/// journal's row instead (`journal`: its latest rows, by address). Returns
/// how many it handed.
pub(crate) fn each_merged<R: AsAddress, T>(
    page: usize,
    mut load: impl FnMut(Option<&str>, i64) -> Result<Vec<R>, StoreError>,
    journal: Vec<R>,
    convert: impl Fn(R) -> Result<T, StoreError>,
    mut f: impl FnMut(T),
) -> Result<usize, StoreError> {
    let limit = i64::try_from(page.max(1)).unwrap_or(i64::MAX);
    let mut journal = journal.into_iter().peekable();
    let mut after: Option<String> = None;
    let mut count = 0;
    let mut hand = |r: R| -> Result<(), StoreError> {
        f(convert(r)?);
        count += 1;
        Ok(())
    };
    loop {
        let rows = load(after.as_deref(), limit)?;
        let Some(last) = rows.last() else {
            break;
        };
        after = Some(last.address().to_owned());
        for row in rows {
            while let Some(j) = journal.next_if(|j| j.address() < row.address()) {
                hand(j)?;
            }
            match journal.peek().map(|j| j.address().cmp(row.address())) {
                Some(Ordering::Equal) => hand(journal.next().expect("peeked"))?,
                _ => hand(row)?,
            }
        }
    }
    for j in journal {
        hand(j)?;
    }
    Ok(count)
}

/// A journal's lowest and highest numbers, `None` when it is empty.
#[derive(QueryableByName)]
struct Ends {
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    low: Option<i64>,
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
    high: Option<i64>,
}

impl crate::Store {
    /// Merges each journal that holds [`MERGE_AT`] rows or more
    /// ([`POINTS_MERGE_AT`] the history points', [`EVENTS_MERGE_AT`] the
    /// position events') into its table, each in a
    /// transaction of its own; whether any was merged. `track` calls it
    /// once a second, outside its publishes.
    pub fn merge_journals_if_due(&self) -> Result<bool, StoreError> {
        self.merge_journals_at(Journal::merge_at)
    }

    /// [`Store::merge_journals_if_due`] with `rows` in place of each
    /// journal's own threshold.
    pub fn merge_journals_holding(&self, rows: i64) -> Result<bool, StoreError> {
        self.merge_journals_at(|_| rows)
    }

    fn merge_journals_at(&self, due_at: impl Fn(Journal) -> i64) -> Result<bool, StoreError> {
        let mut merged = false;
        for journal in Journal::ALL {
            // Counted outside the merge's transaction: on SQLite a
            // transaction that read before it wrote would fail at once
            // whenever another writer committed in between (see
            // `latest_version`); the merge's first statement writes.
            let len = journal.len(&mut *self.conn()?)?;
            if len >= due_at(journal) {
                let started = std::time::Instant::now();
                self.write_transaction(|conn| journal.merge(conn))?;
                log::debug!(
                    "merged the {journal:?} journal (at most {len} rows) in {} ms",
                    started.elapsed().as_millis()
                );
                merged = true;
            }
        }
        Ok(merged)
    }

    /// Merges the registry's and the scan states' journals into their
    /// tables now, whatever they hold (at a restart, before the registry
    /// and the states are read; the history's points are read through
    /// theirs).
    pub fn merge_journals(&self) -> Result<(), StoreError> {
        for journal in Journal::BOTH {
            self.write_transaction(|conn| journal.merge(conn))?;
        }
        Ok(())
    }

    /// The rows each journal holds (registry, scan states), at most.
    pub fn journal_lens(&self) -> Result<(i64, i64), StoreError> {
        let mut conn = self.conn()?;
        Ok((
            Journal::Registry.len(&mut conn)?,
            Journal::States.len(&mut conn)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What SQLite plans for a statement: one line per step.
    fn plan(conn: &mut diesel::SqliteConnection, sql: &str) -> Vec<String> {
        #[derive(QueryableByName)]
        struct Step {
            #[diesel(sql_type = diesel::sql_types::Text)]
            detail: String,
        }
        diesel::sql_query(format!("EXPLAIN QUERY PLAN {sql}"))
            .load::<Step>(conn)
            .unwrap()
            .into_iter()
            .map(|s| s.detail)
            .collect()
    }

    #[test]
    fn a_journals_ends_are_read_without_reading_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(
            dir.path().join("ends.db").to_str().unwrap(),
            crate::PoolOptions::default(),
        )
        .unwrap();
        store.migrate().unwrap();
        let mut conn = store.conn().unwrap();
        let DbConnection::Sqlite(c) = &mut *conn else {
            panic!("an SQLite file")
        };
        for sql in Journal::BOTH.map(Journal::ends) {
            let steps = plan(c, sql);
            // (The constant row is the one row the outer `SELECT` makes.)
            let mut scans = steps.iter().filter(|s| s.starts_with("SCAN "));
            assert!(scans.all(|s| s == "SCAN CONSTANT ROW"), "{sql}: {steps:?}");
            assert_eq!(
                steps.iter().filter(|s| s.starts_with("SEARCH ")).count(),
                2,
                "{sql}: {steps:?}"
            );
        }
        // The statement this replaced reads every row.
        let both = "SELECT min(seq), max(seq) FROM wallet_registry_journal";
        let steps = plan(c, both);
        assert!(
            steps
                .iter()
                .any(|s| s.starts_with("SCAN wallet_registry_journal")),
            "{steps:?}"
        );
    }

    #[test]
    fn the_merges_name_every_column_once_and_take_the_latest_row() {
        let (sqlite, postgres) = MERGE_STATES;
        assert!(sqlite.contains(
            " FROM scanned_wallets_journal WHERE true ORDER BY seq ON CONFLICT (address)"
        ));
        assert!(postgres.contains("SELECT DISTINCT ON (address) address, missed_scans,"));
        assert!(postgres.contains("ORDER BY address, seq DESC ON CONFLICT (address)"));
        for statement in [MERGE_REGISTRY.0, MERGE_REGISTRY.1] {
            assert!(statement.starts_with("INSERT INTO wallet_registry (address, sources, "));
            assert!(statement.ends_with("failed_reads = excluded.failed_reads"));
            assert_eq!(statement.matches("last_sweep_at").count(), 4, "{statement}");
        }
    }

    /// Rows of a table and of a journal by address, each a (address, which) pair.
    struct Row(String, &'static str);

    impl AsAddress for Row {
        fn address(&self) -> &str {
            &self.0
        }
    }

    proptest::proptest! {
        /// [`each_merged`] against a map: the table's rows, then the
        /// journal's over them, read in pages of any size, come out by
        /// address, each once, the journal's where it has one.
        #[test]
        fn a_journal_laid_over_a_table_reads_as_a_map(
            table in proptest::collection::btree_set(0u8..40, 0..25),
            journal in proptest::collection::btree_set(0u8..40, 0..25),
            page in 1usize..6,
        ) {
            let address = |k: u8| format!("0x{k:02x}");
            let mut expected = std::collections::BTreeMap::new();
            expected.extend(table.iter().map(|&k| (address(k), "table")));
            expected.extend(journal.iter().map(|&k| (address(k), "journal")));
            let rows: Vec<String> = table.iter().map(|&k| address(k)).collect();
            let load = |after: Option<&str>, limit: i64| {
                Ok(rows
                    .iter()
                    .filter(|a| after.is_none_or(|after| a.as_str() > after))
                    .take(limit as usize)
                    .map(|a| Row(a.clone(), "table"))
                    .collect())
            };
            let laid = journal.iter().map(|&k| Row(address(k), "journal")).collect();
            let mut got = Vec::new();
            let count = each_merged(page, load, laid, |r| Ok((r.0, r.1)), |r| got.push(r)).unwrap();
            let expected: Vec<(String, &str)> = expected.into_iter().collect();
            proptest::prop_assert_eq!(count, expected.len());
            proptest::prop_assert_eq!(got, expected);
        }
    }
}
