//! The registry in memory and the scheduler that decides which wallet to
//! read next: the tiers and the sweeps share the requests (most to the
//! whales), a whale about to miss its deadline goes before everything, and
//! within a lane the earliest due, then the largest, goes first.

use std::cmp::Reverse;
use std::collections::{BTreeSet, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::str::FromStr;

use bigdecimal::{BigDecimal, Signed};
use hashbrown::HashTable;
use market_engine::CompactDecimal;
use market_model::Decimal;
use market_store::{DiscoverySource, RegistryEntry};
use time::{Duration, OffsetDateTime};

use crate::address::Address;
use crate::registry::{usd, Entry, Moment};

/// Refresh tiers, from the most to the least valuable. While several tiers
/// have due wallets each gets its share of the requests
/// ([`Intervals::share`]), so when the budget is short the whales get most of
/// it and the smaller tiers still progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// Exposure of 1,000,000 USD or more.
    Whale = 0,
    /// 100,000 USD or more.
    Shark = 1,
    /// 10,000 USD or more.
    Fish = 2,
    /// Less than 10,000 USD, or not read yet with nothing known of its size.
    Shrimp = 3,
    /// Empty (no equity, no position) at its last reads.
    Demoted = 4,
}

pub(crate) const TIERS: usize = 5;

impl Tier {
    /// Every tier, in order.
    pub const ALL: [Tier; TIERS] = [
        Tier::Whale,
        Tier::Shark,
        Tier::Fish,
        Tier::Shrimp,
        Tier::Demoted,
    ];

    /// Its name in logs and metrics.
    pub const fn name(self) -> &'static str {
        match self {
            Tier::Whale => "whale",
            Tier::Shark => "shark",
            Tier::Fish => "fish",
            Tier::Shrimp => "shrimp",
            Tier::Demoted => "demoted",
        }
    }
}

/// How fresh the wallets of one tier are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TierFreshness {
    /// Wallets in the tier.
    pub wallets: u64,
    /// Wallets never read yet.
    pub unread: u64,
    /// The oldest last read among the wallets read at least once.
    pub oldest_read: Option<OffsetDateTime>,
}
/// The scheduling lanes: one per tier, then the sweeps.
const LANES: usize = TIERS + 1;
/// The lane of the sweeps (reads of every dex).
const SWEEP: usize = TIERS;

/// How often each tier is read, and how often its reads cover every dex.
#[derive(Clone, Debug)]
pub struct Intervals {
    /// Refresh interval per tier (whale … demoted).
    pub refresh: [Duration; TIERS],
    /// A whale whose last read is this old goes before every other lane: the
    /// freshness promise of the whales holds even when their share of the
    /// requests would not keep it (the other lanes then get what is left).
    pub whale_deadline: Duration,
    /// The longest a wallet of each tier goes between sweeps (reads of every
    /// dex, which find HIP-3 positions it did not trade under our eyes).
    /// Zero means every read is a sweep (the demoted tier's rare reads).
    pub sweep: [Duration; TIERS],
    /// Sweep interval of a wallet of 1,000,000 USD; a wallet's interval is
    /// this scaled by 1,000,000 / its exposure, clamped between
    /// [`Intervals::min_sweep`] and its tier's [`Intervals::sweep`]: the
    /// bigger a wallet, the sooner its other dexes are looked at, and the
    /// biggest are swept first after a cold start.
    pub sweep_per_million: Duration,
    /// The shortest sweep interval.
    pub min_sweep: Duration,
    /// Share of the reads (in requests) each lane gets while several lanes
    /// have due wallets, in percent: the tiers (whale … demoted), then the
    /// sweeps. A lane with nothing due leaves its share to the others, and
    /// banks no credit for later.
    pub share: [u32; LANES],
    /// A trade makes a wallet due, but never sooner than this after its last read.
    pub min_gap: Duration,
    /// Consecutive empty reads after which a wallet is demoted.
    pub demote_after: i32,
    /// Half-life of the traded notional.
    pub notional_half_life: Duration,
}

impl Default for Intervals {
    fn default() -> Self {
        Intervals {
            refresh: [
                Duration::minutes(2),
                Duration::minutes(10),
                Duration::hours(1),
                Duration::hours(6),
                Duration::days(7),
            ],
            whale_deadline: Duration::seconds(270),
            sweep: [
                Duration::hours(6),
                Duration::days(1),
                Duration::days(3),
                Duration::days(7),
                Duration::ZERO, // a demoted wallet's rare read covers everything
            ],
            sweep_per_million: Duration::hours(6),
            min_sweep: Duration::minutes(15),
            share: [80, 8, 3, 2, 1, 6],
            min_gap: Duration::seconds(15),
            demote_after: 3,
            notional_half_life: Duration::hours(6),
        }
    }
}

/// The tier of an entry: by what its last read showed, else by the best
/// estimate of its size (leaderboard account value, traded notional).
pub fn tier_of(e: &Entry, cfg: &Intervals) -> Tier {
    if e.empty_reads >= cfg.demote_after && usd(&e.traded_notional) <= 0.0 {
        return Tier::Demoted;
    }
    let exposure = exposure_of(e);
    if exposure >= 1_000_000.0 {
        Tier::Whale
    } else if exposure >= 100_000.0 {
        Tier::Shark
    } else if exposure >= 10_000.0 {
        Tier::Fish
    } else {
        Tier::Shrimp
    }
}

/// The best estimate of a wallet's size, USD. Until a read has covered
/// every dex (a sweep), a read may have missed the equity it holds on HIP-3
/// dexes, so the leaderboard's value counts when it is larger.
fn exposure_of(e: &Entry) -> f64 {
    let leaderboard = e.leaderboard_value.as_ref().map_or(0.0, usd);
    let exposure = if e.last_read_at.is_some() {
        let read = read_value(e);
        if e.last_sweep_at.is_some() {
            read
        } else {
            read.max(leaderboard)
        }
    } else {
        leaderboard
    };
    // A large recent trade counts as exposure until the next read says otherwise.
    exposure.max(usd(&e.traded_notional))
}

/// What the last read saw of a wallet: the larger of its account value and
/// its open position value, USD.
fn read_value(e: &Entry) -> f64 {
    let account = e.account_value.as_ref().map_or(0.0, usd);
    let positions = e.position_value.as_ref().map_or(0.0, usd);
    account.max(positions)
}

/// Whether a wallet never swept read well below its leaderboard value (less
/// than [`BELOW_LEADERBOARD`] of it): its missing equity is likely on a dex
/// its reads skip, so it is swept at once.
fn short_of_leaderboard(e: &Entry) -> bool {
    let leaderboard = e.leaderboard_value.as_ref().map_or(0.0, usd);
    e.last_sweep_at.is_none()
        && e.last_read_at.is_some()
        && read_value(e) < leaderboard * BELOW_LEADERBOARD
}

/// See [`short_of_leaderboard`].
const BELOW_LEADERBOARD: f64 = 0.8;

/// See [`Schedule::redo_unpublished`].
pub const UNPUBLISHED_SLACK: Duration = Duration::seconds(10);

