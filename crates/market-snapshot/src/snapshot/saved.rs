//! A served version saved to a file and read back as it was served: every
//! item as rendered, every order as sorted ([`Snapshot::save`],
//! [`Snapshot::load_saved`]). A server that starts from a saved version
//! renders and sorts nothing; it then applies the changes stored since.
//!
//! The file has two parts and a trailer. The head: 8 magic bytes; the
//! [`Header`]; the markets (one length-prefixed record); the wallet slots
//! (a count, then one record a slot); the free slots, the address order,
//! the filter flags and the unfiltered list of every wallet order. The
//! positions: the number of markets, then each market's positions (a
//! count, then one record a position, in page order). The trailer, 16
//! bytes little-endian: where the positions part starts (u64), the CRC-32
//! of the head and that of the positions part (u32 each). Records are
//! postcard. What is derived (the lookups by symbol and address, the
//! orders' codes, the long and short subsets, each wallet's positions) is
//! rebuilt, not saved; the filtered wallet lists are derived when a page
//! first asks for them, as in any version.
//!
//! The two parts are read at once, one on each of two threads (positional
//! reads of one open file), and what is derived from each is then rebuilt
//! at once too: the start of a server waits for roughly the longer of the
//! two halves, not their sum (docs/performance.md).
//!
//! A file saved by another build, or that does not read back whole (short,
//! a failed checksum, an index out of range), is an error: the caller then
//! loads the version from its database.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use market_engine::SortKey;
use market_model::{
    Direction, MarketPositionText, MarketSort, PlainDecimal, SortOrder, Wallet, WalletSort,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::build::assembled;
use super::markets::{MarketsPart, PositionItem, Rendered};
use super::pages::JsonItems;
use super::wallets::{sort_orders, valid_flags, AddressIndex, WalletItem, Wallets};
use super::Snapshot;
use crate::rendered::RenderedPosition;

const MAGIC: [u8; 8] = *b"MDSAVED\n";
/// The layout's version: raised whenever the records change.
const FORMAT: u32 = 2;
/// Bytes of the trailer: where the positions part starts, and the two
/// parts' checksums.
const TRAILER: u64 = 16;
/// Read and write buffers.
const BUFFER: usize = 1 << 20;
/// No rendered item or address of a sound file is near this large.
const MAX_ITEM: u64 = 16 << 20;
/// Nor its markets record.
const MAX_MARKETS: u64 = 256 << 20;

/// Why a saved version was not read (or not written).
#[derive(Debug, thiserror::Error)]
pub enum SavedError {
    /// The file could not be read or written.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// Saved by a build that renders or lays out items differently.
    #[error("saved by another build ({0})")]
    OtherBuild(String),
    /// Not a whole saved version (cut short, corrupted, or not one at all).
    #[error("not a whole saved version: {0}")]
    Corrupt(String),
}

impl From<postcard::Error> for SavedError {
    fn from(e: postcard::Error) -> SavedError {
        SavedError::Corrupt(e.to_string())
    }
}

fn corrupt(what: &str) -> SavedError {
    SavedError::Corrupt(what.to_owned())
}

/// What a saved file holds, read from its header alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedVersion {
    /// Where the version came from, as the saver named it (a server names
    /// its database).
    pub origin: String,
    /// The data version.
    pub version: i64,
    /// When its data was observed.
    pub observed_at: OffsetDateTime,
    /// Positions served.
    pub positions: u64,
    /// Wallets served.
    pub wallets: u64,
}

#[derive(Serialize, Deserialize)]
struct Header<'a> {
    format: u32,
    #[serde(borrow)]
    build: Cow<'a, str>,
    rendering: u32,
    #[serde(borrow)]
    origin: Cow<'a, str>,
    version: i64,
    observed_at_ns: i128,
    positions: u64,
    wallets: u64,
    /// The longest byte or text field of any slot or position record (the
    /// reader checks it against [`MAX_ITEM`]).
    largest: u64,
}

#[derive(Serialize, Deserialize)]
enum KeyRecord<'a> {
    Small(i64, i16),
    Big(#[serde(borrow)] Cow<'a, str>),
}

