//! Routing and the HTTP server.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::middleware::{from_fn, Compress, Condition};
use actix_web::{web, App, HttpServer};
use utoipa_swagger_ui::SwaggerUi;

use crate::access_log::{self, AccessLog};
use crate::error::ApiError;
use crate::explore;
use crate::middleware::{guard_api, not_found, request_context};
use crate::openapi::{self, PREFIXES};
use crate::routes::{Endpoint, Mount, ENDPOINTS};
use crate::state::AppState;

/// The route pattern of a resource under the API prefix, kept as resource
/// data so usage counting reads a static label instead of rebuilding the
/// pattern per request.
#[derive(Clone, Copy, Debug)]
pub struct RoutePattern(pub &'static str);

/// The API prefix a scope serves (`/v1` or its alias), as scope data.
#[derive(Clone, Copy, Debug)]
pub struct ApiPrefix(pub &'static str);

/// A scope of the route tree: the resources directly under it, then its
/// nested scopes, in table order.
#[derive(Default)]
struct Node {
    resources: Vec<(&'static str, &'static Endpoint)>,
    scopes: Vec<(&'static str, Node)>,
}

impl Node {
    /// Files `endpoint` under the scopes its pattern nests in.
    ///
    /// Nested scopes keep routing cheap: actix-web matches every pattern with
    /// a dynamic segment by a regex, one resource after another, so a flat
    /// list ran up to seven regexes per request. A pattern is cut after each
    /// dynamic segment (`/networks/{network}` + `/markets/{asset}` +
    /// `/candles`): each cut but the last is a scope, matched once for all
    /// the resources under it, and the rest are static suffixes.
    fn insert(&mut self, endpoint: &'static Endpoint) {
        let pattern = endpoint.pattern.as_str();
        let mut node = self;
        let mut start = 0;
        for (end, _) in pattern.match_indices('}') {
            let scope = &pattern[start..=end];
            start = end + 1;
            assert!(
                pattern[start..].is_empty() || pattern[start..].starts_with('/'),
                "{pattern}: a dynamic segment ends its path segment"
            );
            let at = match node.scopes.iter().position(|(path, _)| *path == scope) {
                Some(at) => at,
                None => {
                    node.scopes.push((scope, Node::default()));
                    node.scopes.len() - 1
                }
            };
            node = &mut node.scopes[at].1;
        }
        node.resources.push((&pattern[start..], endpoint));
    }

    fn mount(self, cfg: &mut web::ServiceConfig) {
        for (path, endpoint) in self.resources {
            cfg.service(
                endpoint
                    .resource(path)
                    .app_data(RoutePattern(&endpoint.pattern)),
            );
        }
        for (path, node) in self.scopes {
            cfg.service(web::scope(path).configure(|cfg| node.mount(cfg)));
        }
    }
}

/// Mounts the table's endpoints served at `mount`.
fn mount(mount: Mount) -> impl FnOnce(&mut web::ServiceConfig) {
    move |cfg| {
        let mut root = Node::default();
        for endpoint in ENDPOINTS.iter().filter(|e| e.mount == mount) {
            root.insert(endpoint);
        }
        root.mount(cfg);
    }
}

fn path_error(err: actix_web::error::PathError, _req: &actix_web::HttpRequest) -> actix_web::Error {
    ApiError::path(&err).into()
}

/// Configures the whole application (shared by `serve` and the tests).
pub fn configure(state: Arc<AppState>) -> impl FnOnce(&mut web::ServiceConfig) + Clone {
    // Built once, not per worker.
    let doc = openapi::document();
    move |cfg: &mut web::ServiceConfig| {
        cfg.app_data(web::Data::from(state))
            .app_data(web::PathConfig::default().error_handler(path_error))
            .configure(mount(Mount::Root));
        // The API before Swagger UI, whose `{_:.*}` pattern is a regex every
        // request would otherwise try first.
        for prefix in PREFIXES {
            cfg.service(
                web::scope(prefix)
                    .app_data(ApiPrefix(prefix))
                    .wrap(from_fn(guard_api))
                    .configure(mount(Mount::Api))
                    .default_service(web::to(not_found)),
            );
        }
        cfg.configure(explore::configure);
        cfg.service(SwaggerUi::new("/swagger-ui/{_:.*}").url("/api-docs/openapi.json", doc));
    }
}

/// Starts the HTTP server on an already bound listener, logging each
/// request to `log` if given.
pub fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    workers: usize,
    log: Option<Arc<AccessLog>>,
) -> std::io::Result<Server> {
    let configure = configure(state);
    let server = HttpServer::new(move || {
        let mut app = App::new();
        if let Some(log) = &log {
            app = app.app_data(web::Data::from(log.clone()));
        }
        app.configure(configure.clone())
            .default_service(web::to(not_found))
            // gzip only when the client asks (Accept-Encoding). Inside
            // `request_context`, which boxes the body: a complete body stays a
            // complete body there, so uncompressed responses keep the fast path.
            .wrap(Compress::default())
            .wrap(from_fn(request_context))
            // One line per request, queued to a writer thread; off costs nothing.
            .wrap(Condition::new(
                log.is_some(),
                from_fn(access_log::log_request),
            ))
    })
    .workers(workers)
    .listen(listener)?
    .run();
    Ok(server)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (resource paths, (scope path, subtree)...) of a node.
    fn shape(node: &Node) -> String {
        let mut out: Vec<String> = node
            .resources
            .iter()
            .map(|(path, _)| format!("{path:?}"))
            .collect();
        out.extend(
            node.scopes
                .iter()
                .map(|(path, child)| format!("{path} [{}]", shape(child))),
        );
        out.join(", ")
    }

    #[test]
    fn patterns_nest_after_each_dynamic_segment() {
        let mut root = Node::default();
        for endpoint in ENDPOINTS.iter().filter(|e| e.mount == Mount::Api) {
            root.insert(endpoint);
        }
        assert_eq!(
            shape(&root),
            "\"/networks\", /networks/{network} [\"/markets\", \"/wallets\", \"/liquidity-levels\", \"/coverage\", \"/position-events\", /markets/{asset} [\"\", \"/whale-positions\", \"/candles\", \"/cohorts\", \"/history\"], /wallets/{address} [\"\", \"/history\"]]"
        );
    }
}
