//! Idle connections and slowloris senders: the server closes them after its
//! request timeout (about 5 s; a 408 for a request that started), and a
//! real client is served meanwhile as if they were not there.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{spawn_app, Backend};
use crate::NET;

const IDLE: usize = 400;
const SLOW: usize = 40;

/// Reads until the server closes the connection: (what it sent, when).
async fn until_closed(mut stream: TcpStream, started: Instant) -> (String, Duration) {
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer)).await;
    (
        String::from_utf8_lossy(&answer).into_owned(),
        started.elapsed(),
    )
}

async fn idle_and_slowloris_connections_are_closed_without_slowing_a_client(backend: Backend) {
    let app = spawn_app(backend).await;
    let addr = app.addr.trim_start_matches("http://").to_owned();
    let started = Instant::now();

    let mut idle = Vec::new();
    for _ in 0..IDLE {
        let stream = TcpStream::connect(&addr).await.unwrap();
        idle.push(tokio::spawn(until_closed(stream, started)));
    }
    // Slowloris: a request line, then one header byte a second, never done.
    let mut slow = Vec::new();
    for _ in 0..SLOW {
        let addr = addr.clone();
        slow.push(tokio::spawn(async move {
            let mut stream = TcpStream::connect(&addr).await.unwrap();
            stream
                .write_all(b"GET /v1/networks HTTP/1.1\r\nHost: slow\r\nX-Slow: ")
                .await
                .unwrap();
            let mut answer = Vec::new();
            let mut buf = [0u8; 1024];
            loop {
                tokio::select! {
                    read = stream.read(&mut buf) => match read {
                        Ok(0) | Err(_) => break,
                        Ok(n) => answer.extend_from_slice(&buf[..n]),
                    },
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {
                        if stream.write_all(b"a").await.is_err() {
                            break;
                        }
                    }
                }
                if started.elapsed() > Duration::from_secs(20) {
                    break;
                }
            }
            (
                String::from_utf8_lossy(&answer).into_owned(),
                started.elapsed(),
            )
        }));
    }

    // A real client while they hold their connections.
    let mut latencies = Vec::new();
    while started.elapsed() < Duration::from_secs(6) {
        let t = Instant::now();
        app.get_ok(&format!("{NET}/markets/BTC")).await;
        latencies.push(t.elapsed());
    }
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    eprintln!(
        "a client during {IDLE} idle and {SLOW} slowloris connections: {} requests, p99 {p99:?}",
        latencies.len()
    );
    // Starved, it would wait seconds; the bound leaves room for the other
    // tests that share the two cores.
    assert!(
        latencies.len() > 100 && p99 < Duration::from_millis(250),
        "{} requests, p99 {p99:?}",
        latencies.len()
    );

    for handle in idle {
        let (answer, at) = handle.await.unwrap();
        assert!(
            at > Duration::from_secs(3) && at < Duration::from_secs(10),
            "an idle connection closed after {at:?}"
        );
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
            "{answer}"
        );
    }
    for handle in slow {
        let (answer, at) = handle.await.unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 408"),
            "a slowloris sender got {answer:?}"
        );
        assert!(at < Duration::from_secs(10), "answered after {at:?}");
    }
}

crate::on_both_backends!(idle_and_slowloris_connections_are_closed_without_slowing_a_client);
