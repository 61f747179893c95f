//! A fake exchange for `track`: the info API (`POST /info`), the leaderboard
//! (`GET /leaderboard`) and the WebSocket (`/ws`: `trades` per coin,
//! `allDexsAssetCtxs`, `ping`), in the exchange's documented formats.
//! Wallets have heavy-tailed account values and can move: positions open and
//! close, prices move, new wallets appear.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use actix_web::{web, App, HttpResponse, HttpServer};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::Message;

/// One position: coin, signed size, entry price.
#[derive(Clone, Debug)]
pub struct FakePosition {
    pub coin: String,
    pub szi: i64,
    pub entry: i64,
}

/// One wallet of the fake exchange.
#[derive(Clone, Debug)]
pub struct FakeWallet {
    pub account_value: u64,
    pub positions: Vec<FakePosition>,
}

/// Dexes and their coins; the main dex is `""`.
pub const DEXES: [(&str, &[&str]); 2] = [("", &["BTC", "ETH", "SOL"]), ("xyz", &["xyz:TSLA"])];

#[derive(Default)]
pub struct Exchange {
    pub wallets: Mutex<BTreeMap<String, FakeWallet>>,
    /// Addresses the leaderboard lists.
    pub on_leaderboard: Mutex<HashSet<String>>,
    pub prices: Mutex<BTreeMap<String, i64>>,
    /// Answer the next n info requests with 429.
    pub rate_limit_next: AtomicU32,
    /// Serve a truncated leaderboard.
    pub truncate_leaderboard: std::sync::atomic::AtomicBool,
    /// (time, weight, type) of every info request.
    pub log: Mutex<Vec<(Instant, u32, String)>>,
    /// WebSocket connections accepted.
    pub ws_connections: AtomicU64,
    /// Subscriptions acknowledged.
    pub ws_subscriptions: AtomicU64,
    trades: Mutex<Option<broadcast::Sender<Value>>>,
    kick: Mutex<Option<broadcast::Sender<()>>>,
}

/// Address of wallet `i`.
pub fn address(i: usize) -> String {
    format!("0x{:040x}", 0x5eed_0000 + i)
}

impl Exchange {
    /// `n` wallets with heavy-tailed account values (a Pareto-like law: a few
    /// hold most of the money), each with a position or two.
    pub fn new(n: usize) -> Arc<Exchange> {
        let ex = Exchange::default();
        {
            let mut prices = ex.prices.lock().unwrap();
            for (coin, px) in [
                ("BTC", 90_000),
                ("ETH", 3_000),
                ("SOL", 150),
                ("xyz:TSLA", 350),
            ] {
                prices.insert(coin.to_owned(), px);
            }
            let mut wallets = ex.wallets.lock().unwrap();
            for i in 0..n {
                // rank 0 holds the most; value ~ 1 / (rank + 1)^1.2
                let value = (20_000_000.0 / ((i + 1) as f64).powf(1.2)) as u64 + 1_000;
                let coin = DEXES[0].1[i % 3];
                let px = prices[coin];
                let size = ((value as f64 * 0.5) / px as f64).max(1.0) as i64;
                let mut positions = vec![FakePosition {
                    coin: coin.to_owned(),
                    szi: if i % 2 == 0 { size } else { -size },
                    entry: px,
                }];
                if i % 4 == 0 {
                    positions.push(FakePosition {
                        coin: "xyz:TSLA".into(),
                        szi: 3,
                        entry: 350,
                    });
                }
                wallets.insert(
                    address(i),
                    FakeWallet {
                        account_value: value,
                        positions,
                    },
                );
            }
        }
        Arc::new(ex)
    }

    /// Sends a trade on the WebSocket to the clients subscribed to its coin.
    pub fn trade(&self, coin: &str, sz: &str, buyer: &str, seller: &str) {
        let px = self.prices.lock().unwrap()[coin];
        let msg = json!({"channel": "trades", "data": [{
            "coin": coin, "side": "B", "px": px.to_string(), "sz": sz,
            "hash": "0x00", "time": now_ms(), "tid": 1, "users": [buyer, seller]
        }]});
        if let Some(tx) = &*self.trades.lock().unwrap() {
            let _ = tx.send(msg);
        }
    }

    /// Closes every WebSocket connection.
    pub fn drop_connections(&self) {
        if let Some(tx) = &*self.kick.lock().unwrap() {
            let _ = tx.send(());
        }
    }

    /// Weight received in every `window` starting at each request.
    pub fn max_weight_in(&self, window: std::time::Duration) -> u32 {
        let log = self.log.lock().unwrap();
        log.iter()
            .map(|(t, _, _)| {
                log.iter()
                    .filter(|(u, _, _)| u >= t && *u < *t + window)
                    .map(|(_, w, _)| w)
                    .sum()
            })
            .max()
            .unwrap_or(0)
    }

