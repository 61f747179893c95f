//! Helpers shared by the tests of the aggregation modules: the
//! `BigDecimal`-only reference the integer fast paths are checked against,
//! and a small deterministic generator.

/// The `BigDecimal`-only aggregation these fast paths must reproduce
/// exactly (the implementation before the integer paths), for comparison.
pub(super) mod reference {
    use std::collections::{BTreeMap, HashMap, HashSet};

    use bigdecimal::{BigDecimal, RoundingMode};
    use market_model::{
        Coverage, Decimal, Direction, Level, Market, MarketPosition, SizeClass, Wallet,
        WalletDirection,
    };

    use crate::aggregate::levels::side_key;
    use crate::aggregate::rules::zero;
    use crate::aggregate::{
        change_pct, liquidity_day, long_short_ratio, AggregateError, ScanInput,
    };
    use crate::buckets::bucket_size_for_price;
    use crate::version::DataVersion;

    fn bucket_price(liq: &BigDecimal, size: &BigDecimal) -> BigDecimal {
        let n = (liq / size).with_scale_round(0, RoundingMode::HalfUp);
        let (_, size_scale) = size.as_bigint_and_exponent();
        (n * size).with_scale(size_scale.max(0))
    }

    pub(in crate::aggregate) fn size_class(account_value: &BigDecimal) -> SizeClass {
        if account_value >= &BigDecimal::from(SizeClass::WHALE_MIN_USD) {
            SizeClass::Whale
        } else if account_value >= &BigDecimal::from(SizeClass::SHARK_MIN_USD) {
            SizeClass::Shark
        } else {
            SizeClass::Shrimp
        }
    }

    pub(in crate::aggregate) fn account_leverage(
        total: &BigDecimal,
        account: &BigDecimal,
    ) -> Decimal {
        if account <= &zero() {
            return Decimal(zero().with_scale(2));
        }
        Decimal((total / account).with_scale_round(2, RoundingMode::HalfUp))
    }