impl KeyRecord<'_> {
    fn of(key: &SortKey) -> KeyRecord<'_> {
        match key {
            SortKey::Small { mantissa, scale } => KeyRecord::Small(*mantissa, *scale),
            SortKey::Big(d) => KeyRecord::Big(Cow::Owned(d.to_string())),
        }
    }

    fn key(self) -> Result<SortKey, SavedError> {
        match self {
            KeyRecord::Small(mantissa, scale) => Ok(SortKey::Small { mantissa, scale }),
            KeyRecord::Big(text) => text
                .parse()
                .map(|d| SortKey::Big(Box::new(d)))
                .map_err(|_| corrupt("a sort key is not a decimal")),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct PositionRecord<'a> {
    #[serde(borrow, with = "serde_bytes")]
    json: Cow<'a, [u8]>,
    value: KeyRecord<'a>,
    wallet: u32,
    long: bool,
}

#[derive(Serialize, Deserialize)]
struct WalletRecord<'a> {
    #[serde(borrow, with = "serde_bytes")]
    json: Cow<'a, [u8]>,
    #[serde(borrow)]
    address: Cow<'a, str>,
    keys: [Option<KeyRecord<'a>>; 5],
}

#[derive(Serialize, Deserialize)]
struct ItemsRecord<'a> {
    #[serde(borrow, with = "serde_bytes")]
    bytes: Cow<'a, [u8]>,
    starts: Vec<u64>,
}

impl ItemsRecord<'_> {
    fn of(items: &JsonItems) -> ItemsRecord<'_> {
        let (bytes, starts) = items.parts();
        ItemsRecord {
            bytes: Cow::Borrowed(bytes),
            starts: starts.iter().map(|&s| s as u64).collect(),
        }
    }

    fn items(self) -> Result<JsonItems, SavedError> {
        let starts = self
            .starts
            .into_iter()
            .map(usize::try_from)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| corrupt("an item offset"))?;
        JsonItems::from_parts(self.bytes.into_owned(), starts)
            .ok_or_else(|| corrupt("rendered items out of bounds"))
    }
}

#[derive(Serialize, Deserialize)]
struct MarketsRecord<'a> {
    /// The markets as JSON (they are read back as models).
    #[serde(borrow, with = "serde_bytes")]
    markets: Cow<'a, [u8]>,
    market_json: ItemsRecord<'a>,
    /// In `MarketSort::ALL` order, ascending then descending.
    #[serde(borrow)]
    market_lists: Vec<Blob<'a>>,
    current_days: ItemsRecord<'a>,
    current_day_symbols: Vec<Cow<'a, str>>,
    #[serde(borrow, with = "serde_bytes")]
    coverage_json: Cow<'a, [u8]>,
    cohorts_json: ItemsRecord<'a>,
}

#[derive(Serialize, Deserialize)]
struct Blob<'a>(#[serde(borrow, with = "serde_bytes")] Cow<'a, [u8]>);

fn market_orders() -> impl Iterator<Item = (MarketSort, SortOrder)> {
    MarketSort::ALL
        .iter()
        .flat_map(|&sort| [SortOrder::Asc, SortOrder::Desc].map(|order| (sort, order)))
}

/// A fingerprint of how this build renders a position and a wallet: a file
/// saved by a build that renders them otherwise is not read.
fn rendering() -> u32 {
    static RENDERING: OnceLock<u32> = OnceLock::new();
    *RENDERING.get_or_init(|| {
        let mut hasher = crc32fast::Hasher::new();
        let d = |text| PlainDecimal::new(text).expect("a plain decimal");
        let position = RenderedPosition::from_text(&MarketPositionText {
            address: "0x0000000000000000000000000000000000000001",
            label: None,
            tags: &[],
            symbol: "xyz:TSLA",
            direction: Direction::Short,
            position_value: d("1234.5"),
            liq_price: Some(d("0.001")),
            observed_at: OffsetDateTime::UNIX_EPOCH,
            leverage: d("20"),
            size: d("-3.25"),
            size_unit: "xyz:TSLA",
            u_pnl: d("-12.5"),
            u_pnl_pct: d("-1.01"),
            entry_price: d("380.1"),
            mark_price: d("379.85"),
            margin: d("61.72"),
            funding_cost: d("0.03"),
        })
        .labelled(Some("a \"label\""), &["tag".to_owned()]);
        hasher.update(&position.json);
        match sample_wallet() {
            Some(w) => hasher.update(&WalletItem::new(&w).json),
            None => hasher.update(b"the wallet sample does not parse"),
        }
        hasher.finalize()
    })
}

fn sample_wallet() -> Option<Wallet> {
    serde_json::from_value(serde_json::json!({
        "address": "0x0000000000000000000000000000000000000001",
        "label": "a \"label\"",
        "tags": ["tag"],
        "kols": [],
        "sizeClass": "whale",
        "direction": "long",
        "accountTotalValue": "1000000.5",
        "totalPositionValue": "2500000",
        "longValue": "2500000",
        "shortValue": "0",
        "leverage": "2.5",
        "positions": 1,
        "observedAt": "1970-01-01T00:00:00Z",
        "netPnl": "-1.25",
        "roi": "0.1",
        "winRate": "0.5",
    }))
    .ok()
}

