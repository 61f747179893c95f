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
