//! The seven read endpoints. Each is thin: parse, look up in the served
//! snapshot (or run one keyset query), serialize.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use market_engine::candles::{next_period, period_start, periods_back, rollup, rollup_source};
use market_engine::{AssetLookup, Page, PositionKey, Snapshot, WalletKey, WalletOrder};
use market_model::{
    CandleSeries, Coverage, Decimal, Direction, Interval, LiquidityDay, LiquidityLevelsList,
    MarketList, MarketSort, NetworkCoverage, NetworkItem, NetworkList, PositionList, SizeClass,
    SortOrder, WalletList, WalletSort, NETWORK_ID,
};
use pagination::{CursorError, LimitSpec};
use serde::Serialize;
use time::Date;

use crate::error::{ApiError, Problem};
use crate::params::{printable, Params};
use crate::state::AppState;

/// `limit` of whale-positions.
pub const POSITIONS_LIMIT: LimitSpec = LimitSpec::new(25, 200);
/// `limit` of wallets.
pub const WALLETS_LIMIT: LimitSpec = LimitSpec::new(25, 200);
/// `limit` of liquidity-levels.
pub const LIQUIDITY_LIMIT: LimitSpec = LimitSpec::new(30, 500);
/// `limit` of candles.
pub const CANDLES_LIMIT: LimitSpec = LimitSpec::new(500, 5000);
/// Widest liquidity-levels window: toDate − fromDate ≤ 89 days (90 calendar days inclusive).
pub const MAX_WINDOW_DAYS: i64 = 89;
/// Intervals that are rolled up from finer ones must not read more source rows than this.
const MAX_ROLLUP_ROWS: i64 = 200_000;

type Data = web::Data<AppState>;

/// Serializes a body as `application/json`.
pub fn json<T: Serialize>(body: &T) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "application/json"))
        .body(serde_json::to_vec(body).expect("responses serialize"))
}

/// Header naming the data version a response was computed from.
pub const DATA_VERSION: &str = "X-Data-Version";

/// A hash of everything that selects a response besides the data version.
fn identity(parts: impl Hash) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    parts.hash(&mut hasher);
    hasher.finish()
}

/// The identity of a response that is a function of the data version, the
/// path and the query string.
fn request_identity(req: &HttpRequest) -> u64 {
    identity((&req.path(), &req.query_string()))
}

/// The headers that depend only on the data version, rendered once per
/// version and worker thread instead of per request.
struct VersionHeaders {
    version: i64,
    data_version: header::HeaderValue,
    last_modified: Option<header::HeaderValue>,
}

impl VersionHeaders {
    fn new(snapshot: &Snapshot) -> Self {
        let last_modified = (snapshot.version > 0).then(|| {
            let date = header::HttpDate::from(std::time::SystemTime::from(snapshot.observed_at));
            header::HeaderValue::from_str(&date.to_string()).expect("an HTTP date is ASCII")
        });
        VersionHeaders {
            version: snapshot.version,
            data_version: header::HeaderValue::from(snapshot.version),
            last_modified,
        }
    }
}

thread_local! {
    static VERSION_HEADERS: std::cell::RefCell<Option<VersionHeaders>> =
        const { std::cell::RefCell::new(None) };
}

/// The `ETag` of a response: `"{version:x}-{identity:016x}"`, written
/// without the formatting machinery (it is on every request's path).
fn etag(version: i64, identity: u64) -> header::HeaderValue {
    let mut buf = [0u8; 2 + 16 + 1 + 16];
    let mut at = 1;
    buf[0] = b'"';
    let version = version.to_be_bytes();
    let mut digits = [0u8; 16];
    hex::encode_to_slice(version, &mut digits).expect("16 hex digits for 8 bytes");
    // `{:x}`: no leading zeros, at least one digit.
    let first = digits.iter().position(|&d| d != b'0').unwrap_or(15);
    let n = 16 - first;
    buf[at..at + n].copy_from_slice(&digits[first..]);
    at += n;
    buf[at] = b'-';
    at += 1;
    hex::encode_to_slice(identity.to_be_bytes(), &mut buf[at..at + 16])
        .expect("16 hex digits for 8 bytes");
    at += 16;
    buf[at] = b'"';
    header::HeaderValue::from_bytes(&buf[..=at]).expect("ASCII")
}

