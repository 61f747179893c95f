//! The positions followed for a wallet, stored in its scan state's row
//! (`scanned_wallets.followed`): one JSON array, one array of fields per
//! position. `track` replaces a wallet's state and its followed positions
//! together with every read, so a publish writes one row a wallet read,
//! not one plus one a followed position, each with its index entry.
//!
//! A position's fields, in order: symbol, direction, opened at (UTC as
//! `YYYY-MM-DD HH:MM:SS.fffffffff`, as in `held.rs`), whether its open
//! time is known (`1` or `0`), uPnL at the last observation (a decimal
//! string in plain notation). The address is the row's.

use market_model::{Decimal, Direction};
use serde::Deserialize;

use crate::column::ColumnWriter;
use crate::convert::parse;
use crate::held::by_symbol;
use crate::rows::{from_db_time, to_db_time};
use crate::types::parse_sqlite_time;
use crate::{StoreError, TrackedPosition};

/// A followed position as read.
#[derive(Deserialize)]
struct Read(String, String, String, i32, Decimal);

/// The `followed` column of the state row of the wallet `positions` belong
/// to (in any order; they are stored by symbol). Two in one asset are
/// refused: a wallet holds one position a market.
pub(crate) fn encode(positions: &mut [&TrackedPosition]) -> Result<String, StoreError> {
    by_symbol(positions, |t| (&t.address, &t.symbol), "followed positions")?;
    // About 80 bytes a followed position.
    let mut w = ColumnWriter::new(positions.len(), 80);
    for t in positions.iter() {
        w.item()
            .str(&t.symbol)
            .str(t.direction.as_str())
            .instant(to_db_time(t.opened_at))
            .int(i32::from(t.open_time_known))
            .decimal(&t.last_upnl)
            .end();
    }
    Ok(w.finish())
}

/// The followed positions of `address` its state row's `column` holds, in
/// symbol order.
pub(crate) fn decode(address: &str, column: &str) -> Result<Vec<TrackedPosition>, StoreError> {
    let corrupt = |what: String| {
        StoreError::Corrupt(format!(
            "{what} in the followed positions of wallet {address}"
        ))
    };
    let read: Vec<Read> =
        serde_json::from_str(column).map_err(|e| corrupt(format!("unreadable JSON ({e})")))?;
    let mut out = read
        .into_iter()
        .map(|Read(symbol, direction, opened_at, known, last_upnl)| {
            Ok(TrackedPosition {
                address: address.to_owned(),
                direction: parse::<Direction>("followed position direction", &direction)?,
                opened_at: parse_sqlite_time(&opened_at)
                    .map(from_db_time)
                    .ok_or_else(|| corrupt(format!("the instant {opened_at:?}")))?,
                open_time_known: known != 0,
                last_upnl,
                symbol,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    // Written in symbol order; a row edited by hand may not be.
    if !out.is_sorted_by(|a, b| a.symbol <= b.symbol) {
        out.sort_by(|a, b| a.symbol.cmp(&b.symbol));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn followed(symbol: &str, upnl: &str) -> TrackedPosition {
        TrackedPosition {
            address: "0xaa".into(),
            symbol: symbol.into(),
            direction: Direction::Short,
            opened_at: datetime!(2026-11-27 01:02:03.123456789 UTC),
            open_time_known: symbol == "BTC",
            last_upnl: upnl.parse().unwrap(),
        }
    }

    #[test]
    fn a_column_reads_back_as_written_in_symbol_order() {
        let (eth, btc) = (
            followed("ETH", "-123456789012345678901234567890.123456789"),
            followed("BTC", "0.0000"),
        );
        let column = encode(&mut [&eth, &btc]).unwrap();
        assert_eq!(
            column,
            r#"[["BTC","short","2026-11-27 01:02:03.123456789",1,"0.0000"],["ETH","short","2026-11-27 01:02:03.123456789",0,"-123456789012345678901234567890.123456789"]]"#
        );
        let read = decode("0xaa", &column).unwrap();
        assert_eq!(read, [btc, eth]);
        assert_eq!(read[0].last_upnl.to_string(), "0.0000", "the scale is kept");
    }

    #[test]
    fn what_another_writer_spells_otherwise_reads_the_same() {
        // PostgreSQL's `json_agg` (spaces, microseconds), out of order.
        let column = r#"[["ETH", "long", "2026-11-27 01:02:03.123456", 0, "5"], ["BTC", "short", "2026-11-27 01:02:03", 1, "-1.5"]]"#;
        let read = decode("0xaa", column).unwrap();
        assert_eq!(read[0].symbol, "BTC");
        assert_eq!(read[1].opened_at, datetime!(2026-11-27 01:02:03.123456 UTC));
        assert_eq!(read[1].direction, Direction::Long);
        assert!(read[0].open_time_known && !read[1].open_time_known);
    }

    #[test]
    fn two_in_one_asset_and_unreadable_columns_are_refused() {
        let (a, b) = (followed("BTC", "1"), followed("BTC", "2"));
        assert!(matches!(encode(&mut [&a, &b]), Err(StoreError::Corrupt(_))));
        for bad in [
            "{}",
            r#"[["BTC","sideways","2026-11-27 01:02:03",1,"0"]]"#,
            r#"[["BTC","long","27/11/2026",1,"0"]]"#,
            r#"[["BTC","long","2026-11-27 01:02:03",1,"1e"]]"#,
        ] {
            assert!(
                matches!(decode("0xaa", bad), Err(StoreError::Corrupt(_))),
                "{bad}"
            );
        }
    }
}
