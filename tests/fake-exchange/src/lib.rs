#![doc = include_str!("../README.md")]

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, App, HttpResponse, HttpServer};
use futures_util::{SinkExt, StreamExt};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::Message;

/// One position: coin, signed size in lots (hundredths of a unit, the
/// exchange's `szDecimals` = 2), entry price in cents.
#[derive(Clone, Debug)]
pub struct FakePosition {
    /// Network symbol (`BTC`, `xyz:TSLA`).
    pub coin: String,
    /// Signed size, hundredths of a unit (negative: short).
    pub lots: i64,
    /// Entry price, cents.
    pub entry: i64,
}

/// One wallet of the fake exchange.
#[derive(Clone, Debug)]
pub struct FakeWallet {
    /// Equity on the main dex, whole USD.
    pub account_value: u64,
    /// Open positions, at most one per coin.
    pub positions: Vec<FakePosition>,
    /// Equity on each HIP-3 dex it holds a position on, whole USD.
    pub hip3_equity: u64,
}

impl FakeWallet {
    /// A wallet with `account_value` on the main dex and the usual 1,000
    /// USD of margin on each HIP-3 dex it holds a position on.
    pub fn new(account_value: u64, positions: Vec<FakePosition>) -> FakeWallet {
        FakeWallet {
            account_value,
            positions,
            hip3_equity: 1_000,
        }
    }

    /// Its equity over every dex, as the leaderboard reports it.
    pub fn total_equity(&self) -> u64 {
        let dexes: HashSet<&str> = self
            .positions
            .iter()
            .map(|p| dex_of(&p.coin))
            .filter(|d| !d.is_empty())
            .collect();
        self.account_value + self.hip3_equity * dexes.len() as u64
    }
}

/// One change of a wallet's position in a coin: (epoch ms, address, coin,
/// lots before, lots after).
pub type PositionChange = (i64, String, String, i64, i64);

/// Dexes and coins of the small world of [`start`]; the main dex is `""`.
pub const DEXES: [(&str, &[&str]); 2] = [("", &["BTC", "ETH", "SOL"]), ("xyz", &["xyz:TSLA"])];

/// Main-dex coins of a simulated world, with start prices in cents.
const MAIN_COINS: [(&str, i64); 20] = [
    ("BTC", 9_000_000),
    ("ETH", 300_000),
    ("SOL", 15_000),
    ("HYPE", 3_500),
    ("XRP", 220),
    ("DOGE", 18),
    ("AVAX", 2_500),
    ("LINK", 1_600),
    ("SUI", 350),
    ("BNB", 60_000),
    ("ADA", 70),
    ("TRX", 25),
    ("LTC", 9_000),
    ("DOT", 450),
    ("APT", 800),
    ("ARB", 60),
    ("OP", 150),
    ("NEAR", 300),
    ("AAVE", 20_000),
    ("ENA", 50),
];

/// HIP-3 dex names of a simulated world (the first `--hip3-dexes`).
const HIP3: [&str; 12] = [
    "xyz", "flx", "vntl", "hyna", "km", "abcd", "cash", "test", "felix", "pear", "unit", "kin",
];

/// The state of the simulated exchange.
#[derive(Default)]
pub struct World {
    /// Dexes in order (the main dex `""` first) and their coins.
    pub dexes: Vec<(String, Vec<String>)>,
    /// Mark prices, cents.
    pub prices: HashMap<String, i64>,
    /// Prices 24 h ago, cents.
    prev_day: HashMap<String, i64>,
    /// (long lots, short lots) of every wallet, per coin.
    sides: HashMap<String, (i64, i64)>,
    wallets: Vec<(String, FakeWallet)>,
    index: HashMap<String, usize>,
    /// Addresses the leaderboard lists.
    pub on_leaderboard: HashSet<String>,
    /// Addresses whose account states leave out the members the exchange
    /// has not always sent (`cumFunding`, `returnOnEquity`) and carry one it
    /// does not document: the client must take them.
    pub sparse: HashSet<String>,
    /// Addresses that trade but hold nothing (round trips, no equity): each
    /// of their reads is empty.
    pub flat: Vec<String>,
    /// Every position change since the world was built.
    pub journal: Vec<PositionChange>,
    journaling: bool,
}

impl World {
    fn new(dexes: Vec<(String, Vec<String>)>, prices: HashMap<String, i64>) -> World {
        World {
            prev_day: prices
                .iter()
                .map(|(c, p)| (c.clone(), p * 99 / 100))
                .collect(),
            sides: prices.keys().map(|c| (c.clone(), (0, 0))).collect(),
            dexes,
            prices,
            ..World::default()
        }
    }