impl Snapshot {
    /// Writes this version to `path` whole or not at all: to a file beside
    /// it, synced, then renamed over it. `origin` names where the version
    /// came from ([`SavedVersion::origin`]). Returns the bytes written.
    pub fn save(&self, path: &Path, origin: &str) -> Result<u64, SavedError> {
        let temp = temp_path(path);
        let written = self.save_to(&temp, origin).and_then(|n| {
            std::fs::rename(&temp, path)?;
            Ok(n)
        });
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written
    }

    fn save_to(&self, path: &Path, origin: &str) -> Result<u64, SavedError> {
        let mut out = Blocks::new(Checksummed::new(File::create(path)?));
        out.bytes(&MAGIC)?;
        let slots = &self.wallets.slots;
        let largest = slots
            .iter()
            .flatten()
            .map(|w| w.json.len().max(w.address.len()))
            .chain(
                self.by_wallet
                    .iter()
                    .flat_map(|l| l.iter().map(|p| p.json.len())),
            )
            .max()
            .unwrap_or(0);
        let (positions, wallets) = self.counts();
        let header = Header {
            format: FORMAT,
            build: Cow::Borrowed(env!("CARGO_PKG_VERSION")),
            rendering: rendering(),
            origin: Cow::Borrowed(origin),
            version: self.version,
            observed_at_ns: self.observed_at.unix_timestamp_nanos(),
            positions: positions as u64,
            wallets: wallets as u64,
            largest: largest as u64,
        };
        out.record(&header)?;
        let part = &self.part;
        let markets = MarketsRecord {
            markets: Cow::Owned(serde_json::to_vec(&part.markets).expect("models serialize")),
            market_json: ItemsRecord::of(&part.market_json),
            market_lists: market_orders()
                .map(|k| Blob(Cow::Borrowed(&part.market_lists[&k])))
                .collect(),
            current_days: ItemsRecord::of(&part.current_days),
            current_day_symbols: part
                .current_day_symbols
                .iter()
                .map(|s| Cow::Borrowed(s.as_str()))
                .collect(),
            coverage_json: Cow::Borrowed(&part.coverage_json),
            cohorts_json: ItemsRecord::of(&part.cohorts_json),
        };
        let markets = postcard::to_allocvec(&markets)?;
        out.bytes(&(markets.len() as u64).to_le_bytes())?;
        out.bytes(&markets)?;
        out.record(&(slots.len() as u64))?;
        for slot in slots {
            let record = slot.as_deref().map(|w| WalletRecord {
                json: Cow::Borrowed(&w.json),
                address: Cow::Borrowed(&w.address),
                keys: std::array::from_fn(|i| w.keys()[i].as_ref().map(KeyRecord::of)),
            });
            out.record(&record)?;
        }
        let w = &self.wallets;
        out.record(&w.free)?;
        out.record(&w.by_address)?;
        out.record(&w.flags)?;
        for k in sort_orders() {
            out.record(w.orders[&k].all())?;
        }
        // The head ends here: its checksum, and the positions part's own.
        out.write_out()?;
        let positions_at = out.file.bytes;
        let head_crc = std::mem::replace(&mut out.file.hasher, crc32fast::Hasher::new());
        out.record(&(self.positions.len() as u64))?;
        for m in &self.positions {
            out.record(&(m.len() as u64))?;
            for p in m.refs.iter().map(|&r| self.position(r)) {
                let record = PositionRecord {
                    json: Cow::Borrowed(&p.json),
                    value: KeyRecord::of(&p.value),
                    wallet: p.wallet,
                    long: p.direction == Direction::Long,
                };
                out.record(&record)?;
            }
        }
        out.write_out()?;
        let Checksummed {
            inner: mut file,
            hasher,
            bytes,
        } = out.file;
        let mut trailer = [0; TRAILER as usize];
        trailer[..8].copy_from_slice(&positions_at.to_le_bytes());
        trailer[8..12].copy_from_slice(&head_crc.finalize().to_le_bytes());
        trailer[12..].copy_from_slice(&hasher.finalize().to_le_bytes());
        file.write_all(&trailer)?;
        file.sync_all()?;
        Ok(bytes + TRAILER)
    }

    /// What the file at `path` holds, read from its header; an error when it
    /// is not a file this build saved.
    pub fn saved_version(path: &Path) -> Result<SavedVersion, SavedError> {
        let mut input = BufReader::new(File::open(path)?);
        let mut scratch = [0; 1024];
        read_header(&mut input, &mut scratch).map(|(v, _)| v)
    }

