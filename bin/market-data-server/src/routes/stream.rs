//! The live position-event stream (server-sent events).
//!
//! A client subscribes to the hub (`state::stream`) first, then reads where
//! the stored sequence stands; events it then replays from the store and
//! events the hub pushes overlap at most, and the overlap is dropped by
//! number. So a resumed stream has no gap and no duplicate.

use std::time::Duration;

use actix_web::http::header::{self, HeaderValue};
use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};
use bytes::{Bytes, BytesMut};
use market_model::params::{EventId, EventStreamQuery, NetworkPath};
use market_store::{EventFilter, Retention};
use tokio::sync::broadcast::error::RecvError;

use crate::error::{ApiError, InvalidParam, Problem, ProblemKind};
use crate::http::{ApiPath, StrictQuery};
use crate::state::stream::{frame, Coding, Push, StreamEvent, StreamGzip};
use crate::state::{AppState, Lane};
use crate::tokens::TokenId;

type Data = web::Data<AppState>;

/// A comment line every so often keeps proxies from closing an idle stream.
pub const HEARTBEAT: Duration = Duration::from_secs(15);
/// A stream that wrote nothing for this long writes an empty line (which an
/// `EventSource` ignores): actix-web learns that a client went away only
/// when a write fails, and until then its stream holds a place of its key's
/// `--max-streams-per-key`.
const PROBE: Duration = Duration::from_secs(5);
/// Events per read of a replay.
const REPLAY_PAGE: usize = 500;
/// How long an `EventSource` waits before it reconnects, in ms (`retry:`).
const RETRY_MS: u32 = 2000;

