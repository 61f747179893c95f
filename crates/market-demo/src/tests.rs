use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use bigdecimal::{BigDecimal, RoundingMode, Zero};
use market_engine::aggregate::totals_of;
use market_engine::bucket_price;
use market_engine::candles::rollup;
use market_model::{Coverage, Direction};
use time::macros::datetime;
use time::{Duration, OffsetDateTime};

use super::*;

const NOW: OffsetDateTime = datetime!(2026-11-22 02:30:15.250 UTC);

fn data() -> &'static DemoData {
    static DATA: OnceLock<DemoData> = OnceLock::new();
    DATA.get_or_init(|| generate(&DemoConfig::new(300, 7, NOW), &mut |_, _, _| {}))
}

fn ms(t: OffsetDateTime) -> i64 {
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}

fn scale_of(d: &Decimal) -> i64 {
    d.0.as_bigint_and_exponent().1
}

fn int(n: i64) -> BigDecimal {
    BigDecimal::from(n)
}

fn d(s: &str) -> BigDecimal {
    s.parse().unwrap()
}

#[test]
fn same_seed_same_data_other_seed_other_data() {
    let mut cfg = DemoConfig::new(120, 99, NOW);
    cfg.history_days = 3;
    let mut stages = Vec::new();
    let a = generate(&cfg, &mut |stage, done, total| {
        stages.push((stage.to_owned(), done, total))
    });
    let b = generate(&cfg, &mut |_, _, _| {});
    assert!(a == b, "same seed must give the same data");
    // exact representations too, not only equal values
    assert_eq!(format!("{:?}", a.scan), format!("{:?}", b.scan));
    assert_eq!(
        serde_json::to_string(&a.history_days).unwrap(),
        serde_json::to_string(&b.history_days).unwrap()
    );
    assert_eq!(
        serde_json::to_string(&a.candles[0].candles).unwrap(),
        serde_json::to_string(&b.candles[0].candles).unwrap()
    );
    for stage in ["candles", "wallets", "history"] {
        assert!(
            stages
                .iter()
                .any(|(s, done, total)| s == stage && done == total),
            "{stage} end not reported"
        );
    }

    cfg.seed = 100;
    let c = generate(&cfg, &mut |_, _, _| {});
    assert!(a != c);
    assert_ne!(a.scan.quotes, c.scan.quotes);
    assert_ne!(a.scan.wallets[0].address, c.scan.wallets[0].address);
    assert_ne!(a.candles[0].candles, c.candles[0].candles);
}

#[test]
fn observed_at_is_now_in_whole_seconds() {
    let s = &data().scan;
    assert_eq!(s.observed_at, datetime!(2026-11-22 02:30:15 UTC));
    for w in &s.wallets {
        let lag = s.observed_at - w.observed_at;
        assert!(lag >= Duration::seconds(1) && lag <= Duration::minutes(10));
        assert_eq!(w.observed_at.nanosecond(), 0);
    }
}

#[test]
fn asset_universe() {
    let quotes = &data().scan.quotes;
    assert!(quotes.len() >= 150, "{}", quotes.len());
    let symbols: Vec<&str> = quotes.iter().map(|q| q.symbol.as_str()).collect();
    let mut sorted = symbols.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(symbols, sorted, "quotes sorted by symbol, unique");
    let hip3: Vec<&str> = symbols
        .iter()
        .copied()
        .filter(|s| s.contains(':'))
        .collect();
    assert!(
        hip3.iter().any(|s| s.starts_with("xyz:")) && hip3.iter().any(|s| s.starts_with("flx:"))
    );
    for h in &hip3 {
        assert!(!symbols.contains(&market_engine::symbols::canonical_of(h)));
    }
    for (sym, lo, hi) in [
        ("BTC", 70_000.0, 120_000.0),
        ("ETH", 2_000.0, 4_500.0),
        ("kPEPE", 0.005, 0.03),
    ] {
        let q = quotes.iter().find(|q| q.symbol == sym).unwrap();
        let p = num::to_f64(&q.price);
        assert!(p > lo && p < hi, "{sym} at {p}");
    }
}