    /// Reads the version saved at `path` ([`Snapshot::save`]), served as it
    /// was when it was saved.
    pub fn load_saved(path: &Path) -> Result<Snapshot, SavedError> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        let body = len
            .checked_sub(TRAILER)
            .ok_or_else(|| corrupt("shorter than its trailer"))?;
        let mut trailer = [0; TRAILER as usize];
        Part::new(&file, body, len).read_exact(&mut trailer)?;
        let word = |at: usize| u32::from_le_bytes(trailer[at..at + 4].try_into().expect("4 bytes"));
        let positions_at = u64::from_le_bytes(trailer[..8].try_into().expect("8 bytes"));
        let (head_crc, positions_crc) = (word(8), word(12));
        if positions_at > body {
            return Err(corrupt("the positions part starts past the end"));
        }
        let mut head = Records::new(Part::new(&file, 0, positions_at));
        let mut small = [0; 1024];
        let (saved, largest) = read_header(&mut head, &mut small)?;
        if largest > MAX_ITEM {
            return Err(corrupt("a field larger than any item"));
        }
        // The two parts at once: the head (markets and wallets) here, the
        // positions on a thread of their own.
        let (head, positions) = std::thread::scope(|s| {
            let positions = s.spawn(|| {
                let mut input = Records::new(Part::new(&file, positions_at, body));
                let positions = read_positions(&mut input)?;
                input.read_whole(positions_crc, "the positions part")?;
                Ok::<_, SavedError>(positions)
            });
            let head = read_head(head, head_crc);
            (head, joined(positions))
        });
        let (part, wallets) = head?;
        let positions = positions?;
        if positions.len() != part.markets.len() {
            return Err(corrupt("positions of another number of markets"));
        }
        // Sound as read, before anything is indexed by what it names.
        let served = wallets.occupied();
        let occupied = |s: u32| wallets.occupied_slot(s);
        let sound = wallets.sound()
            && positions.iter().flatten().all(|p| occupied(p.wallet))
            && saved.wallets == served as u64
            && saved.positions == positions.iter().map(Vec::len).sum::<usize>() as u64;
        if !sound {
            return Err(corrupt("an index names no wallet, or the counts differ"));
        }
        // What is derived from each part, at once too.
        let slots = wallets.slots.len();
        let (wallets, (positions, by_wallet)) = std::thread::scope(|s| {
            let assembled = s.spawn(|| assembled(positions, slots));
            (wallets.indexed(), joined(assembled))
        });
        Ok(Snapshot {
            version: saved.version,
            observed_at: saved.observed_at,
            by_wallet,
            part,
            positions,
            wallets,
            spare: Arc::default(),
        })
    }
}

/// The rest of the head (after its header): the markets and the wallets.
fn read_head(
    mut input: Records<Part<'_>>,
    crc: u32,
) -> Result<(MarketsPart, SavedWallets), SavedError> {
    let part = read_markets(&mut input)?;
    let wallets = SavedWallets::read(&mut input)?;
    input.read_whole(crc, "the head")?;
    Ok((part, wallets))
}

/// A scoped thread's result; its panic goes on in the caller.
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The bytes `at..end` of a file, read at their offsets: several parts of
/// one open file are read at once without sharing a cursor (a second
/// `open` of the path could find another file renamed over it).
struct Part<'f> {
    file: &'f File,
    at: u64,
    end: u64,
}

impl<'f> Part<'f> {
    fn new(file: &'f File, at: u64, end: u64) -> Part<'f> {
        Part { file, at, end }
    }
}

impl Read for Part<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = usize::try_from(self.end.saturating_sub(self.at)).unwrap_or(usize::MAX);
        let want = buf.len().min(left);
        if want == 0 {
            return Ok(0);
        }
        let n = read_at(self.file, &mut buf[..want], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, at)
}

#[cfg(windows)]
fn read_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    // Moves the file's cursor, which no reader of a saved file uses.
    std::os::windows::fs::FileExt::seek_read(file, buf, at)
}

#[cfg(not(any(unix, windows)))]
fn read_at(_: &File, _: &mut [u8], _: u64) -> io::Result<usize> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "no positional reads on this platform",
    ))
}

/// The wallet table as saved: what [`Wallets`] is derived from.
struct SavedWallets {
    slots: Vec<Option<Arc<WalletItem>>>,
    free: Vec<u32>,
    by_address: Vec<u32>,
    flags: Vec<u8>,
    /// Each order's unfiltered list.
    unfiltered: Vec<((WalletSort, SortOrder), Vec<u32>)>,
}

