//! The positions a wallet holds, stored in its row (`wallets.positions`):
//! one JSON array, one array of fields per position. A data version
//! changes a wallet whole (its row and every position with it), so its
//! positions are written and read with that one row: a
//! publish of 7,000 wallets writes 7,000 rows, not 7,000 plus the 27,000
//! rows of their positions, each with its own index entries.
//!
//! A position's fields, in order: symbol, direction, size, entry price,
//! mark price, position value, liquidation price (or `null`), leverage,
//! margin, uPnL, uPnL %, funding cost, observed at. Decimals are strings
//! in plain notation (the API's); the instant is UTC as
//! `YYYY-MM-DD HH:MM:SS.fffffffff`. The address, label and tags are the
//! wallet's.

use std::borrow::Cow;

use bigdecimal::BigDecimal;
use market_model::decimal::PlainDecimal;
use market_model::{Decimal, Direction, MarketPosition, MarketPositionText};
use serde::Deserialize;
use time::PrimitiveDateTime;

use crate::column::ColumnWriter;
use crate::convert::parse;
use crate::rows::{from_db_time, to_db_time};
use crate::types::parse_sqlite_time;
use crate::StoreError;

/// A position as read (borrowing the column's text where it has no escapes).
#[derive(Deserialize)]
struct Read<'a>(
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Option<Cow<'a, str>>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
    #[serde(borrow)] Cow<'a, str>,
);

/// The `positions` column of a wallet row holding `positions` (its own, in
/// any order; they are stored by symbol). Two positions in one asset are
/// refused: a wallet holds one a market.
pub(crate) fn encode(positions: &mut [&MarketPosition]) -> Result<String, StoreError> {
    by_symbol(positions, |p| (&p.address, &p.symbol), "positions")?;
    let mut w = ColumnWriter::new(positions.len(), BYTES_EACH);
    for p in positions.iter() {
        write_position(
            &mut w,
            &p.symbol,
            p.direction.as_str(),
            [
                &p.size,
                &p.entry_price,
                &p.mark_price,
                &p.position_value,
                &p.leverage,
                &p.margin,
                &p.u_pnl,
                &p.u_pnl_pct,
                &p.funding_cost,
            ],
            p.liq_price.as_deref(),
            to_db_time(p.observed_at),
        );
    }
    Ok(w.finish())
}

/// One position's fields in the column's order (the module's comment).
/// `decimals`: size, entry price, mark price, position value, leverage,
/// margin, uPnL, uPnL %, funding cost.
fn write_position(
    w: &mut ColumnWriter,
    symbol: &str,
    direction: &str,
    decimals: [&BigDecimal; 9],
    liq_price: Option<&BigDecimal>,
    observed_at: PrimitiveDateTime,
) {
    let [size, entry, mark, value, leverage, margin, upnl, upnl_pct, funding] = decimals;
    w.item()
        .str(symbol)
        .str(direction)
        .decimal(size)
        .decimal(entry)
        .decimal(mark)
        .decimal(value)
        .opt_decimal(liq_price)
        .decimal(leverage)
        .decimal(margin)
        .decimal(upnl)
        .decimal(upnl_pct)
        .decimal(funding)
        .instant(observed_at)
        .end();
}

/// About what one position takes in the column (the demo data's average is
/// near 190 bytes): the text is allocated once at about its size.
const BYTES_EACH: usize = 200;

/// Sorts one wallet's `items` (its positions, or those it follows) by
/// symbol, the order they are stored in, and refuses two in one asset: a
/// wallet holds one position a market. `key` gives an item's wallet and
/// symbol.
pub(crate) fn by_symbol<T>(
    items: &mut [&T],
    key: impl Fn(&T) -> (&str, &str),
    what: &str,
) -> Result<(), StoreError> {
    items.sort_unstable_by(|a, b| key(a).1.cmp(key(b).1));
    match items.windows(2).find(|w| key(w[0]).1 == key(w[1]).1) {
        Some(w) => {
            let (address, symbol) = key(w[1]);
            Err(StoreError::Corrupt(format!(
                "two {what} of wallet {address} in {symbol}"
            )))
        }
        None => Ok(()),
    }
}

/// Hands `each` every position of `address`'s `positions` column in the
/// model's text form (no label and tags: they are the wallet's), without
/// parsing a decimal. A decimal stored in another spelling than plain
/// notation (a row edited by hand) is printed plain first.
pub(crate) fn for_each_text(
    address: &str,
    column: &str,
    mut each: impl FnMut(&MarketPositionText<'_>) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    with_texts(address, column, |texts| {
        texts.iter().try_for_each(&mut each)
    })
}

