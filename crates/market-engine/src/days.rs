//! Liquidity days across data versions: the `current` day of each market is
//! rewritten by every version of its UTC day, and the first version of the
//! next day freezes the last one as `end_of_day`.

use market_model::{Coverage, LiquidityDay};
use time::OffsetDateTime;

/// The days a version written at `now` freezes: the `current` days of the
/// previous version (written at its time) when that was on an earlier UTC
/// day, as `end_of_day`; none otherwise.
pub fn frozen_days(
    previous: Option<(OffsetDateTime, &[LiquidityDay])>,
    now: OffsetDateTime,
) -> Vec<LiquidityDay> {
    match previous {
        Some((at, days)) if at.date() < now.date() => days
            .iter()
            .cloned()
            .map(|mut d| {
                d.coverage = Coverage::EndOfDay;
                d
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{materialize, Quote, ScanInput};
    use time::macros::datetime;

    #[test]
    fn the_first_version_of_a_day_freezes_the_last_of_the_day_before() {
        let d = |s: &str| s.parse().unwrap();
        let at = datetime!(2026-11-24 23:59:00 UTC);
        let version = materialize(
            "perpnet",
            ScanInput {
                observed_at: at,
                quotes: vec![Quote {
                    symbol: "BTC".into(),
                    price: d("90000"),
                    prev_day_price: d("89000"),
                    volume24h: d("1"),
                    open_interest: d("1"),
                    funding: d("0"),
                }],
                wallets: Vec::new(),
                positions: Vec::new(),
            },
        )
        .unwrap();
        let before = Some((at, version.current_days.as_slice()));
        let frozen = frozen_days(before, datetime!(2026-11-25 00:00:05 UTC));
        assert_eq!(frozen.len(), 1);
        assert_eq!(frozen[0].coverage, Coverage::EndOfDay);
        assert_eq!(frozen[0].date, at.date());
        assert!(frozen_days(before, datetime!(2026-11-24 23:59:30 UTC)).is_empty());
        assert!(frozen_days(None, datetime!(2026-11-25 00:00:05 UTC)).is_empty());
    }
}
