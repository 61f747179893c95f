//! Reading data versions: the newest version's metadata, a version whole
//! (as model structs, or rendered from its stored text for serving) and the
//! changes between two versions (for a running server to apply).

use diesel::prelude::*;
use market_engine::{DataVersion, VersionChanges};
use market_model::{
    LiquidityDay, MarketPosition, MarketPositionText, NetworkCoverage, Wallet, WalletFreshness,
};
use time::OffsetDateTime;

use crate::convert::*;
use crate::rows::*;
use crate::schema::*;
use crate::validity::{self, Latest, Part};
use crate::{held, DbConnection, Store, StoreError};

/// Metadata of a materialized data version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotMeta {
    /// Version number (monotonic).
    pub version: i64,
    /// What produced it (`demo`, `scan`).
    pub source: String,
    /// When its data was observed.
    pub observed_at: OffsetDateTime,
}

/// A data version read back. Its positions are model structs
/// ([`Store::load_snapshot`]) or whatever the caller made of their text
/// ([`Store::load_for_serving`]).
#[derive(Clone, Debug)]
pub struct LoadedSnapshot<P = MarketPosition, D = LiquidityDay> {
    /// Version metadata.
    pub meta: SnapshotMeta,
    /// The version (positions with the wallet's label and tags filled in,
    /// in no particular order; freshness as its writer stored it).
    pub version: DataVersion<P, D>,
}

impl Store {
    /// The newest data version, if any.
    pub fn latest_snapshot(&self) -> Result<Option<SnapshotMeta>, StoreError> {
        let mut conn = self.conn()?;
        let row = snapshots::table
            .order(snapshots::version.desc())
            .select((
                snapshots::version,
                snapshots::source,
                snapshots::observed_at,
            ))
            .first::<(i64, String, time::PrimitiveDateTime)>(&mut *conn)
            .optional()?;
        Ok(row.map(|(version, source, observed_at)| SnapshotMeta {
            version,
            source,
            observed_at: from_db_time(observed_at),
        }))
    }

    /// The random name this database drew when it was created (a copy of
    /// the database has the same).
    pub fn identity(&self) -> Result<String, StoreError> {
        let mut conn = self.conn()?;
        Ok(store_identity::table
            .select(store_identity::id)
            .first(&mut *conn)?)
    }

    /// The stored version `version`, if it is still stored, with the
    /// numbers of wallets and positions its writer counted.
    pub fn stored_version(
        &self,
        version: i64,
    ) -> Result<Option<(SnapshotMeta, u64, u64)>, StoreError> {
        let mut conn = self.conn()?;
        let row = snapshots::table
            .filter(snapshots::version.eq(version))
            .select((
                snapshots::source,
                snapshots::observed_at,
                snapshots::wallet_count,
                snapshots::position_count,
            ))
            .first::<(String, time::PrimitiveDateTime, i64, i64)>(&mut *conn)
            .optional()?;
        Ok(row.map(|(source, observed_at, wallets, positions)| {
            let meta = SnapshotMeta {
                version,
                source,
                observed_at: from_db_time(observed_at),
            };
            (meta, wallets as u64, positions as u64)
        }))
    }

    /// Reads a whole data version as model structs.
    pub fn load_snapshot(&self, meta: &SnapshotMeta) -> Result<LoadedSnapshot, StoreError> {
        let (rest, [mut positions, upper]) =
            self.load_version(meta, true, |address, held, out| {
                held::for_each_text(address, held, |t| {
                    out.push(held::model(t));
                    Ok(())
                })
            })?;
        // (The lower half was sized for both.)
        positions.extend(upper);
        label_positions(&mut positions, &rest.wallets);
        rest.assemble(meta, positions)
    }

