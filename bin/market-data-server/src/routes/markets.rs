//! Markets: the list, one market, its positions and its candles.

use actix_web::{web, HttpRequest, HttpResponse};
use market_model::params::{
    CandlesQuery, HistoryQuery, MarketPath, MarketsQuery, NetworkPath, NoQuery, PositionsQuery,
};
use market_model::{CandleSeries, MarketCohorts, MarketHistory, MarketList, PositionList};
use market_query::{CandlesRequest, HistoryRequest, PositionsPage};
use market_store::Series;

use crate::error::{ApiError, Problem};
use crate::export::List;
use crate::http::{snapshot_bytes, stored_page, versioned, versioned_list, ApiPath, StrictQuery};
use crate::state::{AppState, Lane};

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
    Ok(versioned_list(
        &req,
        &snapshot,
        market_query::identity((&sort, &order)),
        List::Markets,
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
/// `minValue` keeps only positions whose `positionValue` is at least that many USD (a whale filter, e.g.
/// `minValue=1000000`). Keyset-paged: pass `nextCursor` back as `cursor` with the same `direction` and
/// `minValue`.
#[utoipa::path(
    get,
    path = "/networks/{network}/markets/{asset}/whale-positions",
    operation_id = "listMarketPositions",
    tag = "positions",
    params(MarketPath, PositionsQuery),
    responses(
        (status = 200, description = "A page of positions.", body = PositionList, example = json!(example!("positions.json"))),
        (status = 400, description = "Bad direction, minValue, limit, cursor or unknown parameter.", body = Problem, content_type = "application/problem+json"),
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
    Ok(versioned_list(
        &req,
        &snapshot,
        page.identity,
        List::Positions,
        || page.render(),
    ))
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
    let snapshot = state.snapshot();
    let index = market_query::resolve_asset(&snapshot, &path.asset)?;
    let request = CandlesRequest::new(
        &snapshot.market(index).symbol,
        &query.0,
        crate::http::now_ms(),
    )?;
    stored_page(
        &req,
        &state,
        &snapshot,
        request.key.clone(),
        Lane::Page,
        Some(List::Candles),
        move |store| request.render(store),
    )
    .await
}

/// Get a market's size-class cohorts.
///
/// The open positions of the asset grouped by the size class of their wallet (`shrimp`, `shark`, `whale`)
/// and by side: count, position value, liquidation value, value-weighted average leverage and entry
/// price, and unrealized PnL. Six items, each size class long then short. The counts sum to the market's
/// `longCount`/`shortCount` and the liquidation values to its `longLiquidationValue`/`shortLiquidationValue`.
#[utoipa::path(
    get,
    path = "/networks/{network}/markets/{asset}/cohorts",
    operation_id = "getMarketCohorts",
    tag = "history",
    params(MarketPath, NoQuery),
    responses(
        (status = 200, description = "The cohorts.", body = MarketCohorts, example = json!(example!("cohorts.json"))),
        (status = 400, description = "A query parameter was given (this endpoint takes none).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network or asset.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn get_cohorts(
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
        market_query::identity(("cohorts", index)),
        || snapshot_bytes(&snapshot, move |s| s.cohorts_json(index)),
    ))
}

/// Get a market's history.
///
/// The market's figures over time, one item per bucket of `interval` (`5m`, `15m`, `1h` (default), `4h`,
/// `1d`; aligned to UTC), oldest first. **A bucket shows the last observation in it**: the figures of the
/// last data version written in that bucket (`observedAt` says when), not an average; buckets without an
/// observation are left out. A bucket is served when its start is within `[from, to]`; `to` defaults to now
/// and `from` to `to` minus `limit` intervals. Every data version is kept for 7 days and the last one of
/// each hour for 365 days (both are writer flags), so `5m` and `15m` buckets older than 7 days show hourly
/// observations. The last bucket shows the current market. Keyset-paged: pass `nextCursor` back as `cursor`
/// with the same `interval` (the next page starts after the last bucket served; `from` and `to` still apply).
#[utoipa::path(
    get,
    path = "/networks/{network}/markets/{asset}/history",
    operation_id = "getMarketHistory",
    tag = "history",
    params(MarketPath, HistoryQuery),
    responses(
        (status = 200, description = "History buckets.", body = MarketHistory, example = json!(example!("market-history.json"))),
        (status = 400, description = "Unknown interval, bad instant, limit or cursor, or unknown parameter.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network or asset.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn get_market_history(
    req: HttpRequest,
    ApiPath(path): ApiPath<MarketPath>,
    query: StrictQuery<HistoryQuery>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let snapshot = state.snapshot();
    let index = market_query::resolve_asset(&snapshot, &path.asset)?;
    let request = HistoryRequest::new(
        Series::Market,
        &snapshot.market(index).symbol,
        &query.0,
        crate::http::now_ms(),
    )?;
    stored_page(
        &req,
        &state,
        &snapshot,
        request.cache_key.clone(),
        Lane::Page,
        Some(List::MarketHistory),
        move |store| request.render(store),
    )
    .await
}
