//! Keyset pagination: which answers are pages and how a query carries the
//! cursor of the next one.

use market_model::params::{
    CandlesQuery, Cursor, EventsQuery, HistoryQuery, Instant, LiquidityQuery, PositionsQuery,
    WalletsQuery,
};
use market_model::{
    Candle, CandleSeries, LiquidityDay, LiquidityLevelsList, MarketHistory, MarketHistoryPoint,
    MarketPosition, PositionEvent, PositionEventList, PositionList, Wallet, WalletHistory,
    WalletHistoryPoint, WalletList,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::Error;

/// An answer that is one page of a keyset-paged list.
pub trait Page: DeserializeOwned + Send + 'static {
    /// One item of the list.
    type Item: Send + 'static;
    /// The cursor of the next page; `None` on the last page.
    fn next_cursor(&self) -> Option<&str>;
    /// The page's items, in the list's order.
    fn into_items(self) -> Vec<Self::Item>;
}

/// The query of a paged list: it carries the cursor of the page it asks for.
pub trait PagedQuery: Serialize + Clone + Send + Sync + 'static {
    /// Asks for the page after the one whose `nextCursor` is `cursor`.
    fn set_cursor(&mut self, cursor: &str) -> Result<(), Error>;
}

macro_rules! page {
    ($list:ty, $item:ty, $field:ident) => {
        impl Page for $list {
            type Item = $item;
            fn next_cursor(&self) -> Option<&str> {
                self.next_cursor.as_deref()
            }
            fn into_items(self) -> Vec<$item> {
                self.$field
            }
        }
    };
}

page!(PositionList, MarketPosition, items);
page!(WalletList, Wallet, items);
page!(LiquidityLevelsList, LiquidityDay, items);
page!(CandleSeries, Candle, candles);
page!(MarketHistory, MarketHistoryPoint, items);
page!(WalletHistory, WalletHistoryPoint, items);
page!(PositionEventList, PositionEvent, items);

macro_rules! opaque_cursor {
    ($($query:ty),+) => {
        $(impl PagedQuery for $query {
            fn set_cursor(&mut self, cursor: &str) -> Result<(), Error> {
                self.cursor = Some(Cursor(cursor.to_owned()));
                Ok(())
            }
        })+
    };
}

opaque_cursor!(
    PositionsQuery,
    WalletsQuery,
    LiquidityQuery,
    HistoryQuery,
    EventsQuery
);

/// The candle cursor is the open time of the next candle.
impl PagedQuery for CandlesQuery {
    fn set_cursor(&mut self, cursor: &str) -> Result<(), Error> {
        self.cursor = Some(Instant::parse(cursor).map_err(|_| Error::Cursor(cursor.to_owned()))?);
        Ok(())
    }
}
