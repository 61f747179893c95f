//! The wallet registry of `track` and its incremental publishes.
//!
//! A publish writes a new data version without rewriting unchanged wallets:
//! it closes the open rows of the wallets that changed (`valid_to` = the new
//! version) and inserts their new rows. Markets and current levels are small
//! and are written whole with every version.

use diesel::prelude::*;
use market_engine::VersionChanges;
use market_model::{Decimal, LiquidityDay, WalletFreshness};
use time::OffsetDateTime;

use crate::ingest::{insert_tracked, insert_wallet_states, write_days_and_candles};
use crate::rows::{from_db_time, to_db_time, RegistryRow};
use crate::schema::{
    positions, scanned_wallets, tracked_positions, version_freshness, wallet_registry, wallets,
};
use crate::types::DbDecimal;
use crate::{
    insert_chunked, insert_version, insert_wallet_rows, prune_before, CandleBatch, DbConnection,
    Progress, Store, StoreError, TrackedPosition, VersionHeader, WalletScanState, MAX_BINDS,
};

/// Where a registry entry was found (bits of [`RegistryEntry::sources`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Source {
    /// The operator's wallet list.
    List = 1,
    /// The exchange's leaderboard.
    Leaderboard = 2,
    /// The exchange's trades stream.
    Trades = 4,
    /// An operator's node's `node_trades` files.
    NodeTrades = 8,
}

impl Source {
    /// Every source, in bit order.
    pub const ALL: [Source; 4] = [
        Source::List,
        Source::Leaderboard,
        Source::Trades,
        Source::NodeTrades,
    ];

    /// The bit of this source.
    pub fn bit(self) -> i32 {
        self as i32
    }

    /// Its name in logs and docs.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::List => "list",
            Source::Leaderboard => "leaderboard",
            Source::Trades => "trades",
            Source::NodeTrades => "node-trades",
        }
    }
}

/// What `track` knows about one wallet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryEntry {
    /// Lowercase `0x` address.
    pub address: String,
    /// Bit set of [`Source`]s that reported it.
    pub sources: i32,
    /// When it was first discovered.
    pub first_seen_at: OffsetDateTime,
    /// The leaderboard's `accountValue`, USD.
    pub leaderboard_value: Option<Decimal>,
    /// Account value at the last read, USD.
    pub account_value: Option<Decimal>,
    /// Open position value at the last read, USD.
    pub position_value: Option<Decimal>,
    /// Its last trade seen on a discovery stream.
    pub last_trade_at: Option<OffsetDateTime>,
    /// Traded notional, decayed (see docs/ingest.md), USD.
    pub traded_notional: Decimal,
    /// HIP-3 dexes it traded or held equity on, sorted.
    pub dexes: Vec<String>,
    /// Its last successful read.
    pub last_read_at: Option<OffsetDateTime>,
    /// Its last read of every dex.
    pub last_sweep_at: Option<OffsetDateTime>,
    /// Consecutive reads with no equity and no position.
    pub empty_reads: i32,
    /// Consecutive failed reads.
    pub failed_reads: i32,
}

impl RegistryEntry {
    /// A newly discovered wallet.
    pub fn new(address: String, source: Source, at: OffsetDateTime) -> Self {
        RegistryEntry {
            address,
            sources: source.bit(),
            first_seen_at: at,
            leaderboard_value: None,
            account_value: None,
            position_value: None,
            last_trade_at: None,
            traded_notional: Decimal::zero(),
            dexes: Vec::new(),
            last_read_at: None,
            last_sweep_at: None,
            empty_reads: 0,
            failed_reads: 0,
        }
    }

    fn row(&self) -> RegistryRow {
        RegistryRow {
            address: self.address.clone(),
            sources: self.sources,
            first_seen_at: to_db_time(self.first_seen_at),
            leaderboard_value: self.leaderboard_value.as_ref().map(DbDecimal::from),
            account_value: self.account_value.as_ref().map(DbDecimal::from),
            position_value: self.position_value.as_ref().map(DbDecimal::from),
            last_trade_at: self.last_trade_at.map(to_db_time),
            traded_notional: DbDecimal::from(&self.traded_notional),
            dexes: serde_json::to_string(&self.dexes).expect("strings serialize"),
            last_read_at: self.last_read_at.map(to_db_time),
            last_sweep_at: self.last_sweep_at.map(to_db_time),
            empty_reads: self.empty_reads,
            failed_reads: self.failed_reads,
        }
    }

    fn from_row(r: RegistryRow) -> Result<Self, StoreError> {
        let dexes = serde_json::from_str(&r.dexes)
            .map_err(|e| StoreError::Corrupt(format!("registry dexes of {}: {e}", r.address)))?;
        Ok(RegistryEntry {
            address: r.address,
            sources: r.sources,
            first_seen_at: from_db_time(r.first_seen_at),
            leaderboard_value: r.leaderboard_value.map(Decimal::from),
            account_value: r.account_value.map(Decimal::from),
            position_value: r.position_value.map(Decimal::from),
            last_trade_at: r.last_trade_at.map(from_db_time),
            traded_notional: Decimal::from(r.traded_notional),
            dexes,
            last_read_at: r.last_read_at.map(from_db_time),
            last_sweep_at: r.last_sweep_at.map(from_db_time),
            empty_reads: r.empty_reads,
            failed_reads: r.failed_reads,
        })
    }
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
    /// Registry entries to save with this version.
    pub registry: &'a [RegistryEntry],
    /// Freshness of every tracked wallet as of `observed_at`.
    pub freshness: &'a WalletFreshness,
}

/// Addresses per `IN (…)` list.
const ADDRESS_CHUNK: usize = 500;

