//! Test helpers shared by the unit tests of several parts: a sample
//! version with many tied BTC positions, materialized and built.

use market_engine::fixtures::{position, sample, wallet};
use market_engine::{materialize, DataVersion};
use market_model::Direction;

use super::Snapshot;

fn input() -> market_engine::ScanInput {
    let mut input = sample();
    // many BTC positions with ties on value to exercise the tie-breaker
    for i in 0..40 {
        let addr = format!("0x1{i:02}");
        input.wallets.push(wallet(
            &addr,
            &format!("{}", 1000 + (i % 7) * 100_000),
            i % 3 == 0,
        ));
        let dir = if i % 2 == 0 {
            Direction::Long
        } else {
            Direction::Short
        };
        input.positions.push(position(
            &addr,
            "BTC",
            dir,
            &format!("{}", 100 + (i % 5)),
            None,
        ));
    }
    input
}

pub(super) fn snapshot() -> (Snapshot, DataVersion) {
    let m = materialize("perpnet", input()).unwrap();
    (Snapshot::build(3, m.clone()), m)
}
