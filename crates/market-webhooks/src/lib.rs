#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod deliverer;
pub mod schedule;
pub mod signature;
pub mod target;
pub mod transport;

use std::sync::Arc;
use std::time::Duration;

pub use deliverer::{Clock, Deliverer, Options, Stats, SystemClock};
pub use signature::Secret;
pub use target::{TargetError, TargetPolicy};
pub use transport::{Answer, HttpTransport, Message, Transport};

/// A deliverer running on a thread of its own.
pub struct DeliveryHandle {
    deliverer: Arc<Deliverer<HttpTransport>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DeliveryHandle {
    /// Counters since start.
    pub fn stats(&self) -> Arc<Stats> {
        self.deliverer.stats.clone()
    }

    /// Stops claiming, lets the attempts in flight finish (each takes at
    /// most the 10 s timeout), releases the claims, and waits up to
    /// `timeout` for all that.
    pub fn stop(mut self, timeout: Duration) {
        self.deliverer.stop();
        let Some(thread) = self.thread.take() else {
            return;
        };
        let deadline = std::time::Instant::now() + timeout;
        while !thread.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if thread.is_finished() {
            let _ = thread.join();
        } else {
            log::warn!("webhooks: deliveries still in flight at stop; their claims expire and they are sent again");
        }
    }
}

/// Starts delivering `store`'s outbox on a thread (`webhook-delivery`) with
/// a runtime of its own.
pub fn spawn(
    store: market_store::Store,
    policy: TargetPolicy,
    options: Options,
) -> Result<DeliveryHandle, SpawnError> {
    let transport = HttpTransport::new(policy)?;
    let deliverer = Arc::new(Deliverer::new(
        store,
        transport,
        SystemClock,
        options,
        rand::random(),
    ));
    let runner = deliverer.clone();
    let thread = std::thread::Builder::new()
        .name("webhook-delivery".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread runtime starts");
            runtime.block_on(runner.run());
        })?;
    Ok(DeliveryHandle {
        deliverer,
        thread: Some(thread),
    })
}

/// Errors of [`spawn`].
mod spawn_error {
    /// Starting the deliverer failed.
    #[derive(Debug, thiserror::Error)]
    pub enum SpawnError {
        /// The HTTP client could not be built.
        #[error("building the webhook HTTP client: {0}")]
        Client(#[from] reqwest::Error),
        /// The thread could not be started.
        #[error("starting the webhook-delivery thread: {0}")]
        Thread(#[from] std::io::Error),
    }
}
pub use spawn_error::SpawnError;
