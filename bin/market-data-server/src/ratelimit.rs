//! Request limits per API token, and the throttle of failed authentication
//! per client address.
//!
//! Each token has a quota of requests per minute: its own (`token create
//! --rate-limit`, `token set-rate-limit`) or the server's default
//! (`--rate-limit`). It is enforced in process with `governor`'s GCRA: a
//! token may spend its whole minute's quota at once, and it comes back
//! evenly over the minute. Answers to a token's requests carry the IETF
//! rate-limit headers (draft-ietf-httpapi-ratelimit-headers):
//!
//! ```text
//! RateLimit-Policy: "token";q=1200;w=60
//! RateLimit: "token";r=1187;t=1
//! ```
//!
//! With `--redis-url` the quotas of tokens are shared by every replica
//! through Redis (see [`crate::shared_quota`]); without it, or while Redis
//! cannot be reached, each server enforces them on its own.
//!
//! `q` is the quota per window of `w` seconds, `r` what remains of it now,
//! and `t` the seconds until all of it is available again (until the next
//! request is, on a 429, which also carries `Retry-After`).
//!
//! A key that does not authenticate costs a database lookup. Each client
//! address may fail authentication `--auth-failures-per-minute` times a
//! minute (all at once at most); past that, its requests with a key that is
//! not in the token cache get a 429 at once, without the lookup, until the
//! quota refills. A valid key verified earlier (one the token cache still
//! holds) keeps working from that address, and other addresses are not
//! affected. Such a 429 is sent after
//! [`THROTTLE_DELAY`]: it costs the server a timer, not CPU, and holds a
//! flooding connection for that long, so the flood slows down instead of
//! turning into a faster stream of cheap refusals.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::http::header::{HeaderName, HeaderValue};
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use quick_cache::sync::Cache;

use crate::shared_quota::{Charge, SharedQuota};

