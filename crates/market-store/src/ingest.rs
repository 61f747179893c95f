//! Writes of the scanner: one scan is one transaction.

use std::collections::HashMap;

use diesel::prelude::*;
use market_model::{Interval, LiquidityDay};
use time::OffsetDateTime;

use crate::rows::{from_db_time, to_db_time};
use crate::schema::{candles, liquidity_days, liquidity_levels, scanned_wallets, snapshots};
use crate::{
    candle_rows, history_rows, insert_chunked, insert_snapshot, CandleBatch, DbConnection,
    Progress, SnapshotWrite, Store, StoreError, MAX_BINDS,
};

/// Scanner state of one wallet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalletScanState {
    /// Address.
    pub address: String,
    /// Consecutive scans that failed to observe it (0 when seen by this scan).
    pub missed_scans: i32,
    /// When it was last observed.
    pub last_seen_at: Option<OffsetDateTime>,
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
}

impl Store {
    /// Open time of the newest stored candle of `symbol` at `interval`.
    pub fn latest_candle_time(
        &self,
        symbol: &str,
        interval: Interval,
    ) -> Result<Option<i64>, StoreError> {
        let mut conn = self.conn()?;
        Ok(candles::table
            .filter(candles::symbol.eq(symbol))
            .filter(candles::resolution.eq(interval.as_str()))
            .select(diesel::dsl::max(candles::open_time))
            .first::<Option<i64>>(&mut *conn)?)
    }

    /// The scanner state of every wallet, by address.
    pub fn wallet_scan_states(&self) -> Result<HashMap<String, WalletScanState>, StoreError> {
        let mut conn = self.conn()?;
        let rows: Vec<(String, i32, Option<time::PrimitiveDateTime>)> =
            scanned_wallets::table.load(&mut *conn)?;
        Ok(rows
            .into_iter()
            .map(|(address, missed_scans, seen)| {
                (
                    address.clone(),
                    WalletScanState {
                        address,
                        missed_scans,
                        last_seen_at: seen.map(from_db_time),
                    },
                )
            })
            .collect())
    }

    /// Writes a scan atomically: frozen days, candles, the new data version
    /// and the wallet states. Readers see the previous version until it commits;
    /// a failure (or a killed process) leaves everything as it was.
    pub fn write_scan(
        &self,
        scan: &ScanWrite<'_>,
        progress: Progress<'_>,
    ) -> Result<i64, StoreError> {
        let mut pooled = self.conn()?;
        let conn: &mut DbConnection = &mut pooled;
        conn.transaction(|conn| {
            for day in scan.frozen_days {
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
            let (day_rows, level_rows) = history_rows(scan.frozen_days);
            insert_chunked!(
                conn,
                liquidity_days::table,
                &day_rows,
                9,
                "frozen days",
                progress
            );
            insert_chunked!(
                conn,
                liquidity_levels::table,
                &level_rows,
                8,
                "frozen levels",
                progress
            );

            for batch in scan.candles {
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
            let candle_rows: Vec<_> = scan.candles.iter().flat_map(candle_rows).collect();
            insert_chunked!(conn, candles::table, &candle_rows, 9, "candles", progress);

            let version = insert_snapshot(conn, &scan.snapshot, progress)?;
            diesel::delete(snapshots::table.filter(snapshots::version.lt(version - 1)))
                .execute(conn)?;

            diesel::delete(scanned_wallets::table).execute(conn)?;
            let states: Vec<_> = scan
                .wallet_states
                .iter()
                .map(|s| {
                    (
                        scanned_wallets::address.eq(&s.address),
                        scanned_wallets::missed_scans.eq(s.missed_scans),
                        scanned_wallets::last_seen_at.eq(s.last_seen_at.map(to_db_time)),
                    )
                })
                .collect();
            insert_chunked!(
                conn,
                scanned_wallets::table,
                &states,
                3,
                "wallet states",
                progress
            );
            Ok(version)
        })
    }
}
