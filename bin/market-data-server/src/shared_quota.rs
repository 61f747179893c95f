//! The per-token quota shared by all replicas through Redis
//! (`serve --redis-url`).
//!
//! The same GCRA as in process, kept in Redis: one key per token holds its
//! theoretical arrival time (TAT) in microseconds, and a Lua script charges
//! a request atomically against Redis's own clock (`TIME`), so replicas
//! need neither synchronised clocks nor a lock. The key expires when the
//! token's quota is whole again, so idle tokens hold no memory.
//!
//! Redis is a helper, not a dependency: each call has a short deadline, and
//! when Redis cannot be reached the server falls back to its in-process
//! limiter (each replica then enforces the quota on its own) and tries
//! Redis again a second later. No request is refused because Redis is
//! down, and while it is, at most one request a second waits for it (up to
//! the deadline).
//!
//! The connection lives on a runtime of its own (one thread), so it does
//! not depend on which HTTP worker happened to open it, and every worker's
//! requests are multiplexed over it.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Script};

/// Charges one request: `KEYS[1]` is the token's key, `ARGV[1]` the
/// emission interval (µs per request) and `ARGV[2]` the quota. Returns
/// `{1, µs until the whole quota is back}` when admitted, `{0, µs until
/// the next request is}` when not.
const GCRA: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local window = interval * tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local next_tat = tat + interval
if next_tat - now > window then
  return {0, next_tat - window - now}
end
redis.call('SET', KEYS[1], string.format('%.0f', next_tat), 'PX', math.ceil((next_tat - now) / 1000))
return {1, next_tat - now}
";

/// How long a request waits for Redis before the in-process limiter decides.
const DEADLINE: Duration = Duration::from_millis(100);
/// How long Redis is left alone after it failed.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);

/// Microseconds between two requests of a quota of `per_minute`, whole:
/// exact to a microsecond a request for quotas up to 60,000,000 a minute.
pub(crate) fn interval_micros(per_minute: u32) -> u64 {
    (60_000_000 / u64::from(per_minute)).max(1)
}

/// Where the shared quota lives: a Redis URL and the prefix of its keys.
#[derive(Clone, Debug)]
pub struct RedisTarget {
    client: Client,
    /// Keys are `{prefix}{token id}`; replicas of one service share the
    /// prefix, other services on the same Redis use another.
    pub prefix: String,
}

impl RedisTarget {
    /// A target for `url` (`redis://[user:password@]host:port[/db]` or
    /// `unix:///path/to/redis.sock`) with keys under `prefix`.
    pub fn new(url: &str, prefix: &str) -> Result<RedisTarget, String> {
        let client = Client::open(url)
            .map_err(|e| format!("not a Redis URL ({e}); write redis://HOST:PORT[/DB]"))?;
        Ok(RedisTarget {
            client,
            prefix: prefix.to_owned(),
        })
    }
}

/// What Redis said about one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charge {
    /// Admitted; the whole quota is back after this long.
    Admitted(Duration),
    /// Refused; the next request is admitted after this long.
    Refused(Duration),
}

/// Why a charge could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    /// Redis answered with an error, or the connection failed.
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// Redis did not answer within the deadline.
    #[error("Redis did not answer within {DEADLINE:?}")]
    Timeout,
    /// Redis is being left alone after a failure.
    #[error("Redis failed less than {RETRY_AFTER_FAILURE:?} ago")]
    Resting,
    /// The connection's runtime is gone (the server is stopping).
    #[error("the Redis connection's runtime has stopped")]
    Stopped,
}

/// A connection to the shared quota.
pub struct SharedQuota {
    runtime: tokio::runtime::Handle,
    connection: ConnectionManager,
    script: Arc<Script>,
    prefix: String,
    /// While Redis is down, until when it is left alone.
    resting_until: Mutex<Option<Instant>>,
    down: AtomicBool,
    errors: AtomicU64,
    /// Dropping it stops the connection's runtime.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl std::fmt::Debug for SharedQuota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedQuota")
            .field("prefix", &self.prefix)
            .field("down", &self.is_down())
            .finish_non_exhaustive()
    }
}

impl SharedQuota {
    /// Starts the connection's runtime; the connection itself is made on
    /// the first request (and remade after failures), so a server starts
    /// while Redis is down.
    pub fn start(target: &RedisTarget) -> std::io::Result<SharedQuota> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("redis-quota".into())
            .spawn(move || {
                // Ends when the sender is dropped.
                let _ = runtime.block_on(stopped);
            })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(DEADLINE))
            .set_response_timeout(Some(DEADLINE))
            .set_number_of_retries(1);
        let connection = {
            let _entered = handle.enter();
            ConnectionManager::new_lazy_with_config(target.client.clone(), config)
                .map_err(std::io::Error::other)?
        };
        Ok(SharedQuota {
            runtime: handle,
            connection,
            script: Arc::new(Script::new(GCRA)),
            prefix: target.prefix.clone(),
            resting_until: Mutex::new(None),
            down: AtomicBool::new(false),
            errors: AtomicU64::new(0),
            _stop: stop,
        })
    }

    /// Charges one request to token `id` with `per_minute` a minute.
    pub async fn charge(&self, id: i64, per_minute: NonZeroU32) -> Result<Charge, SharedError> {
        if self.is_down() {
            // One request a second tries Redis again; the others are
            // limited in process meanwhile without waiting for it.
            let mut resting = self.resting_until.lock().expect("not poisoned");
            let now = Instant::now();
            if resting.is_some_and(|until| now < until) {
                return Err(SharedError::Resting);
            }
            *resting = Some(now + RETRY_AFTER_FAILURE);
        }
        let result = self.call(id, per_minute).await;
        match &result {
            Ok(_) => {
                if self.down.swap(false, Ordering::Relaxed) {
                    log::info!("Redis answers again: the rate limits are shared again");
                }
            }
            Err(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                *self.resting_until.lock().expect("not poisoned") =
                    Some(Instant::now() + RETRY_AFTER_FAILURE);
                if !self.down.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "{e}: each server limits its API keys on its own until Redis answers again"
                    );
                }
            }
        }
        result
    }

    async fn call(&self, id: i64, per_minute: NonZeroU32) -> Result<Charge, SharedError> {
        let (script, mut connection) = (self.script.clone(), self.connection.clone());
        let key = format!("{}{id}", self.prefix);
        let quota = u64::from(per_minute.get());
        let interval = interval_micros(per_minute.get());
        let task = self.runtime.spawn(async move {
            let mut invocation = script.key(key);
            invocation.arg(interval).arg(quota);
            let call = invocation.invoke_async::<(i64, i64)>(&mut connection);
            tokio::time::timeout(DEADLINE, call).await
        });
        let (admitted, micros) = task
            .await
            .map_err(|_| SharedError::Stopped)?
            .map_err(|_| SharedError::Timeout)??;
        let wait = Duration::from_micros(micros.max(0) as u64);
        Ok(if admitted == 1 {
            Charge::Admitted(wait)
        } else {
            Charge::Refused(wait)
        })
    }

    /// Whether the last call failed.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// Calls that failed since start.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
}
