//! Writing data versions, every one in one transaction that first takes
//! [`latest_version`]: whole versions (`seed-demo`'s
//! [`Store::replace_dataset`], `scan`'s [`Store::write_scan`],
//! [`Store::write_snapshot`]), `track`'s incremental publishes
//! ([`Store::publish`]: it appends a row for each wallet that changed,
//! holding the wallet's positions, and a removal for each wallet no longer
//! served; markets and current levels are small and written whole with
//! every version), and pruning ([`prune_before`] for the versions,
//! [`Store::compact_wallet_rows_if_due`] for the wallet rows no kept
//! version can see; `validity.rs` has the rules).

use std::collections::{HashMap, HashSet};

use diesel::prelude::*;
use market_engine::{DataVersion, MarketFigures, VersionChanges};
use market_model::{Candle, Interval, LiquidityDay, MarketPosition, Wallet, WalletFreshness};
use time::OffsetDateTime;

use crate::history::{self, Closed, HistoryWrite};
use crate::journal::Journal;
use crate::registry::append_registry;
use crate::rows::*;
use crate::scan_state::write_wallet_states;
use crate::schema::*;
use crate::steps::Steps;
use crate::validity::{self, Part};
use crate::{
    candle_rows, history_rows, insert_chunked, market_rows, wallet_row, DbConnection, Progress,
    RegistryEntry, Retention, Store, StoreError, TrackedPosition, WalletScanState, MAX_BINDS,
};

/// A data version to write: the engine's materialized output.
#[derive(Clone, Copy, Debug)]
pub struct SnapshotWrite<'a> {
    /// What produced it (`demo`, `scan`).
    pub source: &'a str,
    /// The version whole (its `freshness` is not stored: a whole version's
    /// freshness is derived from its wallets).
    pub version: &'a DataVersion,
}

/// Candles of one asset and interval, for bulk writes.
#[derive(Clone, Copy, Debug)]
pub struct CandleBatch<'a> {
    /// Network symbol.
    pub symbol: &'a str,
    /// Stored interval.
    pub interval: Interval,
    /// Candles.
    pub candles: &'a [Candle],
}

/// Everything `seed-demo` replaces, written in one transaction.
#[derive(Clone, Copy, Debug)]
pub struct DatasetWrite<'a> {
    /// The current data version.
    pub snapshot: SnapshotWrite<'a>,
    /// End-of-day liquidity days.
    pub history_days: &'a [LiquidityDay],
    /// Stored candles.
    pub candles: &'a [CandleBatch<'a>],
    /// Generated history (it replaces the stored history).
    pub history: HistoryWrite<'a>,
}

/// Everything one scan writes, in one transaction.
#[derive(Clone, Copy, Debug)]
pub struct ScanWrite<'a> {
    /// The new data version.
    pub snapshot: SnapshotWrite<'a>,
    /// Candles fetched by this scan; each batch replaces stored candles from its first open time on.
    pub candles: &'a [CandleBatch<'a>],
    /// Days frozen by this scan (the previous day's levels as `end_of_day`).
    pub frozen_days: &'a [LiquidityDay],
    /// Scanner state of every wallet kept in the data.
    pub wallet_states: &'a [WalletScanState],
    /// Open positions being followed.
    pub tracked: &'a [TrackedPosition],
    /// Per wallet, the dexes this scan reads that its stored observation did
    /// not cover (see [`crate::PublishWrite::newly_read`]).
    pub newly_read: &'a [(String, Vec<String>)],
}

