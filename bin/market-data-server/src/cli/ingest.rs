//! `seed-demo`, `scan`, `track` and `import`: the commands that write data
//! versions, and the scanner's tuning they share.

use anyhow::Context;
use clap::Args;

use super::common::{open_store, open_store_with, serve_metrics, DbArgs, RetentionArgs, LOG};
use crate::seed;
use market_store::{Checkpoint, PoolOptions};

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

/// `seed-demo`: the demo dataset's size and seed.
#[derive(Args, Debug)]
pub struct SeedDemoArgs {
    /// Number of wallets.
    #[arg(long, default_value_t = 20_000)]
    pub wallets: usize,
    /// Random seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// History retention.
    #[command(flatten)]
    pub retention: RetentionArgs,
    /// Database selection.
    #[command(flatten)]
    pub db: DbArgs,
}

/// `scan`: what to scan, how often, and where to write it.
#[derive(Args, Debug)]
pub struct ScanArgs {
    /// The endpoint that takes the info POSTs, e.g. https://api.hyperliquid.xyz/info.
    #[arg(long)]
    pub info_url: String,
    /// Wallet list: one `ADDRESS[,LABEL[,TAG|TAG…]]` per line; blank lines and lines starting with `#` are skipped.
    #[arg(long)]
    pub wallets: std::path::PathBuf,
    /// Run one scan and exit: 0 when it was applied, 1 when it was not (the default).
    #[arg(long, conflicts_with = "every")]
    pub once: bool,
    /// Scan repeatedly, starting a scan every SECONDS.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub every: Option<u64>,
    /// Consecutive failed scans after which a wallet's last observation is no longer served.
    #[arg(long, default_value_t = 3)]
    pub stale_after: u32,
    /// Rate limit and retries.
    #[command(flatten)]
    pub tuning: ScanTuning,
    /// History retention.
    #[command(flatten)]
    pub retention: RetentionArgs,
    /// Database selection.
    #[command(flatten)]
    pub db: DbArgs,
}

/// `track`: the exchange's endpoints, discovery sources and publish cadence.
#[derive(Args, Debug)]
pub struct TrackArgs {
    /// The info endpoint (an operator's node: its --serve-info address).
    #[arg(long, default_value = "https://api.hyperliquid.xyz/info")]
    pub info_url: String,
    /// The WebSocket: trades of every coin and allDexsAssetCtxs.
    #[arg(long, default_value = "wss://api.hyperliquid.xyz/ws")]
    pub ws_url: String,
    /// Do not use the WebSocket (market context then comes from metaAndAssetCtxs, and trades discover nothing).
    #[arg(long)]
    pub no_ws: bool,
    /// Do not discover wallets from the trades stream (the WebSocket still gives market context).
    #[arg(long)]
    pub no_trades: bool,
    /// The leaderboard document.
    #[arg(
        long,
        default_value = "https://stats-data.hyperliquid.xyz/Mainnet/leaderboard"
    )]
    pub leaderboard_url: String,
    /// Do not fetch the leaderboard.
    #[arg(long)]
    pub no_leaderboard: bool,
    /// Seconds between leaderboard fetches.
    #[arg(long, value_name = "SECONDS", default_value_t = 900, value_parser = clap::value_parser!(u64).range(10..))]
    pub leaderboard_every: u64,
    /// Follow an operator's node's node_trades directory (JSON lines) as a discovery source.
    #[arg(long, value_name = "DIR")]
    pub node_trades_dir: Option<std::path::PathBuf>,
    /// Wallet list: always tracked; its labels and tags are authoritative.
    #[arg(long)]
    pub wallets: Option<std::path::PathBuf>,
    /// Seconds between publishes.
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub publish_every: u64,
    /// The most wallet reads one publish writes (what it holds in memory at
    /// once). Reads past it go in the next publish, right after this one
    /// (at least a second later), not --publish-every seconds later.
    #[arg(long, value_name = "READS", default_value_t = 25_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_reads_per_publish: u64,
    /// Do not fetch hourly candles.
    #[arg(long)]
    pub no_candles: bool,
    /// Rate limit and retries.
    #[command(flatten)]
    pub tuning: ScanTuning,
    /// History retention.
    #[command(flatten)]
    pub retention: RetentionArgs,
    /// Database selection.
    #[command(flatten)]
    pub db: DbArgs,
}

/// `import`: where the recorded responses are.
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// Directory with perpDexs.json, metaAndAssetCtxs.json, clearinghouseState.json and optionally candleSnapshot.json.
    #[arg(long)]
    pub from: std::path::PathBuf,
    /// Wallet list with labels and tags (default: every address in clearinghouseState.json).
    #[arg(long)]
    pub wallets: Option<std::path::PathBuf>,
    /// History retention.
    #[command(flatten)]
    pub retention: RetentionArgs,
    /// Database selection.
    #[command(flatten)]
    pub db: DbArgs,
}

