//! `track` against the fake exchange: discovery, publishing, kill -9,
//! WebSocket reconnects, 429 backoff and the weight budget.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use market_ingest::ScanConfig;
use market_store::{PoolOptions, Store};
use market_tracker::{Intervals, TrackConfig, Tracker};

use crate::support::*;
use fake_exchange::{address, FakeExchange, FakePosition, FakeWallet};

const NET: &str = "/v1/networks/perpnet";
const PUBLISH_EVERY: u64 = 3;

struct Track(std::process::Child);

impl Drop for Track {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_track(fake: &FakeExchange, db: &str, log: &std::path::Path) -> Track {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    Track(
        std::process::Command::new(env!("CARGO_BIN_EXE_market-data-server"))
            .args([
                "track",
                "--info-url",
                &fake.info_url,
                "--ws-url",
                &fake.ws_url,
                "--leaderboard-url",
                &fake.leaderboard_url,
                "--publish-every",
                &PUBLISH_EVERY.to_string(),
                "--no-candles",
                "--weight-per-minute",
                "20000",
                "--database-url",
                db,
            ])
            .env("RUST_LOG", "info")
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

async fn served_wallets(app: &TestApp, size: &str) -> HashSet<String> {
    let body = app
        .get_ok(&format!("{NET}/wallets?size={size}&limit=200"))
        .await;
    body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["address"].as_str().unwrap().to_owned())
        .collect()
}

async fn wait_until<F, Fut>(what: &str, limit: Duration, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    started.elapsed()
}

fn whale(exchange: &fake_exchange::Exchange, address: &str, coin: &str) {
    exchange.put_wallet(
        address,
        FakeWallet {
            account_value: 8_000_000,
            positions: vec![FakePosition {
                coin: coin.into(),
                lots: -4_000,
                entry: exchange.price(coin),
            }],
        },
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn track_discovers_serves_survives_kill_and_reconnects() {
    let fake = fake_exchange::start(60, 40).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("track.db").to_str().unwrap().to_owned();
    let log = dir.path().join("track.log");
    // The database exists (migrated) before the server opens it.
    Store::open(&db, PoolOptions::default())
        .unwrap()
        .migrate()
        .unwrap();
    let app = start_app(
        Backend::Sqlite,
        TestDatabase::Sqlite {
            url: db.clone(),
            _dir: tempfile::tempdir().unwrap(),
        },
        PoolOptions::default(),
    )
    .await;
    app.state.spawn_reloader();
    let mut track = spawn_track(&fake, &db, &log);
    let dump = || std::fs::read_to_string(&log).unwrap_or_default();

    // The leaderboard's 40 wallets are read and served.
    let store = app.store.clone();
    wait_until(
        "the leaderboard's wallets served",
        Duration::from_secs(40),
        || {
            let app = &app;
            async move {
                served_wallets(app, "shrimp").await.len()
                    + served_wallets(app, "shark").await.len()
                    + served_wallets(app, "whale").await.len()
                    >= 40
            }
        },
    )
    .await;
    // Every coin and the contexts are subscribed before trades are sent.
    wait_until("subscriptions", Duration::from_secs(10), || async {
        fake.ex.ws_subscriptions.load(Ordering::SeqCst) >= 5
    })
    .await;

    // A new whale who trades is served within two publish intervals (plus
    // the server's reload, at most 2 s).
    let w1 = format!("0x{}", "e1".repeat(20));
    whale(&fake.ex, &w1, "BTC");
    fake.ex.trade("BTC", "40", &address(1), &w1);
    let took = wait_until(
        "the new whale served",
        Duration::from_secs(2 * PUBLISH_EVERY + 2),
        || {
            let (app, w1) = (&app, &w1);
            async move { served_wallets(app, "whale").await.contains(w1) }
        },
    )
    .await;
    eprintln!("new whale served after {took:?}");
    let detail = app
        .get_ok(&format!(
            "{NET}/markets/BTC/whale-positions?direction=short&limit=200"
        ))
        .await;
    assert!(
        detail["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["address"] == w1.as_str()),
        "its position is served too"
    );

    // A dropped WebSocket reconnects and resubscribes; trades discover again.
    let connections = fake.ex.ws_connections.load(Ordering::SeqCst);
    let subscriptions = fake.ex.ws_subscriptions.load(Ordering::SeqCst);
    fake.ex.drop_connections();
    wait_until(
        "the websocket reconnected and resubscribed",
        Duration::from_secs(15),
        || async {
            fake.ex.ws_connections.load(Ordering::SeqCst) > connections
                && fake.ex.ws_subscriptions.load(Ordering::SeqCst) >= subscriptions + 5
        },
    )
    .await;
    let w2 = format!("0x{}", "e2".repeat(20));
    whale(&fake.ex, &w2, "xyz:TSLA");
    fake.ex.trade("xyz:TSLA", "40", &w2, &address(2));
    wait_until(
        "the whale found after the reconnect served",
        Duration::from_secs(2 * PUBLISH_EVERY + 2),
        || {
            let (app, w2) = (&app, &w2);
            async move { served_wallets(app, "whale").await.contains(w2) }
        },
    )
    .await;
    let tsla = app
        .get_ok(&format!("{NET}/markets/xyz:TSLA/whale-positions?limit=200"))
        .await;
    assert!(
        tsla["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["address"] == w2.as_str()),
        "read on the HIP-3 dex it traded on"
    );

    // kill -9 loses no registry entry, and the restarted tracker goes on publishing.
    let before: HashSet<String> = store
        .registry()
        .unwrap()
        .into_iter()
        .map(|e| e.address)
        .collect();
    assert!(before.contains(&w1) && before.contains(&w2) && before.len() >= 42);
    track.0.kill().unwrap();
    track.0.wait().unwrap();
    let after: HashSet<String> = store
        .registry()
        .unwrap()
        .into_iter()
        .map(|e| e.address)
        .collect();
    assert!(
        after.is_superset(&before),
        "entries lost: {:?}",
        before.difference(&after).collect::<Vec<_>>()
    );
    let version = store.latest_snapshot().unwrap().unwrap().version;
    let _track = spawn_track(&fake, &db, &log);
    wait_until(
        "a publish after the restart",
        Duration::from_secs(30),
        || async { store.latest_snapshot().unwrap().unwrap().version > version },
    )
    .await;
    let restarted = store.latest_snapshot().unwrap().unwrap();
    let loaded = store.load_snapshot(&restarted).unwrap();
    assert!(
        loaded.wallets.iter().any(|w| w.address == w1)
            && loaded.wallets.iter().any(|w| w.address == w2),
        "the restart keeps what was known; log:\n{}",
        dump()
    );
    // Cross-check: the served counts agree with the wallets' positions.
    let positions: usize = loaded.wallets.iter().map(|w| w.positions as usize).sum();
    assert_eq!(positions, loaded.positions.len());

    // The coverage report counts the whole registry, not only served wallets.
    wait_until(
        "the server on the restarted version",
        Duration::from_secs(5),
        || {
            let app = &app;
            async move { app.state.snapshot().version >= restarted.version }
        },
    )
    .await;
    let coverage = app.get_ok(&format!("{NET}/coverage")).await;
    let w = &coverage["wallets"];
    let tracked = w["tracked"].as_u64().unwrap();
    assert!(tracked >= loaded.wallets.len() as u64, "{coverage}");
    assert!(
        tracked <= store.registry_len().unwrap() as u64,
        "{coverage}"
    );
    assert_eq!(
        w["neverRead"].as_u64().unwrap() + w["refreshedWithin1h"].as_u64().unwrap(),
        tracked,
        "the test runs for less than an hour: {coverage}"
    );
    let whales = &w["bySizeClass"][0];
    assert_eq!(whales["sizeClass"], "whale");
    assert!(whales["wallets"].as_u64().unwrap() >= 2, "{coverage}");
    assert!(
        coverage["markets"].as_array().unwrap().len() == 4,
        "{coverage}"
    );

    // The running server applied the publishes as changes; it answers byte
    // for byte like a server that loads the same version whole.
    drop(_track);
    let last = store.latest_snapshot().unwrap().unwrap().version;
    wait_until(
        "the server on the last version",
        Duration::from_secs(5),
        || {
            let app = &app;
            async move { app.state.snapshot().version == last }
        },
    )
    .await;
    let (applied, _) = app.state.reloads();
    assert!(applied >= 3, "publishes applied as changes: {applied}");
    let fresh = start_app(
        Backend::Sqlite,
        TestDatabase::Sqlite {
            url: db.clone(),
            _dir: tempfile::tempdir().unwrap(),
        },
        PoolOptions::default(),
    )
    .await;
    assert_eq!(fresh.state.snapshot().version, last);
    assert_eq!(fresh.state.reloads(), (0, 1));
    let mut paths = vec![
        format!("{NET}/markets"),
        format!("{NET}/coverage"),
        format!("{NET}/wallets?limit=200"),
        format!("{NET}/wallets?limit=7&sort=totalPositionValue&order=asc"),
        format!("{NET}/wallets?size=whale&direction=long&sort=netPnl"),
        format!("{NET}/wallets?size=shrimp&sort=roi&order=asc"),
    ];
    for symbol in ["BTC", "ETH", "SOL", "xyz:TSLA"] {
        for filter in ["", "&direction=long", "&direction=short"] {
            paths.push(format!(
                "{NET}/markets/{symbol}/whale-positions?limit=200{filter}"
            ));
        }
        paths.push(format!("{NET}/markets/{symbol}"));
    }
    for path in &paths {
        let (status, body) = app.get_raw(path).await;
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!(body, fresh.get_raw(path).await.1, "{path}");
    }
}

fn library_tracker(
    fake: &FakeExchange,
    store: Store,
    budget: u32,
    window: Duration,
) -> (Arc<Tracker>, Arc<AtomicBool>) {
    let stop = Arc::new(AtomicBool::new(false));
    let cfg = TrackConfig {
        info_url: fake.info_url.clone(),
        ws_url: None,
        ws_trades: false,
        leaderboard_url: Some(fake.leaderboard_url.clone()),
        leaderboard_every: Duration::from_secs(600),
        node_trades_dir: None,
        wallets: Vec::new(),
        publish_every: Duration::from_secs(1),
        scan: ScanConfig {
            weight_budget: budget,
            window,
            concurrency: 4,
            retries: 4,
            backoff: Duration::from_millis(50),
            stale_after: 0,
            source_name: "track",
            counters: Default::default(),
        },
        intervals: Intervals::default(),
        candles: false,
        meta_every: Duration::from_secs(600),
    };
    let source = market_ingest::client::HttpSource::new(&fake.info_url, Duration::from_secs(5));
    let tracker = Tracker::new(cfg, store, Box::new(source), stop.clone()).unwrap();
    (Arc::new(tracker), stop)
}

fn temp_store() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path().join("t.db").to_str().unwrap(),
        PoolOptions::default(),
    )
    .unwrap();
    store.migrate().unwrap();
    (store, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn track_stays_within_the_budget_and_backs_off_429s() {
    let fake = fake_exchange::start(200, 200).await;
    fake.ex.rate_limit_next.store(3, Ordering::SeqCst);
    let (store, _dir) = temp_store();
    let window = Duration::from_secs(2);
    let (tracker, stop) = library_tracker(&fake, store.clone(), 160, window);
    let run = {
        let tracker = tracker.clone();
        std::thread::spawn(move || tracker.run())
    };
    tokio::time::sleep(Duration::from_secs(8)).await;
    stop.store(true, Ordering::SeqCst);
    tokio::task::spawn_blocking(move || run.join().unwrap())
        .await
        .unwrap();

    let log = fake.ex.log.lock().unwrap().clone();
    // The first request (perpDexs) was answered 429 three times: each retry
    // waited 2 × 50 ms × 2^k.
    for (k, pair) in log.windows(2).take(3).enumerate() {
        let gap = pair[1].0 - pair[0].0;
        let floor = Duration::from_millis(100 * (1 << k));
        assert!(
            gap >= floor,
            "retry {k} came after {gap:?}, before {floor:?}"
        );
    }
    assert!(log.len() > 30, "the budget is used: {} requests", log.len());
    let max = fake.ex.max_weight_in(window);
    assert!(max <= 160, "{max} weight in one window");
    let reads = tracker.stats.reads_ok.load(Ordering::Relaxed);
    assert!(reads > 10, "{reads} reads");
    // Bigger wallets first within a tier (the tiers share the requests, so a
    // fish may be read while a shark waits, never a smaller shark): in each
    // size band of the leaderboard value, no wallet is unread while a smaller
    // one was read.
    let registry = store.registry().unwrap();
    let read = registry.iter().filter(|e| e.last_read_at.is_some()).count();
    assert_eq!(read as u64, reads);
    let band = |v: &market_model::Decimal| {
        [1_000_000i64, 100_000, 10_000]
            .iter()
            .position(|&min| v.0 >= min)
            .unwrap_or(3)
    };
    for b in 0..4 {
        let in_band = |read: bool| {
            registry
                .iter()
                .filter(move |e| e.last_read_at.is_some() == read)
                .filter_map(|e| e.leaderboard_value.clone())
                .filter(move |v| band(v) == b)
        };
        if let (Some(smallest_read), Some(biggest_unread)) =
            (in_band(true).min(), in_band(false).max())
        {
            assert!(
                biggest_unread <= smallest_read,
                "band {b}: {biggest_unread} unread while {smallest_read} was read"
            );
        }
    }
    assert!(
        registry
            .iter()
            .filter(|e| e.leaderboard_value.as_ref().is_some_and(|v| band(v) == 0))
            .all(|e| e.last_read_at.is_some()),
        "every whale was read"
    );
    assert!(tracker.stats.publishes.load(Ordering::Relaxed) >= 1);

    // Its metrics agree with what the fake exchange saw and the registry holds.
    let metrics = market_data_server::metrics::IngestMetrics::new(
        &tracker.config().scan,
        Some(tracker.clone()),
    );
    let text = metrics.render(std::time::Instant::now());
    let m = |name: &str, labels: &[(&str, &str)]| crate::support::metric(&text, name, labels);
    assert_eq!(
        m("market_data_ingest_requests_total", &[]),
        log.len() as f64,
        "{text}"
    );
    let weight: u32 = log.iter().map(|(_, w, _)| w).sum();
    assert_eq!(m("market_data_ingest_weight_total", &[]), f64::from(weight));
    assert!(
        m("market_data_ingest_request_failures_total", &[]) >= 3.0,
        "the three 429s"
    );
    assert_eq!(
        m("market_data_ingest_wallet_reads_total", &[("result", "ok")]),
        reads as f64
    );
    assert_eq!(
        m("market_data_ingest_weight_budget_per_minute", &[]),
        160.0 * 30.0
    );
    assert_eq!(m("market_data_tracker_wallets", &[]), registry.len() as f64);
    assert_eq!(
        m("market_data_tracker_unread_wallets", &[]),
        (registry.len() - read) as f64
    );
    let whale_age = m(
        "market_data_tracker_oldest_read_age_seconds",
        &[("tier", "whale")],
    );
    assert!(
        (0.0..10.0).contains(&whale_age),
        "whales read within the run: {whale_age}"
    );
    assert!(m("market_data_tracker_publishes_total", &[("result", "ok")]) >= 1.0);
    let staleness = m("market_data_ingest_staleness_seconds", &[]);
    assert!((0.0..10.0).contains(&staleness), "{staleness}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_leaderboard_adds_nothing_and_publishes_stay_whole() {
    let fake = fake_exchange::start(20, 20).await;
    fake.ex.truncate_leaderboard.store(true, Ordering::SeqCst);
    let (store, _dir) = temp_store();
    let (tracker, stop) = library_tracker(&fake, store.clone(), 100_000, Duration::from_secs(60));
    let run = {
        let tracker = tracker.clone();
        std::thread::spawn(move || tracker.run())
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::SeqCst);
    tokio::task::spawn_blocking(move || run.join().unwrap())
        .await
        .unwrap();
    assert!(tracker.stats.leaderboard_failures.load(Ordering::Relaxed) >= 1);
    assert_eq!(store.registry_len().unwrap(), 0);
    let meta = store.latest_snapshot().unwrap().unwrap();
    let loaded = store.load_snapshot(&meta).unwrap();
    assert_eq!(loaded.markets.len(), 4, "every market is published");
    assert!(loaded.wallets.is_empty());
}
