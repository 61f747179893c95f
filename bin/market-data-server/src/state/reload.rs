//! Following the database: a thread that serves each new data version,
//! applied as changes or loaded whole, woken by PostgreSQL's notice of a
//! commit or by its poll.

use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use market_engine::VersionChanges;
use market_model::LiquidityDayText;
use market_snapshot::{RenderedPosition, Snapshot};
use market_store::{SnapshotMeta, Store, StoreError};

use super::AppState;
use crate::platform::{lower_thread_priority, process_cpu, HandBackAtOnce};

/// How often a server checks the database for a new data version (a cheap
/// query): on SQLite, the only way to learn of one; on PostgreSQL, besides
/// the commit's notification.
pub const RELOAD_INTERVAL: Duration = Duration::from_millis(250);
/// How long the reloader waits after a failed reload before it tries again.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);
/// How long a reload waits for in-flight requests to release the previous
/// data version before it logs; the version is freed whenever its last
/// holder lets go, on the reaper thread either way.
const RETIRE_WAIT: Duration = Duration::from_secs(10);
/// Nice value of the reloader thread (and the threads it starts): loading
/// and rendering a new version yields the CPU to the HTTP workers.
pub(super) const RELOADER_NICE: i32 = 10;

/// A served data version. Whoever lets go of it last (the reloader, or a
/// response still being written to a slow client), its snapshot is freed on
/// the reaper thread, never on an HTTP worker: freeing a few hundred MB there
/// would stall the requests queued behind it.
pub struct Served {
    /// Taken only by `drop`.
    snapshot: Option<Snapshot>,
    serial: u64,
    retire: Sender<(u64, Snapshot)>,
}

impl Deref for Served {
    type Target = Snapshot;

    fn deref(&self) -> &Snapshot {
        self.snapshot
            .as_ref()
            .expect("a served snapshot is taken only on drop")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(snapshot) = self.snapshot.take() {
            // Fails only when the reaper is gone (the process is ending);
            // the snapshot is then freed here.
            let _ = self.retire.send((self.serial, snapshot));
        }
    }
}

/// The thread that frees retired versions, and what it has freed.
pub(super) struct Reaper {
    retire: Sender<(u64, Snapshot)>,
    next_serial: AtomicU64,
    freed: Arc<(Mutex<u64>, Condvar)>,
}

impl Reaper {
    /// Starts the reaper thread; it ends when the last [`Served`] is freed.
    pub(super) fn start() -> Reaper {
        let (retire, retired) = std::sync::mpsc::channel();
        let freed = Arc::new((Mutex::new(0), Condvar::new()));
        let shared = freed.clone();
        std::thread::Builder::new()
            .name("snapshot-reaper".into())
            .spawn(move || reap(retired, &shared))
            .expect("spawning a thread");
        Reaper {
            retire,
            next_serial: AtomicU64::new(1),
            freed,
        }
    }

    /// `snapshot`, to be served.
    pub(super) fn serve(&self, snapshot: Snapshot) -> Served {
        Served {
            snapshot: Some(snapshot),
            serial: self.next_serial.fetch_add(1, Ordering::Relaxed),
            retire: self.retire.clone(),
        }
    }

    /// Waits up to `timeout` for the version `serial` to be freed; whether it was.
    fn wait_freed(&self, serial: u64, timeout: Duration) -> bool {
        let (freed, cond) = &*self.freed;
        let freed = freed.lock().expect("the reaper lock is never poisoned");
        let (freed, _) = cond
            .wait_timeout_while(freed, timeout, |freed| *freed < serial)
            .expect("the reaper lock is never poisoned");
        *freed >= serial
    }
}

/// Frees retired versions as they come, and records the newest serial freed
/// (versions are served in serial order, so it only grows past the ones
/// still held).
fn reap(retired: Receiver<(u64, Snapshot)>, freed: &(Mutex<u64>, Condvar)) {
    lower_thread_priority(RELOADER_NICE);
    for (serial, snapshot) in retired {
        drop(snapshot);
        let (max, cond) = freed;
        let mut max = max.lock().expect("the reaper lock is never poisoned");
        *max = (*max).max(serial);
        cond.notify_all();
    }
}

/// How many wallets a version applied as changes rewrote and removed.
#[derive(Clone, Copy, Debug)]
pub struct AppliedCounts {
    /// Wallets written since the served version.
    pub changed: usize,
    /// Wallets no longer served.
    pub removed: usize,
}

