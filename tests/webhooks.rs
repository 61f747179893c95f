//! Webhooks against local receivers: the CLI and `serve` as a user runs
//! them, signatures checked by our verifier and, when
//! `STANDARD_WEBHOOKS_PYTHON` names a Python with the `standardwebhooks`
//! package (CI sets it), by that independent implementation; retries,
//! backoff and `Retry-After` on a manual clock; 410 and a day of failures
//! disabling; private targets refused; replicas delivering each message
//! once; `kill -9` of the delivering server losing nothing.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use market_store::{PoolOptions, SnapshotWrite, Store, WebhookFilter};
use market_webhooks::{Clock, Deliverer, HttpTransport, Options, Secret, TargetPolicy};
use serde_json::Value;
use time::OffsetDateTime;

use crate::shutdown::Server;
use crate::support::*;

/// One request a receiver got.
#[derive(Clone, Debug)]
struct Got {
    id: String,
    timestamp: String,
    signature: String,
    body: String,
    answered: u16,
}

impl Got {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

/// A scripted answer: the status and its `Retry-After`.
type Scripted = (u16, Option<&'static str>);

/// A local receiver answering from a script (then 204), recording every
/// request.
#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Got>>>,
    script: Arc<Mutex<VecDeque<Scripted>>>,
    delay: Arc<Mutex<Duration>>,
    url: String,
}

impl Receiver {
    fn start() -> Receiver {
        let mut r = Receiver::default();
        let state = r.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            actix_web::rt::System::new().block_on(async move {
                let server = HttpServer::new(move || {
                    App::new()
                        .app_data(web::Data::new(state.clone()))
                        .default_service(web::to(receive))
                })
                .workers(1)
                .bind("127.0.0.1:0")
                .unwrap();
                tx.send(server.addrs()[0]).unwrap();
                server.run().await.unwrap();
            })
        });
        r.url = format!("http://{}/hook", rx.recv().unwrap());
        r
    }

    fn answer(&self, answers: &[Scripted]) {
        self.script.lock().unwrap().extend(answers.iter().copied());
    }

    fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    /// Waits until `n` requests were answered 2xx.
    fn wait_acked(&self, n: usize, within: Duration) -> Vec<Got> {
        let started = Instant::now();
        loop {
            let got = self.got();
            if got.iter().filter(|g| g.answered < 300).count() >= n {
                return got;
            }
            assert!(
                started.elapsed() < within,
                "{} of {n} acknowledged after {within:?}",
                got.iter().filter(|g| g.answered < 300).count()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

async fn receive(req: HttpRequest, body: web::Bytes, r: web::Data<Receiver>) -> HttpResponse {
    let delay = *r.delay.lock().unwrap();
    if !delay.is_zero() {
        actix_web::rt::time::sleep(delay).await;
    }
    let (code, retry_after) = r.script.lock().unwrap().pop_front().unwrap_or((204, None));
    let header = |name: &str| {
        req.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    r.got.lock().unwrap().push(Got {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
        body: String::from_utf8(body.to_vec()).unwrap(),
        answered: code,
    });
    let mut answer = HttpResponse::build(actix_web::http::StatusCode::from_u16(code).unwrap());
    if let Some(v) = retry_after {
        answer.insert_header(("retry-after", v));
    }
    if (300..400).contains(&code) {
        // A redirect to the receiver itself: followed, it would be a 204.
        answer.insert_header(("location", req.uri().path().to_owned()));
    }
    // 502: a 1 MiB body.
    answer.body("x".repeat(if code == 502 { 1 << 20 } else { 2 }))
}

/// A clock the test moves.
#[derive(Debug)]
pub(crate) struct ManualClock(Mutex<OffsetDateTime>);

impl ManualClock {
    pub(crate) fn new() -> Arc<ManualClock> {
        // Whole milliseconds, as the store keeps times.
        let now = OffsetDateTime::now_utc();
        let now = now
            .replace_nanosecond(now.nanosecond() / 1_000_000 * 1_000_000)
            .unwrap();
        Arc::new(ManualClock(Mutex::new(now)))
    }
    pub(crate) fn advance(&self, by: Duration) {
        *self.0.lock().unwrap() += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        *self.0.lock().unwrap()
    }
}

/// Writes a new version in which `n` positions (from the `from`-th) are
/// twice as large: `n` `increased` events.
pub(crate) fn change(store: &Store, from: usize, n: usize) {
    let meta = store.latest_snapshot().unwrap().unwrap();
    let mut version = store.load_snapshot(&meta).unwrap().version;
    version.observed_at = OffsetDateTime::now_utc().max(meta.observed_at + Duration::from_secs(1));
    for p in version.positions.iter_mut().skip(from).take(n) {
        p.size = market_model::Decimal(&p.size.0 * bigdecimal::BigDecimal::from(2));
    }
    store
        .write_snapshot(
            &SnapshotWrite {
                source: "demo",
                version: &version,
            },
            &mut |_, _, _| {},
        )
        .unwrap();
}

fn cli(db: &TestDatabase, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_market-data-server"))
        .args(args)
        .args(["--database-url", db.url()])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Registers an endpoint through the CLI; returns its id and secret.
fn create(db: &TestDatabase, url: &str, extra: &[&str]) -> (i64, String) {
    let mut args = vec![
        "webhook",
        "create",
        "--url",
        url,
        "--allow-private-webhook-targets",
    ];
    args.extend_from_slice(extra);
    let (ok, out, err) = cli(db, &args);
    assert!(ok, "{out}{err}");
    let id = out
        .split("created webhook ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    (id, out.lines().last().unwrap().to_owned())
}

fn verify(secret: &str, g: &Got) {
    Secret::parse(secret)
        .unwrap()
        .verify(
            &g.id,
            &g.timestamp,
            g.body.as_bytes(),
            &g.signature,
            OffsetDateTime::now_utc().unix_timestamp(),
        )
        .unwrap_or_else(|e| panic!("{} does not verify: {e}", g.id));
}

/// The Python receiver (`tests/webhooks/receiver.py`), verifying with the
/// `standardwebhooks` package (with the Python `STANDARD_WEBHOOKS_PYTHON`
/// names).
struct PythonReceiver {
    child: std::process::Child,
    log: std::path::PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Drop for PythonReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl PythonReceiver {
    fn start(secret: &str, port: u16, dir: &Path) -> PythonReceiver {
        let python = std::env::var("STANDARD_WEBHOOKS_PYTHON").unwrap();
        let log = dir.join("python-receiver.jsonl");
        let child = Command::new(python)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../tests/webhooks/receiver.py"
            ))
            .args(["--port", &port.to_string(), "--secret", secret])
            .arg("--log")
            .arg(&log)
            .spawn()
            .unwrap();
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the Python receiver did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        PythonReceiver { child, log }
    }

    fn lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn wait_for<T>(within: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(started.elapsed() < within, "{what} within {within:?}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// As a user runs it: `webhook create` (refusing a private URL without the
/// flag), `serve`, a publish, signed deliveries in order to two receivers
/// (one verifying with the `standardwebhooks` package), `webhook test`,
/// `webhook deliveries` and `webhook list`.
#[test]
fn the_cli_and_serve_deliver_signed_events_in_order() {
    let db = seeded_database(Backend::Sqlite);
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start();

    let (ok, _, err) = cli(&db, &["webhook", "create", "--url", &receiver.url]);
    assert!(!ok);
    assert!(
        err.contains("not a public address") && err.contains("--allow-private-webhook-targets"),
        "{err}"
    );
    let (ok, _, err) = cli(&db, &["webhook", "create", "--url", "ftp://example.com/"]);
    assert!(!ok && err.contains("http:// or https://"), "{err}");
    let (ok, _, err) = cli(
        &db,
        &[
            "webhook",
            "create",
            "--url",
            "https://example.com/",
            "--kind",
            "bought",
        ],
    );
    assert!(!ok && err.contains("opened"), "{err}");

    let (every, secret) = create(&db, &receiver.url, &[]);
    assert!(secret.starts_with("whsec_"), "{secret}");
    // A filter nothing matches: nothing is enqueued for it.
    let (none, _) = create(&db, &receiver.url, &["--kind", "flipped"]);
    // The Python receiver's port is chosen first: its URL is registered,
    // then it starts with the secret that printed.
    let python = std::env::var("STANDARD_WEBHOOKS_PYTHON").is_ok().then(|| {
        let port = free_port();
        let (_, secret) = create(&db, &format!("http://127.0.0.1:{port}/hook"), &[]);
        PythonReceiver::start(&secret, port, dir.path())
    });
    if python.is_none() {
        eprintln!(
            "STANDARD_WEBHOOKS_PYTHON is not set: signatures are checked by our verifier only"
        );
    }

    let log = dir.path().join("serve.log");
    let _server = Server::start_with(&db, &["--allow-private-webhook-targets"], &log);
    let writer = Store::open(db.url(), PoolOptions::default()).unwrap();
    change(&writer, 0, 25);
    let got = receiver.wait_acked(25, Duration::from_secs(30));
    let ids: Vec<i64> = got
        .iter()
        .map(|g| g.json()["eventId"].as_i64().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "in order: {ids:?}");
    for g in &got {
        verify(&secret, g);
        let body = g.json();
        assert_eq!(body["type"], "position-event");
        assert_eq!(body["data"]["kind"], "increased");
        assert_eq!(body["timestamp"], body["data"]["observedAt"]);
    }
    // The events as the list serves them, with their stream ids.
    let listed = writer
        .events_after(&market_store::EventFilter::default(), ids[0] - 1, 1000)
        .unwrap();
    for (g, e) in got.iter().zip(&listed) {
        assert_eq!(g.json()["eventId"], e.seq);
        assert_eq!(
            g.json()["data"],
            serde_json::from_str::<Value>(&e.json).unwrap()
        );
    }
    if let Some(p) = &python {
        let lines = wait_for(
            Duration::from_secs(30),
            "25 messages at the Python receiver",
            || {
                let l = p.lines();
                (l.len() >= 25).then_some(l)
            },
        );
        assert!(
            lines.iter().all(|l| l["verified"] == true),
            "standardwebhooks verified every message: {lines:?}"
        );
        let python_ids: Vec<i64> = lines
            .iter()
            .map(|l| l["eventId"].as_i64().unwrap())
            .collect();
        assert_eq!(python_ids, ids);
    }

    // `webhook test`, then the listings.
    let (ok, out, err) = cli(
        &db,
        &[
            "webhook",
            "test",
            &every.to_string(),
            "--allow-private-webhook-targets",
        ],
    );
    assert!(ok && out.contains("answered HTTP 204"), "{out}{err}");
    let test = receiver.got().last().unwrap().clone();
    verify(&secret, &test);
    assert_eq!(test.json()["type"], "webhook.test");
    let (ok, out, _) = cli(
        &db,
        &[
            "webhook",
            "deliveries",
            &every.to_string(),
            "--json",
            "--limit",
            "100",
        ],
    );
    assert!(ok);
    let deliveries: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(deliveries.len(), 26);
    assert!(
        deliveries
            .iter()
            .all(|d| d["state"] == "delivered" && d["attempts"] == 1),
        "{deliveries:?}"
    );
    assert_eq!(deliveries[0]["type"], "webhook.test");
    assert_eq!(deliveries[0]["messageId"], test.id.as_str());
    let (ok, out, _) = cli(&db, &["webhook", "list", "--json"]);
    assert!(ok);
    let list: Vec<Value> = serde_json::from_str(&out).unwrap();
    let by_id: BTreeMap<i64, &Value> = list
        .iter()
        .map(|w| (w["id"].as_i64().unwrap(), w))
        .collect();
    assert_eq!(by_id[&every]["pending"], 0);
    assert_eq!(by_id[&every]["enabled"], true);
    assert_eq!(by_id[&none]["filter"]["kind"], "flipped");
    let (ok, out, _) = cli(&db, &["webhook", "deliveries", &none.to_string(), "--json"]);
    assert!(ok && serde_json::from_str::<Vec<Value>>(&out).unwrap().is_empty());
    let (ok, _, err) = cli(&db, &["webhook", "disable", "999"]);
    assert!(!ok && err.contains("no webhook with id 999"), "{err}");
}

fn deliverer(
    store: &Store,
    clock: &Arc<ManualClock>,
    policy: TargetPolicy,
    worker: &str,
) -> Deliverer<HttpTransport, Arc<ManualClock>> {
    Deliverer::new(
        store.clone(),
        HttpTransport::new(policy).unwrap(),
        clock.clone(),
        Options {
            worker: worker.into(),
            concurrency: 4,
            ..Options::new()
        },
        7,
    )
}

const PRIVATE_OK: TargetPolicy = TargetPolicy {
    allow_private: true,
};

/// One endpoint taking every event on a copy of the seeded database, its
/// receiver, and a deliverer on a manual clock.
struct One {
    _db: TestDatabase,
    store: Store,
    clock: Arc<ManualClock>,
    receiver: Receiver,
    endpoint: market_store::WebhookEndpoint,
    secret: String,
    d: Deliverer<HttpTransport, Arc<ManualClock>>,
}

fn one_endpoint() -> One {
    let db = seeded_database(Backend::Sqlite);
    let store = Store::open(db.url(), PoolOptions::default()).unwrap();
    let clock = ManualClock::new();
    let receiver = Receiver::start();
    let secret = Secret::generate().expose();
    let endpoint = store
        .create_webhook(
            &receiver.url,
            &secret,
            &WebhookFilter::default(),
            clock.now(),
        )
        .unwrap();
    let d = deliverer(&store, &clock, PRIVATE_OK, "w1");
    One {
        _db: db,
        store,
        clock,
        receiver,
        endpoint,
        secret,
        d,
    }
}

/// Retries keep the order and the `webhook-id`, sign every attempt anew,
/// back off exponentially, wait as long as `Retry-After` says on 503, and
/// stop at a 410, which disables the endpoint until it is enabled again.
#[tokio::test(flavor = "current_thread")]
async fn retries_back_off_honour_retry_after_and_stop_at_410() {
    let One {
        _db,
        store,
        clock,
        receiver,
        endpoint: e,
        secret,
        d,
    } = one_endpoint();
    change(&store, 0, 3);
    receiver.answer(&[(500, None), (503, Some("120")), (429, None)]);

    assert_eq!(d.round().await.unwrap(), 1);
    let w = store.webhook(e.id).unwrap().unwrap();
    let first_failure = clock.now();
    assert_eq!(w.failing_since, Some(first_failure));
    let wait = w.next_attempt_at - clock.now();
    assert!(
        wait >= time::Duration::milliseconds(2500) && wait <= time::Duration::seconds(5),
        "{wait}"
    );
    // Not due yet: nothing is sent.
    assert_eq!(d.round().await.unwrap(), 0);
    clock.advance(Duration::from_secs(5));
    assert_eq!(d.round().await.unwrap(), 1);
    let w = store.webhook(e.id).unwrap().unwrap();
    assert_eq!(
        w.next_attempt_at - clock.now(),
        time::Duration::seconds(120),
        "Retry-After: 120"
    );
    clock.advance(Duration::from_secs(119));
    assert_eq!(d.round().await.unwrap(), 0);
    clock.advance(Duration::from_secs(1));
    // A 429 without Retry-After backs off (third attempt: 10-20 s).
    assert_eq!(d.round().await.unwrap(), 1);
    let w = store.webhook(e.id).unwrap().unwrap();
    let wait = w.next_attempt_at - clock.now();
    assert!(
        wait >= time::Duration::seconds(10) && wait <= time::Duration::seconds(20),
        "{wait}"
    );
    assert_eq!(w.failing_since, Some(first_failure));
    clock.advance(Duration::from_secs(20));
    assert_eq!(d.round().await.unwrap(), 1);

    let got = receiver.got();
    let answered: Vec<u16> = got.iter().map(|g| g.answered).collect();
    assert_eq!(answered, [500, 503, 429, 204, 204, 204]);
    // The head was retried with one id, signed at each attempt.
    assert!(got[..4]
        .iter()
        .all(|g| g.id == got[0].id && g.body == got[0].body));
    assert_ne!(got[0].timestamp, got[3].timestamp);
    let seqs: Vec<i64> = got[3..]
        .iter()
        .map(|g| g.json()["eventId"].as_i64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(got[0].id, got[3].id);
    for g in &got {
        let s = Secret::parse(&secret).unwrap();
        s.verify(
            &g.id,
            &g.timestamp,
            g.body.as_bytes(),
            &g.signature,
            g.timestamp.parse().unwrap(),
        )
        .unwrap();
    }
    let w = store.webhook(e.id).unwrap().unwrap();
    assert_eq!(w.failing_since, None);
    let deliveries = store.webhook_deliveries(e.id, 10).unwrap();
    assert_eq!(deliveries.last().unwrap().attempts, 4);
    assert_eq!(deliveries.last().unwrap().last_status, Some(204));

    // 410: disabled at once, the message stays pending; nothing new is
    // enqueued while disabled; enabling sends what waited.
    change(&store, 3, 2);
    receiver.answer(&[(410, None)]);
    assert_eq!(d.round().await.unwrap(), 1);
    let w = store.webhook(e.id).unwrap().unwrap();
    assert!(w.disabled_at.is_some());
    assert_eq!(
        w.disabled_reason.as_deref(),
        Some("the endpoint answered 410 Gone")
    );
    change(&store, 5, 2);
    clock.advance(Duration::from_secs(3600));
    assert_eq!(d.round().await.unwrap(), 0);
    let summary = store.webhooks().unwrap();
    assert_eq!(summary[0].pending, 2);
    assert!(store.enable_webhook(e.id, clock.now()).unwrap());
    assert_eq!(d.round().await.unwrap(), 1);
    assert_eq!(receiver.got().len(), 6 + 1 + 2);
    assert_eq!(store.webhooks().unwrap()[0].pending, 0);
}

/// One attempt is bounded: a redirect is not followed (a failure, retried),
/// a large answer is not read whole, and an answer that takes longer than
/// 10 s is a timeout.
#[tokio::test(flavor = "current_thread")]
async fn one_attempt_is_bounded_in_time_and_size_and_follows_no_redirect() {
    let One {
        _db,
        store,
        clock,
        receiver,
        endpoint: e,
        secret: _,
        d,
    } = one_endpoint();
    change(&store, 0, 1);
    let last = || store.webhook_deliveries(e.id, 1).unwrap().remove(0);

    receiver.answer(&[(302, None)]);
    d.round().await.unwrap();
    assert_eq!(receiver.got().len(), 1, "the redirect was not followed");
    assert_eq!(last().last_status, Some(302));

    // A 1 MiB error body: the attempt records the status and a short
    // snippet of it.
    clock.advance(Duration::from_secs(600));
    receiver.answer(&[(502, None)]);
    d.round().await.unwrap();
    let l = last();
    assert_eq!(l.last_status, Some(502));
    assert!(
        l.last_error.as_ref().unwrap().len() < 300,
        "{:?}",
        l.last_error
    );

    clock.advance(Duration::from_secs(600));
    *receiver.delay.lock().unwrap() = Duration::from_secs(11);
    let started = Instant::now();
    d.round().await.unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(10) && took < Duration::from_secs(11),
        "{took:?}"
    );
    let l = last();
    assert_eq!(l.last_status, None);
    assert!(
        l.last_error
            .as_ref()
            .unwrap()
            .contains("timed out after 10 s"),
        "{:?}",
        l.last_error
    );
    assert_eq!(l.state, market_store::DeliveryState::Pending);
    assert_eq!(l.attempts, 3);
}

/// `webhook disable` during an attempt stands: a failed attempt does not
/// enable the endpoint again, and a successful one ends the turn (the rest
/// waits).
#[tokio::test(flavor = "current_thread")]
async fn disabling_during_an_attempt_stands() {
    let One {
        _db,
        store,
        clock,
        receiver,
        endpoint: e,
        secret: _,
        d,
    } = one_endpoint();
    *receiver.delay.lock().unwrap() = Duration::from_millis(600);
    change(&store, 0, 3);
    let disable_meanwhile = || async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(store
            .disable_webhook(e.id, "disabled by the operator", clock.now())
            .unwrap());
    };

    receiver.answer(&[(500, None)]);
    let (served, ()) = tokio::join!(d.round(), disable_meanwhile());
    assert_eq!(served.unwrap(), 1);
    let w = store.webhook(e.id).unwrap().unwrap();
    assert!(
        w.disabled_at.is_some(),
        "the failed attempt enabled it again"
    );
    assert_eq!(
        w.disabled_reason.as_deref(),
        Some("disabled by the operator")
    );

    assert!(store.enable_webhook(e.id, clock.now()).unwrap());
    let (served, ()) = tokio::join!(d.round(), disable_meanwhile());
    assert_eq!(served.unwrap(), 1);
    assert_eq!(receiver.got().len(), 2, "the turn ended at the disable");
    assert_eq!(store.webhooks().unwrap()[0].pending, 2);
    assert!(store.webhook(e.id).unwrap().unwrap().disabled_at.is_some());
}

/// An endpoint that fails for a day is disabled, with the reason in
/// `webhook list`; its messages wait.
#[tokio::test(flavor = "current_thread")]
async fn a_day_of_failures_disables_the_endpoint() {
    let One {
        _db,
        store,
        clock,
        receiver,
        endpoint: e,
        secret: _,
        d,
    } = one_endpoint();
    change(&store, 0, 1);
    receiver.answer(&[(500, None); 2000]);
    let started = clock.now();
    let mut attempts = 0;
    while store.webhook(e.id).unwrap().unwrap().disabled_at.is_none() {
        attempts += d.round().await.unwrap();
        clock.advance(Duration::from_secs(60));
        assert!(
            clock.now() - started < time::Duration::hours(25),
            "still enabled after 25 h"
        );
    }
    let w = store.webhook(e.id).unwrap().unwrap();
    assert!(w.disabled_at.unwrap() - started >= time::Duration::hours(24));
    assert!(
        w.disabled_reason
            .as_deref()
            .unwrap()
            .starts_with("failing since"),
        "{:?}",
        w.disabled_reason
    );
    assert!(w.disabled_reason.as_deref().unwrap().contains("HTTP 500"));
    // Backoff: a few hundred attempts in the day, at most one per 2.5 s.
    assert!((250..=2000).contains(&attempts), "{attempts} attempts");
    let d1 = &store.webhook_deliveries(e.id, 1).unwrap()[0];
    assert_eq!(d1.state, market_store::DeliveryState::Pending);
    assert_eq!(d1.attempts as usize, attempts);
}

/// Without `--allow-private-webhook-targets`, the deliverer refuses a URL
/// on a private address even when it was registered with the flag; the
/// message waits.
#[tokio::test(flavor = "current_thread")]
async fn private_targets_are_refused_at_delivery() {
    let db = seeded_database(Backend::Sqlite);
    let store = Store::open(db.url(), PoolOptions::default()).unwrap();
    let clock = ManualClock::new();
    let receiver = Receiver::start();
    // `localhost` goes through the resolver; 127.0.0.1 is a literal.
    let by_name = receiver.url.replace("127.0.0.1", "localhost");
    for url in [&receiver.url, &by_name] {
        store
            .create_webhook(
                url,
                &Secret::generate().expose(),
                &WebhookFilter::default(),
                clock.now(),
            )
            .unwrap();
    }
    let d = deliverer(&store, &clock, TargetPolicy::default(), "w1");
    change(&store, 0, 1);
    assert_eq!(d.round().await.unwrap(), 2);
    assert!(receiver.got().is_empty());
    for w in store.webhooks().unwrap() {
        assert_eq!(w.pending, 1);
        let last = &store.webhook_deliveries(w.endpoint.id, 1).unwrap()[0];
        let error = last.last_error.as_deref().unwrap();
        assert!(error.contains("not a public address"), "{error}");
    }
}

/// Several deliverers on one database (replicas) deliver every message
/// exactly once, each endpoint in order.
fn replicas_deliver_each_message_once(backend: Backend) {
    let db = seeded_database(backend);
    let store = Store::open(db.url(), PoolOptions::default()).unwrap();
    let receivers: Vec<Receiver> = (0..3).map(|_| Receiver::start()).collect();
    for r in &receivers {
        store
            .create_webhook(
                &r.url,
                &Secret::generate().expose(),
                &WebhookFilter::default(),
                OffsetDateTime::now_utc(),
            )
            .unwrap();
    }
    let replicas: Vec<_> = (0..3)
        .map(|i| {
            let s = Store::open(db.url(), PoolOptions::default()).unwrap();
            market_webhooks::spawn(
                s,
                PRIVATE_OK,
                Options {
                    worker: format!("replica-{i}"),
                    concurrency: 2,
                    turn: 7,
                    ..Options::new()
                },
            )
            .unwrap()
        })
        .collect();
    for r in &receivers {
        *r.delay.lock().unwrap() = Duration::from_millis(2);
    }
    for round in 0..5 {
        change(&store, round * 20, 20);
    }
    for r in &receivers {
        let got = r.wait_acked(100, Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(300));
        let got_after = r.got();
        assert_eq!(got_after.len(), got.len(), "nothing more arrives");
        let seqs: Vec<i64> = got
            .iter()
            .map(|g| g.json()["eventId"].as_i64().unwrap())
            .collect();
        assert_eq!(seqs.len(), 100, "each once");
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order: {seqs:?}");
    }
    let mut delivered = 0;
    for h in replicas {
        delivered += h
            .stats()
            .delivered
            .load(std::sync::atomic::Ordering::Relaxed);
        h.stop(Duration::from_secs(5));
    }
    assert_eq!(delivered, 300);
}

#[test]
fn replicas_deliver_each_message_once_on_sqlite() {
    replicas_deliver_each_message_once(Backend::Sqlite);
}

#[test]
fn replicas_deliver_each_message_once_on_postgres() {
    if pg_admin_url().is_none() {
        eprintln!("TEST_DATABASE_URL is not set: the PostgreSQL variant is skipped");
        return;
    }
    replicas_deliver_each_message_once(Backend::Postgres);
}

/// `kill -9` of the delivering server mid-run, then a restart: every
/// message arrives, in order of first arrival; the only one sent twice is
/// the one in flight at the kill (acknowledged by the receiver, not yet
/// recorded).
#[test]
fn kill_9_of_the_delivering_server_loses_nothing() {
    let db = seeded_database(Backend::Sqlite);
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start();
    *receiver.delay.lock().unwrap() = Duration::from_millis(10);
    let (_, secret) = create(&db, &receiver.url, &[]);
    let writer = Store::open(db.url(), PoolOptions::default()).unwrap();
    let log = dir.path().join("serve.log");
    let mut server = Server::start_with(&db, &["--allow-private-webhook-targets"], &log);
    change(&writer, 0, 200);
    receiver.wait_acked(40, Duration::from_secs(30));
    server.kill_hard();
    // The request in flight, if any, is recorded once its answer is due.
    std::thread::sleep(Duration::from_millis(200));
    let at_kill = receiver.got().len();
    assert!(at_kill < 200, "the kill came too late to test anything");
    let log = dir.path().join("serve-2.log");
    let _server = Server::start_with(&db, &["--allow-private-webhook-targets"], &log);
    // The dead server's claim expires (30 s), then the new one resumes.
    let got = wait_for(
        Duration::from_secs(90),
        "every message after the restart",
        || {
            let got = receiver.got();
            let distinct: std::collections::BTreeSet<&str> =
                got.iter().map(|g| g.id.as_str()).collect();
            (distinct.len() >= 200).then_some(got.clone())
        },
    );
    let mut first_seen = Vec::new();
    let mut repeated = Vec::new();
    for (i, g) in got.iter().enumerate() {
        verify(&secret, g);
        if got[..i].iter().any(|h| h.id == g.id) {
            repeated.push(i);
        } else {
            first_seen.push(g.json()["eventId"].as_i64().unwrap());
        }
    }
    assert_eq!(first_seen.len(), 200);
    assert!(first_seen.windows(2).all(|w| w[0] < w[1]), "in order");
    // At most the message in flight at the kill came again, first thing
    // after the restart.
    assert!(repeated.len() <= 1, "repeated: {repeated:?}");
    if let Some(&i) = repeated.first() {
        assert_eq!(
            i, at_kill,
            "only the message in flight at the kill is sent again"
        );
        assert_eq!(got[i].id, got[at_kill - 1].id);
    }
}
