//! Network symbols (re-exported from the model).

pub use market_model::symbol::{alias_of, canonical_of, dex_of};
