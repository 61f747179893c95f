//! The OpenAPI document, generated from the handlers and model types.

use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, OpenApi as OpenApiDoc, PathItem, Ref, Response, ResponseBuilder,
};
use utoipa::{Modify, OpenApi};

use crate::error::{InvalidParam, Problem, PROBLEM_JSON};
use crate::routes;

/// Both path prefixes serve identical answers.
pub const PREFIXES: [&str; 2] = ["/v1", "/api/developer/v1"];

struct SecurityAddon;

impl Modify for SecurityAddon {
    fn modify(&self, openapi: &mut OpenApiDoc) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "apiKey",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-API-Key",
                "API token (starts with `mds_`); create one with `market-data-server token create --name NAME`.",
            ))),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Market and wallet data API",
        description = "Read-only market snapshots, scanned-wallet positions, wallet listings, daily liquidation-level maps and candles of a Hyperliquid-style perpetual-futures exchange.\n\nEvery `/v1` path is also served under `/api/developer/v1` with identical answers. Decimals are JSON strings in plain notation; timestamps are RFC 3339 UTC ending in `Z`; counts are integers. Errors are RFC 9457 problem details (`application/problem+json`).",
        version = env!("CARGO_PKG_VERSION"),
        license(name = "MIT OR Apache-2.0")
    ),
    paths(
        routes::list_networks,
        routes::list_markets,
        routes::get_market,
        routes::list_positions,
        routes::list_wallets,
        routes::list_liquidity_levels,
        routes::list_candles,
        routes::healthz,
        routes::readyz,
    ),
    components(schemas(Problem, InvalidParam)),
    modifiers(&SecurityAddon),
    tags(
        (name = "networks", description = "Source networks."),
        (name = "markets", description = "Market snapshots with scanned-wallet aggregates."),
        (name = "positions", description = "Open positions of scanned wallets."),
        (name = "wallets", description = "Scanned wallets."),
        (name = "liquidity", description = "Daily liquidation-level maps."),
        (name = "candles", description = "OHLCV candles."),
        (name = "health", description = "Liveness and readiness (no API key)."),
    )
)]
struct ApiDoc;

fn problem_response(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            PROBLEM_JSON,
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Problem")))
                .build(),
        )
        .build()
}

/// Statuses every operation can return (middleware-level), and the API operations in addition.
const COMMON: &[(&str, &str)] = &[
    (
        "413",
        "The request declares a body over 64 KiB (this API takes no body).",
    ),
    ("431", "The request headers exceed 16 KiB."),
    (
        "500",
        "Unexpected failure; the detail is generic and the cause is logged under the request id.",
    ),
];
const API: &[(&str, &str)] = &[
    ("400", "A query parameter is malformed, out of range, repeated or unknown, or the query string exceeds 4 KiB."),
    ("401", "Missing or invalid `X-API-Key` (missing, empty, wrong prefix, unknown, revoked or expired)."),
    ("406", "The `Accept` header excludes JSON."),
    ("503", "The database is unreachable or its connection pool is exhausted; retry after `Retry-After` seconds."),
];

/// Adds the problem responses that middleware can produce to every operation.
fn add_common_responses(doc: &mut OpenApiDoc) {
    for (path, item) in doc.paths.paths.iter_mut() {
        let is_api = path.starts_with("/v1/");
        for op in [&mut item.get, &mut item.head].into_iter().flatten() {
            let extra = COMMON.iter().chain(if is_api { API } else { &[] });
            for (status, description) in extra {
                op.responses
                    .responses
                    .entry((*status).to_owned())
                    .or_insert_with(|| problem_response(description).into());
            }
        }
    }
}

/// The complete document: every `/v1` operation duplicated under `/api/developer/v1`
/// with its own `operationId` (suffixed `Developer`).
pub fn document() -> OpenApiDoc {
    let mut doc = ApiDoc::openapi();
    add_common_responses(&mut doc);
    let v1: Vec<(String, PathItem)> = doc
        .paths
        .paths
        .iter()
        .filter(|(p, _)| p.starts_with("/v1/"))
        .map(|(p, item)| (p.clone(), item.clone()))
        .collect();
    for (path, mut item) in v1 {
        for op in [&mut item.get, &mut item.head].into_iter().flatten() {
            if let Some(id) = &op.operation_id {
                op.operation_id = Some(format!("{id}Developer"));
            }
        }
        let alias = format!("{}{}", PREFIXES[1], &path[PREFIXES[0].len()..]);
        doc.paths.paths.insert(alias, item);
    }
    doc
}

/// The document as pretty JSON (what `/api-docs/openapi.json` serves and `openapi/openapi.json` holds).
pub fn document_json() -> String {
    let mut s = document()
        .to_pretty_json()
        .expect("the document serializes");
    s.push('\n');
    s
}
