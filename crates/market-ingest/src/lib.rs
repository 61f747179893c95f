#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod client;
pub mod limiter;
pub mod mapping;
pub mod scan;
pub mod source;
pub use scan::{
    parse_wallet_list, run_scan, run_scan_at, IngestCounters, ScanConfig, ScanError, ScanReport,
    WalletEntry, WalletProgress,
};
