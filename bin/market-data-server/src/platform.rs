//! Platform tuning, in one place: the server's `unsafe` code besides the
//! allocator's options in `main.rs`. Each call is a libc function or a
//! jemalloc setting (`mallctl`) without preconditions on our memory, and
//! each is best effort (a failure costs speed, never correctness).
#![allow(unsafe_code)]

use std::time::Duration;

/// Lowers the calling thread's scheduling priority to `nice` (Linux: the
/// nice value is per thread and inherited by threads it starts). Best effort.
pub fn lower_thread_priority(nice: i32) {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority on the calling thread's id changes only its
    // scheduling weight.
    unsafe {
        let tid = libc::gettid();
        if libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) != 0 {
            log::warn!(
                "could not lower the reloader's priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}

/// CPU time of the whole process so far (user and system, from
/// `/proc/self/stat`, in clock ticks of 10 ms), where the system has it.
pub fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// While it is held, memory freed is handed back to the system at once
/// (jemalloc's `dirty_decay_ms` set to 0 in every arena, and as the default
/// of arenas made meanwhile); each arena's setting before is restored when
/// the last guard is dropped, and arenas made meanwhile get the default
/// before. For a start that loads a version whole: its transient parts
/// are freed while the version is built, and kept a second longer, as the
/// shipped setting keeps them (see `main.rs`), they raised the load's peak
/// resident memory by 0.1 to 0.3 GB at 1.18M positions
/// (docs/performance.md, "A whole load's peak"). The setting is the
/// process's: a thread that frees meanwhile hands the pages back itself,
/// which made a publish's apply 1.15–1.16× slower than glibc instead of
/// 0.73–0.78×, so it is not held while anything is served. Best effort,
/// and nothing where the binary allocates otherwise.
pub struct HandBackAtOnce(());

impl HandBackAtOnce {
    /// Hands freed memory back at once until the guard (and every other
    /// one) is dropped.
    pub fn new() -> HandBackAtOnce {
        #[cfg(all(feature = "jemalloc", target_os = "linux", target_env = "gnu"))]
        jemalloc::hold();
        HandBackAtOnce(())
    }
}

impl Default for HandBackAtOnce {
    fn default() -> Self {
        HandBackAtOnce::new()
    }
}

impl Drop for HandBackAtOnce {
    fn drop(&mut self) {
        #[cfg(all(feature = "jemalloc", target_os = "linux", target_env = "gnu"))]
        jemalloc::release();
    }
}

#[cfg(all(feature = "jemalloc", target_os = "linux", target_env = "gnu"))]
mod jemalloc {
    use std::sync::Mutex;

    use tikv_jemalloc_ctl::{arenas, raw};

    /// The guards held, and the settings they replaced: the default of
    /// new arenas and each arena's own (by index; `None` where an arena
    /// was not made yet, or refused).
    struct Held {
        guards: usize,
        default: Option<isize>,
        arenas: Vec<Option<isize>>,
    }

    static HELD: Mutex<Held> = Mutex::new(Held {
        guards: 0,
        default: None,
        arenas: Vec::new(),
    });

    fn held() -> std::sync::MutexGuard<'static, Held> {
        HELD.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn arena(i: u32) -> Vec<u8> {
        format!("arena.{i}.dirty_decay_ms\0").into_bytes()
    }

    // SAFETY (every call below): `arenas.dirty_decay_ms` and
    // `arena.<i>.dirty_decay_ms` are `ssize_t` (jemalloc's `mallctl`
    // names), which `isize` is, and the names are NUL-terminated.

    pub(super) fn hold() {
        let mut held = held();
        held.guards += 1;
        if held.guards > 1 {
            return;
        }
        held.default = match unsafe { raw::update(b"arenas.dirty_decay_ms\0", 0_isize) } {
            Ok(before) => Some(before),
            Err(e) => {
                log::debug!("jemalloc's dirty_decay_ms could not be set: {e}");
                None
            }
        };
        // An arena not made yet refuses; it takes the default set above.
        held.arenas = (0..arenas::narenas::read().unwrap_or(0))
            .map(|i| unsafe { raw::update(&arena(i), 0_isize) }.ok())
            .collect();
    }

    pub(super) fn release() {
        let mut held = held();
        held.guards -= 1;
        if held.guards > 0 {
            return;
        }
        let Some(default) = held.default.take() else {
            return;
        };
        let _ = unsafe { raw::write(b"arenas.dirty_decay_ms\0", default) };
        let before = std::mem::take(&mut held.arenas);
        for i in 0..arenas::narenas::read().unwrap_or(0) {
            let ms = before.get(i as usize).copied().flatten().unwrap_or(default);
            let _ = unsafe { raw::write(&arena(i), ms) };
        }
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::HandBackAtOnce;

    fn decay(name: &str) -> isize {
        let name = format!("{name}\0");
        // SAFETY: as in `jemalloc`.
        unsafe { tikv_jemalloc_ctl::raw::read::<isize>(name.as_bytes()) }.expect("jemalloc answers")
    }

    fn set(name: &str, ms: isize) {
        let name = format!("{name}\0");
        // SAFETY: as in `jemalloc`.
        unsafe { tikv_jemalloc_ctl::raw::write(name.as_bytes(), ms) }.expect("jemalloc answers")
    }

    /// (The only test of this binary that changes these settings: the
    /// others would read each other's.)
    #[test]
    fn freed_memory_goes_back_at_once_while_a_guard_is_held() {
        let default = decay("arenas.dirty_decay_ms");
        assert_ne!(default, 0, "jemalloc's default keeps freed pages a while");
        // An arena set apart from the default gets its own setting back.
        set("arena.0.dirty_decay_ms", 1234);
        {
            let _first = HandBackAtOnce::new();
            assert_eq!(decay("arenas.dirty_decay_ms"), 0);
            assert_eq!(decay("arena.0.dirty_decay_ms"), 0);
            {
                let _second = HandBackAtOnce::new();
            }
            // The other guard is still held.
            assert_eq!(decay("arenas.dirty_decay_ms"), 0);
            assert_eq!(decay("arena.0.dirty_decay_ms"), 0);
        }
        assert_eq!(decay("arenas.dirty_decay_ms"), default);
        assert_eq!(decay("arena.0.dirty_decay_ms"), 1234);
        set("arena.0.dirty_decay_ms", default);
    }
}
