//! History: the market and wallet series and the position events that every
//! writer records with each data version, their retention, and their reads.
//!
//! A series point is stored in `history_points`, once per observation, kept
//! for [`Retention::points_days`] (whole UTC hours: an hour goes when all
//! of it is older). The last observation of each UTC hour is kept for
//! [`Retention::hourly_days`] in `history_hourly`: an hour's are copied
//! there when the hour leaves the points ([`roll_up_and_prune`]); until
//! then a read takes them from the points. The points are keyed by the
//! hour first, so that a publish writes them into the current hour's part
//! of the table, not at a random page of a table that grows all week, and
//! retention deletes whole hours at the table's start; the hourly tier,
//! written once an hour, is keyed by the key first, so that a read of one
//! key's hours is one range. A read goes through its window
//! [`HOURS_A_READ`] at a time, no further than its `limit` takes it; in
//! the points it seeks the key in each hour. Points are stored rendered
//! (the JSON object without its leading `time` member), so a read
//! concatenates them.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use bigdecimal::{BigDecimal, ToPrimitive};
use diesel::prelude::*;
use market_model::{
    Cohort, Decimal, Direction, EventKind, HistoryInterval, Holding, Market, MarketCohorts,
    MarketHistoryPoint, MarketPosition, MarketPositionText, PositionEvent, Wallet,
    WalletHistoryPoint,
};
use time::OffsetDateTime;

use crate::cached::Upsert;
use crate::connection::MultiBackend;
use crate::convert::epoch_ms;
use crate::event_stream::{self, SequencedEvent};
use crate::journal::Journal;
use crate::schema::{
    history_hourly, history_points, history_points_journal, position_events, position_events_all,
    position_events_journal,
};
use crate::steps::Steps;
use crate::{insert_chunked, DbConnection, Store, StoreError, ADDRESS_CHUNK, MAX_BINDS};

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;

/// How long history is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Every observation (per publish).
    pub points_days: u32,
    /// The last observation of each hour.
    pub hourly_days: u32,
    /// Position events.
    pub events_days: u32,
}

impl Default for Retention {
    /// 7 days of points, 365 days of hourly points, 90 days of events.
    fn default() -> Self {
        Retention {
            points_days: 7,
            hourly_days: 365,
            events_days: 90,
        }
    }
}

/// Which series a point belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Series {
    /// A market, keyed by symbol.
    Market,
    /// A wallet, keyed by address.
    Wallet,
}

impl Series {
    fn as_str(self) -> &'static str {
        match self {
            Series::Market => "market",
            Series::Wallet => "wallet",
        }
    }
}

/// A member of a point's JSON object, in the order its type serializes it.
enum Member {
    Leaf(&'static str),
    Object(&'static str, &'static [Member]),
}

use Member::{Leaf, Object};

const SPLIT: &[Member] = &[
    Leaf("longCount"),
    Leaf("shortCount"),
    Leaf("longValue"),
    Leaf("shortValue"),
    Leaf("longLiquidationValue"),
    Leaf("shortLiquidationValue"),
];

/// `MarketHistoryPoint` after `time`.
const MARKET_POINT: &[Member] = &[
    Leaf("observedAt"),
    Leaf("price"),
    Leaf("openInterest"),
    Leaf("funding"),
    Leaf("volume24h"),
    Leaf("longCount"),
    Leaf("shortCount"),
    Leaf("longShortRatio"),
    Leaf("longValue"),
    Leaf("shortValue"),
    Leaf("longLiquidationValue"),
    Leaf("shortLiquidationValue"),
    Object(
        "bySizeClass",
        &[
            Object("shrimp", SPLIT),
            Object("shark", SPLIT),
            Object("whale", SPLIT),
        ],
    ),
];

/// `WalletHistoryPoint` after `time`.
const WALLET_POINT: &[Member] = &[
    Leaf("observedAt"),
    Leaf("accountTotalValue"),
    Leaf("totalPositionValue"),
    Leaf("longValue"),
    Leaf("shortValue"),
    Leaf("uPnl"),
];

impl Series {
    fn members(self) -> &'static [Member] {
        match self {
            Series::Market => MARKET_POINT,
            Series::Wallet => WALLET_POINT,
        }
    }
}

/// The stored form of a point: its JSON values without member names (an
/// object becomes an array of its values), and without `time` (the bucket
/// start is added when served). Half the bytes of the object, per row of a
/// table that grows every minute.
fn body_of<T: serde::Serialize>(series: Series, point: &T) -> String {
    fn compact(value: &serde_json::Value, members: &[Member]) -> serde_json::Value {
        let object = value.as_object().expect("points serialize as objects");
        serde_json::Value::Array(
            members
                .iter()
                .map(|m| match m {
                    Leaf(name) => object[*name].clone(),
                    Object(name, inner) => compact(&object[*name], inner),
                })
                .collect(),
        )
    }
    let value = serde_json::to_value(point).expect("model types serialize");
    compact(&value, series.members()).to_string()
}

/// Writes the JSON object of a stored body with `time` first.
fn expand(series: Series, time: i64, body: &str, out: &mut Vec<u8>) -> Result<(), StoreError> {
    fn write(value: &serde_json::Value, members: &[Member], out: &mut Vec<u8>) -> Option<()> {
        let values = value.as_array()?;
        if values.len() != members.len() {
            return None;
        }
        for (i, (m, v)) in members.iter().zip(values).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let (Leaf(name) | Object(name, _)) = m;
            out.push(b'"');
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            match m {
                Leaf(_) => serde_json::to_writer(&mut *out, v).ok()?,
                Object(_, inner) => {
                    out.push(b'{');
                    write(v, inner, out)?;
                    out.push(b'}');
                }
            }
        }
        Some(())
    }
    let value: serde_json::Value = serde_json::from_str(body)
        .map_err(|e| StoreError::Corrupt(format!("history point: {e}")))?;
    out.extend_from_slice(b"{\"time\":");
    out.extend_from_slice(time.to_string().as_bytes());
    out.push(b',');
    write(&value, series.members(), out)
        .ok_or_else(|| StoreError::Corrupt("history point of another shape".into()))?;
    out.push(b'}');
    Ok(())
}

/// One stored point, ready to write.
#[derive(Insertable, Clone)]
#[diesel(table_name = history_points)]
struct PointRow {
    /// The UTC hour of `at` (its start, epoch ms).
    hour: i64,
    series: &'static str,
    key: String,
    at: i64,
    body: String,
}

/// A point as the journal takes it: [`PointRow`]'s fields (the journal
/// numbers its rows itself).
#[derive(Insertable)]
#[diesel(table_name = history_points_journal)]
struct JournalRow<'a> {
    hour: i64,
    series: &'a str,
    key: &'a str,
    at: i64,
    body: &'a str,
}

impl<'a> JournalRow<'a> {
    fn of(p: &'a PointRow) -> Self {
        JournalRow {
            hour: p.hour,
            series: p.series,
            key: &p.key,
            at: p.at,
            body: &p.body,
        }
    }
}