    /// Inserts or replaces a wallet, keeping the open interest in step.
    pub fn put_wallet(&mut self, address: &str, wallet: FakeWallet) {
        let old = match self.index.get(address) {
            Some(&i) => std::mem::replace(&mut self.wallets[i].1, wallet.clone()),
            None => {
                self.index.insert(address.to_owned(), self.wallets.len());
                self.wallets.push((address.to_owned(), wallet.clone()));
                FakeWallet::new(0, Vec::new())
            }
        };
        for p in &old.positions {
            self.count(&p.coin, p.lots, -1);
        }
        for p in &wallet.positions {
            self.count(&p.coin, p.lots, 1);
        }
        if self.journaling {
            let lots = |w: &FakeWallet, coin: &str| {
                w.positions
                    .iter()
                    .find(|p| p.coin == coin)
                    .map_or(0, |p| p.lots)
            };
            let coins: std::collections::BTreeSet<&str> = old
                .positions
                .iter()
                .chain(&wallet.positions)
                .map(|p| p.coin.as_str())
                .collect();
            for coin in coins {
                let (before, after) = (lots(&old, coin), lots(&wallet, coin));
                if before != after {
                    self.journal.push((
                        now_ms(),
                        address.to_owned(),
                        coin.to_owned(),
                        before,
                        after,
                    ));
                }
            }
        }
    }

    /// Starts recording position changes (after the world is built).
    pub fn start_journal(&mut self) {
        self.journaling = true;
    }

    fn count(&mut self, coin: &str, lots: i64, sign: i64) {
        let s = self.sides.entry(coin.to_owned()).or_default();
        if lots > 0 {
            s.0 += sign * lots;
        } else {
            s.1 += sign * -lots;
        }
    }

    /// A wallet, if it exists.
    pub fn wallet(&self, address: &str) -> Option<&FakeWallet> {
        self.index.get(address).map(|&i| &self.wallets[i].1)
    }

    /// Number of wallets.
    pub fn len(&self) -> usize {
        self.wallets.len()
    }

    /// Whether there are no wallets.
    pub fn is_empty(&self) -> bool {
        self.wallets.is_empty()
    }

    /// Open interest of a coin in lots: the mean of its long and short sizes.
    pub fn open_interest_lots(&self, coin: &str) -> i64 {
        self.sides.get(coin).map_or(0, |(l, s)| (l + s) / 2)
    }

    fn dex_coins(&self, dex: &str) -> &[String] {
        self.dexes
            .iter()
            .find(|(d, _)| d == dex)
            .map_or(&[][..], |(_, c)| c.as_slice())
    }

    fn ctx(&self, coin: &str) -> Value {
        let px = cents(self.prices[coin] as i128);
        let oi = self.open_interest_lots(coin);
        json!({"funding": "0.0000125", "openInterest": lots(oi as i128),
               "prevDayPx": cents(self.prev_day[coin] as i128),
               "dayNtlVlm": "123456.7", "premium": "0.0", "oraclePx": px, "markPx": px,
               "midPx": px, "impactPxs": [px, px], "dayBaseVlm": "10.0"})
    }

    fn meta_and_ctxs(&self, dex: &str) -> Value {
        let coins = self.dex_coins(dex);
        let universe: Vec<Value> = coins
            .iter()
            .map(|c| json!({"name": c, "szDecimals": 2, "maxLeverage": 40}))
            .collect();
        let ctxs: Vec<Value> = coins.iter().map(|c| self.ctx(c)).collect();
        json!([{"universe": universe}, ctxs])
    }

    fn all_ctxs(&self) -> Value {
        let ctxs: Vec<Value> = self
            .dexes
            .iter()
            .map(|(dex, coins)| json!([dex, coins.iter().map(|c| self.ctx(c)).collect::<Vec<_>>()]))
            .collect();
        json!({"channel": "allDexsAssetCtxs", "data": {"ctxs": ctxs}})
    }

    fn state(&self, user: &str, dex: &str) -> Value {
        let sparse = self.sparse.contains(user);
        let Some(w) = self.wallet(user) else {
            return json!({"marginSummary": {"accountValue": "0.0", "totalNtlPos": "0.0", "totalRawUsd": "0.0", "totalMarginUsed": "0.0"}, "assetPositions": [], "time": now_ms()});
        };
        let mine: Vec<&FakePosition> = w
            .positions
            .iter()
            .filter(|p| dex_of(&p.coin) == dex)
            .collect();
        let positions: Vec<Value> = mine
            .iter()
            .map(|p| {
                let mark = self.prices[&p.coin] as i128;
                let size = p.lots as i128;
                // lots × cents: 10^-4 USD
                let value = size.abs() * mark;
                let upnl = size * (mark - p.entry as i128);
                let liq = if p.lots > 0 {
                    p.entry / 2
                } else {
                    p.entry * 3 / 2
                };
                let mut position = json!({
                    "coin": p.coin, "szi": lots(size), "entryPx": cents(p.entry as i128),
                    "positionValue": ten_thousandths(value), "unrealizedPnl": ten_thousandths(upnl),
                    "returnOnEquity": "0.1", "liquidationPx": cents(liq as i128),
                    "marginUsed": ten_thousandths(value / 10),
                    "leverage": {"type": "cross", "value": 10},
                    "cumFunding": {"allTime": "0.0", "sinceOpen": "1.5", "sinceChange": "0.0"},
                    "maxLeverage": 40});
                if sparse {
                    // As older answers and some SDK fixtures have it.
                    let members = position.as_object_mut().expect("an object");
                    members.remove("cumFunding");
                    members.remove("returnOnEquity");
                    members.insert("liquidationMode".into(), json!("cross"));
                }
                json!({"type": "oneWay", "position": position})
            })
            .collect();
        // The main dex holds the account; a HIP-3 dex holds its positions' margin.
        let equity = if dex.is_empty() {
            w.account_value
        } else if mine.is_empty() {
            0
        } else {
            w.hip3_equity
        };
        json!({"marginSummary": {"accountValue": format!("{equity}.0"), "totalNtlPos": "0.0", "totalRawUsd": "0.0", "totalMarginUsed": "0.0"},
               "crossMarginSummary": {"accountValue": format!("{equity}.0")},
               "assetPositions": positions, "withdrawable": "0.0", "time": now_ms()})
    }