/// When a wallet is next due by what the registry holds of it: at once when
/// never read; its tier's refresh after its last read; and, when it traded
/// since that read, as soon as [`Intervals::min_gap`] allows. A restart
/// schedules every wallet by it, and a discovery that changes a wallet's
/// tier reschedules it by it, so the two agree.
fn due_from(e: &Entry, tier: Tier, cfg: &Intervals, now: OffsetDateTime) -> OffsetDateTime {
    let refresh = cfg.refresh[tier as usize];
    match (e.last_read_at, e.last_trade_at) {
        (None, _) => now,
        (Some(read), Some(trade)) if trade >= read => {
            let read = read.at();
            (read + refresh).min((read + cfg.min_gap).max(now))
        }
        (Some(read), _) => read.at() + refresh,
    }
}

fn rank_of(e: &Entry) -> Rank {
    // `max` takes a NaN to 0; the rank only orders wallets due together.
    Reverse((exposure_of(e).max(0.0) as f32).to_bits())
}

/// When a wallet's next sweep is due, or `None` for a demoted wallet (each of
/// its reads is a sweep). The interval shrinks with the wallet's exposure
/// ([`Intervals::sweep_per_million`]).
fn sweep_due(e: &Entry, tier: Tier, cfg: &Intervals) -> Option<Moment> {
    let longest = cfg.sweep[tier as usize];
    if longest.is_zero() {
        return None;
    }
    if short_of_leaderboard(e) {
        return e.last_read_at;
    }
    let scaled = cfg.sweep_per_million.as_seconds_f64() * 1_000_000.0 / exposure_of(e).max(1.0);
    let interval =
        Duration::seconds_f64(scaled.min(longest.as_seconds_f64())).max(cfg.min_sweep.min(longest));
    Some(Moment::of(
        e.last_sweep_at.unwrap_or(e.first_seen_at).at() + interval,
    ))
}

/// The label and tags the operator's wallet list gives a wallet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Listing {
    label: Option<String>,
    tags: Vec<String>,
}

/// One wallet of the registry.
#[derive(Clone, Debug)]
pub struct Tracked {
    /// Its address (lowercase `0x`).
    pub address: Address,
    /// What is persisted, compactly ([`Entry::to_entry`] gives it back).
    pub entry: Entry,
    /// Label and tags from the wallet list (authoritative); boxed, as most
    /// wallets have none.
    listing: Option<Box<Listing>>,
    due: Moment,
    /// Larger exposure first among wallets due in the same second (a cold
    /// start, a leaderboard fetch). Its next sweep's due instant is not
    /// kept: [`sweep_due`] gives it from the entry and the tier.
    rank: Rank,
    tier: Tier,
    in_flight: bool,
    /// Changed since it was last saved.
    unsaved: bool,
}

impl Tracked {
    fn new(entry: &RegistryEntry, due: OffsetDateTime, tier: Tier) -> Self {
        Tracked {
            address: Address::of(&entry.address),
            entry: Entry::of(entry),
            listing: None,
            due: due.into(),
            rank: Reverse(0),
            tier,
            in_flight: false,
            unsaved: false,
        }
    }

    /// Its label from the wallet list.
    pub fn label(&self) -> Option<&str> {
        self.listing.as_ref().and_then(|l| l.label.as_deref())
    }

    /// Its tags from the wallet list.
    pub fn tags(&self) -> &[String] {
        self.listing.as_ref().map_or(&[], |l| &l.tags)
    }

    /// Its entry as it is persisted.
    pub fn to_entry(&self) -> RegistryEntry {
        self.entry.to_entry(&self.address.to_string())
    }
}

/// A read to make: which wallet, on which dexes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadJob {
    /// Address.
    pub address: String,
    /// Dexes to read (`""` the main dex first).
    pub dexes: Vec<String>,
    /// Whether `dexes` is every dex.
    pub sweep: bool,
    /// The tier it was taken from.
    pub tier: Tier,
}

/// What a discovery source reports.
#[derive(Clone, Debug)]
pub enum Discovery {
    /// A row of the leaderboard.
    Leaderboard {
        /// Address.
        address: String,
        /// Its account value, USD.
        account_value: Decimal,
    },
    /// A trade in which the wallet took part.
    Trade {
        /// Address.
        address: String,
        /// The coin (`dex:COIN` on a HIP-3 dex).
        coin: String,
        /// `px × sz`, USD.
        notional: f64,
        /// Trade time.
        at: OffsetDateTime,
        /// Trades stream or node files.
        source: DiscoverySource,
    },
}

/// Per wallet of a [`Schedule`], its last published observation: see
/// [`Schedule::published_marks`].
#[derive(Debug)]
pub struct PublishedMarks(Vec<Option<Moment>>);

/// A wallet's place in the registry's vector.
type Slot = u32;

/// One lane's wallets by (due second, larger exposure first, slot): 12
/// bytes an entry, where the due instant to the nanosecond and the rank in
/// 8 bytes each took 24 (a million wallets sit in two queues). The due
/// instant is rounded up to its second, so a wallet is never handed out
/// before it is due, and at most a second after.
type Queue = BTreeSet<(u32, Rank, Slot)>;

/// Larger exposure first: the exposure as an `f32`'s bits (which order as
/// the non-negative floats do), reversed.
type Rank = Reverse<u32>;

/// The registry in memory: every wallet, its tier and due time, and which
/// entries changed since they were last saved.
///
/// The wallets sit in one vector (a wallet is never removed) and an index of
/// their slots finds one by address: a map of a million entries by value
/// would be grown to two million buckets of them, and its key would be a
/// second copy of the address. The queues hold slots (4 bytes) too.
#[derive(Debug, Default)]
pub struct Schedule {
    cfg: Intervals,
    wallets: Vec<Tracked>,
    index: HashTable<Slot>,
    hasher: RandomState,
    /// Per lane, the wallets by due time, larger first: the tiers by refresh
    /// due, the sweep lane by sweep due.
    queues: [Queue; LANES],
    /// Stride-scheduling pass per lane: requests taken / share.
    pass: [f64; LANES],
    /// Wallets changed since they were last saved, in the order they
    /// changed (each once: the wallet's flag says whether it is here).
    /// Taking them is then a pop, not a pass over a million wallets.
    unsaved: VecDeque<Slot>,
}

impl Schedule {
    /// A schedule over the persisted registry. Wallets never read are due at
    /// once, and so are wallets that traded after their last read (the read
    /// the trade asked for is not lost with a restart) and wallets whose last
    /// read failed.
    pub fn new(
        cfg: Intervals,
        entries: impl IntoIterator<Item = RegistryEntry>,
        now: OffsetDateTime,
    ) -> Self {
        let mut s = Schedule {
            cfg,
            ..Schedule::default()
        };
        for entry in entries {
            s.restore(&entry, now);
        }
        s
    }

    /// Adds a persisted entry, scheduled as [`Schedule::new`] does.
    pub fn restore(&mut self, entry: &RegistryEntry, now: OffsetDateTime) {
        let mut t = Tracked::new(entry, now, Tier::Shrimp);
        t.tier = tier_of(&t.entry, &self.cfg);
        // A failed read's backoff is not saved: it is tried again at once.
        if t.entry.failed_reads == 0 {
            t.due = due_from(&t.entry, t.tier, &self.cfg, now).into();
        }
        self.insert(t);
    }

