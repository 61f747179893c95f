//! Publishing: the book's reads since the previous data version, written as
//! a new version in one transaction.
//!
//! A publish never halts on a bad row. When the database refuses a publish
//! for what it writes (not for being unreachable), the publisher looks for
//! the wallet responsible by halving the reads it includes; the wallet it
//! finds is held back (served as last published, retried later, logged with
//! the cause) and the others are published. Another writer's version (a
//! `scan` on the same database) is taken as the new base: the tracker goes
//! on from it instead of applying changes to a version it did not see.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Mutex;

use market_engine::coverage::network_coverage;
use market_engine::{materialize, AggregateError, Quote, ScanInput};
use market_model::{
    Candle, Coverage, Interval, LiquidityDay, MarketPosition, WalletFreshness, NETWORK_ID,
};
use market_store::{
    CandleBatch, PublishWrite, RegistryEntry, Store, StoreError, TrackedPosition, WalletScanState,
};
use time::{Duration, OffsetDateTime};

use crate::live::{Book, LiveWallet};

/// What the previous publish wrote: the base the next one's changes are
/// computed against.
#[derive(Clone, Debug, Default)]
pub struct Base {
    /// Its data version (0 before the first).
    pub version: i64,
    /// The wallets it served.
    pub served: HashSet<String>,
    /// The markets it served.
    pub symbols: HashSet<String>,
    /// Its `current` liquidity days (frozen by the first publish of a new UTC day).
    pub days: Vec<LiquidityDay>,
    /// When it was observed.
    pub observed_at: Option<OffsetDateTime>,
}

/// What a publish needs besides the book.
#[derive(Debug)]
pub struct PublishInput {
    /// The publish time.
    pub now: OffsetDateTime,
    /// Quotes of every market.
    pub quotes: Vec<Quote>,
    /// Hourly candles fetched since the previous publish, by symbol.
    pub candles: Vec<(String, Vec<Candle>)>,
    /// Registry entries to save with the version.
    pub registry: Vec<RegistryEntry>,
    /// Freshness of every tracked wallet.
    pub freshness: WalletFreshness,
}

/// A publish that wrote nothing, and why.
#[derive(Debug, thiserror::Error)]
#[error("{cause}")]
pub struct PublishError {
    /// The cause.
    pub cause: String,
}

/// What one publish wrote.
#[derive(Clone, Copy, Debug)]
pub struct Published {
    /// The new data version.
    pub version: i64,
    /// Wallets written.
    pub changed: usize,
    /// Wallets no longer served.
    pub removed: usize,
    /// Wallets served.
    pub wallets: usize,
    /// Positions served.
    pub positions: usize,
    /// Reads held back (their wallets served as last published).
    pub held_back: usize,
    /// Whether the candles and registry entries of the input were written
    /// (when not, the caller keeps them for a later publish).
    pub extras_written: bool,
}

/// A wallet whose rows a publish could not write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldBack {
    /// When it is tried again.
    pub until: OffsetDateTime,
    /// Publishes it failed in a row.
    pub failures: u32,
    /// Why the database refused it.
    pub cause: String,
}

/// The longest a held-back wallet waits before it is tried again.
const MAX_HOLD: Duration = Duration::hours(1);

/// Publishes the book: its base, and the wallets it holds back.
#[derive(Debug)]
pub struct Publisher {
    base: Base,
    /// How long a wallet held back waits before it is tried again; the wait
    /// doubles with each publish it fails, up to an hour.
    pub retry_after: Duration,
    held_back: BTreeMap<String, HeldBack>,
}

