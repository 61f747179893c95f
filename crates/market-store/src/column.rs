//! The writer of the JSON text columns that hold one array of fields an
//! item (a wallet's positions in `held.rs`, a scan state's followed
//! positions in `followed.rs`). It writes the text serde_json writes for
//! the same fields, but appends each number to the text directly: a
//! publish writes some 30,000 positions of a dozen decimals and an instant
//! each, and serde_json's way (`collect_str` through `core::fmt` for every
//! decimal, seven padded fields for every instant) was most of the
//! columns' cost (docs/performance.md).

use std::fmt::Write as _;

use bigdecimal::BigDecimal;
use market_model::decimal::Plain;
use time::PrimitiveDateTime;

/// One column's text being written: `[[field, …], …]`.
pub(crate) struct ColumnWriter {
    out: String,
    /// No field written yet in the open item (or no item yet).
    first: bool,
}

impl ColumnWriter {
    /// A writer with room for `items` items of about `bytes_each` bytes.
    pub(crate) fn new(items: usize, bytes_each: usize) -> Self {
        let mut out = String::with_capacity(2 + items * (bytes_each + 1));
        out.push('[');
        ColumnWriter { out, first: true }
    }

    /// Opens the next item.
    pub(crate) fn item(&mut self) -> &mut Self {
        if self.out.len() > 1 {
            self.out.push(',');
        }
        self.out.push('[');
        self.first = true;
        self
    }

    /// Closes the open item.
    pub(crate) fn end(&mut self) {
        self.out.push(']');
    }

    /// The column's text.
    pub(crate) fn finish(mut self) -> String {
        self.out.push(']');
        self.out
    }

    fn separate(&mut self) {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
    }

    /// A JSON string, escaped as serde_json escapes it.
    pub(crate) fn str(&mut self, s: &str) -> &mut Self {
        self.separate();
        if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
            self.out.push('"');
            self.out.push_str(s);
            self.out.push('"');
        } else {
            self.out
                .push_str(&serde_json::to_string(s).expect("strings serialize"));
        }
        self
    }

    /// A decimal as a JSON string in plain notation.
    pub(crate) fn decimal(&mut self, d: &BigDecimal) -> &mut Self {
        self.separate();
        self.out.push('"');
        Plain(d).push_to(&mut self.out);
        self.out.push('"');
        self
    }

    /// A decimal, or `null`.
    pub(crate) fn opt_decimal(&mut self, d: Option<&BigDecimal>) -> &mut Self {
        match d {
            Some(d) => self.decimal(d),
            None => {
                self.separate();
                self.out.push_str("null");
                self
            }
        }
    }

    /// An integer as a JSON number.
    pub(crate) fn int(&mut self, i: i32) -> &mut Self {
        self.separate();
        write!(self.out, "{i}").expect("writing to a String does not fail");
        self
    }

    /// A UTC instant as a JSON string in SQLite's `TIMESTAMP` text,
    /// `YYYY-MM-DD HH:MM:SS.fffffffff` (the form `parse_sqlite_time` reads).
    pub(crate) fn instant(&mut self, at: PrimitiveDateTime) -> &mut Self {
        self.separate();
        self.out.push('"');
        push_instant(&mut self.out, at);
        self.out.push('"');
        self
    }
}

/// Appends `at` as `YYYY-MM-DD HH:MM:SS.fffffffff`: digits placed by hand
/// for the years 0 to 9999, [`formatted_instant`] (the same text) for any
/// other.
fn push_instant(out: &mut String, at: PrimitiveDateTime) {
    let (d, t) = (at.date(), at.time());
    let year = d.year();
    if !(0..=9999).contains(&year) {
        formatted_instant(out, at);
        return;
    }
    let mut buf = *b"0000-00-00 00:00:00.000000000";
    let mut put = |at: usize, width: usize, mut value: u32| {
        for i in (at..at + width).rev() {
            buf[i] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, 4, year as u32);
    put(5, 2, u8::from(d.month()).into());
    put(8, 2, d.day().into());
    put(11, 2, t.hour().into());
    put(14, 2, t.minute().into());
    put(17, 2, t.second().into());
    put(20, 9, t.nanosecond());
    out.push_str(std::str::from_utf8(&buf).expect("ASCII digits"));
}

/// Appends `at` in the column's form through `write!`: any year, padded
/// (and signed) as Rust formats it.
fn formatted_instant(out: &mut String, at: PrimitiveDateTime) {
    let (d, t) = (at.date(), at.time());
    write!(
        out,
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:09}",
        d.year(),
        u8::from(d.month()),
        d.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.nanosecond()
    )
    .expect("writing to a String does not fail");
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::Serialize;
    use time::{Date, Month, Time};

    /// The text serde_json writes for the same fields: the oracle.
    #[derive(Serialize)]
    struct Serde<'a>(&'a str, String, Option<String>, i32, String);

    /// The instant as the columns were written before the writer (its
    /// `Display` through `write!`).
    fn instant_text(at: PrimitiveDateTime) -> String {
        let mut out = String::new();
        formatted_instant(&mut out, at);
        out
    }

    fn decimal() -> impl Strategy<Value = BigDecimal> {
        (any::<i64>(), -80i64..80, 0u32..3).prop_map(|(digits, scale, widen)| {
            // Some beyond i128, for BigDecimal's own path.
            let int = bigdecimal::num_bigint::BigInt::from(digits)
                * bigdecimal::num_bigint::BigInt::from(10u8).pow(widen * 20);
            BigDecimal::new(int, scale)
        })
    }

    fn instant() -> impl Strategy<Value = PrimitiveDateTime> {
        (
            -9999i32..=9999,
            1u8..=12,
            1u8..=28,
            0u8..24,
            0u8..60,
            0u8..60,
            0u32..1_000_000_000,
        )
            .prop_map(|(y, mo, d, h, mi, s, ns)| {
                PrimitiveDateTime::new(
                    Date::from_calendar_date(y, Month::try_from(mo).unwrap(), d).unwrap(),
                    Time::from_hms_nano(h, mi, s, ns).unwrap(),
                )
            })
    }

    proptest! {
        #[test]
        fn writes_what_serde_json_writes(
            items in prop::collection::vec(
                (any::<String>(), decimal(), prop::option::of(decimal()), any::<i32>(), instant()),
                0..4,
            )
        ) {
            let mut w = ColumnWriter::new(items.len(), 16);
            for (s, d, o, i, at) in &items {
                w.item().str(s).decimal(d).opt_decimal(o.as_ref()).int(*i).instant(*at).end();
            }
            let oracle: Vec<Serde<'_>> = items
                .iter()
                .map(|(s, d, o, i, at)| Serde(
                    s,
                    Plain(d).to_string(),
                    o.as_ref().map(|o| Plain(o).to_string()),
                    *i,
                    instant_text(*at),
                ))
                .collect();
            prop_assert_eq!(w.finish(), serde_json::to_string(&oracle).unwrap());
        }
    }

    #[test]
    fn escapes_what_json_must() {
        let mut w = ColumnWriter::new(1, 8);
        w.item().str("a\"b\\c\nd\u{1}é/").end();
        assert_eq!(w.finish(), r#"[["a\"b\\c\nd\u0001é/"]]"#);
        assert_eq!(ColumnWriter::new(0, 0).finish(), "[]");
    }
}
