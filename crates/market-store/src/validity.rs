//! Which wallet rows a data version serves.
//!
//! Wallet rows are appended and never changed: a version writes a row for
//! each wallet it changes (the wallet with all of its positions) and a
//! *removal* (`wallet_removals`) for each wallet it stops serving. A row
//! is valid in version `V` when it is the latest row or removal of its
//! wallet at or before `V`: a wallet is served by `V` as its latest row,
//! unless a later removal (at or before `V`) ended it.
//!
//! A publish used to close the previous row of every wallet it changed in
//! place and delete it a publish later: two writes at random pages of a
//! table of 300,000 wide rows per changed wallet, plus an index of the open
//! rows by address. Now it appends, and what no kept version can see any
//! more is deleted in bulk by a *compaction* ([`compact`]) every so many
//! publishes. The compaction keeps the rows up to its version one a
//! wallet, none superseded or removed by anything up to it
//! (`wallet_rows_compacted.through`): those are read without looking for
//! a later row among themselves, and only the rows after it (the
//! *overlay*) are resolved by address.

use std::collections::HashMap;

use diesel::prelude::*;

use crate::rows::WalletRow;
use crate::schema::{wallet_removals, wallet_rows_compacted, wallets};
use crate::{DbConnection, StoreError, ADDRESS_CHUNK};

/// The version up to which the wallet rows are compacted (0: none).
pub(crate) fn compacted_through(conn: &mut DbConnection) -> Result<i64, StoreError> {
    Ok(wallet_rows_compacted::table
        .select(wallet_rows_compacted::through)
        .find(1)
        .first(conn)?)
}

/// Records that the rows are compacted up to `through` (a whole version
/// written over empty tables: every row is its wallet's one).
pub(crate) fn reset(conn: &mut DbConnection, through: i64) -> Result<(), StoreError> {
    set_compacted_through(conn, through)
}

fn set_compacted_through(conn: &mut DbConnection, through: i64) -> Result<(), StoreError> {
    diesel::update(wallet_rows_compacted::table.find(1))
        .set(wallet_rows_compacted::through.eq(through))
        .execute(conn)?;
    Ok(())
}

/// Half of the addresses, or all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// Every address.
    All,
    /// Addresses below [`ADDRESS_SPLIT`].
    Lower,
    /// Addresses at or above [`ADDRESS_SPLIT`].
    Upper,
}

/// Where a whole version's wallet rows are split between its two reads:
/// addresses are hexadecimal, so about half sort below `0x8`. Only the
/// balance of the two reads depends on it, never what they return.
const ADDRESS_SPLIT: &str = "0x8";

/// Above every address: they are `0x` and hexadecimal digits (ASCII).
const ABOVE_ALL: &str = "\u{7f}";

impl Part {
    /// Its addresses: from the first, below the second.
    fn bounds(self) -> (&'static str, &'static str) {
        match self {
            Part::All => ("", ABOVE_ALL),
            Part::Lower => ("", ADDRESS_SPLIT),
            Part::Upper => (ADDRESS_SPLIT, ABOVE_ALL),
        }
    }
}

/// The latest row or removal of each wallet (of a [`Part`] of the
/// addresses) among those of versions in `(after, upto]`: its version, and
/// whether it is a row.
#[derive(Debug, Default)]
pub(crate) struct Latest(HashMap<String, (i64, bool)>);