/// [`for_each_text`] with all of the wallet's positions at once, in symbol
/// order.
pub(crate) fn with_texts<R>(
    address: &str,
    column: &str,
    f: impl FnOnce(&[MarketPositionText<'_>]) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    let read = decode(address, column)?;
    let texts: Option<Vec<MarketPositionText<'_>>> = read
        .iter()
        .map(|r| r.text(address))
        .collect::<Result<_, _>>()?;
    if let Some(mut texts) = texts {
        // Written in symbol order; a row edited by hand may not be.
        if !texts.is_sorted_by(|a, b| a.symbol <= b.symbol) {
            texts.sort_by(|a, b| a.symbol.cmp(b.symbol));
        }
        return f(&texts);
    }
    let plain = reprinted(address, &read)?;
    let read = decode(address, &plain)?;
    let mut texts = Vec::with_capacity(read.len());
    for r in &read {
        texts.push(
            r.text(address)?
                .ok_or_else(|| corrupt(address, "a decimal"))?,
        );
    }
    texts.sort_by(|a, b| a.symbol.cmp(b.symbol));
    f(&texts)
}

/// Every position of `address`'s `positions` column as the model's (no
/// label and tags).
#[cfg(test)]
pub(crate) fn models(address: &str, column: &str) -> Result<Vec<MarketPosition>, StoreError> {
    let mut out = Vec::new();
    for_each_text(address, column, |t| {
        out.push(model(t));
        Ok(())
    })?;
    Ok(out)
}

/// The model's position its text form denotes.
pub(crate) fn model(t: &MarketPositionText<'_>) -> MarketPosition {
    let dec = |p: PlainDecimal<'_>| Decimal(p.to_decimal());
    MarketPosition {
        address: t.address.to_owned(),
        label: t.label.map(str::to_owned),
        tags: t.tags.to_vec(),
        symbol: t.symbol.to_owned(),
        direction: t.direction,
        position_value: dec(t.position_value),
        liq_price: t.liq_price.map(dec),
        observed_at: t.observed_at,
        leverage: dec(t.leverage),
        size: dec(t.size),
        size_unit: t.size_unit.to_owned(),
        u_pnl: dec(t.u_pnl),
        u_pnl_pct: dec(t.u_pnl_pct),
        entry_price: dec(t.entry_price),
        mark_price: dec(t.mark_price),
        margin: dec(t.margin),
        funding_cost: dec(t.funding_cost),
    }
}

fn corrupt(address: &str, what: &str) -> StoreError {
    StoreError::Corrupt(format!("{what} in the positions of wallet {address}"))
}

fn decode<'a>(address: &str, column: &'a str) -> Result<Vec<Read<'a>>, StoreError> {
    serde_json::from_str(column).map_err(|e| corrupt(address, &format!("unreadable JSON ({e})")))
}

impl<'a> Read<'a> {
    /// Its text form; `None` when a decimal is not in plain notation.
    fn text(&'a self, address: &'a str) -> Result<Option<MarketPositionText<'a>>, StoreError> {
        let observed_at = parse_sqlite_time(&self.12)
            .map(from_db_time)
            .ok_or_else(|| corrupt(address, "an instant"))?;
        let direction = parse::<Direction>("position direction", &self.1)?;
        // (Checked one by one: no vector a position.)
        let plain = |d: &'a Cow<'a, str>| PlainDecimal::new(d);
        let (
            Some(size),
            Some(entry_price),
            Some(mark_price),
            Some(position_value),
            Some(leverage),
            Some(margin),
            Some(u_pnl),
            Some(u_pnl_pct),
            Some(funding_cost),
        ) = (
            plain(&self.2),
            plain(&self.3),
            plain(&self.4),
            plain(&self.5),
            plain(&self.7),
            plain(&self.8),
            plain(&self.9),
            plain(&self.10),
            plain(&self.11),
        )
        else {
            return Ok(None);
        };
        let liq_price = match &self.6 {
            None => None,
            Some(d) => match PlainDecimal::new(d) {
                Some(p) => Some(p),
                None => return Ok(None),
            },
        };
        Ok(Some(MarketPositionText {
            address,
            label: None,
            tags: &[],
            symbol: &self.0,
            direction,
            position_value,
            liq_price,
            observed_at,
            leverage,
            size,
            size_unit: &self.0,
            u_pnl,
            u_pnl_pct,
            entry_price,
            mark_price,
            margin,
            funding_cost,
        }))
    }
}

