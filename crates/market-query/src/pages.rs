//! The pages of every list: what a request selects, its identity (the
//! `ETag`'s and the page cache's key), its next cursor, and its body.

use bytes::Bytes;
use market_engine::candles::{next_period, period_start, periods_back, rollup, rollup_source};
use market_model::params::{
    printable, CandlesQuery, LiquidityQuery, MarketsQuery, OrderParam, PositionsQuery, WalletsQuery,
};
use market_model::{
    CandleSeries, Coverage, Direction, Interval, LiquidityDay, LiquidityLevelsList, MarketSort,
    PositionList, SizeClass, SortOrder, WalletList, WalletSort, NETWORK_ID,
};
use market_snapshot::{KeyedPage, Page, PositionKey, Snapshot, WalletKey, WalletOrder};
use market_store::Store;
use serde::Serialize;
use time::Date;

use crate::cursor::{LiquidityKey, Paging};
use crate::QueryError;

/// Widest liquidity-levels window: toDate − fromDate ≤ 89 days (90 calendar days inclusive).
pub const MAX_WINDOW_DAYS: i64 = 89;
/// Intervals that are rolled up from finer ones must not read more source rows than this.
pub const MAX_ROLLUP_ROWS: i64 = 200_000;

/// Serializes `envelope`, whose `items` array is empty, with `items` (JSON
/// array elements joined by commas, `len` bytes) written into that array:
/// the envelope keeps its model type's layout, the items are already rendered.
pub fn with_items<T: Serialize>(
    envelope: &T,
    len: usize,
    items: impl FnOnce(&mut Vec<u8>),
) -> Bytes {
    const EMPTY: &[u8] = b"\"items\":[]";
    let head = serde_json::to_vec(envelope).expect("responses serialize");
    let at = head
        .windows(EMPTY.len())
        .position(|w| w == EMPTY)
        .expect("the envelope has an empty `items` array")
        + EMPTY.len()
        - 1;
    let mut out = Vec::with_capacity(head.len() + len);
    out.extend_from_slice(&head[..at]);
    items(&mut out);
    out.extend_from_slice(&head[at..]);
    out.into()
}

fn write_page<'p>(page: &'p Page<'_>) -> impl FnOnce(&mut Vec<u8>) + 'p {
    |out| page.write_items(out)
}

/// The one network, or a 404 that names it.
pub fn check_network(network: &str) -> Result<(), QueryError> {
    if network == NETWORK_ID {
        Ok(())
    } else {
        Err(QueryError::NotFound(format!(
            "Unknown network `{}`; the only network is `{NETWORK_ID}` (see GET /v1/networks).",
            printable(network)
        )))
    }
}

/// The index of the market an asset path segment names, or a 404 that says
/// how to name it.
pub fn resolve_asset(snapshot: &Snapshot, asset: &str) -> Result<usize, QueryError> {
    use market_snapshot::AssetLookup;
    match snapshot.lookup_asset(asset) {
        AssetLookup::Found(i) => Ok(i),
        AssetLookup::Ambiguous(candidates) => Err(QueryError::NotFound(format!(
            "Asset `{}` is listed by several dexs; use one of the network symbols: {}.",
            printable(asset),
            candidates.join(", ")
        ))),
        AssetLookup::Unknown => Err(QueryError::NotFound(format!(
            "Unknown asset `{}`; symbols are case-sensitive (e.g. BTC, kPEPE, xyz:TSLA); GET /v1/networks/{NETWORK_ID}/markets lists them.",
            printable(asset)
        ))),
    }
}

/// The market list's order.
pub fn market_order(q: &MarketsQuery) -> (MarketSort, SortOrder) {
    (
        q.sort.unwrap_or(MarketSort::Volume24h),
        OrderParam::order(q.order.as_ref()),
    )
}

/// A page of one market's positions.
#[derive(Debug)]
pub struct PositionsPage<'a> {
    keyed: KeyedPage<'a>,
    next_cursor: Option<String>,
    /// Identifies the request (query, cursor and limit).
    pub identity: u64,
}