/// One incremental publish: a new data version that changes only some wallets.
#[derive(Clone, Copy, Debug)]
pub struct PublishWrite<'a> {
    /// What produced it (`track`).
    pub source: &'a str,
    /// The data version its changes were computed against (0: none). The
    /// publish fails with [`StoreError::Conflict`] when it is no longer the
    /// latest, so that a writer never applies changes to a version it did
    /// not see.
    pub base_version: i64,
    /// The new version's markets, current days, cohorts and coverage
    /// report whole, and the wallets it changes.
    pub changes: &'a VersionChanges,
    /// Wallets served in this version (all of them, changed or not).
    pub wallet_count: usize,
    /// Positions served in this version (all of them).
    pub position_count: usize,
    /// Liquidity days frozen by this publish.
    pub frozen_days: &'a [LiquidityDay],
    /// Candle batches fetched since the previous publish.
    pub candles: &'a [CandleBatch<'a>],
    /// Analytics state of the wallets read since the previous publish,
    /// served or not: each replaces the stored state of its wallet (the
    /// states of other wallets, removed ones included, are kept).
    pub wallet_states: &'a [WalletScanState],
    /// Followed positions of the wallets of `wallet_states` (they replace
    /// theirs).
    pub tracked: &'a [TrackedPosition],
    /// Per changed wallet, the dexes this version reads and the previous one
    /// did not (a sweep's first look at them): the positions found there are
    /// first observations in the position events, not openings.
    pub newly_read: &'a [(String, Vec<String>)],
    /// The base version's observation of the changed wallets, which their
    /// position events are derived against, when the writer holds it
    /// (`track` does: the observation it published last). `None`: the
    /// store reads it, which reads every wallet row of the base version.
    pub previous: Option<Previous<'a>>,
    /// Registry entries to save with this version.
    pub registry: &'a [RegistryEntry],
    /// Freshness of every tracked wallet as of `observed_at`.
    pub freshness: &'a WalletFreshness,
}

/// What the base version served of the wallets a publish writes (see
/// [`PublishWrite::previous`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Previous<'a> {
    /// The wallets of [`VersionChanges::wallets`] that the base version
    /// serves (each of them, whether it holds positions or not).
    pub wallets: &'a [String],
    /// Their positions, as the base version serves them.
    pub positions: &'a [MarketPosition],
}

impl Store {
    /// Writes a new data version in one transaction and prunes versions
    /// older than the previous one. Returns the new version number.
    pub fn write_snapshot(
        &self,
        snap: &SnapshotWrite<'_>,
        progress: Progress<'_>,
    ) -> Result<i64, StoreError> {
        self.write_transaction(|conn| {
            latest_version(conn)?;
            let version = insert_snapshot(conn, self.retention, snap, true, &[], progress)?;
            prune_before(conn, version - 1)?;
            validity::compact(conn, version - 1)?;
            Ok(version)
        })
    }

    /// Replaces all market data (snapshots, liquidity history, candles) in one
    /// transaction, so readers see either the old or the new dataset. Tokens are kept.
    pub fn replace_dataset(
        &self,
        data: &DatasetWrite<'_>,
        progress: Progress<'_>,
    ) -> Result<i64, StoreError> {
        self.write_transaction(|conn| {
            latest_version(conn)?;
            diesel::delete(wallets::table).execute(conn)?;
            diesel::delete(wallet_removals::table).execute(conn)?;
            diesel::delete(markets::table).execute(conn)?;
            // Generated history replaces the stored one; its events lead to
            // the positions written now, so none are derived.
            history::replace_history(
                conn,
                self.retention,
                data.snapshot.version.observed_at,
                &data.history,
            )?;
            // Versions stay monotonic across re-seeds so running servers notice the change.
            let version =
                insert_snapshot(conn, self.retention, &data.snapshot, false, &[], progress)?;
            diesel::delete(snapshots::table.filter(snapshots::version.ne(version)))
                .execute(conn)?;
            // Every row is of this version: one a wallet.
            validity::reset(conn, version)?;
            diesel::delete(liquidity_levels::table).execute(conn)?;
            diesel::delete(liquidity_days::table).execute(conn)?;
            diesel::delete(candles::table).execute(conn)?;
            let (day_rows, level_rows) = history_rows(data.history_days);
            insert_chunked!(
                conn,
                liquidity_days::table,
                &day_rows,
                "liquidity days",
                progress
            );
            insert_chunked!(
                conn,
                liquidity_levels::table,
                &level_rows,
                "liquidity levels",
                progress
            );
            let candle_rows: Vec<CandleRow> = data.candles.iter().flat_map(candle_rows).collect();
            insert_chunked!(conn, candles::table, &candle_rows, "candles", progress);
            Ok(version)
        })
    }