    /// Reads a whole data version for serving: each position is handed to
    /// `render` as the text stored for it, and the version holds what
    /// `render` returns, in parts (one per connection that read them). No
    /// decimal is parsed on the way: a server starting on a million
    /// positions spent most of its start-up parsing decimals it then printed
    /// again. The text has no label and tags: they are the wallet's, and the
    /// caller has the wallets.
    pub fn load_for_serving<T: Send>(
        &self,
        meta: &SnapshotMeta,
        render: impl Fn(&MarketPositionText<'_>) -> T + Sync,
    ) -> Result<LoadedSnapshot<Vec<T>>, StoreError> {
        let (rest, parts) = self.load_version(meta, false, |address, held, out| {
            held::for_each_text(address, held, |t| {
                out.push(render(t));
                Ok(())
            })
        })?;
        rest.assemble(meta, parts.into())
    }

    /// Reads a whole data version, each wallet's positions through `read`
    /// (given its address and its `positions` column), in two halves; the
    /// lower half's vector has room for both when the caller will `merge`
    /// them.
    fn load_version<T: Send>(
        &self,
        meta: &SnapshotMeta,
        merge: bool,
        read: impl Fn(&str, &str, &mut Vec<T>) -> Result<(), StoreError> + Sync,
    ) -> Result<(VersionRest, [Vec<T>; 2]), StoreError> {
        let v = meta.version;
        // Start-up time is dominated by this load, so the wallet rows (and
        // the positions they hold) are read on two connections, split by
        // address at [`ADDRESS_SPLIT`]. Each read (the markets and the
        // freshness first, then each half) is one snapshot of the database
        // in which `v` is stored (see [`stored_in_snapshot`]): a publish
        // that prunes `v` while a half is read does not take its rows from
        // that half, so a long load is not lost to publishes meanwhile.
        let (markets, freshness, wallet_count) = {
            let mut pooled = self.conn()?;
            stored_in_snapshot(&mut pooled, v, |conn| {
                let markets: Vec<MarketRow> = markets::table
                    .filter(markets::version.eq(v))
                    .order(markets::symbol)
                    .load(conn)?;
                let freshness = version_freshness::table
                    .filter(version_freshness::version.eq(v))
                    .select(version_freshness::body)
                    .first::<String>(conn)
                    .optional()?;
                let wallet_count = snapshots::table
                    .filter(snapshots::version.eq(v))
                    .select(snapshots::wallet_count)
                    .first::<i64>(conn)
                    .optional()?;
                Ok((markets, freshness, wallet_count))
            })?
        };
        let freshness = freshness
            .map(|body| {
                serde_json::from_str::<WalletFreshness>(&body).map_err(|e| {
                    StoreError::Corrupt(format!("wallet freshness of version {v}: {e}"))
                })
            })
            .transpose()?;
        // Each half's positions are collected into a vector of about half
        // of the markets' counts (addresses are spread evenly over the
        // split; a little room to spare), or of all of them for a lower
        // half the upper one is merged into: regrowing vectors of a million
        // items cost a tenth of the start, and room for both in each half
        // would raise the start's peak.
        let total: i64 = markets.iter().map(|m| m.long_count + m.short_count).sum();
        let total = usize::try_from(total).unwrap_or(0);
        // The wallets alike, from the count stored with the version: the
        // lower half's vector has room for the upper one's, which is moved
        // into it. Grown by doubling instead, the two vectors of model
        // structs (over 500 bytes each) held about 420 MB at that move for
        // 300,000 wallets that take 160 MB, and the merged one kept 280 MB
        // through the build: the largest share of a whole load's peak
        // (heaptrack, docs/performance.md).
        let wallet_count = wallet_count
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0);
        // Room for `all` when a vector takes both halves, else for a half
        // and a sixteenth.
        let room = |both: bool, all: usize| match both {
            true => all,
            false => all / 2 + all / 16,
        };
        let read_half = |upper: bool| -> Result<(Vec<Wallet>, Vec<T>), StoreError> {
            let part = match upper {
                false => Part::Lower,
                true => Part::Upper,
            };
            let mut out = Vec::new();
            // Only hints: a count that cannot be reserved is read without it.
            let _ = out.try_reserve_exact(room(!upper && merge, total));
            let mut wallets = Vec::new();
            let _ = wallets.try_reserve_exact(room(!upper, wallet_count));
            let mut pooled = self.conn()?;
            stored_in_snapshot(&mut pooled, v, |conn| {
                validity::each_valid_row(conn, v, part, |row| {
                    let (wallet, held) = wallet_from(row)?;
                    read(&wallet.address, &held, &mut out)?;
                    wallets.push(wallet);
                    Ok(())
                })
            })?;
            // Read in no order (SQLite would sort the wide rows in a
            // temporary B-tree); sorting the converted wallets costs less.
            wallets.sort_unstable_by(|a, b| a.address.cmp(&b.address));
            Ok((wallets, out))
        };
        let (lower, upper) = std::thread::scope(|s| {
            let lower = s.spawn(|| read_half(false));
            let upper = read_half(true);
            (
                lower.join().expect("the wallet reader does not panic"),
                upper,
            )
        });
        let ((mut wallets, lower), (upper_wallets, upper)) = (lower?, upper?);
        // Both halves are in address order, and every address of the lower
        // one sorts below the upper one's (byte order on both backends).
        // (Nothing when the stored count made room: a count short of the
        // rows would otherwise double the vector here.)
        wallets.reserve_exact(upper_wallets.len());
        wallets.extend(upper_wallets);
        if !wallets.is_sorted_by(|a, b| a.address <= b.address) {
            wallets.sort_unstable_by(|a, b| a.address.cmp(&b.address));
        }
        Ok((
            VersionRest {
                markets,
                wallets,
                freshness,
            },
            [lower, upper],
        ))
    }

