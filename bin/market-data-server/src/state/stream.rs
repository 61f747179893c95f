//! The event stream's hub: what the reloader pushes to every open stream
//! when it serves a new data version, and the count of open streams per key.
//!
//! One broadcast channel carries it all, each message once for every
//! client: the new events in number order (in chunks), then a
//! `data-version` message. A client that falls more than [`BUFFER`]
//! messages behind finds out when it next reads (`Lagged`) and is closed with
//! the id to resume from; nothing is queued per client, so a slow consumer
//! costs no memory beyond the shared buffer and never slows the reloader.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use actix_web::http::header::{AcceptEncoding, Encoding, Header};
use actix_web::HttpMessage;
use bigdecimal::BigDecimal;
use bytes::{Bytes, BytesMut};
use flate2::Compression;
use market_model::{EventKind, MarketFigures, PositionEvent};
use market_snapshot::Snapshot;
use market_store::{EventFilter, SequencedEvent, Store, StoreError};
use tokio::sync::broadcast;

use super::gzip::{GzipStream, Segment};

/// The path suffix of the stream, which the API guard lets accept
/// `text/event-stream` and the compression layer leaves alone (the stream
/// compresses itself: [`Coding`]).
const STREAM_SUFFIX: &str = "/position-events/stream";
/// Whether `path` is the event stream's.
pub fn is_stream_path(path: &str) -> bool {
    path.ends_with(STREAM_SUFFIX)
}

/// Whether a stream's client takes gzip, as its `Accept-Encoding` said: the
/// request context reads it (see [`accepts_gzip`]) and takes the header
/// away, so that the compression layer leaves the stream alone.
#[derive(Debug, Clone, Copy)]
pub struct StreamGzip(pub bool);

/// Whether `req`'s `Accept-Encoding` ranks gzip above sending the stream as
/// it is (no header, or one that does not name gzip: no).
pub fn accepts_gzip(req: &impl HttpMessage) -> bool {
    AcceptEncoding::parse(req)
        .ok()
        .and_then(|a| a.negotiate([Encoding::gzip(), Encoding::identity()].iter()))
        == Some(Encoding::gzip())
}

/// Messages the shared buffer holds: at most `BUFFER × CHUNK` events.
pub const BUFFER: usize = 1024;
/// Events per message.
pub const CHUNK: usize = 128;
/// Default bound of open streams per API key (`--max-streams-per-key`).
pub const MAX_STREAMS_PER_KEY: usize = 8;

/// The largest piece a stream hands to actix-web at once.
///
/// actix-web copies a streamed body's pieces into the connection's write
/// buffer (8 KB, allocated with the connection and kept while it lives),
/// and writes the buffer out once it holds [`WRITE_BUFFER`] bytes. Under
/// jemalloc that buffer is two whole pages, and a page is resident only once
/// something is written to it. So every write out holds at most one page:
/// less than [`WRITE_BUFFER`] bytes, then one piece with its chunk framing
/// (`{len:X}\r\n` before it, `\r\n` after). The second page of a
/// stream's buffer is then never touched, 4 KB a stream, unless the
/// connection touched it before: a write the socket took only in part
/// moves the buffer's start for good, and a kept-alive connection may have
/// written a larger answer before it asked for the stream. A 60 KB frame
/// written whole would cost every open stream 64 KB for as long as it stays
/// open.
pub const PIECE: usize = 2040;
/// How much a connection's write buffer holds before actix-web writes it
/// out (the server's `h1_write_buffer_size`; actix-web's default is 32 KB).
/// Only streamed bodies are affected: a whole body is appended after its
/// head as one piece, and written with it. A compressed answer is streamed
/// (its head goes first), which is why the server sets `TCP_NODELAY`.
pub const WRITE_BUFFER: usize = 2048;

/// A piece of [`PIECE`] bytes with its chunk framing: 3 hex digits and two
/// line ends.
const FRAMED_PIECE: usize = PIECE + 3 + 4;
const _: () = assert!(WRITE_BUFFER - 1 + FRAMED_PIECE <= 4096);

