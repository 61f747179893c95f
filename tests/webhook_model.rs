//! Webhook delivery against a model.
//!
//! Random sequences of steps drive the real deliverer on a real store:
//! publishes (each enqueues its events for the enabled endpoints that match
//! them), receivers that answer 2xx, 500, 429/503 with `Retry-After`, 410,
//! nothing at all, or take a message and then see the delivering process
//! die (`kill -9`: its claims stay until they expire, a new process takes
//! over), the clock moving (a day of failures included), and the operator
//! disabling and enabling endpoints. The receivers record every attempt.
//! After every step a plain oracle checks what they got and what the store
//! says:
//! - each endpoint's messages come in order, each message only after every
//!   earlier one was acknowledged, and never again after a 2xx unless the
//!   process died before it could record it;
//! - every attempt is signed for its endpoint, with the time of the attempt;
//! - a retry never comes before its backoff's shortest delay, nor before
//!   `Retry-After`;
//! - a 410 disables the endpoint at once, failing for a day disables it,
//!   and a disabled endpoint gets no attempt and no new message;
//! - the store's pending count is what the oracle has not seen
//!   acknowledged.
//!
//! At the end every endpoint is enabled, every receiver answers 2xx, and
//! time passes: every message enqueued arrives, in order (no loss).

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use market_store::{EventFilter, PoolOptions, Store, WebhookFilter};
use market_webhooks::schedule::{self, FIRST_RETRY, MAX_RETRY};
use market_webhooks::{Answer, Clock, Deliverer, Message, Options, Secret, Transport};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use serde_json::Value;
use time::OffsetDateTime;

use crate::support::{seeded_database, Backend};
use crate::webhooks::{change, ManualClock};

/// Endpoints: every event, every event, and one asset's.
const ENDPOINTS: usize = 3;
const LEASE: Duration = Duration::from_secs(30);

/// What a receiver does with the next attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reply {
    Ok,
    Status(u16),
    RetryAfter(u16, u32),
    Gone,
    NoAnswer,
    /// Takes the message, then the delivering process dies before it hears
    /// the answer.
    Crash,
}

#[derive(Clone, Debug)]
enum Step {
    Publish(usize),
    Script(usize, Vec<Reply>),
    Advance(u32),
    Round,
    Disable(usize),
    Enable(usize),
}

/// One attempt a receiver saw.
#[derive(Clone, Debug)]
struct Attempt {
    id: String,
    seq: i64,
    at: OffsetDateTime,
    reply: Reply,
}

#[derive(Default)]
struct Receivers {
    script: BTreeMap<String, VecDeque<Reply>>,
    log: BTreeMap<String, Vec<Attempt>>,
    secrets: BTreeMap<String, Secret>,
    crashed: bool,
    bad_signatures: Vec<String>,
}

#[derive(Clone)]
struct Fake {
    receivers: Rc<RefCell<Receivers>>,
    clock: Arc<ManualClock>,
    crash: Rc<tokio::sync::Notify>,
}

impl Transport for Fake {
    async fn send(&self, url: &str, message: &Message<'_>) -> Answer {
        let reply = {
            let mut r = self.receivers.borrow_mut();
            let now = self.clock.now();
            let ok = r.secrets[url]
                .verify(
                    message.id,
                    &message.timestamp.to_string(),
                    message.body.as_bytes(),
                    &message.signature,
                    now.unix_timestamp(),
                )
                .is_ok()
                && message.timestamp == now.unix_timestamp();
            if !ok {
                r.bad_signatures.push(message.id.to_owned());
            }
            let reply = r
                .script
                .get_mut(url)
                .and_then(VecDeque::pop_front)
                .unwrap_or(Reply::Ok);
            let body: Value = serde_json::from_str(message.body).unwrap();
            r.log.entry(url.to_owned()).or_default().push(Attempt {
                id: message.id.to_owned(),
                seq: body["eventId"].as_i64().unwrap(),
                at: now,
                reply,
            });
            if reply == Reply::Crash {
                r.crashed = true;
            }
            reply
        };
        let status = |code: u16, retry_after: Option<String>| Answer::Status {
            code,
            retry_after,
            snippet: String::new(),
        };
        match reply {
            Reply::Ok => status(200, None),
            Reply::Status(c) => status(c, None),
            Reply::RetryAfter(c, s) => status(c, Some(s.to_string())),
            Reply::Gone => status(410, None),
            Reply::NoAnswer => Answer::Failed("connection refused".into()),
            Reply::Crash => {
                self.crash.notify_one();
                std::future::pending().await
            }
        }
    }
}

