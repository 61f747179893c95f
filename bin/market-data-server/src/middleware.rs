//! The middleware: the request context around every answer (its id, the
//! problem body of an error, the metrics and the access-log line), and the
//! API guard (`Accept`, the key, rate limits and usage).

use actix_web::body::{BoxBody, EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::http::ConnectionType;
use actix_web::middleware::Next;
use actix_web::{web, Error, HttpMessage};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use crate::access_log::AccessLog;
use crate::error::{problem_response, ApiError, ProblemKind, PROBLEM_JSON};
use crate::ratelimit::{self, Verdict};
use crate::request_id::{self, REQUEST_ID};
use crate::routes::{ApiPrefix, RoutePattern};
use crate::state::stream::{accepts_gzip, is_stream_path, StreamGzip};
use crate::state::{AppState, Lane, UsageEndpoint};
use crate::tokens::{self, has_key_like_query, TokenId, API_KEY_HEADER};

fn kind_for_status(status: u16) -> ProblemKind {
    match status {
        401 => ProblemKind::Unauthorized,
        404 => ProblemKind::NotFound,
        405 => ProblemKind::MethodNotAllowed,
        406 => ProblemKind::NotAcceptable,
        413 => ProblemKind::PayloadTooLarge,
        414 | 431 => ProblemKind::HeadersTooLarge,
        503 => ProblemKind::Unavailable,
        s if (400..500).contains(&s) => ProblemKind::InvalidParameter,
        _ => ProblemKind::Internal,
    }
}

/// Outermost middleware: assigns the request id, turns every error into a
/// problem-details body carrying `instance` and `requestId`, echoes the id
/// in `X-Request-Id`, closes connections once the server is stopping, and
/// queues the access-log line.
pub async fn request_context(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let start = Instant::now();
    // The compression layer leaves an event stream alone: a compressor per
    // open stream would cost hundreds of KB each, and it would hold back
    // events until flushed. The stream compresses its pushes once for every
    // stream instead, when the client takes gzip.
    if is_stream_path(req.path()) {
        let gzip = StreamGzip(accepts_gzip(&req));
        req.extensions_mut().insert(gzip);
        req.headers_mut().remove(header::ACCEPT_ENCODING);
    } else if let Some(v) = zstd_over_brotli(req.headers().get_all(header::ACCEPT_ENCODING)) {
        req.headers_mut().insert(header::ACCEPT_ENCODING, v);
    }
    // Kept as the header value it is echoed in: no string per request.
    let request_id = request_id::of(req.headers());
    let rid = || {
        request_id
            .to_str()
            .expect("validated or generated as ASCII")
            .to_owned()
    };
    if let Some(e) = oversized(&req) {
        let mut problem = e.problem();
        problem.instance = Some(req.path().to_owned());
        problem.request_id = Some(rid());
        let mut res = req.into_response(problem_response(&e, &problem));
        res.headers_mut().insert(REQUEST_ID, request_id);
        return Ok(answered(res, start));
    }
    // Inner layers turn their errors into responses (handlers do, and
    // `require_api_key` does), so an `Err` here is a framework failure;
    // actix-web renders it through `ResponseError`.
    let res = next.call(req).await?.map_into_boxed_body();

    let status = res.status();
    let is_problem = res
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(PROBLEM_JSON.as_bytes()));
    let api_error = res.response().extensions().get::<ApiError>().cloned();
    // Only error responses need the path (for `instance` and the log).
    let path =
        (api_error.is_some() || status.as_u16() >= 400).then(|| res.request().path().to_owned());
    let mut res = if let Some(error) = api_error {
        if let Some(cause) = &error.cause {
            log::error!(
                "rid={} {} {}: {cause}",
                rid(),
                crate::error::status_of(error.kind),
                path.as_deref().unwrap_or_default()
            );
        }
        let mut problem = error.problem();
        problem.instance = path;
        problem.request_id = Some(rid());
        // The rate-limit headers a guard added outside the handler stay.
        let kept: Vec<_> = [ratelimit::POLICY_HEADER, ratelimit::STATE_HEADER]
            .into_iter()
            .filter_map(|name| res.headers().get(&name).cloned().map(|v| (name, v)))
            .collect();
        let mut res = res.into_response(problem_response(&error, &problem));
        for (name, value) in kept {
            res.headers_mut().insert(name, value);
        }
        res
    } else if status.as_u16() >= 400 && !is_problem {
        // Errors raised inside actix-web itself (payload limits, etc.).
        let kind = kind_for_status(status.as_u16());
        let detail = match kind {
            ProblemKind::PayloadTooLarge => "The request body is too large; this API takes no request body.".to_owned(),
            ProblemKind::Internal => "The server failed to answer this request. Retry later; if it persists, report the requestId.".to_owned(),
            _ => format!("The request was rejected ({}).", status.canonical_reason().unwrap_or("error")),
        };
        let error = ApiError::new(kind, detail);
        let mut problem = error.problem();
        problem.status = status.as_u16();
        problem.instance = path;
        problem.request_id = Some(rid());
        let mut rendered = problem_response(&error, &problem);
        *rendered.status_mut() = status;
        res.into_response(rendered)
    } else {
        res
    };
    res.headers_mut().insert(REQUEST_ID, request_id);
    Ok(answered(res, start))
}

