#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod aggregate;
pub mod analytics;
pub mod buckets;
pub mod candles;
pub mod cohorts;
pub mod compact;
pub mod coverage;
pub mod days;
mod fixed;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod position;
pub mod sort_key;
pub mod symbols;
pub mod tally;
pub mod tally_edit;
pub mod version;

pub use aggregate::{
    materialize, materialize_wallet, AggregateError, Analytics, Quote, ScanInput, WalletInput,
};
pub use buckets::{bucket_price, bucket_size_for_price};
pub use compact::CompactDecimal;
pub use fixed::pow10;
pub use position::{PositionKeys, Size};
pub use sort_key::SortKey;
pub use tally::{NotAdded, Rendered, Tally, Unquoted};
pub use tally_edit::TallyEdit;
pub use version::{DataVersion, MarketFigures, VersionChanges};
