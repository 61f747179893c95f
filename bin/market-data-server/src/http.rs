//! The HTTP side of every data response: the strict query extractor,
//! conditional GET (`ETag`, `If-None-Match`, 304), the version headers, the
//! representation (JSON, or CSV for the lists) and the pages rendered from
//! the database.

use std::future::{ready, Ready};
use std::sync::Arc;

use actix_web::dev::Payload;
use actix_web::http::{header, StatusCode};
use actix_web::{web, FromRequest, HttpRequest, HttpResponse, ResponseError};
use bytes::Bytes;
use market_model::params::{MarketPath, NetworkPath, WalletPath};
use market_snapshot::Snapshot;
use serde::de::DeserializeOwned;
use serde::Serialize;
use utoipa::IntoParams;

use crate::error::{ApiError, ProblemKind};
use crate::export::{self, List, Representation};
use crate::state::{AppState, Lane, Served};

/// A path under one network: its `network` segment must name the one
/// network (else a 404 problem), checked before the query string so a wrong
/// network is reported first.
pub trait NetworkScoped {
    /// The `network` segment.
    fn network(&self) -> &str;
}

impl NetworkScoped for NetworkPath {
    fn network(&self) -> &str {
        &self.network
    }
}

impl NetworkScoped for MarketPath {
    fn network(&self) -> &str {
        &self.network
    }
}

impl NetworkScoped for WalletPath {
    fn network(&self) -> &str {
        &self.network
    }
}

/// An endpoint's path type, decoded and checked ([`NetworkScoped`]).
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + NetworkScoped> FromRequest for ApiPath<T> {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            req.match_info()
                .load::<T>()
                .map_err(|e| {
                    // A segment that decoded but is not a valid value (an
                    // address) says what is accepted.
                    let message = e.to_string();
                    if message.starts_with("must be") {
                        ApiError::invalid_path_value(&message)
                    } else {
                        ApiError::path(&actix_web::error::PathError::Deserialize(e))
                    }
                })
                .and_then(|path| {
                    market_query::check_network(path.network())?;
                    Ok(ApiPath(path))
                }),
        )
    }
}

/// An endpoint's query type, parsed strictly from the query string
/// (`market_query::parse_query`): unknown, repeated and malformed
/// parameters are 400 problems that name the parameter.
#[derive(Debug)]
pub struct StrictQuery<T>(pub T);

impl<T: DeserializeOwned + IntoParams> FromRequest for StrictQuery<T> {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            market_query::parse_query(req.query_string())
                .map(StrictQuery)
                .map_err(ApiError::from),
        )
    }
}

/// The current time in epoch milliseconds (the default `to` of time ranges).
pub fn now_ms() -> i64 {
    (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

/// Serializes a body as `application/json`.
pub fn json<T: Serialize>(body: &T) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "application/json"))
        .body(serde_json::to_vec(body).expect("responses serialize"))
}

/// Header naming the data version a response was computed from (the
/// OpenAPI document spells it `X-Data-Version`).
pub const DATA_VERSION: header::HeaderName = header::HeaderName::from_static("x-data-version");