/// The route label of a request no route matched.
const UNMATCHED: &str = "unmatched";

/// Last touches on every answer: the connection closes once the server is
/// stopping, the metrics count it, and the access log gets its line.
fn answered(mut res: ServiceResponse<BoxBody>, start: Instant) -> ServiceResponse<BoxBody> {
    // During a graceful stop, a kept-alive connection would hold the stop
    // open and its next request would find nobody listening: close it after
    // this answer, so the client reconnects (to another replica).
    let stopping = match res.request().app_data::<web::Data<AppState>>() {
        Some(state) => {
            let req = res.request();
            // An API route carries its prefix and pattern as static strings
            // once it is reached; asking the router (`match_pattern`) matches
            // the path again and allocates, which only the other answers pay
            // (a 401 or 406 from the guard, a 404, the public routes).
            let prefix = req.app_data::<ApiPrefix>().map_or("", |p| p.0);
            let route = match req.app_data::<RoutePattern>() {
                Some(route) => Cow::Borrowed(route.0),
                None => match req.match_pattern() {
                    Some(full) => match full.strip_prefix(prefix) {
                        Some(under) => Cow::Owned(under.to_owned()),
                        None => Cow::Owned(full),
                    },
                    None => Cow::Borrowed(UNMATCHED),
                },
            };
            state
                .metrics
                .observe(prefix, &route, res.status().as_u16(), start.elapsed());
            state.is_stopping()
        }
        None => false,
    };
    if stopping {
        res.response_mut()
            .head_mut()
            .set_connection_type(ConnectionType::Close);
    }
    if let Some(log) = res.request().app_data::<web::Data<AccessLog>>() {
        log.log_response(&res, start);
    }
    res
}

/// Guards the API scopes: 406 when `Accept` excludes JSON, 401 without a
/// valid `X-API-Key`, and counts each authenticated request for its token.
/// One layer, not two: every `from_fn` layer boxes its future and the next
/// service's, per request.
pub async fn guard_api<B: MessageBody + 'static>(
    req: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<EitherBody<B>>, Error> {
    let stream = is_stream_path(req.path());
    if let Err(e) = require_json_accept(&req, stream) {
        return Ok(req.error_response(e).map_into_right_body());
    }
    let state = req
        .app_data::<web::Data<AppState>>()
        .expect("AppState is registered")
        .clone();
    match authenticate(&req, &state).await {
        Ok((token_id, own_limit, now)) => {
            if stream {
                // The stream bounds its open streams per key.
                req.extensions_mut().insert(token_id);
            }
            let verdict = state.limits.charge_token(token_id.0, own_limit).await;
            let res = match verdict {
                Some(
                    v @ Verdict::Limited {
                        quota, retry_after, ..
                    },
                ) => {
                    let error = rate_limited(
                        v,
                        format!("This API key has used its {quota} requests a minute; retry after {retry_after} s."),
                    );
                    req.error_response(error).map_into_right_body()
                }
                _ => {
                    let mut res = next.call(req).await?.map_into_left_body();
                    if let Some(v) = verdict {
                        for (name, value) in v.headers() {
                            res.headers_mut().insert(name, value);
                        }
                    }
                    res
                }
            };
            let request = res.request();
            let endpoint = UsageEndpoint {
                method: request.method().clone(),
                prefix: request.app_data::<ApiPrefix>().map_or("", |p| p.0),
                pattern: request.app_data::<RoutePattern>().map(|p| p.0),
            };
            state.record_usage(token_id.0, now, endpoint, res.status().as_u16());
            Ok(res)
        }
        Err(e) => Ok(req.error_response(e).map_into_right_body()),
    }
}