    /// Writes a scan atomically: frozen days, candles, the new data version
    /// and the wallet states. Readers see the previous version until it commits;
    /// a failure (or a killed process) leaves everything as it was.
    pub fn write_scan(
        &self,
        scan: &ScanWrite<'_>,
        progress: Progress<'_>,
    ) -> Result<i64, StoreError> {
        self.write_transaction(|conn| {
            crate::latest_version(conn)?;
            write_days_and_candles(conn, scan.frozen_days, scan.candles, progress)?;
            let version = insert_snapshot(
                conn,
                self.retention(),
                &scan.snapshot,
                true,
                scan.newly_read,
                progress,
            )?;
            prune_before(conn, version - 1)?;
            validity::compact(conn, version - 1)?;
            // A scan's states replace every stored one: the table and its
            // journal are emptied, the states appended and merged at once.
            diesel::delete(scanned_wallets::table).execute(conn)?;
            Journal::States.clear(conn)?;
            write_wallet_states(conn, scan.wallet_states, scan.tracked, progress)?;
            Journal::States.merge(conn)?;
            Ok(version)
        })
    }

    /// Writes an incremental publish in one transaction and prunes what the
    /// previous version no longer needs. Returns the new version.
    pub fn publish(&self, p: &PublishWrite<'_>, progress: Progress<'_>) -> Result<i64, StoreError> {
        let mut steps = Steps::start();
        let version =
            self.write_transaction(|conn| self.write_publish(conn, p, &mut steps, progress))?;
        steps.mark("commit");
        steps.log(&format!(
            "publish of version {version} ({} wallets written, {} removed)",
            p.changes.wallets.len(),
            p.changes.removed.len()
        ));
        Ok(version)
    }

    /// Compacts the wallet rows when the rows appended since the last
    /// compaction are a quarter of those before it (at least
    /// [`COMPACT_AT_LEAST`]): deletes every row that no stored version can
    /// see any more, in one transaction. Returns the rows deleted, `None`
    /// when it was not due. `track` calls it between its publishes;
    /// whole writes compact as they write.
    pub fn compact_wallet_rows_if_due(&self) -> Result<Option<usize>, StoreError> {
        self.compact_wallet_rows_holding(COMPACT_AT_LEAST)
    }

    /// [`Store::compact_wallet_rows_if_due`] with `min_rows` in place of
    /// [`COMPACT_AT_LEAST`] (0: whenever anything was appended).
    pub fn compact_wallet_rows_holding(&self, min_rows: i64) -> Result<Option<usize>, StoreError> {
        // Counted outside the compaction's transaction: on SQLite a
        // transaction that read before it wrote would fail at once whenever
        // another writer committed in between (see `latest_version`).
        let counts = validity::row_counts(&mut *self.conn()?)?;
        if !validity::compaction_due(counts, min_rows) {
            return Ok(None);
        }
        self.write_transaction(|conn| {
            latest_version(conn)?;
            let oldest: Option<i64> = snapshots::table
                .select(diesel::dsl::min(snapshots::version))
                .first(conn)?;
            match oldest {
                Some(oldest) => Ok(Some(validity::compact(conn, oldest)?)),
                None => Ok(None),
            }
        })
    }

    /// Runs every write of [`Store::publish`] and rolls them back: whether
    /// the database would take this publish, and if not why, with nothing
    /// changed either way.
    pub fn try_publish(&self, p: &PublishWrite<'_>) -> Result<(), StoreError> {
        let result = self.write_transaction(|conn| {
            self.write_publish(conn, p, &mut Steps::start(), &mut |_, _, _| {})?;
            Err::<(), _>(StoreError::Query(
                diesel::result::Error::RollbackTransaction,
            ))
        });
        match result {
            Err(StoreError::Query(diesel::result::Error::RollbackTransaction)) => Ok(()),
            other => other,
        }
    }

