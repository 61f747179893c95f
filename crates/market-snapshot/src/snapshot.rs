//! One data version, indexed and rendered for serving, and patched instead
//! of rebuilt when a writer changed a few wallets.
//!
//! Every item (market, position, wallet, current liquidity day) is rendered
//! to JSON once, when it enters the served data, and every documented order
//! is kept as a sorted list. A page request is then a binary search for the
//! cursor plus copying bytes that are already rendered: no request sorts,
//! filters, aggregates or formats a decimal.
//!
//! Wallets and each wallet's list of positions are shared between versions
//! (`Arc`); a market's positions are references into those lists. Applying
//! a publish ([`Snapshot::apply`]) renders only the wallets it changed and
//! their positions, and merges them into the sorted lists of the served
//! version. Sort keys are kept typed beside each rendered item
//! ([`SortKey`](market_engine::SortKey)); nothing is parsed back out of JSON.

use std::sync::Arc;

use time::OffsetDateTime;

mod apply;
mod build;
mod codes;
mod markets;
mod pages;
mod reads;
mod saved;
mod spare;
#[cfg(test)]
mod testing;
mod wallets;

use markets::{MarketPositions, MarketsPart, PositionItem};
use spare::{Lists, Spare};
use wallets::Wallets;

pub use pages::{
    AssetLookup, ItemKey, JsonItems, KeyedPage, Page, PositionKey, WalletKey, WalletOrder,
    WalletView,
};
pub use saved::{SavedError, SavedVersion};
pub use wallets::wallet_value;

/// One immutable, indexed data version.
#[derive(Debug)]
pub struct Snapshot {
    /// Data version (monotonic).
    pub version: i64,
    /// When the scan behind this version was observed.
    pub observed_at: OffsetDateTime,
    part: MarketsPart,
    /// By market index.
    positions: Vec<Arc<MarketPositions>>,
    wallets: Wallets,
    /// Each wallet slot's positions on every market, by value descending
    /// then symbol (the items of `positions`, shared).
    by_wallet: Vec<WalletPositions>,
    /// The lists of the last version of this line dropped, for the next
    /// apply to write over.
    spare: Arc<Spare>,
}

impl Drop for Snapshot {
    /// Hands its sorted lists to the versions applied after it (a market's
    /// lists only when no newer version shares them).
    fn drop(&mut self) {
        let mut lists = Lists::default();
        for order in self.wallets.orders.drain().map(|(_, o)| o) {
            let (all, codes) = order.into_lists();
            lists.keep(all);
            lists.keep(codes);
        }
        lists.keep(std::mem::take(&mut self.wallets.by_address));
        lists.keep(std::mem::take(&mut self.wallets.address_codes));
        for market in self.positions.drain(..).filter_map(Arc::into_inner) {
            lists.keep(market.refs);
            lists.keep(market.codes);
            lists.keep(market.long);
            lists.keep(market.short);
        }
        self.spare.replace(lists);
    }
}

/// One wallet's position items.
type WalletPositions = Arc<[PositionItem]>;