    fn state(&self, user: &str, dex: &str) -> Value {
        let wallets = self.wallets.lock().unwrap();
        let prices = self.prices.lock().unwrap();
        let Some(w) = wallets.get(user) else {
            return json!({"marginSummary": {"accountValue": "0.0", "totalNtlPos": "0.0", "totalRawUsd": "0.0", "totalMarginUsed": "0.0"}, "assetPositions": [], "time": now_ms()});
        };
        let mine: Vec<&FakePosition> = w
            .positions
            .iter()
            .filter(|p| crate_dex(&p.coin) == dex)
            .collect();
        let positions: Vec<Value> = mine
            .iter()
            .map(|p| {
                let mark = prices[&p.coin];
                let value = p.szi.abs() * mark;
                let upnl = p.szi * (mark - p.entry);
                let liq = if p.szi > 0 {
                    p.entry / 2
                } else {
                    p.entry * 3 / 2
                };
                json!({"type": "oneWay", "position": {
                    "coin": p.coin, "szi": p.szi.to_string(), "entryPx": p.entry.to_string(),
                    "positionValue": format!("{value}.0"), "unrealizedPnl": format!("{upnl}.0"),
                    "returnOnEquity": "0.1", "liquidationPx": liq.to_string(),
                    "marginUsed": format!("{}.0", value / 10),
                    "leverage": {"type": "cross", "value": 10},
                    "cumFunding": {"allTime": "0.0", "sinceOpen": "1.5", "sinceChange": "0.0"},
                    "maxLeverage": 40}})
            })
            .collect();
        // The main dex holds the account; a HIP-3 dex holds its positions' margin.
        let equity = if dex.is_empty() {
            w.account_value
        } else if mine.is_empty() {
            0
        } else {
            1_000
        };
        json!({"marginSummary": {"accountValue": format!("{equity}.0"), "totalNtlPos": "0.0", "totalRawUsd": "0.0", "totalMarginUsed": "0.0"},
               "crossMarginSummary": {"accountValue": format!("{equity}.0")},
               "assetPositions": positions, "withdrawable": "0.0", "time": now_ms()})
    }

    fn meta_and_ctxs(&self, dex: &str) -> Value {
        let prices = self.prices.lock().unwrap();
        let coins = DEXES
            .iter()
            .find(|(d, _)| *d == dex)
            .map_or(&[][..], |(_, c)| *c);
        let universe: Vec<Value> = coins
            .iter()
            .map(|c| json!({"name": c, "szDecimals": 2, "maxLeverage": 40}))
            .collect();
        let ctxs: Vec<Value> = coins.iter().map(|c| ctx(prices[*c])).collect();
        json!([{"universe": universe}, ctxs])
    }

    fn all_ctxs(&self) -> Value {
        let prices = self.prices.lock().unwrap();
        let ctxs: Vec<Value> = DEXES
            .iter()
            .map(|(dex, coins)| {
                json!([
                    dex,
                    coins.iter().map(|c| ctx(prices[*c])).collect::<Vec<_>>()
                ])
            })
            .collect();
        json!({"channel": "allDexsAssetCtxs", "data": {"ctxs": ctxs}})
    }
}

fn crate_dex(coin: &str) -> &str {
    coin.split_once(':').map_or("", |(d, _)| d)
}

fn ctx(px: i64) -> Value {
    json!({"funding": "0.0000125", "openInterest": "1000.5", "prevDayPx": format!("{}.0", px - 1),
           "dayNtlVlm": "123456.7", "premium": "0.0", "oraclePx": px.to_string(), "markPx": px.to_string(),
           "midPx": px.to_string(), "impactPxs": [px.to_string(), px.to_string()], "dayBaseVlm": "10.0"})
}