    /// Runs `write` in one transaction on a connection whose SQLite page
    /// cache is [`WRITE_CACHE_KIB`] while it runs, and back to what it was
    /// after (committed or not).
    pub(crate) fn write_transaction<T>(
        &self,
        write: impl FnOnce(&mut DbConnection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut pooled = self.conn()?;
        let conn: &mut DbConnection = &mut pooled;
        let DbConnection::Sqlite(sqlite) = conn else {
            return conn.transaction(write);
        };
        let kept = diesel::sql_query("PRAGMA cache_size")
            .get_result::<CacheSize>(sqlite)?
            .cache_size;
        diesel::sql_query(format!("PRAGMA cache_size = -{WRITE_CACHE_KIB}")).execute(sqlite)?;
        let result = conn.transaction(write);
        if let DbConnection::Sqlite(sqlite) = conn {
            // Shrinking frees the pages; a failure here only leaves this
            // pooled connection with the larger cache, so the write's
            // outcome stands.
            if let Err(e) = diesel::sql_query(format!("PRAGMA cache_size = {kept}")).execute(sqlite)
            {
                log::warn!("could not set the page cache back to {kept} after a write: {e}");
            }
        }
        result
    }

    fn write_publish(
        &self,
        conn: &mut DbConnection,
        p: &PublishWrite<'_>,
        steps: &mut Steps,
        progress: Progress<'_>,
    ) -> Result<i64, StoreError> {
        let latest = crate::latest_version(conn)?;
        if latest.unwrap_or(0) != p.base_version {
            return Err(StoreError::Conflict {
                expected: p.base_version,
                found: latest,
            });
        }
        steps.mark("lock");
        let c = p.changes;
        write_days_and_candles(conn, p.frozen_days, p.candles, progress)?;
        let counts = (p.wallet_count, p.position_count);
        let version = insert_version(conn, p.source, c, counts, progress)?;
        steps.mark("version and markets");
        let rows;
        let closed = match p.previous {
            Some(previous) => Closed::Served {
                wallets: previous.wallets,
                positions: previous.positions,
            },
            None => {
                rows = base_columns(conn, p.base_version, Some(&c.wallets))?;
                Closed::Rows(&rows)
            }
        };
        steps.mark("previous observation");
        // Events are derived against the previous observation.
        crate::history::record(
            conn,
            self.retention(),
            steps,
            &crate::history::Observation {
                observed_at: c.observed_at,
                markets: &c.markets,
                cohorts: &c.cohorts,
                wallets: &c.wallets,
                positions: &c.positions,
                events: true,
                closed,
                newly_read: p.newly_read,
                // A few thousand changed wallets: merged in bulk later.
                journal: true,
                // Between publishes instead (`Store::prune_history`).
                prune: false,
            },
        )?;
        #[cfg(feature = "test-support")]
        self.injected_fault(|a| {
            p.wallet_states.iter().any(|s| s.address == a)
                || c.wallets.iter().any(|w| w.address == a)
        })?;
        insert_wallet_rows(conn, version, &c.wallets, &c.positions, progress)?;
        insert_removals(conn, version, c.removed.iter().map(String::as_str))?;
        steps.mark("rows appended");
        // Scan states are replaced by wallet, for every wallet read:
        // served, empty (not served) or removed alike.
        write_wallet_states(conn, p.wallet_states, p.tracked, progress)?;
        append_registry(conn, p.registry)?;
        steps.mark("states and registry");
        let body = serde_json::to_string(p.freshness).expect("model types serialize");
        let coverage = serde_json::to_string(&c.coverage).expect("model types serialize");
        diesel::insert_into(version_freshness::table)
            .values((
                version_freshness::version.eq(version),
                version_freshness::body.eq(body),
                version_freshness::coverage.eq(Some(coverage)),
            ))
            .execute(conn)?;
        prune_before(conn, version - 1)?;
        steps.mark("freshness and pruning");
        Ok(version)
    }
}

/// The fewest appended wallet rows worth a compaction
/// ([`Store::compact_wallet_rows_if_due`]): below it, a whole read's extra
/// rows cost less than the compaction's pass over the table.
pub const COMPACT_AT_LEAST: i64 = 10_000;

/// SQLite page cache of a connection while it writes a data version, in
/// KiB. A publish updates indexes at places spread over the whole file (the
/// open rows by address, the history by key); in SQLite's default 2 MB
/// cache a publish read most of their pages again from the operating
/// system (`cargo bench -p market-snapshot --bench publish -- write`:
/// 0.84× of the time with 64 MB, docs/performance.md). Readers keep the
/// default, so a server's many connections do not each grow by as much.
const WRITE_CACHE_KIB: i64 = 65_536;

/// `PRAGMA cache_size`: pages when positive, KiB when negative.
#[derive(QueryableByName)]
struct CacheSize {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    cache_size: i64,
}

/// Writes a whole version; `newly_read` as for [`PublishWrite::newly_read`].
pub(crate) fn insert_snapshot(
    conn: &mut DbConnection,
    retention: Retention,
    snap: &SnapshotWrite<'_>,
    derive_events: bool,
    newly_read: &[(String, Vec<String>)],
    progress: Progress<'_>,
) -> Result<i64, StoreError> {
    let v = snap.version;
    let mut steps = Steps::start();
    // A whole version replaces every wallet: the base version's rows are
    // the previous observation, and the wallets it served that this one
    // does not are removed.
    let previous = match latest_version(conn)? {
        Some(base) => base_columns(conn, base, None)?,
        None => Vec::new(),
    };
    steps.mark("previous observation");
    let counts = (v.wallets.len(), v.positions.len());
    let version = insert_version(conn, snap.source, v, counts, progress)?;
    steps.mark("version and markets");
    let written: HashSet<&str> = v.wallets.iter().map(|w| w.address.as_str()).collect();
    insert_removals(
        conn,
        version,
        previous
            .iter()
            .map(|(a, _)| a.as_str())
            .filter(|a| !written.contains(a)),
    )?;
    // Events are derived against the previous observation.
    history::record(
        conn,
        retention,
        &mut steps,
        &history::Observation {
            observed_at: v.observed_at,
            markets: &v.markets,
            cohorts: &v.cohorts,
            wallets: &v.wallets,
            positions: &v.positions,
            events: derive_events,
            closed: Closed::Rows(&previous),
            newly_read,
            // Every wallet's point: straight into the table.
            journal: false,
            prune: true,
        },
    )?;
    insert_wallet_rows(conn, version, &v.wallets, &v.positions, progress)?;
    steps.mark("rows inserted");
    steps.log(&format!("whole version {version}, before its commit"));
    Ok(version)
}

/// The address and `positions` column of every wallet row valid in
/// version `base` (of `only`'s wallets, when given): a whole read of it.
fn base_columns(
    conn: &mut DbConnection,
    base: i64,
    only: Option<&[Wallet]>,
) -> Result<Vec<(String, String)>, StoreError> {
    let only: Option<HashSet<&str>> = only.map(|w| w.iter().map(|w| w.address.as_str()).collect());
    let mut columns = Vec::new();
    validity::each_valid_row(conn, base, Part::All, |row| {
        if only
            .as_ref()
            .is_none_or(|o| o.contains(row.address.as_str()))
        {
            columns.push((row.address, row.positions));
        }
        Ok(())
    })?;
    Ok(columns)
}

/// A wallet a version stops serving.
#[derive(Insertable)]
#[diesel(table_name = wallet_removals)]
struct RemovalRow<'a> {
    version: i64,
    address: &'a str,
}

