//! Positions rendered from their stored text while a version is read
//! ([`RenderedPosition`]): the JSON item, and the keys the snapshot indexes
//! it by.

use compact_str::CompactString;
use market_engine::{PositionKeys, Size, SortKey};
use market_model::{Direction, MarketPositionText, PlainDecimal};
use time::{OffsetDateTime, UtcOffset};

/// A position rendered to its JSON item, with the keys the snapshot indexes
/// it by. Made from a [`MarketPositionText`] while a version is read, so a
/// starting server neither parses nor prints the decimals it only passes on.
///
/// A position rendered without a label and tags takes its wallet's when the
/// snapshot is built ([`RenderedPosition::labelled`]): they belong to the
/// wallet, and a version read back finds them only with the wallets.
#[derive(Debug)]
pub struct RenderedPosition {
    // Neither the symbol nor the address is allocated on its own (nor the
    // two keys, as a rule): a million small allocations freed after the
    // build left the heap fragmented (about 10 MB more resident at 400k
    // positions for each).
    symbol: CompactString,
    address: Address,
    direction: Direction,
    pub(crate) value: SortKey,
    size: SortKey,
    pub(crate) json: Box<[u8]>,
    /// Where `,"label":null,"tags":[]` starts in `json`, when it was
    /// rendered without a label and tags.
    bare_at: Option<usize>,
}

/// The label and tags of a position rendered without them.
const BARE: &[u8] = b",\"label\":null,\"tags\":[]";

/// An address held inline when it has the usual 42 bytes or fewer.
#[derive(Debug)]
enum Address {
    Inline { len: u8, bytes: [u8; 42] },
    Heap(Box<str>),
}

impl Address {
    fn new(address: &str) -> Address {
        match u8::try_from(address.len()) {
            Ok(len) if len <= 42 => {
                let mut bytes = [0; 42];
                bytes[..address.len()].copy_from_slice(address.as_bytes());
                Address::Inline { len, bytes }
            }
            _ => Address::Heap(address.into()),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            Address::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).expect("copied from a str")
            }
            Address::Heap(s) => s,
        }
    }
}

impl RenderedPosition {
    /// Renders `p` (the same bytes as its [`market_model::MarketPosition`] serializes to)
    /// and keeps its keys.
    pub fn from_text(p: &MarketPositionText<'_>) -> RenderedPosition {
        let (json, bare_at) = write_json(p);
        RenderedPosition {
            symbol: CompactString::from(p.symbol),
            address: Address::new(p.address),
            direction: p.direction,
            value: SortKey::of_plain(p.position_value),
            size: SortKey::of_plain(p.size),
            json,
            bare_at,
        }
    }

    /// This position with `label` and `tags` (its wallet's), when it was
    /// rendered without any; otherwise it is returned as it is.
    pub fn labelled(mut self, label: Option<&str>, tags: &[String]) -> RenderedPosition {
        let Some(at) = self.bare_at else {
            return self;
        };
        if label.is_none() && tags.is_empty() {
            return self;
        }
        let mut json = Vec::with_capacity(self.json.len() + 64);
        json.extend_from_slice(&self.json[..at]);
        write_label(&mut json, label, tags);
        json.extend_from_slice(&self.json[at + BARE.len()..]);
        self.json = json.into_boxed_slice();
        self.bare_at = None;
        self
    }
}

fn write_label(out: &mut Vec<u8>, label: Option<&str>, tags: &[String]) {
    out.extend_from_slice(b",\"label\":");
    match label {
        Some(label) => serde_json::to_writer(&mut *out, label).expect("strings serialize"),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"tags\":");
    serde_json::to_writer(&mut *out, tags).expect("strings serialize");
}

/// The JSON of `p`: the bytes `serde_json` writes for it (and for the
/// [`MarketPosition`] it denotes), written directly. Decimal text is plain
/// notation and needs no escaping; a server starting on a million
/// positions spent a sixth of its time in the generic serializer.
fn write_json(p: &MarketPositionText<'_>) -> (Box<[u8]>, Option<usize>) {
    fn string(out: &mut Vec<u8>, s: &str) {
        serde_json::to_writer(&mut *out, s).expect("strings serialize");
    }
    fn plain(out: &mut Vec<u8>, d: PlainDecimal<'_>) {
        out.push(b'"');
        out.extend_from_slice(d.as_str().as_bytes());
        out.push(b'"');
    }
    // Sized for a usual item (about 400 bytes), so it is not regrown.
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(b"{\"address\":");
    string(&mut out, p.address);
    let bare_at = (p.label.is_none() && p.tags.is_empty()).then_some(out.len());
    write_label(&mut out, p.label, p.tags);
    out.extend_from_slice(b",\"symbol\":");
    string(&mut out, p.symbol);
    out.extend_from_slice(match p.direction {
        Direction::Long => b",\"direction\":\"long\",\"positionValue\":",
        Direction::Short => b",\"direction\":\"short\",\"positionValue\":",
    });
    plain(&mut out, p.position_value);
    out.extend_from_slice(b",\"liqPrice\":");
    match p.liq_price {
        Some(d) => plain(&mut out, d),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"observedAt\":\"");
    write_rfc3339(&mut out, p.observed_at);
    out.extend_from_slice(b"\",\"leverage\":");
    plain(&mut out, p.leverage);
    out.extend_from_slice(b",\"size\":");
    plain(&mut out, p.size);
    out.extend_from_slice(b",\"sizeUnit\":");
    string(&mut out, p.size_unit);
    for (name, d) in [
        (&b",\"uPnl\":"[..], p.u_pnl),
        (b",\"uPnlPct\":", p.u_pnl_pct),
        (b",\"entryPrice\":", p.entry_price),
        (b",\"markPrice\":", p.mark_price),
        (b",\"margin\":", p.margin),
        (b",\"fundingCost\":", p.funding_cost),
    ] {
        out.extend_from_slice(name);
        plain(&mut out, d);
    }
    out.push(b'}');
    (out.into_boxed_slice(), bare_at)
}

