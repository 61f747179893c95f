//! One scan: market context, candles and every listed wallet, written as one
//! atomic data version.

use std::collections::{BTreeMap, HashMap, HashSet};

use bigdecimal::Zero;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use market_engine::analytics::WalletHistory;
use market_engine::candles::period_start;
use market_engine::days::frozen_days;
use market_engine::{materialize, Analytics, Quote, ScanInput, WalletInput};
use market_model::{Candle, Decimal, Interval, MarketPosition, Wallet, NETWORK_ID};
use market_store::{
    CandleBatch, ScanWrite, SnapshotWrite, Store, TrackedPosition, WalletScanState,
};
use serde_json::{json, Value};
use time::OffsetDateTime;

use crate::client::{InfoSource, SourceError};
use crate::limiter::WeightLimiter;
use crate::mapping;
use crate::source::{
    audit_state, ClearinghouseState, FieldCase, MetaAndAssetCtxs, PerpDex, SourceCandle,
};

/// Request weight of `clearinghouseState`.
pub const WEIGHT_CLEARINGHOUSE: u32 = 2;
/// Request weight of every other info request.
pub const WEIGHT_OTHER: u32 = 20;
/// How many 1h candles the source keeps (the first scan backfills this far).
pub const SOURCE_CANDLE_HISTORY: i64 = 5000;
const HOUR_MS: i64 = 3_600_000;

/// Scanner settings.
#[derive(Clone, Debug)]
pub struct ScanConfig {
    /// Request weight allowed per `window` (the exchange: 1200 per minute per IP).
    pub weight_budget: u32,
    /// The budget's window.
    pub window: Duration,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Retries after a failed attempt (429, 5xx, timeouts, transport errors).
    pub retries: u32,
    /// First retry delay; doubles with each retry.
    pub backoff: Duration,
    /// A wallet that failed this many consecutive scans in a row is still
    /// served from its last observation; one more and it drops out.
    pub stale_after: u32,
    /// What produced the data versions (`scan`, `import`), recorded with each.
    pub source_name: &'static str,
    /// Running totals, shared with whoever reports them while a scan runs
    /// (the metrics endpoint of `scan` and `track`).
    pub counters: Arc<IngestCounters>,
}

/// Running totals of the requests and wallet reads of every scan (or of a
/// `track` run) made with one [`ScanConfig`]; each only grows.
#[derive(Debug, Default)]
pub struct IngestCounters {
    /// Requests sent (attempts, retries included).
    pub requests: AtomicU64,
    /// Request weight spent.
    pub weight: AtomicU64,
    /// Attempts that failed (each retry that failed again counts).
    pub failures: AtomicU64,
    /// Wallets read successfully.
    pub wallets_ok: AtomicU64,
    /// Wallets that failed after their retries.
    pub wallets_failed: AtomicU64,
    /// Unix time of the last data version a scan wrote; 0 before the first.
    pub last_version_at: AtomicI64,
    /// Account states that varied from the documented format without being
    /// refused, by case and member path (`missing`, `position.cumFunding`).
    pub field_cases: Mutex<BTreeMap<(FieldCase, String), u64>>,
}

impl IngestCounters {
    /// Counts a member that varied from the documented format; the first of
    /// each kind is logged.
    pub fn field_case(&self, case: FieldCase, path: String) {
        let mut cases = self.field_cases.lock().unwrap_or_else(|p| p.into_inner());
        if !cases.contains_key(&(case, path.clone())) {
            match case {
                FieldCase::Unknown => log::warn!(
                    "account states carry `{path}`, a member the format does not document: ignored (logged once; counted on /metrics)"
                ),
                FieldCase::Missing => log::warn!(
                    "account states lack `{path}`: its documented fallback is used (logged once; counted on /metrics)"
                ),
            }
        }
        *cases.entry((case, path)).or_insert(0) += 1;
    }
}

impl Default for ScanConfig {
    fn default() -> Self {
        ScanConfig {
            weight_budget: 1200,
            window: Duration::from_secs(60),
            concurrency: 8,
            retries: 4,
            backoff: Duration::from_millis(500),
            stale_after: 3,
            source_name: "scan",
            counters: Arc::default(),
        }
    }
}