    /// What changed from version `from` to `meta`'s, when it can be read as
    /// changes: both versions are still stored, the later one has a stored
    /// coverage report, and at most `max_wallets` wallets changed. `None`
    /// means: load the whole version instead.
    ///
    /// The changes are the wallet rows (each with its positions) appended
    /// after `from` that are valid at `V`, and the wallets whose latest
    /// change since `from` is a removal (`validity.rs`).
    pub fn load_changes(
        &self,
        from: i64,
        meta: &SnapshotMeta,
        max_wallets: usize,
    ) -> Result<Option<VersionChanges>, StoreError> {
        let since = Since::Stored(from);
        let changes = self.read_changes(since, meta, max_wallets, |address, held, out| {
            held::for_each_text(address, held, |t| {
                out.push(held::model(t));
                Ok(())
            })
        })?;
        Ok(changes.map(|mut c| {
            c.positions
                .sort_by(|a, b| (&a.symbol, &a.address).cmp(&(&b.symbol, &b.address)));
            label_positions(&mut c.positions, &c.wallets);
            c
        }))
    }

    /// [`Store::load_changes`] for a running server: each position is
    /// handed to `render` as its stored text, as
    /// [`Store::load_for_serving`] does (no decimal parsed to be printed
    /// again; the label and tags are the wallet's, not filled in).
    pub fn load_changes_for_serving<T, D: StoredDay>(
        &self,
        from: i64,
        meta: &SnapshotMeta,
        max_wallets: usize,
        render: impl Fn(&MarketPositionText<'_>) -> T,
    ) -> Result<Option<VersionChanges<T, D>>, StoreError> {
        self.read_rendered_changes(Since::Stored(from), meta, max_wallets, render)
    }

    /// [`Store::load_changes_for_serving`] from version `from` that may
    /// have been pruned since (a server's saved version), whose wallets
    /// were `served`: the removed wallets are those of `served` that are
    /// neither valid at `meta`'s version nor rewritten, and every wallet
    /// valid then and not rewritten since `from` must be one of `served`.
    /// The caller checks the result's counts against the version's.
    pub fn load_changes_since_served<T, D: StoredDay>(
        &self,
        from: i64,
        served: &[&str],
        meta: &SnapshotMeta,
        max_wallets: usize,
        render: impl Fn(&MarketPositionText<'_>) -> T,
    ) -> Result<Option<VersionChanges<T, D>>, StoreError> {
        let since = Since::Served {
            version: from,
            wallets: served,
        };
        self.read_rendered_changes(since, meta, max_wallets, render)
    }

    fn read_rendered_changes<T, D: StoredDay>(
        &self,
        since: Since<'_>,
        meta: &SnapshotMeta,
        max_wallets: usize,
        render: impl Fn(&MarketPositionText<'_>) -> T,
    ) -> Result<Option<VersionChanges<T, D>>, StoreError> {
        // In wallet order: the snapshot orders what it takes in.
        self.read_changes(since, meta, max_wallets, |address, held, out| {
            held::for_each_text(address, held, |t| {
                out.push(render(t));
                Ok(())
            })
        })
    }

    /// The changes from `from` to `meta`'s version (see
    /// [`Store::load_changes`]), each changed wallet's positions read by
    /// `read` from its address and `positions` column.
    fn read_changes<T, D: StoredDay>(
        &self,
        since: Since<'_>,
        meta: &SnapshotMeta,
        max_wallets: usize,
        mut read: impl FnMut(&str, &str, &mut Vec<T>) -> Result<(), StoreError>,
    ) -> Result<Option<VersionChanges<T, D>>, StoreError> {
        let v = meta.version;
        // One snapshot of the database, in which both versions are stored:
        // a publish that commits meanwhile neither adds rows to it nor
        // prunes them from it.
        let kept: Vec<i64> = [Some(v), since.stored()].into_iter().flatten().collect();
        let mut pooled = self.conn()?;
        let rows = in_one_snapshot(&mut pooled, |conn| {
            if !all_stored(conn, &kept)? {
                return Ok(None);
            }
            changed_rows(conn, since, v, max_wallets, &mut read)
        })?;
        drop(pooled);
        let Some(ChangedRows {
            coverage,
            markets,
            wallets,
            positions,
            removed,
        }) = rows
        else {
            return Ok(None);
        };
        let coverage: NetworkCoverage = serde_json::from_str(&coverage)
            .map_err(|e| StoreError::Corrupt(format!("coverage of version {v}: {e}")))?;
        let DataVersion {
            observed_at,
            markets,
            wallets,
            positions,
            current_days,
            cohorts,
            ..
        } = assemble_snapshot(meta.clone(), markets, wallets, positions)?.version;
        Ok(Some(VersionChanges {
            observed_at,
            markets,
            current_days,
            cohorts,
            coverage,
            wallets,
            positions,
            removed,
        }))
    }
}

/// What [`Store::read_changes`] reads from the database.
struct ChangedRows<T> {
    /// The version's coverage report (JSON).
    coverage: String,
    markets: Vec<MarketRow>,
    /// The wallets written since, in address order.
    wallets: Vec<Wallet>,
    /// Their positions, as `read` made them.
    positions: Vec<T>,
    removed: Vec<String>,
}

/// The rows of the changes from `since` to version `v`, in the caller's
/// snapshot; `None` when they cannot be read as changes (no coverage
/// report, more than `max_wallets` changed, or removals that cannot be
/// told).
fn changed_rows<T>(
    conn: &mut DbConnection,
    since: Since<'_>,
    v: i64,
    max_wallets: usize,
    read: &mut impl FnMut(&str, &str, &mut Vec<T>) -> Result<(), StoreError>,
) -> Result<Option<ChangedRows<T>>, StoreError> {
    let from = since.version();
    let coverage: Option<Option<String>> = version_freshness::table
        .filter(version_freshness::version.eq(v))
        .select(version_freshness::coverage)
        .first(conn)
        .optional()?;
    let Some(Some(coverage)) = coverage else {
        return Ok(None);
    };
    let changed: i64 = wallets::table
        .filter(wallets::version.gt(from))
        .filter(wallets::version.le(v))
        .count()
        .get_result(conn)?;
    if from >= v || changed as usize > max_wallets {
        return Ok(None);
    }
    let latest = Latest::between(conn, from, v, Part::All)?;
    // Converted as they are read (no vector of rows to convert after),
    // and without ORDER BY: SQLite would sort the wide rows (their
    // positions with them) in a temporary B-tree. A row a later one
    // superseded since is skipped.
    let mut positions = Vec::new();
    let mut wallets: Vec<Wallet> = Vec::new();
    for row in wallets::table
        .filter(wallets::version.gt(from))
        .filter(wallets::version.le(v))
        .select(WalletRow::as_select())
        .load_iter::<WalletRow, diesel::connection::DefaultLoadingMode>(conn)?
    {
        let row = row?;
        if latest.is_latest_row(row.version, &row.address) {
            let (wallet, held) = wallet_from(row)?;
            read(&wallet.address, &held, &mut positions)?;
            wallets.push(wallet);
        }
    }
    wallets.sort_unstable_by(|a, b| a.address.cmp(&b.address));
    // In address order, as the wallets are.
    let rewritten: Vec<&str> = wallets.iter().map(|w| w.address.as_str()).collect();
    let Some(removed) = since.removed(conn, v, &latest, &rewritten)? else {
        return Ok(None);
    };
    let markets: Vec<MarketRow> = markets::table
        .filter(markets::version.eq(v))
        .order(markets::symbol)
        .load(conn)?;
    Ok(Some(ChangedRows {
        coverage,
        markets,
        wallets,
        positions,
        removed,
    }))
}

/// Runs `read` in one read-only transaction: every statement of it sees
/// the database as of its first one (SQLite's deferred transaction, in WAL
/// mode; PostgreSQL's `REPEATABLE READ`), whatever commits meanwhile. A
/// publish prunes a version's rows in the transaction that deletes its
/// version row, so a version stored in the snapshot is whole in it.
pub(crate) fn in_one_snapshot<T>(
    conn: &mut DbConnection,
    read: impl FnOnce(&mut DbConnection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    conn.transaction(|conn| {
        if let DbConnection::Postgresql(c) = conn {
            diesel::sql_query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .execute(c)?;
        }
        read(conn)
    })
}

/// Whether every one of `versions` is stored (as the caller's transaction
/// sees it).
fn all_stored(conn: &mut DbConnection, versions: &[i64]) -> Result<bool, StoreError> {
    let present: i64 = snapshots::table
        .filter(snapshots::version.eq_any(versions))
        .count()
        .get_result(conn)?;
    Ok(present as usize == versions.len())
}

/// [`in_one_snapshot`] in which version `v` is stored, else
/// [`StoreError::Pruned`].
fn stored_in_snapshot<T>(
    conn: &mut DbConnection,
    v: i64,
    read: impl FnOnce(&mut DbConnection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    in_one_snapshot(conn, |conn| {
        if !all_stored(conn, &[v])? {
            return Err(StoreError::Pruned(v));
        }
        read(conn)
    })
}

/// The version a reader of changes has, and how the wallets removed since
/// are found.
#[derive(Clone, Copy)]
enum Since<'a> {
    /// A version still stored: the removed wallets are those whose latest
    /// change since is a removal.
    Stored(i64),
    /// A version that may have been pruned, and the wallets it served.
    Served {
        version: i64,
        wallets: &'a [&'a str],
    },
}

impl Since<'_> {
    fn version(self) -> i64 {
        match self {
            Since::Stored(v) | Since::Served { version: v, .. } => v,
        }
    }

    /// The version that must still be stored when the reads end.
    fn stored(self) -> Option<i64> {
        match self {
            Since::Stored(v) => Some(v),
            Since::Served { .. } => None,
        }
    }

    /// The wallets removed between this version and `v`, given the latest
    /// change of each wallet since (`latest`) and the ones `rewritten`
    /// since (in address order); `None` when the changes are not whole.
    fn removed(
        self,
        conn: &mut DbConnection,
        v: i64,
        latest: &Latest,
        rewritten: &[&str],
    ) -> Result<Option<Vec<String>>, StoreError> {
        match self {
            Since::Stored(_) => {
                let mut removed: Vec<String> = latest.removed().map(str::to_owned).collect();
                removed.sort_unstable();
                Ok(Some(removed))
            }
            Since::Served {
                wallets: served, ..
            } => {
                // Sets of a whole version's wallets (300,000 at an own
                // node's scale), compared as sorted lists, merged: hashing
                // each address into sets took most of this read
                // (docs/performance.md). The version may be older than
                // the last compaction, which deleted the removals before
                // it: the removed wallets are told from the lists.
                let valid = validity::valid_addresses(conn, v)?;
                let valid = in_order(valid.iter().map(String::as_str).collect());
                // The wallets valid at `v` and not written since `from`.
                let kept = minus(&valid, rewritten);
                let served = in_order(served.to_vec());
                Ok(minus(&kept, &served).is_empty().then(|| {
                    minus(&minus(&served, &kept), rewritten)
                        .into_iter()
                        .map(str::to_owned)
                        .collect()
                }))
            }
        }
    }
}

/// `items` sorted (they most often come so: a check, not a sort).
fn in_order(mut items: Vec<&str>) -> Vec<&str> {
    if !items.is_sorted() {
        items.sort_unstable();
    }
    items
}

/// The items of `a` that are not in `b`, both sorted, in `a`'s order.
fn minus<'a>(a: &[&'a str], b: &[&str]) -> Vec<&'a str> {
    let mut rest = b.iter().peekable();
    a.iter()
        .copied()
        .filter(|x| {
            while rest.next_if(|y| **y < *x).is_some() {}
            rest.peek().is_none_or(|y| **y != *x)
        })
        .collect()
}

