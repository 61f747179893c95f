//! The position-event feed.

use actix_web::{web, HttpRequest, HttpResponse};
use market_model::params::{EventsQuery, NetworkPath};
use market_model::PositionEventList;
use market_query::EventsRequest;

use crate::error::{ApiError, Problem};
use crate::export::List;
use crate::http::{stored_page, ApiPath, StrictQuery};
use crate::state::{AppState, Lane};

type Data = web::Data<AppState>;

/// List position events.
///
/// Changes of wallets' positions, derived from consecutive observations of each wallet (the whale-alert
/// feed), newest first, ties by address then symbol. `kind`: `opened`, `increased`, `reduced`, `closed`,
/// `flipped` (long to short or back), and `closed_near_liquidation` (closed while the last observed mark
/// price was within 2 % of the liquidation price: `|mark − liqPrice| ≤ 2 % × mark`). Sizes are absolute; the
/// directions say the side. A wallet's first observation reports its positions as `opened` with
/// `firstObservation: true` (they may be older). A wallet that stops being tracked gets no event. Filters:
/// `asset`, `address`, `kind`, `minValue` (the larger of `previousValue` and `value`, USD), and `from`/`to`
/// on `observedAt` (inclusive). Events are kept for 90 days (a writer flag). Keyset-paged: pass
/// `nextCursor` back as `cursor` with the same filters.
#[utoipa::path(
    get,
    path = "/networks/{network}/position-events",
    operation_id = "listPositionEvents",
    tag = "history",
    params(NetworkPath, EventsQuery),
    responses(
        (status = 200, description = "A page of events.", body = PositionEventList, example = json!(example!("position-events.json"))),
        (status = 400, description = "Bad address, kind, minValue, instant, limit or cursor, or unknown parameter.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network or asset.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn list_position_events(
    req: HttpRequest,
    ApiPath(_network): ApiPath<NetworkPath>,
    query: StrictQuery<EventsQuery>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let snapshot = state.snapshot();
    let symbol = query
        .0
        .asset
        .as_deref()
        .map(|a| {
            market_query::resolve_asset(&snapshot, a).map(|i| snapshot.market(i).symbol.clone())
        })
        .transpose()?;
    let request = EventsRequest::new(&query.0, symbol)?;
    stored_page(
        &req,
        &state,
        &snapshot,
        request.cache_key.clone(),
        Lane::Page,
        Some(List::Events),
        move |store| request.render(store),
    )
    .await
}