/// One line of the wallet list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalletEntry {
    /// Lowercase `0x` address.
    pub address: String,
    /// Optional label.
    pub label: Option<String>,
    /// Tags.
    pub tags: Vec<String>,
}

/// Parses a wallet list: one wallet per line as `ADDRESS[,LABEL[,TAG|TAG…]]`;
/// blank lines and lines starting with `#` are ignored.
pub fn parse_wallet_list(text: &str) -> Result<Vec<WalletEntry>, String> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.splitn(3, ',');
        let address = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let valid = address.len() == 42
            && address.starts_with("0x")
            && address[2..].bytes().all(|b| b.is_ascii_hexdigit());
        if !valid {
            return Err(format!(
                "line {}: `{address}` is not an address (0x followed by 40 hex digits)",
                n + 1
            ));
        }
        if !seen.insert(address.clone()) {
            return Err(format!("line {}: {address} is listed twice", n + 1));
        }
        let label = parts
            .next()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned);
        let tags = parts
            .next()
            .map(|t| {
                t.split('|')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        out.push(WalletEntry {
            address,
            label,
            tags,
        });
    }
    Ok(out)
}

/// Why a scan wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// The market context could not be read.
    #[error("market context unavailable: {0}")]
    Market(String),
    /// No listed wallet could be read.
    #[error("none of the {0} wallets could be read")]
    NoWallets(usize),
    /// The scan's data is inconsistent.
    #[error("aggregation failed: {0}")]
    Aggregate(#[from] market_engine::AggregateError),
    /// The database failed.
    #[error("database: {0}")]
    Store(#[from] market_store::StoreError),
}

/// What a scan did.
#[derive(Clone, Debug, Default)]
pub struct ScanReport {
    /// The data version written.
    pub version: i64,
    /// Assets with a quote.
    pub assets: usize,
    /// Wallets read by this scan.
    pub wallets_ok: usize,
    /// Wallets that failed after retries.
    pub wallets_failed: usize,
    /// Failed wallets still served from their last observation.
    pub wallets_retained: usize,
    /// Failed wallets that exceeded the staleness limit and dropped out.
    pub wallets_dropped: usize,
    /// Open positions written.
    pub positions: usize,
    /// Candles fetched.
    pub candles: usize,
    /// Assets whose candles could not be fetched.
    pub candle_failures: usize,
    /// Liquidity days frozen as end-of-day snapshots.
    pub frozen_days: usize,
    /// Requests sent (attempts, including retries).
    pub requests: u64,
    /// Request weight spent.
    pub weight: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// Progress of the wallet phase.
#[derive(Clone, Copy, Debug)]
pub struct WalletProgress {
    /// Wallets finished.
    pub done: usize,
    /// Wallets in the list.
    pub total: usize,
    /// Wallets that failed so far.
    pub failed: usize,
    /// Time since the phase started.
    pub elapsed: Duration,
}

impl WalletProgress {
    /// Estimated time to finish, from the rate so far.
    pub fn eta(&self) -> Option<Duration> {
        (self.done > 0).then(|| {
            self.elapsed
                .mul_f64((self.total - self.done) as f64 / self.done as f64)
        })
    }
}

/// Rate-limited requests with retries: every request of a scan (or of a
/// `track` run) goes through one `Fetcher`, so they share one weight budget.
pub struct Fetcher<'a> {
    source: &'a dyn InfoSource,
    limiter: WeightLimiter,
    cfg: &'a ScanConfig,
    requests: AtomicU64,
    weight: AtomicU64,
    stop: Option<&'a AtomicBool>,
}

impl<'a> Fetcher<'a> {
    /// A fetcher with a new (empty) weight budget of `cfg.weight_budget` per `cfg.window`.
    pub fn new(source: &'a dyn InfoSource, cfg: &'a ScanConfig) -> Self {
        Fetcher {
            source,
            limiter: WeightLimiter::new(cfg.weight_budget, cfg.window, WEIGHT_OTHER),
            cfg,
            requests: AtomicU64::new(0),
            weight: AtomicU64::new(0),
            stop: None,
        }
    }

    /// This fetcher, sending nothing once `stop` is set: a call then fails
    /// with [`SourceError::Stopped`] instead of waiting for the budget,
    /// sending a request or retrying one (a request already sent finishes,
    /// within its timeout). A stopping `track` then ends within a request's
    /// timeout, not after every retry of every request a read still had.
    pub fn until_stopped(mut self, stop: &'a AtomicBool) -> Self {
        self.stop = Some(stop);
        self
    }

    fn stopped(&self) -> bool {
        self.stop.is_some_and(|s| s.load(Ordering::Relaxed))
    }

    /// Requests sent (attempts, retries included) and the weight they spent.
    pub fn spent(&self) -> (u64, u64) {
        (
            self.requests.load(Ordering::Relaxed),
            self.weight.load(Ordering::Relaxed),
        )
    }

    /// Sends `body` (of request weight `weight`) within the budget, retrying
    /// 429, 5xx, timeouts and transport errors with backoff.
    pub fn call(&self, body: &Value, weight: u32) -> Result<Value, SourceError> {
        let mut attempt = 0;
        loop {
            if self.stopped() || !self.limiter.acquire_unless(weight, || self.stopped()) {
                return Err(SourceError::Stopped);
            }
            self.requests.fetch_add(1, Ordering::Relaxed);
            self.weight.fetch_add(u64::from(weight), Ordering::Relaxed);
            let shared = &self.cfg.counters;
            shared.requests.fetch_add(1, Ordering::Relaxed);
            shared
                .weight
                .fetch_add(u64::from(weight), Ordering::Relaxed);
            let result = self.source.request(body);
            if result.is_err() {
                shared.failures.fetch_add(1, Ordering::Relaxed);
            }
            match result {
                Ok(v) => return Ok(v),
                Err(e) if e.retryable() && attempt < self.cfg.retries => {
                    let mut delay = self.cfg.backoff * 2u32.pow(attempt);
                    if matches!(e, SourceError::RateLimited) {
                        delay *= 2; // the source asked us to slow down
                    }
                    log::debug!("retrying {} after {e} in {delay:?}", body["type"]);
                    crate::limiter::nap_unless(delay, || self.stopped());
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// [`Fetcher::call`], decoding the answer as `T`.
    pub fn typed<T: serde::de::DeserializeOwned>(
        &self,
        body: &Value,
        weight: u32,
    ) -> Result<T, SourceError> {
        let v = self.call(body, weight)?;
        serde_json::from_value(v).map_err(|e| SourceError::Decode(format!("{}: {e}", body["type"])))
    }
}

/// One wallet as read from the source.
#[derive(Clone, Debug)]
pub struct Observed {
    /// Account value summed over the dexes read, USD.
    pub account_value: Decimal,
    /// Open positions in quoted assets.
    pub positions: Vec<MarketPosition>,
    /// The source's time of the read.
    pub observed_at: OffsetDateTime,
    /// The dexes (by name, `""` the main dex) that held equity or a position.
    pub active_dexes: Vec<String>,
    /// The dexes read, in the order read.
    pub dexes: Vec<String>,
    /// Coins of positions that could not be valued: no mark is known for
    /// them (an asset listed since the marks were read, or marks not loaded
    /// yet). A read with any is incomplete: it must not be taken for the
    /// wallet's holdings, or its positions would look closed.
    pub unvalued: Vec<String>,
}

impl Observed {
    /// Whether every position read was valued (see [`Observed::unvalued`]).
    pub fn is_complete(&self) -> bool {
        self.unvalued.is_empty()
    }
}

/// What a read needs to value positions: the mark price of every listed
/// asset, and the assets the exchange lists as delisted (positions in those
/// are left out on purpose: no market serves them).
#[derive(Clone, Debug, Default)]
pub struct Marks {
    /// Mark price by coin.
    pub prices: HashMap<String, Decimal>,
    /// Delisted coins.
    pub delisted: HashSet<String>,
}

impl Marks {
    /// The marks of `quotes`, and `delisted`.
    pub fn new(quotes: &[Quote], delisted: HashSet<String>) -> Marks {
        Marks {
            prices: quotes
                .iter()
                .map(|q| (q.symbol.clone(), q.price.clone()))
                .collect(),
            delisted,
        }
    }

    /// Whether no mark is known.
    pub fn is_empty(&self) -> bool {
        self.prices.is_empty()
    }
}

fn ms_to_time(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

fn epoch_ms(t: OffsetDateTime) -> i64 {
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}

/// The engine input that reproduces a served wallet.
pub fn wallet_input_from(w: &Wallet) -> WalletInput {
    let analytics = match (
        &w.net_pnl,
        &w.roi,
        &w.win_rate,
        w.strategy,
        &w.strategy_confidence,
    ) {
        (Some(net_pnl), Some(roi), Some(win_rate), Some(strategy), Some(conf)) => Some(Analytics {
            net_pnl: net_pnl.clone(),
            roi: roi.clone(),
            win_rate: win_rate.clone(),
            strategy,
            strategy_confidence: conf.clone(),
        }),
        _ => None,
    };
    WalletInput {
        address: w.address.clone(),
        label: w.label.clone(),
        tags: w.tags.clone(),
        kols: w.kols.clone(),
        kol_profile: w.kol_profile.clone(),
        account_value: w.account_total_value.clone(),
        observed_at: w.observed_at,
        analytics,
    }
}

/// Why new candles of an asset could not be had.
#[derive(Debug, thiserror::Error)]
pub enum CandleError {
    /// The source failed (after retries).
    #[error("{0}")]
    Source(SourceError),
    /// The database failed.
    #[error("database: {0}")]
    Store(#[from] market_store::StoreError),
}

/// What [`fetch_new_candles`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CandleFetch {
    /// The stored candles reach the current hour: nothing was requested.
    UpToDate,
    /// The candles the source returned (none, when it has no new one).
    Fetched(Vec<Candle>),
}

/// Fetches the 1h candles of `symbol` that are new since the newest stored
/// one (the first fetch backfills what the source keeps).
pub fn fetch_new_candles(
    fetcher: &Fetcher<'_>,
    store: &Store,
    symbol: &str,
    now: OffsetDateTime,
) -> Result<CandleFetch, CandleError> {
    let current_hour = period_start(Interval::H1, epoch_ms(now));
    let last = store.latest_candle_time(symbol, Interval::H1)?;
    if last.is_some_and(|t| t >= current_hour) {
        // The in-progress hour is refreshed when the next one begins.
        return Ok(CandleFetch::UpToDate);
    }
    let start = last.unwrap_or(current_hour - SOURCE_CANDLE_HISTORY * HOUR_MS);
    let body = json!({"type": "candleSnapshot", "req": {"coin": symbol, "interval": "1h", "startTime": start, "endTime": epoch_ms(now)}});
    let list = fetcher
        .typed::<Vec<SourceCandle>>(&body, WEIGHT_OTHER)
        .map_err(CandleError::Source)?;
    let mut candles: Vec<Candle> = list
        .into_iter()
        .filter(|c| c.i == "1h" && c.t % HOUR_MS == 0 && c.t >= start)
        .map(|c| Candle::at(c.t, c.o, c.h, c.l, c.c, c.v, c.n))
        .collect();
    candles.sort_by_key(|c| c.time);
    candles.dedup_by_key(|c| c.time);
    Ok(CandleFetch::Fetched(candles))
}

/// Runs one scan and writes it as a new data version. Nothing is written
/// when the market context or every wallet fails.
pub fn run_scan(
    source: &dyn InfoSource,
    store: &Store,
    wallets: &[WalletEntry],
    cfg: &ScanConfig,
    progress: &mut (dyn FnMut(WalletProgress) + Send),
) -> Result<ScanReport, ScanError> {
    let now = OffsetDateTime::now_utc()
        .replace_millisecond(0)
        .unwrap_or_else(|_| OffsetDateTime::now_utc());
    run_scan_at(source, store, wallets, cfg, now, progress)
}

/// [`run_scan`] at the instant `now`: the data version's time, the
/// reference of its staleness and of the day it freezes.
pub fn run_scan_at(
    source: &dyn InfoSource,
    store: &Store,
    wallets: &[WalletEntry],
    cfg: &ScanConfig,
    now: OffsetDateTime,
    progress: &mut (dyn FnMut(WalletProgress) + Send),
) -> Result<ScanReport, ScanError> {
    let started = Instant::now();
    let fetcher = Fetcher::new(source, cfg);

    // 1. Market context of the main dex and every HIP-3 dex.
    let dexs: Vec<Option<PerpDex>> = fetcher
        .typed(&json!({"type": "perpDexs"}), WEIGHT_OTHER)
        .map_err(|e| ScanError::Market(format!("perpDexs: {e}")))?;
    let dex_names: Vec<String> = std::iter::once(String::new())
        .chain(dexs.into_iter().flatten().map(|d| d.name))
        .collect();
    let mut quotes: Vec<Quote> = Vec::new();
    let mut delisted = HashSet::new();
    for dex in &dex_names {
        let (meta, ctxs): MetaAndAssetCtxs = fetcher
            .typed(
                &json!({"type": "metaAndAssetCtxs", "dex": dex}),
                WEIGHT_OTHER,
            )
            .map_err(|e| ScanError::Market(format!("metaAndAssetCtxs of dex {dex:?}: {e}")))?;
        if meta.universe.len() != ctxs.len() {
            return Err(ScanError::Market(format!(
                "dex {dex:?}: {} assets but {} contexts",
                meta.universe.len(),
                ctxs.len()
            )));
        }
        for (asset, ctx) in meta.universe.iter().zip(&ctxs) {
            if asset.is_delisted == Some(true) {
                delisted.insert(asset.name.clone());
            } else {
                quotes.push(mapping::quote(asset, ctx));
            }
        }
    }
    let marks = Marks::new(&quotes, delisted);

    // 2. Every wallet on every dex, concurrently within the weight budget.
    let next = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<Observed, String>>>> =
        wallets.iter().map(|_| Mutex::new(None)).collect();
    let progress = Mutex::new(progress);
    let phase = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..cfg.concurrency.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(entry) = wallets.get(i) else { return };
                let result = observe_wallet(&fetcher, &entry.address, &dex_names, &marks, now)
                    .and_then(|obs| match obs.is_complete() {
                        true => Ok(obs),
                        // Taking it would close the positions it could not value.
                        false => Err(format!("positions in unknown assets {:?}", obs.unvalued)),
                    });
                let counted = match &result {
                    Ok(_) => &cfg.counters.wallets_ok,
                    Err(_) => &cfg.counters.wallets_failed,
                };
                counted.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = &result {
                    failed.fetch_add(1, Ordering::Relaxed);
                    log::warn!("wallet {} failed after retries: {e}", entry.address);
                }
                *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
                let done = finished.fetch_add(1, Ordering::Relaxed) + 1;
                if done.is_multiple_of(100) || done == wallets.len() {
                    let mut p = progress.lock().unwrap_or_else(|p| p.into_inner());
                    (*p)(WalletProgress {
                        done,
                        total: wallets.len(),
                        failed: failed.load(Ordering::Relaxed),
                        elapsed: phase.elapsed(),
                    });
                }
            });
        }
    });

    let answered = results
        .iter()
        .filter(|r| matches!(*r.lock().unwrap_or_else(|p| p.into_inner()), Some(Ok(_))))
        .count();
    if !wallets.is_empty() && answered == 0 {
        return Err(ScanError::NoWallets(wallets.len()));
    }

    // 3. New 1h candles of every asset (the first scan backfills what the source keeps).
    let mut candle_sets: Vec<(String, Vec<Candle>)> = Vec::new();
    let mut candle_failures = 0;
    for q in &quotes {
        match fetch_new_candles(&fetcher, store, &q.symbol, now) {
            Ok(CandleFetch::Fetched(candles)) if !candles.is_empty() => {
                candle_sets.push((q.symbol.clone(), candles))
            }
            Ok(_) => {}
            Err(CandleError::Store(e)) => return Err(e.into()),
            Err(CandleError::Source(e)) => {
                candle_failures += 1;
                log::warn!("candles of {} failed: {e}", q.symbol);
            }
        }
    }

    // 4. Merge with the previous version: failed wallets keep their last observation.
    let previous = match store.latest_snapshot()? {
        Some(meta) => Some(store.load_snapshot(&meta)?),
        None => None,
    };
    let states = store.wallet_scan_states()?;
    let tracked = store.tracked_positions()?;
    let prev_wallets: HashMap<&str, &Wallet> = previous
        .iter()
        .flat_map(|p| p.version.wallets.iter())
        .map(|w| (w.address.as_str(), w))
        .collect();
    let mut prev_positions: HashMap<&str, Vec<&MarketPosition>> = HashMap::new();
    for p in previous.iter().flat_map(|p| p.version.positions.iter()) {
        prev_positions
            .entry(p.address.as_str())
            .or_default()
            .push(p);
    }

    let mut report = ScanReport {
        assets: quotes.len(),
        ..ScanReport::default()
    };
    let mut inputs = Vec::new();
    let mut positions = Vec::new();
    let mut wallet_states = Vec::new();
    let mut tracked_out: Vec<TrackedPosition> = Vec::new();
    let mut newly_read: Vec<(String, Vec<String>)> = Vec::new();
    for (entry, slot) in wallets.iter().zip(results) {
        let prev = prev_wallets.get(entry.address.as_str()).copied();
        match slot.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(Ok(obs)) => {
                report.wallets_ok += 1;
                let mut input = prev.map(wallet_input_from).unwrap_or_else(|| WalletInput {
                    address: entry.address.clone(),
                    label: None,
                    tags: Vec::new(),
                    kols: Vec::new(),
                    kol_profile: None,
                    account_value: Decimal::zero(),
                    observed_at: obs.observed_at,
                    analytics: None,
                });
                // The wallet list is authoritative for labels and tags.
                input.label = entry.label.clone();
                input.tags = entry.tags.clone();
                input.account_value = obs.account_value.clone();
                input.observed_at = obs.observed_at;
                let (state, follow, analytics) = follow_positions(
                    &entry.address,
                    states.get(&entry.address),
                    tracked.get(&entry.address),
                    &obs,
                );
                input.analytics = analytics;
                let mut state = state;
                let read = sorted(&dex_names);
                // Positions on a dex its stored observation did not cover
                // (a wallet `track` read on its main dex) are first seen now.
                if let Some(before) = states
                    .get(&entry.address)
                    .and_then(|s| s.read_dexes.as_ref())
                {
                    let new: Vec<String> = read
                        .iter()
                        .filter(|d| !before.contains(d))
                        .cloned()
                        .collect();
                    if !new.is_empty() {
                        newly_read.push((entry.address.clone(), new));
                    }
                }
                state.read_dexes = Some(read);
                wallet_states.push(state);
                tracked_out.extend(follow);
                positions.extend(obs.positions);
                inputs.push(input);
            }
            _ => {
                report.wallets_failed += 1;
                let missed = states.get(&entry.address).map_or(0, |s| s.missed_scans) + 1;
                match prev {
                    Some(w) if missed <= cfg.stale_after as i32 => {
                        report.wallets_retained += 1;
                        let mut input = wallet_input_from(w);
                        input.label = entry.label.clone();
                        input.tags = entry.tags.clone();
                        inputs.push(input);
                        positions.extend(
                            prev_positions
                                .get(entry.address.as_str())
                                .into_iter()
                                .flatten()
                                .filter(|p| marks.prices.contains_key(&p.symbol))
                                .map(|&p| p.clone()),
                        );
                        let mut state = states.get(&entry.address).cloned().unwrap_or_default();
                        state.address = entry.address.clone();
                        state.missed_scans = missed;
                        state.last_seen_at = state.last_seen_at.or(Some(w.observed_at));
                        wallet_states.push(state);
                        tracked_out
                            .extend(tracked.get(&entry.address).into_iter().flatten().cloned());
                    }
                    _ => report.wallets_dropped += 1,
                }
            }
        }
    }
    if !wallets.is_empty() && report.wallets_ok == 0 {
        return Err(ScanError::NoWallets(wallets.len()));
    }

    // 5. At the first scan of a new UTC day, the previous day's levels are frozen.
    let frozen = frozen_days(
        previous
            .as_ref()
            .map(|p| (p.meta.observed_at, p.version.current_days.as_slice())),
        now,
    );

    let materialized = materialize(
        NETWORK_ID,
        ScanInput {
            observed_at: now,
            quotes,
            wallets: inputs,
            positions,
        },
    )?;
    let batches: Vec<CandleBatch<'_>> = candle_sets
        .iter()
        .map(|(s, c)| CandleBatch {
            symbol: s,
            interval: Interval::H1,
            candles: c,
        })
        .collect();
    report.version = store.write_scan(
        &ScanWrite {
            snapshot: SnapshotWrite {
                source: cfg.source_name,
                version: &materialized,
            },
            candles: &batches,
            frozen_days: &frozen,
            wallet_states: &wallet_states,
            tracked: &tracked_out,
            newly_read: &newly_read,
        },
        &mut |_, _, _| {},
    )?;
    report.positions = materialized.positions.len();
    report.candles = candle_sets.iter().map(|(_, c)| c.len()).sum();
    report.candle_failures = candle_failures;
    report.frozen_days = frozen.len();
    report.requests = fetcher.requests.load(Ordering::Relaxed);
    report.weight = fetcher.weight.load(Ordering::Relaxed);
    report.elapsed = started.elapsed();
    cfg.counters.last_version_at.store(
        OffsetDateTime::now_utc().unix_timestamp(),
        Ordering::Relaxed,
    );
    Ok(report)
}