    fn leaderboard(&self) -> Value {
        let rows: Vec<Value> = self
            .wallets
            .iter()
            .filter(|(a, _)| self.on_leaderboard.contains(a))
            .map(|(a, w)| json!({"ethAddress": a, "accountValue": format!("{}.0", w.total_equity()),
                "windowPerformances": [["day", {"pnl": "1.0", "roi": "0.01", "vlm": "100.0"}], ["week", {"pnl": "1.5", "roi": "0.015", "vlm": "700.0"}],
                                       ["month", {"pnl": "1.8", "roi": "0.018", "vlm": "3000.0"}], ["allTime", {"pnl": "2.0", "roi": "0.02", "vlm": "200.0"}]],
                "prize": 0, "displayName": null}))
            .collect();
        json!({ "leaderboardRows": rows })
    }

    /// Addresses holding 1,000,000 USD or more over every dex.
    pub fn whales(&self) -> Vec<&str> {
        self.wallets
            .iter()
            .filter(|(_, w)| w.total_equity() >= 1_000_000)
            .map(|(a, _)| a.as_str())
            .collect()
    }

    /// What the simulation holds: wallets, whales and open interest in USD.
    pub fn truth(&self) -> Value {
        let whales = self.whales().len();
        let mut total: i128 = 0;
        let markets: BTreeMap<&String, String> = self
            .prices
            .iter()
            .map(|(c, px)| {
                let usd = self.open_interest_lots(c) as i128 * *px as i128;
                total += usd;
                (c, ten_thousandths(usd))
            })
            .collect();
        json!({"wallets": self.wallets.len(), "whales": whales,
               "leaderboardRows": self.on_leaderboard.len(),
               "openInterestUsd": ten_thousandths(total), "markets": markets})
    }
}

/// `n / 10^scale` in plain notation.
fn fixed(n: i128, scale: u32) -> String {
    let p = 10i128.pow(scale);
    let sign = if n < 0 { "-" } else { "" };
    let (i, f) = (n.abs() / p, n.abs() % p);
    format!("{sign}{i}.{f:0width$}", width = scale as usize)
}

fn cents(n: i128) -> String {
    fixed(n, 2)
}

fn lots(n: i128) -> String {
    fixed(n, 2)
}

fn ten_thousandths(n: i128) -> String {
    fixed(n, 4)
}

/// The dex of a coin (`xyz` for `xyz:TSLA`, `""` on the main dex).
pub fn dex_of(coin: &str) -> &str {
    coin.split_once(':').map_or("", |(d, _)| d)
}