/// `t` in UTC as [`market_model::timestamp::format_utc`] writes it
/// (`2026-11-22T02:30:00.25Z`: the fraction without trailing zeros).
fn write_rfc3339(out: &mut Vec<u8>, t: OffsetDateTime) {
    fn digits(out: &mut Vec<u8>, mut n: u32, width: usize) {
        let mut buf = [b'0'; 9];
        for at in buf[..width].iter_mut().rev() {
            *at = b'0' + (n % 10) as u8;
            n /= 10;
        }
        out.extend_from_slice(&buf[..width]);
    }
    let t = t.to_offset(UtcOffset::UTC);
    digits(out, t.year().unsigned_abs(), 4);
    out.push(b'-');
    digits(out, u32::from(u8::from(t.month())), 2);
    out.push(b'-');
    digits(out, u32::from(t.day()), 2);
    out.push(b'T');
    digits(out, u32::from(t.hour()), 2);
    out.push(b':');
    digits(out, u32::from(t.minute()), 2);
    out.push(b':');
    digits(out, u32::from(t.second()), 2);
    let (mut fraction, mut width) = (t.nanosecond(), 9);
    if fraction != 0 {
        while fraction % 10 == 0 {
            fraction /= 10;
            width -= 1;
        }
        out.push(b'.');
        digits(out, fraction, width);
    }
    out.push(b'Z');
}

