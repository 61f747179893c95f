//! What the command groups share: where the data lives and how long
//! history is kept, opening the store, and the metrics address.

use std::net::TcpListener;

use anyhow::Context;
use clap::Args;
use market_store::{PoolOptions, Store};

/// The log target of the commands' own lines, whichever file logs them
/// (operators filter and read `market_data_server::cli`).
pub(super) const LOG: &str = "market_data_server::cli";

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

/// Opens (and migrates) the store at `db` with a pool of `pool` connections.
pub(crate) fn open_store(db: &DbArgs, pool: u32) -> anyhow::Result<Store> {
    open_store_with(
        db,
        PoolOptions {
            max_size: pool,
            ..PoolOptions::default()
        },
    )
}

/// [`open_store`] with every pool option given.
pub(crate) fn open_store_with(db: &DbArgs, options: PoolOptions) -> anyhow::Result<Store> {
    let store = Store::open(&db.database_url, options)
        .with_context(|| format!("opening database {}", redact(&db.database_url)))?;
    store.migrate().context("migrating the database")?;
    Ok(store)
}

/// A URL with any password replaced, for messages.
pub(super) fn redact(url: &str) -> String {
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

/// Binds `addr` and serves `render` at `/metrics` there.
pub(super) fn serve_metrics(
    addr: &str,
    render: std::sync::Arc<dyn Fn() -> String + Send + Sync>,
) -> anyhow::Result<()> {
    let listener =
        TcpListener::bind(addr).with_context(|| format!("binding the metrics address {addr}"))?;
    crate::metrics::spawn_endpoint(listener, render)?;
    Ok(())
}

/// A time as the tables show it: RFC 3339 UTC, or `-`.
pub(super) fn fmt_time(t: Option<time::OffsetDateTime>) -> String {
    t.map_or_else(|| "-".to_owned(), market_model::timestamp::format_utc)
}
