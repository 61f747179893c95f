//! What the engine reads of a position besides its JSON: a model struct or
//! a position already rendered from its stored text both provide it.

use bigdecimal::BigDecimal;
use market_model::{Direction, MarketPosition};

use crate::sort_key::SortKey;

/// What the engine reads of a position besides its JSON.
pub trait PositionKeys {
    /// The asset symbol.
    fn symbol(&self) -> &str;
    /// The wallet address.
    fn address(&self) -> &str;
    /// Long or short.
    fn direction(&self) -> Direction;
    /// The size in asset units (for the coverage report).
    fn size(&self) -> Size<'_>;
}

/// A position's size, as the coverage report sums it.
#[derive(Clone, Copy, Debug)]
pub enum Size<'a> {
    /// A model's decimal.
    Decimal(&'a BigDecimal),
    /// The integer key of a rendered position's size text.
    Key(&'a SortKey),
}

impl PositionKeys for MarketPosition {
    fn symbol(&self) -> &str {
        &self.symbol
    }
    fn address(&self) -> &str {
        &self.address
    }
    fn direction(&self) -> Direction {
        self.direction
    }
    fn size(&self) -> Size<'_> {
        Size::Decimal(&self.size.0)
    }
}

impl<P: PositionKeys> PositionKeys for &P {
    fn symbol(&self) -> &str {
        (**self).symbol()
    }
    fn address(&self) -> &str {
        (**self).address()
    }
    fn direction(&self) -> Direction {
        (**self).direction()
    }
    fn size(&self) -> Size<'_> {
        (**self).size()
    }
}
