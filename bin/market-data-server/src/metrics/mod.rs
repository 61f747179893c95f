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

//! Two sets, one per kind of process: [`ServerMetrics`] (`serve`:
//! answers, the served data version, caches, the pool) in `serving`, and
//! [`IngestMetrics`] (`scan`, `track`: requests to the exchange and the
//! freshness of what they read) in `ingest`. Both render through the helpers
//! here, and [`spawn_endpoint`] serves either.

use std::net::TcpListener;
use std::sync::Arc;

use prometheus::{
    Encoder, Gauge, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

mod ingest;
mod serving;

pub use ingest::IngestMetrics;
pub use serving::{CacheStats, ServerMetrics, ServingSample};

/// Media type of the text exposition format.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Request latency buckets, in seconds: a snapshot answer takes well under
/// a millisecond, a cold history page tens of milliseconds, a pool wait 2 s.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once");
    c
}

fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("a valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once");
    c
}

fn gauge_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("a valid metric");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

fn int_gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("a valid metric");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

fn gauge(registry: &Registry, name: &str, help: &str) -> Gauge {
    let g = Gauge::new(name, help).expect("a valid metric");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

/// Brings a Prometheus counter up to a total kept elsewhere (totals only grow).
fn sync_counter(counter: &IntCounter, total: u64) {
    let current = counter.get();
    if total > current {
        counter.inc_by(total - current);
    }
}

fn encode(registry: &Registry) -> String {
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut out)
        .expect("encoding into memory does not fail");
    String::from_utf8(out).expect("the text format is UTF-8")
}

fn unix_now() -> f64 {
    time::OffsetDateTime::now_utc().unix_timestamp_nanos() as f64 / 1e9
}

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
