//! The client's error type. The problem details it parses are the
//! contract's own types, from `market_model::problem`.

use std::time::Duration;

pub use market_model::problem::{InvalidParam, Problem, ProblemKind};

/// Everything a call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with a problem (`application/problem+json`): a
    /// 4xx or 5xx whose `detail` says what to change.
    #[error("{problem}")]
    Problem {
        /// The problem the server sent.
        problem: Box<Problem>,
        /// The wait the server asked for in `Retry-After`, if any.
        retry_after: Option<Duration>,
    },
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
            Error::Problem { problem, .. } => Some(problem),
            _ => None,
        }
    }

    /// The wait the server asked for (`Retry-After` of a problem answer).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Problem { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The HTTP status of an error answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Problem { problem, .. } => Some(problem.status),
            Error::Status { status, .. } => Some(*status),
            Error::Transport(e) => e.status().map(|s| s.as_u16()),
            _ => None,
        }
    }
}
