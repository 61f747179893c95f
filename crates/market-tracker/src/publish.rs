//! Publishing: the book's reads since the previous data version, written as
//! a new version in one transaction.
//!
//! A publish never halts on a bad row. When the database refuses a publish
//! for what it writes (not for being unreachable), the publisher finds the
//! wallets responsible by trying halves of the reads in transactions it
//! rolls back; those are held back (served as last published, retried later,
//! logged with the cause) and one version publishes the others. Another writer's version (a
//! `scan` on the same database) is taken as the new base: the tracker goes
//! on from it instead of applying changes to a version it did not see.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};

use market_engine::days::frozen_days;
use market_engine::{
    materialize_wallet, AggregateError, Quote, Tally, TallyEdit, Unquoted, VersionChanges,
};
use market_model::{
    Candle, Interval, LiquidityDay, MarketPosition, Wallet, WalletFreshness, NETWORK_ID,
};
use market_store::{
    CandleBatch, Previous, PublishWrite, RegistryEntry, Store, StoreError, TrackedPosition,
    WalletScanState,
};
use time::{Duration, OffsetDateTime};

use crate::address::Address;
use crate::live::{Base, Book, LiveWallet, Written};

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
    /// Reads still pending after it: held back (their wallets served as
    /// last published), or made while it was written.
    pub pending: usize,
    /// Reads of served wallets it left for the next publish, past
    /// [`Publisher::max_reads`]: the tracker then publishes again soon,
    /// not a whole `publish_every` later.
    pub left: usize,
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
    /// The most reads of served wallets (served before or after the read)
    /// one publish writes: the oldest first, the others wait for the next
    /// one. Reads of wallets served neither before nor after write a scan
    /// state only, and are all written.
    pub max_reads: usize,
    held_back: BTreeMap<Address, HeldBack>,
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

impl Publisher {
    /// A publisher whose next publish goes on from `base`.
    pub fn new(base: Base) -> Publisher {
        Publisher {
            base,
            retry_after: Duration::minutes(5),
            max_reads: 25_000,
            held_back: BTreeMap::new(),
        }
    }

    /// What the last publish wrote.
    pub fn base(&self) -> &Base {
        &self.base
    }

