//! `serve` and `demo`: the server's flags, and starting it.

use std::net::TcpListener;

use anyhow::Context;
use clap::Args;
use market_store::Store;

use super::common::{open_store, redact, serve_metrics, DbArgs, LOG};
use super::tokens::create_token;
use super::webhooks::TargetArgs;
use crate::access_log::AccessLog;
use crate::state::AppState;
use crate::{app, seed};

/// Where to listen.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to bind.
    #[arg(long, env = "BIND_ADDR", default_value = "127.0.0.1:8080")]
    pub bind: String,
    /// HTTP worker threads (default: one per CPU).
    #[arg(long, env = "WORKERS")]
    pub workers: Option<usize>,
    /// Memory bound (MiB) of the cache of rendered pages of the database-backed endpoints (liquidity-levels, candles, history, position events, wallet detail) of the served data version (0 disables it). A page larger than a quarter of the bound is served but not cached.
    #[arg(long, env = "PAGE_CACHE_MB", default_value_t = 64)]
    pub page_cache_mb: usize,
    /// Event streams (`/position-events/stream`) one API key may hold open at once; one more is a 429.
    #[arg(long, env = "MAX_STREAMS_PER_KEY", default_value_t = crate::state::stream::MAX_STREAMS_PER_KEY)]
    pub max_streams_per_key: usize,
    /// Deliver webhooks (`webhook create`) from this server. Any number of
    /// replicas may: each endpoint is claimed by one at a time. `false`
    /// leaves delivery to the others.
    #[arg(long, env = "WEBHOOK_DELIVERY", default_value_t = true, action = clap::ArgAction::Set)]
    pub webhook_delivery: bool,
    /// Webhook endpoints delivered to at once (each one's messages go in
    /// order, one at a time).
    #[arg(long, env = "WEBHOOK_CONCURRENCY", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub webhook_concurrency: u32,
    /// Where webhooks may be delivered.
    #[command(flatten)]
    pub webhook_targets: TargetArgs,
    /// Log one line per request to stderr (log target `access`:
    /// `RUST_LOG=info,access=off` also turns it off). Lines are queued to a
    /// writer thread and written in batches, off the request path; if the
    /// writer falls behind, lines are dropped and counted, never waited for.
    #[arg(long, env = "ACCESS_LOG", default_value_t = true, action = clap::ArgAction::Set)]
    pub access_log: bool,
    /// Access-log line format: `text` (the classic line) or `json` (one object per line).
    #[arg(long, env = "ACCESS_LOG_FORMAT", value_enum, default_value_t = crate::access_log::Format::Text)]
    pub access_log_format: crate::access_log::Format,
    /// Seconds a graceful stop (SIGTERM or SIGINT) lets the requests in
    /// flight finish; connections still open after that are closed. The
    /// process then writes out the access log and token usage and exits 0.
    #[arg(long, env = "SHUTDOWN_TIMEOUT", value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub shutdown_timeout: u64,
    /// Uncached pages of the database-backed endpoints rendered at once
    /// (default: one per CPU). The pool holds them plus 2 connections kept
    /// for key checks. Raise it for a remote PostgreSQL whose queries wait
    /// on the network more than on the CPU.
    #[arg(long, env = "DB_CONCURRENCY", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub db_concurrency: Option<u32>,
    /// Uncached pages that may wait (at most 1 s) for a render slot;
    /// further ones get a 503 with `Retry-After` at once (default: twice
    /// --db-concurrency).
    #[arg(long, env = "DB_QUEUE", value_name = "N", value_parser = clap::value_parser!(u32).range(0..=4096))]
    pub db_queue: Option<u32>,
    /// Seconds an API key verified by the database keeps working from
    /// memory while the database cannot be reached (0: not at all). While
    /// the database answers, keys are checked again every 2 s, so a
    /// revocation takes effect within 2 s.
    #[arg(long, env = "TOKEN_GRACE", value_name = "SECONDS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub token_grace: u64,
    /// Serve Prometheus metrics at `http://ADDR/metrics` (for example
    /// `127.0.0.1:9464`): a separate address, without an API key, for the
    /// operator's network. Off when not given.
    #[arg(long, env = "METRICS_BIND", value_name = "ADDR")]
    pub metrics_bind: Option<String>,
    /// Requests a minute per API key without a limit of its own (`token
    /// create --rate-limit`), or `off`. A key may spend its minute's quota
    /// at once; answers carry `RateLimit-Policy` and `RateLimit`, and a
    /// request over the quota gets a 429 with `Retry-After`.
    #[arg(
        long,
        env = "RATE_LIMIT",
        value_name = "N/min|off",
        default_value = "1200/min"
    )]
    pub rate_limit: crate::ratelimit::PerMinute,
    /// API keys that fail to authenticate allowed per client address and
    /// minute, or `off`. Past it, that address's unverified keys get a 429
    /// without a database lookup until its quota refills; keys already
    /// verified keep working.
    #[arg(
        long,
        env = "AUTH_FAILURE_LIMIT",
        value_name = "N/min|off",
        default_value = "30/min"
    )]
    pub auth_failure_limit: crate::ratelimit::PerMinute,
    /// A reverse proxy in front of the server (repeatable, or comma-separated):
    /// for requests from it, the client address is the last address in
    /// `X-Forwarded-For` that is not such a proxy. Without it,
    /// `X-Forwarded-For` is ignored.
    #[arg(long, env = "TRUSTED_PROXY", value_name = "IP", value_delimiter = ',')]
    pub trusted_proxy: Vec<std::net::IpAddr>,
    /// Share the API keys' quotas with the other replicas through this
    /// Redis (`redis://HOST:PORT[/DB]`). Without it each server counts on
    /// its own; while Redis cannot be reached, each server falls back to
    /// counting on its own and tries Redis again every second.
    #[arg(long, env = "REDIS_URL", value_name = "URL")]
    pub redis_url: Option<String>,
    /// Prefix of the quota keys in Redis: the same for the replicas of one
    /// service, another for another service on the same Redis.
    #[arg(
        long,
        env = "REDIS_KEY_PREFIX",
        value_name = "PREFIX",
        default_value = "market-data:ratelimit:token:"
    )]
    pub redis_key_prefix: String,
    /// Where the server saves the data version it serves, so that its next
    /// start serves it at once (then applies the changes stored since)
    /// instead of reading and rendering every position again: written after
    /// a version is loaded whole and when the server stops (a few hundred
    /// MB at a million positions). Default: beside an SQLite database file
    /// (`FILE.served`); with PostgreSQL, nowhere. `none` turns it off.
    #[arg(long, env = "SAVED_VERSION", value_name = "PATH|none")]
    pub saved_version: Option<String>,
    /// Database selection.
    #[command(flatten)]
    pub db: DbArgs,
}

