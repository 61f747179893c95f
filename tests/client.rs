//! The typed client (`crates/market-client`) against the real server: every
//! operation, its streams against raw page walks, its problems, and its
//! retries.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use market_client::market_model::params::{
    CandlesLimit, CandlesQuery, Day, EventsLimit, EventsQuery, HistoryLimit, HistoryQuery, Instant,
    LiquidityLimit, LiquidityQuery, MarketsQuery, PositionsLimit, PositionsQuery, WalletsLimit,
    WalletsQuery,
};
use market_client::market_model::{
    Direction, HistoryInterval, Interval, MarketSort, SizeClass, NETWORK_ID,
};
use market_client::{Client, Error, ProblemKind, RetryPolicy};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{self, spawn_app, Backend, TestApp};
use crate::{walk, NET};

fn client(app: &TestApp) -> Client {
    Client::builder(&app.addr)
        .api_key(&app.token)
        .build()
        .unwrap()
}

/// The same server's raw JSON, decoded into the model type.
async fn raw<T: DeserializeOwned>(app: &TestApp, path: &str) -> T {
    serde_json::from_value(app.get_ok(path).await).unwrap()
}

/// Every item of a raw page walk, decoded into the model type.
async fn raw_walk<T: DeserializeOwned>(app: &TestApp, path: &str, key: &str) -> Vec<T> {
    let (items, pages) = walk(app, path, key).await;
    assert!(pages > 1, "{path} is walked over several pages");
    items
        .into_iter()
        .map(|v: Value| serde_json::from_value(v).unwrap())
        .collect()
}

