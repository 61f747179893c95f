//! Serving through a database outage: a TCP proxy of the test's own sits
//! between the server and PostgreSQL, and is cut under load (the shared
//! PostgreSQL itself is never stopped). Snapshot endpoints keep answering
//! 200, database-backed pages get fast 503s, the service recovers by
//! itself, and token usage counts every answered request.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use market_data_server::state::{DbOptions, StateOptions};
use market_store::PoolOptions;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

use crate::support::{
    metric, pg_admin_url, seeded_database, start_app, start_app_with, Backend, TestDatabase,
};
use crate::NET;

/// A TCP proxy that can be cut: every connection through it is closed,
/// and new ones are closed as soon as they are accepted, until restored.
struct CuttableProxy {
    addr: SocketAddr,
    open: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<AbortHandle>>>,
}

impl CuttableProxy {
    async fn start(upstream: String) -> CuttableProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let open = Arc::new(AtomicBool::new(true));
        let links: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (o, l) = (open.clone(), links.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                if !o.load(Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                let upstream = upstream.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                l.lock().unwrap().push(link.abort_handle());
            }
        });
        CuttableProxy { addr, open, links }
    }

    fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }

    fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

/// `host:port` of a PostgreSQL URL.
fn host_port(url: &str) -> &str {
    let rest = &url[url.find("://").map_or(0, |i| i + 3)..];
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    rest.split(['/', '?']).next().unwrap()
}

/// One answered request.
struct Answer {
    /// When it was sent, from the start of the run.
    sent: Duration,
    took: Duration,
    status: u16,
    snapshot: bool,
    retry_after: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_through_a_database_outage() {
    let Some(admin) = pg_admin_url() else {
        eprintln!("TEST_DATABASE_URL is not set: the outage test is skipped");
        return;
    };
    let proxy = CuttableProxy::start(host_port(&admin).to_owned()).await;
    let TestDatabase::Postgres(mut pg) = seeded_database(Backend::Postgres) else {
        unreachable!()
    };
    pg.url = pg
        .url
        .replacen(host_port(&admin), &proxy.addr.to_string(), 1);
    let app = Arc::new(
        start_app(
            Backend::Postgres,
            TestDatabase::Postgres(pg),
            PoolOptions::default(),
        )
        .await,
    );
    assert_eq!(app.readiness().await, "ready");

    // 8 clients: 4 on endpoints served from memory, 4 on database-backed
    // pages that are never in the page cache (each asks for another page).
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let answers: Arc<Mutex<Vec<Answer>>> = Arc::default();
    let unique = Arc::new(AtomicU64::new(0));
    let now_ms = time::OffsetDateTime::now_utc().unix_timestamp() * 1000;
    let mut clients = Vec::new();
    for client in 0..8 {
        let (app, stop, answers, unique) =
            (app.clone(), stop.clone(), answers.clone(), unique.clone());
        clients.push(tokio::spawn(async move {
            let snapshot = client < 4;
            while !stop.load(Ordering::Relaxed) {
                let path = if snapshot {
                    [
                        "/v1/networks".to_owned(),
                        format!("{NET}/markets/BTC"),
                        format!("{NET}/markets/ETH/whale-positions?limit=5"),
                        format!("{NET}/wallets?limit=5"),
                    ][client]
                        .clone()
                } else {
                    let n = unique.fetch_add(1, Ordering::Relaxed);
                    let to = now_ms - (n / 500) as i64 * 3_600_000;
                    format!(
                        "{NET}/markets/BTC/history?interval=1h&limit={}&to={to}",
                        1 + n % 500
                    )
                };
                let sent = started.elapsed();
                let res = app.request(&path, Some(("X-API-Key", &app.token))).await;
                let answer = Answer {
                    sent,
                    took: started.elapsed() - sent,
                    status: res.status().as_u16(),
                    snapshot,
                    retry_after: res.headers().contains_key("retry-after"),
                };
                let _ = res.bytes().await;
                answers.lock().unwrap().push(answer);
            }
        }));
    }

    tokio::time::sleep(Duration::from_millis(1500)).await;
    let cut_at = started.elapsed();
    proxy.cut();
    // Longer than the token cache's 2 s: keys are checked from memory.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(app.readiness().await, "degraded");
    // A liquidity window of the current day only is rendered from memory
    // (a limit not asked before, so not from the page cache).
    let today = app.today();
    app.get_ok(&format!(
        "{NET}/liquidity-levels?fromDate={today}&toDate={today}&limit=3"
    ))
    .await;
    // One that reaches back a day needs the database.
    let yesterday = today.previous_day().unwrap();
    app.get_problem(
        &format!("{NET}/liquidity-levels?fromDate={yesterday}&toDate={today}&limit=3"),
        503,
    )
    .await;
    let state = app.state.clone();
    let flushed = tokio::task::spawn_blocking(move || state.flush_usage())
        .await
        .unwrap();
    assert!(
        flushed.is_err(),
        "usage cannot be written during the outage (and is kept)"
    );
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let restored_at = started.elapsed();
    proxy.restore();
    let ready_after = app.wait_ready(Duration::from_secs(2)).await;
    tokio::time::sleep(Duration::from_millis(2000)).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }

