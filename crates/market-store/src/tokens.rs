//! API tokens: only a hash of each token is stored.

use diesel::prelude::*;
use time::{Date, OffsetDateTime};

use crate::rows::{from_db_time, to_db_time, NewToken};
use crate::schema::{api_tokens, token_usage};
use crate::{DbConnection, Store, StoreError};

/// A stored token (never the secret itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRecord {
    /// Numeric id (for `token revoke`).
    pub id: i64,
    /// Operator-given name.
    pub name: String,
    /// Token prefix plus its last 4 characters, e.g. `mds_…a1b2`.
    pub hint: String,
    /// Creation time.
    pub created_at: OffsetDateTime,
    /// Expiry, if any.
    pub expires_at: Option<OffsetDateTime>,
    /// Last successful use (batched, so it lags by up to the flush interval).
    pub last_used_at: Option<OffsetDateTime>,
    /// Revocation time, if revoked.
    pub revoked_at: Option<OffsetDateTime>,
    /// Its own request limit per minute; `None`: the server's default.
    pub rate_limit_per_minute: Option<u32>,
}

impl TokenRecord {
    /// Whether the token authenticates at `now`.
    pub fn is_active(&self, now: OffsetDateTime) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|e| e > now)
    }
}

/// Request count of one token, day, endpoint and status class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageRow {
    /// Token id.
    pub token_id: i64,
    /// UTC day.
    pub day: Date,
    /// Endpoint (route pattern, e.g. `GET /v1/networks/{network}/markets`).
    pub endpoint: String,
    /// `2xx`, `3xx`, `4xx` or `5xx`.
    pub status_class: String,
    /// Requests.
    pub count: i64,
}

type TokenTuple = (
    i64,
    String,
    String,
    time::PrimitiveDateTime,
    Option<time::PrimitiveDateTime>,
    Option<time::PrimitiveDateTime>,
    Option<time::PrimitiveDateTime>,
    Option<i32>,
);

fn record(t: TokenTuple) -> TokenRecord {
    TokenRecord {
        id: t.0,
        name: t.1,
        hint: t.2,
        created_at: from_db_time(t.3),
        expires_at: t.4.map(from_db_time),
        last_used_at: t.5.map(from_db_time),
        revoked_at: t.6.map(from_db_time),
        rate_limit_per_minute: t.7.and_then(|n| u32::try_from(n).ok()),
    }
}

const COLUMNS: (
    api_tokens::id,
    api_tokens::name,
    api_tokens::hint,
    api_tokens::created_at,
    api_tokens::expires_at,
    api_tokens::last_used_at,
    api_tokens::revoked_at,
    api_tokens::rate_limit_per_minute,
) = (
    api_tokens::id,
    api_tokens::name,
    api_tokens::hint,
    api_tokens::created_at,
    api_tokens::expires_at,
    api_tokens::last_used_at,
    api_tokens::revoked_at,
    api_tokens::rate_limit_per_minute,
);

/// The column's value of a limit: an `INTEGER` holds at most `i32::MAX`
/// (about 2 billion a minute, far past any real limit).
fn limit_column(limit: Option<u32>) -> Option<i32> {
    limit.map(|n| i32::try_from(n).unwrap_or(i32::MAX))
}

impl Store {
    /// Stores a new token's hash and returns its record.
    pub fn create_token(
        &self,
        name: &str,
        token_hash: &str,
        hint: &str,
        expires_at: Option<OffsetDateTime>,
    ) -> Result<TokenRecord, StoreError> {
        self.create_token_limited(name, token_hash, hint, expires_at, None)
    }

    /// Stores a new token's hash with its own request limit per minute
    /// (`None`: the server's default) and returns its record.
    pub fn create_token_limited(
        &self,
        name: &str,
        token_hash: &str,
        hint: &str,
        expires_at: Option<OffsetDateTime>,
        rate_limit_per_minute: Option<u32>,
    ) -> Result<TokenRecord, StoreError> {
        let rate_limit_per_minute = limit_column(rate_limit_per_minute);
        let mut pooled = self.conn()?;
        let conn: &mut DbConnection = &mut pooled;
        conn.transaction(|conn| {
            diesel::insert_into(api_tokens::table)
                .values(NewToken {
                    name,
                    token_hash,
                    hint,
                    created_at: to_db_time(market_model::timestamp::now_seconds()),
                    expires_at: expires_at.map(to_db_time),
                    rate_limit_per_minute,
                })
                .execute(conn)?;
            // RETURNING is not available through MultiConnection: read back by the unique hash.
            let t: TokenTuple = api_tokens::table
                .filter(api_tokens::token_hash.eq(token_hash))
                .select(COLUMNS)
                .first(conn)?;
            Ok(record(t))
        })
    }

