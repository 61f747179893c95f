//! A server saves the version it serves (after loading it whole, and when
//! it stops) and its next start serves the saved version: the same answers
//! byte for byte, without loading from the database, also after `track`
//! published and pruned past it; a damaged file is refused and the version
//! loaded from the database instead.

use std::path::Path;
use std::time::{Duration, Instant};

use market_snapshot::Snapshot;
use market_store::{PoolOptions, Store};

use crate::shutdown::{new_token, Server};
use crate::support::*;
use crate::tracker::{spawn_track, whale};

/// Pages of every kind the snapshot serves.
const PAGES: &[&str] = &[
    "/v1/networks/perpnet/markets?sort=volume24h",
    "/v1/networks/perpnet/markets/BTC",
    "/v1/networks/perpnet/markets/ETH/whale-positions?limit=50",
    "/v1/networks/perpnet/markets/BTC/whale-positions?direction=short&limit=20",
    "/v1/networks/perpnet/wallets?limit=30&sort=netPnl",
    "/v1/networks/perpnet/wallets?limit=30&size=whale&direction=long",
    "/v1/networks/perpnet/coverage",
];

/// Waits until `log` holds `text` `times` times.
fn wait_for_log(log: &Path, text: &str, times: usize) -> String {
    let started = Instant::now();
    loop {
        let got = std::fs::read_to_string(log).unwrap();
        if got.matches(text).count() >= times {
            return got;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no {text:?} in the log:\n{got}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every page of [`PAGES`], and the detail of the first wallets listed.
pub(crate) async fn answers(addr: &str, token: &str) -> Vec<String> {
    let client = reqwest::Client::new();
    let get = |path: String| {
        let req = client
            .get(format!("http://{addr}{path}"))
            .header("X-API-Key", token);
        async move {
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 200, "{path}");
            res.text().await.unwrap()
        }
    };
    let mut out = Vec::new();
    for path in PAGES {
        out.push(get(path.to_string()).await);
    }
    let wallets: serde_json::Value = serde_json::from_str(&out[4]).unwrap();
    for w in wallets["items"].as_array().unwrap().iter().take(5) {
        let address = w["address"].as_str().unwrap();
        out.push(get(format!("/v1/networks/perpnet/wallets/{address}")).await);
    }
    out
}

/// SIGTERM once the server answers (its signal handlers are installed
/// then), and its exit.
pub(crate) async fn stop(mut server: Server) {
    let health = format!("http://{}/healthz", server.addr);
    let answered = reqwest::get(&health).await.unwrap();
    assert_eq!(answered.status(), 200);
    server.terminate();
    let status = server.exit_within(Duration::from_secs(20)).await;
    assert!(status.success(), "exit status {status}");
}

async fn a_restart_serves_the_saved_version_as_it_was(backend: Backend) {
    let db = seeded_database(backend);
    let (_store, token) = new_token(&db);
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("served");
    let args = ["--saved-version", saved.to_str().unwrap()];

    // First start: loaded from the database, then saved.
    let log = dir.path().join("first.log");
    let server = Server::start_with(&db, &args, &log);
    wait_for_log(&log, "saved data version", 1);
    let loaded = answers(&server.addr, &token).await;
    let saved_at = std::fs::metadata(&saved).unwrap().modified().unwrap();
    stop(server).await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("loaded whole"), "{text}");
    // The stop does not write the version the file holds again.
    assert_eq!(text.matches("saved data version").count(), 1, "{text}");
    assert_eq!(
        std::fs::metadata(&saved).unwrap().modified().unwrap(),
        saved_at
    );

    // Second start: from the file, the same answers.
    let log = dir.path().join("second.log");
    let server = Server::start_with(&db, &args, &log);
    let text = wait_for_log(&log, "read data version", 1);
    assert!(!text.contains("loaded whole"), "{text}");
    assert_eq!(answers(&server.addr, &token).await, loaded);
    stop(server).await;

    // A damaged file is refused, and the version loaded from the database.
    let mut bytes = std::fs::read(&saved).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    std::fs::write(&saved, &bytes).unwrap();
    let log = dir.path().join("third.log");
    let server = Server::start_with(&db, &args, &log);
    let text = wait_for_log(&log, "loaded whole", 1);
    assert!(text.contains("not starting from"), "{text}");
    assert_eq!(answers(&server.addr, &token).await, loaded);
    stop(server).await;
}

crate::on_both_backends!(a_restart_serves_the_saved_version_as_it_was);

/// `track` publishes past the version a stopped server saved (until it is
/// pruned, with a new whale among the changes); the restarted server
/// catches up from the saved version and serves what a server that loads
/// the newest version whole serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_catches_up_with_publishes_pruned_since_it_saved() {
    let fake = fake_exchange::start(60, 40).await;
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("track.db").to_str().unwrap().to_owned();
    let store = Store::open(&url, PoolOptions::default()).unwrap();
    store.migrate().unwrap();
    let db = TestDatabase::Sqlite {
        url: url.clone(),
        _dir: tempfile::tempdir().unwrap(),
    };
    let (_, token) = new_token(&db);
    let track = spawn_track(&fake, &url, &dir.path().join("track.log"));
    let latest = || store.latest_snapshot().unwrap().map_or(0, |m| m.version);
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        let started = Instant::now();
        while !done() {
            assert!(started.elapsed() < Duration::from_secs(60), "{what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for("a first publish", &|| latest() >= 2);

    let saved = dir.path().join("served");
    let args = ["--saved-version", saved.to_str().unwrap()];
    let log = dir.path().join("first.log");
    let server = Server::start_with(&db, &args, &log);
    wait_for_log(&log, "saved data version", 1);
    let loaded = Snapshot::saved_version(&saved).unwrap().version;
    // It saves at its stop the newer version it then serves.
    wait_for_log(&log, "serving data version", 2);
    stop(server).await;
    let at = Snapshot::saved_version(&saved).unwrap().version;
    assert!(at > loaded, "saved at the stop: {at} after {loaded}");

    // A new whale, and publishes until the saved version is pruned.
    let address = format!("0x{}", "e2".repeat(20));
    whale(&fake.ex, &address, "ETH");
    fake.ex
        .trade("ETH", "25", &fake_exchange::address(2), &address);
    wait_for("the saved version pruned", &|| {
        latest() >= at + 2 && store.stored_version(at).unwrap().is_none()
    });
    let whale_served = || {
        let (store, address) = (&store, &address);
        move || {
            let meta = store.latest_snapshot().unwrap().unwrap();
            let v = store.load_snapshot(&meta).unwrap().version;
            v.wallets.iter().any(|w| w.address == *address)
        }
    };
    wait_for("the new whale published", &whale_served());
    drop(track);

    let log = dir.path().join("second.log");
    let restarted = Server::start_with(&db, &args, &log);
    let text = wait_for_log(&log, "to the saved version", 1);
    assert!(
        text.contains(&format!("read data version {at} from")),
        "{text}"
    );
    assert!(!text.contains("loaded whole"), "{text}");
    let log = dir.path().join("whole.log");
    let whole = Server::start_with(&db, &["--saved-version", "none"], &log);
    wait_for_log(&log, "loaded whole", 1);
    let caught_up = answers(&restarted.addr, &token).await;
    assert_eq!(caught_up, answers(&whole.addr, &token).await);
    let detail = format!("/v1/networks/perpnet/wallets/{address}");
    let client = reqwest::Client::new();
    let res = client
        .get(format!("http://{}{detail}", restarted.addr))
        .header("X-API-Key", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "the new whale is served");
    stop(restarted).await;
    stop(whole).await;
}
