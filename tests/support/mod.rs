//! Test harness: a seeded SQLite template copied per test, the real app on
//! port 0, a real HTTP client.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::OnceLock;

use bigdecimal::BigDecimal;
use market_data_server::{app, seed, state::AppState, tokens};
use market_store::{PoolOptions, Store};
use serde_json::Value;
use time::Date;

/// Wallets in the test dataset (the demo generator at a smaller scale).
pub const WALLETS: usize = 400;
/// Seed of the test dataset.
pub const SEED: u64 = 7;

struct Template {
    dir: PathBuf,
    today: Date,
}

fn template() -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("mds-template-")
            .tempdir()
            .unwrap()
            .keep();
        let db = dir.join("template.db");
        let store = Store::open(db.to_str().unwrap(), PoolOptions::default()).unwrap();
        store.migrate().unwrap();
        seed::seed_demo(&store, WALLETS, SEED).unwrap();
        let today = store.latest_snapshot().unwrap().unwrap().observed_at.date();
        // Fold the WAL into the main file so a plain copy is complete.
        drop(store);
        Template { dir, today }
    })
}

fn copy_db(from_dir: &Path, to: &Path) {
    std::fs::copy(from_dir.join("template.db"), to).unwrap();
    for ext in ["-wal", "-shm"] {
        let src = from_dir.join(format!("template.db{ext}"));
        if src.exists() {
            std::fs::copy(&src, to.with_file_name(format!("app.db{ext}"))).unwrap();
        }
    }
}

/// A running app on its own copy of the seeded database.
pub struct TestApp {
    pub addr: String,
    pub token: String,
    pub client: reqwest::Client,
    pub wallets: usize,
    pub store: Store,
    pub state: std::sync::Arc<AppState>,
    today: Date,
    _dir: tempfile::TempDir,
}

/// Starts the real app on a fresh copy of the seeded database.
pub async fn spawn_app() -> TestApp {
    let t = template();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("app.db");
    copy_db(&t.dir, &db);
    let store = Store::open(db.to_str().unwrap(), PoolOptions::default()).unwrap();
    store.migrate().unwrap();
    let token = tokens::generate();
    store
        .create_token("test", &tokens::hash(&token), &tokens::hint(&token), None)
        .unwrap();
    let state = AppState::new(store.clone()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let server = app::serve(listener, state.clone(), 1).unwrap();
    tokio::spawn(server);
    TestApp {
        addr,
        token,
        client: reqwest::Client::new(),
        wallets: WALLETS,
        store,
        state,
        today: t.today,
        _dir: dir,
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.addr, path)
    }

    /// The UTC date of the seeded data (the `current` liquidity day).
    pub fn today(&self) -> Date {
        self.today
    }

    /// GET with an optional single header (no API key unless given).
    pub async fn request(&self, path: &str, header: Option<(&str, &str)>) -> reqwest::Response {
        let mut req = self.client.get(self.url(path));
        if let Some((k, v)) = header {
            req = req.header(k, v);
        }
        req.send().await.unwrap()
    }

    /// GET with the key; (status, body text).
    pub async fn get_raw(&self, path: &str) -> (u16, String) {
        let res = self.request(path, Some(("X-API-Key", &self.token))).await;
        (res.status().as_u16(), res.text().await.unwrap())
    }

    /// GET with the key, asserting 200 and JSON.
    pub async fn get_ok(&self, path: &str) -> Value {
        let res = self.request(path, Some(("X-API-Key", &self.token))).await;
        let status = res.status().as_u16();
        let ct = res
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned());
        let text = res.text().await.unwrap();
        assert_eq!(status, 200, "GET {path}: {text}");
        assert_eq!(ct.as_deref(), Some("application/json"), "GET {path}");
        serde_json::from_str(&text).unwrap()
    }

    /// GET with the key, asserting a problem-details error with `status`.
    pub async fn get_problem(&self, path: &str, status: u16) -> Value {
        let res = self.request(path, Some(("X-API-Key", &self.token))).await;
        let got = res.status().as_u16();
        let ct = res
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned());
        let text = res.text().await.unwrap();
        assert_eq!(got, status, "GET {path}: {text}");
        assert_eq!(
            ct.as_deref(),
            Some("application/problem+json"),
            "GET {path}"
        );
        let p: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(p["status"].as_u64(), Some(status as u64));
        for key in ["type", "title", "detail"] {
            assert!(p[key].is_string(), "{key} missing in {p}");
        }
        assert!(!p["detail"].as_str().unwrap().is_empty());
        p
    }
}

/// A JSON decimal string as a BigDecimal (panics on anything else).
pub fn dec(v: &Value) -> BigDecimal {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("not a decimal string: {v}"));
    assert!(is_plain_decimal(s), "not plain notation: {s}");
    BigDecimal::from_str(s).unwrap()
}

/// Plain decimal notation: optional minus, digits, optional fraction; no exponent.
pub fn is_plain_decimal(s: &str) -> bool {
    let body = s.strip_prefix('-').unwrap_or(s);
    let (int, frac) = body.split_once('.').unwrap_or((body, "0"));
    !int.is_empty()
        && !frac.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
}

/// Percent-encodes a query or path value.
pub fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}
