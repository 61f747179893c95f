//! The deliverer: claims due endpoints from the store's outbox and delivers
//! each one's pending messages in order, one at a time, signing every
//! attempt anew. A 2xx is recorded as delivered (and extends the claim);
//! anything else leaves the message at the head, schedules the endpoint's
//! next attempt (backoff, or `Retry-After` on 429 and 503) and releases it.
//! A 410, or failing for [`DISABLE_AFTER`](crate::schedule::DISABLE_AFTER),
//! disables the endpoint.
//!
//! At-least-once: a message is recorded as delivered only after its 2xx, so
//! a process that dies between the two leaves it to be sent again (after
//! its claim expires), with the same `webhook-id`; a message recorded as
//! delivered is never sent again.
//!
//! The store is called synchronously: the deliverer runs on a thread and
//! runtime of its own ([`spawn`](crate::spawn)), where a short database call
//! only delays the other endpoints' sends by as much.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use market_store::{AttemptFailure, Claim, PendingDelivery, Store, StoreError};
use rand::{Rng, SeedableRng};
use time::OffsetDateTime;

use crate::schedule;
use crate::signature::Secret;
use crate::transport::{Answer, Message, Transport};

/// Time kept in hand, beyond an attempt's timeout, before a claim ends.
const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// The time source (a test's is manual).
pub trait Clock {
    /// Now.
    fn now(&self) -> OffsetDateTime;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> OffsetDateTime {
        (**self).now()
    }
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// How the deliverer works.
#[derive(Clone, Debug)]
pub struct Options {
    /// This process's name in claims (unique per process).
    pub worker: String,
    /// Endpoints delivered to at once.
    pub concurrency: usize,
    /// How long a claim holds without an acknowledged delivery; longer than
    /// one attempt can take, so a live process never loses its claim.
    pub lease: Duration,
    /// How often to look for due endpoints.
    pub poll: Duration,
    /// Messages delivered to one endpoint before its claim is released and
    /// taken again, so that busy endpoints take turns.
    pub turn: usize,
}

impl Options {
    /// The defaults, with a fresh worker name.
    pub fn new() -> Options {
        Options {
            worker: format!(
                "{}-{}-{:08x}",
                hostname(),
                std::process::id(),
                rand::random::<u32>()
            ),
            concurrency: 8,
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(250),
            turn: 500,
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options::new()
    }
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned())
}

/// Counters since start.
#[derive(Debug, Default)]
pub struct Stats {
    /// Messages acknowledged with a 2xx.
    pub delivered: AtomicU64,
    /// Attempts that failed (each is retried, or its endpoint disabled).
    pub failed: AtomicU64,
    /// Endpoints disabled (410, or failing for a day).
    pub disabled: AtomicU64,
}

/// What an attempt's answer means.
enum Verdict {
    Delivered(u16),
    Failed(AttemptFailure, OffsetDateTime),
}

/// Delivers the outbox of one store.
pub struct Deliverer<T, C = SystemClock> {
    store: Store,
    transport: T,
    clock: C,
    options: Options,
    rng: Mutex<rand::rngs::StdRng>,
    stop: AtomicBool,
    wake: tokio::sync::Notify,
    /// Counters since start.
    pub stats: Arc<Stats>,
}

impl<T: Transport, C: Clock> Deliverer<T, C> {
    /// A deliverer; `seed` drives the backoff jitter.
    pub fn new(store: Store, transport: T, clock: C, options: Options, seed: u64) -> Self {
        Deliverer {
            store,
            transport,
            clock,
            options,
            rng: Mutex::new(rand::rngs::StdRng::seed_from_u64(seed)),
            stop: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
            stats: Arc::default(),
        }
    }

    /// Asks [`Deliverer::run`] to stop: no new claims, no further message
    /// after the ones in flight, claims released.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Delivers until [`Deliverer::stop`]: claims due endpoints whenever
    /// fewer than `concurrency` are in hand, and every `poll`.
    pub async fn run(&self) {
        let mut running = FuturesUnordered::new();
        // A busy SQLite file (a long publish holds the write lock) fails a
        // claim now and then: said once a minute, not at every poll.
        let mut warned: Option<std::time::Instant> = None;
        while !self.stopping() {
            let room = self.options.concurrency.saturating_sub(running.len());
            if room > 0 {
                match self.claim(room) {
                    Ok(claims) => {
                        running.extend(claims.into_iter().map(|(c, until)| self.serve(c, until)))
                    }
                    Err(e) => {
                        if warned.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                            log::warn!("webhooks: claiming due endpoints failed (tried again every {:?}): {e}", self.options.poll);
                            warned = Some(std::time::Instant::now());
                        }
                    }
                }
            }
            tokio::select! {
                Some(done) = running.next(), if !running.is_empty() => {
                    if let Err(e) = done {
                        log::warn!("webhooks: a delivery could not be recorded: {e}; its endpoint is retried when its claim expires");
                    }
                }
                _ = tokio::time::sleep(self.options.poll) => {}
                _ = self.wake.notified() => {}
            }
        }
        while let Some(done) = running.next().await {
            if let Err(e) = done {
                log::warn!("webhooks: a delivery could not be recorded at stop: {e}");
            }
        }
    }

