#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Longest cursor accepted, in characters (keys are a sort value and an id).
pub const MAX_CURSOR_LEN: usize = 512;

/// Why a cursor was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// Not base64url, too long, or not a cursor of this service.
    #[error(
        "is not a valid cursor; pass back the `nextCursor` value of the previous page unchanged"
    )]
    Malformed,
    /// A cursor of a different query (another endpoint, sort, order or filter).
    #[error("was issued for a different query (another endpoint, sort, order or filter); cursors only continue the query that produced them")]
    ForeignQuery,
}

#[derive(Serialize, Deserialize)]
struct Envelope<Q, K> {
    /// Fingerprint of the query the cursor belongs to.
    q: Q,
    /// Keyset position: the last item's sort value(s) and tie-breaker.
    k: K,
}

/// Identifies a query's ordering and filters, so a cursor cannot continue another query.
///
/// Build it from every parameter that changes the order or the set of items
/// (not from `limit`, which may change between pages).
pub fn fingerprint(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    let digest = h.finalize();
    URL_SAFE_NO_PAD.encode(&digest[..9])
}

/// Encodes a keyset position as an opaque base64url cursor.
pub fn encode<K: Serialize>(query: &str, key: &K) -> String {
    let json = serde_json::to_vec(&Envelope { q: query, k: key }).expect("cursor keys serialize");
    URL_SAFE_NO_PAD.encode(json)
}

/// Decodes a cursor made by [`encode`] for the same `query` fingerprint.
pub fn decode<K: DeserializeOwned>(query: &str, cursor: &str) -> Result<K, CursorError> {
    if cursor.is_empty() || cursor.len() > MAX_CURSOR_LEN {
        return Err(CursorError::Malformed);
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| CursorError::Malformed)?;
    let env: Envelope<String, serde_json::Value> =
        serde_json::from_slice(&bytes).map_err(|_| CursorError::Malformed)?;
    if env.q != query {
        return Err(CursorError::ForeignQuery);
    }
    serde_json::from_value(env.k).map_err(|_| CursorError::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Key {
        v: Option<String>,
        a: String,
    }

    #[test]
    fn round_trips() {
        let q = fingerprint(&["wallets", "roi", "desc", "", ""]);
        let key = Key {
            v: Some("12.5".into()),
            a: "0xab".into(),
        };
        let c = encode(&q, &key);
        assert!(c
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(decode::<Key>(&q, &c).unwrap(), key);
    }

    #[test]
    fn rejects_foreign_and_garbage() {
        let q1 = fingerprint(&["wallets", "roi"]);
        let q2 = fingerprint(&["wallets", "netPnl"]);
        let c = encode(
            &q1,
            &Key {
                v: None,
                a: "0x".into(),
            },
        );
        assert_eq!(decode::<Key>(&q2, &c), Err(CursorError::ForeignQuery));
        assert_eq!(decode::<Key>(&q1, "!!!"), Err(CursorError::Malformed));
        assert_eq!(decode::<Key>(&q1, ""), Err(CursorError::Malformed));
        assert_eq!(
            decode::<Key>(&q1, &URL_SAFE_NO_PAD.encode(b"{\"q\":1}")),
            Err(CursorError::Malformed)
        );
        let wrong_shape = encode(&q1, &42);
        assert_eq!(
            decode::<Key>(&q1, &wrong_shape),
            Err(CursorError::Malformed)
        );
    }

    #[test]
    fn fingerprint_separates_parts() {
        assert_ne!(fingerprint(&["ab", "c"]), fingerprint(&["a", "bc"]));
    }

    proptest! {
        #[test]
        fn decoder_never_panics(s in ".*") {
            let _ = decode::<Key>("q", &s);
        }

        #[test]
        fn decoder_never_panics_on_base64_of_anything(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode::<Key>("q", &URL_SAFE_NO_PAD.encode(bytes));
        }
    }
}
