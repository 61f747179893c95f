//! Conversions between model types and rows.

use std::collections::HashMap;
use std::str::FromStr;

use market_model::{
    Candle, Cohort, Coverage, Decimal, Direction, Kol, KolProfile, Level, LiquidityDay,
    LiquidityDayText, LiquidityTotals, Market, MarketCohorts, MarketPosition, SideTotal, SizeClass,
    Strategy, Wallet, WalletDirection,
};

use crate::rows::*;
use crate::types::{DbDecimal, DbTime};
use crate::{CandleBatch, LoadedSnapshot, SnapshotMeta, StoreError};
use market_engine::DataVersion;

fn db(d: &Decimal) -> DbDecimal {
    DbDecimal::from(d)
}

fn dec(d: DbDecimal) -> Decimal {
    Decimal::from(d)
}

pub(crate) fn parse<T: FromStr>(what: &str, text: &str) -> Result<T, StoreError> {
    text.parse()
        .map_err(|_| StoreError::Corrupt(format!("{what} {text:?} is not a known value")))
}

fn json<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// [`json`] of a list: most wallets have no tags and no KOLs, and `[]`
/// needs no parser.
fn json_list<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<Vec<T>, StoreError> {
    match text {
        "[]" => Ok(Vec::new()),
        _ => json(what, text),
    }
}

fn level_key(l: &Level) -> (String, DbDecimal, i64, DbDecimal, DbDecimal, DbDecimal) {
    (
        l.side.as_str().to_owned(),
        db(&l.bucket_price),
        l.position_count as i64,
        db(&l.total_amount_usd),
        db(&l.min_liquidation_price),
        db(&l.max_liquidation_price),
    )
}

pub(crate) fn market_rows(
    version: i64,
    markets: &[Market],
    cohorts: &[MarketCohorts],
    days: &[LiquidityDay],
) -> Vec<MarketRow> {
    let cohorts: HashMap<&str, &[Cohort]> = cohorts
        .iter()
        .map(|c| (c.symbol.as_str(), c.items.as_slice()))
        .collect();
    let days: HashMap<&str, &LiquidityDay> = days
        .iter()
        .map(|d| (d.network_asset_symbol.as_str(), d))
        .collect();
    markets
        .iter()
        .map(|m| MarketRow {
            version,
            symbol: m.symbol.clone(),
            price: db(&m.price),
            change24h_pct: db(&m.change24h_pct),
            volume24h: db(&m.volume24h),
            open_interest: db(&m.open_interest),
            funding: db(&m.funding),
            long_count: m.long_count as i64,
            short_count: m.short_count as i64,
            long_short_ratio: db(&m.long_short_ratio),
            long_liquidation_value: db(&m.long_liquidation_value),
            short_liquidation_value: db(&m.short_liquidation_value),
            total_liquidation_value: db(&m.total_liquidation_value),
            bucket_size: days
                .get(m.symbol.as_str())
                .map_or_else(|| db(&Decimal::zero()), |d| db(&d.bucket_size)),
            cohorts: serde_json::to_string(
                cohorts.get(m.symbol.as_str()).copied().unwrap_or_default(),
            )
            .expect("model types serialize"),
            current_levels: serde_json::to_string(
                days.get(m.symbol.as_str()).map_or(&[][..], |d| &d.levels),
            )
            .expect("model types serialize"),
        })
        .collect()
}

/// The row of wallet `w` holding `positions` (its `positions` column, see
/// `held.rs`).
pub(crate) fn wallet_row(version: i64, w: &Wallet, positions: String) -> WalletRow {
    WalletRow {
        version,
        positions,
        address: w.address.clone(),
        label: w.label.clone(),
        tags: serde_json::to_string(&w.tags).expect("strings serialize"),
        kols: serde_json::to_string(&w.kols).expect("kols serialize"),
        kol_profile: w
            .kol_profile
            .as_ref()
            .map(|k| serde_json::to_string(k).expect("profile serializes")),
        size_class: w.size_class.as_str().to_owned(),
        direction: w.direction.as_str().to_owned(),
        account_value: db(&w.account_total_value),
        total_value: db(&w.total_position_value),
        long_value: db(&w.long_value),
        short_value: db(&w.short_value),
        leverage: db(&w.leverage),
        position_count: w.positions as i32,
        observed_at: DbTime(to_db_time(w.observed_at)),
        net_pnl: w.net_pnl.as_ref().map(db),
        roi: w.roi.as_ref().map(db),
        win_rate: w.win_rate.as_ref().map(db),
        strategy: w.strategy.map(|s| s.as_str().to_owned()),
        strategy_confidence: w.strategy_confidence.as_ref().map(db),
    }
}

