//! `webhook …`: registering endpoints, listing them and their deliveries,
//! disabling and enabling them, and sending a test message.

use anyhow::Context;
use clap::{Args, Subcommand};
use market_model::params::{Amount, WalletAddress};
use market_model::timestamp::format_utc;
use market_model::EventKind;
use market_store::{DeliveryRecord, Store, WebhookEndpoint, WebhookFilter, WebhookSummary};
use market_webhooks::{Answer, Message, Secret, TargetPolicy, Transport};
use serde_json::json;
use time::OffsetDateTime;

use super::common::{fmt_time, open_store, DbArgs};

/// Where webhooks may be delivered.
#[derive(Args, Debug, Clone, Copy)]
pub struct TargetArgs {
    /// Allow webhook URLs on loopback, private, link-local or metadata
    /// addresses (refused otherwise, when registered and at every delivery):
    /// for a receiver on the operator's own network, and tests.
    #[arg(long, env = "ALLOW_PRIVATE_WEBHOOK_TARGETS")]
    pub allow_private_webhook_targets: bool,
}

impl TargetArgs {
    /// The policy these flags select.
    pub fn policy(self) -> TargetPolicy {
        TargetPolicy {
            allow_private: self.allow_private_webhook_targets,
        }
    }
}

/// Webhook subcommands.
#[derive(Subcommand, Debug)]
pub enum WebhookCommand {
    /// Register an endpoint for position events (the list's filters; none:
    /// every event) and print its signing secret once, alone on the last
    /// line of stdout. Running servers deliver to it from the next publish.
    Create {
        /// Where to POST: an http:// or https:// URL.
        #[arg(long)]
        url: String,
        /// Only this asset (its network symbol, as events name it: `BTC`, `xyz:TSLA`).
        #[arg(long)]
        asset: Option<String>,
        /// Only this kind of event.
        #[arg(long, value_parser = parse_kind)]
        kind: Option<EventKind>,
        /// Only events whose larger value (before or after) is at least this, USD.
        #[arg(long, value_parser = Amount::parse)]
        min_value: Option<Amount>,
        /// Only this wallet.
        #[arg(long, value_parser = WalletAddress::parse)]
        address: Option<WalletAddress>,
        /// Target policy.
        #[command(flatten)]
        targets: TargetArgs,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
    /// List endpoints: state (and why disabled), filters, pending deliveries.
    List {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
    /// Disable an endpoint: it gets no new events, and its pending
    /// deliveries wait until it is enabled.
    Disable {
        /// Endpoint id (from `webhook list`).
        id: i64,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
    /// Enable an endpoint: its pending deliveries are sent at once, in order.
    Enable {
        /// Endpoint id (from `webhook list`).
        id: i64,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
    /// Send a signed `webhook.test` message now, from this process, and
    /// print the answer (outside the endpoint's order; never retried).
    /// Exits 1 when the endpoint does not answer 2xx.
    Test {
        /// Endpoint id (from `webhook list`).
        id: i64,
        /// Target policy.
        #[command(flatten)]
        targets: TargetArgs,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
    /// An endpoint's deliveries, newest first.
    Deliveries {
        /// Endpoint id (from `webhook list`).
        id: i64,
        /// How many.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(i64).range(1..=1_000_000))]
        limit: i64,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
}

fn parse_kind(s: &str) -> Result<EventKind, String> {
    s.parse::<EventKind>().map_err(|e| e.to_string())
}

fn found(store: &Store, id: i64) -> anyhow::Result<WebhookEndpoint> {
    store
        .webhook(id)?
        .with_context(|| format!("no webhook with id {id} (see `webhook list`)"))
}

fn filter_text(f: &WebhookFilter) -> String {
    let mut parts = Vec::new();
    if let Some(s) = &f.symbol {
        parts.push(format!("asset={s}"));
    }
    if let Some(k) = f.kind {
        parts.push(format!("kind={k}"));
    }
    if let Some(m) = &f.min_value {
        parts.push(format!("minValue={m}"));
    }
    if let Some(a) = &f.address {
        parts.push(format!("address={a}"));
    }
    if parts.is_empty() {
        "every event".to_owned()
    } else {
        parts.join(" ")
    }
}

fn state_text(e: &WebhookEndpoint) -> String {
    match (&e.disabled_at, &e.disabled_reason) {
        (Some(at), reason) => format!(
            "disabled {}: {}",
            format_utc(*at),
            reason.as_deref().unwrap_or("-")
        ),
        (None, _) => match e.failing_since {
            Some(since) => format!(
                "enabled, failing since {}, next attempt {}",
                format_utc(since),
                format_utc(e.next_attempt_at)
            ),
            None => "enabled".to_owned(),
        },
    }
}

fn summary_json(s: &WebhookSummary) -> serde_json::Value {
    let e = &s.endpoint;
    json!({
        "id": e.id,
        "url": e.url,
        "filter": {
            "asset": e.filter.symbol,
            "kind": e.filter.kind.map(EventKind::as_str),
            "minValue": e.filter.min_value.as_ref().map(|m| m.to_string()),
            "address": e.filter.address,
        },
        "enabled": e.disabled_at.is_none(),
        "disabledAt": e.disabled_at.map(format_utc),
        "disabledReason": e.disabled_reason,
        "failingSince": e.failing_since.map(format_utc),
        "nextAttemptAt": e.failing_since.map(|_| format_utc(e.next_attempt_at)),
        "pending": s.pending,
        "lastDeliveredAt": s.last_delivered_at.map(format_utc),
        "createdAt": format_utc(e.created_at),
    })
}

fn delivery_json(d: &DeliveryRecord) -> serde_json::Value {
    json!({
        "id": d.id,
        "messageId": d.message_id,
        "type": d.event_type,
        "eventId": d.event_seq,
        "state": d.state.as_str(),
        "attempts": d.attempts,
        "lastStatus": d.last_status,
        "lastError": d.last_error,
        "createdAt": format_utc(d.created_at),
        "lastAttemptAt": d.last_attempt_at.map(format_utc),
        "deliveredAt": d.delivered_at.map(format_utc),
    })
}

/// Runs a webhook subcommand.
pub fn run(command: WebhookCommand) -> anyhow::Result<()> {
    match command {
        WebhookCommand::Create {
            url,
            asset,
            kind,
            min_value,
            address,
            targets,
            db,
        } => {
            market_webhooks::target::check_resolved(&url, targets.policy())?;
            if let Some(a) = &asset {
                anyhow::ensure!(
                    !a.trim().is_empty() && a.len() <= 64,
                    "--asset must be an asset symbol (e.g. BTC)"
                );
            }
            let store = open_store(&db, 1)?;
            let secret = Secret::generate().expose();
            let filter = WebhookFilter {
                symbol: asset,
                address: address.map(|a| a.as_str().to_owned()),
                kind,
                min_value: min_value.map(|m| m.0),
            };
            let e = store.create_webhook(&url, &secret, &filter, OffsetDateTime::now_utc())?;
            println!(
                "created webhook {} → {} ({}); running servers deliver to it from the next publish",
                e.id,
                e.url,
                filter_text(&e.filter)
            );
            println!("Signing secret (shown once; verify with any Standard Webhooks library):");
            println!("{secret}");
        }
        WebhookCommand::List { json, db } => {
            let store = open_store(&db, 1)?;
            let list = store.webhooks()?;
            if json {
                let items: Vec<_> = list.iter().map(summary_json).collect();
                println!("{}", serde_json::to_string_pretty(&items)?);
            } else {
                println!(
                    "{:>4}  {:<40}  {:<30}  {:>8}  {:<24}  STATE",
                    "ID", "URL", "FILTER", "PENDING", "LAST DELIVERED"
                );
                for s in &list {
                    let e = &s.endpoint;
                    println!(
                        "{:>4}  {:<40}  {:<30}  {:>8}  {:<24}  {}",
                        e.id,
                        e.url,
                        filter_text(&e.filter),
                        s.pending,
                        fmt_time(s.last_delivered_at),
                        state_text(e)
                    );
                }
            }
        }
        WebhookCommand::Disable { id, db } => {
            let store = open_store(&db, 1)?;
            anyhow::ensure!(
                store.disable_webhook(id, "disabled by the operator", OffsetDateTime::now_utc())?,
                "no webhook with id {id} (see `webhook list`)"
            );
            println!("webhook {id} disabled: it gets no new events; its pending deliveries wait for `webhook enable {id}`");
        }
        WebhookCommand::Enable { id, db } => {
            let store = open_store(&db, 1)?;
            anyhow::ensure!(
                store.enable_webhook(id, OffsetDateTime::now_utc())?,
                "no webhook with id {id} (see `webhook list`)"
            );
            println!("webhook {id} enabled: its pending deliveries are sent now, in order");
        }
        WebhookCommand::Test { id, targets, db } => {
            let store = open_store(&db, 1)?;
            let endpoint = found(&store, id)?;
            let delivered = send_test(&store, &endpoint, targets.policy())?;
            if !delivered {
                std::process::exit(1);
            }
        }
        WebhookCommand::Deliveries {
            id,
            limit,
            json,
            db,
        } => {
            let store = open_store(&db, 1)?;
            found(&store, id)?;
            let list = store.webhook_deliveries(id, limit)?;
            if json {
                let items: Vec<_> = list.iter().map(delivery_json).collect();
                println!("{}", serde_json::to_string_pretty(&items)?);
            } else {
                println!(
                    "{:>8}  {:<36}  {:<15}  {:>8}  {:<9}  {:>8}  {:<24}  {:<24}  LAST ERROR",
                    "ID",
                    "WEBHOOK-ID",
                    "TYPE",
                    "EVENT",
                    "STATE",
                    "ATTEMPTS",
                    "LAST ATTEMPT",
                    "DELIVERED"
                );
                for d in &list {
                    println!(
                        "{:>8}  {:<36}  {:<15}  {:>8}  {:<9}  {:>8}  {:<24}  {:<24}  {}",
                        d.id,
                        d.message_id,
                        d.event_type,
                        d.event_seq
                            .map_or_else(|| "-".to_owned(), |s| s.to_string()),
                        d.state.as_str(),
                        d.attempts,
                        fmt_time(d.last_attempt_at),
                        fmt_time(d.delivered_at),
                        d.last_error.as_deref().unwrap_or("-")
                    );
                }
            }
        }
    }
    Ok(())
}

/// Sends a signed test message to `endpoint` now and records it; returns
/// whether it was acknowledged.
fn send_test(
    store: &Store,
    endpoint: &WebhookEndpoint,
    policy: TargetPolicy,
) -> anyhow::Result<bool> {
    let secret = Secret::parse(&endpoint.secret)
        .map_err(|e| anyhow::anyhow!("webhook {}: {e}", endpoint.id))?;
    let now = OffsetDateTime::now_utc();
    let id = market_store::webhooks::new_message_id();
    let body = json!({
        "type": market_store::webhooks::TEST_EVENT,
        "timestamp": format_utc(now),
        "data": { "webhookId": endpoint.id, "url": endpoint.url },
    })
    .to_string();
    let message = Message {
        id: &id,
        timestamp: now.unix_timestamp(),
        signature: secret.sign(&id, now.unix_timestamp(), body.as_bytes()),
        body: &body,
    };
    let transport = market_webhooks::HttpTransport::new(policy)?;
    let started = std::time::Instant::now();
    let answer = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(transport.send(&endpoint.url, &message));
    let took = started.elapsed().as_millis();
    let (status, error) = match &answer {
        Answer::Status { code, .. } if (200..300).contains(code) => (Some(*code), None),
        Answer::Status { code, snippet, .. } => (
            Some(*code),
            Some(format!("HTTP {code}: {}", snippet.trim())),
        ),
        Answer::Failed(e) => (None, Some(e.clone())),
    };
    store.record_test_delivery(
        endpoint.id,
        &id,
        &body,
        status,
        error.as_deref(),
        OffsetDateTime::now_utc(),
    )?;
    match &error {
        None => println!(
            "webhook {}: {} answered HTTP {} in {took} ms to test message {id}",
            endpoint.id,
            endpoint.url,
            status.unwrap_or_default()
        ),
        Some(e) => println!(
            "webhook {}: test message {id} to {} failed after {took} ms: {e}",
            endpoint.id, endpoint.url
        ),
    }
    Ok(error.is_none())
}
