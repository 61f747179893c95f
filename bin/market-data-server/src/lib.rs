#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod access_log;
pub mod app;
pub mod cli;
pub mod error;
pub mod explore;
pub mod export;
pub mod http;
pub mod metrics;
pub mod middleware;
pub mod openapi;
pub mod platform;
pub mod ratelimit;
pub mod request_id;
pub mod routes;
pub mod seed;
pub mod shared_quota;
pub mod state;
pub mod tokens;
