//! The book: the last observation of every wallet `track` has read, the
//! history behind its analytics, and the reads not published yet. Reads go
//! in; publishes take them out, all of them or some (a wallet whose rows
//! the database refuses is held back, and served as last published).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use bigdecimal::{BigDecimal, Zero};
use market_engine::{Quote, Tally, VersionChanges, WalletInput};
use market_ingest::scan::{follow_positions, wallet_input_from, Observed};
use market_model::{LiquidityDay, MarketPosition};

use crate::account::Account;
use crate::address::Address;
use crate::held::Held;
use crate::kept::Kept;
use time::OffsetDateTime;

/// The dex of a coin: `xyz` for `xyz:TSLA`, `""` (the main dex) for `BTC`.
fn dex_of(coin: &str) -> &str {
    market_model::symbol::dex_of(coin).unwrap_or("")
}
use market_store::{Store, StoreError, TrackedPosition, WalletScanState};

/// Scan states read at a time by a restart.
const STATES_PER_PAGE: usize = 25_000;

/// What the previous publish wrote: the base the next one's changes are
/// computed against.
#[derive(Clone, Debug, Default)]
pub struct Base {
    /// Its data version (0 before the first).
    pub version: i64,
    /// The wallets it served.
    pub served: HashSet<Address>,
    /// The markets it served.
    pub symbols: HashSet<String>,
    /// Its `current` liquidity days (frozen by the first publish of a new UTC day).
    pub days: Vec<LiquidityDay>,
    /// When it was observed.
    pub observed_at: Option<OffsetDateTime>,
    /// The aggregates of the wallets it served, when this tracker published
    /// it (the next publish then updates them from the wallets it changes).
    pub tally: Option<Tally>,
}

impl Base {
    /// Goes on from `version`, just committed with `changes` over this base,
    /// observed at `now` over the markets `quotes` name.
    pub(crate) fn commit(
        &mut self,
        version: i64,
        now: OffsetDateTime,
        quotes: &[Quote],
        changes: VersionChanges,
        tally: Tally,
    ) {
        for a in &changes.removed {
            self.served.remove(&Address::of(a));
        }
        self.served
            .extend(changes.wallets.iter().map(|w| Address::of(&w.address)));
        self.version = version;
        self.symbols = quotes.iter().map(|q| q.symbol.clone()).collect();
        self.days = changes.current_days;
        self.observed_at = Some(now);
        self.tally = Some(tally);
    }
}

/// What is known of one wallet's holdings.
#[derive(Clone, Debug)]
pub struct LiveWallet {
    /// The engine input that serves it (account value, analytics, label),
    /// compact.
    pub input: Account,
    /// Its open positions at that observation.
    pub positions: Vec<Held>,
}

impl LiveWallet {
    /// Whether it is served: it holds equity or a position in one of `symbols`.
    pub fn served(&self, symbols: &impl Fn(&str) -> bool) -> bool {
        self.input.has_equity() || self.positions.iter().any(|p| symbols(&p.symbol))
    }

    /// Whether it holds nothing the book must keep: no equity, no position,
    /// nothing carried from read to read (KOL links).
    pub fn holds_nothing(&self) -> bool {
        !self.input.has_equity() && self.positions.is_empty() && !self.input.has_kol()
    }

    /// Its positions as model structs.
    pub fn model_positions(&self) -> impl Iterator<Item = MarketPosition> + '_ {
        let address = self.input.address.to_string();
        self.positions.iter().map(move |p| p.to_position(&address))
    }
}

/// A read refused because it could not value every position.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("positions in assets without a mark: {coins:?}")]
pub struct Incomplete {
    /// The coins it could not value.
    pub coins: Vec<String>,
}

/// A wallet's analytics history: its scan state and followed positions.
pub type History = (WalletScanState, Vec<TrackedPosition>);

