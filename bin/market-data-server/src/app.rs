//! Routing and the HTTP server.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::middleware::{from_fn, Compress, Condition, Logger};
use actix_web::{web, App, HttpServer};
use utoipa_swagger_ui::SwaggerUi;

use crate::error::ApiError;
use crate::middleware::{guard_api, method_not_allowed, not_found, request_context};
use crate::openapi::{self, PREFIXES};
use crate::routes;
use crate::state::AppState;

/// The route pattern of a resource under the API prefix, kept as resource
/// data so usage counting reads a static label instead of rebuilding the
/// pattern per request.
#[derive(Clone, Copy, Debug)]
pub struct RoutePattern(pub &'static str);

/// The API prefix a scope serves (`/v1` or its alias), as scope data.
#[derive(Clone, Copy, Debug)]
pub struct ApiPrefix(pub &'static str);

/// A GET/HEAD resource; other methods get 405. `$pattern` is the full route
/// pattern under the prefix (for usage), `$path` the part under its scope.
macro_rules! get_resource {
    ($pattern:expr, $path:expr, $handler:path) => {
        web::resource($path)
            .app_data(RoutePattern($pattern))
            .route(web::get().to($handler))
            .route(web::head().to($handler))
            .default_service(web::to(method_not_allowed))
    };
    ($path:expr, $handler:path) => {
        get_resource!($path, $path, $handler)
    };
}

/// The read API under one prefix.
///
/// Nested scopes keep routing cheap: actix-web matches every pattern with a
/// dynamic segment by a regex, one resource after another, so a flat list
/// ran up to seven regexes per request. Here `/networks/{network}` and
/// `/markets/{asset}` are matched once each and the rest are static suffixes.
fn api(cfg: &mut web::ServiceConfig) {
    cfg.service(get_resource!("/networks", routes::list_networks))
        .service(
            web::scope("/networks/{network}")
                .service(get_resource!(
                    "/networks/{network}/markets",
                    "/markets",
                    routes::list_markets
                ))
                .service(get_resource!(
                    "/networks/{network}/wallets",
                    "/wallets",
                    routes::list_wallets
                ))
                .service(get_resource!(
                    "/networks/{network}/coverage",
                    "/coverage",
                    routes::get_coverage
                ))
                .service(get_resource!(
                    "/networks/{network}/liquidity-levels",
                    "/liquidity-levels",
                    routes::list_liquidity_levels
                ))
                .service(
                    web::scope("/markets/{asset}")
                        .service(get_resource!(
                            "/networks/{network}/markets/{asset}",
                            "",
                            routes::get_market
                        ))
                        .service(get_resource!(
                            "/networks/{network}/markets/{asset}/whale-positions",
                            "/whale-positions",
                            routes::list_positions
                        ))
                        .service(get_resource!(
                            "/networks/{network}/markets/{asset}/candles",
                            "/candles",
                            routes::list_candles
                        )),
                ),
        );
}

fn path_error(err: actix_web::error::PathError, _req: &actix_web::HttpRequest) -> actix_web::Error {
    ApiError::path(&err).into()
}

/// Configures the whole application (shared by `serve` and the tests).
pub fn configure(state: Arc<AppState>) -> impl FnOnce(&mut web::ServiceConfig) + Clone {
    move |cfg: &mut web::ServiceConfig| {
        let doc = openapi::document();
        cfg.app_data(web::Data::from(state))
            .app_data(web::PathConfig::default().error_handler(path_error))
            .service(get_resource!("/healthz", routes::healthz))
            .service(get_resource!("/readyz", routes::readyz));
        // The API before Swagger UI, whose `{_:.*}` pattern is a regex every
        // request would otherwise try first.
        for prefix in PREFIXES {
            cfg.service(
                web::scope(prefix)
                    .app_data(ApiPrefix(prefix))
                    .wrap(from_fn(guard_api))
                    .configure(api)
                    .default_service(web::to(not_found)),
            );
        }
        cfg.service(SwaggerUi::new("/swagger-ui/{_:.*}").url("/api-docs/openapi.json", doc));
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