impl Store {
    /// Every registry entry, by address.
    pub fn registry(&self) -> Result<Vec<RegistryEntry>, StoreError> {
        let mut conn = self.conn()?;
        let rows: Vec<RegistryRow> = wallet_registry::table
            .order(wallet_registry::address)
            .load(&mut *conn)?;
        rows.into_iter().map(RegistryEntry::from_row).collect()
    }

    /// How many wallets the registry holds.
    pub fn registry_len(&self) -> Result<i64, StoreError> {
        let mut conn = self.conn()?;
        Ok(wallet_registry::table.count().get_result(&mut *conn)?)
    }

    /// Inserts or replaces registry entries, in one transaction.
    pub fn save_registry(&self, entries: &[RegistryEntry]) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut pooled = self.conn()?;
        let conn: &mut DbConnection = &mut pooled;
        conn.transaction(|conn| upsert_registry(conn, entries))
    }

    /// Writes an incremental publish in one transaction and prunes what the
    /// previous version no longer needs. Returns the new version.
    pub fn publish(&self, p: &PublishWrite<'_>, progress: Progress<'_>) -> Result<i64, StoreError> {
        let mut pooled = self.conn()?;
        let conn: &mut DbConnection = &mut pooled;
        conn.transaction(|conn| self.write_publish(conn, p, progress))
    }

    /// Runs every write of [`Store::publish`] and rolls them back: whether
    /// the database would take this publish, and if not why, with nothing
    /// changed either way.
    pub fn try_publish(&self, p: &PublishWrite<'_>) -> Result<(), StoreError> {
        let mut pooled = self.conn()?;
        let conn: &mut DbConnection = &mut pooled;
        let result = conn.transaction(|conn| {
            self.write_publish(conn, p, &mut |_, _, _| {})?;
            Err::<(), _>(StoreError::Query(
                diesel::result::Error::RollbackTransaction,
            ))
        });
        match result {
            Err(StoreError::Query(diesel::result::Error::RollbackTransaction)) => Ok(()),
            other => other,
        }
    }

    fn write_publish(
        &self,
        conn: &mut DbConnection,
        p: &PublishWrite<'_>,
        progress: Progress<'_>,
    ) -> Result<i64, StoreError> {
        let latest = crate::latest_version(conn)?;
        if latest.unwrap_or(0) != p.base_version {
            return Err(StoreError::Conflict {
                expected: p.base_version,
                found: latest,
            });
        }
        let c = p.changes;
        write_days_and_candles(conn, p.frozen_days, p.candles, progress)?;
        let version = insert_version(
            conn,
            &VersionHeader {
                source: p.source,
                observed_at: c.observed_at,
                markets: &c.markets,
                cohorts: &c.cohorts,
                current_days: &c.current_days,
                wallet_count: p.wallet_count,
                position_count: p.position_count,
            },
            progress,
        )?;
        // Recorded against the rows still open: the previous observation.
        crate::history::record(
            conn,
            self.retention(),
            &crate::history::Observation {
                observed_at: c.observed_at,
                markets: &c.markets,
                cohorts: &c.cohorts,
                wallets: &c.wallets,
                positions: &c.positions,
                full: false,
                events: true,
                newly_read: p.newly_read,
            },
        )?;
        let touched: Vec<&str> = c
            .wallets
            .iter()
            .map(|w| w.address.as_str())
            .chain(c.removed.iter().map(String::as_str))
            .collect();
        for chunk in touched.chunks(ADDRESS_CHUNK) {
            diesel::update(
                wallets::table
                    .filter(wallets::valid_to.is_null())
                    .filter(wallets::address.eq_any(chunk)),
            )
            .set(wallets::valid_to.eq(version))
            .execute(conn)?;
            diesel::update(
                positions::table
                    .filter(positions::valid_to.is_null())
                    .filter(positions::address.eq_any(chunk)),
            )
            .set(positions::valid_to.eq(version))
            .execute(conn)?;
        }
        // Scan states are replaced by wallet, for every wallet read:
        // served, empty (not served) or removed alike.
        let read: Vec<&str> = p.wallet_states.iter().map(|s| s.address.as_str()).collect();
        for chunk in read.chunks(ADDRESS_CHUNK) {
            diesel::delete(scanned_wallets::table.filter(scanned_wallets::address.eq_any(chunk)))
                .execute(conn)?;
            diesel::delete(
                tracked_positions::table.filter(tracked_positions::address.eq_any(chunk)),
            )
            .execute(conn)?;
        }
        #[cfg(feature = "test-support")]
        self.injected_fault(|a| read.contains(&a) || c.wallets.iter().any(|w| w.address == a))?;
        insert_wallet_rows(conn, version, &c.wallets, &c.positions, progress)?;
        insert_wallet_states(conn, p.wallet_states, progress)?;
        insert_tracked(conn, p.tracked, progress)?;
        upsert_registry(conn, p.registry)?;
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
        Ok(version)
    }
}

fn upsert_registry(conn: &mut DbConnection, entries: &[RegistryEntry]) -> Result<(), StoreError> {
    // Delete-then-insert keeps one statement shape for both backends.
    for chunk in entries.chunks(ADDRESS_CHUNK) {
        let addresses: Vec<&str> = chunk.iter().map(|e| e.address.as_str()).collect();
        diesel::delete(wallet_registry::table.filter(wallet_registry::address.eq_any(&addresses)))
            .execute(conn)?;
        let rows: Vec<RegistryRow> = chunk.iter().map(RegistryEntry::row).collect();
        insert_chunked!(
            conn,
            wallet_registry::table,
            &rows,
            "registry",
            &mut |_, _, _| {}
        );
    }
    Ok(())
}
