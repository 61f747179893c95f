//! The error contract against hostile input, and the token lifecycle, over real HTTP.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;

use crate::support::{spawn_app, Backend, TestApp};

const NET: &str = "/v1/networks/perpnet";

struct Case {
    method: Method,
    path: String,
    headers: Vec<(&'static str, String)>,
    body: Option<Vec<u8>>,
    status: u16,
    /// The parameter the problem must name (in `invalidParams` and `detail`).
    param: Option<&'static str>,
    /// Text the detail must contain.
    detail: Option<&'static str>,
}

fn get(path: impl Into<String>, status: u16) -> Case {
    Case {
        method: Method::GET,
        path: path.into(),
        headers: vec![],
        body: None,
        status,
        param: None,
        detail: None,
    }
}

impl Case {
    fn param(mut self, name: &'static str) -> Self {
        self.param = Some(name);
        self
    }
    fn detail(mut self, text: &'static str) -> Self {
        self.detail = Some(text);
        self
    }
    fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
    fn method(mut self, m: Method) -> Self {
        self.method = m;
        self
    }
}

async fn run(
    app: &TestApp,
    case: &Case,
    with_key: bool,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut req = app.client.request(case.method.clone(), app.url(&case.path));
    if with_key
        && !case
            .headers
            .iter()
            .any(|(h, _)| h.eq_ignore_ascii_case("x-api-key"))
    {
        req = req.header("X-API-Key", &app.token);
    }
    for (h, v) in &case.headers {
        req = req.header(*h, v);
    }
    if let Some(b) = &case.body {
        req = req.body(b.clone());
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let text = res.text().await.unwrap();
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|_| panic!("{} {}: body is not JSON: {text:?}", case.method, case.path));
    (status, headers, body)
}

fn assert_problem(case: &Case, status: u16, headers: &reqwest::header::HeaderMap, p: &Value) {
    let label = format!("{} {}", case.method, &case.path[..case.path.len().min(120)]);
    assert_eq!(status, case.status, "{label}: {p}");
    assert_eq!(
        headers["content-type"], "application/problem+json",
        "{label}"
    );
    assert!(headers.contains_key("x-request-id"), "{label}");
    assert_eq!(p["status"].as_u64(), Some(status as u64), "{label}");
    for key in ["type", "title", "detail", "instance", "requestId"] {
        assert!(p[key].is_string(), "{label}: `{key}` missing in {p}");
    }
    assert_eq!(
        p["requestId"].as_str(),
        headers["x-request-id"].to_str().ok(),
        "{label}"
    );
    let detail = p["detail"].as_str().unwrap();
    if let Some(name) = case.param {
        assert_eq!(p["invalidParams"][0]["name"], name, "{label}: {p}");
        assert!(
            detail.contains(name),
            "{label}: detail does not name `{name}`: {detail}"
        );
    }
    if let Some(text) = case.detail {
        assert!(
            detail.contains(text),
            "{label}: detail lacks {text:?}: {detail}"
        );
    }
    assert!(
        !detail.to_lowercase().contains("diesel") && !detail.contains("panicked"),
        "{label}: internals leak: {detail}"
    );
}

/// A cheap digest of everything the service stores, to show hostile input changed nothing.
async fn data_digest(app: &TestApp) -> String {
    let meta = app.store.latest_snapshot().unwrap().unwrap();
    let snap = app.store.load_snapshot(&meta).unwrap();
    let today = app.today();
    let history = app
        .store
        .liquidity_history(
            "perpnet",
            today - time::Duration::days(89),
            today,
            None,
            None,
            100_000,
        )
        .unwrap();
    let candles = app
        .store
        .candles("BTC", market_model::Interval::H1, 0, i64::MAX, 100_000)
        .unwrap();
    format!(
        "{}|{:?}|{:?}|{:?}|{:?}|{:?}|{}",
        meta.version,
        snap.version.markets,
        snap.version.wallets,
        snap.version.positions,
        history,
        candles,
        app.store.list_tokens().unwrap().len()
    )
}

async fn every_rejection_is_a_problem_that_names_the_fix(backend: Backend) {
    let app = spawn_app(backend).await;
    let before = data_digest(&app).await;
    let today = app.today();
    let from = today - time::Duration::days(3);
    let liq = format!("{NET}/liquidity-levels?fromDate={from}&toDate={today}");
    let foreign = app.get_ok(&format!("{NET}/wallets?sort=roi&limit=2")).await["nextCursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let long_query = format!("{NET}/markets?sort={}", "a".repeat(5000));
    let long_symbol = "A".repeat(10_000);

    let mut cases = vec![
        // 400: types, ranges, enums, dates, instants, cursors, unknown, repeated, length
        get(format!("{NET}/wallets?limit=abc"), 400).param("limit"),
        get(format!("{NET}/wallets?limit=-5"), 400).param("limit"),
        get(format!("{NET}/wallets?limit=0"), 400).param("limit"),
        get(format!("{NET}/wallets?limit=201"), 400)
            .param("limit")
            .detail("200"),
        get(format!("{NET}/markets/BTC/whale-positions?limit=1e2"), 400).param("limit"),
        get(format!("{liq}&limit=501"), 400)
            .param("limit")
            .detail("500"),
        get(
            format!("{NET}/markets/BTC/candles?interval=1h&limit=5001"),
            400,
        )
        .param("limit")
        .detail("5000"),
        get(format!("{NET}/wallets?size=huge"), 400)
            .param("size")
            .detail("shrimp, shark, whale"),
        get(format!("{NET}/wallets?direction=sideways"), 400)
            .param("direction")
            .detail("long, short"),
        get(format!("{NET}/wallets?sort=balance"), 400)
            .param("sort")
            .detail("accountTotalValue"),
        get(format!("{NET}/markets?sort=price"), 400)
            .param("sort")
            .detail("volume24h"),
        get(
            format!("{NET}/markets/BTC/whale-positions?direction=LONG"),
            400,
        )
        .param("direction"),
        get(format!("{NET}/markets/BTC/candles?interval=7m"), 400)
            .param("interval")
            .detail("1m, 3m"),
        get(format!("{NET}/markets/BTC/candles"), 400)
            .param("interval")
            .detail("required"),
        get(format!("{NET}/liquidity-levels?toDate={today}"), 400)
            .param("fromDate")
            .detail("required"),
        get(
            format!("{NET}/liquidity-levels?fromDate=2026-02-30&toDate={today}"),
            400,
        )
        .param("fromDate")
        .detail("YYYY-MM-DD"),
        get(
            format!("{NET}/liquidity-levels?fromDate=20261101&toDate={today}"),
            400,
        )
        .param("fromDate"),
        get(
            format!("{NET}/liquidity-levels?fromDate={today}&toDate={from}"),
            400,
        )
        .param("toDate")
        .detail("on or after"),
        get(
            format!("{NET}/liquidity-levels?fromDate=2026-01-01&toDate=2026-12-31"),
            400,
        )
        .param("toDate")
        .detail("89"),
        get(
            format!("{NET}/markets/BTC/candles?interval=1h&from=tomorrow"),
            400,
        )
        .param("from")
        .detail("RFC 3339"),
        get(format!("{NET}/markets/BTC/candles?interval=1h&to=-1"), 400).param("to"),
        get(
            format!("{NET}/markets/BTC/candles?interval=1h&cursor=zzz"),
            400,
        )
        .param("cursor"),
        get(format!("{NET}/wallets?cursor=bm9wZQ"), 400).param("cursor"),
        get(format!("{NET}/wallets?sort=netPnl&cursor={foreign}"), 400)
            .param("cursor")
            .detail("different query"),
        get(
            format!("{NET}/markets/BTC/whale-positions?cursor={foreign}"),
            400,
        )
        .param("cursor"),
        get(format!("{liq}&cursor={foreign}"), 400).param("cursor"),
        get(format!("{NET}/wallets?limt=5"), 400)
            .param("limt")
            .detail("size, direction, sort, order, limit, cursor"),
        get(format!("{NET}/markets/BTC?verbose=1"), 400)
            .param("verbose")
            .detail("no query parameters"),
        get(format!("{NET}/wallets?limit=5&limit=5"), 400)
            .param("limit")
            .detail("more than once"),
        get(long_query, 400).detail("4096"),
        get(format!("{NET}/wallets?sort=%00"), 400).param("sort"),
        get(format!("{NET}/wallets?size=%C3%28"), 400)
            .param("size")
            .detail("UTF-8"),
        // 401
        get("/v1/networks", 401)
            .header("X-API-Key", "")
            .detail("empty"),
        get("/v1/networks", 401)
            .header("X-API-Key", "sk_live_abc")
            .detail("mds_"),
        get("/v1/networks", 401)
            .header("X-API-Key", format!("mds_{}", "A".repeat(43)))
            .detail("not known"),
        get("/v1/networks", 401)
            .header("X-API-Key", "mds_too-short")
            .detail("malformed"),
        // 404
        get("/v1/networks/mainnet/markets", 404).detail("perpnet"),
        // A wrong network is reported before the query string's problems,
        // and a bad query before an unknown asset.
        get("/v1/networks/mainnet/wallets?limt=5", 404).detail("perpnet"),
        get("/v1/networks/mainnet/markets/BTC/candles", 404).detail("perpnet"),
        get(format!("{NET}/markets/DOGECOIN/candles?interval=9h"), 400).param("interval"),
        get(format!("{NET}/markets/DOGECOIN"), 404).detail("Unknown asset"),
        get(format!("{NET}/markets/BTC/whale-positions/extra"), 404),
        get("/v1/nope", 404),
        get("/nope", 404),
        // 406, 413, 431
        get(format!("{NET}/markets"), 406)
            .header("Accept", "text/html")
            .detail("application/json"),
        get(format!("{NET}/markets"), 413).header("Content-Type", "application/json"),
        get(format!("{NET}/markets"), 431)
            .header("X-Padding", "p".repeat(20_000))
            .detail("16384"),
        // hostile path segments and values: 4xx, never 5xx
        get(format!("{NET}/markets/BTC'%20OR%20'1'='1"), 404),
        get(format!("{NET}/markets/BTC;DROP%20TABLE%20wallets"), 404),
        get(format!("{NET}/markets/..%2F..%2Fetc%2Fpasswd"), 404),
        get(format!("{NET}/markets/%2e%2e/%2e%2e/wallets"), 404),
        get(format!("{NET}/markets/BTC%00"), 404),
        get(format!("{NET}/markets/%01%02%1b[31m"), 404),
        get(format!("{NET}/markets/%C3%28"), 404),
        get(format!("{NET}/markets/{long_symbol}"), 404),
        get(format!("{NET}/markets/%F0%9F%9A%80"), 404),
        get(format!("{NET}/markets/BTC%252Fcandles"), 404),
        get(format!("{NET}/markets/BTC%2Fcandles"), 404),
        get(format!("{liq}&asset=BTC'%20OR%201=1--"), 404),
        get(
            format!("{NET}/markets/BTC/candles?interval=1h&from=2026-11-01T00:00:00Z%00"),
            400,
        )
        .param("from"),
    ];
    // 413 needs a real body
    cases
        .iter_mut()
        .filter(|c| c.status == 413)
        .for_each(|c| c.body = Some(vec![b'x'; 100 * 1024]));
    // 405 on every known path, for every non-GET method
    for path in [
        "/v1/networks".to_owned(),
        format!("{NET}/markets"),
        format!("{NET}/markets/BTC"),
        format!("{NET}/wallets"),
        liq.clone(),
    ] {
        for m in [Method::POST, Method::PUT, Method::DELETE, Method::PATCH] {
            cases.push(get(path.clone(), 405).method(m).detail("GET"));
        }
    }

    for case in &cases {
        let (status, headers, body) = run(&app, case, true).await;
        assert_problem(case, status, &headers, &body);
        if status == 405 {
            assert_eq!(headers["allow"], "GET, HEAD");
        }
    }
    // the key in the query string or as a bearer token is refused with a pointer to X-API-Key
    for case in [
        get(format!("/v1/networks?api_key={}", app.token), 401).detail("X-API-Key"),
        get("/v1/networks", 401)
            .header("Authorization", format!("Bearer {}", app.token))
            .detail("X-API-Key"),
        get("/v1/networks", 401).detail("missing"),
    ] {
        let (status, headers, body) = run(&app, &case, false).await;
        assert_problem(&case, status, &headers, &body);
    }
    assert_eq!(
        data_digest(&app).await,
        before,
        "hostile input changed stored data"
    );
}

async fn only_public_routes_answer_without_a_key(backend: Backend) {
    let app = spawn_app(backend).await;
    let doc: Value = app
        .request("/api-docs/openapi.json", None)
        .await
        .json()
        .await
        .unwrap();
    let today = app.today();
    let wallet = app.get_ok("/v1/networks/perpnet/wallets?limit=1").await["items"][0]["address"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut scanned = 0;
    let urls = |servers: &Value| -> Vec<String> {
        servers
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["url"].as_str().unwrap().trim_end_matches('/').to_owned())
            .collect()
    };
    // Each operation on each of its servers (a path's own override the document's).
    let served = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            let servers = if item["servers"].is_array() {
                urls(&item["servers"])
            } else {
                urls(&doc["servers"])
            };
            servers
                .into_iter()
                .map(move |server| format!("{server}{path}"))
        });
    for path in served {
        let mut url = path
            .replace("{network}", "perpnet")
            .replace("{asset}", "BTC")
            .replace("{address}", &wallet);
        if url.ends_with("/liquidity-levels") {
            url.push_str(&format!("?fromDate={today}&toDate={today}"));
        }
        if url.ends_with("/candles") {
            url.push_str("?interval=1h&limit=3");
        }
        let public = url == "/healthz" || url == "/readyz";
        let without = app.request(&url, None).await.status().as_u16();
        assert_eq!(
            without,
            if public { 200 } else { 401 },
            "{url} without a key"
        );
        let with = app
            .request(&url, Some(("X-API-Key", &app.token)))
            .await
            .status()
            .as_u16();
        assert_eq!(with, 200, "{url} with a key");
        let head = app
            .client
            .head(app.url(&url))
            .header("X-API-Key", &app.token)
            .send()
            .await
            .unwrap();
        assert_eq!(head.status().as_u16(), 200, "HEAD {url}");
        scanned += 1;
    }
    assert_eq!(
        scanned, 30,
        "14 operations on two servers (prefixes), plus the health checks on one"
    );
    for public in [
        "/api-docs/openapi.json",
        "/swagger-ui/",
        "/swagger-ui/index.html",
    ] {
        assert_eq!(
            app.request(public, None).await.status().as_u16(),
            200,
            "{public}"
        );
    }
}

