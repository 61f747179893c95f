//! The registry in memory and the scheduler that decides which wallet to
//! read next: the tiers share the requests (most to the whales), and within
//! a tier the earliest due, then the largest, goes first.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::str::FromStr;

use bigdecimal::{BigDecimal, Signed, ToPrimitive};
use market_model::Decimal;
use market_store::{DiscoverySource, RegistryEntry};
use time::{Duration, OffsetDateTime};

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

const TIERS: usize = 5;

/// How often each tier is read, and how often its reads cover every dex.
#[derive(Clone, Debug)]
pub struct Intervals {
    /// Refresh interval per tier (whale … demoted).
    pub refresh: [Duration; TIERS],
    /// A read covers every dex when the last full sweep is older than this
    /// (per tier). A wallet never swept has its first sweep at a point of
    /// this interval after it was found, spread by its address, so the
    /// sweeps of wallets found together do not all fall due at once.
    pub sweep: [Duration; TIERS],
    /// Share of the reads (in requests) each tier gets while several tiers
    /// have due wallets, in percent. A tier with nothing due leaves its share
    /// to the others, and banks no credit for later.
    pub share: [u32; TIERS],
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
            sweep: [
                Duration::hours(6),
                Duration::days(1),
                Duration::days(3),
                Duration::days(7),
                Duration::ZERO, // a demoted wallet's rare read covers everything
            ],
            share: [85, 9, 3, 2, 1],
            min_gap: Duration::seconds(15),
            demote_after: 3,
            notional_half_life: Duration::hours(6),
        }
    }
}

fn usd(d: &Decimal) -> f64 {
    d.0.to_f64().unwrap_or(0.0)
}

