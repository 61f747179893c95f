//! The endpoints, by resource, and the route table that lists each once.
//!
//! Each handler parses (its path and query types), calls the query layer
//! (`market_query`) and renders. Its `#[utoipa::path]` attribute is its one
//! declaration: path pattern, query type, responses and examples. The table
//! at the bottom ([`ENDPOINTS`]) names each handler once; routing
//! (`table::mount`), usage labels and the OpenAPI document
//! (`openapi::document`) are all built from it. What a row is, the prefixes
//! and the fallbacks are in `table`.

use std::sync::LazyLock;

/// A 200 example for a handler's `#[utoipa::path]`, captured from the demo
/// dataset into `openapi/examples/`.
macro_rules! example {
    ($file:literal) => {
        serde_json::from_str::<serde_json::Value>(include_str!(concat!(
            "../../../../openapi/examples/",
            $file
        )))
        .expect("the examples are JSON")
    };
}

pub mod events;
pub mod health;
pub mod liquidity;
pub mod markets;
pub mod networks;
pub mod stream;
pub mod table;
pub mod wallets;

pub use health::Health;
pub use table::{ApiPrefix, Endpoint, Mount, RoutePattern, PREFIXES};

use table::get_resource;

/// Builds the table from `mount: [module::handler, ...]` lists. Each handler's
/// OpenAPI operation comes from a one-path `#[derive(OpenApi)]`, so its path
/// is read from its own attribute.
macro_rules! route_table {
    ($($mount:ident: [$($module:ident::$handler:ident),* $(,)?]),* $(,)?) => {
        vec![$($({
            #[derive(utoipa::OpenApi)]
            #[openapi(paths($module::$handler))]
            struct Operation;
            Endpoint::new(
                Mount::$mount,
                <Operation as utoipa::OpenApi>::openapi(),
                |path| get_resource(path, $module::$handler),
            )
        }),*),*]
    };
}

/// Every endpoint, once.
pub static ENDPOINTS: LazyLock<Vec<Endpoint>> = LazyLock::new(|| {
    route_table! {
        Api: [
            networks::list_networks,
            markets::list_markets,
            markets::get_market,
            markets::list_positions,
            wallets::list_wallets,
            liquidity::list_liquidity_levels,
            markets::list_candles,
            networks::get_coverage,
            markets::get_cohorts,
            markets::get_market_history,
            wallets::get_wallet,
            wallets::get_wallet_history,
            events::list_position_events,
            stream::stream_position_events,
        ],
        Root: [health::healthz, health::readyz],
    }
});
