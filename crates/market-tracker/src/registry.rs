//! A registry entry as the scheduler holds it: what [`RegistryEntry`]
//! persists, in about a third of its memory. An operator's own node lists
//! a million wallets and more; with a `BigDecimal` (32 bytes and a heap
//! allocation) for each of four amounts and 16 bytes for each instant, the
//! registry alone took about 1.1 KB a wallet.

use std::num::NonZeroI64;

use market_engine::CompactDecimal;
use market_store::RegistryEntry;
use time::OffsetDateTime;

/// An instant, in 8 bytes (an `OffsetDateTime` takes 16): nanoseconds since
/// the Unix epoch, which reach from 1677 to 2262. `Option<Moment>` is 8
/// bytes too: the epoch's own nanosecond is taken as the next one (no
/// registry time is in 1970), and an instant outside the range is clamped
/// to its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Moment(NonZeroI64);

impl Moment {
    /// `t`, to the nanosecond.
    pub fn of(t: OffsetDateTime) -> Moment {
        let nanos = i64::try_from(t.unix_timestamp_nanos()).unwrap_or(if t.year() < 1970 {
            i64::MIN
        } else {
            i64::MAX
        });
        Moment(NonZeroI64::new(nanos).unwrap_or(NonZeroI64::new(1).expect("one is not zero")))
    }

    /// The whole seconds from this instant to `later` (0 when `later` is
    /// not later), without a calendar instant of either.
    pub fn whole_seconds_until(self, later: Moment) -> u64 {
        let nanos = later.0.get().saturating_sub(self.0.get()).max(0);
        (nanos / 1_000_000_000) as u64
    }

    /// The whole second since the epoch at or after this instant, in 4
    /// bytes (0 before the epoch, `u32::MAX` from 2106 on): a wallet due
    /// within a second is due at its end, never before.
    pub fn second_up(self) -> u32 {
        let nanos = self.0.get();
        let up = nanos / 1_000_000_000 + i64::from(nanos % 1_000_000_000 > 0);
        u32::try_from(up.max(0)).unwrap_or(u32::MAX)
    }

    /// The whole second since the epoch at or before this instant (see
    /// [`Moment::second_up`]).
    pub fn second_down(self) -> u32 {
        let nanos = self.0.get();
        u32::try_from(nanos.div_euclid(1_000_000_000).max(0)).unwrap_or(u32::MAX)
    }

    /// The instant of a whole second since the epoch.
    pub fn of_second(second: u32) -> Moment {
        Moment::of(
            OffsetDateTime::from_unix_timestamp(i64::from(second))
                .expect("a u32 of seconds is in time's range"),
        )
    }

    /// The instant, in UTC.
    pub fn at(self) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(self.0.get()))
            .expect("an i64 of nanoseconds is in time's range")
    }
}

impl From<OffsetDateTime> for Moment {
    fn from(t: OffsetDateTime) -> Moment {
        Moment::of(t)
    }
}

/// What [`RegistryEntry`] holds of a wallet but its address, compactly:
/// amounts as [`CompactDecimal`] (same text back), instants as [`Moment`].
/// The field names and meanings are [`RegistryEntry`]'s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Bit set of the discovery sources that reported it.
    pub sources: i32,
    /// Consecutive reads with no equity and no position.
    pub empty_reads: i32,
    /// Consecutive failed reads.
    pub failed_reads: i32,
    /// When it was first discovered.
    pub first_seen_at: Moment,
    /// The leaderboard's `accountValue`, USD.
    pub leaderboard_value: Option<CompactDecimal>,
    /// Account value at the last read, USD.
    pub account_value: Option<CompactDecimal>,
    /// Open position value at the last read, USD.
    pub position_value: Option<CompactDecimal>,
    /// Traded notional, decayed, USD.
    pub traded_notional: CompactDecimal,
    /// Its last trade seen on a discovery stream.
    pub last_trade_at: Option<Moment>,
    /// Its last successful read.
    pub last_read_at: Option<Moment>,
    /// Its last read of every dex.
    pub last_sweep_at: Option<Moment>,
    /// HIP-3 dexes it traded or held equity on, sorted (most wallets: none):
    /// see [`Entry::dexes`]. Boxed twice, so that the field takes one word
    /// (a slice's pointer takes two) and a wallet without dexes no heap.
    dexes: Option<Box<Box<[Box<str>]>>>,
}

