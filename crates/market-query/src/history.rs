//! History and drill-down requests: market and wallet series, the
//! position-event feed and wallet detail.

use bytes::Bytes;
use market_model::params::{EventsQuery, HistoryQuery};
use market_model::{
    Coverage, EventKind, HistoryInterval, MarketHistory, PositionEventList, WalletDetail,
    WalletHistory,
};
use market_snapshot::{Page, Snapshot};
use market_store::{EventFilter, Series, Store, StoredEvent};

use crate::cursor::{BucketKey, EventKey, Paging};
use crate::pages::with_items;
use crate::QueryError;

/// How many events wallet detail shows.
pub const RECENT_EVENTS: usize = 20;

/// A history request, planned: which buckets of which series.
#[derive(Clone, Debug)]
pub struct HistoryRequest {
    series: Series,
    key: String,
    interval: HistoryInterval,
    /// First bucket start.
    start: i64,
    /// End of the last bucket that may be served (inclusive), epoch ms.
    end: i64,
    paging: Paging<BucketKey>,
    /// The page cache's key: every `to` within one bucket selects the same
    /// buckets, so the default `to` = now does not defeat the cache.
    pub cache_key: String,
}

impl HistoryRequest {
    /// Plans `q` for the series `key` (a symbol or an address); `now_ms` is
    /// the default `to`. A bucket is served when its start is within
    /// `[from, to]`, and it shows the last observation in it.
    pub fn new(
        series: Series,
        key: &str,
        q: &HistoryQuery,
        now_ms: i64,
    ) -> Result<Self, QueryError> {
        let interval = q.interval.unwrap_or(HistoryInterval::H1);
        let step = interval.ms();
        let limit = q.limit.get();
        let to = q.to.map_or(now_ms, |t| t.0);
        let last = interval.bucket_of(to);
        let from = match q.from {
            Some(f) => f.0,
            None => last - step * (i64::from(limit) - 1),
        };
        if from > to {
            return Err(QueryError::param("from", "must not be after `to`"));
        }
        let series_name = match series {
            Series::Market => "market-history",
            Series::Wallet => "wallet-history",
        };
        // A cursor is a bucket start of one series and interval; `from` and
        // `to` may move between pages (the default `to` is now).
        let paging: Paging<BucketKey> = Paging::new(
            &[series_name, key, interval.as_str()],
            q.cursor.as_deref(),
            limit,
        )?;
        let first = interval.bucket_of(from);
        let mut start = if first == from { from } else { first + step };
        if let Some(after) = paging.after {
            start = start.max(after.0 + step);
        }
        let cache_key = format!(
            "{series_name}|{key}|{interval}|{start}|{last}|{limit}",
            interval = interval.as_str()
        );
        Ok(HistoryRequest {
            series,
            key: key.to_owned(),
            interval,
            start,
            end: last + step - 1,
            paging,
            cache_key,
        })
    }

    /// Renders the page from `store` (blocking).
    pub fn render(&self, store: &Store) -> Result<Bytes, QueryError> {
        let limit = self.paging.limit as usize;
        let mut buckets = if self.start > self.end {
            Vec::new()
        } else {
            store.history(
                self.series,
                &self.key,
                self.interval,
                self.start,
                self.end,
                limit + 1,
            )?
        };
        let has_more = buckets.len() > limit;
        buckets.truncate(limit);
        let next_cursor = self
            .paging
            .next_cursor(has_more, buckets.last().map(|b| b.time));
        let page = Page {
            parts: buckets.iter().map(|b| b.json.as_slice()).collect(),
            len: buckets.len(),
            has_more,
        };
        let items = |out: &mut Vec<u8>| page.write_items(out);
        Ok(match self.series {
            Series::Market => with_items(
                &MarketHistory {
                    symbol: self.key.clone(),
                    interval: self.interval,
                    items: Vec::new(),
                    next_cursor,
                    coverage: Coverage::ScannedWallets,
                },
                page.json_len(),
                items,
            ),
            Series::Wallet => with_items(
                &WalletHistory {
                    address: self.key.clone(),
                    interval: self.interval,
                    items: Vec::new(),
                    next_cursor,
                },
                page.json_len(),
                items,
            ),
        })
    }
}

/// A position-events request, checked.
#[derive(Clone, Debug)]
pub struct EventsRequest {
    filter: EventFilter,
    paging: Paging<EventKey>,
    /// The page cache's key (filters, limit and cursor position).
    pub cache_key: String,
}