impl<'a> PositionsPage<'a> {
    /// The page `q` asks for of market `market`.
    pub fn new(
        snapshot: &'a Snapshot,
        market: usize,
        q: &PositionsQuery,
    ) -> Result<Self, QueryError> {
        let symbol = &snapshot.market(market).symbol;
        let min_value = q.min_value.as_ref().map(|m| m.0.to_string());
        // Without minValue the fingerprint is what it was before the filter
        // existed, so earlier cursors stay valid.
        let mut parts = vec![
            "whale-positions",
            symbol,
            q.direction.map_or("", Direction::as_str),
        ];
        parts.extend(min_value.as_deref());
        let paging: Paging<PositionKey> = Paging::new(&parts, q.cursor.as_deref(), q.limit.get())?;
        let keyed = snapshot.positions_page(
            market,
            q.direction,
            q.min_value.as_ref().map(|m| &m.0 .0),
            paging.after.as_ref(),
            paging.limit as usize,
        );
        let last = keyed.last.as_ref().map(|last| {
            (
                last.value.clone().unwrap_or_default(),
                last.address.to_owned(),
            )
        });
        Ok(PositionsPage {
            next_cursor: paging.next_cursor(keyed.page.has_more, last),
            identity: paging.identity,
            keyed,
        })
    }

    /// The response body.
    pub fn render(self) -> Bytes {
        let envelope = PositionList {
            items: Vec::new(),
            next_cursor: self.next_cursor,
            coverage: Coverage::ScannedWallets,
        };
        with_items(
            &envelope,
            self.keyed.page.json_len(),
            write_page(&self.keyed.page),
        )
    }
}

/// A page of the wallet list.
#[derive(Debug)]
pub struct WalletsPage<'a> {
    keyed: KeyedPage<'a>,
    total: usize,
    next_cursor: Option<String>,
    /// Identifies the request (query, cursor and limit).
    pub identity: u64,
}

impl<'a> WalletsPage<'a> {
    /// The page `q` asks for.
    pub fn new(snapshot: &'a Snapshot, q: &WalletsQuery) -> Result<Self, QueryError> {
        let order = WalletOrder {
            sort: q.sort.unwrap_or(WalletSort::AccountTotalValue),
            order: OrderParam::order(q.order.as_ref()),
            size: q.size,
            direction: q.direction,
        };
        let paging: Paging<WalletKey> = Paging::new(
            &[
                "wallets",
                order.sort.as_str(),
                order.order.as_str(),
                order.size.map_or("", SizeClass::as_str),
                order.direction.map_or("", Direction::as_str),
            ],
            q.cursor.as_deref(),
            q.limit.get(),
        )?;
        let (keyed, total) =
            snapshot.wallets_page(order, paging.after.as_ref(), paging.limit as usize);
        let last = keyed
            .last
            .as_ref()
            .map(|last| (last.value.clone(), last.address.to_owned()));
        Ok(WalletsPage {
            next_cursor: paging.next_cursor(keyed.page.has_more, last),
            identity: paging.identity,
            keyed,
            total,
        })
    }

    /// The response body.
    pub fn render(self) -> Bytes {
        let envelope = WalletList {
            items: Vec::new(),
            next_cursor: self.next_cursor,
            total: self.total as u64,
            coverage: Coverage::ScannedWallets,
        };
        with_items(
            &envelope,
            self.keyed.page.json_len(),
            write_page(&self.keyed.page),
        )
    }
}

/// A liquidity-levels request, checked: frozen days come from the
/// database, the current day from the served snapshot.
#[derive(Clone, Debug)]
pub struct LiquidityRequest {
    from: Date,
    to: Date,
    asset: Option<String>,
    paging: Paging<LiquidityKey>,
    /// The page cache's key (dates, asset, limit and cursor position).
    pub key: String,
}

impl LiquidityRequest {
    /// Checks `q` against the served snapshot (asset names resolve in it).
    pub fn new(snapshot: &Snapshot, q: &LiquidityQuery) -> Result<Self, QueryError> {
        let (from, to) = (q.from_date.0, q.to_date.0);
        if to < from {
            return Err(QueryError::param(
                "toDate",
                format!("must be on or after fromDate ({from}); got {to}"),
            ));
        }
        let days = (to - from).whole_days();
        if days > MAX_WINDOW_DAYS {
            return Err(QueryError::param(
                "toDate",
                format!("must be at most {MAX_WINDOW_DAYS} days after fromDate (a window of at most 90 days); got {days} days"),
            ));
        }
        let asset = q
            .asset
            .as_deref()
            .map(|a| resolve_asset(snapshot, a).map(|i| snapshot.market(i).symbol.clone()))
            .transpose()?;
        let paging: Paging<LiquidityKey> = Paging::new(
            &[
                "liquidity-levels",
                &from.to_string(),
                &to.to_string(),
                asset.as_deref().unwrap_or(""),
            ],
            q.cursor.as_deref(),
            q.limit.get(),
        )?;
        let key = format!(
            "liquidity-levels|{from}|{to}|{}|{}|{:?}",
            asset.as_deref().unwrap_or(""),
            paging.limit,
            paging.after.as_ref().map(|k| (k.date, &k.symbol)),
        );
        Ok(LiquidityRequest {
            from,
            to,
            asset,
            paging,
            key,
        })
    }

