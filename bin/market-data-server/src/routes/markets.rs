//! Markets: the list, one market, its positions and its candles.

use actix_web::{web, HttpRequest, HttpResponse};
use market_model::params::{
    CandlesQuery, MarketPath, MarketsQuery, NetworkPath, NoQuery, PositionsQuery,
};
use market_model::{CandleSeries, MarketList, PositionList};
use market_query::{CandlesRequest, PositionsPage};

use crate::error::{ApiError, Problem};
use crate::http::{snapshot_bytes, versioned, ApiPath, StrictQuery};
use crate::state::AppState;

type Data = web::Data<AppState>;

/// List markets.
///
/// Every tracked asset with its quote context and scanned-wallet aggregates, in one response (not paged).
/// Default order: `volume24h` descending. `order=asc` sorts ascending; any other value, or none, sorts
/// descending (this is not an error). Ties are broken by symbol ascending.
#[utoipa::path(
    get,
    path = "/networks/{network}/markets",
    operation_id = "listMarkets",
    tag = "markets",
    params(NetworkPath, MarketsQuery),
    responses(
        (status = 200, description = "All markets.", body = MarketList, example = json!(example!("markets.json"))),
        (status = 400, description = "Unknown sort key or query parameter.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn list_markets(
    req: HttpRequest,
    ApiPath(_network): ApiPath<NetworkPath>,
    query: StrictQuery<MarketsQuery>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let (sort, order) = market_query::market_order(&query.0);
    let snapshot = state.snapshot();
    Ok(versioned(
        &req,
        &snapshot,
        market_query::identity((&sort, &order)),
        || snapshot_bytes(&snapshot, move |s| s.market_list_json(sort, order)),
    ))
}

/// Get one market.
///
/// The snapshot of one asset, the same object as a market-list item. `asset` is a network symbol
/// (`BTC`, `kPEPE`, `xyz:TSLA`; case-sensitive, raw or percent-encoded) or the canonical symbol of a
/// HIP-3 asset listed by exactly one dex (`TSLA` → `xyz:TSLA`).
#[utoipa::path(
    get,
    path = "/networks/{network}/markets/{asset}",
    operation_id = "getMarket",
    tag = "markets",
    params(MarketPath, NoQuery),
    responses(
        (status = 200, description = "The market.", body = market_model::Market, example = json!(example!("market.json"))),
        (status = 400, description = "A query parameter was given (this endpoint takes none).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network or asset.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn get_market(
    req: HttpRequest,
    ApiPath(path): ApiPath<MarketPath>,
    _query: StrictQuery<NoQuery>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let snapshot = state.snapshot();
    let index = market_query::resolve_asset(&snapshot, &path.asset)?;
    Ok(versioned(
        &req,
        &snapshot,
        market_query::identity(index),
        || snapshot_bytes(&snapshot, move |s| s.market_json(index)),
    ))
}

/// List the positions in one market.
///
/// Open positions of scanned wallets in the asset (not only positions of one million USD or more; the
/// path name is kept for compatibility), ordered by `positionValue` descending, ties by address ascending.
/// Keyset-paged: pass `nextCursor` back as `cursor` with the same `direction`.
#[utoipa::path(
    get,
    path = "/networks/{network}/markets/{asset}/whale-positions",
    operation_id = "listMarketPositions",
    tag = "positions",
    params(MarketPath, PositionsQuery),
    responses(
        (status = 200, description = "A page of positions.", body = PositionList, example = json!(example!("positions.json"))),
        (status = 400, description = "Bad direction, limit, cursor or unknown parameter.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network or asset.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn list_positions(
    req: HttpRequest,
    ApiPath(path): ApiPath<MarketPath>,
    query: StrictQuery<PositionsQuery>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let snapshot = state.snapshot();
    let index = market_query::resolve_asset(&snapshot, &path.asset)?;
    let page = PositionsPage::new(&snapshot, index, &query.0)?;
    Ok(versioned(&req, &snapshot, page.identity, || page.render()))
}

/// Get candles.
///
/// OHLCV candles of one asset in ascending time order. `to` defaults to now; `from` defaults to `to` minus
/// `limit` intervals. A candle is included when its open time is within `[from, to]`. `cursor` (the
/// previous page's `nextCursor`, an epoch-ms time) replaces `from`; `to` still applies. Intervals that are
/// not stored are rolled up from finer stored ones, aligned to UTC (weeks start Monday, `1M` is a calendar
/// month). The demo data stores `1h` for 90 days and `1m` for the last 24 hours.
#[utoipa::path(
    get,
    path = "/networks/{network}/markets/{asset}/candles",
    operation_id = "listCandles",
    tag = "candles",
    params(MarketPath, CandlesQuery),
    responses(
        (status = 200, description = "Candles.", body = CandleSeries, example = json!(example!("candles.json"))),
        (status = 400, description = "Missing or unknown interval, bad instant, limit or cursor, or unknown parameter.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network or asset.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn list_candles(
    req: HttpRequest,
    ApiPath(path): ApiPath<MarketPath>,
    query: StrictQuery<CandlesQuery>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let now_ms = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
    let snapshot = state.snapshot();
    let index = market_query::resolve_asset(&snapshot, &path.asset)?;
    let request = CandlesRequest::new(&snapshot.market(index).symbol, &query.0, now_ms)?;
    let store = state.store.clone();
    let key = request.key.clone();
    let body = state
        .page(snapshot.version, &key, async move {
            web::block(move || request.render(&store))
                .await?
                .map_err(ApiError::from)
        })
        .await?;
    Ok(versioned(
        &req,
        &snapshot,
        market_query::identity(&key),
        || body,
    ))
}
