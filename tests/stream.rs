//! The position-event stream over real HTTP: replay against the list,
//! resume, filters, problems, a slow consumer cut off, and events pushed live
//! as `track` publishes what it reads from the fake exchange.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use market_store::{PoolOptions, Retention, SnapshotWrite, Store};
use serde_json::Value;

use crate::support::*;

const NET: &str = "/v1/networks/perpnet";
const STREAM: &str = "/v1/networks/perpnet/position-events/stream";

/// One server-sent event (comment-only blocks are skipped).
#[derive(Clone, Debug, PartialEq)]
struct Frame {
    id: Option<String>,
    event: String,
    data: Value,
}

/// A stream being read.
struct Sse {
    res: reqwest::Response,
    buf: Vec<u8>,
    /// Set when the server sent it gzip-encoded.
    gzip: Option<Gunzip>,
}

/// A gzip body inflated as it arrives, its trailer checked at its end.
struct Gunzip {
    /// Header bytes still to skip.
    header: usize,
    inflate: flate2::Decompress,
    crc: crc32fast::Hasher,
    /// What followed the final block: the trailer.
    trailer: Vec<u8>,
    ended: bool,
}

impl Gunzip {
    fn new() -> Gunzip {
        Gunzip {
            header: 10,
            inflate: flate2::Decompress::new(false),
            crc: crc32fast::Hasher::new(),
            trailer: Vec::new(),
            ended: false,
        }
    }

    /// Inflates `bytes` onto `out`: each push is readable as it arrives.
    fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) {
        let skip = self.header.min(bytes.len());
        let at = 10 - self.header;
        assert_eq!(
            bytes[..skip],
            [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff][at..at + skip],
            "a gzip header"
        );
        self.header -= skip;
        bytes = &bytes[skip..];
        let start = out.len();
        while !bytes.is_empty() && !self.ended {
            out.reserve(64 * 1024);
            let before = self.inflate.total_in();
            let status = self
                .inflate
                .decompress_vec(bytes, out, flate2::FlushDecompress::None)
                .expect("a valid deflate stream");
            bytes = &bytes[(self.inflate.total_in() - before) as usize..];
            self.ended = status == flate2::Status::StreamEnd;
        }
        self.crc.update(&out[start..]);
        self.trailer.extend_from_slice(bytes);
    }

    /// Asserts that the body ended with a final block and a trailer that
    /// counts everything inflated.
    fn check_end(&self) {
        assert!(self.ended, "the gzip body has its final block");
        let mut want = self.crc.clone().finalize().to_le_bytes().to_vec();
        want.extend_from_slice(&(self.inflate.total_out() as u32).to_le_bytes());
        assert_eq!(self.trailer, want, "the gzip trailer");
    }
}

impl Sse {
    /// Opens the stream at `query` with optional headers; asserts 200, and
    /// gzip unless the headers ask for an `Accept-Encoding` without it.
    async fn open(app: &TestApp, query: &str, headers: &[(&str, &str)]) -> Sse {
        let res = open_raw(app, query, headers).await;
        assert_eq!(res.status().as_u16(), 200, "{query}");
        assert_eq!(res.headers()["content-type"], "text/event-stream");
        assert_eq!(res.headers()["vary"], "accept-encoding");
        let identity = headers
            .iter()
            .any(|(k, v)| *k == "Accept-Encoding" && !v.contains("gzip"));
        let encoding = res.headers().get("content-encoding");
        if identity {
            assert!(encoding.is_none());
        } else {
            assert_eq!(encoding.unwrap(), "gzip");
        }
        Sse {
            res,
            buf: Vec::new(),
            gzip: (!identity).then(Gunzip::new),
        }
    }

    /// The next event; `None` at the end of the stream; panics when none
    /// comes within `within`.
    async fn next(&mut self, within: Duration) -> Option<Frame> {
        match self.try_next(within).await {
            Ok(frame) => frame,
            Err(_) => panic!("no event within {within:?}"),
        }
    }

