//! Standard Webhooks signatures (<https://www.standardwebhooks.com/>): the
//! secret is `whsec_` + the base64 of its key, and a message is signed as
//! `v1,` + base64(HMAC-SHA256(key, "{webhook-id}.{webhook-timestamp}.{body}")),
//! so any Standard Webhooks library verifies it unchanged.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The secret's prefix.
pub const SECRET_PREFIX: &str = "whsec_";
/// Bytes of a generated key (Standard Webhooks asks for 24 to 64).
const KEY_BYTES: usize = 32;
/// How far a verified timestamp may be from now, seconds (the
/// specification's suggestion, against replays).
pub const TOLERANCE_SECS: i64 = 300;

/// A signing secret.
#[derive(Clone)]
pub struct Secret {
    key: Vec<u8>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// A secret that is not `whsec_` + base64.
#[derive(Debug, thiserror::Error)]
#[error("a webhook secret is `whsec_` followed by base64")]
pub struct BadSecret;

/// Why a signature did not verify.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// `webhook-timestamp` is not a number of seconds.
    #[error("webhook-timestamp is not a number")]
    BadTimestamp,
    /// The timestamp is more than [`TOLERANCE_SECS`] away from now.
    #[error("webhook-timestamp is too far from now")]
    Stale,
    /// No `v1` signature matches.
    #[error("no signature matches")]
    Mismatch,
}

impl Secret {
    /// A new random secret.
    pub fn generate() -> Secret {
        Secret {
            key: (0..KEY_BYTES).map(|_| rand::random::<u8>()).collect(),
        }
    }

    /// Parses `whsec_…` (the prefix is optional, as libraries accept it).
    pub fn parse(s: &str) -> Result<Secret, BadSecret> {
        let b64 = s.strip_prefix(SECRET_PREFIX).unwrap_or(s);
        let key = STANDARD.decode(b64).map_err(|_| BadSecret)?;
        if key.is_empty() {
            return Err(BadSecret);
        }
        Ok(Secret { key })
    }

    /// The `whsec_…` form, to show the operator once and to store.
    pub fn expose(&self) -> String {
        format!("{SECRET_PREFIX}{}", STANDARD.encode(&self.key))
    }

    fn mac(&self, id: &str, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    /// The `webhook-signature` header of a message.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let tag = self.mac(id, timestamp, body).finalize().into_bytes();
        format!("v1,{}", STANDARD.encode(tag))
    }

    /// Verifies a message as a receiver would: `signatures` is the
    /// `webhook-signature` header (space-separated `v1,…` entries; others are
    /// ignored), `now` the receiver's clock, in seconds.
    pub fn verify(
        &self,
        id: &str,
        timestamp: &str,
        body: &[u8],
        signatures: &str,
        now: i64,
    ) -> Result<(), VerifyError> {
        let ts: i64 = timestamp.parse().map_err(|_| VerifyError::BadTimestamp)?;
        if now.abs_diff(ts) > TOLERANCE_SECS.unsigned_abs() {
            return Err(VerifyError::Stale);
        }
        for entry in signatures.split(' ') {
            let Some(b64) = entry.strip_prefix("v1,") else {
                continue;
            };
            let Ok(tag) = STANDARD.decode(b64) else {
                continue;
            };
            // Constant-time comparison.
            if self.mac(id, ts, body).verify_slice(&tag).is_ok() {
                return Ok(());
            }
        }
        Err(VerifyError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message the Standard Webhooks reference libraries' tests sign;
    /// the expected header was computed independently (Python's `hmac`).
    #[test]
    fn signs_the_specification_example() {
        let secret = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        let sig = secret.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert_eq!(
            secret.verify(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                "1614265330",
                body,
                &format!("v1,bm90IGl0 {sig}"),
                1614265330 + 10
            ),
            Ok(())
        );
    }

    #[test]
    fn verification_fails_on_any_change() {
        let secret = Secret::generate();
        let sig = secret.sign("msg_1", 1000, b"{}");
        assert_eq!(secret.verify("msg_1", "1000", b"{}", &sig, 1000), Ok(()));
        assert_eq!(
            secret.verify("msg_2", "1000", b"{}", &sig, 1000),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            secret.verify("msg_1", "1000", b"{ }", &sig, 1000),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            secret.verify("msg_1", "1000", b"{}", &sig, 1000 + TOLERANCE_SECS + 1),
            Err(VerifyError::Stale)
        );
        assert_eq!(
            secret.verify("msg_1", &i64::MIN.to_string(), b"{}", &sig, 1000),
            Err(VerifyError::Stale)
        );
        let other = Secret::generate();
        assert_eq!(
            other.verify("msg_1", "1000", b"{}", &sig, 1000),
            Err(VerifyError::Mismatch)
        );
    }

    #[test]
    fn secrets_round_trip_and_reject_garbage() {
        let s = Secret::generate();
        let text = s.expose();
        assert!(text.starts_with("whsec_"));
        assert_eq!(Secret::parse(&text).unwrap().key, s.key);
        assert_eq!(s.key.len(), KEY_BYTES);
        assert!(Secret::parse("whsec_!!!").is_err());
        assert!(Secret::parse("whsec_").is_err());
    }
}