    /// Room to mark, per wallet, its last published observation (see
    /// [`Schedule::redo_unpublished`]): 8 bytes a wallet, where a map of the
    /// addresses would take a hundred.
    pub fn published_marks(&self) -> PublishedMarks {
        PublishedMarks(vec![None; self.wallets.len()])
    }

    /// Marks `address`'s last published observation (from its stored scan
    /// state).
    pub fn mark_published(
        &self,
        marks: &mut PublishedMarks,
        address: &str,
        at: Option<OffsetDateTime>,
    ) {
        if let (Some(slot), Some(at)) = (self.slot(address), at) {
            if let Some(m) = marks.0.get_mut(slot as usize) {
                *m = Some(at.into());
            }
        }
    }

    /// Makes due again the wallets whose last read is newer than the last
    /// published observation of them (`published`, marked from their stored
    /// scan states): a read saved in the registry but lost with a `kill -9`
    /// before its publish is made again at once (not sooner than
    /// [`Intervals::min_gap`] after it), not at the wallet's next refresh.
    /// Returns how many. A read is taken as published when its observation
    /// is at most [`UNPUBLISHED_SLACK`] older than the read (the exchange's
    /// clock against ours). An empty read of a wallet that has a published
    /// observation and is not `held` (it held nothing when published) lost
    /// nothing: such a read changes nothing to publish (see
    /// `Book::apply_read`), so a published observation older than it is the
    /// rule there, not a loss.
    pub fn redo_unpublished(
        &mut self,
        published: &PublishedMarks,
        now: OffsetDateTime,
        held: impl Fn(&Address) -> bool,
    ) -> usize {
        let lost: Vec<Slot> = (0..self.wallets.len())
            .filter(|&i| {
                let seen = published.0.get(i).copied().flatten();
                let t = &self.wallets[i];
                let newer = t.entry.last_read_at.is_some_and(|read| {
                    seen.is_none_or(|p| read.at() > p.at() + UNPUBLISHED_SLACK)
                });
                let nothing_lost = seen.is_some() && t.entry.empty_reads > 0 && !held(&t.address);
                newer && !nothing_lost
            })
            .map(|i| i as Slot)
            .collect();
        for &slot in &lost {
            self.update_slot(slot, |t, cfg| {
                let read = t.entry.last_read_at.expect("filtered on a read").at();
                t.due = t.due.min((read + cfg.min_gap).max(now).into());
            });
        }
        lost.len()
    }

    fn slot(&self, address: &str) -> Option<Slot> {
        let address = Address::of(address);
        let hash = self.hasher.hash_one(&address);
        self.index
            .find(hash, |&i| self.wallets[i as usize].address == address)
            .copied()
    }

    fn insert(&mut self, mut t: Tracked) -> Slot {
        t.rank = rank_of(&t.entry);
        let slot = Slot::try_from(self.wallets.len()).expect("fewer than 4 billion wallets");
        Self::enqueue(&mut self.queues, &self.cfg, &t, slot);
        let Schedule {
            wallets,
            index,
            hasher,
            ..
        } = self;
        let hash = hasher.hash_one(&t.address);
        wallets.push(t);
        index.insert_unique(hash, slot, |&i| {
            hasher.hash_one(&wallets[i as usize].address)
        });
        slot
    }

    /// `t`'s keys: in its tier's lane, and in the sweeps' unless each of
    /// its reads is a sweep.
    fn keys(
        cfg: &Intervals,
        t: &Tracked,
        slot: Slot,
    ) -> impl Iterator<Item = (usize, (u32, Rank, Slot))> {
        let key = |due: Moment| (due.second_up(), t.rank, slot);
        std::iter::once((t.tier as usize, key(t.due)))
            .chain(sweep_due(&t.entry, t.tier, cfg).map(|s| (SWEEP, key(s))))
    }

    fn enqueue(queues: &mut [Queue; LANES], cfg: &Intervals, t: &Tracked, slot: Slot) {
        for (lane, key) in Self::keys(cfg, t, slot) {
            queues[lane].insert(key);
        }
    }

    /// Takes `t` out of the queues, by the keys [`Schedule::enqueue`] gave
    /// it: every change to a wallet goes through [`Schedule::update_slot`],
    /// which calls this before the change.
    fn dequeue(queues: &mut [Queue; LANES], cfg: &Intervals, t: &Tracked, slot: Slot) {
        for (lane, key) in Self::keys(cfg, t, slot) {
            let removed = queues[lane].remove(&key);
            debug_assert!(removed, "a queued wallet is found by its key");
        }
    }

    /// Removes from the queues, applies `f`, recomputes tier and queue positions.
    fn update(&mut self, address: &str, f: impl FnOnce(&mut Tracked, &Intervals)) {
        if let Some(slot) = self.slot(address) {
            self.update_slot(slot, f);
        }
    }

    fn update_slot(&mut self, slot: Slot, f: impl FnOnce(&mut Tracked, &Intervals)) {
        let t = &mut self.wallets[slot as usize];
        if !t.in_flight {
            Self::dequeue(&mut self.queues, &self.cfg, t, slot);
        }
        f(t, &self.cfg);
        t.tier = tier_of(&t.entry, &self.cfg);
        t.rank = rank_of(&t.entry);
        if !t.in_flight {
            Self::enqueue(&mut self.queues, &self.cfg, t, slot);
        }
        if !t.unsaved {
            t.unsaved = true;
            self.unsaved.push_back(slot);
        }
    }

    /// Number of wallets.
    pub fn len(&self) -> usize {
        self.wallets.len()
    }

    /// Whether the registry is empty.
    pub fn is_empty(&self) -> bool {
        self.wallets.is_empty()
    }

    /// A wallet by address.
    pub fn get(&self, address: &str) -> Option<&Tracked> {
        self.slot(address).map(|i| &self.wallets[i as usize])
    }

    /// Every wallet.
    pub fn iter(&self) -> impl Iterator<Item = &Tracked> {
        self.wallets.iter()
    }

    /// How fresh each tier is, indexed like [`Tier::ALL`].
    pub fn freshness(&self) -> [TierFreshness; TIERS] {
        let mut out = [TierFreshness::default(); TIERS];
        for t in &self.wallets {
            let f = &mut out[t.tier as usize];
            f.wallets += 1;
            match t.entry.last_read_at {
                None => f.unread += 1,
                Some(at) => {
                    let at = at.at();
                    f.oldest_read = Some(f.oldest_read.map_or(at, |o| o.min(at)));
                }
            }
        }
        out
    }

    /// Adds the wallet list's entries (always tracked; their labels and tags win).
    pub fn add_listed(
        &mut self,
        address: &str,
        label: Option<String>,
        tags: Vec<String>,
        now: OffsetDateTime,
    ) {
        let slot = match self.slot(address) {
            Some(slot) => slot,
            None => self.insert(Tracked::new(
                &RegistryEntry::new(address.to_owned(), DiscoverySource::List, now),
                now,
                Tier::Shrimp,
            )),
        };
        self.update_slot(slot, |t, _| {
            t.entry.sources |= DiscoverySource::List.bit();
            let listing = Listing { label, tags };
            t.listing = (listing != Listing::default()).then(|| Box::new(listing));
        });
    }

    /// Whether a wallet is on the operator's list.
    pub fn is_listed(t: &Tracked) -> bool {
        t.entry.sources & DiscoverySource::List.bit() != 0
    }

