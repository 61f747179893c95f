//! A tally changed in place, with what undoes each change.
//!
//! A publish computes its aggregates by changing the base's tally. When
//! the version is not committed (the database refused it, or the publisher
//! was only looking for the wallets at fault), the publish undoes its
//! changes instead of having worked on a copy: copying the levels a
//! publish touches cost more than changing them.

use bigdecimal::BigDecimal;
use market_model::MarketPosition;

use crate::aggregate::Quote;
use crate::tally::{NotAdded, Tally, Unquoted};

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
        account_value: BigDecimal,
        positions: Vec<MarketPosition>,
        added: bool,
    },
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
        self.undo.push(Undo::Wallet {
            address: address.into(),
            account_value: account_value.clone(),
            positions: positions.to_vec(),
            added: true,
        });
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
        self.undo.push(Undo::Wallet {
            address: address.into(),
            account_value: account_value.clone(),
            positions: positions.to_vec(),
            added: false,
        });
        Ok(())
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
                    added: true,
                } => tally.remove(&address, &account_value, &positions).ok()?,
                Undo::Wallet {
                    address,
                    account_value,
                    positions,
                    added: false,
                } => tally.add(&address, &account_value, &positions).ok()?,
            }
        }
        Some(tally)
    }
}