fn now_ms() -> i64 {
    (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64
}

/// Address of wallet `i`.
pub fn address(i: usize) -> String {
    format!("0x{:040x}", 0x5eed_0000 + i)
}

/// The fake exchange: its world, its knobs and what it saw.
#[derive(Default)]
pub struct Exchange {
    /// The simulated state.
    pub world: Mutex<World>,
    /// Answer the next n info requests with 429.
    pub rate_limit_next: AtomicU32,
    /// The weight a sliding minute may carry; more is answered 429 (`None`: no limit).
    pub weight_per_minute: Option<u32>,
    /// Serve a truncated leaderboard.
    pub truncate_leaderboard: AtomicBool,
    /// (time, weight, type) of every info request received.
    pub log: Mutex<Vec<(Instant, u32, String)>>,
    /// Requests answered 429 because of the weight limit.
    pub rate_limited: AtomicU64,
    /// WebSocket connections accepted.
    pub ws_connections: AtomicU64,
    /// Subscriptions acknowledged.
    pub ws_subscriptions: AtomicU64,
    /// Trades pushed.
    pub trades_sent: AtomicU64,
    /// Account states of flat traders answered (each empty), by address.
    pub flat_reads: Mutex<HashMap<String, u64>>,
    /// The coin of every candle request, in the order received.
    pub candle_coins: Mutex<Vec<String>>,
    window: Mutex<VecDeque<(Instant, u32)>>,
    trades: Mutex<Option<broadcast::Sender<Value>>>,
    kick: Mutex<Option<broadcast::Sender<()>>>,
}

impl Exchange {
    /// The small deterministic world of the tests: `n` wallets with
    /// heavy-tailed account values (value ~ 1 / (rank + 1)^1.2), each with a
    /// position on the main dex, every fourth one on `xyz:TSLA` too.
    pub fn new(n: usize) -> Arc<Exchange> {
        let prices: HashMap<String, i64> = [
            ("BTC", 9_000_000),
            ("ETH", 300_000),
            ("SOL", 15_000),
            ("xyz:TSLA", 35_000),
        ]
        .into_iter()
        .map(|(c, p)| (c.to_owned(), p))
        .collect();
        let dexes = DEXES
            .iter()
            .map(|(d, c)| (d.to_string(), c.iter().map(|c| c.to_string()).collect()))
            .collect();
        let mut world = World::new(dexes, prices);
        for i in 0..n {
            let value = (20_000_000.0 / ((i + 1) as f64).powf(1.2)) as u64 + 1_000;
            let coin = DEXES[0].1[i % 3];
            let px = world.prices[coin];
            let size = (((value as f64 * 0.5) / px as f64 * 100.0) as i64).max(1) * 100;
            let mut positions = vec![FakePosition {
                coin: coin.to_owned(),
                lots: if i % 2 == 0 { size } else { -size },
                entry: px,
            }];
            if i % 4 == 0 {
                positions.push(FakePosition {
                    coin: "xyz:TSLA".into(),
                    lots: 300,
                    entry: 35_000,
                });
            }
            world.put_wallet(&address(i), FakeWallet::new(value, positions));
        }
        world.start_journal();
        Arc::new(Exchange {
            world: Mutex::new(world),
            ..Exchange::default()
        })
    }

    /// A simulated world (see [`SimConfig`]).
    pub fn simulated(cfg: &SimConfig) -> Arc<Exchange> {
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let mut dexes = vec![(
            String::new(),
            MAIN_COINS.iter().map(|(c, _)| c.to_string()).collect(),
        )];
        let mut prices: HashMap<String, i64> = MAIN_COINS
            .iter()
            .map(|(c, p)| (c.to_string(), *p))
            .collect();
        for dex in HIP3.iter().take(cfg.hip3_dexes) {
            let coins: Vec<String> = ["TSLA", "NVDA", "GOLD"]
                .iter()
                .map(|c| format!("{dex}:{c}"))
                .collect();
            for (c, px) in coins.iter().zip([35_000, 18_000, 400_000]) {
                prices.insert(c.clone(), px);
            }
            dexes.push((dex.to_string(), coins));
        }
        let mut world = World::new(dexes, prices);
        for i in 0..cfg.wallets {
            let value = pareto(&mut rng);
            // Past the holders, a wallet starts empty: no equity, no position.
            let value = if cfg.holders.is_some_and(|h| i >= h) {
                0
            } else {
                value
            };
            let mut positions = match cfg.holders {
                Some(h) if i >= h => Vec::new(),
                Some(_) => {
                    let mut p = Vec::new();
                    while p.is_empty() {
                        p = random_positions(&world, &mut rng, value, cfg.max_positions);
                    }
                    p
                }
                None => random_positions(&world, &mut rng, value, cfg.max_positions),
            };
            let mut wallet = FakeWallet::new(value, Vec::new());
            // One whale in ten keeps most of its equity on a HIP-3 dex: a
            // read of the main dex alone sees a shark.
            if value >= 1_000_000 && i % 10 == 3 && world.dexes.len() > 1 {
                let coin = world.dexes[1].1[0].clone();
                positions.retain(|p| p.coin != coin);
                let px = world.prices[&coin];
                let lots = ((value as f64 * 0.5) * 10_000.0 / px as f64) as i64;
                positions.push(FakePosition {
                    coin,
                    lots: lots.max(1),
                    entry: px,
                });
                wallet.account_value = value / 3;
                wallet.hip3_equity = value - value / 3;
            }
            wallet.positions = positions;
            world.put_wallet(&address(i), wallet);
            if cfg.sparse_every > 0 && i % cfg.sparse_every == 1 {
                world.sparse.insert(address(i));
            }
        }
        world.flat = (0..cfg.flat_traders)
            .map(|i| format!("0x{:040x}", 0xf1a7_0000_0000u64 + i as u64))
            .collect();
        // The leaderboard lists the biggest accounts but misses one whale
        // in ten (found only when it trades), then random smaller ones.
        let mut ranked: Vec<usize> = (0..world.wallets.len()).collect();
        ranked.sort_by_key(|&i| std::cmp::Reverse(world.wallets[i].1.total_equity()));
        let mut listed = HashSet::new();
        for &i in &ranked {
            if listed.len() * 10 >= cfg.leaderboard_rows * 9 {
                break;
            }
            if world.wallets[i].1.total_equity() >= 1_000_000 && rng.random_bool(0.1) {
                continue;
            }
            listed.insert(world.wallets[i].0.clone());
        }
        while listed.len() < cfg.leaderboard_rows.min(world.wallets.len()) {
            let i = rng.random_range(0..world.wallets.len());
            listed.insert(world.wallets[i].0.clone());
        }
        world.on_leaderboard = listed;
        world.start_journal();
        Arc::new(Exchange {
            world: Mutex::new(world),
            weight_per_minute: cfg.weight_per_minute,
            ..Exchange::default()
        })
    }

    /// Locks the world.
    pub fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.world.lock().unwrap()
    }

    /// Inserts or replaces a wallet.
    pub fn put_wallet(&self, address: &str, wallet: FakeWallet) {
        self.world().put_wallet(address, wallet);
    }

    /// The price of a coin, cents.
    pub fn price(&self, coin: &str) -> i64 {
        self.world().prices[coin]
    }

    /// Pushes a trade on the WebSocket to the clients subscribed to its coin.
    /// `sz` is in units (`"40"`).
    pub fn trade(&self, coin: &str, sz: &str, buyer: &str, seller: &str) {
        let px = cents(self.price(coin) as i128);
        self.push_trade(coin, &px, sz, buyer, seller);
    }

    fn push_trade(&self, coin: &str, px: &str, sz: &str, buyer: &str, seller: &str) {
        let tid = self.trades_sent.fetch_add(1, Ordering::Relaxed);
        let msg = json!({"channel": "trades", "data": [{
            "coin": coin, "side": "B", "px": px, "sz": sz,
            "hash": format!("0x{tid:064x}"), "time": now_ms(), "tid": tid, "users": [buyer, seller]
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
    pub fn max_weight_in(&self, window: Duration) -> u32 {
        let log = self.log.lock().unwrap();
        let mut max = 0;
        let mut sum = 0;
        let mut start = 0;
        for (t, w, _) in log.iter() {
            sum += w;
            while log[start].0 + window <= *t {
                sum -= log[start].1;
                start += 1;
            }
            max = max.max(sum);
        }
        max
    }

    /// Admits a request of `weight` under the sliding-minute limit.
    fn admit(&self, weight: u32) -> bool {
        let Some(limit) = self.weight_per_minute else {
            return true;
        };
        let now = Instant::now();
        let mut window = self.window.lock().unwrap();
        while window
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) >= Duration::from_secs(60))
        {
            window.pop_front();
        }
        let used: u32 = window.iter().map(|(_, w)| w).sum();
        if used + weight > limit {
            return false;
        }
        window.push_back((now, weight));
        true
    }

    /// One step of the simulated market: prices walk, `trades` trades happen
    /// (pushed on the WebSocket), `new_wallets` wallets appear and trade,
    /// and `flat_trades` round trips of the flat traders are pushed (their
    /// accounts stay empty).
    pub fn step(
        &self,
        rng: &mut ChaCha8Rng,
        trades: usize,
        new_wallets: usize,
        flat_trades: usize,
    ) {
        let mut pushed = Vec::new();
        {
            let mut w = self.world();
            let coins: Vec<String> = w.prices.keys().cloned().collect();
            for c in &coins {
                let px = w.prices[c];
                // ±0.05 % per step, never below one cent
                let step = (px / 2000).max(1) * rng.random_range(-1..=1);
                w.prices.insert(c.clone(), (px + step).max(1));
            }
            for _ in 0..new_wallets {
                let a = format!("0x{:040x}", rng.random::<u128>());
                let value = pareto(rng).max(20_000);
                w.put_wallet(&a, FakeWallet::new(value, Vec::new()));
                let i = w.index[&a];
                if let Some(t) = w.random_trade(rng, Some(i)) {
                    pushed.push(t);
                }
            }
            for _ in 0..trades {
                if let Some(t) = w.random_trade(rng, None) {
                    pushed.push(t);
                }
            }
            for _ in 0..flat_trades {
                if w.flat.len() < 2 {
                    break;
                }
                let a = rng.random_range(0..w.flat.len());
                let b = (a + rng.random_range(1..w.flat.len())) % w.flat.len();
                let coin = w.dexes[0].1[rng.random_range(0..w.dexes[0].1.len())].clone();
                let px = cents(w.prices[&coin] as i128);
                pushed.push((
                    coin,
                    px,
                    "1.00".into(),
                    w.flat[a].clone(),
                    w.flat[b].clone(),
                ));
            }
        }
        for (coin, px, sz, buyer, seller) in pushed {
            self.push_trade(&coin, &px, &sz, &buyer, &seller);
        }
    }
}

/// (coin, px, sz, buyer, seller) of a trade.
type Trade = (String, String, String, String, String);

impl World {
    /// A trade between a wallet picked by size (bigger wallets trade more;
    /// `first` forces one side) and a random counterparty.
    fn random_trade(&mut self, rng: &mut ChaCha8Rng, first: Option<usize>) -> Option<Trade> {
        let n = self.wallets.len();
        if n < 2 {
            return None;
        }
        // Size-biased pick: the larger of a few random draws.
        let pick = |rng: &mut ChaCha8Rng, wallets: &[(String, FakeWallet)]| {
            (0..4)
                .map(|_| rng.random_range(0..wallets.len()))
                .max_by_key(|&i| wallets[i].1.account_value)
                .expect("four draws")
        };
        let a = first.unwrap_or_else(|| pick(rng, &self.wallets));
        // The counterparty is size-biased too, and the trade fits both sides'
        // accounts: money does not drift from the big wallets to the small.
        let b = loop {
            let b = pick(rng, &self.wallets);
            if b != a {
                break b;
            }
        };
        let wa = &self.wallets[a].1;
        let coin = if !wa.positions.is_empty() && rng.random_bool(0.6) {
            wa.positions[rng.random_range(0..wa.positions.len())]
                .coin
                .clone()
        } else {
            random_coin(self, rng)
        };
        let px = self.prices[&coin];
        let capacity = wa.account_value.min(self.wallets[b].1.account_value);
        let notional = capacity as f64 * rng.random_range(0.05..0.8);
        let size = ((notional * 100.0 * 100.0 / px as f64) as i64).max(1);
        let held = wa
            .positions
            .iter()
            .find(|p| p.coin == coin)
            .map_or(0, |p| p.lots);
        // Reduce or close half of the time when something is held.
        let delta = if held != 0 && rng.random_bool(0.5) {
            -held.signum() * size.min(held.abs())
        } else if rng.random_bool(0.5) {
            size
        } else {
            -size
        };
        for (who, d) in [(a, delta), (b, -delta)] {
            let (addr, mut wallet) = self.wallets[who].clone();
            apply(&mut wallet, &coin, d, px);
            self.put_wallet(&addr, wallet);
        }
        let (buyer, seller) = if delta > 0 { (a, b) } else { (b, a) };
        Some((
            coin,
            cents(px as i128),
            lots(delta.abs() as i128),
            self.wallets[buyer].0.clone(),
            self.wallets[seller].0.clone(),
        ))
    }
}

/// Adds `delta` lots of `coin` at `px` to a wallet's position.
fn apply(wallet: &mut FakeWallet, coin: &str, delta: i64, px: i64) {
    match wallet.positions.iter().position(|p| p.coin == coin) {
        None => wallet.positions.push(FakePosition {
            coin: coin.to_owned(),
            lots: delta,
            entry: px,
        }),
        Some(i) => {
            let p = &mut wallet.positions[i];
            let next = p.lots + delta;
            if next == 0 {
                wallet.positions.remove(i);
            } else if next.signum() != p.lots.signum() {
                // flipped: the new side is entered at the trade price
                *p = FakePosition {
                    coin: coin.to_owned(),
                    lots: next,
                    entry: px,
                };
            } else if next.abs() > p.lots.abs() {
                let entry =
                    (p.lots as i128 * p.entry as i128 + delta as i128 * px as i128) / next as i128;
                p.lots = next;
                p.entry = entry as i64;
            } else {
                p.lots = next;
            }
        }
    }
}

/// A Pareto account value (α = 0.65 from 1,000 USD, capped at 300M): about
/// 1 % of wallets hold 1M or more, and they hold most of the money.
fn pareto(rng: &mut ChaCha8Rng) -> u64 {
    let u: f64 = rng.random_range(f64::EPSILON..1.0);
    (1_000.0 / u.powf(1.0 / 0.65)).min(300_000_000.0) as u64
}

/// A coin: on a HIP-3 dex one time in twenty, else on the main dex.
fn random_coin(world: &World, rng: &mut ChaCha8Rng) -> String {
    let dex = if world.dexes.len() > 1 && rng.random_bool(0.05) {
        &world.dexes[rng.random_range(1..world.dexes.len())]
    } else {
        &world.dexes[0]
    };
    dex.1[rng.random_range(0..dex.1.len())].clone()
}

/// Zero to four positions worth up to about three times the account.
fn random_positions(
    world: &World,
    rng: &mut ChaCha8Rng,
    value: u64,
    max: usize,
) -> Vec<FakePosition> {
    let mut out: Vec<FakePosition> = Vec::new();
    for _ in 0..rng.random_range(0..=max) {
        let coin = random_coin(world, rng);
        if out.iter().any(|p| p.coin == coin) {
            continue;
        }
        let px = world.prices[&coin];
        let notional = value as f64 * rng.random_range(0.1..0.8);
        let size = ((notional * 10_000.0 / px as f64) as i64).max(1);
        out.push(FakePosition {
            coin,
            lots: if rng.random_bool(0.5) { size } else { -size },
            entry: px,
        });
    }
    out
}

/// A simulated exchange.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Wallets at start.
    pub wallets: usize,
    /// Rows of the leaderboard.
    pub leaderboard_rows: usize,
    /// Each wallet starts with 0 to this many positions (uniform; about
    /// half of it on average).
    pub max_positions: usize,
    /// HIP-3 dexes besides the main dex (at most 12).
    pub hip3_dexes: usize,
    /// When set, only the first this many wallets start with positions (1
    /// to `max_positions` each); the others start empty (no equity, no
    /// position), as most addresses of a whole exchange are.
    pub holders: Option<usize>,
    /// Trades per second.
    pub trades_per_second: u32,
    /// New wallets per minute.
    pub new_wallets_per_minute: u32,
    /// The weight limit per sliding minute.
    pub weight_per_minute: Option<u32>,
    /// Every n-th wallet's account states leave out `cumFunding` and
    /// `returnOnEquity` and carry an undocumented member (0: none).
    pub sparse_every: usize,
    /// Wallets that trade but hold nothing.
    pub flat_traders: usize,
    /// Round trips of the flat traders per minute.
    pub flat_trades_per_minute: u32,
    /// Random seed.
    pub seed: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            wallets: 200_000,
            leaderboard_rows: 30_000,
            max_positions: 4,
            hip3_dexes: 8,
            holders: None,
            trades_per_second: 20,
            new_wallets_per_minute: 6,
            weight_per_minute: Some(1200),
            sparse_every: 7,
            flat_traders: 100,
            flat_trades_per_minute: 60,
            seed: 1,
        }
    }
}

