//! Repository tests on a real SQLite file, and on PostgreSQL when `TEST_DATABASE_URL` is set.

use market_engine::{DataVersion, VersionChanges};
use market_model::*;
use time::macros::{date, datetime};

use crate::*;

fn d(s: &str) -> Decimal {
    s.parse().unwrap()
}

/// Keeps a test database alive; dropping it removes the database.
enum Guard {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres { admin_url: String, name: String },
}

impl Drop for Guard {
    fn drop(&mut self) {
        use diesel::connection::SimpleConnection;
        use diesel::Connection;
        if let Guard::Postgres { admin_url, name } = self {
            if let Ok(mut admin) = diesel::PgConnection::establish(admin_url) {
                let _ =
                    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
            }
        }
    }
}

fn migrated(url: &str) -> Store {
    let store = Store::open(url, PoolOptions::default()).unwrap();
    assert!(
        store.migrate().unwrap() >= 2,
        "the embedded migrations run on a new database"
    );
    assert_eq!(store.migrate().unwrap(), 0, "migrations are idempotent");
    store
}

/// A fresh, migrated SQLite store, plus a PostgreSQL one when `TEST_DATABASE_URL` is set.
fn stores() -> Vec<(Store, Guard)> {
    stores_at()
        .into_iter()
        .map(|(store, guard, _)| (store, guard))
        .collect()
}

/// [`stores`], each with the URL it was opened at.
fn stores_at() -> Vec<(Store, Guard, String)> {
    use diesel::connection::SimpleConnection;
    use diesel::Connection;
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db").to_str().unwrap().to_owned();
    let mut out = vec![(migrated(&path), Guard::Sqlite(dir), path)];
    if let Some(admin_url) = std::env::var("TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
    {
        let name = format!(
            "mds_store_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let mut admin = diesel::PgConnection::establish(&admin_url).unwrap_or_else(|e| {
            panic!("TEST_DATABASE_URL is set but PostgreSQL is unreachable: {e}")
        });
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        let base = admin_url.split('?').next().unwrap();
        let url = format!("{}/{name}", &base[..base.rfind('/').unwrap()]);
        out.push((migrated(&url), Guard::Postgres { admin_url, name }, url));
    }
    out
}

/// Reverts the store's migrations, the newest first, through the one whose
/// name ends with `last`; returns how many it reverted.
fn revert_through(conn: &mut DbConnection, last: &str) -> usize {
    use diesel_migrations::MigrationHarness;
    let mut reverted = 0;
    loop {
        let name = match conn {
            DbConnection::Sqlite(c) => c.revert_last_migration(crate::SQLITE_MIGRATIONS),
            DbConnection::Postgresql(c) => c.revert_last_migration(crate::POSTGRES_MIGRATIONS),
        }
        .unwrap()
        .to_string();
        reverted += 1;
        if name.ends_with(last) {
            return reverted;
        }
        assert!(reverted < 100, "no migration {last}");
    }
}

fn followed(address: &str, symbol: &str, upnl: &str) -> TrackedPosition {
    TrackedPosition {
        address: address.into(),
        symbol: symbol.into(),
        direction: Direction::Long,
        opened_at: datetime!(2026-11-21 23:59:58.123456 UTC),
        open_time_known: symbol == "BTC",
        last_upnl: d(upnl),
    }
}

fn market(symbol: &str, price: &str) -> Market {
    Market {
        symbol: symbol.into(),
        price: d(price),
        change24h_pct: d("-2.5000"),
        volume24h: d("123456789012345678901234567890.123456789"),
        open_interest: d("0.0000001"),
        funding: d("-0.00009116"),
        long_count: 1,
        short_count: 0,
        long_short_ratio: d("1.0000"),
        total_liquidation_value: d("12.34"),
        long_liquidation_value: d("12.34"),
        short_liquidation_value: d("0.0000"),
    }
}

fn wallet(address: &str) -> Wallet {
    Wallet {
        address: address.into(),
        label: Some("Fund \"A\"".into()),
        tags: vec!["fund".into(), "smart-money".into()],
        kols: vec![Kol {
            name: "K".into(),
            platform: "x".into(),
            handle: "@k".into(),
        }],
        kol_profile: Some(KolProfile {
            name: "K".into(),
            bio: None,
            followers: 12,
        }),
        size_class: SizeClass::Shrimp,
        direction: WalletDirection::Long,
        account_total_value: d("1000.10"),
        total_position_value: d("12.34"),
        long_value: d("12.34"),
        short_value: d("0"),
        leverage: d("0.01"),
        positions: 1,
        observed_at: datetime!(2026-11-22 01:02:03 UTC),
        net_pnl: None,
        roi: Some(d("-12.50")),
        win_rate: Some(d("55.00")),
        strategy: Some(Strategy::DayTrader),
        strategy_confidence: Some(d("0.75")),
    }
}

fn position(address: &str, symbol: &str) -> MarketPosition {
    MarketPosition {
        address: address.into(),
        label: None,
        tags: vec![],
        symbol: symbol.into(),
        direction: Direction::Long,
        position_value: d("12.34"),
        liq_price: Some(d("30.5334")),
        observed_at: datetime!(2026-11-22 01:02:03 UTC),
        leverage: d("10"),
        size: d("413.68"),
        size_unit: symbol.into(),
        u_pnl: d("-520.65"),
        u_pnl_pct: d("36.15"),
        entry_price: d("33.5531"),
        mark_price: d("34.81"),
        margin: d("1440.09"),
        funding_cost: d("-12.485712"),
    }
}

/// A position whose text is easy to get wrong: short, no liquidation
/// price, a zero with scale, a tiny size, a 39-digit uPnL, a fractional
/// instant.
fn odd_position(address: &str, symbol: &str) -> MarketPosition {
    MarketPosition {
        direction: Direction::Short,
        liq_price: None,
        margin: d("0.0000"),
        size: d("0.00000001"),
        u_pnl: d("-123456789012345678901234567890.123456789"),
        observed_at: datetime!(2026-11-22 01:02:03.25 UTC),
        ..position(address, symbol)
    }
}

fn day(date: time::Date, symbol: &str, coverage: Coverage) -> LiquidityDay {
    let levels = vec![
        Level {
            side: Direction::Long,
            bucket_price: d("9"),
            position_count: 1,
            total_amount_usd: d("5.5"),
            min_liquidation_price: d("9.1"),
            max_liquidation_price: d("9.1"),
        },
        Level {
            side: Direction::Long,
            bucket_price: d("10"),
            position_count: 2,
            total_amount_usd: d("6.84"),
            min_liquidation_price: d("9.6"),
            max_liquidation_price: d("10.4"),
        },
    ];
    LiquidityDay {
        date,
        network: NETWORK_ID.into(),
        canonical_asset: symbol::canonical_of(symbol).into(),
        network_asset_symbol: symbol.into(),
        asset_alias: symbol::alias_of(symbol),
        coverage,
        bucket_size: d("1"),
        bucket_method: "nearest".into(),
        updated_at: datetime!(2026-11-22 01:02:03 UTC),
        totals: LiquidityTotals::of(&levels),
        levels,
    }
}

fn write_dataset(store: &Store) -> i64 {
    let markets = [market("BTC", "92391.3380"), market("xyz:TSLA", "354.748")];
    let wallets = [wallet("0xaa")];
    let positions = [position("0xaa", "BTC")];
    let current = [
        day(date!(2026 - 11 - 22), "BTC", Coverage::Current),
        day(date!(2026 - 11 - 22), "xyz:TSLA", Coverage::Current),
    ];
    let history: Vec<LiquidityDay> = [date!(2026 - 11 - 20), date!(2026 - 11 - 21)]
        .into_iter()
        .flat_map(|dt| {
            [
                day(dt, "BTC", Coverage::EndOfDay),
                day(dt, "xyz:TSLA", Coverage::EndOfDay),
            ]
        })
        .collect();
    let candles: Vec<Candle> = (0..5)
        .map(|i| Candle {
            time: 1_794_999_600_000 + i * 3_600_000,
            open_time: time::OffsetDateTime::from_unix_timestamp(1_794_999_600 + i * 3600).unwrap(),
            open: d("92391.3380"),
            high: d("92792.5040"),
            low: d("91499.6733"),
            close: d("92673.3639"),
            volume: d("798.861"),
            trades: 1381,
        })
        .collect();
    store
        .replace_dataset(
            &DatasetWrite {
                snapshot: SnapshotWrite {
                    source: "test",
                    version: &version_of(
                        datetime!(2026-11-22 01:02:03 UTC),
                        &markets,
                        &wallets,
                        &positions,
                        &current,
                    ),
                },
                history_days: &history,
                history: Default::default(),
                candles: &[CandleBatch {
                    symbol: "BTC",
                    interval: Interval::H1,
                    candles: &candles,
                }],
            },
            &mut |_, _, _| {},
        )
        .unwrap()
}

#[test]
fn snapshot_round_trips_exactly() {
    for (store, _guard) in stores() {
        assert!(store.latest_snapshot().unwrap().is_none());
        let v = write_dataset(&store);
        let meta = store.latest_snapshot().unwrap().unwrap();
        assert_eq!(meta.version, v);
        let loaded = store.load_snapshot(&meta).unwrap();
        assert_eq!(
            loaded.version.markets,
            vec![market("BTC", "92391.3380"), market("xyz:TSLA", "354.748")]
        );
        // exact text survives: no binary-float round trip
        assert_eq!(
            loaded.version.markets[0].volume24h.to_string(),
            "123456789012345678901234567890.123456789"
        );
        assert_eq!(
            loaded.version.markets[0].open_interest.to_string(),
            "0.0000001"
        );
        assert_eq!(loaded.version.wallets, vec![wallet("0xaa")]);
        let mut expected = position("0xaa", "BTC");
        expected.label = Some("Fund \"A\"".into());
        expected.tags = vec!["fund".into(), "smart-money".into()];
        assert_eq!(loaded.version.positions, vec![expected]);
        assert_eq!(
            loaded.version.current_days[0].levels,
            day(date!(2026 - 11 - 22), "BTC", Coverage::Current).levels
        );
        assert_eq!(loaded.version.current_days[1].canonical_asset, "TSLA");
    }
}

/// A pragma's number, read on a connection of its own to `path`.
fn sqlite_pragma(path: &std::path::Path, pragma: &str) -> i64 {
    use diesel::Connection;
    let mut c = diesel::SqliteConnection::establish(path.to_str().unwrap()).unwrap();
    connection::pragma_value(&mut c, pragma).unwrap()
}

/// `PRAGMA wal_autocheckpoint` of a pooled connection of `store` (it has
/// no table-valued form).
fn autocheckpoint_pages(store: &Store) -> i64 {
    use diesel::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Pages {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        wal_autocheckpoint: i64,
    }
    let mut conn = store.conn().unwrap();
    let DbConnection::Sqlite(c) = &mut *conn else {
        unreachable!("an SQLite path")
    };
    diesel::sql_query("PRAGMA wal_autocheckpoint")
        .get_result::<Pages>(c)
        .unwrap()
        .wal_autocheckpoint
}

/// A new file is made with the store's page size, and its connections
/// checkpoint past as many bytes of log as with 4 KB pages, in either
/// checkpoint mode.
#[test]
fn a_new_file_takes_the_store_page_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    let store = migrated(path.to_str().unwrap());
    write_dataset(&store);
    assert_eq!(sqlite_pragma(&path, "page_size"), connection::PAGE_SIZE);
    assert_eq!(autocheckpoint_pages(&store), 125);
    let separate = PoolOptions {
        checkpoint: Checkpoint::Separate,
        ..PoolOptions::default()
    };
    let store = Store::open(path.to_str().unwrap(), separate).unwrap();
    assert_eq!(autocheckpoint_pages(&store), 12_500);
}

/// A file made with SQLite's 4 KB pages (before the store's page size
/// changed) keeps them when opened, is refused by `compact` while a store
/// has it open, and is rewritten at the store's page size by `compact`
/// once alone, every row read back as before.
#[test]
fn compact_rewrites_an_older_file_at_the_page_size_with_its_rows() {
    use diesel::connection::SimpleConnection;
    use diesel::Connection;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let url = path.to_str().unwrap();
    diesel::SqliteConnection::establish(url)
        .unwrap()
        .batch_execute("PRAGMA page_size = 4096; PRAGMA journal_mode = WAL;")
        .unwrap();
    let read_back = |store: &Store| {
        let meta = store.latest_snapshot().unwrap().unwrap();
        let v = store.load_snapshot(&meta).unwrap().version;
        let registry = store.registry().unwrap();
        (
            meta,
            v.markets,
            v.wallets,
            v.positions,
            v.current_days,
            registry,
        )
    };
    let store = migrated(url);
    write_dataset(&store);
    let mut entry = RegistryEntry::new(
        "0xaa".into(),
        DiscoverySource::List,
        datetime!(2026-11-22 01:02:03 UTC),
    );
    entry.account_value = Some(d("1234.5670"));
    store.save_registry(&[entry]).unwrap();
    let before = read_back(&store);
    assert_eq!(
        sqlite_pragma(&path, "page_size"),
        4096,
        "an existing file keeps its pages"
    );
    assert_eq!(autocheckpoint_pages(&store), 1_000, "4 MB of its pages");
    let refused = compact_sqlite_file(url).unwrap_err();
    assert!(matches!(refused, CompactError::InUse), "{refused}");
    assert_eq!(sqlite_pragma(&path, "page_size"), 4096);
    assert_eq!(
        read_back(&store),
        before,
        "a refused compaction changes nothing"
    );
    drop(store);

    // The pool may still be closing a connection it was opening.
    let done = (0..50)
        .find_map(|_| match compact_sqlite_file(url) {
            Err(CompactError::InUse) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                None
            }
            other => Some(other),
        })
        .expect("the file is free once the store is dropped")
        .unwrap();
    assert_eq!(
        (done.page_size_before, done.page_size_after),
        (4096, connection::PAGE_SIZE)
    );
    assert!(done.bytes_before > 0 && done.bytes_after > 0, "{done:?}");
    assert_eq!(sqlite_pragma(&path, "page_size"), connection::PAGE_SIZE);
    let store = Store::open(url, PoolOptions::default()).unwrap();
    assert_eq!(store.migrate().unwrap(), 0, "the schema came along");
    assert_eq!(read_back(&store), before);
    assert_eq!(autocheckpoint_pages(&store), 125);
    let mut conn = store.conn().unwrap();
    let DbConnection::Sqlite(c) = &mut *conn else {
        unreachable!("an SQLite path")
    };
    #[derive(diesel::QueryableByName, Debug)]
    struct Mode {
        #[diesel(sql_type = diesel::sql_types::Text)]
        journal_mode: String,
    }
    use diesel::RunQueryDsl;
    let mode = diesel::sql_query("PRAGMA journal_mode")
        .get_result::<Mode>(c)
        .unwrap();
    assert_eq!(mode.journal_mode, "wal");

    let missing = compact_sqlite_file(dir.path().join("none.db").to_str().unwrap()).unwrap_err();
    assert!(matches!(missing, CompactError::NoFile(_)), "{missing}");
    assert!(!dir.path().join("none.db").exists(), "no file is made");
    let pg = compact_sqlite_file("postgres://localhost/x").unwrap_err();
    assert!(matches!(pg, CompactError::Postgres), "{pg}");
}

