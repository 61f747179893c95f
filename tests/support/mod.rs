//! Test harness: a seeded template database (SQLite file, and PostgreSQL
//! database when `TEST_DATABASE_URL` is set) copied per test, the real app on
//! port 0, a real HTTP client.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use bigdecimal::BigDecimal;
use diesel::connection::SimpleConnection;
use diesel::Connection;
use market_data_server::{app, seed, state::AppState, tokens};
use market_store::{PoolOptions, Store};
use serde_json::Value;
use time::{Date, OffsetDateTime};

/// Wallets in the test dataset (the demo generator at a smaller scale).
pub const WALLETS: usize = 400;
/// Seed of the test dataset.
pub const SEED: u64 = 7;
/// Days of demo history in the test datasets (the demo's 90 days would triple the template's size).
pub const HISTORY_DAYS: u32 = 2;

/// Where a test's database lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The PostgreSQL server for tests, from `TEST_DATABASE_URL` (any database on it;
/// tests create and drop their own).
pub fn pg_admin_url() -> Option<String> {
    std::env::var("TEST_DATABASE_URL")
        .ok()
        .filter(|s| !s.trim().is_empty())
}

/// `url` with its database name replaced.
pub fn pg_url_for(url: &str, db: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{db}", &base[..path_start]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

fn pg_admin() -> diesel::PgConnection {
    let url = pg_admin_url().expect("TEST_DATABASE_URL");
    diesel::PgConnection::establish(&url)
        .unwrap_or_else(|e| panic!("TEST_DATABASE_URL is set but PostgreSQL is unreachable ({e}); unset it to skip the PostgreSQL suite"))
}

fn pid_alive(pid: &str) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// A database created for one test (or template) and dropped afterwards.
pub struct PgDatabase {
    pub name: String,
    pub url: String,
}

impl PgDatabase {
    /// An empty database, or a copy of `template`.
    pub fn create(template: Option<&str>) -> PgDatabase {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let pid = std::process::id();
        let name = format!("mds_test_{pid}_{}", COUNTER.fetch_add(1, Ordering::SeqCst));
        let mut admin = pg_admin();
        let sql = match template {
            Some(t) => format!("CREATE DATABASE {name} TEMPLATE {t}"),
            None => format!("CREATE DATABASE {name}"),
        };
        admin
            .batch_execute(&sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        PgDatabase {
            url: pg_url_for(&pg_admin_url().unwrap(), &name),
            name,
        }
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        if let Ok(mut admin) = diesel::PgConnection::establish(&pg_admin_url().unwrap_or_default())
        {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// A migrated PostgreSQL database that `fill` wrote, ready to be copied as a
/// template.
fn pg_template(fill: impl FnOnce(&Store)) -> PgDatabase {
    drop_stale_pg_databases_once();
    let db = PgDatabase::create(None);
    let store = Store::open(&db.url, PoolOptions::default()).unwrap();
    store.migrate().unwrap();
    fill(&store);
    drop(store);
    // A template must have no open connections while it is copied.
    pg_admin()
        .batch_execute(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}' AND pid <> pg_backend_pid()",
            db.name
        ))
        .unwrap();
    db
}

/// [`drop_stale_pg_databases`], once per test process.
fn drop_stale_pg_databases_once() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(drop_stale_pg_databases);
}

/// Drops databases left behind by test processes that no longer exist.
fn drop_stale_pg_databases() {
    use diesel::prelude::*;
    #[derive(QueryableByName)]
    struct Name {
        #[diesel(sql_type = diesel::sql_types::Text)]
        datname: String,
    }
    let mut admin = pg_admin();
    let names: Vec<Name> =
        diesel::sql_query("SELECT datname FROM pg_database WHERE datname LIKE 'mds\\_test\\_%'")
            .load(&mut admin)
            .unwrap();
    for n in names {
        let pid = n.datname.split('_').nth(2).unwrap_or("");
        if !pid_alive(pid) {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                n.datname
            ));
        }
    }
}

struct Templates {
    sqlite_dir: PathBuf,
    postgres: Option<PgDatabase>,
    now: OffsetDateTime,
}

/// The instant every test dataset is generated at (shared, so both backends hold identical data).
pub fn seeded_at() -> OffsetDateTime {
    templates().now
}

