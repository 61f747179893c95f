//! Webhook endpoints and their durable outbox.
//!
//! A version writer enqueues one delivery per matching enabled endpoint and
//! position event inside its own transaction ([`enqueue`]), so a rolled-back
//! publish sends nothing and no crash loses an event. Delivering processes
//! claim whole endpoints, since delivery is ordered per endpoint: a claim
//! holds until `claimed_until`, which every acknowledged delivery extends; a
//! process that dies leaves its claim to expire and another one (or itself
//! after a restart) takes the endpoint over from its oldest pending delivery.
//! PostgreSQL claims with `FOR UPDATE SKIP LOCKED`, so replicas never wait
//! for each other; SQLite serializes writers by itself.
//!
//! The policy (what to sign, when to retry, when to give up) is the caller's
//! (`market-webhooks`); this module stores what it decides. Times are epoch
//! milliseconds in the tables and `OffsetDateTime` here.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};
use market_model::{Decimal, EventKind, PositionEvent, PositionEventMessage};
use time::OffsetDateTime;

use crate::convert::epoch_ms;
use crate::schema::{webhook_deliveries, webhook_endpoints};
use crate::{DbConnection, Store, StoreError, MAX_BINDS};

/// The `type` of a `webhook test` message.
pub const TEST_EVENT: &str = "webhook.test";

/// Which position events an endpoint receives: the list's filters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WebhookFilter {
    /// Only this asset symbol.
    pub symbol: Option<String>,
    /// Only this wallet address (lowercase).
    pub address: Option<String>,
    /// Only this kind.
    pub kind: Option<EventKind>,
    /// Only events whose larger value (before or after) is at least this, USD.
    pub min_value: Option<Decimal>,
}

impl WebhookFilter {
    /// Whether `event` passes, by the same rules as the list's filters.
    pub fn matches(&self, event: &PositionEvent) -> bool {
        self.symbol.as_ref().is_none_or(|s| *s == event.symbol)
            && self.address.as_ref().is_none_or(|a| *a == event.address)
            && self.kind.is_none_or(|k| k == event.kind)
            && self.min_value.as_ref().is_none_or(|m| event.reaches(m))
    }
}

/// A registered endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookEndpoint {
    /// Its id (for `webhook disable|enable|test|deliveries`).
    pub id: i64,
    /// Where messages are POSTed.
    pub url: String,
    /// The signing secret, `whsec_` + base64.
    pub secret: String,
    /// Which events it receives.
    pub filter: WebhookFilter,
    /// When it was created.
    pub created_at: OffsetDateTime,
    /// When it was disabled, if it is.
    pub disabled_at: Option<OffsetDateTime>,
    /// Why it was disabled.
    pub disabled_reason: Option<String>,
    /// Since when its oldest pending delivery has failed.
    pub failing_since: Option<OffsetDateTime>,
    /// The next attempt, when it is failing (backoff or `Retry-After`).
    pub next_attempt_at: OffsetDateTime,
}

/// An endpoint with its outbox counts, as `webhook list` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookSummary {
    /// The endpoint.
    pub endpoint: WebhookEndpoint,
    /// Deliveries waiting.
    pub pending: i64,
    /// The last acknowledged delivery.
    pub last_delivered_at: Option<OffsetDateTime>,
}

/// Where a delivery stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryState {
    /// Waiting for (another) attempt.
    Pending,
    /// Acknowledged with a 2xx.
    Delivered,
    /// Given up (a `webhook test` send that failed; event deliveries are
    /// retried until their endpoint is disabled, and resume when it is
    /// enabled).
    Failed,
}

impl DeliveryState {
    /// The stored spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Result<DeliveryState, StoreError> {
        match s {
            "pending" => Ok(DeliveryState::Pending),
            "delivered" => Ok(DeliveryState::Delivered),
            "failed" => Ok(DeliveryState::Failed),
            other => Err(StoreError::Corrupt(format!("delivery state {other:?}"))),
        }
    }
}

