#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod cursor;
pub mod history;
pub mod pages;
pub mod strict;

use std::hash::{Hash, Hasher};

pub use cursor::{BucketKey, Cursors, EventKey, Keyset, LiquidityKey, Paging};
pub use history::{wallet_detail, EventsRequest, HistoryRequest, RECENT_EVENTS};
pub use pages::{
    check_network, market_order, resolve_asset, with_items, CandlesRequest, LiquidityRequest,
    PositionsPage, WalletsPage,
};
pub use strict::{parse_query, MAX_QUERY_LEN};

/// Why a request cannot be answered, in terms a caller can act on.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// A parameter is unknown, repeated, missing, malformed or out of range.
    #[error("Query parameter `{name}` {reason}.")]
    Param {
        /// The parameter's name.
        name: String,
        /// What is wrong and what is accepted.
        reason: String,
    },
    /// The query string is longer than [`MAX_QUERY_LEN`] bytes.
    #[error("The query string is {0} bytes long; at most {MAX_QUERY_LEN} bytes are accepted.")]
    QueryTooLong(usize),
    /// The network or asset does not exist; the text says how to find one.
    #[error("{0}")]
    NotFound(String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] market_store::StoreError),
}

impl QueryError {
    /// A problem with the parameter `name`.
    pub fn param(name: &str, reason: impl Into<String>) -> Self {
        QueryError::Param {
            name: name.to_owned(),
            reason: reason.into(),
        }
    }
}

/// A hash of everything that selects a response besides the data version.
pub fn identity(parts: impl Hash) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    parts.hash(&mut hasher);
    hasher.finish()
}
