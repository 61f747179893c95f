//! `track`: discovery threads, readers that spend the weight budget by
//! priority, and a publish every `publish_every`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bigdecimal::BigDecimal;
use market_engine::aggregate::compact_size_class;
use market_engine::coverage::freshness_of_ages;
use market_engine::Quote;
use market_ingest::client::InfoSource;
use market_ingest::scan::{
    fetch_new_candles, observe_wallet, CandleError, CandleFetch, Fetcher, Marks, WEIGHT_OTHER,
};
use market_ingest::source::{AssetCtx, AssetMeta, MetaAndAssetCtxs, PerpDex};
use market_ingest::{mapping, ScanConfig, WalletEntry};
use market_model::timestamp::now_seconds;
use market_model::{Candle, Decimal, SizeClass, WalletFreshness};
use market_store::{Store, StoreError};
use serde_json::json;
use time::OffsetDateTime;

use crate::discovery::{fetch_leaderboard, NodeTradesFollower};
use crate::live::{Applied, Book};
use crate::publish::{PublishInput, Published, Publisher};
use crate::registry::{Entry, Moment};
use crate::schedule::{Discovery, Intervals, ReadJob, Schedule};
use crate::ws::{self, WsConfig, WsShared};

/// When a read met an asset without a mark, the wallet is read again after this.
const INCOMPLETE_RETRY: time::Duration = time::Duration::seconds(30);
/// The dexes are read again for an asset without a mark at most this often.
const META_STALE_AFTER: Duration = Duration::from_secs(60);

/// Settings of `track`.
#[derive(Clone, Debug)]
pub struct TrackConfig {
    /// The info endpoint (`https://api.hyperliquid.xyz/info`).
    pub info_url: String,
    /// The WebSocket (`wss://api.hyperliquid.xyz/ws`); `None` turns it off
    /// (no trades discovery; market context from `metaAndAssetCtxs`).
    pub ws_url: Option<String>,
    /// Follow the trades of every coin on the WebSocket.
    pub ws_trades: bool,
    /// The leaderboard document; `None` turns it off.
    pub leaderboard_url: Option<String>,
    /// How often the leaderboard is fetched.
    pub leaderboard_every: Duration,
    /// An operator's node's `node_trades` directory, followed when given.
    pub node_trades_dir: Option<PathBuf>,
    /// The operator's wallet list (always tracked; labels and tags authoritative).
    pub wallets: Vec<WalletEntry>,
    /// How often a data version is published.
    pub publish_every: Duration,
    /// Requests, budget, retries (shared with `scan`).
    pub scan: ScanConfig,
    /// Refresh intervals.
    pub intervals: Intervals,
    /// Fetch hourly candles of every market.
    pub candles: bool,
    /// How often the dexes and their universes are re-read.
    pub meta_every: Duration,
    /// The most reads of served wallets one publish writes
    /// ([`Publisher::max_reads`]): what a publish holds in memory at once.
    /// Reads past it go in the next publish, which comes as soon as this
    /// one has had its own time again (at least a second), not a whole
    /// `publish_every` later.
    pub max_reads_per_publish: usize,
}

/// Counters of a running tracker (each only grows).
#[derive(Debug, Default)]
pub struct Stats {
    /// Wallet reads that succeeded.
    pub reads_ok: AtomicU64,
    /// Wallet reads that failed after retries.
    pub reads_failed: AtomicU64,
    /// Wallet reads not used because a position's asset had no mark (retried).
    pub reads_incomplete: AtomicU64,
    /// Wallet reads that changed nothing to publish (see [`crate::Applied::Unchanged`]).
    pub reads_unchanged: AtomicU64,
    /// Candle requests sent (each followed by the candle pause).
    pub candle_requests: AtomicU64,
    /// Spot trades in the node's trade files (skipped: no perp wallet is found by them).
    pub spot_trades: AtomicU64,
    /// Wallets discovered.
    pub discovered: AtomicU64,
    /// Leaderboard fetches applied.
    pub leaderboards: AtomicU64,
    /// Leaderboard fetches that failed or were not whole.
    pub leaderboard_failures: AtomicU64,
    /// Publishes written.
    pub publishes: AtomicU64,
    /// Publishes that wrote nothing (market context or database failed).
    pub publish_failures: AtomicU64,
    /// Market contexts taken from `metaAndAssetCtxs` because the WebSocket's were missing or stale.
    pub ctx_fallbacks: AtomicU64,
    /// Registry saves that failed (retried).
    pub registry_failures: AtomicU64,
    /// Unix time of the last publish written; 0 before the first.
    pub last_publish_at: AtomicI64,
    /// Wallets held back from publishing now (their rows were refused).
    pub held_back: AtomicU64,
}

