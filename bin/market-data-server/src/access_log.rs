//! The access log: one line per request, written off the request path.
//!
//! A worker only captures the request's facts and hands them to a bounded
//! queue (`try_send`: it never waits). One writer thread formats the lines,
//! as text or JSON, into a buffer that it flushes whenever the queue runs
//! empty: one `write` for a burst of requests instead of a locked,
//! unbuffered stderr write for each (which cost small responses about a
//! quarter of their throughput). If the writer falls behind and the queue
//! fills, lines are dropped and counted, and the count is written when the
//! writer catches up: logging never slows the API down.
//!
//! `RUST_LOG` still governs it as the log target `access`
//! (`RUST_LOG=info,access=off` turns it off).

use std::io::Write;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix_web::body::{BodySize, MessageBody};
use actix_web::dev::ServiceResponse;
use actix_web::http::{header::HeaderValue, Method, Version};
use serde::Serialize;
use time::OffsetDateTime;

use crate::request_id::REQUEST_ID;
use crate::tokens::has_key_like_query;

/// Lines the queue holds before new ones are dropped.
pub const QUEUE: usize = 65_536;

/// How lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `[time INFO  access] ip "GET /path HTTP/1.1" status bytes 0.123456ms rid=…`,
    /// the line the log had before it moved off the request path.
    #[default]
    Text,
    /// One JSON object per line (`time`, `remote`, `method`, `path`,
    /// `version`, `status`, `bytes`, `durationMs`, `requestId`).
    Json,
}

/// What is known of one request when its response is ready.
#[derive(Debug, Clone)]
pub struct Entry {
    /// When the response was ready (lines show whole seconds).
    pub at: OffsetDateTime,
    /// The peer address (the proxy's, behind one).
    pub remote: Option<IpAddr>,
    /// The method.
    pub method: Method,
    /// Path and query (a query naming a key-like parameter is redacted).
    pub path: String,
    /// The HTTP version.
    pub version: Version,
    /// The response status.
    pub status: u16,
    /// Body bytes, when known before sending (`None` for a compressed stream).
    pub bytes: Option<u64>,
    /// Time to produce the response.
    pub duration: Duration,
    /// The `X-Request-Id` answered.
    pub request_id: Option<HeaderValue>,
}

enum Message {
    Line(Box<Entry>),
    /// Write out everything queued, then answer.
    Flush(SyncSender<()>),
}

/// The handle workers log through.
pub struct AccessLog {
    tx: SyncSender<Message>,
    dropped: Arc<AtomicU64>,
}

impl AccessLog {
    /// Starts the writer thread over `sink` with a queue of `capacity` lines.
    pub fn start(format: Format, sink: Box<dyn Write + Send>, capacity: usize) -> Arc<AccessLog> {
        let (tx, rx) = mpsc::sync_channel(capacity);
        let dropped = Arc::new(AtomicU64::new(0));
        let counter = dropped.clone();
        std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || write_lines(rx, format, sink, &counter))
            .expect("spawning the access-log writer");
        Arc::new(AccessLog { tx, dropped })
    }

    /// Queues a line; drops it (counted) when the queue is full.
    pub fn record(&self, entry: Entry) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(Message::Line(Box::new(entry))) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Waits (at most `timeout`) until every line queued so far is written:
    /// at shutdown, so the last requests are not lost.
    pub fn flush(&self, timeout: Duration) -> bool {
        let (ack, done) = mpsc::sync_channel(1);
        // `send` waits for room: the queue may be full.
        let sender = self.tx.clone();
        std::thread::spawn(move || sender.send(Message::Flush(ack)));
        done.recv_timeout(timeout).is_ok()
    }

    /// Lines dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// How long the writer lets lines gather while requests keep coming.
/// Sleeping, not waiting on the queue, is the point: a worker only wakes
/// the writer (a futex call, and a context switch on a busy machine) when
/// the writer waits on the queue, which it does only once the queue is
/// empty after a pause. So a busy server pays one wake-up per batch instead
/// of one per request, and a quiet server's lines still appear at once.
const BATCH_PAUSE: Duration = Duration::from_millis(20);

