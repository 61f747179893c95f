//! The public key and page types of a read (cursor keys, listing order,
//! pages of rendered items), with what reading them takes: rendering an
//! item, comparing keys in the documented orders, and the binary search for
//! a cursor. Every other part of the snapshot builds on these; they depend
//! on none of it.

use std::cmp::Ordering;

use bigdecimal::BigDecimal;
use market_model::{Direction, LiquidityDayText, SizeClass, SortOrder, WalletSort};
use serde::Serialize;

/// The keyset position of a whale-positions page: the last item's
/// `positionValue` and address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PositionKey {
    /// `positionValue` of the last item served.
    pub value: BigDecimal,
    /// Address of the last item served (the tie-breaker).
    pub address: String,
}

/// The keyset position of a wallets page: the last item's sort value
/// (null for wallets without analytics) and address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalletKey {
    /// Sort value of the last item served.
    pub value: Option<BigDecimal>,
    /// Address of the last item served (the tie-breaker).
    pub address: String,
}

/// Filters and order of a wallet listing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WalletOrder {
    /// Sort key.
    pub sort: WalletSort,
    /// Sort order.
    pub order: SortOrder,
    /// Size-class filter.
    pub size: Option<SizeClass>,
    /// Direction filter (wallets whose net direction is this).
    pub direction: Option<Direction>,
}

/// JSON items rendered back to back, each followed by a comma.
#[derive(Debug, Default)]
pub struct JsonItems {
    bytes: Vec<u8>,
    /// `starts[i]` is where item `i` begins; one entry more than items.
    starts: Vec<usize>,
}

impl JsonItems {
    /// No items, with room for `bytes` of them: a version's current days
    /// copy megabytes of stored levels, which a growing buffer copied again
    /// at every doubling (into fresh pages each time).
    pub(super) fn with_capacity(bytes: usize) -> JsonItems {
        JsonItems {
            bytes: Vec::with_capacity(bytes),
            starts: Vec::new(),
        }
    }

    /// Renders `item` after the last one and returns its index.
    pub(super) fn push<T: Serialize>(&mut self, item: &T) -> usize {
        if self.starts.is_empty() {
            self.starts.push(0);
        }
        serde_json::to_writer(&mut self.bytes, item).expect("model types serialize");
        self.bytes.push(b',');
        self.starts.push(self.bytes.len());
        self.starts.len() - 2
    }

    /// Renders the day `t` after the last item, its levels copied as they
    /// are (see [`LiquidityDayText`]), and returns its index: the same
    /// bytes as [`JsonItems::push`] of the day it denotes.
    pub(super) fn push_day_text(&mut self, t: &LiquidityDayText) -> usize {
        let at = self.push(t.head());
        // The head ends in its empty `levels` (the last field) and the comma.
        let end = self.bytes.len();
        assert!(
            self.bytes.ends_with(b"\"levels\":[]},"),
            "a day's levels are its last field"
        );
        self.bytes.truncate(end - b"[]},".len());
        self.bytes.extend_from_slice(t.levels_json().as_bytes());
        self.bytes.extend_from_slice(b"},");
        *self.starts.last_mut().expect("just pushed") = self.bytes.len();
        at
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// Whether there are no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity() + self.starts.capacity() * std::mem::size_of::<usize>()
    }

    /// The JSON of item `i`.
    pub fn item(&self, i: usize) -> &[u8] {
        &self.bytes[self.starts[i]..self.starts[i + 1] - 1]
    }

    /// The rendered bytes and where each item starts (a saved snapshot).
    pub(super) fn parts(&self) -> (&[u8], &[usize]) {
        (&self.bytes, &self.starts)
    }

    /// The items of `parts` read back, if they are items: `starts` begins
    /// at 0 (or is empty with `bytes`), grows, ends at the end of `bytes`,
    /// and each item is followed by its comma.
    pub(super) fn from_parts(bytes: Vec<u8>, starts: Vec<usize>) -> Option<JsonItems> {
        let whole = match (starts.first(), starts.last()) {
            (None, None) => bytes.is_empty(),
            (Some(&first), Some(&last)) => first == 0 && last == bytes.len(),
            _ => false,
        };
        let items = starts
            .windows(2)
            .all(|w| w[0] < w[1] && bytes.get(w[1] - 1) == Some(&b','));
        (whole && items).then_some(JsonItems { bytes, starts })
    }
}

