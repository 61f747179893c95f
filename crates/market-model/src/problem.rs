//! The API's error contract: RFC 9457 problem details, their types (URNs),
//! titles and statuses. Declared once here: the server renders them, the
//! client parses them, and the OpenAPI document's `Problem` schema is this
//! type's.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

macro_rules! problem_kinds {
    ($($(#[doc = $doc:expr])* $kind:ident = $status:literal, $slug:literal, $title:literal;)+) => {
        /// The problem types of the API: each has one status, one stable
        /// type URI (`urn:market-data:problem:…`) and one stable title.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ProblemKind {
            $($(#[doc = $doc])* $kind,)+
        }

        impl ProblemKind {
            /// Every problem type, in status order.
            pub const ALL: &'static [ProblemKind] = &[$(ProblemKind::$kind),+];

            /// The HTTP status of an answer of this type.
            pub const fn status(self) -> u16 {
                match self {
                    $(ProblemKind::$kind => $status,)+
                }
            }

            /// The stable type URI (the problem's `type`).
            pub const fn type_uri(self) -> &'static str {
                match self {
                    $(ProblemKind::$kind => concat!("urn:market-data:problem:", $slug),)+
                }
            }

            /// The stable, short title (the problem's `title`).
            pub const fn title(self) -> &'static str {
                match self {
                    $(ProblemKind::$kind => $title,)+
                }
            }
        }
    };
}

problem_kinds! {
    /// A query or path parameter is malformed, out of range, repeated or
    /// unknown, or the query string is too long.
    InvalidParameter = 400, "invalid-parameter", "Invalid request parameter";
    /// The API key is missing or invalid.
    Unauthorized = 401, "unauthorized", "Missing or invalid API key";
    /// Unknown path, network, asset or wallet.
    NotFound = 404, "not-found", "Not found";
    /// The path exists, but not for this method (`Allow` lists the methods).
    MethodNotAllowed = 405, "method-not-allowed", "Method not allowed";
    /// The request does not accept what the endpoint serves.
    NotAcceptable = 406, "not-acceptable", "Not acceptable";
    /// A stream resumes from an event past retention.
    Gone = 410, "gone", "Gone past retention";
    /// The request declares a body too large.
    PayloadTooLarge = 413, "payload-too-large", "Request body too large";
    /// The key's quota (or the address's failed-authentication quota) is
    /// used up; retry after `Retry-After`.
    RateLimited = 429, "rate-limited", "Too many requests";
    /// The request headers are too large.
    HeadersTooLarge = 431, "headers-too-large", "Request headers too large";
    /// A bug or unexpected failure: the cause is logged under the request
    /// id, never returned.
    Internal = 500, "internal", "Internal server error";
    /// The database is unreachable or busy, or the server is stopping;
    /// retry after `Retry-After`.
    Unavailable = 503, "unavailable", "Service temporarily unavailable";
}

impl ProblemKind {
    /// The type whose URI is `uri`; `None` for a type this version does not
    /// know (a newer server's, or a proxy's).
    pub fn from_type_uri(uri: &str) -> Option<ProblemKind> {
        ProblemKind::ALL
            .iter()
            .copied()
            .find(|k| k.type_uri() == uri)
    }
}

/// One offending request parameter of a 400 problem.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InvalidParam {
    /// Name of the query or path parameter (or header).
    #[cfg_attr(feature = "openapi", schema(example = "limit"))]
    pub name: String,
    /// What is wrong with it and what is allowed.
    #[cfg_attr(
        feature = "openapi",
        schema(example = "must be an integer from 1 to 200; got `500`")
    )]
    pub reason: String,
}

/// RFC 9457 problem details: the body of every error response
/// (`Content-Type: application/problem+json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// Stable URI identifying the problem type (see the API guide's error table).
    #[serde(rename = "type")]
    #[cfg_attr(
        feature = "openapi",
        schema(example = "urn:market-data:problem:invalid-parameter")
    )]
    pub type_uri: String,
    /// Short, stable summary of the problem type.
    #[cfg_attr(feature = "openapi", schema(example = "Invalid request parameter"))]
    pub title: String,
    /// HTTP status code.
    #[cfg_attr(
        feature = "openapi",
        schema(example = 400, minimum = 400, maximum = 599)
    )]
    pub status: u16,
    /// What went wrong in this request and what to change.
    #[cfg_attr(
        feature = "openapi",
        schema(example = "Query parameter `limit` must be an integer from 1 to 200; got `500`.")
    )]
    pub detail: String,
    /// The request path.
    #[cfg_attr(feature = "openapi", schema(example = "/v1/networks/perpnet/wallets"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The request id (also in the `X-Request-Id` response header); quote it when reporting a problem.
    #[cfg_attr(feature = "openapi", schema(example = "5f0c6a3e9b7d4c21"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The offending parameters, when the problem is about parameters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid_params: Vec<InvalidParam>,
}

impl Problem {
    /// A problem of `kind` saying `detail`, without `instance`, request id
    /// or parameters.
    pub fn new(kind: ProblemKind, detail: impl Into<String>) -> Self {
        Problem {
            type_uri: kind.type_uri().to_owned(),
            title: kind.title().to_owned(),
            status: kind.status(),
            detail: detail.into(),
            instance: None,
            request_id: None,
            invalid_params: Vec::new(),
        }
    }

    /// Its type, when this version knows it.
    pub fn kind(&self) -> Option<ProblemKind> {
        ProblemKind::from_type_uri(&self.type_uri)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_status_uri_and_title() {
        let mut uris = std::collections::HashSet::new();
        for &kind in ProblemKind::ALL {
            assert!(uris.insert(kind.type_uri()), "{kind:?}");
            assert_eq!(ProblemKind::from_type_uri(kind.type_uri()), Some(kind));
            assert!((400..600).contains(&kind.status()), "{kind:?}");
            assert!(!kind.title().is_empty());
        }
        assert_eq!(ProblemKind::ALL.len(), 11);
        assert_eq!(ProblemKind::from_type_uri("urn:other:x"), None);
    }

    #[test]
    fn a_problem_round_trips_with_and_without_optional_members() {
        let text = r#"{"type":"urn:market-data:problem:invalid-parameter","title":"Invalid request parameter","status":400,"detail":"Query parameter `limit` must be an integer from 1 to 200; got `0`.","instance":"/v1/networks/perpnet/wallets","requestId":"5f0c6a3e9b7d4c21","invalidParams":[{"name":"limit","reason":"must be an integer from 1 to 200; got `0`"}]}"#;
        let full: Problem = serde_json::from_str(text).unwrap();
        assert_eq!(full.kind(), Some(ProblemKind::InvalidParameter));
        assert_eq!(full.invalid_params[0].name, "limit");
        assert_eq!(serde_json::to_string(&full).unwrap(), text);
        assert_eq!(
            full.to_string(),
            "400 Invalid request parameter: Query parameter `limit` must be an integer from 1 to 200; got `0`. (request id 5f0c6a3e9b7d4c21)"
        );
        let bare: Problem =
            serde_json::from_str(r#"{"type":"urn:other:x","title":"T","status":502,"detail":"d"}"#)
                .unwrap();
        assert_eq!(bare.kind(), None);
        assert!(bare.invalid_params.is_empty() && bare.request_id.is_none());
        assert_eq!(
            serde_json::to_string(&Problem::new(ProblemKind::NotFound, "No such asset.")).unwrap(),
            r#"{"type":"urn:market-data:problem:not-found","title":"Not found","status":404,"detail":"No such asset."}"#
        );
    }
}