/// A wallet row's instant is read by a parser of Diesel's text alone; any
/// other form SQLite stores (a row edited by hand) reads as Diesel reads it,
/// and a text that is no instant is an error, not a panic.
#[test]
fn wallet_instants_in_other_forms_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = migrated(dir.path().join("t.db").to_str().unwrap());
    write_dataset(&store);
    let meta = store.latest_snapshot().unwrap().unwrap();
    let observed = |store: &Store| {
        store
            .load_snapshot(&meta)
            .map(|l| l.version.wallets[0].observed_at)
    };
    assert_eq!(
        observed(&store).unwrap(),
        datetime!(2026-11-22 01:02:03 UTC)
    );
    let edit = |text: &str| {
        diesel::sql_query(format!("UPDATE wallets SET observed_at = '{text}'"))
            .execute(&mut *store.conn().unwrap())
            .unwrap()
    };
    assert_eq!(edit("2026-11-22T01:02:03.25"), 1);
    assert_eq!(
        observed(&store).unwrap(),
        datetime!(2026-11-22 01:02:03.25 UTC)
    );
    edit("yesterday");
    assert!(observed(&store).is_err());
}

/// The current levels moved from a table of their own into the market rows
/// (migration `000012`): what was stored before moves over exactly, and
/// back again when the migration is reverted.
#[test]
fn current_levels_move_into_the_market_rows_and_back_exactly() {
    use diesel::dsl::sql;
    use diesel::prelude::*;
    use diesel::sql_types::{BigInt, Text};
    for (store, _guard) in stores() {
        let mut btc = day(date!(2026 - 11 - 22), "BTC", Coverage::Current);
        btc.levels.push(Level {
            side: Direction::Short,
            bucket_price: d("0.000100"),
            position_count: 3,
            total_amount_usd: d("1200.50"),
            min_liquidation_price: d("0.000095"),
            max_liquidation_price: d("0.000104"),
        });
        btc.totals = LiquidityTotals::of(&btc.levels);
        let version = version_of(
            datetime!(2026-11-22 01:02:03 UTC),
            &[market("BTC", "92391.3380"), market("ETH", "3000")],
            &[wallet("0xaa")],
            &[position("0xaa", "BTC")],
            // ETH has no levels.
            &[btc.clone()],
        );
        write_version(&store, &version);
        let meta = store.latest_snapshot().unwrap().unwrap();
        let before = store.load_snapshot(&meta).unwrap().version;
        assert_eq!(before.current_days[0].levels, btc.levels);
        assert!(before.current_days[1].levels.is_empty());

        let mut conn = store.conn().unwrap();
        let reverted = revert_through(&mut conn, "000012");
        let rows: i64 = diesel::select(sql::<BigInt>("(SELECT COUNT(*) FROM current_levels)"))
            .get_result(&mut *conn)
            .unwrap();
        assert_eq!(rows, 3, "one row a level, as before the move");
        let short: Vec<String> = diesel::select(sql::<Text>(
            "(SELECT CAST(bucket_price AS TEXT) || ' ' || CAST(total_usd AS TEXT) \
             FROM current_levels WHERE side = 'short')",
        ))
        .load(&mut *conn)
        .unwrap();
        assert_eq!(short, ["0.000100 1200.50"], "decimals keep their text");
        drop(conn);
        assert_eq!(store.migrate().unwrap(), reverted);
        let after = store.load_snapshot(&meta).unwrap().version;
        assert_eq!(after.current_days, before.current_days);
        assert_eq!(
            serde_json::to_string(&after.current_days).unwrap(),
            serde_json::to_string(&before.current_days).unwrap(),
            "the same text, scales included"
        );
    }
}

/// The positions moved from a table of their own into their wallets' rows
/// (migration `000014`): reverted, every position of every stored version
/// is a row again with its text and its wallet row's validity; migrated
/// again, each version reads back as it was, decimals' text included.
#[test]
fn positions_move_into_the_wallet_rows_and_back_exactly() {
    use diesel::dsl::sql;
    use diesel::prelude::*;
    use diesel::sql_types::{BigInt, Text};
    for (store, _guard) in stores() {
        let markets = [market("BTC", "92391.3380"), market("ETH", "3000")];
        let wallets = [wallet("0xaa"), wallet("0xbb"), wallet("0xcc")];
        let odd = odd_position("0xbb", "ETH");
        let v1 = version_of(
            datetime!(2026-11-22 01:02:03 UTC),
            &markets,
            &wallets,
            &[position("0xaa", "BTC"), position("0xbb", "BTC"), odd],
            &[],
        );
        write_version(&store, &v1);
        let first = store.latest_snapshot().unwrap().unwrap();
        // A second whole version (the first one's rows are closed, not
        // gone) in which 0xaa holds another position; 0xcc holds none in
        // either.
        let mut v2 = v1.clone();
        v2.positions.retain(|p| p.address != "0xaa");
        v2.positions.push(position("0xaa", "ETH"));
        write_version(&store, &v2);
        let second = store.latest_snapshot().unwrap().unwrap();
        let load = |meta: &SnapshotMeta| {
            let mut v = store.load_snapshot(meta).unwrap().version;
            v.positions
                .sort_by(|a, b| (&a.address, &a.symbol).cmp(&(&b.address, &b.symbol)));
            serde_json::to_string(&v.positions).unwrap()
        };
        let before = [load(&first), load(&second)];

        let mut conn = store.conn().unwrap();
        let reverted = revert_through(&mut conn, "000014");
        let open_rows: i64 = diesel::select(sql::<BigInt>(
            "(SELECT COUNT(*) FROM positions WHERE valid_to IS NULL)",
        ))
        .get_result(&mut *conn)
        .unwrap();
        assert_eq!(open_rows, 3, "one row an open position, as before the move");
        let odd_row: Vec<String> = diesel::select(sql::<Text>(
            "(SELECT direction || ' ' || CAST(size AS TEXT) || ' ' || CAST(margin AS TEXT) \
             || ' ' || CAST(upnl AS TEXT) || ' ' || COALESCE(CAST(liq_price AS TEXT), 'none') \
             FROM positions WHERE address = '0xbb' AND symbol = 'ETH' AND valid_to IS NULL)",
        ))
        .load(&mut *conn)
        .unwrap();
        assert_eq!(
            odd_row,
            ["short 0.00000001 0.0000 -123456789012345678901234567890.123456789 none"],
            "decimals keep their text"
        );
        drop(conn);
        assert_eq!(store.migrate().unwrap(), reverted);
        assert_eq!([load(&first), load(&second)], before);
    }
}

/// Wallet rows appended instead of closed in place (migration `000018`):
/// reverted, every row is closed by its wallet's next row or removal
/// (`valid_to`), as the old layout had it; migrated again, every closed
/// row whose wallet the closing version did not write is a removal, and
/// both kept versions and the changes between them read back as they
/// were.
#[test]
fn wallet_rows_close_by_their_next_row_or_removal_and_back() {
    use diesel::prelude::*;
    use diesel::sql_types::Text;
    for (store, _guard) in stores() {
        let markets = [market("BTC", "1.5")];
        let wallets = [wallet("0xaa"), wallet("0xbb"), wallet("0xcc")];
        let v1 = version_of(
            datetime!(2026-11-22 01:00:00 UTC),
            &markets,
            &wallets,
            &[position("0xaa", "BTC"), position("0xbb", "BTC")],
            &[],
        );
        write_version(&store, &v1);
        let first = store.latest_snapshot().unwrap().unwrap();
        // v2 changes 0xbb, removes 0xcc and adds 0xdd.
        let mut bb = wallet("0xbb");
        bb.account_total_value = d("2000.00");
        let changes = changes_of(&markets, &[bb, wallet("0xdd")], &[], &["0xcc"]);
        publish_changes(&store, &changes, (3, 1));
        let second = store.latest_snapshot().unwrap().unwrap();
        let read = || {
            let whole = |meta: &SnapshotMeta| {
                let v = store.load_snapshot(meta).unwrap().version;
                serde_json::to_string(&(v.wallets, v.positions)).unwrap()
            };
            let c = store
                .load_changes(first.version, &second, 10)
                .unwrap()
                .unwrap();
            (
                whole(&first),
                whole(&second),
                serde_json::to_string(&(c.wallets, c.removed)).unwrap(),
            )
        };
        let before = read();

        let mut conn = store.conn().unwrap();
        let reverted = revert_through(&mut conn, "000018");
        #[derive(QueryableByName)]
        struct Line {
            #[diesel(sql_type = Text)]
            line: String,
        }
        let mut validity: Vec<String> = diesel::sql_query(format!(
            "SELECT address || ' ' || CAST(version - {v} AS TEXT) || ' ' \
             || COALESCE(CAST(valid_to - {v} AS TEXT), 'open') AS line FROM wallets",
            v = first.version
        ))
        .load::<Line>(&mut *conn)
        .unwrap()
        .into_iter()
        .map(|l| l.line)
        .collect();
        validity.sort();
        assert_eq!(
            validity,
            [
                "0xaa 0 open",
                "0xbb 0 1",
                "0xbb 1 open",
                "0xcc 0 1",
                "0xdd 1 open"
            ],
            "each row closed by its wallet's next row or removal"
        );
        drop(conn);
        assert_eq!(store.migrate().unwrap(), reverted);
        assert_eq!(read(), before);
    }
}

/// The followed positions moved from a table of their own into their
/// wallets' state rows (migration `000015`): reverted, each is a row again
/// with its text; migrated again, each wallet follows what it did, and a
/// followed position whose wallet had no state (a row edited by hand)
/// gets an empty state instead of being lost.
#[test]
fn followed_positions_move_into_the_state_rows_and_back_exactly() {
    use diesel::prelude::*;
    use diesel::sql_types::Text;
    for (store, _guard) in stores() {
        let states = [
            WalletScanState {
                address: "0xaa".into(),
                first_seen_at: Some(datetime!(2026-11-21 23:00:00 UTC)),
                realized_pnl: d("-12.50"),
                closed_count: 3,
                ..WalletScanState::default()
            },
            WalletScanState {
                address: "0xbb".into(),
                ..WalletScanState::default()
            },
        ];
        let tracked = [
            followed("0xaa", "ETH", "-123456789012345678901234567890.123456789"),
            followed("0xaa", "BTC", "0.0000"),
        ];
        write_states(&store, &states, &tracked);
        let before = store.tracked_positions().unwrap();
        assert_eq!(before["0xaa"], [tracked[1].clone(), tracked[0].clone()]);

        let mut conn = store.conn().unwrap();
        let reverted = revert_through(&mut conn, "000015");
        #[derive(QueryableByName)]
        struct Line {
            #[diesel(sql_type = Text)]
            line: String,
        }
        let rows: Vec<Line> = diesel::sql_query(
            "SELECT address || ' ' || symbol || ' ' || direction || ' ' || \
             CAST(open_time_known AS TEXT) || ' ' || CAST(last_upnl AS TEXT) AS line \
             FROM tracked_positions ORDER BY symbol",
        )
        .load(&mut *conn)
        .unwrap();
        assert_eq!(
            rows.iter().map(|l| l.line.as_str()).collect::<Vec<_>>(),
            [
                "0xaa BTC long 1 0.0000",
                "0xaa ETH long 0 -123456789012345678901234567890.123456789"
            ],
            "one row a followed position, decimals' text kept"
        );
        diesel::sql_query(
            "INSERT INTO tracked_positions \
             SELECT '0xcc', symbol, direction, opened_at, open_time_known, last_upnl \
             FROM tracked_positions WHERE symbol = 'BTC'",
        )
        .execute(&mut *conn)
        .unwrap();
        drop(conn);
        assert_eq!(store.migrate().unwrap(), reverted);
        let after = store.tracked_positions().unwrap();
        assert_eq!(after["0xaa"], before["0xaa"]);
        assert_eq!(
            store.wallet_history("0xaa").unwrap(),
            Some((states[0].clone(), before["0xaa"].clone()))
        );
        let (orphan, its) = store.wallet_history("0xcc").unwrap().unwrap();
        assert_eq!(orphan.address, "0xcc");
        assert_eq!(orphan.first_seen_at, None, "read as a wallet never seen");
        assert_eq!(its.len(), 1);
        assert_eq!(
            (its[0].symbol.as_str(), its[0].open_time_known),
            ("BTC", true)
        );
        assert_eq!(
            store.wallet_history("0xbb").unwrap(),
            Some((states[1].clone(), vec![]))
        );
    }
}

#[test]
fn reseeding_replaces_data_and_bumps_the_version() {
    for (store, _guard) in stores() {
        let v1 = write_dataset(&store);
        let v2 = write_dataset(&store);
        assert!(v2 > v1, "versions stay monotonic so servers notice");
        assert_eq!(store.latest_snapshot().unwrap().unwrap().version, v2);
    }
}

#[test]
fn liquidity_history_pages_by_date_then_symbol() {
    for (store, _guard) in stores() {
        write_dataset(&store);
        let (from, to) = (date!(2026 - 11 - 01), date!(2026 - 11 - 21));
        let all = store
            .liquidity_history(NETWORK_ID, from, to, None, None, 10)
            .unwrap();
        let keys: Vec<(String, String)> = all
            .iter()
            .map(|d| (d.date.to_string(), d.network_asset_symbol.clone()))
            .collect();
        assert_eq!(
            keys,
            [
                ("2026-11-20", "BTC"),
                ("2026-11-20", "xyz:TSLA"),
                ("2026-11-21", "BTC"),
                ("2026-11-21", "xyz:TSLA")
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
        assert_eq!(
            all[0],
            day(date!(2026 - 11 - 20), "BTC", Coverage::EndOfDay)
        );
        let after = store
            .liquidity_history(
                NETWORK_ID,
                from,
                to,
                None,
                Some((date!(2026 - 11 - 20), "xyz:TSLA")),
                1,
            )
            .unwrap();
        assert_eq!(after.len(), 1);
        assert_eq!(
            (after[0].date, after[0].network_asset_symbol.as_str()),
            (date!(2026 - 11 - 21), "BTC")
        );
        let tsla = store
            .liquidity_history(NETWORK_ID, from, to, Some("xyz:TSLA"), None, 10)
            .unwrap();
        assert_eq!(tsla.len(), 2);
    }
}

#[test]
fn candles_by_range() {
    for (store, _guard) in stores() {
        write_dataset(&store);
        assert_eq!(store.stored_intervals("BTC").unwrap(), vec![Interval::H1]);
        let c = store
            .candles(
                "BTC",
                Interval::H1,
                1_794_999_600_000 + 3_600_000,
                1_794_999_600_000 + 3 * 3_600_000,
                10,
            )
            .unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].open.to_string(), "92391.3380");
        assert!(store
            .candles("ETH", Interval::H1, 0, i64::MAX, 10)
            .unwrap()
            .is_empty());
    }
}

#[test]
fn tokens_store_hashes_and_revoke() {
    for (store, _guard) in stores() {
        let t = store
            .create_token("ci", "abc123", "mds_…wxyz", None)
            .unwrap();
        assert_eq!(t.name, "ci");
        assert!(t.is_active(time::OffsetDateTime::now_utc()));
        assert_eq!(store.find_token("abc123").unwrap().unwrap().id, t.id);
        assert!(store.find_token("nope").unwrap().is_none());
        assert!(store.revoke_token(t.id).unwrap());
        assert!(!store.revoke_token(9999).unwrap());
        assert!(!store
            .find_token("abc123")
            .unwrap()
            .unwrap()
            .is_active(time::OffsetDateTime::now_utc()));
        assert_eq!(store.list_tokens().unwrap().len(), 1);
    }
}

