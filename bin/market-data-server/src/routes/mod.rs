//! The endpoints, by resource, and the route table that lists each once.
//!
//! Each handler parses (its path and query types), calls the query layer
//! (`market_query`) and renders. Its `#[utoipa::path]` attribute is its one
//! declaration: path pattern, query type, responses and examples. The table
//! at the bottom names each handler once; routing (`app::mount`), usage
//! labels and the OpenAPI document (`openapi::document`) are all built from it.

use std::sync::LazyLock;

use actix_web::{web, FromRequest, Handler, Resource, Responder};
use utoipa::openapi::OpenApi as OpenApiDoc;

use crate::middleware::method_not_allowed;

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
pub mod wallets;

pub use health::Health;

/// Where an endpoint is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mount {
    /// Under each API prefix (`openapi::PREFIXES`), behind the API key.
    Api,
    /// At the root, without a key (health checks).
    Root,
}

/// One row of the route table.
pub struct Endpoint {
    /// Where it is served.
    pub mount: Mount,
    /// Its route pattern (under the prefix for [`Mount::Api`]), as written in
    /// the handler's `#[utoipa::path]`.
    pub pattern: String,
    /// Its OpenAPI operation under `pattern`, with the schemas it references.
    pub doc: OpenApiDoc,
    resource: fn(&str) -> Resource,
}

impl Endpoint {
    fn new(mount: Mount, doc: OpenApiDoc, resource: fn(&str) -> Resource) -> Self {
        let mut paths = doc.paths.paths.iter();
        let (pattern, item) = paths.next().expect("a handler declares one path");
        assert!(paths.next().is_none(), "a handler declares one path");
        // The API is read-only: every endpoint is GET (HEAD follows it).
        assert!(
            item.get.is_some()
                && [&item.put, &item.post, &item.delete, &item.patch, &item.head]
                    .iter()
                    .all(|op| op.is_none()),
            "{pattern}: endpoints are GET only"
        );
        Self {
            mount,
            pattern: pattern.clone(),
            doc,
            resource,
        }
    }

    /// The actix resource at `path` (the part of the pattern under its scope).
    pub fn resource(&self, path: &str) -> Resource {
        (self.resource)(path)
    }
}

/// A GET resource that answers HEAD too, and 405 to any other method.
fn get_resource<F, Args>(path: &str, handler: F) -> Resource
where
    F: Handler<Args>,
    Args: FromRequest + 'static,
    F::Output: Responder + 'static,
{
    web::resource(path)
        .route(web::get().to(handler.clone()))
        .route(web::head().to(handler))
        .default_service(web::to(method_not_allowed))
}

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