/// A page of rendered items.
#[derive(Debug)]
pub struct Page<'a> {
    /// Rendered items, in order; joined with commas they are the page's items.
    pub parts: Vec<&'a [u8]>,
    /// Number of items.
    pub len: usize,
    /// Whether more items follow the last one.
    pub has_more: bool,
}

impl Page<'_> {
    /// Total bytes of the items joined with commas.
    pub fn json_len(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum::<usize>() + self.parts.len().saturating_sub(1)
    }

    /// Appends the items joined with commas to `out`.
    pub fn write_items(&self, out: &mut Vec<u8>) {
        for (i, part) in self.parts.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(part);
        }
    }
}

/// How an asset path segment resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssetLookup {
    /// The index of the market.
    Found(usize),
    /// No market has this symbol.
    Unknown,
    /// A canonical symbol that several HIP-3 dexs list; the candidates' symbols.
    Ambiguous(Vec<String>),
}

/// The keys of a page's last item, for the next cursor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemKey<'a> {
    /// The sort value in plain notation, exactly as rendered (`None` when null).
    pub value: Option<String>,
    /// The address.
    pub address: &'a str,
}

/// A served wallet: its rendered item and its positions.
#[derive(Debug)]
pub struct WalletView<'a> {
    /// The wallet's JSON object.
    pub wallet: &'a [u8],
    /// Its positions' JSON objects.
    pub positions: Page<'a>,
}

/// A page of rendered items with the keys of its last item.
#[derive(Debug)]
pub struct KeyedPage<'a> {
    /// The items.
    pub page: Page<'a>,
    /// Keys of the last item, when the page is not empty.
    pub last: Option<ItemKey<'a>>,
}

pub(super) fn render<T: Serialize>(item: &T) -> Box<[u8]> {
    serde_json::to_vec(item)
        .expect("model types serialize")
        .into_boxed_slice()
}

/// Compares (value, address) keys in wallet-listing order: nulls last in
/// both orders, then the value in `order`, then address ascending.
pub(super) fn cmp_wallet_keys<K: Ord>(
    a: (Option<K>, &str),
    b: (Option<K>, &str),
    order: SortOrder,
) -> Ordering {
    cmp_values(a.0, b.0, order).then_with(|| a.1.cmp(b.1))
}

/// The value part of [`cmp_wallet_keys`].
pub(super) fn cmp_values<K: Ord>(a: Option<K>, b: Option<K>, order: SortOrder) -> Ordering {
    match (a, b) {
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
        (Some(x), Some(y)) => match order {
            SortOrder::Asc => x.cmp(&y),
            SortOrder::Desc => y.cmp(&x),
        },
    }
}

/// Compares (value, address) keys in position order: value descending, then address.
pub(super) fn cmp_position_keys<K: Ord>(a: (K, &str), b: (K, &str)) -> Ordering {
    b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1))
}

/// Binary search over `len` sorted items: the first index whose item is not
/// `<=` the key (`le(i)` tells whether item `i` sorts at or before the key).
pub(super) fn partition(len: usize, le: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if le(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use market_engine::SortKey;

    #[test]
    fn sort_keys_order_like_big_decimals() {
        let texts = [
            "0",
            "-0.000",
            "1",
            "-1",
            "0.000000000000000001",
            "0.0000000000000000001",
            "-0.0000000000000000001",
            "1e20",
            "1.5e19",
            "170141183460469231731",
            "-1e30",
            "123456.789",
            "123456.7890",
            "99999999999999999999.999999999999999999",
            "9223372036854775807",
            "9223372036854775808",
            "922337203685477580.7",
            "1e-40",
            "5e5",
        ];
        let values: Vec<BigDecimal> = texts.iter().map(|t| t.parse().unwrap()).collect();
        for a in &values {
            let key = SortKey::new(a);
            assert_eq!(
                key.text(),
                a.to_plain_string(),
                "the text is the rendered one"
            );
            for b in &values {
                assert_eq!(key.cmp(&SortKey::new(b)), a.cmp(b), "{a} vs {b}");
            }
        }
        assert!(matches!(SortKey::new(&values[11]), SortKey::Small { .. }));
        assert!(
            matches!(SortKey::new(&values[15]), SortKey::Big(_)),
            "beyond i64"
        );
    }
}
