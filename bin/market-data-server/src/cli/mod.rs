//! The command line: one file per command group (`serve`, `tokens`,
//! `webhooks`, `ingest`), and what they share (`common`).

use clap::{Parser, Subcommand};
use market_store::{PoolOptions, Store};

mod common;
mod ingest;
mod serve;
mod tokens;
mod webhooks;

pub use common::{DbArgs, RetentionArgs};
pub use ingest::{ImportArgs, ScanArgs, ScanTuning, SeedDemoArgs, TrackArgs};
pub use serve::ServeArgs;
pub use tokens::TokenCommand;
pub use webhooks::{TargetArgs, WebhookCommand};

/// Read-only HTTP/JSON market and wallet data service.
#[derive(Parser, Debug)]
#[command(name = "market-data-server", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
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
    /// Rewrite an SQLite file whole with the store's page size (32 KB;
    /// files made before 2026-11-30 keep 4 KB pages until compacted) and
    /// give the space that pruning freed back to the file system. Stop
    /// every other process on the file first; it needs free disk up to
    /// twice the file's size (docs/operations.md).
    Compact(DbArgs),
    /// Replace the data with the deterministic demo dataset (tokens are kept).
    SeedDemo(SeedDemoArgs),
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Manage webhooks: signed deliveries of position events.
    #[command(subcommand)]
    Webhook(WebhookCommand),
    /// Print the OpenAPI document (`market-data-server openapi > openapi/openapi.json`).
    Openapi,
    /// Scan an info endpoint (Hyperliquid info API format) and write each scan as one data version.
    Scan(ScanArgs),
    /// Track the exchange live: discover wallets (leaderboard, trades stream,
    /// node trades, wallet list), refresh the biggest first within the weight
    /// budget, and publish a data version every --publish-every seconds.
    Track(TrackArgs),
    /// Load recorded info responses from files (see docs/ingest.md) as one scan.
    Import(ImportArgs),
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Migrate(db) => {
            let store = Store::open(&db.database_url, PoolOptions::default())?;
            let ran = store.migrate()?;
            println!("applied {ran} migration(s)");
        }
        Command::Compact(db) => {
            let done = market_store::compact_sqlite_file(&db.database_url)?;
            println!(
                "compacted: pages of {} bytes (were {}), {} MB (were {} MB)",
                done.page_size_after,
                done.page_size_before,
                done.bytes_after / 1_000_000,
                done.bytes_before / 1_000_000
            );
        }
        Command::SeedDemo(args) => ingest::seed_demo(args)?,
        Command::Serve(args) => serve::serve(&args)?,
        Command::Demo(args) => serve::demo(&args)?,
        Command::Token(command) => tokens::run(command)?,
        Command::Webhook(command) => webhooks::run(command)?,
        Command::Openapi => print!("{}", crate::openapi::document_json()),
        Command::Scan(args) => ingest::scan(args)?,
        Command::Track(args) => ingest::track(args)?,
        Command::Import(args) => ingest::import(args)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn scan_takes_once_or_every_not_both() {
        let scan = |extra: &[&str]| {
            let mut args = vec![
                "market-data-server",
                "scan",
                "--info-url",
                "http://x",
                "--wallets",
                "w.txt",
            ];
            args.extend_from_slice(extra);
            Cli::try_parse_from(args)
        };
        assert!(scan(&["--once"]).is_ok());
        assert!(scan(&["--every", "5"]).is_ok());
        let err = scan(&["--once", "--every", "5"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
        let Command::Scan(args) = scan(&[]).unwrap().command else {
            panic!("scan parses as scan");
        };
        assert_eq!((args.stale_after, args.tuning.weight_per_minute), (3, 1200));
    }
}
