//! API tokens: their format (a fixed prefix plus 256 bits from the OS
//! CSPRNG), and where a request carries one (the `X-API-Key` header, never
//! the query).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::rngs::OsRng;
use rand::TryRngCore;
use sha2::{Digest, Sha256};

/// The authenticated token of a request (its id), as the API guard leaves
/// it for handlers that need it (the event stream bounds its streams per key).
#[derive(Clone, Copy, Debug)]
pub struct TokenId(pub i64);

/// Header carrying the API key.
pub const API_KEY_HEADER: &str = "X-API-Key";

/// Every token starts with this prefix.
pub const TOKEN_PREFIX: &str = "mds_";
/// Length of the random part (base64url of 32 bytes).
pub const SECRET_LEN: usize = 43;

/// A new random token.
pub fn generate() -> String {
    let mut bytes = [0u8; 32];
    OsRng
        .try_fill_bytes(&mut bytes)
        .expect("the OS random number generator is available");
    format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))
}

/// Hex SHA-256 of a token: what the database stores and looks up.
pub fn hash(token: &str) -> String {
    let mut hex = [0u8; 64];
    hex::encode_to_slice(Sha256::digest(token.as_bytes()), &mut hex).expect("64 hex digits");
    String::from_utf8_lossy(&hex).into_owned()
}

/// Prefix plus last four characters, for listings.
pub fn hint(token: &str) -> String {
    let tail: String = token
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{TOKEN_PREFIX}…{tail}")
}

/// Whether `token` has the shape of a token (prefix, length, alphabet).
pub fn well_formed(token: &str) -> bool {
    token.strip_prefix(TOKEN_PREFIX).is_some_and(|secret| {
        secret.len() == SECRET_LEN
            && secret
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

/// Whether a query string names a parameter that looks like an API key.
pub(crate) fn has_key_like_query(query: &str) -> bool {
    form_urlencoded::parse(query.as_bytes()).any(|(k, _)| {
        let k = k.to_ascii_lowercase().replace(['-', '_'], "");
        matches!(
            k.as_str(),
            "apikey" | "key" | "token" | "accesstoken" | "xapikey"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_unique_and_well_formed() {
        let a = generate();
        let b = generate();
        assert_ne!(a, b);
        assert!(well_formed(&a), "{a}");
        assert_eq!(hash(&a).len(), 64);
        assert!(hint(&a).ends_with(&a[a.len() - 4..]));
        assert!(!well_formed("mds_short"));
        assert!(!well_formed(&a.replace(TOKEN_PREFIX, "xyz_")));
    }
}