/// The identity of a response that is a function of the data version, the
/// path and the query string.
pub fn request_identity(req: &HttpRequest) -> u64 {
    market_query::identity((&req.path(), &req.query_string()))
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
/// names the tag. JSON only: a request that prefers CSV gets a 406.
pub fn versioned(
    req: &HttpRequest,
    snapshot: &Snapshot,
    identity: u64,
    body: impl FnOnce() -> Bytes,
) -> HttpResponse {
    represent(req, snapshot, identity, None, body)
}

/// [`versioned`] for a list answer: JSON or, when `Accept` prefers it, CSV
/// (rendered from the JSON page, see `export`), with `Link: <…>;
/// rel="next"` while there is a next page.
pub fn versioned_list(
    req: &HttpRequest,
    snapshot: &Snapshot,
    identity: u64,
    list: List,
    body: impl FnOnce() -> Bytes,
) -> HttpResponse {
    represent(req, snapshot, identity, Some(list), body)
}

/// Added to a request's identity when it is answered as CSV: the two
/// representations have different tags.
const CSV_IDENTITY: u64 = 0x6373_765f_6373_765f;

fn represent(
    req: &HttpRequest,
    snapshot: &Snapshot,
    identity: u64,
    list: Option<List>,
    body: impl FnOnce() -> Bytes,
) -> HttpResponse {
    let csv = match (export::negotiate(req, list.is_some()), list) {
        (Some(Representation::Json), _) => None,
        (Some(Representation::Csv), Some(list)) => Some(list),
        (Some(Representation::Csv), None) | (None, Some(_)) => {
            return ApiError::new(
                ProblemKind::NotAcceptable,
                "This list is served as JSON or CSV; send `Accept: application/json` or `Accept: text/csv` (or omit Accept).",
            )
            .error_response();
        }
        (None, None) => {
            return ApiError::new(
                ProblemKind::NotAcceptable,
                "This endpoint is served as JSON only; CSV (`Accept: text/csv`) is served by the lists (networks, markets, whale-positions, wallets, position-events, market and wallet history, candles and liquidity-levels). Send `Accept: application/json` (or omit Accept).",
            )
            .error_response();
        }
    };
    let etag = etag(
        snapshot.version,
        identity.wrapping_add(if csv.is_some() { CSV_IDENTITY } else { 0 }),
    );
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
        let json = body();
        let link = list
            .filter(|l| l.paged())
            .and_then(|_| export::next_cursor(&json))
            .and_then(|cursor| export::next_link(req, cursor));
        let (body, content_type) = match csv {
            None => (json, "application/json"),
            Some(list) => match export::render(list, &json) {
                Ok(csv) => (csv, export::TEXT_CSV),
                Err(e) => {
                    return ApiError::internal(format!("rendering CSV: {e}")).error_response()
                }
            },
        };
        let mut res = HttpResponse::with_body(StatusCode::OK, body).map_into_boxed_body();
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static(content_type),
        );
        if let Some(link) = link {
            res.headers_mut().insert(header::LINK, link);
        }
        res
    };
    let headers = res.headers_mut();
    VERSION_HEADERS.with_borrow_mut(|cached| {
        let cached = match cached {
            Some(c) if c.version == snapshot.version => c,
            _ => cached.insert(VersionHeaders::new(snapshot)),
        };
        headers.insert(DATA_VERSION, cached.data_version.clone());
        if let Some(v) = &cached.last_modified {
            headers.insert(header::LAST_MODIFIED, v.clone());
        }
    });
    headers.insert(header::ETAG, etag);
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    // The encoding (see `Compress`) and, on the lists, the media type are
    // negotiated: caches must key on both headers.
    headers.insert(
        header::VARY,
        header::HeaderValue::from_static("accept, accept-encoding"),
    );
    res
}

/// A response rendered from the database (blocking, on the thread pool,
/// through the database guard: a fast 503 while the database is down or
/// every render slot is taken), through the page cache of the served
/// version; a list (`list`) is also served as CSV.
pub async fn stored_page(
    req: &HttpRequest,
    state: &web::Data<AppState>,
    snapshot: &Arc<Served>,
    key: String,
    lane: Lane,
    list: Option<List>,
    render: impl FnOnce(&market_store::Store) -> Result<Bytes, market_query::QueryError>
        + Send
        + 'static,
) -> Result<HttpResponse, ApiError> {
    let identity = market_query::identity(&key);
    let db = state.db.clone();
    let body = state
        .page(snapshot.version, key, async move {
            db.run(lane, move |store| render(store).map_err(ApiError::from))
                .await
        })
        .await?;
    Ok(represent(req, snapshot, identity, list, || body))
}

/// A slice of the served snapshot as a response body without copying it.
struct SnapshotBytes<F: Fn(&Snapshot) -> &[u8]> {
    snapshot: Arc<Served>,
    select: F,
}

impl<F: Fn(&Snapshot) -> &[u8]> AsRef<[u8]> for SnapshotBytes<F> {
    fn as_ref(&self) -> &[u8] {
        (self.select)(&self.snapshot)
    }
}

/// A slice of the served snapshot (chosen by `select`) as a body that shares it.
pub fn snapshot_bytes(
    snapshot: &Arc<Served>,
    select: impl Fn(&Snapshot) -> &[u8] + Send + Sync + 'static,
) -> Bytes {
    Bytes::from_owner(SnapshotBytes {
        snapshot: snapshot.clone(),
        select,
    })
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
