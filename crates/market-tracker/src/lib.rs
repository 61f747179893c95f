#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod account;
pub mod address;
pub mod discovery;
pub mod followed;
pub mod held;
pub mod kept;
pub mod live;
pub mod publish;
pub mod registry;
pub mod schedule;
pub mod tracker;
pub mod ws;

pub use live::{Applied, Base, Book, History, NotApplied};
pub use publish::{HeldBack, PublishError, PublishInput, Published, Publisher};
pub use schedule::{Discovery, Intervals, Schedule, Tier, TierFreshness};
pub use tracker::{Stats, TrackConfig, TrackError, Tracker};