pub(crate) fn history_rows(
    days: &[LiquidityDay],
) -> (Vec<LiquidityDayRow>, Vec<LiquidityLevelRow>) {
    let mut day_rows = Vec::with_capacity(days.len());
    let mut level_rows = Vec::new();
    for d in days {
        day_rows.push(LiquidityDayRow {
            date: d.date,
            symbol: d.network_asset_symbol.clone(),
            coverage: d.coverage.as_str().to_owned(),
            bucket_size: db(&d.bucket_size),
            updated_at: to_db_time(d.updated_at),
            long_count: d.totals.long.position_count as i64,
            long_usd: db(&d.totals.long.total_amount_usd),
            short_count: d.totals.short.position_count as i64,
            short_usd: db(&d.totals.short.total_amount_usd),
        });
        for l in &d.levels {
            let (side, bucket_price, position_count, total_usd, min_liq_price, max_liq_price) =
                level_key(l);
            level_rows.push(LiquidityLevelRow {
                date: d.date,
                symbol: d.network_asset_symbol.clone(),
                side,
                bucket_price,
                position_count,
                total_usd,
                min_liq_price,
                max_liq_price,
            });
        }
    }
    (day_rows, level_rows)
}

pub(crate) fn candle_rows(batch: &CandleBatch<'_>) -> Vec<CandleRow> {
    batch
        .candles
        .iter()
        .map(|c| CandleRow {
            symbol: batch.symbol.to_owned(),
            resolution: batch.interval.as_str().to_owned(),
            open_time: c.time,
            open: db(&c.open),
            high: db(&c.high),
            low: db(&c.low),
            close: db(&c.close),
            volume: db(&c.volume),
            trades: c.trades as i64,
        })
        .collect()
}

pub(crate) fn candle_from_row(r: CandleRow) -> Candle {
    Candle::at(
        r.open_time,
        dec(r.open),
        dec(r.high),
        dec(r.low),
        dec(r.close),
        dec(r.volume),
        r.trades.max(0) as u64,
    )
}

fn level_from(
    side: &str,
    bucket_price: DbDecimal,
    position_count: i64,
    total_usd: DbDecimal,
    min: DbDecimal,
    max: DbDecimal,
) -> Result<Level, StoreError> {
    Ok(Level {
        side: parse::<Direction>("level side", side)?,
        bucket_price: dec(bucket_price),
        position_count: position_count.max(0) as u64,
        total_amount_usd: dec(total_usd),
        min_liquidation_price: dec(min),
        max_liquidation_price: dec(max),
    })
}

/// Levels in the documented order: long first, then bucket price ascending
/// (SQL orders TEXT decimals lexicographically on SQLite, and the current
/// levels moved into JSON by a migration are in no order, so sort here).
fn sort_levels(levels: &mut [Level]) {
    levels.sort_by(|a, b| {
        (a.side != Direction::Long, &a.bucket_price.0)
            .cmp(&(b.side != Direction::Long, &b.bucket_price.0))
    });
}

/// A wallet row as the model's wallet, and its `positions` column.
pub(crate) fn wallet_from(r: WalletRow) -> Result<(Wallet, String), StoreError> {
    let wallet = Wallet {
        tags: json_list::<String>("wallet tags", &r.tags)?,
        kols: json_list::<Kol>("wallet kols", &r.kols)?,
        kol_profile: r
            .kol_profile
            .as_deref()
            .map(|p| json::<KolProfile>("kol profile", p))
            .transpose()?,
        size_class: parse::<SizeClass>("size class", &r.size_class)?,
        direction: parse::<WalletDirection>("wallet direction", &r.direction)?,
        strategy: r
            .strategy
            .as_deref()
            .map(|s| parse::<Strategy>("strategy", s))
            .transpose()?,
        address: r.address,
        label: r.label,
        account_total_value: dec(r.account_value),
        total_position_value: dec(r.total_value),
        long_value: dec(r.long_value),
        short_value: dec(r.short_value),
        leverage: dec(r.leverage),
        positions: r.position_count.max(0) as u32,
        observed_at: from_db_time(r.observed_at.0),
        net_pnl: r.net_pnl.map(dec),
        roi: r.roi.map(dec),
        win_rate: r.win_rate.map(dec),
        strategy_confidence: r.strategy_confidence.map(dec),
    };
    Ok((wallet, r.positions))
}

/// Copies each wallet's label and tags into its positions (only wallets
/// that have either are looked up: most have neither).
pub(crate) fn label_positions(positions: &mut [MarketPosition], wallets: &[Wallet]) {
    let labelled: HashMap<&str, &Wallet> = wallets
        .iter()
        .filter(|w| w.label.is_some() || !w.tags.is_empty())
        .map(|w| (w.address.as_str(), w))
        .collect();
    if labelled.is_empty() {
        return;
    }
    for p in positions {
        if let Some(w) = labelled.get(p.address.as_str()) {
            p.label.clone_from(&w.label);
            p.tags.clone_from(&w.tags);
        }
    }
}

/// A form of a market's `current` liquidity day that a store reads back:
/// the model's (its levels parsed), or [`LiquidityDayText`] (its levels
/// kept as the stored JSON, which a server serves as it is).
pub trait StoredDay: Sized {
    /// The day `head` (no levels; its totals are replaced) with the levels
    /// stored as the JSON `levels`.
    fn read(head: LiquidityDay, levels: String) -> Result<Self, StoreError>;
}

