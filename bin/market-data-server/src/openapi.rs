//! The OpenAPI document, generated from the handlers and model types.

use serde_json::Value;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::openapi::server::{Server, ServerBuilder};
use utoipa::openapi::{
    ContentBuilder, OpenApi as OpenApiDoc, Ref, RefOr, Response, ResponseBuilder,
};
use utoipa::{Modify, OpenApi};

use market_model::params;

use crate::error::{ApiError, InvalidParam, Problem, ProblemKind, PROBLEM_JSON};
use crate::export;
use crate::routes::{Mount, ENDPOINTS, PREFIXES};

/// The alias prefix's server: `PREFIXES[1]` without the `/v1` that every
/// documented API path starts with.
const API_ALIAS: &str = "/api/developer";

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
        description = "Read-only market snapshots, scanned-wallet positions, wallet listings, daily liquidation-level maps and candles of a Hyperliquid-style perpetual-futures exchange.\n\nEvery `/v1` path is also served under `/api/developer/v1` with identical answers: the document's second server. Decimals are JSON strings in plain notation; timestamps are RFC 3339 UTC ending in `Z`; counts are integers. Errors are RFC 9457 problem details (`application/problem+json`).",
        version = env!("CARGO_PKG_VERSION"),
        license(name = "MIT OR Apache-2.0")
    ),
    components(schemas(
        Problem, InvalidParam, market_model::DataVersionEvent, market_model::MarketFigures, market_model::StreamEnd,
        // Parameter types: named once, referenced by every parameter of the type.
        params::NetworkId, params::AssetSymbol, params::WalletAddress, params::OrderParam, params::Cursor,
        params::Instant, params::Day, params::EventId, params::Amount,
        market_model::MarketSort, market_model::WalletSort, market_model::Interval, market_model::HistoryInterval,
        market_model::Direction, market_model::EventKind, market_model::SizeClass,
    )),
    modifiers(&SecurityAddon),
    tags(
        (name = "networks", description = "Source networks."),
        (name = "markets", description = "Market snapshots with scanned-wallet aggregates."),
        (name = "positions", description = "Open positions of scanned wallets."),
        (name = "wallets", description = "Scanned wallets."),
        (name = "liquidity", description = "Daily liquidation-level maps."),
        (name = "candles", description = "OHLCV candles."),
        (name = "coverage", description = "How complete and fresh the served data is."),
        (name = "history", description = "Positioning over time: market and wallet history, size-class cohorts and position events."),
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
    ("406", "The `Accept` header excludes JSON (and, on a list, CSV), or prefers CSV on an endpoint that is not a list."),
    ("429", "The API key has used its requests of the minute (or this address sent too many keys that do not authenticate); retry after `Retry-After` seconds. `RateLimit-Policy` and `RateLimit` say the quota and when it is back."),
    ("503", "The database is needed and cannot be used now: it is unreachable (database-backed pages not cached; an API key this server has not verified within its grace period, 10 minutes by default), or every slot for rendering uncached pages is taken. Endpoints served from memory keep answering. Retry after `Retry-After` seconds."),
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

fn header(description: &str, schema: Schema) -> utoipa::openapi::header::Header {
    utoipa::openapi::header::HeaderBuilder::new()
        .schema(schema)
        .description(Some(description))
        .build()
}

/// Freshness headers of every data response, and the 304 that `If-None-Match` can produce.
fn add_freshness(doc: &mut OpenApiDoc) {
    for (path, item) in doc.paths.paths.iter_mut() {
        if !path.starts_with("/v1/") {
            continue;
        }
        // A stream has no representation to tag or revalidate: only the
        // rate-limit headers apply.
        let stream = crate::state::stream::is_stream_path(path);
        for op in [&mut item.get, &mut item.head].into_iter().flatten() {
            if let Some(RefOr::T(ok)) = op.responses.responses.get_mut("200") {
                let text = || ObjectBuilder::new().schema_type(Type::String).into();
                if stream {
                    add_rate_limit_headers(ok);
                    continue;
                }
                ok.headers.insert("ETag".into(), header("Tag of this representation: send it back in `If-None-Match` to get a 304 while nothing changed.", text()));
                ok.headers.insert(
                    "Last-Modified".into(),
                    header("When the data version behind this response was observed (HTTP date); absent before the first data version.", text()),
                );
                ok.headers.insert(
                    "X-Data-Version".into(),
                    header(
                        "Data version (scan) this response was computed from; one response never mixes versions.",
                        ObjectBuilder::new().schema_type(Type::Integer).format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64))).minimum(Some(0)).into(),
                    ),
                );
                add_rate_limit_headers(ok);
                ok.headers.insert(
                    "Cache-Control".into(),
                    header(
                        "`no-cache`: revalidate with `If-None-Match` before reuse.",
                        text(),
                    ),
                );
            }
            op.responses
                .responses
                .entry("304".into())
                .or_insert_with(|| {
                    ResponseBuilder::new()
                        .description(
                            "Not modified: `If-None-Match` matches the current `ETag`; no body.",
                        )
                        .into()
                });
        }
    }
}