impl EventsRequest {
    /// Checks `q`; `symbol` is its `asset` resolved to a network symbol.
    pub fn new(q: &EventsQuery, symbol: Option<String>) -> Result<Self, QueryError> {
        let (from, to) = (q.from.map(|f| f.0), q.to.map(|t| t.0));
        if let (Some(from), Some(to)) = (from, to) {
            if from > to {
                return Err(QueryError::param("from", "must not be after `to`"));
            }
        }
        let text = |v: Option<i64>| v.map_or(String::new(), |v| v.to_string());
        let min = q.min_value.as_ref().map(|m| m.0.to_string());
        let parts = [
            "position-events".to_owned(),
            symbol.clone().unwrap_or_default(),
            q.address.as_deref().unwrap_or("").to_owned(),
            q.kind.map_or("", EventKind::as_str).to_owned(),
            min.clone().unwrap_or_default(),
            text(from),
            text(to),
        ];
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        let paging: Paging<EventKey> = Paging::new(&parts, q.cursor.as_deref(), q.limit.get())?;
        let cache_key = format!("{}|{}|{:?}", parts.join("|"), paging.limit, paging.after);
        Ok(EventsRequest {
            filter: EventFilter {
                symbol,
                address: q.address.as_deref().map(str::to_owned),
                kind: q.kind,
                min_value: q.min_value.as_ref().map(|m| m.0.clone()),
                from,
                to,
            },
            paging,
            cache_key,
        })
    }

    /// Renders the page from `store` (blocking).
    pub fn render(&self, store: &Store) -> Result<Bytes, QueryError> {
        let limit = self.paging.limit as usize;
        let after = self
            .paging
            .after
            .as_ref()
            .map(|k| (k.at, k.address.as_str(), k.symbol.as_str()));
        let mut events = store.events(&self.filter, after, limit + 1)?;
        let has_more = events.len() > limit;
        events.truncate(limit);
        let next_cursor = self.paging.next_cursor(
            has_more,
            events
                .last()
                .map(|e| (e.at, e.address.clone(), e.symbol.clone())),
        );
        let page = event_page(&events);
        Ok(with_items(
            &PositionEventList {
                items: Vec::new(),
                next_cursor,
            },
            page.json_len(),
            |out| page.write_items(out),
        ))
    }
}

fn event_page(events: &[StoredEvent]) -> Page<'_> {
    Page {
        parts: events.iter().map(|e| e.json.as_bytes()).collect(),
        len: events.len(),
        has_more: false,
    }
}

/// The wallet-detail body of `address`: the wallet and its positions from
/// `snapshot`, its recent events from `store` (blocking); `None` when the
/// wallet is not served.
pub fn wallet_detail(
    store: &Store,
    snapshot: &Snapshot,
    address: &str,
) -> Result<Option<Bytes>, QueryError> {
    let Some(view) = snapshot.wallet_view(address) else {
        return Ok(None);
    };
    let events = store.events(
        &EventFilter {
            address: Some(address.to_owned()),
            ..Default::default()
        },
        None,
        RECENT_EVENTS,
    )?;
    let events = event_page(&events);
    // `{"wallet":…,"positions":[…],"recentEvents":[…]}`, the field order of `WalletDetail`.
    let mut out =
        Vec::with_capacity(view.wallet.len() + view.positions.json_len() + events.json_len() + 48);
    out.extend_from_slice(b"{\"wallet\":");
    out.extend_from_slice(view.wallet);
    out.extend_from_slice(b",\"positions\":[");
    view.positions.write_items(&mut out);
    out.extend_from_slice(b"],\"recentEvents\":[");
    events.write_items(&mut out);
    out.extend_from_slice(b"]}");
    debug_assert!(serde_json::from_slice::<WalletDetail>(&out).is_ok());
    Ok(Some(out.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(q: &str, now: i64) -> Result<HistoryRequest, QueryError> {
        let q: HistoryQuery = crate::parse_query(q).unwrap();
        HistoryRequest::new(Series::Market, "BTC", &q, now)
    }

    #[test]
    fn history_plans() {
        const H: i64 = 3_600_000;
        // Default: 1h, the `limit` buckets ending with the one holding `to`.
        let r = plan("limit=3", 10 * H + 5).unwrap();
        assert_eq!((r.start, r.end), (8 * H, 11 * H - 1));
        // `from` inside a bucket starts at the next one.
        let r = plan("interval=1d&from=5&to=360000000", 0).unwrap();
        assert_eq!(r.start, 24 * H);
        // Every `to` in one bucket has one cache key.
        let a = plan("from=0&to=36000001", 0).unwrap();
        let b = plan("from=0&to=39599999", 0).unwrap();
        assert_eq!(a.cache_key, b.cache_key);
        assert!(plan("from=9&to=5", 0).is_err());
    }
}
