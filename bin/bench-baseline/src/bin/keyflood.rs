//! A flood of requests with random, well-formed API keys from one source
//! address, for the failed-authentication benchmark (`scripts/bench-flood.sh`).
//! wrk cannot choose its source address; this tool binds every connection
//! to `SOURCE` (on one machine, `127.0.0.2`), so that the server sees the
//! flood and the valid client as two clients.
//!
//! Usage: `keyflood TARGET SOURCE CONNECTIONS SECONDS PATH`; prints the
//! answers by status and the rate.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};

/// xorshift64*: random enough for keys nobody holds, without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// `mds_` and 43 base64url characters: the shape of a real key, so the
    /// server looks each one up.
    fn key(&mut self) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut key = String::from("mds_");
        for _ in 0..43 {
            key.push(ALPHABET[(self.next() % 64) as usize] as char);
        }
        key
    }
}

fn connect(target: SocketAddr, source: IpAddr) -> std::io::Result<TcpStream> {
    let socket = Socket::new(Domain::for_address(target), Type::STREAM, None)?;
    socket.bind(&SocketAddr::new(source, 0).into())?;
    socket.connect(&target.into())?;
    socket.set_tcp_nodelay(true)?;
    Ok(socket.into())
}

/// Sends one request and reads its answer; the status, or `None` when the
/// connection ended.
fn exchange(stream: &mut BufReader<TcpStream>, request: &[u8]) -> Option<u16> {
    stream.get_mut().write_all(request).ok()?;
    let mut line = String::new();
    stream.read_line(&mut line).ok()?;
    let status = line.split_whitespace().nth(1)?.parse().ok()?;
    let mut length = 0usize;
    let mut close = false;
    loop {
        line.clear();
        if stream.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let lower = header.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().ok()?;
        } else if lower == "connection: close" {
            close = true;
        }
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).ok()?;
    if close {
        return None;
    }
    Some(status)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [target, source, connections, seconds, path] = args.as_slice() else {
        eprintln!("usage: keyflood TARGET SOURCE CONNECTIONS SECONDS PATH");
        std::process::exit(2);
    };
    let target: SocketAddr = target.parse().expect("TARGET is host:port");
    let source: IpAddr = source.parse().expect("SOURCE is an IP address");
    let connections: usize = connections.parse().expect("CONNECTIONS is a number");
    let duration = Duration::from_secs(seconds.parse().expect("SECONDS is a number"));
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let started = Instant::now();
    let threads: Vec<_> = (0..connections)
        .map(|i| {
            let (stop, counts, path) = (stop.clone(), counts.clone(), path.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((i as u64 + 1) * 0x1000_0001));
                let mut mine: BTreeMap<String, u64> = BTreeMap::new();
                'connections: while !stop.load(Ordering::Relaxed) {
                    let Ok(stream) = connect(target, source) else {
                        *mine.entry("connect failed".into()).or_default() += 1;
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    };
                    let mut stream = BufReader::new(stream);
                    while !stop.load(Ordering::Relaxed) {
                        let request = format!(
                            "GET {path} HTTP/1.1\r\nHost: flood\r\nX-API-Key: {}\r\n\r\n",
                            rng.key()
                        );
                        match exchange(&mut stream, request.as_bytes()) {
                            Some(status) => *mine.entry(status.to_string()).or_default() += 1,
                            None => continue 'connections,
                        }
                    }
                }
                let mut all = counts.lock().unwrap();
                for (k, v) in mine {
                    *all.entry(k).or_default() += v;
                }
            })
        })
        .collect();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let counts = counts.lock().unwrap();
    let answered: u64 = counts
        .iter()
        .filter(|(k, _)| k.parse::<u16>().is_ok())
        .map(|(_, v)| v)
        .sum();
    let by_status: Vec<String> = counts.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    println!(
        "flood from {source}: {answered} answers in {elapsed:.1} s ({:.0}/s); {}",
        answered as f64 / elapsed,
        by_status.join(", ")
    );
}