/// Why a read was not applied (the book is as it was).
#[derive(Debug, thiserror::Error)]
pub enum NotApplied {
    /// It could not value every position.
    #[error(transparent)]
    Incomplete(#[from] Incomplete),
    /// The wallet's stored scan state could not be read.
    #[error("its scan state could not be read: {0}")]
    State(#[from] StoreError),
}

/// What became of a read the book took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// It waits for the next publish.
    Pending,
    /// It changed nothing to publish (see [`Book::apply_read`]): the book
    /// is as it was.
    Unchanged,
}

/// The dexes a wallet's observation covers: as its scan state records them
/// (`read_dexes`), else (recorded before that was) the main dex and the
/// dexes of its positions in `wallet`; nothing for a wallet never observed.
fn covered_by<'a>(
    read_dexes: Option<impl Iterator<Item = &'a str>>,
    wallet: Option<&LiveWallet>,
) -> BTreeSet<String> {
    if let Some(d) = read_dexes {
        return d.map(str::to_owned).collect();
    }
    let Some(w) = wallet else {
        return BTreeSet::new();
    };
    std::iter::once(String::new())
        .chain(w.positions.iter().map(|p| dex_of(&p.symbol).to_owned()))
        .collect()
}

/// The dexes `state` records as covered, if it does.
fn read_dexes(state: Option<&WalletScanState>) -> Option<impl Iterator<Item = &str>> {
    state
        .and_then(|s| s.read_dexes.as_ref())
        .map(|d| d.iter().map(String::as_str))
}

/// Whether a read changes nothing a publish would write: the wallet holds
/// nothing and held nothing at its previous observation (`previous`, `None`
/// when the book let go of it), follows no position, and its scan state
/// already records a first observation and every dex this read covers.
/// Only the time it was last seen would move, and the registry records that
/// (`last_read_at`). Most wallets of a whole exchange are such: their reads
/// neither wait for a publish nor are written by one.
fn is_quiet(
    obs: &Observed,
    previous: Option<&LiveWallet>,
    state: Option<&WalletScanState>,
    follows_any: bool,
) -> bool {
    let Some(s) = state else {
        return false;
    };
    let covered = covered_by(read_dexes(state), previous);
    obs.positions.is_empty()
        && obs.account_value.0 <= BigDecimal::zero()
        && previous.is_none_or(LiveWallet::holds_nothing)
        && !follows_any
        && s.first_seen_at.is_some()
        && s.missed_scans == 0
        && obs.dexes.iter().all(|d| covered.contains(d))
}

/// A wallet read since the last publish.
#[derive(Clone, Debug)]
pub(crate) struct Pending {
    /// The number of its latest read (reads are numbered in order).
    pub(crate) read: u64,
    /// What the last published version knows of it (`None`: nothing), served
    /// while its new read is held back.
    pub(crate) published: Option<Arc<LiveWallet>>,
    /// The dexes the published observation covers.
    pub(crate) published_covered: BTreeSet<String>,
}

/// A read a publish wrote: the wallet, the read's number, what was written
/// and the dexes it covers.
#[derive(Clone, Debug)]
pub(crate) struct Written {
    pub(crate) address: Address,
    pub(crate) read: u64,
    pub(crate) wallet: Arc<LiveWallet>,
    pub(crate) covered: BTreeSet<String>,
}

/// The tracker's memory of every wallet it has read.
#[derive(Debug, Default)]
pub struct Book {
    /// The latest observation of every wallet read, but the ones that held
    /// nothing when published (see [`LiveWallet::holds_nothing`]). Behind
    /// a pointer, as are the states: a map's empty buckets then cost a
    /// pointer, not a wallet (its buckets grow to its largest size, a
    /// million wallets read while `track` discovers an exchange, and are
    /// given back once they are mostly empty; see [`Book::published`]).
    /// Shared, not boxed: a publish keeps each wallet it writes
    /// ([`Written`]) as it was read, and sharing it costs a count where a
    /// copy cost a twentieth of the publish (its positions' heap, copied
    /// and freed again).
    pub(crate) wallets: HashMap<Address, Arc<LiveWallet>>,
    /// The analytics history of every wallet held: its scan state and
    /// followed positions.
    pub(crate) states: HashMap<Address, Box<Kept>>,
    /// Wallets read since the last publish.
    pub(crate) pending: BTreeMap<Address, Pending>,
    next_read: u64,
}

