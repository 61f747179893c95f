//! One connection type over both backends, and the r2d2 pool.

use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::pg::PgConnection;
use diesel::r2d2::R2D2Connection;
use diesel::sqlite::SqliteConnection;
use diesel::Connection;

use crate::{Checkpoint, StoreError};

/// A connection to SQLite or PostgreSQL; queries are written once against it.
#[derive(diesel::MultiConnection)]
pub enum DbConnection {
    /// PostgreSQL (`postgres://` or `postgresql://` URLs).
    Postgresql(PgConnection),
    /// SQLite (any other URL is a file path).
    Sqlite(SqliteConnection),
}

/// Which backend a database URL selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// SQLite file.
    Sqlite,
    /// PostgreSQL server.
    Postgres,
}

impl BackendKind {
    /// `postgres://` and `postgresql://` select PostgreSQL; anything else is an SQLite path.
    pub fn from_url(url: &str) -> BackendKind {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            BackendKind::Postgres
        } else {
            BackendKind::Sqlite
        }
    }
}

/// r2d2 manager that establishes the variant chosen from the URL itself
/// (`MultiConnection::establish` would try PostgreSQL first and hide its real error).
#[derive(Debug, Clone)]
pub struct ConnectionManager {
    url: String,
    kind: BackendKind,
    busy_timeout: Duration,
    checkpoint: Checkpoint,
}

impl ConnectionManager {
    /// A manager for `url`.
    pub fn new(url: &str, busy_timeout: Duration, checkpoint: Checkpoint) -> Self {
        ConnectionManager {
            url: url.to_owned(),
            kind: BackendKind::from_url(url),
            busy_timeout,
            checkpoint,
        }
    }

    /// The selected backend.
    pub fn kind(&self) -> BackendKind {
        self.kind
    }

    /// Establishes one connection, with SQLite's pragmas applied.
    pub fn connect(&self) -> Result<DbConnection, StoreError> {
        match self.kind {
            BackendKind::Postgres => PgConnection::establish(&self.url)
                .map(DbConnection::Postgresql)
                .map_err(|e| StoreError::Connect(e.to_string())),
            BackendKind::Sqlite => {
                let path = self.url.strip_prefix("sqlite://").unwrap_or(&self.url);
                let mut conn = SqliteConnection::establish(path)
                    .map_err(|e| StoreError::Connect(e.to_string()))?;
                // busy_timeout first: it turns lock contention into a bounded
                // wait, and switching a new file to WAL takes a lock that the
                // pool's other new connections contend for ("database is
                // locked" otherwise). WAL lets readers run during a write;
                // foreign keys enforce cascades.
                // Pages past which a commit checkpoints.
                let autocheckpoint = match self.checkpoint {
                    Checkpoint::OnCommit => 1000,
                    Checkpoint::Separate => crate::SEPARATE_CHECKPOINT_BACKSTOP,
                };
                conn.batch_execute(&format!(
                    "PRAGMA busy_timeout = {}; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA wal_autocheckpoint = {autocheckpoint};",
                    self.busy_timeout.as_millis()
                ))
                .map_err(|e| StoreError::Connect(e.to_string()))?;
                Ok(DbConnection::Sqlite(conn))
            }
        }
    }
}

impl r2d2::ManageConnection for ConnectionManager {
    type Connection = DbConnection;
    type Error = StoreError;

    fn connect(&self) -> Result<DbConnection, StoreError> {
        ConnectionManager::connect(self)
    }

    fn is_valid(&self, conn: &mut DbConnection) -> Result<(), StoreError> {
        conn.batch_execute("SELECT 1").map_err(StoreError::from)
    }

    fn has_broken(&self, conn: &mut DbConnection) -> bool {
        conn.is_broken()
    }
}