async fn info(body: web::Json<Value>, ex: web::Data<Arc<Exchange>>) -> HttpResponse {
    let kind = body["type"].as_str().unwrap_or("").to_owned();
    let weight = if kind == "clearinghouseState" { 2 } else { 20 };
    // Every request received is logged, the ones answered 429 too.
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
    if !ex.admit(weight) {
        ex.rate_limited.fetch_add(1, Ordering::Relaxed);
        return HttpResponse::TooManyRequests().finish();
    }
    let dex = body["dex"].as_str().unwrap_or("");
    let w = ex.world();
    match kind.as_str() {
        "perpDexs" => {
            let mut list = vec![Value::Null];
            list.extend(w.dexes.iter().skip(1).map(|(d, _)| {
                json!({"name": d, "fullName": d.to_uppercase(), "deployer": "0x0", "oracleUpdater": null})
            }));
            HttpResponse::Ok().json(list)
        }
        "metaAndAssetCtxs" => HttpResponse::Ok().json(w.meta_and_ctxs(dex)),
        "clearinghouseState" => {
            let user = body["user"].as_str().unwrap_or("");
            if w.flat.iter().any(|f| f == user) {
                *ex.flat_reads
                    .lock()
                    .unwrap()
                    .entry(user.to_owned())
                    .or_default() += 1;
            }
            HttpResponse::Ok().json(w.state(user, dex))
        }
        "candleSnapshot" => {
            let coin = body["req"]["coin"].as_str().unwrap_or("").to_owned();
            ex.candle_coins.lock().unwrap().push(coin);
            HttpResponse::Ok().json(json!([]))
        }
        _ => HttpResponse::BadRequest().finish(),
    }
}

