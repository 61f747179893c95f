//! A tally changed in place, with what undoes each change.
//!
//! A publish computes its aggregates by changing the base's tally. When
//! the version is not committed (the database refused it, or the publisher
//! was only looking for the wallets at fault), the publish undoes its
//! changes instead of having worked on a copy: a copy of a level is a
//! copy of its tree of members.
//!
//! What undoes a wallet's change is kept compactly: the figures the tally
//! counts of each position, as one-word decimals, not the model structs (a
//! publish of thousands of wallets would otherwise clone tens of thousands
//! of positions, a dozen heap decimals each, only to free them at the
//! commit).

use bigdecimal::BigDecimal;
use market_model::{Direction, MarketPosition};

use crate::aggregate::Quote;
use crate::compact::CompactDecimal;
use crate::tally::{Figures, NotAdded, Tally, Unquoted};

/// A tally being changed, and the changes that undo what was done to it.
#[derive(Debug)]
pub struct TallyEdit {
    tally: Tally,
    undo: Vec<Undo>,
    /// A wallet was taken out other than it was added: the tally is no
    /// longer exact, and undoing cannot make it so.
    broken: bool,
}

#[derive(Debug)]
enum Undo {
    /// The quotes the requoted markets had before.
    Quotes(Vec<Quote>),
    /// A wallet added (taken out again to undo) or taken out (added back).
    Wallet {
        address: Box<str>,
        account_value: CompactDecimal,
        positions: Vec<Counted>,
        added: bool,
    },
}

/// What the tally counted of one position: its market (by index) and
/// figures.
#[derive(Debug)]
struct Counted {
    symbol: u16,
    direction: Direction,
    value: CompactDecimal,
    size: CompactDecimal,
    leverage: CompactDecimal,
    entry: CompactDecimal,
    upnl: CompactDecimal,
    liq: Option<CompactDecimal>,
}

impl Counted {
    /// `None` when the tally has no such market (then it counted nothing).
    fn of(tally: &Tally, p: &MarketPosition) -> Option<Counted> {
        Some(Counted {
            symbol: u16::try_from(tally.symbol_index(&p.symbol)?).ok()?,
            direction: p.direction,
            value: CompactDecimal::of(&p.position_value.0),
            size: CompactDecimal::of(&p.size.0),
            leverage: CompactDecimal::of(&p.leverage.0),
            entry: CompactDecimal::of(&p.entry_price.0),
            upnl: CompactDecimal::of(&p.u_pnl.0),
            liq: p.liq_price.as_ref().map(|l| CompactDecimal::of(&l.0)),
        })
    }
}

/// A wallet's counted positions, or `None` when one is in a market the
/// tally lacks.
fn counted(tally: &Tally, positions: &[MarketPosition]) -> Option<Vec<Counted>> {
    positions.iter().map(|p| Counted::of(tally, p)).collect()
}

/// Takes out (`add` false) or adds back what `positions` counted.
fn change_back(
    tally: &mut Tally,
    address: &str,
    account_value: &CompactDecimal,
    positions: &[Counted],
    add: bool,
) -> Result<(), NotAdded> {
    // Owned values first (the symbol too: `change` borrows the tally
    // mutably); the figures borrow them.
    let owned: Vec<(String, [BigDecimal; 5], Option<BigDecimal>)> = positions
        .iter()
        .map(|c| {
            (
                tally.symbol(usize::from(c.symbol)).to_owned(),
                [
                    c.value.to_big(),
                    c.size.to_big(),
                    c.leverage.to_big(),
                    c.entry.to_big(),
                    c.upnl.to_big(),
                ],
                c.liq.as_ref().map(CompactDecimal::to_big),
            )
        })
        .collect();
    let figures = positions.iter().zip(&owned).map(
        |(c, (symbol, [value, size, leverage, entry, upnl], liq))| {
            (
                symbol.as_str(),
                Figures {
                    direction: c.direction,
                    value,
                    size,
                    leverage,
                    entry,
                    upnl,
                    liq: liq.as_ref(),
                },
            )
        },
    );
    tally.change(address, &account_value.to_big(), figures, add)
}

impl Tally {
    /// Starts changing this tally in place ([`TallyEdit::keep`] ends with
    /// the changes, [`TallyEdit::undo`] without them).
    pub fn edit(self) -> TallyEdit {
        TallyEdit {
            tally: self,
            undo: Vec::new(),
            broken: false,
        }
    }
}

impl TallyEdit {
    /// The tally with every change so far.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// [`Tally::requote`].
    pub fn requote(&mut self, quotes: &[Quote]) {
        let before = self
            .tally
            .quotes_of(quotes.iter().map(|q| q.symbol.as_str()));
        self.tally.requote(quotes);
        self.undo.push(Undo::Quotes(before));
    }

    /// [`Tally::add`]: nothing changes when it fails.
    pub fn add(
        &mut self,
        address: &str,
        account_value: &BigDecimal,
        positions: &[MarketPosition],
    ) -> Result<(), Unquoted> {
        self.tally.add(address, account_value, positions)?;
        self.record(address, account_value, positions, true);
        Ok(())
    }

    /// [`Tally::remove`]. When it fails, the tally is no longer exact:
    /// [`TallyEdit::undo`] then gives nothing back.
    pub fn remove(
        &mut self,
        address: &str,
        account_value: &BigDecimal,
        positions: &[MarketPosition],
    ) -> Result<(), NotAdded> {
        if let Err(e) = self.tally.remove(address, account_value, positions) {
            self.broken = true;
            return Err(e);
        }
        self.record(address, account_value, positions, false);
        Ok(())
    }

    /// Records a wallet's change that succeeded (so every market of its
    /// positions is the tally's).
    fn record(
        &mut self,
        address: &str,
        account_value: &BigDecimal,
        positions: &[MarketPosition],
        added: bool,
    ) {
        self.undo.push(Undo::Wallet {
            address: address.into(),
            account_value: CompactDecimal::of(account_value),
            positions: counted(&self.tally, positions)
                .expect("a changed wallet's markets are quoted"),
            added,
        });
    }

    /// The tally with the changes.
    pub fn keep(self) -> Tally {
        self.tally
    }

    /// The tally as it was before the first change, or `None` when a
    /// change broke it ([`TallyEdit::remove`] failed).
    pub fn undo(self) -> Option<Tally> {
        let TallyEdit {
            mut tally,
            undo,
            broken,
        } = self;
        if broken {
            return None;
        }
        for change in undo.into_iter().rev() {
            match change {
                Undo::Quotes(quotes) => tally.requote(&quotes),
                Undo::Wallet {
                    address,
                    account_value,
                    positions,
                    added,
                } => change_back(&mut tally, &address, &account_value, &positions, !added).ok()?,
            }
        }
        Some(tally)
    }
}