#[derive(Insertable)]
#[diesel(table_name = history_hourly)]
struct HourlyRow {
    series: &'static str,
    key: String,
    hour: i64,
    at: i64,
    body: String,
}

#[derive(Insertable)]
#[diesel(table_name = position_events)]
struct EventRow {
    seq: i64,
    at: i64,
    hour: i64,
    address: String,
    symbol: String,
    kind: &'static str,
    value_micro: i64,
    body: String,
}

/// An event as the journal takes it: [`EventRow`]'s fields.
#[derive(Insertable)]
#[diesel(table_name = position_events_journal)]
struct JournalEventRow<'a> {
    seq: i64,
    at: i64,
    hour: i64,
    address: &'a str,
    symbol: &'a str,
    kind: &'static str,
    value_micro: i64,
    body: &'a str,
}

impl<'a> JournalEventRow<'a> {
    fn of(r: &'a EventRow) -> Self {
        JournalEventRow {
            seq: r.seq,
            at: r.at,
            hour: r.hour,
            address: &r.address,
            symbol: &r.symbol,
            kind: r.kind,
            value_micro: r.value_micro,
            body: &r.body,
        }
    }
}

/// One observation, as a writer records it.
pub(crate) struct Observation<'a> {
    pub observed_at: OffsetDateTime,
    pub markets: &'a [Market],
    pub cohorts: &'a [MarketCohorts],
    /// The wallets written by this version (every served wallet for a full write).
    pub wallets: &'a [Wallet],
    /// Every open position of those wallets.
    pub positions: &'a [MarketPosition],
    /// Whether to derive position events against `closed`.
    pub events: bool,
    /// The previous observation of the written wallets that were served
    /// (every served wallet's for a full write). Events are derived against
    /// it; a written wallet without one was not served before.
    pub closed: Closed<'a>,
    /// Per written wallet, the dexes this observation reads and the previous
    /// one did not: a position there is a first observation, not an opening.
    pub newly_read: &'a [(String, Vec<String>)],
    /// Whether its points go to the journal (`track`'s publishes: a few
    /// thousand changed wallets, merged in bulk later) or, the journal
    /// merged first, straight into the table (whole writes).
    pub journal: bool,
    /// Whether to apply retention now ([`roll_up_and_prune`]): whole
    /// writes do; `track` does it between its publishes
    /// ([`Store::prune_history`]), so that the copy of an hour into the
    /// hourly tier does not hold up a publish.
    pub prune: bool,
}

/// The previous observation events are derived against (see
/// [`Observation::closed`]).
#[derive(Clone, Copy)]
pub(crate) enum Closed<'a> {
    /// The rows this version closed, as stored: address and positions
    /// column (a whole write, and a publish whose writer did not say).
    Rows(&'a [(String, String)]),
    /// What the base version served of them, as the writer holds it
    /// (`PublishWrite::previous`): compared as they are, where encoding
    /// them into columns to parse them back took a fifth of a publish's
    /// store part.
    Served {
        /// The written wallets the base version served.
        wallets: &'a [String],
        /// Their positions.
        positions: &'a [MarketPosition],
    },
}

impl Closed<'_> {
    fn addresses(&self) -> HashSet<&str> {
        match self {
            Closed::Rows(rows) => rows.iter().map(|(a, _)| a.as_str()).collect(),
            Closed::Served { wallets, .. } => wallets.iter().map(String::as_str).collect(),
        }
    }
}

/// Writes points into `$table` (`history_points` or its journal, whose
/// keys are the same); each replaces a point of the same key and instant
/// (an observation written again). Nothing stored is read or deleted
/// first, and the points of one observation share their hour: they go
/// into one part of the table.
macro_rules! upsert_points {
    ($conn:expr, $table:ident, $rows:expr) => {{
        use diesel::upsert::excluded;
        let rows = $rows;
        match &mut *$conn {
            // A row at a time on a statement prepared once (see `cached`),
            // under a type of this table's own.
            DbConnection::Sqlite(c) => {
                struct Key;
                for row in rows.iter() {
                    Upsert::<Key, _>::new(
                        diesel::insert_into($table::table).values(row),
                        " ON CONFLICT (hour, series, key, at) DO UPDATE SET body = excluded.body",
                    )
                    .execute(c)?;
                }
            }
            DbConnection::Postgresql(c) => {
                let per_chunk = MAX_BINDS / crate::columns_of::<$table::table>();
                for values in rows.chunks(per_chunk) {
                    diesel::insert_into($table::table)
                        .values(values)
                        .on_conflict(($table::hour, $table::series, $table::key, $table::at))
                        .do_update()
                        .set($table::body.eq(excluded($table::body)))
                        .execute(c)?;
                }
            }
        }
    }};
}

/// Records an observation: its market and wallet points and, when asked,
/// the position events against the previous observation, and applies
/// retention.
pub(crate) fn record(
    conn: &mut DbConnection,
    retention: Retention,
    steps: &mut Steps,
    obs: &Observation<'_>,
) -> Result<(), StoreError> {
    let at = epoch_ms(obs.observed_at);
    let cohorts: HashMap<&str, &[Cohort]> = obs
        .cohorts
        .iter()
        .map(|c| (c.symbol.as_str(), c.items.as_slice()))
        .collect();
    let mut points: Vec<PointRow> = obs
        .markets
        .iter()
        .map(|m| {
            let c = cohorts.get(m.symbol.as_str()).copied().unwrap_or_default();
            PointRow {
                hour: hour_of(at),
                series: Series::Market.as_str(),
                key: m.symbol.clone(),
                at,
                body: body_of(
                    Series::Market,
                    &MarketHistoryPoint::observe(0, obs.observed_at, m, c),
                ),
            }
        })
        .collect();
    let mut upnl: HashMap<&str, BigDecimal> = HashMap::new();
    for p in obs.positions {
        *upnl.entry(p.address.as_str()).or_default() += &p.u_pnl.0;
    }
    points.extend(obs.wallets.iter().map(|w| {
        let u = upnl.remove(w.address.as_str()).unwrap_or_default();
        PointRow {
            hour: hour_of(at),
            series: Series::Wallet.as_str(),
            key: w.address.clone(),
            at,
            body: body_of(
                Series::Wallet,
                &WalletHistoryPoint::observe(0, obs.observed_at, w, Decimal(u)),
            ),
        }
    }));
    steps.mark("points rendered");
    if obs.journal {
        let rows: Vec<JournalRow<'_>> = points.iter().map(JournalRow::of).collect();
        upsert_points!(conn, history_points_journal, &rows);
    } else {
        // A point written straight into the table must not be hidden by
        // an earlier one of the same instant in the journal.
        Journal::Points.merge(conn)?;
        upsert_points!(conn, history_points, &points);
    }
    steps.mark("points written");
    if obs.events {
        let events = derive_events(obs)?;
        steps.mark("events derived");
        if !obs.journal {
            // Straight into the table, after the journal's (older) events.
            Journal::Events.merge(conn)?;
        }
        let written = write_events(conn, &events, obs.journal)?;
        steps.mark("events written");
        // Enqueued at the wall time (`webhook deliveries` shows when).
        crate::webhooks::enqueue(conn, OffsetDateTime::now_utc(), &written)?;
        steps.mark("webhooks enqueued");
    }
    if obs.prune {
        roll_up_and_prune(conn, retention, at)?;
        steps.mark("history pruned");
    }
    Ok(())
}