/// The lists' second representation (`text/csv`, negotiated by `Accept`)
/// and the `Link` header of the paged ones. The CSV columns are derived
/// from the row schema (`export`), so they are listed from the same place.
fn add_csv_and_links(doc: &mut OpenApiDoc) {
    for item in doc.paths.paths.values_mut() {
        let Some(op) = item.get.as_mut() else {
            continue;
        };
        let Some(list) = op
            .operation_id
            .as_deref()
            .and_then(export::List::of_operation)
        else {
            continue;
        };
        let Some(RefOr::T(ok)) = op.responses.responses.get_mut("200") else {
            continue;
        };
        let columns = export::headers(list);
        let schema = ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(format!(
                "RFC 4180 CSV (CRLF line ends) with a header row, one row per {}; the same page as the JSON answer (same parameters, limits and cursor). Decimals are exactly as in JSON; nested fields are dotted columns, lists of values one cell joined by `;`, null an empty cell. Columns: {}.",
                if list == export::List::Liquidity { "level (with its day's fields)" } else { "item" },
                columns.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
            )));
        ok.content.insert(
            "text/csv".into(),
            ContentBuilder::new()
                .schema(Some(schema))
                .example(Some(Value::String(format!("{}\r\n", columns.join(",")))))
                .build(),
        );
        if list.paged() {
            ok.headers.insert(
                "Link".into(),
                header(
                    "`<…>; rel=\"next\"` (RFC 8288): this request with `cursor` set to the next page's cursor, relative to the request's URL; absent on the last page. Sent with JSON and CSV alike (a CSV page has no `nextCursor` of its own).",
                    ObjectBuilder::new().schema_type(Type::String).into(),
                ),
            );
        }
    }
}

/// The rate-limit headers of an answer to an authenticated request.
fn add_rate_limit_headers(ok: &mut Response) {
    let text = || ObjectBuilder::new().schema_type(Type::String).into();
    ok.headers.insert(
        "RateLimit-Policy".into(),
        header("The key's quota (draft-ietf-httpapi-ratelimit-headers): `\"token\";q=1200;w=60` is 1200 requests per 60 s. Absent when rate limits are off.", text()),
    );
    ok.headers.insert(
        "RateLimit".into(),
        header("What is left of the quota: `\"token\";r=1187;t=1` is 1187 requests now, the whole quota back in 1 s. Absent when rate limits are off.", text()),
    );
}

