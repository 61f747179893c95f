//! Materialization of the aggregates of one scan: markets, wallets and the
//! current day's liquidation levels, from quotes, wallets and positions.
//!
//! Split by concern, the public items re-exported here:
//!
//! - `input`: what a scan observed (quotes, wallets, analytics) and the
//!   error for input that breaks the aggregation contract;
//! - `rules`: the scalar rules (long/short ratio, 24 h change, size class,
//!   leverage);
//! - `levels`: the liquidation levels of one asset and its liquidity day;
//! - `index`: the string-keyed indexes and in-place orderings the
//!   materialization sorts with;
//! - `materialize`: the materialization of a scan and of one wallet.

mod index;
mod input;
mod levels;
mod materialize;
mod rules;
#[cfg(test)]
mod test_support;

pub use input::{AggregateError, Analytics, Quote, ScanInput, WalletInput};
pub use levels::{liquidity_day, liquidity_levels, totals_of};
pub(crate) use materialize::market_of;
pub use materialize::{materialize, materialize_wallet};
pub use rules::{account_leverage, change_pct, compact_size_class, long_short_ratio, size_class};
