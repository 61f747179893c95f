//! The state behind each wallet's analytics, kept by `scan` and `track`:
//! its scan state ([`WalletScanState`]) and the positions followed
//! ([`TrackedPosition`]), read back at start and written with each version.

use std::collections::HashMap;

use diesel::prelude::*;
use market_model::{Decimal, Direction, Interval};
use time::OffsetDateTime;

use crate::rows::{from_db_time, to_db_time};
use crate::schema::{candles, scanned_wallets, tracked_positions};
use crate::types::DbDecimal;
use crate::{each_by_key, insert_chunked, DbConnection, Progress, Store, StoreError, MAX_BINDS};

/// Scanner state of one wallet: staleness and the history behind its analytics.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct WalletScanState {
    /// Address.
    pub address: String,
    /// Consecutive scans that failed to observe it (0 when seen by this scan).
    pub missed_scans: i32,
    /// When it was last observed.
    pub last_seen_at: Option<OffsetDateTime>,
    /// When it was first observed.
    pub first_seen_at: Option<OffsetDateTime>,
    /// Account value at the first observation, USD.
    pub first_account_value: Option<Decimal>,
    /// Realized PnL over closed positions, USD.
    pub realized_pnl: Decimal,
    /// Closed positions.
    pub closed_count: i32,
    /// Closed positions with positive realized PnL.
    pub win_count: i32,
    /// Timed closes per holding class (scalper, day, swing, position).
    pub held: [i32; 4],
    /// The dexes its observation covers (`""` the main dex), sorted; `None`
    /// when not recorded. A position first seen on a dex it did not cover is
    /// a first observation, not an opening.
    pub read_dexes: Option<Vec<String>>,
}

/// An open position followed from scan to scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrackedPosition {
    /// Wallet.
    pub address: String,
    /// Asset.
    pub symbol: String,
    /// Side.
    pub direction: Direction,
    /// The scan that first saw it.
    pub opened_at: OffsetDateTime,
    /// Whether the wallet was already tracked when it opened (so `opened_at` is its open time).
    pub open_time_known: bool,
    /// Unrealized PnL at the last observation, USD.
    pub last_upnl: Decimal,
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
        let rows: Vec<StateRow> = scanned_wallets::table.load(&mut *conn)?;
        rows.into_iter()
            .map(|r| Ok((r.0.clone(), state_of_row(r)?)))
            .collect()
    }

    /// One wallet's analytics history, if it has one: its scanner state and
    /// the open positions followed for it (by symbol).
    pub fn wallet_history(
        &self,
        address: &str,
    ) -> Result<Option<(WalletScanState, Vec<TrackedPosition>)>, StoreError> {
        let mut conn = self.conn()?;
        // No `.first()`: the bundled SQLite (3.53) takes a bound LIMIT's value into
        // the plan, so each new binding expires the cached statement and
        // every call parsed and planned it again (a sixth of `track`'s CPU
        // at a cold start of a million wallets). The address is unique.
        let row: Option<StateRow> = scanned_wallets::table
            .filter(scanned_wallets::address.eq(address))
            .load(&mut *conn)?
            .pop();
        let Some(row) = row else {
            return Ok(None);
        };
        let tracked: Vec<TrackedRow> = tracked_positions::table
            .filter(tracked_positions::address.eq(address))
            .order(tracked_positions::symbol)
            .load(&mut *conn)?;
        let tracked = tracked
            .into_iter()
            .map(tracked_of_row)
            .collect::<Result<_, _>>()?;
        Ok(Some((state_of_row(row)?, tracked)))
    }

    /// Every wallet's scanner state, by address, handed to `f` one at a time
    /// and read `page` rows at a time (a million of them are never held
    /// whole). Returns how many.
    pub fn each_wallet_scan_state(
        &self,
        page: usize,
        f: impl FnMut(WalletScanState),
    ) -> Result<usize, StoreError> {
        let mut conn = self.conn()?;
        let load = |after: Option<&str>, limit| {
            let mut query = scanned_wallets::table
                .order(scanned_wallets::address)
                .limit(limit)
                .into_boxed();
            if let Some(a) = after {
                query = query.filter(scanned_wallets::address.gt(a.to_owned()));
            }
            Ok(query.load::<StateRow>(&mut *conn)?)
        };
        each_by_key(page, load, |r| &r.0, state_of_row, f)
    }

    /// Open positions being followed, by wallet.
    pub fn tracked_positions(&self) -> Result<HashMap<String, Vec<TrackedPosition>>, StoreError> {
        let mut conn = self.conn()?;
        let rows: Vec<TrackedRow> = tracked_positions::table.load(&mut *conn)?;
        let mut out: HashMap<String, Vec<TrackedPosition>> = HashMap::new();
        for row in rows {
            let t = tracked_of_row(row)?;
            out.entry(t.address.clone()).or_default().push(t);
        }
        Ok(out)
    }
}