/// Appends the removals of `addresses` by `version`.
fn insert_removals<'a>(
    conn: &mut DbConnection,
    version: i64,
    addresses: impl Iterator<Item = &'a str>,
) -> Result<(), StoreError> {
    let rows: Vec<RemovalRow<'_>> = addresses
        .map(|address| RemovalRow { version, address })
        .collect();
    let mut quiet = |_: &str, _: usize, _: usize| {};
    insert_chunked!(conn, wallet_removals::table, &rows, "removals", &mut quiet);
    Ok(())
}

/// The newest version number, read inside the caller's transaction after
/// locking out every other version writer until it ends. On PostgreSQL (READ
/// COMMITTED) a writer could otherwise number its version after one another
/// writer commits in between, or pass a check of its base; readers are not
/// blocked (`SHARE ROW EXCLUSIVE` conflicts with writes and itself only).
/// On SQLite the transaction takes the write lock before it reads (a write
/// that matches nothing): a transaction that read first and then wrote
/// would fail at once with `database is locked` whenever any other writer
/// (a webhook deliverer recording a delivery) committed in between, instead
/// of waiting its turn for up to `busy_timeout`. Every version-writing
/// transaction calls this first, so writers queue instead of deadlocking.
pub(crate) fn latest_version(conn: &mut DbConnection) -> Result<Option<i64>, StoreError> {
    match conn {
        DbConnection::Postgresql(c) => {
            diesel::sql_query("LOCK TABLE snapshots IN SHARE ROW EXCLUSIVE MODE").execute(c)?;
        }
        DbConnection::Sqlite(c) => {
            diesel::sql_query("UPDATE snapshots SET version = version WHERE 0").execute(c)?;
        }
    }
    Ok(snapshots::table
        .select(diesel::dsl::max(snapshots::version))
        .first(conn)?)
}

