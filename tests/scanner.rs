//! The scanner against a local info server that speaks the Hyperliquid info
//! API format from the reference fixtures, and can answer slowly, with 429 or
//! 500, or drop a wallet.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpResponse, HttpServer};
use market_ingest::{run_scan, ScanConfig, WalletEntry};
use market_store::{PoolOptions, Store};
use serde_json::{json, Value};

use crate::support::{pg_admin_url, start_app, Backend, PgDatabase, TestApp, TestDatabase};

const NET: &str = "/v1/networks/perpnet";

fn reference(name: &str) -> Value {
    let path = format!(
        "{}/../../crates/market-ingest/fixtures/hyperliquid-info/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
        .unwrap()
}

/// What the info server knows and how it misbehaves.
#[derive(Default)]
pub struct Knobs {
    pub delay_ms: AtomicU64,
    pub rate_limit_next: AtomicU32,
    pub fail_market_next: AtomicU32,
    pub fail_users: Mutex<HashSet<String>>,
    /// Coins whose positions the main-dex states leave out (closed positions).
    pub drop_coins: Mutex<HashSet<String>>,
    /// (time, weight, request type) of every request received.
    pub log: Mutex<Vec<(Instant, u32, String)>>,
}

struct World {
    knobs: Arc<Knobs>,
    wallets: HashMap<String, usize>,
    fixtures: HashMap<&'static str, Value>,
}

impl World {
    fn fixture(&self, name: &str) -> Value {
        self.fixtures[name].clone()
    }
}

/// Address of wallet `i`.
fn address(i: usize) -> String {
    format!("0x{:040x}", 0xabc000 + i)
}

async fn info(body: web::Json<Value>, world: web::Data<World>) -> HttpResponse {
    let kind = body["type"].as_str().unwrap_or("").to_owned();
    let weight = if kind == "clearinghouseState" { 2 } else { 20 };
    world
        .knobs
        .log
        .lock()
        .unwrap()
        .push((Instant::now(), weight, kind.clone()));
    let delay = world.knobs.delay_ms.load(Ordering::Relaxed);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let take = |counter: &AtomicU32| {
        counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    };
    if take(&world.knobs.rate_limit_next) {
        return HttpResponse::TooManyRequests().finish();
    }
    let dex = body["dex"].as_str().unwrap_or("");
    match kind.as_str() {
        "perpDexs" => HttpResponse::Ok().json(world.fixture("perpDexs.json")),
        "metaAndAssetCtxs" => {
            if take(&world.knobs.fail_market_next) {
                return HttpResponse::InternalServerError().finish();
            }
            let file = if dex.is_empty() {
                "metaAndAssetCtxs.main.json"
            } else {
                "metaAndAssetCtxs.xyz.json"
            };
            HttpResponse::Ok().json(world.fixture(file))
        }
        "clearinghouseState" => {
            let user = body["user"].as_str().unwrap_or("").to_owned();
            if world.knobs.fail_users.lock().unwrap().contains(&user) {
                return HttpResponse::InternalServerError().finish();
            }
            let Some(&i) = world.wallets.get(&user) else {
                return HttpResponse::Ok()
                    .json(json!({"marginSummary": {"accountValue": "0.0"}, "assetPositions": []}));
            };
            // Every wallet holds the reference main-dex positions; even wallets also the xyz ones.
            if dex.is_empty() {
                {
                    let mut state = world.fixture("clearinghouseState.main.json");
                    let dropped = world.knobs.drop_coins.lock().unwrap().clone();
                    state["assetPositions"].as_array_mut().unwrap().retain(|p| {
                        !dropped.contains(p["position"]["coin"].as_str().unwrap_or(""))
                    });
                    HttpResponse::Ok().json(state)
                }
            } else if i % 2 == 0 {
                HttpResponse::Ok().json(world.fixture("clearinghouseState.xyz.json"))
            } else {
                HttpResponse::Ok().json(json!({"marginSummary": {"accountValue": "0.0"}, "assetPositions": [], "time": 1795314308788_i64}))
            }
        }
        "candleSnapshot" => {
            let coin = body["req"]["coin"].as_str().unwrap_or("");
            HttpResponse::Ok().json(if coin == "BTC" {
                world.fixture("candleSnapshot.json")
            } else {
                json!([])
            })
        }
        _ => HttpResponse::BadRequest().finish(),
    }
}

/// A running info server with `n` wallets.
pub struct InfoServer {
    pub url: String,
    pub knobs: Arc<Knobs>,
    pub wallets: Vec<WalletEntry>,
}

pub fn info_server(n: usize) -> InfoServer {
    let knobs = Arc::new(Knobs::default());
    let addresses: Vec<String> = (0..n).map(address).collect();
    let fixtures = [
        "perpDexs.json",
        "metaAndAssetCtxs.main.json",
        "metaAndAssetCtxs.xyz.json",
        "clearinghouseState.main.json",
        "clearinghouseState.xyz.json",
        "candleSnapshot.json",
    ]
    .into_iter()
    .map(|name| (name, reference(name)))
    .collect();
    let data = web::Data::new(World {
        knobs: knobs.clone(),
        wallets: addresses
            .iter()
            .enumerate()
            .map(|(i, a)| (a.clone(), i))
            .collect(),
        fixtures,
    });
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/info", listener.local_addr().unwrap());
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .route("/info", web::post().to(info))
    })
    .workers(2)
    .listen(listener)
    .unwrap()
    .run();
    tokio::spawn(server);
    let wallets = addresses
        .into_iter()
        .enumerate()
        .map(|(i, address)| WalletEntry {
            address,
            label: (i == 0).then(|| "Scanned Fund".to_owned()),
            tags: if i == 0 { vec!["fund".into()] } else { vec![] },
        })
        .collect();
    InfoServer {
        url,
        knobs,
        wallets,
    }
}

