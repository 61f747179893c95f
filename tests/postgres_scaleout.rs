//! PostgreSQL: same answers as SQLite byte for byte, replicas that follow new
//! data versions, and recovery when the server drops connections.
//! Each test is skipped (with a message) when `TEST_DATABASE_URL` is not set.

use std::time::{Duration, Instant};

use diesel::connection::SimpleConnection;
use serde_json::Value;

use crate::support::{
    enc, pg_admin_connection, pg_admin_url, seeded_at, spawn_app, start_app, Backend, TestApp,
    TestDatabase,
};

const NET: &str = "/v1/networks/perpnet";

fn skip() -> bool {
    if pg_admin_url().is_none() {
        eprintln!("TEST_DATABASE_URL is not set: PostgreSQL test skipped");
        return true;
    }
    false
}

/// Requests `url` on both apps and asserts identical status and bytes; returns the body.
async fn same(a: &TestApp, b: &TestApp, url: &str) -> Value {
    let (sa, ba) = a.get_raw(url).await;
    let (sb, bb) = b.get_raw(url).await;
    assert_eq!(sa, 200, "{url}: {ba}");
    if (sa, &ba) != (sb, &bb) {
        let at = ba
            .bytes()
            .zip(bb.bytes())
            .position(|(x, y)| x != y)
            .unwrap_or(ba.len().min(bb.len()));
        let from = at.saturating_sub(120);
        panic!(
            "{url} differs between {:?} ({sa}) and {:?} ({sb}) at byte {at}:\n  {}\n  {}",
            a.backend,
            b.backend,
            &ba[from..(at + 80).min(ba.len())],
            &bb[from..(at + 80).min(bb.len())]
        );
    }
    serde_json::from_str(&ba).unwrap()
}

/// Walks every page of `path` (cursors from `a`, replayed on `b`), comparing each page.
async fn same_pages(a: &TestApp, b: &TestApp, path: &str) -> usize {
    let mut url = path.to_owned();
    let mut pages = 0;
    loop {
        let body = same(a, b, &url).await;
        pages += 1;
        match body["nextCursor"].as_str() {
            Some(c) => {
                let sep = if path.contains('?') { '&' } else { '?' };
                url = format!("{path}{sep}cursor={}", enc(c));
            }
            None => return pages,
        }
    }
}