/// What the oracle knows of one endpoint.
#[derive(Clone, Debug, Default)]
struct Expect {
    enabled: bool,
    /// Every message enqueued for it, by event id, in order.
    messages: Vec<i64>,
    /// How many of them were acknowledged (a prefix).
    acked: usize,
    /// Since when it has failed.
    failing_since: Option<OffsetDateTime>,
    /// The earliest next attempt allowed.
    not_before: Option<OffsetDateTime>,
    /// Attempts of the log already checked.
    seen: usize,
    /// Failed attempts of the head message.
    head_failures: u32,
    /// The reason it was disabled by the deliverer, if so.
    disabled_by: Option<&'static str>,
    /// Each message's `webhook-id`, by event id.
    message_ids: BTreeMap<i64, String>,
}

struct World {
    store: Store,
    clock: Arc<ManualClock>,
    fake: Fake,
    deliverer: Deliverer<Fake, Arc<ManualClock>>,
    urls: Vec<String>,
    ids: Vec<i64>,
    filters: Vec<WebhookFilter>,
    restarts: u32,
    next_position: usize,
    last_seq: i64,
}

fn deliverer(store: &Store, fake: &Fake, n: u32) -> Deliverer<Fake, Arc<ManualClock>> {
    Deliverer::new(
        store.clone(),
        fake.clone(),
        fake.clock.clone(),
        Options {
            worker: format!("process-{n}"),
            concurrency: 2,
            lease: LEASE,
            poll: Duration::from_millis(1),
            turn: 4,
        },
        u64::from(n),
    )
}

impl World {
    fn new(store: Store) -> World {
        let clock = ManualClock::new();
        let fake = Fake {
            receivers: Rc::default(),
            clock: clock.clone(),
            crash: Rc::new(tokio::sync::Notify::new()),
        };
        // One asset the seeded positions hold, for the filtered endpoint.
        let meta = store.latest_snapshot().unwrap().unwrap();
        let symbol = store.load_snapshot(&meta).unwrap().version.positions[0]
            .symbol
            .clone();
        let filters = vec![
            WebhookFilter::default(),
            WebhookFilter::default(),
            WebhookFilter {
                symbol: Some(symbol),
                ..WebhookFilter::default()
            },
        ];
        let mut urls = Vec::new();
        let mut ids = Vec::new();
        for (i, f) in filters.iter().enumerate() {
            let url = format!("https://receiver-{i}.example/hook");
            let secret = Secret::generate();
            let e = store
                .create_webhook(&url, &secret.expose(), f, clock.now())
                .unwrap();
            fake.receivers
                .borrow_mut()
                .secrets
                .insert(url.clone(), secret);
            urls.push(url);
            ids.push(e.id);
        }
        let last_seq = store.event_bounds().unwrap().last;
        World {
            deliverer: deliverer(&store, &fake, 0),
            store,
            clock,
            fake,
            urls,
            ids,
            filters,
            restarts: 0,
            next_position: 0,
            last_seq,
        }
    }

    /// One round of the deliverer; a crash ends it as `kill -9` would, and
    /// a new process takes over.
    async fn round(&mut self) {
        let crash = self.fake.crash.clone();
        let crashed = tokio::select! {
            r = self.deliverer.round() => { r.unwrap(); false }
            _ = crash.notified() => true,
        };
        if crashed {
            self.restarts += 1;
            self.deliverer = deliverer(&self.store, &self.fake, self.restarts);
            self.fake.receivers.borrow_mut().crashed = false;
        }
    }
}