    /// The next event, `Ok(None)` at the end, `Err` when none came in time.
    async fn try_next(&mut self, within: Duration) -> Result<Option<Frame>, ()> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..end + 2).collect();
                if let Some(frame) = parse(&block) {
                    return Ok(Some(frame));
                }
            }
            match tokio::time::timeout_at(deadline, self.res.chunk()).await {
                Err(_) => return Err(()),
                Ok(chunk) => match chunk.expect("the stream reads") {
                    Some(bytes) => match &mut self.gzip {
                        Some(gzip) => gzip.feed(&bytes, &mut self.buf),
                        None => self.buf.extend_from_slice(&bytes),
                    },
                    None => {
                        assert!(self.buf.is_empty(), "the stream ends on a whole event");
                        if let Some(gzip) = &self.gzip {
                            gzip.check_end();
                        }
                        return Ok(None);
                    }
                },
            }
        }
    }

    /// The next `n` position events.
    async fn events(&mut self, n: usize) -> Vec<Frame> {
        let mut out = Vec::new();
        while out.len() < n {
            let f = self
                .next(Duration::from_secs(20))
                .await
                .expect("more events");
            if f.event == "position-event" {
                out.push(f);
            }
        }
        out
    }

    /// Asserts that no position event comes within `quiet`.
    async fn no_event(&mut self, quiet: Duration) {
        let started = Instant::now();
        while let Some(left) = quiet.checked_sub(started.elapsed()) {
            match self.try_next(left).await {
                Err(_) => return,
                Ok(Some(f)) if f.event == "data-version" => continue,
                Ok(other) => panic!("expected no event, got {other:?}"),
            }
        }
    }
}

fn parse(block: &[u8]) -> Option<Frame> {
    let text = std::str::from_utf8(block).expect("UTF-8 frames");
    let (mut id, mut event, mut data) = (None, None, None);
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(v) = line.strip_prefix("id: ") {
            id = Some(v.to_owned());
        } else if let Some(v) = line.strip_prefix("event: ") {
            event = Some(v.to_owned());
        } else if let Some(v) = line.strip_prefix("data: ") {
            assert!(data.is_none(), "one data line per event: {text}");
            data = Some(serde_json::from_str(v).expect("data is JSON"));
        } else {
            assert!(
                line.starts_with(':') || line.starts_with("retry: "),
                "unexpected line {line:?}"
            );
        }
    }
    Some(Frame {
        id,
        event: event?,
        data: data.expect("an event has data"),
    })
}

