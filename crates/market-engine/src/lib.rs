#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod aggregate;
pub mod analytics;
pub mod buckets;
pub mod candles;
pub mod coverage;
mod fixed;
pub mod position;
pub mod snapshot;
pub mod symbols;

pub use aggregate::{
    materialize, AggregateError, Analytics, Materialized, Quote, ScanInput, WalletInput,
};
pub use buckets::{bucket_price, bucket_size_for_price};
pub use position::{PositionKeys, RenderedPosition, Size};
pub use snapshot::{
    AssetLookup, Changes, ItemKey, JsonItems, KeyedPage, Page, PositionKey, Snapshot, SortKey,
    WalletKey, WalletOrder,
};