/// Stream position events.
///
/// Server-sent events (`text/event-stream`): the position events of the list, live, as each data
/// version is served (within about a second of its commit). Filters as for the list: `asset`,
/// `address`, `kind`, `minValue`. Each event is `event: position-event`, `id:` its number (ids
/// grow; they order events) and `data:` the JSON item of the list. On connect and at each new data
/// version comes `event: data-version` (no id): the version, its `observedAt` and the markets' live
/// figures (`MarketFigures`: price, open interest, long/short counts, liquidation values): all of
/// them on connect, then those whose figures changed (only the `asset` filter's market when given),
/// so that a dashboard never polls `/markets`. A comment line
/// (`: heartbeat`) with `id:` the resume point comes every 15 s (no event is dispatched; an
/// `EventSource` takes the id as its last event id).
///
/// **Resume.** Send the last id seen as `Last-Event-ID` (an `EventSource` does this by itself) or
/// `since`: the stored events after it come first (events are kept 90 days), then the live ones,
/// with no gap and no duplicate. `since=0` replays every stored event. An id whose successors are no
/// longer stored is a 410 problem that names the oldest id to resume from. Without either, the stream
/// starts with what is published after it connects.
///
/// **Ending.** A client more than about 130,000 events (1,024 messages of the shared buffer) behind is
/// closed with `event: lagged`, a stopping server closes streams with `event: closing`, and a replay
/// the database cannot serve now ends with `event: unavailable`; each carries `id:` and `resumeFrom`
/// (`StreamEnd`), the id to resume from without losing anything.
///
/// **Limits.** Opening a stream counts as one request against the key's rate limit. A key may hold
/// `--max-streams-per-key` streams open (8 by default); one more is a 429 problem.
///
/// **Compression.** A client whose `Accept-Encoding` takes gzip (browsers' `EventSource` and
/// `curl --compressed` do) gets the stream gzip-encoded (`Content-Encoding: gzip`): each push is
/// compressed once for every stream and can be decoded as soon as it arrives. Any other client
/// gets it as it is.
#[utoipa::path(
    get,
    path = "/networks/{network}/position-events/stream",
    operation_id = "streamPositionEvents",
    tag = "history",
    params(
        NetworkPath,
        EventStreamQuery,
        ("Last-Event-ID" = Option<String>, Header, description = "The id of the last event received: resume after it (wins over `since`). A decimal integer."),
    ),
    responses(
        (status = 200, description = "The stream: `position-event` events (data: `PositionEvent`), `data-version` events (data: `DataVersionEvent`), and a last `lagged`, `closing` or `unavailable` event (data: `StreamEnd`) when the server ends it.", content_type = "text/event-stream", body = String, example = json!(": connected\nretry: 2000\n\nevent: data-version\ndata: {\"version\":1842,\"observedAt\":\"2026-11-22T01:59:00Z\",\"markets\":[]}\n\nid: 1201\nevent: position-event\ndata: {\"observedAt\":\"2026-11-22T01:59:00Z\",\"address\":\"0x3f5ce5fbfe3e9af3971dd833d26ba9b5c936f0be\",\"label\":null,\"tags\":[],\"symbol\":\"BTC\",\"kind\":\"opened\",\"firstObservation\":false,\"previousDirection\":null,\"direction\":\"long\",\"previousSize\":\"0\",\"size\":\"12.5\",\"previousValue\":\"0\",\"value\":\"1187500\",\"price\":\"95000\",\"previousLiqPrice\":null}\n\nid: 1201\n: heartbeat\n\n")),
        (status = 400, description = "Bad address, kind, minValue, `since` or `Last-Event-ID` (not an id, or later than the last event), or unknown parameter.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Unknown network or asset.", body = Problem, content_type = "application/problem+json"),
        (status = 406, description = "The `Accept` header excludes `text/event-stream` and JSON.", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "The events after the given id are no longer stored; the detail names the oldest id to resume from.", body = Problem, content_type = "application/problem+json"),
    ),
    security(("apiKey" = []))
)]
pub async fn stream_position_events(
    req: HttpRequest,
    ApiPath(_network): ApiPath<NetworkPath>,
    query: StrictQuery<EventStreamQuery>,
    state: Data,
) -> Result<HttpResponse, ApiError> {
    let q = query.0;
    let snapshot = state.snapshot();
    let symbol = q
        .asset
        .as_deref()
        .map(|a| {
            market_query::resolve_asset(&snapshot, a).map(|i| snapshot.market(i).symbol.clone())
        })
        .transpose()?;
    // `since=0` asks for every stored event, whatever retention removed:
    // it starts at the oldest one kept. A resume from an id of its own is
    // told (410) when events after it are gone.
    let (resume, everything) = match req.headers().get("last-event-id") {
        Some(v) => (Some(last_event_id(v)?), false),
        None => (q.since, q.since == Some(EventId(0))),
    };
    let gzip = req.extensions().get::<StreamGzip>().is_some_and(|g| g.0);
    if req.method() == actix_web::http::Method::HEAD {
        return Ok(stream_response(gzip).finish());
    }
    let hub = state.stream.clone();
    // Subscribed before the bound is read: whatever is committed after the
    // bound reaches this receiver.
    let mut receiver = hub.subscribe();
    let bounds = state
        .db
        .run(Lane::Control, |store| {
            store.event_bounds().map_err(ApiError::from)
        })
        .await?;
    let replay_after = match resume {
        Some(_) if everything => Some(bounds.pruned_through),
        Some(EventId(id)) if id < bounds.pruned_through => {
            return Err(ApiError::new(
                ProblemKind::Gone,
                format!(
                    "The events after id {id} are no longer stored (past the writer's retention, {} days by default, or removed by a re-seed); resume from id {} (`since={}`), or connect without Last-Event-ID and `since` for live events only.",
                    Retention::default().events_days,
                    bounds.pruned_through,
                    bounds.pruned_through
                ),
            ));
        }
        Some(EventId(id)) if id > bounds.last => {
            return Err(resume_error(format!(
                "names event {id}, but the last event is {}; resume from an id this server sent",
                bounds.last
            )));
        }
        Some(EventId(id)) => Some(id),
        None => None,
    };
    let key = req.extensions().get::<TokenId>().map_or(0, |t| t.0);
    let Some(slot) = hub.open(key) else {
        return Err(ApiError::new(
            ProblemKind::RateLimited,
            format!(
                "This API key has {} event streams open, the most it may (--max-streams-per-key); close one, or resume it with Last-Event-ID instead of opening another.",
                hub.max_per_key()
            ),
        ));
    };
    let filter = EventFilter {
        symbol,
        address: q.address.as_deref().map(str::to_owned),
        kind: q.kind,
        min_value: q.min_value.map(|m| m.0),
        from: None,
        to: None,
    };
    let opening = hub.opening(&snapshot, filter.symbol.as_deref());
    drop(snapshot);
    // No filter: the hub's pieces are sent as they are.
    let everything = filter.symbol.is_none()
        && filter.address.is_none()
        && filter.kind.is_none()
        && filter.min_value.is_none();
    let mut coding = if gzip {
        Coding::Gzip(Default::default())
    } else {
        Coding::Identity
    };
    let body = async_stream::stream! {
        let _slot = slot;
        if let Some(head) = coding.start() {
            yield Ok::<Bytes, std::convert::Infallible>(head);
        }
        for piece in coding.own(Bytes::from(format!(": connected\nretry: {RETRY_MS}\n\n"))) {
            yield Ok(piece);
        }
        {
            // Shared by the streams of the version, not copied per stream;
            // and let go once sent, since a stream may live for hours.
            let opening = opening;
            for piece in coding.shared(&opening) {
                yield Ok(piece.clone());
            }
        }
        // Every event up to `floor` was sent or did not pass the filter.
        let mut floor = bounds.last;
        if let Some(after) = replay_after {
            floor = after;
            loop {
                let (f, from) = (filter.clone(), floor);
                // Boxed: a stream's state is the largest of its await
                // points, and it lives as long as the stream.
                let page = Box::pin(state.db.run(Lane::Page, move |store| {
                    store
                        .events_after(&f, from, REPLAY_PAGE)
                        .map_err(ApiError::from)
                }))
                .await;
                let Ok(page) = page else {
                    // The database is busy or gone: the client resumes later.
                    for piece in ending(&mut coding, "unavailable", floor) {
                        yield Ok(piece);
                    }
                    return;
                };
                let mut frames = BytesMut::new();
                for e in &page {
                    frames.extend_from_slice(&frame("position-event", Some(e.seq), e.json.as_bytes()));
                    floor = e.seq;
                }
                for piece in coding.own(frames.freeze()) {
                    yield Ok(piece);
                }
                if page.len() < REPLAY_PAGE {
                    break;
                }
            }
        }
        // The probe fires only after PROBE without a write (a stream fed by
        // a publish every few seconds never needs it: at 10,000 streams
        // that is thousands of wake-ups and writes a second saved); the
        // heartbeat is due every HEARTBEAT whatever was written, and rides
        // on a push when one comes.
        let probe = tokio::time::sleep(PROBE);
        tokio::pin!(probe);
        let mut next_heartbeat = tokio::time::Instant::now() + HEARTBEAT;
        loop {
            let mut wrote = false;
            tokio::select! {
                pushed = receiver.recv() => match pushed {
                    Ok(push) => match &*push {
                        Push::Events(chunk) if everything && chunk.starts_after(floor) => {
                            // Every event, none sent yet: the hub's pieces, shared.
                            // Borrowed: the push is held anyway, and a copy of
                            // its list would be one more allocation per stream
                            // for as long as the stream waits on its socket.
                            for piece in coding.shared(&chunk.packed) {
                                wrote = true;
                                yield Ok(piece.clone());
                            }
                            floor = chunk.last_seq();
                        }
                        Push::Events(chunk) => {
                            for piece in coding.own(passing(&chunk.events, &filter, &mut floor)) {
                                wrote = true;
                                yield Ok(piece);
                            }
                        }
                        Push::Version(v) if filter.symbol.is_none() => {
                            for piece in coding.shared(&v.packed) {
                                wrote = true;
                                yield Ok(piece.clone());
                            }
                        }
                        Push::Version(v) => {
                            for piece in coding.own(v.frame(filter.symbol.as_deref())) {
                                wrote = true;
                                yield Ok(piece);
                            }
                        }
                        Push::Closing => {
                            for piece in ending(&mut coding, "closing", floor) {
                                yield Ok(piece);
                            }
                            return;
                        }
                    },
                    Err(RecvError::Lagged(_)) => {
                        hub.count_lagged();
                        for piece in ending(&mut coding, "lagged", floor) {
                            yield Ok(piece);
                        }
                        return;
                    }
                    Err(RecvError::Closed) => {
                        if let Some(last) = coding.end() {
                            yield Ok(last);
                        }
                        return;
                    }
                },
                _ = &mut probe => {
                    wrote = true;
                    if tokio::time::Instant::now() < next_heartbeat {
                        for piece in coding.own(Bytes::from_static(b"\n")) {
                            yield Ok(piece);
                        }
                    }
                },
            }
            if wrote {
                let now = tokio::time::Instant::now();
                if now >= next_heartbeat {
                    next_heartbeat = now + HEARTBEAT;
                    for piece in coding.own(heartbeat(floor)) {
                        yield Ok(piece);
                    }
                }
                probe.as_mut().reset(now + PROBE);
            }
        }
    };
    Ok(stream_response(gzip).streaming(body))
}

