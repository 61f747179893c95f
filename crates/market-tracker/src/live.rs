//! The book: the last observation of every wallet `track` has read, the
//! history behind its analytics, and which wallets changed since the last
//! publish. Reads go in; publishes take the changes out.

use std::collections::{BTreeSet, HashMap};

use market_engine::WalletInput;
use market_ingest::scan::{follow_positions, wallet_input_from, Observed};
use market_model::MarketPosition;
use market_store::{Store, StoreError, TrackedPosition, WalletScanState};

use crate::publish::Base;

/// What is known of one wallet's holdings.
#[derive(Clone, Debug)]
pub struct LiveWallet {
    /// The engine input that serves it (account value, analytics, label).
    pub input: WalletInput,
    /// Its open positions at that observation.
    pub positions: Vec<MarketPosition>,
}

/// The tracker's memory of every wallet it has read.
#[derive(Debug, Default)]
pub struct Book {
    pub(crate) wallets: HashMap<String, LiveWallet>,
    pub(crate) states: HashMap<String, WalletScanState>,
    pub(crate) tracked: HashMap<String, Vec<TrackedPosition>>,
    /// Wallets changed since the last publish.
    pub(crate) dirty: BTreeSet<String>,
}

impl Book {
    /// The book and publish base of the store's latest data version: a
    /// restart goes on from what was last published. A version written by
    /// another writer (`seed-demo`) is replaced by the first publish.
    pub fn restore(store: &Store) -> Result<(Book, Base), StoreError> {
        let mut book = Book::default();
        let mut base = Base::default();
        let Some(meta) = store.latest_snapshot()? else {
            return Ok((book, base));
        };
        let loaded = store.load_snapshot(&meta)?;
        base.version = meta.version;
        base.served = loaded.wallets.iter().map(|w| w.address.clone()).collect();
        base.symbols = loaded.markets.iter().map(|m| m.symbol.clone()).collect();
        base.days = loaded.current_days.clone();
        base.observed_at = Some(meta.observed_at);
        if meta.source == "track" || meta.source == "scan" {
            let mut positions: HashMap<String, Vec<MarketPosition>> = HashMap::new();
            for p in loaded.positions {
                positions.entry(p.address.clone()).or_default().push(p);
            }
            for w in &loaded.wallets {
                book.wallets.insert(
                    w.address.clone(),
                    LiveWallet {
                        input: wallet_input_from(w),
                        positions: positions.remove(&w.address).unwrap_or_default(),
                    },
                );
            }
            book.states = store.wallet_scan_states()?;
            book.tracked = store.tracked_positions()?;
        } else {
            log::warn!(
                "the served data version {} came from {:?}: its {} wallets are replaced by the first publish",
                meta.version,
                meta.source,
                loaded.wallets.len()
            );
        }
        Ok((book, base))
    }

    /// Applies a read of `address`: follows its positions (events and
    /// analytics), and keeps the observation for the next publish.
    pub fn apply_read(
        &mut self,
        address: &str,
        label: Option<String>,
        tags: Vec<String>,
        obs: Observed,
    ) {
        let (state, follow, analytics) = follow_positions(
            address,
            self.states.get(address),
            self.tracked.get(address),
            &obs,
        );
        self.states.insert(address.to_owned(), state);
        self.tracked.insert(address.to_owned(), follow);
        let previous = self.wallets.remove(address);
        let input = WalletInput {
            address: address.to_owned(),
            label,
            tags,
            kols: previous
                .as_ref()
                .map(|p| p.input.kols.clone())
                .unwrap_or_default(),
            kol_profile: previous.and_then(|p| p.input.kol_profile),
            account_value: obs.account_value,
            observed_at: obs.observed_at,
            analytics,
        };
        self.wallets.insert(
            address.to_owned(),
            LiveWallet {
                input,
                positions: obs.positions,
            },
        );
        self.dirty.insert(address.to_owned());
    }

    /// Wallets changed since the last publish.
    pub fn dirty_len(&self) -> usize {
        self.dirty.len()
    }
}