    /// Applies a discovery; returns whether the wallet is new.
    pub fn discover(&mut self, d: Discovery, now: OffsetDateTime) -> bool {
        let (address, source) = match &d {
            Discovery::Leaderboard { address, .. } => {
                (address.as_str(), DiscoverySource::Leaderboard)
            }
            Discovery::Trade {
                address, source, ..
            } => (address.as_str(), *source),
        };
        let (slot, new) = match self.slot(address) {
            Some(slot) => (slot, false),
            None => {
                let entry = RegistryEntry::new(address.to_owned(), source, now);
                (self.insert(Tracked::new(&entry, now, Tier::Shrimp)), true)
            }
        };
        let half_life = self.cfg.notional_half_life;
        self.update_slot(slot, |t, cfg| {
            let e = &mut t.entry;
            e.sources |= source.bit();
            match d {
                Discovery::Leaderboard { account_value, .. } => {
                    e.leaderboard_value = Some(CompactDecimal::from(&account_value));
                }
                Discovery::Trade {
                    coin, notional, at, ..
                } => {
                    let previous = usd(&e.traded_notional);
                    let decayed = match e.last_trade_at.map(Moment::at) {
                        Some(last) if at > last => previous * 0.5f64.powf((at - last) / half_life),
                        _ => previous,
                    };
                    e.traded_notional = CompactDecimal::from(&cents(decayed + notional.max(0.0)));
                    let at = Moment::of(at);
                    e.last_trade_at = Some(e.last_trade_at.map_or(at, |l| l.max(at)));
                    e.empty_reads = 0;
                    let dex = market_model::symbol::dex_of(&coin).unwrap_or("");
                    if !dex.is_empty() && !e.has_dex(dex) {
                        let mut dexes = e.dexes().to_vec();
                        dexes.push(dex.into());
                        e.set_dexes(dexes);
                    }
                }
            }
            // Due by what it is now (a new tier, a trade since its last read:
            // see `due_from`); a failed read's backoff holds it, but a trade
            // still makes it due.
            let tier = tier_of(&t.entry, cfg);
            let due = Moment::of(due_from(&t.entry, tier, cfg, now));
            t.due = if t.entry.failed_reads == 0 {
                due
            } else {
                t.due.min(due)
            };
        });
        new
    }

    /// Takes the next due wallet. A whale whose last read is older than
    /// [`Intervals::whale_deadline`] goes first; otherwise, among the lanes
    /// with a due wallet, the one furthest below its share of the requests
    /// (ties: the higher tier, the sweeps last), the earliest due within it.
    /// `dexes` are the exchange's dexes now.
    pub fn next_due(&mut self, now: OffsetDateTime, dexes: &[String]) -> Option<ReadJob> {
        let now_s = Moment::of(now).second_down();
        let due: Vec<usize> = (0..LANES)
            .filter(|&l| self.queues[l].first().is_some_and(|(d, _, _)| *d <= now_s))
            .collect();
        // The queue orders whales by refresh due (last read + refresh, or
        // sooner after a trade), so its first is the stalest, or one that a
        // trade made due and has waited as long.
        let late =
            Moment::of(now - (self.cfg.whale_deadline - self.cfg.refresh[Tier::Whale as usize]))
                .second_down();
        // A late whale is read outside the shares (its read counts in no
        // lane's pass): the shares divide what the deadline leaves.
        let overdue = self.queues[Tier::Whale as usize]
            .first()
            .is_some_and(|(d, _, _)| *d <= late);
        let lane = if overdue {
            Tier::Whale as usize
        } else {
            *due.iter()
                .min_by(|&&a, &&b| self.pass[a].total_cmp(&self.pass[b]).then(a.cmp(&b)))?
        };
        if !overdue {
            // A lane with nothing due banks no credit.
            let floor = self.pass[lane];
            for l in (0..LANES).filter(|l| !due.contains(l)) {
                self.pass[l] = self.pass[l].max(floor);
            }
        }
        let slot = self.queues[lane]
            .first()
            .map(|&(_, _, slot)| slot)
            .expect("the lane has a due wallet");
        let t = &mut self.wallets[slot as usize];
        Self::dequeue(&mut self.queues, &self.cfg, t, slot);
        t.in_flight = true;
        let sweep = lane == SWEEP || self.cfg.sweep[t.tier as usize].is_zero();
        let read: Vec<String> = if sweep {
            dexes.to_vec()
        } else {
            dexes
                .iter()
                .filter(|d| d.is_empty() || t.entry.has_dex(d))
                .cloned()
                .collect()
        };
        if !overdue {
            let share = f64::from(self.cfg.share[lane].max(1));
            self.pass[lane] += read.len().max(1) as f64 / share;
        }
        Some(ReadJob {
            address: t.address.to_string(),
            dexes: read,
            sweep,
            tier: t.tier,
        })
    }

    /// The earliest due time of any queued wallet.
    pub fn earliest_due(&self) -> Option<OffsetDateTime> {
        self.queues
            .iter()
            .filter_map(|q| q.first().map(|(d, _, _)| *d))
            .min()
            .map(|second| Moment::of_second(second).at())
    }

    /// Records a successful read.
    pub fn read_ok(
        &mut self,
        job: &ReadJob,
        account_value: &Decimal,
        position_value: &Decimal,
        positions: usize,
        active_dexes: &[String],
        at: OffsetDateTime,
    ) {
        self.update(&job.address, |t, cfg| {
            t.in_flight = false;
            let e = &mut t.entry;
            e.last_read_at = Some(at.into());
            e.failed_reads = 0;
            e.account_value = Some(CompactDecimal::from(account_value));
            e.position_value = Some(CompactDecimal::from(position_value));
            if job.sweep {
                e.last_sweep_at = Some(at.into());
            }
            // The dexes read keep the wallet only where it holds equity or a
            // position; one added by a trade during the read stays until read.
            if !e.dexes().is_empty() || active_dexes.iter().any(|d| !d.is_empty()) {
                let dexes = e
                    .dexes()
                    .iter()
                    .filter(|d| !job.dexes.iter().any(|r| r == &***d))
                    .cloned()
                    .chain(
                        active_dexes
                            .iter()
                            .filter(|d| !d.is_empty())
                            .map(|d| Box::from(d.as_str())),
                    )
                    .collect();
                e.set_dexes(dexes);
            }
            let empty = positions == 0 && !account_value.0.is_positive();
            e.empty_reads = if empty { e.empty_reads + 1 } else { 0 };
            // The read supersedes the trade estimate of its size.
            e.traded_notional = CompactDecimal::from(&Decimal::zero());
            let tier = tier_of(e, cfg);
            t.due = (at + cfg.refresh[tier as usize]).into();
        });
    }

    /// Records a read that was not used (it could not value a position):
    /// due again at `until`, with no failure counted.
    pub fn read_deferred(&mut self, job: &ReadJob, until: OffsetDateTime) {
        self.update(&job.address, |t, _| {
            t.in_flight = false;
            t.due = until.into();
        });
    }

    /// Records a failed read: retried after 1 min, doubling up to 1 h.
    pub fn read_failed(&mut self, job: &ReadJob, now: OffsetDateTime) {
        self.update(&job.address, |t, _| {
            t.in_flight = false;
            t.entry.failed_reads += 1;
            let backoff =
                Duration::minutes(1) * 2i32.pow(t.entry.failed_reads.clamp(1, 7) as u32 - 1);
            t.due = (now + backoff.min(Duration::hours(1))).into();
        });
    }