impl Entry {
    /// The compact form of `e` (its address is kept by the caller).
    pub fn of(e: &RegistryEntry) -> Entry {
        let mut entry = Entry {
            sources: e.sources,
            empty_reads: e.empty_reads,
            failed_reads: e.failed_reads,
            first_seen_at: e.first_seen_at.into(),
            leaderboard_value: e.leaderboard_value.as_ref().map(CompactDecimal::from),
            account_value: e.account_value.as_ref().map(CompactDecimal::from),
            position_value: e.position_value.as_ref().map(CompactDecimal::from),
            traded_notional: CompactDecimal::from(&e.traded_notional),
            last_trade_at: e.last_trade_at.map(Moment::of),
            last_read_at: e.last_read_at.map(Moment::of),
            last_sweep_at: e.last_sweep_at.map(Moment::of),
            dexes: None,
        };
        entry.set_dexes(e.dexes.iter().map(|d| Box::from(d.as_str())).collect());
        entry
    }

    /// HIP-3 dexes it traded or held equity on, sorted, each once.
    pub fn dexes(&self) -> &[Box<str>] {
        self.dexes.as_deref().map_or(&[], |d| &**d)
    }

    /// The entry to persist, with its address.
    pub fn to_entry(&self, address: &str) -> RegistryEntry {
        let decimal = |d: &Option<CompactDecimal>| d.as_ref().map(CompactDecimal::to_decimal);
        RegistryEntry {
            address: address.to_owned(),
            sources: self.sources,
            first_seen_at: self.first_seen_at.at(),
            leaderboard_value: decimal(&self.leaderboard_value),
            account_value: decimal(&self.account_value),
            position_value: decimal(&self.position_value),
            last_trade_at: self.last_trade_at.map(Moment::at),
            traded_notional: self.traded_notional.to_decimal(),
            dexes: self.dexes().iter().map(|d| d.to_string()).collect(),
            last_read_at: self.last_read_at.map(Moment::at),
            last_sweep_at: self.last_sweep_at.map(Moment::at),
            empty_reads: self.empty_reads,
            failed_reads: self.failed_reads,
        }
    }

    /// Whether it holds `dex`.
    pub fn has_dex(&self, dex: &str) -> bool {
        self.dexes().iter().any(|d| &**d == dex)
    }

    /// Replaces its dexes by `dexes`, sorted and each once.
    pub fn set_dexes(&mut self, mut dexes: Vec<Box<str>>) {
        dexes.sort();
        dexes.dedup();
        self.dexes = (!dexes.is_empty()).then(|| Box::new(dexes.into_boxed_slice()));
    }
}

