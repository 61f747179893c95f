//! The served version saved beside the database, so that the next start
//! serves it at once instead of reading and rendering every position again:
//! written after a version is loaded whole, every [`SAVE_EVERY`] while new
//! versions come, sooner once the wallets changed since the last save reach
//! [`CATCH_UP_SHARE`] of those served (at most every [`SAVE_GAP`]), and
//! when the server stops; read at start when it was
//! saved from this database by this build, then brought up to the newest
//! version with the changes stored since (from the closed rows while the
//! saved version is stored, from the wallets it served once it is pruned).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use market_snapshot::{SavedError, Snapshot};
use market_store::{Store, StoreError};

use super::reload;

/// Where a server saves its version, the database it names as the
/// version's origin, and the lock that keeps two saves of one process from
/// writing at once.
#[derive(Debug)]
pub struct SavedServing {
    path: PathBuf,
    origin: String,
    /// Held while a save writes.
    saves: Mutex<Saves>,
    /// Wallets changed or removed by the versions applied since the
    /// version the last save wrote (a wallet changed twice counts twice,
    /// and a failed save gives its count back): what a start from the file
    /// would catch up with, at most. Apart from `saves`, so that the
    /// reloader never waits for a save.
    changed: AtomicUsize,
}

#[derive(Debug)]
struct Saves {
    /// When the last save began (or the server started).
    began: Instant,
    /// The version the file holds, when this server knows it.
    holds: Option<i64>,
}

/// How often a server saves the version it serves while new versions keep
/// coming (besides after a whole load and at a stop): a start after a crash
/// then catches up with at most this much of changes.
pub const SAVE_EVERY: Duration = Duration::from_secs(600);

/// The share of the served wallets (one in this many) that, once changed
/// since the last save, makes the next save due before [`SAVE_EVERY`]. A
/// start from the file catches up with what changed since at about 50 µs a
/// wallet: at 300,000 wallets these 7,500 take under half a second (of
/// the 2 s a start may take), where ten minutes of an own node's changes
/// (a few hundred thousand) made a start a whole load. It was one in 20
/// while a save took 2.9 s of CPU at that size; written in blocks it
/// takes 1.1 s (docs/performance.md), so saving twice as often costs less
/// than before. Where more than that changes in a minute, [`SAVE_GAP`]
/// sets the bound instead: a minute's changes and what changes while a
/// save writes. Where few wallets change (the public limit), saves stay
/// [`SAVE_EVERY`] apart.
pub const CATCH_UP_SHARE: usize = 40;

/// The least time between two saves, whatever changed: what bounds the
/// disk's writes (a file the size of what is served, 588 MB at 1.18M
/// positions) where most wallets change every few minutes.
pub const SAVE_GAP: Duration = Duration::from_secs(60);

impl SavedServing {
    /// Saves to and starts from `path`; `store` names the origin.
    pub fn new(path: PathBuf, store: &Store) -> Result<SavedServing, StoreError> {
        Ok(SavedServing {
            path,
            origin: format!("database {}", store.identity()?),
            // The file was written at the last stop or whole load.
            saves: Mutex::new(Saves {
                began: Instant::now(),
                holds: None,
            }),
            changed: AtomicUsize::new(0),
        })
    }

