//! Typed cursors: each list names the key its pages continue from, and a
//! cursor is that key, sealed with the fingerprint of the query that made it
//! (`pagination`), so it cannot continue another endpoint, order or filter.

use market_model::Decimal;
use market_snapshot::{PositionKey, WalletKey};
use pagination::CursorError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use time::Date;

use crate::QueryError;

/// A keyset position and its spelling inside a cursor.
pub trait Keyset: Sized {
    /// What the cursor holds.
    type Wire: Serialize + DeserializeOwned;
    /// The key as held in a cursor.
    fn to_wire(&self) -> Self::Wire;
    /// The key a cursor holds; `None` when it does not decode into one.
    fn from_wire(wire: Self::Wire) -> Option<Self>;
}

/// The cursors of one query: keys in, cursors out, both bound to the
/// query's fingerprint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cursors {
    fingerprint: String,
}

impl Cursors {
    /// The cursors of the query identified by `parts`: every parameter that
    /// changes the order or the set of items (not `limit`, which may change
    /// between pages).
    pub fn new(parts: &[&str]) -> Self {
        Cursors {
            fingerprint: pagination::fingerprint(parts),
        }
    }

    /// The key `cursor` continues from (`None` without a cursor). A cursor
    /// that does not decode, or belongs to another query, is an error on
    /// the parameter `cursor`.
    pub fn decode<K: Keyset>(&self, cursor: Option<&str>) -> Result<Option<K>, QueryError> {
        let Some(cursor) = cursor else {
            return Ok(None);
        };
        let wire = pagination::decode(&self.fingerprint, cursor).map_err(cursor_error)?;
        K::from_wire(wire)
            .map(Some)
            .ok_or_else(|| cursor_error(CursorError::Malformed))
    }

    /// The cursor that continues after `key`.
    pub fn encode<K: Keyset>(&self, key: &K) -> String {
        pagination::encode(&self.fingerprint, &key.to_wire())
    }

    /// The cursor that continues after a key already in its cursor spelling
    /// (a page's last item gives its sort value as rendered text).
    pub fn encode_wire<K: Keyset>(&self, wire: &K::Wire) -> String {
        pagination::encode(&self.fingerprint, wire)
    }

    /// The query's fingerprint.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

/// What every keyset list does with its request: the cursor decoded into
/// the key the page continues after (bound to the query's fingerprint), the
/// limit, the request's identity, and the next page's cursor.
#[derive(Clone, Debug)]
pub struct Paging<K> {
    cursors: Cursors,
    /// The key the page continues after (`None` for the first page).
    pub after: Option<K>,
    /// The page size.
    pub limit: u32,
    /// Identifies the request (query, cursor and limit): the `ETag`'s part
    /// besides the data version.
    pub identity: u64,
}

impl<K: Keyset> Paging<K> {
    /// The request of the query identified by `parts` (see [`Cursors::new`])
    /// with its `cursor` and `limit` parameters.
    pub fn new(parts: &[&str], cursor: Option<&str>, limit: u32) -> Result<Self, QueryError> {
        let cursors = Cursors::new(parts);
        let after = cursors.decode(cursor)?;
        Ok(Paging {
            identity: crate::identity((cursors.fingerprint(), cursor, &limit)),
            cursors,
            after,
            limit,
        })
    }

    /// The cursor of the next page: after `last` (in its cursor spelling)
    /// when there are more items, else none.
    pub fn next_cursor(&self, has_more: bool, last: Option<K::Wire>) -> Option<String> {
        match (has_more, last) {
            (true, Some(last)) => Some(self.cursors.encode_wire::<K>(&last)),
            _ => None,
        }
    }

    /// The cursor that continues after `key`.
    pub fn cursor_after(&self, key: &K) -> String {
        self.cursors.encode(key)
    }
}

fn cursor_error(e: CursorError) -> QueryError {
    QueryError::param("cursor", e.to_string())
}

fn decimal(text: &str) -> Option<bigdecimal::BigDecimal> {
    text.parse::<Decimal>().ok().map(|d| d.0)
}

/// Whale-positions: the last item's `positionValue` and address.
impl Keyset for PositionKey {
    type Wire = (String, String);
    fn to_wire(&self) -> Self::Wire {
        (
            Decimal(self.value.clone()).to_string(),
            self.address.clone(),
        )
    }
    fn from_wire((value, address): Self::Wire) -> Option<Self> {
        Some(PositionKey {
            value: decimal(&value)?,
            address,
        })
    }
}

/// Wallets: the last item's sort value (null for wallets without
/// analytics) and address.
impl Keyset for WalletKey {
    type Wire = (Option<String>, String);
    fn to_wire(&self) -> Self::Wire {
        (
            self.value.clone().map(|v| Decimal(v).to_string()),
            self.address.clone(),
        )
    }
    fn from_wire((value, address): Self::Wire) -> Option<Self> {
        let value = match value {
            Some(v) => Some(decimal(&v)?),
            None => None,
        };
        Some(WalletKey { value, address })
    }
}

/// Liquidity-levels: the last item's date and network symbol.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LiquidityKey {
    /// Date of the last item served.
    pub date: Date,
    /// Network symbol of the last item served.
    pub symbol: String,
}

