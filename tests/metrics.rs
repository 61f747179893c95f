//! Prometheus metrics of `serve`: what a scrape says agrees with the
//! requests the test sent, the data version served and the caches.

use std::sync::Arc;

use market_data_server::metrics;

use crate::shutdown::Server;
use crate::support::{metric, seeded_database, spawn_app, Backend, TestApp};
use crate::NET;

/// Serves `app`'s metrics on a port of their own, as `--metrics-bind` does.
async fn scrape_endpoint(app: &TestApp) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    let state = app.state.clone();
    metrics::spawn_endpoint(listener, Arc::new(move || state.render_metrics())).unwrap();
    url
}

async fn scrape(url: &str) -> String {
    let res = reqwest::get(url).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    res.text().await.unwrap()
}

async fn a_scrape_agrees_with_the_requests_sent(backend: Backend) {
    let app = spawn_app(backend).await;
    let url = scrape_endpoint(&app).await;
    let before = scrape(&url).await;
    let detail = "/networks/{network}/markets/{asset}";
    assert_eq!(metric(&before, "market_data_http_requests_total", &[]), 0.0);

    let (version, _) = app.get_versioned(&format!("{NET}/markets/BTC")).await;
    for _ in 0..9 {
        app.get_ok(&format!("{NET}/markets/ETH")).await;
    }
    app.get_problem(&format!("{NET}/markets/NOPE"), 404).await;
    app.get_problem(&format!("{NET}/markets/NOPE2"), 404).await;
    // No key: 401, counted under its route too.
    assert_eq!(
        app.request(&format!("{NET}/markets/BTC"), None)
            .await
            .status(),
        401
    );
    assert_eq!(app.request("/no/such/path", None).await.status(), 404);
    let today = app.today();
    let liquidity = format!("{NET}/liquidity-levels?fromDate={today}&toDate={today}&asset=BTC");
    app.get_ok(&liquidity).await;
    app.get_ok(&liquidity).await;
    app.get_ok("/api/developer/v1/networks/perpnet/markets/BTC")
        .await;

    let text = scrape(&url).await;
    let requests = |route: &str, status: &str| {
        metric(
            &text,
            "market_data_http_requests_total",
            &[("prefix", "/v1"), ("route", route), ("status", status)],
        )
    };
    assert_eq!(requests(detail, "2xx"), 10.0, "{text}");
    assert_eq!(requests(detail, "4xx"), 3.0, "{text}");
    assert_eq!(
        metric(
            &text,
            "market_data_http_requests_total",
            &[("prefix", "/api/developer/v1"), ("route", detail)]
        ),
        1.0,
        "the alias prefix is counted apart"
    );
    assert_eq!(
        metric(
            &text,
            "market_data_http_requests_total",
            &[("prefix", ""), ("route", "unmatched"), ("status", "4xx")]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(requests("/networks/{network}/liquidity-levels", "2xx"), 2.0);
    // Cross-metric: the latency histogram saw every counted request.
    assert_eq!(
        metric(
            &text,
            "market_data_http_request_duration_seconds_count",
            &[("prefix", "/v1"), ("route", detail)]
        ),
        13.0
    );
    assert_eq!(
        metric(
            &text,
            "market_data_http_request_duration_seconds_count",
            &[]
        ),
        metric(&text, "market_data_http_requests_total", &[]),
    );
    assert_eq!(
        metric(&text, "market_data_http_requests_total", &[]),
        17.0,
        "every answer once: {text}"
    );

    assert_eq!(
        metric(&text, "market_data_version", &[]).to_string(),
        version
    );
    let observed = app.state.snapshot().observed_at.unix_timestamp() as f64;
    assert_eq!(
        metric(&text, "market_data_observed_at_seconds", &[]),
        observed
    );
    let age = metric(&text, "market_data_age_seconds", &[]);
    let now = time::OffsetDateTime::now_utc().unix_timestamp() as f64;
    assert!((now - observed - age).abs() < 5.0, "age {age}");
    assert!(metric(&text, "market_data_snapshot_load_seconds", &[]) > 0.0);
    assert_eq!(
        metric(
            &text,
            "market_data_snapshot_loads_total",
            &[("how", "whole")]
        ),
        1.0
    );

    // The liquidity page: rendered once, then served from the page cache.
    let cache = |name: &str, cache: &str| metric(&text, name, &[("cache", cache)]);
    assert_eq!(cache("market_data_cache_misses_total", "page"), 1.0);
    assert_eq!(cache("market_data_cache_hits_total", "page"), 1.0);
    assert_eq!(cache("market_data_cache_entries", "page"), 1.0);
    assert!(cache("market_data_cache_bytes", "page") > 1000.0);
    // Every request with a key looked it up once: 15 of the 17.
    assert_eq!(
        cache("market_data_cache_hits_total", "token")
            + cache("market_data_cache_misses_total", "token"),
        15.0
    );
    assert!(cache("market_data_cache_misses_total", "token") >= 1.0);
    assert_eq!(cache("market_data_cache_entries", "token"), 1.0);
    assert!(cache("market_data_cache_bytes", "token") > 64.0);

    let max = metric(&text, "market_data_db_pool_max_connections", &[]);
    let in_use = metric(
        &text,
        "market_data_db_pool_connections",
        &[("state", "in_use")],
    );
    let idle = metric(
        &text,
        "market_data_db_pool_connections",
        &[("state", "idle")],
    );
    assert!(max >= 1.0 && in_use + idle <= max && idle >= 1.0, "{text}");
    // The database guard: up, never refused, nothing rendering now.
    assert_eq!(metric(&text, "market_data_database_up", &[]), 1.0);
    assert_eq!(
        metric(&text, "market_data_database_outages_total", &[]),
        0.0
    );
    for reason in ["down", "busy"] {
        assert_eq!(
            metric(
                &text,
                "market_data_database_refused_total",
                &[("reason", reason)]
            ),
            0.0
        );
    }
    assert_eq!(
        metric(
            &text,
            "market_data_database_renders",
            &[("state", "running")]
        ),
        0.0
    );

    // A later scrape only grows the counters.
    app.get_ok(&format!("{NET}/markets/BTC")).await;
    let after = scrape(&url).await;
    assert_eq!(
        metric(
            &after,
            "market_data_http_requests_total",
            &[("prefix", "/v1"), ("route", detail), ("status", "2xx")]
        ),
        11.0
    );
}

/// `serve --metrics-bind`: the metrics are on that address, not on the API's.
async fn the_binary_serves_metrics_on_their_own_address(backend: Backend) {
    let db = seeded_database(backend);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let server = Server::start_with(&db, &["--metrics-bind", "127.0.0.1:0"], &log);
    let text = std::fs::read_to_string(&log).unwrap();
    let url = text
        .split("metrics at ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no metrics address in the log:\n{text}"))
        .to_owned();
    let api = reqwest::get(format!("http://{}/metrics", server.addr))
        .await
        .unwrap();
    assert_eq!(api.status(), 404, "the API port does not serve metrics");
    let scraped = scrape(&url).await;
    assert!(
        metric(&scraped, "market_data_version", &[]) >= 1.0,
        "{scraped}"
    );
    assert_eq!(
        metric(
            &scraped,
            "market_data_http_requests_total",
            &[("route", "unmatched"), ("status", "4xx")]
        ),
        1.0,
        "{scraped}"
    );
    assert!(scraped.contains("# TYPE market_data_http_request_duration_seconds histogram"));
}

crate::on_both_backends!(
    a_scrape_agrees_with_the_requests_sent,
    the_binary_serves_metrics_on_their_own_address,
);