/// The UTC hour of `at` (its start), epoch ms.
fn hour_of(at: i64) -> i64 {
    at - at.rem_euclid(HOUR_MS)
}

/// Writes events, into the journal (`track`'s publishes) or the table; an
/// event with the same keys (an observation written again at the same
/// instant) is replaced, wherever it is (so that an event is in one of the
/// two only). Returns each with its number, in stream order.
pub(crate) fn write_events<'e>(
    conn: &mut DbConnection,
    events: &'e [PositionEvent],
    journal: bool,
) -> Result<Vec<(i64, &'e PositionEvent)>, StoreError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    // Numbered by time, then address, then symbol: the stream's order.
    let mut ordered: Vec<&PositionEvent> = events.iter().collect();
    ordered.sort_by(|a, b| {
        (a.observed_at, &a.address, &a.symbol).cmp(&(b.observed_at, &b.address, &b.symbol))
    });
    let first = event_stream::take_numbers(conn, events.len())?;
    let rows: Vec<EventRow> = ordered
        .iter()
        .copied()
        .zip(first..)
        .map(|(e, seq)| EventRow {
            seq,
            at: epoch_ms(e.observed_at),
            hour: hour_of(epoch_ms(e.observed_at)),
            address: e.address.clone(),
            symbol: e.symbol.clone(),
            kind: e.kind.as_str(),
            value_micro: value_micro(&e.previous_value.0.clone().max(e.value.0.clone())),
            body: serde_json::to_string(e).expect("model types serialize"),
        })
        .collect();
    let mut by_at: HashMap<i64, Vec<&str>> = HashMap::new();
    for r in &rows {
        by_at.entry(r.at).or_default().push(r.address.as_str());
    }
    for (at, mut addresses) in by_at {
        addresses.sort_unstable();
        addresses.dedup();
        for chunk in addresses.chunks(ADDRESS_CHUNK) {
            diesel::delete(
                position_events::table
                    .filter(position_events::at.eq(at))
                    .filter(position_events::address.eq_any(chunk)),
            )
            .execute(conn)?;
            diesel::delete(
                position_events_journal::table
                    .filter(position_events_journal::at.eq(at))
                    .filter(position_events_journal::address.eq_any(chunk)),
            )
            .execute(conn)?;
        }
    }
    let mut quiet = |_: &str, _: usize, _: usize| {};
    if journal {
        let rows: Vec<JournalEventRow<'_>> = rows.iter().map(JournalEventRow::of).collect();
        insert_chunked!(
            conn,
            position_events_journal::table,
            &rows,
            "position events",
            &mut quiet
        );
    } else {
        insert_chunked!(
            conn,
            position_events::table,
            &rows,
            "position events",
            &mut quiet
        );
    }
    Ok(rows.iter().map(|r| r.seq).zip(ordered).collect())
}

/// `floor(value × 10^6)`, saturating: the indexed form of an event's value.
fn value_micro(value: &BigDecimal) -> i64 {
    (value * BigDecimal::from(1_000_000))
        .with_scale_round(0, bigdecimal::RoundingMode::Floor)
        .to_i64()
        .unwrap_or(i64::MAX)
}

/// The events between the previous observation of the written wallets
/// ([`Observation::closed`]) and their new positions. Wallets that were
/// not served before are `firstObservation`; wallets no longer served get
/// no event (they are not tracked, which says nothing of their positions).
pub(crate) fn derive_events(obs: &Observation<'_>) -> Result<Vec<PositionEvent>, StoreError> {
    let served = obs.closed.addresses();
    let newly_read: HashMap<&str, &[String]> = obs
        .newly_read
        .iter()
        .map(|(a, d)| (a.as_str(), d.as_slice()))
        .collect();
    let ctx = EventContext {
        observed_at: obs.observed_at,
        prices: obs
            .markets
            .iter()
            .map(|m| (m.symbol.as_str(), &m.price))
            .collect(),
        served: &served,
        newly_read: &newly_read,
    };
    let mut now = held_by_wallet(
        obs.wallets.iter().map(|w| w.address.as_str()),
        obs.positions,
    );
    // Each served wallet's previous positions: its stored column, or the
    // positions the writer holds.
    enum Previous<'a> {
        Columns(HashMap<&'a str, &'a str>),
        Held(HashMap<&'a str, Vec<&'a MarketPosition>>),
    }
    let mut previous = match obs.closed {
        Closed::Rows(rows) => Previous::Columns(
            rows.iter()
                .map(|(a, held)| (a.as_str(), held.as_str()))
                .collect(),
        ),
        Closed::Served { wallets, positions } => {
            let mut held = held_by_wallet(wallets.iter().map(String::as_str), &[]);
            for p in positions {
                held.get_mut(p.address.as_str())
                    .ok_or_else(|| {
                        StoreError::Corrupt(format!(
                            "previous position {} of wallet {}, which the base version does not serve",
                            p.symbol, p.address
                        ))
                    })?
                    .push(p);
            }
            Previous::Held(held)
        }
    };
    let mut events = Vec::new();
    for w in obs.wallets {
        let Some(mut next) = now.remove(w.address.as_str()) else {
            continue; // written twice: compared once
        };
        next.sort_by(|a, b| a.symbol.cmp(&b.symbol));
        match &mut previous {
            Previous::Columns(open) => {
                let column = open.get(w.address.as_str()).copied().unwrap_or("[]");
                crate::held::with_texts(&w.address, column, |before| {
                    wallet_events(&ctx, w, before, &next, &mut events);
                    Ok(())
                })?;
            }
            Previous::Held(held) => {
                let mut before = held.remove(w.address.as_str()).unwrap_or_default();
                crate::held::by_symbol(&mut before, |p| (&p.address, &p.symbol), "positions")?;
                wallet_events(&ctx, w, &before, &next, &mut events);
            }
        }
    }
    Ok(events)
}

/// `wallets` (each with no position yet) and, in each, its positions of
/// `positions` (those of other wallets are left out).
fn held_by_wallet<'a>(
    wallets: impl Iterator<Item = &'a str>,
    positions: &'a [MarketPosition],
) -> HashMap<&'a str, Vec<&'a MarketPosition>> {
    let mut held: HashMap<&str, Vec<&MarketPosition>> = wallets.map(|a| (a, Vec::new())).collect();
    for p in positions {
        if let Some(list) = held.get_mut(p.address.as_str()) {
            list.push(p);
        }
    }
    held
}

