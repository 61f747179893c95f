//! `token …`: creating, listing, limiting and revoking API tokens, and
//! their usage.

use clap::Subcommand;
use market_store::Store;

use super::common::{fmt_time, open_store, DbArgs};
use crate::tokens;

/// Token subcommands.
#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Create a token and print it once, alone on the last line of stdout.
    Create {
        /// A name to recognise the token by.
        #[arg(long)]
        name: String,
        /// Days until the token expires (default: never).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=36500))]
        expires_in: Option<u32>,
        /// This token's own request limit, `N/min` (default: the server's
        /// `--rate-limit`).
        #[arg(long, value_name = "N/min")]
        rate_limit: Option<crate::ratelimit::PerMinute>,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
    /// Change a token's own request limit; running servers apply it within
    /// 2 seconds.
    SetRateLimit {
        /// Token id (from `token list`).
        id: i64,
        /// `N/min`, or `default` to follow the server's `--rate-limit` again.
        #[arg(value_name = "N/min|default")]
        limit: String,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
    /// List tokens (never their secrets).
    List {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
    /// Show request counts per token, UTC day, endpoint and status class.
    Usage {
        /// Only this token id.
        id: Option<i64>,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
    /// Revoke a token by id; running servers stop accepting it within 2 seconds.
    Revoke {
        /// Token id (from `token list`).
        id: i64,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
}

/// A token's own limit as `token list` shows it.
fn fmt_limit(own: Option<u32>) -> String {
    own.map_or_else(|| "default".to_owned(), |n| format!("{n}/min"))
}

/// Creates a token named `name`: its record, and the token itself (shown
/// once; only its hash is stored).
pub(super) fn create_token(
    store: &Store,
    name: &str,
    expires_in: Option<u32>,
    rate_limit: Option<u32>,
) -> anyhow::Result<(market_store::TokenRecord, String)> {
    anyhow::ensure!(
        !name.trim().is_empty() && name.len() <= 100,
        "--name must be 1 to 100 characters"
    );
    let token = tokens::generate();
    let expires_at =
        expires_in.map(|d| time::OffsetDateTime::now_utc() + time::Duration::days(d.into()));
    let record = store.create_token_limited(
        name,
        &tokens::hash(&token),
        &tokens::hint(&token),
        expires_at,
        rate_limit,
    )?;
    Ok((record, token))
}

/// Runs a `token` subcommand.
pub(super) fn run(command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create {
            name,
            expires_in,
            rate_limit,
            db,
        } => {
            let store = open_store(&db, 1)?;
            let own = rate_limit.and_then(|l| l.0).map(|n| n.get());
            anyhow::ensure!(
                rate_limit.is_none() || own.is_some(),
                "--rate-limit of a token is N/min; its absence means the server's default"
            );
            let (record, token) = create_token(&store, &name, expires_in, own)?;
            println!(
                "created token {} ({}), expires {}, rate limit {}",
                record.id,
                record.name,
                fmt_time(record.expires_at),
                fmt_limit(record.rate_limit_per_minute)
            );
            println!("{token}");
        }
        TokenCommand::SetRateLimit { id, limit, db } => {
            let own = if limit == "default" {
                None
            } else {
                match limit.parse::<crate::ratelimit::PerMinute>() {
                    Ok(crate::ratelimit::PerMinute(Some(n))) => Some(n.get()),
                    Ok(crate::ratelimit::PerMinute(None)) | Err(_) => anyhow::bail!(
                        "`{limit}` is not a token's limit: write N/min (e.g. 600/min), or default"
                    ),
                }
            };
            let store = open_store(&db, 1)?;
            anyhow::ensure!(
                store.set_token_rate_limit(id, own)?,
                "no token with id {id}"
            );
            println!(
                "token {id}: rate limit {}; running servers apply it within 2 seconds",
                fmt_limit(own)
            );
        }
        TokenCommand::List { json, db } => {
            let store = open_store(&db, 1)?;
            let list = store.list_tokens()?;
            if json {
                let items: Vec<serde_json::Value> = list
                    .iter()
                    .map(|t| {
                        serde_json::json!({
                            "id": t.id,
                            "name": t.name,
                            "hint": t.hint,
                            "createdAt": market_model::timestamp::format_utc(t.created_at),
                            "expiresAt": t.expires_at.map(market_model::timestamp::format_utc),
                            "lastUsedAt": t.last_used_at.map(market_model::timestamp::format_utc),
                            "revokedAt": t.revoked_at.map(market_model::timestamp::format_utc),
                            "rateLimitPerMinute": t.rate_limit_per_minute,
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&items)?);
            } else {
                println!(
                    "{:>4}  {:<20}  {:<12}  {:<20}  {:<20}  {:<20}  {:<20}  {:<12}",
                    "ID",
                    "NAME",
                    "TOKEN",
                    "CREATED",
                    "EXPIRES",
                    "LAST USED",
                    "REVOKED",
                    "RATE LIMIT"
                );
                for t in list {
                    println!(
                        "{:>4}  {:<20}  {:<12}  {:<20}  {:<20}  {:<20}  {:<20}  {:<12}",
                        t.id,
                        t.name,
                        t.hint,
                        fmt_time(Some(t.created_at)),
                        fmt_time(t.expires_at),
                        fmt_time(t.last_used_at),
                        fmt_time(t.revoked_at),
                        fmt_limit(t.rate_limit_per_minute)
                    );
                }
            }
        }
        TokenCommand::Usage { id, json, db } => {
            let store = open_store(&db, 1)?;
            let rows = store.usage(id)?;
            if json {
                let items: Vec<serde_json::Value> = rows
                    .iter()
                    .map(|r| {
                        serde_json::json!({
                            "tokenId": r.token_id,
                            "day": r.day.to_string(),
                            "endpoint": r.endpoint,
                            "statusClass": r.status_class,
                            "count": r.count,
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&items)?);
            } else {
                println!(
                    "{:>5}  {:<10}  {:<6}  {:>8}  ENDPOINT",
                    "TOKEN", "DAY", "STATUS", "REQUESTS"
                );
                for r in rows {
                    println!(
                        "{:>5}  {:<10}  {:<6}  {:>8}  {}",
                        r.token_id, r.day, r.status_class, r.count, r.endpoint
                    );
                }
            }
        }
        TokenCommand::Revoke { id, db } => {
            let store = open_store(&db, 1)?;
            anyhow::ensure!(store.revoke_token(id)?, "no token with id {id}");
            println!("revoked token {id}; running servers reject it within 2 seconds");
        }
    }
    Ok(())
}
