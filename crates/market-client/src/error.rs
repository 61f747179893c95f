//! The client's error type and the server's RFC 9457 problem details.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

/// Everything a call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with a problem (`application/problem+json`): a
    /// 4xx or 5xx whose `detail` says what to change.
    #[error("{0}")]
    Problem(Box<Problem>),
    /// The server answered with an error status but no problem body (a
    /// reverse proxy in front of it, for example).
    #[error("HTTP {status} without a problem body: {body}")]
    Status {
        /// HTTP status.
        status: u16,
        /// The start of the body, for diagnosis.
        body: String,
    },
    /// A successful answer whose body is not the documented shape.
    #[error("the answer to {url} is not the documented shape: {source}")]
    Decode {
        /// The URL asked for.
        url: String,
        /// What did not match.
        #[source]
        source: serde_json::Error,
    },
    /// The request could not be sent or its answer not read (connection
    /// refused, timeout, TLS).
    #[error("transport: {0}")]
    Transport(#[from] reqwest::Error),
    /// The base URL given to the builder cannot carry a path.
    #[error("base URL `{0}` must be an absolute http or https URL")]
    BaseUrl(String),
    /// The API key contains characters a header cannot carry.
    #[error("the API key contains characters an HTTP header cannot carry")]
    ApiKey,
    /// A cursor the server returned that this client cannot pass back
    /// (a server of another version).
    #[error("the server returned cursor `{0}`, which this query type cannot carry")]
    Cursor(String),
}

impl Error {
    /// The problem, when the server answered with one.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Error::Problem(p) => Some(p),
            _ => None,
        }
    }

    /// The HTTP status of an error answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Problem(p) => Some(p.status),
            Error::Status { status, .. } => Some(*status),
            Error::Transport(e) => e.status().map(|s| s.as_u16()),
            _ => None,
        }
    }
}

/// One offending request parameter of a 400 problem.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct InvalidParam {
    /// Name of the query or path parameter (or header).
    pub name: String,
    /// What is wrong with it and what is allowed.
    pub reason: String,
}

/// RFC 9457 problem details, as the server sends them on every error.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// Stable URI of the problem type (see [`Problem::kind`]).
    #[serde(rename = "type")]
    pub type_uri: String,
    /// Short, stable summary of the problem type.
    pub title: String,
    /// HTTP status.
    pub status: u16,
    /// What went wrong in this request and what to change.
    pub detail: String,
    /// The request path.
    #[serde(default)]
    pub instance: Option<String>,
    /// The server's request id; quote it when reporting a problem.
    #[serde(default)]
    pub request_id: Option<String>,
    /// The offending parameters of a 400.
    #[serde(default)]
    pub invalid_params: Vec<InvalidParam>,
    /// The wait the server asked for in `Retry-After`, if any.
    #[serde(skip)]
    pub retry_after: Option<Duration>,
}

impl Problem {
    /// The problem type, from its URI.
    pub fn kind(&self) -> ProblemKind {
        ProblemKind::from_uri(&self.type_uri)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.status, self.title, self.detail)?;
        if let Some(id) = &self.request_id {
            write!(f, " (request id {id})")?;
        }
        Ok(())
    }
}

/// The problem types of the API (`urn:market-data:problem:…`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProblemKind {
    /// 400: a query or path parameter is malformed, out of range or unknown.
    InvalidParameter,
    /// 401: missing or invalid API key.
    Unauthorized,
    /// 404: unknown path, network, asset or wallet.
    NotFound,
    /// 405: the path exists, but not for this method.
    MethodNotAllowed,
    /// 406: the request does not accept JSON.
    NotAcceptable,
    /// 410: a stream resumed from an event past retention.
    Gone,
    /// 413: request body too large.
    PayloadTooLarge,
    /// 431: request headers too large.
    HeadersTooLarge,
    /// 429: the token's rate limit is used up; retry after `Retry-After`.
    RateLimited,
    /// 500: a server bug; quote the request id.
    Internal,
    /// 503: the database is unreachable or busy, or the server is stopping.
    Unavailable,
    /// A type this client version does not know.
    Other(String),
}

impl ProblemKind {
    const PREFIX: &'static str = "urn:market-data:problem:";

    fn from_uri(uri: &str) -> ProblemKind {
        match uri.strip_prefix(Self::PREFIX) {
            Some("invalid-parameter") => ProblemKind::InvalidParameter,
            Some("unauthorized") => ProblemKind::Unauthorized,
            Some("not-found") => ProblemKind::NotFound,
            Some("method-not-allowed") => ProblemKind::MethodNotAllowed,
            Some("not-acceptable") => ProblemKind::NotAcceptable,
            Some("gone") => ProblemKind::Gone,
            Some("payload-too-large") => ProblemKind::PayloadTooLarge,
            Some("headers-too-large") => ProblemKind::HeadersTooLarge,
            Some("rate-limited") => ProblemKind::RateLimited,
            Some("internal") => ProblemKind::Internal,
            Some("unavailable") => ProblemKind::Unavailable,
            _ => ProblemKind::Other(uri.to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_body_parses_with_and_without_optional_members() {
        let full: Problem = serde_json::from_str(
            r#"{"type":"urn:market-data:problem:invalid-parameter","title":"Invalid request parameter",
                "status":400,"detail":"Query parameter `limit` must be an integer from 1 to 200; got `0`.",
                "instance":"/v1/networks/perpnet/wallets","requestId":"5f0c6a3e9b7d4c21",
                "invalidParams":[{"name":"limit","reason":"must be an integer from 1 to 200; got `0`"}]}"#,
        )
        .unwrap();
        assert_eq!(full.kind(), ProblemKind::InvalidParameter);
        assert_eq!(full.invalid_params[0].name, "limit");
        assert_eq!(
            full.to_string(),
            "400 Invalid request parameter: Query parameter `limit` must be an integer from 1 to 200; got `0`. (request id 5f0c6a3e9b7d4c21)"
        );
        let bare: Problem =
            serde_json::from_str(r#"{"type":"urn:other:x","title":"T","status":502,"detail":"d"}"#)
                .unwrap();
        assert_eq!(bare.kind(), ProblemKind::Other("urn:other:x".into()));
        assert!(bare.invalid_params.is_empty() && bare.request_id.is_none());
    }
}