    let answers = std::mem::take(&mut *answers.lock().unwrap());
    let during: Vec<&Answer> = answers
        .iter()
        .filter(|a| a.sent >= cut_at && a.sent < restored_at)
        .collect();
    let (snap, db): (Vec<&Answer>, Vec<&Answer>) = during.iter().partition(|a| a.snapshot);
    assert!(
        snap.len() > 100 && db.len() > 100,
        "load during the outage: {} snapshot, {} database-backed",
        snap.len(),
        db.len()
    );
    // Served from memory: every answer a 200.
    let not_ok: Vec<u16> = snap
        .iter()
        .map(|a| a.status)
        .filter(|s| *s != 200)
        .collect();
    assert!(not_ok.is_empty(), "snapshot endpoints answered {not_ok:?}");
    // Database-backed: 503s with Retry-After, fast (the ones in flight when
    // the cut came may wait for the pool once).
    assert!(
        db.iter().all(|a| a.status == 503 && a.retry_after),
        "database-backed pages during the outage: {:?}",
        db.iter()
            .map(|a| a.status)
            .collect::<std::collections::BTreeSet<_>>()
    );
    let mut took: Vec<Duration> = db.iter().map(|a| a.took).collect();
    took.sort();
    let p99 = took[took.len() * 99 / 100];
    assert!(
        p99 < Duration::from_millis(50),
        "p99 of the 503s: {p99:?} over {}",
        took.len()
    );
    // Recovery: the first database-backed 200 sent after the restore.
    let recovered = answers
        .iter()
        .filter(|a| !a.snapshot && a.status == 200 && a.sent >= restored_at)
        .map(|a| a.sent + a.took)
        .min()
        .expect("database-backed pages recover");
    let recovery = recovered - restored_at;
    assert!(
        recovery < Duration::from_secs(2),
        "recovered after {recovery:?}"
    );
    // Nothing after the recovery is refused.
    assert!(answers
        .iter()
        .filter(|a| a.sent > recovered)
        .all(|a| a.status == 200));

    // The metrics tell the story.
    let text = app.state.render_metrics();
    assert_eq!(metric(&text, "market_data_database_up", &[]), 1.0);
    assert_eq!(
        metric(&text, "market_data_database_outages_total", &[]),
        1.0
    );
    assert!(
        metric(
            &text,
            "market_data_database_refused_total",
            &[("reason", "down")]
        ) >= db.len() as f64 - 16.0,
        "{text}"
    );

    // Every answered request is in the token's usage.
    app.state.flush_usage().unwrap();
    let counted: i64 = app.store.usage(None).unwrap().iter().map(|r| r.count).sum();
    // The clients' answers and the two liquidity pages asked during the outage.
    assert_eq!(counted as usize, answers.len() + 2);
    eprintln!(
        "outage of {:?}: {} snapshot answers (all 200), {} database-backed 503s (p99 {p99:?}, max {:?}); ready {ready_after:?} and database pages back {recovery:?} after the restore; {} requests, all counted",
        restored_at - cut_at,
        snap.len(),
        db.len(),
        took.last().unwrap(),
        answers.len()
    );
}