/// The events of wallet `w` between its positions `before` and `next`,
/// both in symbol order (merged), appended to `events`.
fn wallet_events<B: Before>(
    ctx: &EventContext<'_>,
    w: &Wallet,
    before: &[B],
    next: &[&MarketPosition],
    events: &mut Vec<PositionEvent>,
) {
    let (mut i, mut j) = (0, 0);
    while i < before.len() || j < next.len() {
        let order = match (before.get(i), next.get(j)) {
            (Some(b), Some(n)) => b.symbol().cmp(n.symbol.as_str()),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        let (symbol, prev, now) = match order {
            Ordering::Less => (before[i].symbol(), Some(&before[i]), None),
            Ordering::Greater => (next[j].symbol.as_str(), None, Some(next[j])),
            Ordering::Equal => (next[j].symbol.as_str(), Some(&before[i]), Some(next[j])),
        };
        i += usize::from(order != Ordering::Greater);
        j += usize::from(order != Ordering::Less);
        events.extend(position_event(ctx, w, symbol, prev, now));
    }
}

/// What an event needs of a wallet's previous position: its stored text
/// (decimals parsed only when an event needs them) or the position the
/// writer holds.
trait Before {
    fn symbol(&self) -> &str;
    fn direction(&self) -> Direction;
    /// Whether its size is `size` (when not, `size` may still be equal).
    fn same_size(&self, size: &Decimal) -> bool;
    fn size(&self) -> Decimal;
    fn position_value(&self) -> Decimal;
    fn mark_price(&self) -> Decimal;
    fn liq_price(&self) -> Option<Decimal>;
}

impl Before for MarketPositionText<'_> {
    fn symbol(&self) -> &str {
        self.symbol
    }
    fn direction(&self) -> Direction {
        self.direction
    }
    /// The same text is the same number; another text may be too.
    fn same_size(&self, size: &Decimal) -> bool {
        prints_as(size, self.size.as_str())
    }
    fn size(&self) -> Decimal {
        Decimal(self.size.to_decimal())
    }
    fn position_value(&self) -> Decimal {
        Decimal(self.position_value.to_decimal())
    }
    fn mark_price(&self) -> Decimal {
        Decimal(self.mark_price.to_decimal())
    }
    fn liq_price(&self) -> Option<Decimal> {
        self.liq_price.map(|d| Decimal(d.to_decimal()))
    }
}

impl Before for &MarketPosition {
    fn symbol(&self) -> &str {
        &self.symbol
    }
    fn direction(&self) -> Direction {
        self.direction
    }
    fn same_size(&self, size: &Decimal) -> bool {
        self.size.0 == size.0
    }
    fn size(&self) -> Decimal {
        self.size.clone()
    }
    fn position_value(&self) -> Decimal {
        self.position_value.clone()
    }
    fn mark_price(&self) -> Decimal {
        self.mark_price.clone()
    }
    fn liq_price(&self) -> Option<Decimal> {
        self.liq_price.clone()
    }
}

/// What every event of one observation shares.
struct EventContext<'a> {
    observed_at: OffsetDateTime,
    prices: HashMap<&'a str, &'a Decimal>,
    /// Wallets served before this observation.
    served: &'a HashSet<&'a str>,
    /// Per wallet, the dexes this observation reads for the first time.
    newly_read: &'a HashMap<&'a str, &'a [String]>,
}

/// The event between a wallet's position in `symbol` before and now, if
/// any. Most positions keep their size, which is compared first.
fn position_event<B: Before>(
    ctx: &EventContext<'_>,
    w: &Wallet,
    symbol: &str,
    prev: Option<&B>,
    next: Option<&MarketPosition>,
) -> Option<PositionEvent> {
    let kind = match (prev, next) {
        (None, None) => return None,
        (Some(b), Some(a)) if b.direction() == a.direction => {
            if b.same_size(&a.size) {
                return None;
            }
            market_model::history::classify(
                Some(&Holding {
                    direction: b.direction(),
                    size: b.size(),
                }),
                Some(&Holding {
                    direction: a.direction,
                    size: a.size.clone(),
                }),
                false,
            )?
        }
        (Some(b), None) => {
            let near =
                market_model::history::near_liquidation(&b.mark_price(), b.liq_price().as_ref());
            match near {
                true => EventKind::ClosedNearLiquidation,
                false => EventKind::Closed,
            }
        }
        (Some(_), Some(_)) => EventKind::Flipped,
        (None, Some(_)) => EventKind::Opened,
    };
    let price = match (ctx.prices.get(symbol), next, prev) {
        (Some(p), _, _) => (*p).clone(),
        (None, Some(n), _) => n.mark_price.clone(),
        (None, None, Some(r)) => r.mark_price(),
        (None, None, None) => Decimal::zero(),
    };
    let first_seen_there = || {
        let dex = market_model::symbol::dex_of(symbol).unwrap_or("");
        ctx.newly_read
            .get(w.address.as_str())
            .is_some_and(|d| d.iter().any(|n| n == dex))
    };
    Some(PositionEvent {
        observed_at: ctx.observed_at,
        address: w.address.clone(),
        label: w.label.clone(),
        tags: w.tags.clone(),
        symbol: symbol.to_owned(),
        kind,
        first_observation: !ctx.served.contains(w.address.as_str()) || first_seen_there(),
        previous_direction: prev.map(|r| r.direction()),
        direction: next.map(|p| p.direction),
        previous_size: prev.map_or_else(Decimal::zero, |r| r.size()),
        size: next.map_or_else(Decimal::zero, |p| p.size.clone()),
        previous_value: prev.map_or_else(Decimal::zero, |r| r.position_value()),
        value: next.map_or_else(Decimal::zero, |p| p.position_value.clone()),
        price,
        previous_liq_price: prev.and_then(|r| r.liq_price()),
    })
}

/// Whether `d` prints as `text` (compared as it prints, no allocation).
fn prints_as(d: &Decimal, text: &str) -> bool {
    use std::fmt::Write;
    struct Rest<'a>(&'a str);
    impl Write for Rest<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            match self.0.strip_prefix(s) {
                Some(rest) => {
                    self.0 = rest;
                    Ok(())
                }
                None => Err(std::fmt::Error),
            }
        }
    }
    let mut rest = Rest(text);
    write!(rest, "{d}").is_ok() && rest.0.is_empty()
}

