//! The one error type of the HTTP layer and its RFC 9457 problem-details body.

use std::fmt;

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};

pub use market_model::problem::{InvalidParam, Problem, ProblemKind, PROBLEM_JSON};

/// The HTTP status of a problem type.
pub fn status_of(kind: ProblemKind) -> StatusCode {
    StatusCode::from_u16(kind.status()).expect("problem statuses are valid")
}

/// The error every handler, extractor and middleware returns.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// Problem type.
    pub kind: ProblemKind,
    /// Caller-facing detail.
    pub detail: String,
    /// Offending parameters.
    pub invalid_params: Vec<InvalidParam>,
    /// `Allow` header value for 405.
    pub allow: Option<&'static str>,
    /// Internal cause, logged with the request id and never returned.
    pub cause: Option<String>,
    /// Headers the answer carries besides the problem's own (`Retry-After`
    /// and the rate-limit headers of a 429).
    pub headers: Vec<(header::HeaderName, HeaderValue)>,
}

impl ApiError {
    /// An error of `kind` with `detail`.
    pub fn new(kind: ProblemKind, detail: impl Into<String>) -> Self {
        ApiError {
            kind,
            detail: detail.into(),
            invalid_params: Vec::new(),
            allow: None,
            cause: None,
            headers: Vec::new(),
        }
    }

    /// 400 naming the parameter: `detail` is "Query parameter `name` reason."
    pub fn param(name: &str, reason: impl fmt::Display) -> Self {
        let reason = reason.to_string();
        ApiError {
            kind: ProblemKind::InvalidParameter,
            detail: format!("Query parameter `{name}` {reason}."),
            invalid_params: vec![InvalidParam {
                name: name.to_owned(),
                reason,
            }],
            allow: None,
            cause: None,
            headers: Vec::new(),
        }
    }

    /// 400 for a path segment that does not decode.
    pub fn path(err: &actix_web::error::PathError) -> Self {
        ApiError::new(
            ProblemKind::InvalidParameter,
            format!("A path segment could not be decoded ({err}); percent-encode it as UTF-8."),
        )
    }

    /// 400 for a path segment that is not a valid value; `reason` says what is accepted.
    pub fn invalid_path_value(reason: &str) -> Self {
        ApiError::new(
            ProblemKind::InvalidParameter,
            format!("A path segment {reason}."),
        )
    }

    /// 404 with a detail.
    pub fn not_found(detail: impl Into<String>) -> Self {
        ApiError::new(ProblemKind::NotFound, detail)
    }

    /// 401 with a detail.
    pub fn unauthorized(detail: impl Into<String>) -> Self {
        ApiError::new(ProblemKind::Unauthorized, detail)
    }

    /// 500: logs `cause`, returns a generic detail.
    pub fn internal(cause: impl fmt::Display) -> Self {
        let mut e = ApiError::new(
            ProblemKind::Internal,
            "The server failed to answer this request. Retry later; if it persists, report the requestId.",
        );
        e.cause = Some(cause.to_string());
        e
    }

    /// The problem body (without `instance` and `requestId`, which the
    /// problem middleware adds from the request).
    pub fn problem(&self) -> Problem {
        Problem {
            invalid_params: self.invalid_params.clone(),
            ..Problem::new(self.kind, self.detail.clone())
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", status_of(self.kind), self.detail)
    }
}

impl From<market_store::StoreError> for ApiError {
    fn from(e: market_store::StoreError) -> Self {
        // (No handler reads a version today; a read that lost its version
        // to a prune is worth a retry, as an outage is.)
        if e.is_unavailable() || matches!(e, market_store::StoreError::Pruned(_)) {
            let mut api = ApiError::new(
                ProblemKind::Unavailable,
                "The database is unreachable or busy. Retry after the number of seconds in Retry-After.",
            );
            api.cause = Some(e.to_string());
            api
        } else {
            ApiError::internal(e)
        }
    }
}

impl From<actix_web::error::BlockingError> for ApiError {
    fn from(e: actix_web::error::BlockingError) -> Self {
        ApiError::internal(e)
    }
}

/// Renders a problem as a complete response.
pub fn problem_response(error: &ApiError, problem: &Problem) -> HttpResponse {
    let mut res = HttpResponse::build(status_of(error.kind));
    res.insert_header((header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON)));
    if let Some(allow) = error.allow {
        res.insert_header((header::ALLOW, allow));
    }
    if error.kind == ProblemKind::Unavailable {
        res.insert_header((header::RETRY_AFTER, "2"));
    }
    for (name, value) in &error.headers {
        res.insert_header((name.clone(), value.clone()));
    }
    res.body(serde_json::to_vec(problem).expect("problems serialize"))
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        status_of(self.kind)
    }

    fn error_response(&self) -> HttpResponse {
        let mut res = problem_response(self, &self.problem());
        // The problem middleware re-renders with `instance` and `requestId`.
        res.extensions_mut().insert(self.clone());
        res
    }
}

impl From<market_query::QueryError> for ApiError {
    fn from(e: market_query::QueryError) -> Self {
        use market_query::QueryError;
        match e {
            QueryError::Param { name, reason } => ApiError::param(&name, reason),
            e @ QueryError::QueryTooLong(_) => {
                ApiError::new(ProblemKind::InvalidParameter, e.to_string())
            }
            QueryError::NotFound(detail) => ApiError::not_found(detail),
            QueryError::Store(e) => e.into(),
        }
    }
}