/// `bytes` in pieces of at most [`PIECE`] (views of it, not copies).
pub fn pieces(bytes: Bytes) -> impl Iterator<Item = Bytes> {
    (0..bytes.len())
        .step_by(PIECE)
        .map(move |at| bytes.slice(at..(at + PIECE).min(bytes.len())))
}

/// `frames` one after another, in one buffer at its size: cut into pieces
/// of [`PIECE`] bytes, a frame may end in one piece and go on in the next,
/// which a client reading the stream does not see.
pub fn packed<'a, I>(frames: I) -> Shared
where
    I: IntoIterator<Item = &'a Bytes>,
    I::IntoIter: Clone,
{
    let frames = frames.into_iter();
    // At its size: the pieces share this buffer for as long as the hub's
    // buffer holds the push, spare capacity included.
    let mut all = BytesMut::with_capacity(frames.clone().map(Bytes::len).sum());
    for f in frames {
        all.extend_from_slice(f);
    }
    Shared::new(all.freeze())
}

/// Bytes that every stream taking them sends alike: in pieces as they are,
/// and in pieces of their gzip [`Segment`], compressed once, when the first
/// stream that asked for gzip takes them.
#[derive(Debug)]
pub struct Shared {
    plain: Bytes,
    pieces: Vec<Bytes>,
    gzip: OnceLock<(Segment, Vec<Bytes>)>,
}

impl Shared {
    /// `plain`, to be shared.
    pub fn new(plain: Bytes) -> Shared {
        Shared {
            pieces: pieces(plain.clone()).collect(),
            plain,
            gzip: OnceLock::new(),
        }
    }

    /// Its pieces as they are.
    pub fn pieces(&self) -> &[Bytes] {
        &self.pieces
    }

    /// Its gzip segment, and that segment's pieces.
    fn gzip(&self) -> &(Segment, Vec<Bytes>) {
        self.gzip.get_or_init(|| {
            let segment = Segment::compressed(&self.plain, Compression::default());
            let pieces = pieces(segment.bytes.clone()).collect();
            (segment, pieces)
        })
    }
}

/// How one stream's body is encoded: as it is, or gzip when the client
/// accepts it (the hub's pushes compressed once for every stream).
#[derive(Debug)]
pub enum Coding {
    /// As it is.
    Identity,
    /// `Content-Encoding: gzip`.
    Gzip(GzipStream),
}

impl Coding {
    /// The body's first bytes, before any event (gzip's header).
    pub fn start(&self) -> Option<Bytes> {
        match self {
            Coding::Identity => None,
            Coding::Gzip(_) => Some(GzipStream::header()),
        }
    }

    /// Bytes made for this stream only, in pieces.
    pub fn own(&mut self, bytes: Bytes) -> impl Iterator<Item = Bytes> {
        pieces(match self {
            Coding::Identity => bytes,
            Coding::Gzip(stream) => {
                let segment = Segment::own(&bytes);
                stream.sent(&segment);
                segment.bytes
            }
        })
    }

    /// The pieces of bytes shared between streams (not copied).
    pub fn shared<'a>(&mut self, shared: &'a Shared) -> &'a [Bytes] {
        match self {
            Coding::Identity => shared.pieces(),
            Coding::Gzip(stream) => {
                let (segment, pieces) = shared.gzip();
                stream.sent(segment);
                pieces
            }
        }
    }

    /// The body's last bytes, when the server ends it (gzip's end).
    pub fn end(&self) -> Option<Bytes> {
        match self {
            Coding::Identity => None,
            Coding::Gzip(stream) => Some(stream.end()),
        }
    }
}

/// Events pushed at once, in number order, and their frames packed for the
/// streams that take every event.
#[derive(Debug)]
pub struct EventChunk {
    /// The events.
    pub events: Vec<StreamEvent>,
    /// Their frames, packed ([`packed`]).
    pub packed: Shared,
}

impl EventChunk {
    /// A chunk of `events` (at least one).
    pub fn new(events: Vec<StreamEvent>) -> EventChunk {
        let packed = packed(events.iter().map(|e| &e.frame));
        EventChunk { events, packed }
    }

    /// Whether every event in it is numbered after `floor`.
    pub fn starts_after(&self, floor: i64) -> bool {
        self.events.first().is_some_and(|e| e.seq > floor)
    }