    /// Entries changed since the last call (to be saved).
    pub fn take_unsaved(&mut self) -> Vec<RegistryEntry> {
        self.take_unsaved_up_to(usize::MAX)
    }

    /// At most `n` of the entries changed since they were last taken: a
    /// registry that grew by a million wallets at once (an operator's list)
    /// is saved over several publishes, each of a bounded size.
    pub fn take_unsaved_up_to(&mut self, n: usize) -> Vec<RegistryEntry> {
        let n = n.min(self.unsaved.len());
        let mut out = Vec::with_capacity(n);
        for slot in self.unsaved.drain(..n) {
            let t = &mut self.wallets[slot as usize];
            t.unsaved = false;
            out.push(t.to_entry());
        }
        out
    }

    /// Entries changed and not saved yet.
    pub fn unsaved_len(&self) -> usize {
        self.unsaved.len()
    }

    /// Puts entries back as unsaved (after a failed save).
    pub fn mark_unsaved(&mut self, entries: &[RegistryEntry]) {
        for e in entries {
            if let Some(slot) = self.slot(&e.address) {
                let t = &mut self.wallets[slot as usize];
                if !t.unsaved {
                    t.unsaved = true;
                    self.unsaved.push_back(slot);
                }
            }
        }
    }

    /// The tier of a wallet now.
    pub fn tier(&self, address: &str) -> Option<Tier> {
        self.get(address).map(|t| t.tier)
    }

    /// When a wallet's next sweep is due (`None`: every read is a sweep).
    pub fn sweep_due_of(&self, address: &str) -> Option<OffsetDateTime> {
        self.get(address)
            .and_then(|t| sweep_due(&t.entry, t.tier, &self.cfg))
            .map(Moment::at)
    }

    /// When a wallet is next handed out, for a refresh or a sweep (`None`:
    /// unknown, or being read now).
    pub fn due_of(&self, address: &str) -> Option<OffsetDateTime> {
        self.get(address).filter(|t| !t.in_flight).map(|t| {
            sweep_due(&t.entry, t.tier, &self.cfg)
                .map_or(t.due, |s| s.min(t.due))
                .at()
        })
    }
}