    /// The wallets held back now, by address.
    pub fn held_back(&self) -> &BTreeMap<Address, HeldBack> {
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
            let (stored, base) =
                Book::restore(store).map_err(|e| fail(format!("database: {e}")))?;
            match &latest {
                Some(meta) => log::warn!(
                    "data version {} was written by {:?}, not by this tracker: going on from it",
                    meta.version,
                    meta.source
                ),
                None => log::warn!("the database holds no data version any more: starting over"),
            }
            lock(book).rebase(stored);
            self.base = base;
        }
        let mut include = {
            let book = lock(book);
            // A wallet held back whose read is gone (superseded by another
            // writer's version) is no longer held.
            self.held_back.retain(|a, _| book.pending.contains_key(a));
            // Reads made from now on (while this publish is written) wait
            // for the next one: none is later than the version's time.
            let before = book.next_read();
            let symbols: HashSet<&str> = input.quotes.iter().map(|q| q.symbol.as_str()).collect();
            let quoted = |s: &str| symbols.contains(s);
            // Reads of wallets served neither before nor after (a first
            // read of an empty wallet, a dex read for the first time) write
            // a scan state and nothing served: they are all written.
            let (mut ready, unserved): (Vec<_>, Vec<_>) = book
                .pending
                .iter()
                .filter(|(_, p)| p.read < before)
                .filter(|(a, _)| self.held_back.get(*a).is_none_or(|h| h.until <= input.now))
                .map(|(a, p)| (p.read, a))
                .partition(|(_, a): &(u64, &Address)| {
                    self.base.served.contains(*a)
                        || book.wallets.get(*a).is_some_and(|w| w.served(&quoted))
                });
            // Of the others, the oldest reads first, at most `max_reads`:
            // the rest wait for the next publish (an own node reads a
            // hundred thousand wallets in its first minute; one
            // transaction of them all would not fit this process).
            let left = ready.len().saturating_sub(self.max_reads);
            if left > 0 {
                ready.select_nth_unstable(self.max_reads);
                ready.truncate(self.max_reads);
            }
            let wallets = ready
                .into_iter()
                .chain(unserved)
                .map(|(_, a)| a.clone())
                .collect();
            Selection {
                wallets,
                before,
                left,
            }
        };
        let error = match self.attempt(store, book, &include, true, input, true) {
            Ok(published) => return Ok(published),
            Err(e) if !e.is_data() => return Err(fail(e.to_string())),
            Err(e) => e,
        };
        // The database refused this version for what it writes: find the
        // wallets it refuses by trying halves of the reads (rolled back),
        // hold them back, and publish the rest.
        log::warn!(
            "publish refused ({error}): looking for the wallets at fault among {}",
            include.wallets.len()
        );
        for (address, cause) in self.refused_wallets(store, book, &include, input) {
            let failures = self.held_back.get(&address).map_or(1, |h| h.failures + 1);
            let wait = self.retry_after * 2i32.pow(failures.min(16) - 1);
            let held = HeldBack {
                until: input.now + wait.min(MAX_HOLD),
                failures,
                cause,
            };
            log::error!(
                "wallet {address} held back from publishing (it stays as last published; tried again at {}): {}",
                held.until,
                held.cause
            );
            include.wallets.remove(&address);
            self.held_back.insert(address, held);
        }
        match self.attempt(store, book, &include, true, input, true) {
            Ok(published) => return Ok(published),
            Err(e) if !e.is_data() => return Err(fail(e.to_string())),
            Err(e) => log::warn!(
                "publish refused without the wallets at fault ({e}): trying without candles and registry entries"
            ),
        }
        self.attempt(store, book, &include, false, input, true)
            .map_err(|e| fail(e.to_string()))
    }

    /// The wallets of `include` whose reads the database refuses, with the
    /// cause: halves of the reads are tried (and rolled back) until each
    /// refused one is alone.
    fn refused_wallets(
        &mut self,
        store: &Store,
        book: &Mutex<Book>,
        include: &Selection,
        input: &PublishInput,
    ) -> Vec<(Address, String)> {
        let part = |wallets| Selection {
            wallets,
            before: include.before,
            left: include.left,
        };
        // A version refused without any read is not a read's fault: no
        // wallet is held back for it.
        if self
            .attempt(store, book, &part(BTreeSet::new()), false, input, false)
            .is_err()
        {
            return Vec::new();
        }
        let mut refused = Vec::new();
        let mut sets = vec![include.wallets.clone()];
        while let Some(mut set) = sets.pop() {
            let result = self.attempt(store, book, &part(set.clone()), false, input, false);
            match result {
                Ok(_) => {}
                Err(e) if !e.is_data() => break,
                Err(e) if set.len() == 1 => {
                    refused.push((set.pop_first().expect("one"), e.to_string()));
                }
                Err(_) => {
                    let half = set.iter().nth(set.len() / 2).expect("len > 1").clone();
                    let upper = set.split_off(&half);
                    sets.extend([upper, set]);
                }
            }
        }
        refused
    }

    /// One try: the reads `include` selects (the other pending reads held
    /// back), with the candles and registry entries when `extras`; committed
    /// when `commit` (and the publisher's state updated), else rolled back.
    fn attempt(
        &mut self,
        store: &Store,
        book: &Mutex<Book>,
        include: &Selection,
        extras: bool,
        input: &PublishInput,
        commit: bool,
    ) -> Result<Published, AttemptError> {
        let computing = std::time::Instant::now();
        let changes = {
            let book = lock(book);
            Changes::compute(&book, &mut self.base, &include.in_book(&book), input)?
        };
        log::debug!(
            "changes of {} wallets computed in {:.1} ms",
            changes.changes.wallets.len(),
            computing.elapsed().as_secs_f64() * 1e3
        );
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
        let write = PublishWrite {
            source: "track",
            base_version: self.base.version,
            changes: &changes.changes,
            wallet_count: changes.tally.tally().wallets(),
            position_count: changes.tally.tally().positions(),
            frozen_days: &changes.frozen,
            candles: &batches,
            wallet_states: &changes.states,
            tracked: &changes.tracked,
            newly_read: &changes.newly_read,
            previous: changes.previous.as_ref().map(|p| Previous {
                wallets: &p.wallets,
                positions: &p.positions,
            }),
            registry: if extras { &input.registry } else { &[] },
            freshness: &input.freshness,
        };
        let result = if commit {
            store.publish(&write, &mut |_, _, _| {}).map(Some)
        } else {
            store.try_publish(&write).map(|()| None)
        };
        drop(batches);
        let version = match result {
            Ok(Some(version)) => version,
            result => {
                let tried = changes.counts(0, extras);
                // Not committed: the base's aggregates go back as they were.
                self.base.tally = changes.tally.undo();
                return result.map(|_| tried).map_err(AttemptError::from);
            }
        };
        let mut published = changes.counts(version, extras);
        for w in &changes.written {
            self.held_back.remove(&w.address);
        }
        let mut book = lock(book);
        book.published(changes.written);
        published.pending = book.pending.len();
        published.left = include.left;
        self.base.commit(
            version,
            input.now,
            &input.quotes,
            changes.changes,
            changes.tally.keep(),
        );
        Ok(published)
    }
}