fn fast() -> ScanConfig {
    ScanConfig {
        weight_budget: 1_000_000,
        backoff: Duration::from_millis(20),
        ..ScanConfig::default()
    }
}

async fn scan(
    store: &Store,
    server: &InfoServer,
    cfg: ScanConfig,
) -> Result<market_ingest::ScanReport, String> {
    let (store, url, wallets) = (store.clone(), server.url.clone(), server.wallets.clone());
    tokio::task::spawn_blocking(move || {
        let source = market_ingest::client::HttpSource::new(&url, Duration::from_secs(5));
        run_scan(&source, &store, &wallets, &cfg, &mut |_| {}).map_err(|e| e.to_string())
    })
    .await
    .unwrap()
}

/// An app on an empty, migrated database that follows new data versions.
async fn empty_app(backend: Backend) -> TestApp {
    let db = match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let url = dir.path().join("scan.db").to_str().unwrap().to_owned();
            TestDatabase::Sqlite { url, _dir: dir }
        }
        Backend::Postgres => TestDatabase::Postgres(PgDatabase::create(None)),
    };
    let app = start_app(backend, db, PoolOptions::default()).await;
    app.state.spawn_reloader();
    app
}

async fn wait_for_version(app: &TestApp, version: i64) {
    let started = Instant::now();
    loop {
        let res = app
            .request("/v1/networks", Some(("X-API-Key", &app.token)))
            .await;
        if res.headers()["x-data-version"]
            .to_str()
            .unwrap()
            .parse::<i64>()
            .unwrap()
            >= version
        {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "version {version} not served within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn scanning_gives_the_expected_answers(backend: Backend) {
    let app = empty_app(backend).await;
    let server = info_server(6);
    let report = scan(&app.store, &server, fast()).await.unwrap();
    assert_eq!(
        (report.wallets_ok, report.wallets_failed, report.assets),
        (6, 0, 13)
    );
    wait_for_version(&app, report.version).await;

    let avax = app.get_ok(&format!("{NET}/markets/AVAX")).await;
    assert_eq!(avax["price"], "34.8117");
    assert_eq!(
        (avax["longCount"].as_u64(), avax["shortCount"].as_u64()),
        (Some(6), Some(0))
    );
    assert_eq!(avax["longLiquidationValue"], "86405.52", "6 × 14400.92");
    let gold = app.get_ok(&format!("{NET}/markets/GOLD")).await;
    assert_eq!(
        (gold["symbol"].as_str(), gold["longCount"].as_u64()),
        (Some("xyz:GOLD"), Some(3))
    );
    let nvda = app
        .get_ok(&format!("{NET}/markets/xyz:NVDA/whale-positions"))
        .await;
    assert!(nvda["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["liqPrice"].is_null() && p["direction"] == "short"));
    let wallets = app.get_ok(&format!("{NET}/wallets?limit=200")).await;
    assert_eq!(wallets["total"], 6);
    let w0 = wallets["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["address"] == address(0))
        .unwrap()
        .clone();
    assert_eq!(
        w0["accountTotalValue"], "70732.80",
        "main plus xyz account value"
    );
    assert_eq!(w0["label"], "Scanned Fund");
    assert_eq!(w0["tags"], json!(["fund"]));
    assert!(w0["netPnl"].is_null(), "no invented analytics");
    let w1 = wallets["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["address"] == address(1))
        .unwrap()
        .clone();
    assert_eq!(w1["accountTotalValue"], "35421.92");
    let candles = app
        .get_ok(&format!(
            "{NET}/markets/BTC/candles?interval=1h&from=0&limit=10"
        ))
        .await;
    assert_eq!(candles["candles"].as_array().unwrap().len(), 5);
    assert_eq!(candles["candles"][0]["open"], "92391.3380");
    let today = app.today().max(time::OffsetDateTime::now_utc().date());
    let levels = app
        .get_ok(&format!(
            "{NET}/liquidity-levels?fromDate={today}&toDate={today}&asset=AVAX"
        ))
        .await;
    assert_eq!(levels["items"][0]["coverage"], "current");
    assert_eq!(
        levels["items"][0]["totals"]["long"]["totalAmountUsd"],
        "86405.52"
    );

    // A wallet that keeps failing is served from its last observation, then drops out.
    server.knobs.fail_users.lock().unwrap().insert(address(1));
    for round in 1..=4 {
        let report = scan(&app.store, &server, fast()).await.unwrap();
        assert_eq!(report.wallets_failed, 1);
        wait_for_version(&app, report.version).await;
        let total = app.get_ok(&format!("{NET}/wallets")).await["total"]
            .as_u64()
            .unwrap();
        if round <= 3 {
            assert_eq!(report.wallets_retained, 1, "round {round}");
            assert_eq!(total, 6, "round {round}: kept while stale");
            let kept = app.get_ok(&format!("{NET}/wallets?limit=200")).await;
            let w1_now = kept["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|w| w["address"] == address(1))
                .unwrap()
                .clone();
            assert_eq!(
                w1_now["observedAt"], w1["observedAt"],
                "marked by its own observation time"
            );
        } else {
            assert_eq!(report.wallets_dropped, 1);
            assert_eq!(total, 5, "dropped after 3 missed scans");
        }
    }

    // A scan that fails entirely changes nothing.
    let before = app.get_raw(&format!("{NET}/wallets?limit=200")).await;
    let version = app.store.latest_snapshot().unwrap().unwrap().version;
    server.knobs.fail_market_next.store(100, Ordering::SeqCst);
    let err = scan(
        &app.store,
        &server,
        ScanConfig {
            retries: 1,
            ..fast()
        },
    )
    .await
    .unwrap_err();
    assert!(err.contains("market context"), "{err}");
    assert_eq!(
        app.store.latest_snapshot().unwrap().unwrap().version,
        version
    );
    server.knobs.fail_market_next.store(0, Ordering::SeqCst);
    server
        .knobs
        .fail_users
        .lock()
        .unwrap()
        .extend((0..6).map(address));
    let err = scan(
        &app.store,
        &server,
        ScanConfig {
            retries: 0,
            ..fast()
        },
    )
    .await
    .unwrap_err();
    assert!(err.contains("none of the 6 wallets"), "{err}");
    assert_eq!(
        app.store.latest_snapshot().unwrap().unwrap().version,
        version
    );
    assert_eq!(
        app.get_raw(&format!("{NET}/wallets?limit=200")).await,
        before
    );
}

async fn rate_limit_and_retries_are_respected(backend: Backend) {
    let app = empty_app(backend).await;
    let server = info_server(40);
    server.knobs.rate_limit_next.store(3, Ordering::SeqCst);
    let window = Duration::from_millis(1000);
    let cfg = ScanConfig {
        weight_budget: 150,
        window,
        concurrency: 6,
        backoff: Duration::from_millis(20),
        ..ScanConfig::default()
    };
    let metrics = market_data_server::metrics::IngestMetrics::new(&cfg, None);
    let started = std::time::Instant::now();
    let report = scan(&app.store, &server, cfg).await.unwrap();
    assert_eq!(report.wallets_ok, 40, "429s were retried");
    let log = server.knobs.log.lock().unwrap().clone();
    // The scan's metrics agree with its report and with what the source saw.
    let text = metrics.render(started);
    let m = |name: &str, labels: &[(&str, &str)]| crate::support::metric(&text, name, labels);
    assert_eq!(
        m("market_data_ingest_requests_total", &[]),
        report.requests as f64
    );
    assert_eq!(report.requests, log.len() as u64, "{text}");
    assert_eq!(
        m("market_data_ingest_weight_total", &[]),
        report.weight as f64
    );
    assert!(
        m("market_data_ingest_request_failures_total", &[]) >= 3.0,
        "the three 429s"
    );
    assert_eq!(
        m("market_data_ingest_wallet_reads_total", &[("result", "ok")]),
        40.0
    );
    assert_eq!(
        m(
            "market_data_ingest_wallet_reads_total",
            &[("result", "failed")]
        ),
        0.0
    );
    assert_eq!(
        m("market_data_ingest_weight_budget_per_minute", &[]),
        150.0 * 60.0
    );
    assert!(m("market_data_ingest_last_version_seconds", &[]) > 0.0);
    assert!(
        m("market_data_ingest_staleness_seconds", &[]) < 5.0,
        "{text}"
    );
    assert!(log.len() as u64 >= 40 * 2 + 3);
    let mut worst = 0;
    for &(t, _, _) in &log {
        let in_window: u32 = log
            .iter()
            .filter(|(u, _, _)| *u >= t && *u < t + window)
            .map(|(_, w, _)| w)
            .sum();
        worst = worst.max(in_window);
    }
    assert!(worst <= 150, "{worst} weight within one window, budget 150");
    let total: u32 = log.iter().map(|(_, w, _)| w).sum();
    assert!(
        total > 300,
        "the scan spent {total} weight over several windows"
    );
}

async fn readers_never_see_a_mixed_state(backend: Backend) {
    let app = Arc::new(empty_app(backend).await);
    let small = info_server(4);
    let large = info_server(10);
    let first = scan(&app.store, &small, fast()).await.unwrap();
    wait_for_version(&app, first.version).await;
    let reading = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let reader = {
        let (app, reading) = (app.clone(), reading.clone());
        tokio::spawn(async move {
            let mut checked = 0;
            while reading.load(Ordering::Relaxed) {
                let (vm, m) = app.get_versioned(&format!("{NET}/markets/AVAX")).await;
                let (vp, p) = app
                    .get_versioned(&format!(
                        "{NET}/markets/AVAX/whale-positions?direction=long&limit=200"
                    ))
                    .await;
                let (vw, w) = app.get_versioned(&format!("{NET}/wallets?limit=200")).await;
                // Within one version, counts agree across endpoints.
                if vm == vp {
                    assert_eq!(
                        m["longCount"].as_u64().unwrap() as usize,
                        p["items"].as_array().unwrap().len()
                    );
                }
                if vm == vw {
                    assert_eq!(m["longCount"], w["total"]);
                }
                assert_eq!(
                    w["items"].as_array().unwrap().len() as u64,
                    w["total"].as_u64().unwrap()
                );
                checked += 1;
            }
            checked
        })
    };
    for i in 0..4 {
        let server = if i % 2 == 0 { &large } else { &small };
        scan(&app.store, server, fast()).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    reading.store(false, Ordering::Relaxed);
    let checked = reader.await.unwrap();
    assert!(checked > 5, "the reader checked {checked} states");
}

#[tokio::test]
async fn a_scan_killed_mid_way_leaves_the_served_data_unchanged() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        if backend == Backend::Postgres && pg_admin_url().is_none() {
            continue;
        }
        let app = empty_app(backend).await;
        let server = info_server(30);
        let first = scan(&app.store, &server, fast()).await.unwrap();
        let meta = app.store.latest_snapshot().unwrap().unwrap();
        let before = format!(
            "{:?}",
            app.store.load_snapshot(&meta).unwrap().version.wallets
        );
        server.knobs.log.lock().unwrap().clear();
        server.knobs.delay_ms.store(40, Ordering::SeqCst);
        let dir = tempfile::tempdir().unwrap();
        let list = dir.path().join("wallets.txt");
        std::fs::write(
            &list,
            server
                .wallets
                .iter()
                .map(|w| format!("{}\n", w.address))
                .collect::<String>(),
        )
        .unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_market-data-server"))
            .args([
                "scan",
                "--once",
                "--info-url",
                &server.url,
                "--wallets",
                list.to_str().unwrap(),
                "--database-url",
                app.db.url(),
                "--concurrency",
                "2",
            ])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while server.knobs.log.lock().unwrap().len() < 20 {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the scan never started"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let after = app.store.latest_snapshot().unwrap().unwrap();
        assert_eq!(after.version, first.version, "{backend:?}");
        assert_eq!(
            format!(
                "{:?}",
                app.store.load_snapshot(&after).unwrap().version.wallets
            ),
            before
        );
        app.get_ok(&format!("{NET}/markets/AVAX")).await;
        // The next scan applies normally.
        server.knobs.delay_ms.store(0, Ordering::SeqCst);
        let next = scan(&app.store, &server, fast()).await.unwrap();
        assert!(next.version > first.version);
    }
}

#[tokio::test]
async fn import_reads_recorded_responses() {
    let dir = tempfile::tempdir().unwrap();
    let metas = json!({"": reference("metaAndAssetCtxs.main.json"), "xyz": reference("metaAndAssetCtxs.xyz.json")});
    let states: HashMap<String, Value> = (0..3)
        .map(|i| (address(i), json!({"": reference("clearinghouseState.main.json"), "xyz": reference("clearinghouseState.xyz.json")})))
        .collect();
    std::fs::write(
        dir.path().join("perpDexs.json"),
        reference("perpDexs.json").to_string(),
    )
    .unwrap();
    std::fs::write(dir.path().join("metaAndAssetCtxs.json"), metas.to_string()).unwrap();
    std::fs::write(
        dir.path().join("clearinghouseState.json"),
        serde_json::to_string(&states).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("candleSnapshot.json"),
        json!({"BTC": reference("candleSnapshot.json")}).to_string(),
    )
    .unwrap();
    let db = dir.path().join("import.db");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_market-data-server"))
        .args([
            "import",
            "--from",
            dir.path().to_str().unwrap(),
            "--database-url",
            db.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = Store::open(db.to_str().unwrap(), PoolOptions::default()).unwrap();
    let meta = store.latest_snapshot().unwrap().unwrap();
    let snap = store.load_snapshot(&meta).unwrap();
    assert_eq!(snap.version.wallets.len(), 3);
    assert_eq!(snap.version.markets.len(), 13);
    assert_eq!(snap.version.positions.len(), 18);
    assert_eq!(
        store
            .candles("BTC", market_model::Interval::H1, 0, i64::MAX, 100)
            .unwrap()
            .len(),
        5
    );
    // a failing import (missing file) exits non-zero and writes nothing
    std::fs::remove_file(dir.path().join("perpDexs.json")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_market-data-server"))
        .args([
            "import",
            "--from",
            dir.path().to_str().unwrap(),
            "--database-url",
            db.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        store.latest_snapshot().unwrap().unwrap().version,
        meta.version
    );
}

async fn analytics_follow_closed_positions(backend: Backend) {
    let app = empty_app(backend).await;
    let server = info_server(2);
    let set_dropped = |on: bool| {
        let mut d = server.knobs.drop_coins.lock().unwrap();
        d.clear();
        if on {
            d.extend(["AVAX", "SOL", "DOGE"].map(String::from));
        }
    };
    // 1: first sight (open times unknown); 2: three positions open; 3: they closed.
    for (round, dropped) in [(1, true), (2, false), (3, true)] {
        set_dropped(dropped);
        let report = scan(&app.store, &server, fast()).await.unwrap();
        wait_for_version(&app, report.version).await;
        if round < 3 {
            let wallets = app.get_ok(&format!("{NET}/wallets?limit=10")).await;
            for w in wallets["items"].as_array().unwrap() {
                assert!(
                    w["netPnl"].is_null() && w["strategy"].is_null(),
                    "round {round}: not enough history yet"
                );
            }
        }
    }
    let wallets = app.get_ok(&format!("{NET}/wallets?limit=10")).await;
    let by = |a: String| {
        wallets["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["address"] == a)
            .unwrap()
            .clone()
    };
    let even = by(address(0));
    // realized: the closed positions' last unrealized PnL, 520.65 + 1544.27 + 47.81 = 2112.73;
    // unrealized: the xyz positions, -791.07 + 2129.96 + 1695.13 = 3034.02.
    assert_eq!(even["netPnl"], "5146.75");
    assert_eq!(
        even["roi"], "7.28",
        "5146.75 / 70732.80 (first account value) × 100"
    );
    assert_eq!(even["winRate"], "100.00");
    assert_eq!(even["strategy"], "scalper", "held for seconds");
    assert_eq!(
        even["strategyConfidence"], "0.30",
        "3 timed closes out of 10 for full evidence"
    );
    let odd = by(address(1));
    assert_eq!(odd["netPnl"], "2112.73");
    assert_eq!(odd["roi"], "5.96");
    let sorted = app.get_ok(&format!("{NET}/wallets?sort=netPnl")).await;
    assert_eq!(sorted["items"][0]["address"], address(0));
}

async fn the_first_scan_of_a_day_freezes_the_previous_day(backend: Backend) {
    use diesel::connection::SimpleConnection;
    let app = empty_app(backend).await;
    let server = info_server(4);
    scan(&app.store, &server, fast()).await.unwrap();
    // Pretend the first scan ran yesterday.
    let sql = match backend {
        Backend::Sqlite => "UPDATE snapshots SET observed_at = datetime(observed_at, '-1 day')",
        Backend::Postgres => "UPDATE snapshots SET observed_at = observed_at - interval '1 day'",
    };
    app.store
        .raw_connection()
        .unwrap()
        .batch_execute(sql)
        .unwrap();
    let report = scan(&app.store, &server, fast()).await.unwrap();
    assert_eq!(report.frozen_days, 13, "every asset's day is frozen");
    wait_for_version(&app, report.version).await;
    let today = time::OffsetDateTime::now_utc().date();
    let yesterday = today.previous_day().unwrap();
    let days = app
        .get_ok(&format!(
            "{NET}/liquidity-levels?fromDate={yesterday}&toDate={today}&asset=AVAX"
        ))
        .await;
    let items = days["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(
        (items[0]["date"].as_str(), items[0]["coverage"].as_str()),
        (Some(yesterday.to_string().as_str()), Some("end_of_day"))
    );
    assert_eq!(
        (items[1]["date"].as_str(), items[1]["coverage"].as_str()),
        (Some(today.to_string().as_str()), Some("current"))
    );
    assert_eq!(
        items[0]["totals"], items[1]["totals"],
        "the same positions on both days"
    );
    // A later scan on the same day freezes nothing more.
    assert_eq!(
        scan(&app.store, &server, fast()).await.unwrap().frozen_days,
        0
    );
}

/// Measures a 20,000-wallet scan against the local info server with its rate
/// limit lifted: `cargo test --release -p market-data-server --test http_api scan_of_20000 -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check: run it by hand"]
async fn scan_of_20000_wallets_timing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path().join("t.db").to_str().unwrap(),
        PoolOptions::default(),
    )
    .unwrap();
    store.migrate().unwrap();
    let server = info_server(20_000);
    let cfg = ScanConfig {
        weight_budget: u32::MAX / 2,
        concurrency: 16,
        ..ScanConfig::default()
    };
    for round in 1..=2 {
        let started = Instant::now();
        let report = scan(&store, &server, cfg.clone()).await.unwrap();
        eprintln!(
            "scan {round}: {} wallets, {} positions, {} requests in {:.1} s ({:.0} requests/s)",
            report.wallets_ok,
            report.positions,
            report.requests,
            started.elapsed().as_secs_f64(),
            report.requests as f64 / started.elapsed().as_secs_f64()
        );
    }
}

crate::on_both_backends!(
    the_first_scan_of_a_day_freezes_the_previous_day,
    analytics_follow_closed_positions,
    scanning_gives_the_expected_answers,
    rate_limit_and_retries_are_respected,
    readers_never_see_a_mixed_state
);