/// A whole version's rows besides its positions.
struct VersionRest {
    markets: Vec<MarketRow>,
    wallets: Vec<Wallet>,
    freshness: Option<WalletFreshness>,
}

impl VersionRest {
    fn assemble<P>(
        self,
        meta: &SnapshotMeta,
        positions: Vec<P>,
    ) -> Result<LoadedSnapshot<P>, StoreError> {
        let mut loaded = assemble_snapshot(meta.clone(), self.markets, self.wallets, positions)?;
        loaded.version.freshness = self.freshness;
        Ok(loaded)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::{in_order, minus};

    proptest! {
        /// `minus` of two sorted lists is the difference of their sets, in
        /// order, whatever they share (none, some, all) and however long.
        #[test]
        fn minus_is_the_difference_of_sorted_sets(
            a in proptest::collection::btree_set("[a-d]{0,3}", 0..40),
            b in proptest::collection::btree_set("[a-d]{0,3}", 0..40),
        ) {
            let (av, bv): (Vec<&str>, Vec<&str>) = (
                a.iter().map(String::as_str).collect(),
                b.iter().map(String::as_str).collect(),
            );
            let expected: Vec<&str> = a.difference(&b).map(String::as_str).collect();
            prop_assert_eq!(minus(&av, &bv), expected);
        }

        /// `in_order` sorts what is not sorted and keeps every item.
        #[test]
        fn in_order_sorts(items in proptest::collection::vec("[a-d]{0,3}", 0..40)) {
            let got = in_order(items.iter().map(String::as_str).collect());
            let mut sorted: Vec<&str> = items.iter().map(String::as_str).collect();
            sorted.sort();
            prop_assert_eq!(got, sorted);
        }
    }

    #[test]
    fn minus_keeps_what_the_other_lacks() {
        let all: BTreeSet<&str> = ["0xaa", "0xbb", "0xcc"].into();
        let all: Vec<&str> = all.into_iter().collect();
        assert_eq!(minus(&all, &["0xbb"]), ["0xaa", "0xcc"]);
        assert_eq!(minus(&all, &[]), all);
        assert!(minus(&[], &all).is_empty());
    }
}
