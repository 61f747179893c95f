//! Wallets: the list, one wallet and its history.

use actix_web::{web, HttpRequest, HttpResponse};
use market_model::params::{HistoryQuery, NetworkPath, NoQuery, WalletPath, WalletsQuery};
use market_model::{WalletDetail, WalletHistory, WalletList, NETWORK_ID};
use market_query::{HistoryRequest, WalletsPage};
use market_snapshot::Snapshot;
use market_store::Series;

use crate::error::{ApiError, Problem};
use crate::export::List;
use crate::http::{stored_page, versioned_list, ApiPath, StrictQuery};
use crate::state::{AppState, Lane};

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
    Ok(versioned_list(
        &req,
        &snapshot,
        page.identity,
        List::Wallets,
        || page.render(),
    ))
}

/// Get one wallet.
///
/// The wallet (the same object as a wallet-list item), its open positions on every dex (each the same object
/// as a whale-positions item, by `positionValue` descending then symbol; their number is `wallet.positions`)
/// and its 20 latest position events, newest first. `address` is `0x` and 40 hex digits in any case; answers
/// spell it in lowercase. A wallet that is not served (never scanned, or no longer tracked) is a 404.
#[utoipa::path(
    get,
    path = "/networks/{network}/wallets/{address}",
    operation_id = "getWallet",
    tag = "wallets",
    params(WalletPath, NoQuery),
    responses(
        (status = 200, description = "The wallet, its positions and recent events.", body = WalletDetail, example = json!(example!("wallet.json"))),
        (status = 400, description = "Malformed address, or a query parameter was given (this endpoint takes none).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network, or a wallet that is not served.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn get_wallet(
    req: HttpRequest,
    ApiPath(path): ApiPath<WalletPath>,
    _query: StrictQuery<NoQuery>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let snapshot = state.snapshot();
    let address = path.address;
    served_wallet(&snapshot, &address)?;
    let served = snapshot.clone();
    stored_page(
        &req,
        &state,
        &snapshot,
        ["wallet|", &address].concat(),
        Lane::Page,
        None,
        move |store| {
            market_query::wallet_detail(store, &served, &address)
                .map(|body| body.expect("the wallet is served in this version"))
        },
    )
    .await
}

/// Get a wallet's history.
///
/// The wallet's account value, position values and unrealized PnL over time, one item per bucket of
/// `interval` (`5m`, `15m`, `1h` (default), `4h`, `1d`; aligned to UTC), oldest first. A bucket shows the
/// last observation of the wallet in it; a wallet is observed when a writer reads it (every scan, and each
/// read of `track`), so buckets without a read are left out. Ranges, defaults, retention and paging work as
/// in market history.
#[utoipa::path(
    get,
    path = "/networks/{network}/wallets/{address}/history",
    operation_id = "getWalletHistory",
    tag = "history",
    params(WalletPath, HistoryQuery),
    responses(
        (status = 200, description = "History buckets.", body = WalletHistory, example = json!(example!("wallet-history.json"))),
        (status = 400, description = "Malformed address, unknown interval, bad instant, limit or cursor, or unknown parameter.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network, or a wallet that is not served.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn get_wallet_history(
    req: HttpRequest,
    ApiPath(path): ApiPath<WalletPath>,
    query: StrictQuery<HistoryQuery>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let snapshot = state.snapshot();
    let address = path.address.as_str();
    served_wallet(&snapshot, address)?;
    let request = HistoryRequest::new(Series::Wallet, address, &query.0, crate::http::now_ms())?;
    stored_page(
        &req,
        &state,
        &snapshot,
        request.cache_key.clone(),
        Lane::Page,
        Some(List::WalletHistory),
        move |store| request.render(store),
    )
    .await
}

/// A 404 unless `address` is served in `snapshot`.
fn served_wallet(snapshot: &Snapshot, address: &str) -> Result<(), ApiError> {
    if snapshot.serves_wallet(address) {
        Ok(())
    } else {
        Err(ApiError::not_found(format!(
            "Wallet {address} is not served: it was never scanned or is no longer tracked; GET /v1/networks/{NETWORK_ID}/wallets lists the wallets served."
        )))
    }
}