impl SavedWallets {
    fn read(input: &mut Records<Part<'_>>) -> Result<SavedWallets, SavedError> {
        let n = read_count(input)?;
        let mut slots = Vec::with_capacity(n.min(1 << 24));
        for _ in 0..n {
            slots.push(input.next(|bytes| {
                take::<Option<WalletRecord>>(bytes)?
                    .map(|(r, used)| Ok((r.map(wallet_item).transpose()?.map(Arc::new), used)))
                    .transpose()
            })?);
        }
        let free = input.owned::<Vec<u32>>()?;
        let by_address = input.owned::<Vec<u32>>()?;
        let flags = input.owned::<Vec<u8>>()?;
        let mut unfiltered = Vec::new();
        for k in sort_orders() {
            unfiltered.push((k, input.owned::<Vec<u32>>()?));
        }
        Ok(SavedWallets {
            slots,
            free,
            by_address,
            flags,
            unfiltered,
        })
    }

    fn occupied_slot(&self, slot: u32) -> bool {
        self.slots.get(slot as usize).is_some_and(Option::is_some)
    }

    fn occupied(&self) -> usize {
        self.slots.iter().flatten().count()
    }

    /// Every list names each occupied slot once in number, no free slot is
    /// occupied, and every slot has its flags, each one that
    /// [`filter_flags`](super::wallets::filter_flags) can give.
    fn sound(&self) -> bool {
        let served = self.occupied();
        let whole = |l: &[u32]| l.len() == served && l.iter().all(|&s| self.occupied_slot(s));
        self.flags.len() == self.slots.len()
            && whole(&self.by_address)
            && self
                .by_address
                .iter()
                .all(|&s| valid_flags(self.flags[s as usize]))
            && self.unfiltered.iter().all(|(_, l)| whole(l))
            && self
                .free
                .iter()
                .all(|&s| (s as usize) < self.slots.len() && !self.occupied_slot(s))
    }

    /// The table with what is derived: the hashed index, the address
    /// codes, the filters' sizes and the orders' codes.
    fn indexed(self) -> Wallets {
        let mut wallets = Wallets {
            by_hash: AddressIndex::new(&self.slots),
            slots: self.slots,
            free: self.free,
            by_address: self.by_address,
            address_codes: Vec::new(),
            orders: HashMap::new(),
            flags: self.flags,
            filter_sizes: Default::default(),
        };
        wallets.derive_orders(self.unfiltered);
        wallets
    }
}

/// Each market's position items, in page order.
fn read_positions(input: &mut Records<Part<'_>>) -> Result<Vec<Vec<PositionItem>>, SavedError> {
    let markets = read_count(input)?;
    let mut positions = Vec::with_capacity(markets.min(1 << 16));
    for _ in 0..markets {
        let n = read_count(input)?;
        let mut all = Vec::with_capacity(n.min(1 << 24));
        for _ in 0..n {
            all.push(input.next(|bytes| {
                take::<PositionRecord>(bytes)?
                    .map(|(r, used)| Ok((position_item(r)?, used)))
                    .transpose()
            })?);
        }
        positions.push(all);
    }
    Ok(positions)
}

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    PathBuf::from(name)
}

fn read_header(
    input: &mut impl Read,
    scratch: &mut [u8],
) -> Result<(SavedVersion, u64), SavedError> {
    let mut magic = [0; 8];
    input.read_exact(&mut magic)?;
    if magic != MAGIC {
        return Err(corrupt("not a saved version"));
    }
    let (h, _) = postcard::from_io::<Header, _>((input, scratch))?;
    let ours = (FORMAT, env!("CARGO_PKG_VERSION"), rendering());
    if (h.format, h.build.as_ref(), h.rendering) != ours {
        return Err(SavedError::OtherBuild(format!(
            "format {}, version {}, rendering {:08x}; this build: format {}, version {}, rendering {:08x}",
            h.format, h.build, h.rendering, ours.0, ours.1, ours.2
        )));
    }
    let observed_at = OffsetDateTime::from_unix_timestamp_nanos(h.observed_at_ns)
        .map_err(|_| corrupt("the observation time"))?;
    let saved = SavedVersion {
        origin: h.origin.into_owned(),
        version: h.version,
        observed_at,
        positions: h.positions,
        wallets: h.wallets,
    };
    Ok((saved, h.largest))
}

fn read_count(input: &mut Records<Part<'_>>) -> Result<usize, SavedError> {
    let n = input.owned::<u64>()?;
    usize::try_from(n).map_err(|_| corrupt("a count"))
}