/// Why one attempt wrote nothing.
#[derive(Debug, thiserror::Error)]
enum AttemptError {
    #[error("aggregation failed: {0}")]
    Aggregate(#[from] AggregateError),
    #[error("database: {0}")]
    Store(#[from] StoreError),
}

impl AttemptError {
    /// Whether leaving part of the write out can help (see [`StoreError::is_data`]).
    fn is_data(&self) -> bool {
        match self {
            AttemptError::Aggregate(_) => true,
            AttemptError::Store(e) => e.is_data(),
        }
    }
}

/// What one attempt wrote: its counts, the base it makes, and the reads it
/// published.
type Written = (Published, Base, Vec<(String, u64, LiveWallet)>);

impl Publisher {
    /// A publisher whose next publish goes on from `base`.
    pub fn new(base: Base) -> Publisher {
        Publisher {
            base,
            retry_after: Duration::minutes(5),
            held_back: BTreeMap::new(),
        }
    }

    /// What the last publish wrote.
    pub fn base(&self) -> &Base {
        &self.base
    }

    /// The wallets held back now, by address.
    pub fn held_back(&self) -> &BTreeMap<String, HeldBack> {
        &self.held_back
    }

    /// Writes the book's reads as a new data version on top of the last
    /// one. Wallets whose rows the database refuses are held back; the
    /// publish fails only when the database is unreachable, another writer
    /// committed meanwhile, or the version fails without any wallet.
    pub fn publish(
        &mut self,
        store: &Store,
        book: &Mutex<Book>,
        input: &PublishInput,
    ) -> Result<Published, PublishError> {
        let fail = |cause: String| PublishError { cause };
        let latest = store
            .latest_snapshot()
            .map_err(|e| fail(format!("database: {e}")))?;
        if latest.as_ref().map_or(0, |m| m.version) != self.base.version {
            let meta = latest.expect("a version exists when it differs from the base");
            let (stored, base) =
                Book::restore(store).map_err(|e| fail(format!("database: {e}")))?;
            log::warn!(
                "data version {} was written by {:?}, not by this tracker: going on from it",
                meta.version,
                meta.source
            );
            lock(book).rebase(stored);
            self.base = base;
        }
        let mut include: BTreeSet<String> = lock(book)
            .pending
            .keys()
            .filter(|a| self.held_back.get(*a).is_none_or(|h| h.until <= input.now))
            .cloned()
            .collect();
        let mut extras = true;
        loop {
            let error = match self.attempt(store, book, &include, extras, input) {
                Ok((mut published, base, written)) => {
                    for (address, _, _) in &written {
                        self.held_back.remove(address);
                    }
                    lock(book).published(written);
                    self.base = base;
                    published.held_back = lock(book).pending.len();
                    return Ok(published);
                }
                Err(e) if !e.is_data() => return Err(fail(e.to_string())),
                Err(e) => e,
            };
            if include.len() > 1 {
                // Halve the reads until the one the database refuses is alone.
                let keep = include.len() / 2;
                let rest = include.split_off(&include.iter().nth(keep).expect("len > 1").clone());
                log::warn!(
                    "publish refused ({error}): trying {} of {} wallets",
                    include.len(),
                    include.len() + rest.len()
                );
            } else if let Some(address) = include.pop_first() {
                let failures = self.held_back.get(&address).map_or(1, |h| h.failures + 1);
                let wait = self.retry_after * 2i32.pow(failures.min(16) - 1);
                let held = HeldBack {
                    until: input.now + wait.min(MAX_HOLD),
                    failures,
                    cause: error.to_string(),
                };
                log::error!(
                    "wallet {address} held back from publishing (it stays as last published; tried again at {}): {error}",
                    held.until
                );
                self.held_back.insert(address, held);
            } else if extras {
                log::warn!("publish refused without any wallet ({error}): trying without candles and registry entries");
                extras = false;
            } else {
                return Err(fail(error.to_string()));
            }
        }
    }

    /// One try: the reads of `include` (the other pending reads held back),
    /// with the candles and registry entries when `extras`.
    fn attempt(
        &self,
        store: &Store,
        book: &Mutex<Book>,
        include: &BTreeSet<String>,
        extras: bool,
        input: &PublishInput,
    ) -> Result<Written, AttemptError> {
        let base = &self.base;
        let now = input.now;
        let symbols: HashSet<&str> = input.quotes.iter().map(|q| q.symbol.as_str()).collect();
        let quoted = |s: &str| symbols.contains(s);
        let (inputs, positions, rewrite, written, states, tracked) = {
            let book = lock(book);
            let mut inputs = Vec::new();
            let mut positions = Vec::new();
            // Wallets holding an asset that is gone must be rewritten without it.
            let mut rewrite = HashSet::new();
            for w in book.entries(include) {
                let vanished = |s: &str| !quoted(s) && base.symbols.contains(s);
                if w.positions.iter().any(|p| vanished(&p.symbol)) {
                    rewrite.insert(w.input.address.clone());
                }
                if !w.served(&quoted) {
                    continue;
                }
                inputs.push(w.input.clone());
                positions.extend(w.positions.iter().filter(|p| quoted(&p.symbol)).cloned());
            }
            let written: Vec<(String, u64, LiveWallet)> = include
                .iter()
                .filter_map(|a| {
                    let pending = book.pending.get(a)?;
                    Some((a.clone(), pending.read, book.wallets.get(a)?.clone()))
                })
                .collect();
            let states: Vec<WalletScanState> = include
                .iter()
                .filter_map(|a| book.states.get(a).cloned())
                .collect();
            let tracked: Vec<TrackedPosition> = include
                .iter()
                .flat_map(|a| book.tracked.get(a).into_iter().flatten().cloned())
                .collect();
            (inputs, positions, rewrite, written, states, tracked)
        };
        let materialized = materialize(
            NETWORK_ID,
            ScanInput {
                observed_at: now,
                quotes: input.quotes.clone(),
                wallets: inputs,
                positions,
            },
        )?;
        let served: HashSet<String> = materialized
            .wallets
            .iter()
            .map(|w| w.address.clone())
            .collect();
        let changed_wallets: Vec<_> = materialized
            .wallets
            .iter()
            .filter(|w| {
                include.contains(&w.address)
                    || rewrite.contains(&w.address)
                    || !base.served.contains(&w.address)
            })
            .cloned()
            .collect();
        let changed: HashSet<&str> = changed_wallets.iter().map(|w| w.address.as_str()).collect();
        let changed_positions: Vec<MarketPosition> = materialized
            .positions
            .iter()
            .filter(|x| changed.contains(x.address.as_str()))
            .cloned()
            .collect();
        let removed: Vec<String> = base.served.difference(&served).cloned().collect();
        // The first publish of a new UTC day freezes the previous day's levels.
        let frozen: Vec<LiquidityDay> = match base.observed_at {
            Some(t) if t.date() < now.date() => base
                .days
                .iter()
                .cloned()
                .map(|mut d| {
                    d.coverage = Coverage::EndOfDay;
                    d
                })
                .collect(),
            _ => Vec::new(),
        };
        let batches: Vec<CandleBatch<'_>> = input
            .candles
            .iter()
            .filter(|_| extras)
            .map(|(s, c)| CandleBatch {
                symbol: s,
                interval: Interval::H1,
                candles: c,
            })
            .collect();
        let registry: &[RegistryEntry] = if extras { &input.registry } else { &[] };
        let coverage = network_coverage(
            now,
            &materialized.markets,
            &materialized.positions,
            input.freshness.clone(),
        );
        let version = store.publish(
            &PublishWrite {
                source: "track",
                base_version: base.version,
                observed_at: now,
                markets: &materialized.markets,
                cohorts: &materialized.cohorts,
                current_days: &materialized.current_days,
                wallet_count: materialized.wallets.len(),
                position_count: materialized.positions.len(),
                changed_wallets: &changed_wallets,
                changed_positions: &changed_positions,
                removed_wallets: &removed,
                frozen_days: &frozen,
                candles: &batches,
                wallet_states: &states,
                tracked: &tracked,
                registry,
                freshness: &input.freshness,
                coverage: &coverage,
            },
            &mut |_, _, _| {},
        )?;
        let published = Published {
            version,
            changed: changed_wallets.len(),
            removed: removed.len(),
            wallets: materialized.wallets.len(),
            positions: materialized.positions.len(),
            held_back: 0,
            extras_written: extras,
        };
        let next = Base {
            version,
            served,
            symbols: input.quotes.iter().map(|q| q.symbol.clone()).collect(),
            days: materialized.current_days,
            observed_at: Some(now),
        };
        Ok((published, next, written))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
