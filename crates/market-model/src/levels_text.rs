//! A liquidity day whose levels stay the JSON text they are stored as
//! ([`LiquidityDayText`]): a server renders every market's current day at
//! each publish, and parsing the levels only to print them again was most
//! of that.

use std::cmp::Ordering;

use bigdecimal::BigDecimal;

use crate::decimal::{Decimal, PlainDecimal};
use crate::resources::{LiquidityDay, LiquidityTotals, SideTotal};

/// A [`LiquidityDay`] with its levels as the JSON array that serializing
/// them writes, checked to be exactly that text: a writer can render the
/// day by serializing [`LiquidityDayText::head`] and putting
/// [`LiquidityDayText::levels_json`] in place of its empty `levels`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiquidityDayText {
    head: LiquidityDay,
    levels: String,
}

impl LiquidityDayText {
    /// `day` with the levels whose JSON is `levels`, its totals summed from
    /// them (the `levels` and `totals` it has are replaced), when `levels`
    /// is exactly what serializing levels in their documented order writes:
    /// `[{"side":…,"bucketPrice":…,"positionCount":…,"totalAmountUsd":…,
    /// "minLiquidationPrice":…,"maxLiquidationPrice":…},…]` with no
    /// whitespace, every decimal in plain notation as [`Decimal`] prints
    /// it, `long` levels before `short` ones and each side by bucket price
    /// ascending. Any other text is handed back with the day: the caller
    /// parses it instead.
    pub fn checked(
        mut day: LiquidityDay,
        levels: String,
    ) -> Result<LiquidityDayText, Box<(LiquidityDay, String)>> {
        let Some(totals) = totals_of(&levels) else {
            return Err(Box::new((day, levels)));
        };
        day.totals = totals;
        day.levels = Vec::new();
        Ok(LiquidityDayText { head: day, levels })
    }

    /// The day without its levels (`levels` is empty; `totals` are the
    /// levels').
    pub fn head(&self) -> &LiquidityDay {
        &self.head
    }

    /// The day without its levels, taken (see [`LiquidityDayText::head`]).
    pub fn into_head(self) -> LiquidityDay {
        self.head
    }

    /// The JSON array of its levels.
    pub fn levels_json(&self) -> &str {
        &self.levels
    }
}

/// What is left of `s` after `prefix`.
fn after<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    s.strip_prefix(prefix)
}

/// A plain decimal up to the next quote, and what follows the quote.
fn plain(s: &str) -> Option<(PlainDecimal<'_>, &str)> {
    // A byte loop: `str::find` on a char spent more in its searcher's set-up
    // than in these few digits (half of a server's check of the levels).
    let end = s.bytes().position(|b| b == b'"')?;
    Some((PlainDecimal::new(&s[..end])?, &s[end + 1..]))
}

/// A count as serializing a `u64` writes it, and what follows it.
fn count(s: &str) -> Option<(u64, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let digits = &s[..end];
    if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    Some((digits.parse().ok()?, &s[end..]))
}

/// Compares two plain decimals by the numbers they denote, on their text.
fn cmp_plain(a: &str, b: &str) -> Ordering {
    match (a.strip_prefix('-'), b.strip_prefix('-')) {
        (Some(a), Some(b)) => cmp_magnitude(a, b).reverse(),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => cmp_magnitude(a, b),
    }
}

/// Compares two unsigned plain decimals: whole parts by length then digits
/// (plain text has no leading zeros), then fractions digit by digit.
fn cmp_magnitude(a: &str, b: &str) -> Ordering {
    let (aw, af) = a.split_once('.').unwrap_or((a, ""));
    let (bw, bf) = b.split_once('.').unwrap_or((b, ""));
    aw.len()
        .cmp(&bw.len())
        .then_with(|| aw.cmp(bw))
        .then_with(|| {
            let n = af.len().max(bf.len());
            let digit = |f: &str, i: usize| f.as_bytes().get(i).copied().unwrap_or(b'0');
            (0..n)
                .map(|i| digit(af, i).cmp(&digit(bf, i)))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        })
}