/// The reads one publish may write: the pending reads of `wallets`
/// numbered below `before` (reads made once the publish began wait for the
/// next one).
struct Selection {
    wallets: BTreeSet<Address>,
    before: u64,
    /// Ready reads left out by `max_reads`.
    left: usize,
}

impl Selection {
    /// The selected wallets whose pending read is still below `before`: a
    /// wallet read again since the publish began waits whole.
    fn in_book(&self, book: &Book) -> BTreeSet<Address> {
        self.wallets
            .iter()
            .filter(|a| book.pending.get(*a).is_some_and(|p| p.read < self.before))
            .cloned()
            .collect()
    }
}

/// What a publish writes over its base: the changes of the new version
/// (its per-market figures whole, the wallets it changes) and the tally
/// they were rendered from. Computed from the book and the base alone,
/// without the database.
struct Changes {
    /// The new version's changes over the base.
    changes: VersionChanges,
    /// The aggregates of every wallet the new version serves.
    tally: Aggregates,
    /// The base's days, frozen by the first publish of a UTC day.
    frozen: Vec<LiquidityDay>,
    /// Scan states of the wallets whose reads it publishes.
    states: Vec<WalletScanState>,
    /// Their followed positions.
    tracked: Vec<TrackedPosition>,
    /// The reads it publishes.
    written: Vec<Written>,
    /// Per wallet written, the dexes it reads that its published
    /// observation did not cover.
    newly_read: Vec<(String, Vec<String>)>,
    /// What the base served of the wallets it writes, when the changes
    /// were computed from the base's tally (else the store reads it).
    previous: Option<Served>,
}

/// Wallets as a version serves them: their addresses, and their positions.
#[derive(Default)]
struct Served {
    wallets: Vec<String>,
    positions: Vec<MarketPosition>,
}