    /// The token with this hash, if any (revoked and expired ones included).
    pub fn find_token(&self, token_hash: &str) -> Result<Option<TokenRecord>, StoreError> {
        let mut conn = self.conn()?;
        // The hash is unique; no `.first()` (see `Store::wallet_history`).
        let t: Option<TokenTuple> = api_tokens::table
            .filter(api_tokens::token_hash.eq(token_hash))
            .select(COLUMNS)
            .load(&mut *conn)?
            .pop();
        Ok(t.map(record))
    }

    /// Every token, by id.
    pub fn list_tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let mut conn = self.conn()?;
        let all: Vec<TokenTuple> = api_tokens::table
            .order(api_tokens::id)
            .select(COLUMNS)
            .load(&mut *conn)?;
        Ok(all.into_iter().map(record).collect())
    }

    /// Sets a token's own request limit per minute (`None`: back to the
    /// server's default); returns false when no such token exists.
    pub fn set_token_rate_limit(
        &self,
        id: i64,
        rate_limit_per_minute: Option<u32>,
    ) -> Result<bool, StoreError> {
        let value = limit_column(rate_limit_per_minute);
        let mut conn = self.conn()?;
        let updated = diesel::update(api_tokens::table.filter(api_tokens::id.eq(id)))
            .set(api_tokens::rate_limit_per_minute.eq(value))
            .execute(&mut *conn)?;
        Ok(updated > 0)
    }

    /// Revokes a token; returns false when no such token exists. Revoking twice keeps the first time.
    pub fn revoke_token(&self, id: i64) -> Result<bool, StoreError> {
        let mut pooled = self.conn()?;
        let conn: &mut DbConnection = &mut pooled;
        conn.transaction(|conn| {
            let exists: i64 = api_tokens::table
                .filter(api_tokens::id.eq(id))
                .count()
                .get_result(conn)?;
            if exists == 0 {
                return Ok(false);
            }
            diesel::update(
                api_tokens::table
                    .filter(api_tokens::id.eq(id))
                    .filter(api_tokens::revoked_at.is_null()),
            )
            .set(api_tokens::revoked_at.eq(to_db_time(market_model::timestamp::now_seconds())))
            .execute(conn)?;
            Ok(true)
        })
    }

    /// Adds batched usage counts and last-used times in one transaction.
    pub fn record_usage(
        &self,
        rows: &[UsageRow],
        last_used: &[(i64, OffsetDateTime)],
    ) -> Result<(), StoreError> {
        let mut pooled = self.conn()?;
        let conn: &mut DbConnection = &mut pooled;
        conn.transaction(|conn| {
            for r in rows {
                let key = token_usage::table
                    .filter(token_usage::token_id.eq(r.token_id))
                    .filter(token_usage::day.eq(r.day))
                    .filter(token_usage::endpoint.eq(&r.endpoint))
                    .filter(token_usage::status_class.eq(&r.status_class));
                let updated = diesel::update(key)
                    .set(token_usage::count.eq(token_usage::count + r.count))
                    .execute(conn)?;
                if updated == 0 {
                    diesel::insert_into(token_usage::table)
                        .values((
                            token_usage::token_id.eq(r.token_id),
                            token_usage::day.eq(r.day),
                            token_usage::endpoint.eq(&r.endpoint),
                            token_usage::status_class.eq(&r.status_class),
                            token_usage::count.eq(r.count),
                        ))
                        .execute(conn)?;
                }
            }
            for (id, at) in last_used {
                diesel::update(api_tokens::table.filter(api_tokens::id.eq(id)))
                    .set(api_tokens::last_used_at.eq(to_db_time(*at)))
                    .execute(conn)?;
            }
            Ok(())
        })
    }

    /// Usage rows, optionally of one token, by token, day, endpoint, status class.
    pub fn usage(&self, token_id: Option<i64>) -> Result<Vec<UsageRow>, StoreError> {
        let mut conn = self.conn()?;
        let mut q = token_usage::table
            .order((
                token_usage::token_id,
                token_usage::day,
                token_usage::endpoint,
                token_usage::status_class,
            ))
            .into_boxed();
        if let Some(id) = token_id {
            q = q.filter(token_usage::token_id.eq(id));
        }
        let rows: Vec<(i64, Date, String, String, i64)> = q.load(&mut *conn)?;
        Ok(rows
            .into_iter()
            .map(|(token_id, day, endpoint, status_class, count)| UsageRow {
                token_id,
                day,
                endpoint,
                status_class,
                count,
            })
            .collect())
    }
}