/// `current` with the changes up to `meta` applied, when the store can read
/// them as changes (publishes of `track` since `current`'s version, none of
/// them pruned); `None` when the version must be loaded whole.
pub fn changed_snapshot(
    store: &Store,
    current: &Snapshot,
    meta: &SnapshotMeta,
) -> Result<Option<(Snapshot, AppliedCounts)>, StoreError> {
    // A change of more than half the wallets (a scan, a re-seed) is
    // cheaper to load whole than to merge.
    // Positions are rendered from their stored text as they are read, as
    // for a whole load.
    let Some(c) = store.load_changes_for_serving(
        current.version,
        meta,
        current.wallet_count() / 2 + 1000,
        RenderedPosition::from_text,
    )?
    else {
        return Ok(None);
    };
    Ok(Some(applied(current, meta, c)))
}

/// [`changed_snapshot`] from a version that may have been pruned from the
/// store since (a saved version): the wallets it served tell which were
/// removed.
pub fn caught_up_snapshot(
    store: &Store,
    current: &Snapshot,
    meta: &SnapshotMeta,
) -> Result<Option<(Snapshot, AppliedCounts)>, StoreError> {
    let served: Vec<&str> = current.wallet_addresses().collect();
    let Some(c) = store.load_changes_since_served(
        current.version,
        &served,
        meta,
        current.wallet_count() / 2 + 1000,
        RenderedPosition::from_text,
    )?
    else {
        return Ok(None);
    };
    drop(served);
    Ok(Some(applied(current, meta, c)))
}

/// `current` with `c` applied, and what it changed.
fn applied(
    current: &Snapshot,
    meta: &SnapshotMeta,
    c: VersionChanges<RenderedPosition, LiquidityDayText>,
) -> (Snapshot, AppliedCounts) {
    let counts = AppliedCounts {
        changed: c.wallets.len(),
        removed: c.removed.len(),
    };
    (current.apply_rendered(meta.version, c), counts)
}

/// The data version `meta` loaded whole.
pub fn whole_snapshot(store: &Store, meta: &SnapshotMeta) -> Result<Snapshot, StoreError> {
    // Positions are rendered from their stored text as they are read (no
    // decimal is parsed and printed again).
    let loaded = store.load_for_serving(meta, RenderedPosition::from_text)?;
    Ok(Snapshot::build_rendered(meta.version, loaded.version))
}

impl AppState {
    /// Serves the newest data version if it differs from the served one:
    /// applies its changes to the served snapshot when the store can read
    /// them as changes (a publish of `track`), else loads it whole.
    /// Returns whether the snapshot changed.
    pub fn reload(&self) -> Result<bool, StoreError> {
        let Some(meta) = self.store.latest_snapshot()? else {
            return Ok(false);
        };
        let current = self.snapshot.load_full();
        if meta.version == current.version {
            return Ok(false);
        }
        let started = Instant::now();
        let cpu = process_cpu();
        let changes = if current.version > 0 {
            changed_snapshot(&self.store, &current, &meta)?
        } else {
            None
        };
        let read_ms = started.elapsed().as_millis();
        let whole = changes.is_none();
        self.reloads[usize::from(whole)].fetch_add(1, Ordering::Relaxed);
        let (snapshot, how) = match changes {
            Some((next, c)) => {
                if let Some(saved) = &self.saved {
                    saved.applied(c.changed + c.removed);
                }
                let how = format!(
                    "applied {} changed and {} removed wallets to version {}",
                    c.changed, c.removed, current.version
                );
                (next, how)
            }
            None => {
                // Nothing served yet (a start): the load's transient memory
                // is handed back as it is freed (see `HandBackAtOnce`).
                let _at_once = (current.version == 0).then(HandBackAtOnce::new);
                (
                    whole_snapshot(&self.store, &meta)?,
                    "loaded whole".to_owned(),
                )
            }
        };
        drop(current);
        let (positions, wallets) = snapshot.counts();
        let assets = snapshot.asset_count();
        let previous = self.snapshot.swap(Arc::new(self.reaper.serve(snapshot)));
        let ready_ms = started.elapsed().as_millis();
        self.last_load_ms.store(ready_ms as u64, Ordering::Relaxed);
        // Open event streams get the events stored since the last push and
        // the markets that changed.
        if let Err(e) = self
            .stream
            .publish(&self.store, &previous, &self.snapshot.load())
        {
            log::warn!(
                "could not push data version {} to the event streams: {e}",
                meta.version
            );
        }
        let retiring = previous.serial;
        drop(previous);
        self.pages.evict_before(meta.version);
        // In-flight requests (and responses still being written) may hold
        // the previous version; waiting for it keeps its cost in the CPU
        // figure logged below.
        let waited = Instant::now();
        let freed = self.reaper.wait_freed(retiring, RETIRE_WAIT);
        let freed_ms = waited.elapsed().as_millis();
        // The next start serves this version at once (and applies the
        // changes since).
        if let Some(saved) = self.saved.as_ref().filter(|s| whole || s.due(wallets)) {
            saved.save_in_background(self.snapshot.load_full());
        }
        // Everything the new version cost, freeing the old one included
        // (and whatever the workers served meanwhile).
        let cpu_ms = process_cpu().zip(cpu).map(|(b, a)| (b - a).as_millis());
        if freed {
            log::debug!("the previous version was freed {freed_ms} ms after the swap");
        } else {
            log::debug!("the previous version is still held after {freed_ms} ms; it is freed when its last response is written");
        }
        log::info!(
            "serving data version {} ({assets} markets, {positions} positions, {wallets} wallets): {how}; read in {read_ms} ms, ready in {ready_ms} ms, process CPU {} ms",
            meta.version,
            cpu_ms.map_or("?".to_owned(), |ms| ms.to_string()),
        );
        Ok(true)
    }

