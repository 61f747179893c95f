//! Building a Prometheus registry's metrics, and writing it out: what both
//! sets of metrics share.

use prometheus::{
    Encoder, Gauge, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Request latency buckets, in seconds: a snapshot answer takes well under
/// a millisecond, a cold history page tens of milliseconds, a pool wait 2 s.
pub(super) const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

pub(super) fn counter_vec(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once");
    c
}

pub(super) fn counter(registry: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("a valid metric");
    registry
        .register(Box::new(c.clone()))
        .expect("registered once");
    c
}

pub(super) fn gauge_vec(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("a valid metric");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

pub(super) fn int_gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("a valid metric");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

pub(super) fn gauge(registry: &Registry, name: &str, help: &str) -> Gauge {
    let g = Gauge::new(name, help).expect("a valid metric");
    registry
        .register(Box::new(g.clone()))
        .expect("registered once");
    g
}

/// Brings a Prometheus counter up to a total kept elsewhere (totals only grow).
pub(super) fn sync_counter(counter: &IntCounter, total: u64) {
    let current = counter.get();
    if total > current {
        counter.inc_by(total - current);
    }
}

pub(super) fn encode(registry: &Registry) -> String {
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut out)
        .expect("encoding into memory does not fail");
    String::from_utf8(out).expect("the text format is UTF-8")
}

pub(super) fn unix_now() -> f64 {
    time::OffsetDateTime::now_utc().unix_timestamp_nanos() as f64 / 1e9
}