impl Latest {
    /// Reads it (keys only: the primary keys' indexes hold them).
    pub(crate) fn between(
        conn: &mut DbConnection,
        after: i64,
        upto: i64,
        part: Part,
    ) -> Result<Latest, StoreError> {
        let (from, below) = part.bounds();
        let rows: Vec<(i64, String)> = wallets::table
            .filter(wallets::version.gt(after))
            .filter(wallets::version.le(upto))
            .filter(wallets::address.ge(from))
            .filter(wallets::address.lt(below))
            .select((wallets::version, wallets::address))
            .load(conn)?;
        let removals: Vec<(i64, String)> = wallet_removals::table
            .filter(wallet_removals::version.gt(after))
            .filter(wallet_removals::version.le(upto))
            .filter(wallet_removals::address.ge(from))
            .filter(wallet_removals::address.lt(below))
            .select((wallet_removals::version, wallet_removals::address))
            .load(conn)?;
        let mut latest: HashMap<String, (i64, bool)> = HashMap::with_capacity(rows.len());
        for (version, address, row) in rows
            .into_iter()
            .map(|(v, a)| (v, a, true))
            .chain(removals.into_iter().map(|(v, a)| (v, a, false)))
        {
            match latest.get_mut(&address) {
                // A version writes a wallet or removes it, not both.
                Some(kept) if kept.0 >= version => {}
                Some(kept) => *kept = (version, row),
                None => {
                    latest.insert(address, (version, row));
                }
            }
        }
        Ok(Latest(latest))
    }

    /// Whether the row of `address` written by `version` is the latest.
    pub(crate) fn is_latest_row(&self, version: i64, address: &str) -> bool {
        self.0.get(address) == Some(&(version, true))
    }

    /// The wallets whose latest is a removal.
    pub(crate) fn removed(&self) -> impl Iterator<Item = &str> {
        self.0
            .iter()
            .filter(|(_, (_, row))| !row)
            .map(|(a, _)| a.as_str())
    }

    /// The wallets whose latest is a row.
    pub(crate) fn written(&self) -> impl Iterator<Item = &str> {
        self.0
            .iter()
            .filter(|(_, (_, row))| *row)
            .map(|(a, _)| a.as_str())
    }

    fn holds(&self, address: &str) -> bool {
        self.0.contains_key(address)
    }
}

/// Calls `each` with every wallet row valid in version `v` of `part`'s
/// addresses, in no particular order (in the caller's snapshot, in which
/// `v` is stored, so it is at or after the compaction's version).
pub(crate) fn each_valid_row(
    conn: &mut DbConnection,
    v: i64,
    part: Part,
    mut each: impl FnMut(WalletRow) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let through = compacted_through(conn)?.min(v);
    let overlay = Latest::between(conn, through, v, part)?;
    let (from, below) = part.bounds();
    // The overlay's rows: the latest of each wallet, unless removed.
    let rows = wallets::table
        .filter(wallets::version.gt(through))
        .filter(wallets::version.le(v))
        .filter(wallets::address.ge(from))
        .filter(wallets::address.lt(below))
        .select(WalletRow::as_select())
        .load_iter::<WalletRow, diesel::connection::DefaultLoadingMode>(conn)?;
    for row in rows {
        let row = row?;
        if overlay.is_latest_row(row.version, &row.address) {
            each(row)?;
        }
    }
    // The compacted rows: one a wallet, valid unless the overlay has a row
    // or a removal of it. No ORDER BY: SQLite would sort the wide rows in
    // a temporary B-tree.
    let later = diesel::alias!(wallets as later);
    let base = wallets::table
        .filter(wallets::version.le(through))
        .filter(wallets::address.ge(from))
        .filter(wallets::address.lt(below))
        .filter(
            wallets::address.ne_all(
                later
                    .filter(later.field(wallets::version).gt(through))
                    .filter(later.field(wallets::version).le(v))
                    .select(later.field(wallets::address)),
            ),
        )
        .filter(
            wallets::address.ne_all(
                wallet_removals::table
                    .filter(wallet_removals::version.gt(through))
                    .filter(wallet_removals::version.le(v))
                    .select(wallet_removals::address),
            ),
        )
        .select(WalletRow::as_select());
    for row in base.load_iter::<WalletRow, diesel::connection::DefaultLoadingMode>(conn)? {
        each(row?)?;
    }
    Ok(())
}