async fn every_operation_answers_what_the_server_serves(backend: Backend) {
    let app = spawn_app(backend).await;
    let c = client(&app);
    let net = NETWORK_ID;

    c.health().await.unwrap();
    c.ready().await.unwrap();
    assert_eq!(c.networks().await.unwrap(), raw(&app, "/v1/networks").await);
    assert_eq!(
        c.coverage(net).await.unwrap(),
        raw(&app, &format!("{NET}/coverage")).await
    );
    let markets = c
        .markets(
            net,
            &MarketsQuery {
                sort: Some(MarketSort::OpenInterest),
                order: Some("asc".into()),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        markets,
        raw(&app, &format!("{NET}/markets?sort=openInterest&order=asc")).await
    );
    let btc = c.market(net, "BTC").await.unwrap();
    assert_eq!(btc, raw(&app, &format!("{NET}/markets/BTC")).await);
    assert_eq!(
        c.market_cohorts(net, "BTC").await.unwrap(),
        raw(&app, &format!("{NET}/markets/BTC/cohorts")).await
    );

    // Paged lists: one page through the client equals the raw page, and the
    // stream equals a raw walk of every page.
    let positions = PositionsQuery {
        direction: Some(Direction::Long),
        limit: PositionsLimit::new(7).unwrap(),
        ..Default::default()
    };
    assert_eq!(
        c.whale_positions(net, "BTC", &positions).await.unwrap(),
        raw(
            &app,
            &format!("{NET}/markets/BTC/whale-positions?direction=long&limit=7")
        )
        .await
    );
    let streamed: Vec<_> = c
        .whale_positions_stream(net, "BTC", positions)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        streamed,
        raw_walk::<market_client::market_model::MarketPosition>(
            &app,
            &format!("{NET}/markets/BTC/whale-positions?direction=long&limit=7"),
            "items"
        )
        .await
    );
    // Cross-endpoint: the stream holds every long position the market counts.
    assert_eq!(streamed.len() as u64, btc.long_count);

    let wallets = WalletsQuery {
        size: Some(SizeClass::Whale),
        limit: WalletsLimit::new(11).unwrap(),
        ..Default::default()
    };
    let whales: Vec<_> = c
        .wallets_stream(net, wallets.clone())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        whales,
        raw_walk::<market_client::market_model::Wallet>(
            &app,
            &format!("{NET}/wallets?size=whale&limit=11"),
            "items"
        )
        .await
    );
    assert_eq!(
        c.wallets(net, &wallets).await.unwrap(),
        raw(&app, &format!("{NET}/wallets?size=whale&limit=11")).await
    );
    let all_wallets = c
        .wallets_stream(
            net,
            WalletsQuery {
                limit: WalletsLimit::new(200).unwrap(),
                ..Default::default()
            },
        )
        .try_fold(0usize, |n, _| async move { Ok(n + 1) })
        .await
        .unwrap();
    assert_eq!(
        all_wallets, app.wallets,
        "every seeded wallet is streamed once"
    );

    let address = whales[0].address.clone();
    assert_eq!(
        c.wallet(net, &address).await.unwrap(),
        raw(&app, &format!("{NET}/wallets/{address}")).await
    );
    // A day of hourly buckets, 5 a page.
    let to_ms = (support::seeded_at().unix_timestamp_nanos() / 1_000_000) as i64;
    let from_ms = to_ms - 86_400_000;
    let history = HistoryQuery {
        interval: Some(HistoryInterval::H1),
        from: Some(Instant(from_ms)),
        to: Some(Instant(to_ms)),
        limit: HistoryLimit::new(5).unwrap(),
        cursor: None,
    };
    let window = format!("interval=1h&from={from_ms}&to={to_ms}&limit=5");
    // A wallet is observed when it changes, and a whale at least daily: a
    // month of its hourly buckets, 2 a page.
    let wallet_history = HistoryQuery {
        from: Some(Instant(to_ms - 30 * 86_400_000)),
        limit: HistoryLimit::new(2).unwrap(),
        ..history.clone()
    };
    let wallet_window = format!(
        "interval=1h&from={}&to={to_ms}&limit=2",
        to_ms - 30 * 86_400_000
    );
    assert_eq!(
        c.wallet_history(net, &address, &wallet_history)
            .await
            .unwrap(),
        raw(
            &app,
            &format!("{NET}/wallets/{address}/history?{wallet_window}")
        )
        .await
    );
    let points: Vec<_> = c
        .wallet_history_stream(net, &address, wallet_history)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        points,
        raw_walk::<market_client::market_model::WalletHistoryPoint>(
            &app,
            &format!("{NET}/wallets/{address}/history?{wallet_window}"),
            "items"
        )
        .await
    );
    assert_eq!(
        c.market_history(net, "BTC", &history).await.unwrap(),
        raw(&app, &format!("{NET}/markets/BTC/history?{window}")).await
    );
    let market_points: Vec<_> = c
        .market_history_stream(net, "BTC", history)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        market_points,
        raw_walk::<market_client::market_model::MarketHistoryPoint>(
            &app,
            &format!("{NET}/markets/BTC/history?{window}"),
            "items"
        )
        .await
    );

    let today = app.today();
    let from = today - time::Duration::days(2);
    let liquidity = LiquidityQuery {
        from_date: Day(from),
        to_date: Day(today),
        asset: None,
        limit: LiquidityLimit::new(40).unwrap(),
        cursor: None,
    };
    let days: Vec<_> = c
        .liquidity_levels_stream(net, liquidity.clone())
        .try_collect()
        .await
        .unwrap();
    let liquidity_path = format!("{NET}/liquidity-levels?fromDate={from}&toDate={today}&limit=40");
    assert_eq!(
        days,
        raw_walk::<market_client::market_model::LiquidityDay>(&app, &liquidity_path, "items").await
    );
    assert_eq!(
        c.liquidity_levels(net, &liquidity).await.unwrap(),
        raw(&app, &liquidity_path).await
    );

    let candles = CandlesQuery {
        interval: Interval::H1,
        from: None,
        to: None,
        limit: CandlesLimit::new(50).unwrap(),
        cursor: None,
    };
    let series = c.candles(net, "BTC", &candles).await.unwrap();
    assert_eq!(series.candles.len(), 50);
    // The window is fixed by `from` so that the stream and the walk agree.
    let from_ms = series.candles[0].time;
    let windowed = CandlesQuery {
        from: Some(Instant(from_ms)),
        to: Some(Instant(series.candles.last().unwrap().time)),
        limit: CandlesLimit::new(7).unwrap(),
        ..candles
    };
    let streamed_candles: Vec<_> = c
        .candles_stream(net, "BTC", windowed)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        streamed_candles, series.candles,
        "7 candles a page stream the same 50 candles as one page"
    );

    let events = EventsQuery {
        asset: Some("BTC".into()),
        limit: EventsLimit::new(25).unwrap(),
        ..Default::default()
    };
    assert_eq!(
        c.position_events(net, &events).await.unwrap(),
        raw(&app, &format!("{NET}/position-events?asset=BTC&limit=25")).await
    );
    let streamed_events: Vec<_> = c
        .position_events_stream(net, events)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        streamed_events,
        raw_walk::<market_client::market_model::PositionEvent>(
            &app,
            &format!("{NET}/position-events?asset=BTC&limit=25"),
            "items"
        )
        .await
    );

    // A stream fetches pages only as they are consumed.
    let first_two: Vec<_> = c
        .wallets_stream(
            net,
            WalletsQuery {
                limit: WalletsLimit::new(1).unwrap(),
                ..Default::default()
            },
        )
        .take(2)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(first_two.len(), 2);
}

