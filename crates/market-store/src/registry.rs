//! The wallet registry of `track`: every wallet it discovered, with what
//! schedules its reads. Saved on its own and with each publish
//! ([`crate::Store::publish`]), appended to a journal that is merged into
//! the table in bulk (`journal.rs`).

use diesel::prelude::*;
use market_model::Decimal;
use time::OffsetDateTime;

use crate::journal::{each_merged, latest_of, AsAddress};
use crate::rows::{from_db_time, to_db_time, RegistryRow};
use crate::schema::{wallet_registry, wallet_registry_journal};
use crate::types::DbDecimal;
use crate::{insert_chunked, DbConnection, Store, StoreError, MAX_BINDS};

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

impl Store {
    /// Every registry entry, by address.
    pub fn registry(&self) -> Result<Vec<RegistryEntry>, StoreError> {
        let mut entries = Vec::new();
        self.each_registry_entry(REGISTRY_PAGE, |e| entries.push(e))?;
        Ok(entries)
    }

    /// Every registry entry, by address, handed to `f` one at a time and
    /// read `page` rows at a time: a registry of a million wallets is never
    /// held whole (as full entries it takes about a GB). Entries saved
    /// since the journal's last merge are read from it (see `journal.rs`).
    /// Returns how many.
    pub fn each_registry_entry(
        &self,
        page: usize,
        f: impl FnMut(RegistryEntry),
    ) -> Result<usize, StoreError> {
        let mut conn = self.conn()?;
        let journal = latest_in_journal(&mut conn)?;
        let load = |after: Option<&str>, limit| {
            let mut query = wallet_registry::table
                .order(wallet_registry::address)
                .limit(limit)
                .into_boxed();
            if let Some(a) = after {
                query = query.filter(wallet_registry::address.gt(a.to_owned()));
            }
            Ok(query.load::<RegistryRow>(&mut *conn)?)
        };
        each_merged(page, load, journal, RegistryEntry::from_row, f)
    }

    /// How many wallets the registry holds.
    pub fn registry_len(&self) -> Result<i64, StoreError> {
        use wallet_registry_journal as j;
        let mut conn = self.conn()?;
        let stored: i64 = wallet_registry::table.count().get_result(&mut *conn)?;
        let mut new: Vec<String> = j::table
            .filter(diesel::dsl::not(diesel::dsl::exists(
                wallet_registry::table.filter(wallet_registry::address.eq(j::address)),
            )))
            .select(j::address)
            .load(&mut *conn)?;
        new.sort_unstable();
        new.dedup();
        Ok(stored + new.len() as i64)
    }

    /// Saves registry entries (each replaces the saved entry of its
    /// address), in one transaction.
    pub fn save_registry(&self, entries: &[RegistryEntry]) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut pooled = self.conn()?;
        let conn: &mut DbConnection = &mut pooled;
        conn.transaction(|conn| append_registry(conn, entries))
    }
}

/// Rows a page of [`Store::registry`] reads.
const REGISTRY_PAGE: usize = 25_000;

/// Appends `entries` to the registry's journal: each replaces the saved
/// entry of its address (one write must not hold an address twice).
pub(crate) fn append_registry(
    conn: &mut DbConnection,
    entries: &[RegistryEntry],
) -> Result<(), StoreError> {
    crate::scan_state::refuse_twice(
        entries.iter().map(|e| e.address.as_str()),
        "registry entries",
    )?;
    let rows: Vec<RegistryRow> = entries.iter().map(RegistryEntry::row).collect();
    insert_chunked!(
        conn,
        wallet_registry_journal::table,
        &rows,
        "registry",
        &mut |_, _, _| {}
    );
    Ok(())
}

/// The journal's latest entry of each address, by address.
fn latest_in_journal(conn: &mut DbConnection) -> Result<Vec<RegistryRow>, StoreError> {
    use wallet_registry_journal as j;
    let rows: Vec<RegistryRow> = j::table
        .order(j::seq.desc())
        .select((
            j::address,
            j::sources,
            j::first_seen_at,
            j::leaderboard_value,
            j::account_value,
            j::position_value,
            j::last_trade_at,
            j::traded_notional,
            j::dexes,
            j::last_read_at,
            j::last_sweep_at,
            j::empty_reads,
            j::failed_reads,
        ))
        .load(conn)?;
    Ok(latest_of(rows))
}

impl AsAddress for RegistryRow {
    fn address(&self) -> &str {
        &self.address
    }
}
