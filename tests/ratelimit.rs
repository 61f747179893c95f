//! Request limits per token and the failed-authentication throttle, over
//! real HTTP: the headers, the 429 problem, per-token quotas and their
//! changes, usage counts, and the client address behind a trusted proxy.

use std::num::NonZeroU32;
use std::time::Duration;

use market_client::{Client, ProblemKind, RetryPolicy};
use market_data_server::app;
use market_data_server::ratelimit::LimitOptions;
use market_data_server::shared_quota::{RedisTarget, SharedQuota};
use market_data_server::state::{AppState, StateOptions};
use market_data_server::tokens;
use market_store::PoolOptions;
use serde_json::Value;

use crate::support::{seeded_database, start_app_limited, Backend, TestApp};
use crate::NET;

async fn app_with(backend: Backend, limits: LimitOptions) -> TestApp {
    start_app_limited(
        backend,
        seeded_database(backend),
        PoolOptions::default(),
        limits,
    )
    .await
}

fn header(res: &reqwest::Response, name: &str) -> String {
    res.headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
        .to_owned()
}

async fn get(app: &TestApp, path: &str, key: &str) -> reqwest::Response {
    app.request(path, Some(("X-API-Key", key))).await
}

async fn a_key_over_its_quota_gets_429_and_every_answer_is_counted(backend: Backend) {
    let app = app_with(
        backend,
        LimitOptions {
            default_per_minute: NonZeroU32::new(5),
            ..LimitOptions::default()
        },
    )
    .await;
    let btc = format!("{NET}/markets/BTC");
    for remaining in (0..5).rev() {
        // One of them a 404: the headers survive the problem's rendering.
        let path = if remaining == 2 {
            format!("{NET}/markets/NOPE")
        } else {
            btc.clone()
        };
        let res = get(&app, &path, &app.token).await;
        assert_eq!(res.status(), if remaining == 2 { 404 } else { 200 });
        assert_eq!(header(&res, "ratelimit-policy"), "\"token\";q=5;w=60");
        let state = header(&res, "ratelimit");
        assert!(
            state.starts_with(&format!("\"token\";r={remaining};t=")),
            "{state}"
        );
    }
    let res = get(&app, &btc, &app.token).await;
    assert_eq!(res.status(), 429);
    let retry: u64 = header(&res, "retry-after").parse().unwrap();
    assert!(
        (1..=12).contains(&retry),
        "one request back every 12 s: {retry}"
    );
    assert_eq!(
        header(&res, "ratelimit"),
        format!("\"token\";r=0;t={retry}")
    );
    assert_eq!(header(&res, "content-type"), "application/problem+json");
    let p: Value = res.json().await.unwrap();
    assert_eq!(p["type"], "urn:market-data:problem:rate-limited");
    assert_eq!(p["status"], 429);
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("5 requests a minute"),
        "{p}"
    );
    // Public endpoints are not limited.
    assert_eq!(app.request("/healthz", None).await.status(), 200);

    // The typed client sees a rate-limited problem with its wait.
    let client = Client::builder(&app.addr)
        .api_key(&app.token)
        .retry(RetryPolicy::none())
        .build()
        .unwrap();
    let err = client.market("perpnet", "BTC").await.unwrap_err();
    let problem = err.problem().expect("a problem");
    assert_eq!(problem.kind(), Some(ProblemKind::RateLimited));
    assert!(err
        .retry_after()
        .is_some_and(|d| d >= Duration::from_secs(1)));

    // Usage counts every answer: 4 × 2xx, 1 × 4xx (404), 2 × 4xx (429).
    app.state.flush_usage().unwrap();
    let rows = app.store.usage(None).unwrap();
    let count = |class: &str| -> i64 {
        rows.iter()
            .filter(|r| r.status_class == class)
            .map(|r| r.count)
            .sum()
    };
    assert_eq!((count("2xx"), count("4xx")), (4, 3), "{rows:?}");
}

