//! The benchmark's baseline: `GET /bytes/{n}` returns `n` precomputed bytes of
//! JSON-looking text with `Content-Type: application/json`, so the load test can
//! compare each endpoint with pure HTTP framing of a body of the same size.
//! Usage: `bench-baseline ADDR SIZE [SIZE …]` (bodies are built before serving).

use std::collections::HashMap;
use std::sync::Arc;

use actix_web::{web, App, HttpResponse, HttpServer};

fn body(n: usize) -> web::Bytes {
    let unit = br#"{"symbol":"BTC","price":"92203.5","volume24h":"1797433962.53"},"#;
    let mut v: Vec<u8> = unit.iter().copied().cycle().take(n).collect();
    if let Some(last) = v.last_mut() {
        *last = b'}';
    }
    web::Bytes::from(v)
}

async fn bytes(
    path: web::Path<usize>,
    bodies: web::Data<Arc<HashMap<usize, web::Bytes>>>,
) -> HttpResponse {
    match bodies.get(&path.into_inner()) {
        Some(b) => HttpResponse::Ok()
            .content_type("application/json")
            .body(b.clone()),
        None => HttpResponse::NotFound().finish(),
    }
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:18900".into());
    let bodies: HashMap<usize, web::Bytes> = args
        .filter_map(|s| s.parse().ok())
        .map(|n| (n, body(n)))
        .collect();
    let bodies = web::Data::new(Arc::new(bodies));
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    HttpServer::new(move || {
        App::new()
            .app_data(bodies.clone())
            .route("/bytes/{n}", web::get().to(bytes))
    })
    .workers(workers)
    .bind(addr)?
    .run()
    .await
}