/// An amount as a float, for the scheduler's estimates of size (never
/// stored, never served).
pub fn usd(d: &CompactDecimal) -> f64 {
    d.to_f64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use market_store::DiscoverySource;
    use time::macros::datetime;

    #[test]
    fn whole_seconds_are_what_the_calendar_instants_give() {
        let now = datetime!(2026-11-28 12:00:00 UTC);
        for at in [
            datetime!(2026-11-28 11:58:59.999999999 UTC),
            datetime!(2026-11-28 11:59:00 UTC),
            datetime!(2026-11-27 12:00:00.5 UTC),
            now,
            // After `now` (a clock step): zero.
            datetime!(2026-11-28 12:00:01 UTC),
        ] {
            assert_eq!(
                Moment::of(at).whole_seconds_until(Moment::of(now)),
                (now - at).whole_seconds().max(0) as u64,
                "{at}"
            );
        }
    }

    #[test]
    fn an_entry_comes_back_as_it_was_persisted() {
        let mut e = RegistryEntry::new(
            "0xabc".into(),
            DiscoverySource::Leaderboard,
            datetime!(2026-11-25 21:00:00.123456789 UTC),
        );
        e.leaderboard_value = Some("1234567.891".parse().unwrap());
        e.account_value = Some("0.10".parse().unwrap());
        e.position_value = Some("123456789012345678901234567890.5".parse().unwrap());
        e.traded_notional = "42.00".parse().unwrap();
        e.last_trade_at = Some(datetime!(2026-11-25 21:01:00 UTC));
        e.last_read_at = Some(datetime!(1970-01-01 00:00:01 UTC));
        e.dexes = vec!["abc".into(), "xyz".into()];
        e.empty_reads = 2;
        e.failed_reads = 1;
        let back = Entry::of(&e).to_entry("0xabc");
        assert_eq!(back, e);
        for (value, text) in [
            (&back.account_value, "0.10"),
            (&back.position_value, "123456789012345678901234567890.5"),
        ] {
            assert_eq!(value.as_ref().unwrap().to_string(), text);
        }
        assert_eq!(back.traded_notional.to_string(), "42.00");
    }

    #[test]
    fn whole_seconds_round_up_and_down_as_the_calendar_does() {
        for (at, up, down) in [
            (datetime!(2026-11-28 12:00:00 UTC), 0, 0),
            (datetime!(2026-11-28 12:00:00.000000001 UTC), 1, 0),
            (datetime!(2026-11-28 12:00:00.999999999 UTC), 1, 0),
        ] {
            let second = datetime!(2026-11-28 12:00:00 UTC).unix_timestamp() as u32;
            assert_eq!(Moment::of(at).second_up(), second + up, "{at}");
            assert_eq!(Moment::of(at).second_down(), second + down, "{at}");
            assert!(Moment::of_second(second + up).at() >= at);
        }
        let before_epoch = Moment::of(datetime!(1960-01-01 00:00:00.5 UTC));
        assert_eq!(
            (before_epoch.second_up(), before_epoch.second_down()),
            (0, 0)
        );
        let far = Moment::of(datetime!(2200-01-01 00:00:00 UTC));
        assert_eq!((far.second_up(), far.second_down()), (u32::MAX, u32::MAX));
    }

    #[test]
    fn an_entry_without_dexes_takes_no_heap_and_its_dexes_one_word() {
        let mut e = Entry::of(&RegistryEntry::new(
            "0xabc".into(),
            DiscoverySource::Leaderboard,
            datetime!(2026-11-25 21:00:00 UTC),
        ));
        assert!(e.dexes.is_none() && e.dexes().is_empty());
        e.set_dexes(vec!["xyz".into(), "abc".into(), "xyz".into()]);
        assert_eq!(e.dexes(), [Box::from("abc"), Box::from("xyz")]);
        assert!(e.has_dex("xyz") && !e.has_dex("ab"));
        e.set_dexes(Vec::new());
        assert!(e.dexes.is_none());
        assert_eq!(std::mem::size_of::<Option<Box<Box<[Box<str>]>>>>(), 8);
    }

    #[test]
    fn a_moment_is_eight_bytes_even_when_optional() {
        assert_eq!(std::mem::size_of::<Option<Moment>>(), 8);
        let t = datetime!(2026-11-25 21:00:00.000000001 UTC);
        assert_eq!(Moment::of(t).at(), t);
        assert!(Moment::of(t) < Moment::of(t + time::Duration::nanoseconds(1)));
        assert_eq!(
            Moment::of(datetime!(3000-01-01 00:00:00 UTC)).at(),
            OffsetDateTime::from_unix_timestamp_nanos(i64::MAX.into()).unwrap()
        );
    }
}