/// `read` again with every decimal printed in plain notation.
fn reprinted(address: &str, read: &[Read<'_>]) -> Result<String, StoreError> {
    let dec = |text: &str| -> Result<Decimal, StoreError> {
        text.parse::<Decimal>()
            .map_err(|_| corrupt(address, &format!("decimal {text:?}")))
    };
    let mut fixed = Vec::with_capacity(read.len());
    for r in read {
        let observed_at = parse_sqlite_time(&r.12).ok_or_else(|| corrupt(address, "an instant"))?;
        fixed.push((
            r.0.to_string(),
            r.1.to_string(),
            [
                dec(&r.2)?,
                dec(&r.3)?,
                dec(&r.4)?,
                dec(&r.5)?,
                dec(&r.7)?,
                dec(&r.8)?,
                dec(&r.9)?,
                dec(&r.10)?,
                dec(&r.11)?,
            ],
            r.6.as_deref().map(dec).transpose()?,
            observed_at,
        ));
    }
    let mut w = ColumnWriter::new(fixed.len(), BYTES_EACH);
    for (symbol, direction, decimals, liq, at) in &fixed {
        write_position(
            &mut w,
            symbol,
            direction,
            decimals.each_ref().map(|d| &d.0),
            liq.as_deref(),
            *at,
        );
    }
    Ok(w.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn position(symbol: &str, value: &str) -> MarketPosition {
        let d = |s: &str| Decimal(s.parse().unwrap());
        MarketPosition {
            address: "0xaa".into(),
            label: None,
            tags: vec![],
            symbol: symbol.into(),
            direction: Direction::Short,
            position_value: d(value),
            liq_price: None,
            observed_at: datetime!(2026-11-22 01:02:03.000000250 UTC),
            leverage: d("3.5"),
            size: d("0.00000001"),
            size_unit: symbol.into(),
            u_pnl: d("-123456789012345678901234567890.123456789"),
            u_pnl_pct: d("0.0000"),
            entry_price: d("100"),
            mark_price: d("1000.50"),
            margin: d("0"),
            funding_cost: d("-0.01"),
        }
    }

    #[test]
    fn positions_read_back_as_written_in_symbol_order() {
        let (a, mut b) = (position("xyz:GOLD", "12.30"), position("BTC", "1"));
        b.liq_price = Some(Decimal("95000.125".parse().unwrap()));
        b.direction = Direction::Long;
        let column = encode(&mut [&a, &b]).unwrap();
        assert_eq!(models("0xaa", &column).unwrap(), vec![b.clone(), a.clone()]);
        let mut texts = Vec::new();
        for_each_text("0xaa", &column, |t| {
            texts.push(serde_json::to_string(t).unwrap());
            Ok(())
        })
        .unwrap();
        let json = |p: &MarketPosition| serde_json::to_string(p).unwrap();
        assert_eq!(texts, vec![json(&b), json(&a)]);
        assert_eq!(encode(&mut []).unwrap(), "[]");
        assert!(matches!(
            encode(&mut [&a, &b, &a]),
            Err(StoreError::Corrupt(e)) if e == "two positions of wallet 0xaa in xyz:GOLD"
        ));
        assert!(models("0xaa", "[]").unwrap().is_empty());
    }

    #[test]
    fn decimals_in_other_spellings_are_read_plain_and_bad_columns_refused() {
        let p = position("BTC", "1");
        let column = encode(&mut [&p]).unwrap().replace("\"100\"", "\"1E+2\"");
        assert_ne!(column, encode(&mut [&p]).unwrap());
        let mut texts = Vec::new();
        for_each_text("0xaa", &column, |t| {
            texts.push(t.entry_price.as_str().to_owned());
            Ok(())
        })
        .unwrap();
        assert_eq!(texts, vec!["100"]);
        for bad in [
            column.replace("\"1E+2\"", "\"ten\""),
            column.replace("\"short\"", "\"sideways\""),
            column.replace("2026-11-22 01:02:03", "yesterday"),
            "{}".to_owned(),
            "[[\"BTC\"]]".to_owned(),
        ] {
            let err = models("0xaa", &bad).unwrap_err();
            assert!(matches!(err, StoreError::Corrupt(_)), "{bad}: {err:?}");
        }
    }
}