/// One delivery, as `webhook deliveries` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryRecord {
    /// Outbox row id (delivery order within an endpoint).
    pub id: i64,
    /// The `webhook-id` header: the same on every attempt.
    pub message_id: String,
    /// The payload's `type`.
    pub event_type: String,
    /// The position event's stream id (none for a test message).
    pub event_seq: Option<i64>,
    /// Where it stands.
    pub state: DeliveryState,
    /// When it was enqueued.
    pub created_at: OffsetDateTime,
    /// Attempts so far.
    pub attempts: u32,
    /// The last attempt.
    pub last_attempt_at: Option<OffsetDateTime>,
    /// The last answer's HTTP status (none: no answer).
    pub last_status: Option<u16>,
    /// What went wrong at the last attempt.
    pub last_error: Option<String>,
    /// When it was acknowledged.
    pub delivered_at: Option<OffsetDateTime>,
}

/// An endpoint a process has claimed for delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The endpoint.
    pub endpoint_id: i64,
    /// Where to POST.
    pub url: String,
    /// The signing secret.
    pub secret: String,
    /// Since when it has been failing.
    pub failing_since: Option<OffsetDateTime>,
}

/// A delivery waiting, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingDelivery {
    /// Outbox row id.
    pub id: i64,
    /// The `webhook-id`.
    pub message_id: String,
    /// The body to POST.
    pub payload: String,
    /// Attempts so far.
    pub attempts: u32,
}

/// A failed attempt, and what the caller's policy decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptFailure {
    /// The answer's HTTP status (none: no answer).
    pub status: Option<u16>,
    /// What went wrong, for `webhook deliveries`.
    pub error: String,
    /// When to try again.
    pub retry_at: OffsetDateTime,
    /// Disable the endpoint, for this reason.
    pub disable: Option<String>,
}

fn ms(t: OffsetDateTime) -> i64 {
    epoch_ms(t)
}

fn at(ms: i64) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(|e| StoreError::Corrupt(format!("time {ms}: {e}")))
}

fn opt_at(ms: Option<i64>) -> Result<Option<OffsetDateTime>, StoreError> {
    ms.map(at).transpose()
}

/// An endpoint as stored (claims aside).
#[derive(Queryable, Selectable)]
#[diesel(table_name = webhook_endpoints)]
struct EndpointRow {
    id: i64,
    url: String,
    secret: String,
    symbol: Option<String>,
    address: Option<String>,
    kind: Option<String>,
    min_value: Option<String>,
    created_at: i64,
    disabled_at: Option<i64>,
    disabled_reason: Option<String>,
    failing_since: Option<i64>,
    next_attempt_at: i64,
}

fn endpoint(r: EndpointRow) -> Result<WebhookEndpoint, StoreError> {
    let kind = r
        .kind
        .map(|k| k.parse::<EventKind>())
        .transpose()
        .map_err(|e| StoreError::Corrupt(format!("webhook kind: {e}")))?;
    let min_value = r
        .min_value
        .map(|m| m.parse::<Decimal>())
        .transpose()
        .map_err(|e| StoreError::Corrupt(format!("webhook min_value: {e}")))?;
    Ok(WebhookEndpoint {
        id: r.id,
        url: r.url,
        secret: r.secret,
        filter: WebhookFilter {
            symbol: r.symbol,
            address: r.address,
            kind,
            min_value,
        },
        created_at: at(r.created_at)?,
        disabled_at: opt_at(r.disabled_at)?,
        disabled_reason: r.disabled_reason,
        failing_since: opt_at(r.failing_since)?,
        next_attempt_at: at(r.next_attempt_at)?,
    })
}

#[derive(Insertable)]
#[diesel(table_name = webhook_deliveries, treat_none_as_default_value = false)]
struct NewDelivery {
    endpoint_id: i64,
    message_id: String,
    event_type: &'static str,
    event_seq: Option<i64>,
    payload: String,
    state: &'static str,
    created_at: i64,
    attempts: i32,
    last_attempt_at: Option<i64>,
    last_status: Option<i32>,
    last_error: Option<String>,
    delivered_at: Option<i64>,
}

