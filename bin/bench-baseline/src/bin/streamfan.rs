//! Many clients of the position-event stream at once, for the fan-out
//! benchmark (`scripts/bench-stream.sh`).
//!
//! Usage: `streamfan ADDR TOKEN CLIENTS SECONDS DATABASE_URL [QUERY]`. It
//! opens CLIENTS streams to `ADDR` (HTTP/1.0, so the body is not chunked),
//! keeps them open for SECONDS after the last one connected, and records
//! when each client received each `data-version` event. Beside them it
//! reads the newest version in the database every 2 ms, which tells when
//! each version committed. It prints, over every (client, version): the
//! delay from the commit to the client's receipt, and the spread from the
//! first client that received a version to each other one (the fan-out
//! alone); then the streams that ended early.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// (version, received at as Unix ms) of one client.
type Seen = Vec<(i64, f64)>;

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
        * 1000.0
}

/// The marker of a `data-version` event, followed by its version number.
const HEAD: &[u8] = b"event: data-version\ndata: {\"version\":";

/// The versions of the whole `data-version` markers in `frames`, each with
/// where its number ends (bytes, searched without decoding: the tool must
/// cost far less than the server).
fn versions(frames: &[u8]) -> Vec<(i64, usize)> {
    memchr::memmem::find_iter(frames, HEAD)
        .filter_map(|at| {
            let start = at + HEAD.len();
            let len = frames[start..].iter().position(|b| !b.is_ascii_digit())?;
            let v = std::str::from_utf8(&frames[start..start + len])
                .ok()?
                .parse()
                .ok()?;
            Some((v, start + len))
        })
        .collect()
}

/// Reads the newest version every 2 ms until `stop`; when each was first
/// seen committed, in Unix ms.
fn commits(url: &str, stop: &std::sync::atomic::AtomicBool) -> HashMap<i64, f64> {
    let store = market_store::Store::open(url, market_store::PoolOptions::default())
        .expect("the database opens");
    let mut seen = HashMap::new();
    while !stop.load(Ordering::Relaxed) {
        if let Ok(Some(meta)) = store.latest_snapshot() {
            seen.entry(meta.version).or_insert_with(now_ms);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    seen
}

async fn client(
    addr: String,
    request: Arc<String>,
    seen: Arc<Mutex<Vec<Seen>>>,
    ended: Arc<AtomicUsize>,
    received: Arc<AtomicUsize>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut mine = Seen::new();
    if let Ok(mut socket) = TcpStream::connect(&addr).await {
        if socket.write_all(request.as_bytes()).await.is_ok() {
            let mut buf = vec![0u8; 64 * 1024];
            // The end of the previous read, where a marker may have been cut.
            let mut tail: Vec<u8> = Vec::new();
            loop {
                let read = tokio::select! {
                    read = socket.read(&mut buf) => read,
                    _ = stop.changed() => break,
                };
                match read {
                    Ok(0) | Err(_) => {
                        ended.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    Ok(n) => {
                        let at = now_ms();
                        received.fetch_add(n, Ordering::Relaxed);
                        tail.extend_from_slice(&buf[..n]);
                        let found = versions(&tail);
                        let counted = found.last().map_or(0, |&(_, end)| end);
                        mine.extend(found.into_iter().map(|(v, _)| (v, at)));
                        // Keep what could start a marker that the next read
                        // ends, but nothing already counted.
                        let keep_from = tail.len().saturating_sub(HEAD.len() + 20).max(counted);
                        tail.drain(..keep_from);
                        if mine.len() > 10_000 {
                            break;
                        }
                    }
                }
            }
        }
    } else {
        ended.fetch_add(1, Ordering::Relaxed);
    }
    seen.lock().expect("never poisoned").push(mine);
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        eprintln!("usage: streamfan ADDR TOKEN CLIENTS SECONDS DATABASE_URL [QUERY]");
        std::process::exit(2);
    }
    let (addr, token) = (args[1].clone(), &args[2]);
    let clients: usize = args[3].parse().expect("CLIENTS is a number");
    let seconds: u64 = args[4].parse().expect("SECONDS is a number");
    let url = args[5].clone();
    let query = args.get(6).cloned().unwrap_or_default();
    let request = Arc::new(format!(
        "GET /v1/networks/perpnet/position-events/stream{query} HTTP/1.0\r\nHost: {addr}\r\nX-API-Key: {token}\r\nAccept: text/event-stream\r\n\r\n"
    ));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let done = done.clone();
        std::thread::spawn(move || commits(&url, &done))
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let ended = Arc::new(AtomicUsize::new(0));
    let received = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    runtime.block_on(async {
        let mut tasks = Vec::with_capacity(clients);
        for i in 0..clients {
            tasks.push(tokio::spawn(client(
                addr.clone(),
                request.clone(),
                seen.clone(),
                ended.clone(),
                received.clone(),
                stopped.clone(),
            )));
            // Connect in steps, as a crowd would, not in one burst.
            if i % 500 == 499 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        eprintln!("{clients} streams opened");
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        let _ = stop.send(true);
        for t in tasks {
            let _ = t.await;
        }
    });
    done.store(true, Ordering::Relaxed);
    let committed = watcher.join().expect("the watcher ends");
    let seen = seen.lock().expect("never poisoned");
    report(&seen, &committed, clients, ended.load(Ordering::Relaxed));
    println!(
        "received {:.0} MB in all",
        received.load(Ordering::Relaxed) as f64 / 1e6
    );
}

fn report(seen: &[Seen], committed: &HashMap<i64, f64>, clients: usize, ended: usize) {
    let mut first: HashMap<i64, f64> = HashMap::new();
    for s in seen {
        for &(v, at) in s {
            let f = first.entry(v).or_insert(at);
            *f = f.min(at);
        }
    }
    let mut delay: Vec<f64> = Vec::new();
    let mut spread: Vec<f64> = Vec::new();
    for s in seen {
        // The version current on connect was committed before it.
        for &(v, at) in s.iter().skip(1) {
            if let Some(c) = committed.get(&v) {
                delay.push(at - c);
            }
            spread.push(at - first[&v]);
        }
    }
    delay.sort_by(f64::total_cmp);
    spread.sort_by(f64::total_cmp);
    println!(
        "clients {clients}, versions committed while open {}, receipts {}, streams ended early {ended}",
        first.len().saturating_sub(1),
        delay.len()
    );
    for (name, xs) in [
        ("commit→received", &delay),
        ("first client→each client", &spread),
    ] {
        println!(
            "{name}: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
            percentile(xs, 0.5),
            percentile(xs, 0.99),
            percentile(xs, 1.0)
        );
    }
}