#[tokio::test]
async fn sqlite_and_postgres_answer_byte_for_byte() {
    if skip() {
        return;
    }
    let (a, b) = (
        spawn_app(Backend::Sqlite).await,
        spawn_app(Backend::Postgres).await,
    );
    let mut pages = 0;
    pages += same_pages(&a, &b, "/v1/networks").await;
    for sort in [
        "volume24h",
        "openInterest",
        "change24hPct",
        "totalLiquidationValue",
    ] {
        for order in ["asc", "desc"] {
            pages += same_pages(&a, &b, &format!("{NET}/markets?sort={sort}&order={order}")).await;
        }
    }
    let markets = same(&a, &b, &format!("{NET}/markets")).await;
    let symbols: Vec<String> = markets["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["symbol"].as_str().unwrap().to_owned())
        .collect();
    let to = (seeded_at().unix_timestamp()) * 1000;
    for (i, sym) in symbols.iter().enumerate() {
        let s = enc(sym);
        pages += same_pages(&a, &b, &format!("{NET}/markets/{s}")).await;
        pages += same_pages(
            &a,
            &b,
            &format!("{NET}/markets/{s}/whale-positions?limit=3"),
        )
        .await;
        pages += same_pages(
            &a,
            &b,
            &format!("{NET}/markets/{s}/whale-positions?direction=short&limit=200"),
        )
        .await;
        if i % 10 == 0 {
            for interval in ["1m", "15m", "1h", "4h", "1d", "1w", "1M"] {
                pages += same_pages(
                    &a,
                    &b,
                    &format!("{NET}/markets/{s}/candles?interval={interval}&to={to}&limit=1000"),
                )
                .await;
            }
        }
    }
    for sort in [
        "accountTotalValue",
        "totalPositionValue",
        "netPnl",
        "roi",
        "winRate",
    ] {
        for order in ["asc", "desc"] {
            pages += same_pages(
                &a,
                &b,
                &format!("{NET}/wallets?sort={sort}&order={order}&limit=200"),
            )
            .await;
        }
        pages += same_pages(
            &a,
            &b,
            &format!("{NET}/wallets?sort={sort}&size=whale&direction=long&limit=7"),
        )
        .await;
    }
    let today = a.today();
    let from = today - time::Duration::days(89);
    pages += same_pages(
        &a,
        &b,
        &format!("{NET}/liquidity-levels?fromDate={from}&toDate={today}&limit=500"),
    )
    .await;
    pages += same_pages(
        &a,
        &b,
        &format!("{NET}/liquidity-levels?fromDate={from}&toDate={today}&asset=BTC&limit=7"),
    )
    .await;
    assert!(pages > 500, "compared {pages} pages");
}

#[tokio::test]
async fn two_replicas_serve_the_same_data_and_follow_a_reseed() {
    if skip() {
        return;
    }
    let a = spawn_app(Backend::Postgres).await;
    let b = start_app(
        Backend::Postgres,
        TestDatabase::Shared(a.db.url().to_owned()),
        market_store::PoolOptions::default(),
    )
    .await;
    a.state.spawn_reloader();
    b.state.spawn_reloader();
    let first = same(&a, &b, &format!("{NET}/wallets?limit=5")).await;
    same(
        &a,
        &b,
        &format!("{NET}/markets/ETH/whale-positions?limit=5"),
    )
    .await;
    // a cursor made on one replica continues on the other
    let c = first["nextCursor"].as_str().unwrap();
    let on_a = a
        .get_raw(&format!("{NET}/wallets?limit=5&cursor={c}"))
        .await;
    let on_b = b
        .get_raw(&format!("{NET}/wallets?limit=5&cursor={c}"))
        .await;
    assert_eq!(on_a, on_b);

    // New data is written (a re-seed with another seed) by a third process-like writer.
    let writer =
        market_store::Store::open(a.db.url(), market_store::PoolOptions::default()).unwrap();
    market_data_server::seed::seed_demo_with_history(
        &writer,
        300,
        99,
        seeded_at(),
        crate::support::HISTORY_DAYS,
    )
    .unwrap();
    let written = Instant::now();
    let expected_total = 300;
    for app in [&a, &b] {
        loop {
            let body = app.get_ok(&format!("{NET}/wallets?limit=5")).await;
            if body["total"] == expected_total {
                break;
            }
            assert!(
                written.elapsed() < Duration::from_secs(5),
                "{:?} replica did not pick up the new data within 5 s",
                app.addr
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let took = written.elapsed();
    eprintln!("both replicas serve the new data version {took:?} after the write");
    same(&a, &b, &format!("{NET}/wallets?limit=5")).await;
    same(&a, &b, &format!("{NET}/markets")).await;
    let va = a
        .request("/v1/networks", Some(("X-API-Key", &a.token)))
        .await
        .headers()["x-data-version"]
        .clone();
    let vb = b
        .request("/v1/networks", Some(("X-API-Key", &b.token)))
        .await
        .headers()["x-data-version"]
        .clone();
    assert_eq!(va, vb);
}

#[tokio::test]
async fn the_service_recovers_when_postgres_drops_and_refuses_connections() {
    if skip() {
        return;
    }
    let app = spawn_app(Backend::Postgres).await;
    let name = app.db.pg_name().unwrap().to_owned();
    let today = app.today();
    // Each `limit` is a page the server has not rendered yet, so the request
    // reaches the database (rendered pages are cached per data version).
    let db_backed = |limit: u32| {
        format!(
            "{NET}/liquidity-levels?fromDate={}&toDate={today}&asset=BTC&limit={limit}",
            today - time::Duration::days(5)
        )
    };
    app.get_ok(&db_backed(1)).await;
    let mut admin = pg_admin_connection();
    let terminate = format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' AND pid <> pg_backend_pid()");

    // 1. Every server connection is killed (as in a restart or failover): requests recover at once.
    admin.batch_execute(&terminate).unwrap();
    let res = app
        .request(&db_backed(2), Some(("X-API-Key", &app.token)))
        .await;
    assert!(
        matches!(res.status().as_u16(), 200 | 503),
        "{}",
        res.status()
    );
    app.get_ok(&db_backed(3)).await;

    // 2. The database refuses connections for a while (as while PostgreSQL restarts): fast 503s, no hang, no 500.
    admin
        .batch_execute(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false"))
        .unwrap();
    admin.batch_execute(&terminate).unwrap();
    let mut saw_503 = false;
    for limit in 4..7 {
        let started = Instant::now();
        let res = app
            .request(&db_backed(limit), Some(("X-API-Key", &app.token)))
            .await;
        let status = res.status().as_u16();
        assert!(
            started.elapsed() < Duration::from_millis(2_800),
            "took {:?}",
            started.elapsed()
        );
        assert!(matches!(status, 503 | 200), "status {status}");
        if status == 503 {
            saw_503 = true;
            assert!(res.headers().contains_key("retry-after"));
            let p: Value = res.json().await.unwrap();
            assert_eq!(p["status"], 503);
        }
    }
    assert!(
        saw_503,
        "requests needing the database got 503 while it refused connections"
    );
    assert_eq!(app.readiness().await, "degraded");

    // 3. It comes back: the server recovers by itself, without a restart.
    admin
        .batch_execute(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"))
        .unwrap();
    app.wait_ready(Duration::from_secs(2)).await;
    app.get_ok(&db_backed(7)).await;
    app.get_ok(&format!("{NET}/markets/BTC/candles?interval=1h&limit=3"))
        .await;
}
