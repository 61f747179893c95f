//! Many clients of the position-event stream at once, for the fan-out
//! benchmark (`scripts/bench-stream.sh`).
//!
//! Usage: `streamfan ADDR TOKEN CLIENTS SECONDS DATABASE_URL [QUERY]`. It
//! opens CLIENTS streams to `ADDR` (HTTP/1.0; actix-web chunks the body all
//! the same, which the markers' search ignores),
//! keeps them open for SECONDS after the last one connected, and records
//! when each client received each `data-version` event. Beside them it
//! reads the newest version in the database every 2 ms, which tells when
//! each version committed. It prints, over every (client, version): the
//! delay from the commit to the client's receipt, and the spread from the
//! first client that received a version to each other one (the fan-out
//! alone); then the streams that ended early.
//!
//! With `STREAMFAN_GZIP=1` every client asks for gzip
//! (`Accept-Encoding: gzip`, as browsers do). It keeps what it reads, with
//! when it read it, and inflates it once the run ends: a marker counts as
//! received at the read that completed it, as on a plain stream.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
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

/// What a client reads: the bytes as they come, or, once the head has
/// passed, de-chunked and inflated from gzip.
struct Body {
    /// `None` for a plain stream; else the inflater once the head and the
    /// gzip header have passed.
    gzip: Option<Option<flate2::Decompress>>,
    /// Bytes read before the body was found.
    head: Vec<u8>,
    /// The chunked framing.
    chunks: Dechunk,
    data: Vec<u8>,
    out: Vec<u8>,
}

/// Where the reader is in a chunked body: in a size line (its text so
/// far), in a chunk (bytes left, then its line end).
enum Dechunk {
    Size(Vec<u8>),
    Data(usize),
}

impl Dechunk {
    /// Appends the chunks' data in `bytes` to `out`.
    fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) {
        while !bytes.is_empty() {
            match self {
                Dechunk::Size(line) => {
                    let Some(nl) = memchr::memchr(b'\n', bytes) else {
                        line.extend_from_slice(bytes);
                        return;
                    };
                    line.extend_from_slice(&bytes[..nl]);
                    bytes = &bytes[nl + 1..];
                    let text = String::from_utf8_lossy(line);
                    let text = text.trim();
                    // The line end after a chunk's data reads as an empty line.
                    if !text.is_empty() {
                        let size = usize::from_str_radix(text, 16).expect("a chunk size");
                        *self = Dechunk::Data(size);
                    } else {
                        line.clear();
                    }
                }
                Dechunk::Data(left) => {
                    let n = (*left).min(bytes.len());
                    out.extend_from_slice(&bytes[..n]);
                    bytes = &bytes[n..];
                    *left -= n;
                    if *left == 0 {
                        *self = Dechunk::Size(Vec::new());
                    }
                }
            }
        }
    }
}

impl Body {
    fn new(gzip: bool) -> Body {
        Body {
            gzip: gzip.then_some(None),
            head: Vec::new(),
            chunks: Dechunk::Size(Vec::new()),
            data: Vec::new(),
            out: Vec::with_capacity(256 * 1024),
        }
    }

    /// What `read` adds to the stream's text (the head included, as it is).
    fn text<'a>(&'a mut self, read: &'a [u8]) -> &'a [u8] {
        let Some(inflater) = &mut self.gzip else {
            return read;
        };
        self.out.clear();
        if inflater.is_none() {
            self.head.extend_from_slice(read);
            let Some(end) = memchr::memmem::find(&self.head, b"\r\n\r\n") else {
                return &[];
            };
            let head = String::from_utf8_lossy(&self.head[..end]).to_ascii_lowercase();
            if !head.contains("content-encoding: gzip")
                || !head.contains("transfer-encoding: chunked")
            {
                // Not the gzip stream (a problem, say): read it as it is.
                self.gzip = None;
                return &self.head;
            }
            self.chunks.feed(&self.head[end + 4..], &mut self.data);
            // The body starts with gzip's 10-byte header.
            if self.data.len() < 10 {
                self.data.clear();
                self.chunks = Dechunk::Size(Vec::new());
                return &[];
            }
            *inflater = Some(flate2::Decompress::new(false));
            self.out.extend_from_slice(&self.head[..end + 4]);
            self.data.drain(..10);
        } else {
            self.chunks.feed(read, &mut self.data);
        }
        let inflater = inflater.as_mut().expect("set above");
        let mut input: &[u8] = &self.data;
        loop {
            if self.out.capacity() - self.out.len() < 64 * 1024 {
                self.out.reserve(256 * 1024);
            }
            let before = inflater.total_in();
            let status =
                inflater.decompress_vec(input, &mut self.out, flate2::FlushDecompress::None);
            let taken = (inflater.total_in() - before) as usize;
            input = &input[taken..];
            match status.expect("the stream is valid gzip") {
                flate2::Status::Ok
                    if !input.is_empty() || self.out.capacity() == self.out.len() => {}
                _ => break,
            }
        }
        let left = input.len();
        self.data.drain(..self.data.len() - left);
        &self.out
    }
}

