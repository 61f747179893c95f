//! The route table's facts: where endpoints are served ([`PREFIXES`],
//! [`Mount`]), what a row holds ([`Endpoint`]), the labels a matched
//! request carries ([`RoutePattern`], [`ApiPrefix`]), the fallbacks of a
//! path or method no row serves, and how the rows are mounted as nested
//! actix scopes. The rows themselves are `routes::ENDPOINTS`.

use actix_web::{web, FromRequest, Handler, HttpResponse, Resource, Responder, ResponseError};
use utoipa::openapi::OpenApi as OpenApiDoc;

use crate::error::{ApiError, ProblemKind};

/// Both path prefixes serve identical answers.
pub const PREFIXES: [&str; 2] = ["/v1", "/api/developer/v1"];

/// Where an endpoint is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mount {
    /// Under each API prefix ([`PREFIXES`]), behind the API key.
    Api,
    /// At the root, without a key (health checks).
    Root,
}

/// One row of the route table.
pub struct Endpoint {
    /// Where it is served.
    pub mount: Mount,
    /// Its route pattern (under the prefix for [`Mount::Api`]), as written in
    /// the handler's `#[utoipa::path]`.
    pub pattern: String,
    /// Its OpenAPI operation under `pattern`, with the schemas it references.
    pub doc: OpenApiDoc,
    resource: fn(&str) -> Resource,
}

impl Endpoint {
    pub(super) fn new(mount: Mount, doc: OpenApiDoc, resource: fn(&str) -> Resource) -> Self {
        let mut paths = doc.paths.paths.iter();
        let (pattern, item) = paths.next().expect("a handler declares one path");
        assert!(paths.next().is_none(), "a handler declares one path");
        // The API is read-only: every endpoint is GET (HEAD follows it).
        assert!(
            item.get.is_some()
                && [&item.put, &item.post, &item.delete, &item.patch, &item.head]
                    .iter()
                    .all(|op| op.is_none()),
            "{pattern}: endpoints are GET only"
        );
        Self {
            mount,
            pattern: pattern.clone(),
            doc,
            resource,
        }
    }

    /// The actix resource at `path` (the part of the pattern under its scope).
    pub fn resource(&self, path: &str) -> Resource {
        (self.resource)(path)
    }
}

/// A GET resource that answers HEAD too, and 405 to any other method.
pub(super) fn get_resource<F, Args>(path: &str, handler: F) -> Resource
where
    F: Handler<Args>,
    Args: FromRequest + 'static,
    F::Output: Responder + 'static,
{
    web::resource(path)
        .route(web::get().to(handler.clone()))
        .route(web::head().to(handler))
        .default_service(web::to(method_not_allowed))
}

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
pub(crate) fn mount(
    endpoints: &'static [Endpoint],
    mount: Mount,
) -> impl FnOnce(&mut web::ServiceConfig) {
    move |cfg| {
        let mut root = Node::default();
        for endpoint in endpoints.iter().filter(|e| e.mount == mount) {
            root.insert(endpoint);
        }
        root.mount(cfg);
    }
}

/// 405 for a known path with another method.
pub async fn method_not_allowed(req: actix_web::HttpRequest) -> HttpResponse {
    let mut e = ApiError::new(
        ProblemKind::MethodNotAllowed,
        format!(
            "{} is not allowed on this path; this API is read-only: use GET.",
            req.method()
        ),
    );
    e.allow = Some("GET, HEAD");
    e.error_response()
}

/// 404 for unknown paths.
pub async fn not_found(req: actix_web::HttpRequest) -> HttpResponse {
    ApiError::not_found(format!(
        "No endpoint at `{}`; see /api-docs/openapi.json or /swagger-ui/ for the available paths.",
        market_model::params::printable(req.path())
    ))
    .error_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::ENDPOINTS;

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
            "\"/networks\", /networks/{network} [\"/markets\", \"/wallets\", \"/liquidity-levels\", \"/coverage\", \"/position-events\", \"/position-events/stream\", /markets/{asset} [\"\", \"/whale-positions\", \"/candles\", \"/cohorts\", \"/history\"], /wallets/{address} [\"\", \"/history\"]]"
        );
    }
}
