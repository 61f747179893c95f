//! Sending one signed message: the [`Transport`] the deliverer uses, and
//! its HTTP implementation ([`HttpTransport`]): a 10 s timeout for the whole
//! exchange, no redirects followed, no proxy from the environment, at most
//! [`BODY_CAP`] of the answer read, and the target policy at every
//! connection.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::target::{self, PublicOnly, TargetPolicy};

/// How long one attempt may take, connection and answer included.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// The most of an answer's body that is read; the rest is dropped with the
/// connection.
pub const BODY_CAP: usize = 64 * 1024;
/// How much of an answer's body is kept with a failed delivery.
const SNIPPET: usize = 200;

/// One signed message, ready to POST.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// `webhook-id`.
    pub id: &'a str,
    /// `webhook-timestamp` (seconds).
    pub timestamp: i64,
    /// `webhook-signature`.
    pub signature: String,
    /// The JSON body.
    pub body: &'a str,
}

/// What an attempt got back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// An HTTP answer.
    Status {
        /// Its status code.
        code: u16,
        /// Its `Retry-After` header, if any.
        retry_after: Option<String>,
        /// The start of its body, for diagnostics.
        snippet: String,
    },
    /// No answer: refused target, connection failure, timeout.
    Failed(String),
}

/// Sends a message to a URL.
pub trait Transport {
    /// POSTs `message` to `url`.
    fn send(&self, url: &str, message: &Message<'_>) -> impl Future<Output = Answer>;
}

/// The HTTP transport.
#[derive(Clone, Debug)]
pub struct HttpTransport {
    client: reqwest::Client,
    policy: TargetPolicy,
}

impl HttpTransport {
    /// A client with the delivery limits, refusing non-public targets unless
    /// `policy` allows them.
    pub fn new(policy: TargetPolicy) -> Result<HttpTransport, reqwest::Error> {
        let mut builder = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .user_agent(concat!(
                "market-data-server/",
                env!("CARGO_PKG_VERSION"),
                " (webhooks)"
            ))
            .pool_idle_timeout(Duration::from_secs(60));
        if !policy.allow_private {
            builder = builder.dns_resolver(Arc::new(PublicOnly));
        }
        Ok(HttpTransport {
            client: builder.build()?,
            policy,
        })
    }
}

impl Transport for HttpTransport {
    async fn send(&self, url: &str, message: &Message<'_>) -> Answer {
        // A literal address never reaches the resolver: check it here.
        if let Err(e) = target::parse(url, self.policy) {
            return Answer::Failed(e.to_string());
        }
        let sent = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", message.id)
            .header("webhook-timestamp", message.timestamp.to_string())
            .header("webhook-signature", &message.signature)
            .body(message.body.to_owned())
            .send()
            .await;
        let mut response = match sent {
            Ok(r) => r,
            Err(e) => return Answer::Failed(describe(&e)),
        };
        let code = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = Vec::new();
        // Read at most BODY_CAP; an answer that does not finish in time
        // still counts by its status.
        while body.len() < BODY_CAP {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) | Err(_) => break,
            }
        }
        body.truncate(SNIPPET);
        Answer::Status {
            code,
            retry_after,
            snippet: String::from_utf8_lossy(&body).into_owned(),
        }
    }
}

/// A transport error with its causes (reqwest's own message is terse).
fn describe(e: &reqwest::Error) -> String {
    let mut text = if e.is_timeout() {
        format!("timed out after {} s", TIMEOUT.as_secs())
    } else if e.is_connect() {
        "could not connect".to_owned()
    } else {
        "request failed".to_owned()
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