impl Book {
    /// The book and publish base of the store's latest data version: a
    /// restart goes on from what was last published. A version written by
    /// another writer than `track` or `scan` (`seed-demo`) is replaced by
    /// the first publish.
    pub fn restore(store: &Store) -> Result<(Book, Base), StoreError> {
        Self::restore_with(store, |_| {})
    }

    /// [`Book::restore`], handing every stored scan state to `each_state` as
    /// it is read. The book keeps the states of the wallets it holds only
    /// (the others are read from the store when their wallet is read: see
    /// [`Book::apply_read`]).
    pub fn restore_with(
        store: &Store,
        mut each_state: impl FnMut(&WalletScanState),
    ) -> Result<(Book, Base), StoreError> {
        let mut book = Book::default();
        let mut base = Base::default();
        let Some(meta) = store.latest_snapshot()? else {
            return Ok((book, base));
        };
        // Positions are read as text, straight into the book's compact form
        // (no model struct per position: a million of them took a GB).
        let loaded =
            store.load_for_serving(&meta, |t| (Box::<str>::from(t.address), Held::of_text(t)))?;
        base.version = meta.version;
        base.served = loaded
            .version
            .wallets
            .iter()
            .map(|w| Address::of(&w.address))
            .collect();
        base.symbols = loaded
            .version
            .markets
            .iter()
            .map(|m| m.symbol.clone())
            .collect();
        base.days = loaded.version.current_days.clone();
        base.observed_at = Some(meta.observed_at);
        if meta.source == "track" || meta.source == "scan" {
            let mut positions: HashMap<Box<str>, Vec<Held>> = HashMap::new();
            for (address, held) in loaded.version.positions.into_iter().flatten() {
                positions.entry(address).or_default().push(held);
            }
            // The tally of what the version serves, one wallet at a time, so
            // that the next publish costs what it changes.
            let mut tally = Some(Tally::of_markets(&loaded.version.markets));
            for w in &loaded.version.wallets {
                let live = LiveWallet {
                    input: Account::of(wallet_input_from(w)),
                    positions: positions.remove(w.address.as_str()).unwrap_or_default(),
                };
                // A wallet this tracker would not serve (a scan serves every
                // wallet of its list, empty ones too) is removed by the next
                // publish, which then computes every wallet.
                if !live.served(&|s: &str| base.symbols.contains(s)) {
                    tally = None;
                }
                if let Some(t) = &mut tally {
                    let model: Vec<MarketPosition> = live.model_positions().collect();
                    if t.add(&w.address, &live.input.account_value().to_big(), &model)
                        .is_err()
                    {
                        tally = None;
                    }
                }
                book.wallets.insert(Address::of(&w.address), Arc::new(live));
            }
            base.tally = tally;
            // Only the wallets it holds (the others are read with their
            // state: see `apply_read`). The followed positions are read with
            // the states they are stored with.
            let mut followed = store.tracked_positions()?;
            store.each_wallet_scan_state(STATES_PER_PAGE, |state| {
                each_state(&state);
                let key = Address::of(&state.address);
                if book.wallets.contains_key(&key) {
                    let tracked = followed.remove(&state.address).unwrap_or_default();
                    let kept = Kept::of(&state, &tracked);
                    book.states.insert(key, Box::new(kept));
                }
            })?;
        } else {
            log::warn!(
                "the served data version {} came from {:?}: its {} wallets are replaced by the first publish",
                meta.version,
                meta.source,
                loaded.version.wallets.len()
            );
        }
        Ok((book, base))
    }

