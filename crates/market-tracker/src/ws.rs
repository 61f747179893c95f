//! The exchange's WebSocket: the trades of every coin (discovery) and
//! `allDexsAssetCtxs` (market context), with pings, paced subscriptions and
//! reconnects with backoff, within the published per-IP limits.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use market_ingest::source::AssetCtx;
use market_store::DiscoverySource;
use serde::Deserialize;
use serde_json::json;
use time::OffsetDateTime;
use tokio_tungstenite::tungstenite::Message;

use crate::discovery::trade_discoveries;
use crate::schedule::Discovery;

/// Subscriptions per connection: the exchange allows 1000 per IP; one is
/// `allDexsAssetCtxs`.
pub const MAX_TRADE_SUBSCRIPTIONS: usize = 999;
/// Messages sent per second at most (the limit is 2000 a minute).
const SENDS_PER_SECOND: usize = 20;
/// A ping after this long without sending (the server closes after 60 s).
const PING_AFTER: Duration = Duration::from_secs(20);
/// A connection that received nothing for this long is dead.
const SILENT_AFTER: Duration = Duration::from_secs(60);
/// First reconnect delay; doubles up to [`MAX_BACKOFF`]. At least 2 s keeps
/// new connections under the limit of 30 a minute.
const MIN_BACKOFF: Duration = Duration::from_secs(2);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The asset contexts of every dex, as last pushed.
#[derive(Clone, Debug)]
pub struct DexCtxs {
    /// When they arrived.
    pub at: Instant,
    /// Per dex (`""` the main dex): contexts in the order of its `meta` universe.
    pub ctxs: Vec<(String, Vec<AssetCtx>)>,
}

/// State shared between the WebSocket thread and the tracker.
#[derive(Debug, Default)]
pub struct WsShared {
    /// Coins to follow (set by the tracker from the dexes' universes).
    pub coins: Mutex<Vec<String>>,
    /// The last `allDexsAssetCtxs` push.
    pub ctxs: Mutex<Option<DexCtxs>>,
    /// Connections opened.
    pub connects: AtomicU64,
    /// Connections lost (then reopened after a backoff).
    pub disconnects: AtomicU64,
    /// Messages received.
    pub messages: AtomicU64,
    /// Messages that were malformed or of an unknown channel.
    pub bad_messages: AtomicU64,
    /// Subscriptions acknowledged.
    pub acks: AtomicU64,
    /// Trades received.
    pub trades: AtomicU64,
    /// Whether a connection is open now.
    pub connected: AtomicBool,
}

/// WebSocket settings.
#[derive(Clone, Debug)]
pub struct WsConfig {
    /// `wss://api.hyperliquid.xyz/ws`.
    pub url: String,
    /// Subscribe to the trades of every coin.
    pub trades: bool,
    /// Subscribe to `allDexsAssetCtxs`.
    pub ctxs: bool,
}

/// Runs the client until `stop` is set, reconnecting with backoff.
pub fn run(cfg: WsConfig, shared: Arc<WsShared>, events: Sender<Discovery>, stop: Arc<AtomicBool>) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            log::error!("websocket: cannot start its runtime: {e}");
            return;
        }
    };
    rt.block_on(async {
        let mut backoff = MIN_BACKOFF;
        while !stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            let result = session(&cfg, &shared, &events, &stop).await;
            shared.connected.store(false, Ordering::Relaxed);
            if stop.load(Ordering::Relaxed) {
                break;
            }
            shared.disconnects.fetch_add(1, Ordering::Relaxed);
            if started.elapsed() > MAX_BACKOFF {
                backoff = MIN_BACKOFF; // it had been up for a while
            }
            match result {
                Ok(()) => log::warn!("websocket closed; reconnecting in {backoff:?}"),
                Err(e) => log::warn!("websocket: {e}; reconnecting in {backoff:?}"),
            }
            let until = Instant::now() + backoff;
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    });
}

#[derive(Deserialize)]
struct Envelope {
    channel: String,
    #[serde(default)]
    data: serde_json::Value,
}

#[derive(Deserialize)]
struct WsTrade {
    coin: String,
    px: String,
    sz: String,
    time: i64,
    users: Vec<String>,
}

#[derive(Deserialize)]
struct AllDexsAssetCtxs {
    ctxs: Vec<(String, Vec<AssetCtx>)>,
}

