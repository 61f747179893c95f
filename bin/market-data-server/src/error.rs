//! The one error type of the HTTP layer and its RFC 9457 problem-details body.

use std::fmt;

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;
use utoipa::ToSchema;

/// Media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// One offending request parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct InvalidParam {
    /// Name of the query or path parameter (or header).
    #[schema(example = "limit")]
    pub name: String,
    /// What is wrong with it and what is allowed.
    #[schema(example = "must be an integer from 1 to 200; got `500`")]
    pub reason: String,
}

/// RFC 9457 problem details: the body of every error response
/// (`Content-Type: application/problem+json`).
#[derive(Clone, Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// Stable URI identifying the problem type (see the API guide's error table).
    #[serde(rename = "type")]
    #[schema(example = "urn:market-data:problem:invalid-parameter")]
    pub type_uri: &'static str,
    /// Short, stable summary of the problem type.
    #[schema(example = "Invalid request parameter")]
    pub title: &'static str,
    /// HTTP status code.
    #[schema(example = 400, minimum = 400, maximum = 599)]
    pub status: u16,
    /// What went wrong in this request and what to change.
    #[schema(example = "Query parameter `limit` must be an integer from 1 to 200; got `500`.")]
    pub detail: String,
    /// The request path.
    #[schema(example = "/v1/networks/perpnet/wallets")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The request id (also in the `X-Request-Id` response header); quote it when reporting a problem.
    #[schema(example = "5f0c6a3e9b7d4c21")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The offending parameters, when the problem is about parameters.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub invalid_params: Vec<InvalidParam>,
}

/// Problem types: (status, type URI, title).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    /// 400: a query or path parameter is malformed, out of range or unknown.
    InvalidParameter,
    /// 401: missing or invalid API key.
    Unauthorized,
    /// 404: unknown path, network or asset.
    NotFound,
    /// 405: the path exists but not for this method.
    MethodNotAllowed,
    /// 406: the client does not accept JSON.
    NotAcceptable,
    /// 410: a stream resumes from an event past retention.
    Gone,
    /// 413: request body too large.
    PayloadTooLarge,
    /// 414/431 style: request line or headers too large.
    HeadersTooLarge,
    /// 429: the token's request quota (or the address's failed-authentication
    /// quota) is used up; retry after `Retry-After`.
    RateLimited,
    /// 500: a bug or unexpected failure; the cause is logged, not returned.
    Internal,
    /// 503: the database is unreachable or saturated.
    Unavailable,
}

impl ProblemKind {
    /// HTTP status.
    pub fn status(self) -> StatusCode {
        match self {
            ProblemKind::InvalidParameter => StatusCode::BAD_REQUEST,
            ProblemKind::Unauthorized => StatusCode::UNAUTHORIZED,
            ProblemKind::NotFound => StatusCode::NOT_FOUND,
            ProblemKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ProblemKind::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
            ProblemKind::Gone => StatusCode::GONE,
            ProblemKind::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ProblemKind::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ProblemKind::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            ProblemKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ProblemKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// Stable type URI.
    pub fn type_uri(self) -> &'static str {
        match self {
            ProblemKind::InvalidParameter => "urn:market-data:problem:invalid-parameter",
            ProblemKind::Unauthorized => "urn:market-data:problem:unauthorized",
            ProblemKind::NotFound => "urn:market-data:problem:not-found",
            ProblemKind::MethodNotAllowed => "urn:market-data:problem:method-not-allowed",
            ProblemKind::NotAcceptable => "urn:market-data:problem:not-acceptable",
            ProblemKind::Gone => "urn:market-data:problem:gone",
            ProblemKind::PayloadTooLarge => "urn:market-data:problem:payload-too-large",
            ProblemKind::HeadersTooLarge => "urn:market-data:problem:headers-too-large",
            ProblemKind::RateLimited => "urn:market-data:problem:rate-limited",
            ProblemKind::Internal => "urn:market-data:problem:internal",
            ProblemKind::Unavailable => "urn:market-data:problem:unavailable",
        }
    }

    /// Stable title.
    pub fn title(self) -> &'static str {
        match self {
            ProblemKind::InvalidParameter => "Invalid request parameter",
            ProblemKind::Unauthorized => "Missing or invalid API key",
            ProblemKind::NotFound => "Not found",
            ProblemKind::MethodNotAllowed => "Method not allowed",
            ProblemKind::NotAcceptable => "Not acceptable",
            ProblemKind::Gone => "Gone past retention",
            ProblemKind::PayloadTooLarge => "Request body too large",
            ProblemKind::HeadersTooLarge => "Request headers too large",
            ProblemKind::RateLimited => "Too many requests",
            ProblemKind::Internal => "Internal server error",
            ProblemKind::Unavailable => "Service temporarily unavailable",
        }
    }
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
            type_uri: self.kind.type_uri(),
            title: self.kind.title(),
            status: self.kind.status().as_u16(),
            detail: self.detail.clone(),
            instance: None,
            request_id: None,
            invalid_params: self.invalid_params.clone(),
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.status(), self.detail)
    }
}

impl From<market_store::StoreError> for ApiError {
    fn from(e: market_store::StoreError) -> Self {
        if e.is_unavailable() {
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
    let mut res = HttpResponse::build(error.kind.status());
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
        self.kind.status()
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
