#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod rendered;
pub mod snapshot;

pub use rendered::RenderedPosition;
pub use snapshot::{
    AssetLookup, ItemKey, JsonItems, KeyedPage, Page, PositionKey, SavedError, SavedVersion,
    Snapshot, WalletKey, WalletOrder, WalletView,
};