async fn session(
    cfg: &WsConfig,
    shared: &WsShared,
    events: &Sender<Discovery>,
    stop: &AtomicBool,
) -> Result<(), String> {
    let (stream, _) = tokio::time::timeout(
        Duration::from_secs(10),
        tokio_tungstenite::connect_async(cfg.url.as_str()),
    )
    .await
    .map_err(|_| "connect timed out".to_owned())?
    .map_err(|e| format!("connect: {e}"))?;
    shared.connects.fetch_add(1, Ordering::Relaxed);
    shared.connected.store(true, Ordering::Relaxed);
    log::info!("websocket connected to {}", cfg.url);
    let (mut write, mut read) = stream.split();
    let mut outbox: VecDeque<String> = VecDeque::new();
    if cfg.ctxs {
        outbox.push_back(
            json!({"method": "subscribe", "subscription": {"type": "allDexsAssetCtxs"}})
                .to_string(),
        );
    }
    let mut subscribed: HashSet<String> = HashSet::new();
    let mut last_sent = Instant::now();
    let mut last_received = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / SENDS_PER_SECOND as u64));
    let mut warned_cap = false;
    loop {
        tokio::select! {
            msg = read.next() => {
                let msg = match msg {
                    None => return Err("connection closed".into()),
                    Some(Err(e)) => return Err(format!("read: {e}")),
                    Some(Ok(m)) => m,
                };
                last_received = Instant::now();
                match msg {
                    Message::Text(text) => handle(text.as_str(), shared, events),
                    Message::Close(frame) => return Err(format!("closed by the server: {frame:?}")),
                    _ => {} // pings are answered by the library
                }
            }
            _ = tick.tick() => {
                if stop.load(Ordering::Relaxed) {
                    let _ = write.send(Message::Close(None)).await;
                    return Ok(());
                }
                if last_received.elapsed() > SILENT_AFTER {
                    return Err(format!("nothing received for {SILENT_AFTER:?}"));
                }
                if cfg.trades {
                    let coins = shared.coins.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    for coin in coins {
                        if subscribed.len() >= MAX_TRADE_SUBSCRIPTIONS {
                            if !warned_cap {
                                warned_cap = true;
                                log::warn!("websocket: more than {MAX_TRADE_SUBSCRIPTIONS} coins; the rest are not followed");
                            }
                            break;
                        }
                        if subscribed.insert(coin.clone()) {
                            outbox.push_back(json!({"method": "subscribe", "subscription": {"type": "trades", "coin": coin}}).to_string());
                        }
                    }
                }
                // One message per tick keeps sends at SENDS_PER_SECOND.
                let next = match outbox.pop_front() {
                    Some(m) => Some(m),
                    None if last_sent.elapsed() >= PING_AFTER => Some(json!({"method": "ping"}).to_string()),
                    None => None,
                };
                if let Some(m) = next {
                    write.send(Message::Text(m.into())).await.map_err(|e| format!("send: {e}"))?;
                    last_sent = Instant::now();
                }
            }
        }
    }
}

fn handle(text: &str, shared: &WsShared, events: &Sender<Discovery>) {
    shared.messages.fetch_add(1, Ordering::Relaxed);
    let Ok(env) = serde_json::from_str::<Envelope>(text) else {
        shared.bad_messages.fetch_add(1, Ordering::Relaxed);
        log::debug!("websocket: malformed message: {:.200}", text);
        return;
    };
    match env.channel.as_str() {
        "trades" => match serde_json::from_value::<Vec<WsTrade>>(env.data) {
            Ok(trades) => {
                for t in trades {
                    shared.trades.fetch_add(1, Ordering::Relaxed);
                    let at =
                        OffsetDateTime::from_unix_timestamp_nanos(i128::from(t.time) * 1_000_000)
                            .unwrap_or_else(|_| OffsetDateTime::now_utc());
                    let users: Vec<&str> = t.users.iter().map(String::as_str).collect();
                    match trade_discoveries(
                        &t.coin,
                        &t.px,
                        &t.sz,
                        at,
                        &users,
                        DiscoverySource::Trades,
                    ) {
                        Some(found) => {
                            for d in found {
                                let _ = events.send(d);
                            }
                        }
                        None => {
                            shared.bad_messages.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
            Err(e) => {
                shared.bad_messages.fetch_add(1, Ordering::Relaxed);
                log::debug!("websocket: bad trades message: {e}");
            }
        },
        "allDexsAssetCtxs" => match serde_json::from_value::<AllDexsAssetCtxs>(env.data) {
            Ok(all) => {
                *shared.ctxs.lock().unwrap_or_else(|p| p.into_inner()) = Some(DexCtxs {
                    at: Instant::now(),
                    ctxs: all.ctxs,
                });
            }
            Err(e) => {
                shared.bad_messages.fetch_add(1, Ordering::Relaxed);
                log::debug!("websocket: bad allDexsAssetCtxs message: {e}");
            }
        },
        "subscriptionResponse" => {
            shared.acks.fetch_add(1, Ordering::Relaxed);
        }
        "pong" => {}
        "error" => {
            shared.bad_messages.fetch_add(1, Ordering::Relaxed);
            log::warn!("websocket: the server reports an error: {}", env.data);
        }
        other => {
            shared.bad_messages.fetch_add(1, Ordering::Relaxed);
            log::debug!("websocket: unknown channel {other:?}");
        }
    }
}
