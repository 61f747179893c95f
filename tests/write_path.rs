//! The write path against a model.
//!
//! Random sequences of steps drive `track`'s book and publishes, and
//! `scan`'s whole versions, on a real store: wallet reads (positions on one
//! or both dexes, empty, failing, twice between publishes, without marks),
//! publishes, a wallet whose rows the database refuses, a connection lost
//! midway through a publish, whole scans, compactions of the wallet rows,
//! UTC day changes (with them the pruning of history past its retention),
//! a server that misses versions (pruned meanwhile) and crashes,
//! mid-publish too. After every step, what a
//! server serves must be the same whether it loads the version whole or
//! applies it as changes to the version it served before, and equal to what
//! a plain oracle computes: the last observation of each wallet, the
//! analytics folded over the reads that were published, the aggregates of
//! the engine over them, the position events between consecutive published
//! observations (and, numbered for the event stream, in publish order), and
//! the days frozen at each UTC midnight.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use market_data_server::state::reload::{changed_snapshot, whole_snapshot};
use market_engine::coverage::wallet_freshness;
use market_engine::{materialize, Analytics, Quote, ScanInput, WalletInput};
use market_ingest::client::{InfoSource, SourceError};
use market_ingest::mapping;
use market_ingest::scan::{follow_positions, observe_wallet, Fetcher, Marks, Observed};
use market_ingest::source::MetaAndAssetCtxs;
use market_ingest::{run_scan_at, ScanConfig, WalletEntry};
use market_model::history::{classify, near_liquidation, Holding};
use market_model::{
    Coverage, Decimal, LiquidityDay, MarketPosition, MarketSort, PositionEvent, SortOrder,
    WalletSort, NETWORK_ID,
};
use market_snapshot::{Snapshot, WalletOrder};
use market_store::{
    EventFilter, Fault, PoolOptions, Retention, Store, TrackedPosition, WalletScanState,
    WebhookFilter,
};
use market_tracker::{Applied, Book, PublishInput, Publisher};
use market_webhooks::Secret;
use proptest::prelude::*;
use proptest::test_runner::{
    Config, FileFailurePersistence, RngAlgorithm, TestCaseError, TestRng, TestRunner,
};
use serde_json::{json, Value};
use time::macros::datetime;
use time::{Date, Duration, OffsetDateTime};

use crate::support::{empty_database, pg_admin_url, Backend, TestDatabase};

/// The markets: (dex, coin, mark price in cents).
const COINS: [(&str, &str, i64); 3] = [
    ("", "BTC", 9_000_000),
    ("", "ETH", 300_000),
    ("xyz", "xyz:TSLA", 35_000),
];
/// The dexes, the main dex first.
const DEXES: [&str; 2] = ["", "xyz"];
/// Wallets the steps choose from.
const POOL: usize = 5;
/// The most reads one publish writes (`Publisher::max_reads`): fewer than
/// the pool, so that publishes leave reads for the next one.
const MAX_READS: usize = 3;
/// The first step's time: minutes before a UTC midnight.
const START: OffsetDateTime = datetime!(2026-11-20 23:50:00 UTC);

fn address(i: usize) -> String {
    format!("0x{:040x}", 0xa11ce0 + i)
}

/// One position: a coin of [`COINS`], a signed size in hundredths, its entry
/// price off the mark in basis points, and whether it can be liquidated.
#[derive(Clone, Debug)]
struct Pos {
    coin: usize,
    lots: i64,
    entry_bp: i64,
    liquidatable: bool,
}

/// What a wallet holds on the exchange: equity on the main dex (USD) and
/// its positions (a HIP-3 dex holds 1,000 USD of margin when it has one).
#[derive(Clone, Debug, Default)]
struct Holdings {
    equity: u64,
    positions: Vec<Pos>,
}

#[derive(Clone, Debug)]
enum Step {
    /// The tracker reads a wallet that holds this now (empty: it left), on
    /// every dex or on the main dex only (what it does for a wallet not
    /// known on a HIP-3 dex).
    Read(usize, Holdings, Dexes),
    /// The tracker reads a wallet before any mark is known (the race of a
    /// restart): a read that holds positions cannot value them.
    ReadWithoutMarks(usize, Holdings),
    /// The tracker's read of a wallet fails.
    ReadFails(usize),
    /// The tracker publishes.
    Publish,
    /// From now on the database refuses the rows of this wallet.
    Refuse(usize),
    /// From now on the database refuses every version, whatever wallets it
    /// writes: no wallet is to blame, none is held back.
    RefuseVersions,
    /// The database takes every row again.
    Heal,
    /// The tracker publishes and the connection is lost midway.
    PublishLosesConnection,
    /// `scan` reads these wallets and writes a whole version.
    Scan(Vec<usize>),
    /// The clock moves past the next UTC midnight.
    NextDay,
    /// The server following the store misses the next versions.
    ServerPauses(u8),
    /// The tracker dies (`kill -9`) and starts again on a reopened store.
    Crash,
    /// The tracker dies in the middle of a publish.
    CrashMidPublish,
    /// The tracker compacts the wallet rows, whatever the publishes
    /// appended since the last compaction.
    Compact,
}

/// Which dexes a read covers.
#[derive(Clone, Copy, Debug)]
enum Dexes {
    /// Every dex (a sweep, a scan).
    Every,
    /// The main dex only.
    Main,
}

/// How often the runs went down each path worth testing; a run that never
/// does cannot pass (see [`model`]).
#[derive(Default)]
struct Paths {
    applied_as_changes: std::sync::atomic::AtomicU32,
    caught_up_whole: std::sync::atomic::AtomicU32,
    incomplete_reads: std::sync::atomic::AtomicU32,
    held_back: std::sync::atomic::AtomicU32,
    no_wallet_at_fault: std::sync::atomic::AtomicU32,
    rebased: std::sync::atomic::AtomicU32,
    first_seen_on_a_dex: std::sync::atomic::AtomicU32,
    state_from_store: std::sync::atomic::AtomicU32,
    unchanged_reads: std::sync::atomic::AtomicU32,
    reads_left_for_later: std::sync::atomic::AtomicU32,
    events: std::sync::atomic::AtomicU32,
    frozen_days: std::sync::atomic::AtomicU32,
    compactions: std::sync::atomic::AtomicU32,
}