    /// Goes on from `stored`, the store's latest version written by another
    /// writer: its wallets replace this book's, except the ones read since
    /// the last publish whose read is newer than what `stored` holds.
    pub(crate) fn rebase(&mut self, mut stored: Book) {
        for (address, mut pending) in std::mem::take(&mut self.pending) {
            let Some(latest) = self.wallets.remove(&address) else {
                continue;
            };
            let superseded = stored
                .wallets
                .get(&address)
                .is_some_and(|w| w.input.observed_at >= latest.input.observed_at);
            if superseded {
                continue;
            }
            pending.published = stored.wallets.get(&address).cloned();
            pending.published_covered = stored.covered(&address);
            stored.wallets.insert(address.clone(), latest);
            if let Some(s) = self.states.remove(&address) {
                stored.states.insert(address.clone(), s);
            }
            stored.pending.insert(address, pending);
        }
        stored.next_read = self.next_read;
        *self = stored;
    }

    /// Applies a read of `address`: follows its positions (events and
    /// analytics), and keeps the observation for the next publish. A read
    /// that could not value every position is refused whole (it would close
    /// the positions it lacks, invent realized PnL and serve the wallet
    /// without them): the book keeps what it knew. A read of some dexes says
    /// nothing of the others: the positions known there are kept.
    ///
    /// The book keeps the analytics history of the wallets it holds; a
    /// wallet it let go of (it held nothing when published) or did not hold
    /// since a restart has its history in the store, as the last version
    /// that wrote it left it: `stored` reads it (`Store::wallet_history`),
    /// under the book's lock, so no publish lets go of it in between.
    ///
    /// A read of a wallet that holds nothing, held nothing before and whose
    /// stored history it would not change but for the time it was seen
    /// changes nothing: the book is left as it was ([`Applied::Unchanged`]).
    pub fn apply_read(
        &mut self,
        address: &str,
        label: Option<String>,
        tags: Vec<String>,
        mut obs: Observed,
        stored: impl FnOnce(&str) -> Result<Option<History>, StoreError>,
    ) -> Result<Applied, NotApplied> {
        if !obs.is_complete() {
            return Err(NotApplied::Incomplete(Incomplete {
                coins: obs.unvalued,
            }));
        }
        // Its history in the store's form, for this read only: the book's,
        // or the store's when the book does not hold it.
        let key = Address::of(address);
        let (state_before, tracked_before) = match self.states.get(&key) {
            Some(kept) => (Some(kept.state(address)), kept.tracked(address)),
            None => match stored(address)? {
                Some((state, tracked)) => (Some(state), tracked),
                None => (None, Vec::new()),
            },
        };
        let previous = self.wallets.get(&key).map(|w| &**w);
        if is_quiet(
            &obs,
            previous,
            state_before.as_ref(),
            !tracked_before.is_empty(),
        ) {
            return Ok(Applied::Unchanged);
        }
        let covered_before = covered_by(read_dexes(state_before.as_ref()), previous);
        let previous = self.wallets.remove(&key);
        if let Some(previous) = &previous {
            let unread: Vec<MarketPosition> = previous
                .positions
                .iter()
                .filter(|p| !obs.dexes.iter().any(|d| d == dex_of(&p.symbol)))
                .map(|p| p.to_position(address))
                .collect();
            obs.positions.extend(unread);
        }
        let (mut state, follow, analytics) =
            follow_positions(address, state_before.as_ref(), Some(&tracked_before), &obs);
        let covered: BTreeSet<String> = covered_before
            .iter()
            .cloned()
            .chain(obs.dexes.iter().cloned())
            .collect();
        state.read_dexes = Some(covered.into_iter().collect());
        self.states
            .insert(key.clone(), Box::new(Kept::of(&state, &follow)));
        let (kols, kol_profile) = previous.as_ref().map(|p| p.input.kol()).unwrap_or_default();
        let input = Account::of(WalletInput {
            address: address.to_owned(),
            label,
            tags,
            kols,
            kol_profile,
            account_value: obs.account_value,
            observed_at: obs.observed_at,
            analytics,
        });
        let read = self.next_read;
        self.next_read += 1;
        self.pending
            .entry(key.clone())
            .and_modify(|p| p.read = read)
            .or_insert(Pending {
                read,
                published: previous,
                published_covered: covered_before,
            });
        let positions = obs.positions.iter().map(Held::of).collect();
        self.wallets
            .insert(key, Arc::new(LiveWallet { input, positions }));
        Ok(Applied::Pending)
    }