/// The per-side totals of the levels whose JSON is `text`, when it is the
/// text [`LiquidityDayText::checked`] takes; summed as
/// [`LiquidityTotals::of`] sums the parsed levels (same order, same scale).
fn totals_of(text: &str) -> Option<LiquidityTotals> {
    let mut sums = [(0u64, BigDecimal::from(0)), (0u64, BigDecimal::from(0))];
    let mut s = after(text, "[")?;
    let mut last: Option<(bool, &str)> = None;
    if s != "]" {
        loop {
            s = after(s, "{\"side\":\"")?;
            let short = match (after(s, "long\""), after(s, "short\"")) {
                (Some(r), _) => {
                    s = r;
                    false
                }
                (None, Some(r)) => {
                    s = r;
                    true
                }
                (None, None) => return None,
            };
            let (bucket, r) = plain(after(s, ",\"bucketPrice\":\"")?)?;
            let (positions, r) = count(after(r, ",\"positionCount\":")?)?;
            let (amount, r) = plain(after(r, ",\"totalAmountUsd\":\"")?)?;
            let (_, r) = plain(after(r, ",\"minLiquidationPrice\":\"")?)?;
            let (_, r) = plain(after(r, ",\"maxLiquidationPrice\":\"")?)?;
            s = after(r, "}")?;
            // In order: long before short, then bucket price ascending.
            if let Some((was_short, was)) = last {
                let order = was_short
                    .cmp(&short)
                    .then_with(|| cmp_plain(was, bucket.as_str()));
                if order == Ordering::Greater {
                    return None;
                }
            }
            last = Some((short, bucket.as_str()));
            let sum = &mut sums[usize::from(short)];
            sum.0 = sum.0.checked_add(positions)?;
            // By reference: bigdecimal's `+=` of an owned value skips a zero
            // on either side, and with it the larger scale the text keeps.
            sum.1 += &amount.to_decimal();
            match after(s, ",") {
                Some(r) => s = r,
                None => break,
            }
        }
        if s != "]" {
            return None;
        }
    }
    let [(long_count, long), (short_count, short)] = sums;
    Some(LiquidityTotals {
        long: SideTotal {
            position_count: long_count,
            total_amount_usd: Decimal(long),
        },
        short: SideTotal {
            position_count: short_count,
            total_amount_usd: Decimal(short),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::{Coverage, Direction};
    use crate::resources::Level;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn level(side: Direction, bucket: &str, count: u64, amount: &str) -> Level {
        Level {
            side,
            bucket_price: d(bucket),
            position_count: count,
            total_amount_usd: d(amount),
            min_liquidation_price: d(bucket),
            max_liquidation_price: d(bucket),
        }
    }

    fn day(levels: Vec<Level>) -> LiquidityDay {
        let at =
            time::OffsetDateTime::from_unix_timestamp_nanos(1_796_742_000_250_000_000).unwrap();
        LiquidityDay::new(
            at.date(),
            "perpnet",
            "xyz:TSLA",
            Coverage::Current,
            d("0.5"),
            at,
            LiquidityTotals::of(&levels),
            levels,
        )
    }

    /// The day's JSON as a writer splices it.
    fn spliced(t: &LiquidityDayText) -> String {
        let head = serde_json::to_string(t.head()).unwrap();
        let head = head.strip_suffix("[]}").expect("levels come last");
        format!("{head}{}}}", t.levels_json())
    }

    #[test]
    fn the_stored_text_of_sorted_levels_renders_the_day_exactly() {
        use Direction::{Long, Short};
        let cases = vec![
            vec![],
            vec![level(Short, "-0.5", 1, "0")],
            vec![
                level(Long, "-1.5", 2, "10.25"),
                level(Long, "-1.5", 1, "3"),
                level(Long, "0", 1, "0.000001"),
                level(Long, "9.95", 7, "123456789012345678901234567890.5"),
                level(Long, "10", 1, "1.10"),
                level(Short, "0.05", 3, "2"),
                level(Short, "100.5", 4_294_967_296, "7.007"),
            ],
            // Zeros keep their scale in the sums: "1.50", "1.500", "0.00".
            vec![
                level(Long, "1", 1, "0.00"),
                level(Long, "2", 1, "1.5"),
                level(Short, "1", 1, "1.5"),
                level(Short, "2", 1, "0.000"),
            ],
            vec![level(Long, "1", 1, "0.00")],
        ];
        for levels in cases {
            let day = day(levels);
            let text = serde_json::to_string(&day.levels).unwrap();
            let head = LiquidityDay {
                levels: Vec::new(),
                totals: LiquidityTotals::of(&[]),
                ..day.clone()
            };
            let t = LiquidityDayText::checked(head, text).expect("canonical");
            assert_eq!(t.head().totals, day.totals);
            assert_eq!(spliced(&t), serde_json::to_string(&day).unwrap());
        }
    }

    #[test]
    fn any_other_text_is_refused() {
        use Direction::{Long, Short};
        let levels = vec![
            level(Long, "1.5", 2, "10.25"),
            level(Long, "2", 1, "3"),
            level(Short, "0.5", 1, "1"),
        ];
        let text = serde_json::to_string(&levels).unwrap();
        let edits = [
            // Out of order: a bucket, then a side.
            text.replace("\"1.5\"", "\"2.5\""),
            serde_json::to_string(&[&levels[2], &levels[0], &levels[1]]).unwrap(),
            // Other spellings of the same numbers and text.
            text.replace("\"10.25\"", "\"1.025e1\""),
            text.replace("\"3\"", "\"03\""),
            text.replace(":2,", ":02,"),
            text.replace(",\"", ", \""),
            text.replace("long", "Long"),
            format!("{text} "),
            text.replace("}]", "},]"),
            // Fields in another order, missing or added.
            text.replace(
                "\"side\":\"long\",\"bucketPrice\":\"1.5\"",
                "\"bucketPrice\":\"1.5\",\"side\":\"long\"",
            ),
            text.replace(",\"positionCount\":2", ""),
            text.replace("}", ",\"x\":1}"),
            "null".to_owned(),
            "[".to_owned(),
            String::new(),
        ];
        for edit in edits {
            assert_ne!(edit, text);
            assert!(
                LiquidityDayText::checked(day(vec![]), edit.clone()).is_err(),
                "{edit}"
            );
        }
        assert!(LiquidityDayText::checked(day(vec![]), text).is_ok());
    }

    #[test]
    fn plain_decimals_compare_as_numbers() {
        let ordered = [
            "-100", "-10.5", "-10.25", "-2", "-0.5", "-0.05", "0", "0.00", "0.05", "0.5", "0.50",
            "2", "10", "10.001", "99.9", "100",
        ];
        for a in ordered {
            for b in ordered {
                let want = a.parse::<BigDecimal>().unwrap().cmp(&b.parse().unwrap());
                assert_eq!(cmp_plain(a, b), want, "{a} vs {b}");
            }
        }
    }
}
