use clap::Parser;

/// The process's allocator on Linux with glibc (the default feature
/// `jemalloc`; without it, glibc's malloc): jemalloc, for every
/// allocation (SQLite's included, as its symbols are not prefixed). With
/// the options below a server read and applied 7,000 changed wallets in
/// 0.73–0.78× of glibc's time, and at an own node's scale `track` held
/// 0.94–0.95× of glibc's resident memory; a whole load peaked 7–9 % higher
/// (docs/performance.md, "The allocator: jemalloc") until it handed freed
/// memory back at once (`platform::HandBackAtOnce`).
#[cfg(all(feature = "jemalloc", target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before `main` runs: a background thread hands
/// pages freed a second ago back to the system (jemalloc's default waits
/// ten seconds, and only on a later allocation), so the resident size
/// follows what is live after a load or a publish, as glibc's explicit
/// trims did.
#[cfg(all(feature = "jemalloc", target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
// SAFETY: jemalloc defines `malloc_conf` (a `const char *`) weakly for the
// program to override, and `Option<&c_char>` has that pointer's layout. The
// reference is made from a C string literal's pointer: static, non-null,
// aligned and NUL-terminated.
#[export_name = "malloc_conf"]
static MALLOC_CONF: Option<&'static std::ffi::c_char> =
    Some(unsafe { &*c"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0".as_ptr() });

fn main() -> std::process::ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = market_data_server::cli::Cli::parse();
    match market_data_server::cli::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