fn took(path: &std::sync::atomic::AtomicU32) {
    path.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// History kept by the store of the model: a day, so that day changes prune.
const RETENTION: Retention = Retention {
    points_days: 1,
    hourly_days: 1,
    events_days: 1,
};

fn fixed(n: i128, scale: u32) -> String {
    let p = 10i128.pow(scale);
    let sign = if n < 0 { "-" } else { "" };
    format!(
        "{sign}{}.{:0width$}",
        n.abs() / p,
        n.abs() % p,
        width = scale as usize
    )
}

/// The exchange the steps read: the info API over [`Holdings`], answering
/// at the model's clock.
struct World {
    now: Mutex<OffsetDateTime>,
    accounts: Mutex<HashMap<String, Holdings>>,
    failing: Mutex<bool>,
}

impl World {
    fn new() -> World {
        World {
            now: Mutex::new(START),
            accounts: Mutex::new(HashMap::new()),
            failing: Mutex::new(false),
        }
    }

    fn now(&self) -> OffsetDateTime {
        *self.now.lock().unwrap()
    }

    fn advance(&self, by: Duration) {
        *self.now.lock().unwrap() += by;
    }

    fn meta_and_ctxs(dex: &str) -> Value {
        let coins = COINS.iter().filter(|c| c.0 == dex);
        let universe: Vec<Value> = coins
            .clone()
            .map(|c| json!({"name": c.1, "szDecimals": 2, "maxLeverage": 40}))
            .collect();
        let ctxs: Vec<Value> = coins
            .map(|c| {
                let px = fixed(i128::from(c.2), 2);
                json!({"funding": "0.0000125", "openInterest": "1000.00",
                       "prevDayPx": fixed(i128::from(c.2 * 99 / 100), 2),
                       "dayNtlVlm": "123456.7", "premium": "0.0", "oraclePx": px, "markPx": px,
                       "midPx": px, "impactPxs": [px, px], "dayBaseVlm": "10.0"})
            })
            .collect();
        json!([{ "universe": universe }, ctxs])
    }

    fn quotes() -> Vec<Quote> {
        DEXES
            .iter()
            .flat_map(|dex| {
                let (meta, ctxs): MetaAndAssetCtxs =
                    serde_json::from_value(World::meta_and_ctxs(dex)).unwrap();
                meta.universe
                    .iter()
                    .zip(&ctxs)
                    .map(|(a, c)| mapping::quote(a, c))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn marks() -> Marks {
        Marks::new(&World::quotes(), Default::default())
    }

    fn state(&self, user: &str, dex: &str) -> Value {
        let held = self.accounts.lock().unwrap().get(user).cloned();
        let held = held.unwrap_or_default();
        let mine: Vec<&Pos> = held
            .positions
            .iter()
            .filter(|p| COINS[p.coin].0 == dex)
            .collect();
        let positions: Vec<Value> = mine
            .iter()
            .map(|p| {
                let (_, coin, mark) = COINS[p.coin];
                let (mark, lots) = (i128::from(mark), i128::from(p.lots));
                let entry = mark * (10_000 + i128::from(p.entry_bp)) / 10_000;
                let value = lots.abs() * mark; // lots × cents: 10^-4 USD
                let liq = p.liquidatable.then(|| {
                    fixed(if lots > 0 { entry / 2 } else { entry * 3 / 2 }, 2)
                });
                json!({"type": "oneWay", "position": {
                    "coin": coin, "szi": fixed(lots, 2), "entryPx": fixed(entry, 2),
                    "positionValue": fixed(value, 4), "unrealizedPnl": fixed(lots * (mark - entry), 4),
                    "returnOnEquity": "0.1", "liquidationPx": liq,
                    "marginUsed": fixed(value / 10, 4),
                    "leverage": {"type": "cross", "value": 10},
                    "cumFunding": {"allTime": "0.0", "sinceOpen": "1.5", "sinceChange": "0.0"},
                    "maxLeverage": 40}})
            })
            .collect();
        let equity = match (dex, mine.is_empty()) {
            ("", _) => held.equity,
            (_, true) => 0,
            (_, false) => 1_000,
        };
        json!({"marginSummary": {"accountValue": format!("{equity}.0"), "totalNtlPos": "0.0",
                                 "totalRawUsd": "0.0", "totalMarginUsed": "0.0"},
               "assetPositions": positions, "withdrawable": "0.0",
               "time": (self.now().unix_timestamp_nanos() / 1_000_000) as i64})
    }
}

impl InfoSource for World {
    fn request(&self, body: &Value) -> Result<Value, SourceError> {
        let dex = body["dex"].as_str().unwrap_or("");
        match body["type"].as_str() {
            Some("perpDexs") => Ok(json!([null, {"name": "xyz", "fullName": "XYZ"}])),
            Some("metaAndAssetCtxs") => Ok(World::meta_and_ctxs(dex)),
            Some("clearinghouseState") if *self.failing.lock().unwrap() => {
                Err(SourceError::Server(502))
            }
            Some("clearinghouseState") => Ok(self.state(body["user"].as_str().unwrap(), dex)),
            Some("candleSnapshot") => Ok(json!([])),
            other => Err(SourceError::Decode(format!("unexpected request {other:?}"))),
        }
    }
}

/// One wallet as the oracle knows it: its last observation, the analytics
/// computed at that read and the history behind them.
#[derive(Clone, Debug)]
struct Seen {
    /// The number of the read (reads are numbered in order).
    read: u64,
    obs: Observed,
    analytics: Option<Analytics>,
    history: (WalletScanState, Vec<TrackedPosition>),
    /// The dexes the wallet's published observation covered when the
    /// tracker read it (its positions on other dexes are first observations).
    published_covered: BTreeSet<String>,
}

impl Seen {
    fn empty(&self) -> bool {
        self.obs.positions.is_empty() && !positive(&self.obs.account_value)
    }
}

fn positive(d: &Decimal) -> bool {
    bigdecimal::Signed::is_positive(&d.0)
}

/// Whether `seen` reads the dex of `symbol` and the wallet's published
/// observation did not: its position there is a first observation.
fn newly_read(seen: &Seen, symbol: &str) -> bool {
    let dex = dex_of(symbol);
    !seen.published_covered.contains(dex)
        && seen.history.0.read_dexes.iter().flatten().any(|d| d == dex)
}

/// The dex of a coin (`""`: the main dex).
fn dex_of(coin: &str) -> &str {
    market_model::symbol::dex_of(coin).unwrap_or("")
}

/// The analytics history of a wallet: its scan state and followed positions.
type History = (WalletScanState, Vec<TrackedPosition>);

/// What the data should be: plain maps, no database.
#[derive(Default)]
struct Oracle {
    /// The wallets the last written version serves.
    served: BTreeMap<String, Seen>,
    /// The analytics history of every wallet, as the last writes stored it.
    stored: HashMap<String, History>,
    /// The analytics history of every wallet as the tracker remembers it.
    memory: HashMap<String, History>,
    /// Reads the tracker made since its last publish.
    pending: BTreeMap<String, Seen>,
    /// The latest observation of each wallet as the tracker remembers it.
    known: BTreeMap<String, Observed>,
    /// Wallets whose rows the database refuses.
    refused: BTreeSet<String>,
    /// Whether the database refuses every version.
    versions_refused: bool,
    /// Whether another writer (a scan) wrote the last version: the tracker
    /// goes on from it at its next publish.
    foreign: bool,
    /// The last version written: its number and time.
    written: Option<(i64, OffsetDateTime)>,
    /// The `current` days of the last version written.
    days: Vec<LiquidityDay>,
    /// Days frozen as `end_of_day`, by (date, symbol).
    frozen: BTreeMap<(Date, String), LiquidityDay>,
    /// Position events within retention.
    events: Vec<PositionEvent>,
    /// Every position event written, in stream order: what the webhook
    /// outbox holds (no deliverer runs here, and pending deliveries outlive
    /// retention).
    outbox: Vec<PositionEvent>,
    /// Events of served wallets marked first observations (their dex newly read).
    first_seen_on_a_dex: std::cell::Cell<u32>,
    /// Reads numbered as the tracker numbers them.
    reads: u64,
    /// Publishes that left reads for the next one (more than `MAX_READS`).
    reads_left_for_later: std::cell::Cell<u32>,
}

impl Oracle {
    /// A read of the tracker: its analytics continue the history the
    /// tracker remembers. A read that could not value a position is not
    /// taken at all. Returns whether it changed nothing.
    fn read(&mut self, address: &str, mut obs: Observed) -> bool {
        if !obs.is_complete() {
            return false;
        }
        // A read of some dexes keeps what the tracker knew of the others.
        if let Some(known) = self.known.get(address) {
            let unread = known
                .positions
                .iter()
                .filter(|p| !obs.dexes.iter().any(|d| d == dex_of(&p.symbol)));
            obs.positions.extend(unread.cloned().collect::<Vec<_>>());
        }
        // The tracker keeps the histories of the wallets it holds; another
        // is read from the store with the read.
        let loaded = !self.memory.contains_key(address);
        if loaded {
            if let Some(h) = self.stored.get(address) {
                self.memory.insert(address.to_owned(), h.clone());
            }
        }
        let covered_before = self.covered(address);
        // A read of a wallet that holds nothing and held nothing, whose
        // history records its first observation and the dexes read, changes
        // nothing: it is not taken (only the registry records it).
        let held_nothing = self
            .known
            .get(address)
            .is_none_or(|o| o.positions.is_empty() && !positive(&o.account_value));
        let quiet = held_nothing
            && obs.positions.is_empty()
            && !positive(&obs.account_value)
            && self.memory.get(address).is_some_and(|(state, follow)| {
                follow.is_empty()
                    && state.first_seen_at.is_some()
                    && state.missed_scans == 0
                    && obs.dexes.iter().all(|d| covered_before.contains(d))
            });
        if quiet {
            if loaded {
                self.memory.remove(address);
            }
            return true;
        }
        let before = self.memory.get(address);
        let (mut state, follow, analytics) =
            follow_positions(address, before.map(|h| &h.0), before.map(|h| &h.1), &obs);
        let covered: BTreeSet<String> = covered_before.iter().chain(&obs.dexes).cloned().collect();
        state.read_dexes = Some(covered.into_iter().collect());
        self.memory
            .insert(address.to_owned(), (state.clone(), follow.clone()));
        self.known.insert(address.to_owned(), obs.clone());
        let published_covered = match self.pending.get(address) {
            Some(seen) => seen.published_covered.clone(),
            None => covered_before,
        };
        self.reads += 1;
        self.pending.insert(
            address.to_owned(),
            Seen {
                read: self.reads,
                obs,
                analytics,
                history: (state, follow),
                published_covered,
            },
        );
        false
    }

    /// The dexes the tracker takes a wallet's observation to cover: as
    /// stored with its history, else the main dex and its positions' dexes.
    fn covered(&self, address: &str) -> BTreeSet<String> {
        match self
            .memory
            .get(address)
            .and_then(|h| h.0.read_dexes.as_ref())
        {
            Some(d) => d.iter().cloned().collect(),
            None => self.known.get(address).map_or_else(BTreeSet::new, |o| {
                std::iter::once(String::new())
                    .chain(o.positions.iter().map(|p| dex_of(&p.symbol).to_owned()))
                    .collect()
            }),
        }
    }

    /// What the tracker remembers after it restores from the store: the
    /// served observations and their stored histories (another wallet's
    /// history is read from the store when the wallet is read).
    fn restore(&mut self) {
        self.known = self
            .served
            .iter()
            .map(|(a, s)| (a.clone(), s.obs.clone()))
            .collect();
        self.memory = self
            .stored
            .iter()
            .filter(|(a, _)| self.known.contains_key(*a))
            .map(|(a, h)| (a.clone(), h.clone()))
            .collect();
    }

    /// A publish of the tracker, applied when `applied` (else the connection
    /// was lost midway): it first goes on from another writer's version
    /// (its reads older than what that version serves are dropped), then
    /// each read since the last publish replaces the wallet's observation,
    /// except the reads of refused wallets, which wait.
    /// Returns how many ready reads of served wallets it left for the next
    /// publish past `MAX_READS` (what `Published::left` says).
    fn publish(&mut self, at: OffsetDateTime, applied: bool) -> usize {
        if std::mem::take(&mut self.foreign) {
            let pending = std::mem::take(&mut self.pending);
            let tracker_memory = std::mem::take(&mut self.memory);
            self.restore();
            for (address, mut seen) in pending {
                let superseded = self
                    .served
                    .get(&address)
                    .is_some_and(|s| s.obs.observed_at >= seen.obs.observed_at);
                if !superseded {
                    seen.published_covered = self.covered(&address);
                    self.memory
                        .insert(address.clone(), tracker_memory[&address].clone());
                    self.known.insert(address.clone(), seen.obs.clone());
                    self.pending.insert(address, seen);
                }
            }
        }
        if !applied {
            return 0;
        }
        // Of the reads of wallets served before or after, the oldest
        // MAX_READS are tried, and every other read (it stores a history,
        // nothing served); the database's refusals among them wait, and so
        // do the newer reads.
        let served = &self.served;
        let (serving, unserved): (Vec<_>, Vec<_>) = self
            .pending
            .iter()
            .map(|(a, s)| (s.read, a.clone(), s))
            .partition(|(_, a, s)| served.contains_key(a) || !s.empty());
        let mut by_read: Vec<(u64, String)> = serving.into_iter().map(|(r, a, _)| (r, a)).collect();
        by_read.sort();
        let left = by_read.len().saturating_sub(MAX_READS);
        let over = left > 0;
        let tried: BTreeSet<String> = by_read
            .into_iter()
            .take(MAX_READS)
            .map(|(_, a)| a)
            .chain(unserved.into_iter().map(|(_, a, _)| a))
            .collect();
        if over {
            self.reads_left_for_later
                .set(self.reads_left_for_later.get() + 1);
        }
        let refused = &self.refused;
        let (waiting, taken): (BTreeMap<_, _>, BTreeMap<_, _>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|(a, _)| refused.contains(a) || !tried.contains(a));
        self.pending = waiting;
        let written: Vec<(String, Seen)> = taken
            .iter()
            .filter(|(_, s)| !s.empty())
            .map(|(a, s)| (a.clone(), s.clone()))
            .collect();
        let events = self.events_of(&written, at);
        for (address, seen) in taken {
            // The tracker lets go of a wallet that holds nothing once
            // published (its history stays in the store).
            if seen.empty() {
                self.memory.remove(&address);
                self.known.remove(&address);
            }
            self.stored.insert(address.clone(), seen.history);
            self.served.remove(&address);
        }
        self.served.extend(written);
        // The tracker serves the wallets that hold something (a scan's
        // listed empty wallets included, once the tracker goes on from it).
        self.served.retain(|_, s| !s.empty());
        self.write(at, events);
        left
    }

    /// A whole scan of `listed`: it serves exactly them (empty or not), and
    /// stores the analytics history of them only.
    fn scan(&mut self, listed: Vec<(String, Observed)>, at: OffsetDateTime) {
        let mut stored = HashMap::new();
        let mut written = Vec::new();
        for (address, obs) in listed {
            let before = self.stored.get(&address);
            // What the stored observation covers (a wallet never stored:
            // nothing to compare a dex with).
            let published_covered: BTreeSet<String> = before
                .and_then(|h| h.0.read_dexes.clone())
                .unwrap_or_else(|| DEXES.iter().map(|d| d.to_string()).collect())
                .into_iter()
                .collect();
            let (mut state, follow, analytics) =
                follow_positions(&address, before.map(|h| &h.0), before.map(|h| &h.1), &obs);
            // A scan reads every dex.
            state.read_dexes = Some(DEXES.iter().map(|d| d.to_string()).collect());
            stored.insert(address.clone(), (state.clone(), follow.clone()));
            written.push((
                address,
                Seen {
                    // Served, not pending: no read of the tracker's.
                    read: 0,
                    obs,
                    analytics,
                    history: (state, follow),
                    published_covered,
                },
            ));
        }
        let events = self.events_of(&written, at);
        self.stored = stored;
        self.served = written.into_iter().collect();
        self.foreign = true;
        self.write(at, events);
    }

    /// `kill -9` of the tracker: it forgets its reads and remembers what is
    /// stored; the reopened store takes every row again.
    fn crash(&mut self) {
        self.pending.clear();
        self.restore();
        self.foreign = false;
        self.refused.clear();
        self.versions_refused = false;
    }

    /// The events of writing `written` over what is served: each position
    /// compared with the wallet's served one (a wallet not served before is
    /// a first observation).
    fn events_of(&self, written: &[(String, Seen)], at: OffsetDateTime) -> Vec<PositionEvent> {
        let prices: HashMap<String, Decimal> = World::quotes()
            .into_iter()
            .map(|q| (q.symbol, q.price))
            .collect();
        let holding = |p: &MarketPosition| Holding {
            direction: p.direction,
            size: p.size.clone(),
        };
        let mut events = Vec::new();
        for (address, seen) in written {
            let before = self.served.get(address);
            let by_symbol = |s: Option<&Seen>| -> BTreeMap<String, MarketPosition> {
                s.into_iter()
                    .flat_map(|s| s.obs.positions.iter())
                    .map(|p| (p.symbol.clone(), p.clone()))
                    .collect()
            };
            let (prev, next) = (by_symbol(before), by_symbol(Some(seen)));
            let symbols: BTreeSet<&String> = prev.keys().chain(next.keys()).collect();
            for symbol in symbols {
                let (p, n) = (prev.get(symbol), next.get(symbol));
                let near = p.is_some_and(|p| near_liquidation(&p.mark_price, p.liq_price.as_ref()));
                let Some(kind) = classify(p.map(holding).as_ref(), n.map(holding).as_ref(), near)
                else {
                    continue;
                };
                if before.is_some() && newly_read(seen, symbol) {
                    self.first_seen_on_a_dex
                        .set(self.first_seen_on_a_dex.get() + 1);
                }
                events.push(PositionEvent {
                    observed_at: at,
                    address: address.clone(),
                    label: None,
                    tags: Vec::new(),
                    symbol: symbol.clone(),
                    kind,
                    first_observation: before.is_none() || newly_read(seen, symbol),
                    previous_direction: p.map(|p| p.direction),
                    direction: n.map(|n| n.direction),
                    previous_size: p.map_or_else(Decimal::zero, |p| p.size.clone()),
                    size: n.map_or_else(Decimal::zero, |n| n.size.clone()),
                    previous_value: p.map_or_else(Decimal::zero, |p| p.position_value.clone()),
                    value: n.map_or_else(Decimal::zero, |n| n.position_value.clone()),
                    price: prices[symbol].clone(),
                    previous_liq_price: p.and_then(|p| p.liq_price.clone()),
                });
            }
        }
        events
    }

    /// A version written at `at` with `events`: the first of a UTC day
    /// freezes the previous version's days, and history older than its
    /// retention goes.
    fn write(&mut self, at: OffsetDateTime, events: Vec<PositionEvent>) {
        if let Some((_, before)) = self.written {
            if before.date() < at.date() {
                for day in &self.days {
                    let mut day = day.clone();
                    day.coverage = Coverage::EndOfDay;
                    self.frozen
                        .insert((day.date, day.network_asset_symbol.clone()), day);
                }
            }
        }
        let version = self.written.map_or(1, |(v, _)| v + 1);
        self.written = Some((version, at));
        self.days = self.materialize().current_days;
        let mut numbered = events.clone();
        numbered.sort_by(|a, b| (&a.address, &a.symbol).cmp(&(&b.address, &b.symbol)));
        self.outbox.extend(numbered);
        self.events.extend(events);
        let keep_from = at - Duration::days(i64::from(RETENTION.events_days));
        self.events.retain(|e| e.observed_at >= keep_from);
    }

    fn materialize(&self) -> market_engine::DataVersion {
        let (_, at) = self.written.expect("a version was written");
        let wallets = self
            .served
            .iter()
            .map(|(address, s)| WalletInput {
                address: address.clone(),
                label: None,
                tags: Vec::new(),
                kols: Vec::new(),
                kol_profile: None,
                account_value: s.obs.account_value.clone(),
                observed_at: s.obs.observed_at,
                analytics: s.analytics.clone(),
            })
            .collect();
        let positions = self
            .served
            .values()
            .flat_map(|s| s.obs.positions.iter().cloned())
            .collect();
        materialize(
            NETWORK_ID,
            ScanInput {
                observed_at: at,
                quotes: World::quotes(),
                wallets,
                positions,
            },
        )
        .expect("the oracle's data aggregates")
    }

    fn snapshot(&self) -> Option<Snapshot> {
        let (version, _) = self.written?;
        Some(Snapshot::build(version, self.materialize()))
    }
}

/// Everything a server answers from a snapshot, as text: the market list,
/// every market with its positions and cohorts, the current days, the
/// wallet list and every wallet with its positions; the coverage report
/// when asked (the oracle has no registry to derive it from).
fn served(s: &Snapshot, coverage: bool) -> String {
    let mut out = Vec::new();
    out.extend_from_slice(format!("version {}\n", s.version).as_bytes());
    out.extend_from_slice(s.market_list_json(MarketSort::Volume24h, SortOrder::Desc));
    for i in 0..s.asset_count() {
        out.extend_from_slice(b"\nmarket ");
        out.extend_from_slice(s.market_json(i));
        out.extend_from_slice(b"\npositions ");
        s.positions_page(i, None, None, None, usize::MAX)
            .page
            .write_items(&mut out);
        out.extend_from_slice(b"\ncohorts ");
        out.extend_from_slice(s.cohorts_json(i));
    }
    for (symbol, day) in s.current_days() {
        out.extend_from_slice(format!("\nday {symbol} ").as_bytes());
        out.extend_from_slice(day);
    }
    let order = WalletOrder {
        sort: WalletSort::AccountTotalValue,
        order: SortOrder::Desc,
        size: None,
        direction: None,
    };
    let (page, total) = s.wallets_page(order, None, usize::MAX);
    out.extend_from_slice(format!("\nwallets {total} ").as_bytes());
    let mut list = Vec::new();
    page.page.write_items(&mut list);
    out.extend_from_slice(&list);
    let wallets: Vec<Value> = serde_json::from_slice(&[b"[", &list[..], b"]"].concat()).unwrap();
    for w in wallets {
        let view = s.wallet_view(w["address"].as_str().unwrap()).unwrap();
        out.extend_from_slice(b"\nwallet ");
        out.extend_from_slice(view.wallet);
        view.positions.write_items(&mut out);
    }
    if coverage {
        out.extend_from_slice(b"\ncoverage ");
        out.extend_from_slice(s.coverage_json());
    }
    String::from_utf8(out).unwrap()
}

/// The system under test: the tracker's book and publish base over a store,
/// and a server following the store by applying each version as changes.
struct Tracker {
    db: TestDatabase,
    store: Store,
    book: Mutex<Book>,
    publisher: Publisher,
    follower: Option<Snapshot>,
    /// Checks the follower still misses.
    paused: u8,
}

impl Tracker {
    fn start(db: TestDatabase) -> Tracker {
        let store = Store::open(db.url(), PoolOptions::default())
            .unwrap()
            .with_retention(RETENTION);
        let (book, base) = Book::restore(&store).unwrap();
        let mut publisher = Publisher::new(base);
        // A wallet held back is tried again at the next publish.
        publisher.retry_after = Duration::ZERO;
        publisher.max_reads = MAX_READS;
        Tracker {
            db,
            store,
            book: Mutex::new(book),
            publisher,
            follower: None,
            paused: 0,
        }
    }

    /// `kill -9` and a restart: the memory is gone, the store is reopened.
    fn crash(self) -> Tracker {
        let Tracker {
            db,
            follower,
            paused,
            ..
        } = self;
        let mut t = Tracker::start(db);
        t.follower = follower;
        t.paused = paused;
        t
    }
}

fn read(world: &World, address: &str) -> Result<Observed, String> {
    read_with(world, address, &World::marks(), Dexes::Every)
}

fn read_with(
    world: &World,
    address: &str,
    marks: &Marks,
    which: Dexes,
) -> Result<Observed, String> {
    let cfg = ScanConfig {
        retries: 0,
        weight_budget: 1_000_000,
        ..ScanConfig::default()
    };
    let fetcher = Fetcher::new(world, &cfg);
    let dexes: Vec<String> = match which {
        Dexes::Every => DEXES.iter().map(|d| d.to_string()).collect(),
        Dexes::Main => vec![String::new()],
    };
    observe_wallet(&fetcher, address, &dexes, marks, world.now())
}

fn run(backend: Backend, steps: &[Step], paths: &Paths) -> Result<(), TestCaseError> {
    let world = World::new();
    let mut oracle = Oracle::default();
    let mut sut = Tracker::start(empty_database(backend));
    for (url, filter) in webhooks() {
        sut.store
            .create_webhook(url, &Secret::generate().expose(), &filter, world.now())
            .unwrap();
    }
    for (n, step) in steps.iter().enumerate() {
        world.advance(Duration::seconds(20));
        let now = world.now();
        let publish_input = || PublishInput {
            now,
            quotes: World::quotes(),
            candles: Vec::new(),
            registry: Vec::new(),
            freshness: wallet_freshness(now, std::iter::empty()),
        };
        match step {
            Step::Read(w, holdings, _) | Step::ReadWithoutMarks(w, holdings) => {
                let a = address(*w);
                world
                    .accounts
                    .lock()
                    .unwrap()
                    .insert(a.clone(), holdings.clone());
                let (marks, which) = match step {
                    Step::Read(_, _, which) => (World::marks(), *which),
                    _ => (Marks::default(), Dexes::Every),
                };
                let obs = read_with(&world, &a, &marks, which).map_err(TestCaseError::fail)?;
                let applied =
                    sut.book
                        .lock()
                        .unwrap()
                        .apply_read(&a, None, Vec::new(), obs.clone(), |a| {
                            let stored = sut.store.wallet_history(a);
                            if matches!(stored, Ok(Some(_))) {
                                took(&paths.state_from_store);
                            }
                            stored
                        });
                prop_assert_eq!(
                    applied.is_ok(),
                    obs.is_complete(),
                    "step {}: a read is taken exactly when it valued every position",
                    n
                );
                if applied.is_err() {
                    took(&paths.incomplete_reads);
                }
                let unchanged = oracle.read(&a, obs);
                prop_assert_eq!(
                    matches!(applied, Ok(Applied::Unchanged)),
                    unchanged,
                    "step {}: a read changes nothing exactly when the wallet held nothing, holds nothing and its history records it",
                    n
                );
                if unchanged {
                    took(&paths.unchanged_reads);
                }
            }
            Step::ReadFails(w) => {
                *world.failing.lock().unwrap() = true;
                let result = read(&world, &address(*w));
                *world.failing.lock().unwrap() = false;
                prop_assert!(result.is_err(), "step {n}: the read was to fail");
            }
            Step::Publish => {
                if oracle.foreign {
                    took(&paths.rebased);
                }
                let held_before: Vec<_> = sut.publisher.held_back().keys().cloned().collect();
                // Without refusals both sides take the same reads, so the
                // reads left for the next publish must agree (with them the
                // tracker holds a refused wallet back before it counts).
                let no_refusals = held_before.is_empty() && oracle.refused.is_empty();
                let published = sut
                    .publisher
                    .publish(&sut.store, &sut.book, &publish_input());
                if !sut.publisher.held_back().is_empty() {
                    took(&paths.held_back);
                }
                if oracle.versions_refused {
                    took(&paths.no_wallet_at_fault);
                    prop_assert!(published.is_err(), "step {n}: every version is refused");
                    let newly_held = sut
                        .publisher
                        .held_back()
                        .keys()
                        .filter(|a| !held_before.contains(a))
                        .count();
                    prop_assert_eq!(newly_held, 0, "step {}: no wallet is to blame", n);
                } else {
                    prop_assert!(
                        published.is_ok(),
                        "step {n}: the publish was not applied: {}",
                        published.unwrap_err()
                    );
                }
                // As `track` does between its publishes.
                let pruned = sut.store.prune_history(now);
                prop_assert!(pruned.is_ok(), "step {n}: pruning failed: {pruned:?}");
                let left = oracle.publish(now, !oracle.versions_refused);
                if let (Ok(p), true) = (&published, no_refusals) {
                    prop_assert_eq!(p.left, left, "step {}: reads left for the next publish", n);
                }
            }
            Step::Refuse(w) => {
                sut.store.inject(Fault::Wallet(address(*w)));
                oracle.refused.insert(address(*w));
            }
            Step::RefuseVersions => {
                sut.store.inject(Fault::AnyVersion);
                oracle.versions_refused = true;
            }
            Step::Compact => {
                let deleted = sut.store.compact_wallet_rows_holding(0);
                prop_assert!(deleted.is_ok(), "step {n}: compaction failed: {deleted:?}");
                if deleted.unwrap().is_some_and(|d| d > 0) {
                    took(&paths.compactions);
                }
            }
            Step::Heal => {
                sut.store.clear_faults();
                oracle.refused.clear();
                oracle.versions_refused = false;
            }
            Step::PublishLosesConnection | Step::CrashMidPublish => {
                sut.store.inject(Fault::Unavailable);
                let published = sut
                    .publisher
                    .publish(&sut.store, &sut.book, &publish_input());
                prop_assert!(
                    published.is_err(),
                    "step {n}: the publish lost its connection"
                );
                // The fault is used up; the refused wallets stay refused.
                oracle.publish(now, false);
                if let Step::CrashMidPublish = step {
                    sut = sut.crash();
                    oracle.crash();
                }
            }
            Step::Scan(listed) => {
                let entries: Vec<WalletEntry> = listed
                    .iter()
                    .map(|&w| WalletEntry {
                        address: address(w),
                        label: None,
                        tags: Vec::new(),
                    })
                    .collect();
                let cfg = ScanConfig {
                    retries: 0,
                    weight_budget: 1_000_000,
                    ..ScanConfig::default()
                };
                let report = run_scan_at(&world, &sut.store, &entries, &cfg, now, &mut |_| {});
                prop_assert!(report.is_ok(), "step {n}: scan failed: {:?}", report.err());
                let observed = entries
                    .iter()
                    .map(|e| (e.address.clone(), read(&world, &e.address).unwrap()))
                    .collect();
                oracle.scan(observed, now);
            }
            Step::NextDay => {
                let next = (now.date() + Duration::days(1)).midnight().assume_utc();
                world.advance(next - now + Duration::seconds(5));
            }
            Step::ServerPauses(steps) => sut.paused = *steps,
            Step::Crash => {
                sut = sut.crash();
                oracle.crash();
            }
        }
        check(&mut sut, &oracle, n, paths)?;
    }
    Ok(())
}

/// What the store serves now, loaded whole and as changes, against the oracle.
fn check(sut: &mut Tracker, oracle: &Oracle, n: usize, paths: &Paths) -> Result<(), TestCaseError> {
    let meta = sut.store.latest_snapshot().unwrap();
    prop_assert_eq!(
        meta.as_ref().map(|m| m.version),
        oracle.written.map(|(v, _)| v),
        "step {}: the data version",
        n
    );
    let Some(meta) = meta else { return Ok(()) };
    let whole = whole_snapshot(&sut.store, &meta).unwrap();
    let expected = oracle.snapshot().expect("a version was written");
    same(
        &served(&expected, false),
        &served(&whole, false),
        &format!("step {n}: the served data (right) differs from the oracle's (left)"),
    )?;
    if sut.paused > 0 {
        sut.paused -= 1;
    } else {
        // A server that missed versions catches up by their changes, or
        // whole when the version it serves was pruned meanwhile.
        let follower = match sut.follower.take() {
            Some(current) if current.version == meta.version => current,
            Some(current) => match changed_snapshot(&sut.store, &current, &meta).unwrap() {
                Some((next, _)) => {
                    took(&paths.applied_as_changes);
                    next
                }
                None => {
                    if meta.version > current.version + 1 {
                        took(&paths.caught_up_whole);
                    }
                    whole_snapshot(&sut.store, &meta).unwrap()
                }
            },
            None => whole_snapshot(&sut.store, &meta).unwrap(),
        };
        same(
            &served(&whole, true),
            &served(&follower, true),
            &format!(
                "step {n}: version {} applied as changes (right) differs from loading it whole (left)",
                meta.version
            ),
        )?;
        sut.follower = Some(follower);
    }
    let stored: Vec<Value> = sut
        .store
        .events(&EventFilter::default(), None, 100_000)
        .unwrap()
        .into_iter()
        .map(|e| serde_json::from_str(&e.json).unwrap())
        .collect();
    let events = |mut list: Vec<Value>| {
        list.sort_by_key(|e| {
            (
                e["observedAt"].as_str().unwrap().to_owned(),
                e["address"].as_str().unwrap().to_owned(),
                e["symbol"].as_str().unwrap().to_owned(),
            )
        });
        list.iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let expected_events = oracle
        .events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    if !oracle.events.is_empty() {
        took(&paths.events);
    }
    if oracle.first_seen_on_a_dex.get() > 0 {
        took(&paths.first_seen_on_a_dex);
    }
    if oracle.reads_left_for_later.get() > 0 {
        took(&paths.reads_left_for_later);
    }
    if !oracle.frozen.is_empty() {
        took(&paths.frozen_days);
    }
    let expected_events = events(expected_events);
    same(
        &expected_events,
        &events(stored),
        &format!("step {n}: the position events (right) differ from the oracle's (left)"),
    )?;
    // The stream's order: by number, the same events in publish order, and
    // every stored number after what deletions took (crashes and refused
    // publishes roll their numbers back with them).
    let streamed = sut
        .store
        .events_after(&EventFilter::default(), 0, 100_000)
        .unwrap();
    let bounds = sut.store.event_bounds().unwrap();
    prop_assert!(
        streamed.windows(2).all(|w| w[0].seq < w[1].seq)
            && streamed
                .first()
                .is_none_or(|e| e.seq > bounds.pruned_through)
            && streamed.last().is_none_or(|e| e.seq <= bounds.last),
        "step {n}: event numbers {:?} against {bounds:?}",
        streamed.iter().map(|e| e.seq).collect::<Vec<_>>()
    );
    let in_stream_order = streamed
        .iter()
        .map(|e| serde_json::from_str::<Value>(&e.json).unwrap().to_string())
        .collect::<Vec<_>>()
        .join("\n");
    same(
        &expected_events,
        &in_stream_order,
        &format!("step {n}: the events in stream order (right) differ from publish order (left)"),
    )?;
    // The webhook outbox: each endpoint's pending deliveries are the events
    // it matches, of every committed write, in stream order (a refused or
    // crashed publish enqueued nothing), each with a message id of its own.
    let mut ids = BTreeSet::new();
    for (id, (url, filter)) in (1..).zip(webhooks()) {
        let pending = sut.store.pending_deliveries(id, 1_000_000).unwrap();
        let mut last_seq = 0;
        let mut queued = Vec::new();
        for d in &pending {
            prop_assert!(
                ids.insert(d.message_id.clone()),
                "step {}: message id {} twice",
                n,
                d.message_id
            );
            let body: Value = serde_json::from_str(&d.payload).unwrap();
            prop_assert_eq!(&body["type"], "position-event");
            prop_assert_eq!(&body["timestamp"], &body["data"]["observedAt"]);
            let seq = body["eventId"].as_i64().unwrap();
            prop_assert!(seq > last_seq, "step {}: {} eventIds out of order", n, url);
            last_seq = seq;
            queued.push(body["data"].to_string());
        }
        let expected: Vec<String> = oracle
            .outbox
            .iter()
            .filter(|e| filter.matches(e))
            .map(|e| serde_json::to_value(e).unwrap().to_string())
            .collect();
        same(
            &expected.join("\n"),
            &queued.join("\n"),
            &format!(
                "step {n}: the outbox of {url} (right) differs from the events it matches (left)"
            ),
        )?;
    }
    let frozen = sut
        .store
        .liquidity_history(
            NETWORK_ID,
            START.date(),
            START.date() + Duration::days(400),
            None,
            None,
            10_000,
        )
        .unwrap();
    let expected: Vec<&LiquidityDay> = oracle.frozen.values().collect();
    prop_assert_eq!(
        serde_json::to_string(&frozen).unwrap(),
        serde_json::to_string(&expected).unwrap(),
        "step {}: the frozen days",
        n
    );
    Ok(())
}

/// The webhook endpoints every run registers: every event, and a filtered
/// one (ids 1 and 2).
fn webhooks() -> [(&'static str, WebhookFilter); 2] {
    [
        ("https://hooks.example/every", WebhookFilter::default()),
        (
            "https://hooks.example/eth-over-1000",
            WebhookFilter {
                symbol: Some("ETH".into()),
                min_value: Some(Decimal("1000".parse().unwrap())),
                ..WebhookFilter::default()
            },
        ),
    ]
}

/// Fails with the first line that differs.
fn same(left: &str, right: &str, what: &str) -> Result<(), TestCaseError> {
    if left == right {
        return Ok(());
    }
    let (l, r) = left
        .lines()
        .zip(right.lines())
        .find(|(l, r)| l != r)
        .unwrap_or((left, right));
    Err(TestCaseError::fail(format!(
        "{what}:\n  left:  {l}\n  right: {r}"
    )))
}

fn holdings() -> impl Strategy<Value = Holdings> {
    let position = (
        0..COINS.len(),
        prop_oneof![-4_000i64..=-1, 1i64..=4_000],
        -2_000i64..=2_000,
        any::<bool>(),
    )
        .prop_map(|(coin, lots, entry_bp, liquidatable)| Pos {
            coin,
            lots,
            entry_bp,
            liquidatable,
        });
    prop_oneof![
        1 => Just(Holdings::default()),
        4 => (
            prop_oneof![Just(0u64), 1u64..5_000_000],
            prop::collection::vec(position, 0..=3)
        )
            .prop_map(|(equity, mut positions)| {
                let mut seen = std::collections::HashSet::new();
                positions.retain(|p| seen.insert(p.coin));
                Holdings { equity, positions }
            }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        9 => (0..POOL, holdings()).prop_map(|(w, h)| Step::Read(w, h, Dexes::Every)),
        3 => (0..POOL, holdings()).prop_map(|(w, h)| Step::Read(w, h, Dexes::Main)),
        2 => (0..POOL, holdings()).prop_map(|(w, h)| Step::ReadWithoutMarks(w, h)),
        1 => (0..POOL).prop_map(Step::ReadFails),
        8 => Just(Step::Publish),
        3 => (0..POOL).prop_map(Step::Refuse),
        1 => Just(Step::RefuseVersions),
        2 => Just(Step::Heal),
        1 => Just(Step::PublishLosesConnection),
        2 => prop::collection::btree_set(0..POOL, 0..=POOL)
            .prop_map(|l| Step::Scan(l.into_iter().collect())),
        2 => Just(Step::NextDay),
        3 => (2u8..5).prop_map(Step::ServerPauses),
        1 => Just(Step::Crash),
        1 => Just(Step::CrashMidPublish),
        2 => Just(Step::Compact),
    ]
}

/// Runs the model on `backend`: a fixed number of cases from a fixed seed,
/// so that CI's time is bounded and which paths the cases take is the same
/// at every run (`WRITE_PATH_CASES` and `WRITE_PATH_SEED` change both for a
/// longer hunt); failing seeds are kept in
/// `tests/write_path.proptest-regressions` and replayed first.
fn model(backend: Backend, cases: u32) {
    let env = |name: &str| std::env::var(name).ok().and_then(|c| c.parse::<u64>().ok());
    let cases = env("WRITE_PATH_CASES").map_or(cases, |c| c as u32);
    let seed = env("WRITE_PATH_SEED").unwrap_or(20261125);
    let config = Config {
        cases,
        max_shrink_iters: 4_000,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/write_path.proptest-regressions"
        )))),
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &[seed.to_le_bytes(); 4].concat()),
    );
    let paths = Paths::default();
    let result = runner.run(&prop::collection::vec(step(), 1..50), |steps| {
        run(backend, &steps, &paths)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let p = &paths;
    for (path, n) in [
        ("a version applied as changes", &p.applied_as_changes),
        (
            "a server catching up whole over pruned versions",
            &p.caught_up_whole,
        ),
        ("a read refused for want of marks", &p.incomplete_reads),
        ("a wallet held back", &p.held_back),
        (
            "a version refused with no wallet at fault",
            &p.no_wallet_at_fault,
        ),
        ("a tracker going on from a scan", &p.rebased),
        (
            "a position first seen on a dex newly read",
            &p.first_seen_on_a_dex,
        ),
        (
            "a wallet's history read from the store (the book let go of it, or a restart)",
            &p.state_from_store,
        ),
        (
            "a publish leaving reads for the next",
            &p.reads_left_for_later,
        ),
        ("a read that changed nothing", &p.unchanged_reads),
        ("position events", &p.events),
        ("days frozen at midnight", &p.frozen_days),
        (
            "a compaction deleting rows no kept version sees",
            &p.compactions,
        ),
    ] {
        let n = n.load(std::sync::atomic::Ordering::Relaxed);
        assert!(
            n > 0,
            "no case went through {path}: the model tests less than it says"
        );
        eprintln!("write path model: {path}: {n} steps");
    }
}

#[test]
fn the_write_path_serves_what_the_model_says_on_sqlite() {
    model(Backend::Sqlite, 48);
}

#[test]
fn the_write_path_serves_what_the_model_says_on_postgres() {
    if pg_admin_url().is_none() {
        eprintln!("TEST_DATABASE_URL is not set: the PostgreSQL variant is skipped");
        return;
    }
    model(Backend::Postgres, 40);
}
