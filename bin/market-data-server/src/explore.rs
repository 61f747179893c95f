//! The explorer at `/explore`: a page over this server's own API, for
//! people who would rather look at a liquidation map than read JSON.
//!
//! Its files (`explore/` beside `src/`) are compiled into the binary,
//! so it works offline and always matches the server that serves it. They
//! are hand-written and load nothing from elsewhere; the
//! `Content-Security-Policy` below makes a browser refuse anything that
//! would (another origin, inline scripts or styles). The page asks for the
//! API key itself, so these routes take none.

use std::hash::{Hash, Hasher};
use std::sync::LazyLock;

use actix_web::http::header::{self, HeaderValue};
use actix_web::{guard, web, HttpRequest, HttpResponse};

/// Where the explorer is served.
pub const PATH: &str = "/explore";

/// Same origin only; no inline code; no framing.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// One embedded file.
pub struct Asset {
    /// Path under [`PATH`] (`""` is the page itself).
    pub path: &'static str,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The file.
    pub body: &'static str,
}

/// The explorer's files.
pub const ASSETS: [Asset; 4] = [
    Asset {
        path: "",
        content_type: "text/html; charset=utf-8",
        body: include_str!("../explore/index.html"),
    },
    Asset {
        path: "/explore.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../explore/explore.js"),
    },
    Asset {
        path: "/explore.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../explore/explore.css"),
    },
    Asset {
        path: "/favicon.svg",
        content_type: "image/svg+xml",
        body: include_str!("../explore/favicon.svg"),
    },
];

/// Validators of the files, computed once: they change only with the binary.
static ETAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|asset| {
            let mut hasher = std::hash::DefaultHasher::new();
            asset.body.hash(&mut hasher);
            HeaderValue::from_str(&format!("\"{:016x}\"", hasher.finish()))
                .expect("hex is a valid header value")
        })
        .collect()
});

async fn asset(req: HttpRequest, index: web::Data<usize>) -> HttpResponse {
    let index = **index;
    let (asset, etag) = (&ASSETS[index], &ETAGS[index]);
    // A browser revalidates on every load (`no-cache`), and gets a 304 when
    // the binary has not changed.
    let fresh = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v == etag);
    let mut res = if fresh {
        HttpResponse::NotModified().finish()
    } else {
        HttpResponse::Ok()
            .content_type(asset.content_type)
            .body(asset.body)
    };
    let headers = res.headers_mut();
    headers.insert(header::ETAG, etag.clone());
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    res
}

/// Mounts the explorer: the page at `/explore` and `/explore/`, its files
/// beside it.
pub fn configure(cfg: &mut web::ServiceConfig) {
    for (index, file) in ASSETS.iter().enumerate() {
        let paths = if file.path.is_empty() {
            vec![PATH.to_owned(), format!("{PATH}/")]
        } else {
            vec![format!("{PATH}{}", file.path)]
        };
        for path in paths {
            cfg.service(
                web::resource(path).app_data(web::Data::new(index)).route(
                    web::route()
                        .guard(guard::Any(guard::Get()).or(guard::Head()))
                        .to(asset),
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing in the files points at another origin: the page must work
    /// without internet, and the policy would block it anyway.
    #[test]
    fn the_files_load_nothing_from_elsewhere() {
        for asset in &ASSETS {
            // The SVG namespace and same-document references (`url(#id)`,
            // a gradient of the page's own) name no other origin.
            let rest = asset
                .body
                .replace("http://www.w3.org/2000/svg", "")
                .replace("url(#", "");
            for needle in ["http://", "https://", "//cdn", "@import", "url("] {
                assert!(!rest.contains(needle), "{}: contains {needle}", asset.path);
            }
        }
    }

    #[test]
    fn the_page_references_the_files_served_beside_it() {
        let page = ASSETS[0].body;
        for asset in &ASSETS[1..] {
            assert!(
                page.contains(&format!("\"{PATH}{}\"", asset.path)),
                "{}",
                asset.path
            );
        }
    }
}