impl NewDelivery {
    fn pending(
        endpoint_id: i64,
        event_type: &'static str,
        seq: Option<i64>,
        payload: String,
        now: i64,
    ) -> Self {
        NewDelivery {
            endpoint_id,
            message_id: new_message_id(),
            event_type,
            event_seq: seq,
            payload,
            state: DeliveryState::Pending.as_str(),
            created_at: now,
            attempts: 0,
            last_attempt_at: None,
            last_status: None,
            last_error: None,
            delivered_at: None,
        }
    }
}

/// A fresh `webhook-id`: random, so that ids never repeat across databases
/// (a receiver that deduplicates by id would otherwise drop new messages
/// after a re-created database).
pub fn new_message_id() -> String {
    format!("msg_{:032x}", rand::random::<u128>())
}

/// The body of a position event's message, with the event's stream id.
pub fn event_payload(seq: i64, event: &PositionEvent) -> String {
    serde_json::to_string(&PositionEventMessage {
        kind: PositionEventMessage::TYPE.to_owned(),
        timestamp: event.observed_at,
        event_id: seq,
        data: event.clone(),
    })
    .expect("model types serialize")
}

/// Enqueues, for every enabled endpoint, a delivery of each of `events`
/// (`(stream id, event)`, in stream order) that it matches
/// (inside the caller's version-writing transaction).
pub(crate) fn enqueue(
    conn: &mut DbConnection,
    now: OffsetDateTime,
    events: &[(i64, &PositionEvent)],
) -> Result<usize, StoreError> {
    if events.is_empty() {
        return Ok(0);
    }
    let endpoints = webhook_endpoints::table
        .select(EndpointRow::as_select())
        .filter(webhook_endpoints::disabled_at.is_null())
        .order(webhook_endpoints::id)
        .load::<EndpointRow>(conn)?
        .into_iter()
        .map(endpoint)
        .collect::<Result<Vec<_>, _>>()?;
    let now = ms(now);
    let mut rows = Vec::new();
    for e in &endpoints {
        for (seq, event) in events {
            if e.filter.matches(event) {
                rows.push(NewDelivery::pending(
                    e.id,
                    PositionEventMessage::TYPE,
                    Some(*seq),
                    event_payload(*seq, event),
                    now,
                ));
            }
        }
    }
    let n = rows.len();
    let mut quiet = |_: &str, _: usize, _: usize| {};
    crate::insert_chunked!(
        conn,
        webhook_deliveries::table,
        &rows,
        "webhook deliveries",
        &mut quiet
    );
    Ok(n)
}

/// Deletes finished deliveries enqueued before `before` (retention, inside
/// the caller's transaction); pending ones are kept whatever their age.
pub(crate) fn prune(conn: &mut DbConnection, before: i64) -> Result<(), StoreError> {
    diesel::delete(
        webhook_deliveries::table
            .filter(webhook_deliveries::state.ne(DeliveryState::Pending.as_str()))
            .filter(webhook_deliveries::created_at.lt(before)),
    )
    .execute(conn)?;
    Ok(())
}

#[derive(QueryableByName)]
struct ClaimRow {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    url: String,
    #[diesel(sql_type = Text)]
    secret: String,
    #[diesel(sql_type = Nullable<BigInt>)]
    failing_since: Option<i64>,
}