    /// The number of its last event.
    pub fn last_seq(&self) -> i64 {
        self.events.last().map_or(0, |e| e.seq)
    }
}

/// One position event as streamed: what the filters look at, and its frame.
#[derive(Debug)]
pub struct StreamEvent {
    /// Its number: the frame's `id:`.
    pub seq: i64,
    /// Network symbol.
    pub symbol: String,
    /// Wallet address.
    pub address: String,
    /// What changed.
    pub kind: EventKind,
    /// `max(previousValue, value)`, USD: what `minValue` compares.
    pub value: BigDecimal,
    /// `id: …`, `event: position-event` and `data: {json}`, ready to write.
    pub frame: Bytes,
}

impl StreamEvent {
    /// The stream form of a stored event.
    pub fn from_stored(e: &SequencedEvent) -> Result<StreamEvent, StoreError> {
        let ev: PositionEvent = serde_json::from_str(&e.json)
            .map_err(|err| StoreError::Corrupt(format!("position event {}: {err}", e.seq)))?;
        Ok(StreamEvent {
            seq: e.seq,
            frame: frame("position-event", Some(e.seq), e.json.as_bytes()),
            value: ev.previous_value.0.max(ev.value.0),
            symbol: ev.symbol,
            address: ev.address,
            kind: ev.kind,
        })
    }

    /// Whether it passes `filter` (exactly as the stored replay does).
    pub fn passes(&self, filter: &EventFilter) -> bool {
        filter.symbol.as_ref().is_none_or(|s| *s == self.symbol)
            && filter.address.as_ref().is_none_or(|a| *a == self.address)
            && filter.kind.is_none_or(|k| k == self.kind)
            && filter.min_value.as_ref().is_none_or(|m| self.value >= m.0)
    }
}

/// A data version as streamed: each market's JSON, to assemble per filter.
#[derive(Debug)]
pub struct VersionEvent {
    /// The data version.
    pub version: i64,
    /// Its `observedAt`, rendered.
    pub observed_at: String,
    /// (symbol, `MarketFigures` JSON) of the markets it carries.
    pub markets: Vec<(String, Bytes)>,
    /// Its frame with every market, shared.
    pub packed: Shared,
}

impl VersionEvent {
    /// Every market of `snapshot` (on connect), or only `symbol`'s.
    pub fn whole(snapshot: &Snapshot, symbol: Option<&str>) -> VersionEvent {
        VersionEvent::new(
            snapshot,
            figures(snapshot)
                .filter(|(s, _)| symbol.is_none_or(|want| want == s.as_str()))
                .collect(),
        )
    }

    fn new(snapshot: &Snapshot, markets: Vec<(String, Bytes)>) -> VersionEvent {
        let version = snapshot.version;
        let observed_at = market_model::timestamp::format_utc(snapshot.observed_at);
        let packed = Shared::new(version_frame(version, &observed_at, &markets, None));
        VersionEvent {
            version,
            observed_at,
            markets,
            packed,
        }
    }

    /// The markets of `next` whose figures differ from `previous`'s.
    pub fn changed(previous: &Snapshot, next: &Snapshot) -> VersionEvent {
        let before: HashMap<String, Bytes> = figures(previous).collect();
        VersionEvent::new(
            next,
            figures(next)
                .filter(|(s, json)| before.get(s) != Some(json))
                .collect(),
        )
    }

    /// Its `data-version` frame, with only `symbol`'s market when given.
    pub fn frame(&self, symbol: Option<&str>) -> Bytes {
        version_frame(self.version, &self.observed_at, &self.markets, symbol)
    }
}

/// A `data-version` frame of `markets` (only `symbol`'s when given).
fn version_frame(
    version: i64,
    observed_at: &str,
    markets: &[(String, Bytes)],
    symbol: Option<&str>,
) -> Bytes {
    let mut data =
        format!("{{\"version\":{version},\"observedAt\":\"{observed_at}\",\"markets\":[")
            .into_bytes();
    let mut first = true;
    for (s, json) in markets {
        if symbol.is_some_and(|want| want != s) {
            continue;
        }
        if !first {
            data.push(b',');
        }
        first = false;
        data.extend_from_slice(json);
    }
    data.extend_from_slice(b"]}");
    frame("data-version", None, &data)
}