fn read_markets(input: &mut impl Read) -> Result<MarketsPart, SavedError> {
    let mut len = [0; 8];
    input.read_exact(&mut len)?;
    let len = u64::from_le_bytes(len);
    if len > MAX_MARKETS {
        return Err(corrupt("a markets record larger than any"));
    }
    let mut bytes = vec![0; len as usize];
    input.read_exact(&mut bytes)?;
    let r: MarketsRecord = postcard::from_bytes(&bytes)?;
    let markets =
        serde_json::from_slice(&r.markets).map_err(|e| SavedError::Corrupt(e.to_string()))?;
    if r.market_lists.len() != market_orders().count() {
        return Err(corrupt("the market lists"));
    }
    let market_lists = market_orders()
        .zip(r.market_lists)
        .map(|(k, body)| (k, body.0.into_owned()))
        .collect();
    let part = MarketsPart::indexed(Rendered {
        markets,
        market_json: r.market_json.items()?,
        market_lists,
        current_days: r.current_days.items()?,
        current_day_symbols: r
            .current_day_symbols
            .into_iter()
            .map(Cow::into_owned)
            .collect(),
        coverage_json: r.coverage_json.into_owned(),
        cohorts_json: r.cohorts_json.items()?,
    });
    let n = part.markets.len();
    if part.market_json.len() != n
        || part.cohorts_json.len() != n
        || part.current_days.len() != part.current_day_symbols.len()
    {
        return Err(corrupt("the markets' items"));
    }
    Ok(part)
}

fn position_item(r: PositionRecord<'_>) -> Result<PositionItem, SavedError> {
    Ok(PositionItem {
        json: Box::from(&*r.json),
        value: r.value.key()?,
        wallet: r.wallet,
        direction: if r.long {
            Direction::Long
        } else {
            Direction::Short
        },
    })
}

fn wallet_item(r: WalletRecord<'_>) -> Result<WalletItem, SavedError> {
    let mut keys: [Option<SortKey>; 5] = Default::default();
    for (key, record) in keys.iter_mut().zip(r.keys) {
        *key = record.map(KeyRecord::key).transpose()?;
    }
    Ok(WalletItem::from_parts(
        Box::from(&*r.json),
        Box::from(&*r.address),
        keys,
    ))
}

/// A part of a saved file read in blocks through its checksum, its records
/// decoded from the block in memory. postcard reading through
/// [`io::Read`] asked for each byte of every varint by a call, and copied
/// each byte string through a scratch buffer: most of a start's time.
struct Records<R> {
    input: Checksummed<R>,
    buf: Vec<u8>,
    /// The unread bytes of `buf`.
    at: usize,
    end: usize,
}

/// The next record of `bytes`, if they hold all of it, and how many bytes
/// it took.
fn take<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<Option<(T, usize)>, SavedError> {
    match postcard::take_from_bytes::<T>(bytes) {
        Ok((value, rest)) => Ok(Some((value, bytes.len() - rest.len()))),
        Err(postcard::Error::DeserializeUnexpectedEnd) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

impl<R: Read> Records<R> {
    fn new(input: R) -> Records<R> {
        Records::with_block(input, BUFFER)
    }

    fn with_block(input: R, block: usize) -> Records<R> {
        Records {
            input: Checksummed::new(input),
            buf: vec![0; block.max(1)],
            at: 0,
            end: 0,
        }
    }

    /// The next record, decoded by `decode` from the unread bytes (`None`
    /// when they end before the record does: more is then read, into a
    /// larger block if the record is larger than the block, and `decode`
    /// is called again).
    fn next<T>(
        &mut self,
        decode: impl Fn(&[u8]) -> Result<Option<(T, usize)>, SavedError>,
    ) -> Result<T, SavedError> {
        loop {
            if let Some((value, used)) = decode(&self.buf[self.at..self.end])? {
                self.at += used;
                return Ok(value);
            }
            if self.fill()? == 0 {
                return Err(corrupt("cut short in a record"));
            }
        }
    }

    /// The next record, of a type that borrows nothing.
    fn owned<T: DeserializeOwned>(&mut self) -> Result<T, SavedError> {
        self.next(|bytes| take::<T>(bytes))
    }

    /// Reads more of the input after the unread bytes (moved to the front
    /// of the block, which doubles when they fill it); how many bytes.
    fn fill(&mut self) -> io::Result<usize> {
        self.buf.copy_within(self.at..self.end, 0);
        (self.end, self.at) = (self.end - self.at, 0);
        if self.end == self.buf.len() {
            if self.buf.len() as u64 >= MAX_MARKETS {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a record larger than any",
                ));
            }
            self.buf.resize(self.buf.len() * 2, 0);
        }
        let n = self.input.read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }

    /// Checks that the part was read to its end and that what it read is
    /// what was written.
    fn read_whole(mut self, crc: u32, what: &str) -> Result<(), SavedError> {
        if self.at < self.end || self.fill()? > 0 {
            return Err(SavedError::Corrupt(format!(
                "bytes after the end of {what}"
            )));
        }
        if self.input.hasher.finalize() != crc {
            return Err(SavedError::Corrupt(format!(
                "the checksum of {what} does not match"
            )));
        }
        Ok(())
    }
}

