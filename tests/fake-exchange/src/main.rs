//! Runs a simulated exchange until interrupted: `cargo run --release -p
//! fake-exchange -- --wallets 200000`, then point `market-data-server track`
//! at the URLs it prints.

use clap::Parser;
use fake_exchange::{start_simulated, SimConfig};

/// A fake Hyperliquid-style exchange (info API, leaderboard, WebSocket) over
/// a simulated market.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Wallets at start.
    #[arg(long, default_value_t = 200_000)]
    wallets: usize,
    /// Rows of the leaderboard.
    #[arg(long, default_value_t = 30_000)]
    leaderboard_rows: usize,
    /// Each wallet starts with 0 to this many positions.
    #[arg(long, default_value_t = 4)]
    max_positions: usize,
    /// Only the first this many wallets start with positions (1 to
    /// --max-positions each); the others start empty.
    #[arg(long)]
    holders: Option<usize>,
    /// HIP-3 dexes besides the main dex (0–12).
    #[arg(long, default_value_t = 8)]
    hip3_dexes: usize,
    /// Trades per second (each pushed on the WebSocket with both users).
    #[arg(long, default_value_t = 20)]
    trades_per_second: u32,
    /// New wallets per minute (each trades when it appears).
    #[arg(long, default_value_t = 6)]
    new_wallets_per_minute: u32,
    /// Weight a sliding minute may carry before requests are answered 429 (0: no limit).
    #[arg(long, default_value_t = 1200)]
    weight_per_minute: u32,
    /// Address of the info API, leaderboard and `/truth`.
    #[arg(long, default_value = "127.0.0.1:9001")]
    bind: String,
    /// Address of the WebSocket.
    #[arg(long, default_value = "127.0.0.1:9002")]
    ws_bind: String,
    /// Every n-th wallet's account states leave out cumFunding and returnOnEquity and carry an undocumented member (0: none).
    #[arg(long, default_value_t = 7)]
    sparse_every: usize,
    /// Wallets that trade round trips and hold nothing.
    #[arg(long, default_value_t = 100)]
    flat_traders: usize,
    /// Round trips of the flat traders per minute.
    #[arg(long, default_value_t = 60)]
    flat_trades_per_minute: u32,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[actix_web::main]
async fn main() {
    let a = Args::parse();
    let cfg = SimConfig {
        wallets: a.wallets,
        leaderboard_rows: a.leaderboard_rows,
        max_positions: a.max_positions,
        hip3_dexes: a.hip3_dexes.min(12),
        holders: a.holders,
        trades_per_second: a.trades_per_second,
        new_wallets_per_minute: a.new_wallets_per_minute,
        weight_per_minute: (a.weight_per_minute > 0).then_some(a.weight_per_minute),
        sparse_every: a.sparse_every,
        flat_traders: a.flat_traders,
        flat_trades_per_minute: a.flat_trades_per_minute,
        seed: a.seed,
    };
    let fake = start_simulated(&cfg, &a.bind, &a.ws_bind).await;
    let truth = fake.ex.world().truth();
    println!(
        "fake exchange: {} wallets ({} of 1M USD or more), {} on the leaderboard, open interest {} USD",
        truth["wallets"], truth["whales"], truth["leaderboardRows"], truth["openInterestUsd"]
    );
    println!("  --info-url {}", fake.info_url);
    println!("  --leaderboard-url {}", fake.leaderboard_url);
    println!("  --ws-url {}", fake.ws_url);
    println!("  what it holds: curl -s {}", fake.truth_url);
    println!(
        "  its whales and every position change: {0}/whales, {0}/journal",
        fake.truth_url.trim_end_matches("/truth")
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