/// Claims the due endpoints: enabled, past their next attempt, unclaimed or
/// with an expired claim, and with a pending delivery. PostgreSQL skips rows
/// another claimer holds locked (`SKIP LOCKED`); `NO KEY UPDATE`, since a
/// publish enqueuing for the endpoint holds a `KEY SHARE` lock on it (the
/// foreign key) that `FOR UPDATE` would skip it for.
const CLAIM_PG: &str = "UPDATE webhook_endpoints SET claimed_by = $1, claimed_until = $2 \
     WHERE id IN (SELECT e.id FROM webhook_endpoints e \
       WHERE e.disabled_at IS NULL AND e.next_attempt_at <= $3 \
         AND (e.claimed_until IS NULL OR e.claimed_until <= $3) \
         AND EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = e.id AND d.state = 'pending') \
       ORDER BY e.next_attempt_at, e.id LIMIT $4 FOR NO KEY UPDATE SKIP LOCKED) \
     RETURNING id, url, secret, failing_since";
/// The same for SQLite, which serializes writers: the statement runs alone.
const CLAIM_SQLITE: &str = "UPDATE webhook_endpoints SET claimed_by = ?1, claimed_until = ?2 \
     WHERE id IN (SELECT e.id FROM webhook_endpoints e \
       WHERE e.disabled_at IS NULL AND e.next_attempt_at <= ?3 \
         AND (e.claimed_until IS NULL OR e.claimed_until <= ?3) \
         AND EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = e.id AND d.state = 'pending') \
       ORDER BY e.next_attempt_at, e.id LIMIT ?4) \
     RETURNING id, url, secret, failing_since";

impl Store {
    /// Registers an endpoint (enabled, nothing pending).
    pub fn create_webhook(
        &self,
        url: &str,
        secret: &str,
        filter: &WebhookFilter,
        now: OffsetDateTime,
    ) -> Result<WebhookEndpoint, StoreError> {
        let mut pooled = self.conn()?;
        let conn: &mut DbConnection = &mut pooled;
        conn.transaction(|conn| {
            diesel::insert_into(webhook_endpoints::table)
                .values((
                    webhook_endpoints::url.eq(url),
                    webhook_endpoints::secret.eq(secret),
                    webhook_endpoints::symbol.eq(filter.symbol.as_deref()),
                    webhook_endpoints::address.eq(filter.address.as_deref()),
                    webhook_endpoints::kind.eq(filter.kind.map(EventKind::as_str)),
                    webhook_endpoints::min_value
                        .eq(filter.min_value.as_ref().map(|m| m.to_string())),
                    webhook_endpoints::created_at.eq(ms(now)),
                    webhook_endpoints::next_attempt_at.eq(ms(now)),
                ))
                .execute(conn)?;
            // RETURNING is not available through MultiConnection: read back
            // by the secret, which is random.
            let row: EndpointRow = webhook_endpoints::table
                .select(EndpointRow::as_select())
                .filter(webhook_endpoints::secret.eq(secret))
                .order(webhook_endpoints::id.desc())
                .first(conn)?;
            endpoint(row)
        })
    }

    /// One endpoint.
    pub fn webhook(&self, id: i64) -> Result<Option<WebhookEndpoint>, StoreError> {
        let mut conn = self.conn()?;
        webhook_endpoints::table
            .select(EndpointRow::as_select())
            .find(id)
            .first::<EndpointRow>(&mut *conn)
            .optional()?
            .map(endpoint)
            .transpose()
    }