/// Opens the stream with `Accept-Encoding: gzip` unless `headers` name one.
async fn open_raw(app: &TestApp, query: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = app
        .client
        .get(app.url(&format!("{STREAM}{query}")))
        .header("X-API-Key", &app.token);
    if !headers.iter().any(|(k, _)| *k == "Accept-Encoding") {
        req = req.header("Accept-Encoding", "gzip");
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

/// The status of opening the stream at `query`, retried while it is a 429
/// (a place of the key still held by a stream whose client left) for 15 s.
async fn open_once_free(app: &TestApp, query: &str) -> u16 {
    let started = Instant::now();
    loop {
        let status = open_raw(app, query, &[]).await.status().as_u16();
        if status != 429 || started.elapsed() > Duration::from_secs(15) {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every item of the event list at `query`, in stream order (oldest first,
/// ties by address, then symbol).
async fn listed(app: &TestApp, query: &str) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(c) => format!("{NET}/position-events?limit=500{query}&cursor={}", enc(c)),
            None => format!("{NET}/position-events?limit=500{query}"),
        };
        let page = app.get_ok(&url).await;
        out.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    out.sort_by_key(key);
    out
}

fn key(e: &Value) -> (String, String, String) {
    let s = |k: &str| e[k].as_str().unwrap().to_owned();
    (s("observedAt"), s("address"), s("symbol"))
}

/// The live figures of a market-list item, as `data-version` events carry them.
fn figures(market: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for key in [
        "symbol",
        "price",
        "openInterest",
        "longCount",
        "shortCount",
        "longLiquidationValue",
        "shortLiquidationValue",
    ] {
        out.insert(key.to_owned(), market[key].clone());
    }
    Value::Object(out)
}

fn ids(frames: &[Frame]) -> Vec<i64> {
    frames
        .iter()
        .map(|f| f.id.as_deref().unwrap().parse().unwrap())
        .collect()
}

fn data(frames: &[Frame]) -> Vec<Value> {
    frames.iter().map(|f| f.data.clone()).collect()
}

async fn replay_matches_the_list_and_resumes_without_gap_or_duplicate(backend: Backend) {
    let app = spawn_app(backend).await;
    let btc = listed(&app, "&asset=BTC").await;
    assert!(btc.len() > 20, "the demo has BTC events: {}", btc.len());

    let mut s = Sse::open(&app, "?asset=BTC&since=0", &[]).await;
    // On connect: the data version and the asset's market, as served.
    let first = s.next(Duration::from_secs(5)).await.unwrap();
    assert_eq!(first.event, "data-version");
    assert!(first.id.is_none());
    let (version, market) = app.get_versioned(&format!("{NET}/markets/BTC")).await;
    assert_eq!(first.data["version"].to_string(), version);
    assert_eq!(first.data["markets"], Value::Array(vec![figures(&market)]));
    // The replay is the list's items, oldest first, ids growing.
    let all = s.events(btc.len()).await;
    assert_eq!(data(&all), btc);
    let numbers = ids(&all);
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
    s.no_event(Duration::from_millis(500)).await;

    // Resuming after the k-th event gives the rest, by header or by `since`.
    let k = all.len() / 2;
    let id = all[k].id.clone().unwrap();
    let mut by_header = Sse::open(&app, "?asset=BTC", &[("Last-Event-ID", &id)]).await;
    assert_eq!(by_header.events(all.len() - k - 1).await, all[k + 1..]);
    by_header.no_event(Duration::from_millis(300)).await;
    // The header wins over `since`.
    let mut both = Sse::open(&app, "?asset=BTC&since=0", &[("Last-Event-ID", &id)]).await;
    assert_eq!(both.events(1).await[0], all[k + 1]);
    // Not compressed, the same events.
    let mut by_since = Sse::open(
        &app,
        &format!("?asset=BTC&since={id}"),
        &[("Accept-Encoding", "identity")],
    )
    .await;
    assert_eq!(by_since.events(all.len() - k - 1).await, all[k + 1..]);

    // The other filters replay what the list holds under them.
    for (query, encoding) in [
        ("&kind=closed&minValue=10000", "gzip"),
        ("&kind=opened", "identity"),
    ] {
        let want = listed(&app, query).await;
        assert!(!want.is_empty(), "{query}");
        let mut s = Sse::open(
            &app,
            &format!("?since=0{query}"),
            &[("Accept-Encoding", encoding)],
        )
        .await;
        assert_eq!(data(&s.events(want.len()).await), want, "{query}");
        s.no_event(Duration::from_millis(300)).await;
    }
    let wallet = btc[0]["address"].as_str().unwrap().to_owned();
    let want = listed(&app, &format!("&address={wallet}")).await;
    let mut s = Sse::open(&app, &format!("?since=0&address={wallet}"), &[]).await;
    assert_eq!(data(&s.events(want.len()).await), want);

    // Live only: every market on connect (as the list serves them), and no
    // stored event.
    let mut live = Sse::open(&app, "", &[("Accept", "text/event-stream")]).await;
    let first = live.next(Duration::from_secs(5)).await.unwrap();
    let markets = app.get_ok(&format!("{NET}/markets")).await["items"].clone();
    let streamed: BTreeSet<String> = first.data["markets"]
        .as_array()
        .unwrap()
        .iter()
        .map(Value::to_string)
        .collect();
    let listed: BTreeSet<String> = markets
        .as_array()
        .unwrap()
        .iter()
        .map(|m| figures(m).to_string())
        .collect();
    assert_eq!(streamed, listed);
    live.no_event(Duration::from_millis(300)).await;
}

async fn stream_problems_say_what_to_change(backend: Backend) {
    let db = seeded_database(backend);
    let app = start_app_with(
        backend,
        db,
        PoolOptions::default(),
        market_data_server::state::StateOptions {
            max_streams_per_key: 1,
            ..Default::default()
        },
    )
    .await;
    let problem = |res: reqwest::Response, status: u16| async move {
        assert_eq!(res.status().as_u16(), status);
        assert_eq!(res.headers()["content-type"], "application/problem+json");
        res.json::<Value>().await.unwrap()
    };
    let no_key = app.request(STREAM, None).await;
    assert_eq!(problem(no_key, 401).await["status"], 401);
    let html = open_raw(&app, "", &[("Accept", "text/html")]).await;
    let p = problem(html, 406).await;
    assert!(p["detail"].as_str().unwrap().contains("text/event-stream"));
    let bad = open_raw(&app, "", &[("Last-Event-ID", "abc")]).await;
    assert_eq!(
        problem(bad, 400).await["invalidParams"][0]["name"],
        "Last-Event-ID"
    );
    let bad = open_raw(&app, "?since=-1", &[]).await;
    assert_eq!(problem(bad, 400).await["invalidParams"][0]["name"], "since");
    let bad = open_raw(&app, "?from=0", &[]).await;
    assert_eq!(problem(bad, 400).await["invalidParams"][0]["name"], "from");
    let unknown = open_raw(&app, "?asset=NOPE", &[]).await;
    problem(unknown, 404).await;
    let last = app.store.event_bounds().unwrap().last;
    let ahead = open_raw(&app, &format!("?since={}", last + 1), &[]).await;
    let p = problem(ahead, 400).await;
    assert!(
        p["detail"].as_str().unwrap().contains(&last.to_string()),
        "{p}"
    );

    // One stream per key here: the second is a 429 until the first closes.
    let first = Sse::open(&app, "", &[]).await;
    let second = open_raw(&app, "", &[]).await;
    let p = problem(second, 429).await;
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("--max-streams-per-key"),
        "{p}"
    );
    drop(first);
    // The server learns of the close at its next write (at most 10 s).
    assert_eq!(open_once_free(&app, "").await, 200, "the slot is freed");

    // A writer keeping a day of events deletes the demo's older ones: a
    // stream resuming before them is told where it can resume from.
    let store = app.store.clone().with_retention(Retention {
        events_days: 1,
        ..Retention::default()
    });
    tokio::task::spawn_blocking(move || {
        let meta = store.latest_snapshot().unwrap().unwrap();
        let mut version = store.load_snapshot(&meta).unwrap().version;
        version.observed_at = time::OffsetDateTime::now_utc();
        store
            .write_snapshot(
                &SnapshotWrite {
                    source: "demo",
                    version: &version,
                },
                &mut |_, _, _| {},
            )
            .unwrap();
    })
    .await
    .unwrap();
    let pruned = app.store.event_bounds().unwrap().pruned_through;
    assert!(pruned > 0);
    let gone = open_raw(&app, "?since=1", &[]).await;
    let p = problem(gone, 410).await;
    assert_eq!(p["type"], "urn:market-data:problem:gone");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("since={pruned}")),
        "{p}"
    );
    // From there on it resumes (once the earlier stream's slot is freed).
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(open_once_free(&app, &format!("?since={pruned}")).await, 200);
    // `since=0` asks for every stored event: it starts at the oldest kept.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(open_once_free(&app, "?since=0").await, 200);
}

crate::on_both_backends!(
    replay_matches_the_list_and_resumes_without_gap_or_duplicate,
    stream_problems_say_what_to_change,
);

#[tokio::test]
async fn a_stopping_server_ends_its_streams_with_the_id_to_resume_from() {
    let app = spawn_app(Backend::Sqlite).await;
    // HEAD says how the stream would be sent.
    let head = app
        .client
        .head(app.url(STREAM))
        .header("X-API-Key", &app.token)
        .header("Accept-Encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(head.status().as_u16(), 200);
    assert_eq!(head.headers()["content-encoding"], "gzip");
    assert_eq!(head.headers()["content-type"], "text/event-stream");
    // Compressed or not, each stream ends whole (a gzip body with its
    // trailer: `Sse` checks it). A client that takes only brotli or zstd
    // gets the stream as it is: the compression layer never buffers it.
    let mut streams = [
        Sse::open(&app, "", &[]).await,
        Sse::open(&app, "", &[("Accept-Encoding", "identity")]).await,
        Sse::open(&app, "", &[("Accept-Encoding", "br, zstd")]).await,
    ];
    for s in &mut streams {
        assert_eq!(
            s.next(Duration::from_secs(5)).await.unwrap().event,
            "data-version"
        );
    }
    app.state.begin_shutdown();
    let last = app.store.event_bounds().unwrap().last.to_string();
    for s in &mut streams {
        let end = s.next(Duration::from_secs(5)).await.unwrap();
        assert_eq!(end.event, "closing");
        assert_eq!(end.id.as_ref(), Some(&last));
        assert_eq!(end.data["resumeFrom"], last);
        assert_eq!(s.next(Duration::from_secs(5)).await, None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_consumer_is_cut_off_with_the_id_to_resume_from() {
    let db = seeded_database(Backend::Sqlite);
    let app = start_app_with(
        Backend::Sqlite,
        db,
        PoolOptions::default(),
        market_data_server::state::StateOptions {
            stream_buffer: 4,
            ..Default::default()
        },
    )
    .await;
    // Not compressed: the 400 pushes below fill the socket's buffers then
    // (in gzip they are a fifth as large, and may all fit).
    let mut s = Sse::open(&app, "", &[("Accept-Encoding", "identity")]).await;
    assert_eq!(
        s.next(Duration::from_secs(5)).await.unwrap().event,
        "data-version"
    );
    let last = app.store.event_bounds().unwrap().last;
    // The client reads nothing while the hub pushes far more than the
    // socket and the shared buffer hold: every market, changed, 400 times.
    let (state, store) = (app.state.clone(), app.store.clone());
    tokio::task::spawn_blocking(move || {
        let empty = market_data_server::state::empty_snapshot();
        let served = state.snapshot();
        for _ in 0..400 {
            state.stream.publish(&store, &empty, &served).unwrap();
        }
    })
    .await
    .unwrap();
    // What the socket held comes first, then the end with its resume id.
    let mut versions = 0;
    let end = loop {
        let f = s.next(Duration::from_secs(20)).await.expect("an end event");
        if f.event == "data-version" {
            versions += 1;
            continue;
        }
        break f;
    };
    assert!(
        versions < 400,
        "the client was cut off, not served everything"
    );
    assert_eq!(end.event, "lagged");
    assert_eq!(end.id, Some(last.to_string()));
    assert_eq!(end.data["resumeFrom"], last.to_string());
    assert_eq!(
        s.next(Duration::from_secs(5)).await,
        None,
        "then the stream ends"
    );
    assert_eq!(app.state.stream.stats().1, 1);
}

/// `track` against the fake exchange, with a server and its reloader on
/// the same SQLite file: events reach open streams as they are published;
/// a client that reconnects again and again, while publishes go on, ends up
/// with exactly the list's events since it first connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn live_events_reach_streams_and_reconnects_lose_nothing() {
    let fake = fake_exchange::start(60, 40).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("live.db").to_str().unwrap().to_owned();
    let store = Store::open(&db, PoolOptions::default()).unwrap();
    store.migrate().unwrap();
    let app = start_app(
        Backend::Sqlite,
        TestDatabase::Sqlite {
            url: db.clone(),
            _dir: tempfile::tempdir().unwrap(),
        },
        PoolOptions::default(),
    )
    .await;
    app.state.spawn_reloader();
    // Every wallet is read again each second.
    let second = time::Duration::seconds(1);
    let intervals = market_tracker::Intervals {
        refresh: [second; 5],
        whale_deadline: second,
        ..Default::default()
    };
    let (tracker, stop) =
        crate::tracker::library_tracker(&fake, store, 4000, Duration::from_secs(1), intervals);
    let run = {
        let tracker = tracker.clone();
        std::thread::spawn(move || tracker.run())
    };
    // The leaderboard's wallets are served.
    let started = Instant::now();
    while app.get_ok(&format!("{NET}/wallets?limit=1")).await["total"]
        .as_u64()
        .unwrap()
        < 40
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "wallets served"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let whale = fake_exchange::address(3);
    let mut all = Sse::open(&app, "", &[]).await;
    let mut one = Sse::open(
        &app,
        &format!("?address={whale}"),
        &[("Accept-Encoding", "identity")],
    )
    .await;
    let position = |lots: i64| fake_exchange::FakePosition {
        coin: "ETH".into(),
        lots,
        entry: fake.ex.price("ETH"),
    };
    fake.ex.put_wallet(
        &whale,
        fake_exchange::FakeWallet::new(9_000_000, vec![position(-70_000)]),
    );
    // The whale's new position arrives on both streams (after the close of
    // what it held before, if anything).
    let seen = loop {
        let f = one.next(Duration::from_secs(30)).await.unwrap();
        if f.event != "position-event" {
            continue;
        }
        assert_eq!(f.data["address"], whale.as_str());
        if f.data["symbol"] == "ETH" {
            break f;
        }
        assert_eq!(f.data["kind"], "closed", "{f:?}");
    };
    assert_eq!(seen.data["direction"], "short");
    assert_eq!(dec(&seen.data["size"]), dec(&Value::from("700")));
    let mut received: Vec<Frame> = Vec::new();
    loop {
        let f = all.next(Duration::from_secs(30)).await.unwrap();
        if f.event == "position-event" {
            let done = f.id == seen.id;
            received.push(f);
            if done {
                break;
            }
        }
    }

    // Wallets keep changing while the client drops its stream and resumes
    // it with the last id it saw, again and again.
    let changing = Arc::new(AtomicBool::new(true));
    let trader = {
        let (ex, changing) = (fake.ex.clone(), changing.clone());
        std::thread::spawn(move || {
            let mut round = 0i64;
            while changing.load(Ordering::SeqCst) {
                round += 1;
                for i in 5..12 {
                    let lots = 10_000 * (1 + (round + i as i64) % 4);
                    let p = fake_exchange::FakePosition {
                        coin: "BTC".into(),
                        lots: if i % 2 == 0 { lots } else { -lots },
                        entry: ex.price("BTC"),
                    };
                    ex.put_wallet(
                        &fake_exchange::address(i),
                        fake_exchange::FakeWallet::new(5_000_000, vec![p]),
                    );
                }
                std::thread::sleep(Duration::from_millis(400));
            }
        })
    };
    drop(all);
    for round in 0..6 {
        let last = received.last().unwrap().id.clone().unwrap();
        let encoding = ["gzip", "identity"][round % 2];
        let mut s = Sse::open(
            &app,
            "",
            &[("Last-Event-ID", &last), ("Accept-Encoding", encoding)],
        )
        .await;
        let until = Instant::now() + Duration::from_millis(1500);
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match s.try_next(left).await {
                Ok(Some(f)) if f.event == "position-event" => received.push(f),
                Ok(Some(_)) => {}
                Ok(None) => panic!("the stream ended"),
                Err(_) => break,
            }
        }
    }
    changing.store(false, Ordering::SeqCst);
    trader.join().unwrap();
    stop.store(true, Ordering::SeqCst);
    tokio::task::spawn_blocking(move || run.join().unwrap())
        .await
        .unwrap();
    // Whatever the last stream missed is read by one more resume.
    let last = received.last().unwrap().id.clone().unwrap();
    let mut s = Sse::open(&app, "", &[("Last-Event-ID", &last)]).await;
    while let Ok(Some(f)) = s.try_next(Duration::from_secs(3)).await {
        if f.event == "position-event" {
            received.push(f);
        }
    }

    let numbers = ids(&received);
    assert!(
        numbers.windows(2).all(|w| w[0] < w[1]),
        "ids grow, no duplicate: {numbers:?}"
    );
    assert!(received.len() > 10, "the wallets' changes were streamed");
    // Exactly the list's events from the first one streamed on.
    let from = received[0].data["observedAt"].as_str().unwrap().to_owned();
    let want = listed(&app, &format!("&from={from}")).await;
    assert_eq!(data(&received), want);
}

/// Two replicas on one PostgreSQL database: a version committed by a writer
/// reaches the streams of both, woken by its notification rather than by
/// their poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_streams_a_commit_soon_after_it() {
    if pg_admin_url().is_none() {
        eprintln!("TEST_DATABASE_URL is not set: the PostgreSQL variant is skipped");
        return;
    }
    let a = spawn_app(Backend::Postgres).await;
    let b = start_app(
        Backend::Postgres,
        TestDatabase::Shared(a.db.url().to_owned()),
        PoolOptions::default(),
    )
    .await;
    a.state.spawn_reloader();
    b.state.spawn_reloader();
    let mut streams = [
        Sse::open(&a, "", &[]).await,
        Sse::open(&b, "", &[("Accept-Encoding", "identity")]).await,
    ];
    for s in &mut streams {
        assert_eq!(
            s.next(Duration::from_secs(5)).await.unwrap().event,
            "data-version"
        );
    }
    // A writer doubles one position (an `increased` event) in a new version.
    let writer = Store::open(a.db.url(), PoolOptions::default()).unwrap();
    let (address, symbol, committed) = tokio::task::spawn_blocking(move || {
        let meta = writer.latest_snapshot().unwrap().unwrap();
        let mut version = writer.load_snapshot(&meta).unwrap().version;
        version.observed_at = time::OffsetDateTime::now_utc();
        let p = &mut version.positions[0];
        p.size = market_model::Decimal(&p.size.0 * bigdecimal::BigDecimal::from(2));
        let key = (p.address.clone(), p.symbol.clone());
        writer
            .write_snapshot(
                &SnapshotWrite {
                    source: "demo",
                    version: &version,
                },
                &mut |_, _, _| {},
            )
            .unwrap();
        (key.0, key.1, Instant::now())
    })
    .await
    .unwrap();
    for s in &mut streams {
        let f = loop {
            let f = s.next(Duration::from_secs(10)).await.unwrap();
            if f.event == "position-event" {
                break f;
            }
        };
        eprintln!("streamed {:?} after the commit", committed.elapsed());
        assert_eq!(f.data["address"], address.as_str());
        assert_eq!(f.data["symbol"], symbol.as_str());
        assert_eq!(f.data["kind"], "increased");
    }
}
