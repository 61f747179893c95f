//! Liveness and readiness (no API key).

use actix_web::{web, HttpResponse};
use serde::Serialize;

use crate::error::{ApiError, Problem, ProblemKind};
use crate::http::json;
use crate::state::AppState;

type Data = web::Data<AppState>;

/// Liveness: the process answers.
///
/// Answers 200 whenever the process can serve HTTP; it does not touch the database. No API key.
#[utoipa::path(get, path = "/healthz", operation_id = "healthz", tag = "health",
    responses((status = 200, description = "The process is alive.", body = Health, example = json!({"status": "ok"}))))]
pub async fn healthz() -> HttpResponse {
    json(&Health {
        status: "ok".into(),
    })
}

/// Readiness: the database answers and the server is not stopping.
///
/// Answers 200 when a pooled database connection runs `SELECT 1`, and 503 (after at most about 2 s) when it cannot. From a SIGTERM or SIGINT on, while the requests in flight finish, it answers 503 at once, so a load balancer stops sending requests here. No API key.
#[utoipa::path(get, path = "/readyz", operation_id = "readyz", tag = "health",
    responses(
        (status = 200, description = "The database is reachable.", body = Health, example = json!({"status": "ready"})),
        (status = 503, description = "The database is unreachable, or the server is stopping.", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn readyz(state: Data) -> Result<HttpResponse, ApiError> {
    if state.is_stopping() {
        return Err(ApiError::new(
            ProblemKind::Unavailable,
            "This server is shutting down. Send requests to another replica, or retry after the number of seconds in Retry-After.",
        ));
    }
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
