//! Where info responses come from: an HTTP endpoint or recorded files.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

/// Why a request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SourceError {
    /// HTTP 429.
    #[error("rate limited (HTTP 429)")]
    RateLimited,
    /// HTTP 5xx.
    #[error("server error (HTTP {0})")]
    Server(u16),
    /// Another HTTP status.
    #[error("HTTP {0}")]
    Status(u16),
    /// The request timed out.
    #[error("timed out")]
    Timeout,
    /// Connection-level failure.
    #[error("transport: {0}")]
    Transport(String),
    /// The body is not the expected JSON.
    #[error("unexpected response: {0}")]
    Decode(String),
    /// A recorded source has no response for this request.
    #[error("no recorded response for {0}")]
    Missing(String),
    /// The caller is stopping: no request (or retry) was sent.
    #[error("stopped before the request was sent")]
    Stopped,
}

impl SourceError {
    /// Whether retrying can help (429, 5xx, timeouts, transport errors).
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            SourceError::RateLimited
                | SourceError::Server(_)
                | SourceError::Timeout
                | SourceError::Transport(_)
        )
    }
}

/// A source of info API responses.
pub trait InfoSource: Sync {
    /// Sends one request body and returns the JSON response.
    fn request(&self, body: &Value) -> Result<Value, SourceError>;
}

/// Largest response accepted, in bytes.
const MAX_BODY: u64 = 64 * 1024 * 1024;

/// The info API over HTTP(S): `POST {url}` with a JSON body.
pub struct HttpSource {
    agent: ureq::Agent,
    url: String,
}

impl HttpSource {
    /// A source posting to `url`, giving up on a request after `timeout`.
    pub fn new(url: &str, timeout: Duration) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .user_agent(concat!("market-data-server/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        HttpSource {
            agent,
            url: url.to_owned(),
        }
    }
}

impl InfoSource for HttpSource {
    fn request(&self, body: &Value) -> Result<Value, SourceError> {
        let res = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .map_err(|e| match e {
                ureq::Error::Timeout(_) => SourceError::Timeout,
                other => SourceError::Transport(other.to_string()),
            })?;
        let status = res.status().as_u16();
        match status {
            200..=299 => {}
            429 => return Err(SourceError::RateLimited),
            500..=599 => return Err(SourceError::Server(status)),
            s => return Err(SourceError::Status(s)),
        }
        let mut text = String::new();
        res.into_body()
            .into_reader()
            .take(MAX_BODY)
            .read_to_string(&mut text)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::TimedOut => SourceError::Timeout,
                _ => SourceError::Transport(e.to_string()),
            })?;
        serde_json::from_str(&text).map_err(|e| SourceError::Decode(e.to_string()))
    }
}

/// Recorded responses in a directory, one file per request type:
///
/// | file | content |
/// |---|---|
/// | `perpDexs.json` | the `perpDexs` response |
/// | `metaAndAssetCtxs.json` | object: dex name (`""` for the main dex) → `[meta, ctxs]` |
/// | `clearinghouseState.json` | object: address → object: dex name → state |
/// | `candleSnapshot.json` | object: coin → array of candles (`1h`), optional |
pub struct DirSource {
    perp_dexs: Value,
    metas: HashMap<String, Value>,
    states: HashMap<String, HashMap<String, Value>>,
    candles: HashMap<String, Value>,
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

impl DirSource {
    /// Reads the recorded responses in `dir`.
    pub fn open(dir: &Path) -> Result<Self, String> {
        let perp_dexs = read_json(&dir.join("perpDexs.json"))?;
        let metas: HashMap<String, Value> =
            serde_json::from_value(read_json(&dir.join("metaAndAssetCtxs.json"))?)
                .map_err(|e| format!("metaAndAssetCtxs.json: {e}"))?;
        let states: HashMap<String, HashMap<String, Value>> =
            serde_json::from_value(read_json(&dir.join("clearinghouseState.json"))?)
                .map_err(|e| format!("clearinghouseState.json: {e}"))?;
        let candles_path = dir.join("candleSnapshot.json");
        let candles = if candles_path.exists() {
            serde_json::from_value(read_json(&candles_path)?)
                .map_err(|e| format!("candleSnapshot.json: {e}"))?
        } else {
            HashMap::new()
        };
        Ok(DirSource {
            perp_dexs,
            metas,
            states,
            candles,
        })
    }

    /// The addresses that have recorded states, sorted.
    pub fn addresses(&self) -> Vec<String> {
        let mut a: Vec<String> = self.states.keys().cloned().collect();
        a.sort();
        a
    }
}

impl InfoSource for DirSource {
    fn request(&self, body: &Value) -> Result<Value, SourceError> {
        let dex = body["dex"].as_str().unwrap_or("").to_owned();
        match body["type"].as_str() {
            Some("perpDexs") => Ok(self.perp_dexs.clone()),
            Some("metaAndAssetCtxs") => self
                .metas
                .get(&dex)
                .cloned()
                .ok_or_else(|| SourceError::Missing(format!("metaAndAssetCtxs dex {dex:?}"))),
            Some("clearinghouseState") => {
                let user = body["user"].as_str().unwrap_or("");
                match self.states.get(user).and_then(|by_dex| by_dex.get(&dex)) {
                    Some(v) => Ok(v.clone()),
                    // A wallet with no state recorded on a dex holds nothing there.
                    None if self.states.contains_key(user) => {
                        Ok(json!({"marginSummary": {"accountValue": "0"}, "assetPositions": []}))
                    }
                    None => Err(SourceError::Missing(format!("clearinghouseState {user}"))),
                }
            }
            Some("candleSnapshot") => {
                let coin = body["req"]["coin"].as_str().unwrap_or("");
                let (from, to) = (
                    body["req"]["startTime"].as_i64().unwrap_or(0),
                    body["req"]["endTime"].as_i64().unwrap_or(i64::MAX),
                );
                let all = self
                    .candles
                    .get(coin)
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                Ok(Value::Array(
                    all.into_iter()
                        .filter(|c| c["t"].as_i64().is_some_and(|t| t >= from && t <= to))
                        .collect(),
                ))
            }
            other => Err(SourceError::Missing(format!("request type {other:?}"))),
        }
    }
}
