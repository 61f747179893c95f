//! The wallet list.

use actix_web::{web, HttpRequest, HttpResponse};
use market_model::params::{NetworkPath, WalletsQuery};
use market_model::WalletList;
use market_query::WalletsPage;

use crate::error::{ApiError, Problem};
use crate::http::{versioned, ApiPath, StrictQuery};
use crate::state::AppState;

type Data = web::Data<AppState>;

/// List wallets.
///
/// Scanned wallets with live account state and analytics. Sort keys: `accountTotalValue` (default),
/// `totalPositionValue`, `netPnl`, `roi`, `winRate`; `order=asc` sorts ascending, anything else descending.
/// Wallets whose sort value is null (no analytics yet) come last in both orders; ties are broken by address
/// ascending. `total` counts every wallet matching the filters. Keyset-paged: pass `nextCursor` back as
/// `cursor` with the same `size`, `direction`, `sort` and `order`.
#[utoipa::path(
    get,
    path = "/networks/{network}/wallets",
    operation_id = "listWallets",
    tag = "wallets",
    params(NetworkPath, WalletsQuery),
    responses(
        (status = 200, description = "A page of wallets.", body = WalletList, example = json!(example!("wallets.json"))),
        (status = 400, description = "Bad size, direction, sort, limit, cursor or unknown parameter.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn list_wallets(
    req: HttpRequest,
    ApiPath(_network): ApiPath<NetworkPath>,
    query: StrictQuery<WalletsQuery>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let snapshot = state.snapshot();
    let page = WalletsPage::new(&snapshot, &query.0)?;
    Ok(versioned(&req, &snapshot, page.identity, || page.render()))
}