/// Inserts the version row numbered `max(version) + 1` and its markets
/// (with their cohorts and current levels), and notifies servers of it at commit; returns the version.
pub(crate) fn insert_version(
    conn: &mut DbConnection,
    source: &str,
    head: &impl MarketFigures,
    (wallet_count, position_count): (usize, usize),
    progress: Progress<'_>,
) -> Result<i64, StoreError> {
    let version = latest_version(conn)?.unwrap_or(0) + 1;
    diesel::insert_into(snapshots::table)
        .values(NewSnapshot {
            version,
            source,
            observed_at: to_db_time(head.observed_at()),
            created_at: to_db_time(OffsetDateTime::now_utc()),
            asset_count: head.markets().len() as i64,
            wallet_count: wallet_count as i64,
            position_count: position_count as i64,
        })
        .execute(conn)?;
    let market_rows = market_rows(version, head.markets(), head.cohorts(), head.current_days());
    insert_chunked!(conn, markets::table, &market_rows, "markets", progress);
    // Sent at commit: servers serve it without waiting for their poll.
    crate::notify::notify_version(conn, version)?;
    Ok(version)
}

/// Inserts the open rows of `wallets` valid from `version`, each holding
/// its wallet's `positions` (every one of them belongs to one of
/// `wallets`: a position of a wallet not written is refused, and so are
/// two of one wallet in one asset).
pub(crate) fn insert_wallet_rows(
    conn: &mut DbConnection,
    version: i64,
    wallets: &[Wallet],
    positions: &[MarketPosition],
    progress: Progress<'_>,
) -> Result<(), StoreError> {
    let mut held: HashMap<&str, Vec<&MarketPosition>> = wallets
        .iter()
        .map(|w| (w.address.as_str(), Vec::new()))
        .collect();
    for p in positions {
        held.get_mut(p.address.as_str())
            .ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "position {} of wallet {}, which this version does not write",
                    p.symbol, p.address
                ))
            })?
            .push(p);
    }
    let wallet_rows: Vec<WalletRow> = wallets
        .iter()
        .map(|w| {
            let mine = held.get_mut(w.address.as_str()).map(std::mem::take);
            let column = crate::held::encode(&mut mine.unwrap_or_default())?;
            Ok(wallet_row(version, w, column))
        })
        .collect::<Result<_, StoreError>>()?;
    insert_chunked!(conn, wallets::table, &wallet_rows, "wallets", progress);
    Ok(())
}

/// Deletes the versions before `keep_from` (with their markets). The
/// wallet rows no kept version can see are deleted in bulk by a
/// compaction ([`Store::compact_wallet_rows_if_due`]), not one by one.
pub(crate) fn prune_before(conn: &mut DbConnection, keep_from: i64) -> Result<(), StoreError> {
    diesel::delete(snapshots::table.filter(snapshots::version.lt(keep_from))).execute(conn)?;
    Ok(())
}

/// Writes frozen `end_of_day` days (replacing stored ones of the same date
/// and asset) and candle batches (each replaces the stored candles of its
/// asset and interval from its first open time on).
pub(crate) fn write_days_and_candles(
    conn: &mut DbConnection,
    frozen_days: &[LiquidityDay],
    batches: &[CandleBatch<'_>],
    progress: Progress<'_>,
) -> Result<(), StoreError> {
    for day in frozen_days {
        diesel::delete(
            liquidity_levels::table
                .filter(liquidity_levels::date.eq(day.date))
                .filter(liquidity_levels::symbol.eq(&day.network_asset_symbol)),
        )
        .execute(conn)?;
        diesel::delete(
            liquidity_days::table
                .filter(liquidity_days::date.eq(day.date))
                .filter(liquidity_days::symbol.eq(&day.network_asset_symbol)),
        )
        .execute(conn)?;
    }
    let (day_rows, level_rows) = history_rows(frozen_days);
    insert_chunked!(
        conn,
        liquidity_days::table,
        &day_rows,
        "frozen days",
        progress
    );
    insert_chunked!(
        conn,
        liquidity_levels::table,
        &level_rows,
        "frozen levels",
        progress
    );
    for batch in batches {
        let Some(first) = batch.candles.first() else {
            continue;
        };
        diesel::delete(
            candles::table
                .filter(candles::symbol.eq(batch.symbol))
                .filter(candles::resolution.eq(batch.interval.as_str()))
                .filter(candles::open_time.ge(first.time)),
        )
        .execute(conn)?;
    }
    let candle_rows: Vec<_> = batches.iter().flat_map(candle_rows).collect();
    insert_chunked!(conn, candles::table, &candle_rows, "candles", progress);
    Ok(())
}
