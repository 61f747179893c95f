//! One publish: the book's changes since the previous data version, written
//! as a new version in one transaction.

use std::collections::HashSet;
use std::sync::Mutex;

use bigdecimal::{BigDecimal, Zero};
use market_engine::coverage::network_coverage;
use market_engine::{materialize, Quote, ScanInput};
use market_model::{
    Candle, Coverage, Interval, LiquidityDay, MarketPosition, WalletFreshness, NETWORK_ID,
};
use market_store::{CandleBatch, PublishWrite, RegistryEntry, Store, TrackedPosition};
use market_store::WalletScanState;
use time::OffsetDateTime;

use crate::live::Book;

/// What the previous publish wrote: the base the next one's changes are
/// computed against.
#[derive(Clone, Debug, Default)]
pub struct Base {
    /// Its data version (0 before the first).
    pub version: i64,
    /// The wallets it served.
    pub served: HashSet<String>,
    /// The markets it served.
    pub symbols: HashSet<String>,
    /// Its `current` liquidity days (frozen by the first publish of a new UTC day).
    pub days: Vec<LiquidityDay>,
    /// When it was observed.
    pub observed_at: Option<OffsetDateTime>,
}

/// What a publish needs besides the book.
#[derive(Debug)]
pub struct PublishInput {
    /// The publish time.
    pub now: OffsetDateTime,
    /// Quotes of every market.
    pub quotes: Vec<Quote>,
    /// Hourly candles fetched since the previous publish, by symbol.
    pub candles: Vec<(String, Vec<Candle>)>,
    /// Registry entries to save with the version.
    pub registry: Vec<RegistryEntry>,
    /// Freshness of every tracked wallet.
    pub freshness: WalletFreshness,
}

/// A publish that wrote nothing: why, and the inputs it gives back to be
/// written by a later one.
#[derive(Debug)]
pub struct PublishError {
    /// The cause.
    pub cause: String,
    /// The candles it did not write.
    pub candles: Vec<(String, Vec<Candle>)>,
    /// The registry entries it did not save.
    pub registry: Vec<RegistryEntry>,
}

/// What one publish wrote: its version and counts (for the log).
#[derive(Clone, Copy, Debug)]
pub struct Published {
    /// The new data version.
    pub version: i64,
    /// Wallets written.
    pub changed: usize,
    /// Wallets no longer served.
    pub removed: usize,
    /// Wallets served.
    pub wallets: usize,
    /// Positions served.
    pub positions: usize,
}

/// Writes the book's changes as a new data version on top of `base`; on
/// success `base` becomes the new version.
pub fn publish(
    store: &Store,
    book: &Mutex<Book>,
    base: &mut Base,
    input: PublishInput,
) -> Result<Published, PublishError> {
    let PublishInput {
        now,
        quotes,
        candles,
        registry,
        freshness,
    } = input;
    let fail = |cause: String, candles, registry| PublishError {
        cause,
        candles,
        registry,
    };
    let symbols: HashSet<String> = quotes.iter().map(|q| q.symbol.clone()).collect();
    let (inputs, positions, dirty, states, tracked) = {
        let mut live = book.lock().unwrap_or_else(|p| p.into_inner());
        // Wallets holding an asset that is gone must be rewritten without it.
        let vanished: HashSet<&String> = base.symbols.difference(&symbols).collect();
        if !vanished.is_empty() {
            let hit: Vec<String> = live
                .wallets
                .values()
                .filter(|w| w.positions.iter().any(|x| vanished.contains(&x.symbol)))
                .map(|w| w.input.address.clone())
                .collect();
            live.dirty.extend(hit);
        }
        let mut inputs = Vec::new();
        let mut positions = Vec::new();
        for w in live.wallets.values() {
            let held: Vec<&MarketPosition> = w
                .positions
                .iter()
                .filter(|x| symbols.contains(&x.symbol))
                .collect();
            // Empty wallets stay in the registry but are not served.
            if held.is_empty() && w.input.account_value.0 <= BigDecimal::zero() {
                continue;
            }
            inputs.push(w.input.clone());
            positions.extend(held.into_iter().cloned());
        }
        let dirty = std::mem::take(&mut live.dirty);
        let states: Vec<WalletScanState> = dirty
            .iter()
            .filter_map(|a| live.states.get(a).cloned())
            .collect();
        let tracked: Vec<TrackedPosition> = dirty
            .iter()
            .flat_map(|a| live.tracked.get(a).into_iter().flatten().cloned())
            .collect();
        (inputs, positions, dirty, states, tracked)
    };
    let restore = |dirty| {
        book.lock()
            .unwrap_or_else(|p| p.into_inner())
            .dirty
            .extend(dirty)
    };
    let materialized = match materialize(
        NETWORK_ID,
        ScanInput {
            observed_at: now,
            quotes,
            wallets: inputs,
            positions,
        },
    ) {
        Ok(m) => m,
        Err(e) => {
            restore(dirty);
            return Err(fail(format!("aggregation failed: {e}"), candles, registry));
        }
    };
    let served: HashSet<String> = materialized
        .wallets
        .iter()
        .map(|w| w.address.clone())
        .collect();
    let changed_wallets: Vec<_> = materialized
        .wallets
        .iter()
        .filter(|w| dirty.contains(&w.address) || !base.served.contains(&w.address))
        .cloned()
        .collect();
    let changed: HashSet<&str> = changed_wallets.iter().map(|w| w.address.as_str()).collect();
    let changed_positions: Vec<_> = materialized
        .positions
        .iter()
        .filter(|x| changed.contains(x.address.as_str()))
        .cloned()
        .collect();
    let removed: Vec<String> = base.served.difference(&served).cloned().collect();
    // The first publish of a new UTC day freezes the previous day's levels.
    let frozen: Vec<LiquidityDay> = match base.observed_at {
        Some(t) if t.date() < now.date() => base
            .days
            .iter()
            .cloned()
            .map(|mut d| {
                d.coverage = Coverage::EndOfDay;
                d
            })
            .collect(),
        _ => Vec::new(),
    };
    let batches: Vec<CandleBatch<'_>> = candles
        .iter()
        .map(|(s, c)| CandleBatch {
            symbol: s,
            interval: Interval::H1,
            candles: c,
        })
        .collect();
    let coverage = network_coverage(
        now,
        &materialized.markets,
        &materialized.positions,
        freshness.clone(),
    );
    let result = store.publish(
        &PublishWrite {
            source: "track",
            observed_at: now,
            markets: &materialized.markets,
            cohorts: &materialized.cohorts,
            current_days: &materialized.current_days,
            wallet_count: materialized.wallets.len(),
            position_count: materialized.positions.len(),
            changed_wallets: &changed_wallets,
            changed_positions: &changed_positions,
            removed_wallets: &removed,
            frozen_days: &frozen,
            candles: &batches,
            wallet_states: &states,
            tracked: &tracked,
            registry: &registry,
            freshness: &freshness,
            coverage: &coverage,
        },
        &mut |_, _, _| {},
    );
    drop(batches);
    match result {
        Ok(version) => {
            let counts = Published {
                version,
                changed: changed_wallets.len(),
                removed: removed.len(),
                wallets: materialized.wallets.len(),
                positions: materialized.positions.len(),
            };
            *base = Base {
                version,
                served,
                symbols,
                days: materialized.current_days,
                observed_at: Some(now),
            };
            Ok(counts)
        }
        Err(e) => {
            restore(dirty);
            Err(fail(format!("database: {e}"), candles, registry))
        }
    }
}