/// The header and the markets record are read through this.
impl<R: Read> Read for Records<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.at == self.end && self.fill()? == 0 {
            return Ok(0);
        }
        let n = buf.len().min(self.end - self.at);
        buf[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// A reader or writer that keeps the CRC-32 of the bytes through it.
/// A saved version's writer: records serialized into a block in memory,
/// written out a block ([`BUFFER`]) at a time. Through `postcard::to_io`,
/// each record flushed its writer: a write call for each of the 1.5M
/// records of an own node's version, most of a save's CPU.
struct Blocks<W: Write> {
    file: Checksummed<W>,
    block: Vec<u8>,
    /// Bytes held before they are written out.
    size: usize,
}

impl<W: Write> Blocks<W> {
    fn new(file: Checksummed<W>) -> Blocks<W> {
        Blocks::with_block(file, BUFFER)
    }

    fn with_block(file: Checksummed<W>, size: usize) -> Blocks<W> {
        Blocks {
            file,
            block: Vec::with_capacity(size),
            size,
        }
    }

    /// Appends `value`'s record.
    fn record<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SavedError> {
        self.block = postcard::to_extend(value, std::mem::take(&mut self.block))?;
        self.written()
    }

    /// Appends `bytes` as they are.
    fn bytes(&mut self, bytes: &[u8]) -> Result<(), SavedError> {
        self.block.extend_from_slice(bytes);
        self.written()
    }

    /// Writes the block out once it is full.
    fn written(&mut self) -> Result<(), SavedError> {
        if self.block.len() >= self.size {
            self.write_out()?;
        }
        Ok(())
    }

    /// Writes out what the block holds.
    fn write_out(&mut self) -> io::Result<()> {
        self.file.write_all(&self.block)?;
        self.block.clear();
        Ok(())
    }
}

struct Checksummed<T> {
    inner: T,
    hasher: crc32fast::Hasher,
    bytes: u64,
}

impl<T> Checksummed<T> {
    fn new(inner: T) -> Checksummed<T> {
        Checksummed {
            inner,
            hasher: crc32fast::Hasher::new(),
            bytes: 0,
        }
    }
}

impl<W: Write> Write for Checksummed<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read> Read for Checksummed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::testing::snapshot;

    #[test]
    fn the_rendering_samples_render() {
        assert!(sample_wallet().is_some(), "the wallet sample parses");
        assert_ne!(rendering(), 0);
    }

    #[test]
    fn a_saved_version_reads_back_as_it_was() {
        let (s, _) = snapshot();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("served");
        let bytes = s.save(&path, "db 1").unwrap();
        assert_eq!(bytes, std::fs::metadata(&path).unwrap().len());
        let header = Snapshot::saved_version(&path).unwrap();
        let (positions, wallets) = s.counts();
        assert_eq!(
            header,
            SavedVersion {
                origin: "db 1".to_owned(),
                version: s.version,
                observed_at: s.observed_at,
                positions: positions as u64,
                wallets: wallets as u64,
            }
        );
        let back = Snapshot::load_saved(&path).unwrap();
        assert_eq!((back.version, back.observed_at), (s.version, s.observed_at));
        assert_eq!(back.part.markets, s.part.markets);
        assert_eq!(back.counts(), s.counts());
        // Saved again, it is the same file.
        let again = dir.path().join("again");
        back.save(&again, "db 1").unwrap();
        assert_eq!(
            std::fs::read(&again).unwrap(),
            std::fs::read(&path).unwrap()
        );
        // Nothing is left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 2);
    }

    #[test]
    fn records_are_written_a_block_at_a_time() {
        /// A file that counts the writes it is given.
        #[derive(Default)]
        struct Counted {
            bytes: Vec<u8>,
            writes: usize,
        }
        impl Write for Counted {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.writes += 1;
                self.bytes.extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let records: Vec<Vec<u32>> = (0..200u32).map(|i| (0..i % 40).collect()).collect();
        let mut want = MAGIC.to_vec();
        for r in &records {
            want.extend(postcard::to_allocvec(r).unwrap());
        }
        for block in [1, 5, 64, 1000, 1 << 20] {
            let mut out = Blocks::with_block(Checksummed::new(Counted::default()), block);
            out.bytes(&MAGIC).unwrap();
            for r in &records {
                out.record(r).unwrap();
            }
            out.write_out().unwrap();
            let file = out.file;
            assert_eq!(file.inner.bytes, want, "block {block}");
            assert_eq!(file.bytes, want.len() as u64);
            assert_eq!(file.hasher.finalize(), crc32fast::hash(&want));
            // A write per block filled (and the last), not per record.
            let most = want.len() / block + 1;
            assert!(
                file.inner.writes <= most.min(records.len() + 2),
                "block {block}: {} writes",
                file.inner.writes
            );
        }
    }

    #[test]
    fn records_read_back_across_blocks_of_any_size() {
        // Records of 1 byte to several blocks, borrowed and owned, read
        // through blocks smaller and larger than they are.
        let records: Vec<(Vec<u8>, Vec<u32>)> = (0..60u32)
            .map(|i| {
                let bytes = (0..i * i * 3).map(|b| (b % 251) as u8).collect();
                (
                    bytes,
                    (0..i * 7).map(|x| x.wrapping_mul(2_654_435_761)).collect(),
                )
            })
            .collect();
        let mut file = Vec::new();
        for (bytes, list) in &records {
            let blob = Blob(Cow::Borrowed(bytes));
            file.extend(postcard::to_allocvec(&blob).unwrap());
            file.extend(postcard::to_allocvec(list).unwrap());
        }
        let crc = crc32fast::hash(&file);
        for block in [1, 2, 3, 7, 64, 1000, 1 << 20] {
            // Every record of `bytes` in turn, and the input after them.
            let read_all = |bytes| {
                let mut input = Records::with_block(bytes, block);
                let mut read = Vec::new();
                for _ in &records {
                    let blob =
                        input.next(|b| Ok(take::<Blob>(b)?.map(|(r, n)| (r.0.into_owned(), n))))?;
                    read.push((blob, input.owned::<Vec<u32>>()?));
                }
                Ok::<_, SavedError>((input, read))
            };
            let (input, read) = read_all(&file[..]).unwrap();
            assert_eq!(read, records, "block {block}");
            input.read_whole(crc, "the records").unwrap();
            // Cut short: an error, not a record.
            let cut = read_all(&file[..file.len() - 1]).map(drop);
            assert!(matches!(cut, Err(SavedError::Corrupt(_))), "block {block}");
            // A byte more, or another checksum: refused.
            let mut longer = file.clone();
            longer.push(0);
            let (input, _) = read_all(&longer[..]).unwrap();
            assert!(input.read_whole(crc, "the records").is_err());
            let (input, _) = read_all(&file[..]).unwrap();
            assert!(input.read_whole(crc ^ 1, "the records").is_err());
        }
    }

    #[test]
    fn a_damaged_or_foreign_file_is_an_error_not_a_version() {
        let (s, _) = snapshot();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("served");
        s.save(&path, "db 1").unwrap();
        let good = std::fs::read(&path).unwrap();
        let damaged = dir.path().join("damaged");
        let load = |bytes: &[u8]| {
            std::fs::write(&damaged, bytes).unwrap();
            Snapshot::load_saved(&damaged)
        };
        // Every byte flipped in turn (a stride of them in long files), and
        // the file cut short at as many places: each is refused.
        let step = (good.len() / 4000).max(1);
        for at in (0..good.len()).step_by(step) {
            let mut bytes = good.clone();
            bytes[at] ^= 0x5a;
            assert!(load(&bytes).is_err(), "byte {at} flipped");
            assert!(load(&good[..at]).is_err(), "cut at {at}");
        }
        // Every bit of the trailer (where the positions part starts, and
        // the two checksums), and the positions part moved by a byte.
        let trailer = good.len() - TRAILER as usize;
        for at in trailer..good.len() {
            for bit in 0..8 {
                let mut bytes = good.clone();
                bytes[at] ^= 1 << bit;
                assert!(load(&bytes).is_err(), "bit {bit} of byte {at} flipped");
            }
        }
        let positions_at = u64::from_le_bytes(good[trailer..trailer + 8].try_into().unwrap());
        for moved in [positions_at - 1, positions_at + 1] {
            let mut bytes = good.clone();
            bytes[trailer..trailer + 8].copy_from_slice(&moved.to_le_bytes());
            assert!(load(&bytes).is_err(), "the positions part at {moved}");
        }
        assert!(load(&good).is_ok());
        // Another build's file is named as such.
        let mut other = good.clone();
        other[MAGIC.len()] ^= 1; // the format's varint
        assert!(matches!(load(&other), Err(SavedError::OtherBuild(_))));
        assert!(matches!(
            Snapshot::load_saved(&dir.path().join("missing")),
            Err(SavedError::Io(_))
        ));
    }
}