impl Changes {
    /// The changes that publish the reads of `include` over `base`. They
    /// cost what changed: the base's tally, taken from it, takes out what
    /// each wallet read served and adds what it serves now (the caller
    /// gives it back, changed or undone, whether the version is committed
    /// or not). Only a base without a tally (the first publish, another
    /// writer's version) or a change of the quoted markets materializes
    /// every served wallet.
    fn compute(
        book: &Book,
        base: &mut Base,
        include: &BTreeSet<Address>,
        input: &PublishInput,
    ) -> Result<Changes, AggregateError> {
        let now = input.now;
        let same_markets = base
            .tally
            .as_ref()
            .is_some_and(|t| t.has_symbols(input.quotes.iter().map(|q| q.symbol.as_str())));
        let (changes, tally, previous) = match base.tally.take() {
            Some(tally) if same_markets => {
                let mut edit = tally.edit();
                match incremental(book, base, &mut edit, include, input) {
                    Ok(Some((changes, previous))) => {
                        (changes, Aggregates::Edited(edit), Some(previous))
                    }
                    Ok(None) => {
                        log::error!(
                            "the running aggregates do not match the last publish: materializing every wallet"
                        );
                        let (changes, tally) = whole(book, base, include, input)?;
                        (changes, Aggregates::New(tally), None)
                    }
                    Err(e) => {
                        base.tally = edit.undo();
                        return Err(e);
                    }
                }
            }
            _ => {
                let (changes, tally) = whole(book, base, include, input)?;
                (changes, Aggregates::New(tally), None)
            }
        };
        let mut written = Vec::new();
        let mut newly_read = Vec::new();
        for a in include {
            let (Some(pending), Some(wallet)) = (book.pending.get(a), book.wallets.get(a)) else {
                continue;
            };
            let covered = book.covered(a);
            // Observed before (its published copy, or its scan state when the
            // book let go of a wallet that held nothing): a position on a dex
            // read for the first time is a first observation, not an opening.
            if !pending.published_covered.is_empty() {
                let new: Vec<String> = covered
                    .difference(&pending.published_covered)
                    .cloned()
                    .collect();
                if !new.is_empty() {
                    newly_read.push((a.to_string(), new));
                }
            }
            written.push(Written {
                address: a.clone(),
                read: pending.read,
                wallet: Arc::clone(wallet),
                covered,
            });
        }
        let mut states: Vec<WalletScanState> = Vec::new();
        let mut tracked: Vec<TrackedPosition> = Vec::new();
        for a in include {
            if let Some(kept) = book.states.get(a) {
                let address = a.to_string();
                states.push(kept.state(&address));
                tracked.extend(kept.tracked(&address));
            }
        }
        let frozen = frozen_days(base.observed_at.map(|t| (t, base.days.as_slice())), now);
        Ok(Changes {
            changes,
            tally,
            frozen,
            states,
            tracked,
            written,
            newly_read,
            previous,
        })
    }

    fn counts(&self, version: i64, extras_written: bool) -> Published {
        Published {
            version,
            changed: self.changes.wallets.len(),
            removed: self.changes.removed.len(),
            wallets: self.tally.tally().wallets(),
            positions: self.tally.tally().positions(),
            pending: 0,
            left: 0,
            extras_written,
        }
    }
}

/// A wallet's served positions (those in a quoted market) as model structs.
fn served_positions(w: &LiveWallet, quoted: &impl Fn(&str) -> bool) -> Vec<MarketPosition> {
    let address = w.input.address.to_string();
    w.positions
        .iter()
        .filter(|p| quoted(&p.symbol))
        .map(|p| p.to_position(&address))
        .collect()
}

/// A served wallet materialized, with its served positions.
fn served_wallet(
    w: &LiveWallet,
    quoted: &impl Fn(&str) -> bool,
) -> Result<(Wallet, Vec<MarketPosition>), AggregateError> {
    let mut served = served_positions(w, quoted);
    let wallet = materialize_wallet(w.input.to_input(), &mut served, quoted)?;
    Ok((wallet, served))
}

fn unknown_asset(u: Unquoted) -> AggregateError {
    AggregateError::UnknownAsset {
        address: u.address,
        symbol: u.symbol,
    }
}

/// The aggregates a publish computed: the base's tally changed in place,
/// or a new tally of every served wallet.
enum Aggregates {
    Edited(TallyEdit),
    New(Tally),
}

impl Aggregates {
    fn tally(&self) -> &Tally {
        match self {
            Aggregates::Edited(edit) => edit.tally(),
            Aggregates::New(tally) => tally,
        }
    }

    /// The aggregates of the committed version.
    fn keep(self) -> Tally {
        match self {
            Aggregates::Edited(edit) => edit.keep(),
            Aggregates::New(tally) => tally,
        }
    }

    /// The base's aggregates as they were, when the version is not
    /// committed: `None` when they were not changed in place (the next
    /// publish materializes every wallet again).
    fn undo(self) -> Option<Tally> {
        match self {
            Aggregates::Edited(edit) => edit.undo(),
            Aggregates::New(_) => None,
        }
    }
}

/// The changes of a version whose aggregates `tally` holds.
fn changes_of(
    tally: &Tally,
    input: &PublishInput,
    wallets: Vec<Wallet>,
    positions: Vec<MarketPosition>,
    removed: Vec<String>,
) -> VersionChanges {
    let rendered = tally.render(NETWORK_ID, input.now, input.freshness.clone());
    VersionChanges {
        observed_at: input.now,
        markets: rendered.markets,
        current_days: rendered.current_days,
        cohorts: rendered.cohorts,
        coverage: rendered.coverage,
        wallets,
        positions,
        removed,
    }
}

