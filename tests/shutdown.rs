//! Graceful shutdown of the real binary: on SIGTERM it stops accepting
//! connections, answers the requests in flight, writes token usage for every
//! answer and exits 0; a request that outlives `--shutdown-timeout` does not
//! hold the stop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use market_data_server::tokens;
use market_store::{PoolOptions, Store};

use crate::support::*;

const MARKET: &str = "/v1/networks/perpnet/markets/BTC";

/// `serve` as its own process, killed if a test fails before it exits.
pub(crate) struct Server {
    child: Child,
    pub(crate) addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(db: &TestDatabase, shutdown_timeout: u64, log: &Path) -> Server {
        // The load of 8 clients on one key is far over the default limit.
        Server::start_with(
            db,
            &[
                "--shutdown-timeout",
                &shutdown_timeout.to_string(),
                "--rate-limit",
                "off",
            ],
            log,
        )
    }

    /// `serve` on a free port with two workers and the `extra` arguments;
    /// its log goes to `log`.
    pub(crate) fn start_with(db: &TestDatabase, extra: &[&str], log: &Path) -> Server {
        let child = Command::new(env!("CARGO_BIN_EXE_market-data-server"))
            .args(["serve", "--bind", "127.0.0.1:0", "--workers", "2"])
            .args(extra)
            .args(["--database-url", db.url()])
            .env("RUST_LOG", "info")
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let addr = loop {
            let text = std::fs::read_to_string(log).unwrap();
            if let Some(rest) = text.split("listening on http://").nth(1) {
                break rest.split_whitespace().next().unwrap().to_owned();
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the server did not start:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        Server { child, addr }
    }

    /// `kill -9`.
    pub(crate) fn kill_hard(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    pub(crate) fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The exit status, waiting at most `limit`.
    pub(crate) async fn exit_within(&mut self, limit: Duration) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(started.elapsed() < limit, "still running after {limit:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A connection that sent all of a request but its last line: in flight
/// from the client's side, and held open by the server.
struct Partial(TcpStream);

impl Partial {
    fn open(addr: &str, path: &str, token: Option<&str>) -> Partial {
        let mut stream = TcpStream::connect(addr).unwrap();
        let key = token.map_or_else(String::new, |t| format!("X-API-Key: {t}\r\n"));
        write!(stream, "GET {path} HTTP/1.1\r\nHost: test\r\n{key}").unwrap();
        stream.flush().unwrap();
        Partial(stream)
    }

    /// Sends the blank line that ends the request and reads the answer to
    /// its end: (status, whether it closes the connection).
    async fn finish(self) -> (u16, bool) {
        tokio::task::spawn_blocking(move || {
            let mut stream = self.0;
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            stream.write_all(b"\r\n").unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).unwrap();
            let status = answer
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("no status line in {answer:?}"));
            let closes = answer
                .lines()
                .any(|l| l.eq_ignore_ascii_case("connection: close"));
            (status, closes)
        })
        .await
        .unwrap()
    }
}

impl Partial {
    /// Sends the rest of the request, then reads what comes back until the
    /// connection ends: the number of bytes answered.
    async fn unanswered(self) -> usize {
        tokio::task::spawn_blocking(move || {
            let mut stream = self.0;
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            // The server may be gone already: a failed write is no answer.
            let _ = stream.write_all(b"\r\n");
            let mut buf = Vec::new();
            match stream.read_to_end(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    panic!("the connection is still open")
                }
                _ => buf.len(),
            }
        })
        .await
        .unwrap()
    }
}

pub(crate) fn new_token(db: &TestDatabase) -> (Store, String) {
    let store = Store::open(db.url(), PoolOptions::default()).unwrap();
    let token = tokens::generate();
    store
        .create_token(
            "shutdown",
            &tokens::hash(&token),
            &tokens::hint(&token),
            None,
        )
        .unwrap();
    (store, token)
}

/// Requests answered and counted in usage agree through a SIGTERM taken
/// under load; the requests in flight at the signal are answered (and close
/// their connection), new connections are not accepted, and the process exits 0
/// long before its shutdown timeout.
async fn sigterm_answers_the_requests_in_flight_and_counts_them(backend: Backend) {
    let db = seeded_database(backend);
    let (store, token) = new_token(&db);
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(&db, 10, &dir.path().join("serve.log"));
    let base = format!("http://{}", server.addr);

    // Requests begun and not yet ended when the signal comes.
    let in_flight: Vec<Partial> = (0..2)
        .map(|_| Partial::open(&server.addr, MARKET, Some(&token)))
        .collect();
    let readiness = Partial::open(&server.addr, "/readyz", None);

    // Load: 8 clients asking one after another until the server is gone.
    let client = reqwest::Client::new();
    let answered = Arc::new(AtomicU64::new(0));
    let sent = Arc::new(AtomicU64::new(0));
    let signalled = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..8)
        .map(|i| {
            let (client, token, answered, sent, signalled) = (
                client.clone(),
                token.clone(),
                answered.clone(),
                sent.clone(),
                signalled.clone(),
            );
            let url = format!(
                "{base}{}",
                [
                    MARKET,
                    "/v1/networks/perpnet/markets",
                    "/v1/networks/perpnet/wallets?limit=20",
                    "/v1/networks/perpnet/markets/ETH/whale-positions"
                ][i % 4]
            );
            tokio::spawn(async move {
                let mut closing_after_signal = 0;
                loop {
                    sent.fetch_add(1, Ordering::SeqCst);
                    match client.get(&url).header("X-API-Key", &token).send().await {
                        Ok(res) => {
                            assert_eq!(res.status(), 200, "{url}");
                            let closes = res
                                .headers()
                                .get("connection")
                                .is_some_and(|v| v == "close");
                            res.bytes().await.unwrap();
                            answered.fetch_add(1, Ordering::SeqCst);
                            if closes {
                                assert!(signalled.load(Ordering::SeqCst));
                                closing_after_signal += 1;
                            }
                        }
                        // A new connection after the signal is not accepted:
                        // it is reset when the process exits, or refused
                        // after. That no request was handled and its answer
                        // lost is checked below: usage counts answers only.
                        Err(e) => {
                            assert!(
                                signalled.load(Ordering::SeqCst),
                                "{url}: failed before the signal: {e:?}"
                            );
                            return closing_after_signal;
                        }
                    }
                }
            })
        })
        .collect();

    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        answered.load(Ordering::SeqCst) > 0,
        "no load before the signal"
    );
    signalled.store(true, Ordering::SeqCst);
    let signal_at = Instant::now();
    server.terminate();

