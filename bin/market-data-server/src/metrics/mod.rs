//! Prometheus metrics, served in the text exposition format at `/metrics`
//! on a separate address (`--metrics-bind`) by `serve`, `scan` and `track`.
//!
//! A separate address, not the API's port: the metrics tell how busy the
//! service is and which routes it serves, which is for the operator's
//! network, not for API users; a scraper needs no API key; and `scan` and
//! `track`, which have no API port, expose theirs the same way.
//!
//! Request counts and latencies are recorded per answer by
//! `request_context`. Everything else (the data version, caches, the pool,
//! the scanner's counters) is kept by the parts themselves in plain atomics
//! and read when Prometheus scrapes, so recording them costs the request
//! path nothing.
//!
//! Two sets, one per kind of process: [`ServerMetrics`] (`serve`:
//! answers, the served data version, caches, the pool) in `serving`, and
//! [`IngestMetrics`] (`scan`, `track`: requests to the exchange and the
//! freshness of what they read) in `ingest`. Both are built and rendered with the
//! helpers of `registry`, and [`spawn_endpoint`] serves either.

use std::net::TcpListener;
use std::sync::Arc;

mod ingest;
mod registry;
mod serving;

pub use ingest::IngestMetrics;
pub use serving::{CacheStats, ServerMetrics, ServingSample};

/// Media type of the text exposition format.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves `GET /metrics` with `render`'s text on `listener`, from a thread
/// of its own (one worker), until the process exits.
pub fn spawn_endpoint(
    listener: TcpListener,
    render: Arc<dyn Fn() -> String + Send + Sync>,
) -> std::io::Result<()> {
    use actix_web::{web, App, HttpResponse, HttpServer};
    let addr = listener.local_addr()?;
    std::thread::Builder::new()
        .name("metrics-http".into())
        .spawn(move || {
            let served = actix_web::rt::System::new().block_on(async move {
                HttpServer::new(move || {
                    let render = render.clone();
                    App::new().route(
                        "/metrics",
                        web::get().to(move || {
                            let render = render.clone();
                            async move {
                                // Sampling takes locks (the tracker's registry): off the worker.
                                match web::block(move || render()).await {
                                    Ok(text) => {
                                        HttpResponse::Ok().content_type(TEXT_FORMAT).body(text)
                                    }
                                    Err(_) => HttpResponse::InternalServerError().finish(),
                                }
                            }
                        }),
                    )
                })
                .workers(1)
                .disable_signals()
                .listen(listener)?
                .run()
                .await
            });
            if let Err(e) = served {
                log::error!("the metrics endpoint stopped: {e}");
            }
        })?;
    log::info!("metrics at http://{addr}/metrics");
    Ok(())
}