impl Keyset for LiquidityKey {
    type Wire = (String, String);
    fn to_wire(&self) -> Self::Wire {
        (self.date.to_string(), self.symbol.clone())
    }
    fn from_wire((date, symbol): Self::Wire) -> Option<Self> {
        Some(LiquidityKey {
            date: market_model::timestamp_date::parse(&date).ok()?,
            symbol,
        })
    }
}

/// History series: the start (epoch ms) of the last bucket served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BucketKey(pub i64);

impl Keyset for BucketKey {
    type Wire = i64;
    fn to_wire(&self) -> Self::Wire {
        self.0
    }
    fn from_wire(wire: Self::Wire) -> Option<Self> {
        Some(BucketKey(wire))
    }
}

/// Position events: the last item's `observedAt` (epoch ms), address and symbol.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventKey {
    /// `observedAt` of the last item served, epoch ms.
    pub at: i64,
    /// Its address.
    pub address: String,
    /// Its symbol.
    pub symbol: String,
}

impl Keyset for EventKey {
    type Wire = (i64, String, String);
    fn to_wire(&self) -> Self::Wire {
        (self.at, self.address.clone(), self.symbol.clone())
    }
    fn from_wire((at, address, symbol): Self::Wire) -> Option<Self> {
        Some(EventKey {
            at,
            address,
            symbol,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip<K: Keyset + PartialEq + std::fmt::Debug>(key: K) {
        let c = Cursors::new(&["list", "a"]);
        let cursor = c.encode(&key);
        assert_eq!(c.decode::<K>(Some(&cursor)).unwrap(), Some(key));
        let other = Cursors::new(&["list", "b"]);
        let e = other.decode::<K>(Some(&cursor)).unwrap_err();
        assert!(e.to_string().contains("different query"), "{e}");
    }

    #[test]
    fn keys_round_trip_and_stay_with_their_query() {
        roundtrip(PositionKey {
            value: "1234.50".parse().unwrap(),
            address: "0xab".into(),
        });
        roundtrip(WalletKey {
            value: None,
            address: "0xcd".into(),
        });
        roundtrip(WalletKey {
            value: Some("-0.000001".parse().unwrap()),
            address: "0xcd".into(),
        });
        roundtrip(LiquidityKey {
            date: time::macros::date!(2026 - 11 - 22),
            symbol: "xyz:TSLA".into(),
        });
        roundtrip(BucketKey(1_795_305_600_000));
        roundtrip(EventKey {
            at: 1_795_305_600_000,
            address: "0xab".into(),
            symbol: "xyz:TSLA".into(),
        });
    }

    #[test]
    fn paging_continues_after_the_last_key_only_when_there_is_more() {
        let first: Paging<LiquidityKey> = Paging::new(&["list", "a"], None, 2).unwrap();
        assert_eq!(first.after, None);
        let last = ("2026-11-22".to_owned(), "BTC".to_owned());
        assert_eq!(first.next_cursor(false, Some(last.clone())), None);
        assert_eq!(first.next_cursor(true, None), None);
        let cursor = first.next_cursor(true, Some(last)).unwrap();
        let second: Paging<LiquidityKey> = Paging::new(&["list", "a"], Some(&cursor), 2).unwrap();
        assert_eq!(
            second.after,
            Some(LiquidityKey {
                date: time::macros::date!(2026 - 11 - 22),
                symbol: "BTC".into(),
            })
        );
        // The cursor is part of the request's identity; so is the limit.
        assert_ne!(first.identity, second.identity);
        let wider: Paging<LiquidityKey> = Paging::new(&["list", "a"], None, 3).unwrap();
        assert_ne!(first.identity, wider.identity);
        assert!(Paging::<LiquidityKey>::new(&["list", "b"], Some(&cursor), 2).is_err());
    }

    #[test]
    fn a_cursor_of_another_shape_is_malformed() {
        let c = Cursors::new(&["q"]);
        let cursor = pagination::encode(c.fingerprint(), &("not-a-number", "0xab"));
        let e = c.decode::<PositionKey>(Some(&cursor)).unwrap_err();
        assert!(e.to_string().contains("not a valid cursor"), "{e}");
        let cursor = pagination::encode(c.fingerprint(), &("2026-13-01", "BTC"));
        assert!(c.decode::<LiquidityKey>(Some(&cursor)).is_err());
        assert!(c.decode::<LiquidityKey>(Some("%%%")).is_err());
        assert_eq!(c.decode::<LiquidityKey>(None).unwrap(), None);
    }
}
