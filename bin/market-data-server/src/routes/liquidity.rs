//! Daily liquidation-level maps.

use actix_web::{web, HttpRequest, HttpResponse};
use market_model::params::{LiquidityQuery, NetworkPath};
use market_model::LiquidityLevelsList;
use market_query::LiquidityRequest;

use crate::error::{ApiError, Problem};

use crate::export::List;
use crate::http::{stored_page, ApiPath, StrictQuery};
use crate::state::{AppState, Lane};

type Data = web::Data<AppState>;

/// List daily liquidation levels.
///
/// One item per (date, asset) in `[fromDate, toDate]`, ordered by date then asset symbol. The latest day
/// (the UTC date of the latest scan) has coverage `current` and is computed from the current positions, so
/// its totals equal the market's long/short liquidation values; earlier days are frozen end-of-day
/// snapshots (coverage `end_of_day`). The window is at most 90 calendar days (toDate − fromDate ≤ 89 days).
#[utoipa::path(
    get,
    path = "/networks/{network}/liquidity-levels",
    operation_id = "listLiquidityLevels",
    tag = "liquidity",
    params(NetworkPath, LiquidityQuery),
    responses(
        (status = 200, description = "A page of liquidity days.", body = LiquidityLevelsList, example = json!(example!("liquidity-levels.json"))),
        (status = 400, description = "Missing or bad dates, a window over 90 days, bad limit or cursor, or unknown parameter.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network or asset.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn list_liquidity_levels(
    req: HttpRequest,
    ApiPath(_network): ApiPath<NetworkPath>,
    query: StrictQuery<LiquidityQuery>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let snapshot = state.snapshot();
    let request = LiquidityRequest::new(&snapshot, &query.0)?;
    let served = snapshot.clone();
    // A window of the current day only is rendered from memory: it keeps
    // answering while the database is down.
    let lane = if request.needs_store(&snapshot) {
        Lane::Page
    } else {
        Lane::Memory
    };
    stored_page(
        &req,
        &state,
        &snapshot,
        request.key.clone(),
        lane,
        Some(List::Liquidity),
        move |store| request.render(store, &served),
    )
    .await
}
