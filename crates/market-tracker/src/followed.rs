//! A followed position as the book holds it: what the store's
//! [`TrackedPosition`] says but the address (the book's key already is the
//! wallet), its symbol as a 4-byte [`Symbol`], its instant as a
//! [`Moment`] and its uPnL compact. 24 bytes, where a
//! `TrackedPosition` takes about 200 with its heap (an owned address and
//! symbol, a `BigDecimal`): an own node follows a million positions.

use market_engine::CompactDecimal;
use market_model::Direction;
use market_store::TrackedPosition;

use crate::held::Symbol;
use crate::registry::Moment;

/// One position a wallet's analytics follow, in the book.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Followed {
    /// Network symbol.
    pub symbol: Symbol,
    /// Long or short.
    pub direction: Direction,
    /// Whether `opened_at` is its open time (the wallet was already followed
    /// when it opened).
    pub open_time_known: bool,
    /// The read that first saw it.
    pub opened_at: Moment,
    /// Its uPnL at the last read, USD.
    pub last_upnl: CompactDecimal,
}

impl Followed {
    /// `t` as the book holds it.
    pub fn of(t: &TrackedPosition) -> Followed {
        Followed {
            symbol: Symbol::of(&t.symbol),
            direction: t.direction,
            open_time_known: t.open_time_known,
            opened_at: Moment::of(t.opened_at),
            last_upnl: CompactDecimal::from(&t.last_upnl),
        }
    }

    /// The store's form of it, for the wallet `address`.
    pub fn to_tracked(&self, address: &str) -> TrackedPosition {
        TrackedPosition {
            address: address.to_owned(),
            symbol: self.symbol.to_string(),
            direction: self.direction,
            opened_at: self.opened_at.at(),
            open_time_known: self.open_time_known,
            last_upnl: self.last_upnl.to_decimal(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn a_followed_position_comes_back_as_it_went_in() {
        let t = TrackedPosition {
            address: "0xa".into(),
            symbol: "xyz:TSLA".into(),
            direction: Direction::Short,
            opened_at: datetime!(2026-11-28 01:02:03.123456789 UTC),
            open_time_known: true,
            // More digits than an i64 holds, and a trailing zero kept.
            last_upnl: "-123456789012345678901234.50".parse().unwrap(),
        };
        let f = Followed::of(&t);
        let back = f.to_tracked("0xa");
        assert_eq!(back, t);
        assert_eq!(back.last_upnl.0.to_string(), t.last_upnl.0.to_string());
        let again = Followed::of(&t);
        assert_eq!(f.symbol, again.symbol, "one key per symbol");
        assert!(
            std::mem::size_of::<Followed>() <= 24,
            "{}",
            std::mem::size_of::<Followed>()
        );
    }
}