/// (symbol, rendered `MarketFigures`) of every market of `snapshot`.
fn figures(snapshot: &Snapshot) -> impl Iterator<Item = (String, Bytes)> + '_ {
    (0..snapshot.asset_count()).map(|i| {
        let m = snapshot.market(i);
        let json = serde_json::to_vec(&MarketFigures::of(m)).expect("model types serialize");
        (m.symbol.clone(), Bytes::from(json))
    })
}

/// An SSE frame: `id:` (when given), `event:` and one `data:` line (the JSON
/// has no newline).
pub fn frame(event: &str, id: Option<i64>, data: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(data.len() + event.len() + 40);
    if let Some(id) = id {
        out.extend_from_slice(format!("id: {id}\n").as_bytes());
    }
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(event.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
    out.into()
}

/// What the hub pushes to every open stream.
#[derive(Debug)]
pub enum Push {
    /// New events, in number order.
    Events(EventChunk),
    /// A new data version is served.
    Version(VersionEvent),
    /// The server is stopping: streams end (clients resume elsewhere).
    Closing,
}

/// The hub of the event stream.
pub struct EventHub {
    sender: broadcast::Sender<Arc<Push>>,
    /// The last event number pushed (or passed over while nobody listened).
    pushed: AtomicI64,
    max_per_key: usize,
    per_key: Mutex<HashMap<i64, usize>>,
    open: AtomicUsize,
    lagged: AtomicU64,
    /// The `data-version` frame with every market of the served version
    /// (what an unfiltered stream gets on connect), made once per version.
    opening: Mutex<Option<(i64, Arc<Shared>)>>,
}

impl EventHub {
    /// A hub that lets each key open `max_per_key` streams, over a shared
    /// buffer of `buffer` messages.
    pub fn new(max_per_key: usize, buffer: usize) -> EventHub {
        EventHub {
            sender: broadcast::channel(buffer).0,
            pushed: AtomicI64::new(0),
            max_per_key,
            per_key: Mutex::new(HashMap::new()),
            open: AtomicUsize::new(0),
            lagged: AtomicU64::new(0),
            opening: Mutex::new(None),
        }
    }

    /// The `data-version` frame a stream gets on connect, in pieces: every
    /// market of `snapshot` (shared by every stream of the version), or
    /// only `symbol`'s.
    pub fn opening(&self, snapshot: &Snapshot, symbol: Option<&str>) -> Arc<Shared> {
        if symbol.is_some() {
            // Its markets are the one asked for.
            return Arc::new(VersionEvent::whole(snapshot, symbol).packed);
        }
        let mut opening = self.opening.lock().expect("never poisoned");
        match &*opening {
            Some((version, packed)) if *version == snapshot.version => packed.clone(),
            _ => {
                let packed = Arc::new(VersionEvent::whole(snapshot, None).packed);
                *opening = Some((snapshot.version, packed.clone()));
                packed
            }
        }
    }

    /// A receiver of everything pushed from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Push>> {
        self.sender.subscribe()
    }

    /// A stream slot for `key`, or `None` when it has its
    /// `--max-streams-per-key` open.
    pub fn open(self: &Arc<Self>, key: i64) -> Option<StreamSlot> {
        let mut per_key = self.per_key.lock().expect("never poisoned");
        let n = per_key.entry(key).or_default();
        if *n >= self.max_per_key {
            return None;
        }
        *n += 1;
        self.open.fetch_add(1, Ordering::Relaxed);
        Some(StreamSlot {
            hub: self.clone(),
            key,
        })
    }

    /// The bound of open streams per key.
    pub fn max_per_key(&self) -> usize {
        self.max_per_key
    }

    /// Open streams, and streams closed for lagging since start.
    pub fn stats(&self) -> (usize, u64) {
        (
            self.open.load(Ordering::Relaxed),
            self.lagged.load(Ordering::Relaxed),
        )
    }

    /// Counts a stream closed for lagging.
    pub fn count_lagged(&self) {
        self.lagged.fetch_add(1, Ordering::Relaxed);
    }

    /// Pushes what serving `next` after `previous` brings: the events
    /// stored since the last push, then the changed markets. Runs on the
    /// reloader thread. With nobody listening, it only moves past the
    /// stored events (a stream that connects later reads them from the store).
    pub fn publish(
        &self,
        store: &Store,
        previous: &Snapshot,
        next: &Snapshot,
    ) -> Result<(), StoreError> {
        // The bound is read before the count: a stream subscribing after the
        // count reads its own start after this bound, so nothing falls
        // between the two (see `routes::stream`).
        let bounds = store.event_bounds()?;
        if self.sender.receiver_count() == 0 {
            self.pushed.store(bounds.last, Ordering::Relaxed);
            return Ok(());
        }
        let mut after = self.pushed.load(Ordering::Relaxed);
        loop {
            let stored = store.events_after(&EventFilter::default(), after, CHUNK)?;
            let Some(last) = stored.last() else { break };
            after = last.seq;
            let full = stored.len() == CHUNK;
            let events = stored
                .iter()
                .map(StreamEvent::from_stored)
                .collect::<Result<Vec<_>, _>>()?;
            // Fails only when nobody listens any more.
            let _ = self
                .sender
                .send(Arc::new(Push::Events(EventChunk::new(events))));
            self.pushed.store(after, Ordering::Relaxed);
            if !full {
                break;
            }
        }
        let _ = self
            .sender
            .send(Arc::new(Push::Version(VersionEvent::changed(
                previous, next,
            ))));
        Ok(())
    }

    /// Ends every open stream (the server is stopping).
    pub fn close(&self) {
        let _ = self.sender.send(Arc::new(Push::Closing));
    }
}