async fn a_key_of_its_own_quota_and_its_change(backend: Backend) {
    let app = app_with(
        backend,
        LimitOptions {
            default_per_minute: NonZeroU32::new(1000),
            ..LimitOptions::default()
        },
    )
    .await;
    let key = tokens::generate();
    let record = app
        .store
        .create_token_limited(
            "small",
            &tokens::hash(&key),
            &tokens::hint(&key),
            None,
            Some(2),
        )
        .unwrap();
    assert_eq!(record.rate_limit_per_minute, Some(2));
    let path = format!("{NET}/markets/ETH");
    for _ in 0..2 {
        let res = get(&app, &path, &key).await;
        assert_eq!(res.status(), 200);
        assert_eq!(header(&res, "ratelimit-policy"), "\"token\";q=2;w=60");
    }
    assert_eq!(get(&app, &path, &key).await.status(), 429);
    // The default key is not affected.
    let res = get(&app, &path, &app.token).await;
    assert_eq!(res.status(), 200);
    assert_eq!(header(&res, "ratelimit-policy"), "\"token\";q=1000;w=60");

    // A raised limit applies once the token cache lets go (2 s), with a fresh quota.
    assert!(app.store.set_token_rate_limit(record.id, Some(50)).unwrap());
    assert!(!app.store.set_token_rate_limit(99_999, Some(50)).unwrap());
    tokio::time::sleep(market_data_server::state::TOKEN_CACHE_TTL + Duration::from_millis(200))
        .await;
    let res = get(&app, &path, &key).await;
    assert_eq!(res.status(), 200);
    assert_eq!(header(&res, "ratelimit-policy"), "\"token\";q=50;w=60");
    assert!(header(&res, "ratelimit").starts_with("\"token\";r=49;"));
    // Back to the default.
    assert!(app.store.set_token_rate_limit(record.id, None).unwrap());
    assert_eq!(
        app.store
            .find_token(&tokens::hash(&key))
            .unwrap()
            .unwrap()
            .rate_limit_per_minute,
        None
    );
}

/// A request with `key`, forwarded by the proxy at 127.0.0.1 for `ip`.
async fn from(app: &TestApp, path: &str, ip: &str, key: String) -> reqwest::Response {
    app.client
        .get(app.url(path))
        .header("X-API-Key", key)
        .header("X-Forwarded-For", ip)
        .send()
        .await
        .unwrap()
}

async fn failed_keys_are_throttled_per_address(backend: Backend) {
    let app = app_with(
        backend,
        LimitOptions {
            default_per_minute: None,
            auth_failures_per_minute: NonZeroU32::new(3),
            trusted_proxies: vec!["127.0.0.1".parse().unwrap()],
            shared: None,
        },
    )
    .await;
    let path = format!("{NET}/markets/BTC");
    // The valid key is verified (and cached) before the flood.
    assert_eq!(get(&app, &path, &app.token).await.status(), 200);
    for remaining in (0..3).rev() {
        let res = from(&app, &path, "198.51.100.7", tokens::generate()).await;
        assert_eq!(res.status(), 401);
        assert_eq!(
            header(&res, "ratelimit-policy"),
            "\"auth-failures\";q=3;w=60"
        );
        assert!(header(&res, "ratelimit").starts_with(&format!("\"auth-failures\";r={remaining};")));
    }
    for _ in 0..3 {
        let res = from(&app, &path, "198.51.100.7", tokens::generate()).await;
        assert_eq!(res.status(), 429);
        let retry: u64 = header(&res, "retry-after").parse().unwrap();
        assert!((1..=20).contains(&retry), "{retry}");
        let p: Value = res.json().await.unwrap();
        assert_eq!(p["type"], "urn:market-data:problem:rate-limited");
    }
    // The verified key keeps working from that address, and another address
    // behind the same proxy is not throttled.
    let res = from(&app, &path, "198.51.100.7", app.token.clone()).await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        from(&app, &path, "198.51.100.8", tokens::generate())
            .await
            .status(),
        401
    );
    // A client cannot pick its address: what it writes on the left of the
    // proxy's entry is ignored.
    let spoof = app
        .client
        .get(app.url(&path))
        .header("X-API-Key", tokens::generate())
        .header("X-Forwarded-For", "203.0.113.1, 198.51.100.7")
        .send()
        .await
        .unwrap();
    assert_eq!(spoof.status(), 429);
    // A missing key is not a failed key: a plain 401, never throttled.
    for _ in 0..5 {
        assert_eq!(app.request(&path, None).await.status(), 401);
    }
}