fn templates() -> &'static Templates {
    static T: OnceLock<Templates> = OnceLock::new();
    T.get_or_init(|| {
        let now = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap();
        let sqlite_dir = tempfile::Builder::new()
            .prefix("mds-template-")
            .tempdir()
            .unwrap()
            .keep();
        let store = Store::open(
            sqlite_dir.join("template.db").to_str().unwrap(),
            PoolOptions::default(),
        )
        .unwrap();
        store.migrate().unwrap();
        seed::seed_demo_with_history(&store, WALLETS, SEED, now, HISTORY_DAYS).unwrap();
        drop(store); // folds the WAL into the file so a plain copy is complete
        let postgres = pg_admin_url().map(|_| {
            pg_template(|store| {
                seed::seed_demo_with_history(store, WALLETS, SEED, now, HISTORY_DAYS).unwrap();
            })
        });
        Templates {
            sqlite_dir,
            postgres,
            now,
        }
    })
}

/// A fresh database for one test, holding the seeded template data.
pub enum TestDatabase {
    Sqlite {
        url: String,
        _dir: tempfile::TempDir,
    },
    Postgres(PgDatabase),
    /// Another app's database (a second replica); not dropped by this handle.
    Shared(String),
}

impl TestDatabase {
    pub fn url(&self) -> &str {
        match self {
            TestDatabase::Sqlite { url, .. } => url,
            TestDatabase::Postgres(db) => &db.url,
            TestDatabase::Shared(url) => url,
        }
    }

    /// The PostgreSQL database name, if any.
    pub fn pg_name(&self) -> Option<&str> {
        match self {
            TestDatabase::Postgres(db) => Some(&db.name),
            _ => None,
        }
    }
}

/// An admin connection to the test PostgreSQL server.
pub fn pg_admin_connection() -> diesel::PgConnection {
    pg_admin()
}

/// A copy of the seeded template on `backend`.
pub fn seeded_database(backend: Backend) -> TestDatabase {
    let t = templates();
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("app.db");
            std::fs::copy(t.sqlite_dir.join("template.db"), &db).unwrap();
            TestDatabase::Sqlite {
                url: db.to_str().unwrap().to_owned(),
                _dir: dir,
            }
        }
        Backend::Postgres => {
            let template = t.postgres.as_ref().expect("TEST_DATABASE_URL is set");
            TestDatabase::Postgres(PgDatabase::create(Some(&template.name)))
        }
    }
}

/// A migrated database with no data on `backend`, for writers under test
/// (PostgreSQL: a copy of one migrated template, which is far quicker than
/// migrating every database).
pub fn empty_database(backend: Backend) -> TestDatabase {
    match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let url = dir.path().join("empty.db").to_str().unwrap().to_owned();
            Store::open(&url, PoolOptions::default())
                .unwrap()
                .migrate()
                .unwrap();
            TestDatabase::Sqlite { url, _dir: dir }
        }
        Backend::Postgres => {
            static TEMPLATE: OnceLock<PgDatabase> = OnceLock::new();
            let template = TEMPLATE.get_or_init(|| pg_template(|_| {}));
            TestDatabase::Postgres(PgDatabase::create(Some(&template.name)))
        }
    }
}

/// A running app on its own copy of the seeded database.
pub struct TestApp {
    pub backend: Backend,
    pub addr: String,
    pub token: String,
    pub client: reqwest::Client,
    pub wallets: usize,
    pub store: Store,
    pub state: Arc<AppState>,
    today: Date,
    // Dropped last: the database outlives the handles above.
    pub db: TestDatabase,
}

/// Starts the real app on a fresh copy of the seeded database.
pub async fn spawn_app(backend: Backend) -> TestApp {
    let db = seeded_database(backend);
    start_app(backend, db, PoolOptions::default()).await
}

/// Starts the real app on `db`.
pub async fn start_app(backend: Backend, db: TestDatabase, pool: PoolOptions) -> TestApp {
    start_app_limited(backend, db, pool, Default::default()).await
}