    /// One round: claims up to `concurrency` due endpoints and serves them
    /// all (a test's step). Returns how many endpoints it served.
    pub async fn round(&self) -> Result<usize, StoreError> {
        let claims = self.claim(self.options.concurrency)?;
        let n = claims.len();
        let results: Vec<Result<(), StoreError>> = futures_util::future::join_all(
            claims.into_iter().map(|(c, until)| self.serve(c, until)),
        )
        .await;
        results.into_iter().collect::<Result<(), _>>()?;
        Ok(n)
    }

    /// Claims up to `max` due endpoints; each with the time its claim ends.
    fn claim(&self, max: usize) -> Result<Vec<(Claim, OffsetDateTime)>, StoreError> {
        let now = self.clock.now();
        let until = now + self.options.lease;
        Ok(self
            .store
            .claim_webhooks(&self.options.worker, now, self.options.lease, max)?
            .into_iter()
            .map(|c| (c, until))
            .collect())
    }

    /// Delivers one claimed endpoint's messages in order until none is
    /// left, one fails, its turn ends, the claim is lost or too close to its
    /// end (`lease_until`) for another attempt, or the deliverer stops.
    async fn serve(&self, claim: Claim, mut lease_until: OffsetDateTime) -> Result<(), StoreError> {
        let worker = self.options.worker.as_str();
        let endpoint = claim.endpoint_id;
        let secret = Secret::parse(&claim.secret).ok();
        let mut failing_since = claim.failing_since;
        let mut sent = 0usize;
        'turn: loop {
            let batch = self.store.pending_deliveries(endpoint, 100)?;
            if batch.is_empty() {
                break;
            }
            for d in batch {
                // An attempt must end while the claim holds, or another
                // process could take the endpoint over and send the next
                // message before this one lands (a database call that
                // waited long can have eaten the lease).
                let must_end_by = self.clock.now() + crate::transport::TIMEOUT + LEASE_MARGIN;
                if self.stopping() || sent >= self.options.turn || must_end_by > lease_until {
                    break 'turn;
                }
                sent += 1;
                let answer = match &secret {
                    Some(secret) => self.attempt(&claim.url, secret, &d).await,
                    None => Answer::Failed("the stored signing secret is not valid".into()),
                };
                let now = self.clock.now();
                match self.judge(failing_since, &d, answer, secret.is_none(), now) {
                    Verdict::Delivered(code) => {
                        self.stats.delivered.fetch_add(1, Ordering::Relaxed);
                        failing_since = None;
                        let held = self.store.webhook_delivered(
                            worker,
                            endpoint,
                            d.id,
                            code,
                            now,
                            self.options.lease,
                        )?;
                        if !held {
                            log::info!("webhooks: endpoint {endpoint} was disabled, or taken over by another process (this one's claim expired)");
                            return Ok(());
                        }
                        lease_until = now + self.options.lease;
                    }
                    Verdict::Failed(failure, since) => {
                        self.stats.failed.fetch_add(1, Ordering::Relaxed);
                        if let Some(reason) = &failure.disable {
                            self.stats.disabled.fetch_add(1, Ordering::Relaxed);
                            log::warn!("webhooks: endpoint {endpoint} disabled: {reason}");
                        }
                        self.store
                            .webhook_failed(worker, endpoint, d.id, &failure, since, now)?;
                        return Ok(());
                    }
                }
            }
        }
        self.store
            .release_webhook(worker, endpoint, self.clock.now())
    }

    async fn attempt(&self, url: &str, secret: &Secret, d: &PendingDelivery) -> Answer {
        let timestamp = self.clock.now().unix_timestamp();
        let message = Message {
            id: &d.message_id,
            timestamp,
            signature: secret.sign(&d.message_id, timestamp, d.payload.as_bytes()),
            body: &d.payload,
        };
        self.transport.send(url, &message).await
    }

    fn judge(
        &self,
        failing_since: Option<OffsetDateTime>,
        d: &PendingDelivery,
        answer: Answer,
        bad_secret: bool,
        now: OffsetDateTime,
    ) -> Verdict {
        let mut disable = bad_secret.then(|| "its stored signing secret is not valid".to_owned());
        let (status, error, wait) = match answer {
            Answer::Status { code, .. } if (200..300).contains(&code) => {
                return Verdict::Delivered(code)
            }
            Answer::Status {
                code,
                retry_after,
                snippet,
            } => {
                if code == 410 {
                    disable = Some("the endpoint answered 410 Gone".to_owned());
                }
                let wait = if code == 429 || code == 503 {
                    retry_after.and_then(|v| schedule::retry_after(&v, now))
                } else {
                    None
                };
                let error = if snippet.trim().is_empty() {
                    format!("HTTP {code}")
                } else {
                    format!("HTTP {code}: {}", snippet.trim())
                };
                (Some(code), error, wait)
            }
            Answer::Failed(e) => (None, e, None),
        };
        let wait = wait.unwrap_or_else(|| {
            let jitter: f64 = self.rng.lock().expect("jitter rng").random();
            schedule::backoff(d.attempts + 1, jitter)
        });
        let since = failing_since.unwrap_or(now);
        if disable.is_none() && schedule::failed_too_long(since, now) {
            disable = Some(format!(
                "failing since {} (last: {error})",
                since
                    .format(&time::format_description::well_known::Rfc3339)
                    .unwrap_or_default()
            ));
        }
        Verdict::Failed(
            AttemptFailure {
                status,
                error,
                retry_at: now + wait,
                disable,
            },
            since,
        )
    }
}
