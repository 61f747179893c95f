//! Rewriting an SQLite file whole at the store's page size
//! (`market-data-server compact`).

use diesel::connection::SimpleConnection;
use diesel::sqlite::SqliteConnection;
use diesel::{Connection, RunQueryDsl};

use crate::connection::{pragma_value, sqlite_path, BackendKind, PAGE_SIZE};
use crate::StoreError;

/// What [`compact_sqlite_file`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compacted {
    /// Page size before, in bytes.
    pub page_size_before: i64,
    /// Page size after ([`PAGE_SIZE`]).
    pub page_size_after: i64,
    /// The database's size before (its pages times their size, the pages
    /// still in the write-ahead log included), in bytes.
    pub bytes_before: i64,
    /// The same after, in bytes: the file's size (the log is gone).
    pub bytes_after: i64,
}

/// Why [`compact_sqlite_file`] did not compact.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    /// The URL selects PostgreSQL.
    #[error(
        "compact rewrites SQLite files; PostgreSQL reclaims its space itself \
         (autovacuum, or VACUUM FULL run by its administrator)"
    )]
    Postgres,
    /// No file at the path.
    #[error("no database file at {0}: compact rewrites an existing file")]
    NoFile(String),
    /// Another connection has the file open.
    #[error(
        "another process has the database open: stop every serve, track or scan on it, \
         then run compact again (the file is unchanged)"
    )]
    InUse,
    /// The rewrite did not take the page size.
    #[error("the database was rewritten but kept pages of {0} bytes")]
    PageSizeKept(i64),
    /// Rewritten, but still out of WAL mode.
    #[error(
        "the database was rewritten but is not back in WAL mode; \
         the next process that opens it sets it"
    )]
    NotBackToWal,
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<diesel::result::Error> for CompactError {
    fn from(e: diesel::result::Error) -> Self {
        CompactError::Store(e.into())
    }
}

impl CompactError {
    /// `InUse` for SQLite's "database is locked" (another connection has
    /// the file), else the error as it is.
    fn busy_is_in_use(self) -> Self {
        match self {
            CompactError::Store(e) if e.is_unavailable() => CompactError::InUse,
            other => other,
        }
    }
}

/// Rewrites the SQLite database at `url` whole (`VACUUM`) with
/// [`PAGE_SIZE`]-byte pages, and leaves it in WAL mode as the store opens
/// it. A file keeps the page size it was created with, so a file made
/// before the store's page size changed needs this to get it; the rewrite
/// also returns the pages freed by pruning to the file system.
///
/// Nothing else may have the file open: the connection takes the file for
/// itself (exclusive locking) before it leaves WAL mode, which a change of
/// page size needs, and keeps it until the rewrite is done. With another
/// process on it, this fails with [`CompactError::InUse`] and the file is
/// as it was. The rewrite needs free disk up to twice the file's size: a
/// copy in the temporary directory (`SQLITE_TMPDIR`, else `TMPDIR`, else
/// `/var/tmp` or `/tmp`) and a rollback journal beside the file. An
/// interrupted rewrite leaves either the old file or the new one, never a
/// mix (the journal, `FILE-journal`, must stay beside the file until the
/// next open rolls it back).
pub fn compact_sqlite_file(url: &str) -> Result<Compacted, CompactError> {
    if BackendKind::from_url(url) == BackendKind::Postgres {
        return Err(CompactError::Postgres);
    }
    let path = sqlite_path(url);
    if !std::path::Path::new(path).exists() {
        return Err(CompactError::NoFile(path.to_owned()));
    }
    let mut conn =
        SqliteConnection::establish(path).map_err(|e| StoreError::Connect(e.to_string()))?;
    let page_size_before = pragma_value(&mut conn, "page_size")?;
    let bytes_before = file_bytes(&mut conn)?;
    // Leaving WAL mode copies the log back; SQLite refuses it ("database is
    // locked", or the mode left as it was) while another connection has
    // the file open, and exclusive locking keeps the file this
    // connection's alone from then on.
    conn.batch_execute("PRAGMA locking_mode = EXCLUSIVE;")?;
    if journal_mode(&mut conn, "DELETE").map_err(CompactError::busy_is_in_use)? == "wal" {
        return Err(CompactError::InUse);
    }
    conn.batch_execute(&format!("PRAGMA page_size = {PAGE_SIZE}; VACUUM;"))
        .map_err(|e| CompactError::from(e).busy_is_in_use())?;
    let page_size_after = pragma_value(&mut conn, "page_size")?;
    let bytes_after = file_bytes(&mut conn)?;
    // The file given back to other connections before WAL mode, so that
    // they share its log index as usual.
    conn.batch_execute("PRAGMA locking_mode = NORMAL; SELECT 1 FROM sqlite_master LIMIT 1;")?;
    if journal_mode(&mut conn, "WAL").unwrap_or_default() != "wal" {
        return Err(CompactError::NotBackToWal);
    }
    if page_size_after != PAGE_SIZE {
        return Err(CompactError::PageSizeKept(page_size_after));
    }
    Ok(Compacted {
        page_size_before,
        page_size_after,
        bytes_before,
        bytes_after,
    })
}

/// Sets the journal mode and returns the one in force after (SQLite
/// answers with the old mode when it cannot change it).
fn journal_mode(conn: &mut SqliteConnection, mode: &str) -> Result<String, CompactError> {
    #[derive(diesel::QueryableByName)]
    struct Mode {
        #[diesel(sql_type = diesel::sql_types::Text)]
        journal_mode: String,
    }
    Ok(diesel::sql_query(format!("PRAGMA journal_mode = {mode}"))
        .get_result::<Mode>(conn)?
        .journal_mode
        .to_ascii_lowercase())
}

/// The database's size: its pages times their size.
fn file_bytes(conn: &mut SqliteConnection) -> Result<i64, CompactError> {
    Ok(pragma_value(conn, "page_count")? * pragma_value(conn, "page_size")?)
}
