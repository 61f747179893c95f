//! The command line.

use std::net::TcpListener;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use market_store::{PoolOptions, Store};

use crate::access_log::AccessLog;
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

/// How long a writer keeps history (market and wallet series, position events).
#[derive(Args, Debug, Clone, Copy)]
pub struct RetentionArgs {
    /// Days to keep every observation (history at full resolution: one point per data version).
    #[arg(long, value_name = "DAYS", default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub history_points_days: u32,
    /// Days to keep the hourly history (the last observation of each hour).
    #[arg(long, value_name = "DAYS", default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=36500))]
    pub history_hourly_days: u32,
    /// Days to keep the position events.
    #[arg(long, value_name = "DAYS", default_value_t = 90, value_parser = clap::value_parser!(u32).range(1..=36500))]
    pub history_events_days: u32,
}

impl From<RetentionArgs> for market_store::Retention {
    fn from(r: RetentionArgs) -> Self {
        market_store::Retention {
            points_days: r.history_points_days,
            hourly_days: r.history_hourly_days,
            events_days: r.history_events_days,
        }
    }
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
    pub webhook_targets: crate::webhook_cli::TargetArgs,
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
    /// Database selection.
    #[command(flatten)]
    pub db: DbArgs,
}

/// Rate limit and robustness of the scanner.
#[derive(Args, Debug, Clone)]
pub struct ScanTuning {
    /// Request weight per minute (the source allows 1200 per IP; clearinghouseState weighs 2, other requests 20).
    #[arg(long, default_value_t = 1200, value_parser = clap::value_parser!(u32).range(40..))]
    pub weight_per_minute: u32,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub concurrency: u32,
    /// Seconds before a request times out.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// Retries of a request after 429, 5xx, timeouts or transport errors (with doubling backoff from 0.5 s).
    #[arg(long, default_value_t = 4)]
    pub retries: u32,
    /// Serve Prometheus metrics (requests, weight, failures, wallets
    /// refreshed, staleness) at `http://ADDR/metrics` while it runs. Off
    /// when not given.
    #[arg(long, env = "METRICS_BIND", value_name = "ADDR")]
    pub metrics_bind: Option<String>,
}

/// Binds `addr` and serves `render` at `/metrics` there.
fn serve_metrics(
    addr: &str,
    render: std::sync::Arc<dyn Fn() -> String + Send + Sync>,
) -> anyhow::Result<()> {
    let listener =
        TcpListener::bind(addr).with_context(|| format!("binding the metrics address {addr}"))?;
    crate::metrics::spawn_endpoint(listener, render)?;
    Ok(())
}

impl ScanTuning {
    fn config(&self, stale_after: u32) -> market_ingest::ScanConfig {
        market_ingest::ScanConfig {
            weight_budget: self.weight_per_minute,
            window: std::time::Duration::from_secs(60),
            concurrency: self.concurrency as usize,
            retries: self.retries,
            backoff: std::time::Duration::from_millis(500),
            stale_after,
            source_name: "scan",
            counters: Default::default(),
        }
    }
}

fn print_wallet_progress(p: market_ingest::WalletProgress) {
    let eta = p
        .eta()
        .map_or_else(|| "-".to_owned(), |d| format!("{}s", d.as_secs()));
    eprintln!(
        "  wallets {}/{} ({:.0}%), {} failed, elapsed {}s, ETA {eta}",
        p.done,
        p.total,
        p.done as f64 * 100.0 / p.total.max(1) as f64,
        p.failed,
        p.elapsed.as_secs()
    );
}

fn report_scan(r: &market_ingest::ScanReport) {
    eprintln!(
        "applied scan as data version {}: {} assets, {} wallets read, {} failed ({} kept from earlier scans, {} dropped), {} positions, {} candles ({} assets failed), {} days frozen; {} requests, weight {}, {:.1} s",
        r.version,
        r.assets,
        r.wallets_ok,
        r.wallets_failed,
        r.wallets_retained,
        r.wallets_dropped,
        r.positions,
        r.candles,
        r.candle_failures,
        r.frozen_days,
        r.requests,
        r.weight,
        r.elapsed.as_secs_f64()
    );
}