/// A response body computed from `snapshot`, with its data version, `ETag`
/// (the version plus `identity`: a hash of the normalized request, so no
/// request hashes its body) and freshness headers; 304 when `If-None-Match`
/// names the tag.
fn versioned(
    req: &HttpRequest,
    snapshot: &Snapshot,
    identity: u64,
    body: impl FnOnce() -> Bytes,
) -> HttpResponse {
    let etag = etag(snapshot.version, identity);
    let tag = etag.to_str().expect("ASCII");
    let not_modified = req.headers().get_all(header::IF_NONE_MATCH).any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .map(|t| t.trim().trim_start_matches("W/"))
                .any(|t| t == tag || t == "*")
        })
    });
    let mut res = if not_modified {
        HttpResponse::new(StatusCode::NOT_MODIFIED)
    } else {
        let mut res = HttpResponse::with_body(StatusCode::OK, body()).map_into_boxed_body();
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        res
    };
    let headers = res.headers_mut();
    VERSION_HEADERS.with_borrow_mut(|cached| {
        let cached = match cached {
            Some(c) if c.version == snapshot.version => c,
            _ => cached.insert(VersionHeaders::new(snapshot)),
        };
        headers.insert(
            header::HeaderName::from_static("x-data-version"),
            cached.data_version.clone(),
        );
        if let Some(v) = &cached.last_modified {
            headers.insert(header::LAST_MODIFIED, v.clone());
        }
    });
    headers.insert(header::ETAG, etag);
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    // gzip is negotiated (see `Compress`): caches must key on Accept-Encoding.
    headers.insert(
        header::VARY,
        header::HeaderValue::from_static("accept-encoding"),
    );
    res
}

/// Serializes `envelope`, whose array `field` is empty, with `items` (JSON
/// array elements joined by commas, `len` bytes) spliced into that array:
/// the envelope's layout stays the model type's, the items are already rendered.
fn with_items<T: Serialize>(
    envelope: &T,
    field: &str,
    len: usize,
    items: impl FnOnce(&mut Vec<u8>),
) -> Bytes {
    let head = serde_json::to_vec(envelope).expect("responses serialize");
    let pattern = format!("\"{field}\":[]");
    let at = head
        .windows(pattern.len())
        .position(|w| w == pattern.as_bytes())
        .expect("the envelope has the empty array")
        + pattern.len()
        - 1;
    let mut out = Vec::with_capacity(head.len() + len);
    out.extend_from_slice(&head[..at]);
    items(&mut out);
    out.extend_from_slice(&head[at..]);
    out.into()
}

/// A slice of the served snapshot as a response body without copying it.
struct SnapshotBytes<F: Fn(&Snapshot) -> &[u8]> {
    snapshot: Arc<Snapshot>,
    select: F,
}

impl<F: Fn(&Snapshot) -> &[u8]> AsRef<[u8]> for SnapshotBytes<F> {
    fn as_ref(&self) -> &[u8] {
        (self.select)(&self.snapshot)
    }
}

fn snapshot_bytes(
    snapshot: &Arc<Snapshot>,
    select: impl Fn(&Snapshot) -> &[u8] + Send + Sync + 'static,
) -> Bytes {
    Bytes::from_owner(SnapshotBytes {
        snapshot: snapshot.clone(),
        select,
    })
}

fn check_network(network: &str) -> Result<(), ApiError> {
    if network == NETWORK_ID {
        Ok(())
    } else {
        Err(ApiError::not_found(format!(
            "Unknown network `{}`; the only network is `{NETWORK_ID}` (see GET /v1/networks).",
            printable(network)
        )))
    }
}