fn write_lines(
    rx: Receiver<Message>,
    format: Format,
    sink: Box<dyn Write + Send>,
    dropped: &AtomicU64,
) {
    let mut out = std::io::BufWriter::with_capacity(64 << 10, sink);
    let mut formatter = Formatter::new(format);
    let mut reported = 0;
    // Waits on the queue while idle.
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        loop {
            let mut acks = Vec::new();
            while let Some(message) = next {
                match message {
                    // A failed write (a closed stderr) must not stop the server.
                    Message::Line(entry) => {
                        let _ = out.write_all(formatter.line(&entry).as_bytes());
                    }
                    Message::Flush(ack) => acks.push(ack),
                }
                next = rx.try_recv().ok();
            }
            let total = dropped.load(Ordering::Relaxed);
            if total > reported {
                let _ = writeln!(
                    out,
                    "[{} WARN  access] {} access-log lines dropped: the writer fell behind",
                    rfc3339(OffsetDateTime::now_utc()),
                    total - reported
                );
                reported = total;
            }
            let _ = out.flush();
            for ack in acks {
                let _ = ack.send(());
            }
            std::thread::sleep(BATCH_PAUSE);
            next = rx.try_recv().ok();
            if next.is_none() {
                break;
            }
        }
    }
}

fn rfc3339(t: OffsetDateTime) -> String {
    market_model::timestamp::format_utc(t)
}

/// Formats lines into one reused buffer, formatting the time once per
/// second rather than once per line.
struct Formatter {
    format: Format,
    line: String,
    /// The last second formatted, and its RFC 3339 text.
    second: (i64, String),
}

impl Formatter {
    fn new(format: Format) -> Formatter {
        Formatter {
            format,
            line: String::with_capacity(256),
            second: (i64::MIN, String::new()),
        }
    }