/// Applies retention as of `at`: copies the last observation of each key
/// in every hour of points wholly older than their retention into the
/// hourly tier (a later one than it holds wins; an earlier one, as a
/// writer back in time wrote it, does not) and deletes that hour's points;
/// then deletes the hourly points, events and finished webhook deliveries
/// retention no longer keeps.
pub(crate) fn roll_up_and_prune(
    conn: &mut DbConnection,
    retention: Retention,
    at: i64,
) -> Result<(), StoreError> {
    let points_from = at - i64::from(retention.points_days) * DAY_MS;
    let hourly_from = at - i64::from(retention.hourly_days) * DAY_MS;
    let events_from = at - i64::from(retention.events_days) * DAY_MS;
    // Hours before this one are wholly older than `points_from`.
    let whole_before = hour_of(points_from);
    // The journal holds the latest publishes' points: an hour rolled up
    // takes them too (only when merges fell behind by days).
    let journaled_from: Option<i64> = history_points_journal::table
        .select(diesel::dsl::min(history_points_journal::hour))
        .first(conn)?;
    if journaled_from.is_some_and(|h| h < whole_before) {
        Journal::Points.merge(conn)?;
    }
    loop {
        let oldest: Option<i64> = history_points::table
            .select(diesel::dsl::min(history_points::hour))
            .first(conn)?;
        let Some(hour) = oldest.filter(|h| *h < whole_before) else {
            break;
        };
        // The hour is an integer of ours: written into the statement, which
        // then reads alike on both backends (their placeholders differ).
        diesel::sql_query(format!(
            "INSERT INTO history_hourly (series, key, hour, at, body) \
             SELECT p.series, p.key, p.hour, p.at, p.body FROM history_points p \
             WHERE p.hour = {hour} AND p.at = (SELECT max(q.at) FROM history_points q \
             WHERE q.hour = p.hour AND q.series = p.series AND q.key = p.key) \
             ON CONFLICT (hour, series, key) DO UPDATE SET at = excluded.at, body = excluded.body \
             WHERE history_hourly.at <= excluded.at"
        ))
        .execute(conn)?;
        diesel::delete(history_points::table.filter(history_points::hour.eq(hour)))
            .execute(conn)?;
    }
    diesel::delete(history_hourly::table.filter(history_hourly::hour.lt(hourly_from)))
        .execute(conn)?;
    // As for the points: the journal's events go first into the table
    // when it holds some retention deletes.
    let journaled_from: Option<i64> = position_events_journal::table
        .select(diesel::dsl::min(position_events_journal::at))
        .first(conn)?;
    if journaled_from.is_some_and(|at| at < events_from) {
        Journal::Events.merge(conn)?;
    }
    // `seq + 0`, not `seq`: given `max(seq)`, SQLite walks the `seq` index
    // down from the newest event until it meets one old enough, reading
    // every event retention keeps at each publish; the expression leaves it
    // the `at` range of the primary key.
    let pruned: Option<i64> = position_events::table
        .filter(position_events::at.lt(events_from))
        .select(diesel::dsl::max(position_events::seq + 0_i64))
        .first(conn)?;
    if let Some(seq) = pruned {
        event_stream::forget_through(conn, seq)?;
        diesel::delete(position_events::table.filter(position_events::at.lt(events_from)))
            .execute(conn)?;
    }
    // Finished webhook deliveries are kept as long as events.
    crate::webhooks::prune(conn, events_from)
}

/// Generated history to store as it is (`seed-demo`): points go to the
/// hourly tier, and to the points tier when they are within its retention.
#[derive(Clone, Copy, Debug, Default)]
pub struct HistoryWrite<'a> {
    /// Market points by symbol, any order.
    pub markets: &'a [(String, MarketHistoryPoint)],
    /// Wallet points by address, any order.
    pub wallets: &'a [(String, WalletHistoryPoint)],
    /// Position events.
    pub events: &'a [PositionEvent],
}

/// Replaces all history with `history` (inside the caller's transaction).
pub(crate) fn replace_history(
    conn: &mut DbConnection,
    retention: Retention,
    now: OffsetDateTime,
    history: &HistoryWrite<'_>,
) -> Result<(), StoreError> {
    diesel::delete(history_points::table).execute(conn)?;
    Journal::Points.clear(conn)?;
    diesel::delete(history_hourly::table).execute(conn)?;
    // Every event so far is gone: a stream resuming before now missed them.
    let last = event_stream::last_number(conn)?;
    event_stream::forget_through(conn, last)?;
    diesel::delete(position_events::table).execute(conn)?;
    Journal::Events.clear(conn)?;
    let points_from = epoch_ms(now) - i64::from(retention.points_days) * DAY_MS;
    let rows = history
        .markets
        .iter()
        .map(|(k, p)| (Series::Market, k, p.observed_at, body_of(Series::Market, p)))
        .chain(
            history
                .wallets
                .iter()
                .map(|(k, p)| (Series::Wallet, k, p.observed_at, body_of(Series::Wallet, p))),
        )
        .map(|(series, key, observed_at, body)| PointRow {
            hour: hour_of(epoch_ms(observed_at)),
            series: series.as_str(),
            key: key.clone(),
            at: epoch_ms(observed_at),
            body,
        });
    let mut points = Vec::new();
    let mut hourly = Vec::new();
    for row in rows {
        hourly.push(HourlyRow {
            series: row.series,
            key: row.key.clone(),
            hour: row.hour,
            at: row.at,
            body: row.body.clone(),
        });
        if row.at >= points_from {
            points.push(row);
        }
    }
    // Generated hours hold one point each; keep the last if not.
    // In key order: inserted in order, each lands where the one before did.
    points.sort_by(|a, b| (a.hour, a.series, &a.key, a.at).cmp(&(b.hour, b.series, &b.key, b.at)));
    hourly.sort_by(|a, b| (a.hour, a.series, &a.key, a.at).cmp(&(b.hour, b.series, &b.key, b.at)));
    hourly.dedup_by(|later, earlier| {
        let same =
            (later.series, &later.key, later.hour) == (earlier.series, &earlier.key, earlier.hour);
        if same {
            std::mem::swap(later, earlier);
        }
        same
    });
    let mut quiet = |_: &str, _: usize, _: usize| {};
    insert_chunked!(
        conn,
        history_points::table,
        &points,
        "history points",
        &mut quiet
    );
    insert_chunked!(
        conn,
        history_hourly::table,
        &hourly,
        "hourly history",
        &mut quiet
    );
    write_events(conn, history.events, false)?;
    Ok(())
}

/// One bucket of a history read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// Bucket start, epoch ms.
    pub time: i64,
    /// The point's JSON object, `time` first.
    pub json: Vec<u8>,
}

/// A position event read back: its keys and rendered JSON.
#[derive(Clone, Debug, PartialEq, Eq, Queryable)]
pub struct StoredEvent {
    /// `observedAt`, epoch ms.
    pub at: i64,
    /// Wallet address.
    pub address: String,
    /// Asset symbol.
    pub symbol: String,
    /// The rendered `PositionEvent`.
    pub json: String,
}

/// A boxed query of `position_events_all` (the events and their journal) selecting `ST`.
pub(crate) type EventQuery<ST> = position_events_all::BoxedQuery<'static, MultiBackend, ST>;