/// The shortest delay before the `n`-th retry of a message.
fn min_backoff(failures: u32) -> time::Duration {
    let d = schedule::backoff(failures, 0.0);
    assert!(d >= FIRST_RETRY / 2 && d <= MAX_RETRY);
    time::Duration::try_from(d).unwrap()
}

/// Checks the attempts the receivers saw since the last check against the
/// oracle, and moves it on.
fn check(w: &World, expect: &mut [Expect], n: usize) -> Result<(), TestCaseError> {
    let r = w.fake.receivers.borrow();
    prop_assert!(
        r.bad_signatures.is_empty(),
        "step {}: bad signatures {:?}",
        n,
        r.bad_signatures
    );
    for (e, x) in expect.iter_mut().enumerate() {
        let log = r.log.get(&w.urls[e]).cloned().unwrap_or_default();
        for a in &log[x.seen..] {
            prop_assert!(
                x.enabled,
                "step {}: endpoint {} attempted while disabled",
                n,
                e
            );
            // In order: the head, and only after every earlier one's 2xx.
            prop_assert!(
                x.acked < x.messages.len() && a.seq == x.messages[x.acked],
                "step {}: endpoint {} got event {} with {} of {:?} acknowledged",
                n,
                e,
                a.seq,
                x.acked,
                x.messages
            );
            // One id per message, the same at every attempt.
            let id = x.message_ids.entry(a.seq).or_insert_with(|| a.id.clone());
            prop_assert_eq!(
                &*id,
                &a.id,
                "step {}: endpoint {} event {} changed its webhook-id",
                n,
                e,
                a.seq
            );
            if let Some(t) = x.not_before {
                prop_assert!(
                    a.at >= t,
                    "step {}: endpoint {} retried at {} before {}",
                    n,
                    e,
                    a.at,
                    t
                );
            }
            match a.reply {
                Reply::Ok => {
                    x.acked += 1;
                    x.failing_since = None;
                    x.not_before = None;
                    x.head_failures = 0;
                }
                // Taken by the receiver, never heard of by the process: the
                // same message comes again, first.
                Reply::Crash => {}
                failure => {
                    x.head_failures += 1;
                    let since = *x.failing_since.get_or_insert(a.at);
                    x.not_before = Some(match failure {
                        Reply::RetryAfter(429 | 503, s) => {
                            a.at + time::Duration::seconds(i64::from(s))
                        }
                        _ => a.at + min_backoff(x.head_failures),
                    });
                    if failure == Reply::Gone {
                        x.enabled = false;
                        x.disabled_by = Some("the endpoint answered 410 Gone");
                    } else if a.at - since >= time::Duration::days(1) {
                        x.enabled = false;
                        x.disabled_by = Some("failing since");
                    }
                }
            }
        }
        x.seen = log.len();
        let stored = w.store.webhook(w.ids[e]).unwrap().unwrap();
        prop_assert_eq!(
            stored.disabled_at.is_none(),
            x.enabled,
            "step {}: endpoint {} enabled",
            n,
            e
        );
        if let Some(reason) = x.disabled_by {
            if !x.enabled {
                prop_assert!(
                    stored
                        .disabled_reason
                        .as_deref()
                        .unwrap_or_default()
                        .starts_with(reason),
                    "step {}: endpoint {} disabled for {:?}",
                    n,
                    e,
                    stored.disabled_reason
                );
            }
        }
        let pending = w.store.pending_deliveries(w.ids[e], 1_000_000).unwrap();
        let pending_seqs: Vec<i64> = pending
            .iter()
            .map(|d| {
                serde_json::from_str::<Value>(&d.payload).unwrap()["eventId"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        // The store's queue is what was not acknowledged (a message taken
        // by a receiver whose process died before recording it included).
        prop_assert_eq!(
            &pending_seqs[..],
            &x.messages[x.acked..],
            "step {}: endpoint {} pending",
            n,
            e
        );
    }
    Ok(())
}

async fn run(backend: Backend, steps: &[Step]) -> Result<(), TestCaseError> {
    let db = seeded_database(backend);
    let store = Store::open(db.url(), PoolOptions::default()).unwrap();
    let mut w = World::new(store);
    let mut expect = vec![
        Expect {
            enabled: true,
            ..Expect::default()
        };
        ENDPOINTS
    ];
    for (n, step) in steps.iter().enumerate() {
        match step {
            Step::Publish(k) => {
                change(&w.store, w.next_position, *k);
                w.next_position += k;
                let new = w
                    .store
                    .events_after(&EventFilter::default(), w.last_seq, 100_000)
                    .unwrap();
                for ev in &new {
                    let event: market_model::PositionEvent =
                        serde_json::from_str(&ev.json).unwrap();
                    for (e, x) in expect.iter_mut().enumerate() {
                        if x.enabled && w.filters[e].matches(&event) {
                            x.messages.push(ev.seq);
                        }
                    }
                    w.last_seq = ev.seq;
                }
            }
            Step::Script(e, replies) => {
                w.fake
                    .receivers
                    .borrow_mut()
                    .script
                    .entry(w.urls[*e].clone())
                    .or_default()
                    .extend(replies.iter().copied());
            }
            Step::Advance(secs) => w.clock.advance(Duration::from_secs(u64::from(*secs))),
            Step::Round => w.round().await,
            Step::Disable(e) => {
                w.store
                    .disable_webhook(w.ids[*e], "disabled by the operator", w.clock.now())
                    .unwrap();
                expect[*e].enabled = false;
                expect[*e].disabled_by = Some("disabled by the operator");
            }
            Step::Enable(e) => {
                w.store.enable_webhook(w.ids[*e], w.clock.now()).unwrap();
                let x = &mut expect[*e];
                x.enabled = true;
                x.disabled_by = None;
                x.failing_since = None;
                x.not_before = None;
            }
        }
        check(&w, &mut expect, n)?;
    }
    // Liveness: everything enabled and answering, time passing.
    w.fake.receivers.borrow_mut().script.clear();
    for (e, x) in expect.iter_mut().enumerate() {
        if !x.enabled {
            w.store.enable_webhook(w.ids[e], w.clock.now()).unwrap();
            x.enabled = true;
            x.failing_since = None;
            x.not_before = None;
        }
    }
    for _ in 0..1000 {
        if expect.iter().all(|x| x.acked == x.messages.len()) {
            break;
        }
        w.clock.advance(LEASE);
        w.round().await;
        check(&w, &mut expect, steps.len())?;
    }
    for (e, x) in expect.iter().enumerate() {
        prop_assert_eq!(
            x.acked,
            x.messages.len(),
            "endpoint {}: every message arrives",
            e
        );
    }
    Ok(())
}

fn reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        4 => Just(Reply::Ok),
        2 => Just(Reply::Status(500)),
        1 => Just(Reply::Status(400)),
        1 => (prop_oneof![Just(429u16), Just(503u16)], 0u32..400).prop_map(|(c, s)| Reply::RetryAfter(c, s)),
        1 => Just(Reply::Gone),
        1 => Just(Reply::NoAnswer),
        1 => Just(Reply::Crash),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1usize..4).prop_map(Step::Publish),
        3 => (0..ENDPOINTS, proptest::collection::vec(reply(), 1..4)).prop_map(|(e, r)| Step::Script(e, r)),
        3 => prop_oneof![1u32..60, 60u32..900, Just(6 * 3600), Just(25 * 3600)].prop_map(Step::Advance),
        5 => Just(Step::Round),
        1 => (0..ENDPOINTS).prop_map(Step::Disable),
        1 => (0..ENDPOINTS).prop_map(Step::Enable),
    ]
}

fn model(backend: Backend, cases: u32) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runner
        .run(&proptest::collection::vec(step(), 1..40), |steps| {
            runtime.block_on(run(backend, &steps))
        })
        .unwrap();
}

#[test]
fn webhook_delivery_does_what_the_model_says_on_sqlite() {
    model(Backend::Sqlite, 24);
}

#[test]
fn webhook_delivery_does_what_the_model_says_on_postgres() {
    if crate::support::pg_admin_url().is_none() {
        eprintln!("TEST_DATABASE_URL is not set: the PostgreSQL variant is skipped");
        return;
    }
    model(Backend::Postgres, 8);
}