    // Accepting nothing: a connection made now waits in the kernel's
    // backlog and is never answered.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let late = Partial::open(&server.addr, MARKET, Some(&token));

    assert_eq!(
        readiness.finish().await,
        (503, true),
        "/readyz while stopping"
    );
    for partial in in_flight {
        assert_eq!(partial.finish().await, (200, true), "a request in flight");
    }

    let status = server.exit_within(Duration::from_secs(8)).await;
    assert!(status.success(), "exit status {status}");
    assert!(
        signal_at.elapsed() < Duration::from_secs(10),
        "the stop waited for its timeout"
    );
    assert_eq!(
        late.unanswered().await,
        0,
        "a connection made after the signal was answered"
    );

    let mut closed_after_signal = 0;
    for task in load {
        closed_after_signal += tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("a client kept being answered after the exit")
            .unwrap();
    }
    // Each client's kept-alive connection was answered once more after
    // the signal, and told to close.
    assert!(
        closed_after_signal >= 1,
        "no answer after the signal closed its connection"
    );

    let answered = answered.load(Ordering::SeqCst) + 2;
    let counted: i64 = store.usage(None).unwrap().iter().map(|r| r.count).sum();
    eprintln!(
        "sent {}, answered {answered} ({closed_after_signal} after the signal), counted in usage {counted}",
        sent.load(Ordering::SeqCst) + 3,
    );
    assert_eq!(counted, answered as i64, "usage counts every answer");
}

/// A request still unfinished when `--shutdown-timeout` runs out is cut,
/// and the process exits 0 instead of waiting for it.
async fn a_request_outliving_the_shutdown_timeout_is_cut(backend: Backend) {
    let db = seeded_database(backend);
    let (_store, token) = new_token(&db);
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(&db, 1, &dir.path().join("serve.log"));
    let stuck = Partial::open(&server.addr, MARKET, Some(&token));
    // Accepted before the signal.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let signal_at = Instant::now();
    server.terminate();
    let status = server.exit_within(Duration::from_secs(5)).await;
    assert!(status.success(), "exit status {status}");
    // The 1 s timeout, and the exit after it.
    assert!(
        signal_at.elapsed() < Duration::from_millis(2500),
        "{:?}",
        signal_at.elapsed()
    );
    // Its connection was closed without an answer.
    assert_eq!(stuck.unanswered().await, 0, "answered after the timeout");
}

crate::on_both_backends!(
    sigterm_answers_the_requests_in_flight_and_counts_them,
    a_request_outliving_the_shutdown_timeout_is_cut,
);
