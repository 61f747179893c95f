//! What the book keeps of a wallet's engine input ([`WalletInput`]): its
//! address as an [`Address`], its account value and analytics as
//! [`CompactDecimal`]s (8 bytes each instead of a `BigDecimal` and its
//! heap), its instant as a [`Moment`], and what few wallets have (a label,
//! tags, KOL links) boxed: 88 bytes and its heap (the analytics), where
//! the engine's input takes 376 and its heap, about 540. The engine's
//! input is made back only for the wallets a publish writes.

use std::cmp::Ordering;

use market_engine::{Analytics, CompactDecimal, WalletInput};
use market_model::{Kol, KolProfile, Strategy};

use crate::address::Address;
use crate::registry::Moment;

/// A wallet's engine input, compact (see the module).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    /// Its address.
    pub address: Address,
    label: Option<Box<str>>,
    tags: Box<[Box<str>]>,
    /// KOL identities and profile (most wallets: none).
    kol: Option<Box<(Vec<Kol>, Option<KolProfile>)>>,
    account_value: CompactDecimal,
    /// When it was observed.
    pub observed_at: Moment,
    analytics: Option<Box<CompactAnalytics>>,
}

/// [`Analytics`], compact.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CompactAnalytics {
    net_pnl: CompactDecimal,
    roi: CompactDecimal,
    win_rate: CompactDecimal,
    strategy_confidence: CompactDecimal,
    strategy: Strategy,
}

impl Account {
    /// `input` as the book keeps it.
    pub fn of(input: WalletInput) -> Account {
        let kol = (!input.kols.is_empty() || input.kol_profile.is_some())
            .then(|| Box::new((input.kols, input.kol_profile)));
        Account {
            address: Address::of(&input.address),
            label: input.label.map(String::into_boxed_str),
            tags: input.tags.into_iter().map(String::into_boxed_str).collect(),
            kol,
            account_value: CompactDecimal::from(&input.account_value),
            observed_at: Moment::of(input.observed_at),
            analytics: input.analytics.map(|a| {
                Box::new(CompactAnalytics {
                    net_pnl: CompactDecimal::from(&a.net_pnl),
                    roi: CompactDecimal::from(&a.roi),
                    win_rate: CompactDecimal::from(&a.win_rate),
                    strategy_confidence: CompactDecimal::from(&a.strategy_confidence),
                    strategy: a.strategy,
                })
            }),
        }
    }

    /// The engine's input it denotes.
    pub fn to_input(&self) -> WalletInput {
        let (kols, kol_profile) = self.kol();
        WalletInput {
            address: self.address.to_string(),
            label: self.label.as_deref().map(str::to_owned),
            tags: self.tags.iter().map(|t| t.to_string()).collect(),
            kols,
            kol_profile,
            account_value: self.account_value.to_decimal(),
            observed_at: self.observed_at.at(),
            analytics: self.analytics.as_ref().map(|a| Analytics {
                net_pnl: a.net_pnl.to_decimal(),
                roi: a.roi.to_decimal(),
                win_rate: a.win_rate.to_decimal(),
                strategy: a.strategy,
                strategy_confidence: a.strategy_confidence.to_decimal(),
            }),
        }
    }

    /// Its account value, USD.
    pub fn account_value(&self) -> &CompactDecimal {
        &self.account_value
    }

    /// Whether it holds equity (an account value above zero).
    pub fn has_equity(&self) -> bool {
        self.account_value.cmp_zero() == Ordering::Greater
    }

    /// Its KOL identities and profile, carried from read to read (a read of
    /// the exchange does not say them).
    pub fn kol(&self) -> (Vec<Kol>, Option<KolProfile>) {
        match &self.kol {
            Some(k) => (k.0.clone(), k.1.clone()),
            None => (Vec::new(), None),
        }
    }

    /// Whether it has KOL identities or a profile.
    pub fn has_kol(&self) -> bool {
        self.kol.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn input() -> WalletInput {
        WalletInput {
            address: "0xa".into(),
            label: Some("whale".into()),
            tags: vec!["fund".into(), "kol".into()],
            kols: vec![Kol {
                name: "Ansem".into(),
                platform: "x".into(),
                handle: "@blknoiz06".into(),
            }],
            kol_profile: Some(KolProfile {
                name: "Ansem".into(),
                bio: None,
                followers: 7,
            }),
            account_value: "1234567890123456789012345.000".parse().unwrap(),
            observed_at: datetime!(2026-11-28 01:02:03.123456789 UTC),
            analytics: Some(Analytics {
                net_pnl: "-12.50".parse().unwrap(),
                roi: "0.0000".parse().unwrap(),
                win_rate: "66.67".parse().unwrap(),
                strategy: Strategy::SwingTrader,
                strategy_confidence: "0.8".parse().unwrap(),
            }),
        }
    }

    #[test]
    fn an_input_comes_back_as_it_went_in() {
        let text = |i: &WalletInput| {
            let a = i.analytics.as_ref().unwrap();
            [
                &i.account_value,
                &a.net_pnl,
                &a.roi,
                &a.win_rate,
                &a.strategy_confidence,
            ]
            .map(|d| d.0.to_string())
        };
        let full = input();
        let back = Account::of(full.clone()).to_input();
        assert_eq!(back, full);
        // Equal decimals may differ in scale: the text must not.
        assert_eq!(text(&back), text(&full));
        let bare = WalletInput {
            label: None,
            tags: Vec::new(),
            kols: Vec::new(),
            kol_profile: None,
            analytics: None,
            account_value: "-0.0".parse().unwrap(),
            ..input()
        };
        let kept = Account::of(bare.clone());
        assert!(!kept.has_kol() && !kept.has_equity());
        assert_eq!(kept.to_input(), bare);
        assert!(Account::of(input()).has_equity());
        assert!(
            std::mem::size_of::<Account>() <= 88,
            "{}",
            std::mem::size_of::<Account>()
        );
    }
}