/// The dexes and their universes, refreshed every `meta_every`.
#[derive(Clone, Debug, Default)]
struct MarketMeta {
    dexes: Vec<String>,
    universes: HashMap<String, Vec<AssetMeta>>,
    http_ctxs: HashMap<String, Vec<AssetCtx>>,
}

/// A running tracker.
pub struct Tracker {
    cfg: TrackConfig,
    store: Store,
    source: Box<dyn InfoSource + Send>,
    schedule: Mutex<Schedule>,
    book: Mutex<Book>,
    publisher: Mutex<Publisher>,
    meta: RwLock<MarketMeta>,
    marks: RwLock<Arc<Marks>>,
    /// Every market's symbol, the largest open interest (USD) first: the
    /// order the candle loop fetches them in, so that the markets most
    /// users open have candles in `track`'s first minutes.
    by_interest: RwLock<Arc<[String]>>,
    /// Set by a read that met an asset without a mark: the dexes are read again soon.
    meta_stale: AtomicBool,
    /// Coins already logged as without a mark (logged once each).
    unvalued_logged: Mutex<HashSet<String>>,
    /// Candles fetched and not written yet, by symbol and open time: a
    /// symbol fetched again before a publish (the next hour began) merges
    /// into what is waiting, the newer candle winning.
    candles: Mutex<BTreeMap<String, BTreeMap<i64, Candle>>>,
    ws: Arc<WsShared>,
    /// Counters.
    pub stats: Stats,
    stop: Arc<AtomicBool>,
}

/// The symbols of `quotes`, the largest open interest first (then by
/// symbol, so that the order is the same for equal interest).
fn by_interest(quotes: &[Quote]) -> Arc<[String]> {
    let mut sorted: Vec<&Quote> = quotes.iter().collect();
    sorted.sort_by(|a, b| {
        b.open_interest
            .cmp(&a.open_interest)
            .then_with(|| a.symbol.cmp(&b.symbol))
    });
    sorted.into_iter().map(|q| q.symbol.clone()).collect()
}

/// Registry entries saved at once (with a publish, or on their own): a
/// registry that grew by a million wallets at once (an operator's wallet
/// list) is saved over several publishes, each transaction bounded.
const REGISTRY_PER_SAVE: usize = 25_000;

/// The shortest wait before the publish that takes the reads a full one
/// left (see `main_loop`).
const CATCH_UP_GAP: Duration = Duration::from_secs(1);

