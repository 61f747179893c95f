//! Telling servers of a new data version at once. On PostgreSQL every
//! version writer notifies [`CHANNEL`] inside its transaction (PostgreSQL
//! sends it at commit, and never for a rolled-back one), and a server
//! listens on a connection of its own ([`VersionListener`]), so that it
//! serves the version, and pushes its events to streams, without waiting
//! for its next poll. SQLite has no such channel: servers poll.

use std::time::{Duration, Instant};

use diesel::pg::PgConnection;
use diesel::prelude::*;
use diesel::sql_types::Text;

use crate::{BackendKind, DbConnection, Store, StoreError};

/// The notification channel of new data versions; the payload is the
/// version number.
pub const CHANNEL: &str = "market_data_version";
/// How often a waiting listener reads what its connection received: a
/// non-blocking read, no query.
const POLL: Duration = Duration::from_millis(20);

/// Notifies listeners of `version` when the caller's transaction commits
/// (PostgreSQL; nothing on SQLite).
pub(crate) fn notify_version(conn: &mut DbConnection, version: i64) -> Result<(), StoreError> {
    if let DbConnection::Postgresql(c) = conn {
        diesel::sql_query("SELECT pg_notify($1, $2)")
            .bind::<Text, _>(CHANNEL)
            .bind::<Text, _>(version.to_string())
            .execute(c)?;
    }
    Ok(())
}

/// A connection listening for new data versions.
pub struct VersionListener {
    conn: PgConnection,
}

impl VersionListener {
    /// Waits up to `timeout` for a new version; the newest notified, if any
    /// came (several commits meanwhile are one wake-up).
    pub fn wait(&mut self, timeout: Duration) -> Result<Option<i64>, StoreError> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut newest = None;
            for n in self.conn.notifications_iter() {
                let n = n?;
                if let Ok(v) = n.payload.parse::<i64>() {
                    newest = newest.max(Some(v));
                }
            }
            if newest.is_some() {
                return Ok(newest);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            std::thread::sleep(POLL.min(deadline - now));
        }
    }
}

impl Store {
    /// A listener for new data versions on a connection of its own, or
    /// `None` on SQLite (servers poll it).
    pub fn listen_for_versions(&self) -> Result<Option<VersionListener>, StoreError> {
        if self.kind() != BackendKind::Postgres {
            return Ok(None);
        }
        let DbConnection::Postgresql(mut conn) = self.pool_manager().connect()? else {
            unreachable!("a PostgreSQL store connects to PostgreSQL");
        };
        diesel::sql_query(format!("LISTEN {CHANNEL}")).execute(&mut conn)?;
        Ok(Some(VersionListener { conn }))
    }
}
