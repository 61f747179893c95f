//! Discovery sources that are not the WebSocket: the leaderboard document
//! and an operator's node's `node_trades` files.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use bigdecimal::{BigDecimal, ToPrimitive};
use market_model::Decimal;
use market_store::DiscoverySource;
use serde::Deserialize;
use time::OffsetDateTime;

use crate::schedule::Discovery;

/// Largest leaderboard accepted, in bytes (the real one is about 25 MB).
const MAX_LEADERBOARD: u64 = 256 * 1024 * 1024;

/// A lowercase `0x` + 40 hex address, or `None`.
pub fn normalize_address(a: &str) -> Option<String> {
    let valid =
        a.len() == 42 && a.starts_with("0x") && a[2..].bytes().all(|b| b.is_ascii_hexdigit());
    valid.then(|| a.to_ascii_lowercase())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeaderboardDoc {
    leaderboard_rows: Vec<LeaderboardRow>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeaderboardRow {
    eth_address: String,
    account_value: String,
}

/// What one leaderboard fetch gave.
#[derive(Debug, Default)]
pub struct Leaderboard {
    /// Valid rows: address and account value.
    pub rows: Vec<Discovery>,
    /// Rows skipped (bad address or account value).
    pub skipped: usize,
}

/// Parses the leaderboard document. A document that is not whole (truncated,
/// not JSON, no `leaderboardRows`) is an error and gives nothing; a bad row
/// is skipped and counted.
pub fn parse_leaderboard(text: &[u8]) -> Result<Leaderboard, String> {
    let doc: LeaderboardDoc =
        serde_json::from_slice(text).map_err(|e| format!("leaderboard is not whole: {e}"))?;
    let mut out = Leaderboard::default();
    for row in doc.leaderboard_rows {
        let value = BigDecimal::from_str(&row.account_value).ok();
        match (normalize_address(&row.eth_address), value) {
            (Some(address), Some(v)) => out.rows.push(Discovery::Leaderboard {
                address,
                account_value: Decimal(v),
            }),
            _ => out.skipped += 1,
        }
    }
    Ok(out)
}

/// Fetches and parses the leaderboard (`GET url`).
pub fn fetch_leaderboard(url: &str, timeout: Duration) -> Result<Leaderboard, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .user_agent(concat!("market-data-server/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let res = agent.get(url).call().map_err(|e| e.to_string())?;
    let status = res.status().as_u16();
    if status != 200 {
        return Err(format!("HTTP {status}"));
    }
    let mut body = Vec::new();
    res.into_body()
        .into_reader()
        .take(MAX_LEADERBOARD)
        .read_to_end(&mut body)
        .map_err(|e| e.to_string())?;
    parse_leaderboard(&body)
}

/// Whether `coin` names a spot market: `@107` (a spot pair by index) or
/// `PURR/USDC`. Perp coins are `BTC` on the main dex and `xyz:TSLA` on a
/// HIP-3 dex. A spot trade says nothing of a wallet's perp positions, so it
/// never makes an address a perp wallet nor a read due.
pub fn is_spot_coin(coin: &str) -> bool {
    coin.starts_with('@') || coin.contains('/')
}

/// A trade's two sides as discoveries, from its coin, price, size and users.
/// A spot trade ([`is_spot_coin`]) gives none.
pub fn trade_discoveries(
    coin: &str,
    px: &str,
    sz: &str,
    at: OffsetDateTime,
    users: &[&str],
    source: DiscoverySource,
) -> Option<Vec<Discovery>> {
    if is_spot_coin(coin) {
        return Some(Vec::new());
    }
    let px = BigDecimal::from_str(px).ok()?;
    let sz = BigDecimal::from_str(sz).ok()?;
    let notional = (px * sz).abs().to_f64()?;
    let mut out = Vec::with_capacity(2);
    for user in users {
        out.push(Discovery::Trade {
            address: normalize_address(user)?,
            coin: coin.to_owned(),
            notional,
            at,
            source,
        });
    }
    Some(out)
}

#[derive(Deserialize)]
struct NodeTrade {
    coin: String,
    px: String,
    sz: String,
    #[serde(default)]
    time: Option<String>,
    side_info: Vec<NodeSide>,
}

#[derive(Deserialize)]
struct NodeSide {
    user: String,
}

/// Parses one `node_trades` line: `{"coin","side","time","px","sz","hash",
/// "side_info":[{"user",…},{"user",…}]}`.
pub fn parse_node_trade(line: &str, now: OffsetDateTime) -> Option<Vec<Discovery>> {
    let t: NodeTrade = serde_json::from_str(line).ok()?;
    // The node writes naive UTC times (`2025-01-01T00:00:00.123`).
    let at = t
        .time
        .as_deref()
        .and_then(|s| {
            time::PrimitiveDateTime::parse(
                s,
                &time::format_description::well_known::Iso8601::DEFAULT,
            )
            .ok()
        })
        .map_or(now, |p| p.assume_utc());
    let users: Vec<&str> = t.side_info.iter().map(|s| s.user.as_str()).collect();
    if users.is_empty() {
        return None;
    }
    trade_discoveries(
        &t.coin,
        &t.px,
        &t.sz,
        at,
        &users,
        DiscoverySource::NodeTrades,
    )
}

/// Follows the files under a `node_trades` directory (the node writes
/// `hourly/YYYYMMDD/H`, one JSON trade per line), like `tail -F` on each:
/// files present at start are followed from their end, new files from their
/// start. Only whole lines are read.
#[derive(Debug)]
pub struct NodeTradesFollower {
    dir: PathBuf,
    offsets: HashMap<PathBuf, u64>,
    partial: HashMap<PathBuf, Vec<u8>>,
    /// Lines that were not a trade.
    pub bad_lines: u64,
    /// Spot trades (skipped: they discover no perp wallet).
    pub spot_trades: u64,
}

impl NodeTradesFollower {
    /// Starts following `dir` from the current end of its files.
    pub fn new(dir: &Path) -> Self {
        let mut f = NodeTradesFollower {
            dir: dir.to_owned(),
            offsets: HashMap::new(),
            partial: HashMap::new(),
            bad_lines: 0,
            spot_trades: 0,
        };
        for path in files_under(dir) {
            let len = std::fs::metadata(&path).map_or(0, |m| m.len());
            f.offsets.insert(path, len);
        }
        f
    }

    /// Reads what was appended since the last poll.
    pub fn poll(&mut self, now: OffsetDateTime) -> Vec<Discovery> {
        let mut out = Vec::new();
        for path in files_under(&self.dir) {
            let offset = self.offsets.get(&path).copied().unwrap_or(0);
            let Ok(mut file) = std::fs::File::open(&path) else {
                continue;
            };
            let len = file.metadata().map_or(0, |m| m.len());
            if len < offset {
                // Truncated or replaced: start over.
                self.offsets.insert(path.clone(), 0);
                self.partial.remove(&path);
                continue;
            }
            if len == offset || file.seek(SeekFrom::Start(offset)).is_err() {
                continue;
            }
            let mut buf = self.partial.remove(&path).unwrap_or_default();
            let Ok(read) = (&mut file).take(len - offset).read_to_end(&mut buf) else {
                continue;
            };
            self.offsets.insert(path.clone(), offset + read as u64);
            let whole = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            for line in buf[..whole].split(|&b| b == b'\n') {
                let line = String::from_utf8_lossy(line);
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                match parse_node_trade(line, now) {
                    Some(d) if d.is_empty() => self.spot_trades += 1,
                    Some(d) => out.extend(d),
                    None => self.bad_lines += 1,
                }
            }
            if whole < buf.len() {
                self.partial.insert(path, buf[whole..].to_vec());
            }
        }
        out
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() => out.push(p),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-11-23 12:00:00 UTC);
    const A: &str = "0x31CA8395cf837de08b24da3f660e77761dfb974b";
    const B: &str = "0x0000000000000000000000000000000000abc000";

    #[test]
    fn the_leaderboard_is_all_or_nothing_and_skips_bad_rows() {
        let doc = format!(
            r#"{{"leaderboardRows":[
            {{"ethAddress":"{A}","accountValue":"1234567.89","windowPerformances":[["day",{{"pnl":"1.0","roi":"0.1","vlm":"5.0"}}]],"prize":0,"displayName":null}},
            {{"ethAddress":"nope","accountValue":"1"}},
            {{"ethAddress":"{B}","accountValue":"1e"}}]}}"#
        );
        let lb = parse_leaderboard(doc.as_bytes()).unwrap();
        assert_eq!(lb.skipped, 2);
        assert!(
            matches!(&lb.rows[..], [Discovery::Leaderboard { address, account_value }]
            if address == &A.to_ascii_lowercase() && account_value.to_string() == "1234567.89")
        );
        assert!(parse_leaderboard(&doc.as_bytes()[..doc.len() / 2]).is_err());
        assert!(parse_leaderboard(b"{\"rows\":[]}").is_err());
    }

    #[test]
    fn node_trade_lines_name_both_sides() {
        let line = format!(
            r#"{{"coin":"xyz:TSLA","side":"B","time":"2026-11-23T11:59:58.250","px":"350.5","sz":"10","hash":"0xab","trade_dir_override":"Na","side_info":[{{"user":"{A}","start_pos":"0","oid":1,"twap_id":null,"cloid":null}},{{"user":"{B}","start_pos":"5","oid":2,"twap_id":null,"cloid":null}}]}}"#
        );
        let d = parse_node_trade(&line, NOW).unwrap();
        assert_eq!(d.len(), 2);
        assert!(
            matches!(&d[1], Discovery::Trade { address, coin, notional, at, .. }
            if address == B && coin == "xyz:TSLA" && (*notional - 3505.0).abs() < 1e-9
               && *at == datetime!(2026-11-23 11:59:58.25 UTC))
        );
        assert!(parse_node_trade("{\"coin\":\"BTC\"}", NOW).is_none());
    }

    #[test]
    fn spot_trades_discover_no_perp_wallet() {
        for coin in ["@107", "PURR/USDC"] {
            let line = format!(
                r#"{{"coin":"{coin}","side":"A","time":"2026-11-23T11:59:58.250","px":"0.1955","sz":"500.0","hash":"0xab","trade_dir_override":"Na","side_info":[{{"user":"{A}","start_pos":"0","oid":1,"twap_id":null,"cloid":null}},{{"user":"{B}","start_pos":"5","oid":2,"twap_id":null,"cloid":null}}]}}"#
            );
            assert_eq!(
                parse_node_trade(&line, NOW).map(|d| d.len()),
                Some(0),
                "{coin}"
            );
        }
        assert!(!is_spot_coin("xyz:TSLA") && !is_spot_coin("BTC") && !is_spot_coin("kPEPE"));
    }

    #[test]
    fn the_follower_reads_appended_whole_lines_only() {
        let dir = tempfile::tempdir().unwrap();
        let hour = dir.path().join("hourly/20261123");
        std::fs::create_dir_all(&hour).unwrap();
        let old = hour.join("11");
        std::fs::write(&old, "old line that is never read\n").unwrap();
        let mut f = NodeTradesFollower::new(dir.path());
        let line = format!(
            r#"{{"coin":"BTC","px":"100","sz":"2","time":"2026-11-23T12:00:00","side_info":[{{"user":"{A}"}},{{"user":"{B}"}}]}}"#
        );
        let mut file = std::fs::OpenOptions::new().append(true).open(&old).unwrap();
        write!(file, "{line}\n{}", &line[..20]).unwrap();
        assert_eq!(f.poll(NOW).len(), 2);
        write!(file, "{}\nnot json\n", &line[20..]).unwrap();
        std::fs::write(hour.join("12"), format!("{line}\n")).unwrap();
        assert_eq!(f.poll(NOW).len(), 4, "the completed line and the new file");
        assert_eq!(f.bad_lines, 1);
    }
}