#[test]
fn prices_use_the_exchange_grid() {
    let data = data();
    // szDecimals per asset, read off the positions' sizes
    let mut sz: BTreeMap<&str, i64> = BTreeMap::new();
    for p in &data.scan.positions {
        sz.insert(p.symbol.as_str(), scale_of(&p.size));
    }
    let check = |sym: &str, price: &Decimal| {
        let n = price.0.normalized();
        let (int, scale) = n.as_bigint_and_exponent();
        let digits = int.to_string().trim_start_matches('-').len() as i64;
        assert!(
            scale <= 0 || digits <= 5,
            "{sym}: {price} has more than 5 significant figures"
        );
        if let Some(s) = sz.get(sym) {
            assert!(
                scale <= 6 - s,
                "{sym}: {price} has more than {} decimals",
                6 - s
            );
        }
    };
    for q in &data.scan.quotes {
        check(&q.symbol, &q.price);
        assert!(scale_of(&q.funding) <= 8);
        assert_eq!(scale_of(&q.volume24h), 2);
        assert_eq!(scale_of(&q.open_interest), 2);
        assert!(q.open_interest.0 > BigDecimal::zero());
    }
    for p in &data.scan.positions {
        check(&p.symbol, &p.entry_price);
        if let Some(l) = &p.liq_price {
            check(&p.symbol, l);
        }
    }
    for set in data
        .candles
        .iter()
        .filter(|s| s.symbol == "BTC" || s.symbol == "kPEPE")
    {
        for c in &set.candles {
            for x in [&c.open, &c.high, &c.low, &c.close] {
                check(&set.symbol, x);
            }
        }
    }
}