fn problem_example(status: &str, path: &str) -> Value {
    let (kind, detail) = match status {
        "400" => (ProblemKind::InvalidParameter, ""),
        "401" => (ProblemKind::Unauthorized, "The X-API-Key header is missing; send your API key (it starts with `mds_`) in X-API-Key."),
        "404" => (ProblemKind::NotFound, "Unknown asset `BTCX`; symbols are case-sensitive (e.g. BTC, kPEPE, xyz:TSLA); GET /v1/networks/perpnet/markets lists them."),
        "406" if crate::state::stream::is_stream_path(path) => (ProblemKind::NotAcceptable, "The event stream is served as `text/event-stream` (its problems as JSON); send `Accept: text/event-stream` (or omit Accept)."),
        "406" => (ProblemKind::NotAcceptable, "This API serves JSON, and CSV on its lists; send `Accept: application/json` or `Accept: text/csv` (or omit Accept)."),
        "410" => (ProblemKind::Gone, "The events after id 1200 are no longer stored (past the writer's retention, 90 days by default, or removed by a re-seed); resume from id 5400 (`since=5400`), or connect without Last-Event-ID and `since` for live events only."),
        "413" => (ProblemKind::PayloadTooLarge, "The request body is 1048576 bytes; this read-only API takes no body (at most 65536 bytes are accepted)."),
        "431" => (ProblemKind::HeadersTooLarge, "The request headers total 20480 bytes; at most 16384 bytes are accepted."),
        "429" => (ProblemKind::RateLimited, "This API key has used its 1200 requests a minute; retry after 3 s."),
        "503" => (ProblemKind::Unavailable, "The database is unreachable or busy. Retry after the number of seconds in Retry-After."),
        _ => (ProblemKind::Internal, "The server failed to answer this request. Retry later; if it persists, report the requestId."),
    };
    let error = if kind == ProblemKind::InvalidParameter {
        ApiError::param("limit", "must be an integer from 1 to 200; got `500`")
    } else {
        ApiError::new(kind, detail)
    };
    let mut problem = error.problem();
    problem.instance = Some(
        path.replace("{network}", "perpnet")
            .replace("{asset}", "BTC"),
    );
    problem.request_id = Some("5f0c6a3e9b7d4c21".into());
    serde_json::to_value(problem).expect("problems serialize")
}

/// An example problem on every problem response (the 200 examples are in
/// the handlers' attributes).
fn set_problem_examples(doc: &mut OpenApiDoc) {
    for (path, item) in doc.paths.paths.iter_mut() {
        for op in [&mut item.get, &mut item.head].into_iter().flatten() {
            for (status, response) in op.responses.responses.iter_mut() {
                let RefOr::T(response) = response else {
                    continue;
                };
                if let Some(content) = response.content.get_mut(PROBLEM_JSON) {
                    content.example = Some(problem_example(status, path));
                }
            }
        }
    }
}

/// The servers of the API operations: the root, and the alias prefix that
/// serves every `/v1` path again. One operation per endpoint, so generated
/// clients get one function each and pick the prefix as their base URL.
fn api_servers() -> Vec<Server> {
    vec![
        ServerBuilder::new()
            .url("/")
            .description(Some("This server (`/v1/...`)."))
            .build(),
        ServerBuilder::new()
            .url(API_ALIAS)
            .description(Some(
                "The same API under the alias prefix (`/api/developer/v1/...`), with identical answers.",
            ))
            .build(),
    ]
}

/// The route table's operations, API ones under `/v1`, with the schemas
/// they reference.
fn operations() -> OpenApiDoc {
    let mut doc = ApiDoc::openapi();
    for endpoint in ENDPOINTS.iter() {
        doc = match endpoint.mount {
            Mount::Api => doc.nest(PREFIXES[0], endpoint.doc.clone()),
            Mount::Root => doc.merge_from(endpoint.doc.clone()),
        };
    }
    doc
}

/// The complete document: the operations with the responses, headers and
/// examples every one shares. The alias prefix is the document's second
/// server; the health checks, served at the root only, name the root as
/// their one server.
pub fn document() -> OpenApiDoc {
    let mut doc = operations();
    add_common_responses(&mut doc);
    add_freshness(&mut doc);
    add_csv_and_links(&mut doc);
    set_problem_examples(&mut doc);
    doc.servers = Some(api_servers());
    for endpoint in ENDPOINTS.iter().filter(|e| e.mount == Mount::Root) {
        if let Some(item) = doc.paths.paths.get_mut(&endpoint.pattern) {
            item.servers = Some(api_servers().into_iter().take(1).collect());
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The CSV columns come from `export`'s own collection of the row
    /// schemas: it must hold the document's schemas, unchanged.
    #[test]
    fn csv_rows_are_the_documents_schemas() {
        let doc = serde_json::to_value(document()).unwrap();
        let rows = serde_json::to_value(export::RowSchemas::openapi()).unwrap();
        let rows = rows["components"]["schemas"].as_object().unwrap();
        assert!(rows.len() >= 10, "{rows:?}");
        for (name, schema) in rows {
            assert_eq!(&doc["components"]["schemas"][name], schema, "{name}");
        }
    }
}