/// With one render slot and no queue, a burst of uncached pages gets fast
/// 503s beyond the one rendering, while pages served from memory keep
/// answering 200.
async fn a_burst_of_uncached_pages_past_the_render_slots_gets_fast_503s(backend: Backend) {
    let options = StateOptions {
        db: DbOptions {
            concurrency: 1,
            queue: 0,
            ..DbOptions::default()
        },
        ..StateOptions::default()
    };
    let app = Arc::new(
        start_app_with(
            backend,
            seeded_database(backend),
            PoolOptions::default(),
            options,
        )
        .await,
    );
    app.get_ok(&format!("{NET}/markets/BTC")).await; // verifies the key
    let (mut busy, mut rendered, mut memory) = (0, 0, 0);
    for round in 0..20 {
        let burst: Vec<_> = (0..32)
            .map(|i| {
                let app = app.clone();
                tokio::spawn(async move {
                    let path = format!(
                        "{NET}/markets/BTC/history?interval=1h&limit={}",
                        1 + round * 32 + i
                    );
                    let started = Instant::now();
                    let res = app.request(&path, Some(("X-API-Key", &app.token))).await;
                    let status = res.status().as_u16();
                    let retry = res
                        .headers()
                        .get("retry-after")
                        .map(|v| v.to_str().unwrap().to_owned());
                    let body: serde_json::Value = res.json().await.unwrap();
                    (status, retry, body, started.elapsed())
                })
            })
            .collect();
        let detail = app.get_ok(&format!("{NET}/markets/BTC")).await;
        assert_eq!(detail["symbol"], "BTC");
        memory += 1;
        for task in burst {
            let (status, retry, body, took) = task.await.unwrap();
            match status {
                200 => rendered += 1,
                503 => {
                    busy += 1;
                    assert_eq!(retry.as_deref(), Some("1"));
                    assert!(
                        body["detail"].as_str().unwrap().contains("uncached pages"),
                        "{body}"
                    );
                    assert!(took < Duration::from_secs(1), "a refusal took {took:?}");
                }
                other => panic!("status {other}: {body}"),
            }
        }
        if busy > 0 && round >= 2 {
            break;
        }
    }
    assert!(
        busy > 0 && rendered > 0,
        "{busy} refused, {rendered} rendered"
    );
    let text = app.state.render_metrics();
    assert_eq!(
        metric(
            &text,
            "market_data_database_refused_total",
            &[("reason", "busy")]
        ),
        busy as f64
    );
    assert_eq!(metric(&text, "market_data_database_up", &[]), 1.0);
    eprintln!("{busy} refused at once, {rendered} rendered, {memory} memory pages all 200");
}

/// While the database is down, a key verified before keeps working from
/// memory until its grace (counted from its last verification) ends; then
/// it gets a 503, not a 401, until the database answers again.
async fn a_key_works_from_memory_for_its_grace_while_the_database_is_down(backend: Backend) {
    let grace = Duration::from_secs(3);
    let options = StateOptions {
        db: DbOptions {
            token_grace: grace,
            ..DbOptions::default()
        },
        ..StateOptions::default()
    };
    let pool = PoolOptions::default();
    let app = start_app_with(backend, seeded_database(backend), pool, options).await;
    let detail = format!("{NET}/markets/BTC");
    app.get_ok(&detail).await;
    let verified = Instant::now();
    // Every connection taken: the probe cannot get one either.
    let held: Vec<_> = (0..pool.max_size)
        .map(|_| app.store.raw_connection().unwrap())
        .collect();
    app.state.db.mark_down("the test holds every connection");
    // Past the token cache's 2 s, within the grace.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    app.get_ok(&detail).await;
    tokio::time::sleep(grace.saturating_sub(verified.elapsed()) + Duration::from_millis(100)).await;
    let p = app.get_problem(&detail, 503).await;
    assert!(
        p["detail"].as_str().unwrap().contains("cannot be checked"),
        "{p}"
    );
    drop(held);
    app.wait_ready(Duration::from_secs(2)).await;
    app.get_ok(&detail).await;
}

crate::on_both_backends!(
    a_burst_of_uncached_pages_past_the_render_slots_gets_fast_503s,
    a_key_works_from_memory_for_its_grace_while_the_database_is_down,
);