#[test]
fn positions_load_whole_across_the_split_reads() {
    for (store, _guard) in stores() {
        let mut markets: Vec<Market> = ["ETH", "BTC", "SOL", "xyz:TSLA"]
            .iter()
            .map(|s| market(s, "1.5"))
            .collect();
        markets[1].long_count = 30;
        // Wallets on both sides of the split between the two reads.
        let wallets: Vec<Wallet> = ["0x1a", "0x7f", "0x80", "0xcc"]
            .iter()
            .map(|a| wallet(a))
            .collect();
        let mut positions = Vec::new();
        for m in &markets {
            for w in wallets.iter().rev() {
                positions.push(position(&w.address, &m.symbol));
            }
        }
        store
            .write_snapshot(
                &SnapshotWrite {
                    source: "test",
                    version: &version_of(
                        datetime!(2026-11-22 01:02:03 UTC),
                        &markets,
                        &wallets,
                        &positions,
                        &[],
                    ),
                },
                &mut |_, _, _| {},
            )
            .unwrap();
        let meta = store.latest_snapshot().unwrap().unwrap();
        let loaded = store.load_snapshot(&meta).unwrap();
        // In no particular order, but every one exactly once.
        let mut keys: Vec<(String, String)> = loaded
            .version
            .positions
            .iter()
            .map(|p| (p.symbol.clone(), p.address.clone()))
            .collect();
        keys.sort();
        let mut expected: Vec<(String, String)> = positions
            .iter()
            .map(|p| (p.symbol.clone(), p.address.clone()))
            .collect();
        expected.sort();
        assert_eq!(keys, expected);
        let addresses: Vec<&str> = loaded
            .version
            .wallets
            .iter()
            .map(|w| w.address.as_str())
            .collect();
        assert_eq!(
            addresses,
            ["0x1a", "0x7f", "0x80", "0xcc"],
            "in address order"
        );
        assert!(loaded
            .version
            .positions
            .iter()
            .all(|p| p.label.as_deref() == Some("Fund \"A\"") && p.tags.len() == 2));
    }
}