    /// The dexes a wallet's observation covers: see [`covered_by`].
    pub(crate) fn covered(&self, address: &Address) -> BTreeSet<String> {
        let kept = self.states.get(address).and_then(|k| k.read_dexes());
        covered_by(
            kept.map(|d| d.iter().map(|d| &**d)),
            self.wallets.get(address).map(|w| &**w),
        )
    }

    /// Whether the book holds `address`'s observation (it was served by the
    /// last publish, or read since).
    pub fn holds(&self, address: &Address) -> bool {
        self.wallets.contains_key(address)
    }

    /// The number the next read will get: reads below it are made.
    pub(crate) fn next_read(&self) -> u64 {
        self.next_read
    }

    /// Wallets read since the last publish.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// What a version that publishes the reads of `include` (and holds the
    /// other pending reads back) serves of each wallet: its latest read, or
    /// what was last published of it.
    pub(crate) fn entries<'a>(
        &'a self,
        include: &'a BTreeSet<Address>,
    ) -> impl Iterator<Item = &'a LiveWallet> + 'a {
        self.wallets
            .iter()
            .filter_map(move |(address, latest)| match self.pending.get(address) {
                Some(p) if !include.contains(address) => p.published.as_deref(),
                _ => Some(&**latest),
            })
    }

    /// Marks the reads of `published` as published; a wallet read again
    /// meanwhile stays pending, its published copy now the one written.
    pub(crate) fn published(&mut self, published: Vec<Written>) {
        for w in published {
            match self.pending.get_mut(&w.address) {
                Some(p) if p.read == w.read => {
                    self.pending.remove(&w.address);
                    // Most wallets of a whole exchange hold nothing: the book
                    // lets go of them once published. The publish stored their
                    // scan state; their next read takes it from the store
                    // (see `apply_read`), and starts from no holdings, as the
                    // published copy says.
                    if w.wallet.holds_nothing() {
                        self.wallets.remove(&w.address);
                        self.states.remove(&w.address);
                    }
                }
                Some(p) => {
                    p.published = Some(w.wallet);
                    p.published_covered = w.covered;
                }
                None => {}
            }
        }
        shrink_if_sparse(&mut self.wallets);
        shrink_if_sparse(&mut self.states);
    }
}