/// How often the write-ahead log is copied back into the database file
/// (`Tracker::checkpoint_loop`).
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why `track` could not start.
#[derive(Debug, thiserror::Error)]
pub enum TrackError {
    /// The database failed.
    #[error("database: {0}")]
    Store(#[from] StoreError),
}

impl Tracker {
    /// Restores the registry and the last published state from `store`.
    pub fn new(
        mut cfg: TrackConfig,
        store: Store,
        source: Box<dyn InfoSource + Send>,
        stop: Arc<AtomicBool>,
    ) -> Result<Self, TrackError> {
        let now = now_seconds();
        // What the last run saved since its journals' last merge goes into
        // the tables first: the reads below then read the tables alone.
        store.merge_journals()?;
        let mut schedule = Schedule::new(cfg.intervals.clone(), Vec::new(), now);
        let restored =
            store.each_registry_entry(REGISTRY_PER_SAVE, |e| schedule.restore(&e, now))?;
        log::info!("registry: {restored} wallets");
        // The list lives on in the registry (labels and tags included): a
        // copy of a million entries kept beside it would cost 100 MB.
        for w in std::mem::take(&mut cfg.wallets) {
            schedule.add_listed(&w.address, w.label, w.tags, now);
        }
        // Reads saved in the registry but not published (lost with a kill -9
        // before their publish) are made again: each wallet's last published
        // observation is marked as the stored scan states are read.
        let mut published = schedule.published_marks();
        let (book, base) = Book::restore_with(&store, |state| {
            schedule.mark_published(&mut published, &state.address, state.last_seen_at);
        })?;
        let redo = schedule.redo_unpublished(&published, now, |a| book.holds(a));
        if redo > 0 {
            log::info!("{redo} wallets read but not published before the restart are read again");
        }
        let mut publisher = Publisher::new(base);
        publisher.max_reads = cfg.max_reads_per_publish.max(1);
        Ok(Tracker {
            cfg,
            store,
            source,
            schedule: Mutex::new(schedule),
            book: Mutex::new(book),
            publisher: Mutex::new(publisher),
            meta: RwLock::new(MarketMeta::default()),
            marks: RwLock::new(Arc::new(Marks::default())),
            by_interest: RwLock::new(Arc::from([])),
            meta_stale: AtomicBool::new(false),
            unvalued_logged: Mutex::new(HashSet::new()),
            candles: Mutex::new(BTreeMap::new()),
            ws: Arc::new(WsShared::default()),
            stats: Stats::default(),
            stop,
        })
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Sleeps up to `d`, waking early when stopped.
    fn nap(&self, d: Duration) {
        market_ingest::limiter::nap_unless(d, || self.stopped());
    }

    /// How fresh each tier of the registry is, indexed like [`Tier::ALL`].
    pub fn freshness(&self) -> [crate::TierFreshness; crate::Tier::ALL.len()] {
        lock(&self.schedule).freshness()
    }

    /// Registry entries changed since they were last saved (after
    /// [`Tracker::run`] returns: those its last saves could not write).
    pub fn unsaved(&self) -> usize {
        lock(&self.schedule).unsaved_len()
    }

    /// The settings it runs with (their `scan.counters` count its requests).
    pub fn config(&self) -> &TrackConfig {
        &self.cfg
    }

    /// Runs until stopped.
    pub fn run(&self) {
        let scan_cfg = self.cfg.scan.clone();
        let fetcher = Fetcher::new(self.source.as_ref(), &scan_cfg).until_stopped(&self.stop);
        let (tx, rx) = channel::<Discovery>();
        std::thread::scope(|s| {
            // Market meta first: readers need the dex list and marks.
            while !self.stopped() {
                match self.refresh_meta(&fetcher) {
                    Ok(()) => break,
                    Err(e) => {
                        log::warn!("market context unavailable, retrying in 10 s: {e}");
                        self.nap(Duration::from_secs(10));
                    }
                }
            }
            if let Some(url) = self.cfg.ws_url.clone() {
                let (shared, tx, stop) = (self.ws.clone(), tx.clone(), self.stop.clone());
                let cfg = WsConfig {
                    url,
                    trades: self.cfg.ws_trades,
                    ctxs: true,
                };
                std::thread::Builder::new()
                    .name("websocket".into())
                    .spawn_scoped(s, move || ws::run(cfg, shared, tx, stop))
                    .expect("spawn the websocket thread");
            }
            if let Some(url) = self.cfg.leaderboard_url.clone() {
                let tx = tx.clone();
                s.spawn(move || self.leaderboard_loop(&url, tx));
            }
            if let Some(dir) = self.cfg.node_trades_dir.clone() {
                let tx = tx.clone();
                s.spawn(move || {
                    let mut follower = NodeTradesFollower::new(&dir);
                    while !self.stopped() {
                        for d in follower.poll(OffsetDateTime::now_utc()) {
                            let _ = tx.send(d);
                        }
                        let spot = &self.stats.spot_trades;
                        spot.store(follower.spot_trades, Ordering::Relaxed);
                        self.nap(Duration::from_millis(500));
                    }
                });
            }
            drop(tx);
            for _ in 0..self.cfg.scan.concurrency.max(1) {
                s.spawn(|| self.reader(&fetcher));
            }
            if self.cfg.candles {
                s.spawn(|| self.candle_loop(&fetcher));
            }
            if self.store.kind() == market_store::BackendKind::Sqlite {
                std::thread::Builder::new()
                    .name("checkpoint".into())
                    .spawn_scoped(s, || self.checkpoint_loop())
                    .expect("spawn the checkpoint thread");
            }
            self.main_loop(&fetcher, rx);
        });
        // After every thread: the entry of a read that completed as it
        // stopped is saved too (a read the stop cut short left its entry as
        // it was), and every entry still unsaved, a bounded batch at a time.
        while self.save_registry() && lock(&self.schedule).unsaved_len() > 0 {}
        // The checkpoint thread has ended: the last publish and these saves
        // are copied back here, not left in the log for another process.
        if let Err(e) = self.store.checkpoint() {
            log::warn!("the write-ahead log was not copied back at the stop: {e}");
        }
    }

    /// Copies SQLite's write-ahead log back into the database file once a
    /// second, off the thread that publishes (`run` copies what is left
    /// after the stop): `track` opens its store with
    /// `Checkpoint::Separate`, so that a publish's commit returns without
    /// copying every page it wrote a second time. A checkpoint that fails
    /// is tried again a second later (the store's backstop bounds the log
    /// meanwhile).
    fn checkpoint_loop(&self) {
        let mut failing = false;
        loop {
            let stopped = self.stopped();
            match self.store.checkpoint() {
                Ok(Some((log, done))) => {
                    if failing {
                        log::info!("the write-ahead log is copied back again");
                    }
                    failing = false;
                    log::debug!("checkpoint: {done} of {log} log pages in the database file");
                }
                Ok(None) => return,
                Err(e) if !failing => {
                    failing = true;
                    log::warn!(
                        "the write-ahead log was not copied back (tried again each second): {e}"
                    );
                }
                Err(_) => {}
            }
            if stopped {
                return;
            }
            self.nap(CHECKPOINT_EVERY);
        }
    }

    fn leaderboard_loop(&self, url: &str, tx: Sender<Discovery>) {
        while !self.stopped() {
            match fetch_leaderboard(url, Duration::from_secs(120)) {
                Ok(lb) => {
                    self.stats.leaderboards.fetch_add(1, Ordering::Relaxed);
                    log::info!(
                        "leaderboard: {} wallets ({} rows skipped)",
                        lb.rows.len(),
                        lb.skipped
                    );
                    for d in lb.rows {
                        let _ = tx.send(d);
                    }
                }
                Err(e) => {
                    self.stats
                        .leaderboard_failures
                        .fetch_add(1, Ordering::Relaxed);
                    log::warn!("leaderboard not applied: {e}");
                }
            }
            self.nap(self.cfg.leaderboard_every);
        }
    }

    /// Reads `perpDexs` and every dex's `metaAndAssetCtxs`.
    fn refresh_meta(&self, fetcher: &Fetcher<'_>) -> Result<(), String> {
        let dexs: Vec<Option<PerpDex>> = fetcher
            .typed(&json!({"type": "perpDexs"}), WEIGHT_OTHER)
            .map_err(|e| format!("perpDexs: {e}"))?;
        let dexes: Vec<String> = std::iter::once(String::new())
            .chain(dexs.into_iter().flatten().map(|d| d.name))
            .collect();
        let mut meta = MarketMeta {
            dexes: dexes.clone(),
            ..MarketMeta::default()
        };
        for dex in &dexes {
            let (m, ctxs) = self.meta_and_ctxs(fetcher, dex)?;
            meta.universes.insert(dex.clone(), m);
            meta.http_ctxs.insert(dex.clone(), ctxs);
        }
        let coins: Vec<String> = dexes
            .iter()
            .flat_map(|d| meta.universes[d].iter())
            .filter(|a| a.is_delisted != Some(true))
            .map(|a| a.name.clone())
            .collect();
        // The marks of these contexts value the reads until the first
        // publish: no wallet is read before they are known.
        let quotes: Vec<Quote> = dexes
            .iter()
            .flat_map(|d| quotes_of(&meta.universes[d], &meta.http_ctxs[d]))
            .collect();
        *lock(&self.ws.coins) = coins;
        *self.meta.write().unwrap_or_else(|p| p.into_inner()) = meta;
        self.set_marks(&quotes);
        Ok(())
    }

    fn meta_and_ctxs(
        &self,
        fetcher: &Fetcher<'_>,
        dex: &str,
    ) -> Result<(Vec<AssetMeta>, Vec<AssetCtx>), String> {
        let (meta, ctxs): MetaAndAssetCtxs = fetcher
            .typed(
                &json!({"type": "metaAndAssetCtxs", "dex": dex}),
                WEIGHT_OTHER,
            )
            .map_err(|e| format!("metaAndAssetCtxs of dex {dex:?}: {e}"))?;
        if meta.universe.len() != ctxs.len() {
            return Err(format!(
                "dex {dex:?}: {} assets but {} contexts",
                meta.universe.len(),
                ctxs.len()
            ));
        }
        Ok((meta.universe, ctxs))
    }

    /// Quotes of every dex: the WebSocket's contexts when fresh and aligned
    /// with the universe, else `metaAndAssetCtxs` for that dex.
    fn quotes(&self, fetcher: &Fetcher<'_>) -> Result<Vec<Quote>, String> {
        let fresh_for = self.cfg.publish_every.max(Duration::from_secs(30));
        let pushed = lock(&self.ws.ctxs)
            .clone()
            .filter(|c| c.at.elapsed() <= fresh_for);
        let mut meta = self.meta.read().unwrap_or_else(|p| p.into_inner()).clone();
        let mut quotes = Vec::new();
        for dex in meta.dexes.clone() {
            let universe = &meta.universes[&dex];
            let from_ws = pushed
                .as_ref()
                .and_then(|p| p.ctxs.iter().find(|(d, _)| *d == dex))
                .map(|(_, c)| c)
                .filter(|c| c.len() == universe.len());
            let ctxs = match from_ws {
                Some(c) => c.clone(),
                None => {
                    self.stats.ctx_fallbacks.fetch_add(1, Ordering::Relaxed);
                    let (m, c) = self.meta_and_ctxs(fetcher, &dex)?;
                    meta.universes.insert(dex.clone(), m);
                    c
                }
            };
            quotes.extend(quotes_of(&meta.universes[&dex], &ctxs));
        }
        *self.meta.write().unwrap_or_else(|p| p.into_inner()) = meta;
        Ok(quotes)
    }

    fn reader(&self, fetcher: &Fetcher<'_>) {
        while !self.stopped() {
            // A read valued without marks would drop every position.
            if self
                .marks
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .is_empty()
            {
                self.nap(Duration::from_millis(200));
                continue;
            }
            let dexes = self
                .meta
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .dexes
                .clone();
            let job = lock(&self.schedule).next_due(now_seconds(), &dexes);
            let Some(job) = job else {
                self.nap(Duration::from_millis(200));
                continue;
            };
            self.read(fetcher, &job);
        }
    }

    fn read(&self, fetcher: &Fetcher<'_>, job: &ReadJob) {
        let marks = self.marks.read().unwrap_or_else(|p| p.into_inner()).clone();
        let now = now_seconds();
        let obs = match observe_wallet(fetcher, &job.address, &job.dexes, &marks, now) {
            Ok(obs) if obs.is_complete() => obs,
            Ok(obs) => {
                // An asset listed since the dexes were read: read them again,
                // and this wallet once they are.
                self.stats.reads_incomplete.fetch_add(1, Ordering::Relaxed);
                self.meta_stale.store(true, Ordering::Relaxed);
                let mut logged = lock(&self.unvalued_logged);
                for coin in obs.unvalued.iter().filter(|c| logged.insert((*c).clone())) {
                    log::warn!(
                        "wallet {} holds {coin}, an asset without a mark: its read is not used, the dexes are read again and the wallet after them (logged once per asset)",
                        job.address
                    );
                }
                lock(&self.schedule).read_deferred(job, now + INCOMPLETE_RETRY);
                return;
            }
            // Cut short by the stop (no retry was sent): not the wallet's
            // failure, and its entry is left as it was, so the wallet is
            // due after the restart. (A read that failed on its own just
            // as the stop came is taken alike: it is read again then too.)
            Err(_) if self.stopped() => return,
            Err(e) => {
                self.stats.reads_failed.fetch_add(1, Ordering::Relaxed);
                log::warn!("wallet {} failed after retries: {e}", job.address);
                lock(&self.schedule).read_failed(job, now);
                return;
            }
        };
        self.stats.reads_ok.fetch_add(1, Ordering::Relaxed);
        let position_value: BigDecimal = obs.positions.iter().map(|p| &p.position_value.0).sum();
        let (label, tags) = lock(&self.schedule)
            .get(&job.address)
            .map(|t| (t.label().map(str::to_owned), t.tags().to_vec()))
            .unwrap_or_default();
        let (account_value, held, active_dexes) = (
            obs.account_value.clone(),
            obs.positions.len(),
            obs.active_dexes.clone(),
        );
        let applied = lock(&self.book).apply_read(&job.address, label, tags, obs, |a| {
            self.store.wallet_history(a)
        });
        match applied {
            Ok(Applied::Unchanged) => {
                self.stats.reads_unchanged.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Applied::Pending) => {}
            Err(e) => {
                self.stats.reads_failed.fetch_add(1, Ordering::Relaxed);
                log::warn!("wallet {}: its read is not used: {e}", job.address);
                lock(&self.schedule).read_failed(job, now);
                return;
            }
        }
        lock(&self.schedule).read_ok(
            job,
            &account_value,
            &Decimal(position_value),
            held,
            &active_dexes,
            now,
        );
    }

    /// Hourly candles of every market, spread over the hour and one request
    /// every 10 s at most, so they never take more than 120 weight a minute
    /// from the wallets (about 67 with 200 markets). The pause follows every
    /// request, whatever it returned; only a market already up to date (no
    /// request) goes on at once.
    fn candle_loop(&self, fetcher: &Fetcher<'_>) {
        let mut fetched: HashMap<String, i64> = HashMap::new();
        while !self.stopped() {
            let symbols = self
                .by_interest
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let now = now_seconds();
            let hour = now.unix_timestamp() / 3600;
            // Spread over the hour: one request every 10 s at most, fewer
            // when there are fewer than 360 markets.
            let pace = Duration::from_secs((3600 / symbols.len().max(1) as u64).max(10));
            let mut requested = false;
            for symbol in symbols.iter() {
                if self.stopped() {
                    return;
                }
                if fetched.get(symbol) == Some(&hour) {
                    continue;
                }
                fetched.insert(symbol.clone(), hour);
                match fetch_new_candles(fetcher, &self.store, symbol, now) {
                    Ok(CandleFetch::UpToDate) => continue,
                    Ok(CandleFetch::Fetched(c)) if c.is_empty() => {}
                    Ok(CandleFetch::Fetched(c)) => lock(&self.candles)
                        .entry(symbol.clone())
                        .or_default()
                        .extend(c.into_iter().map(|c| (c.time, c))),
                    Err(CandleError::Store(e)) => {
                        log::warn!("candles of {symbol}: {e}");
                        fetched.remove(symbol);
                        continue;
                    }
                    // The stop cut it short (nothing was sent): done.
                    Err(CandleError::Source(_)) if self.stopped() => return,
                    Err(CandleError::Source(e)) => {
                        log::warn!("candles of {symbol} failed: {e}");
                        fetched.remove(symbol);
                    }
                }
                requested = true;
                self.stats.candle_requests.fetch_add(1, Ordering::Relaxed);
                self.nap(pace);
            }
            if !requested {
                self.nap(Duration::from_secs(10));
            }
        }
    }

    fn main_loop(&self, fetcher: &Fetcher<'_>, rx: Receiver<Discovery>) {
        let mut next_publish = Instant::now();
        let mut last_meta = Instant::now();
        let mut next_save = Instant::now();
        while !self.stopped() {
            let now = now_seconds();
            {
                let mut schedule = lock(&self.schedule);
                for d in rx.try_iter() {
                    if schedule.discover(d, now) {
                        self.stats.discovered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            if Instant::now() >= next_save {
                next_save = Instant::now() + Duration::from_secs(1);
                self.save_registry();
                // The registry's, the states' and the history points'
                // journals, merged into their tables once they hold a
                // merge's worth (between publishes: this thread makes
                // them).
                let (merging, cpu_before) = (Instant::now(), thread_cpu());
                match self.store.merge_journals_if_due() {
                    Ok(true) => log::info!(
                        "journals merged into the registry, scan states or history points in {} ms, CPU {} ms",
                        merging.elapsed().as_millis(),
                        cpu_ms_since(cpu_before)
                    ),
                    Ok(false) => {}
                    Err(e) => log::warn!("journals not merged (tried again in a second): {e}"),
                }
            }
            // A read met an asset without a mark: read the dexes again
            // (at most once a minute).
            let since = last_meta.elapsed();
            let stale = self.meta_stale.load(Ordering::Relaxed) && since >= META_STALE_AFTER;
            if since >= self.cfg.meta_every || stale {
                self.meta_stale.store(false, Ordering::Relaxed);
                last_meta = Instant::now();
                match self.refresh_meta(fetcher) {
                    Err(_) if self.stopped() => {}
                    Err(e) => log::warn!("dexes not refreshed: {e}"),
                    Ok(()) => {}
                }
            }
            if Instant::now() >= next_publish {
                let started = Instant::now();
                let left = self.publish(fetcher, &mut lock(&self.publisher));
                self.maintain_store();
                // Reads left over by a full publish (an own node's first
                // minutes) go in the next one as soon as this one has had
                // its own time again (at least a second): the readers keep
                // half the time, and the exchange is served in minutes, not
                // one publish's worth at each `publish_every`.
                let gap = if left {
                    started.elapsed().max(CATCH_UP_GAP)
                } else {
                    self.cfg.publish_every
                };
                next_publish = Instant::now() + gap.min(self.cfg.publish_every);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What the publishes leave to be done between them (this thread makes
    /// both): deletes the wallet rows no kept version can see, once the
    /// rows appended since the last time are worth it, and applies the
    /// history's retention (an hour of points leaving it is copied into
    /// the hourly tier).
    fn maintain_store(&self) {
        let (compacting, cpu_before) = (Instant::now(), thread_cpu());
        match self.store.compact_wallet_rows_if_due() {
            Ok(Some(deleted)) => log::info!(
                "wallet rows compacted: {deleted} rows no kept version sees deleted in {} ms, CPU {} ms",
                compacting.elapsed().as_millis(),
                cpu_ms_since(cpu_before)
            ),
            Ok(None) => {}
            Err(e) => {
                log::warn!("wallet rows not compacted (tried again after the next publish): {e}")
            }
        }
        let (pruning, cpu_before) = (Instant::now(), thread_cpu());
        match self.store.prune_history(OffsetDateTime::now_utc()) {
            Ok(()) if pruning.elapsed() >= Duration::from_millis(100) => log::info!(
                "history past its retention pruned in {} ms, CPU {} ms",
                pruning.elapsed().as_millis(),
                cpu_ms_since(cpu_before)
            ),
            Ok(()) => {}
            Err(e) => log::warn!("history not pruned (tried again after the next publish): {e}"),
        }
    }

    /// Saves up to [`REGISTRY_PER_SAVE`] changed registry entries; whether
    /// they were saved.
    fn save_registry(&self) -> bool {
        let unsaved = lock(&self.schedule).take_unsaved_up_to(REGISTRY_PER_SAVE);
        if let Err(e) = self.store.save_registry(&unsaved) {
            self.stats.registry_failures.fetch_add(1, Ordering::Relaxed);
            log::warn!("registry not saved (retried): {e}");
            lock(&self.schedule).mark_unsaved(&unsaved);
            return false;
        }
        true
    }

    fn set_marks(&self, quotes: &[Quote]) {
        let delisted: HashSet<String> = self
            .meta
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .universes
            .values()
            .flatten()
            .filter(|a| a.is_delisted == Some(true))
            .map(|a| a.name.clone())
            .collect();
        *self.marks.write().unwrap_or_else(|p| p.into_inner()) =
            Arc::new(Marks::new(quotes, delisted));
        *self.by_interest.write().unwrap_or_else(|p| p.into_inner()) = by_interest(quotes);
    }

    /// One publish; whether it left ready reads for the next one
    /// ([`Published::left`]).
    fn publish(&self, fetcher: &Fetcher<'_>, publisher: &mut Publisher) -> bool {
        let started = Instant::now();
        let cpu_before = thread_cpu();
        let quotes = match self.quotes(fetcher) {
            Ok(q) => q,
            // Its market context needed requests, and the stop let none
            // go: not a failure (its reads are read again after a restart).
            Err(e) if self.stopped() => {
                log::info!("publish not made: stopped while reading its market context ({e})");
                return false;
            }
            Err(e) => {
                self.stats.publish_failures.fetch_add(1, Ordering::Relaxed);
                log::error!("publish skipped (the served data is unchanged): market context: {e}");
                return false;
            }
        };
        // Taken once the quotes are in (they may take requests), and rounded
        // up to the whole second: no read it publishes is later than the
        // version's time, nor any position event it writes.
        let now = next_second(OffsetDateTime::now_utc());
        self.set_marks(&quotes);
        let candles: Vec<(String, Vec<Candle>)> = std::mem::take(&mut *lock(&self.candles))
            .into_iter()
            .map(|(symbol, by_time)| (symbol, by_time.into_values().collect()))
            .collect();
        let (registry, freshness) = {
            let mut schedule = lock(&self.schedule);
            let freshness = registry_freshness(&schedule, now);
            (schedule.take_unsaved_up_to(REGISTRY_PER_SAVE), freshness)
        };
        let input = PublishInput {
            now,
            quotes,
            candles,
            registry,
            freshness,
        };
        let result = publisher.publish(&self.store, &self.book, &input);
        match &result {
            Ok(p) if p.extras_written => {}
            // The database refused them: the candles are fetched again from
            // the last one stored (trying them at every publish would cost
            // three tries each time); the registry is saved on its own.
            Ok(_) => {
                log::warn!(
                    "{} candle batches dropped: the database refused them (they are fetched again)",
                    input.candles.len()
                );
                lock(&self.schedule).mark_unsaved(&input.registry);
            }
            // Kept for the next publish; candles fetched meanwhile are newer.
            Err(_) => {
                lock(&self.schedule).mark_unsaved(&input.registry);
                let mut waiting = lock(&self.candles);
                for (symbol, candles) in input.candles {
                    let by_time = waiting.entry(symbol).or_default();
                    for c in candles {
                        by_time.entry(c.time).or_insert(c);
                    }
                }
            }
        }
        self.stats
            .held_back
            .store(publisher.held_back().len() as u64, Ordering::Relaxed);
        match result {
            Ok(Published {
                version,
                changed,
                removed,
                wallets,
                positions,
                pending,
                left,
                ..
            }) => {
                self.stats.publishes.fetch_add(1, Ordering::Relaxed);
                self.stats.last_publish_at.store(
                    OffsetDateTime::now_utc().unix_timestamp(),
                    Ordering::Relaxed,
                );
                let (requests, weight) = fetcher.spent();
                let ws = &self.ws;
                log::info!(
                    "published data version {version}: {wallets} wallets ({changed} changed, {removed} removed, {pending} reads pending), {positions} positions; registry {}, reads {} ok {} failed; websocket {} trades, {} bad messages, {} reconnects; {requests} requests, weight {weight}; {} ms, CPU {} ms",
                    lock(&self.schedule).len(),
                    self.stats.reads_ok.load(Ordering::Relaxed),
                    self.stats.reads_failed.load(Ordering::Relaxed),
                    ws.trades.load(Ordering::Relaxed),
                    ws.bad_messages.load(Ordering::Relaxed),
                    ws.disconnects.load(Ordering::Relaxed),
                    started.elapsed().as_millis(),
                    cpu_ms_since(cpu_before)
                );
                left > 0
            }
            Err(e) => {
                self.stats.publish_failures.fetch_add(1, Ordering::Relaxed);
                log::error!("publish not applied (the served data is unchanged): {e}");
                false
            }
        }
    }
}

/// The freshness of every registry entry as of `now`, the coverage report's
/// `wallets`. A pass over a million entries at each publish, under the
/// schedule's lock: the ages are counted on the entries' integer instants.
pub fn registry_freshness(schedule: &Schedule, now: OffsetDateTime) -> WalletFreshness {
    let now = Moment::of(now);
    freshness_of_ages(schedule.iter().map(|t| {
        (
            registry_class(&t.entry),
            t.entry.last_read_at.map(|at| at.whole_seconds_until(now)),
        )
    }))
}

/// The size class of a registry entry: by the account value of its last
/// read, else by its leaderboard account value, else `shrimp`.
fn registry_class(e: &Entry) -> SizeClass {
    let value = if e.last_read_at.is_some() {
        e.account_value.as_ref()
    } else {
        e.leaderboard_value.as_ref()
    };
    value.map_or(SizeClass::Shrimp, compact_size_class)
}

/// The quotes of a dex's listed assets (its delisted ones have none).
fn quotes_of<'a>(
    universe: &'a [AssetMeta],
    ctxs: &'a [AssetCtx],
) -> impl Iterator<Item = Quote> + 'a {
    universe
        .iter()
        .zip(ctxs)
        .filter(|(a, _)| a.is_delisted != Some(true))
        .map(|(a, c)| mapping::quote(a, c))
}

/// CPU time of the calling thread so far, in ns (`/proc/thread-self/schedstat`),
/// where the system has it: a publish's CPU, its commit included (SQLite
/// runs in the thread), without the waits for the exchange.
fn thread_cpu() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// This thread's CPU since `before` (a [`thread_cpu`] reading), in whole
/// milliseconds, for a log line (`?` where it cannot be read).
fn cpu_ms_since(before: Option<u64>) -> String {
    thread_cpu()
        .zip(before)
        .map_or("?".to_owned(), |(after, before)| {
            (after.saturating_sub(before) / 1_000_000).to_string()
        })
}

/// `t` rounded up to the whole second.
fn next_second(t: OffsetDateTime) -> OffsetDateTime {
    let whole = t.replace_nanosecond(0).expect("0 is a valid nanosecond");
    if whole < t {
        whole + time::Duration::SECOND
    } else {
        whole
    }
}