    /// The last frozen day the window reads from the database, if it
    /// reads any: the days before the snapshot's current day.
    fn history_to(&self, snapshot: &Snapshot) -> Option<Date> {
        let current_date = snapshot.current_date();
        let history_to = if snapshot.version > 0 && self.to >= current_date {
            current_date.previous_day()
        } else {
            Some(self.to)
        };
        history_to.filter(|to| self.from <= *to)
    }

    /// Whether the page needs the database: false for a window of the
    /// snapshot's current day only, which is rendered from memory.
    pub fn needs_store(&self, snapshot: &Snapshot) -> bool {
        self.history_to(snapshot).is_some()
    }

    /// Renders the page: frozen days read from `store` (blocking), then the
    /// current day of `snapshot` when the window holds it.
    pub fn render(&self, store: &Store, snapshot: &Snapshot) -> Result<Bytes, QueryError> {
        let current_date = snapshot.current_date();
        let has_current = snapshot.version > 0;
        let fetch = self.paging.limit as usize + 1;
        let mut history: Vec<LiquidityDay> = match self.history_to(snapshot) {
            Some(history_to) => store.liquidity_history(
                NETWORK_ID,
                self.from,
                history_to,
                self.asset.as_deref(),
                self.paging
                    .after
                    .as_ref()
                    .map(|k| (k.date, k.symbol.as_str())),
                fetch as i64,
            )?,
            _ => Vec::new(),
        };
        let mut current: Vec<(&str, &[u8])> = Vec::new();
        if history.len() < fetch && has_current && (self.from..=self.to).contains(&current_date) {
            current =
                snapshot
                    .current_days()
                    .filter(|(symbol, _)| {
                        self.asset.as_deref().is_none_or(|a| *symbol == a)
                            && self.paging.after.as_ref().is_none_or(|k| {
                                (current_date, *symbol) > (k.date, k.symbol.as_str())
                            })
                    })
                    .take(fetch - history.len())
                    .collect();
        }
        let limit = self.paging.limit as usize;
        let next_cursor = if history.len() + current.len() > limit {
            let last = if limit <= history.len() {
                history.truncate(limit);
                current.clear();
                let last = history.last().expect("limit is at least 1");
                LiquidityKey {
                    date: last.date,
                    symbol: last.network_asset_symbol.clone(),
                }
            } else {
                current.truncate(limit - history.len());
                let last = current.last().expect("more than limit items");
                LiquidityKey {
                    date: current_date,
                    symbol: last.0.to_owned(),
                }
            };
            Some(self.paging.cursor_after(&last))
        } else {
            None
        };
        let envelope = LiquidityLevelsList {
            from_date: self.from,
            to_date: self.to,
            granularity: "day".to_owned(),
            items: Vec::new(),
            next_cursor,
        };
        // Frozen days are rendered here; the current day is already rendered.
        let rendered: Vec<Vec<u8>> = history
            .iter()
            .map(|day| serde_json::to_vec(day).expect("responses serialize"))
            .collect();
        let items = Page {
            parts: rendered
                .iter()
                .map(Vec::as_slice)
                .chain(current.iter().map(|(_, day)| *day))
                .collect(),
            len: rendered.len() + current.len(),
            has_more: false,
        };
        Ok(with_items(&envelope, items.json_len(), write_page(&items)))
    }
}

/// A candles request, planned: which periods it selects, and from which
/// stored interval they are read or rolled up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandlesRequest {
    symbol: String,
    interval: Interval,
    /// First period start at or after `from` (or the cursor).
    start: i64,
    /// Inclusive end, epoch ms.
    to: i64,
    limit: u32,
    /// The page cache's key: every `to` within one period selects the same
    /// candles, so the key uses its period, and the default `to` = now does
    /// not defeat the cache.
    pub key: String,
}

impl CandlesRequest {
    /// Plans `q` for the market named `symbol`; `now_ms` is the default `to`.
    pub fn new(symbol: &str, q: &CandlesQuery, now_ms: i64) -> Result<Self, QueryError> {
        let interval = q.interval;
        let limit = q.limit.get();
        let to = q.to.map_or(now_ms, |t| t.0);
        let from = match (q.cursor, q.from) {
            (Some(c), _) => c.0,
            (None, Some(f)) => f.0,
            // `to` minus `limit` intervals: the `limit` periods ending with the one containing `to`.
            (None, None) => periods_back(interval, period_start(interval, to), limit - 1),
        };
        if from > to {
            let name = if q.cursor.is_some() { "cursor" } else { "from" };
            return Err(QueryError::param(name, "must not be after `to`"));
        }
        let aligned = period_start(interval, from);
        let start = if aligned == from {
            from
        } else {
            next_period(interval, aligned)
        };
        let key = format!(
            "candles|{symbol}|{interval}|{start}|{}|{limit}",
            period_start(interval, to)
        );
        Ok(CandlesRequest {
            symbol: symbol.to_owned(),
            interval,
            start,
            to,
            limit,
            key,
        })
    }