async fn leaderboard(ex: web::Data<Arc<Exchange>>) -> HttpResponse {
    let body = ex.world().leaderboard().to_string();
    if ex.truncate_leaderboard.load(Ordering::SeqCst) {
        return HttpResponse::Ok().body(body[..body.len() / 2].to_owned());
    }
    HttpResponse::Ok()
        .content_type("application/json")
        .body(body)
}

/// The whales' addresses (1,000,000 USD or more over every dex).
async fn whales(ex: web::Data<Arc<Exchange>>) -> HttpResponse {
    let w = ex.world();
    HttpResponse::Ok().json(w.whales())
}

/// Every position change since the start: `[ms, address, coin, lotsBefore, lotsAfter]`.
async fn journal(ex: web::Data<Arc<Exchange>>) -> HttpResponse {
    let w = ex.world();
    HttpResponse::Ok().json(&w.journal)
}

async fn truth(ex: web::Data<Arc<Exchange>>) -> HttpResponse {
    let mut t = ex.world().truth();
    let log = ex.log.lock().unwrap();
    t["requests"] = json!(log.len());
    let mut by_type: BTreeMap<&str, u64> = BTreeMap::new();
    for (_, _, kind) in log.iter() {
        *by_type.entry(kind.as_str()).or_default() += 1;
    }
    t["requestsByType"] = json!(by_type);
    // The shortest gap between two candle requests, and the most in any 60 s.
    let candles: Vec<Instant> = log
        .iter()
        .filter(|(_, _, k)| k == "candleSnapshot")
        .map(|(t, _, _)| *t)
        .collect();
    t["minCandleGapMs"] = json!(candles
        .windows(2)
        .map(|w| (w[1] - w[0]).as_millis() as u64)
        .min());
    let mut most = 0;
    for (i, start) in candles.iter().enumerate() {
        let within = candles[i..]
            .iter()
            .take_while(|t| t.duration_since(*start) < Duration::from_secs(60))
            .count();
        most = most.max(within);
    }
    t["maxCandleRequestsPerMinute"] = json!(most);
    drop(log);
    let flat = ex.flat_reads.lock().unwrap();
    t["flatReads"] = json!(flat.values().sum::<u64>());
    t["flatWalletsReadAgain"] = json!(flat.values().filter(|&&n| n > 1).count());
    t["rateLimited"] = json!(ex.rate_limited.load(Ordering::Relaxed));
    t["tradesSent"] = json!(ex.trades_sent.load(Ordering::Relaxed));
    HttpResponse::Ok().json(t)
}

