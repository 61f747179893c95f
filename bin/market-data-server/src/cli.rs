//! The command line.

use std::net::TcpListener;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use market_store::{PoolOptions, Store};

use crate::state::AppState;
use crate::{app, seed, tokens};

/// Read-only HTTP/JSON market and wallet data service.
#[derive(Parser, Debug)]
#[command(name = "market-data-server", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Where the data lives.
#[derive(Args, Debug, Clone)]
pub struct DbArgs {
    /// Database URL: `postgres://…` or `postgresql://…` for PostgreSQL, anything else is an SQLite file path.
    #[arg(long, env = "DATABASE_URL", default_value = "market-data.db")]
    pub database_url: String,
}

/// Where to listen.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to bind.
    #[arg(long, env = "BIND_ADDR", default_value = "127.0.0.1:8080")]
    pub bind: String,
    /// HTTP worker threads (default: one per CPU).
    #[arg(long, env = "WORKERS")]
    pub workers: Option<usize>,
    /// Database selection.
    #[command(flatten)]
    pub db: DbArgs,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Migrate, seed the demo data if the database is empty, create a token, print it with a curl line, and serve.
    Demo(ServeArgs),
    /// Serve the API.
    Serve(ServeArgs),
    /// Run pending database migrations.
    Migrate(DbArgs),
    /// Replace the data with the deterministic demo dataset (tokens are kept).
    SeedDemo {
        /// Number of wallets.
        #[arg(long, default_value_t = 20_000)]
        wallets: usize,
        /// Random seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Print the OpenAPI document (`market-data-server openapi > openapi/openapi.json`).
    Openapi,
}

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

fn open_store(db: &DbArgs, pool: u32) -> anyhow::Result<Store> {
    let store = Store::open(
        &db.database_url,
        PoolOptions {
            max_size: pool,
            ..PoolOptions::default()
        },
    )
    .with_context(|| format!("opening database {}", redact(&db.database_url)))?;
    store.migrate().context("migrating the database")?;
    Ok(store)
}

/// A URL with any password replaced, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{}:***{}", &url[..scheme + 3], user, &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

fn create_token(
    store: &Store,
    name: &str,
    expires_in: Option<u32>,
) -> anyhow::Result<(market_store::TokenRecord, String)> {
    anyhow::ensure!(
        !name.trim().is_empty() && name.len() <= 100,
        "--name must be 1 to 100 characters"
    );
    let token = tokens::generate();
    let expires_at =
        expires_in.map(|d| time::OffsetDateTime::now_utc() + time::Duration::days(d.into()));
    let record = store.create_token(
        name,
        &tokens::hash(&token),
        &tokens::hint(&token),
        expires_at,
    )?;
    Ok((record, token))
}

fn run_server(args: &ServeArgs, store: Store) -> anyhow::Result<()> {
    let state = AppState::new(store).context("loading the served data")?;
    state.spawn_reloader();
    state.spawn_usage_flusher();
    let listener =
        TcpListener::bind(&args.bind).with_context(|| format!("binding {}", args.bind))?;
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    log::info!(
        "listening on http://{} ({workers} workers)",
        listener.local_addr()?
    );
    let server = app::serve(listener, state.clone(), workers)?;
    actix_web::rt::System::new().block_on(server)?;
    // Graceful stop (SIGINT/SIGTERM): keep the last few seconds of usage.
    if let Err(e) = state.flush_usage() {
        log::warn!("could not record token usage at shutdown: {e}");
    }
    Ok(())
}

fn pool_size(args: &ServeArgs) -> u32 {
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    (workers as u32 * 2 + 2).min(32)
}

fn fmt_time(t: Option<time::OffsetDateTime>) -> String {
    t.map_or_else(|| "-".to_owned(), market_model::timestamp::format_utc)
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Migrate(db) => {
            let store = Store::open(&db.database_url, PoolOptions::default())?;
            let ran = store.migrate()?;
            println!("applied {ran} migration(s)");
        }
        Command::SeedDemo { wallets, seed, db } => {
            anyhow::ensure!(
                (1..=1_000_000).contains(&wallets),
                "--wallets must be from 1 to 1000000"
            );
            let store = open_store(&db, 2)?;
            seed::seed_demo(&store, wallets, seed)?;
        }
        Command::Serve(args) => {
            let store = open_store(&args.db, pool_size(&args))?;
            run_server(&args, store)?;
        }
        Command::Demo(args) => {
            let store = open_store(&args.db, pool_size(&args))?;
            if store.has_data()? {
                eprintln!(
                    "database {} already holds data; not re-seeding",
                    redact(&args.db.database_url)
                );
            } else {
                seed::seed_demo(&store, 20_000, 42)?;
            }
            let (_, token) = create_token(&store, "demo", None)?;
            let base = format!("http://{}", args.bind);
            println!();
            println!("Demo API token (shown once; only its hash is stored):");
            println!("  {token}");
            println!("Try:");
            println!("  curl -s -H 'X-API-Key: {token}' '{base}/v1/networks/perpnet/markets?sort=volume24h'");
            println!("Swagger UI: {base}/swagger-ui/");
            println!();
            run_server(&args, store)?;
        }
        Command::Token(TokenCommand::Create {
            name,
            expires_in,
            db,
        }) => {
            let store = open_store(&db, 1)?;
            let (record, token) = create_token(&store, &name, expires_in)?;
            println!(
                "created token {} ({}), expires {}",
                record.id,
                record.name,
                fmt_time(record.expires_at)
            );
            println!("{token}");
        }
        Command::Token(TokenCommand::List { json, db }) => {
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
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&items)?);
            } else {
                println!(
                    "{:>4}  {:<20}  {:<12}  {:<20}  {:<20}  {:<20}  {:<20}",
                    "ID", "NAME", "TOKEN", "CREATED", "EXPIRES", "LAST USED", "REVOKED"
                );
                for t in list {
                    println!(
                        "{:>4}  {:<20}  {:<12}  {:<20}  {:<20}  {:<20}  {:<20}",
                        t.id,
                        t.name,
                        t.hint,
                        fmt_time(Some(t.created_at)),
                        fmt_time(t.expires_at),
                        fmt_time(t.last_used_at),
                        fmt_time(t.revoked_at)
                    );
                }
            }
        }
        Command::Token(TokenCommand::Usage { id, json, db }) => {
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
        Command::Token(TokenCommand::Revoke { id, db }) => {
            let store = open_store(&db, 1)?;
            anyhow::ensure!(store.revoke_token(id)?, "no token with id {id}");
            println!("revoked token {id}; running servers reject it within 2 seconds");
        }
        Command::Openapi => print!("{}", crate::openapi::document_json()),
    }
    Ok(())
}