/// `dexes`, sorted (the form stored as a wallet's read dexes).
pub fn sorted(dexes: &[String]) -> Vec<String> {
    let mut d = dexes.to_vec();
    d.sort();
    d.dedup();
    d
}

/// Follows a wallet's positions from the previous scan to this one: closes
/// the ones that are gone (or flipped side), opens the new ones, and derives
/// the analytics (see `market_engine::analytics`).
pub fn follow_positions(
    address: &str,
    previous: Option<&WalletScanState>,
    tracked: Option<&Vec<TrackedPosition>>,
    obs: &Observed,
) -> (WalletScanState, Vec<TrackedPosition>, Option<Analytics>) {
    let mut state = previous.cloned().unwrap_or_default();
    state.address = address.to_owned();
    // The first observation of a wallet cannot tell when its positions opened.
    let first_observation = state.first_seen_at.is_none();
    if first_observation {
        state.first_seen_at = Some(obs.observed_at);
        state.first_account_value = Some(obs.account_value.clone());
    }
    state.missed_scans = 0;
    state.last_seen_at = Some(obs.observed_at);
    let mut history = WalletHistory {
        first_account_value: state.first_account_value.clone(),
        realized_pnl: state.realized_pnl.clone(),
        closed: state.closed_count.max(0) as u32,
        wins: state.win_count.max(0) as u32,
        holding: state.held.map(|h| h.max(0) as u32),
    };
    let current: HashMap<&str, &MarketPosition> = obs
        .positions
        .iter()
        .map(|p| (p.symbol.as_str(), p))
        .collect();
    let before: HashMap<&str, &TrackedPosition> = tracked
        .into_iter()
        .flatten()
        .map(|t| (t.symbol.as_str(), t))
        .collect();
    for t in before.values() {
        let still_open = current
            .get(t.symbol.as_str())
            .is_some_and(|p| p.direction == t.direction);
        if !still_open {
            history.close(
                &t.last_upnl.0,
                t.open_time_known.then(|| obs.observed_at - t.opened_at),
            );
        }
    }
    let mut follow = Vec::with_capacity(obs.positions.len());
    let mut unrealized = bigdecimal::BigDecimal::from(0);
    for p in &obs.positions {
        unrealized += &p.u_pnl.0;
        let same = before
            .get(p.symbol.as_str())
            .filter(|t| t.direction == p.direction);
        follow.push(TrackedPosition {
            address: address.to_owned(),
            symbol: p.symbol.clone(),
            direction: p.direction,
            opened_at: same.map_or(obs.observed_at, |t| t.opened_at),
            open_time_known: same.map_or(!first_observation, |t| t.open_time_known),
            last_upnl: p.u_pnl.clone(),
        });
    }
    let analytics = history.analytics(&unrealized);
    state.realized_pnl = history.realized_pnl;
    state.closed_count = history.closed as i32;
    state.win_count = history.wins as i32;
    state.held = history.holding.map(|h| h as i32);
    (state, follow, analytics)
}