/// Serves the API until stopped.
pub(super) fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    let store = open_store(&args.db, pool_size(args))?;
    run_server(args, store)?;
    Ok(())
}

/// Seeds the demo data into an empty database, creates a token, prints it
/// with a `curl` line, and serves.
pub(super) fn demo(args: &ServeArgs) -> anyhow::Result<()> {
    let store = open_store(&args.db, pool_size(args))?;
    if store.has_data()? {
        eprintln!(
            "database {} already holds data; not re-seeding",
            redact(&args.db.database_url)
        );
    } else {
        seed::seed_demo(&store, 20_000, 42)?;
    }
    let (_, token) = create_token(&store, "demo", None, None)?;
    let base = format!("http://{}", args.bind);
    println!();
    println!("Demo API token (shown once; only its hash is stored):");
    println!("  {token}");
    println!("Try:");
    println!(
        "  curl -s -H 'X-API-Key: {token}' '{base}/v1/networks/perpnet/markets?sort=volume24h'"
    );
    println!("Swagger UI: {base}/swagger-ui/");
    println!("Explorer (charts; paste the token when it asks): {base}/explore");
    println!();
    run_server(args, store)?;
    Ok(())
}

fn run_server(args: &ServeArgs, store: Store) -> anyhow::Result<()> {
    let shared = match &args.redis_url {
        Some(url) => {
            let target = crate::shared_quota::RedisTarget::new(url, &args.redis_key_prefix)
                .map_err(|e| anyhow::anyhow!("--redis-url {}: {e}", redact(url)))?;
            let quota = crate::shared_quota::SharedQuota::start(&target)
                .context("starting the Redis connection")?;
            Some(std::sync::Arc::new(quota))
        }
        None => None,
    };
    let limits = crate::ratelimit::LimitOptions {
        default_per_minute: args.rate_limit.0,
        auth_failures_per_minute: args.auth_failure_limit.0,
        trusted_proxies: args.trusted_proxy.clone(),
        shared,
    };
    let db = db_options(args);
    let state = AppState::with_options(
        store,
        crate::state::StateOptions {
            page_cache_bytes: args.page_cache_mb << 20,
            limits,
            db,
            max_streams_per_key: args.max_streams_per_key,
            saved: saved_version_path(args),
            ..Default::default()
        },
    )
    .context("loading the served data")?;
    state.spawn_reloader();
    state.spawn_usage_flusher();
    let deliveries = if args.webhook_delivery {
        let options = market_webhooks::Options {
            concurrency: args.webhook_concurrency as usize,
            ..market_webhooks::Options::new()
        };
        let handle =
            market_webhooks::spawn(state.store.clone(), args.webhook_targets.policy(), options)?;
        state.metrics.watch_webhooks(handle.stats());
        Some(handle)
    } else {
        None
    };
    if let Some(addr) = &args.metrics_bind {
        let state = state.clone();
        serve_metrics(addr, std::sync::Arc::new(move || state.render_metrics()))?;
    }
    let listener =
        TcpListener::bind(&args.bind).with_context(|| format!("binding {}", args.bind))?;
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    log::info!(target: LOG,
        "listening on http://{} ({workers} workers); rate limit {} per API key{}, failed authentications {} per address{}",
        listener.local_addr()?,
        args.rate_limit,
        match &args.redis_url {
            Some(_) => format!(" shared through Redis under `{}`", args.redis_key_prefix),
            None => String::new(),
        },
        args.auth_failure_limit,
        if args.trusted_proxy.is_empty() {
            String::new()
        } else {
            format!(", X-Forwarded-For trusted from {:?}", args.trusted_proxy)
        }
    );
    // `RUST_LOG` keeps governing the `access` target, as when it went
    // through the logger.
    let access_log = (args.access_log && log::log_enabled!(target: "access", log::Level::Info))
        .then(|| {
            AccessLog::start(
                args.access_log_format,
                Box::new(std::io::stderr()),
                crate::access_log::QUEUE,
            )
        });
    let options = app::ServeOptions {
        workers,
        access_log: access_log.clone(),
        stop_on_signals: true,
        shutdown_timeout: std::time::Duration::from_secs(args.shutdown_timeout),
    };
    actix_web::rt::System::new()
        .block_on(async { app::serve(listener, state.clone(), options)?.await })?;
    if let Some(log) = access_log {
        if !log.flush(std::time::Duration::from_secs(2)) {
            log::warn!(target: LOG, "the access log could not be written out at shutdown");
        }
    }
    if let Some(deliveries) = deliveries {
        // An attempt takes at most its 10 s timeout.
        deliveries.stop(std::time::Duration::from_secs(12));
    }
    // The next start serves this version at once.
    if let Some(saved) = &state.saved {
        saved.save(&state.snapshot());
    }
    // The usage of the last requests (the flusher writes every few seconds).
    match state.flush_usage() {
        Ok(()) => {
            log::info!(target: LOG, "stopped: every answered request is recorded in token usage")
        }
        Err(e) => log::warn!(target: LOG, "could not record token usage at shutdown: {e}"),
    }
    Ok(())
}