/// The levels stored as `text`, in their documented order.
fn parsed_levels(text: &str) -> Result<Vec<Level>, StoreError> {
    let mut levels = json::<Vec<Level>>("current levels", text)?;
    sort_levels(&mut levels);
    Ok(levels)
}

impl StoredDay for LiquidityDay {
    fn read(mut head: LiquidityDay, levels: String) -> Result<Self, StoreError> {
        head.levels = parsed_levels(&levels)?;
        head.totals = LiquidityTotals::of(&head.levels);
        Ok(head)
    }
}

impl StoredDay for LiquidityDayText {
    fn read(head: LiquidityDay, levels: String) -> Result<Self, StoreError> {
        // Text written by another writer (or by hand) in another spelling
        // or order is parsed and printed as the model prints it.
        let (head, levels) = match LiquidityDayText::checked(head, levels) {
            Ok(day) => return Ok(day),
            Err(refused) => *refused,
        };
        let printed =
            serde_json::to_string(&parsed_levels(&levels)?).expect("model types serialize");
        LiquidityDayText::checked(head, printed).map_err(|refused| {
            let text = &refused.1;
            StoreError::Corrupt(format!(
                "current levels print as {text:?}, which reads back otherwise"
            ))
        })
    }
}

/// The served snapshot from its converted wallets and positions and the
/// market rows (each with its current levels).
pub(crate) fn assemble_snapshot<P, D: StoredDay>(
    meta: SnapshotMeta,
    markets: Vec<MarketRow>,
    wallets: Vec<Wallet>,
    positions: Vec<P>,
) -> Result<LoadedSnapshot<P, D>, StoreError> {
    let mut days = Vec::with_capacity(markets.len());
    let mut cohorts = Vec::with_capacity(markets.len());
    let markets: Vec<Market> = markets
        .into_iter()
        .map(|r| {
            cohorts.push(MarketCohorts {
                symbol: r.symbol.clone(),
                observed_at: meta.observed_at,
                items: json("market cohorts", &r.cohorts)?,
                coverage: Coverage::ScannedWallets,
            });
            let head = LiquidityDay::new(
                meta.observed_at.date(),
                market_model::NETWORK_ID,
                &r.symbol,
                Coverage::Current,
                dec(r.bucket_size),
                meta.observed_at,
                LiquidityTotals::of(&[]),
                Vec::new(),
            );
            days.push(D::read(head, r.current_levels)?);
            Ok(Market {
                symbol: r.symbol,
                price: dec(r.price),
                change24h_pct: dec(r.change24h_pct),
                volume24h: dec(r.volume24h),
                open_interest: dec(r.open_interest),
                funding: dec(r.funding),
                long_count: r.long_count.max(0) as u64,
                short_count: r.short_count.max(0) as u64,
                long_short_ratio: dec(r.long_short_ratio),
                total_liquidation_value: dec(r.total_liquidation_value),
                long_liquidation_value: dec(r.long_liquidation_value),
                short_liquidation_value: dec(r.short_liquidation_value),
            })
        })
        .collect::<Result<_, StoreError>>()?;

    Ok(LoadedSnapshot {
        version: DataVersion {
            observed_at: meta.observed_at,
            markets,
            wallets,
            positions,
            current_days: days,
            cohorts,
            freshness: None,
        },
        meta,
    })
}

pub(crate) fn assemble_history(
    network: &str,
    days: Vec<LiquidityDayRow>,
    levels: Vec<LiquidityLevelRow>,
) -> Result<Vec<LiquidityDay>, StoreError> {
    let mut by_key: HashMap<(time::Date, String), Vec<Level>> = HashMap::new();
    for r in levels {
        let level = level_from(
            &r.side,
            r.bucket_price,
            r.position_count,
            r.total_usd,
            r.min_liq_price,
            r.max_liq_price,
        )?;
        by_key.entry((r.date, r.symbol)).or_default().push(level);
    }
    days.into_iter()
        .map(|d| {
            let mut levels = by_key
                .remove(&(d.date, d.symbol.clone()))
                .unwrap_or_default();
            sort_levels(&mut levels);
            let totals = LiquidityTotals {
                long: SideTotal {
                    position_count: d.long_count.max(0) as u64,
                    total_amount_usd: dec(d.long_usd),
                },
                short: SideTotal {
                    position_count: d.short_count.max(0) as u64,
                    total_amount_usd: dec(d.short_usd),
                },
            };
            Ok(LiquidityDay::new(
                d.date,
                network,
                &d.symbol,
                parse::<Coverage>("coverage", &d.coverage)?,
                dec(d.bucket_size),
                from_db_time(d.updated_at),
                totals,
                levels,
            ))
        })
        .collect()
}

/// Epoch milliseconds of `t`: how the history's times are stored.
pub(crate) fn epoch_ms(t: time::OffsetDateTime) -> i64 {
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}