    /// The saved version brought up to the newest version of `store`, when
    /// the file is one this build saved from this database and it can be
    /// brought up without a whole load; `None`, with the reason logged,
    /// otherwise.
    pub fn start(&self, store: &Store) -> Result<Option<Snapshot>, StoreError> {
        let started = Instant::now();
        let path = self.path.display();
        let Some(latest) = store.latest_snapshot()? else {
            return Ok(None);
        };
        let saved = match Snapshot::saved_version(&self.path) {
            Ok(saved) => saved,
            Err(SavedError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                log::info!("no saved version at {path}: loading from the database");
                return Ok(None);
            }
            Err(e) => {
                log::warn!("not starting from {path}: {e}; loading from the database");
                return Ok(None);
            }
        };
        // The version still stored must be the one saved; one pruned since
        // is caught up with from the wallets it served.
        let stored = store.stored_version(saved.version)?;
        let same = saved.origin == self.origin
            && saved.version <= latest.version
            && stored.as_ref().is_none_or(|(meta, wallets, positions)| {
                meta.observed_at == saved.observed_at
                    && (*wallets, *positions) == (saved.wallets, saved.positions)
            });
        if !same {
            log::info!(
                "the version saved at {path} (version {}, {}) is not one of this database: loading from the database",
                saved.version,
                saved.origin
            );
            return Ok(None);
        }
        let snapshot = match Snapshot::load_saved(&self.path) {
            Ok(snapshot) => snapshot,
            Err(e) => {
                log::warn!("not starting from {path}: {e}; loading from the database");
                return Ok(None);
            }
        };
        log::info!(
            "read data version {} from {path} in {} ms",
            snapshot.version,
            started.elapsed().as_millis()
        );
        if snapshot.version == latest.version {
            self.lock().holds = Some(snapshot.version);
            return Ok(Some(snapshot));
        }
        let next = if stored.is_some() {
            reload::changed_snapshot(store, &snapshot, &latest)?
        } else {
            reload::caught_up_snapshot(store, &snapshot, &latest)?
        };
        drop(snapshot);
        let Some((next, counts)) = next else {
            log::info!(
                "the changes since the saved version {} cannot be applied: loading version {} whole",
                saved.version,
                latest.version
            );
            return Ok(None);
        };
        // What the writer counted in the newest version: a check of the
        // changes read without the closed rows of a pruned version.
        let (positions, wallets) = next.counts();
        let counted = store
            .stored_version(latest.version)?
            .map(|(_, wallets, positions)| (wallets, positions));
        if counted != Some((wallets as u64, positions as u64)) {
            log::warn!(
                "the saved version {} brought up to version {} serves {wallets} wallets and {positions} positions, not the {counted:?} stored: loading it whole",
                saved.version,
                latest.version
            );
            return Ok(None);
        }
        log::info!(
            "applied {} changed and {} removed wallets to the saved version {}: ready in {} ms",
            counts.changed,
            counts.removed,
            saved.version,
            started.elapsed().as_millis()
        );
        Ok(Some(next))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Saves> {
        self.saves.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Saves `snapshot` (whole or not at all) unless the file holds it
    /// already, logging the outcome.
    pub fn save(&self, snapshot: &Snapshot) {
        let counted = self.changed.swap(0, Ordering::Relaxed);
        self.save_counted(snapshot, counted);
    }

    /// [`SavedServing::save`] of a version whose changes since the last
    /// save, `counted`, were taken from the count when the save was
    /// decided: they count again if it fails.
    fn save_counted(&self, snapshot: &Snapshot, counted: usize) {
        let mut saves = self.lock();
        if saves.holds == Some(snapshot.version) {
            log::debug!(
                "{} holds data version {} already",
                self.path.display(),
                snapshot.version
            );
            return;
        }
        let started = Instant::now();
        saves.began = started;
        saves.holds = None;
        match snapshot.save(&self.path, &self.origin) {
            Ok(bytes) => {
                saves.holds = Some(snapshot.version);
                log::info!(
                    "saved data version {} to {} ({} MB) in {} ms",
                    snapshot.version,
                    self.path.display(),
                    bytes >> 20,
                    started.elapsed().as_millis()
                )
            }
            Err(e) => {
                self.applied(counted);
                log::warn!(
                    "could not save data version {} to {}: {e}",
                    snapshot.version,
                    self.path.display()
                )
            }
        }
    }

    /// Counts `wallets` changed or removed by a version applied to the
    /// served one.
    pub fn applied(&self, wallets: usize) {
        self.changed.fetch_add(wallets, Ordering::Relaxed);
    }

    /// Whether a save is due for a version serving `served` wallets (and
    /// none is running): the last one began [`SAVE_EVERY`] ago or more, or
    /// [`SAVE_GAP`] ago or more and the wallets changed since reach one in
    /// [`CATCH_UP_SHARE`] of those served.
    pub fn due(&self, served: usize) -> bool {
        self.saves.try_lock().is_ok_and(|saves| {
            save_due(
                saves.began.elapsed(),
                self.changed.load(Ordering::Relaxed),
                served,
            )
        })
    }

    /// [`SavedServing::save`] on a thread of its own, at a low priority.
    pub fn save_in_background<S>(self: &Arc<Self>, snapshot: Arc<S>)
    where
        S: std::ops::Deref<Target = Snapshot> + Send + Sync + 'static,
    {
        // Taken here, on the reloader's thread: changes of versions applied
        // while the saver starts count toward the next save.
        let counted = self.changed.swap(0, Ordering::Relaxed);
        let saved = self.clone();
        let spawned = std::thread::Builder::new()
            .name("snapshot-saver".into())
            .spawn(move || {
                crate::platform::lower_thread_priority(reload::RELOADER_NICE);
                saved.save_counted(&snapshot, counted);
            });
        if let Err(e) = spawned {
            self.applied(counted);
            log::warn!("could not start saving the served version: {e}");
        }
    }
}

/// [`SavedServing::due`] for a save that began `since` ago, `changed`
/// wallets changed since, and `served` wallets served.
fn save_due(since: Duration, changed: usize, served: usize) -> bool {
    since >= SAVE_EVERY || (since >= SAVE_GAP && changed >= (served / CATCH_UP_SHARE).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A save that fails gives back the changes it had taken from the
    /// count, so the next one is still due; one that succeeds does not.
    #[test]
    fn a_failed_save_counts_its_changes_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(
            dir.path().join("m.db").to_str().unwrap(),
            market_store::PoolOptions::default(),
        )
        .unwrap();
        store.migrate().unwrap();
        let snapshot = super::super::empty_snapshot();
        // A directory that does not exist: the save fails.
        let failing = SavedServing::new(dir.path().join("no/such/dir/m.served"), &store).unwrap();
        failing.applied(40);
        failing.save(&snapshot);
        assert_eq!(failing.changed.load(Ordering::Relaxed), 40);
        let saving = SavedServing::new(dir.path().join("m.served"), &store).unwrap();
        saving.applied(40);
        saving.save(&snapshot);
        assert_eq!(saving.changed.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_save_is_due_by_time_or_by_what_changed_since() {
        let minute = Duration::from_secs(60);
        // Ten minutes after the last save, whatever changed.
        assert!(save_due(SAVE_EVERY, 0, 300_000));
        assert!(!save_due(SAVE_EVERY - minute, 0, 300_000));
        // One in forty of the served wallets changed: due after a minute.
        assert!(save_due(SAVE_GAP, 7_500, 300_000));
        assert!(!save_due(SAVE_GAP, 7_499, 300_000));
        // Never sooner than a minute, however much changed.
        assert!(!save_due(
            SAVE_GAP - Duration::from_millis(1),
            300_000,
            300_000
        ));
        // A version that serves a handful: any change counts.
        assert!(save_due(SAVE_GAP, 1, 3));
        assert!(!save_due(SAVE_GAP, 0, 3));
    }
}