fn now_ms() -> i64 {
    (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

async fn info(body: web::Json<Value>, ex: web::Data<Arc<Exchange>>) -> HttpResponse {
    let kind = body["type"].as_str().unwrap_or("").to_owned();
    let weight = if kind == "clearinghouseState" { 2 } else { 20 };
    ex.log
        .lock()
        .unwrap()
        .push((Instant::now(), weight, kind.clone()));
    if ex
        .rate_limit_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return HttpResponse::TooManyRequests().finish();
    }
    let dex = body["dex"].as_str().unwrap_or("");
    match kind.as_str() {
        "perpDexs" => HttpResponse::Ok().json(json!([null, {"name": "xyz", "fullName": "XYZ", "deployer": "0x0", "oracleUpdater": null}])),
        "metaAndAssetCtxs" => HttpResponse::Ok().json(ex.meta_and_ctxs(dex)),
        "clearinghouseState" => {
            HttpResponse::Ok().json(ex.state(body["user"].as_str().unwrap_or(""), dex))
        }
        "candleSnapshot" => HttpResponse::Ok().json(json!([])),
        _ => HttpResponse::BadRequest().finish(),
    }
}

async fn leaderboard(ex: web::Data<Arc<Exchange>>) -> HttpResponse {
    let listed = ex.on_leaderboard.lock().unwrap().clone();
    let rows: Vec<Value> = ex
        .wallets
        .lock()
        .unwrap()
        .iter()
        .filter(|(a, _)| listed.contains(*a))
        .map(|(a, w)| json!({"ethAddress": a, "accountValue": format!("{}.0", w.account_value),
            "windowPerformances": [["day", {"pnl": "1.0", "roi": "0.01", "vlm": "100.0"}], ["allTime", {"pnl": "2.0", "roi": "0.02", "vlm": "200.0"}]],
            "prize": 0, "displayName": null}))
        .collect();
    let body = json!({"leaderboardRows": rows}).to_string();
    if ex.truncate_leaderboard.load(Ordering::SeqCst) {
        return HttpResponse::Ok().body(body[..body.len() / 2].to_owned());
    }
    HttpResponse::Ok()
        .content_type("application/json")
        .body(body)
}

/// The running fake: its URLs and state.
pub struct FakeExchange {
    pub ex: Arc<Exchange>,
    pub info_url: String,
    pub leaderboard_url: String,
    pub ws_url: String,
}

/// Starts the fake exchange with `n` wallets, the first `listed` of them on the leaderboard.
pub async fn start(n: usize, listed: usize) -> FakeExchange {
    let ex = Exchange::new(n);
    ex.on_leaderboard
        .lock()
        .unwrap()
        .extend((0..listed).map(address));
    let (trades, _) = broadcast::channel(1024);
    let (kick, _) = broadcast::channel(16);
    *ex.trades.lock().unwrap() = Some(trades.clone());
    *ex.kick.lock().unwrap() = Some(kick.clone());

    let data = web::Data::new(ex.clone());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let http = listener.local_addr().unwrap();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .route("/info", web::post().to(info))
            .route("/leaderboard", web::get().to(leaderboard))
    })
    .workers(2)
    .listen(listener)
    .unwrap()
    .run();
    tokio::spawn(server);

    let ws_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ws_addr = ws_listener.local_addr().unwrap();
    let wex = ex.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = ws_listener.accept().await {
            let (ex, trades, kick) = (wex.clone(), trades.subscribe(), kick.subscribe());
            tokio::spawn(ws_session(tcp, ex, trades, kick));
        }
    });
    FakeExchange {
        ex,
        info_url: format!("http://{http}/info"),
        leaderboard_url: format!("http://{http}/leaderboard"),
        ws_url: format!("ws://{ws_addr}/ws"),
    }
}

async fn ws_session(
    tcp: tokio::net::TcpStream,
    ex: Arc<Exchange>,
    mut trades: broadcast::Receiver<Value>,
    mut kick: broadcast::Receiver<()>,
) {
    let Ok(ws) = tokio_tungstenite::accept_async(tcp).await else {
        return;
    };
    ex.ws_connections.fetch_add(1, Ordering::SeqCst);
    let (mut tx, mut rx) = ws.split();
    let mut coins: HashSet<String> = HashSet::new();
    let mut ctxs = false;
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(500));
    loop {
        tokio::select! {
            msg = rx.next() => {
                let Some(Ok(Message::Text(text))) = msg else { return };
                let v: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
                let reply = match v["method"].as_str() {
                    Some("ping") => json!({"channel": "pong"}),
                    Some("subscribe") => {
                        let sub = &v["subscription"];
                        match sub["type"].as_str() {
                            Some("trades") => { coins.insert(sub["coin"].as_str().unwrap_or("").to_owned()); }
                            Some("allDexsAssetCtxs") => ctxs = true,
                            _ => {}
                        }
                        ex.ws_subscriptions.fetch_add(1, Ordering::SeqCst);
                        json!({"channel": "subscriptionResponse", "data": v})
                    }
                    _ => json!({"channel": "error", "data": format!("Error parsing JSON into valid websocket request: {text}")}),
                };
                if tx.send(Message::Text(reply.to_string().into())).await.is_err() { return; }
            }
            t = trades.recv() => {
                let Ok(t) = t else { continue };
                let coin = t["data"][0]["coin"].as_str().unwrap_or("").to_owned();
                if coins.contains(&coin) && tx.send(Message::Text(t.to_string().into())).await.is_err() { return; }
            }
            _ = kick.recv() => {
                let _ = tx.send(Message::Close(None)).await;
                return;
            }
            _ = tick.tick() => {
                if ctxs && tx.send(Message::Text(ex.all_ctxs().to_string().into())).await.is_err() { return; }
                // An unknown message now and then: the client must shrug it off.
                if tx.send(Message::Text("{\"channel\":\"somethingNew\",\"data\":{}}".into())).await.is_err() { return; }
            }
        }
    }
}