/// The tier of an entry: by what its last read showed, else by the best
/// estimate of its size (leaderboard account value, traded notional).
pub fn tier_of(e: &RegistryEntry, cfg: &Intervals) -> Tier {
    if e.empty_reads >= cfg.demote_after && !e.traded_notional.0.is_positive() {
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

/// The best estimate of a wallet's size, USD.
fn exposure_of(e: &RegistryEntry) -> f64 {
    let exposure = if e.last_read_at.is_some() {
        let account = e.account_value.as_ref().map_or(0.0, usd);
        let positions = e.position_value.as_ref().map_or(0.0, usd);
        account.max(positions)
    } else {
        e.leaderboard_value.as_ref().map_or(0.0, usd)
    };
    // A large recent trade counts as exposure until the next read says otherwise.
    exposure.max(usd(&e.traded_notional))
}

fn rank_of(e: &RegistryEntry) -> Reverse<u64> {
    Reverse(exposure_of(e) as u64)
}

/// One wallet of the registry.
#[derive(Clone, Debug)]
pub struct Tracked {
    /// What is persisted.
    pub entry: RegistryEntry,
    /// Label from the wallet list (authoritative).
    pub label: Option<String>,
    /// Tags from the wallet list (authoritative).
    pub tags: Vec<String>,
    due: OffsetDateTime,
    /// Larger exposure first among wallets due at the same instant (a cold
    /// start, a leaderboard fetch).
    rank: Reverse<u64>,
    tier: Tier,
    in_flight: bool,
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

/// The registry in memory: every wallet, its tier and due time, and which
/// entries changed since they were last saved.
#[derive(Debug, Default)]
pub struct Schedule {
    cfg: Intervals,
    wallets: HashMap<String, Tracked>,
    queues: [BTreeSet<(OffsetDateTime, Reverse<u64>, String)>; TIERS],
    /// Stride-scheduling pass per tier: requests taken / share.
    pass: [f64; TIERS],
    unsaved: HashSet<String>,
}

impl Schedule {
    /// A schedule over the persisted registry. Wallets never read are due at once.
    pub fn new(cfg: Intervals, entries: Vec<RegistryEntry>, now: OffsetDateTime) -> Self {
        let mut s = Schedule {
            cfg,
            ..Schedule::default()
        };
        for entry in entries {
            let tier = tier_of(&entry, &s.cfg);
            let due = match entry.last_read_at {
                Some(t) => t + s.cfg.refresh[tier as usize],
                None => now,
            };
            s.insert(Tracked {
                entry,
                label: None,
                tags: Vec::new(),
                due,
                rank: Reverse(0),
                tier,
                in_flight: false,
            });
        }
        s
    }

    fn insert(&mut self, mut t: Tracked) {
        t.rank = rank_of(&t.entry);
        self.queues[t.tier as usize].insert((t.due, t.rank, t.entry.address.clone()));
        self.wallets.insert(t.entry.address.clone(), t);
    }

    /// Removes from the queue, applies `f`, recomputes tier and queue position.
    fn update(&mut self, address: &str, f: impl FnOnce(&mut Tracked, &Intervals)) {
        let Some(t) = self.wallets.get_mut(address) else {
            return;
        };
        self.queues[t.tier as usize].remove(&(t.due, t.rank, address.to_owned()));
        f(t, &self.cfg);
        t.tier = tier_of(&t.entry, &self.cfg);
        t.rank = rank_of(&t.entry);
        if !t.in_flight {
            self.queues[t.tier as usize].insert((t.due, t.rank, address.to_owned()));
        }
        self.unsaved.insert(address.to_owned());
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
        self.wallets.get(address)
    }

    /// Every wallet.
    pub fn iter(&self) -> impl Iterator<Item = &Tracked> {
        self.wallets.values()
    }

    /// Adds the wallet list's entries (always tracked; their labels and tags win).
    pub fn add_listed(
        &mut self,
        address: &str,
        label: Option<String>,
        tags: Vec<String>,
        now: OffsetDateTime,
    ) {
        if !self.wallets.contains_key(address) {
            self.insert(Tracked {
                entry: RegistryEntry::new(address.to_owned(), DiscoverySource::List, now),
                label: None,
                tags: Vec::new(),
                due: now,
                rank: Reverse(0),
                tier: Tier::Shrimp,
                in_flight: false,
            });
        }
        self.update(address, |t, _| {
            t.entry.sources |= DiscoverySource::List.bit();
            t.label = label;
            t.tags = tags;
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
                (address.clone(), DiscoverySource::Leaderboard)
            }
            Discovery::Trade {
                address, source, ..
            } => (address.clone(), *source),
        };
        let new = !self.wallets.contains_key(&address);
        if new {
            self.insert(Tracked {
                entry: RegistryEntry::new(address.clone(), source, now),
                label: None,
                tags: Vec::new(),
                due: now,
                rank: Reverse(0),
                tier: Tier::Shrimp,
                in_flight: false,
            });
        }
        let half_life = self.cfg.notional_half_life;
        self.update(&address, |t, cfg| {
            t.entry.sources |= source.bit();
            match d {
                Discovery::Leaderboard { account_value, .. } => {
                    t.entry.leaderboard_value = Some(account_value);
                }
                Discovery::Trade {
                    coin, notional, at, ..
                } => {
                    let previous = usd(&t.entry.traded_notional);
                    let decayed = match t.entry.last_trade_at {
                        Some(last) if at > last => previous * 0.5f64.powf((at - last) / half_life),
                        _ => previous,
                    };
                    t.entry.traded_notional = cents(decayed + notional.max(0.0));
                    t.entry.last_trade_at = Some(t.entry.last_trade_at.map_or(at, |l| l.max(at)));
                    t.entry.empty_reads = 0;
                    let dex = market_model::symbol::dex_of(&coin).unwrap_or("");
                    if !dex.is_empty() && !t.entry.dexes.iter().any(|d| d == dex) {
                        t.entry.dexes.push(dex.to_owned());
                        t.entry.dexes.sort();
                    }
                    // A trade makes it due now (not sooner than min_gap after its last read).
                    let earliest = t
                        .entry
                        .last_read_at
                        .map_or(now, |r| (r + cfg.min_gap).max(now));
                    t.due = t.due.min(earliest);
                }
            }
        });
        new
    }

    /// Takes the next due wallet: among the tiers with a due wallet, the one
    /// furthest below its share of the requests (ties: the higher tier), the
    /// earliest due within it. `dexes` are the exchange's dexes now.
    pub fn next_due(&mut self, now: OffsetDateTime, dexes: &[String]) -> Option<ReadJob> {
        let due: Vec<usize> = (0..TIERS)
            .filter(|&t| self.queues[t].first().is_some_and(|(d, _, _)| *d <= now))
            .collect();
        let tier = *due
            .iter()
            .min_by(|&&a, &&b| self.pass[a].total_cmp(&self.pass[b]).then(a.cmp(&b)))?;
        // A tier with nothing due banks no credit.
        let floor = self.pass[tier];
        for t in (0..TIERS).filter(|t| !due.contains(t)) {
            self.pass[t] = self.pass[t].max(floor);
        }
        let address = self.queues[tier]
            .first()
            .map(|(_, _, a)| a.clone())
            .expect("the tier has a due wallet");
        let t = self
            .wallets
            .get_mut(&address)
            .expect("queued wallets exist");
        self.queues[tier].remove(&(t.due, t.rank, address.clone()));
        t.in_flight = true;
        let interval = self.cfg.sweep[tier];
        let sweep = match t.entry.last_sweep_at {
            Some(s) => now - s >= interval,
            None => now - t.entry.first_seen_at >= interval * spread(&address),
        };
        let read: Vec<String> = if sweep {
            dexes.to_vec()
        } else {
            dexes
                .iter()
                .filter(|d| d.is_empty() || t.entry.dexes.contains(d))
                .cloned()
                .collect()
        };
        let share = f64::from(self.cfg.share[tier].max(1));
        self.pass[tier] += read.len().max(1) as f64 / share;
        Some(ReadJob {
            address,
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
            e.last_read_at = Some(at);
            e.failed_reads = 0;
            e.account_value = Some(account_value.clone());
            e.position_value = Some(position_value.clone());
            if job.sweep {
                e.last_sweep_at = Some(at);
                e.dexes = active_dexes
                    .iter()
                    .filter(|d| !d.is_empty())
                    .cloned()
                    .collect();
            } else {
                for d in active_dexes.iter().filter(|d| !d.is_empty()) {
                    if !e.dexes.contains(d) {
                        e.dexes.push(d.clone());
                    }
                }
            }
            e.dexes.sort();
            let empty = positions == 0 && !account_value.0.is_positive();
            e.empty_reads = if empty { e.empty_reads + 1 } else { 0 };
            // The read supersedes the trade estimate of its size.
            e.traded_notional = Decimal::zero();
            let tier = tier_of(e, cfg);
            t.due = at + cfg.refresh[tier as usize];
        });
    }

    /// Records a failed read: retried after 1 min, doubling up to 1 h.
    pub fn read_failed(&mut self, job: &ReadJob, now: OffsetDateTime) {
        self.update(&job.address, |t, _| {
            t.in_flight = false;
            t.entry.failed_reads += 1;
            let backoff =
                Duration::minutes(1) * 2i32.pow(t.entry.failed_reads.clamp(1, 7) as u32 - 1);
            t.due = now + backoff.min(Duration::hours(1));
        });
    }

    /// Entries changed since the last call (to be saved).
    pub fn take_unsaved(&mut self) -> Vec<RegistryEntry> {
        let unsaved = std::mem::take(&mut self.unsaved);
        unsaved
            .iter()
            .filter_map(|a| self.wallets.get(a).map(|t| t.entry.clone()))
            .collect()
    }

    /// Puts entries back as unsaved (after a failed save).
    pub fn mark_unsaved(&mut self, entries: &[RegistryEntry]) {
        self.unsaved
            .extend(entries.iter().map(|e| e.address.clone()));
    }

    /// The tier of a wallet now.
    pub fn tier(&self, address: &str) -> Option<Tier> {
        self.wallets.get(address).map(|t| t.tier)
    }
}

/// A fraction in [0, 1) fixed by the address (FNV-1a of its text).
fn spread(address: &str) -> f64 {
    let hash = address.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % 10_000) as f64 / 10_000.0
}

/// A non-negative USD amount rounded to cents, as a decimal.
fn cents(v: f64) -> Decimal {
    let v = if v.is_finite() { v.max(0.0) } else { 0.0 };
    Decimal(BigDecimal::from_str(&format!("{v:.2}")).unwrap_or_else(|_| BigDecimal::from(0)))
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn reads_set_the_next_due_time_by_exposure_and_sweep_rarely() {
        let mut s = Schedule::new(Intervals::default(), Vec::new(), NOW);
        s.discover(lb("0xw", "5000000"), NOW);
        let job = s.next_due(NOW, &dexes()).unwrap();
        assert!(!job.sweep, "the first read is the main dex only");
        assert_eq!(job.dexes, [""]);
        s.read_ok(
            &job,
            &"4000000".parse().unwrap(),
            &"3000000".parse().unwrap(),
            2,
            &["".into()],
            NOW,
        );
        assert_eq!(s.next_due(NOW + Duration::seconds(119), &dexes()), None);
        // Its first sweep falls within the whale sweep interval (6 h) of its discovery.
        let later = NOW + Duration::hours(6) + Duration::minutes(2);
        let job = s.next_due(later, &dexes()).unwrap();
        assert!(job.sweep);
        assert_eq!(job.dexes, dexes());
        s.read_ok(
            &job,
            &"4000000".parse().unwrap(),
            &"3000000".parse().unwrap(),
            2,
            &["".into(), "xyz".into()],
            later,
        );
        let job = s.next_due(later + Duration::minutes(2), &dexes()).unwrap();
        assert!(!job.sweep);
        assert_eq!(job.dexes, ["", "xyz"], "only where it holds equity");
        // It emptied its account: demoted after three empty reads.
        let zero = Decimal::zero();
        let mut at = later + Duration::minutes(2);
        s.read_ok(&job, &zero, &zero, 0, &[], at);
        for _ in 0..2 {
            at += Duration::hours(6);
            let job = s.next_due(at, &dexes()).unwrap();
            s.read_ok(&job, &zero, &zero, 0, &[], at);
        }
        assert_eq!(s.tier("0xw"), Some(Tier::Demoted));
        assert_eq!(s.len(), 1, "demoted, not forgotten");
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
        // 85 : 9 : 3 of the shares, the rest (shrimp, demoted) having nothing due.
        assert_eq!(tiers[0], Tier::Whale, "ties go to the higher tier");
        let (w, sh, f) = (count(Tier::Whale), count(Tier::Shark), count(Tier::Fish));
        assert_eq!(w + sh + f, 500);
        let expect = |share: usize| 500 * share / 97;
        assert!(w.abs_diff(expect(85)) <= 2, "{w} whale reads of 500");
        assert!(sh.abs_diff(expect(9)) <= 2, "{sh} shark reads of 500");
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
}
