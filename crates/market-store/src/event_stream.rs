//! The event stream's order: the sequence number every position event gets
//! when it is written (the reads a stream replays from are in `history.rs`,
//! beside the list's).
//!
//! Numbers are handed out inside the version-writing transaction, which
//! holds the writers' lock ([`crate::write`]), so they follow commit order:
//! a reader that has seen number `n` committed has seen every number below
//! it. They are never reused, even when events are deleted; the highest
//! number deleted (by retention or a re-seed) is kept, so that a stream
//! resuming below it can be told that it missed events.

use diesel::prelude::*;

use crate::schema::event_sequence;
use crate::{DbConnection, Store, StoreError};

/// Where the stored event sequence stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventBounds {
    /// The last number given (0: none yet).
    pub last: i64,
    /// The highest number deleted: a stream that resumes after a smaller
    /// number would miss events.
    pub pruned_through: i64,
}

/// A stored position event in stream order.
#[derive(Clone, Debug, PartialEq, Eq, Queryable)]
pub struct SequencedEvent {
    /// Its sequence number (the stream's event id).
    pub seq: i64,
    /// The rendered `PositionEvent`.
    pub json: String,
}

/// Takes `n` new numbers; returns the first (inside the caller's
/// version-writing transaction).
pub(crate) fn take_numbers(conn: &mut DbConnection, n: usize) -> Result<i64, StoreError> {
    let last: i64 = event_sequence::table
        .select(event_sequence::last_seq)
        .find(1)
        .first(conn)?;
    diesel::update(event_sequence::table.find(1))
        .set(event_sequence::last_seq.eq(last + n as i64))
        .execute(conn)?;
    Ok(last + 1)
}

/// Records that every number up to `seq` may have been deleted.
pub(crate) fn forget_through(conn: &mut DbConnection, seq: i64) -> Result<(), StoreError> {
    diesel::update(
        event_sequence::table
            .find(1)
            .filter(event_sequence::pruned_through.lt(seq)),
    )
    .set(event_sequence::pruned_through.eq(seq))
    .execute(conn)?;
    Ok(())
}

/// The highest number given so far (inside the caller's transaction).
pub(crate) fn last_number(conn: &mut DbConnection) -> Result<i64, StoreError> {
    Ok(event_sequence::table
        .select(event_sequence::last_seq)
        .find(1)
        .first(conn)?)
}

impl Store {
    /// Where the stored event sequence stands.
    pub fn event_bounds(&self) -> Result<EventBounds, StoreError> {
        let mut conn = self.conn()?;
        let (last, pruned_through) = event_sequence::table
            .select((event_sequence::last_seq, event_sequence::pruned_through))
            .find(1)
            .first::<(i64, i64)>(&mut *conn)?;
        Ok(EventBounds {
            last,
            pruned_through,
        })
    }
}