/// Without a trusted proxy, `X-Forwarded-For` is ignored: the peer address counts.
async fn forwarded_for_is_ignored_from_untrusted_peers(backend: Backend) {
    let app = app_with(
        backend,
        LimitOptions {
            auth_failures_per_minute: NonZeroU32::new(2),
            ..LimitOptions::default()
        },
    )
    .await;
    let path = format!("{NET}/markets/BTC");
    let mut statuses = Vec::new();
    for i in 0..4 {
        let res = app
            .client
            .get(app.url(&path))
            .header("X-API-Key", tokens::generate())
            .header("X-Forwarded-For", format!("198.51.100.{i}"))
            .send()
            .await
            .unwrap();
        statuses.push(res.status().as_u16());
    }
    assert_eq!(statuses, [401, 401, 429, 429]);
}

crate::on_both_backends!(
    a_key_over_its_quota_gets_429_and_every_answer_is_counted,
    a_key_of_its_own_quota_and_its_change,
    failed_keys_are_throttled_per_address,
    forwarded_for_is_ignored_from_untrusted_peers,
);

/// The Redis of the shared-quota tests (`TEST_REDIS_URL`), if set.
fn test_redis_url() -> Option<String> {
    std::env::var("TEST_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty())
}

/// A shared quota under a prefix of its own, so tests and runs do not meet.
fn shared_quota(url: &str) -> (std::sync::Arc<SharedQuota>, String) {
    let prefix = format!("market-data-test:{}:", tokens::generate());
    let target = RedisTarget::new(url, &prefix).unwrap();
    (
        std::sync::Arc::new(SharedQuota::start(&target).unwrap()),
        prefix,
    )
}

/// A second server on `app`'s database: a replica.
async fn replica(app: &TestApp, limits: LimitOptions) -> String {
    let options = StateOptions {
        limits,
        ..Default::default()
    };
    let state = AppState::with_options(app.store.clone(), options).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(app::serve(listener, state, app::ServeOptions::default()).unwrap());
    addr
}

/// Two replicas sharing one Redis enforce one quota between them: the
/// remaining count goes down across both, and both refuse once it is spent.
#[tokio::test]
async fn replicas_share_a_quota_through_redis() {
    let Some(url) = test_redis_url() else {
        eprintln!("TEST_REDIS_URL is not set: the shared-quota test is skipped");
        return;
    };
    let (quota, prefix) = shared_quota(&url);
    let limits = LimitOptions {
        default_per_minute: NonZeroU32::new(6),
        shared: Some(quota.clone()),
        ..LimitOptions::default()
    };
    let app = app_with(Backend::Sqlite, limits.clone()).await;
    let other = replica(&app, limits).await;
    let path = format!("{NET}/markets/BTC");
    let servers = [app.addr.clone(), other];
    for remaining in (0..6).rev() {
        let server = &servers[remaining % 2];
        let res = app
            .client
            .get(format!("{server}{path}"))
            .header("X-API-Key", &app.token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{server}");
        assert_eq!(header(&res, "ratelimit-policy"), "\"token\";q=6;w=60");
        assert!(
            header(&res, "ratelimit").starts_with(&format!("\"token\";r={remaining};")),
            "{server}: {}",
            header(&res, "ratelimit")
        );
    }
    for server in &servers {
        let res = app
            .client
            .get(format!("{server}{path}"))
            .header("X-API-Key", &app.token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 429, "{server}");
        let retry: u64 = header(&res, "retry-after").parse().unwrap();
        assert!(
            (1..=10).contains(&retry),
            "one request back every 10 s: {retry}"
        );
    }
    assert_eq!(quota.errors(), 0);
    // The token's key holds its arrival time and expires with its quota.
    let mut redis = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let key = format!("{prefix}1");
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&key)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!(
        (50_000..=60_000).contains(&ttl),
        "{key} expires with the quota: {ttl} ms"
    );
    let _: () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut redis)
        .await
        .unwrap();
}

/// With Redis unreachable, requests are neither refused nor slowed: each
/// server limits on its own, and the failures are counted.
#[tokio::test]
async fn without_redis_each_server_limits_on_its_own() {
    // Nothing listens on port 1.
    let (quota, _) = shared_quota("redis://127.0.0.1:1");
    let app = app_with(
        Backend::Sqlite,
        LimitOptions {
            default_per_minute: NonZeroU32::new(3),
            shared: Some(quota.clone()),
            ..LimitOptions::default()
        },
    )
    .await;
    let path = format!("{NET}/markets/BTC");
    let started = std::time::Instant::now();
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(get(&app, &path, &app.token).await.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "a refused connection is not waited for: {:?}",
        started.elapsed()
    );
    assert!(quota.is_down());
    assert!(quota.errors() >= 1);
}