/// Where `serve` saves its version: `--saved-version`, else beside an SQLite
/// file (not an in-memory or URI database), else nowhere.
fn saved_version_path(args: &ServeArgs) -> Option<std::path::PathBuf> {
    match args.saved_version.as_deref() {
        Some("none") => None,
        Some(path) => Some(path.into()),
        None => {
            let url = &args.db.database_url;
            let file = url.strip_prefix("sqlite://").unwrap_or(url);
            let sqlite_file = market_store::BackendKind::from_url(url)
                == market_store::BackendKind::Sqlite
                && !file.is_empty()
                && file != ":memory:"
                && !file.starts_with("file:");
            sqlite_file.then(|| format!("{file}.served").into())
        }
    }
}

/// The request path's database limits (`pool_size` makes room for them).
fn db_options(args: &ServeArgs) -> crate::state::DbOptions {
    let defaults = crate::state::DbOptions::default();
    let concurrency = args
        .db_concurrency
        .map_or(defaults.concurrency, |n| n as usize);
    crate::state::DbOptions {
        concurrency,
        queue: args.db_queue.map_or(2 * concurrency, |n| n as usize),
        token_grace: std::time::Duration::from_secs(args.token_grace),
    }
}

fn pool_size(args: &ServeArgs) -> u32 {
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let base = (workers as u32 * 2 + 2).min(32);
    // Room for the page renders, and the connections kept for key checks.
    let renders = db_options(args).concurrency as u32;
    base.max(renders + crate::state::db::RESERVED_CONNECTIONS)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::{Cli, Command};
    use super::*;

    fn saved_path(args: &[&str]) -> Option<std::path::PathBuf> {
        let mut all = vec!["market-data-server", "serve"];
        all.extend_from_slice(args);
        let Command::Serve(serve) = Cli::try_parse_from(all).unwrap().command else {
            panic!("serve parses as serve");
        };
        saved_version_path(&serve)
    }

    #[test]
    fn the_saved_version_is_beside_an_sqlite_file_unless_named() {
        let path = |s: &str| Some(std::path::PathBuf::from(s));
        assert_eq!(
            saved_path(&["--database-url", "data/m.db"]),
            path("data/m.db.served")
        );
        assert_eq!(
            saved_path(&["--database-url", "sqlite://m.db"]),
            path("m.db.served")
        );
        for url in [
            "postgres://u@h/db",
            "postgresql://h/db",
            ":memory:",
            "file:m?mode=memory",
        ] {
            assert_eq!(saved_path(&["--database-url", url]), None, "{url}");
        }
        assert_eq!(
            saved_path(&[
                "--database-url",
                "postgres://h/db",
                "--saved-version",
                "/var/cache/s"
            ]),
            path("/var/cache/s")
        );
        assert_eq!(
            saved_path(&["--database-url", "m.db", "--saved-version", "none"]),
            None
        );
    }
}