#[test]
fn positions_read_for_serving_render_like_the_models() {
    use diesel::RunQueryDsl;
    for (store, _guard) in stores() {
        let markets = vec![market("BTC", "92391.3380"), market("xyz:TSLA", "354.748")];
        let wallets: Vec<Wallet> = ["0xaa", "0xbb", "0xcc"].iter().map(|a| wallet(a)).collect();
        let mut positions = Vec::new();
        for (i, w) in wallets.iter().enumerate() {
            for m in &markets {
                positions.push(match i {
                    1 => odd_position(&w.address, &m.symbol),
                    _ => position(&w.address, &m.symbol),
                });
            }
        }
        store
            .write_snapshot(
                &SnapshotWrite {
                    source: "test",
                    version: &version_of(
                        datetime!(2026-11-22 01:02:03 UTC),
                        &markets,
                        &wallets,
                        &positions,
                        &[],
                    ),
                },
                &mut |_, _, _| {},
            )
            .unwrap();
        // A decimal stored in another spelling than the API's (a row edited
        // by hand) is printed the API's way.
        let edited = diesel::sql_query(
            "UPDATE wallets SET positions = replace(positions, '\"33.5531\"', '\"3.35531E+1\"') \
             WHERE address = '0xcc'",
        )
        .execute(&mut *store.conn().unwrap())
        .unwrap();
        assert_eq!(edited, 1);
        let meta = store.latest_snapshot().unwrap().unwrap();
        let served = store
            .load_for_serving(&meta, |t| serde_json::to_string(t).unwrap())
            .unwrap();
        assert_eq!(
            served.version.positions.len(),
            2,
            "one part per reading connection"
        );
        let mut served: Vec<String> = served.version.positions.into_iter().flatten().collect();
        served.sort();
        // The models' JSON without label and tags (the wallet's, added by the caller).
        let mut expected: Vec<String> = store
            .load_snapshot(&meta)
            .unwrap()
            .version
            .positions
            .into_iter()
            .map(|p| {
                assert_eq!(p.label.as_deref(), Some("Fund \"A\""));
                let bare = MarketPosition {
                    label: None,
                    tags: vec![],
                    ..p
                };
                serde_json::to_string(&bare).unwrap()
            })
            .collect();
        expected.sort();
        assert_eq!(served, expected);
        assert_eq!(served.len(), 6);
        assert!(served
            .iter()
            .any(|j| j.contains(r#""entryPrice":"33.5531""#)));
        assert!(served.iter().any(|j| j.contains(r#""margin":"0.0000""#)));
        assert!(served
            .iter()
            .any(|j| j.contains(r#""observedAt":"2026-11-22T01:02:03.25Z""#)));
    }
}

/// A publish changes only some wallets; every version it keeps reads back as
/// the full state at that version, and pruning removes only rows no kept
/// version can see.
#[test]
fn a_database_draws_its_identity_once() {
    let identities: Vec<String> = stores()
        .into_iter()
        .map(|(store, _guard)| {
            let id = store.identity().unwrap();
            assert_eq!(id.len(), 32, "{id}");
            assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
            assert_eq!(store.identity().unwrap(), id, "drawn once");
            id
        })
        .collect();
    let again: Vec<String> = stores()
        .into_iter()
        .map(|(store, _guard)| store.identity().unwrap())
        .collect();
    for (a, b) in identities.iter().zip(&again) {
        assert_ne!(a, b, "another database, another identity");
    }
}

#[test]
fn incremental_publishes_read_back_as_whole_versions() {
    for (store, _guard) in stores() {
        let markets = vec![market("BTC", "1.5"), market("ETH", "2.5")];
        let wallets: Vec<Wallet> = ["0xaa", "0xbb", "0xcc"].iter().map(|a| wallet(a)).collect();
        let positions = [
            position("0xaa", "BTC"),
            position("0xbb", "BTC"),
            position("0xbb", "ETH"),
            position("0xcc", "ETH"),
        ];
        let v1 = store
            .write_snapshot(
                &SnapshotWrite {
                    source: "test",
                    version: &version_of(
                        datetime!(2026-11-22 01:00:00 UTC),
                        &markets,
                        &wallets,
                        &positions,
                        &[],
                    ),
                },
                &mut |_, _, _| {},
            )
            .unwrap();
        let freshness = WalletFreshness {
            tracked: 9,
            never_read: 1,
            refreshed_within1m: 2,
            refreshed_within5m: 3,
            refreshed_within1h: 8,
            by_size_class: vec![ClassStaleness {
                size_class: SizeClass::Whale,
                wallets: 9,
                never_read: 1,
                p50_seconds: Some(40),
                p99_seconds: None,
            }],
        };
        let coverage = NetworkCoverage {
            as_of: datetime!(2026-11-22 01:01:00 UTC),
            wallets: freshness.clone(),
            open_interest: d("1000.00"),
            covered_open_interest: d("0.10"),
            covered_share: Some(d("0.0001")),
            markets: Vec::new(),
        };
        let publish = |changed: &[Wallet],
                       changed_positions: &[MarketPosition],
                       removed: &[String],
                       total_w,
                       total_p| {
            let changes = VersionChanges {
                observed_at: datetime!(2026-11-22 01:01:00 UTC),
                markets: markets.clone(),
                current_days: vec![],
                cohorts: vec![],
                coverage: coverage.clone(),
                wallets: changed.to_vec(),
                positions: changed_positions.to_vec(),
                removed: removed.to_vec(),
            };
            // (The coverage's freshness is `freshness`.)
            publish_changes(&store, &changes, (total_w, total_p))
        };
        // v2: 0xbb closes its ETH position and changes value; 0xcc is removed; 0xdd is new.
        let mut bb = wallet("0xbb");
        bb.account_total_value = d("2000.00");
        let dd = wallet("0xdd");
        let v2 = publish(
            &[bb.clone(), dd.clone()],
            &[position("0xbb", "BTC"), position("0xdd", "ETH")],
            &["0xcc".to_owned()],
            3,
            3,
        );
        assert_eq!(v2, v1 + 1);
        let addresses = |v: &LoadedSnapshot| -> Vec<(String, String)> {
            v.version
                .wallets
                .iter()
                .map(|w| (w.address.clone(), w.account_total_value.to_string()))
                .collect()
        };
        let keys = |v: &LoadedSnapshot| -> Vec<(String, String)> {
            v.version
                .positions
                .iter()
                .map(|p| (p.symbol.clone(), p.address.clone()))
                .collect()
        };
        let latest = store.latest_snapshot().unwrap().unwrap();
        let at_v2 = store.load_snapshot(&latest).unwrap();
        assert_eq!(at_v2.version.freshness.as_ref(), Some(&freshness));
        assert_eq!(
            addresses(&at_v2),
            [
                ("0xaa", "1000.10"),
                ("0xbb", "2000.00"),
                ("0xdd", "1000.10")
            ]
            .map(|(a, v)| (a.to_owned(), v.to_owned()))
        );
        assert_eq!(
            keys(&at_v2),
            [("BTC", "0xaa"), ("BTC", "0xbb"), ("ETH", "0xdd")]
                .map(|(s, a)| (s.to_owned(), a.to_owned()))
        );
        // What changed from v1 to v2, as a running server applies it.
        let changes = store.load_changes(v1, &latest, 10).unwrap().unwrap();
        assert_eq!(changes.coverage, coverage);
        assert_eq!(changes.markets, at_v2.version.markets);
        assert_eq!(changes.wallets, [bb.clone(), dd.clone()]);
        assert_eq!(
            changes
                .positions
                .iter()
                .map(|p| (p.symbol.as_str(), p.address.as_str(), p.label.clone()))
                .collect::<Vec<_>>(),
            [
                ("BTC", "0xbb", bb.label.clone()),
                ("ETH", "0xdd", dd.label.clone())
            ]
        );
        assert_eq!(changes.removed, ["0xcc"]);
        assert!(
            store.load_changes(v1, &latest, 1).unwrap().is_none(),
            "more changed wallets than asked for: load it whole"
        );
        let v1_meta = SnapshotMeta {
            version: v1,
            ..latest.clone()
        };
        assert!(
            store.load_changes(v1 - 1, &v1_meta, 10).unwrap().is_none(),
            "a whole-version write stores no coverage"
        );
        // The previous version is still whole.
        let at_v1 = store
            .load_snapshot(&SnapshotMeta {
                version: v1,
                ..latest.clone()
            })
            .unwrap();
        assert_eq!(at_v1.version.wallets, wallets);
        assert_eq!(keys(&at_v1).len(), 4);
        assert_eq!(
            at_v1.version.freshness, None,
            "a whole-version write stores none"
        );
        // v3 changes nothing but markets: v1 is pruned, v2's rows survive (0xaa was written by v1).
        let v3 = publish(&[], &[], &[], 3, 3);
        let at_v3 = store
            .load_snapshot(&store.latest_snapshot().unwrap().unwrap())
            .unwrap();
        assert_eq!(at_v3.meta.version, v3);
        let v3_meta = store.latest_snapshot().unwrap().unwrap();
        let nothing = store.load_changes(v2, &v3_meta, 10).unwrap().unwrap();
        assert!(nothing.wallets.is_empty() && nothing.removed.is_empty());
        assert!(
            store.load_changes(v1, &v3_meta, 10).unwrap().is_none(),
            "v1 was pruned, and the rows closed after it with it"
        );
        assert_eq!(addresses(&at_v3), addresses(&at_v2));
        assert_eq!(keys(&at_v3), keys(&at_v2));
        // A server that saved v1 catches up from the wallets it served,
        // although v1 and the rows closed after it are gone.
        let served: Vec<&str> = wallets.iter().map(|w| w.address.as_str()).collect();
        let since_served = |served: &[&str]| {
            store
                .load_changes_since_served::<_, LiquidityDay>(v1, served, &v3_meta, 10, |t| {
                    (t.symbol.to_owned(), t.address.to_owned())
                })
                .unwrap()
        };
        let caught_up = since_served(&served).unwrap();
        assert_eq!(caught_up.wallets, [bb.clone(), dd.clone()]);
        let mut positions = caught_up.positions.clone();
        positions.sort();
        assert_eq!(
            positions,
            [("BTC", "0xbb"), ("ETH", "0xdd")].map(|(s, a)| (s.to_owned(), a.to_owned()))
        );
        assert_eq!(caught_up.removed, ["0xcc"]);
        assert_eq!(caught_up.markets, at_v3.version.markets);
        // A saved version without a wallet valid since then: not whole.
        assert!(since_served(&["0xbb", "0xcc"]).is_none());
        // More changed wallets than asked for: load it whole.
        assert!(store
            .load_changes_since_served::<_, LiquidityDay>(v1, &served, &v3_meta, 1, |_| ())
            .unwrap()
            .is_none());
        assert!(
            store
                .load_snapshot(&SnapshotMeta {
                    version: v1,
                    ..latest.clone()
                })
                .is_err(),
            "v1 was pruned"
        );
        use diesel::prelude::*;
        let stored = || -> Vec<(String, usize)> {
            let mut conn = store.conn().unwrap();
            let rows: Vec<(String, String)> = crate::schema::wallets::table
                .order((
                    crate::schema::wallets::address,
                    crate::schema::wallets::version,
                ))
                .select((
                    crate::schema::wallets::address,
                    crate::schema::wallets::positions,
                ))
                .load(&mut *conn)
                .unwrap();
            rows.iter()
                .map(|(a, p)| (a.clone(), crate::held::models(a, p).unwrap().len()))
                .collect()
        };
        let held = |rows: &[(&str, usize)]| -> Vec<(String, usize)> {
            rows.iter().map(|(a, n)| (a.to_string(), *n)).collect()
        };
        // Publishes only append: the rows v2 superseded (0xbb's) and
        // removed (0xcc's) are stored until a compaction.
        assert_eq!(
            stored(),
            held(&[
                ("0xaa", 1),
                ("0xbb", 2),
                ("0xbb", 1),
                ("0xcc", 1),
                ("0xdd", 1)
            ])
        );
        assert_eq!(
            store.compact_wallet_rows_holding(i64::MAX).unwrap(),
            None,
            "not due"
        );
        assert_eq!(store.compact_wallet_rows_holding(0).unwrap(), Some(2));
        // Kept versions (v2, v3) see only the latest rows: the rows v2
        // superseded or removed are gone, and the positions with them.
        assert_eq!(
            stored(),
            held(&[("0xaa", 1), ("0xbb", 1), ("0xdd", 1)]),
            "only rows a kept version can see remain"
        );
        assert_eq!(
            store.compact_wallet_rows_holding(0).unwrap(),
            Some(0),
            "compacted up to the oldest version already"
        );
        // The catch-up from v1 reads the same across the compaction, which
        // deleted the removal of 0xcc and the rows v1 served.
        let again = since_served(&served).unwrap();
        assert_eq!(again.wallets, caught_up.wallets);
        assert_eq!(again.positions, caught_up.positions);
        assert_eq!(again.removed, ["0xcc"]);
        assert_eq!(
            store.load_snapshot(&v3_meta).unwrap().version.wallets,
            at_v3.version.wallets
        );
        // v4 removes 0xaa, which v3 still serves. Caught up to v3 (no longer
        // the newest), 0xaa is kept: the wallets valid at v3 are not the
        // open rows now.
        publish(&[], &[], &["0xaa".to_owned()], 2, 2);
        let to_v3 = since_served(&served).unwrap();
        assert_eq!(to_v3.wallets, [bb.clone(), dd.clone()]);
        assert_eq!(to_v3.removed, ["0xcc"]);
        assert!(
            since_served(&["0xbb", "0xcc", "0xdd"]).is_none(),
            "0xaa is valid at v3: a saved version without it is not whole"
        );
    }
}

#[test]
fn publishes_replace_the_scan_state_of_every_wallet_read_and_refuse_a_stale_base() {
    for (store, _guard) in stores() {
        let markets = vec![market("BTC", "100")];
        let freshness = WalletFreshness {
            tracked: 1,
            never_read: 0,
            refreshed_within1m: 1,
            refreshed_within5m: 1,
            refreshed_within1h: 1,
            by_size_class: Vec::new(),
        };
        let coverage = NetworkCoverage {
            as_of: datetime!(2026-11-22 01:01:00 UTC),
            wallets: freshness.clone(),
            open_interest: d("0"),
            covered_open_interest: d("0"),
            covered_share: None,
            markets: Vec::new(),
        };
        // A wallet read empty is not served, but its scan state is kept.
        let empty = WalletScanState {
            address: "0xee".into(),
            first_seen_at: Some(datetime!(2026-11-22 01:00:00 UTC)),
            ..WalletScanState::default()
        };
        let changes = VersionChanges {
            observed_at: datetime!(2026-11-22 01:01:00 UTC),
            markets: markets.clone(),
            current_days: vec![],
            cohorts: vec![],
            coverage: coverage.clone(),
            wallets: vec![],
            positions: vec![],
            removed: vec![],
        };
        let publish =
            |base_version: i64, states: &[WalletScanState], tracked: &[TrackedPosition]| {
                store.publish(
                    &PublishWrite {
                        source: "track",
                        base_version,
                        changes: &changes,
                        wallet_count: 0,
                        position_count: 0,
                        frozen_days: &[],
                        candles: &[],
                        wallet_states: states,
                        tracked,
                        newly_read: &[],
                        previous: None,
                        registry: &[],
                        freshness: &freshness,
                    },
                    &mut |_, _, _| {},
                )
            };
        // It still follows two positions (a read that saw it empty may
        // have failed on a dex).
        let follows = [
            followed("0xee", "ETH", "-0.000001"),
            followed("0xee", "BTC", "123456789012345678901234567890.5"),
        ];
        let v1 = publish(0, std::slice::from_ref(&empty), &follows).unwrap();
        assert_eq!(
            store.wallet_history("0xee").unwrap(),
            Some((empty.clone(), vec![follows[1].clone(), follows[0].clone()]))
        );
        assert_eq!(store.tracked_positions().unwrap()["0xee"].len(), 2);
        // A followed position of a wallet whose state is not written is
        // refused, with nothing written.
        let stray = [followed("0xff", "BTC", "1")];
        assert!(matches!(
            publish(v1, std::slice::from_ref(&empty), &stray),
            Err(StoreError::Corrupt(_))
        ));
        assert_eq!(store.latest_snapshot().unwrap().unwrap().version, v1);
        // So is a write of two states of one wallet, on either backend.
        assert!(matches!(
            publish(v1, &[empty.clone(), empty.clone()], &[]),
            Err(StoreError::Corrupt(_))
        ));
        let b = RegistryEntry::new(
            "0xbb".into(),
            DiscoverySource::Trades,
            datetime!(2026-11-22 01:00:00 UTC),
        );
        assert!(matches!(
            store.save_registry(&[b.clone(), b]),
            Err(StoreError::Corrupt(_))
        ));
        // Read (empty) again: its state is replaced, not inserted twice,
        // and so are its followed positions (none now).
        let again = WalletScanState {
            last_seen_at: Some(datetime!(2026-11-22 01:02:00 UTC)),
            ..empty.clone()
        };
        let v2 = publish(v1, std::slice::from_ref(&again), &[]).unwrap();
        assert_eq!(store.wallet_scan_states().unwrap()["0xee"], again);
        assert_eq!(
            store.wallet_history("0xee").unwrap(),
            Some((again.clone(), vec![]))
        );
        assert!(store.tracked_positions().unwrap().is_empty());
        // Changes computed against v1 are refused whole now that v2 is the latest.
        match publish(v1, &[], &[]) {
            Err(StoreError::Conflict { expected, found }) => {
                assert_eq!((expected, found), (v1, Some(v2)));
            }
            other => panic!("a stale base must conflict: {other:?}"),
        }
        assert_eq!(store.latest_snapshot().unwrap().unwrap().version, v2);
    }
}

/// SQLite prepares each statement of a publish once per connection: a
/// whole version and a first publish cache the upserts (Diesel caches none
/// by itself) and the journals' appends, and a second publish with other rows, other counts and
/// other unset fields caches no insert again (a statement whose text
/// followed the values would).
#[test]
fn a_publish_prepares_its_inserts_once_per_connection() {
    use diesel::connection::{Connection, InstrumentationEvent};
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("t.db");
    let options = PoolOptions {
        max_size: 1,
        ..PoolOptions::default()
    };
    let store = Store::open(url.to_str().unwrap(), options).unwrap();
    store.migrate().unwrap();
    let markets = [market("BTC", "100"), market("ETH", "10")];
    let wallets = [wallet("0xaa"), wallet("0xbb")];
    // Each publish below moves a wallet to BTC: both write events (into
    // the journal, whose insert the first one prepares).
    let positions = [position("0xaa", "ETH"), position("0xbb", "ETH")];
    let at = datetime!(2026-11-22 01:00:00 UTC);
    let cached = Arc::new(Mutex::new(Vec::<String>::new()));
    {
        let mut conn = store.conn().unwrap();
        let DbConnection::Sqlite(c) = &mut *conn else {
            unreachable!("a file path opens SQLite")
        };
        let sink = cached.clone();
        c.set_instrumentation(move |event: InstrumentationEvent<'_>| {
            if let InstrumentationEvent::CacheQuery { sql, .. } = event {
                sink.lock().unwrap().push(sql.to_owned());
            }
        });
    }
    // (The history's upserts are first cached here.)
    write_version(&store, &version_of(at, &markets, &wallets, &positions, &[]));
    let publish = |minute: u8, changed: &[&str], read: &[WalletScanState], values: bool| {
        let observed_at = at.replace_minute(minute).unwrap();
        let wallets: Vec<Wallet> = changed.iter().map(|a| wallet(a)).collect();
        let positions: Vec<MarketPosition> = changed.iter().map(|a| position(a, "BTC")).collect();
        let tracked: Vec<TrackedPosition> = read
            .iter()
            .filter(|s| s.first_seen_at.is_some())
            .map(|s| followed(&s.address, "BTC", "1.5"))
            .collect();
        let registry: Vec<RegistryEntry> = read
            .iter()
            .map(|s| {
                let mut e = RegistryEntry::new(s.address.clone(), DiscoverySource::Trades, at);
                if values {
                    e.account_value = Some(d("10.5"));
                    e.last_read_at = Some(observed_at);
                }
                e
            })
            .collect();
        let freshness = WalletFreshness {
            tracked: 2,
            never_read: 0,
            refreshed_within1m: 2,
            refreshed_within5m: 2,
            refreshed_within1h: 2,
            by_size_class: Vec::new(),
        };
        let changes = VersionChanges {
            observed_at,
            markets: markets.to_vec(),
            current_days: vec![],
            cohorts: vec![],
            coverage: NetworkCoverage {
                as_of: observed_at,
                wallets: freshness.clone(),
                open_interest: d("0"),
                covered_open_interest: d("0"),
                covered_share: None,
                markets: Vec::new(),
            },
            wallets,
            positions,
            removed: vec![],
        };
        let base_version = store.latest_snapshot().unwrap().unwrap().version;
        store
            .publish(
                &PublishWrite {
                    source: "track",
                    base_version,
                    changes: &changes,
                    wallet_count: 2,
                    position_count: 2,
                    frozen_days: &[],
                    candles: &[],
                    wallet_states: read,
                    tracked: &tracked,
                    newly_read: &[],
                    previous: None,
                    registry: &registry,
                    freshness: &freshness,
                },
                &mut |_, _, _| {},
            )
            .unwrap();
        std::mem::take(&mut *cached.lock().unwrap())
    };
    let state = |address: &str, seen: bool| WalletScanState {
        address: address.into(),
        first_seen_at: seen.then_some(at),
        first_account_value: seen.then(|| d("1")),
        read_dexes: seen.then(Vec::new),
        ..WalletScanState::default()
    };
    let first = publish(
        1,
        &["0xaa"],
        &[state("0xaa", true), state("0xee", false)],
        false,
    );
    // (A publish writes no hourly point: an hour is copied into that tier
    // when it leaves the points' retention.)
    assert!(
        first
            .iter()
            .any(|sql| sql.contains("history_points") && sql.contains("ON CONFLICT")),
        "the upsert of history_points is cached: {first:#?}"
    );
    for journal in [
        "scanned_wallets_journal",
        "wallet_registry_journal",
        "history_points_journal",
        "position_events_journal",
    ] {
        assert!(
            first
                .iter()
                .any(|sql| sql.contains(journal) && sql.contains("INSERT")),
            "the append to {journal} is cached: {first:#?}"
        );
    }
    let second = publish(
        2,
        &["0xaa", "0xbb"],
        &[
            state("0xaa", false),
            state("0xbb", true),
            state("0xee", true),
        ],
        true,
    );
    let inserts: Vec<&String> = second.iter().filter(|sql| sql.contains("INSERT")).collect();
    assert!(inserts.is_empty(), "prepared again: {inserts:#?}");
}

#[test]
fn the_registry_round_trips_and_upserts() {
    for (store, _guard) in stores() {
        let mut a = RegistryEntry::new(
            "0xaa".into(),
            DiscoverySource::Leaderboard,
            datetime!(2026-11-22 01:00:00 UTC),
        );
        a.leaderboard_value = Some(d("1234567.891"));
        a.dexes = vec!["xyz".into()];
        let b = RegistryEntry::new(
            "0xbb".into(),
            DiscoverySource::Trades,
            datetime!(2026-11-22 01:00:01 UTC),
        );
        store.save_registry(&[a.clone(), b.clone()]).unwrap();
        a.sources |= DiscoverySource::Trades.bit();
        a.account_value = Some(d("0.00"));
        a.empty_reads = 2;
        store.save_registry(&[a.clone()]).unwrap();
        assert_eq!(store.registry().unwrap(), vec![a.clone(), b.clone()]);
        // Saved again, every field is replaced: unset ones too.
        a.leaderboard_value = None;
        a.dexes.clear();
        a.last_read_at = Some(datetime!(2026-11-22 01:00:02 UTC));
        store.save_registry(&[a.clone()]).unwrap();
        assert_eq!(store.registry().unwrap(), vec![a.clone(), b.clone()]);
        assert_eq!(store.registry_len().unwrap(), 2);
        // Read in pages, every page size gives every entry once, in order.
        for page in [1, 2, 3] {
            let mut paged = Vec::new();
            assert_eq!(
                store.each_registry_entry(page, |e| paged.push(e)).unwrap(),
                2
            );
            assert_eq!(paged, vec![a.clone(), b.clone()], "pages of {page}");
        }
    }
}

/// On SQLite the scan states and the registry are clustered on their
/// address (migration `000016`): one B-tree a table, no rowid. Reverted,
/// they are tables with a rowid again with the same columns (names, types,
/// `NOT NULL`, defaults, key); migrated again, every field of every state,
/// its followed positions and every registry entry (saved to the journal
/// of migration 000017, whose down merges it) read back as they were
/// (each field holds a value of its own, so two columns swapped in a copy
/// would show).
#[test]
fn states_and_registry_are_clustered_on_their_address_and_move_back_exactly() {
    use diesel::prelude::*;
    use diesel::sql_types::{BigInt, Text};
    let dir = tempfile::tempdir().unwrap();
    let store = migrated(dir.path().join("layout.db").to_str().unwrap());
    let without_rowid = |store: &Store| -> i64 {
        let mut conn = store.conn().unwrap();
        diesel::select(diesel::dsl::sql::<BigInt>(
            "(SELECT COUNT(*) FROM pragma_table_list \
             WHERE name IN ('scanned_wallets', 'wallet_registry') AND wr = 1)",
        ))
        .get_result(&mut *conn)
        .unwrap()
    };
    let columns = |store: &Store| -> Vec<String> {
        let mut conn = store.conn().unwrap();
        ["scanned_wallets", "wallet_registry"]
            .iter()
            .map(|table| {
                diesel::select(diesel::dsl::sql::<Text>(&format!(
                    "(SELECT group_concat(name || ' ' || type || ' ' || \"notnull\" || ' ' \
                     || COALESCE(dflt_value, '-') || ' ' || pk, ', ') \
                     FROM pragma_table_xinfo('{table}'))"
                )))
                .get_result(&mut *conn)
                .unwrap()
            })
            .collect()
    };
    assert_eq!(without_rowid(&store), 2, "both clustered on the address");
    let layout = columns(&store);
    assert!(
        layout[0].contains("followed TEXT 1 '[]' 0"),
        "the followed positions keep their default: {}",
        layout[0]
    );
    let states = [
        WalletScanState {
            address: "0xaa".into(),
            missed_scans: 2,
            last_seen_at: Some(datetime!(2026-11-22 00:30:00 UTC)),
            first_seen_at: Some(datetime!(2026-11-21 23:00:00 UTC)),
            first_account_value: Some(d("0.000001")),
            realized_pnl: d("-123456789012345678901234567890.123456789"),
            closed_count: 3,
            win_count: 1,
            held: [4, 5, 6, 7],
            read_dexes: Some(vec![String::new(), "xyz".into()]),
        },
        WalletScanState {
            address: "0xbb".into(),
            ..WalletScanState::default()
        },
    ];
    let tracked = [
        followed("0xaa", "ETH", "-0.0000"),
        followed("0xaa", "BTC", "12.5"),
    ];
    write_states(&store, &states, &tracked);
    let mut entry = RegistryEntry::new(
        "0xaa".into(),
        DiscoverySource::Leaderboard,
        datetime!(2026-11-22 01:00:00 UTC),
    );
    entry.sources |= DiscoverySource::Trades.bit();
    entry.leaderboard_value = Some(d("1234567.891"));
    entry.account_value = Some(d("2.5"));
    entry.position_value = Some(d("0.75"));
    entry.last_trade_at = Some(datetime!(2026-11-22 01:00:03 UTC));
    entry.traded_notional = d("98765.4321");
    entry.dexes = vec!["xyz".into(), String::new()];
    entry.last_read_at = Some(datetime!(2026-11-22 01:00:04 UTC));
    entry.last_sweep_at = Some(datetime!(2026-11-22 01:00:05 UTC));
    entry.empty_reads = 8;
    entry.failed_reads = 9;
    let other = RegistryEntry::new(
        "0xbb".into(),
        DiscoverySource::Trades,
        datetime!(2026-11-22 01:00:01 UTC),
    );
    store.save_registry(&[entry, other]).unwrap();
    let read = |store: &Store| {
        (
            store.registry().unwrap(),
            store.wallet_history("0xaa").unwrap(),
            store.wallet_history("0xbb").unwrap(),
        )
    };
    let before = read(&store);
    assert_eq!(before.1.as_ref().unwrap().0, states[0], "every field kept");

    let mut conn = store.conn().unwrap();
    let reverted = revert_through(&mut conn, "000016");
    drop(conn);
    assert_eq!(without_rowid(&store), 0, "tables with a rowid again");
    assert_eq!(columns(&store), layout, "the same columns either way");
    // (Migrations 000018 of the wallet rows, 000019, 000021 and 000022 of
    // the history and 000020 and 000023 of the events are reverted too. The store
    // reads through the journals of migration 000017, reverted with it:
    // its down merged the registry's journal into the table, which the
    // read after migrating again shows.)
    assert_eq!(reverted, 8);
    assert_eq!(store.migrate().unwrap(), reverted);
    assert_eq!(without_rowid(&store), 2);
    assert_eq!(columns(&store), layout);
    assert_eq!(read(&store), before);
}

#[test]
fn batch_sizes_follow_the_schema() {
    use crate::schema::*;
    // The tables' widths: an upper bound of each inserted row's parameters.
    assert_eq!(crate::columns_of::<candles::table>(), 9);
    assert_eq!(crate::columns_of::<markets::table>(), 16);
    assert_eq!(crate::columns_of::<wallets::table>(), 21);
    assert_eq!(crate::columns_of::<wallet_registry::table>(), 13);
}

/// A whole version of these rows (no cohorts, freshness derived).
fn version_of(
    observed_at: time::OffsetDateTime,
    markets: &[Market],
    wallets: &[Wallet],
    positions: &[MarketPosition],
    current_days: &[LiquidityDay],
) -> DataVersion {
    DataVersion {
        observed_at,
        markets: markets.to_vec(),
        cohorts: vec![],
        wallets: wallets.to_vec(),
        positions: positions.to_vec(),
        current_days: current_days.to_vec(),
        freshness: None,
    }
}

/// Writes `version` whole as a test's data version; returns its number.
fn write_version(store: &Store, version: &DataVersion) -> i64 {
    store
        .write_snapshot(
            &SnapshotWrite {
                source: "test",
                version,
            },
            &mut |_, _, _| {},
        )
        .unwrap()
}

/// Writes a scan of no wallet that stores `states` and `tracked`.
fn write_states(store: &Store, states: &[WalletScanState], tracked: &[TrackedPosition]) -> i64 {
    let version = version_of(
        datetime!(2026-11-22 00:00:00 UTC),
        &[market("BTC", "100")],
        &[],
        &[],
        &[],
    );
    store
        .write_scan(
            &ScanWrite {
                snapshot: SnapshotWrite {
                    source: "test",
                    version: &version,
                },
                candles: &[],
                frozen_days: &[],
                wallet_states: states,
                tracked,
                newly_read: &[],
            },
            &mut |_, _, _| {},
        )
        .unwrap()
}

/// Writes one full version of `positions` (wallets 0xaa and 0xbb) at `at`.
fn write_at(store: &Store, at: time::OffsetDateTime, positions: &[MarketPosition]) -> i64 {
    let markets = [market("BTC", "100"), market("ETH", "10")];
    let wallets = [wallet("0xaa"), wallet("0xbb")];
    write_version(store, &version_of(at, &markets, &wallets, positions, &[]))
}

fn sized(address: &str, symbol: &str, direction: Direction, size: &str) -> MarketPosition {
    MarketPosition {
        direction,
        size: d(size),
        position_value: d(size),
        ..position(address, symbol)
    }
}

fn event_kinds(store: &Store, filter: &crate::EventFilter) -> Vec<(String, String, String)> {
    store
        .events(filter, None, 100)
        .unwrap()
        .into_iter()
        .map(|e| {
            let v: serde_json::Value = serde_json::from_str(&e.json).unwrap();
            (e.address, e.symbol, v["kind"].as_str().unwrap().to_owned())
        })
        .collect()
}

#[test]
fn consecutive_versions_derive_events_and_history() {
    use crate::{EventFilter, Series};
    use market_model::HistoryInterval;
    for (store, _guard) in stores() {
        let t0 = datetime!(2026-11-22 01:00:00 UTC);
        let t1 = datetime!(2026-11-22 01:30:00 UTC);
        let t2 = datetime!(2026-11-22 02:10:00 UTC);
        write_at(
            &store,
            t0,
            &[
                sized("0xaa", "BTC", Direction::Long, "2"),
                sized("0xaa", "ETH", Direction::Long, "5"),
                sized("0xbb", "BTC", Direction::Short, "1"),
            ],
        );
        // First observation: every position opened.
        let first = event_kinds(&store, &EventFilter::default());
        assert_eq!(first.len(), 3);
        assert!(first.iter().all(|(_, _, k)| k == "opened"));
        write_at(
            &store,
            t1,
            &[
                sized("0xaa", "BTC", Direction::Long, "3"),
                sized("0xbb", "BTC", Direction::Long, "1"),
                sized("0xbb", "ETH", Direction::Short, "4"),
            ],
        );
        let second = event_kinds(
            &store,
            &EventFilter {
                from: Some(crate::convert::epoch_ms(t1)),
                ..Default::default()
            },
        );
        assert_eq!(
            second,
            vec![
                ("0xaa".into(), "BTC".into(), "increased".into()),
                ("0xaa".into(), "ETH".into(), "closed".into()),
                ("0xbb".into(), "BTC".into(), "flipped".into()),
                ("0xbb".into(), "ETH".into(), "opened".into()),
            ]
        );
        // Not the first observation any more.
        let e = store
            .events(
                &EventFilter {
                    address: Some("0xbb".into()),
                    symbol: Some("ETH".into()),
                    ..Default::default()
                },
                None,
                10,
            )
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&e[0].json).unwrap();
        assert_eq!(v["firstObservation"], false);
        assert_eq!(v["price"], "10");
        // minValue is exact: values are the sizes here (1 to 5).
        let big = event_kinds(
            &store,
            &EventFilter {
                min_value: Some(d("3")),
                ..Default::default()
            },
        );
        assert_eq!(big.len(), 4, "{big:?}");
        // Paging continues after the last key, newest first.
        let page1 = store.events(&EventFilter::default(), None, 4).unwrap();
        let last = page1.last().unwrap();
        let page2 = store
            .events(
                &EventFilter::default(),
                Some((last.at, &last.address, &last.symbol)),
                10,
            )
            .unwrap();
        assert_eq!(page1.len() + page2.len(), 7);
        assert!(page1.iter().all(|e| e.at == crate::convert::epoch_ms(t1)));

        write_at(&store, t2, &[sized("0xaa", "BTC", Direction::Long, "3")]);
        // 1h buckets: the last observation of each hour.
        let h = store
            .history(
                Series::Market,
                "BTC",
                HistoryInterval::H1,
                0,
                i64::MAX / 2,
                10,
            )
            .unwrap();
        let times: Vec<i64> = h.iter().map(|b| b.time).collect();
        let hour = crate::convert::epoch_ms(t0);
        assert_eq!(times, vec![hour, hour + 3_600_000]);
        let first: serde_json::Value = serde_json::from_slice(&h[0].json).unwrap();
        assert_eq!(first["time"], hour);
        assert_eq!(first["observedAt"], "2026-11-22T01:30:00Z");
        // 5m buckets read every observation.
        let m = store
            .history(
                Series::Wallet,
                "0xbb",
                HistoryInterval::M5,
                0,
                i64::MAX / 2,
                10,
            )
            .unwrap();
        assert_eq!(m.len(), 3);
        // The limit cuts buckets, not rows.
        let one = store
            .history(
                Series::Market,
                "BTC",
                HistoryInterval::M5,
                0,
                i64::MAX / 2,
                1,
            )
            .unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].time, hour);
    }
}

#[test]
fn retention_drops_old_points_and_keeps_hours() {
    use crate::{Retention, Series};
    use market_model::HistoryInterval;
    for (store, _guard) in stores() {
        let store = store.with_retention(Retention {
            points_days: 1,
            hourly_days: 3,
            events_days: 2,
        });
        let t0 = datetime!(2026-11-18 00:00:00 UTC);
        for day in 0..5 {
            write_at(
                &store,
                t0 + time::Duration::days(day),
                &[sized("0xaa", "BTC", Direction::Long, "2")],
            );
        }
        let all = |interval| {
            store
                .history(Series::Market, "BTC", interval, 0, i64::MAX / 2, 100)
                .unwrap()
                .len()
        };
        // Hourly: today and the 3 days before; points: today and yesterday,
        // and before them the hourly tier.
        assert_eq!(all(HistoryInterval::H1), 4);
        assert_eq!(all(HistoryInterval::M5), 4);
        // Events: the first observation's `opened` is older than 2 days.
        let events = store
            .events(&crate::EventFilter::default(), None, 10)
            .unwrap();
        assert!(events.is_empty(), "{events:?}");
    }
}

#[test]
fn an_hour_keeps_its_latest_observation_and_a_rewritten_instant_replaces_its_point() {
    use crate::{Retention, Series};
    use market_model::HistoryInterval;
    for (store, _guard) in stores() {
        // Points for a day: older hours are served from the hourly tier.
        let store = store.with_retention(Retention {
            points_days: 1,
            ..Retention::default()
        });
        let write = |at: time::OffsetDateTime, price: &str| {
            let version = version_of(at, &[market("BTC", price)], &[], &[], &[]);
            write_version(&store, &version);
        };
        let ten =
            |minute: i64| datetime!(2026-11-18 10:00:00 UTC) + time::Duration::minutes(minute);
        write(ten(30), "2");
        write(ten(45), "3");
        // The same instant written again replaces its point.
        write(ten(45), "7");
        // A writer back in time: a point of its own, the hour keeps 10:45.
        write(ten(15), "5");
        let read = |interval| -> Vec<(String, String)> {
            store
                .history(Series::Market, "BTC", interval, 0, i64::MAX / 2, 10)
                .unwrap()
                .iter()
                .map(|b| {
                    let v: serde_json::Value = serde_json::from_slice(&b.json).unwrap();
                    (
                        v["observedAt"].as_str().unwrap().to_owned(),
                        v["price"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        };
        let point = |at: &str, price: &str| (at.to_owned(), price.to_owned());
        assert_eq!(
            read(HistoryInterval::M5),
            vec![
                point("2026-11-18T10:15:00Z", "5"),
                point("2026-11-18T10:30:00Z", "2"),
                point("2026-11-18T10:45:00Z", "7"),
            ]
        );
        // Two days on, the points of the 18th are pruned: its hour is read
        // from the hourly tier.
        write(ten(2 * 24 * 60), "9");
        assert_eq!(
            read(HistoryInterval::H1),
            vec![
                point("2026-11-18T10:45:00Z", "7"),
                point("2026-11-20T10:00:00Z", "9"),
            ]
        );
    }
}

/// History stored hour first (migration `000019`): reverted, the points
/// and the hourly tier are keyed by series and key again and every hour
/// the points hold has its hourly row (as publishes wrote them before);
/// migrated again, every read of both series gives what it gave.
#[test]
fn history_moves_to_hour_first_keys_and_back() {
    use crate::{Retention, Series};
    use diesel::prelude::*;
    use diesel::sql_types::BigInt;
    use market_model::HistoryInterval;
    for (store, _guard) in stores() {
        // Points for a day: the first hours go to the hourly tier.
        let store = store.with_retention(Retention {
            points_days: 1,
            ..Retention::default()
        });
        let t0 = datetime!(2026-11-18 10:00:00 UTC);
        for (minutes, price) in [
            (0, "1"),
            (20, "2"),
            (70, "3"),
            (1500, "4"),
            (1510, "5"),
            (1570, "6"),
        ] {
            let at = t0 + time::Duration::minutes(minutes);
            let version = version_of(
                at,
                &[market("BTC", price)],
                &[wallet("0xaa")],
                &[position("0xaa", "BTC")],
                &[],
            );
            write_version(&store, &version);
        }
        let read = || -> Vec<Vec<Vec<u8>>> {
            let mut all = Vec::new();
            for (series, key) in [(Series::Market, "BTC"), (Series::Wallet, "0xaa")] {
                for interval in [HistoryInterval::M5, HistoryInterval::H1] {
                    let buckets = store
                        .history(series, key, interval, 0, i64::MAX / 2, 100)
                        .unwrap();
                    all.push(buckets.into_iter().map(|b| b.json).collect());
                }
            }
            all
        };
        let before = read();
        // The 18th's hours in the hourly tier (10:20, 11:10), the 19th's
        // three points.
        assert_eq!(before[0].len(), 5);
        let mut conn = store.conn().unwrap();
        let reverted = revert_through(&mut conn, "000019");
        #[derive(QueryableByName)]
        struct Count {
            #[diesel(sql_type = BigInt)]
            n: i64,
        }
        let count = |conn: &mut DbConnection, sql: &str| {
            diesel::sql_query(sql).get_result::<Count>(conn).unwrap().n
        };
        // The 18th's 10:00 and 11:00 (the hourly tier's) and the 19th's
        // 11:00 and 12:00 (from the points), for both series.
        assert_eq!(
            count(&mut conn, "SELECT COUNT(*) AS n FROM history_hourly"),
            8
        );
        assert_eq!(
            count(
                &mut conn,
                "SELECT COUNT(*) AS n FROM history_points WHERE series = 'market' AND key = 'BTC' AND at > 0"
            ),
            3,
            "the points keep their rows"
        );
        drop(conn);
        assert_eq!(store.migrate().unwrap(), reverted);
        assert_eq!(read(), before);
    }
}

/// A history read and a read of one wallet's events seek on SQLite: no
/// statement they run scans a history table or the events. (SQLite seeks
/// an end of an index only for a lone `min` or `max`; with both in one
/// statement it scanned the whole table, on every history request.)
#[test]
fn history_and_event_reads_scan_no_table_on_sqlite() {
    use diesel::connection::{Connection, InstrumentationEvent};
    use diesel::RunQueryDsl;
    use std::sync::{Arc, Mutex};
    #[derive(diesel::QueryableByName)]
    struct Step {
        #[diesel(sql_type = diesel::sql_types::Text)]
        detail: String,
    }
    let dir = tempfile::tempdir().unwrap();
    let options = PoolOptions {
        max_size: 1,
        ..PoolOptions::default()
    };
    let store = Store::open(dir.path().join("t.db").to_str().unwrap(), options).unwrap();
    store.migrate().unwrap();
    let at = datetime!(2026-11-22 01:00:00 UTC);
    for minute in [0, 30, 61, 125] {
        let at = at + time::Duration::minutes(minute);
        write_version(
            &store,
            &version_of(at, &[market("BTC", "100")], &[], &[], &[]),
        );
    }
    // And two publishes, whose points the journal holds.
    for minute in [150, 190] {
        let mut changes = changes_of(&[market("BTC", "100")], &[], &[], &[]);
        changes.observed_at = at + time::Duration::minutes(minute);
        publish_changes(&store, &changes, (0, 0));
    }
    let ran = Arc::new(Mutex::new(Vec::<String>::new()));
    {
        let mut conn = store.conn().unwrap();
        let DbConnection::Sqlite(c) = &mut *conn else {
            unreachable!("a file path opens SQLite")
        };
        let sink = ran.clone();
        c.set_instrumentation(move |event: InstrumentationEvent<'_>| {
            if let InstrumentationEvent::StartQuery { query, .. } = event {
                let sql = query.to_string();
                let sql = sql.split(" -- binds:").next().unwrap_or_default();
                sink.lock().unwrap().push(sql.to_owned());
            }
        });
    }
    for interval in [HistoryInterval::M5, HistoryInterval::H1] {
        let read = store
            .history(Series::Market, "BTC", interval, 0, i64::MAX / 2, 10)
            .unwrap();
        assert!(!read.is_empty());
    }
    let filter = EventFilter {
        address: Some("0xaa".into()),
        ..EventFilter::default()
    };
    store.events(&filter, None, 10).unwrap();
    let ran = std::mem::take(&mut *ran.lock().unwrap());
    let mut conn = store.conn().unwrap();
    let DbConnection::Sqlite(c) = &mut *conn else {
        unreachable!("a file path opens SQLite")
    };
    let selects: Vec<&String> = ran
        .iter()
        .filter(|q| q.starts_with("SELECT") || q.starts_with("WITH"))
        .collect();
    assert!(selects.len() >= 8, "{ran:?}");
    assert!(
        selects
            .iter()
            .any(|q| q.contains("history_points_journal") && q.contains("body")),
        "the journal's points were read: {ran:?}"
    );
    for sql in selects {
        let steps: Vec<String> = diesel::sql_query(format!("EXPLAIN QUERY PLAN {sql}"))
            .load::<Step>(c)
            .unwrap()
            .into_iter()
            .map(|s| s.detail)
            .collect();
        let scans = ["history_points", "history_hourly", "position_events"]
            .iter()
            .any(|t| steps.iter().any(|s| s.starts_with(&format!("SCAN {t}"))));
        assert!(!scans, "{sql}: {steps:?}");
    }
}

/// A publish's points wait in the journal until a merge; a point of the
/// same instant written later (a whole write, or a publish again) is the
/// one read, before and after the merge.
#[test]
fn a_journaled_point_is_read_until_a_later_write_of_its_instant_replaces_it() {
    use crate::Series;
    use market_model::HistoryInterval;
    let t0 = datetime!(2026-11-18 00:00:00 UTC);
    let ms0 = crate::convert::epoch_ms(t0);
    let prices = |store: &Store| -> Vec<String> {
        store
            .history(
                Series::Market,
                "BTC",
                HistoryInterval::M5,
                ms0,
                ms0 + 3_600_000,
                10,
            )
            .unwrap()
            .into_iter()
            .map(|b| {
                let v: serde_json::Value = serde_json::from_slice(&b.json).unwrap();
                v["price"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    let publish_at = |store: &Store, minute: i64, price: &str| {
        let mut changes = changes_of(&[market("BTC", price)], &[], &[], &[]);
        changes.observed_at = t0 + time::Duration::minutes(minute);
        publish_changes(store, &changes, (0, 0));
    };
    for (store, _guard) in stores() {
        write_version(
            &store,
            &version_of(t0, &[market("BTC", "1")], &[], &[], &[]),
        );
        publish_at(&store, 5, "2");
        assert_eq!(prices(&store), ["1", "2"], "the journal's point is read");
        let whole_at_5 = version_of(
            t0 + time::Duration::minutes(5),
            &[market("BTC", "3")],
            &[],
            &[],
            &[],
        );
        write_version(&store, &whole_at_5);
        assert_eq!(
            prices(&store),
            ["1", "3"],
            "the whole write's point replaces it"
        );
        publish_at(&store, 5, "4");
        assert_eq!(
            prices(&store),
            ["1", "4"],
            "and a publish again replaces that"
        );
        store.merge_journals_holding(0).unwrap();
        assert_eq!(prices(&store), ["1", "4"], "merged, the same");
    }
}

/// The model-based test of the history's two tiers and the points'
/// journal: any sequence of observations of a market (in time order or
/// back in time, an instant written again), each a whole version that
/// applies retention as it is written or a publish of `track` (its point
/// into the journal) followed by retention as `track` applies it between
/// publishes, and sometimes a merge of the journal (some rolled back, as
/// a crash in the merge leaves it) or the store opened again, reads back, for any window, interval and limit, the buckets a
/// plain list says: each observation is kept as a point until all of its
/// hour is older than the points' retention, then the last one of its hour
/// is kept (a later one replacing it, an earlier one not) while the hour
/// is within the hourly retention; a bucket shows the last observation
/// kept in it. On SQLite, and on PostgreSQL when `TEST_DATABASE_URL` is
/// set.
#[test]
fn history_reads_what_a_plain_list_of_observations_says() {
    use crate::{Retention, Series};
    use market_model::HistoryInterval;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    const MIN: i64 = 60_000;
    const HOUR: i64 = 60 * MIN;
    const DAY: i64 = 24 * HOUR;
    let retention = Retention {
        points_days: 2,
        hourly_days: 5,
        events_days: 5,
    };
    let t0 = datetime!(2026-11-18 00:00:00 UTC);
    let ms0 = crate::convert::epoch_ms(t0);
    let hour_of = |at: i64| at - at.rem_euclid(HOUR);
    let config = ProptestConfig {
        cases: 24,
        ..ProptestConfig::default()
    };
    let interval = prop_oneof![
        Just(HistoryInterval::M5),
        Just(HistoryInterval::M15),
        Just(HistoryInterval::H1),
        Just(HistoryInterval::H4),
        Just(HistoryInterval::D1),
    ];
    // Minutes after `t0` over nine days (most in a few hours, so that
    // hours hold several; some at three instants, so that an instant is
    // written again, by a publish and a whole write in turn), and a price.
    let minute = prop_oneof![
        2 => 0i64..9 * 24 * 60,
        2 => 0i64..4 * 60,
        2 => 6 * 24 * 60_i64..6 * 24 * 60 + 240,
        // Each in a five-minute bucket of its own, which shows it alone.
        3 => (0i64..3).prop_map(|i| i * 5),
    ];
    proptest!(config, |(
        // With how each is written: 0 whole, 1 a publish, 2 a publish and
        // then a merge of the journals, 3 a publish and a merge rolled
        // back, 4 a publish and the store opened again.
        writes in proptest::collection::vec((minute, 1u32..1000, 0u8..5), 1..20),
        from in 0i64..10 * 24 * 60,
        span in 0i64..10 * 24 * 60,
        interval in interval,
        limit in 1usize..40,
    )| {
        // The oracle: every observation, as the retention applied at each
        // write leaves it.
        let mut points: BTreeMap<i64, u32> = BTreeMap::new();
        let mut hourly: BTreeMap<i64, (i64, u32)> = BTreeMap::new();
        for (minute, price, _) in &writes {
            let at = ms0 + minute * MIN;
            points.insert(at, *price);
            let whole_before = hour_of(at - i64::from(retention.points_days) * DAY);
            let rolled: Vec<i64> = points.keys().copied().filter(|a| hour_of(*a) < whole_before).collect();
            for a in rolled {
                let p = points.remove(&a).unwrap();
                let kept = hourly.entry(hour_of(a)).or_insert((a, p));
                if kept.0 <= a {
                    *kept = (a, p);
                }
            }
            hourly.retain(|h, _| *h >= at - i64::from(retention.hourly_days) * DAY);
        }
        let mut all: BTreeMap<i64, u32> = hourly.values().copied().collect();
        all.extend(points);
        // The read asked for, and a read of everything kept (five minutes
        // a bucket, no limit reached), which the latest observations, in
        // the journal, are in.
        let reads = [
            (interval, ms0 + from * MIN, ms0 + (from + span) * MIN, limit),
            (HistoryInterval::M5, ms0 - DAY, ms0 + 11 * DAY, 10_000),
        ];
        let expected = reads.map(|(interval, from, to, limit)| {
            let mut expected: Vec<(i64, String)> = Vec::new();
            for (at, price) in all.range(from..=to) {
                let time = interval.bucket_of(*at);
                if let Some(last) = expected.last_mut().filter(|last| last.0 == time) {
                    last.1 = price.to_string();
                } else if expected.len() == limit {
                    break;
                } else {
                    expected.push((time, price.to_string()));
                }
            }
            expected
        });
        for (store, _guard, url) in stores_at() {
            let mut store = store.with_retention(retention);
            for (i, (minute, price, how)) in writes.iter().enumerate() {
                let at = t0 + time::Duration::minutes(*minute);
                let markets = [market("BTC", &price.to_string())];
                // A publish needs a version to publish on.
                if i == 0 || *how == 0 {
                    write_version(&store, &version_of(at, &markets, &[], &[], &[]));
                    continue;
                }
                let mut changes = changes_of(&markets, &[], &[], &[]);
                changes.observed_at = at;
                publish_changes(&store, &changes, (0, 0));
                store.prune_history(at).unwrap();
                match how {
                    2 => {
                        store.merge_journals_holding(0).unwrap();
                    }
                    3 => {
                        let rolled_back = store.write_transaction(|c| {
                            crate::journal::Journal::Points.merge(c)?;
                            Err::<(), _>(crate::StoreError::Query(
                                diesel::result::Error::RollbackTransaction,
                            ))
                        });
                        prop_assert!(rolled_back.is_err());
                    }
                    4 => {
                        drop(store);
                        store = Store::open(&url, PoolOptions::default())
                            .unwrap()
                            .with_retention(retention);
                    }
                    _ => {}
                }
            }
            for ((interval, from, to, limit), expected) in reads.iter().zip(&expected) {
                let read: Vec<(i64, String)> = store
                    .history(Series::Market, "BTC", *interval, *from, *to, *limit)
                    .unwrap()
                    .into_iter()
                    .map(|b| {
                        let v: serde_json::Value = serde_json::from_slice(&b.json).unwrap();
                        (b.time, v["price"].as_str().unwrap().to_owned())
                    })
                    .collect();
                prop_assert_eq!(&read, expected);
            }
        }
    });
}

/// The model-based test of the event feed's reads: any events (of three
/// wallets and two assets, over ten days, several at one instant) read
/// back, page after page through the cursor, for any page size and any
/// filter by wallet, asset and window, what a plain filter of all of them
/// in the feed's order (newest first, then address, then symbol) says. A
/// wallet's events are read hour by hour (three at a time in this
/// crate's tests), so the pages cross many reads. An instant's events go
/// to the journal (as a publish writes them) or to the table (as a whole
/// write does), some after other events of that instant's wallets were
/// written to the other one (which the later write replaces), and the
/// journal is merged into the table at random. On SQLite, and on
/// PostgreSQL when `TEST_DATABASE_URL` is set.
#[test]
fn event_pages_read_what_a_plain_filter_of_the_events_says() {
    use crate::EventFilter;
    use market_model::{EventKind, PositionEvent};
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    const MIN: i64 = 60_000;
    let t0 = datetime!(2026-11-18 00:00:00 UTC);
    let ms0 = crate::convert::epoch_ms(t0);
    let config = ProptestConfig {
        cases: 24,
        ..ProptestConfig::default()
    };
    let addresses = ["0xaa", "0xbb", "0xcc"];
    let symbols = ["BTC", "ETH"];
    // Minutes after `t0` (most within a few hours), a wallet and an asset.
    let minute = prop_oneof![0i64..10 * 24 * 60, 0i64..240];
    proptest!(config, |(
        events in proptest::collection::vec((minute, 0usize..3, 0usize..2), 0..40),
        address in proptest::option::of(0usize..3),
        symbol in proptest::option::of(0usize..2),
        window in proptest::option::of((0i64..10 * 24 * 60, 0i64..10 * 24 * 60)),
        page in 1usize..7,
        // Per instant: into the journal, after earlier events of its
        // wallets written to the other side, and a merge after it.
        hows in proptest::collection::vec(any::<(bool, bool, bool)>(), 40),
    )| {
        // One event of a wallet in an asset at an instant (a later one
        // with the same keys replaces it).
        let by_key: BTreeMap<(i64, &str, &str), ()> = events
            .iter()
            .map(|(m, a, s)| ((ms0 + m * MIN, addresses[*a], symbols[*s]), ()))
            .collect();
        let filter = EventFilter {
            address: address.map(|a| addresses[a].to_owned()),
            symbol: symbol.map(|s| symbols[s].to_owned()),
            from: window.map(|(from, _)| ms0 + from * MIN),
            to: window.map(|(from, span)| ms0 + (from + span) * MIN),
            ..EventFilter::default()
        };
        let mut expected: Vec<(i64, String, String)> = by_key
            .keys()
            .filter(|(at, a, s)| {
                filter.address.as_deref().is_none_or(|f| f == *a)
                    && filter.symbol.as_deref().is_none_or(|f| f == *s)
                    && filter.from.is_none_or(|f| *at >= f)
                    && filter.to.is_none_or(|t| *at <= t)
            })
            .map(|(at, a, s)| (*at, a.to_string(), s.to_string()))
            .collect();
        expected.sort_by(|x, y| y.0.cmp(&x.0).then_with(|| (&x.1, &x.2).cmp(&(&y.1, &y.2))));
        let rows: Vec<PositionEvent> = events
            .iter()
            .map(|(m, a, s)| PositionEvent {
                observed_at: t0 + time::Duration::minutes(*m),
                address: addresses[*a].into(),
                label: None,
                tags: vec![],
                symbol: symbols[*s].into(),
                kind: EventKind::Opened,
                first_observation: false,
                previous_direction: None,
                direction: Some(Direction::Long),
                previous_size: d("0"),
                size: d("1"),
                previous_value: d("0"),
                value: d("10"),
                price: d("10"),
                previous_liq_price: None,
            })
            .collect();
        for (store, _guard) in stores() {
            {
                use diesel::Connection;
                let mut conn = store.conn().unwrap();
                // One instant's events a write, as publishes write them.
                let mut by_instant: BTreeMap<time::OffsetDateTime, Vec<PositionEvent>> = BTreeMap::new();
                for e in &rows {
                    let same = by_instant.entry(e.observed_at).or_default();
                    same.retain(|o| (&o.address, &o.symbol) != (&e.address, &e.symbol));
                    same.push(e.clone());
                }
                for (same, &(journal, earlier, merge)) in by_instant.values().zip(&hows) {
                    conn.transaction(|c| {
                        if earlier {
                            // The instant written before, in the other
                            // asset, on the other side.
                            let other: Vec<PositionEvent> = same
                                .iter()
                                .map(|e| PositionEvent {
                                    symbol: if e.symbol == "BTC" { "ETH" } else { "BTC" }.into(),
                                    ..e.clone()
                                })
                                .collect();
                            crate::history::write_events(c, &other, !journal)?;
                        }
                        crate::history::write_events(c, same, journal)?;
                        if merge {
                            crate::journal::Journal::Events.merge(c)?;
                        }
                        Ok::<_, crate::StoreError>(())
                    })
                    .unwrap();
                }
            }
            let mut read: Vec<(i64, String, String)> = Vec::new();
            let mut after: Option<(i64, String, String)> = None;
            loop {
                let cursor = after.as_ref().map(|(t, a, s)| (*t, a.as_str(), s.as_str()));
                let got = store.events(&filter, cursor, page).unwrap();
                prop_assert!(got.len() <= page);
                let full = got.len() == page;
                read.extend(got.iter().map(|e| (e.at, e.address.clone(), e.symbol.clone())));
                after = read.last().cloned();
                if !full {
                    break;
                }
            }
            prop_assert_eq!(&read, &expected);
        }
    });
}

/// A publish's events wait in the journal, read and numbered as the
/// table's; retention that reaches them (merges fell behind) takes them
/// from the table after merging them there, and says so in the bounds.
#[test]
fn journaled_events_are_read_numbered_and_pruned_as_the_tables() {
    use crate::{EventBounds, EventFilter, Retention};
    for (store, _guard) in stores() {
        let store = store.with_retention(Retention {
            events_days: 2,
            ..Retention::default()
        });
        let t0 = datetime!(2026-11-18 00:00:00 UTC);
        write_at(
            &store,
            t0,
            &[
                sized("0xbb", "BTC", Direction::Long, "2"),
                sized("0xaa", "ETH", Direction::Short, "5"),
            ],
        );
        let markets = [market("BTC", "100"), market("ETH", "10")];
        let mut changes = changes_of(
            &markets,
            &[wallet("0xbb")],
            &[sized("0xbb", "BTC", Direction::Long, "3")],
            &[],
        );
        changes.observed_at = t0 + time::Duration::hours(1);
        publish_changes(&store, &changes, (2, 2));
        let seqs = |store: &Store| -> Vec<i64> {
            store
                .events_after(&EventFilter::default(), 0, 100)
                .unwrap()
                .iter()
                .map(|e| e.seq)
                .collect()
        };
        assert_eq!(seqs(&store), [1, 2, 3], "the journal's event is the third");
        let wallet_events = store
            .events(
                &EventFilter {
                    address: Some("0xbb".into()),
                    ..EventFilter::default()
                },
                None,
                10,
            )
            .unwrap();
        assert_eq!(wallet_events.len(), 2, "{wallet_events:?}");
        // Two days and two hours on, the publish's event is past retention
        // too, with the journal not merged since.
        store
            .prune_history(t0 + time::Duration::days(2) + time::Duration::hours(2))
            .unwrap();
        assert_eq!(seqs(&store), Vec::<i64>::new());
        assert_eq!(
            store.event_bounds().unwrap(),
            EventBounds {
                last: 3,
                pruned_through: 3
            }
        );
    }
}

#[test]
fn events_are_numbered_in_write_order_and_replayed_after_a_number() {
    use crate::{EventBounds, EventFilter, Retention};
    for (store, _guard) in stores() {
        let store = store.with_retention(Retention {
            events_days: 2,
            ..Retention::default()
        });
        assert_eq!(store.event_bounds().unwrap(), EventBounds::default());
        let t0 = datetime!(2026-11-18 00:00:00 UTC);
        write_at(
            &store,
            t0,
            &[
                sized("0xbb", "BTC", Direction::Long, "2"),
                sized("0xaa", "ETH", Direction::Short, "5"),
            ],
        );
        write_at(
            &store,
            t0 + time::Duration::hours(1),
            &[
                sized("0xbb", "BTC", Direction::Long, "3"),
                sized("0xaa", "ETH", Direction::Short, "5"),
            ],
        );
        // Three events, numbered 1..=3: an observation's events by address.
        let all = store.events_after(&EventFilter::default(), 0, 100).unwrap();
        let kinds: Vec<(i64, String, String)> = all
            .iter()
            .map(|e| {
                let v: serde_json::Value = serde_json::from_str(&e.json).unwrap();
                (
                    e.seq,
                    v["address"].as_str().unwrap().to_owned(),
                    v["kind"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                (1, "0xaa".into(), "opened".into()),
                (2, "0xbb".into(), "opened".into()),
                (3, "0xbb".into(), "increased".into()),
            ]
        );
        // After a number, with a limit, and filtered (minValue exactly).
        let after = store.events_after(&EventFilter::default(), 1, 1).unwrap();
        assert_eq!(after.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2]);
        let big = store
            .events_after(
                &EventFilter {
                    min_value: Some(d("3")),
                    ..Default::default()
                },
                0,
                100,
            )
            .unwrap();
        assert_eq!(big.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(
            store.event_bounds().unwrap(),
            EventBounds {
                last: 3,
                pruned_through: 0
            }
        );
        // Past two days the first observation's two are past retention: the
        // bound says what was deleted, and numbers go on from 3.
        write_at(
            &store,
            t0 + time::Duration::days(2) + time::Duration::minutes(30),
            &[sized("0xbb", "BTC", Direction::Long, "1")],
        );
        let bounds = store.event_bounds().unwrap();
        assert_eq!(bounds.pruned_through, 2, "{bounds:?}");
        let left: Vec<i64> = store
            .events_after(&EventFilter::default(), 0, 100)
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(left, (3..=bounds.last).collect::<Vec<_>>(), "{bounds:?}");
        assert!(bounds.last > 3);
    }
}

#[test]
fn a_committed_version_is_notified_to_listeners_and_a_rolled_back_one_is_not() {
    use std::time::Duration;
    for (store, _guard) in stores() {
        let Some(mut listener) = store.listen_for_versions().unwrap() else {
            assert_eq!(store.kind(), crate::BackendKind::Sqlite);
            continue;
        };
        let t0 = datetime!(2026-11-18 00:00:00 UTC);
        let version = write_at(&store, t0, &[sized("0xaa", "BTC", Direction::Long, "2")]);
        assert_eq!(
            listener.wait(Duration::from_secs(5)).unwrap(),
            Some(version)
        );
        // A transaction that writes a version and rolls back notifies nobody.
        let mut conn = store.conn().unwrap();
        let rolled_back: Result<(), StoreError> = conn.transaction(|conn| {
            crate::write::latest_version(conn)?;
            crate::notify::notify_version(conn, version + 1)?;
            Err(StoreError::Corrupt("rolled back on purpose".into()))
        });
        assert!(rolled_back.is_err());
        assert_eq!(listener.wait(Duration::from_millis(300)).unwrap(), None);
    }
}

#[test]
fn current_levels_read_as_text_render_as_the_parsed_day() {
    let stored = day(date!(2026 - 11 - 22), "xyz:TSLA", Coverage::Current);
    let head = || LiquidityDay {
        levels: Vec::new(),
        totals: LiquidityTotals::of(&[]),
        ..stored.clone()
    };
    let rendered = |t: &LiquidityDayText| {
        let head = serde_json::to_string(t.head()).unwrap();
        format!("{}{}}}", head.strip_suffix("[]}").unwrap(), t.levels_json())
    };
    let want = serde_json::to_string(&stored).unwrap();
    let text = serde_json::to_string(&stored.levels).unwrap();
    // As written, then as another writer (or a hand) might have: out of
    // order, spaced, in exponent notation. Each reads back as the same day.
    let reversed: Vec<&Level> = stored.levels.iter().rev().collect();
    let others = [
        text.clone(),
        serde_json::to_string(&reversed).unwrap(),
        text.replace(",\"", ", \""),
        text.replace("\"6.84\"", "\"684e-2\""),
    ];
    for levels in others {
        let parsed = <LiquidityDay as StoredDay>::read(head(), levels.clone()).unwrap();
        assert_eq!(serde_json::to_string(&parsed).unwrap(), want, "{levels}");
        let text = <LiquidityDayText as StoredDay>::read(head(), levels.clone()).unwrap();
        assert_eq!(rendered(&text), want, "{levels}");
    }
    assert!(<LiquidityDayText as StoredDay>::read(head(), "[{}]".into()).is_err());
}

/// With `Checkpoint::Separate` a commit leaves its pages in the
/// write-ahead log, and `Store::checkpoint` copies them into the database
/// file; with the default the commit that takes the log past 4 MB copies
/// them itself.
#[test]
fn a_separate_checkpoint_leaves_commits_in_the_log_until_asked() {
    use diesel::connection::SimpleConnection;
    for checkpoint in [Checkpoint::OnCommit, Checkpoint::Separate] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let options = PoolOptions {
            max_size: 2,
            checkpoint,
            ..PoolOptions::default()
        };
        let store = Store::open(path.to_str().unwrap(), options).unwrap();
        store.migrate().unwrap();
        store.checkpoint().unwrap();
        let file = || std::fs::metadata(&path).unwrap().len();
        let before = file();
        // About 8 MB in one commit.
        store
            .conn()
            .unwrap()
            .batch_execute(
                "CREATE TABLE filler (b BLOB); \
                 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) \
                 INSERT INTO filler SELECT randomblob(4000) FROM n;",
            )
            .unwrap();
        let grown = file() - before;
        match checkpoint {
            Checkpoint::OnCommit => assert!(grown > 7_000_000, "{checkpoint:?}: {grown}"),
            Checkpoint::Separate => assert!(grown < 1_000_000, "{checkpoint:?}: {grown}"),
        }
        let (log, done) = store.checkpoint().unwrap().unwrap();
        assert_eq!(log, done, "{checkpoint:?}: nothing reads, so all is copied");
        assert!(file() - before > 7_000_000, "{checkpoint:?}");
    }
}

/// Writes these rows whole as a version observed at 01:00; returns its
/// number.
fn write_whole(
    store: &Store,
    markets: &[Market],
    wallets: &[Wallet],
    positions: &[MarketPosition],
) -> i64 {
    let at = datetime!(2026-11-22 01:00:00 UTC);
    write_version(store, &version_of(at, markets, wallets, positions, &[]))
}

/// The changes of a publish by `track` (markets and coverage as a test's).
fn changes_of(
    markets: &[Market],
    wallets: &[Wallet],
    positions: &[MarketPosition],
    removed: &[&str],
) -> VersionChanges {
    VersionChanges {
        observed_at: datetime!(2026-11-22 01:01:00 UTC),
        markets: markets.to_vec(),
        current_days: vec![],
        cohorts: vec![],
        coverage: NetworkCoverage {
            as_of: datetime!(2026-11-22 01:01:00 UTC),
            wallets: WalletFreshness {
                tracked: 0,
                never_read: 0,
                refreshed_within1m: 0,
                refreshed_within5m: 0,
                refreshed_within1h: 0,
                by_size_class: vec![],
            },
            open_interest: d("1000.00"),
            covered_open_interest: d("0.10"),
            covered_share: Some(d("0.0001")),
            markets: Vec::new(),
        },
        wallets: wallets.to_vec(),
        positions: positions.to_vec(),
        removed: removed.iter().map(|a| (*a).to_owned()).collect(),
    }
}

/// Publishes `changes` on the newest version as `track` does; returns the
/// new version.
fn publish_changes(store: &Store, changes: &VersionChanges, counts: (usize, usize)) -> i64 {
    store
        .publish(
            &PublishWrite {
                source: "track",
                base_version: store.latest_snapshot().unwrap().unwrap().version,
                changes,
                wallet_count: counts.0,
                position_count: counts.1,
                frozen_days: &[],
                candles: &[],
                wallet_states: &[],
                tracked: &[],
                newly_read: &[],
                previous: None,
                registry: &[],
                freshness: &changes.coverage.wallets,
            },
            &mut |_, _, _| {},
        )
        .unwrap()
}

/// A version is read in several statements (a whole load's two halves run
/// on two connections), while publishes commit and prune: a reader must
/// see a version whole or learn that it was pruned meanwhile. While a
/// writer publishes version after version (each one rewrites every wallet
/// with the version's value), a reader loads the newest version whole and
/// reads the changes to it, again and again. Every read either holds
/// every wallet, each with the value of the version it names, or says the
/// version went (`Pruned` for a whole load, `None` for changes).
#[test]
fn a_version_read_while_publishes_commit_is_whole_or_reported_pruned() {
    const WALLETS: usize = 1_500;
    const PUBLISHES: usize = 90;
    // Publish `n` rewrites the wallets `i` with `i % CYCLE == n % CYCLE`.
    const CYCLE: usize = 30;
    for (store, _guard) in stores() {
        let markets = vec![market("BTC", "1.5")];
        // Addresses on both sides of the whole load's split.
        let address = |i: usize| format!("0x{:x}{i:05}", i % 16);
        let rewritten = |n: usize| -> (Vec<Wallet>, Vec<MarketPosition>) {
            let chosen: Vec<usize> = (0..WALLETS)
                .filter(|i| n == 0 || i % CYCLE == n % CYCLE)
                .collect();
            let wallets = chosen
                .iter()
                .map(|&i| Wallet {
                    account_total_value: d(&format!("{n}.5")),
                    ..wallet(&address(i))
                })
                .collect();
            let positions = chosen
                .iter()
                .map(|&i| position(&address(i), "BTC"))
                .collect();
            (wallets, positions)
        };
        // The value of wallet `i` after publish `n`.
        let value_of = |i: usize, n: usize| {
            let last = (1..=n).rev().find(|k| k % CYCLE == i % CYCLE).unwrap_or(0);
            d(&format!("{last}.5"))
        };
        let (wallets, positions) = rewritten(0);
        let first = write_whole(&store, &markets, &wallets, &positions);
        let counts = (WALLETS, WALLETS);
        // Each version's publish number.
        let numbers = std::sync::Mutex::new(std::collections::HashMap::from([(first, 0usize)]));
        let done = std::sync::atomic::AtomicBool::new(false);
        let check = |v: i64, wallets: &[Wallet]| {
            let n = numbers.lock().unwrap()[&v];
            for w in wallets {
                let i: usize = w.address[3..].parse().unwrap();
                assert_eq!(
                    w.account_total_value,
                    value_of(i, n),
                    "{} in version {v}",
                    w.address
                );
            }
        };
        let (whole, pruned, changes) = std::thread::scope(|s| {
            s.spawn(|| {
                // Set however the writer ends: a writer that panics ends
                // the reader too, so the test fails instead of hanging.
                struct Done<'a>(&'a std::sync::atomic::AtomicBool);
                impl Drop for Done<'_> {
                    fn drop(&mut self) {
                        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                }
                let _done = Done(&done);
                for n in 1..=PUBLISHES {
                    let (wallets, positions) = rewritten(n);
                    // Numbered before it commits: a reader may see it at once.
                    let next = store.latest_snapshot().unwrap().unwrap().version + 1;
                    numbers.lock().unwrap().insert(next, n);
                    let changes = changes_of(&markets, &wallets, &positions, &[]);
                    assert_eq!(publish_changes(&store, &changes, counts), next);
                    // Some reads fall between two commits, others do not.
                    std::thread::sleep(std::time::Duration::from_millis(3 * (n % 4) as u64));
                }
            });
            let reader = s.spawn(|| {
                let (mut whole, mut pruned, mut changes) = (0, 0, 0);
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    let meta = store.latest_snapshot().unwrap().unwrap();
                    // The changes from the version before (kept until the
                    // publish after next), as a running server reads them.
                    if meta.version > first {
                        let from = meta.version - 1;
                        match store.load_changes(from, &meta, usize::MAX) {
                            Ok(Some(c)) => {
                                changes += 1;
                                let n = numbers.lock().unwrap()[&meta.version];
                                let expected = rewritten(n).0.len();
                                assert_eq!(c.wallets.len(), expected, "{from} to {}", meta.version);
                                assert_eq!(c.positions.len(), expected);
                                assert!(c.removed.is_empty());
                                check(meta.version, &c.wallets);
                            }
                            Ok(None) => pruned += 1,
                            Err(e) => panic!("{e}"),
                        }
                    }
                    match store.load_snapshot(&meta) {
                        Ok(loaded) => {
                            whole += 1;
                            let v = &loaded.version;
                            assert_eq!(v.wallets.len(), WALLETS, "version {}", meta.version);
                            assert_eq!(v.positions.len(), WALLETS);
                            check(meta.version, &v.wallets);
                        }
                        Err(StoreError::Pruned(v)) => {
                            assert_eq!(v, meta.version);
                            pruned += 1;
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                (whole, pruned, changes)
            });
            reader.join().unwrap()
        });
        eprintln!("{whole} whole reads, {changes} reads of changes, {pruned} pruned");
        assert!(
            whole > 0 && changes > 0 && pruned * 2 <= whole + changes,
            "{whole} whole reads, {changes} reads of changes, {pruned} pruned"
        );
    }
}

/// The changes to a version, read while two publishes commit (made from
/// inside the read, as its first position is handed over) and prune both
/// the version read from and the version read: the read is one snapshot,
/// so it still returns every wallet written between the two, where a read
/// that checked afterwards found them pruned and gave up.
#[test]
fn changes_read_while_two_publishes_prune_both_versions_are_whole() {
    for (store, _guard) in stores() {
        let markets = vec![market("BTC", "1.5")];
        let wallets: Vec<Wallet> = (0..20).map(|i| wallet(&format!("0x{i:02}"))).collect();
        let positions: Vec<MarketPosition> = wallets
            .iter()
            .map(|w| position(&w.address, "BTC"))
            .collect();
        write_whole(&store, &markets, &wallets, &positions);
        let publish = |range: std::ops::Range<usize>| {
            let changes = changes_of(&markets, &wallets[range.clone()], &positions[range], &[]);
            publish_changes(&store, &changes, (20, 20))
        };
        let from = publish(0..5);
        publish(5..10);
        let meta = store.latest_snapshot().unwrap().unwrap();
        let once = std::sync::Once::new();
        let read = store
            .load_changes_for_serving::<_, LiquidityDay>(from, &meta, usize::MAX, |t| {
                once.call_once(|| {
                    publish(10..12);
                    publish(12..14);
                });
                t.address.to_owned()
            })
            .unwrap()
            .expect("read whole although both versions were pruned meanwhile");
        let written: Vec<&str> = read.wallets.iter().map(|w| w.address.as_str()).collect();
        assert_eq!(written, ["0x05", "0x06", "0x07", "0x08", "0x09"]);
        assert_eq!(read.positions, written);
        assert!(
            once.is_completed(),
            "the publishes were made during the read"
        );
        assert!(
            store
                .load_changes(from, &meta, usize::MAX)
                .unwrap()
                .is_none(),
            "pruned since"
        );
    }
}

/// One step of [`journals_read_back_what_a_plain_map_holds`].
#[derive(Clone, Debug)]
enum JournalOp {
    /// Registry entries saved on their own: (wallet, value) pairs.
    SaveRegistry(Vec<(usize, u32)>),
    /// A publish that writes scan states (wallet, value, positions it
    /// follows) and registry entries (wallet, value).
    Publish(Vec<(usize, u32, usize)>, Vec<(usize, u32)>),
    /// The same publish on a base that is no longer the latest: refused,
    /// nothing of it written.
    StalePublish(Vec<(usize, u32, usize)>, Vec<(usize, u32)>),
    /// The journals merged into their tables.
    Merge,
    /// The process gone and the store opened again (what it committed stays).
    Reopen,
}

/// The wallets the model's steps name (few, so that writes meet again).
const JOURNAL_WALLETS: usize = 6;

fn journal_op() -> impl proptest::strategy::Strategy<Value = JournalOp> {
    use proptest::prelude::*;
    // At most one write of an address in one step (a write refuses two).
    let entries = proptest::collection::btree_map(0..JOURNAL_WALLETS, 0..1_000u32, 0..4)
        .prop_map(|m| m.into_iter().collect::<Vec<_>>());
    let states =
        proptest::collection::btree_map(0..JOURNAL_WALLETS, (0..1_000u32, 0..3usize), 0..4)
            .prop_map(|m| {
                m.into_iter()
                    .map(|(a, (v, n))| (a, v, n))
                    .collect::<Vec<_>>()
            });
    prop_oneof![
        3 => entries.clone().prop_map(JournalOp::SaveRegistry),
        3 => (states.clone(), entries.clone()).prop_map(|(s, e)| JournalOp::Publish(s, e)),
        1 => (states, entries).prop_map(|(s, e)| JournalOp::StalePublish(s, e)),
        2 => Just(JournalOp::Merge),
        1 => Just(JournalOp::Reopen),
    ]
}

fn journal_address(i: usize) -> String {
    format!("0x{:02x}", 0xa0 + i)
}

/// A registry entry whose every field follows `value` (so that a row of
/// another write, or a column swapped, would show).
fn journal_entry(i: usize, value: u32) -> RegistryEntry {
    let at = datetime!(2026-11-22 01:00:00 UTC) + time::Duration::seconds(value.into());
    let mut e = RegistryEntry::new(journal_address(i), DiscoverySource::List, at);
    e.sources = 1 + (value % 15) as i32;
    e.account_value = (!value.is_multiple_of(3)).then(|| d(&format!("{value}.{:02}", value % 100)));
    e.position_value = value.is_multiple_of(2).then(|| d(&format!("0.{value:04}")));
    e.traded_notional = d(&format!("{}", value * 7));
    e.dexes = (0..value % 3).map(|k| format!("dex{k}")).collect();
    e.last_read_at = Some(at + time::Duration::minutes(1));
    e.empty_reads = (value % 5) as i32;
    e.failed_reads = (value % 7) as i32;
    e
}

/// A scan state following `positions` positions, every field from `value`.
fn journal_state(
    i: usize,
    value: u32,
    positions: usize,
) -> (WalletScanState, Vec<TrackedPosition>) {
    let address = journal_address(i);
    let state = WalletScanState {
        address: address.clone(),
        missed_scans: (value % 4) as i32,
        last_seen_at: Some(
            datetime!(2026-11-22 02:00:00 UTC) + time::Duration::seconds(value.into()),
        ),
        first_seen_at: value
            .is_multiple_of(2)
            .then_some(datetime!(2026-11-21 00:00:00 UTC)),
        first_account_value: value.is_multiple_of(3).then(|| d(&format!("{value}.5"))),
        realized_pnl: d(&format!("-{value}.25")),
        closed_count: (value % 9) as i32,
        win_count: (value % 4) as i32,
        held: [
            value as i32 % 2,
            value as i32 % 3,
            value as i32 % 5,
            value as i32 % 7,
        ],
        read_dexes: (!value.is_multiple_of(2)).then(|| vec![String::new()]),
    };
    // In symbol order, as the store hands them back.
    let tracked = ["BTC", "ETH", "SOL"][..positions]
        .iter()
        .map(|s| followed(&address, s, &format!("{value}.1")))
        .collect();
    (state, tracked)
}

/// The model-based test of the journals (`journal.rs`): any sequence of
/// registry saves, publishes with scan states and registry entries,
/// refused publishes, merges and restarts reads back, through every read
/// of the registry and the states (whole, in pages, by address, the
/// followed positions, the count), what a plain map of the latest write
/// of each address holds. On SQLite, and on PostgreSQL when
/// `TEST_DATABASE_URL` is set.
#[test]
fn journals_read_back_what_a_plain_map_holds() {
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    let config = ProptestConfig {
        cases: 24,
        ..ProptestConfig::default()
    };
    proptest!(config, |(ops in proptest::collection::vec(journal_op(), 1..14))| {
        for (store, _guard, url) in stores_at() {
            let mut store = Some(store);
            let mut registry: BTreeMap<String, RegistryEntry> = BTreeMap::new();
            let mut states: BTreeMap<String, (WalletScanState, Vec<TrackedPosition>)> = BTreeMap::new();
            for op in &ops {
                let s = store.as_ref().unwrap();
                match op {
                    JournalOp::SaveRegistry(entries) => {
                        let entries: Vec<RegistryEntry> =
                            entries.iter().map(|&(i, v)| journal_entry(i, v)).collect();
                        s.save_registry(&entries).unwrap();
                        registry.extend(entries.into_iter().map(|e| (e.address.clone(), e)));
                    }
                    JournalOp::Publish(written, entries) | JournalOp::StalePublish(written, entries) => {
                        let stale = matches!(op, JournalOp::StalePublish(..));
                        let read: Vec<(WalletScanState, Vec<TrackedPosition>)> =
                            written.iter().map(|&(i, v, n)| journal_state(i, v, n)).collect();
                        let entries: Vec<RegistryEntry> =
                            entries.iter().map(|&(i, v)| journal_entry(i, v)).collect();
                        let result = publish_states(s, &read, &entries, stale);
                        if stale {
                            prop_assert!(matches!(result, Err(StoreError::Conflict { .. })), "{result:?}");
                        } else {
                            result.unwrap();
                            states.extend(read.into_iter().map(|r| (r.0.address.clone(), r)));
                            registry.extend(entries.into_iter().map(|e| (e.address.clone(), e)));
                        }
                    }
                    JournalOp::Merge => s.merge_journals().unwrap(),
                    JournalOp::Reopen => {
                        drop(store.take());
                        store = Some(Store::open(&url, PoolOptions::default()).unwrap());
                    }
                }
                let s = store.as_ref().unwrap();
                let expected: Vec<RegistryEntry> = registry.values().cloned().collect();
                prop_assert_eq!(&s.registry().unwrap(), &expected, "after {:?}", op);
                let mut paged = Vec::new();
                s.each_registry_entry(2, |e| paged.push(e)).unwrap();
                prop_assert_eq!(&paged, &expected);
                prop_assert_eq!(s.registry_len().unwrap(), expected.len() as i64);
                let whole: std::collections::HashMap<String, WalletScanState> = states
                    .iter()
                    .map(|(a, (st, _))| (a.clone(), st.clone()))
                    .collect();
                prop_assert_eq!(&s.wallet_scan_states().unwrap(), &whole, "after {:?}", op);
                let mut paged = Vec::new();
                s.each_wallet_scan_state(3, |st| paged.push(st)).unwrap();
                let by_address: Vec<WalletScanState> = states.values().map(|(st, _)| st.clone()).collect();
                prop_assert_eq!(&paged, &by_address);
                let following: std::collections::HashMap<String, Vec<TrackedPosition>> = states
                    .iter()
                    .filter(|(_, (_, t))| !t.is_empty())
                    .map(|(a, (_, t))| (a.clone(), t.clone()))
                    .collect();
                prop_assert_eq!(&s.tracked_positions().unwrap(), &following);
                for i in 0..JOURNAL_WALLETS {
                    let a = journal_address(i);
                    prop_assert_eq!(&s.wallet_history(&a).unwrap(), &states.get(&a).cloned(), "{}", a);
                }
            }
        }
    });
}

/// A publish that changes no wallet and writes `read`'s scan states and
/// `entries`, on the latest version (or, when `stale`, on the one before).
fn publish_states(
    store: &Store,
    read: &[(WalletScanState, Vec<TrackedPosition>)],
    entries: &[RegistryEntry],
    stale: bool,
) -> Result<i64, StoreError> {
    let at = datetime!(2026-11-22 03:00:00 UTC);
    let freshness = WalletFreshness {
        tracked: 0,
        never_read: 0,
        refreshed_within1m: 0,
        refreshed_within5m: 0,
        refreshed_within1h: 0,
        by_size_class: Vec::new(),
    };
    let changes = VersionChanges {
        observed_at: at,
        markets: vec![market("BTC", "100")],
        current_days: vec![],
        cohorts: vec![],
        coverage: NetworkCoverage {
            as_of: at,
            wallets: freshness.clone(),
            open_interest: d("0"),
            covered_open_interest: d("0"),
            covered_share: None,
            markets: Vec::new(),
        },
        wallets: vec![],
        positions: vec![],
        removed: vec![],
    };
    let latest = store.latest_snapshot()?.map_or(0, |m| m.version);
    let states: Vec<WalletScanState> = read.iter().map(|(s, _)| s.clone()).collect();
    let tracked: Vec<TrackedPosition> = read.iter().flat_map(|(_, t)| t.clone()).collect();
    store.publish(
        &PublishWrite {
            source: "track",
            base_version: if stale { latest - 1 } else { latest },
            changes: &changes,
            wallet_count: 0,
            position_count: 0,
            frozen_days: &[],
            candles: &[],
            wallet_states: &states,
            tracked: &tracked,
            newly_read: &[],
            previous: None,
            registry: entries,
            freshness: &freshness,
        },
        &mut |_, _, _| {},
    )
}

/// A journal is merged once it holds the rows a merge is due at, not
/// before; the merge empties it into its table, and what a read sees does
/// not change.
#[test]
fn a_journal_is_merged_once_it_holds_a_merges_worth() {
    use crate::journal::Journal;
    for (store, _guard) in stores() {
        let first: Vec<RegistryEntry> = (0..5).map(|i| journal_entry(i, 1)).collect();
        store.save_registry(&first).unwrap();
        assert!(!store.merge_journals_holding(6).unwrap(), "5 rows of 6");
        assert_eq!(store.journal_lens().unwrap(), (5, 0));
        // A wallet saved again is a row more of the journal.
        let again = [journal_entry(0, 2)];
        store.save_registry(&again).unwrap();
        let before = store.registry().unwrap();
        assert!(store.merge_journals_holding(6).unwrap(), "6 rows of 6");
        assert_eq!(store.journal_lens().unwrap(), (0, 0));
        assert_eq!(store.registry().unwrap(), before);
        assert_eq!(before[0], again[0], "the later save of a wallet kept");
        let mut conn = store.conn().unwrap();
        let stored: i64 = crate::schema::wallet_registry::table
            .count()
            .get_result(&mut *conn)
            .unwrap();
        assert_eq!(stored, 5, "every entry in the table");
        assert_eq!(Journal::Registry.len(&mut conn).unwrap(), 0);
    }
}

/// A wallet's position in the events' oracle test: symbol (index), long,
/// size, mark price, liquidation price (index into the test's lists).
type HeldPos = (usize, bool, usize, usize, usize);

fn held_positions(address: &str, held: &[HeldPos]) -> Vec<MarketPosition> {
    // Sizes that print apart and are equal, or differ.
    const SIZES: [&str; 4] = ["1", "1.0", "2", "0.5"];
    const MARKS: [&str; 2] = ["100", "101.5"];
    const LIQS: [Option<&str>; 3] = [None, Some("100.5"), Some("150")];
    const SYMBOLS: [&str; 3] = ["BTC", "ETH", "xyz:GOLD"];
    let mut seen = std::collections::HashSet::new();
    held.iter()
        .filter(|p| seen.insert(p.0))
        .map(|&(s, long, size, mark, liq)| MarketPosition {
            direction: if long {
                Direction::Long
            } else {
                Direction::Short
            },
            mark_price: d(MARKS[mark]),
            liq_price: LIQS[liq].map(d),
            ..sized(address, SYMBOLS[s], Direction::Long, SIZES[size])
        })
        .collect()
}

proptest::proptest! {
    /// A publish derives its events against the positions `track` holds of
    /// the base (`PublishWrite::previous`) as it does against the rows it
    /// closes, read back as stored: the same events, field for field, for
    /// sizes that print apart but are equal, flips, closes near and far
    /// from liquidation, wallets served before or not, and dexes read for
    /// the first time.
    #[test]
    fn events_against_the_writers_positions_are_those_against_the_stored_rows(
        wallets in proptest::collection::vec(
            (
                proptest::option::of(proptest::collection::vec(
                    (0..3usize, proptest::bool::ANY, 0..4usize, 0..2usize, 0..3usize), 0..4)),
                proptest::collection::vec(
                    (0..3usize, proptest::bool::ANY, 0..4usize, 0..2usize, 0..3usize), 0..4),
                proptest::bool::ANY,
            ),
            1..6,
        ),
    ) {
        let mut written = Vec::new();
        let (mut positions, mut served, mut before, mut newly_read) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (i, (was, now, new_dex)) in wallets.iter().enumerate() {
            let address = format!("0x{i:040x}");
            written.push(wallet(&address));
            positions.extend(held_positions(&address, now));
            if let Some(was) = was {
                served.push(address.clone());
                before.extend(held_positions(&address, was));
            }
            if *new_dex {
                newly_read.push((address, vec!["xyz".to_string()]));
            }
        }
        // Stored as the base version stored them: one column per wallet.
        let rows: Vec<(String, String)> = served
            .iter()
            .map(|a| {
                let mut mine: Vec<&MarketPosition> =
                    before.iter().filter(|p| &p.address == a).collect();
                (a.clone(), crate::held::encode(&mut mine).unwrap())
            })
            .collect();
        let markets = [market("BTC", "100")];
        let observation = |closed| crate::history::Observation {
            observed_at: datetime!(2026-11-22 02:00 UTC),
            markets: &markets,
            cohorts: &[],
            wallets: &written,
            positions: &positions,
            events: true,
            closed,
            newly_read: &newly_read,
            journal: true,
            prune: false,
        };
        let stored = crate::history::derive_events(&observation(crate::history::Closed::Rows(&rows))).unwrap();
        let held = crate::history::derive_events(&observation(crate::history::Closed::Served {
            wallets: &served,
            positions: &before,
        }))
        .unwrap();
        proptest::prop_assert_eq!(held, stored);
    }
}
