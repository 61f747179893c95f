#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod error;
mod paging;

use std::time::{Duration, SystemTime};

use futures_util::stream::{self, Stream, StreamExt, TryStreamExt};
use market_model::params::{
    CandlesQuery, EventsQuery, HistoryQuery, LiquidityQuery, MarketsQuery, PositionsQuery,
    WalletsQuery,
};
use market_model::{
    Candle, CandleSeries, LiquidityDay, LiquidityLevelsList, Market, MarketCohorts, MarketHistory,
    MarketHistoryPoint, MarketList, MarketPosition, NetworkCoverage, NetworkList, PositionEvent,
    PositionEventList, PositionList, Wallet, WalletDetail, WalletHistory, WalletHistoryPoint,
    WalletList,
};
use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use reqwest::Url;
use serde::de::DeserializeOwned;
use serde::Serialize;

pub use error::{Error, InvalidParam, Problem, ProblemKind};
pub use market_model;
pub use paging::{Page, PagedQuery};

/// The header that carries the API key.
pub const API_KEY_HEADER: &str = "X-API-Key";

/// When and how long to wait before asking again.
///
/// Answers 429 (rate limited) and 503 (database unreachable or busy, server
/// stopping) are retried after the `Retry-After` the server sent, or after
/// an exponential backoff when it sent none; so is a connection that could
/// not be opened. Every operation is a `GET`, so a retry never repeats a
/// side effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt; 0 turns retries off.
    pub max_retries: u32,
    /// First backoff when the server gives no `Retry-After`; doubles per retry.
    pub backoff: Duration,
    /// Longest single wait. A `Retry-After` longer than this is not waited
    /// for: the call fails with the problem at once.
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            backoff: Duration::from_millis(250),
            max_wait: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// No retries: every error is returned at once.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retry number `retry` (0-based), given the server's
    /// `Retry-After`; `None` means give up.
    fn wait(&self, retry: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if retry >= self.max_retries {
            return None;
        }
        let wait = retry_after.unwrap_or_else(|| {
            self.backoff
                .saturating_mul(1u32.checked_shl(retry).unwrap_or(u32::MAX))
        });
        (wait <= self.max_wait).then_some(wait)
    }
}

/// Builds a [`Client`].
#[derive(Debug)]
pub struct ClientBuilder {
    base: String,
    api_key: Option<String>,
    retry: RetryPolicy,
    timeout: Duration,
    http: Option<reqwest::Client>,
}

impl ClientBuilder {
    /// The API key sent in `X-API-Key` (`token create` prints one).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The retry policy (default: [`RetryPolicy::default`]).
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Timeout of one attempt, from sending to the end of the body
    /// (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// A `reqwest::Client` of the caller's (proxy, TLS roots, pool sizes);
    /// [`ClientBuilder::timeout`] then does not apply.
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// The client; fails when the base URL is not an absolute http(s) URL
    /// or the key cannot be a header value.
    pub fn build(self) -> Result<Client, Error> {
        let base = Url::parse(&self.base)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && !u.cannot_be_a_base())
            .ok_or_else(|| Error::BaseUrl(self.base.clone()))?;
        let api_key = match self.api_key {
            Some(key) => {
                let mut value = HeaderValue::from_str(&key).map_err(|_| Error::ApiKey)?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        let http = match self.http {
            Some(http) => http,
            None => reqwest::Client::builder()
                .timeout(self.timeout)
                .user_agent(concat!("market-client/", env!("CARGO_PKG_VERSION")))
                .build()?,
        };
        Ok(Client {
            http,
            base,
            api_key,
            retry: self.retry,
        })
    }
}

/// A client of one server. Cheap to clone: clones share the connection pool.
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    api_key: Option<HeaderValue>,
    retry: RetryPolicy,
}