/// Reads `address` on each dex of `dexs`, one after another; fails when
/// any of them fails. Positions in delisted assets are left out; positions
/// in assets without a mark are listed in [`Observed::unvalued`].
pub fn observe_wallet(
    fetcher: &Fetcher<'_>,
    address: &str,
    dexs: &[String],
    marks: &Marks,
    scan_time: OffsetDateTime,
) -> Result<Observed, String> {
    let mut account_value = bigdecimal::BigDecimal::from(0);
    let mut positions: Vec<MarketPosition> = Vec::new();
    let mut seen = HashSet::new();
    let mut latest_ms: Option<i64> = None;
    let mut active_dexes = Vec::new();
    let mut unvalued = Vec::new();
    for dex in dexs {
        let body = json!({"type": "clearinghouseState", "user": address, "dex": dex});
        let value = fetcher
            .call(&body, WEIGHT_CLEARINGHOUSE)
            .map_err(|e| format!("dex {dex:?}: {e}"))?;
        let counters = &fetcher.cfg.counters;
        audit_state(&value, &mut |case, path| counters.field_case(case, path));
        let state: ClearinghouseState = serde_json::from_value(value)
            .map_err(|e| format!("dex {dex:?}: the account state is refused: {e}"))?;
        if !state.margin_summary.account_value.0.is_zero() || !state.asset_positions.is_empty() {
            active_dexes.push(dex.clone());
        }
        account_value += &state.margin_summary.account_value.0;
        latest_ms = latest_ms.max(state.time);
        let observed_at = state.time.map_or(scan_time, ms_to_time);
        for ap in &state.asset_positions {
            let coin = &ap.position.coin;
            if !seen.insert(coin.clone()) || marks.delisted.contains(coin) {
                continue;
            }
            let Some(mark) = marks.prices.get(coin) else {
                unvalued.push(coin.clone());
                continue;
            };
            positions.extend(mapping::position(&ap.position, address, mark, observed_at));
        }
    }
    let observed_at = latest_ms.map_or(scan_time, ms_to_time);
    for p in &mut positions {
        p.observed_at = observed_at;
    }
    Ok(Observed {
        account_value: Decimal(account_value),
        positions,
        observed_at,
        active_dexes,
        dexes: dexs.to_vec(),
        unvalued,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wallet_lists() {
        let list = parse_wallet_list(
            "# tracked\n0xABCDEFabcdef0123456789abcdef0123456789ab,Big Fund,fund|smart-money\n\n0x1111111111111111111111111111111111111111\n",
        )
        .unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(
            list[0].address,
            "0xabcdefabcdef0123456789abcdef0123456789ab"
        );
        assert_eq!(list[0].label.as_deref(), Some("Big Fund"));
        assert_eq!(list[0].tags, ["fund", "smart-money"]);
        assert!(list[1].label.is_none() && list[1].tags.is_empty());
        assert!(parse_wallet_list("0x123").is_err());
        assert!(parse_wallet_list("0x1111111111111111111111111111111111111111\n0x1111111111111111111111111111111111111111").is_err());
    }
}