/// An open stream of one key; frees its place when dropped.
pub struct StreamSlot {
    hub: Arc<EventHub>,
    key: i64,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut per_key = self.hub.per_key.lock().expect("never poisoned");
        if let Some(n) = per_key.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                per_key.remove(&self.key);
            }
        }
        self.hub.open.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_one_data_line_with_an_optional_id() {
        assert_eq!(
            &frame("position-event", Some(12), b"{\"a\":1}")[..],
            b"id: 12\nevent: position-event\ndata: {\"a\":1}\n\n"
        );
        assert_eq!(
            &frame("data-version", None, b"{}")[..],
            b"event: data-version\ndata: {}\n\n"
        );
    }

    #[test]
    fn a_version_frame_carries_the_filtered_markets() {
        let v = VersionEvent {
            version: 7,
            observed_at: "2026-11-22T00:00:00Z".into(),
            markets: vec![
                ("BTC".into(), Bytes::from_static(b"{\"symbol\":\"BTC\"}")),
                ("ETH".into(), Bytes::from_static(b"{\"symbol\":\"ETH\"}")),
            ],
            packed: Shared::new(Bytes::new()),
        };
        assert_eq!(
            &v.frame(None)[..],
            &b"event: data-version\ndata: {\"version\":7,\"observedAt\":\"2026-11-22T00:00:00Z\",\"markets\":[{\"symbol\":\"BTC\"},{\"symbol\":\"ETH\"}]}\n\n"[..]
        );
        assert_eq!(
            &v.frame(Some("ETH"))[..],
            &b"event: data-version\ndata: {\"version\":7,\"observedAt\":\"2026-11-22T00:00:00Z\",\"markets\":[{\"symbol\":\"ETH\"}]}\n\n"[..]
        );
    }

    #[test]
    fn pieces_cover_the_bytes_in_order_and_are_bounded() {
        let bytes = Bytes::from((0..10_000u32).map(|i| i as u8).collect::<Vec<u8>>());
        let parts: Vec<Bytes> = pieces(bytes.clone()).collect();
        assert_eq!(
            parts.iter().map(Bytes::len).collect::<Vec<_>>(),
            [PIECE; 4]
                .into_iter()
                .chain([10_000 - 4 * PIECE])
                .collect::<Vec<_>>()
        );
        assert_eq!(parts.concat(), bytes.to_vec());
        assert_eq!(pieces(Bytes::new()).count(), 0);
    }

    #[test]
    fn frames_are_packed_into_full_pieces() {
        let small = Bytes::from(vec![b'a'; 1500]);
        let big = Bytes::from(vec![b'b'; 5000]);
        let frames = [small.clone(), small.clone(), big.clone(), small.clone()];
        let out = packed(frames.iter());
        let out = out.pieces();
        assert_eq!(
            out.iter().map(Bytes::len).collect::<Vec<_>>(),
            [PIECE; 4]
                .into_iter()
                .chain([9500 - 4 * PIECE])
                .collect::<Vec<_>>()
        );
        assert_eq!(out.concat(), frames.concat());
        assert!(packed([].iter()).pieces().is_empty());
    }

    /// What actix-web adds to a piece of a streamed body is what
    /// [`FRAMED_PIECE`] counts.
    #[actix_web::test]
    async fn a_piece_with_its_chunk_framing_fits_the_count() {
        use actix_codec::Encoder;
        use actix_web::body::BodySize;
        use actix_web::dev::Response;
        use actix_web::http::StatusCode;

        let mut codec = actix_http::h1::Codec::new(actix_http::ServiceConfig::default());
        let mut out = BytesMut::new();
        let head = Response::with_body(StatusCode::OK, ());
        codec
            .encode(
                actix_http::h1::Message::Item((head, BodySize::Stream)),
                &mut out,
            )
            .unwrap();
        let before = out.len();
        codec
            .encode(
                actix_http::h1::Message::Chunk(Some(Bytes::from(vec![b'x'; PIECE]))),
                &mut out,
            )
            .unwrap();
        assert_eq!(out.len() - before, FRAMED_PIECE);
    }

    #[test]
    fn gzip_only_when_the_client_ranks_it_above_identity() {
        let with = |v: Option<&str>| {
            let mut req = actix_web::test::TestRequest::default();
            if let Some(v) = v {
                req = req.insert_header(("Accept-Encoding", v));
            }
            accepts_gzip(&req.to_http_request())
        };
        assert!(with(Some("gzip, deflate, br, zstd")));
        assert!(with(Some("br;q=1, gzip;q=0.5")));
        assert!(with(Some("GZIP")));
        assert!(!with(None));
        assert!(!with(Some("br, zstd")));
        assert!(!with(Some("gzip;q=0")));
        assert!(!with(Some("identity, gzip;q=0.5")));
        assert!(!with(Some("*")));
    }

    /// A gzip stream sends the shared pieces of a push compressed once, and
    /// they decode to what a plain stream sends.
    #[test]
    fn shared_bytes_are_compressed_once_for_every_gzip_stream() {
        let frames: Vec<Bytes> = (0..200)
            .map(|i| {
                frame(
                    "position-event",
                    Some(i),
                    format!("{{\"n\":{i}}}").as_bytes(),
                )
            })
            .collect();
        let shared = packed(frames.iter());
        let (mut a, mut b) = (
            Coding::Gzip(GzipStream::default()),
            Coding::Gzip(GzipStream::default()),
        );
        let first = a.shared(&shared);
        let second = b.shared(&shared);
        assert!(std::ptr::eq(first, second), "compressed once");
        assert_eq!(Coding::Identity.shared(&shared), shared.pieces());
        let mut body = a.start().unwrap().to_vec();
        body.extend(first.iter().flat_map(|p| p.iter()));
        body.extend(
            a.own(Bytes::from_static(b": bye\n\n"))
                .flat_map(|p| p.to_vec()),
        );
        body.extend_from_slice(&a.end().unwrap());
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&body[..]), &mut text)
            .unwrap();
        let mut want = frames.concat();
        want.extend_from_slice(b": bye\n\n");
        assert_eq!(text, want);
        assert!(first.iter().all(|p| p.len() <= PIECE));
    }

    #[test]
    fn slots_are_bounded_per_key_and_freed_on_drop() {
        let hub = Arc::new(EventHub::new(2, BUFFER));
        let a = hub.open(1).unwrap();
        let _b = hub.open(1).unwrap();
        assert!(hub.open(1).is_none());
        let _other = hub.open(2).unwrap();
        assert_eq!(hub.stats().0, 3);
        drop(a);
        assert!(hub.open(1).is_some());
    }
}