#[test]
fn wallets_look_real() {
    let wallets = &data().scan.wallets;
    assert_eq!(wallets.len(), 300);
    let addresses: BTreeSet<&str> = wallets.iter().map(|w| w.address.as_str()).collect();
    assert_eq!(addresses.len(), 300);
    for w in wallets {
        assert_eq!(w.address.len(), 42);
        assert!(w.address.starts_with("0x"));
        assert!(w.address[2..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert_eq!(scale_of(&w.account_value), 2);
        assert!(w.account_value.0 > BigDecimal::zero());
        if let Some(a) = &w.analytics {
            assert!(a.win_rate.0 >= BigDecimal::zero() && a.win_rate.0 <= int(100));
            assert!(
                a.strategy_confidence.0 >= BigDecimal::zero() && a.strategy_confidence.0 <= int(1)
            );
            for x in [&a.net_pnl, &a.roi, &a.win_rate, &a.strategy_confidence] {
                assert_eq!(scale_of(x), 2);
            }
        }
        if !w.kols.is_empty() {
            assert!(w.kol_profile.is_some());
            assert!(w.tags.iter().any(|t| t == "kol"));
        }
        let mut tags = w.tags.clone();
        tags.dedup();
        assert_eq!(tags, w.tags);
    }
    let count =
        |f: &dyn Fn(&market_engine::WalletInput) -> bool| wallets.iter().filter(|w| f(w)).count();
    let labelled = count(&|w| w.label.is_some());
    let tagged = count(&|w| !w.tags.is_empty());
    let no_analytics = count(&|w| w.analytics.is_none());
    let big = count(&|w| w.account_value.0 >= int(100_000));
    let mid = count(&|w| w.account_value.0 >= int(1_000) && w.account_value.0 < int(100_000));
    assert!((8..=50).contains(&labelled), "{labelled} labelled");
    assert!((20..=80).contains(&tagged), "{tagged} tagged");
    assert!(
        (20..=90).contains(&no_analytics),
        "{no_analytics} without analytics"
    );
    assert!(big >= 10, "{big} wallets ≥ 100k");
    assert!(mid >= 180, "{mid} wallets in 1k–100k");
    assert!(wallets
        .iter()
        .filter_map(|w| w.analytics.as_ref())
        .any(|a| a.net_pnl.0 < BigDecimal::zero()));
}

#[test]
fn positions_are_consistent() {
    let scan = &data().scan;
    let prices: BTreeMap<&str, &Decimal> = scan
        .quotes
        .iter()
        .map(|q| (q.symbol.as_str(), &q.price))
        .collect();
    let wallets: BTreeMap<&str, &market_engine::WalletInput> = scan
        .wallets
        .iter()
        .map(|w| (w.address.as_str(), w))
        .collect();
    let mut per_wallet: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let (mut none, mut long) = (0, 0);
    let mut leverages = BTreeSet::new();
    for p in &scan.positions {
        assert!(
            per_wallet.entry(&p.address).or_default().insert(&p.symbol),
            "two positions in {}",
            p.symbol
        );
        assert!(p.label.is_none() && p.tags.is_empty());
        assert_eq!(p.size_unit, p.symbol);
        assert_eq!(p.mark_price, **prices.get(p.symbol.as_str()).unwrap());
        assert_eq!(p.observed_at, wallets[p.address.as_str()].observed_at);
        assert!(p.size.0 > BigDecimal::zero());
        let lev = &p.leverage.0;
        assert!(lev >= &int(1) && lev <= &int(50) && lev.is_integer());
        leverages.insert(p.leverage.to_string());
        // exact derived amounts
        let round2 = |x: BigDecimal| x.with_scale_round(2, RoundingMode::HalfUp);
        assert_eq!(p.position_value.0, round2(&p.size.0 * &p.mark_price.0));
        assert_eq!(p.margin.0, round2(&p.position_value.0 / lev));
        let sign = if p.direction == Direction::Long {
            int(1)
        } else {
            int(-1)
        };
        assert_eq!(
            p.u_pnl.0,
            round2(&p.size.0 * (&p.mark_price.0 - &p.entry_price.0) * &sign)
        );
        assert_eq!(p.u_pnl_pct.0, round2(&p.u_pnl.0 * int(100) / &p.margin.0));
        for x in [
            &p.position_value,
            &p.margin,
            &p.u_pnl,
            &p.u_pnl_pct,
            &p.funding_cost,
        ] {
            assert_eq!(scale_of(x), 2);
        }
        let deviation = ((&p.entry_price.0 - &p.mark_price.0) / &p.mark_price.0).abs();
        assert!(
            deviation <= d("0.1502"),
            "entry {} vs mark {}",
            p.entry_price,
            p.mark_price
        );
        match (&p.liq_price, p.direction) {
            (None, _) => none += 1,
            (Some(l), Direction::Long) => {
                assert!(
                    l.0 > BigDecimal::zero() && l.0 < p.entry_price.0 && l.0 < p.mark_price.0,
                    "{p:?}"
                );
            }
            (Some(l), Direction::Short) => {
                assert!(l.0 > p.entry_price.0 && l.0 > p.mark_price.0, "{p:?}");
            }
        }
        if p.direction == Direction::Long {
            long += 1;
        }
    }
    assert_eq!(
        per_wallet.len(),
        scan.wallets.len(),
        "every wallet holds a position"
    );
    assert!(per_wallet.values().all(|s| (1..=12).contains(&s.len())));
    let n = scan.positions.len();
    let mean = n as f64 / scan.wallets.len() as f64;
    assert!(
        (3.6..=4.3).contains(&mean),
        "{mean:.2} positions per wallet (the reference dataset has about 4)"
    );
    assert!(
        none > 0 && none < n / 3,
        "{none} of {n} without liquidation price"
    );
    assert!(
        long * 100 > n * 40 && long * 100 < n * 70,
        "{long} of {n} long"
    );
    assert!(leverages.len() >= 5, "{leverages:?}");
    let btc = scan.positions.iter().filter(|p| p.symbol == "BTC").count();
    let tail = scan
        .positions
        .iter()
        .filter(|p| p.symbol == "HMSTR")
        .count();
    assert!(btc > 30 && tail < btc / 5, "BTC {btc}, HMSTR {tail}");
}

#[test]
fn candles_are_aligned_and_consistent() {
    let data = data();
    let quotes: BTreeMap<&str, &Quote> = data
        .scan
        .quotes
        .iter()
        .map(|q| (q.symbol.as_str(), q))
        .collect();
    assert_eq!(data.candles.len(), 2 * quotes.len());
    let now = ms(NOW);
    for pair in data.candles.chunks(2) {
        let (h1, m1) = (&pair[0], &pair[1]);
        assert_eq!((h1.interval, m1.interval), (Interval::H1, Interval::M1));
        assert_eq!(h1.symbol, m1.symbol);
        assert_eq!(h1.candles.len(), 90 * 24);
        for (set, len) in [(h1, 3_600_000), (m1, 60_000)] {
            for (i, c) in set.candles.iter().enumerate() {
                assert_eq!(c.time % len, 0);
                assert_eq!(ms(c.open_time), c.time);
                assert!(c.low.0 <= c.open.0.clone().min(c.close.0.clone()));
                assert!(c.high.0 >= c.open.0.clone().max(c.close.0.clone()));
                assert!(c.low.0 > BigDecimal::zero());
                assert!(c.volume.0 >= BigDecimal::zero());
                assert_eq!(
                    c.trades == 0,
                    c.volume.0.is_zero(),
                    "{} {}",
                    set.symbol,
                    c.time
                );
                if i > 0 {
                    let prev = &set.candles[i - 1];
                    assert_eq!(c.time, prev.time + len);
                    assert_eq!(c.open, prev.close);
                }
            }
            let last = set.candles.last().unwrap();
            assert!(last.time <= now && now < last.time + len);
        }
        let hour_of_first_minute = m1.candles[0].time;
        assert_eq!(hour_of_first_minute, h1.candles[h1.candles.len() - 24].time);
        assert_eq!(
            rollup(&m1.candles, Interval::H1),
            h1.candles[h1.candles.len() - 24..].to_vec()
        );
        assert_eq!(m1.candles[0].open, h1.candles[h1.candles.len() - 25].close);

        let q = quotes[h1.symbol.as_str()];
        let n = h1.candles.len();
        assert_eq!(q.price, h1.candles[n - 1].close);
        assert_eq!(q.prev_day_price, h1.candles[n - 25].close);
        let mut vol = BigDecimal::zero();
        for c in &h1.candles[n - 24..] {
            vol += &c.volume.0 * &c.close.0;
        }
        assert_eq!(q.volume24h.0, vol.with_scale_round(2, RoundingMode::HalfUp));
    }
    let btc = &data
        .candles
        .iter()
        .find(|s| s.symbol == "BTC" && s.interval == Interval::H1)
        .unwrap()
        .candles;
    assert!(btc.iter().any(|c| c.open != c.close), "prices move");
}

#[test]
fn history_days_are_complete_and_consistent() {
    let data = data();
    let n_assets = data.scan.quotes.len();
    let days = &data.history_days;
    assert_eq!(days.len(), 89 * n_assets);
    let first = NOW.date() - Duration::days(89);
    let last = NOW.date() - Duration::days(1);
    assert_eq!(days[0].date, first);
    assert_eq!(days.last().unwrap().date, last);
    for w in days.windows(2) {
        assert!((w[0].date, &w[0].network_asset_symbol) < (w[1].date, &w[1].network_asset_symbol));
    }
    let mut with_levels = 0;
    for day in days {
        assert_eq!(day.coverage, Coverage::EndOfDay);
        assert_eq!(day.network, NETWORK);
        assert_eq!(
            day.updated_at,
            day.date.with_hms(23, 59, 59).unwrap().assume_utc()
        );
        assert_eq!(day.totals, totals_of(&day.levels));
        let size = &day.bucket_size.0;
        for w in day.levels.windows(2) {
            assert!(
                (w[0].side as u8, &w[0].bucket_price.0) < (w[1].side as u8, &w[1].bucket_price.0)
            );
        }
        for l in &day.levels {
            assert!(l.position_count >= 1);
            assert!(l.total_amount_usd.0 > BigDecimal::zero());
            assert!(l.min_liquidation_price.0 <= l.max_liquidation_price.0);
            assert!(l.min_liquidation_price.0 > BigDecimal::zero());
            assert_eq!(
                bucket_price(&l.min_liquidation_price.0, size),
                l.bucket_price.0,
                "{day:?}"
            );
            assert_eq!(
                bucket_price(&l.max_liquidation_price.0, size),
                l.bucket_price.0,
                "{day:?}"
            );
        }
        if !day.levels.is_empty() {
            with_levels += 1;
        }
    }
    assert!(
        with_levels > days.len() / 10,
        "{with_levels} days with levels"
    );
}

#[test]
fn materializes() {
    let data = data().clone();
    let m = market_engine::materialize(NETWORK, data.scan).expect("valid scan");
    assert_eq!(m.wallets.len(), 300);
    assert_eq!(m.markets.len(), m.current_days.len());
    assert!(m.wallets.iter().any(|w| w.label.is_some()));
    assert!(m
        .markets
        .iter()
        .any(|m| m.total_liquidation_value.0 > BigDecimal::zero()));
    let btc = m.markets.iter().find(|m| m.symbol == "BTC").unwrap();
    assert!(btc.long_count > 0 && btc.short_count > 0);
}

/// Timing and shape of a full-size dataset: `cargo test -p market-demo --release -- --ignored --nocapture`.
#[test]
#[ignore]
fn full_size_timing() {
    for wallets in [20_000, 100_000] {
        let t = std::time::Instant::now();
        let data = generate(&DemoConfig::new(wallets, 42, NOW), &mut |_, _, _| {});
        let elapsed = t.elapsed();
        let w = &data.scan.wallets;
        let share = |min: i64| {
            w.iter().filter(|x| x.account_value.0 >= int(min)).count() as f64 * 100.0
                / w.len() as f64
        };
        let pct = |f: &dyn Fn(&market_engine::WalletInput) -> bool| {
            w.iter().filter(|x| f(x)).count() as f64 * 100.0 / w.len() as f64
        };
        let levels: usize = data.history_days.iter().map(|d| d.levels.len()).sum();
        let candles: usize = data.candles.iter().map(|c| c.candles.len()).sum();
        eprintln!(
            "{wallets} wallets: generated in {elapsed:.2?}; {} positions, {} candles, {} history days with {levels} levels",
            data.scan.positions.len(),
            candles,
            data.history_days.len(),
        );
        eprintln!(
            "  accounts: {:.1}% ≥ 100k, {:.2}% ≥ 1M, {} ≥ 50M, {:.1}% in 1k–100k; labelled {:.1}%, tagged {:.1}%, kols {:.2}%, analytics {:.1}%",
            share(100_000),
            share(1_000_000),
            w.iter().filter(|x| x.account_value.0 >= int(50_000_000)).count(),
            share(1_000) - share(100_000),
            pct(&|x| x.label.is_some()),
            pct(&|x| !x.tags.is_empty()),
            pct(&|x| !x.kols.is_empty()),
            pct(&|x| x.analytics.is_some()),
        );
        let t = std::time::Instant::now();
        let m = market_engine::materialize(NETWORK, data.scan).unwrap();
        eprintln!("  materialized in {:.2?}", t.elapsed());
        let mut markets = m.markets.clone();
        markets.sort_by(|a, b| b.volume24h.0.cmp(&a.volume24h.0));
        for mk in markets.iter().take(5) {
            eprintln!(
                "  {} price {} chg {}% vol {} oi {} funding {} long {} short {} liq {}",
                mk.symbol,
                mk.price,
                mk.change24h_pct,
                mk.volume24h,
                mk.open_interest,
                mk.funding,
                mk.long_count,
                mk.short_count,
                mk.total_liquidation_value
            );
        }
    }
}

#[test]
fn history_events_lead_to_the_positions_and_stay_in_the_past() {
    let data = data().clone();
    let candles = data.candles.clone();
    let m = market_engine::materialize(NETWORK, data.scan).expect("valid scan");
    let h = crate::history(7, 3, &m, &candles);
    assert_eq!(
        h.events,
        crate::history(7, 3, &m, &candles).events,
        "deterministic"
    );
    let kinds: BTreeSet<_> = h.events.iter().map(|e| e.kind.as_str()).collect();
    for kind in ["opened", "increased", "reduced", "closed", "flipped"] {
        assert!(kinds.contains(kind), "{kind} in {kinds:?}");
    }
    // Replaying each wallet's events, oldest first, gives its positions.
    let mut held: BTreeMap<(&str, &str), (Direction, BigDecimal)> = BTreeMap::new();
    for e in &h.events {
        assert!(e.observed_at < m.observed_at);
        let key = (e.address.as_str(), e.symbol.as_str());
        let before = held.get(&key).map(|(d, s)| (*d, s.clone()));
        assert_eq!(
            before,
            e.previous_direction.map(|d| (d, e.previous_size.0.clone())),
            "{e:?}"
        );
        match e.direction {
            Some(d) => held.insert(key, (d, e.size.0.clone())),
            None => held.remove(&key),
        };
    }
    let now: BTreeMap<(&str, &str), (Direction, BigDecimal)> = m
        .positions
        .iter()
        .map(|p| {
            (
                (p.address.as_str(), p.symbol.as_str()),
                (p.direction, p.size.0.clone()),
            )
        })
        .collect();
    assert_eq!(held, now);
    // Every market has a point per completed hour of the window, all in the past.
    let btc: Vec<_> = h.markets.iter().filter(|(s, _)| s == "BTC").collect();
    assert!(btc.len() >= 3 * 24 - 1, "{}", btc.len());
    assert!(btc.iter().all(|(_, p)| p.observed_at < m.observed_at));
    assert!(h.wallets.iter().all(|(_, p)| p.observed_at < m.observed_at));
    // Written as the live data is: liquidation prices without trailing
    // zeros, and a side with nothing on it `0` (the engine's empty sum).
    let near: Vec<_> = h
        .events
        .iter()
        .filter_map(|e| e.previous_liq_price.as_ref())
        .collect();
    assert!(!near.is_empty());
    for liq in near {
        let s = liq.to_string();
        assert!(!s.contains('.') || !s.ends_with('0'), "{s}");
    }
    for (_, p) in &h.wallets {
        for v in [&p.long_value, &p.short_value] {
            assert_ne!(v.to_string(), "0.00");
        }
    }
}
