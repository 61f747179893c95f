//! The network list and the coverage report.

use actix_web::{web, HttpRequest, HttpResponse};
use market_model::params::{NetworkPath, NoQuery};
use market_model::{NetworkCoverage, NetworkItem, NetworkList, NETWORK_ID};
use market_snapshot::Snapshot;

use crate::error::{ApiError, Problem};
use crate::export::List;
use crate::http::{
    request_identity, snapshot_bytes, versioned, versioned_list, ApiPath, StrictQuery,
};
use crate::state::AppState;

type Data = web::Data<AppState>;

/// List the networks.
///
/// Lists the source networks the service serves (one: `perpnet`). Also a cheap way to check that a key works.
#[utoipa::path(
    get,
    path = "/networks",
    operation_id = "listNetworks",
    tag = "networks",
    responses(
        (status = 200, description = "The networks (never paged; `nextCursor` is always null).", body = NetworkList, example = json!(example!("networks.json"))),
        (status = 400, description = "A query parameter was given (this endpoint takes none).", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn list_networks(
    req: HttpRequest,
    _query: StrictQuery<NoQuery>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let snapshot = state.snapshot();
    Ok(versioned_list(
        &req,
        &snapshot,
        request_identity(&req),
        List::Networks,
        || {
            let list = NetworkList {
                items: vec![NetworkItem {
                    network: NETWORK_ID.to_owned(),
                    display_name: "Perpnet (Hyperliquid-style perpetuals)".to_owned(),
                    scan_asset_count: snapshot.asset_count() as u32,
                }],
                next_cursor: None,
            };
            serde_json::to_vec(&list)
                .expect("responses serialize")
                .into()
        },
    ))
}

/// Get the coverage report.
///
/// How complete and how fresh the served data version is. `wallets` counts the wallets the writer
/// tracks and how recently each was read: with `track` that is its whole registry (wallets found on the
/// leaderboard, the trades stream, node trades or the wallet list, read or not, served or not); with
/// `scan`, `import` or the demo data it is the served wallets. Staleness is `asOf` minus the wallet's last
/// read, by size class (the account value of its last read). `markets` gives, per market, how much of
/// the exchange's open interest the scanned positions hold: each open position has a long and a short
/// side, so the covered open interest is (sum of long sizes + sum of short sizes) / 2 × price. Computed
/// once per data version; ages are as of `asOf`, the version's publish time.
#[utoipa::path(
    get,
    path = "/networks/{network}/coverage",
    operation_id = "getCoverage",
    tag = "coverage",
    params(NetworkPath, NoQuery),
    responses(
        (status = 200, description = "The coverage report of the served data version.", body = NetworkCoverage, example = json!(example!("coverage.json"))),
        (status = 400, description = "A query parameter was given (this endpoint takes none).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn get_coverage(
    req: HttpRequest,
    ApiPath(_network): ApiPath<NetworkPath>,
    _query: StrictQuery<NoQuery>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let snapshot = state.snapshot();
    Ok(versioned(
        &req,
        &snapshot,
        market_query::identity("coverage"),
        || snapshot_bytes(&snapshot, Snapshot::coverage_json),
    ))
}
