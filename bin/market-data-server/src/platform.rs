//! Platform tuning, in one place: the only `unsafe` code of the server.
//! Each call is a libc function without preconditions on our memory, and
//! each is best effort (a failure costs speed or memory, never correctness).
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

/// Keeps the resident size near the served data under load (glibc only).
///
/// - A fixed mmap threshold of 128 KiB: large response buffers (a
///   liquidity page is over 1 MB, and actix-web copies bodies into each
///   connection's write buffer) are mapped and unmapped instead of staying
///   in the heap. glibc's default threshold rises to the largest block
///   freed, after which such blocks stay resident: about 70 MB more at
///   100k wallets after a load test.
///
/// Called after the first load: with this threshold the load's growing
/// buffers are mapped afresh at each growth, which made start-up about
/// 1 s slower. Measured in docs/performance.md ("Memory").
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters (under glibc's own
    // lock); it touches no allocation.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
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

/// Hands the heap pages freed by a reload back to the OS. The loaded rows
/// and the model structs (several hundred MB at 100k wallets) are freed by
/// then, but glibc keeps freed small-object pages in its arenas, which would
/// leave the resident size at the loading peak.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it has
    // no preconditions and touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Hands the heap pages freed by each publish of `track` back to the OS:
/// a thread watches `publishes` (the count of publishes written) every
/// second and trims the heap after each, until `stop`. A publish frees the
/// rows it wrote and the reads it published; glibc would keep those pages
/// in its arenas, and `track`'s resident size would stay at its largest
/// publish. Measured in docs/ingest.md ("Reads that change nothing").
pub fn trim_after_each_publish(
    publishes: impl Fn() -> u64 + Send + 'static,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("heap-trim".into())
        .spawn(move || {
            let mut seen = publishes();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_secs(1));
                let now = publishes();
                if now != seen {
                    seen = now;
                    release_free_memory();
                }
            }
        })
        .map(drop)
}
