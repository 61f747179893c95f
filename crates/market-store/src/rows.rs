//! Row structs: how model types map onto the tables.

use diesel::prelude::*;
use time::{Date, OffsetDateTime, PrimitiveDateTime, UtcOffset};

use crate::schema::*;
use crate::types::{DbDecimal, DbTime};

/// UTC instant → `TIMESTAMP` value.
pub fn to_db_time(t: OffsetDateTime) -> PrimitiveDateTime {
    let t = t.to_offset(UtcOffset::UTC);
    PrimitiveDateTime::new(t.date(), t.time())
}

/// `TIMESTAMP` value → UTC instant.
pub fn from_db_time(t: PrimitiveDateTime) -> OffsetDateTime {
    t.assume_utc()
}

#[derive(Insertable)]
#[diesel(table_name = snapshots)]
pub struct NewSnapshot<'a> {
    pub version: i64,
    pub source: &'a str,
    pub observed_at: PrimitiveDateTime,
    pub created_at: PrimitiveDateTime,
    pub asset_count: i64,
    pub wallet_count: i64,
    pub position_count: i64,
}

#[derive(Insertable, Queryable)]
#[diesel(table_name = markets)]
pub struct MarketRow {
    pub version: i64,
    pub symbol: String,
    pub price: DbDecimal,
    pub change24h_pct: DbDecimal,
    pub volume24h: DbDecimal,
    pub open_interest: DbDecimal,
    pub funding: DbDecimal,
    pub long_count: i64,
    pub short_count: i64,
    pub long_short_ratio: DbDecimal,
    pub long_liquidation_value: DbDecimal,
    pub short_liquidation_value: DbDecimal,
    pub total_liquidation_value: DbDecimal,
    pub bucket_size: DbDecimal,
    /// JSON array of the market's `Cohort`s.
    pub cohorts: String,
    /// JSON array of the `Level`s of the market's current day.
    pub current_levels: String,
}

/// Inserted rows are open (`valid_to` NULL); loads select these columns only.
#[derive(Insertable, Queryable, Selectable)]
#[diesel(table_name = wallets, treat_none_as_default_value = false)]
pub struct WalletRow {
    pub version: i64,
    pub address: String,
    pub label: Option<String>,
    pub tags: String,
    pub kols: String,
    pub kol_profile: Option<String>,
    pub size_class: String,
    pub direction: String,
    pub account_value: DbDecimal,
    pub total_value: DbDecimal,
    pub long_value: DbDecimal,
    pub short_value: DbDecimal,
    pub leverage: DbDecimal,
    pub position_count: i32,
    pub observed_at: DbTime,
    pub net_pnl: Option<DbDecimal>,
    pub roi: Option<DbDecimal>,
    pub win_rate: Option<DbDecimal>,
    pub strategy: Option<String>,
    pub strategy_confidence: Option<DbDecimal>,
    /// Its open positions (see `held.rs`).
    pub positions: String,
}

#[derive(Insertable, Queryable)]
#[diesel(table_name = liquidity_days)]
pub struct LiquidityDayRow {
    pub date: Date,
    pub symbol: String,
    pub coverage: String,
    pub bucket_size: DbDecimal,
    pub updated_at: PrimitiveDateTime,
    pub long_count: i64,
    pub long_usd: DbDecimal,
    pub short_count: i64,
    pub short_usd: DbDecimal,
}

#[derive(Insertable, Queryable)]
#[diesel(table_name = liquidity_levels)]
pub struct LiquidityLevelRow {
    pub date: Date,
    pub symbol: String,
    pub side: String,
    pub bucket_price: DbDecimal,
    pub position_count: i64,
    pub total_usd: DbDecimal,
    pub min_liq_price: DbDecimal,
    pub max_liq_price: DbDecimal,
}

#[derive(Insertable, Queryable)]
#[diesel(table_name = candles)]
pub struct CandleRow {
    pub symbol: String,
    pub resolution: String,
    pub open_time: i64,
    pub open: DbDecimal,
    pub high: DbDecimal,
    pub low: DbDecimal,
    pub close: DbDecimal,
    pub volume: DbDecimal,
    pub trades: i64,
}

#[derive(Insertable)]
#[diesel(table_name = api_tokens, treat_none_as_default_value = false)]
pub struct NewToken<'a> {
    pub name: &'a str,
    pub token_hash: &'a str,
    pub hint: &'a str,
    pub created_at: PrimitiveDateTime,
    pub expires_at: Option<PrimitiveDateTime>,
    pub rate_limit_per_minute: Option<i32>,
}

/// A wallet's scanner state with its followed positions (see `followed.rs`),
/// as it is appended to the states' journal (`journal.rs`).
#[derive(Insertable)]
#[diesel(table_name = scanned_wallets_journal, treat_none_as_default_value = false)]
pub struct NewState<'a> {
    pub address: &'a str,
    pub missed_scans: i32,
    pub last_seen_at: Option<PrimitiveDateTime>,
    pub first_seen_at: Option<PrimitiveDateTime>,
    pub first_account_value: Option<DbDecimal>,
    pub realized_pnl: DbDecimal,
    pub closed_count: i32,
    pub win_count: i32,
    pub held_scalper: i32,
    pub held_day: i32,
    pub held_swing: i32,
    pub held_position: i32,
    pub read_dexes: Option<String>,
    pub followed: &'a str,
}

/// A registry entry: appended to the registry's journal (`journal.rs`),
/// read from it and from `wallet_registry` (the same columns but `seq`).
#[derive(Insertable, Queryable)]
#[diesel(table_name = wallet_registry_journal, treat_none_as_default_value = false)]
pub struct RegistryRow {
    pub address: String,
    pub sources: i32,
    pub first_seen_at: PrimitiveDateTime,
    pub leaderboard_value: Option<DbDecimal>,
    pub account_value: Option<DbDecimal>,
    pub position_value: Option<DbDecimal>,
    pub last_trade_at: Option<PrimitiveDateTime>,
    pub traded_notional: DbDecimal,
    pub dexes: String,
    pub last_read_at: Option<PrimitiveDateTime>,
    pub last_sweep_at: Option<PrimitiveDateTime>,
    pub empty_reads: i32,
    pub failed_reads: i32,
}