impl Client {
    /// A builder for the server at `base` (`http://127.0.0.1:8080`; a path
    /// prefix such as `https://example.com/market-data` is kept).
    pub fn builder(base: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base: base.into(),
            api_key: None,
            retry: RetryPolicy::default(),
            timeout: Duration::from_secs(30),
            http: None,
        }
    }

    /// `GET /healthz`: the process is alive.
    pub async fn health(&self) -> Result<(), Error> {
        self.get::<serde_json::Value>(&["healthz"], &()).await?;
        Ok(())
    }

    /// `GET /readyz`: the database answers and the server is not stopping.
    /// Not retried: a 503 is the answer.
    pub async fn ready(&self) -> Result<(), Error> {
        let url = self.url(&["readyz"]);
        self.attempt::<serde_json::Value>(&url, &()).await?;
        Ok(())
    }

    /// `GET /v1/networks`.
    pub async fn networks(&self) -> Result<NetworkList, Error> {
        self.get(&["v1", "networks"], &()).await
    }

    /// `GET /v1/networks/{network}/coverage`.
    pub async fn coverage(&self, network: &str) -> Result<NetworkCoverage, Error> {
        self.get(&["v1", "networks", network, "coverage"], &())
            .await
    }

    /// `GET /v1/networks/{network}/markets`.
    pub async fn markets(&self, network: &str, query: &MarketsQuery) -> Result<MarketList, Error> {
        self.get(&["v1", "networks", network, "markets"], query)
            .await
    }

    /// `GET /v1/networks/{network}/markets/{asset}`.
    pub async fn market(&self, network: &str, asset: &str) -> Result<Market, Error> {
        self.get(&["v1", "networks", network, "markets", asset], &())
            .await
    }

    /// `GET /v1/networks/{network}/markets/{asset}/cohorts`.
    pub async fn market_cohorts(&self, network: &str, asset: &str) -> Result<MarketCohorts, Error> {
        self.get(
            &["v1", "networks", network, "markets", asset, "cohorts"],
            &(),
        )
        .await
    }

    /// `GET /v1/networks/{network}/markets/{asset}/whale-positions`: one page.
    pub async fn whale_positions(
        &self,
        network: &str,
        asset: &str,
        query: &PositionsQuery,
    ) -> Result<PositionList, Error> {
        self.get(&whale_positions_path(network, asset), query).await
    }

    /// Every whale position from `query`'s page on, page after page.
    pub fn whale_positions_stream(
        &self,
        network: &str,
        asset: &str,
        query: PositionsQuery,
    ) -> impl Stream<Item = Result<MarketPosition, Error>> + Send + 'static {
        self.items::<PositionList, _>(whale_positions_path(network, asset), query)
    }

    /// `GET /v1/networks/{network}/markets/{asset}/candles`: one page.
    pub async fn candles(
        &self,
        network: &str,
        asset: &str,
        query: &CandlesQuery,
    ) -> Result<CandleSeries, Error> {
        self.get(&candles_path(network, asset), query).await
    }

    /// Every candle of `query`'s window, page after page.
    pub fn candles_stream(
        &self,
        network: &str,
        asset: &str,
        query: CandlesQuery,
    ) -> impl Stream<Item = Result<Candle, Error>> + Send + 'static {
        self.items::<CandleSeries, _>(candles_path(network, asset), query)
    }

    /// `GET /v1/networks/{network}/markets/{asset}/history`: one page.
    pub async fn market_history(
        &self,
        network: &str,
        asset: &str,
        query: &HistoryQuery,
    ) -> Result<MarketHistory, Error> {
        self.get(&market_history_path(network, asset), query).await
    }

    /// Every bucket of a market's history from `query`'s page on.
    pub fn market_history_stream(
        &self,
        network: &str,
        asset: &str,
        query: HistoryQuery,
    ) -> impl Stream<Item = Result<MarketHistoryPoint, Error>> + Send + 'static {
        self.items::<MarketHistory, _>(market_history_path(network, asset), query)
    }

    /// `GET /v1/networks/{network}/wallets`: one page.
    pub async fn wallets(&self, network: &str, query: &WalletsQuery) -> Result<WalletList, Error> {
        self.get(&wallets_path(network), query).await
    }

    /// Every wallet matching `query`, page after page.
    pub fn wallets_stream(
        &self,
        network: &str,
        query: WalletsQuery,
    ) -> impl Stream<Item = Result<Wallet, Error>> + Send + 'static {
        self.items::<WalletList, _>(wallets_path(network), query)
    }

    /// `GET /v1/networks/{network}/wallets/{address}`.
    pub async fn wallet(&self, network: &str, address: &str) -> Result<WalletDetail, Error> {
        self.get(&["v1", "networks", network, "wallets", address], &())
            .await
    }

    /// `GET /v1/networks/{network}/wallets/{address}/history`: one page.
    pub async fn wallet_history(
        &self,
        network: &str,
        address: &str,
        query: &HistoryQuery,
    ) -> Result<WalletHistory, Error> {
        self.get(&wallet_history_path(network, address), query)
            .await
    }

    /// Every bucket of a wallet's history from `query`'s page on.
    pub fn wallet_history_stream(
        &self,
        network: &str,
        address: &str,
        query: HistoryQuery,
    ) -> impl Stream<Item = Result<WalletHistoryPoint, Error>> + Send + 'static {
        self.items::<WalletHistory, _>(wallet_history_path(network, address), query)
    }

    /// `GET /v1/networks/{network}/liquidity-levels`: one page.
    pub async fn liquidity_levels(
        &self,
        network: &str,
        query: &LiquidityQuery,
    ) -> Result<LiquidityLevelsList, Error> {
        self.get(&liquidity_path(network), query).await
    }

    /// Every (day, asset) item of `query`'s window, page after page.
    pub fn liquidity_levels_stream(
        &self,
        network: &str,
        query: LiquidityQuery,
    ) -> impl Stream<Item = Result<LiquidityDay, Error>> + Send + 'static {
        self.items::<LiquidityLevelsList, _>(liquidity_path(network), query)
    }

    /// `GET /v1/networks/{network}/position-events`: one page.
    pub async fn position_events(
        &self,
        network: &str,
        query: &EventsQuery,
    ) -> Result<PositionEventList, Error> {
        self.get(&events_path(network), query).await
    }

    /// Every event matching `query`, newest first, page after page.
    pub fn position_events_stream(
        &self,
        network: &str,
        query: EventsQuery,
    ) -> impl Stream<Item = Result<PositionEvent, Error>> + Send + 'static {
        self.items::<PositionEventList, _>(events_path(network), query)
    }

    /// The pages of a list from `query`'s page on, each fetched when the
    /// stream is polled past the previous one.
    pub fn pages<P: Page, Q: PagedQuery>(
        &self,
        path: Vec<String>,
        query: Q,
    ) -> impl Stream<Item = Result<P, Error>> + Send + 'static {
        let client = self.clone();
        stream::try_unfold(Some(query), move |next| {
            let client = client.clone();
            let path = path.clone();
            async move {
                let Some(mut query) = next else {
                    return Ok(None);
                };
                let page: P = client.get(&path, &query).await?;
                let next = match page.next_cursor() {
                    Some(cursor) => {
                        query.set_cursor(cursor)?;
                        Some(query)
                    }
                    None => None,
                };
                Ok(Some((page, next)))
            }
        })
    }

    fn items<P: Page, Q: PagedQuery>(
        &self,
        path: Vec<String>,
        query: Q,
    ) -> impl Stream<Item = Result<P::Item, Error>> + Send + 'static {
        self.pages::<P, Q>(path, query)
            .map_ok(|page| stream::iter(page.into_items().into_iter().map(Ok)))
            .try_flatten()
            .boxed()
    }

    fn url(&self, segments: &[impl AsRef<str>]) -> Url {
        let mut url = self.base.clone();
        // Checked in `build`: the base can carry a path.
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    /// A `GET` with the retry policy applied.
    async fn get<T: DeserializeOwned>(
        &self,
        segments: &[impl AsRef<str>],
        query: &(impl Serialize + ?Sized),
    ) -> Result<T, Error> {
        let url = self.url(segments);
        let mut retry = 0;
        loop {
            let error = match self.attempt(&url, query).await {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            let retry_after = match &error {
                Error::Problem {
                    problem,
                    retry_after,
                } if problem.status == 429 || problem.status == 503 => *retry_after,
                Error::Status { status, .. } if *status == 429 || *status == 503 => None,
                Error::Transport(e) if e.is_connect() => None,
                _ => return Err(error),
            };
            match self.retry.wait(retry, retry_after) {
                Some(wait) => tokio::time::sleep(wait).await,
                None => return Err(error),
            }
            retry += 1;
        }
    }

    async fn attempt<T: DeserializeOwned>(
        &self,
        url: &Url,
        query: &(impl Serialize + ?Sized),
    ) -> Result<T, Error> {
        let mut request = self
            .http
            .get(url.clone())
            .query(query)
            .header(ACCEPT, "application/json");
        if let Some(key) = &self.api_key {
            request = request.header(API_KEY_HEADER, key.clone());
        }
        let response = request.send().await?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let is_problem = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/problem+json"));
        let url_text = response.url().to_string();
        let body = response.bytes().await?;
        if status.is_success() {
            return serde_json::from_slice(&body).map_err(|source| Error::Decode {
                url: url_text,
                source,
            });
        }
        if is_problem {
            if let Ok(problem) = serde_json::from_slice::<Problem>(&body) {
                return Err(Error::Problem {
                    problem: Box::new(problem),
                    retry_after,
                });
            }
        }
        Err(Error::Status {
            status: status.as_u16(),
            body: String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
        })
    }
}

/// `Retry-After` is either delay-seconds or an HTTP date (RFC 9110 §10.2.3).
fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

fn owned(segments: &[&str]) -> Vec<String> {
    segments.iter().map(|s| (*s).to_owned()).collect()
}

fn whale_positions_path(network: &str, asset: &str) -> Vec<String> {
    owned(&[
        "v1",
        "networks",
        network,
        "markets",
        asset,
        "whale-positions",
    ])
}

fn candles_path(network: &str, asset: &str) -> Vec<String> {
    owned(&["v1", "networks", network, "markets", asset, "candles"])
}

fn market_history_path(network: &str, asset: &str) -> Vec<String> {
    owned(&["v1", "networks", network, "markets", asset, "history"])
}

fn wallets_path(network: &str) -> Vec<String> {
    owned(&["v1", "networks", network, "wallets"])
}

fn wallet_history_path(network: &str, address: &str) -> Vec<String> {
    owned(&["v1", "networks", network, "wallets", address, "history"])
}

fn liquidity_path(network: &str) -> Vec<String> {
    owned(&["v1", "networks", network, "liquidity-levels"])
}

fn events_path(network: &str) -> Vec<String> {
    owned(&["v1", "networks", network, "position-events"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_seconds_and_http_dates() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0 "), Some(Duration::ZERO));
        let later = SystemTime::now() + Duration::from_secs(120);
        let waited = parse_retry_after(&httpdate::fmt_http_date(later)).unwrap();
        assert!(waited > Duration::from_secs(110) && waited <= Duration::from_secs(120));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn the_policy_honours_retry_after_backs_off_and_gives_up() {
        let policy = RetryPolicy {
            max_retries: 3,
            backoff: Duration::from_millis(100),
            max_wait: Duration::from_secs(5),
        };
        assert_eq!(
            policy.wait(0, Some(Duration::from_secs(2))),
            Some(Duration::from_secs(2))
        );
        assert_eq!(policy.wait(0, None), Some(Duration::from_millis(100)));
        assert_eq!(policy.wait(2, None), Some(Duration::from_millis(400)));
        assert_eq!(policy.wait(3, None), None, "retries are used up");
        assert_eq!(
            policy.wait(0, Some(Duration::from_secs(60))),
            None,
            "a wait past max_wait is not taken"
        );
        assert_eq!(RetryPolicy::none().wait(0, None), None);
    }

    #[test]
    fn paths_are_percent_encoded_segments_under_the_base_path() {
        let client = Client::builder("http://example.com/prefix/")
            .build()
            .unwrap();
        assert_eq!(
            client
                .url(&["v1", "networks", "perpnet", "markets", "xyz:TSLA"])
                .as_str(),
            "http://example.com/prefix/v1/networks/perpnet/markets/xyz:TSLA"
        );
        assert_eq!(
            client.url(&["v1", "networks", "a/b c"]).as_str(),
            "http://example.com/prefix/v1/networks/a%2Fb%20c"
        );
        assert!(matches!(
            Client::builder("not a url").build(),
            Err(Error::BaseUrl(_))
        ));
        assert!(matches!(
            Client::builder("mailto:x@example.com").build(),
            Err(Error::BaseUrl(_))
        ));
    }
}