/// `q` restricted by `filter` in SQL. The `minValue` floor is in whole
/// micro-dollars, so it may admit events just under the minimum: pass each
/// row through [`exact_match`].
pub(crate) fn with_filter<ST>(mut q: EventQuery<ST>, filter: &EventFilter) -> EventQuery<ST> {
    if let Some(s) = &filter.symbol {
        q = q.filter(position_events_all::symbol.eq(s.clone()));
    }
    if let Some(a) = &filter.address {
        q = q.filter(position_events_all::address.eq(a.clone()));
    }
    if let Some(k) = filter.kind {
        q = q.filter(position_events_all::kind.eq(k.as_str()));
    }
    if let Some(m) = &filter.min_value {
        q = q.filter(position_events_all::value_micro.ge(value_micro(&m.0)));
    }
    if let Some(from) = filter.from {
        q = q.filter(position_events_all::at.ge(from));
    }
    if let Some(to) = filter.to {
        q = q.filter(position_events_all::at.le(to));
    }
    q
}

/// Whether the stored event `json` passes `filter`'s exact `minValue`
/// (the rest of the filter is exact in SQL).
pub(crate) fn exact_match(filter: &EventFilter, json: &str) -> Result<bool, StoreError> {
    let Some(min) = &filter.min_value else {
        return Ok(true);
    };
    let ev: PositionEvent = serde_json::from_str(json)
        .map_err(|err| StoreError::Corrupt(format!("position event: {err}")))?;
    Ok(ev.reaches(min))
}

/// Filters of the position-event feed.
#[derive(Clone, Debug, Default)]
pub struct EventFilter {
    /// Only this symbol.
    pub symbol: Option<String>,
    /// Only this address.
    pub address: Option<String>,
    /// Only this kind.
    pub kind: Option<EventKind>,
    /// Only events whose larger value is at least this, USD.
    pub min_value: Option<Decimal>,
    /// Earliest `observedAt`, epoch ms (inclusive).
    pub from: Option<i64>,
    /// Latest `observedAt`, epoch ms (inclusive).
    pub to: Option<i64>,
}

/// The hours one statement of a history read seeks: a week of them (three
/// in this crate's tests, so that their windows cross many reads).
const HOURS_A_READ: i64 = if cfg!(test) { 3 } else { 168 };

/// A tier of the history.
#[derive(Clone, Copy)]
enum Tier {
    /// `history_points`: every observation.
    Points,
    /// `history_points_journal`: every observation of the publishes since
    /// the last merge, keyed as the points are (a later write than the
    /// points', so it wins an instant both hold).
    Journal,
    /// `history_hourly`: the last observation of each hour.
    Hourly,
}

/// The hours `$table` (the points or their journal) holds: the two ends of
/// its key, whose first column is the hour.
macro_rules! hour_ends {
    ($conn:expr, $table:ident) => {
        (
            $table::table
                .select(diesel::dsl::min($table::hour))
                .first($conn)?,
            $table::table
                .select(diesel::dsl::max($table::hour))
                .first($conn)?,
        )
    };
}

/// The observations of `$key` in `$series` within `$hours` and `[$from,
/// $to]` of `$table` (the points or their journal), in hour then time
/// order.
macro_rules! points_in {
    ($conn:expr, $table:ident, $series:expr, $key:expr, $hours:expr, ($from:expr, $to:expr)) => {
        $table::table
            .filter($table::hour.eq_any($hours))
            .filter($table::series.eq($series.as_str()))
            .filter($table::key.eq($key))
            .filter($table::at.ge($from))
            .filter($table::at.le($to))
            .order(($table::hour, $table::at))
            .select(($table::at, $table::body))
            .load($conn)?
    };
}

impl Tier {
    /// The first and last hour it holds, if any (the two ends of an index
    /// on the hour). Two statements: SQLite seeks an end of an index only
    /// for a lone `min` or `max`, and scanned the whole table for the two
    /// together (about 90 ms a tier at a year of history).
    fn hours(self, conn: &mut DbConnection) -> Result<Option<(i64, i64)>, StoreError> {
        use diesel::dsl::{max, min};
        let (first, last): (Option<i64>, Option<i64>) = match self {
            Tier::Points => hour_ends!(conn, history_points),
            Tier::Journal => hour_ends!(conn, history_points_journal),
            Tier::Hourly => (
                history_hourly::table
                    .select(min(history_hourly::hour))
                    .first(conn)?,
                history_hourly::table
                    .select(max(history_hourly::hour))
                    .first(conn)?,
            ),
        };
        Ok(first.zip(last))
    }

    /// The observations of one key in `hours`, within `[from, to]`, oldest
    /// first. The hourly tier, keyed by the key first, reads the range of
    /// the hours; the points, keyed by the hour first, seek the key in each
    /// hour. With `last_of_each_hour` (an interval of whole hours, which
    /// shows no other) the points give only the last one of each hour: one
    /// seek at the end of the key's part of each hour finds it, and the
    /// other bodies (sixty an hour of per-minute points) are not read.
    fn read(
        self,
        conn: &mut DbConnection,
        series: Series,
        key: &str,
        hours: &[i64],
        (from, to): (i64, i64),
        last_of_each_hour: bool,
    ) -> Result<Vec<(i64, String)>, StoreError> {
        let (Some(first), Some(last)) = (hours.first(), hours.last()) else {
            return Ok(Vec::new());
        };
        Ok(match self {
            Tier::Points | Tier::Journal if last_of_each_hour => {
                let table = match self {
                    Tier::Journal => "history_points_journal",
                    _ => "history_points",
                };
                // Only the key is the caller's: it is bound (as `$1`, which
                // SQLite reads as a named parameter, the same at both
                // places); the hours, the window and the series are ours.
                use std::fmt::Write;
                let mut sql = String::from("WITH h (hour) AS (VALUES ");
                for (i, hour) in hours.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "," };
                    write!(sql, "{sep}({hour})").expect("a String takes it");
                }
                let series = series.as_str();
                write!(
                    sql,
                    ") SELECT p.at, p.body FROM h JOIN {table} p \
                     ON p.hour = h.hour AND p.series = '{series}' AND p.key = $1 \
                     AND p.at = (SELECT max(q.at) FROM {table} q \
                     WHERE q.hour = h.hour AND q.series = '{series}' AND q.key = $1 \
                     AND q.at >= {from} AND q.at <= {to}) ORDER BY p.at"
                )
                .expect("a String takes it");
                diesel::sql_query(sql)
                    .bind::<diesel::sql_types::Text, _>(key)
                    .load::<StoredPoint>(conn)?
                    .into_iter()
                    .map(|o| (o.at, o.body))
                    .collect()
            }
            Tier::Points => points_in!(conn, history_points, series, key, hours, (from, to)),
            Tier::Journal => {
                points_in!(conn, history_points_journal, series, key, hours, (from, to))
            }
            Tier::Hourly => history_hourly::table
                .filter(history_hourly::series.eq(series.as_str()))
                .filter(history_hourly::key.eq(key))
                .filter(history_hourly::hour.ge(first))
                .filter(history_hourly::hour.le(last))
                .filter(history_hourly::at.ge(from))
                .filter(history_hourly::at.le(to))
                .order(history_hourly::hour)
                .select((history_hourly::at, history_hourly::body))
                .load(conn)?,
        })
    }
}

/// A stored point as [`Tier::read`]'s own statement gives it.
#[derive(QueryableByName)]
struct StoredPoint {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    at: i64,
    #[diesel(sql_type = diesel::sql_types::Text)]
    body: String,
}