/// A 429 problem for `verdict`, with `Retry-After` and the rate-limit headers.
fn rate_limited(verdict: Verdict, detail: String) -> ApiError {
    let mut error = ApiError::new(ProblemKind::RateLimited, detail);
    if let Verdict::Limited { retry_after, .. } = verdict {
        error
            .headers
            .push((header::RETRY_AFTER, HeaderValue::from(retry_after)));
    }
    error.headers.extend(verdict.headers());
    error
}

/// The 429 of an address over its failed-authentication quota, after
/// [`ratelimit::THROTTLE_DELAY`] (a timer, not CPU).
async fn throttled(verdict: Verdict, detail: String) -> ApiError {
    actix_web::rt::time::sleep(ratelimit::THROTTLE_DELAY).await;
    rate_limited(verdict, detail)
}

/// The client's address (through trusted proxies), for the failed-auth throttle.
fn client_ip(req: &ServiceRequest, state: &AppState) -> Option<std::net::IpAddr> {
    let forwarded: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|v| v.to_str().ok())
        .collect();
    state
        .limits
        .client_ip(req.peer_addr().map(|a| a.ip()), &forwarded)
}

/// Whether an `Accept` header value admits a JSON response, or with
/// `event_stream` a `text/event-stream` one, or else a CSV one (the lists
/// serve it; the other endpoints answer a request preferring it with their
/// own 406, see `http::versioned`).
fn accepts(accept: &str, event_stream: bool) -> bool {
    accept.split(',').any(|range| {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q_zero = parts.any(|p| {
            let p = p.trim();
            p.strip_prefix("q=")
                .or_else(|| p.strip_prefix("Q="))
                .is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
        });
        !q_zero
            && (matches!(
                media.as_str(),
                "*/*" | "application/*" | "application/json" | "application/problem+json" | ""
            ) || (event_stream && matches!(media.as_str(), "text/event-stream" | "text/*"))
                || (!event_stream && matches!(media.as_str(), "text/csv" | "text/*")))
    })
}

/// 406 when `Accept` is present and excludes JSON (besides the event
/// stream's `text/event-stream` and the lists' `text/csv`).
fn require_json_accept(req: &ServiceRequest, stream: bool) -> Result<(), ApiError> {
    let acceptable = req
        .headers()
        .get_all(header::ACCEPT)
        .all(|v| v.to_str().is_ok_and(|v| accepts(v, stream)));
    if acceptable {
        Ok(())
    } else if stream {
        Err(ApiError::new(
            ProblemKind::NotAcceptable,
            "The event stream is served as `text/event-stream` (its problems as JSON); send `Accept: text/event-stream` (or omit Accept).",
        ))
    } else {
        Err(ApiError::new(
            ProblemKind::NotAcceptable,
            "This API serves JSON, and CSV on its lists; send `Accept: application/json` or `Accept: text/csv` (or omit Accept).",
        ))
    }
}

/// `Accept-Encoding` with brotli ranked just below zstd when the client
/// takes both at the same quality (browsers send `gzip, deflate, br, zstd`);
/// `None` when there is nothing to change. `Compress` breaks ties brotli
/// first; zstd makes answers as small (the 30-day liquidity answer: 12.2 %
/// of its size against brotli's 12.4 %) for less than half the CPU
/// (docs/performance.md). A quality the client states otherwise is kept.
///
/// Every line of the header counts (they are one list), and the rewrite
/// replaces them with one.
fn zstd_over_brotli<'a>(values: impl Iterator<Item = &'a HeaderValue>) -> Option<HeaderValue> {
    let mut text = String::new();
    for value in values {
        let value = value.to_str().ok()?;
        if !text.is_empty() {
            text.push_str(", ");
        }
        text.push_str(value);
    }
    let lower = text.to_ascii_lowercase();
    if !(lower.contains("zstd") && lower.contains("br")) {
        return None;
    }
    let quality = |item: &str| -> Option<(String, u16)> {
        let mut parts = item.split(';');
        let coding = parts.next()?.trim().to_ascii_lowercase();
        let q = parts
            .find_map(|p| {
                let p = p.trim();
                p.strip_prefix("q=").or_else(|| p.strip_prefix("Q="))
            })
            .map_or(Some(1000), |q| {
                q.trim()
                    .parse::<f32>()
                    .ok()
                    .map(|q| (q.clamp(0.0, 1.0) * 1000.0).round() as u16)
            })?;
        Some((coding, q))
    };
    let items: Vec<&str> = text.split(',').collect();
    let of = |name: &str| {
        items
            .iter()
            .filter_map(|i| quality(i))
            .find(|(c, _)| c == name)
            .map(|(_, q)| q)
    };
    let (zstd, br) = (of("zstd")?, of("br")?);
    if zstd != br || zstd == 0 {
        return None;
    }
    let rewritten: Vec<String> = items
        .iter()
        .map(|item| match quality(item) {
            Some((coding, _)) if coding == "br" => {
                format!("br;q={:.3}", f32::from(br - 1) / 1000.0)
            }
            _ => item.trim().to_owned(),
        })
        .collect();
    HeaderValue::from_str(&rewritten.join(", ")).ok()
}

