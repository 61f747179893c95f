//! Liveness and readiness (no API key).

use actix_web::{web, HttpResponse};
use serde::Serialize;

use crate::error::{ApiError, Problem, ProblemKind};
use crate::http::json;
use crate::state::{AppState, Lane};

type Data = web::Data<AppState>;

/// Liveness: the process answers.
///
/// Answers 200 whenever the process can serve HTTP; it does not touch the database. No API key.
#[utoipa::path(get, path = "/healthz", operation_id = "healthz", tag = "health",
    responses((status = 200, description = "The process is alive.", body = Health, example = json!({"status": "ok"}))))]
pub async fn healthz() -> HttpResponse {
    json(&Health {
        status: "ok".into(),
        database: None,
        database_down_since: None,
    })
}

/// Readiness: the server serves, and whether its database answers.
///
/// Answers 200 `{"status":"ready","database":"up"}` when a database connection runs `SELECT 1`. While the database cannot be reached it still answers 200, at once, with `{"status":"degraded","database":"unreachable","databaseDownSince":…}`: the endpoints served from memory keep working, and only uncached pages of the database-backed endpoints get 503. From a SIGTERM or SIGINT on, while the requests in flight finish, it answers 503, so a load balancer stops sending requests here. No API key.
#[utoipa::path(get, path = "/readyz", operation_id = "readyz", tag = "health",
    responses(
        (status = 200, description = "The server serves: `ready`, or `degraded` while its database cannot be reached (`{\"status\":\"degraded\",\"database\":\"unreachable\",\"databaseDownSince\":\"2026-11-25T10:15:02Z\"}`).", body = Health,
            example = json!({"status": "ready", "database": "up"})),
        (status = 503, description = "The server is stopping.", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn readyz(state: Data) -> Result<HttpResponse, ApiError> {
    if state.is_stopping() {
        return Err(ApiError::new(
            ProblemKind::Unavailable,
            "This server is shutting down. Send requests to another replica, or retry after the number of seconds in Retry-After.",
        ));
    }
    let pinged = state
        .db
        .run(Lane::Control, |store| store.ping().map_err(ApiError::from))
        .await;
    match pinged {
        Ok(()) => Ok(json(&Health {
            status: "ready".into(),
            database: Some("up".into()),
            database_down_since: None,
        })),
        Err(e) if e.kind == ProblemKind::Unavailable => Ok(json(&Health {
            status: "degraded".into(),
            database: Some("unreachable".into()),
            database_down_since: state
                .db
                .down_since()
                .map(market_model::timestamp::format_utc),
        })),
        Err(e) => Err(e),
    }
}

/// Health status body.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// `ok` (liveness), `ready`, or `degraded` (readiness while the database cannot be reached).
    pub status: String,
    /// Readiness only: `up` or `unreachable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// Readiness only, while the database cannot be reached: since when (RFC 3339 UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_down_since: Option<String>,
}