/// The buckets of a history read as its observations come, oldest first:
/// the last observation of each, at most `limit` buckets.
struct Buckets {
    interval: HistoryInterval,
    limit: usize,
    /// Bucket start and body.
    kept: Vec<(i64, String)>,
    /// An observation of a bucket past the limit came: the read is done.
    done: bool,
}

impl Buckets {
    fn new(interval: HistoryInterval, limit: usize) -> Buckets {
        Buckets {
            interval,
            limit,
            kept: Vec::new(),
            done: false,
        }
    }

    /// Takes the next observation; false once it is past the last bucket.
    fn take(&mut self, at: i64, body: String) -> bool {
        let time = self.interval.bucket_of(at);
        if let Some(kept) = self.kept.last_mut().filter(|kept| kept.0 == time) {
            kept.1 = body;
        } else if self.kept.len() == self.limit {
            self.done = true;
        } else {
            self.kept.push((time, body));
        }
        !self.done
    }

    fn full(&self) -> bool {
        self.done
    }
}

impl Store {
    /// Sets how long history is kept by this store's writes.
    pub fn with_retention(mut self, retention: Retention) -> Store {
        self.retention = retention;
        self
    }

    /// The retention this store's writes apply.
    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// Applies retention as of `now`, in one transaction: the hours of
    /// points wholly older than theirs are copied into the hourly tier and
    /// deleted, and the hourly points, events and finished webhook
    /// deliveries past theirs are deleted. Whole versions do this as they
    /// are written; `track` calls it between its publishes, which do not.
    pub fn prune_history(&self, now: OffsetDateTime) -> Result<(), StoreError> {
        self.write_transaction(|conn| {
            // Takes the write lock first (see `latest_version`).
            crate::latest_version(conn)?;
            roll_up_and_prune(conn, self.retention, epoch_ms(now))
        })
    }

    /// The buckets of one series within `[from, to]` (epoch ms, inclusive),
    /// oldest first, at most `limit`: each bucket shows the last observation
    /// in it, of those both tiers hold (the points, and the hourly tier's
    /// last observation of each hour the points no longer hold; one held by
    /// both, at the same instant, is read once). The window is read a
    /// week of hours at a time, no further than `limit` takes it, in one
    /// snapshot of the database: an hour copied from one tier to the other
    /// meanwhile is read once.
    pub fn history(
        &self,
        series: Series,
        key: &str,
        interval: HistoryInterval,
        from: i64,
        to: i64,
        limit: usize,
    ) -> Result<Vec<Bucket>, StoreError> {
        let mut conn = self.conn()?;
        let last = crate::read::in_one_snapshot(&mut conn, |conn| {
            // In this order: of two observations at one instant, the later
            // tier's is kept (below).
            let tiers = [
                (Tier::Hourly, Tier::Hourly.hours(conn)?),
                (Tier::Points, Tier::Points.hours(conn)?),
                (Tier::Journal, Tier::Journal.hours(conn)?),
            ];
            // The hours either tier holds, within the window.
            let held = tiers.iter().filter_map(|(_, h)| *h);
            let (Some(lo), Some(hi)) = (held.clone().map(|h| h.0).min(), held.map(|h| h.1).max())
            else {
                return Ok(Vec::new());
            };
            let (mut hour, until) = (hour_of(from).max(lo), hour_of(to).min(hi));
            let mut buckets = Buckets::new(interval, limit);
            while hour <= until && !buckets.full() {
                let hours: Vec<i64> = (0..HOURS_A_READ)
                    .map(|i| hour + i * HOUR_MS)
                    .take_while(|h| *h <= until)
                    .collect();
                let (first, last) = (hours[0], hours[hours.len() - 1]);
                hour = last + HOUR_MS;
                let mut rows: Vec<(i64, String)> = Vec::new();
                for (tier, held) in &tiers {
                    // A tier is not asked for hours it does not hold.
                    if held.is_some_and(|(lo, hi)| lo <= last && first <= hi) {
                        rows.extend(tier.read(
                            conn,
                            series,
                            key,
                            &hours,
                            (from, to),
                            interval.ms() % HOUR_MS == 0,
                        )?);
                    }
                }
                // In time order (stable: of two at one instant, the later
                // tier's comes last and is the one kept).
                rows.sort_by_key(|(at, _)| *at);
                rows.dedup_by(|later, earlier| {
                    let same = later.0 == earlier.0;
                    if same {
                        std::mem::swap(later, earlier);
                    }
                    same
                });
                for (at, body) in rows {
                    if !buckets.take(at, body) {
                        break;
                    }
                }
            }
            Ok(buckets.kept)
        })?;
        last.into_iter()
            .map(|(time, body)| {
                let mut json = Vec::with_capacity(body.len() * 2);
                expand(series, time, &body, &mut json)?;
                Ok(Bucket { time, json })
            })
            .collect()
    }

    /// Events numbered after `after` that pass `filter`, in number order,
    /// at most `limit` (fewer only when no more are stored).
    pub fn events_after(
        &self,
        filter: &EventFilter,
        after: i64,
        limit: usize,
    ) -> Result<Vec<SequencedEvent>, StoreError> {
        let mut conn = self.conn()?;
        let conn: &mut DbConnection = &mut conn;
        let mut out = Vec::with_capacity(limit.min(1024));
        let mut after = after;
        // As for the list: the SQL filter on `value_micro` may admit events
        // a micro-dollar under `minValue`, which the exact check drops.
        loop {
            let want = limit - out.len();
            let q = position_events_all::table
                .select((position_events_all::seq, position_events_all::body))
                .filter(position_events_all::seq.gt(after))
                .into_boxed();
            let batch: Vec<SequencedEvent> = with_filter(q, filter)
                .order(position_events_all::seq)
                .limit(want as i64)
                .load(conn)?;
            let full = batch.len() == want;
            if let Some(last) = batch.last() {
                after = last.seq;
            }
            for e in batch {
                if exact_match(filter, &e.json)? {
                    out.push(e);
                }
            }
            if !full || out.len() == limit {
                return Ok(out);
            }
        }
    }