/// The frames of `events` newer than `floor` that pass `filter`; moves
/// `floor` past every one of them.
fn passing(events: &[StreamEvent], filter: &EventFilter, floor: &mut i64) -> Bytes {
    let mut out = BytesMut::new();
    for e in events {
        if e.seq <= *floor {
            continue;
        }
        if e.passes(filter) {
            out.extend_from_slice(&e.frame);
        }
        *floor = e.seq;
    }
    out.freeze()
}

/// The heartbeat: a comment, and `id:` the resume point. An id without
/// data dispatches no event, but an `EventSource` takes it as its last
/// event id: a filtered stream that matched nothing for a long time then
/// resumes from where it was, not from its last match (which retention may
/// have deleted meanwhile).
fn heartbeat(floor: i64) -> Bytes {
    Bytes::from(format!("id: {floor}\n: heartbeat\n\n"))
}

/// The last bytes of a stream the server ends: its last event, in pieces,
/// then the end of its encoding.
fn ending(coding: &mut Coding, reason: &str, resume_from: i64) -> Vec<Bytes> {
    let mut out: Vec<Bytes> = coding.own(end(reason, resume_from)).collect();
    out.extend(coding.end());
    out
}

/// The last event of a stream the server ends.
fn end(reason: &str, resume_from: i64) -> Bytes {
    let data = serde_json::to_vec(&market_model::StreamEnd {
        reason: reason.to_owned(),
        resume_from: resume_from.to_string(),
    })
    .expect("model types serialize");
    frame(reason, Some(resume_from), &data)
}