/// The running fake: its URLs and state.
pub struct FakeExchange {
    /// The exchange.
    pub ex: Arc<Exchange>,
    /// `POST` info URL.
    pub info_url: String,
    /// Leaderboard URL.
    pub leaderboard_url: String,
    /// WebSocket URL.
    pub ws_url: String,
    /// `GET` URL of what the simulation holds.
    pub truth_url: String,
}

/// Starts the small test world with `n` wallets, the first `listed` on the
/// leaderboard; nothing moves unless the test moves it.
pub async fn start(n: usize, listed: usize) -> FakeExchange {
    let ex = Exchange::new(n);
    ex.world().on_leaderboard.extend((0..listed).map(address));
    serve(ex, "127.0.0.1:0", "127.0.0.1:0").await
}

/// Starts a simulated exchange on the given addresses, with its market
/// moving once a second.
pub async fn start_simulated(cfg: &SimConfig, http: &str, ws: &str) -> FakeExchange {
    let ex = Exchange::simulated(cfg);
    let fake = serve(ex.clone(), http, ws).await;
    let cfg = cfg.clone();
    tokio::spawn(async move {
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed.wrapping_add(1));
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let (mut new_share, mut flat_share) = (0, 0);
        loop {
            tick.tick().await;
            // new wallets and flat round trips spread over the minute
            new_share += cfg.new_wallets_per_minute;
            flat_share += cfg.flat_trades_per_minute;
            let (new, flat) = (new_share / 60, flat_share / 60);
            new_share %= 60;
            flat_share %= 60;
            ex.step(
                &mut rng,
                cfg.trades_per_second as usize,
                new as usize,
                flat as usize,
            );
        }
    });
    fake
}