    /// Renders the page from `store` (blocking), rolled up when the interval
    /// is not stored.
    pub fn render(&self, store: &Store) -> Result<Bytes, QueryError> {
        let (interval, start, to, limit) = (self.interval, self.start, self.to, self.limit);
        let stored = store.stored_intervals(&self.symbol)?;
        let mut candles = match rollup_source(interval, &stored) {
            None => Vec::new(),
            Some(source) if source == interval => store.candles(
                &self.symbol,
                interval,
                start,
                to.saturating_add(1),
                limit as i64 + 1,
            )?,
            Some(source) => {
                // Source rows for limit+1 target periods, capped.
                let mut end = start;
                for _ in 0..=limit {
                    end = next_period(interval, end);
                    if end > to {
                        break;
                    }
                }
                let end = end.min(to.saturating_add(1)).max(start);
                let rows = store.candles(
                    &self.symbol,
                    source,
                    start,
                    end.max(next_period(interval, start)),
                    MAX_ROLLUP_ROWS,
                )?;
                rollup(&rows, interval)
                    .into_iter()
                    .filter(|c| c.time >= start && c.time <= to)
                    .collect()
            }
        };
        let next_cursor = if candles.len() > limit as usize {
            let next = candles[limit as usize].time;
            candles.truncate(limit as usize);
            Some(next.to_string())
        } else {
            None
        };
        let series = CandleSeries {
            network: NETWORK_ID.to_owned(),
            canonical_asset: market_model::symbol::canonical_of(&self.symbol).to_owned(),
            coin: self.symbol.clone(),
            interval,
            candles,
            next_cursor,
        };
        Ok(Bytes::from(
            serde_json::to_vec(&series).expect("responses serialize"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use market_model::params::{CandlesLimit, Instant};
    use market_model::{MarketPosition, NetworkList};

    #[test]
    fn items_go_into_the_envelopes_array() {
        let envelope = PositionList {
            items: Vec::<MarketPosition>::new(),
            next_cursor: Some("c".into()),
            coverage: Coverage::ScannedWallets,
        };
        let body = with_items(&envelope, 7, |out| out.extend_from_slice(b"{},{\"a\":1}"));
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["items"].as_array().unwrap().len(), 2);
        assert_eq!(v["nextCursor"], "c");
        // Every list envelope has the one empty array to fill.
        for json in [
            serde_json::to_string(&envelope).unwrap(),
            serde_json::to_string(&NetworkList {
                items: vec![],
                next_cursor: None,
            })
            .unwrap(),
        ] {
            assert_eq!(json.matches("\"items\":[]").count(), 1, "{json}");
        }
    }

    fn candles(q: &str, now: i64) -> Result<CandlesRequest, QueryError> {
        let q: CandlesQuery = crate::parse_query(q).unwrap();
        CandlesRequest::new("BTC", &q, now)
    }

    #[test]
    fn candle_plans() {
        const H: i64 = 3_600_000;
        // Default window: the `limit` periods ending with the one holding `to`.
        let r = candles("interval=1h&limit=3", 10 * H + 5).unwrap();
        assert_eq!((r.start, r.to), (8 * H, 10 * H + 5));
        // `from` inside a period starts at the next one.
        let r = candles("interval=1h&from=5&to=36000000", 0).unwrap();
        assert_eq!(r.start, H);
        // A cursor replaces `from`, and the cache key ignores where in a period `to` is.
        let a = candles("interval=1h&from=0&cursor=7200000&to=36000001", 0).unwrap();
        let b = candles("interval=1h&cursor=7200000&to=39599999", 0).unwrap();
        assert_eq!(a.start, 2 * H);
        assert_eq!(a.key, b.key);
        let e = candles("interval=1h&cursor=9&to=5", 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Query parameter `cursor` must not be after `to`."
        );
        let q = CandlesQuery {
            interval: Interval::D1,
            from: Some(Instant(10)),
            to: Some(Instant(5)),
            limit: CandlesLimit::default(),
            cursor: None,
        };
        assert!(CandlesRequest::new("BTC", &q, 0).is_err());
    }
}