/// The changes over a base with a tally of the same markets: each wallet
/// read is taken out as the base served it and put in as it is now; with
/// them, what the base served of the wallets they write. `None` when the
/// tally does not hold a wallet as the base served it (a bug: the caller
/// materializes everything instead).
fn incremental(
    book: &Book,
    base: &Base,
    tally: &mut TallyEdit,
    include: &BTreeSet<Address>,
    input: &PublishInput,
) -> Result<Option<(VersionChanges, Served)>, AggregateError> {
    tally.requote(&input.quotes);
    let symbols: HashSet<&str> = input.quotes.iter().map(|q| q.symbol.as_str()).collect();
    let quoted = |s: &str| symbols.contains(s);
    // Sized before they are filled: tens of thousands of model positions,
    // which grown by doubling were copied and faulted in again and again.
    let (mut new_count, mut old_count) = (0, 0);
    for a in include {
        if let Some(pending) = book.pending.get(a) {
            new_count += book.wallets.get(a).map_or(0, |w| w.positions.len());
            old_count += pending.published.as_ref().map_or(0, |w| w.positions.len());
        }
    }
    let mut wallets = Vec::with_capacity(include.len());
    let mut positions = Vec::with_capacity(new_count);
    let mut removed = Vec::new();
    let mut previous = Served {
        wallets: Vec::with_capacity(include.len()),
        positions: Vec::with_capacity(old_count),
    };
    for a in include {
        let (Some(pending), Some(latest)) = (book.pending.get(a), book.wallets.get(a)) else {
            continue;
        };
        let was_served = base.served.contains(a);
        let mut before = None;
        if was_served {
            let Some(old) = &pending.published else {
                return Ok(None);
            };
            let address = a.to_string();
            let positions = served_positions(old, &quoted);
            if tally
                .remove(&address, &old.input.account_value().to_big(), &positions)
                .is_err()
            {
                return Ok(None);
            }
            before = Some((address, positions));
        }
        if latest.served(&quoted) {
            let (wallet, served) = served_wallet(latest, &quoted)?;
            tally
                .add(&wallet.address, &wallet.account_total_value.0, &served)
                .map_err(unknown_asset)?;
            wallets.push(wallet);
            positions.extend(served);
            if let Some((address, held)) = before {
                previous.wallets.push(address);
                previous.positions.extend(held);
            }
        } else if was_served {
            removed.push(a.to_string());
        }
    }
    let changes = changes_of(tally.tally(), input, wallets, positions, removed);
    Ok(Some((changes, previous)))
}

/// The changes over any base: a new tally of every served wallet, built one
/// wallet at a time (no version of model structs is held whole). A wallet
/// holding a market that appeared or vanished since the base is rewritten.
fn whole(
    book: &Book,
    base: &Base,
    include: &BTreeSet<Address>,
    input: &PublishInput,
) -> Result<(VersionChanges, Tally), AggregateError> {
    let symbols: HashSet<&str> = input.quotes.iter().map(|q| q.symbol.as_str()).collect();
    let quoted = |s: &str| symbols.contains(s);
    let moved = |s: &str| quoted(s) != base.symbols.contains(s);
    let mut tally = Tally::new(&input.quotes);
    let mut wallets = Vec::new();
    let mut positions = Vec::new();
    let mut served = HashSet::new();
    for w in book.entries(include) {
        if !w.served(&quoted) {
            continue;
        }
        let a = &w.input.address;
        let changed = include.contains(a)
            || !base.served.contains(a)
            || w.positions.iter().any(|p| moved(&p.symbol));
        let (wallet, held) = served_wallet(w, &quoted)?;
        tally
            .add(&wallet.address, &wallet.account_total_value.0, &held)
            .map_err(unknown_asset)?;
        served.insert(a);
        if changed {
            wallets.push(wallet);
            positions.extend(held);
        }
    }
    wallets.sort_by(|a, b| a.address.cmp(&b.address));
    let removed: Vec<String> = base
        .served
        .iter()
        .filter(|a| !served.contains(a))
        .map(Address::to_string)
        .collect();
    let changes = changes_of(&tally, input, wallets, positions, removed);
    Ok((changes, tally))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