/// Largest accepted total size of the request headers, in bytes.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Largest accepted declared request body, in bytes (the API reads no bodies).
pub const MAX_BODY_BYTES: u64 = 64 * 1024;

fn oversized(req: &ServiceRequest) -> Option<ApiError> {
    let header_bytes: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    if header_bytes > MAX_HEADER_BYTES {
        return Some(ApiError::new(
            ProblemKind::HeadersTooLarge,
            format!("The request headers total {header_bytes} bytes; at most {MAX_HEADER_BYTES} bytes are accepted."),
        ));
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    match declared {
        Some(n) if n > MAX_BODY_BYTES => Some(ApiError::new(
            ProblemKind::PayloadTooLarge,
            format!("The request body is {n} bytes; this read-only API takes no body (at most {MAX_BODY_BYTES} bytes are accepted)."),
        )),
        _ => None,
    }
}

/// The token of the request's key: its id, its own quota and the time it
/// was checked at (usage is counted under that time: one clock read per
/// request). A key that does not authenticate is charged to the client's
/// address; past that address's quota the answer is a 429, not a 401.
async fn authenticate(
    req: &ServiceRequest,
    state: &web::Data<AppState>,
) -> Result<(TokenId, Option<u32>, time::OffsetDateTime), ApiError> {
    match verify_key(req, state).await {
        Err(e)
            if e.kind == ProblemKind::Unauthorized
                && req.headers().contains_key(API_KEY_HEADER) =>
        {
            let Some(ip) = client_ip(req, state) else {
                return Err(e);
            };
            Err(match state.limits.failed_auth(ip) {
                Some(v @ Verdict::Limited { retry_after, .. }) => {
                    throttled(
                        v,
                        format!("Too many API keys that do not authenticate came from {ip}; retry after {retry_after} s with a valid key."),
                    )
                    .await
                }
                Some(v) => {
                    let mut e = e;
                    e.headers.extend(v.headers());
                    e
                }
                None => e,
            })
        }
        other => other,
    }
}

/// Checks the key itself: its shape, then the token cache, then the
/// database (skipped for an unknown key from a throttled address).
async fn verify_key(
    req: &ServiceRequest,
    state: &web::Data<AppState>,
) -> Result<(TokenId, Option<u32>, time::OffsetDateTime), ApiError> {
    let Some(value) = req.headers().get(API_KEY_HEADER) else {
        let detail = if req.headers().contains_key(header::AUTHORIZATION) {
            "The Authorization header is not accepted; send the API key in the X-API-Key header."
                .to_owned()
        } else if has_key_like_query(req.query_string()) {
            "API keys in the query string are not accepted; send the API key in the X-API-Key header.".to_owned()
        } else {
            format!("The X-API-Key header is missing; send your API key (it starts with `{}`) in X-API-Key.", tokens::TOKEN_PREFIX)
        };
        return Err(ApiError::unauthorized(detail));
    };
    let key = value
        .to_str()
        .map_err(|_| {
            ApiError::unauthorized(
                "The X-API-Key header is not visible ASCII; send the key exactly as issued.",
            )
        })?
        .trim();
    if key.is_empty() {
        return Err(ApiError::unauthorized(
            "The X-API-Key header is empty; send your API key in it.",
        ));
    }
    if !key.starts_with(tokens::TOKEN_PREFIX) {
        return Err(ApiError::unauthorized(format!(
            "The X-API-Key value does not start with `{}`; send the key exactly as `token create` printed it.",
            tokens::TOKEN_PREFIX
        )));
    }
    let unknown = || {
        ApiError::unauthorized("The API key is not known to this server; create one with `market-data-server token create --name NAME`.")
    };
    if !tokens::well_formed(key) {
        return Err(ApiError::unauthorized(format!(
            "The API key is malformed: after `{}` come {} characters of A-Z, a-z, 0-9, `-` and `_`; send the key exactly as issued.",
            tokens::TOKEN_PREFIX,
            tokens::SECRET_LEN
        )));
    }
    // Hash first, then look up by hash: no secret is ever compared byte by byte.
    let hash = tokens::hash(key);
    let record = match state.cached_token(&hash) {
        Some(r) => r,
        None => {
            // An address over its failed-auth quota costs no lookup, except
            // for a key the cache still holds from an earlier verification.
            if let Some(v @ Verdict::Limited { retry_after, .. }) = (!state.token_known(&hash))
                .then(|| client_ip(req, state))
                .flatten()
                .and_then(|ip| state.limits.blocked(ip))
            {
                return Err(throttled(
                    v,
                    format!("Too many API keys that do not authenticate came from this address; retry after {retry_after} s with a valid key."),
                )
                .await);
            }
            let h = hash.clone();
            let found = state
                .db
                .run(Lane::Control, move |store| {
                    store.find_token(&h).map_err(ApiError::from)
                })
                .await;
            match found {
                Ok(found) => {
                    let record = Arc::new(found.ok_or_else(unknown)?);
                    state.cache_token(hash, record.clone());
                    record
                }
                // The database cannot be reached: a key it verified not
                // long ago keeps working (its age keeps counting from then).
                Err(e) if e.kind == ProblemKind::Unavailable => {
                    match state.token_within(&hash, state.db.options().token_grace) {
                        Some(record) => record,
                        None => {
                            return Err(ApiError::new(
                                ProblemKind::Unavailable,
                                "The API key cannot be checked while the database is unreachable, and this server has not verified it recently. Retry after the number of seconds in Retry-After.",
                            ))
                        }
                    }
                }
                Err(e) => return Err(e),
            }
        }
    };
    let now = time::OffsetDateTime::now_utc();
    if record.revoked_at.is_some() {
        return Err(ApiError::unauthorized(
            "This API key was revoked; ask the operator for a new one.",
        ));
    }
    if record.expires_at.is_some_and(|e| e <= now) {
        return Err(ApiError::unauthorized(
            "This API key has expired; ask the operator for a new one.",
        ));
    }
    Ok((TokenId(record.id), record.rate_limit_per_minute, now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zstd_is_preferred_to_brotli_only_on_a_tie() {
        // Lines of the header separated by `|`.
        let rewrite = |v: &str| {
            let lines: Vec<HeaderValue> = v
                .split('|')
                .map(|l| HeaderValue::from_str(l).unwrap())
                .collect();
            zstd_over_brotli(lines.iter()).map(|v| v.to_str().unwrap().to_owned())
        };
        assert_eq!(
            rewrite("gzip, deflate, br, zstd").as_deref(),
            Some("gzip, deflate, br;q=0.999, zstd")
        );
        assert_eq!(
            rewrite("br;q=0.8, zstd;q=0.8").as_deref(),
            Some("br;q=0.799, zstd;q=0.8")
        );
        assert_eq!(rewrite("br, zstd;q=0.5"), None);
        assert_eq!(rewrite("br;q=0.2, zstd"), None);
        assert_eq!(rewrite("gzip, br"), None);
        assert_eq!(rewrite("zstd;q=0, br;q=0"), None);
        // Case-insensitive, and every line of the header is one list.
        assert_eq!(
            rewrite("GZIP, BR, ZSTD").as_deref(),
            Some("GZIP, br;q=0.999, ZSTD")
        );
        assert_eq!(
            rewrite("gzip, br, zstd|deflate").as_deref(),
            Some("gzip, br;q=0.999, zstd, deflate")
        );
    }

    #[test]
    fn accept_negotiation() {
        for ok in [
            "*/*",
            "application/json",
            "application/*",
            "text/html, application/json;q=0.5",
            "application/problem+json",
            "APPLICATION/JSON",
            "",
            "text/csv",
            "text/csv, text/plain",
            "text/*",
        ] {
            assert!(accepts(ok, false), "{ok:?}");
        }
        assert!(accepts("text/event-stream", true));
        assert!(!accepts("text/event-stream", false));
        assert!(!accepts("text/event-stream;q=0", true));
        assert!(!accepts("text/csv", true));
        for bad in [
            "text/html",
            "text/plain",
            "application/xml",
            "application/json;q=0",
            "text/csv;q=0",
            "image/*",
        ] {
            assert!(!accepts(bad, false), "{bad:?}");
        }
    }
}