async fn problems_are_typed_errors(backend: Backend) {
    let app = spawn_app(backend).await;
    let c = client(&app);
    let Err(Error::Problem { problem: p, .. }) = c.market(NETWORK_ID, "NOPE").await else {
        panic!("an unknown asset is a problem")
    };
    assert_eq!(p.kind(), Some(ProblemKind::NotFound));
    assert_eq!(p.status, 404);
    assert!(p.detail.contains("NOPE"), "{}", p.detail);
    assert!(p.request_id.is_some());
    assert_eq!(
        p.instance.as_deref(),
        Some(format!("{NET}/markets/NOPE").as_str())
    );

    // A window the server refuses: the problem names the parameter.
    let today = app.today();
    let backwards = LiquidityQuery {
        from_date: Day(today),
        to_date: Day(today - time::Duration::days(1)),
        asset: None,
        limit: LiquidityLimit::default(),
        cursor: None,
    };
    let err = c
        .liquidity_levels(NETWORK_ID, &backwards)
        .await
        .unwrap_err();
    let p = err.problem().expect("a problem");
    assert_eq!(p.kind(), Some(ProblemKind::InvalidParameter));
    assert_eq!(err.status(), Some(400));
    assert!(p.invalid_params.iter().any(|i| i.name == "toDate"), "{p:?}");

    // An odd asset symbol is one path segment, not a path.
    let err = c.market(NETWORK_ID, "a/b?c").await.unwrap_err();
    assert_eq!(
        err.problem().and_then(|p| p.kind()),
        Some(ProblemKind::NotFound)
    );
    assert!(err.to_string().contains("a/b?c"), "{err}");

    let wrong_key = Client::builder(&app.addr)
        .api_key("mdk_not-a-key")
        .build()
        .unwrap();
    let err = wrong_key.networks().await.unwrap_err();
    assert_eq!(
        err.problem().and_then(|p| p.kind()),
        Some(ProblemKind::Unauthorized)
    );
    let no_key = Client::builder(&app.addr).build().unwrap();
    assert_eq!(no_key.networks().await.unwrap_err().status(), Some(401));
    no_key.health().await.unwrap();
}

/// A server of the test's own that answers `busy` times 503 or 429 with
/// `Retry-After: 1`, then the real server's answer: the client waits as
/// told and gets the answer.
async fn retries_honour_retry_after(backend: Backend) {
    let app = spawn_app(backend).await;
    for status in ["429 Too Many Requests", "503 Service Unavailable"] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(AtomicUsize::new(0));
        let upstream = format!("{}/v1/networks", app.addr);
        let (token, counter) = (app.token.clone(), seen.clone());
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let _ = socket.read(&mut buf).await.unwrap();
                let n = counter.fetch_add(1, Ordering::SeqCst);
                let response = if n < 2 {
                    let body = format!(
                        r#"{{"type":"urn:market-data:problem:{}","title":"busy","status":{},"detail":"retry later"}}"#,
                        if status.starts_with("429") {
                            "rate-limited"
                        } else {
                            "unavailable"
                        },
                        &status[..3]
                    );
                    format!(
                        "HTTP/1.1 {status}\r\nContent-Type: application/problem+json\r\nRetry-After: 1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                } else {
                    let body = http
                        .get(&upstream)
                        .header("X-API-Key", &token)
                        .send()
                        .await
                        .unwrap()
                        .text()
                        .await
                        .unwrap();
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                };
                socket.write_all(response.as_bytes()).await.unwrap();
            }
        });

        let patient = Client::builder(&addr).build().unwrap();
        let started = std::time::Instant::now();
        let networks = patient.networks().await.unwrap();
        let waited = started.elapsed();
        assert_eq!(networks, raw(&app, "/v1/networks").await, "{status}");
        assert_eq!(seen.load(Ordering::SeqCst), 3, "two refusals, one answer");
        assert!(
            waited >= Duration::from_secs(2) && waited < Duration::from_secs(5),
            "{status}: waited {waited:?}, Retry-After asked for 1 s twice"
        );

        // Without retries the first refusal is the answer, with its Retry-After.
        seen.store(0, Ordering::SeqCst);
        let hasty = Client::builder(&addr)
            .retry(RetryPolicy::none())
            .build()
            .unwrap();
        let err = hasty.networks().await.unwrap_err();
        let p = err.problem().expect("a problem");
        assert_eq!(p.status.to_string(), &status[..3]);
        assert_eq!(err.retry_after(), Some(Duration::from_secs(1)));
    }

    // A connection refused is retried with a backoff, then reported.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let c = Client::builder(&addr)
        .retry(RetryPolicy {
            max_retries: 2,
            backoff: Duration::from_millis(100),
            max_wait: Duration::from_secs(1),
        })
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    assert!(matches!(c.networks().await, Err(Error::Transport(_))));
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "100 + 200 ms of backoff"
    );
}

crate::on_both_backends!(
    every_operation_answers_what_the_server_serves,
    problems_are_typed_errors,
    retries_honour_retry_after,
);
