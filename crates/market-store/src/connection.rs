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
                let mut conn = SqliteConnection::establish(sqlite_path(&self.url))
                    .map_err(|e| StoreError::Connect(e.to_string()))?;
                // busy_timeout first: it turns lock contention into a bounded
                // wait, and switching a new file to WAL takes a lock that the
                // pool's other new connections contend for ("database is
                // locked" otherwise). The page size next: it only takes effect
                // on a file not written yet (see `PAGE_SIZE`). WAL lets readers
                // run during a write; foreign keys enforce cascades.
                let setup = |conn: &mut SqliteConnection, sql: String| {
                    conn.batch_execute(&sql)
                        .map_err(|e| StoreError::Connect(e.to_string()))
                };
                setup(
                    &mut conn,
                    format!(
                        "PRAGMA busy_timeout = {}; PRAGMA page_size = {PAGE_SIZE}; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;",
                        self.busy_timeout.as_millis()
                    ),
                )?;
                // The log's size past which a commit checkpoints, in the
                // pages of this file (older files keep 4 KB pages).
                let bytes = pragma_value(&mut conn, "page_size")
                    .map_err(|e| StoreError::Connect(e.to_string()))?;
                let autocheckpoint = match self.checkpoint {
                    Checkpoint::OnCommit => crate::ON_COMMIT_CHECKPOINT_BYTES,
                    Checkpoint::Separate => crate::SEPARATE_CHECKPOINT_BACKSTOP_BYTES,
                } / bytes;
                setup(
                    &mut conn,
                    format!("PRAGMA wal_autocheckpoint = {autocheckpoint};"),
                )?;
                Ok(DbConnection::Sqlite(conn))
            }
        }
    }
}

/// The page size of new SQLite files, in bytes (SQLite's default is 4,096).
/// A publish touches a few pages at random places of large tables for each
/// wallet it changes (its row, its index entries, its history points, its
/// scan state and registry entry); what each touched page costs (finding it,
/// fetching it, logging it, checking it) weighs more than its bytes, and
/// 32 KB pages take fewer of them. The store's part of a publish of 7,000
/// changed wallets took 0.67–0.89× of its time with 4 KB pages in the
/// publish benchmark, and `track`'s publishes 0.91–0.94× of their CPU
/// (docs/performance.md); each page a publish touches is logged whole, so
/// the write-ahead log grows about twice as large. A file keeps the page size it was created with;
/// `market-data-server compact` rewrites one at this size.
pub const PAGE_SIZE: i64 = 32_768;

/// The file path of an SQLite URL (a leading `sqlite://` is dropped).
pub(crate) fn sqlite_path(url: &str) -> &str {
    url.strip_prefix("sqlite://").unwrap_or(url)
}

/// The value of a pragma that reads as a number (`page_size`,
/// `page_count`, `cache_size`: one that SQLite offers as a table-valued
/// function, `pragma_<name>()`).
pub(crate) fn pragma_value(conn: &mut SqliteConnection, name: &str) -> diesel::QueryResult<i64> {
    #[derive(diesel::QueryableByName)]
    struct Value {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        value: i64,
    }
    use diesel::RunQueryDsl;
    diesel::sql_query(format!("SELECT {name} AS value FROM pragma_{name}()"))
        .get_result::<Value>(conn)
        .map(|v| v.value)
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