    /// Serves new data versions forever (runs on its own thread): at once
    /// when PostgreSQL notifies one (a listener thread wakes the reloader),
    /// and by polling every [`RELOAD_INTERVAL`] either way.
    pub fn spawn_reloader(self: &Arc<Self>) {
        let (wake, woken) = std::sync::mpsc::channel::<()>();
        let state = Arc::downgrade(self);
        spawn_listener(&self.store, state.clone(), wake);
        std::thread::Builder::new()
            .name("snapshot-reloader".into())
            .spawn(move || {
                lower_thread_priority(RELOADER_NICE);
                loop {
                    match woken.recv_timeout(RELOAD_INTERVAL) {
                        // Several notices meanwhile are one reload.
                        Ok(()) => while woken.try_recv().is_ok() {},
                        Err(RecvTimeoutError::Timeout) => {}
                        // No listener (SQLite): poll.
                        Err(RecvTimeoutError::Disconnected) => std::thread::sleep(RELOAD_INTERVAL),
                    }
                    let Some(state) = state.upgrade() else { return };
                    // While the database is down the probe watches it; the
                    // served version stays, and no warning a second.
                    if !state.db.is_up() {
                        continue;
                    }
                    match state.reload() {
                        Err(e) if e.is_unavailable() => state.db.mark_down(&e.to_string()),
                        // Two publishes committed between the look at the
                        // newest version and its read: the next turn reads
                        // the newest.
                        Err(e @ StoreError::Pruned(_)) => log::debug!("{e}"),
                        Err(e) => {
                            log::warn!("could not reload the data version: {e}");
                            std::thread::sleep(RETRY_AFTER_FAILURE);
                        }
                        Ok(_) => {}
                    }
                }
            })
            .expect("spawning a thread");
    }
}

/// On PostgreSQL, a thread that listens for new data versions and wakes the
/// reloader; it reconnects after an error, and ends with the server state.
fn spawn_listener(store: &Store, state: Weak<AppState>, wake: Sender<()>) {
    if store.kind() != market_store::BackendKind::Postgres {
        return;
    }
    let store = store.clone();
    std::thread::Builder::new()
        .name("version-listener".into())
        .spawn(move || loop {
            if state.strong_count() == 0 {
                return;
            }
            let mut listener = match store.listen_for_versions() {
                Ok(Some(listener)) => listener,
                Ok(None) => return,
                Err(e) => {
                    log::debug!("cannot listen for new data versions ({e}); polling meanwhile");
                    std::thread::sleep(RETRY_AFTER_FAILURE);
                    continue;
                }
            };
            loop {
                match listener.wait(RETRY_AFTER_FAILURE) {
                    Ok(Some(_)) => {
                        if wake.send(()).is_err() {
                            return;
                        }
                    }
                    Ok(None) if state.strong_count() == 0 => return,
                    Ok(None) => {}
                    Err(e) => {
                        log::debug!(
                            "the data-version listener lost its connection ({e}); reconnecting"
                        );
                        break;
                    }
                }
            }
        })
        .expect("spawning a thread");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_is_freed_when_its_last_holder_lets_go() {
        let reaper = Reaper::start();
        let first = Arc::new(reaper.serve(super::super::empty_snapshot()));
        let serial = first.serial;
        // An in-flight response still holds it after the reloader let go.
        let response = first.clone();
        drop(first);
        assert!(!reaper.wait_freed(serial, Duration::from_millis(50)));
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(response);
        });
        assert!(reaper.wait_freed(serial, Duration::from_secs(10)));
        writer.join().unwrap();
        // Serials grow, so a later version is not taken as freed.
        let second = reaper.serve(super::super::empty_snapshot());
        assert!(second.serial > serial);
        assert!(!reaper.wait_freed(second.serial, Duration::from_millis(10)));
    }
}
