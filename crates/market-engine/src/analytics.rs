//! Wallet analytics from what the scans observe over time.
//!
//! A position's life is followed from scan to scan. When a position is gone
//! (or flipped side) at a scan, it counts as closed: its realized PnL is taken
//! as its last observed unrealized PnL, and its holding time runs from the
//! scan that first saw it to the scan that saw it gone (only when the wallet
//! was already tracked when it opened, so the open time is known).
//!
//! - `netPnl` = realized PnL of closed positions + unrealized PnL of open ones, USD.
//! - `roi` = netPnl / account value when the wallet was first observed × 100.
//! - `winRate` = closed positions with positive realized PnL / closed positions × 100.
//! - `strategy` = the holding-time class that contains the median holding time:
//!   `scalper` < 1 h ≤ `day_trader` < 1 d ≤ `swing_trader` < 7 d ≤ `position_trader`.
//! - `strategyConfidence` = share of timed closes in that class ×
//!   min(1, timed closes / 10), so it grows with evidence and agreement.
//!
//! A wallet has analytics only after [`MIN_CLOSED`] closed positions, at least
//! one of them timed, and a positive first account value; before that they are null.

use bigdecimal::{BigDecimal, RoundingMode, Signed};
use market_model::{Decimal, Strategy};
use time::Duration;

use crate::aggregate::Analytics;

/// Closed positions needed before analytics are shown.
pub const MIN_CLOSED: u32 = 3;

/// What the scans have accumulated about one wallet.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct WalletHistory {
    /// Account value at the first observation, USD.
    pub first_account_value: Option<Decimal>,
    /// Sum of realized PnL of closed positions, USD.
    pub realized_pnl: Decimal,
    /// Closed positions.
    pub closed: u32,
    /// Closed positions with positive realized PnL.
    pub wins: u32,
    /// Timed closes per holding class, in [`Strategy::ALL`] order.
    pub holding: [u32; 4],
}

/// The holding-time class of a duration.
pub fn holding_class(held: Duration) -> Strategy {
    if held < Duration::hours(1) {
        Strategy::Scalper
    } else if held < Duration::days(1) {
        Strategy::DayTrader
    } else if held < Duration::days(7) {
        Strategy::SwingTrader
    } else {
        Strategy::PositionTrader
    }
}

impl WalletHistory {
    /// Records one closed position.
    pub fn close(&mut self, realized: &BigDecimal, held: Option<Duration>) {
        self.realized_pnl = Decimal(&self.realized_pnl.0 + realized);
        self.closed += 1;
        if realized.is_positive() {
            self.wins += 1;
        }
        if let Some(held) = held {
            let class = holding_class(held);
            let i = Strategy::ALL
                .iter()
                .position(|s| *s == class)
                .expect("every class is listed");
            self.holding[i] += 1;
        }
    }

    /// Analytics with the wallet's current unrealized PnL, or `None` without enough history.
    pub fn analytics(&self, unrealized: &BigDecimal) -> Option<Analytics> {
        let first = self
            .first_account_value
            .as_ref()
            .filter(|v| v.0.is_positive())?;
        let timed: u32 = self.holding.iter().sum();
        if self.closed < MIN_CLOSED || timed == 0 {
            return None;
        }
        let net = &self.realized_pnl.0 + unrealized;
        let roi = &net * BigDecimal::from(100) / &first.0;
        let win_rate = BigDecimal::from(self.wins * 100) / BigDecimal::from(self.closed);
        // The class holding the median timed close.
        let half = timed.div_ceil(2);
        let mut seen = 0;
        let mut class = 0;
        for (i, n) in self.holding.iter().enumerate() {
            seen += n;
            if seen >= half {
                class = i;
                break;
            }
        }
        let agreement = BigDecimal::from(self.holding[class]) / BigDecimal::from(timed);
        let evidence = BigDecimal::from(timed.min(10)) / BigDecimal::from(10);
        let r = |v: BigDecimal| Decimal(v.with_scale_round(2, RoundingMode::HalfUp));
        Some(Analytics {
            net_pnl: r(net),
            roi: r(roi),
            win_rate: r(win_rate),
            strategy: Strategy::ALL[class],
            strategy_confidence: r(agreement * evidence),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn d(s: &str) -> BigDecimal {
        BigDecimal::from_str(s).unwrap()
    }

    #[test]
    fn needs_enough_history() {
        let mut h = WalletHistory {
            first_account_value: Some(Decimal(d("1000"))),
            ..Default::default()
        };
        h.close(&d("10"), Some(Duration::minutes(30)));
        h.close(&d("-5"), None);
        assert!(h.analytics(&d("0")).is_none(), "two closes are not enough");
        h.close(&d("20"), Some(Duration::minutes(10)));
        let a = h.analytics(&d("15")).unwrap();
        assert_eq!(a.net_pnl.to_string(), "40.00");
        assert_eq!(a.roi.to_string(), "4.00");
        assert_eq!(a.win_rate.to_string(), "66.67");
        assert_eq!(a.strategy, Strategy::Scalper);
        assert_eq!(
            a.strategy_confidence.to_string(),
            "0.20",
            "2 timed closes of 10 for full evidence"
        );
    }

    #[test]
    fn median_class_and_confidence() {
        let mut h = WalletHistory {
            first_account_value: Some(Decimal(d("500"))),
            ..Default::default()
        };
        for hours in [2, 3, 5, 30, 50, 60, 200, 400, 500, 600, 700, 900] {
            h.close(&d("1"), Some(Duration::hours(hours)));
        }
        let a = h.analytics(&d("0")).unwrap();
        // classes: day 3, swing 3, position 6 -> median (6th of 12) is swing
        assert_eq!(a.strategy, Strategy::SwingTrader);
        assert_eq!(a.strategy_confidence.to_string(), "0.25");
        assert_eq!(a.win_rate.to_string(), "100.00");
    }

    #[test]
    fn no_analytics_without_a_positive_baseline() {
        let mut h = WalletHistory {
            first_account_value: Some(Decimal(d("0"))),
            ..Default::default()
        };
        for _ in 0..5 {
            h.close(&d("1"), Some(Duration::hours(2)));
        }
        assert!(h.analytics(&d("0")).is_none());
    }

    #[test]
    fn holding_classes() {
        assert_eq!(holding_class(Duration::minutes(59)), Strategy::Scalper);
        assert_eq!(holding_class(Duration::hours(1)), Strategy::DayTrader);
        assert_eq!(holding_class(Duration::days(1)), Strategy::SwingTrader);
        assert_eq!(holding_class(Duration::days(7)), Strategy::PositionTrader);
    }
}