/// Serves `ex`: HTTP (info, leaderboard, truth) on `http`, the WebSocket on `ws`.
pub async fn serve(ex: Arc<Exchange>, http: &str, ws: &str) -> FakeExchange {
    let (trades, _) = broadcast::channel(4096);
    let (kick, _) = broadcast::channel(16);
    *ex.trades.lock().unwrap() = Some(trades.clone());
    *ex.kick.lock().unwrap() = Some(kick.clone());

    let data = web::Data::new(ex.clone());
    let listener = std::net::TcpListener::bind(http).expect("binding the fake's HTTP address");
    let http = listener.local_addr().unwrap();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .app_data(web::JsonConfig::default().limit(1 << 16))
            .route("/info", web::post().to(info))
            .route("/leaderboard", web::get().to(leaderboard))
            .route("/truth", web::get().to(truth))
            .route("/whales", web::get().to(whales))
            .route("/journal", web::get().to(journal))
    })
    .workers(2)
    // The process decides when to stop (the binary: SIGINT or SIGTERM).
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    tokio::spawn(server);

    let ws_listener = tokio::net::TcpListener::bind(ws)
        .await
        .expect("binding the fake's WebSocket address");
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
        truth_url: format!("http://{http}/truth"),
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
    let mut tick = tokio::time::interval(Duration::from_millis(500));
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
                let t = match t {
                    Ok(t) => t,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                let coin = t["data"][0]["coin"].as_str().unwrap_or("").to_owned();
                if coins.contains(&coin) && tx.send(Message::Text(t.to_string().into())).await.is_err() { return; }
            }
            _ = kick.recv() => {
                let _ = tx.send(Message::Close(None)).await;
                return;
            }
            _ = tick.tick() => {
                let all = ctxs.then(|| ex.world().all_ctxs().to_string());
                if let Some(all) = all {
                    if tx.send(Message::Text(all.into())).await.is_err() { return; }
                }
                // An unknown message now and then: the client must shrug it off.
                if tx.send(Message::Text("{\"channel\":\"somethingNew\",\"data\":{}}".into())).await.is_err() { return; }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_plain() {
        assert_eq!(fixed(123456, 2), "1234.56");
        assert_eq!(fixed(-5, 4), "-0.0005");
        assert_eq!(fixed(0, 2), "0.00");
    }

    #[test]
    fn open_interest_follows_every_change() {
        let cfg = SimConfig {
            wallets: 2_000,
            leaderboard_rows: 300,
            ..SimConfig::default()
        };
        let ex = Exchange::simulated(&cfg);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for _ in 0..50 {
            ex.step(&mut rng, 20, 1, 1);
        }
        let w = ex.world();
        let mut sides: HashMap<&str, (i64, i64)> = HashMap::new();
        for (_, wallet) in &w.wallets {
            for p in &wallet.positions {
                let s = sides.entry(p.coin.as_str()).or_default();
                if p.lots > 0 {
                    s.0 += p.lots;
                } else {
                    s.1 -= p.lots;
                }
            }
        }
        for (coin, (l, s)) in sides {
            assert_eq!(w.open_interest_lots(coin), (l + s) / 2, "{coin}");
        }
        assert_eq!(w.len(), 2_050);
        assert_eq!(w.on_leaderboard.len(), 300);
        let whales = w
            .wallets
            .iter()
            .filter(|(_, x)| x.account_value >= 1_000_000)
            .count();
        assert!((5..60).contains(&whales), "{whales} whales in 2,050");
    }

    #[test]
    fn the_weight_limit_holds_per_sliding_minute() {
        let ex = Exchange {
            weight_per_minute: Some(100),
            ..Exchange::default()
        };
        let admitted = (0..60).filter(|_| ex.admit(2)).count();
        assert_eq!(admitted, 50);
        assert!(!ex.admit(2));
    }
}