    /// A page of position events, newest first (ties by address, then
    /// symbol), strictly after `after` in that order, at most `limit`.
    pub fn events(
        &self,
        filter: &EventFilter,
        after: Option<(i64, &str, &str)>,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let mut conn = self.conn()?;
        crate::read::in_one_snapshot(&mut conn, |conn| {
            let mut out: Vec<StoredEvent> = Vec::with_capacity(limit);
            let mut cursor: Option<(i64, String, String)> =
                after.map(|(a, b, c)| (a, b.to_owned(), c.to_owned()));
            // One wallet's events are found hour by hour, newest first (the
            // index by address is keyed by the hour first); the other
            // filters read the feed in one pass.
            let mut hours = match filter.address {
                Some(_) => Some(EventHours::new(conn, filter, after.map(|a| a.0))?),
                None => None,
            };
            loop {
                let chunk = match hours.as_mut().map(Iterator::next) {
                    Some(Some(chunk)) => Some(chunk),
                    Some(None) => return Ok(out),
                    None => None,
                };
                // The SQL filter on `value_micro` admits every match and,
                // at most, events within a micro-dollar below the minimum:
                // those are dropped here, and the next batch is read if
                // that left the page short.
                loop {
                    let q = position_events_all::table
                        .select((
                            position_events_all::at,
                            position_events_all::address,
                            position_events_all::symbol,
                            position_events_all::body,
                        ))
                        .into_boxed();
                    let mut q = with_filter(q, filter);
                    if let Some(hours) = &chunk {
                        q = q.filter(position_events_all::hour.eq_any(hours.clone()));
                    }
                    if let Some((at, address, symbol)) = cursor.clone() {
                        q = q.filter(
                            position_events_all::at
                                .lt(at)
                                .or(position_events_all::at.eq(at).and(
                                    position_events_all::address.gt(address.clone()).or(
                                        position_events_all::address
                                            .eq(address)
                                            .and(position_events_all::symbol.gt(symbol)),
                                    ),
                                )),
                        );
                    }
                    let want = limit - out.len();
                    let batch: Vec<StoredEvent> = q
                        .order((
                            position_events_all::at.desc(),
                            position_events_all::address,
                            position_events_all::symbol,
                        ))
                        .limit(want as i64)
                        .load(conn)?;
                    let full = batch.len() == want;
                    if let Some(e) = batch.last() {
                        cursor = Some((e.at, e.address.clone(), e.symbol.clone()));
                    }
                    for e in batch {
                        if exact_match(filter, &e.json)? {
                            out.push(e);
                        }
                    }
                    if out.len() == limit {
                        return Ok(out);
                    }
                    if !full {
                        break;
                    }
                }
                if chunk.is_none() {
                    return Ok(out);
                }
            }
        })
    }
}

/// The hours a read of one wallet's events seeks, newest first,
/// [`HOURS_A_READ`] at a time: from the newest event the read may return
/// (before its cursor, at or before `to`) down to the oldest (at or after
/// `from`), of those stored.
struct EventHours {
    next: i64,
    last: i64,
}

impl EventHours {
    fn new(
        conn: &mut DbConnection,
        filter: &EventFilter,
        before: Option<i64>,
    ) -> Result<EventHours, StoreError> {
        use diesel::dsl::{max, min};
        // Two statements, each a seek of an end of the key (see `Tier::hours`).
        // Of the table's and the journal's: four seeks (an aggregate of the
        // view would read both sides whole).
        let oldest: [Option<i64>; 2] = [
            position_events::table
                .select(min(position_events::at))
                .first(conn)?,
            position_events_journal::table
                .select(min(position_events_journal::at))
                .first(conn)?,
        ];
        let newest: [Option<i64>; 2] = [
            position_events::table
                .select(max(position_events::at))
                .first(conn)?,
            position_events_journal::table
                .select(max(position_events_journal::at))
                .first(conn)?,
        ];
        let oldest = oldest.into_iter().flatten().min();
        let newest = newest.into_iter().flatten().max();
        let top = [newest, filter.to, before].into_iter().flatten().min();
        let bottom = [oldest, filter.from].into_iter().flatten().max();
        Ok(match (top, bottom) {
            (Some(top), Some(bottom)) => EventHours {
                next: hour_of(top),
                last: hour_of(bottom),
            },
            // Nothing stored: no hour to read.
            _ => EventHours { next: 0, last: 1 },
        })
    }
}

impl Iterator for EventHours {
    type Item = Vec<i64>;

    fn next(&mut self) -> Option<Vec<i64>> {
        if self.next < self.last {
            return None;
        }
        let hours: Vec<i64> = (0..HOURS_A_READ)
            .map(|i| self.next - i * HOUR_MS)
            .take_while(|h| *h >= self.last)
            .collect();
        self.next = hours.last().expect("at least one hour") - HOUR_MS;
        Some(hours)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use market_model::{Cohort, Direction, Market, SizeClass, Wallet, WalletDirection};
    use time::macros::datetime;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn a_decimal_prints_as_its_plain_text_only() {
        for (d, text, same) in [
            ("1.50", "1.50", true),
            ("1.50", "1.5", false),
            ("1.5", "1.50", false),
            ("-0.01", "-0.01", true),
            ("-0.01", "0.01", false),
            ("100", "1E+2", false),
            (
                "123456789012345678901234567890.5",
                "123456789012345678901234567890.5",
                true,
            ),
            ("12", "123", false),
            ("123", "12", false),
        ] {
            assert_eq!(
                prints_as(&Decimal(d.parse().unwrap()), text),
                same,
                "{d} {text}"
            );
        }
    }

    #[test]
    fn stored_points_expand_to_the_model_json() {
        let market = Market {
            symbol: "BTC".into(),
            price: d("92391.338"),
            change24h_pct: d("-2.5"),
            volume24h: d("1234.5"),
            open_interest: d("0.0000001"),
            funding: d("-0.00009116"),
            long_count: 2,
            short_count: 1,
            long_short_ratio: d("2.0000"),
            total_liquidation_value: d("3"),
            long_liquidation_value: d("2"),
            short_liquidation_value: d("1"),
        };
        let cohort = |size_class, side, count| Cohort {
            size_class,
            side,
            count,
            position_value: d("10.5"),
            liquidation_value: d("1"),
            average_leverage: Some(d("3.25")),
            average_entry_price: None,
            u_pnl: d("-1"),
        };
        let at = datetime!(2026-11-22 01:02:03 UTC);
        let point = MarketHistoryPoint::observe(
            7,
            at,
            &market,
            &[
                cohort(SizeClass::Whale, Direction::Long, 2),
                cohort(SizeClass::Shrimp, Direction::Short, 1),
            ],
        );
        let mut out = Vec::new();
        expand(
            Series::Market,
            7,
            &body_of(Series::Market, &point),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, serde_json::to_vec(&point).unwrap());

        let wallet: Wallet = serde_json::from_value(serde_json::json!({
            "address": "0xaa", "label": null, "tags": [], "kols": [], "kolProfile": null,
            "sizeClass": SizeClass::Shark, "direction": WalletDirection::Long,
            "accountTotalValue": "100000.5", "totalPositionValue": "2", "longValue": "2",
            "shortValue": "0", "leverage": "0.01", "positions": 1,
            "observedAt": "2026-11-22T01:02:03Z", "netPnl": null, "roi": null,
            "winRate": null, "strategy": null, "strategyConfidence": null
        }))
        .unwrap();
        let point = WalletHistoryPoint::observe(9, at, &wallet, d("-3.5"));
        let mut out = Vec::new();
        expand(
            Series::Wallet,
            9,
            &body_of(Series::Wallet, &point),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, serde_json::to_vec(&point).unwrap());
        // The stored form is the shorter one.
        assert!(body_of(Series::Wallet, &point).len() * 2 < out.len());
    }
}
