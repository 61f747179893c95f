//! Platform tuning, in one place: the server's `unsafe` code besides the
//! allocator's options in `main.rs`. Each call is a libc function without
//! preconditions on our memory, and each is best effort (a failure costs
//! speed, never correctness).
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
/// of arenas made meanwhile); the setting before is restored when it is
/// dropped. For a whole load: its transient parts are freed while the
/// version is built, and kept a second longer, as the shipped setting
/// keeps them (see `main.rs`), they raised the load's peak resident memory
/// by 0.1 to 0.3 GB at 1.18M positions (docs/performance.md, "A whole
/// load's peak"). Publishes keep the shipped setting, which makes their
/// apply faster. Best effort, and nothing where the binary allocates
/// otherwise.
pub struct HandBackAtOnce {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    previous: Option<isize>,
}

impl HandBackAtOnce {
    /// Hands freed memory back at once until the guard is dropped.
    pub fn new() -> HandBackAtOnce {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            let previous = jemalloc::set_dirty_decay(0);
            HandBackAtOnce { previous }
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        HandBackAtOnce {}
    }
}

impl Default for HandBackAtOnce {
    fn default() -> Self {
        HandBackAtOnce::new()
    }
}

impl Drop for HandBackAtOnce {
    fn drop(&mut self) {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        if let Some(ms) = self.previous {
            jemalloc::set_dirty_decay(ms);
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod jemalloc {
    use tikv_jemalloc_ctl::{arenas, raw};

    /// Sets `dirty_decay_ms` of every arena and the default of new ones;
    /// returns the default before, or `None` when jemalloc refused.
    pub(super) fn set_dirty_decay(ms: isize) -> Option<isize> {
        // SAFETY: both settings are `ssize_t` (jemalloc's `mallctl` names),
        // which `isize` is, and the names are NUL-terminated.
        let previous = unsafe { raw::update(b"arenas.dirty_decay_ms\0", ms) };
        let previous = match previous {
            Ok(previous) => previous,
            Err(e) => {
                log::debug!("jemalloc's dirty_decay_ms could not be set: {e}");
                return None;
            }
        };
        for i in 0..arenas::narenas::read().unwrap_or(0) {
            let name = format!("arena.{i}.dirty_decay_ms\0");
            // An arena not made yet refuses; it takes the default set above.
            // SAFETY: as above.
            let _ = unsafe { raw::write(name.as_bytes(), ms) };
        }
        Some(previous)
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::HandBackAtOnce;

    fn decay(name: &[u8]) -> isize {
        // SAFETY: as in `jemalloc::set_dirty_decay`.
        unsafe { tikv_jemalloc_ctl::raw::read::<isize>(name) }.expect("jemalloc answers")
    }

    #[test]
    fn freed_memory_goes_back_at_once_while_the_guard_is_held() {
        let before = decay(b"arenas.dirty_decay_ms\0");
        assert_ne!(before, 0, "jemalloc's default keeps freed pages a while");
        {
            let _at_once = HandBackAtOnce::new();
            assert_eq!(decay(b"arenas.dirty_decay_ms\0"), 0);
            assert_eq!(decay(b"arena.0.dirty_decay_ms\0"), 0);
        }
        assert_eq!(decay(b"arenas.dirty_decay_ms\0"), before);
        assert_eq!(decay(b"arena.0.dirty_decay_ms\0"), before);
    }
}