    fn line(&mut self, entry: &Entry) -> &str {
        let second = entry.at.unix_timestamp();
        if second != self.second.0 {
            let whole = entry.at.replace_nanosecond(0).unwrap_or(entry.at);
            self.second = (second, rfc3339(whole));
        }
        self.line.clear();
        format_entry(&mut self.line, self.format, entry, &self.second.1);
        &self.line
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonLine<'a> {
    time: &'a str,
    level: &'static str,
    target: &'static str,
    remote: Option<IpAddr>,
    method: &'a str,
    path: &'a str,
    version: &'static str,
    status: u16,
    bytes: Option<u64>,
    duration_ms: f64,
    request_id: Option<&'a str>,
}

fn version(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

/// Appends `entry`'s line (with its newline) to `out`; `time` is
/// `entry.at` in RFC 3339.
fn format_entry(out: &mut String, format: Format, entry: &Entry, time: &str) {
    use std::fmt::Write as _;
    let rid = entry.request_id.as_ref().and_then(|v| v.to_str().ok());
    let ms = entry.duration.as_secs_f64() * 1e3;
    match format {
        Format::Text => {
            let _ = write!(out, "[{time} INFO  access] ");
            match entry.remote {
                Some(ip) => {
                    let _ = write!(out, "{ip}");
                }
                None => out.push('-'),
            }
            let _ = write!(
                out,
                " \"{} {} {}\" {} ",
                entry.method,
                entry.path,
                version(entry.version),
                entry.status,
            );
            match entry.bytes {
                Some(b) => {
                    let _ = write!(out, "{b}");
                }
                None => out.push('-'),
            }
            let _ = writeln!(out, " {ms:.6}ms rid={}", rid.unwrap_or("-"));
        }
        Format::Json => {
            let line = JsonLine {
                time,
                level: "info",
                target: "access",
                remote: entry.remote,
                method: entry.method.as_str(),
                path: &entry.path,
                version: version(entry.version),
                status: entry.status,
                bytes: entry.bytes,
                duration_ms: (ms * 1e3).round() / 1e3,
                request_id: rid,
            };
            out.push_str(&serde_json::to_string(&line).expect("a log line serializes"));
            out.push('\n');
        }
    }
}

impl AccessLog {
    /// Queues the line of an answered request that arrived at `start`.
    /// Called by the outermost middleware (`request_context`), so it sees
    /// every answer, the rejections of the other middleware included; the
    /// facts are read from the response's request, after the fact, so a
    /// request costs no work before it is handled.
    pub fn log_response<B: MessageBody>(&self, res: &ServiceResponse<B>, start: Instant) {
        let req = res.request();
        let path = match req.uri().query() {
            Some(q) if has_key_like_query(q) => format!("{}?<redacted>", req.path()),
            _ => req
                .uri()
                .path_and_query()
                .map_or_else(|| req.path().to_owned(), |pq| pq.as_str().to_owned()),
        };
        let bytes = match res.response().body().size() {
            BodySize::Sized(n) => Some(n),
            BodySize::None => Some(0),
            BodySize::Stream => None,
        };
        self.record(Entry {
            at: OffsetDateTime::now_utc(),
            remote: req.peer_addr().map(|a| a.ip()),
            method: req.method().clone(),
            path,
            version: req.version(),
            status: res.status().as_u16(),
            bytes,
            duration: start.elapsed(),
            request_id: res.headers().get(&REQUEST_ID).cloned(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Condvar, Mutex};

    fn entry(status: u16) -> Entry {
        Entry {
            at: time::macros::datetime!(2026-11-24 12:00:00 UTC),
            remote: Some("127.0.0.1".parse().unwrap()),
            method: Method::GET,
            path: "/v1/networks/perpnet/markets?sort=openInterest".into(),
            version: Version::HTTP_11,
            status,
            bytes: Some(319),
            duration: Duration::from_micros(1234),
            request_id: Some(HeaderValue::from_static("66bbd01081b867cf")),
        }
    }

    #[test]
    fn text_lines_keep_the_former_format() {
        let mut text = Formatter::new(Format::Text);
        let mut e = entry(200);
        // Lines carry whole seconds, like the other log lines.
        e.at += Duration::from_millis(700);
        assert_eq!(
            text.line(&e),
            "[2026-11-24T12:00:00Z INFO  access] 127.0.0.1 \"GET /v1/networks/perpnet/markets?sort=openInterest HTTP/1.1\" 200 319 1.234000ms rid=66bbd01081b867cf\n"
        );
    }

    #[test]
    fn json_lines_are_one_object_each() {
        let mut json = Formatter::new(Format::Json);
        let mut e = entry(404);
        e.bytes = None;
        let out = json.line(&e).to_owned();
        assert!(out.ends_with('\n') && out.matches('\n').count() == 1);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["status"], 404);
        assert_eq!(v["bytes"], serde_json::Value::Null);
        assert_eq!(v["durationMs"], 1.234);
        assert_eq!(v["path"], "/v1/networks/perpnet/markets?sort=openInterest");
        assert_eq!(v["requestId"], "66bbd01081b867cf");
        assert_eq!(v["time"], "2026-11-24T12:00:00Z");
    }

    /// A sink that blocks until released, like a stalled pipe.
    #[derive(Clone)]
    struct Gate(Arc<(Mutex<bool>, Condvar)>, Arc<Mutex<Vec<u8>>>);
    impl Write for Gate {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let (open, cv) = &*self.0;
            let mut o = open.lock().unwrap();
            while !*o {
                o = cv.wait(o).unwrap();
            }
            self.1.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stalled_sink_drops_and_counts_lines_instead_of_blocking_requests() {
        let gate = Gate(Arc::default(), Arc::default());
        let log = AccessLog::start(Format::Text, Box::new(gate.clone()), 8);
        let start = Instant::now();
        // The writer takes a first burst and blocks in `write`; the queue
        // fills; the rest are dropped without waiting.
        for _ in 0..10_000 {
            log.record(entry(200));
        }
        assert!(start.elapsed() < Duration::from_secs(2));
        let dropped = log.dropped();
        assert!(dropped > 9_000, "{dropped}");
        {
            let (open, cv) = &*gate.0;
            *open.lock().unwrap() = true;
            cv.notify_all();
        }
        assert!(log.flush(Duration::from_secs(5)));
        let text = String::from_utf8(gate.1.lock().unwrap().clone()).unwrap();
        let written = text.lines().filter(|l| l.contains("INFO  access")).count() as u64;
        assert_eq!(
            written + dropped,
            10_000,
            "every line is written or counted"
        );
        // Reported as they happen, possibly in several lines.
        let reported: u64 = text
            .lines()
            .filter_map(|l| {
                l.split(" access-log lines dropped")
                    .next()
                    .filter(|_| l.contains("lines dropped"))
            })
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(reported, dropped);
    }
}