/// `RateLimit-Policy` header name.
pub const POLICY_HEADER: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit` header name.
pub const STATE_HEADER: HeaderName = HeaderName::from_static("ratelimit");

/// How long a 429 for too many failed authentications waits before it is
/// sent.
pub const THROTTLE_DELAY: Duration = Duration::from_secs(1);

/// The window of every quota, in seconds.
const WINDOW_SECS: u64 = 60;
/// Most tokens whose limiter is kept (the least recently used go first,
/// and start again with a full quota).
const TOKENS_KEPT: usize = 100_000;
/// Most client addresses remembered as blocked.
const BLOCKED_KEPT: usize = 100_000;

/// A request limit per minute, as given on the command line: `N/min`
/// (`N` from 1), or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerMinute(pub Option<NonZeroU32>);

impl FromStr for PerMinute {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("off") {
            return Ok(PerMinute(None));
        }
        let n = s
            .strip_suffix("/min")
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|n| (1..=i32::MAX as u32).contains(n))
            .ok_or_else(|| {
                format!(
                    "`{s}` is not a limit: write N/min with N from 1 to {} (e.g. 1200/min), or off",
                    i32::MAX
                )
            })?;
        Ok(PerMinute(NonZeroU32::new(n)))
    }
}

impl std::fmt::Display for PerMinute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(n) => write!(f, "{n}/min"),
            None => f.write_str("off"),
        }
    }
}

/// How the limits are set up.
#[derive(Clone, Debug)]
pub struct LimitOptions {
    /// The quota of a token without one of its own; `None`: unlimited.
    pub default_per_minute: Option<NonZeroU32>,
    /// Failed authentications allowed per client address and minute;
    /// `None` turns the throttle off.
    pub auth_failures_per_minute: Option<NonZeroU32>,
    /// Reverse proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: Vec<IpAddr>,
    /// Where the token quotas are shared with other replicas, if they are.
    pub shared: Option<Arc<SharedQuota>>,
}

impl Default for LimitOptions {
    /// Everything off: what a test or a library user gets unless it asks.
    fn default() -> Self {
        LimitOptions {
            default_per_minute: None,
            auth_failures_per_minute: None,
            trusted_proxies: Vec::new(),
            shared: None,
        }
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, DefaultClock, StateInformationMiddleware>;
type KeyedLimiter = RateLimiter<
    IpAddr,
    governor::state::keyed::DefaultKeyedStateStore<IpAddr>,
    DefaultClock,
    StateInformationMiddleware,
>;

/// One token's limiter and the quota it was made for.
struct TokenLimiter {
    per_minute: NonZeroU32,
    limiter: Limiter,
}

/// Where a request stands against a quota.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted; `remaining` of `quota` are left, all of it back in `reset` s.
    Allowed {
        /// Policy name in the headers.
        policy: &'static str,
        /// Requests per window.
        quota: u32,
        /// Requests left now.
        remaining: u32,
        /// Seconds until the whole quota is available again.
        reset: u64,
    },
    /// Refused; the next request is admitted in `retry_after` s.
    Limited {
        /// Policy name in the headers.
        policy: &'static str,
        /// Requests per window.
        quota: u32,
        /// Seconds until the next request is admitted (at least 1).
        retry_after: u64,
    },
}

impl Verdict {
    /// The `RateLimit-Policy` and `RateLimit` headers of this verdict.
    pub fn headers(&self) -> [(HeaderName, HeaderValue); 2] {
        let (policy, quota, remaining, reset) = match *self {
            Verdict::Allowed {
                policy,
                quota,
                remaining,
                reset,
            } => (policy, quota, remaining, reset),
            Verdict::Limited {
                policy,
                quota,
                retry_after,
            } => (policy, quota, 0, retry_after),
        };
        let value = |s: String| HeaderValue::try_from(s).expect("ASCII digits and a token");
        [
            (
                POLICY_HEADER,
                value(format!("\"{policy}\";q={quota};w={WINDOW_SECS}")),
            ),
            (
                STATE_HEADER,
                value(format!("\"{policy}\";r={remaining};t={reset}")),
            ),
        ]
    }
}

fn quota(per_minute: NonZeroU32) -> Quota {
    Quota::per_minute(per_minute)
}

/// An admitted request with `remaining` of `quota` left: each used request
/// comes back after 60 s / quota, so all of them in `reset` seconds.
fn allowed(policy: &'static str, quota: u32, remaining: u32) -> Verdict {
    let used = u64::from(quota - remaining.min(quota));
    Verdict::Allowed {
        policy,
        quota,
        remaining,
        reset: (used * WINDOW_SECS).div_ceil(u64::from(quota)),
    }
}

/// The verdict of a charge made in Redis for a quota of `quota` a minute.
fn shared_verdict(quota: u32, charge: Charge) -> Verdict {
    match charge {
        Charge::Admitted(until_whole) => {
            // Each used request comes back after one interval.
            let interval = crate::shared_quota::interval_micros(quota);
            let used = (until_whole.as_micros() as u64).div_ceil(interval);
            allowed(
                "token",
                quota,
                quota.saturating_sub(used.min(u64::from(quota)) as u32),
            )
        }
        Charge::Refused(wait) => Verdict::Limited {
            policy: "token",
            quota,
            retry_after: ceil_secs(wait),
        },
    }
}

/// Seconds, rounded up, so that a client waiting that long is admitted.
fn ceil_secs(d: Duration) -> u64 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    secs.max(1)
}

/// The limits of one server.
pub struct RateLimits {
    options: LimitOptions,
    clock: DefaultClock,
    tokens: Cache<i64, Arc<TokenLimiter>>,
    failures: Option<KeyedLimiter>,
    /// Addresses over their failure quota, until when.
    blocked: Cache<IpAddr, Instant>,
}

impl RateLimits {
    /// Limits set up by `options`.
    pub fn new(options: LimitOptions) -> RateLimits {
        let failures = options
            .auth_failures_per_minute
            .map(|n| RateLimiter::keyed(quota(n)).with_middleware::<StateInformationMiddleware>());
        RateLimits {
            options,
            clock: DefaultClock::default(),
            tokens: Cache::new(TOKENS_KEPT),
            failures,
            blocked: Cache::new(BLOCKED_KEPT),
        }
    }

    /// The options they were made with.
    pub fn options(&self) -> &LimitOptions {
        &self.options
    }

    /// The quota of a token whose own is `own`; `None` when it is unlimited.
    fn quota_of(&self, own: Option<u32>) -> Option<NonZeroU32> {
        own.and_then(NonZeroU32::new)
            .or(self.options.default_per_minute)
    }

    /// Charges one request to token `id`, whose own quota is `own` (or the
    /// default): through Redis when the quotas are shared and Redis
    /// answers, in process otherwise. `None` when it is unlimited.
    pub async fn charge_token(&self, id: i64, own: Option<u32>) -> Option<Verdict> {
        let per_minute = self.quota_of(own)?;
        if let Some(shared) = &self.options.shared {
            if let Ok(charge) = shared.charge(id, per_minute).await {
                return Some(shared_verdict(per_minute.get(), charge));
            }
        }
        Some(self.check_local(id, per_minute))
    }

    /// Charges one request to token `id` in process only.
    pub fn check_token(&self, id: i64, own: Option<u32>) -> Option<Verdict> {
        Some(self.check_local(id, self.quota_of(own)?))
    }

    fn check_local(&self, id: i64, per_minute: NonZeroU32) -> Verdict {
        let limiter = match self.tokens.get(&id) {
            Some(l) if l.per_minute == per_minute => l,
            // New, or its quota was changed: start it with the new quota.
            _ => {
                let l = Arc::new(TokenLimiter {
                    per_minute,
                    limiter: RateLimiter::direct(quota(per_minute))
                        .with_middleware::<StateInformationMiddleware>(),
                });
                self.tokens.insert(id, l.clone());
                l
            }
        };
        let q = per_minute.get();
        match limiter.limiter.check() {
            Ok(snapshot) => allowed("token", q, snapshot.remaining_burst_capacity()),
            Err(not_until) => Verdict::Limited {
                policy: "token",
                quota: q,
                retry_after: ceil_secs(not_until.wait_time_from(self.clock.now())),
            },
        }
    }

    /// Whether `ip` is over its failed-authentication quota now: then the
    /// verdict to answer with, without looking the key up.
    pub fn blocked(&self, ip: IpAddr) -> Option<Verdict> {
        let n = self.options.auth_failures_per_minute?;
        let until = self.blocked.get(&ip)?;
        let left = until.checked_duration_since(Instant::now())?;
        Some(Verdict::Limited {
            policy: "auth-failures",
            quota: n.get(),
            retry_after: ceil_secs(left),
        })
    }

    /// Charges a failed authentication to `ip`: the verdict for its
    /// answer (a 401 when allowed, a 429 when over the quota), or `None`
    /// when the throttle is off.
    pub fn failed_auth(&self, ip: IpAddr) -> Option<Verdict> {
        let limiter = self.failures.as_ref()?;
        let q = self.options.auth_failures_per_minute?.get();
        Some(match limiter.check_key(&ip) {
            Ok(snapshot) => allowed("auth-failures", q, snapshot.remaining_burst_capacity()),
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.clock.now());
                self.blocked.insert(ip, Instant::now() + wait);
                Verdict::Limited {
                    policy: "auth-failures",
                    quota: q,
                    retry_after: ceil_secs(wait),
                }
            }
        })
    }

    /// Forgets addresses whose quota is whole again (called every few
    /// seconds), so a flood from many addresses does not hold memory.
    pub fn forget_idle(&self) {
        if let Some(limiter) = &self.failures {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }

    /// The client's address: the peer, or, when the peer is a trusted
    /// proxy, the last address in `X-Forwarded-For` that is not one.
    pub fn client_ip(&self, peer: Option<IpAddr>, forwarded_for: &[&str]) -> Option<IpAddr> {
        let peer = peer?;
        let trusted = &self.options.trusted_proxies;
        if !trusted.contains(&peer) {
            return Some(peer);
        }
        // Each proxy appends the address it received from: read from the
        // right and skip our own proxies; what a client wrote itself is
        // further left and never reached.
        let hops = forwarded_for
            .iter()
            .rev()
            .flat_map(|v| v.rsplit(','))
            .map(str::trim);
        for hop in hops {
            match hop.parse::<IpAddr>() {
                Ok(ip) if trusted.contains(&ip) => continue,
                Ok(ip) => return Some(ip),
                // A malformed entry: nothing to its left can be trusted.
                Err(_) => return Some(peer),
            }
        }
        Some(peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_minute: u32, failures: u32) -> RateLimits {
        RateLimits::new(LimitOptions {
            default_per_minute: NonZeroU32::new(per_minute),
            auth_failures_per_minute: NonZeroU32::new(failures),
            trusted_proxies: vec!["10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()],
            shared: None,
        })
    }

    #[test]
    fn limits_parse_and_print() {
        assert_eq!("1200/min".parse(), Ok(PerMinute(NonZeroU32::new(1200))));
        assert_eq!("off".parse(), Ok(PerMinute(None)));
        for bad in ["0/min", "1200", "12/s", "-1/min", "x/min", "3000000000/min"] {
            let err = bad.parse::<PerMinute>().unwrap_err();
            assert!(err.contains("N/min"), "{bad}: {err}");
        }
        assert_eq!(PerMinute(NonZeroU32::new(7)).to_string(), "7/min");
    }

    #[test]
    fn a_token_spends_its_quota_then_waits() {
        let l = limits(3, 1);
        for remaining in [2, 1, 0] {
            let v = l.check_token(1, None).unwrap();
            assert!(
                matches!(v, Verdict::Allowed { remaining: r, quota: 3, .. } if r == remaining),
                "{v:?}"
            );
        }
        let v = l.check_token(1, None).unwrap();
        assert!(
            matches!(
                v,
                Verdict::Limited {
                    retry_after: 20,
                    quota: 3,
                    ..
                }
            ),
            "one request comes back every 20 s: {v:?}"
        );
        let [(_, policy), (_, state)] = v.headers();
        assert_eq!(policy, "\"token\";q=3;w=60");
        assert_eq!(state, "\"token\";r=0;t=20");
        // Another token is not affected; its own quota wins over the default.
        assert!(matches!(
            l.check_token(2, Some(100)),
            Some(Verdict::Allowed {
                quota: 100,
                remaining: 99,
                reset: 1,
                ..
            })
        ));
        // A changed quota applies at once.
        assert!(matches!(
            l.check_token(1, Some(10)),
            Some(Verdict::Allowed {
                quota: 10,
                remaining: 9,
                ..
            })
        ));
        // No default and no quota of its own: unlimited.
        assert_eq!(
            RateLimits::new(LimitOptions::default()).check_token(1, None),
            None
        );
    }

    #[test]
    fn failures_block_one_address_until_they_refill() {
        let l = limits(100, 2);
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        assert!(l.blocked(a).is_none());
        assert!(matches!(
            l.failed_auth(a),
            Some(Verdict::Allowed { remaining: 1, .. })
        ));
        assert!(matches!(
            l.failed_auth(a),
            Some(Verdict::Allowed { remaining: 0, .. })
        ));
        assert!(matches!(
            l.failed_auth(a),
            Some(Verdict::Limited {
                retry_after: 30,
                policy: "auth-failures",
                ..
            })
        ));
        assert!(matches!(l.blocked(a), Some(Verdict::Limited { .. })));
        assert!(l.blocked(b).is_none(), "another address is not blocked");
        assert!(RateLimits::new(LimitOptions::default())
            .failed_auth(a)
            .is_none());
    }

    #[test]
    fn the_client_address_comes_from_trusted_proxies_only() {
        let l = limits(1, 1);
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        // An untrusted peer is the client, whatever it claims.
        assert_eq!(
            l.client_ip(ip("192.0.2.9"), &["198.51.100.1"]),
            ip("192.0.2.9")
        );
        // Through our proxy: the address it saw.
        assert_eq!(
            l.client_ip(ip("10.0.0.1"), &["198.51.100.1"]),
            ip("198.51.100.1")
        );
        // A spoofed entry on the left is skipped; two proxies in a row too.
        assert_eq!(
            l.client_ip(ip("10.0.0.1"), &["6.6.6.6, 198.51.100.1", "10.0.0.2"]),
            ip("198.51.100.1")
        );
        // Nothing usable: the proxy itself.
        assert_eq!(l.client_ip(ip("10.0.0.1"), &[]), ip("10.0.0.1"));
        assert_eq!(l.client_ip(ip("10.0.0.1"), &["garbage"]), ip("10.0.0.1"));
    }
}