    pub(in crate::aggregate) fn liquidity_levels<'a>(
        bucket_size: &BigDecimal,
        positions: impl IntoIterator<Item = &'a MarketPosition>,
    ) -> Vec<Level> {
        let mut levels: BTreeMap<(u8, BigDecimal), Level> = BTreeMap::new();
        for p in positions {
            let Some(liq) = &p.liq_price else { continue };
            let bucket = bucket_price(liq, bucket_size);
            levels
                .entry((side_key(p.direction), bucket.clone()))
                .and_modify(|l| {
                    l.position_count += 1;
                    l.total_amount_usd = Decimal(&l.total_amount_usd.0 + &p.position_value.0);
                    if liq.0 < l.min_liquidation_price.0 {
                        l.min_liquidation_price = liq.clone();
                    }
                    if liq.0 > l.max_liquidation_price.0 {
                        l.max_liquidation_price = liq.clone();
                    }
                })
                .or_insert_with(|| Level {
                    side: p.direction,
                    bucket_price: Decimal(bucket),
                    position_count: 1,
                    total_amount_usd: p.position_value.clone(),
                    min_liquidation_price: liq.clone(),
                    max_liquidation_price: liq.clone(),
                });
        }
        levels.into_values().collect()
    }

    pub(in crate::aggregate) fn materialize(
        network: &str,
        input: ScanInput,
    ) -> Result<DataVersion, AggregateError> {
        let ScanInput {
            observed_at,
            mut quotes,
            mut wallets,
            mut positions,
        } = input;
        quotes.sort_by(|a, b| a.symbol.cmp(&b.symbol));
        wallets.sort_by(|a, b| a.address.cmp(&b.address));
        positions.sort_by(|a, b| (&a.symbol, &a.address).cmp(&(&b.symbol, &b.address)));
        for w in quotes.windows(2) {
            if w[0].symbol == w[1].symbol {
                return Err(AggregateError::DuplicateKey(w[0].symbol.clone()));
            }
        }
        for w in wallets.windows(2) {
            if w[0].address == w[1].address {
                return Err(AggregateError::DuplicateKey(w[0].address.clone()));
            }
        }
        let market_index: HashMap<&str, usize> = quotes
            .iter()
            .enumerate()
            .map(|(i, q)| (q.symbol.as_str(), i))
            .collect();
        let wallet_index: HashMap<&str, usize> = wallets
            .iter()
            .enumerate()
            .map(|(i, w)| (w.address.as_str(), i))
            .collect();
        let mut market_sides: Vec<[(u64, BigDecimal); 2]> =
            quotes.iter().map(|_| Default::default()).collect();
        let mut wallet_sides: Vec<(BigDecimal, BigDecimal, u32)> =
            wallets.iter().map(|_| (zero(), zero(), 0)).collect();
        let mut seen: HashSet<(&str, &str)> = HashSet::new();
        for p in &positions {
            let Some(&mi) = market_index.get(p.symbol.as_str()) else {
                return Err(AggregateError::UnknownAsset {
                    address: p.address.clone(),
                    symbol: p.symbol.clone(),
                });
            };
            let Some(&wi) = wallet_index.get(p.address.as_str()) else {
                return Err(AggregateError::UnknownWallet {
                    address: p.address.clone(),
                    symbol: p.symbol.clone(),
                });
            };
            if !seen.insert((p.address.as_str(), p.symbol.as_str())) {
                return Err(AggregateError::DuplicatePosition {
                    address: p.address.clone(),
                    symbol: p.symbol.clone(),
                });
            }
            let acc = &mut market_sides[mi][usize::from(side_key(p.direction))];
            acc.0 += 1;
            if p.liq_price.is_some() {
                acc.1 += &p.position_value.0;
            }
            let w = &mut wallet_sides[wi];
            match p.direction {
                Direction::Long => w.0 += &p.position_value.0,
                Direction::Short => w.1 += &p.position_value.0,
            }
            w.2 += 1;
        }
        drop(seen);
        for p in &mut positions {
            let w = &wallets[wallet_index[p.address.as_str()]];
            p.label = w.label.clone();
            p.tags = w.tags.clone();
        }
        let markets: Vec<Market> = quotes
            .iter()
            .zip(&market_sides)
            .map(|(q, [long, short])| Market {
                symbol: q.symbol.clone(),
                price: q.price.clone(),
                change24h_pct: change_pct(&q.price, &q.prev_day_price),
                volume24h: q.volume24h.clone(),
                open_interest: q.open_interest.clone(),
                funding: q.funding.clone(),
                long_count: long.0,
                short_count: short.0,
                long_short_ratio: long_short_ratio(long.0, short.0),
                total_liquidation_value: Decimal(&long.1 + &short.1),
                long_liquidation_value: Decimal(long.1.clone()),
                short_liquidation_value: Decimal(short.1.clone()),
            })
            .collect();
        let wallets: Vec<Wallet> = wallets
            .into_iter()
            .zip(wallet_sides)
            .map(|(w, (long, short, count))| {
                let total = &long + &short;
                let direction = match long.cmp(&short) {
                    std::cmp::Ordering::Greater => WalletDirection::Long,
                    std::cmp::Ordering::Less => WalletDirection::Short,
                    std::cmp::Ordering::Equal => WalletDirection::Neutral,
                };
                let a = w.analytics;
                Wallet {
                    size_class: size_class(&w.account_value),
                    leverage: account_leverage(&total, &w.account_value),
                    address: w.address,
                    label: w.label,
                    tags: w.tags,
                    kols: w.kols,
                    kol_profile: w.kol_profile,
                    direction,
                    account_total_value: w.account_value,
                    total_position_value: Decimal(total),
                    long_value: Decimal(long),
                    short_value: Decimal(short),
                    positions: count,
                    observed_at: w.observed_at,
                    net_pnl: a.as_ref().map(|a| a.net_pnl.clone()),
                    roi: a.as_ref().map(|a| a.roi.clone()),
                    win_rate: a.as_ref().map(|a| a.win_rate.clone()),
                    strategy: a.as_ref().map(|a| a.strategy),
                    strategy_confidence: a.map(|a| a.strategy_confidence),
                }
            })
            .collect();
        let mut current_days = Vec::new();
        let mut start = 0;
        for m in &markets {
            let end = start + positions[start..].partition_point(|p| p.symbol == m.symbol);
            let size = bucket_size_for_price(&m.price);
            let levels = liquidity_levels(&size, &positions[start..end]);
            current_days.push(liquidity_day(
                observed_at.date(),
                network,
                &m.symbol,
                Coverage::Current,
                size,
                observed_at,
                levels,
            ));
            start = end;
        }
        let cohorts = crate::cohorts::cohorts(observed_at, &markets, &wallets, &positions);
        Ok(DataVersion {
            observed_at,
            markets,
            wallets,
            positions,
            current_days,
            cohorts,
            freshness: None,
        })
    }
}

/// A small deterministic generator (no dependency on a random crate).
pub(super) struct Lcg(pub(super) u64);

impl Lcg {
    pub(super) fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }

    pub(super) fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }

    pub(super) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}
