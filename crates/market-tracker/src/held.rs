//! A position as the book holds it: its decimals compact (8 bytes each
//! instead of a `BigDecimal`'s 32 and a heap allocation), its instant in 8
//! bytes, its symbol shared with every other position in the market, and
//! nothing the wallet already says (address, label, tags) or the symbol
//! repeats (the size unit): 112 bytes. A model position (about 1 KB with
//! its heap) is made back only for the wallets a publish writes.

use std::collections::HashSet;
use std::sync::Arc;

use market_engine::CompactDecimal;
use market_model::{Direction, MarketPosition, MarketPositionText, PlainDecimal};

use crate::registry::Moment;

/// One open position of a wallet in the book.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// Network symbol (shared).
    pub symbol: Arc<str>,
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

/// The symbols held, each allocated once.
#[derive(Debug, Default)]
pub struct Symbols(HashSet<Arc<str>>);

impl Symbols {
    /// The shared copy of `symbol`.
    pub fn get(&mut self, symbol: &str) -> Arc<str> {
        if let Some(s) = self.0.get(symbol) {
            return s.clone();
        }
        let s: Arc<str> = Arc::from(symbol);
        self.0.insert(s.clone());
        s
    }
}

impl Held {
    /// `p` as the book holds it (its address, label and tags are its
    /// wallet's; its size unit is its symbol).
    pub fn of(p: &MarketPosition, symbols: &mut Symbols) -> Held {
        Held {
            symbol: symbols.get(&p.symbol),
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
    /// [`market_store::Store::load_for_serving`]). Its symbol is its own
    /// copy: [`Held::share_symbol`] shares it.
    pub fn of_text(p: &MarketPositionText<'_>) -> Held {
        let d = |t: &PlainDecimal<'_>| CompactDecimal::of(&t.to_decimal());
        Held {
            symbol: Arc::from(p.symbol),
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

    /// Replaces its symbol with the copy `symbols` shares.
    pub fn share_symbol(&mut self, symbols: &mut Symbols) {
        self.symbol = symbols.get(&self.symbol);
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
        let mut symbols = Symbols::default();
        let mut p = position(
            "0xa",
            "xyz:TSLA",
            Direction::Short,
            "1234.5600",
            Some("0.000012"),
        );
        p.funding_cost = "-0.10".parse().unwrap();
        let held = Held::of(&p, &mut symbols);
        let back = held.to_position("0xa");
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&p).unwrap()
        );
        let again = Held::of(&p, &mut symbols);
        assert!(
            Arc::ptr_eq(&held.symbol, &again.symbol),
            "one copy per symbol"
        );
        assert!(
            std::mem::size_of::<Held>() <= 112,
            "{}",
            std::mem::size_of::<Held>()
        );
    }
}
