//! `compact` on a file made with SQLite's 4 KB pages (as every file was
//! before the store's page size changed): refused while a server has the
//! file open, leaving it as it was; with the server stopped, the file is
//! rewritten at the store's page size and a new server answers every page
//! as before, byte for byte.

use std::process::Command;

use diesel::connection::SimpleConnection;
use diesel::{Connection, RunQueryDsl};

use crate::saved_version::{answers, stop};
use crate::shutdown::{new_token, Server};
use crate::support::*;

/// `market-data-server compact` on `url`: (success, stdout, stderr).
fn compact(url: &str) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_market-data-server"))
        .args(["compact", "--database-url", url])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn page_size(url: &str) -> i64 {
    #[derive(diesel::QueryableByName)]
    struct Answer {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        page_size: i64,
    }
    let mut c = diesel::SqliteConnection::establish(url).unwrap();
    diesel::sql_query("PRAGMA page_size")
        .get_result::<Answer>(&mut c)
        .unwrap()
        .page_size
}

#[tokio::test]
async fn compact_rewrites_an_older_file_and_a_server_answers_as_before() {
    let db = seeded_database(Backend::Sqlite);
    // The seeded copy made with 4 KB pages, as an older file.
    diesel::SqliteConnection::establish(db.url())
        .unwrap()
        .batch_execute(
            "PRAGMA journal_mode = DELETE; PRAGMA page_size = 4096; VACUUM; \
             PRAGMA journal_mode = WAL;",
        )
        .unwrap();
    assert_eq!(page_size(db.url()), 4096);
    let (store, token) = new_token(&db);
    drop(store);
    let dir = tempfile::tempdir().unwrap();
    let args = ["--saved-version", "none"];

    let server = Server::start_with(&db, &args, &dir.path().join("first.log"));
    let before = answers(&server.addr, &token).await;
    let (ok, _, stderr) = compact(db.url());
    assert!(!ok, "refused while the server has the file open");
    assert!(
        stderr.contains("another process has the database open"),
        "{stderr}"
    );
    assert_eq!(page_size(db.url()), 4096, "the refused file is as it was");
    assert_eq!(answers(&server.addr, &token).await, before);
    stop(server).await;

    let (ok, stdout, stderr) = compact(db.url());
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("compacted: pages of 32768 bytes (were 4096)"),
        "{stdout}"
    );
    assert_eq!(page_size(db.url()), 32_768);
    let server = Server::start_with(&db, &args, &dir.path().join("second.log"));
    assert_eq!(answers(&server.addr, &token).await, before);
    stop(server).await;

    let (ok, _, stderr) = compact(&dir.path().join("none.db").to_string_lossy());
    assert!(!ok);
    assert!(stderr.contains("no database file at"), "{stderr}");
    assert!(!dir.path().join("none.db").exists(), "no file is made");
}
