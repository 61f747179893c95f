//! The inputs of the aggregation (quotes, wallets and their analytics, one
//! scan) and the error for input that violates the aggregation contract.

use market_model::{Decimal, Kol, KolProfile, MarketPosition, Strategy};
use time::OffsetDateTime;

/// Exchange quote context of one asset, as read from the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quote {
    /// Network symbol (`BTC`, `xyz:TSLA`).
    pub symbol: String,
    /// Mark price, USD.
    pub price: Decimal,
    /// Price 24 hours ago, USD (used for `change24hPct`).
    pub prev_day_price: Decimal,
    /// 24-hour notional volume, USD.
    pub volume24h: Decimal,
    /// Open interest in USD.
    pub open_interest: Decimal,
    /// Hourly funding rate.
    pub funding: Decimal,
}

/// Wallet analytics computed from its history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Analytics {
    /// Net PnL, USD.
    pub net_pnl: Decimal,
    /// ROI, percent.
    pub roi: Decimal,
    /// Win rate, percent.
    pub win_rate: Decimal,
    /// Trading style.
    pub strategy: Strategy,
    /// Confidence in the style, 0..=1.
    pub strategy_confidence: Decimal,
}

/// One scanned wallet before aggregation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalletInput {
    /// Lowercase hex address.
    pub address: String,
    /// Public label.
    pub label: Option<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// Linked KOL identities.
    pub kols: Vec<Kol>,
    /// KOL profile.
    pub kol_profile: Option<KolProfile>,
    /// Account equity over every dex, USD.
    pub account_value: Decimal,
    /// When it was observed.
    pub observed_at: OffsetDateTime,
    /// Analytics, when there is enough history.
    pub analytics: Option<Analytics>,
}

/// Everything one scan observed.
#[derive(Clone, Debug)]
pub struct ScanInput {
    /// When the scan was taken; its UTC date is the `current` liquidity day.
    pub observed_at: OffsetDateTime,
    /// Quote context of every tracked asset.
    pub quotes: Vec<Quote>,
    /// Every scanned wallet.
    pub wallets: Vec<WalletInput>,
    /// Every open position (label and tags are filled from the wallet).
    pub positions: Vec<MarketPosition>,
}

/// Input that violates the aggregation contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AggregateError {
    /// A position refers to an asset without a quote.
    #[error("position of {address} refers to unknown asset {symbol}")]
    UnknownAsset {
        /// Wallet.
        address: String,
        /// Asset.
        symbol: String,
    },
    /// A position refers to a wallet that was not scanned.
    #[error("position in {symbol} refers to unknown wallet {address}")]
    UnknownWallet {
        /// Wallet.
        address: String,
        /// Asset.
        symbol: String,
    },
    /// A wallet holds two positions in one asset.
    #[error("wallet {address} holds more than one position in {symbol}")]
    DuplicatePosition {
        /// Wallet.
        address: String,
        /// Asset.
        symbol: String,
    },
    /// Two quotes or two wallets share a key.
    #[error("duplicate key {0}")]
    DuplicateKey(String),
}