fn resolve_asset(snapshot: &Snapshot, asset: &str) -> Result<usize, ApiError> {
    match snapshot.lookup_asset(asset) {
        AssetLookup::Found(i) => Ok(i),
        AssetLookup::Ambiguous(candidates) => Err(ApiError::not_found(format!(
            "Asset `{}` is listed by several dexs; use one of the network symbols: {}.",
            printable(asset),
            candidates.join(", ")
        ))),
        AssetLookup::Unknown => Err(ApiError::not_found(format!(
            "Unknown asset `{}`; symbols are case-sensitive (e.g. BTC, kPEPE, xyz:TSLA); GET /v1/networks/{NETWORK_ID}/markets lists them.",
            printable(asset)
        ))),
    }
}

fn cursor_error(e: CursorError) -> ApiError {
    ApiError::param("cursor", e)
}

/// List the networks.
///
/// Lists the source networks the service serves (one: `perpnet`). Also a cheap way to check that a key works.
#[utoipa::path(
    get,
    path = "/v1/networks",
    operation_id = "listNetworks",
    tag = "networks",
    responses(
        (status = 200, description = "The networks (never paged; `nextCursor` is always null).", body = NetworkList),
        (status = 400, description = "A query parameter was given (this endpoint takes none).", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn list_networks(req: HttpRequest, state: Data) -> Result<HttpResponse, ApiError> {
    Params::parse(req.query_string(), &[])?;
    let snapshot = state.snapshot();
    Ok(versioned(&req, &snapshot, request_identity(&req), || {
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
    }))
}

/// List markets.
///
/// Every tracked asset with its quote context and scanned-wallet aggregates, in one response (not paged).
/// Default order: `volume24h` descending. `order=asc` sorts ascending; any other value, or none, sorts
/// descending (this is not an error). Ties are broken by symbol ascending.
#[utoipa::path(
    get,
    path = "/v1/networks/{network}/markets",
    operation_id = "listMarkets",
    tag = "markets",
    params(
        ("network" = String, Path, description = "Network id; only `perpnet`.", example = "perpnet"),
        ("sort" = Option<MarketSort>, Query, description = "Sort key (default `volume24h`). An unknown key is a 400."),
        ("order" = Option<String>, Query, description = "`asc` sorts ascending; any other value, or none, sorts descending.", example = "desc"),
    ),
    responses(
        (status = 200, description = "All markets.", body = MarketList),
        (status = 400, description = "Unknown sort key or query parameter.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn list_markets(
    req: HttpRequest,
    path: web::Path<String>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    check_network(&path)?;
    let params = Params::parse(req.query_string(), &["sort", "order"])?;
    let sort = params
        .enum_opt::<MarketSort>("sort")?
        .unwrap_or(MarketSort::Volume24h);
    let order = SortOrder::parse_lenient(params.get("order"));
    let snapshot = state.snapshot();
    Ok(versioned(
        &req,
        &snapshot,
        identity((&sort, &order)),
        || snapshot_bytes(&snapshot, move |s| s.market_list_json(sort, order)),
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
    path = "/v1/networks/{network}/coverage",
    operation_id = "getCoverage",
    tag = "coverage",
    params(
        ("network" = String, Path, description = "Network id; only `perpnet`.", example = "perpnet"),
    ),
    responses(
        (status = 200, description = "The coverage report of the served data version.", body = NetworkCoverage),
        (status = 400, description = "A query parameter was given (this endpoint takes none).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn get_coverage(
    req: HttpRequest,
    path: web::Path<String>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    check_network(&path)?;
    Params::parse(req.query_string(), &[])?;
    let snapshot = state.snapshot();
    Ok(versioned(&req, &snapshot, identity("coverage"), || {
        snapshot_bytes(&snapshot, Snapshot::coverage_json)
    }))
}

/// Get one market.
///
/// The snapshot of one asset, the same object as a market-list item. `asset` is a network symbol
/// (`BTC`, `kPEPE`, `xyz:TSLA`; case-sensitive, raw or percent-encoded) or the canonical symbol of a
/// HIP-3 asset listed by exactly one dex (`TSLA` → `xyz:TSLA`).
#[utoipa::path(
    get,
    path = "/v1/networks/{network}/markets/{asset}",
    operation_id = "getMarket",
    tag = "markets",
    params(
        ("network" = String, Path, description = "Network id; only `perpnet`.", example = "perpnet"),
        ("asset" = String, Path, description = "Network or canonical asset symbol, case-sensitive.", example = "BTC"),
    ),
    responses(
        (status = 200, description = "The market.", body = market_model::Market),
        (status = 400, description = "A query parameter was given (this endpoint takes none).", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network or asset.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn get_market(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let (network, asset) = path.into_inner();
    check_network(&network)?;
    Params::parse(req.query_string(), &[])?;
    let snapshot = state.snapshot();
    let index = resolve_asset(&snapshot, &asset)?;
    Ok(versioned(&req, &snapshot, identity(index), || {
        snapshot_bytes(&snapshot, move |s| s.market_json(index))
    }))
}

/// List the positions in one market.
///
/// Open positions of scanned wallets in the asset (not only positions of one million USD or more; the
/// path name is kept for compatibility), ordered by `positionValue` descending, ties by address ascending.
/// Keyset-paged: pass `nextCursor` back as `cursor` with the same `direction`.
#[utoipa::path(
    get,
    path = "/v1/networks/{network}/markets/{asset}/whale-positions",
    operation_id = "listMarketPositions",
    tag = "positions",
    params(
        ("network" = String, Path, description = "Network id; only `perpnet`.", example = "perpnet"),
        ("asset" = String, Path, description = "Network or canonical asset symbol, case-sensitive.", example = "BTC"),
        ("direction" = Option<Direction>, Query, description = "Only long or only short positions."),
        ("limit" = Option<u32>, Query, description = "Page size, 1 to 200.", minimum = 1, maximum = 200, example = 25),
        ("cursor" = Option<String>, Query, description = "`nextCursor` of the previous page (same asset and direction)."),
    ),
    responses(
        (status = 200, description = "A page of positions.", body = PositionList),
        (status = 400, description = "Bad direction, limit, cursor or unknown parameter.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network or asset.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn list_positions(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let (network, asset) = path.into_inner();
    check_network(&network)?;
    let params = Params::parse(req.query_string(), &["direction", "limit", "cursor"])?;
    let direction = params.enum_opt::<Direction>("direction")?;
    let limit = POSITIONS_LIMIT
        .parse(params.get("limit"))
        .map_err(|e| ApiError::param("limit", e))?;
    let snapshot = state.snapshot();
    let index = resolve_asset(&snapshot, &asset)?;
    let symbol = &snapshot.market(index).symbol;
    let query = pagination::fingerprint(&[
        "whale-positions",
        symbol,
        direction.map_or("", Direction::as_str),
    ]);
    let after = params
        .get("cursor")
        .map(|c| {
            let (value, address): (String, String) =
                pagination::decode(&query, c).map_err(cursor_error)?;
            let value: Decimal = value
                .parse()
                .map_err(|_| cursor_error(CursorError::Malformed))?;
            Ok::<_, ApiError>(PositionKey {
                value: value.0,
                address,
            })
        })
        .transpose()?;
    let keyed = snapshot.positions_page(index, direction, after.as_ref(), limit as usize);
    let next_cursor = match (keyed.page.has_more, keyed.last) {
        (true, Some(last)) => Some(pagination::encode(
            &query,
            &(last.value.unwrap_or_default(), last.address),
        )),
        _ => None,
    };
    let key = identity((&query, &params.get("cursor"), &limit));
    Ok(versioned(&req, &snapshot, key, || {
        let envelope = PositionList {
            items: Vec::new(),
            next_cursor,
            coverage: Coverage::ScannedWallets,
        };
        with_items(&envelope, "items", keyed.page.json_len(), |out| {
            keyed.page.write_items(out)
        })
    }))
}

/// List wallets.
///
/// Scanned wallets with live account state and analytics. Sort keys: `accountTotalValue` (default),
/// `totalPositionValue`, `netPnl`, `roi`, `winRate`; `order=asc` sorts ascending, anything else descending.
/// Wallets whose sort value is null (no analytics yet) come last in both orders; ties are broken by address
/// ascending. `total` counts every wallet matching the filters. Keyset-paged: pass `nextCursor` back as
/// `cursor` with the same `size`, `direction`, `sort` and `order`.
#[utoipa::path(
    get,
    path = "/v1/networks/{network}/wallets",
    operation_id = "listWallets",
    tag = "wallets",
    params(
        ("network" = String, Path, description = "Network id; only `perpnet`.", example = "perpnet"),
        ("size" = Option<SizeClass>, Query, description = "Size class by account value: `shrimp` < 100,000 USD ≤ `shark` < 1,000,000 USD ≤ `whale`."),
        ("direction" = Option<Direction>, Query, description = "Net direction: `long` (longValue > shortValue) or `short` (shortValue > longValue)."),
        ("sort" = Option<WalletSort>, Query, description = "Sort key (default `accountTotalValue`)."),
        ("order" = Option<String>, Query, description = "`asc` sorts ascending; any other value, or none, sorts descending.", example = "desc"),
        ("limit" = Option<u32>, Query, description = "Page size, 1 to 200.", minimum = 1, maximum = 200, example = 25),
        ("cursor" = Option<String>, Query, description = "`nextCursor` of the previous page (same filters and order)."),
    ),
    responses(
        (status = 200, description = "A page of wallets.", body = WalletList),
        (status = 400, description = "Bad size, direction, sort, limit, cursor or unknown parameter.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn list_wallets(
    req: HttpRequest,
    path: web::Path<String>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    check_network(&path)?;
    let params = Params::parse(
        req.query_string(),
        &["size", "direction", "sort", "order", "limit", "cursor"],
    )?;
    let size = params.enum_opt::<SizeClass>("size")?;
    let direction = params.enum_opt::<Direction>("direction")?;
    let sort = params
        .enum_opt::<WalletSort>("sort")?
        .unwrap_or(WalletSort::AccountTotalValue);
    let order = SortOrder::parse_lenient(params.get("order"));
    let limit = WALLETS_LIMIT
        .parse(params.get("limit"))
        .map_err(|e| ApiError::param("limit", e))?;
    let query = pagination::fingerprint(&[
        "wallets",
        sort.as_str(),
        order.as_str(),
        size.map_or("", SizeClass::as_str),
        direction.map_or("", Direction::as_str),
    ]);
    let after = params
        .get("cursor")
        .map(|c| {
            let (value, address): (Option<String>, String) =
                pagination::decode(&query, c).map_err(cursor_error)?;
            let value = value
                .map(|v| v.parse::<Decimal>().map(|d| d.0))
                .transpose()
                .map_err(|_| cursor_error(CursorError::Malformed))?;
            Ok::<_, ApiError>(WalletKey { value, address })
        })
        .transpose()?;
    let snapshot = state.snapshot();
    let (page, total) = snapshot.wallets_page(
        WalletOrder {
            sort,
            order,
            size,
            direction,
        },
        after.as_ref(),
        limit as usize,
    );
    let next_cursor = match (page.page.has_more, page.last) {
        (true, Some(last)) => Some(pagination::encode(&query, &(last.value, last.address))),
        _ => None,
    };
    let key = identity((&query, &params.get("cursor"), &limit));
    Ok(versioned(&req, &snapshot, key, || {
        let envelope = WalletList {
            items: Vec::new(),
            next_cursor,
            total: total as u64,
            coverage: Coverage::ScannedWallets,
        };
        with_items(&envelope, "items", page.page.json_len(), |out| {
            page.page.write_items(out)
        })
    }))
}

/// List daily liquidation levels.
///
/// One item per (date, asset) in `[fromDate, toDate]`, ordered by date then asset symbol. The latest day
/// (the UTC date of the latest scan) has coverage `current` and is computed from the current positions, so
/// its totals equal the market's long/short liquidation values; earlier days are frozen end-of-day
/// snapshots (coverage `end_of_day`). The window is at most 90 calendar days (toDate − fromDate ≤ 89 days).
#[utoipa::path(
    get,
    path = "/v1/networks/{network}/liquidity-levels",
    operation_id = "listLiquidityLevels",
    tag = "liquidity",
    params(
        ("network" = String, Path, description = "Network id; only `perpnet`.", example = "perpnet"),
        ("fromDate" = String, Query, format = Date, description = "First day, YYYY-MM-DD (UTC).", example = "2026-11-01"),
        ("toDate" = String, Query, format = Date, description = "Last day, YYYY-MM-DD, ≥ fromDate and at most 89 days after it.", example = "2026-11-22"),
        ("asset" = Option<String>, Query, description = "Only this asset (network or canonical symbol).", example = "BTC"),
        ("limit" = Option<u32>, Query, description = "Page size, 1 to 500.", minimum = 1, maximum = 500, example = 30),
        ("cursor" = Option<String>, Query, description = "`nextCursor` of the previous page (same dates and asset)."),
    ),
    responses(
        (status = 200, description = "A page of liquidity days.", body = LiquidityLevelsList),
        (status = 400, description = "Missing or bad dates, a window over 90 days, bad limit or cursor, or unknown parameter.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network or asset.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn list_liquidity_levels(
    req: HttpRequest,
    path: web::Path<String>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    check_network(&path)?;
    let params = Params::parse(
        req.query_string(),
        &["fromDate", "toDate", "asset", "limit", "cursor"],
    )?;
    let from = params.date("fromDate")?;
    let to = params.date("toDate")?;
    if to < from {
        return Err(ApiError::param(
            "toDate",
            format!("must be on or after fromDate ({from}); got {to}"),
        ));
    }
    if (to - from).whole_days() > MAX_WINDOW_DAYS {
        return Err(ApiError::param(
            "toDate",
            format!("must be at most {MAX_WINDOW_DAYS} days after fromDate (a window of at most 90 days); got {} days", (to - from).whole_days()),
        ));
    }
    let limit = LIQUIDITY_LIMIT
        .parse(params.get("limit"))
        .map_err(|e| ApiError::param("limit", e))?;
    let snapshot = state.snapshot();
    let asset = params
        .get("asset")
        .map(|a| resolve_asset(&snapshot, a).map(|i| snapshot.market(i).symbol.clone()))
        .transpose()?;
    let query = pagination::fingerprint(&[
        "liquidity-levels",
        &from.to_string(),
        &to.to_string(),
        asset.as_deref().unwrap_or(""),
    ]);
    let after: Option<(Date, String)> = params
        .get("cursor")
        .map(|c| {
            let (date, symbol): (String, String) =
                pagination::decode(&query, c).map_err(cursor_error)?;
            let date = market_model::timestamp_date::parse(&date)
                .map_err(|_| cursor_error(CursorError::Malformed))?;
            Ok::<_, ApiError>((date, symbol))
        })
        .transpose()?;

    let key = format!(
        "liquidity-levels|{from}|{to}|{}|{limit}|{after:?}",
        asset.as_deref().unwrap_or("")
    );
    let version = snapshot.version;
    let body = state
        .page(
            version,
            &key,
            liquidity_page(&state, &snapshot, from, to, asset, after, limit, &query),
        )
        .await?;
    Ok(versioned(&req, &snapshot, identity(&key), || body))
}

/// Renders one liquidity-levels page: frozen days from the database, the
/// current day from the snapshot.
#[allow(clippy::too_many_arguments)]
async fn liquidity_page(
    state: &Data,
    snapshot: &Snapshot,
    from: Date,
    to: Date,
    asset: Option<String>,
    after: Option<(Date, String)>,
    limit: u32,
    query: &str,
) -> Result<Bytes, ApiError> {
    let current_date = snapshot.current_date();
    let has_current = snapshot.version > 0;
    let history_to = if has_current && to >= current_date {
        current_date.previous_day()
    } else {
        Some(to)
    };
    let fetch = limit as usize + 1;
    let mut history: Vec<LiquidityDay> = match history_to {
        Some(history_to) if from <= history_to => {
            let (store, asset_c, after_c) = (state.store.clone(), asset.clone(), after.clone());
            web::block(move || {
                store.liquidity_history(
                    NETWORK_ID,
                    from,
                    history_to,
                    asset_c.as_deref(),
                    after_c.as_ref().map(|(d, s)| (*d, s.as_str())),
                    fetch as i64,
                )
            })
            .await??
        }
        _ => Vec::new(),
    };
    let mut current: Vec<(&str, &[u8])> = Vec::new();
    if history.len() < fetch && has_current && (from..=to).contains(&current_date) {
        current = snapshot
            .current_days()
            .filter(|(symbol, _)| {
                asset.as_deref().is_none_or(|a| *symbol == a)
                    && after
                        .as_ref()
                        .is_none_or(|(ad, asym)| (current_date, *symbol) > (*ad, asym.as_str()))
            })
            .take(fetch - history.len())
            .collect();
    }
    let limit = limit as usize;
    let next_cursor = if history.len() + current.len() > limit {
        let (date, symbol) = if limit <= history.len() {
            history.truncate(limit);
            current.clear();
            let last = history.last().expect("limit is at least 1");
            (last.date, last.network_asset_symbol.clone())
        } else {
            current.truncate(limit - history.len());
            let last = current.last().expect("more than limit items");
            (current_date, last.0.to_owned())
        };
        Some(pagination::encode(query, &(date.to_string(), symbol)))
    } else {
        None
    };
    let envelope = LiquidityLevelsList {
        from_date: from,
        to_date: to,
        granularity: "day".to_owned(),
        items: Vec::new(),
        next_cursor,
    };
    // Frozen days are rendered here; the current day is already rendered.
    let rendered: Vec<Vec<u8>> = history
        .iter()
        .map(|day| serde_json::to_vec(day).expect("responses serialize"))
        .collect();
    let items = Page {
        parts: rendered
            .iter()
            .map(Vec::as_slice)
            .chain(current.iter().map(|(_, day)| *day))
            .collect(),
        len: rendered.len() + current.len(),
        has_more: false,
    };
    Ok(with_items(&envelope, "items", items.json_len(), |out| {
        items.write_items(out)
    }))
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
    path = "/v1/networks/{network}/markets/{asset}/candles",
    operation_id = "listCandles",
    tag = "candles",
    params(
        ("network" = String, Path, description = "Network id; only `perpnet`.", example = "perpnet"),
        ("asset" = String, Path, description = "Network or canonical asset symbol, case-sensitive.", example = "BTC"),
        ("interval" = Interval, Query, description = "Candle interval (required)."),
        ("from" = Option<String>, Query, description = "Start, RFC 3339 instant or epoch milliseconds (default: `to` minus `limit` intervals).", example = "2026-11-20T00:00:00Z"),
        ("to" = Option<String>, Query, description = "End (inclusive), RFC 3339 instant or epoch milliseconds (default: now).", example = "1795305600000"),
        ("limit" = Option<u32>, Query, description = "Most candles returned, 1 to 5000.", minimum = 1, maximum = 5000, example = 500),
        ("cursor" = Option<String>, Query, description = "`nextCursor` of the previous page: an epoch-ms time or RFC 3339 instant; replaces `from`.", example = "1795003200000"),
    ),
    responses(
        (status = 200, description = "Candles.", body = CandleSeries),
        (status = 400, description = "Missing or unknown interval, bad instant, limit or cursor, or unknown parameter.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network or asset.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn list_candles(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let (network, asset) = path.into_inner();
    check_network(&network)?;
    let params = Params::parse(
        req.query_string(),
        &["interval", "from", "to", "limit", "cursor"],
    )?;
    let interval = params.enum_opt::<Interval>("interval")?.ok_or_else(|| {
        ApiError::param(
            "interval",
            format!("is required; use one of {}", Interval::NAMES.join(", ")),
        )
    })?;
    let limit = CANDLES_LIMIT
        .parse(params.get("limit"))
        .map_err(|e| ApiError::param("limit", e))?;
    let to = params.instant_ms("to")?.unwrap_or_else(|| {
        (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
    });
    let from = match params.instant_ms("cursor")? {
        Some(c) => c,
        // `to` minus `limit` intervals: the `limit` periods ending with the one containing `to`.
        None => params
            .instant_ms("from")?
            .unwrap_or_else(|| periods_back(interval, period_start(interval, to), limit - 1)),
    };
    if from > to {
        let name = if params.get("cursor").is_some() {
            "cursor"
        } else {
            "from"
        };
        return Err(ApiError::param(name, "must not be after `to`"));
    }
    let snapshot = state.snapshot();
    let index = resolve_asset(&snapshot, &asset)?;
    let symbol = snapshot.market(index).symbol.clone();

    // First period starting at or after `from`.
    let aligned = period_start(interval, from);
    let start = if aligned == from {
        from
    } else {
        next_period(interval, aligned)
    };
    // Candle open times are period starts, so every `to` within one period
    // selects the same candles: the cache key (and ETag) uses its period, and
    // the default `to` = now does not defeat the cache.
    let key = format!(
        "candles|{symbol}|{interval}|{start}|{}|{limit}",
        period_start(interval, to)
    );
    let body = state
        .page(
            snapshot.version,
            &key,
            candle_page(&state, symbol, interval, start, to, limit),
        )
        .await?;
    Ok(versioned(&req, &snapshot, identity(&key), || body))
}

/// Renders one candles page from the database (rolled up when the interval
/// is not stored).
async fn candle_page(
    state: &Data,
    symbol: String,
    interval: Interval,
    start: i64,
    to: i64,
    limit: u32,
) -> Result<Bytes, ApiError> {
    let store = state.store.clone();
    let sym = symbol.clone();
    let mut candles = web::block(move || {
        let stored = store.stored_intervals(&sym)?;
        let Some(source) = rollup_source(interval, &stored) else {
            return Ok(Vec::new());
        };
        if source == interval {
            return store.candles(
                &sym,
                interval,
                start,
                to.saturating_add(1),
                limit as i64 + 1,
            );
        }
        // Source rows for limit+1 target periods, capped.
        let mut end = start;
        for _ in 0..=limit {
            end = next_period(interval, end);
            if end > to {
                break;
            }
        }
        let end = end.min(to.saturating_add(1)).max(start);
        let rows = store.candles(
            &sym,
            source,
            start,
            end.max(next_period(interval, start)),
            MAX_ROLLUP_ROWS,
        )?;
        Ok(rollup(&rows, interval)
            .into_iter()
            .filter(|c| c.time >= start && c.time <= to)
            .collect())
    })
    .await?
    .map_err(ApiError::from)?;
    let next_cursor = if candles.len() > limit as usize {
        let next = candles[limit as usize].time;
        candles.truncate(limit as usize);
        Some(next.to_string())
    } else {
        None
    };
    let series = CandleSeries {
        network: NETWORK_ID.to_owned(),
        canonical_asset: market_model::symbol::canonical_of(&symbol).to_owned(),
        coin: symbol,
        interval,
        candles,
        next_cursor,
    };
    Ok(Bytes::from(
        serde_json::to_vec(&series).expect("responses serialize"),
    ))
}

/// Liveness: the process answers.
///
/// Answers 200 whenever the process can serve HTTP; it does not touch the database. No API key.
#[utoipa::path(get, path = "/healthz", operation_id = "healthz", tag = "health",
    responses((status = 200, description = "The process is alive.", body = Health)))]
pub async fn healthz() -> HttpResponse {
    json(&Health {
        status: "ok".into(),
    })
}

/// Readiness: the database answers.
///
/// Answers 200 when a pooled database connection runs `SELECT 1`, and 503 (after at most about 2 s) when it cannot. No API key.
#[utoipa::path(get, path = "/readyz", operation_id = "readyz", tag = "health",
    responses(
        (status = 200, description = "The database is reachable.", body = Health),
        (status = 503, description = "The database is unreachable.", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn readyz(state: Data) -> Result<HttpResponse, ApiError> {
    let store = state.store.clone();
    web::block(move || store.ping()).await??;
    Ok(json(&Health {
        status: "ready".into(),
    }))
}

/// Health status body.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Health {
    /// `ok` or `ready`.
    pub status: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_is_version_and_identity_in_hex() {
        for (version, identity) in [
            (0, 0),
            (1, 0x827e_992d_4794_8a38),
            (0x10, 1),
            (i64::MAX, u64::MAX),
            (123_456_789, 42),
        ] {
            assert_eq!(
                etag(version, identity).to_str().unwrap(),
                format!("\"{version:x}-{identity:016x}\""),
            );
        }
    }
}