/// Replaces the data with the demo dataset.
pub(super) fn seed_demo(args: SeedDemoArgs) -> anyhow::Result<()> {
    let SeedDemoArgs {
        wallets,
        seed,
        retention,
        db,
    } = args;
    anyhow::ensure!(
        (1..=1_000_000).contains(&wallets),
        "--wallets must be from 1 to 1000000"
    );
    let store = open_store(&db, 2)?.with_retention(retention.into());
    seed::seed_demo(&store, wallets, seed)?;
    Ok(())
}

/// Scans once, or every `--every` seconds.
pub(super) fn scan(args: ScanArgs) -> anyhow::Result<()> {
    let ScanArgs {
        info_url,
        wallets,
        once,
        every,
        stale_after,
        tuning,
        retention,
        db,
    } = args;
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
        match market_ingest::run_scan(&source, &store, &list, &cfg, &mut print_wallet_progress) {
            Ok(report) => report_scan(&report),
            Err(e) if every.is_none() => return Err(anyhow::anyhow!("scan not applied: {e}")),
            Err(e) => {
                log::error!(target: LOG, "scan not applied (the served data is unchanged): {e}")
            }
        }
        let Some(secs) = every else { break };
        let next = std::time::Duration::from_secs(secs);
        if let Some(wait) = next.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    Ok(())
}

/// Tracks the exchange until stopped.
pub(super) fn track(args: TrackArgs) -> anyhow::Result<()> {
    let TrackArgs {
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
        max_reads_per_publish,
        no_candles,
        tuning,
        retention,
        db,
    } = args;
    // Its publishes' commits do not copy the log back: its checkpoint
    // thread does (`Tracker::checkpoint_loop`).
    let options = PoolOptions {
        max_size: 4,
        checkpoint: Checkpoint::Separate,
        ..PoolOptions::default()
    };
    let store = open_store_with(&db, options)?.with_retention(retention.into());
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
        max_reads_per_publish: usize::try_from(max_reads_per_publish).unwrap_or(usize::MAX),
    };
    let source = market_ingest::client::HttpSource::new(
        &info_url,
        std::time::Duration::from_secs(tuning.timeout),
    );
    let stop = stop_on_signal()?;
    let tracker = std::sync::Arc::new(market_tracker::Tracker::new(
        cfg,
        store,
        Box::new(source),
        stop,
    )?);
    if let Some(addr) = &tuning.metrics_bind {
        let metrics =
            crate::metrics::IngestMetrics::new(&tracker.config().scan, Some(tracker.clone()));
        let started = std::time::Instant::now();
        serve_metrics(addr, std::sync::Arc::new(move || metrics.render(started)))?;
    }
    eprintln!("tracking {info_url}; a data version is published every {publish_every} s");
    tracker.run();
    match tracker.unsaved() {
        0 => log::info!("stopped on a signal; every registry entry is saved"),
        n => anyhow::bail!(
            "stopped on a signal with {n} registry entries not saved (the database refused \
             them; the log says why): their wallets are discovered again at the next start"
        ),
    }
    Ok(())
}

/// A flag that SIGTERM, SIGINT or SIGQUIT sets, for the tracker's stop
/// path: its threads end at their next check (a publish under way ends
/// first), the registry entries not yet saved are saved, SQLite's
/// write-ahead log is copied back, and the process exits 0 (1 when an
/// entry could not be saved). A second signal while it stops exits at
/// once (status 1), for an operator who cannot wait.
fn stop_on_signal() -> anyhow::Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    use signal_hook::{consts::TERM_SIGNALS, flag};
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for &signal in TERM_SIGNALS {
        // Registered first, so it sees the flag as the earlier signal left it.
        flag::register_conditional_shutdown(signal, 1, stop.clone())?;
        flag::register(signal, stop.clone())?;
    }
    Ok(stop)
}

/// Loads recorded responses as one scan.
pub(super) fn import(args: ImportArgs) -> anyhow::Result<()> {
    let ImportArgs {
        from,
        wallets,
        retention,
        db,
    } = args;
    let store = open_store(&db, 2)?.with_retention(retention.into());
    let source = market_ingest::client::DirSource::open(&from).map_err(|e| anyhow::anyhow!(e))?;
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
    let report = market_ingest::run_scan(&source, &store, &list, &cfg, &mut print_wallet_progress)
        .map_err(|e| anyhow::anyhow!("import not applied: {e}"))?;
    report_scan(&report);
    Ok(())
}
