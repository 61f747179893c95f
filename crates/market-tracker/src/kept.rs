//! A wallet's analytics history as the book keeps it: its scan state and
//! the positions it follows, in one allocation keyed once by the address.
//! The store's forms ([`WalletScanState`], [`TrackedPosition`]) own the
//! address, a `BigDecimal` per amount and a `String` per dex and symbol;
//! an own node keeps 300,000 of these with a million followed positions, so
//! the book holds the same values compactly (instants as [`Moment`],
//! amounts as [`CompactDecimal`], symbols as 4-byte keys) and makes the store's
//! forms back only for the wallet being read or written.

use market_engine::CompactDecimal;
use market_store::{TrackedPosition, WalletScanState};

use crate::followed::Followed;
use crate::registry::Moment;

/// One wallet's scan state and followed positions, compact (see the module).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    missed_scans: i32,
    closed_count: i32,
    win_count: i32,
    held: [i32; 4],
    last_seen_at: Option<Moment>,
    first_seen_at: Option<Moment>,
    first_account_value: Option<CompactDecimal>,
    realized_pnl: CompactDecimal,
    read_dexes: Option<Box<[Box<str>]>>,
    /// The positions it follows (most wallets of an exchange: none).
    pub followed: Box<[Followed]>,
}

impl Kept {
    /// `state` and `tracked` (its followed positions) as the book keeps them.
    pub fn of(state: &WalletScanState, tracked: &[TrackedPosition]) -> Kept {
        Kept {
            missed_scans: state.missed_scans,
            closed_count: state.closed_count,
            win_count: state.win_count,
            held: state.held,
            last_seen_at: state.last_seen_at.map(Moment::of),
            first_seen_at: state.first_seen_at.map(Moment::of),
            first_account_value: state.first_account_value.as_ref().map(CompactDecimal::from),
            realized_pnl: CompactDecimal::from(&state.realized_pnl),
            read_dexes: state
                .read_dexes
                .as_ref()
                .map(|d| d.iter().map(|d| Box::from(d.as_str())).collect()),
            followed: tracked.iter().map(Followed::of).collect(),
        }
    }

    /// The scan state of the wallet `address`.
    pub fn state(&self, address: &str) -> WalletScanState {
        WalletScanState {
            address: address.to_owned(),
            missed_scans: self.missed_scans,
            last_seen_at: self.last_seen_at.map(Moment::at),
            first_seen_at: self.first_seen_at.map(Moment::at),
            first_account_value: self
                .first_account_value
                .as_ref()
                .map(CompactDecimal::to_decimal),
            realized_pnl: self.realized_pnl.to_decimal(),
            closed_count: self.closed_count,
            win_count: self.win_count,
            held: self.held,
            read_dexes: self
                .read_dexes
                .as_ref()
                .map(|d| d.iter().map(|d| d.to_string()).collect()),
        }
    }

    /// The followed positions of the wallet `address`, in the store's form.
    pub fn tracked(&self, address: &str) -> Vec<TrackedPosition> {
        self.followed
            .iter()
            .map(|f| f.to_tracked(address))
            .collect()
    }

    /// The dexes its observation covers, when recorded.
    pub fn read_dexes(&self) -> Option<&[Box<str>]> {
        self.read_dexes.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use market_model::Direction;
    use time::macros::datetime;

    #[test]
    fn a_kept_history_comes_back_as_it_went_in() {
        let state = WalletScanState {
            address: "0xa".into(),
            missed_scans: 2,
            last_seen_at: Some(datetime!(2026-11-28 01:02:03.123456789 UTC)),
            first_seen_at: Some(datetime!(2026-11-01 00:00:00 UTC)),
            first_account_value: Some("1000.500".parse().unwrap()),
            // More digits than an i64 holds.
            realized_pnl: "-123456789012345678901234.50".parse().unwrap(),
            closed_count: 7,
            win_count: 3,
            held: [1, 2, 3, 1],
            read_dexes: Some(vec![String::new(), "xyz".into()]),
        };
        let tracked = vec![TrackedPosition {
            address: "0xa".into(),
            symbol: "xyz:TSLA".into(),
            direction: Direction::Short,
            opened_at: datetime!(2026-11-28 00:00:00.5 UTC),
            open_time_known: false,
            last_upnl: "0.0000".parse().unwrap(),
        }];
        let kept = Kept::of(&state, &tracked);
        assert_eq!(kept.state("0xa"), state);
        // Equal decimals may differ in scale: the text must not.
        let back = kept.state("0xa");
        assert_eq!(back.first_account_value.unwrap().0.to_string(), "1000.500");
        assert_eq!(
            back.realized_pnl.0.to_string(),
            state.realized_pnl.0.to_string()
        );
        assert_eq!(kept.tracked("0xa"), tracked);
        let empty = WalletScanState {
            address: "0xb".into(),
            ..WalletScanState::default()
        };
        assert_eq!(Kept::of(&empty, &[]).state("0xb"), empty);
        assert!(
            std::mem::size_of::<Kept>() <= 96,
            "{}",
            std::mem::size_of::<Kept>()
        );
    }
}