/// Starts the real app on `db` with request limits.
pub async fn start_app_limited(
    backend: Backend,
    db: TestDatabase,
    pool: PoolOptions,
    limits: market_data_server::ratelimit::LimitOptions,
) -> TestApp {
    let options = market_data_server::state::StateOptions {
        limits,
        ..Default::default()
    };
    start_app_with(backend, db, pool, options).await
}

/// Starts the real app on `db` set up by `options`.
pub async fn start_app_with(
    backend: Backend,
    db: TestDatabase,
    pool: PoolOptions,
    options: market_data_server::state::StateOptions,
) -> TestApp {
    let store = Store::open(db.url(), pool).unwrap();
    store.migrate().unwrap();
    let token = tokens::generate();
    store
        .create_token("test", &tokens::hash(&token), &tokens::hint(&token), None)
        .unwrap();
    let state = AppState::with_options(store.clone(), options).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = format!("http://{}", listener.local_addr().unwrap());
    let server = app::serve(listener, state.clone(), app::ServeOptions::default()).unwrap();
    tokio::spawn(server);
    TestApp {
        backend,
        addr,
        token,
        // Idle connections are dropped before the server's 5 s keep-alive closes them.
        client: reqwest::Client::builder()
            .pool_idle_timeout(std::time::Duration::from_secs(2))
            .build()
            .unwrap(),
        wallets: WALLETS,
        store,
        state,
        today: templates().now.date(),
        db,
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

    /// GET with the key; (`X-Data-Version`, JSON body).
    pub async fn get_versioned(&self, path: &str) -> (String, Value) {
        let res = self.request(path, Some(("X-API-Key", &self.token))).await;
        let version = res.headers()["x-data-version"].to_str().unwrap().to_owned();
        (version, res.json().await.unwrap())
    }

    /// GET with the key; (status, body text).
    pub async fn get_raw(&self, path: &str) -> (u16, String) {
        let res = self.request(path, Some(("X-API-Key", &self.token))).await;
        (res.status().as_u16(), res.text().await.unwrap())
    }

    /// GET with the key, asserting 200 and JSON.
    /// `/readyz`'s `status`: `ready`, `degraded` (database unreachable),
    /// or the problem's status code while stopping.
    pub async fn readiness(&self) -> String {
        let res = self.request("/readyz", None).await;
        match res.status().as_u16() {
            200 => res.json::<Value>().await.unwrap()["status"]
                .as_str()
                .unwrap()
                .to_owned(),
            other => other.to_string(),
        }
    }

    /// Waits until `/readyz` says `ready`; panics after `within`.
    pub async fn wait_ready(&self, within: std::time::Duration) -> std::time::Duration {
        let started = std::time::Instant::now();
        while self.readiness().await != "ready" {
            assert!(
                started.elapsed() < within,
                "not ready again within {within:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        started.elapsed()
    }

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

/// Runs each listed `async fn(Backend)` as a test on SQLite, and on PostgreSQL
/// when `TEST_DATABASE_URL` is set.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name($crate::support::Backend::Sqlite).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    if $crate::support::pg_admin_url().is_none() {
                        eprintln!("TEST_DATABASE_URL is not set: the PostgreSQL variant is skipped");
                        return;
                    }
                    super::$name($crate::support::Backend::Postgres).await
                }
            )*
        }
    };
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

#[test]
fn pg_urls_swap_the_database() {
    assert_eq!(
        pg_url_for("postgres://u@h:5432/postgres", "x"),
        "postgres://u@h:5432/x"
    );
    assert_eq!(
        pg_url_for("postgresql://u:p@h/db?sslmode=disable", "x"),
        "postgresql://u:p@h/x?sslmode=disable"
    );
    assert_eq!(pg_url_for("postgres://h", "x"), "postgres://h/x");
}

/// The sum of the samples of metric `name` in a Prometheus text exposition
/// whose labels include every pair of `labels` (0 when none matches).
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut total = 0.0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').expect("`series value` lines");
        let (series_name, series_labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        if series_name != name {
            continue;
        }
        let pairs: Vec<(&str, &str)> = series_labels
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').expect("label=value");
                (k, v.trim_matches('"'))
            })
            .collect();
        if labels.iter().all(|want| pairs.contains(want)) {
            total += value.parse::<f64>().expect("a number");
        }
    }
    total
}