/// A client's finding of the markers in what it reads.
struct Scan {
    body: Body,
    /// The end of the previous read, where a marker may have been cut.
    tail: Vec<u8>,
    mine: Seen,
}

impl Scan {
    /// Counts the markers that `read`, received at `at`, completes.
    fn read(&mut self, read: &[u8], at: f64) {
        self.tail.extend_from_slice(self.body.text(read));
        let found = versions(&self.tail);
        let counted = found.last().map_or(0, |&(_, end)| end);
        self.mine.extend(found.into_iter().map(|(v, _)| (v, at)));
        // Keep what could start a marker that the next read ends, but
        // nothing already counted.
        let keep_from = self.tail.len().saturating_sub(HEAD.len() + 20).max(counted);
        self.tail.drain(..keep_from);
    }
}

async fn client(
    addr: String,
    gzip: bool,
    request: Arc<String>,
    ended: Arc<AtomicUsize>,
    received: Arc<AtomicUsize>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> (Scan, Raw) {
    let mut scan = Scan {
        body: Body::new(gzip),
        tail: Vec::new(),
        mine: Seen::new(),
    };
    let mut raw = Raw::default();
    if let Ok(mut socket) = TcpStream::connect(&addr).await {
        if socket.write_all(request.as_bytes()).await.is_ok() {
            let mut buf = vec![0u8; 64 * 1024];
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
                        if gzip {
                            raw.reads.push((at, buf[..n].to_vec()));
                        } else {
                            scan.read(&buf[..n], at);
                        }
                        if scan.mine.len() > 10_000 {
                            break;
                        }
                    }
                }
            }
        }
    } else {
        ended.fetch_add(1, Ordering::Relaxed);
    }
    (scan, raw)
}

/// A gzip stream's reads, kept as they came (when, and the bytes read)
/// and inflated once every client has stopped: 10,000 clients inflating on
/// the tool's one thread, on the machine the server runs on, would measure
/// the tool (and delay the reads of the clients still open). A client on a
/// machine of its own inflates a version's push in well under a
/// millisecond. Each read is kept in an allocation of its own: one growing
/// buffer a client doubled at the same push in every client (they all
/// receive the same bytes), and 10,000 clients copying 32 or 64 KB at once
/// stalled the tool's thread for a second, which the figures showed as a
/// version's reach.
#[derive(Default)]
struct Raw {
    reads: Vec<(f64, Vec<u8>)>,
}

/// What `scan` found, once it has read `raw` too.
fn finish((mut scan, raw): (Scan, Raw)) -> Seen {
    for (at, read) in raw.reads {
        scan.read(&read, at);
    }
    scan.mine
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
    let gzip = std::env::var("STREAMFAN_GZIP").is_ok_and(|v| v == "1");
    let encoding = if gzip {
        "Accept-Encoding: gzip\r\n"
    } else {
        ""
    };
    let request = Arc::new(format!(
        "GET /v1/networks/perpnet/position-events/stream{query} HTTP/1.0\r\nHost: {addr}\r\nX-API-Key: {token}\r\nAccept: text/event-stream\r\n{encoding}\r\n"
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
    let ended = Arc::new(AtomicUsize::new(0));
    let received = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let clients_found = runtime.block_on(async {
        let mut tasks = Vec::with_capacity(clients);
        for i in 0..clients {
            tasks.push(tokio::spawn(client(
                addr.clone(),
                gzip,
                request.clone(),
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
        let mut found = Vec::with_capacity(clients);
        for t in tasks {
            found.extend(t.await.ok());
        }
        found
    });
    done.store(true, Ordering::Relaxed);
    let committed = watcher.join().expect("the watcher ends");
    let seen: Vec<Seen> = clients_found.into_iter().map(finish).collect();
    report(&seen, &committed, clients, ended.load(Ordering::Relaxed));
    println!(
        "received {:.0} MB in all (as sent: gzip when asked for)",
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
    // Each version: how many clients got it, and when the last one did.
    let mut versions: Vec<i64> = first.keys().copied().collect();
    versions.sort_unstable();
    for v in versions.iter().skip(1) {
        let got: Vec<f64> = seen
            .iter()
            .filter_map(|s| s.iter().skip(1).find(|(sv, _)| sv == v).map(|&(_, at)| at))
            .collect();
        let last = got.iter().copied().fold(f64::MIN, f64::max);
        println!(
            "version {v}: {} clients, commit→first {:.0} ms, first→last {:.0} ms",
            got.len(),
            committed.get(v).map_or(f64::NAN, |c| first[v] - c),
            last - first[v]
        );
    }
    delay.sort_by(f64::total_cmp);
    spread.sort_by(f64::total_cmp);
    println!(
        "clients {clients}, versions committed while open {}, receipts {}, streams ended early {ended}, clients that read the version on connect {}",
        first.len().saturating_sub(1),
        delay.len(),
        seen.iter().filter(|s| !s.is_empty()).count()
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