async fn revoked_and_expired_tokens_stop_working(backend: Backend) {
    let app = spawn_app(backend).await;
    let token = market_data_server::tokens::generate();
    let rec = app
        .store
        .create_token(
            "to-revoke",
            &market_data_server::tokens::hash(&token),
            &market_data_server::tokens::hint(&token),
            None,
        )
        .unwrap();
    let call = |t: String| {
        let app = &app;
        async move { app.request("/v1/networks", Some(("X-API-Key", &t))).await }
    };
    assert_eq!(call(token.clone()).await.status().as_u16(), 200);
    assert!(app.store.revoke_token(rec.id).unwrap());
    let revoked_at = Instant::now();
    loop {
        let res = call(token.clone()).await;
        if res.status().as_u16() == 401 {
            let p: Value = res.json().await.unwrap();
            assert!(p["detail"].as_str().unwrap().contains("revoked"), "{p}");
            break;
        }
        assert!(
            revoked_at.elapsed() < Duration::from_secs(5),
            "revocation not effective within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = revoked_at.elapsed();
    assert!(
        took <= market_data_server::state::TOKEN_CACHE_TTL + Duration::from_millis(500),
        "took {took:?}"
    );

    let expired = market_data_server::tokens::generate();
    app.store
        .create_token(
            "expired",
            &market_data_server::tokens::hash(&expired),
            &market_data_server::tokens::hint(&expired),
            Some(time::OffsetDateTime::now_utc() - time::Duration::hours(1)),
        )
        .unwrap();
    let res = call(expired).await;
    assert_eq!(res.status().as_u16(), 401);
    let p: Value = res.json().await.unwrap();
    assert!(p["detail"].as_str().unwrap().contains("expired"), "{p}");
}

async fn usage_is_counted_per_token_day_endpoint_and_status_class(backend: Backend) {
    let app = spawn_app(backend).await;
    for _ in 0..3 {
        app.get_ok("/v1/networks").await;
    }
    app.get_ok(&format!("{NET}/markets/ETH")).await;
    app.get_problem(&format!("{NET}/markets/NOPE"), 404).await;
    app.get_problem(&format!("{NET}/wallets?limit=0"), 400)
        .await;
    app.get_problem("/v1/networks/perpnet/nope", 404).await;
    let head = app
        .client
        .head(app.url("/api/developer/v1/networks/perpnet/markets/BTC/whale-positions"))
        .header("X-API-Key", &app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
    // nothing is written per request: the buffer is flushed in batches
    let id = app.store.list_tokens().unwrap()[0].id;
    assert!(app.store.usage(Some(id)).unwrap().is_empty());
    app.state.flush_usage().unwrap();
    let rows = app.store.usage(Some(id)).unwrap();
    let find = |endpoint: &str, class: &str| {
        rows.iter()
            .find(|r| r.endpoint == endpoint && r.status_class == class)
            .map(|r| r.count)
            .unwrap_or(0)
    };
    assert_eq!(find("GET /v1/networks", "2xx"), 3, "{rows:?}");
    assert_eq!(find("GET /v1/networks/{network}/markets/{asset}", "2xx"), 1);
    assert_eq!(find("GET /v1/networks/{network}/markets/{asset}", "4xx"), 1);
    assert_eq!(find("GET /v1/networks/{network}/wallets", "4xx"), 1);
    assert_eq!(find("GET /v1 (unknown path)", "4xx"), 1, "{rows:?}");
    assert_eq!(
        find(
            "HEAD /api/developer/v1/networks/{network}/markets/{asset}/whale-positions",
            "2xx"
        ),
        1,
        "{rows:?}"
    );
    assert_eq!(rows.len(), 6, "{rows:?}");
    assert!(rows
        .iter()
        .all(|r| r.day == time::OffsetDateTime::now_utc().date()));
    // counts add up across flushes
    app.get_ok("/v1/networks").await;
    app.state.flush_usage().unwrap();
    let rows = app.store.usage(Some(id)).unwrap();
    assert_eq!(
        rows.iter()
            .find(|r| r.endpoint == "GET /v1/networks" && r.status_class == "2xx")
            .unwrap()
            .count,
        4
    );
    assert!(app.store.list_tokens().unwrap()[0].last_used_at.is_some());
}

async fn a_saturated_database_gives_fast_503s_and_memory_served_data_keeps_flowing(
    backend: Backend,
) {
    let app = spawn_app(backend).await;
    app.get_ok("/v1/networks").await; // caches the token
    let held: Vec<_> = (0..market_store::PoolOptions::default().max_size)
        .map(|_| app.store.raw_connection().unwrap())
        .collect();
    // markets and positions come from the in-memory snapshot (the token is still cached)
    app.get_ok(&format!("{NET}/markets/BTC/whale-positions"))
        .await;
    let today = app.today();
    let from = today - time::Duration::days(3);
    let started = Instant::now();
    let res = app
        .request(
            &format!("{NET}/liquidity-levels?fromDate={from}&toDate={today}&asset=BTC"),
            Some(("X-API-Key", &app.token)),
        )
        .await;
    let took = started.elapsed();
    assert_eq!(res.status().as_u16(), 503);
    assert!(took < Duration::from_millis(2_800), "took {took:?}");
    assert!(res.headers().contains_key("retry-after"));
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    // The database is taken to be down: the next page is refused at once,
    // and readiness says so without waiting for a connection.
    let started = Instant::now();
    let again = app
        .request(
            &format!("{NET}/liquidity-levels?fromDate={from}&toDate={today}&asset=BTC&limit=7"),
            Some(("X-API-Key", &app.token)),
        )
        .await;
    assert_eq!(again.status().as_u16(), 503);
    assert_eq!(again.headers()["retry-after"], "1");
    assert_eq!(app.readiness().await, "degraded");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    app.get_ok(&format!("{NET}/markets/BTC/whale-positions"))
        .await;
    drop(held);
    // The probe finds the connections free again.
    app.wait_ready(Duration::from_secs(2)).await;
    app.get_ok(&format!(
        "{NET}/liquidity-levels?fromDate={from}&toDate={today}&asset=BTC"
    ))
    .await;
}

crate::on_both_backends!(
    every_rejection_is_a_problem_that_names_the_fix,
    only_public_routes_answer_without_a_key,
    revoked_and_expired_tokens_stop_working,
    usage_is_counted_per_token_day_endpoint_and_status_class,
    a_saturated_database_gives_fast_503s_and_memory_served_data_keeps_flowing,
);