/// The 200 head of a stream, gzip-encoded or not.
fn stream_response(gzip: bool) -> actix_web::HttpResponseBuilder {
    let mut res = HttpResponse::Ok();
    if gzip {
        res.insert_header((header::CONTENT_ENCODING, HeaderValue::from_static("gzip")));
    }
    res.content_type("text/event-stream")
        .insert_header((header::VARY, HeaderValue::from_static("accept-encoding")))
        .insert_header((header::CACHE_CONTROL, HeaderValue::from_static("no-cache")))
        // nginx and the like pass each event on at once.
        .insert_header(("X-Accel-Buffering", HeaderValue::from_static("no")));
    res
}

fn resume_error(reason: String) -> ApiError {
    let mut e = ApiError::new(
        ProblemKind::InvalidParameter,
        format!("Header `Last-Event-ID` (or `since`) {reason}."),
    );
    e.invalid_params.push(InvalidParam {
        name: "Last-Event-ID".into(),
        reason,
    });
    e
}

fn last_event_id(v: &HeaderValue) -> Result<EventId, ApiError> {
    v.to_str()
        .map_err(|_| "is not visible ASCII".to_owned())
        .and_then(EventId::parse)
        .map_err(resume_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: i64, symbol: &str) -> StreamEvent {
        StreamEvent {
            seq,
            symbol: symbol.into(),
            address: "0xaa".into(),
            kind: market_model::EventKind::Opened,
            value: 5.into(),
            frame: Bytes::from(format!("id: {seq}\n\n")),
        }
    }

    #[test]
    fn pushed_events_at_or_under_the_floor_are_dropped_and_the_floor_moves_past_the_rest() {
        let events = [
            event(3, "BTC"),
            event(4, "ETH"),
            event(5, "BTC"),
            event(6, "ETH"),
        ];
        let btc = EventFilter {
            symbol: Some("BTC".into()),
            ..Default::default()
        };
        let mut floor = 3;
        assert_eq!(&passing(&events, &btc, &mut floor)[..], b"id: 5\n\n");
        assert_eq!(floor, 6);
        assert!(passing(&events, &EventFilter::default(), &mut floor).is_empty());
        let mut floor = 0;
        assert_eq!(
            &passing(&events, &EventFilter::default(), &mut floor)[..],
            b"id: 3\n\nid: 4\n\nid: 5\n\nid: 6\n\n"
        );
    }

    #[test]
    fn a_heartbeat_moves_the_resume_point_without_an_event() {
        assert_eq!(&heartbeat(42)[..], b"id: 42\n: heartbeat\n\n");
    }

    #[test]
    fn an_end_event_carries_its_resume_id_twice() {
        assert_eq!(
            &end("lagged", 42)[..],
            &b"id: 42\nevent: lagged\ndata: {\"reason\":\"lagged\",\"resumeFrom\":\"42\"}\n\n"[..]
        );
    }
}