/// The addresses of the wallets valid in version `v`, sorted (in the
/// caller's snapshot, in which `v` is stored). Keys only: the primary
/// keys' indexes hold them, no wide row is visited.
pub(crate) fn valid_addresses(conn: &mut DbConnection, v: i64) -> Result<Vec<String>, StoreError> {
    let through = compacted_through(conn)?.min(v);
    let overlay = Latest::between(conn, through, v, Part::All)?;
    let compacted: Vec<String> = wallets::table
        .filter(wallets::version.le(through))
        .select(wallets::address)
        .load(conn)?;
    let mut valid: Vec<String> = compacted
        .into_iter()
        .filter(|a| !overlay.holds(a))
        .chain(overlay.written().map(str::to_owned))
        .collect();
    valid.sort_unstable();
    Ok(valid)
}

/// Deletes what no version from `keep_from` on can see: every row
/// superseded or removed by a row or removal at or before `keep_from`, and
/// those removals; the rows up to `keep_from` are then one a wallet.
/// Returns the rows deleted (nothing when the rows are compacted that far
/// already).
pub(crate) fn compact(conn: &mut DbConnection, keep_from: i64) -> Result<usize, StoreError> {
    let through = compacted_through(conn)?;
    if keep_from <= through {
        return Ok(0);
    }
    let overlay = Latest::between(conn, through, keep_from, Part::All)?;
    // The compacted rows of wallets the overlay wrote or removed since, and
    // the overlay's rows that a later one or a removal superseded.
    // (Keys streamed, only those to delete kept: the table's are hundreds
    // of thousands.)
    let mut gone: Vec<(i64, String)> = Vec::new();
    for key in wallets::table
        .filter(wallets::version.le(keep_from))
        .select((wallets::version, wallets::address))
        .load_iter::<(i64, String), diesel::connection::DefaultLoadingMode>(conn)?
    {
        let (version, address) = key?;
        let superseded = match version <= through {
            true => overlay.holds(&address),
            false => !overlay.is_latest_row(version, &address),
        };
        if superseded {
            gone.push((version, address));
        }
    }
    gone.sort_unstable();
    let mut deleted = 0;
    for same in gone.chunk_by(|a, b| a.0 == b.0) {
        let version = same[0].0;
        for chunk in same.chunks(ADDRESS_CHUNK) {
            let addresses: Vec<&str> = chunk.iter().map(|(_, a)| a.as_str()).collect();
            deleted += diesel::delete(
                wallets::table
                    .filter(wallets::version.eq(version))
                    .filter(wallets::address.eq_any(addresses)),
            )
            .execute(conn)?;
        }
    }
    diesel::delete(wallet_removals::table.filter(wallet_removals::version.le(keep_from)))
        .execute(conn)?;
    set_compacted_through(conn, keep_from)?;
    Ok(deleted)
}

/// The rows (version ≤ the compaction's) and the overlay's (after it) of
/// the newest version: whether a compaction is due, by
/// [`compaction_due`].
pub(crate) fn row_counts(conn: &mut DbConnection) -> Result<(i64, i64), StoreError> {
    let through = compacted_through(conn)?;
    let compacted: i64 = wallets::table
        .filter(wallets::version.le(through))
        .count()
        .get_result(conn)?;
    let overlay: i64 = wallets::table
        .filter(wallets::version.gt(through))
        .count()
        .get_result(conn)?;
    Ok((compacted, overlay))
}

/// Whether the overlay is worth a compaction: once it holds a quarter as
/// many rows as the compacted ones (`min_rows` at least). A compaction
/// writes about every page of the table once whatever it deletes (the
/// rows it deletes are spread over the table), while a whole read visits
/// the overlay's superseded rows too: a quarter bounds the read's extra
/// rows, and at an own node's 300,000 wallets and about 5,000 changed a
/// publish it compacts once in about 15 publishes.
pub(crate) fn compaction_due((compacted, overlay): (i64, i64), min_rows: i64) -> bool {
    overlay >= (compacted / 4).max(min_rows)
}
