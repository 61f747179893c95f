//! Request ids: the `X-Request-Id` a client sends (when it is a sensible
//! token) or a fresh one, echoed on the answer, in problem bodies and in
//! the access log.

use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use rand::Rng;

/// Header carrying the request id, in both directions.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Whether a client's request id is kept: 1 to 128 letters, digits,
/// `-`, `_` or `.`.
fn valid_request_id(v: &str) -> bool {
    (1..=128).contains(&v.len())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A fresh request id: 16 hex digits.
fn new_request_id() -> HeaderValue {
    let mut hex = [0u8; 16];
    hex::encode_to_slice(rand::rng().random::<u64>().to_be_bytes(), &mut hex)
        .expect("16 hex digits for 8 bytes");
    HeaderValue::from_bytes(&hex).expect("hex digits are a valid header value")
}

/// The id of a request with `headers`: the client's when it is kept, else a
/// fresh one. Kept as the header value it is echoed in: no string per
/// request.
pub(crate) fn of(headers: &HeaderMap) -> HeaderValue {
    headers
        .get(&REQUEST_ID)
        .filter(|v| v.to_str().is_ok_and(valid_request_id))
        .cloned()
        .unwrap_or_else(new_request_id)
}