    /// Every endpoint with its outbox counts, by id.
    pub fn webhooks(&self) -> Result<Vec<WebhookSummary>, StoreError> {
        let mut conn = self.conn()?;
        let rows = webhook_endpoints::table
            .select(EndpointRow::as_select())
            .order(webhook_endpoints::id)
            .load::<EndpointRow>(&mut *conn)?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let e = endpoint(row)?;
            let pending: i64 = webhook_deliveries::table
                .filter(webhook_deliveries::endpoint_id.eq(e.id))
                .filter(webhook_deliveries::state.eq(DeliveryState::Pending.as_str()))
                .count()
                .get_result(&mut *conn)?;
            let last: Option<i64> = webhook_deliveries::table
                .filter(webhook_deliveries::endpoint_id.eq(e.id))
                .select(diesel::dsl::max(webhook_deliveries::delivered_at))
                .first(&mut *conn)?;
            out.push(WebhookSummary {
                endpoint: e,
                pending,
                last_delivered_at: opt_at(last)?,
            });
        }
        Ok(out)
    }

    /// Disables an endpoint: it receives no new events and its pending
    /// deliveries wait. Returns whether it exists.
    pub fn disable_webhook(
        &self,
        id: i64,
        reason: &str,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let mut conn = self.conn()?;
        let n = diesel::update(webhook_endpoints::table.find(id))
            .set((
                webhook_endpoints::disabled_at.eq(ms(now)),
                webhook_endpoints::disabled_reason.eq(reason),
            ))
            .execute(&mut *conn)?;
        Ok(n == 1)
    }

    /// Enables an endpoint again: its pending deliveries are tried at once,
    /// and it counts as failing only from its next failure. Returns whether
    /// it exists.
    pub fn enable_webhook(&self, id: i64, now: OffsetDateTime) -> Result<bool, StoreError> {
        let mut conn = self.conn()?;
        let n = diesel::update(webhook_endpoints::table.find(id))
            .set((
                webhook_endpoints::disabled_at.eq(None::<i64>),
                webhook_endpoints::disabled_reason.eq(None::<String>),
                webhook_endpoints::failing_since.eq(None::<i64>),
                webhook_endpoints::next_attempt_at.eq(ms(now)),
            ))
            .execute(&mut *conn)?;
        Ok(n == 1)
    }

    /// An endpoint's deliveries, newest first.
    pub fn webhook_deliveries(
        &self,
        endpoint_id: i64,
        limit: i64,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        type Row = (
            i64,
            String,
            String,
            Option<i64>,
            String,
            i64,
            i32,
            Option<i64>,
            Option<i32>,
            Option<String>,
            Option<i64>,
        );
        let mut conn = self.conn()?;
        let rows = webhook_deliveries::table
            .filter(webhook_deliveries::endpoint_id.eq(endpoint_id))
            .order(webhook_deliveries::id.desc())
            .limit(limit)
            .select((
                webhook_deliveries::id,
                webhook_deliveries::message_id,
                webhook_deliveries::event_type,
                webhook_deliveries::event_seq,
                webhook_deliveries::state,
                webhook_deliveries::created_at,
                webhook_deliveries::attempts,
                webhook_deliveries::last_attempt_at,
                webhook_deliveries::last_status,
                webhook_deliveries::last_error,
                webhook_deliveries::delivered_at,
            ))
            .load::<Row>(&mut *conn)?;
        rows.into_iter()
            .map(|r| {
                Ok(DeliveryRecord {
                    id: r.0,
                    message_id: r.1,
                    event_type: r.2,
                    event_seq: r.3,
                    state: DeliveryState::parse(&r.4)?,
                    created_at: at(r.5)?,
                    attempts: u32::try_from(r.6).unwrap_or(0),
                    last_attempt_at: opt_at(r.7)?,
                    last_status: r.8.and_then(|s| u16::try_from(s).ok()),
                    last_error: r.9,
                    delivered_at: opt_at(r.10)?,
                })
            })
            .collect()
    }

    /// Records a `webhook test` send, already attempted by the caller
    /// (outside the endpoint's order: it is never retried).
    pub fn record_test_delivery(
        &self,
        endpoint_id: i64,
        message_id: &str,
        payload: &str,
        status: Option<u16>,
        error: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let now = ms(now);
        let delivered = error.is_none();
        let mut row = NewDelivery::pending(endpoint_id, TEST_EVENT, None, payload.to_owned(), now);
        row.message_id = message_id.to_owned();
        row.state = if delivered {
            DeliveryState::Delivered.as_str()
        } else {
            DeliveryState::Failed.as_str()
        };
        row.attempts = 1;
        row.last_attempt_at = Some(now);
        row.last_status = status.map(i32::from);
        row.last_error = error.map(str::to_owned);
        row.delivered_at = delivered.then_some(now);
        let mut conn = self.conn()?;
        diesel::insert_into(webhook_deliveries::table)
            .values(&row)
            .execute(&mut *conn)?;
        Ok(())
    }

    /// Claims up to `max` due endpoints for `worker` until `now + lease`.
    pub fn claim_webhooks(
        &self,
        worker: &str,
        now: OffsetDateTime,
        lease: std::time::Duration,
        max: usize,
    ) -> Result<Vec<Claim>, StoreError> {
        let until = ms(now) + lease.as_millis() as i64;
        let now = ms(now);
        let max = max as i64;
        let mut conn = self.conn()?;
        let rows: Vec<ClaimRow> = match &mut *conn {
            DbConnection::Postgresql(c) => diesel::sql_query(CLAIM_PG)
                .bind::<Text, _>(worker)
                .bind::<BigInt, _>(until)
                .bind::<BigInt, _>(now)
                .bind::<BigInt, _>(max)
                .load(c)?,
            DbConnection::Sqlite(c) => diesel::sql_query(CLAIM_SQLITE)
                .bind::<Text, _>(worker)
                .bind::<BigInt, _>(until)
                .bind::<BigInt, _>(now)
                .bind::<BigInt, _>(max)
                .load(c)?,
        };
        let mut claims = rows
            .into_iter()
            .map(|r| {
                Ok(Claim {
                    endpoint_id: r.id,
                    url: r.url,
                    secret: r.secret,
                    failing_since: opt_at(r.failing_since)?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        claims.sort_by_key(|c| c.endpoint_id);
        Ok(claims)
    }

    /// An endpoint's oldest pending deliveries, in delivery order.
    pub fn pending_deliveries(
        &self,
        endpoint_id: i64,
        limit: i64,
    ) -> Result<Vec<PendingDelivery>, StoreError> {
        let mut conn = self.conn()?;
        let rows = webhook_deliveries::table
            .filter(webhook_deliveries::endpoint_id.eq(endpoint_id))
            .filter(webhook_deliveries::state.eq(DeliveryState::Pending.as_str()))
            .order(webhook_deliveries::id)
            .limit(limit)
            .select((
                webhook_deliveries::id,
                webhook_deliveries::message_id,
                webhook_deliveries::payload,
                webhook_deliveries::attempts,
            ))
            .load::<(i64, String, String, i32)>(&mut *conn)?;
        Ok(rows
            .into_iter()
            .map(|(id, message_id, payload, attempts)| PendingDelivery {
                id,
                message_id,
                payload,
                attempts: u32::try_from(attempts).unwrap_or(0),
            })
            .collect())
    }

    /// Records an acknowledged delivery, clears the endpoint's failure and
    /// extends `worker`'s claim to `now + lease`. Returns whether the claim
    /// was still `worker`'s and the endpoint enabled: if not, another
    /// process took the endpoint over or the operator disabled it, and the
    /// caller stops (the delivery is recorded either way, since the
    /// receiver has it).
    pub fn webhook_delivered(
        &self,
        worker: &str,
        endpoint_id: i64,
        delivery_id: i64,
        status: u16,
        now: OffsetDateTime,
        lease: std::time::Duration,
    ) -> Result<bool, StoreError> {
        let until = ms(now) + lease.as_millis() as i64;
        let now = ms(now);
        let mut conn = self.conn()?;
        conn.transaction(|conn| {
            diesel::update(
                webhook_deliveries::table
                    .find(delivery_id)
                    .filter(webhook_deliveries::state.eq(DeliveryState::Pending.as_str())),
            )
            .set((
                webhook_deliveries::state.eq(DeliveryState::Delivered.as_str()),
                webhook_deliveries::attempts.eq(webhook_deliveries::attempts + 1),
                webhook_deliveries::last_attempt_at.eq(now),
                webhook_deliveries::last_status.eq(i32::from(status)),
                webhook_deliveries::last_error.eq(None::<String>),
                webhook_deliveries::delivered_at.eq(now),
            ))
            .execute(conn)?;
            // Not if the operator disabled it meanwhile: its deliveries
            // wait, so this turn ends here.
            let held = diesel::update(
                held_by(worker, endpoint_id, now).filter(webhook_endpoints::disabled_at.is_null()),
            )
            .set((
                webhook_endpoints::claimed_until.eq(until),
                webhook_endpoints::failing_since.eq(None::<i64>),
                webhook_endpoints::next_attempt_at.eq(now),
            ))
            .execute(conn)?;
            Ok(held == 1)
        })
    }

    /// Records a failed attempt: the delivery stays pending, the endpoint
    /// waits until `failure.retry_at` (and is disabled if the policy says
    /// so), and `worker`'s claim is released. Returns whether the claim was
    /// still `worker`'s (if not, the endpoint's schedule is left to its new
    /// holder).
    pub fn webhook_failed(
        &self,
        worker: &str,
        endpoint_id: i64,
        delivery_id: i64,
        failure: &AttemptFailure,
        failing_since: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        let now = ms(now);
        let mut conn = self.conn()?;
        conn.transaction(|conn| {
            diesel::update(
                webhook_deliveries::table
                    .find(delivery_id)
                    .filter(webhook_deliveries::state.eq(DeliveryState::Pending.as_str())),
            )
            .set((
                webhook_deliveries::attempts.eq(webhook_deliveries::attempts + 1),
                webhook_deliveries::last_attempt_at.eq(now),
                webhook_deliveries::last_status.eq(failure.status.map(i32::from)),
                webhook_deliveries::last_error.eq(&failure.error),
            ))
            .execute(conn)?;
            let held = diesel::update(held_by(worker, endpoint_id, now))
                .set((
                    webhook_endpoints::claimed_by.eq(None::<String>),
                    webhook_endpoints::claimed_until.eq(None::<i64>),
                    webhook_endpoints::failing_since.eq(ms(failing_since)),
                    webhook_endpoints::next_attempt_at.eq(ms(failure.retry_at)),
                ))
                .execute(conn)?
                == 1;
            // Only ever disables: an operator's `webhook disable` during the
            // attempt stands.
            if let (true, Some(reason)) = (held, &failure.disable) {
                diesel::update(
                    webhook_endpoints::table
                        .find(endpoint_id)
                        .filter(webhook_endpoints::disabled_at.is_null()),
                )
                .set((
                    webhook_endpoints::disabled_at.eq(now),
                    webhook_endpoints::disabled_reason.eq(reason),
                ))
                .execute(conn)?;
            }
            Ok(held)
        })
    }

    /// Gives up `worker`'s claim on an endpoint (nothing left to deliver, or
    /// the process stops).
    pub fn release_webhook(
        &self,
        worker: &str,
        endpoint_id: i64,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        diesel::update(held_by(worker, endpoint_id, ms(now)))
            .set((
                webhook_endpoints::claimed_by.eq(None::<String>),
                webhook_endpoints::claimed_until.eq(None::<i64>),
            ))
            .execute(&mut *conn)?;
        Ok(())
    }
}

/// An endpoint row while a given worker's claim on it holds.
type HeldBy = diesel::dsl::Filter<
    diesel::dsl::Filter<
        diesel::dsl::Find<webhook_endpoints::table, i64>,
        diesel::dsl::Eq<webhook_endpoints::claimed_by, String>,
    >,
    diesel::dsl::Gt<webhook_endpoints::claimed_until, i64>,
>;

/// The endpoint, if `worker`'s claim on it still holds at `now`.
fn held_by(worker: &str, endpoint_id: i64, now: i64) -> HeldBy {
    webhook_endpoints::table
        .find(endpoint_id)
        .filter(webhook_endpoints::claimed_by.eq(worker.to_owned()))
        .filter(webhook_endpoints::claimed_until.gt(now))
}
