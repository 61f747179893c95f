//! Routing and the HTTP server.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::middleware::{from_fn, Compress, Condition, Logger};
use actix_web::{web, App, HttpServer};
use utoipa_swagger_ui::SwaggerUi;

use crate::error::{ApiError, ProblemKind};
use crate::middleware::{
    method_not_allowed, not_found, request_context, require_api_key, require_json_accept,
};
use crate::openapi::{self, PREFIXES};
use crate::routes;
use crate::state::AppState;

macro_rules! get_resource {
    ($path:expr, $handler:path) => {
        web::resource($path)
            .route(web::get().to($handler))
            .route(web::head().to($handler))
            .default_service(web::to(method_not_allowed))
    };
}

/// The read API under one prefix.
fn api(cfg: &mut web::ServiceConfig) {
    cfg.service(get_resource!("/networks", routes::list_networks))
        .service(get_resource!(
            "/networks/{network}/markets",
            routes::list_markets
        ))
        .service(get_resource!(
            "/networks/{network}/markets/{asset}",
            routes::get_market
        ))
        .service(get_resource!(
            "/networks/{network}/markets/{asset}/whale-positions",
            routes::list_positions
        ))
        .service(get_resource!(
            "/networks/{network}/wallets",
            routes::list_wallets
        ))
        .service(get_resource!(
            "/networks/{network}/liquidity-levels",
            routes::list_liquidity_levels
        ))
        .service(get_resource!(
            "/networks/{network}/markets/{asset}/candles",
            routes::list_candles
        ));
}

fn path_error(err: actix_web::error::PathError, _req: &actix_web::HttpRequest) -> actix_web::Error {
    ApiError::new(
        ProblemKind::InvalidParameter,
        format!("A path segment could not be decoded ({err}); percent-encode it as UTF-8."),
    )
    .into()
}

/// Configures the whole application (shared by `serve` and the tests).
pub fn configure(state: Arc<AppState>) -> impl FnOnce(&mut web::ServiceConfig) + Clone {
    move |cfg: &mut web::ServiceConfig| {
        let doc = openapi::document();
        cfg.app_data(web::Data::from(state))
            .app_data(web::PathConfig::default().error_handler(path_error))
            .service(get_resource!("/healthz", routes::healthz))
            .service(get_resource!("/readyz", routes::readyz))
            .service(SwaggerUi::new("/swagger-ui/{_:.*}").url("/api-docs/openapi.json", doc));
        for prefix in PREFIXES {
            cfg.service(
                web::scope(prefix)
                    .wrap(from_fn(require_api_key))
                    .wrap(from_fn(require_json_accept))
                    .configure(api)
                    .default_service(web::to(not_found)),
            );
        }
    }
}

/// Starts the HTTP server on an already bound listener.
pub fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    workers: usize,
    access_log: bool,
) -> std::io::Result<Server> {
    let configure = configure(state);
    let server = HttpServer::new(move || {
        App::new()
            .configure(configure.clone())
            .default_service(web::to(not_found))
            // gzip only when the client asks (Accept-Encoding). Inside
            // `request_context`, which boxes the body: a complete body stays a
            // complete body there, so uncompressed responses keep the fast path.
            .wrap(Compress::default())
            .wrap(from_fn(request_context))
            // One line per request under the log target `access`; off costs nothing.
            .wrap(Condition::new(
                access_log,
                Logger::new("%a \"%r\" %s %b %Dms rid=%{x-request-id}o").log_target("access"),
            ))
    })
    .workers(workers)
    .listen(listener)?
    .run();
    Ok(server)
}