impl PositionKeys for RenderedPosition {
    fn symbol(&self) -> &str {
        &self.symbol
    }
    fn address(&self) -> &str {
        self.address.as_str()
    }
    fn direction(&self) -> Direction {
        self.direction
    }
    fn size(&self) -> Size<'_> {
        Size::Key(&self.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bigdecimal::BigDecimal;
    use market_model::timestamp::format_utc;
    use market_model::MarketPosition;
    use std::str::FromStr;
    use time::macros::datetime;

    fn text<'a>(
        label: Option<&'a str>,
        tags: &'a [String],
        direction: Direction,
        liq_price: Option<&'a str>,
        observed_at: OffsetDateTime,
    ) -> MarketPositionText<'a> {
        let d = |s: &'a str| PlainDecimal::new(s).unwrap();
        MarketPositionText {
            address: "0x3f5ce5fbfe3e9af3971dd833d26ba9b5c936f0be",
            label,
            tags,
            symbol: "xyz:GOLD",
            direction,
            position_value: d("1234567.80"),
            liq_price: liq_price.map(d),
            observed_at,
            leverage: d("10"),
            size: d("0.0000001"),
            size_unit: "xyz:GOLD",
            u_pnl: d("-49.804021"),
            u_pnl_pct: d("0"),
            entry_price: d("1000"),
            mark_price: d("92391.3380"),
            margin: d("0.00"),
            funding_cost: d("-0.5"),
        }
    }

    #[test]
    fn written_json_is_what_serde_writes() {
        let tags = ["fund".to_owned(), "k\"o\\l \u{1F40B}\n".to_owned()];
        for p in [
            text(
                None,
                &[],
                Direction::Long,
                None,
                datetime!(2026-11-22 02:30:00 UTC),
            ),
            text(
                Some("Whale \"7\" \u{7f}\u{1}"),
                &tags,
                Direction::Short,
                Some("1.5"),
                datetime!(2026-11-22 04:30:00.250 +02:00),
            ),
        ] {
            assert_eq!(
                String::from_utf8(write_json(&p).0.into_vec()).unwrap(),
                serde_json::to_string(&p).unwrap()
            );
        }
    }

    #[test]
    fn a_bare_position_takes_its_wallets_label_and_tags() {
        let tags = ["fund".to_owned(), "k\"ol".to_owned()];
        let at = datetime!(2026-11-22 02:30:00 UTC);
        let bare = || RenderedPosition::from_text(&text(None, &[], Direction::Long, None, at));
        for (label, tags) in [
            (Some("Whale \"7\""), &tags[..]),
            (None, &tags[..1]),
            (Some("x"), &[]),
        ] {
            let expected = serde_json::to_string(&text(label, tags, Direction::Long, None, at));
            let relabelled = bare().labelled(label, tags);
            assert_eq!(
                String::from_utf8(relabelled.json.to_vec()).ok(),
                expected.ok()
            );
            // Once labelled, it keeps its label.
            let again = relabelled.labelled(Some("other"), &[]);
            assert_eq!(again.json, bare().labelled(label, tags).json);
        }
        assert_eq!(bare().labelled(None, &[]).json, bare().json);
    }

    #[test]
    fn times_are_written_like_the_model_formats_them() {
        let start = datetime!(0001-01-01 00:00:00 UTC).unix_timestamp_nanos();
        let end = datetime!(9999-12-31 23:59:59.999999999 UTC).unix_timestamp_nanos();
        let mut t = start;
        let mut n = 0u32;
        while t < end {
            let at = OffsetDateTime::from_unix_timestamp_nanos(t).unwrap();
            for at in [
                at,
                at.replace_nanosecond(0).unwrap(),
                at.replace_millisecond(120).unwrap(),
            ] {
                let mut out = Vec::new();
                write_rfc3339(&mut out, at);
                assert_eq!(String::from_utf8(out).unwrap(), format_utc(at));
            }
            // An irregular step, so the fields take many values.
            n = n.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            t += 1_000_000_007_i128 * 3_600 * 24 * 97 + i128::from(n);
        }
    }

    #[test]
    fn addresses_are_kept_whole() {
        for a in [
            "",
            "0xaa",
            "0x3f5ce5fbfe3e9af3971dd833d26ba9b5c936f0be",
            &"0xab".repeat(30),
        ] {
            let kept = Address::new(a);
            assert_eq!(kept.as_str(), a);
            assert_eq!(matches!(kept, Address::Heap(_)), a.len() > 42);
        }
    }

    #[test]
    fn coverage_sums_rendered_sizes_like_model_sizes() {
        use market_engine::coverage::{network_coverage, wallet_freshness};
        let at = datetime!(2026-11-22 02:30:00 UTC);
        let market = market_model::Market {
            symbol: "xyz:GOLD".into(),
            price: "3.5".parse().unwrap(),
            change24h_pct: "0".parse().unwrap(),
            volume24h: "0".parse().unwrap(),
            open_interest: "1000000000000000000000000".parse().unwrap(),
            funding: "0".parse().unwrap(),
            long_count: 0,
            short_count: 0,
            long_short_ratio: "0".parse().unwrap(),
            total_liquidation_value: "0".parse().unwrap(),
            long_liquidation_value: "0".parse().unwrap(),
            short_liquidation_value: "0".parse().unwrap(),
        };
        let sizes = ["0.0000001", "123456789012345678901234.5", "2.50", "7"];
        let rendered: Vec<RenderedPosition> = sizes
            .iter()
            .map(|s| {
                let mut t = text(None, &[], Direction::Long, None, at);
                t.size = PlainDecimal::new(s).unwrap();
                RenderedPosition::from_text(&t)
            })
            .collect();
        let models: Vec<MarketPosition> = sizes
            .iter()
            .map(|s| {
                let t = text(None, &[], Direction::Long, None, at);
                let json = serde_json::to_string(&t).unwrap();
                let mut m: MarketPosition = serde_json::from_str(&json).unwrap();
                m.size = s.parse().unwrap();
                m
            })
            .collect();
        let report = |c: market_model::NetworkCoverage| serde_json::to_string(&c).unwrap();
        let fresh = || wallet_freshness(at, []);
        assert_eq!(
            report(network_coverage(
                at,
                std::slice::from_ref(&market),
                &rendered,
                fresh()
            )),
            report(network_coverage(
                at,
                std::slice::from_ref(&market),
                &models,
                fresh()
            ))
        );
    }

    #[test]
    fn keys_of_text_are_the_keys_of_the_numbers() {
        for s in [
            "0",
            "0.00",
            "-1",
            "1000",
            "12.340",
            "0.0000001",
            "-0.5",
            "999999999999999999",
            "9999999999999999999",
            "-123456789012345678901234567890.5",
            "0.00000000000000000000000000000000000000001",
        ] {
            let text = PlainDecimal::new(s).unwrap();
            let parsed = BigDecimal::from_str(s).unwrap();
            let (a, b) = (SortKey::of_plain(text), SortKey::new(&parsed));
            assert_eq!(a.to_big(), b.to_big(), "{s}");
            assert_eq!(
                a.to_big().fractional_digit_count(),
                b.to_big().fractional_digit_count(),
                "{s}"
            );
            assert_eq!(a.text(), s);
            assert_eq!(text.to_decimal(), parsed);
        }
    }
}