/// A row of `tracked_positions`, in its columns' order.
type TrackedRow = (
    String,
    String,
    String,
    time::PrimitiveDateTime,
    i32,
    DbDecimal,
);

fn tracked_of_row(
    (address, symbol, direction, opened_at, known, upnl): TrackedRow,
) -> Result<TrackedPosition, StoreError> {
    let direction = direction
        .parse::<Direction>()
        .map_err(|_| StoreError::Corrupt(format!("tracked position direction {direction:?}")))?;
    Ok(TrackedPosition {
        address,
        symbol,
        direction,
        opened_at: from_db_time(opened_at),
        open_time_known: known != 0,
        last_upnl: Decimal::from(upnl),
    })
}

/// Inserts scanner states (the caller deleted the ones they replace).
pub(crate) fn insert_wallet_states(
    conn: &mut DbConnection,
    wallet_states: &[WalletScanState],
    progress: Progress<'_>,
) -> Result<(), StoreError> {
    let states: Vec<_> = wallet_states
        .iter()
        .map(|s| {
            (
                scanned_wallets::address.eq(&s.address),
                scanned_wallets::missed_scans.eq(s.missed_scans),
                scanned_wallets::last_seen_at.eq(s.last_seen_at.map(to_db_time)),
                scanned_wallets::first_seen_at.eq(s.first_seen_at.map(to_db_time)),
                scanned_wallets::first_account_value
                    .eq(s.first_account_value.as_ref().map(DbDecimal::from)),
                scanned_wallets::realized_pnl.eq(DbDecimal::from(&s.realized_pnl)),
                scanned_wallets::closed_count.eq(s.closed_count),
                scanned_wallets::win_count.eq(s.win_count),
                scanned_wallets::held_scalper.eq(s.held[0]),
                scanned_wallets::held_day.eq(s.held[1]),
                scanned_wallets::held_swing.eq(s.held[2]),
                scanned_wallets::held_position.eq(s.held[3]),
                scanned_wallets::read_dexes.eq(s
                    .read_dexes
                    .as_ref()
                    .map(|d| serde_json::to_string(d).expect("strings serialize"))),
            )
        })
        .collect();
    insert_chunked!(
        conn,
        scanned_wallets::table,
        &states,
        "wallet states",
        progress
    );
    Ok(())
}

/// Inserts followed positions (the caller deleted the ones they replace).
pub(crate) fn insert_tracked(
    conn: &mut DbConnection,
    tracked: &[TrackedPosition],
    progress: Progress<'_>,
) -> Result<(), StoreError> {
    let rows: Vec<_> = tracked
        .iter()
        .map(|t| {
            (
                tracked_positions::address.eq(&t.address),
                tracked_positions::symbol.eq(&t.symbol),
                tracked_positions::direction.eq(t.direction.as_str()),
                tracked_positions::opened_at.eq(to_db_time(t.opened_at)),
                tracked_positions::open_time_known.eq(i32::from(t.open_time_known)),
                tracked_positions::last_upnl.eq(DbDecimal::from(&t.last_upnl)),
            )
        })
        .collect();
    insert_chunked!(
        conn,
        tracked_positions::table,
        &rows,
        "tracked positions",
        progress
    );
    Ok(())
}

/// A row of `scanned_wallets`, in its columns' order.
type StateRow = (
    String,
    i32,
    Option<time::PrimitiveDateTime>,
    Option<time::PrimitiveDateTime>,
    Option<DbDecimal>,
    DbDecimal,
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    Option<String>,
);

fn state_of_row(r: StateRow) -> Result<WalletScanState, StoreError> {
    let read_dexes =
        r.12.as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("read dexes of {}: {e}", r.0)))?;
    Ok(WalletScanState {
        address: r.0,
        missed_scans: r.1,
        last_seen_at: r.2.map(from_db_time),
        first_seen_at: r.3.map(from_db_time),
        first_account_value: r.4.map(Decimal::from),
        realized_pnl: Decimal::from(r.5),
        closed_count: r.6,
        win_count: r.7,
        held: [r.8, r.9, r.10, r.11],
        read_dexes,
    })
}