fn read_wallets(path: &std::path::Path) -> anyhow::Result<Vec<market_ingest::WalletEntry>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    market_ingest::parse_wallet_list(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
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
        /// History retention.
        #[command(flatten)]
        retention: RetentionArgs,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Manage webhooks: signed deliveries of position events.
    #[command(subcommand)]
    Webhook(crate::webhook_cli::WebhookCommand),
    /// Print the OpenAPI document (`market-data-server openapi > openapi/openapi.json`).
    Openapi,
    /// Scan an info endpoint (Hyperliquid info API format) and write each scan as one data version.
    Scan {
        /// The endpoint that takes the info POSTs, e.g. https://api.hyperliquid.xyz/info.
        #[arg(long)]
        info_url: String,
        /// Wallet list: one `ADDRESS[,LABEL[,TAG|TAG…]]` per line; blank lines and lines starting with `#` are skipped.
        #[arg(long)]
        wallets: std::path::PathBuf,
        /// Run one scan and exit: 0 when it was applied, 1 when it was not (the default).
        #[arg(long, conflicts_with = "every")]
        once: bool,
        /// Scan repeatedly, starting a scan every SECONDS.
        #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
        every: Option<u64>,
        /// Consecutive failed scans after which a wallet's last observation is no longer served.
        #[arg(long, default_value_t = 3)]
        stale_after: u32,
        /// Rate limit and retries.
        #[command(flatten)]
        tuning: ScanTuning,
        /// History retention.
        #[command(flatten)]
        retention: RetentionArgs,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
    /// Track the exchange live: discover wallets (leaderboard, trades stream,
    /// node trades, wallet list), refresh the biggest first within the weight
    /// budget, and publish a data version every --publish-every seconds.
    Track {
        /// The info endpoint (an operator's node: its --serve-info address).
        #[arg(long, default_value = "https://api.hyperliquid.xyz/info")]
        info_url: String,
        /// The WebSocket: trades of every coin and allDexsAssetCtxs.
        #[arg(long, default_value = "wss://api.hyperliquid.xyz/ws")]
        ws_url: String,
        /// Do not use the WebSocket (market context then comes from metaAndAssetCtxs, and trades discover nothing).
        #[arg(long)]
        no_ws: bool,
        /// Do not discover wallets from the trades stream (the WebSocket still gives market context).
        #[arg(long)]
        no_trades: bool,
        /// The leaderboard document.
        #[arg(
            long,
            default_value = "https://stats-data.hyperliquid.xyz/Mainnet/leaderboard"
        )]
        leaderboard_url: String,
        /// Do not fetch the leaderboard.
        #[arg(long)]
        no_leaderboard: bool,
        /// Seconds between leaderboard fetches.
        #[arg(long, value_name = "SECONDS", default_value_t = 900, value_parser = clap::value_parser!(u64).range(10..))]
        leaderboard_every: u64,
        /// Follow an operator's node's node_trades directory (JSON lines) as a discovery source.
        #[arg(long, value_name = "DIR")]
        node_trades_dir: Option<std::path::PathBuf>,
        /// Wallet list: always tracked; its labels and tags are authoritative.
        #[arg(long)]
        wallets: Option<std::path::PathBuf>,
        /// Seconds between publishes.
        #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
        publish_every: u64,
        /// Do not fetch hourly candles.
        #[arg(long)]
        no_candles: bool,
        /// Rate limit and retries.
        #[command(flatten)]
        tuning: ScanTuning,
        /// History retention.
        #[command(flatten)]
        retention: RetentionArgs,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
    /// Load recorded info responses from files (see docs/ingest.md) as one scan.
    Import {
        /// Directory with perpDexs.json, metaAndAssetCtxs.json, clearinghouseState.json and optionally candleSnapshot.json.
        #[arg(long)]
        from: std::path::PathBuf,
        /// Wallet list with labels and tags (default: every address in clearinghouseState.json).
        #[arg(long)]
        wallets: Option<std::path::PathBuf>,
        /// History retention.
        #[command(flatten)]
        retention: RetentionArgs,
        /// Database selection.
        #[command(flatten)]
        db: DbArgs,
    },
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

pub(crate) fn open_store(db: &DbArgs, pool: u32) -> anyhow::Result<Store> {
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

/// A token's own limit as `token list` shows it.
fn fmt_limit(own: Option<u32>) -> String {
    own.map_or_else(|| "default".to_owned(), |n| format!("{n}/min"))
}

fn create_token(
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
            ..Default::default()
        },
    )
    .context("loading the served data")?;
    // After the first load (which runs fastest with glibc's defaults) and
    // before serving.
    crate::platform::tune_allocator();
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
        serve_metrics(
            addr,
            std::sync::Arc::new(move || state.metrics.render(&state)),
        )?;
    }
    let listener =
        TcpListener::bind(&args.bind).with_context(|| format!("binding {}", args.bind))?;
    let workers = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    log::info!(
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
            log::warn!("the access log could not be written out at shutdown");
        }
    }
    if let Some(deliveries) = deliveries {
        // An attempt takes at most its 10 s timeout.
        deliveries.stop(std::time::Duration::from_secs(12));
    }
    // The usage of the last requests (the flusher writes every few seconds).
    match state.flush_usage() {
        Ok(()) => log::info!("stopped: every answered request is recorded in token usage"),
        Err(e) => log::warn!("could not record token usage at shutdown: {e}"),
    }
    Ok(())
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
        Command::SeedDemo {
            wallets,
            seed,
            retention,
            db,
        } => {
            anyhow::ensure!(
                (1..=1_000_000).contains(&wallets),
                "--wallets must be from 1 to 1000000"
            );
            let store = open_store(&db, 2)?.with_retention(retention.into());
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
            let (_, token) = create_token(&store, "demo", None, None)?;
            let base = format!("http://{}", args.bind);
            println!();
            println!("Demo API token (shown once; only its hash is stored):");
            println!("  {token}");
            println!("Try:");
            println!("  curl -s -H 'X-API-Key: {token}' '{base}/v1/networks/perpnet/markets?sort=volume24h'");
            println!("Swagger UI: {base}/swagger-ui/");
            println!("Explorer (charts; paste the token when it asks): {base}/explore");
            println!();
            run_server(&args, store)?;
        }
        Command::Token(TokenCommand::Create {
            name,
            expires_in,
            rate_limit,
            db,
        }) => {
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
        Command::Token(TokenCommand::SetRateLimit { id, limit, db }) => {
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
        Command::Webhook(command) => crate::webhook_cli::run(command)?,
        Command::Openapi => print!("{}", crate::openapi::document_json()),
        Command::Scan {
            info_url,
            wallets,
            once,
            every,
            stale_after,
            tuning,
            retention,
            db,
        } => {
            // One scan with `--once` or without `--every` (clap keeps them apart).
            let every = every.filter(|_| !once);
            let store = open_store(&db, 2)?.with_retention(retention.into());
            let list = read_wallets(&wallets)?;
            let cfg = tuning.config(stale_after);
            let source = market_ingest::client::HttpSource::new(
                &info_url,
                std::time::Duration::from_secs(tuning.timeout),
            );
            if let Some(addr) = &tuning.metrics_bind {
                let metrics = crate::metrics::IngestMetrics::new(&cfg, None);
                let started = std::time::Instant::now();
                serve_metrics(addr, std::sync::Arc::new(move || metrics.render(started)))?;
            }
            loop {
                let started = std::time::Instant::now();
                eprintln!("scanning {} wallets from {info_url}", list.len());
                match market_ingest::run_scan(
                    &source,
                    &store,
                    &list,
                    &cfg,
                    &mut print_wallet_progress,
                ) {
                    Ok(report) => report_scan(&report),
                    Err(e) if every.is_none() => {
                        return Err(anyhow::anyhow!("scan not applied: {e}"))
                    }
                    Err(e) => log::error!("scan not applied (the served data is unchanged): {e}"),
                }
                let Some(secs) = every else { break };
                let next = std::time::Duration::from_secs(secs);
                if let Some(wait) = next.checked_sub(started.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
        }
        Command::Track {
            info_url,
            ws_url,
            no_ws,
            no_trades,
            leaderboard_url,
            no_leaderboard,
            leaderboard_every,
            node_trades_dir,
            wallets,
            publish_every,
            no_candles,
            tuning,
            retention,
            db,
        } => {
            let store = open_store(&db, 3)?.with_retention(retention.into());
            let list = match wallets {
                Some(path) => read_wallets(&path)?,
                None => Vec::new(),
            };
            let mut scan = tuning.config(0);
            scan.source_name = "track";
            let cfg = market_tracker::TrackConfig {
                info_url: info_url.clone(),
                ws_url: (!no_ws).then_some(ws_url),
                ws_trades: !no_trades,
                leaderboard_url: (!no_leaderboard).then_some(leaderboard_url),
                leaderboard_every: std::time::Duration::from_secs(leaderboard_every),
                node_trades_dir,
                wallets: list,
                publish_every: std::time::Duration::from_secs(publish_every),
                scan,
                intervals: market_tracker::Intervals::default(),
                candles: !no_candles,
                meta_every: std::time::Duration::from_secs(600),
            };
            let source = market_ingest::client::HttpSource::new(
                &info_url,
                std::time::Duration::from_secs(tuning.timeout),
            );
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let tracker = std::sync::Arc::new(market_tracker::Tracker::new(
                cfg,
                store,
                Box::new(source),
                stop.clone(),
            )?);
            if let Some(addr) = &tuning.metrics_bind {
                let metrics = crate::metrics::IngestMetrics::new(
                    &tracker.config().scan,
                    Some(tracker.clone()),
                );
                let started = std::time::Instant::now();
                serve_metrics(addr, std::sync::Arc::new(move || metrics.render(started)))?;
            }
            let publishes = tracker.clone();
            crate::platform::trim_after_each_publish(
                move || {
                    publishes
                        .stats
                        .publishes
                        .load(std::sync::atomic::Ordering::Relaxed)
                },
                stop.clone(),
            )?;
            eprintln!("tracking {info_url}; a data version is published every {publish_every} s");
            tracker.run();
        }
        Command::Import {
            from,
            wallets,
            retention,
            db,
        } => {
            let store = open_store(&db, 2)?.with_retention(retention.into());
            let source =
                market_ingest::client::DirSource::open(&from).map_err(|e| anyhow::anyhow!(e))?;
            let list = match wallets {
                Some(path) => read_wallets(&path)?,
                None => source
                    .addresses()
                    .into_iter()
                    .map(|address| market_ingest::WalletEntry {
                        address,
                        label: None,
                        tags: Vec::new(),
                    })
                    .collect(),
            };
            // Files have no rate limit.
            let cfg = market_ingest::ScanConfig {
                weight_budget: u32::MAX / 2,
                retries: 0,
                ..Default::default()
            };
            let report =
                market_ingest::run_scan(&source, &store, &list, &cfg, &mut print_wallet_progress)
                    .map_err(|e| anyhow::anyhow!("import not applied: {e}"))?;
            report_scan(&report);
        }
    }
    Ok(())
}
