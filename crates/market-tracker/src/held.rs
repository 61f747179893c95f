//! A position as the book holds it: its decimals compact (8 bytes each
//! instead of a `BigDecimal`'s 32 and a heap allocation), its instant in 8
//! bytes, its symbol a 4-byte [`Symbol`], and nothing the wallet already
//! says (address, label, tags) or the symbol repeats (the size unit): 96
//! bytes. A model position (about 1 KB with its heap) is made back only
//! for the wallets a publish writes.

use std::fmt;
use std::ops::Deref;
use std::sync::LazyLock;

use lasso::{Spur, ThreadedRodeo};

use market_engine::CompactDecimal;
use market_model::{Direction, MarketPosition, MarketPositionText, PlainDecimal};

use crate::registry::Moment;

/// One open position of a wallet in the book.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// Network symbol.
    pub symbol: Symbol,
    /// Long or short.
    pub direction: Direction,
    /// When it was observed.
    observed_at: Moment,
    value: CompactDecimal,
    liq: Option<CompactDecimal>,
    leverage: CompactDecimal,
    size: CompactDecimal,
    upnl: CompactDecimal,
    upnl_pct: CompactDecimal,
    entry: CompactDecimal,
    mark: CompactDecimal,
    margin: CompactDecimal,
    funding: CompactDecimal,
}

/// A market's symbol in 4 bytes: its key in the process's one table of
/// the symbols met ([`lasso::ThreadedRodeo`]), where each text is kept once
/// for the life of the process. A shared pointer to the text took 16 bytes
/// in each of a million positions and a million followed positions. The
/// table only grows: an exchange lists hundreds of markets, and a symbol
/// that is delisted is a few bytes kept.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Symbol(Spur);

static SYMBOLS: LazyLock<ThreadedRodeo> = LazyLock::new(ThreadedRodeo::new);

impl Symbol {
    /// The symbol whose text is `text`.
    pub fn of(text: &str) -> Symbol {
        Symbol(SYMBOLS.get_or_intern(text))
    }

    /// Its text.
    pub fn as_str(self) -> &'static str {
        SYMBOLS.resolve(&self.0)
    }
}

impl Deref for Symbol {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Held {
    /// `p` as the book holds it (its address, label and tags are its
    /// wallet's; its size unit is its symbol).
    pub fn of(p: &MarketPosition) -> Held {
        Held {
            symbol: Symbol::of(&p.symbol),
            direction: p.direction,
            observed_at: p.observed_at.into(),
            value: (&p.position_value).into(),
            liq: p.liq_price.as_ref().map(CompactDecimal::from),
            leverage: (&p.leverage).into(),
            size: (&p.size).into(),
            upnl: (&p.u_pnl).into(),
            upnl_pct: (&p.u_pnl_pct).into(),
            entry: (&p.entry_price).into(),
            mark: (&p.mark_price).into(),
            margin: (&p.margin).into(),
            funding: (&p.funding_cost).into(),
        }
    }

    /// A position as the store reads it back for serving (its text; see
    /// [`market_store::Store::load_for_serving`]).
    pub fn of_text(p: &MarketPositionText<'_>) -> Held {
        let d = |t: &PlainDecimal<'_>| CompactDecimal::of(&t.to_decimal());
        Held {
            symbol: Symbol::of(p.symbol),
            direction: p.direction,
            observed_at: p.observed_at.into(),
            value: d(&p.position_value),
            liq: p.liq_price.as_ref().map(d),
            leverage: d(&p.leverage),
            size: d(&p.size),
            upnl: d(&p.u_pnl),
            upnl_pct: d(&p.u_pnl_pct),
            entry: d(&p.entry_price),
            mark: d(&p.mark_price),
            margin: d(&p.margin),
            funding: d(&p.funding_cost),
        }
    }

    /// The model position of the wallet `address`, without label and tags
    /// (materializing the wallet fills them in).
    pub fn to_position(&self, address: &str) -> MarketPosition {
        MarketPosition {
            address: address.to_owned(),
            label: None,
            tags: Vec::new(),
            symbol: self.symbol.to_string(),
            direction: self.direction,
            position_value: self.value.to_decimal(),
            liq_price: self.liq.as_ref().map(CompactDecimal::to_decimal),
            observed_at: self.observed_at.at(),
            leverage: self.leverage.to_decimal(),
            size: self.size.to_decimal(),
            size_unit: self.symbol.to_string(),
            u_pnl: self.upnl.to_decimal(),
            u_pnl_pct: self.upnl_pct.to_decimal(),
            entry_price: self.entry.to_decimal(),
            mark_price: self.mark.to_decimal(),
            margin: self.margin.to_decimal(),
            funding_cost: self.funding.to_decimal(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use market_engine::fixtures::position;

    #[test]
    fn a_position_comes_back_as_it_went_in() {
        let mut p = position(
            "0xa",
            "xyz:TSLA",
            Direction::Short,
            "1234.5600",
            Some("0.000012"),
        );
        p.funding_cost = "-0.10".parse().unwrap();
        let held = Held::of(&p);
        let back = held.to_position("0xa");
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&p).unwrap()
        );
        let again = Held::of(&p);
        assert_eq!(held.symbol, again.symbol, "one key per symbol");
        assert_eq!(held.symbol.as_str(), "xyz:TSLA");
        assert_ne!(held.symbol, Symbol::of("xyz:TSL"));
        assert!(
            std::mem::size_of::<Held>() <= 96,
            "{}",
            std::mem::size_of::<Held>()
        );
    }
}