/// Gives back a map's buckets once it holds less than half of what they
/// could: after a discovery has read a million wallets, most of which held
/// nothing and were let go of, the two maps of the book kept 2^20 buckets
/// each (about 33 MiB a map) for the 300,000 wallets held. Shrunk to a
/// quarter more than it holds, which a map then holding less than half
/// again leaves alone (the same number of buckets), so that it is not
/// shrunk and grown in turn.
fn shrink_if_sparse<V>(map: &mut HashMap<Address, V>) {
    if map.capacity() > 4096 && map.capacity() / 2 > map.len() {
        map.shrink_to(map.len() + map.len() / 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use market_engine::fixtures::{d, position};
    use market_model::Direction;
    use time::macros::datetime;

    /// No stored history (a book without a store).
    fn none(_: &str) -> Result<Option<History>, StoreError> {
        Ok(None)
    }

    fn read(dexes: &[&str], positions: Vec<MarketPosition>, unvalued: &[&str]) -> Observed {
        Observed {
            account_value: d("1000"),
            positions,
            observed_at: datetime!(2026-11-25 12:00 UTC),
            active_dexes: dexes.iter().map(|d| d.to_string()).collect(),
            dexes: dexes.iter().map(|d| d.to_string()).collect(),
            unvalued: unvalued.iter().map(|c| c.to_string()).collect(),
        }
    }

    #[test]
    fn a_read_that_could_not_value_a_position_changes_nothing() {
        let mut book = Book::default();
        let btc = position("0xa", "BTC", Direction::Long, "100", None);
        book.apply_read("0xa", None, vec![], read(&[""], vec![btc], &[]), none)
            .unwrap();
        let before: Vec<MarketPosition> = book.wallets[&Address::of("0xa")]
            .model_positions()
            .collect();
        let state = book.states[&Address::of("0xa")].clone();
        // Marks not loaded: the BTC position could not be valued.
        let refused = book.apply_read("0xa", None, vec![], read(&[""], vec![], &["BTC"]), none);
        let Err(NotApplied::Incomplete(refused)) = refused else {
            panic!("refused as incomplete: {refused:?}");
        };
        assert_eq!(refused.coins, ["BTC"]);
        let after: Vec<MarketPosition> = book.wallets[&Address::of("0xa")]
            .model_positions()
            .collect();
        assert_eq!(after, before, "no position dropped");
        assert_eq!(
            book.states[&Address::of("0xa")],
            state,
            "no close, no realized PnL"
        );
    }

    #[test]
    fn a_read_of_some_dexes_keeps_the_positions_known_on_the_others() {
        let mut book = Book::default();
        let btc = position("0xa", "BTC", Direction::Long, "100", None);
        let tsla = position("0xa", "xyz:TSLA", Direction::Short, "50", None);
        book.apply_read(
            "0xa",
            None,
            vec![],
            read(&["", "xyz"], vec![btc, tsla.clone()], &[]),
            none,
        )
        .unwrap();
        assert_eq!(
            book.covered(&Address::of("0xa")),
            [String::new(), "xyz".into()].into()
        );
        // A read of the main dex only: BTC is closed, TSLA was not looked at.
        book.apply_read("0xa", None, vec![], read(&[""], vec![], &[]), none)
            .unwrap();
        let held: Vec<MarketPosition> = book.wallets[&Address::of("0xa")]
            .model_positions()
            .collect();
        assert_eq!(held, [tsla]);
        assert_eq!(
            book.states[&Address::of("0xa")].followed.len(),
            1,
            "TSLA is still followed"
        );
        assert_eq!(
            book.states[&Address::of("0xa")].state("0xa").closed_count,
            1,
            "BTC was closed"
        );
    }

    #[test]
    fn a_read_changes_nothing_only_when_the_wallet_held_and_holds_nothing() {
        let empty = |dexes: &[&str]| Observed {
            account_value: d("0"),
            ..read(dexes, vec![], &[])
        };
        let mut book = Book::default();
        // A first read records the first observation.
        let first = book.apply_read("0xa", None, vec![], empty(&[""]), none);
        assert_eq!(first.unwrap(), Applied::Pending);
        // Read again before the publish: its history says it all.
        let again = book.apply_read("0xa", None, vec![], empty(&[""]), none);
        assert_eq!(again.unwrap(), Applied::Unchanged);
        publish(&mut book);
        assert!(
            !book.holds(&Address::of("0xa")),
            "let go of once published empty"
        );
        let stored = |_: &str| Ok(Some((book_state("0xa"), Vec::new())));
        let mut book = Book::default();
        assert_eq!(
            book.apply_read("0xa", None, vec![], empty(&[""]), stored)
                .unwrap(),
            Applied::Unchanged
        );
        assert!(
            book.states.is_empty() && book.pending.is_empty(),
            "left as it was"
        );
        // A dex read for the first time is recorded.
        assert_eq!(
            book.apply_read("0xa", None, vec![], empty(&["", "xyz"]), stored)
                .unwrap(),
            Applied::Pending
        );
        // A position is a change, and so is closing it.
        let mut book = Book::default();
        let btc = position("0xa", "BTC", Direction::Long, "100", None);
        let opened = book.apply_read("0xa", None, vec![], read(&[""], vec![btc], &[]), stored);
        assert_eq!(opened.unwrap(), Applied::Pending);
        publish(&mut book);
        let closed = book.apply_read("0xa", None, vec![], empty(&[""]), stored);
        assert_eq!(closed.unwrap(), Applied::Pending);
    }

    /// The scan state of a wallet observed empty on the main dex.
    #[test]
    fn the_maps_give_back_their_buckets_once_most_wallets_are_let_go_of() {
        let empty = Observed {
            account_value: d("0"),
            ..read(&[""], vec![], &[])
        };
        let mut book = Book::default();
        // A discovery: 20,000 wallets read, 1 in 20 holding equity.
        for i in 0..20_000 {
            let observed = if i % 20 == 0 {
                read(&[""], vec![], &[])
            } else {
                empty.clone()
            };
            book.apply_read(&format!("0x{i:040x}"), None, vec![], observed, none)
                .unwrap();
        }
        let grown = (book.wallets.capacity(), book.states.capacity());
        assert!(grown.0 >= 20_000 && grown.1 >= 20_000, "{grown:?}");
        publish(&mut book);
        assert_eq!((book.wallets.len(), book.states.len()), (1_000, 1_000));
        assert!(
            book.wallets.capacity() < 4096 && book.states.capacity() < 4096,
            "shrunk: {} and {} from {grown:?}",
            book.wallets.capacity(),
            book.states.capacity()
        );
        assert!(book.holds(&Address::of(&format!("0x{:040x}", 20))));
        assert!(!book.holds(&Address::of(&format!("0x{:040x}", 21))));
    }

    /// Every wallet read since the last publish, published as it is held.
    fn publish(book: &mut Book) {
        let written = book
            .pending
            .iter()
            .map(|(a, p)| Written {
                address: a.clone(),
                read: p.read,
                wallet: Arc::clone(&book.wallets[a]),
                covered: book.covered(a),
            })
            .collect();
        book.published(written);
    }

    fn book_state(address: &str) -> WalletScanState {
        WalletScanState {
            address: address.into(),
            first_seen_at: Some(datetime!(2026-11-25 11:00 UTC)),
            last_seen_at: Some(datetime!(2026-11-25 11:00 UTC)),
            first_account_value: Some(d("0")),
            read_dexes: Some(vec![String::new()]),
            ..WalletScanState::default()
        }
    }

    #[test]
    fn a_wallet_read_again_while_published_stays_pending() {
        let mut book = Book::default();
        book.apply_read("0xa", None, vec![], read(&[""], vec![], &[]), none)
            .unwrap();
        let first = book.pending[&Address::of("0xa")].read;
        let written = Written {
            address: "0xa".into(),
            read: first,
            wallet: Arc::clone(&book.wallets[&Address::of("0xa")]),
            covered: book.covered(&Address::of("0xa")),
        };
        // Read again while the publish of the first read was being written.
        book.apply_read("0xa", None, vec![], read(&[""], vec![], &[]), none)
            .unwrap();
        book.published(vec![written.clone()]);
        let pending = &book.pending[&Address::of("0xa")];
        assert!(pending.read > first, "the second read is not published yet");
        assert_eq!(
            pending.published.as_ref().map(|w| w.input.observed_at),
            Some(written.wallet.input.observed_at),
            "what was written is now the published copy"
        );
        book.published(vec![Written {
            read: pending.read,
            ..written
        }]);
        assert!(book.pending.is_empty());
    }
}