/// A non-negative USD amount rounded to cents, as a decimal.
fn cents(v: f64) -> Decimal {
    let v = if v.is_finite() { v.max(0.0) } else { 0.0 };
    Decimal(BigDecimal::from_str(&format!("{v:.2}")).unwrap_or_else(|_| BigDecimal::from(0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-11-23 12:00:00 UTC);

    fn dexes() -> Vec<String> {
        vec![String::new(), "xyz".into(), "abc".into()]
    }

    fn lb(address: &str, value: &str) -> Discovery {
        Discovery::Leaderboard {
            address: address.into(),
            account_value: value.parse().unwrap(),
        }
    }

    #[test]
    fn a_registry_entry_and_its_queue_keys_stay_small() {
        // A million of each: 136 MiB of entries (160 before the sweep due
        // instant was derived and the dexes took one word), and queue keys
        // of 12 bytes (24 before).
        assert!(
            std::mem::size_of::<Tracked>() <= 136,
            "{}",
            std::mem::size_of::<Tracked>()
        );
        assert_eq!(std::mem::size_of::<(u32, Rank, Slot)>(), 12);
    }

    #[test]
    fn a_wallet_due_within_a_second_is_handed_out_at_its_end_never_before() {
        let mut s = Schedule::new(Intervals::default(), [], NOW);
        let at = NOW + Duration::milliseconds(300);
        s.discover(lb("0xw", "5000000"), at);
        assert_eq!(s.next_due(NOW, &dexes()), None, "not due yet");
        assert_eq!(s.next_due(at, &dexes()), None, "due within the second");
        assert_eq!(s.earliest_due(), Some(NOW + Duration::seconds(1)));
        let job = s
            .next_due(NOW + Duration::seconds(1), &dexes())
            .expect("due");
        assert_eq!(job.address, "0xw");
    }

    #[test]
    fn whales_are_read_before_smaller_wallets() {
        let mut s = Schedule::new(Intervals::default(), Vec::new(), NOW);
        s.discover(lb("0xsmall", "500.00"), NOW);
        s.discover(lb("0xwhale", "5000000.00"), NOW);
        s.discover(lb("0xshark", "250000"), NOW);
        let order: Vec<String> = std::iter::from_fn(|| s.next_due(NOW, &dexes()))
            .map(|j| j.address)
            .collect();
        assert_eq!(order, ["0xwhale", "0xshark", "0xsmall"]);
        assert_eq!(
            s.next_due(NOW, &dexes()),
            None,
            "in-flight wallets are not handed out twice"
        );
    }

    fn read(s: &mut Schedule, job: &ReadJob, value: &str, active: &[&str], at: OffsetDateTime) {
        let v: Decimal = value.parse().unwrap();
        let active: Vec<String> = active.iter().map(|d| d.to_string()).collect();
        s.read_ok(job, &v, &v, 1, &active, at);
    }

    #[test]
    fn reads_set_the_next_due_time_by_exposure_and_sweep_rarely() {
        let mut s = Schedule::new(Intervals::default(), Vec::new(), NOW);
        s.discover(lb("0xw", "4000000"), NOW);
        let job = s.next_due(NOW, &dexes()).unwrap();
        assert!(!job.sweep, "the first read is the main dex only");
        assert_eq!(job.dexes, [""]);
        read(&mut s, &job, "4000000", &[""], NOW);
        assert_eq!(s.next_due(NOW + Duration::seconds(119), &dexes()), None);
        let job = s.next_due(NOW + Duration::minutes(2), &dexes()).unwrap();
        assert!(!job.sweep, "a refresh reads the dexes it is known on");
        read(&mut s, &job, "4000000", &[""], NOW + Duration::minutes(2));
        // 4M USD: swept every 6 h / 4 = 90 min, counted from its discovery.
        let at = NOW + Duration::minutes(90);
        assert_eq!(s.sweep_due_of("0xw"), Some(at));
        let job = s.next_due(at - Duration::minutes(2), &dexes()).unwrap();
        assert!(
            !job.sweep,
            "a late refresh is not a sweep before the sweep is due"
        );
        read(&mut s, &job, "4000000", &[""], at - Duration::minutes(2));
        let job = s.next_due(at, &dexes()).unwrap();
        assert!(job.sweep);
        assert_eq!(job.dexes, dexes());
        read(&mut s, &job, "4000000", &["", "xyz"], at);
        assert_eq!(s.sweep_due_of("0xw"), Some(at + Duration::minutes(90)));
        let job = s.next_due(at + Duration::minutes(2), &dexes()).unwrap();
        assert!(!job.sweep);
        assert_eq!(job.dexes, ["", "xyz"], "only where it holds equity");
        // It closed its xyz position: the next refresh stops reading xyz.
        read(&mut s, &job, "4000000", &[""], at + Duration::minutes(2));
        let job = s.next_due(at + Duration::minutes(4), &dexes()).unwrap();
        assert_eq!(job.dexes, [""]);
        // It emptied its account: demoted after three empty reads, and a
        // demoted wallet's rare reads cover every dex.
        let zero = Decimal::zero();
        let mut at = at + Duration::minutes(4);
        s.read_ok(&job, &zero, &zero, 0, &[], at);
        for _ in 0..2 {
            at += Duration::hours(6);
            let job = s.next_due(at, &dexes()).unwrap();
            s.read_ok(&job, &zero, &zero, 0, &[], at);
        }
        assert_eq!(s.tier("0xw"), Some(Tier::Demoted));
        assert_eq!(s.sweep_due_of("0xw"), None);
        let job = s.next_due(at + Duration::days(7), &dexes()).unwrap();
        assert!(job.sweep);
        assert_eq!(s.len(), 1, "demoted, not forgotten");
    }

    #[test]
    fn the_biggest_are_swept_first_within_the_sweep_share() {
        let mut s = Schedule::new(Intervals::default(), Vec::new(), NOW);
        // 300 whales from 1M to 300M USD, read once, their refreshes not due.
        for i in 1..=300 {
            s.discover(lb(&format!("0xw{i:03}"), &format!("{}000000", i)), NOW);
        }
        let jobs: Vec<ReadJob> = std::iter::from_fn(|| s.next_due(NOW, &dexes())).collect();
        for job in &jobs {
            let millions = &job.address[3..];
            read(&mut s, job, &format!("{millions}000000"), &[""], NOW);
        }
        // A 300M whale's sweep is due after the shortest interval (15 min),
        // a 2M one's after 3 h.
        assert_eq!(s.sweep_due_of("0xw300"), Some(NOW + Duration::minutes(15)));
        assert_eq!(s.sweep_due_of("0xw002"), Some(NOW + Duration::hours(3)));
        // Refreshed 57 min later (late, so before any sweep), then at 60 min
        // every whale is due again (not late) and the 24 biggest (24M USD or
        // more: 6 h / 24 = 15 min) and more for a sweep: the sweeps get their
        // 6 % of the requests, biggest first.
        let refreshed = NOW + Duration::minutes(57);
        for _ in 0..300 {
            let job = s.next_due(refreshed, &dexes()).unwrap();
            assert!(!job.sweep, "late whales go first");
            let millions = &job.address[3..];
            read(&mut s, &job, &format!("{millions}000000"), &[""], refreshed);
        }
        let at = NOW + Duration::hours(1);
        let mut requests = [0usize; 2];
        let mut swept = Vec::new();
        for _ in 0..200 {
            let job = s.next_due(at, &dexes()).unwrap();
            requests[usize::from(job.sweep)] += job.dexes.len();
            if job.sweep {
                swept.push(job.address.clone());
            }
        }
        let share = requests[1] * 100 / (requests[0] + requests[1]);
        assert!(
            (5..=8).contains(&share),
            "sweeps took {share} % of {requests:?}"
        );
        // Biggest first (the refreshes take some of them meanwhile: a wallet
        // in flight is in no lane).
        assert_eq!(swept[0], "0xw300");
        assert!(swept.windows(2).all(|w| w[0] > w[1]), "{swept:?}");
    }

    #[test]
    fn a_whale_at_its_deadline_goes_before_every_share() {
        let mut s = Schedule::new(Intervals::default(), Vec::new(), NOW);
        for i in 0..100 {
            s.discover(lb(&format!("0xw{i:03}"), "5000000"), NOW);
            s.discover(lb(&format!("0xs{i:03}"), "500000"), NOW);
        }
        // Within the deadline the shares hold: some sharks are read.
        let first: Vec<Tier> = (0..40)
            .map(|_| {
                s.next_due(NOW + Duration::seconds(60), &dexes())
                    .unwrap()
                    .tier
            })
            .collect();
        assert!(first.contains(&Tier::Shark));
        // 270 s after discovery the remaining whales are past the deadline
        // (due at once, read 4.5 min late): every read goes to them first.
        let late = NOW + Duration::seconds(150);
        let whales_left = 100 - first.iter().filter(|&&t| t == Tier::Whale).count();
        let next: Vec<Tier> = (0..whales_left)
            .map(|_| s.next_due(late, &dexes()).unwrap().tier)
            .collect();
        assert!(next.iter().all(|&t| t == Tier::Whale), "{next:?}");
        assert_eq!(s.next_due(late, &dexes()).unwrap().tier, Tier::Shark);
    }

    #[test]
    fn tiers_share_the_requests_while_several_are_due() {
        let mut s = Schedule::new(Intervals::default(), Vec::new(), NOW);
        for i in 0..1000 {
            s.discover(lb(&format!("0xw{i:04}"), "5000000"), NOW);
            s.discover(lb(&format!("0xs{i:04}"), "500000"), NOW);
            s.discover(lb(&format!("0xf{i:04}"), "50000"), NOW);
        }
        let tiers: Vec<Tier> = (0..500)
            .map(|_| s.next_due(NOW, &dexes()).unwrap().tier)
            .collect();
        let count = |t: Tier| tiers.iter().filter(|&&x| x == t).count();
        // 80 : 8 : 3 of the shares, the rest (shrimp, demoted, sweeps) having nothing due.
        assert_eq!(tiers[0], Tier::Whale, "ties go to the higher tier");
        let (w, sh, f) = (count(Tier::Whale), count(Tier::Shark), count(Tier::Fish));
        assert_eq!(w + sh + f, 500);
        let expect = |share: usize| 500 * share / 91;
        assert!(w.abs_diff(expect(80)) <= 2, "{w} whale reads of 500");
        assert!(sh.abs_diff(expect(8)) <= 2, "{sh} shark reads of 500");
        assert!(f.abs_diff(expect(3)) <= 2, "{f} fish reads of 500");
        // Within a tier, of wallets due at once, the bigger goes first.
        let mut s = Schedule::new(Intervals::default(), Vec::new(), NOW);
        for (a, v) in [("0xa", "2000000"), ("0xb", "9000000"), ("0xc", "5000000")] {
            s.discover(lb(a, v), NOW);
        }
        let order: Vec<String> = std::iter::from_fn(|| s.next_due(NOW, &dexes()))
            .map(|j| j.address)
            .collect();
        assert_eq!(order, ["0xb", "0xc", "0xa"]);
        // Once the whales are all taken, the others get every read.
        let mut s = Schedule::new(Intervals::default(), Vec::new(), NOW);
        s.discover(lb("0xw", "5000000"), NOW);
        s.discover(lb("0xs", "500000"), NOW);
        s.discover(lb("0xf", "50000"), NOW);
        let order: Vec<Tier> = std::iter::from_fn(|| s.next_due(NOW, &dexes()))
            .map(|j| j.tier)
            .collect();
        assert_eq!(order, [Tier::Whale, Tier::Shark, Tier::Fish]);
    }

    #[test]
    fn a_trade_makes_a_wallet_due_and_adds_its_dex() {
        let mut s = Schedule::new(Intervals::default(), Vec::new(), NOW);
        s.discover(lb("0xa", "50"), NOW);
        let job = s.next_due(NOW, &dexes()).unwrap();
        let v: Decimal = "50".parse().unwrap();
        s.read_ok(&job, &v, &Decimal::zero(), 0, &["".into()], NOW);
        let later = NOW + Duration::minutes(5);
        assert_eq!(s.next_due(later, &dexes()), None);
        s.discover(
            Discovery::Trade {
                address: "0xa".into(),
                coin: "abc:GOLD".into(),
                notional: 2_500_000.0,
                at: later,
                source: DiscoverySource::Trades,
            },
            later,
        );
        assert_eq!(
            s.tier("0xa"),
            Some(Tier::Whale),
            "a big trade counts as exposure"
        );
        let job = s.next_due(later, &dexes()).unwrap();
        assert_eq!(job.dexes, ["", "abc"]);
    }

    #[test]
    fn a_wallet_read_below_its_leaderboard_value_stays_a_whale_until_swept() {
        let mut s = Schedule::new(Intervals::default(), Vec::new(), NOW);
        // The leaderboard says 1.065M; the main dex holds 731k (the rest is
        // on a HIP-3 dex its first read does not cover).
        s.discover(lb("0xw", "1065000"), NOW);
        let job = s.next_due(NOW, &dexes()).unwrap();
        assert_eq!(job.dexes, [""]);
        read(&mut s, &job, "731000", &[""], NOW);
        assert_eq!(
            s.tier("0xw"),
            Some(Tier::Whale),
            "not a shark on a partial read"
        );
        assert_eq!(s.sweep_due_of("0xw"), Some(NOW), "swept at once");
        let job = s.next_due(NOW + Duration::seconds(1), &dexes()).unwrap();
        assert!(job.sweep);
        assert_eq!(job.dexes, dexes());
        // The sweep finds 1.06M on two dexes: a whale by its reads now.
        let at = NOW + Duration::seconds(1);
        read(&mut s, &job, "1060000", &["", "abc"], at);
        assert_eq!(s.tier("0xw"), Some(Tier::Whale));
        // After a sweep, the reads alone size it: 900k is a shark's.
        let job = s.next_due(at + Duration::minutes(2), &dexes()).unwrap();
        assert_eq!(job.dexes, ["", "abc"]);
        read(
            &mut s,
            &job,
            "900000",
            &["", "abc"],
            at + Duration::minutes(2),
        );
        assert_eq!(s.tier("0xw"), Some(Tier::Shark));
        // A read close to the leaderboard value sweeps on the usual schedule.
        let mut s = Schedule::new(Intervals::default(), Vec::new(), NOW);
        s.discover(lb("0xv", "2000000"), NOW);
        let job = s.next_due(NOW, &dexes()).unwrap();
        read(&mut s, &job, "1900000", &[""], NOW);
        assert_eq!(s.sweep_due_of("0xv"), Some(NOW + Duration::hours(3)));
    }

    #[test]
    fn a_restart_keeps_the_read_a_trade_asked_for() {
        let mut s = Schedule::new(Intervals::default(), Vec::new(), NOW);
        for a in ["0xtraded", "0xquiet"] {
            s.discover(lb(a, "5000000"), NOW);
            let job = s.next_due(NOW, &dexes()).unwrap();
            read(&mut s, &job, "5000000", &[""], NOW);
        }
        let trade = NOW + Duration::seconds(30);
        s.discover(
            Discovery::Trade {
                address: "0xtraded".into(),
                coin: "BTC".into(),
                notional: 1000.0,
                at: trade,
                source: DiscoverySource::Trades,
            },
            trade,
        );
        // Killed before the read the trade asked for, restarted 5 s later.
        let restart = trade + Duration::seconds(5);
        let mut s = Schedule::new(Intervals::default(), s.take_unsaved(), restart);
        let job = s.next_due(restart, &dexes()).unwrap();
        assert_eq!(job.address, "0xtraded", "due at once");
        assert_eq!(
            s.next_due(restart, &dexes()),
            None,
            "the other waits its refresh"
        );
        assert_eq!(s.earliest_due(), Some(NOW + Duration::minutes(2)));
    }

    #[test]
    fn a_read_lost_before_its_publish_is_made_again_after_a_restart() {
        let mut s = Schedule::new(Intervals::default(), Vec::new(), NOW);
        let wallets = ["0xpublished", "0xlost", "0xnever", "0xquiet", "0xclosed"];
        for a in wallets {
            let empty = a == "0xquiet" || a == "0xclosed";
            let value = if empty { "0" } else { "50000" };
            s.discover(lb(a, value), NOW);
            let job = s.next_due(NOW, &dexes()).unwrap();
            let v: Decimal = value.parse().unwrap();
            s.read_ok(
                &job,
                &v,
                &v,
                usize::from(!empty),
                &["".into()],
                NOW + Duration::seconds(3),
            );
        }
        // 0xpublished's read was published (its observation 1 s before the
        // read's time); 0xlost's publish holds an older read; 0xnever's
        // none. 0xquiet and 0xclosed were read empty, and their last
        // publish is older: 0xquiet held nothing then (its read changed
        // nothing), 0xclosed held a position (its read closed it).
        let published = |a: &str| match a {
            "0xpublished" => Some(NOW + Duration::seconds(2)),
            "0xnever" => None,
            _ => Some(NOW - Duration::hours(1)),
        };
        let restart = NOW + Duration::seconds(30);
        let mut s = Schedule::new(Intervals::default(), s.take_unsaved(), restart);
        let mut marks = s.published_marks();
        for a in wallets {
            s.mark_published(&mut marks, a, published(a));
        }
        assert_eq!(s.redo_unpublished(&marks, restart, |a| a.is("0xclosed")), 3);
        let mut due: Vec<String> = std::iter::from_fn(|| s.next_due(restart, &dexes()))
            .map(|j| j.address)
            .collect();
        due.sort();
        assert_eq!(due, ["0xclosed", "0xlost", "0xnever"]);
    }

    #[test]
    fn failed_reads_back_off_and_everything_changed_is_saved() {
        let mut s = Schedule::new(Intervals::default(), Vec::new(), NOW);
        s.discover(lb("0xa", "50"), NOW);
        assert_eq!(s.take_unsaved().len(), 1);
        assert!(s.take_unsaved().is_empty());
        let job = s.next_due(NOW, &dexes()).unwrap();
        s.read_failed(&job, NOW);
        assert_eq!(s.take_unsaved()[0].failed_reads, 1);
        assert_eq!(s.earliest_due(), Some(NOW + Duration::minutes(1)));
    }

    mod restarts {
        //! The scheduler against a model of `kill -9`: random discoveries,
        //! trades, reads (ok, empty, failed, not used, still in flight),
        //! publishes and restarts from the registry as saved. A restart may
        //! make a read due sooner, never later than before it (past the
        //! restart); and a read saved but not published is due again.

        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Step {
            Leaderboard(usize, u64),
            Trade(usize, u64),
            /// Take the next due job and record the read (value, empty).
            Read(u64, bool),
            Fail,
            Defer,
            /// Take the next due job and leave it in flight.
            Take,
            Publish,
            Advance(i64),
            /// Time moves by milliseconds: due instants within a second.
            AdvanceMillis(i64),
            /// Time moves to the start of the second in which the earliest
            /// wallet falls due: the instant a whole-second queue would
            /// hand it out too early.
            ToDueSecond,
            Restart,
        }

        const POOL: usize = 6;

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                2 => (0..POOL, 0u64..5_000_000).prop_map(|(w, v)| Step::Leaderboard(w, v)),
                2 => (0..POOL, 0u64..3_000_000).prop_map(|(w, n)| Step::Trade(w, n)),
                4 => (0u64..5_000_000, any::<bool>()).prop_map(|(v, e)| Step::Read(v, e)),
                1 => Just(Step::Fail),
                1 => Just(Step::Defer),
                1 => Just(Step::Take),
                2 => Just(Step::Publish),
                3 => (1i64..900).prop_map(Step::Advance),
                2 => (1i64..3_000).prop_map(Step::AdvanceMillis),
                2 => Just(Step::ToDueSecond),
                2 => Just(Step::Restart),
            ]
        }

        /// The next due job, checked against every wallet's due instant
        /// before it: the wallet taken was due (never before), and a wallet
        /// due a second ago or more is never left waiting for nothing.
        fn take(s: &mut Schedule, now: OffsetDateTime) -> Result<Option<ReadJob>, TestCaseError> {
            let due: HashMap<String, Option<OffsetDateTime>> = s
                .iter()
                .map(|t| {
                    let a = t.address.to_string();
                    let d = s.due_of(&a);
                    (a, d)
                })
                .collect();
            let job = s.next_due(now, &dexes());
            match &job {
                Some(job) => {
                    let d = due[&job.address].expect("a wallet not in flight");
                    prop_assert!(
                        d <= now,
                        "{} taken at {} but due at {}",
                        job.address,
                        now,
                        d
                    );
                }
                None => {
                    let late = due
                        .values()
                        .flatten()
                        .find(|&&d| d <= now - Duration::SECOND);
                    prop_assert!(
                        late.is_none(),
                        "nothing taken at {} though due at {:?}",
                        now,
                        late
                    );
                }
            }
            Ok(job)
        }

        fn run(steps: &[Step]) -> Result<(), TestCaseError> {
            let address = |w: usize| format!("0x{w:02}");
            let mut now = NOW;
            let mut s = Schedule::new(Intervals::default(), Vec::new(), now);
            // The registry as saved (every second in `track`: after every step here).
            let mut saved: HashMap<String, RegistryEntry> = HashMap::new();
            // The observation time of each wallet's last published read, and
            // whether it was empty.
            let mut published: HashMap<String, (OffsetDateTime, bool)> = HashMap::new();
            let mut read_at: HashMap<String, (OffsetDateTime, bool)> = HashMap::new();
            for (n, step) in steps.iter().enumerate() {
                match step {
                    Step::Leaderboard(w, v) => {
                        s.discover(lb(&address(*w), &v.to_string()), now);
                    }
                    Step::Trade(w, notional) => {
                        s.discover(
                            Discovery::Trade {
                                address: address(*w),
                                coin: "BTC".into(),
                                notional: *notional as f64,
                                at: now,
                                source: DiscoverySource::Trades,
                            },
                            now,
                        );
                    }
                    Step::Read(value, empty) => {
                        if let Some(job) = take(&mut s, now)? {
                            let v: Decimal = if *empty {
                                Decimal::zero()
                            } else {
                                value.to_string().parse().unwrap()
                            };
                            let positions = usize::from(!empty);
                            s.read_ok(&job, &v, &v, positions, &["".into()], now);
                            read_at.insert(job.address, (now, *empty));
                        }
                    }
                    Step::Fail => {
                        if let Some(job) = take(&mut s, now)? {
                            s.read_failed(&job, now);
                        }
                    }
                    Step::Defer => {
                        if let Some(job) = take(&mut s, now)? {
                            s.read_deferred(&job, now + Duration::seconds(30));
                        }
                    }
                    Step::Take => {
                        take(&mut s, now)?;
                    }
                    Step::Publish => {
                        for (a, (at, empty)) in read_at.drain() {
                            // An empty read of a wallet published empty
                            // changes nothing: no publish writes it.
                            let quiet = empty && published.get(&a).is_some_and(|p| p.1);
                            if !quiet {
                                published.insert(a, (at, empty));
                            }
                        }
                    }
                    Step::Advance(secs) => now += Duration::seconds(*secs),
                    Step::AdvanceMillis(ms) => now += Duration::milliseconds(*ms),
                    Step::ToDueSecond => {
                        let earliest = s
                            .iter()
                            .filter_map(|t| s.due_of(&t.address.to_string()))
                            .min();
                        if let Some(due) = earliest {
                            let second = due.replace_nanosecond(0).expect("zero is a nanosecond");
                            now = now.max(second);
                        }
                    }
                    Step::Restart => {
                        let before: Vec<(String, Option<OffsetDateTime>)> = s
                            .iter()
                            .map(|t| {
                                let a = t.address.to_string();
                                let due = s.due_of(&a);
                                (a, due)
                            })
                            .collect();
                        read_at.clear(); // the reads in memory die with the process
                        let entries: Vec<RegistryEntry> = saved.values().cloned().collect();
                        let mut next = Schedule::new(Intervals::default(), entries, now);
                        let mut marks = next.published_marks();
                        for (a, (at, _)) in &published {
                            next.mark_published(&mut marks, a, Some(*at));
                        }
                        // The book holds the wallets published holding something.
                        next.redo_unpublished(&marks, now, |a| {
                            published.get(&a.to_string()).is_some_and(|p| !p.1)
                        });
                        for (a, due_before) in before {
                            let Some(due) = next.due_of(&a) else {
                                // Unknown after the restart: not saved yet
                                // (saving is every step here, so never).
                                return Err(TestCaseError::fail(format!("step {n}: {a} lost")));
                            };
                            // No wallet is read sooner than `min_gap` after its
                            // last read, restart or not. (A wallet in flight is
                            // due by what the registry holds after the restart:
                            // why it was taken may have changed since.)
                            let entry = next.get(&a).unwrap().to_entry();
                            let floor = entry
                                .last_read_at
                                .map_or(now, |r| r + Intervals::default().min_gap);
                            let limit = due_before
                                .map_or(OffsetDateTime::now_utc() + Duration::days(3650), |d| {
                                    d.max(now).max(floor)
                                });
                            prop_assert!(
                                due <= limit,
                                "step {}: {} due {} after the restart, {:?} before (now {})",
                                n,
                                a,
                                due,
                                due_before,
                                now
                            );
                            if let Some(read) = entry.last_read_at {
                                // An empty read of a wallet published empty
                                // lost nothing.
                                let quiet =
                                    entry.empty_reads > 0 && published.get(&a).is_some_and(|p| p.1);
                                let lost = !quiet
                                    && published
                                        .get(&a)
                                        .is_none_or(|p| read > p.0 + UNPUBLISHED_SLACK);
                                if lost {
                                    let cfg = Intervals::default();
                                    prop_assert!(
                                        due <= (read + cfg.min_gap).max(now),
                                        "step {}: {}'s unpublished read of {} is due at {}",
                                        n,
                                        a,
                                        read,
                                        due
                                    );
                                }
                            }
                        }
                        s = next;
                    }
                }
                for e in s.take_unsaved() {
                    saved.insert(e.address.clone(), e);
                }
            }
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
            #[test]
            fn a_restart_never_postpones_a_read(steps in prop::collection::vec(step(), 1..60)) {
                run(&steps)?;
            }
        }
    }
}
