//! The state behind each wallet's analytics, kept by `scan` and `track`:
//! its scan state ([`WalletScanState`]) and the positions followed
//! ([`TrackedPosition`]), read back at start and written with each version.

use std::collections::HashMap;

use diesel::prelude::*;
use market_model::{Decimal, Direction, Interval};
use time::OffsetDateTime;

use crate::journal::{each_merged, latest_of, AsAddress};
use crate::rows::{from_db_time, to_db_time, NewState};
use crate::schema::{candles, scanned_wallets, scanned_wallets_journal};
use crate::types::DbDecimal;
use crate::MAX_BINDS;
use crate::{followed, insert_chunked, DbConnection, Progress, Store, StoreError};

/// The columns of [`StateRow`], from the states' journal.
macro_rules! journal_state_columns {
    () => {
        (
            scanned_wallets_journal::address,
            scanned_wallets_journal::missed_scans,
            scanned_wallets_journal::last_seen_at,
            scanned_wallets_journal::first_seen_at,
            scanned_wallets_journal::first_account_value,
            scanned_wallets_journal::realized_pnl,
            scanned_wallets_journal::closed_count,
            scanned_wallets_journal::win_count,
            scanned_wallets_journal::held_scalper,
            scanned_wallets_journal::held_day,
            scanned_wallets_journal::held_swing,
            scanned_wallets_journal::held_position,
            scanned_wallets_journal::read_dexes,
        )
    };
}
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
        let journal = latest_states_in_journal(&mut conn)?;
        let rows: Vec<StateRow> = scanned_wallets::table
            .select(StateRow::as_select())
            .load(&mut *conn)?;
        // The journal's rows are later than the table's.
        rows.into_iter()
            .chain(journal)
            .map(|r| Ok((r.address.clone(), state_of_row(r)?)))
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
        // at a cold start of a million wallets). The address is unique in
        // the table, and in the journal once a write.
        use scanned_wallets_journal as j;
        let journaled: Option<(i64, (StateRow, String))> = j::table
            .filter(j::address.eq(address))
            .select((j::seq, (journal_state_columns!(), j::followed)))
            .load::<(i64, (StateRow, String))>(&mut *conn)?
            .into_iter()
            .max_by_key(|(seq, _)| *seq);
        let row = match journaled {
            Some((_, row)) => Some(row),
            None => scanned_wallets::table
                .filter(scanned_wallets::address.eq(address))
                .select((StateRow::as_select(), scanned_wallets::followed))
                .load(&mut *conn)?
                .pop(),
        };
        let Some((row, column)) = row else {
            return Ok(None);
        };
        let tracked = followed::decode(address, &column)?;
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
        let journal = latest_states_in_journal(&mut conn)?;
        let load = |after: Option<&str>, limit| {
            let mut query = scanned_wallets::table
                .select(StateRow::as_select())
                .order(scanned_wallets::address)
                .limit(limit)
                .into_boxed();
            if let Some(a) = after {
                query = query.filter(scanned_wallets::address.gt(a.to_owned()));
            }
            Ok(query.load::<StateRow>(&mut *conn)?)
        };
        each_merged(page, load, journal, state_of_row, f)
    }

    /// Open positions being followed, by wallet (the wallets that have
    /// some), each wallet's in symbol order.
    pub fn tracked_positions(&self) -> Result<HashMap<String, Vec<TrackedPosition>>, StoreError> {
        use scanned_wallets_journal as j;
        let mut conn = self.conn()?;
        let mut columns: HashMap<String, String> = scanned_wallets::table
            .filter(scanned_wallets::followed.ne(NONE_FOLLOWED))
            .select((scanned_wallets::address, scanned_wallets::followed))
            .load::<(String, String)>(&mut *conn)?
            .into_iter()
            .collect();
        // A journaled state replaces the table's (following nothing
        // included), and a later one an earlier one.
        let journal: Vec<(String, String)> = j::table
            .order(j::seq)
            .select((j::address, j::followed))
            .load(&mut *conn)?;
        columns.extend(journal);
        let mut out = HashMap::with_capacity(columns.len());
        for (address, column) in columns {
            let tracked = followed::decode(&address, &column)?;
            if !tracked.is_empty() {
                out.insert(address, tracked);
            }
        }
        Ok(out)
    }
}

/// The journal's latest state of each address, by address.
fn latest_states_in_journal(conn: &mut DbConnection) -> Result<Vec<StateRow>, StoreError> {
    use scanned_wallets_journal as j;
    let rows: Vec<StateRow> = j::table
        .order(j::seq.desc())
        .select(journal_state_columns!())
        .load(conn)?;
    Ok(latest_of(rows))
}

