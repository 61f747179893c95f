//! The endpoints, by resource. Each handler parses (its path and query
//! types), calls the query layer (`market_query`) and renders.

pub mod health;
pub mod liquidity;
pub mod markets;
pub mod networks;
pub mod wallets;

pub use health::{healthz, readyz, Health};
pub use liquidity::list_liquidity_levels;
pub use markets::{get_market, list_candles, list_markets, list_positions};
pub use networks::{get_coverage, list_networks};
pub use wallets::list_wallets;