impl AsAddress for StateRow {
    fn address(&self) -> &str {
        &self.address
    }
}

/// The `followed` column of a wallet that follows no position.
const NONE_FOLLOWED: &str = "[]";

/// Writes scanner states, each with its wallet's followed positions of
/// `tracked` (every one of them belongs to a wallet of `wallet_states`),
/// each replacing the stored state of its wallet (the states of other
/// wallets are kept): appended to the states' journal (`journal.rs`).
pub(crate) fn write_wallet_states(
    conn: &mut DbConnection,
    wallet_states: &[WalletScanState],
    tracked: &[TrackedPosition],
    progress: Progress<'_>,
) -> Result<(), StoreError> {
    refuse_twice(
        wallet_states.iter().map(|s| s.address.as_str()),
        "scan states",
    )?;
    let mut by_wallet: HashMap<&str, Vec<&TrackedPosition>> = HashMap::new();
    for t in tracked {
        by_wallet.entry(t.address.as_str()).or_default().push(t);
    }
    // Most wallets read follow nothing (every empty one): no column of
    // their own is allocated.
    let columns: Vec<Option<String>> = wallet_states
        .iter()
        .map(|s| {
            by_wallet
                .remove(s.address.as_str())
                .map(|mut mine| followed::encode(&mut mine))
                .transpose()
        })
        .collect::<Result<_, StoreError>>()?;
    let rows: Vec<NewState<'_>> = wallet_states
        .iter()
        .zip(&columns)
        .map(|(s, column)| NewState {
            address: &s.address,
            missed_scans: s.missed_scans,
            last_seen_at: s.last_seen_at.map(to_db_time),
            first_seen_at: s.first_seen_at.map(to_db_time),
            first_account_value: s.first_account_value.as_ref().map(DbDecimal::from),
            realized_pnl: DbDecimal::from(&s.realized_pnl),
            closed_count: s.closed_count,
            win_count: s.win_count,
            held_scalper: s.held[0],
            held_day: s.held[1],
            held_swing: s.held[2],
            held_position: s.held[3],
            read_dexes: s
                .read_dexes
                .as_ref()
                .map(|d| serde_json::to_string(d).expect("strings serialize")),
            followed: column.as_deref().unwrap_or(NONE_FOLLOWED),
        })
        .collect();
    if let Some((wallet, positions)) = by_wallet.into_iter().next() {
        return Err(StoreError::Corrupt(format!(
            "followed position {} of wallet {wallet}, whose state this write does not hold",
            positions[0].symbol
        )));
    }
    insert_chunked!(
        conn,
        scanned_wallets_journal::table,
        &rows,
        "wallet states",
        progress
    );
    Ok(())
}

/// Refuses a write that holds two rows of one wallet: SQLite would keep
/// the last one's upsert and PostgreSQL refuse the statement, and either
/// way it is a writer's mistake, not something to settle by order.
pub(crate) fn refuse_twice<'a>(
    addresses: impl ExactSizeIterator<Item = &'a str>,
    what: &str,
) -> Result<(), StoreError> {
    let mut seen = std::collections::HashSet::with_capacity(addresses.len());
    for a in addresses {
        if !seen.insert(a) {
            return Err(StoreError::Corrupt(format!(
                "two {what} of wallet {a} in one write"
            )));
        }
    }
    Ok(())
}

/// A scanner state as stored: every column of `scanned_wallets` but the
/// followed positions.
#[derive(Queryable, Selectable)]
#[diesel(table_name = scanned_wallets)]
struct StateRow {
    address: String,
    missed_scans: i32,
    last_seen_at: Option<time::PrimitiveDateTime>,
    first_seen_at: Option<time::PrimitiveDateTime>,
    first_account_value: Option<DbDecimal>,
    realized_pnl: DbDecimal,
    closed_count: i32,
    win_count: i32,
    held_scalper: i32,
    held_day: i32,
    held_swing: i32,
    held_position: i32,
    read_dexes: Option<String>,
}

fn state_of_row(r: StateRow) -> Result<WalletScanState, StoreError> {
    let read_dexes = r
        .read_dexes
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
        .map_err(|e| StoreError::Corrupt(format!("read dexes of {}: {e}", r.address)))?;
    Ok(WalletScanState {
        address: r.address,
        missed_scans: r.missed_scans,
        last_seen_at: r.last_seen_at.map(from_db_time),
        first_seen_at: r.first_seen_at.map(from_db_time),
        first_account_value: r.first_account_value.map(Decimal::from),
        realized_pnl: Decimal::from(r.realized_pnl),
        closed_count: r.closed_count,
        win_count: r.win_count,
        held: [r.held_scalper, r.held_day, r.held_swing, r.held_position],
        read_dexes,
    })
}
